#!/usr/bin/env bash
# Install what the tests need into .venv and run the whole default test suite (README command 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh test
# Two cores: threads x processes must stay at or below 2. The suite runs in RAGSENSE_TEST_WORKERS
# pytest-xdist processes (2 by default) of one torch thread each; most tests are Python-bound, so two
# one-thread processes finish it in about half the time of one two-thread process (docs/testing.md).
# Modules stay whole on one worker (--dist loadscope): their model and cluster fixtures load once.
workers="${RAGSENSE_TEST_WORKERS:-2}"
if [ "$workers" -gt 1 ]; then
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
  parallel=(-n "$workers" --dist loadscope)
else
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
  parallel=()
fi
.venv/bin/ruff check src tests benchmarks papers
.venv/bin/ruff format --check src tests benchmarks papers
.venv/bin/mypy
# The report's style and script files (src/ragsense/report/assets); tests/report lints the joined script.
if [ -x node_modules/.bin/biome ]; then
  node_modules/.bin/biome lint --error-on-warnings src/ragsense/report/assets
else
  echo "test.sh: Biome not installed (npm ci); the report's front-end lint is skipped" >&2
fi
if [ "$workers" -gt 1 ]; then
  .venv/bin/python -m pytest --doctest-modules src/ragsense tests "${parallel[@]}" -m "not slow and not serial" "$@"
  # The tests that hold a wall-clock bound run alone, in one process of two threads.
  OMP_NUM_THREADS=2 .venv/bin/python -m pytest tests -m "serial and not slow" "$@" || [ $? -eq 5 ]  # 5: none selected
else
  .venv/bin/python -m pytest --doctest-modules src/ragsense tests "$@"
fi
# DeepEval's integration in a venv of its own (its click pin conflicts with transformers 5).
bash scripts/deepeval_check.sh
