#!/usr/bin/env bash
# Downloads, here, the wheels taxbreak needs that the GPU machine's image lacks
# (it has Python 3.12, a CUDA torch, numpy, pandas, pyarrow, click and rich, but
# no msgspec, isal or nvtx, and no network), and checks each against the sha256
# in scripts/gpu-wheels.lock. scripts/gpu_validate.sh installs them offline.
#
#   scripts/gpu_wheels.sh                 download (kept if already verified) and verify
#   scripts/gpu_wheels.sh --verify        verify what is there, download nothing
#   scripts/gpu_wheels.sh --update-lock   download and rewrite the lock from what came
#
# Wheels go to $TAXBREAK_GPU_WHEELS (default .gpu-wheels/, ignored by git), for
# CPython 3.12 (the GPU image) and for this machine's Python when it differs, so
# the CPU rehearsal (tests/gpu/test_rehearsal.py) installs the same pins here
# (TAXBREAK_GPU_WHEEL_PYTHONS="3.12 ..." chooses). The lock covers CPython 3.11,
# 3.12 and 3.13; a wheel for any other version is refused as unlocked.
# taxbreak itself is not a wheel: the GPU machine gets the working tree and runs
# it from PYTHONPATH.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
LOCK=$REPO/scripts/gpu-wheels.lock
WHEELS_DIR=${TAXBREAK_GPU_WHEELS:-$REPO/.gpu-wheels}
PINS=(msgspec==0.23.0 isal==1.9.1 nvtx==0.2.17)
LOCAL_PY=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
PYTHONS=${TAXBREAK_GPU_WHEEL_PYTHONS:-$(printf '%s\n' 3.12 "$LOCAL_PY" | sort -u | tr '\n' ' ')}
MODE=${1:-download}

locked_sha() {  # locked_sha FILENAME: its sha256 from the lock, empty if not there
  awk -v f="$1" '$1 !~ /^#/ && $2 == f {print $1}' "$LOCK"
}

wheel_tag() {  # wheel_tag 3.12 -> cp312
  echo "cp${1/./}"
}

download() {  # download PYTHON_VERSION: the pinned wheels for that CPython
  local tag; tag=$(wheel_tag "$1")
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "$1" --implementation cp --abi "$tag" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    -d "$WHEELS_DIR" "${PINS[@]}"
}

verify() {  # every wheel present matches the lock; every locked wheel of a wanted Python is present
  local bad=0 name want got py tag
  for wheel in "$WHEELS_DIR"/*.whl; do
    [ -e "$wheel" ] || continue
    name=$(basename "$wheel")
    want=$(locked_sha "$name")
    got=$(sha256sum "$wheel" | cut -d' ' -f1)
    if [ -z "$want" ]; then
      echo "UNLOCKED  $name (not in scripts/gpu-wheels.lock; --update-lock after checking it)" >&2; bad=1
    elif [ "$want" != "$got" ]; then
      echo "MISMATCH  $name: sha256 $got, lock says $want" >&2; rm -f "$wheel"; bad=1
    else
      echo "ok        $name $(du -k "$wheel" | cut -f1) KiB"
    fi
  done
  for py in $PYTHONS; do
    tag=$(wheel_tag "$py")
    for pin in "${PINS[@]}"; do
      if ! ls "$WHEELS_DIR/${pin%%==*}-${pin##*==}-$tag-"*.whl >/dev/null 2>&1; then
        echo "MISSING   $pin for CPython $py" >&2; bad=1
      fi
    done
  done
  return $bad
}

update_lock() {
  {
    echo "# sha256  wheel  (scripts/gpu_wheels.sh --update-lock; pins: ${PINS[*]})"
    (cd "$WHEELS_DIR" && sha256sum -- *.whl | sed 's/ \*\?/ /' | tr -s ' ')
  } >"$LOCK.tmp"
  mv "$LOCK.tmp" "$LOCK"
  echo "wrote $LOCK"
}

mkdir -p "$WHEELS_DIR"
case $MODE in
  --verify) verify ;;
  download|--update-lock)
    for py in $PYTHONS; do download "$py"; done
    [ "$MODE" = --update-lock ] && update_lock
    verify
    echo "wheels in $WHEELS_DIR ($(du -sh "$WHEELS_DIR" | cut -f1)), verified against scripts/gpu-wheels.lock"
    ;;
  *) echo "usage: scripts/gpu_wheels.sh [--verify | --update-lock]" >&2; exit 2 ;;
esac
