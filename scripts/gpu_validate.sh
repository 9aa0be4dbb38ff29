#!/usr/bin/env bash
# Validation run of taxbreak on one GPU (sized for ~8 minutes of an H200).
#
#   scripts/gpu_validate.sh OUT_DIR
#
# Stages (each with its own timeout; a failed stage is recorded and the script goes on):
#   floor       taxbreak floor --json                       -> OUT_DIR/floor.json
#   llama       taxbreak profile llama-3.2-1b  (BS 4, SL 2048, 10 new tokens, bf16, eager, cuda)
#   olmoe       taxbreak profile olmoe-1b-7b   (same shape)
#   replay      taxbreak replay of the llama run --json      -> OUT_DIR/replay.json
#   qwen        taxbreak profile qwen1.5-moe-a2.7b, only if enough time is left
#   collect     validation.json + validation.md (scripts/validation_table.py); traces trimmed below 5 MB
#
# Prerequisites (the device machine has no internet; nothing is downloaded):
#   * an NVIDIA GPU with its driver (libcuda.so.1), CUPTI (ships with CUDA builds of torch);
#   * python with a CUDA build of torch >= 2.1 and numpy, pandas, pyarrow, click, rich, msgspec, nvtx;
#   * this repository; if `import taxbreak` fails the script runs `pip install -e . --no-deps
#     --no-build-isolation` (offline, no dependency resolution).
# Environment: PYTHON (default python3), TAXBREAK_VALIDATE_BUDGET_S (default 480),
#   WARMUP / RUNS (profile, default 2 / 2), REPLAY_WARMUP / REPLAY_RUNS (default 10 / 30).
set -u -o pipefail

OUT_DIR=${1:?usage: scripts/gpu_validate.sh OUT_DIR}
PYTHON=${PYTHON:-python3}
BUDGET_S=${TAXBREAK_VALIDATE_BUDGET_S:-480}
WARMUP=${WARMUP:-2}
RUNS=${RUNS:-2}
REPLAY_WARMUP=${REPLAY_WARMUP:-10}
REPLAY_RUNS=${REPLAY_RUNS:-30}
REPO=$(cd "$(dirname "$0")/.." && pwd)
START_S=$(date +%s)

mkdir -p "$OUT_DIR/logs" "$OUT_DIR/runs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
: >"$OUT_DIR/stages.jsonl"
export TAXBREAK_CACHE_DIR="$OUT_DIR/cache"  # the floor measured here is the one the analyses use

elapsed() { echo $(( $(date +%s) - START_S )); }

# stage NAME TIMEOUT_S COMMAND...: run with a timeout, log, record status in stages.jsonl
stage() {
  local name=$1 limit=$2; shift 2
  local t0 rc status
  t0=$(date +%s)
  echo "[$(elapsed)s] stage $name (timeout ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" >"$OUT_DIR/logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=ok ;;
    124|137) status=timeout ;;
    *) status=failed ;;
  esac
  printf '{"stage": "%s", "status": "%s", "rc": %d, "seconds": %d, "log": "logs/%s.log"}\n' \
    "$name" "$status" "$rc" "$(( $(date +%s) - t0 ))" "$name" >>"$OUT_DIR/stages.jsonl"
  echo "[$(elapsed)s] stage $name: $status (rc $rc)"
  [ "$status" = ok ] || tail -n 5 "$OUT_DIR/logs/$name.log" | sed 's/^/    /'
  return 0
}

skip() {  # skip NAME REASON
  printf '{"stage": "%s", "status": "skipped", "rc": -1, "seconds": 0, "log": "%s"}\n' "$1" "$2" >>"$OUT_DIR/stages.jsonl"
  echo "[$(elapsed)s] stage $1: skipped ($2)"
}

profile_model() {  # profile_model STAGE MODEL TIMEOUT
  stage "$1" "$3" "$PYTHON" -m taxbreak profile --model "$2" --batch-size 4 --seq-len 2048 --new-tokens 10 \
    --warmup "$WARMUP" --runs "$RUNS" --dtype bfloat16 --device cuda --full-size -o "$OUT_DIR/runs/$2" -q
}

cd "$REPO" || exit 1
if ! "$PYTHON" -c "import taxbreak" 2>/dev/null; then
  "$PYTHON" -m pip install -e . --no-deps --no-build-isolation -q >"$OUT_DIR/logs/install.log" 2>&1 || true
fi
{
  "$PYTHON" -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available()); print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no gpu')"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv 2>&1 || true
  lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)|MHz' || true
} >"$OUT_DIR/environment.txt" 2>&1

stage floor 60 sh -c "'$PYTHON' -m taxbreak floor --warmup 50 --runs 150 --keep-trace '$OUT_DIR/floor_trace' --json >'$OUT_DIR/floor.json'"
profile_model llama llama-3.2-1b 120
profile_model olmoe olmoe-1b-7b 180

if [ -f "$OUT_DIR/runs/llama-3.2-1b/trace.json.gz" ]; then
  stage replay 90 sh -c "'$PYTHON' -m taxbreak replay '$OUT_DIR/runs/llama-3.2-1b' --warmup $REPLAY_WARMUP --runs $REPLAY_RUNS --json >'$OUT_DIR/replay.json'"
else
  skip replay "no llama-3.2-1b trace"
fi

LEFT=$(( BUDGET_S - $(elapsed) - 45 ))  # keep 45 s for collect and trim
if [ "$LEFT" -ge 100 ]; then
  profile_model qwen qwen1.5-moe-a2.7b $(( LEFT < 150 ? LEFT : 150 ))
else
  skip qwen "time budget: ${LEFT}s left"
fi

# collect first (from the full traces' summaries), then shrink what is copied back
stage collect 30 "$PYTHON" scripts/validation_table.py collect "$OUT_DIR"
for run in "$OUT_DIR"/runs/*/; do
  [ -f "$run/trace.json.gz" ] || continue
  timeout 60 "$PYTHON" scripts/validation_table.py trim "$run/trace.json.gz" --max-mb 5 >"$run/trimmed.json" 2>>"$OUT_DIR/logs/trim.log" || true
  rm -rf "$run/tables"  # derivable from the trace; too large to copy back
  find "$run/analysis" -name '*.parquet' -size +5M -delete 2>/dev/null || true
done
stage collect_trimmed 30 "$PYTHON" scripts/validation_table.py collect "$OUT_DIR"
"$PYTHON" scripts/validation_table.py "$OUT_DIR" >"$OUT_DIR/validation.md" 2>>"$OUT_DIR/logs/collect.log" || true
cat "$OUT_DIR/validation.md" 2>/dev/null
echo "[$(elapsed)s] done: $OUT_DIR"
