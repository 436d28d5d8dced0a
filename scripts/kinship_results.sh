#!/usr/bin/env bash
# The kinship accuracy runs behind docs/results.md (CPU, 2 threads; about 70 minutes in all on 2 cores).
# They were made with dense retrieval (MiniLM alone) and answers cut at the first newline, the defaults
# of the time; the CLI defaults are now hybrid retrieval and ANSWER_STOPS (docs/results.md says why).
set -euo pipefail
cd "$(dirname "$0")/.."
ks=5,15,30,45,80,120
rel=grandfather,grandmother,sibling,uncle,aunt
models="${MODELS:-smollm2-135m gemma3-270m}"
for model in $models; do
  queries=12
  [ "$model" = gemma3-270m ] && queries=6  # Gemma is about 2.5 times slower per answer
  for names in 12 24; do
    .venv/bin/ragsense bench kinship --names "$names" --generations 3 --k "$ks" --relations "$rel" \
      --max-queries "$queries" --model "$model" --retrieval dense --stop '\n' --threads 2 \
      --out "docs/results/kinship/${model}-${names}names" "$@"
  done
done
