#!/usr/bin/env bash
# The kinship accuracy runs behind docs/results.md ("Accuracy by k"), on CPU.
#
# Current runs (hybrid retrieval, default stop strings ANSWER_STOPS, answer = first non-empty line):
# 6 names per list is the paper's store size ("12 names": 12 people). k stops at 80: the experimental
# stores hold 104 to 108 documents, so k=120 is refused (the paper's table has no k=120 row either).
# --max-queries 12 asks every question of the five relations (4 to 12 each) and 12 of the 104 control
# questions (seed 0). FULL=1 asks every control question too (about 700 answers; roughly 45 CPU-minutes
# for SmolLM2 on one thread, 2.5 times that for Gemma).
#
# LEGACY=1 reproduces the older 12- and 24-name runs, made with dense retrieval and answers cut at the
# first newline (the defaults of that time).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
threads="${THREADS:-1}"
rel=grandfather,grandmother,sibling,uncle,aunt
models="${MODELS:-smollm2-135m gemma3-270m}"
if [ "${LEGACY:-0}" = 1 ]; then
  for model in $models; do
    queries=12
    [ "$model" = gemma3-270m ] && queries=6  # Gemma is about 2.5 times slower per answer
    for names in 12 24; do
      .venv/bin/ragsense bench kinship --names "$names" --generations 3 --k 5,15,30,45,80,120 \
        --relations "$rel" --max-queries "$queries" --model "$model" --retrieval dense --stop '\n' \
        --threads "$threads" --out "docs/results/kinship/${model}-${names}names" "$@"
    done
  done
  exit 0
fi
sample=(--max-queries 12)
suffix=""
if [ "${FULL:-0}" = 1 ]; then sample=(); suffix="-all"; fi
for model in $models; do
  .venv/bin/ragsense bench kinship --names 6 --generations 3 --k 5,15,30,45,80 --relations "$rel" \
    "${sample[@]}" --model "$model" --threads "$threads" \
    --out "docs/results/kinship/${model}-6names${suffix}" "$@"
done
.venv/bin/python -m papers.kinship.kinship_ci_tables docs/results/kinship/*-6names"${suffix}"
