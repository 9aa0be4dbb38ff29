#!/usr/bin/env bash
# Builds the compiled Kineto scanner (taxbreak/readers/_kineto_scan.c) with
# AddressSanitizer and UndefinedBehaviorSanitizer and runs it over fuzz inputs
# (scripts/sanitize_scanner.py): every Kineto mutator class of tests/fuzz, all
# prefixes of small cases (reads past the buffer), byte flips and deep nesting.
# Any sanitizer report aborts the run with a non-zero exit status.
#
#   scripts/sanitize_scanner.sh [--seconds N] [--seed S]
set -euo pipefail
cd "$(dirname "$0")/.."

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
include=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suffix=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
gcc -shared -fPIC -std=c11 -O1 -g -fno-omit-frame-pointer -Wall -Werror \
    -fsanitize=address,undefined -fno-sanitize-recover=all \
    -I"$include" taxbreak/readers/_kineto_scan.c -o "$build/_kineto_scan$suffix"

# The interpreter is not built with ASan: the runtime is preloaded; leaks of the
# interpreter itself are not the scanner's (it frees everything it allocates on every path).
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
exec python3 scripts/sanitize_scanner.py "$build/_kineto_scan$suffix" "$@"
