#!/usr/bin/env bash
# The DeepEval integration's tests, in a venv of their own (.venv-deepeval): DeepEval pins click<8.4,
# which transformers 5 cannot have (huggingface-hub>=1.31 needs click>=8.4.2), so it cannot share .venv.
# This venv holds ragsense's core and DeepEval only (no torch): the tests score with the fake model;
# the DeepEval test on the bundled model (marked `model`) runs where both fit (docs/integrations.md).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-deepeval
.venv-deepeval/bin/python -m pip install --quiet --upgrade pip
.venv-deepeval/bin/pip install --quiet -e ".[deepeval]" "pytest>=8"
.venv-deepeval/bin/python -m pytest -p no:cacheprovider -m "not slow and not model" tests/integrations/test_deepeval.py "$@"
