#!/usr/bin/env bash
# Install what the tests need into .venv and run the whole default test suite (README command 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh test
# Two cores: threads x processes must stay at or below 2 (tests run in one process).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
.venv/bin/ruff check src tests benchmarks papers
.venv/bin/ruff format --check src tests benchmarks papers
.venv/bin/mypy
# The report's style and script files (src/ragsense/report/assets); tests/report lints the joined script.
if [ -x node_modules/.bin/biome ]; then
  node_modules/.bin/biome lint --error-on-warnings src/ragsense/report/assets
else
  echo "test.sh: Biome not installed (npm ci); the report's front-end lint is skipped" >&2
fi
.venv/bin/python -m pytest --doctest-modules src/ragsense tests "$@"
# DeepEval's integration in a venv of its own (its click pin conflicts with transformers 5).
bash scripts/deepeval_check.sh
