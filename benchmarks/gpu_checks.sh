#!/usr/bin/env bash
# The GPU checks of docs/speed.md ("On a GPU"): the distractor benchmark on the transformers backend in
# bfloat16 and float32, and bench_vllm's throughput against the raw forward pass. Run from the repo root on
# a machine with one CUDA GPU, where `python3 -m ragsense` imports and the bundled SmolLM2 loads:
#
#     OUT=gpu-results bash benchmarks/gpu_checks.sh
#
# Writes under $OUT: gpu.txt (card, driver, torch and transformers versions), bench_vllm-*.json and
# bench_vllm-profile.txt (with cuDNN attention allowed and not), one folder per dtype and set
# (bfloat16-halueval, ...) with the experiment's figures (consens-distractors.json), per-item files and
# log, and halueval-100-bfloat16/ (the 100 HaluEval report pairs at k = 0 and 20). Compare them with the
# CPU float32 runs: python -m papers.consens.distractor_agreement $OUT/bfloat16-halueval. Each step has its own time
# limit (STEP_S seconds), so one slow step leaves the others' results. DEVICE=cpu LIMIT=1 KS=0,5 runs the
# same steps on a CPU (a check of the script, not a measurement).
set -u
out=${OUT:-gpu-results}
device=${DEVICE:-cuda}
limit=${LIMIT:-25}
ks=${KS:-0,5,10,20,40}
step_s=${STEP_S:-240}
mkdir -p "$out"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__)"
} > "$out/gpu.txt"

distractors() {  # distractors DTYPE FOLDER [more experiment options]
    local dtype=$1 folder=$2 started
    shift 2
    mkdir -p "$out/$folder"
    started=$(date +%s)
    timeout "$step_s" python3 -m ragsense experiment consens-distractors --device "$device" --dtype "$dtype" \
        --context-budget 128 --windows-ks '' "$@" --out "$out/$folder" \
        > "$out/$folder/consens-distractors.json" 2> "$out/$folder/log.txt"
    echo "consens-distractors $folder: rc=$? in $(( $(date +%s) - started )) s"
}

# In order of importance, so a run cut short keeps the first results.
started=$(date +%s)
timeout "$step_s" python3 -m benchmarks.bench_vllm --backends transformers --device "$device" --dtype bfloat16 \
    --items "$(( limit * 2 ))" --compare-cudnn --profile "$out/bench_vllm-profile.txt" \
    --out "$out/bench_vllm-transformers-bfloat16.json" > /dev/null 2> "$out/bench_vllm.log"
echo "bench_vllm transformers bfloat16: rc=$? in $(( $(date +%s) - started )) s"

for dtype in bfloat16 float32; do
    for set in halueval wikieval; do
        distractors "$dtype" "$dtype-$set" --sets "$set" --limit "$limit" --ks "$ks"
    done
done
distractors bfloat16 halueval-100-bfloat16 --sets halueval --limit "$(( limit * 4 ))" --ks 0,20 --full-ks 0
