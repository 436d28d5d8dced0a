#!/usr/bin/env bash
# Install what the tests need into .venv and run the whole default test suite (README command 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh test
# Two cores: threads x processes must stay at or below 2 (tests run in one process).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
.venv/bin/python -m pytest --doctest-modules src/ragsense tests "$@"
