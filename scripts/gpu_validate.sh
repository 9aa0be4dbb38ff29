#!/usr/bin/env bash
# Validation run of taxbreak on one GPU, sized to a time budget (default 270 s).
#
#   scripts/gpu_validate.sh WORK_DIR [RETURN_DIR]
#
# WORK_DIR gets everything (logs/, runs/, floor.json, replay.json, stages.jsonl,
# validation.json, validation.md). RETURN_DIR, when given, gets only the few
# files that travel back from a device machine (at most 8 come back there),
# refreshed after every stage so that a run cut off at its limit still returns
# what it did (docs/validation.md):
#   validate.log       this progress log, written line by line
#   validation.json    scripts/validation_table.py collect, after every stage
#   validation.md      the table of docs/validation.md from it, after every stage
#   results.tar.gz     logs/, stages.jsonl, environment.txt, floor/replay JSON,
#                      each run's manifest/summary/trimmed.json, the floor trace
#   <model>.trace.json.gz  each profiled trace, trimmed below 4 MB (at the end)
#
# Stages (each with its own timeout, cut to the budget left; a failed stage is
# recorded and the script goes on):
#   imports  the entry modules import; if not, the pinned wheels of
#            scripts/gpu_wheels.sh are installed offline into a private folder
#   floor    taxbreak floor --json                       -> floor.json
#   llama    taxbreak profile llama-3.2-1b  (BS 4, SL 2048, 10 new tokens, bf16, eager, cuda)
#   olmoe    taxbreak profile olmoe-1b-7b   (same shape)
#   replay   taxbreak replay of the llama run --json     -> replay.json
#   qwen     taxbreak profile qwen1.5-moe-a2.7b, if enough of the budget is left
#   collect  validation.json + validation.md; traces trimmed
#
# The device machine has no network: nothing is downloaded. It needs a CUDA
# build of torch with numpy, pandas, pyarrow, click and rich (the image has
# them); msgspec, isal and nvtx come from the wheels folder when missing.
# taxbreak runs from this tree (PYTHONPATH), never installed.
# Environment: PYTHON (default python3), TAXBREAK_VALIDATE_BUDGET_S (default 270),
#   TAXBREAK_VALIDATE_STAGES (default "floor llama olmoe replay qwen"),
#   TAXBREAK_GPU_WHEELS (default REPO/.gpu-wheels), WARMUP / RUNS (profile, 2 / 2),
#   REPLAY_WARMUP / REPLAY_RUNS (10 / 30); TAXBREAK_VALIDATE_SHAPE / TAXBREAK_VALIDATE_PLACE
#   replace the profile's shape and placement arguments (only to rehearse on a CPU).
set -u -o pipefail

WORK_DIR=${1:?usage: scripts/gpu_validate.sh WORK_DIR [RETURN_DIR]}
RETURN_DIR=${2:-}
PYTHON=${PYTHON:-python3}
BUDGET_S=${TAXBREAK_VALIDATE_BUDGET_S:-270}
STAGES=" ${TAXBREAK_VALIDATE_STAGES:-floor llama olmoe replay qwen} "
WARMUP=${WARMUP:-2}
RUNS=${RUNS:-2}
REPLAY_WARMUP=${REPLAY_WARMUP:-10}
REPLAY_RUNS=${REPLAY_RUNS:-30}
# The published shape and placement; overridable only to rehearse the whole path on a CPU
SHAPE_ARGS=${TAXBREAK_VALIDATE_SHAPE:---batch-size 4 --seq-len 2048 --new-tokens 10}
PLACE_ARGS=${TAXBREAK_VALIDATE_PLACE:---dtype bfloat16 --device cuda --full-size}
REPO=$(cd "$(dirname "$0")/.." && pwd)
WHEELS=${TAXBREAK_GPU_WHEELS:-$REPO/.gpu-wheels}
ENTRY_MODULES="taxbreak.readers, taxbreak.decompose, taxbreak.capture.runner, taxbreak.cli.main"
RESERVE_S=25  # kept back from the budget for collect, trim and packing
START_S=$(date +%s)

mkdir -p "$WORK_DIR/logs" "$WORK_DIR/runs" || exit 1
WORK_DIR=$(cd "$WORK_DIR" && pwd)
if [ -n "$RETURN_DIR" ]; then
  mkdir -p "$RETURN_DIR" || exit 1
  RETURN_DIR=$(cd "$RETURN_DIR" && pwd)
  exec > >(tee -p -a "$RETURN_DIR/validate.log") 2>&1  # -p: a closed stdout does not stop the log
else
  exec > >(tee -p -a "$WORK_DIR/validate.log") 2>&1
fi
: >"$WORK_DIR/stages.jsonl"
export TAXBREAK_CACHE_DIR="$WORK_DIR/cache"  # the floor measured here is the one the analyses use
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

elapsed() { echo $(( $(date +%s) - START_S )); }

wanted() { [[ "$STAGES" == *" $1 "* ]]; }

record() {  # record NAME STATUS RC SECONDS LOG: one line of stages.jsonl
  printf '{"stage": "%s", "status": "%s", "rc": %d, "seconds": %d, "log": "%s"}\n' \
    "$1" "$2" "$3" "$4" "$5" >>"$WORK_DIR/stages.jsonl"
}

skip() {  # skip NAME REASON
  record "$1" skipped -1 0 "$2"
  echo "[$(elapsed)s] stage $1: skipped ($2)"
  publish
}

budget_left() { echo $(( BUDGET_S - $(elapsed) - RESERVE_S )); }

# stage NAME TIMEOUT_S COMMAND...: run with a timeout cut to the budget left, log, record, publish
stage() {
  local name=$1 limit=$2; shift 2
  local t0 rc status left
  wanted "$name" || { skip "$name" "not in TAXBREAK_VALIDATE_STAGES"; return 0; }
  left=$(budget_left)
  [ "$left" -lt "$limit" ] && limit=$left
  [ "$limit" -ge 10 ] || { skip "$name" "time budget: ${left}s left"; return 0; }
  t0=$(date +%s)
  echo "[$(elapsed)s] stage $name (timeout ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" >"$WORK_DIR/logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=ok ;;
    124|137) status=timeout ;;
    *) status=failed ;;
  esac
  record "$name" "$status" "$rc" "$(( $(date +%s) - t0 ))" "logs/$name.log"
  echo "[$(elapsed)s] stage $name: $status (rc $rc)"
  [ "$status" = ok ] || tail -n 5 "$WORK_DIR/logs/$name.log" | sed 's/^/    /'
  publish
  return 0
}

# publish: validation.json/.md from what is there so far, and the small results archive
publish() {
  "$PYTHON" "$REPO/scripts/validation_table.py" collect "$WORK_DIR" 2>>"$WORK_DIR/logs/collect.log" \
    && "$PYTHON" "$REPO/scripts/validation_table.py" "$WORK_DIR" >"$WORK_DIR/validation.md" \
       2>>"$WORK_DIR/logs/collect.log"
  [ -n "$RETURN_DIR" ] || return 0
  cp -f "$WORK_DIR/validation.json" "$WORK_DIR/validation.md" "$RETURN_DIR/" 2>/dev/null
  (cd "$WORK_DIR" && tar -czf "$RETURN_DIR/results.tar.gz.part" --exclude='*.trace.json.gz' \
     --exclude='trace.json.gz' --exclude='tables' --exclude='analysis' --exclude='cache' \
     logs stages.jsonl $(ls -d environment.txt floor.json replay.json floor_trace runs 2>/dev/null) \
     && mv -f "$RETURN_DIR/results.tar.gz.part" "$RETURN_DIR/results.tar.gz")
  return 0
}

# probe: import the entry modules and describe the environment in one Python start
# (torch alone takes seconds to import) -> environment.txt; errors to logs/imports.log
probe() {
  "$PYTHON" - >"$WORK_DIR/environment.txt" 2>>"$WORK_DIR/logs/imports.log" <<EOF
import $ENTRY_MODULES
import sys, torch
from taxbreak.capture.manifest import capture_libraries
print("PYTHONPATH=$PYTHONPATH")
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "available", torch.cuda.is_available())
print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no gpu")
print("libraries", capture_libraries())
EOF
}

# install_wheels SITE: the wheels for this Python, verified against the lock, into SITE (pip, else unzip)
install_wheels() {
  local site=$1 py_version tag
  py_version=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  tag="cp${py_version/./}"
  echo "    wheels: $WHEELS (CPython $py_version, $tag)"
  TAXBREAK_GPU_WHEELS="$WHEELS" TAXBREAK_GPU_WHEEL_PYTHONS="$py_version" \
    bash "$REPO/scripts/gpu_wheels.sh" --verify >>"$WORK_DIR/logs/imports.log" 2>&1 \
    || { echo "    wheels not verified against scripts/gpu-wheels.lock (logs/imports.log)"; return 1; }
  if "$PYTHON" -m pip --version >/dev/null 2>&1; then  # the verified files themselves: no resolution
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
      --find-links "$WHEELS" --target "$site" "$WHEELS"/*-"$tag"-*.whl >>"$WORK_DIR/logs/imports.log" 2>&1 \
      && return 0
    echo "    pip install failed; unpacking the wheels instead"
  fi
  "$PYTHON" - "$site" "$WHEELS" "$tag" >>"$WORK_DIR/logs/imports.log" 2>&1 <<'EOF'
import sys, zipfile
from pathlib import Path
site, wheels, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
found = sorted(wheels.glob(f"*-{tag}-*.whl"))
if not found:
    sys.exit(f"no {tag} wheel in {wheels}")
for wheel in found:  # a wheel is a zip of site-packages paths; these three need no install scripts
    zipfile.ZipFile(wheel).extractall(site)
    print("unpacked", wheel.name)
EOF
}

# ensure_imports: the entry modules import, installing the wheels when they do not
ensure_imports() {
  local t0 site status=ok how="already importable"
  t0=$(date +%s)
  echo "[$(elapsed)s] stage imports: import $ENTRY_MODULES"
  if ! probe; then
    site=$(mktemp -d "${TMPDIR:-/tmp}/taxbreak-site.XXXXXX")
    echo "    not importable ($(grep -E 'Error' "$WORK_DIR/logs/imports.log" | tail -n 1));" \
         "installing the pinned wheels offline into $site"
    if install_wheels "$site"; then
      export PYTHONPATH="$site:$PYTHONPATH"
      how="installed from wheels into $site"
    else
      how="wheel install failed"
    fi
    probe || status=failed
  fi
  record imports "$status" "$([ "$status" = ok ] && echo 0 || echo 1)" "$(( $(date +%s) - t0 ))" "logs/imports.log"
  echo "[$(elapsed)s] stage imports: $status ($how)"
  [ "$status" = ok ] || tail -n 5 "$WORK_DIR/logs/imports.log" | sed 's/^/    /'
}

describe_machine() {  # the GPU and CPU as seen from outside Python, after the probe's lines
  {
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv 2>&1 || true
    else
      echo "nvidia-smi: not on PATH"
    fi
    lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)|MHz' || true
  } >>"$WORK_DIR/environment.txt" 2>&1
  sed 's/^/    /' "$WORK_DIR/environment.txt"
}

profile_model() {  # profile_model STAGE MODEL TIMEOUT
  # shellcheck disable=SC2086  # the argument strings are split on purpose
  stage "$1" "$3" "$PYTHON" -m taxbreak profile --model "$2" $SHAPE_ARGS \
    --warmup "$WARMUP" --runs "$RUNS" $PLACE_ARGS -o "$WORK_DIR/runs/$2" -q
}

# return_traces: each run's trace trimmed below 4 MB (gzip), next to the other returned files
return_traces() {
  local run name left
  for run in "$WORK_DIR"/runs/*/; do
    [ -f "$run/trace.json.gz" ] || continue
    name=$(basename "$run")
    left=$(( BUDGET_S - $(elapsed) ))  # the tables are already collected: a trim cut short loses only the trace
    timeout "$(( left > 10 ? left : 10 ))" "$PYTHON" "$REPO/scripts/validation_table.py" trim "$run/trace.json.gz" --max-mb 4 \
      >"$run/trimmed.json" 2>>"$WORK_DIR/logs/trim.log" \
      || { echo "    trim of $name failed or was cut short (logs/trim.log); its trace stays behind"; continue; }
    [ -z "$RETURN_DIR" ] || cp -f "$run/trace.json.gz" "$RETURN_DIR/$name.trace.json.gz"
  done
}

cd "$REPO" || exit 1
echo "[0s] taxbreak GPU validation: work $WORK_DIR, return ${RETURN_DIR:-none}, budget ${BUDGET_S}s, stages:$STAGES"
ensure_imports
describe_machine
publish

stage floor 60 sh -c "'$PYTHON' -m taxbreak floor --warmup 50 --runs 150 --keep-trace '$WORK_DIR/floor_trace' --json >'$WORK_DIR/floor.json'"
profile_model llama llama-3.2-1b 120
profile_model olmoe olmoe-1b-7b 180

if [ -f "$WORK_DIR/runs/llama-3.2-1b/trace.json.gz" ] || ! wanted replay; then
  stage replay 90 sh -c "'$PYTHON' -m taxbreak replay '$WORK_DIR/runs/llama-3.2-1b' --warmup $REPLAY_WARMUP --runs $REPLAY_RUNS --json >'$WORK_DIR/replay.json'"
else
  skip replay "no llama-3.2-1b trace"
fi

if [ "$(budget_left)" -ge 100 ] || ! wanted qwen; then
  profile_model qwen qwen1.5-moe-a2.7b 150
else
  skip qwen "time budget: $(budget_left)s left"
fi

# collect from the full traces' summaries first, then shrink what is copied back
return_traces
publish
cat "$WORK_DIR/validation.md" 2>/dev/null
[ -z "$RETURN_DIR" ] || ls -l "$RETURN_DIR"
echo "[$(elapsed)s] done: $WORK_DIR"
