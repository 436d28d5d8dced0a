#!/usr/bin/env bash
# The kinship runs behind docs/results.md (CPU, 2 threads; about 70 minutes in all on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ks=5,15,30,45,80,120
rel=grandfather,grandmother,sibling,uncle,aunt
for names in 12 24; do
  .venv/bin/ragsense bench kinship --names "$names" --generations 3 --k "$ks" --relations "$rel" \
    --max-queries 12 --model smollm2-135m --threads 2 --out "docs/results/kinship/smollm2-135m-${names}names" "$@"
done
for names in 12 24; do
  .venv/bin/ragsense bench kinship --names "$names" --generations 3 --k "$ks" --relations "$rel" \
    --max-queries 6 --model gemma3-270m --threads 2 --out "docs/results/kinship/gemma3-270m-${names}names" "$@"
done
