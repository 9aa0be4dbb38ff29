#!/usr/bin/env bash
# Downloads the real-trace corpus the tests read (docs/testing.md) from the
# upstream repositories, at pinned commits, into $TAXBREAK_SHARED_TRACES
# (default: ../shared/traces beside this repository), checking every file's
# sha256. Files already there with the right checksum are kept; a file whose
# download does not match is deleted and reported, and the script exits 1.
#
#   scripts/fetch-test-traces.sh            fetch what is missing
#   scripts/fetch-test-traces.sh --list     print the pinned list and exit
#
# Environment:
#   TAXBREAK_SHARED_TRACES    destination folder
#   TAXBREAK_TRACES_BASE_URL  where <owner>/<repo>/<commit>/<path> is fetched from
#                             (default https://raw.githubusercontent.com; a file://
#                             mirror works too, which is how the script is tested)
#   TAXBREAK_TRACES_LIST      another list file, same format as the one below
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
DEST=${TAXBREAK_SHARED_TRACES:-$REPO/../shared/traces}
BASE_URL=${TAXBREAK_TRACES_BASE_URL:-https://raw.githubusercontent.com}

# folder  owner/repo  commit  path-in-repo  sha256-of-the-upstream-file
# (the folder is the copy's top level: the file lands at DEST/folder/path)
read -r -d '' PINNED <<'LIST' || true
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz b9febb1abc8cc729a2890fb6a4171de9867ba72c944437ee046067e7c89912dc
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz 8866b9c04126fc8fff1256b6e39851166739913c2cebb0016d8a4f863872fc3f
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz 63074c678eb92a77410d7911b64ed39c0e859d0998f74ee9b862de7a12cd7616
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz 3e79d573357fd8f764206cc2e514e4a1be4ef43808269689056ed400972ff09c
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/triton_example/triton_example.json.gz f1702aba1e49885c42a7bf5ab8b63b82a0d630acd41180d87199401dd202ccfb
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/execution_trace/benchmark_simple_add_trace.json.gz 7f7e72221e263d763ac840686991321d238801cbea75d9febb59d3e3859d2b02
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/call_stack/backward_thread.json 73c6e40249b5d31e6c8624e86737df7a03af5c931c2b01c9ad0936840888bdd2
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/nccl_parser_config/nccl_data.json.gz c1cf9c575fdcd7bdc6326ceab834f94b351f81ae55577a7471aa9e328fb8b58e
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz e279d7280e73719e8dd9550e120cfe081fbe268596bd297fe5fcbf63e2b75a09
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/negative_queue_length_values_check/rank0.json.gz b8ce7a1a143b55dd1811d269272b09d1c693ffea85b91858f5fb246e7ad8c5f8
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/df_index_resolver/df_index_resolver.json.gz 769af9ab5262468eb7baf6a7bfdb138ef15542264c72c0c313758d951b16dc15
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/trace_diff/control/control.json.gz 43ed872e4c5dc2e8da5946d761ed61923a75c6c799cc62be9e1c859d440a56fd
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/trace_diff/test/test.json.gz 5e69e04ed19b2dbf59e632008146c1bd6da417dc3af7ab4885c619b11e34f1bf
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/timeline_analysis/sampled_rank-0.json.gz 71b98c30a2751cc56d9bf78f8fb76467acd56e0be6a1f0da23c600941d29aafd
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz 07e7e02da9cfda66f5b6fc5fd17e1f93185321504496f4c00e8d375fb162bf84
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz b2ff87b29bd604b0c30bca65915af4388b53a7f421f0897c68a7862e1559b6e5
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz 39fdab670f9e80a05ccc6d0d07611b3aeba1092fa10681d8dd08cea48d0488b5
pipit hpcgroup/pipit 46d41f2a6681112c86f3a090f9241ad05226ed43 pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite 38a44cf4de905da66bd1f73f35b23fc4fa0e7f1979bf6f8468ba41fe8f6cf7c6
nsys-ai GindaChen/nsys-ai ab196ea237d90e8df5270293d14cff1a95032500 tests/fixtures/mfu_2gpu_before.sqlite 6ee860b228433993c371a5ccdd7c807ce5b01f2eb8639d84b6692cb632a0dc45
nsys-ai GindaChen/nsys-ai ab196ea237d90e8df5270293d14cff1a95032500 tests/fixtures/mfu_2gpu_after.sqlite 5842c1f3936916df08a503e1917f50c5847c67feabf50a90e6b71139a97b95b8
nsys-ai GindaChen/nsys-ai ab196ea237d90e8df5270293d14cff1a95032500 tests/fixtures/mock.sqlite 84c90236cd88d305cff9563cd356a1cbfa0f12aaf3012ab2b7dc785e07070ed3
HolisticTraceAnalysis facebookresearch/HolisticTraceAnalysis f4d0062c382f42bd8a74838bcdad1916c7d5d2da LICENSE -
pipit hpcgroup/pipit 46d41f2a6681112c86f3a090f9241ad05226ed43 LICENSE -
nsys-ai GindaChen/nsys-ai ab196ea237d90e8df5270293d14cff1a95032500 LICENSE -
LIST

if [ -n "${TAXBREAK_TRACES_LIST:-}" ]; then
    PINNED=$(cat "$TAXBREAK_TRACES_LIST")
fi
if [ "${1:-}" = "--list" ]; then
    printf '%s\n' "$PINNED"
    exit 0
fi

sha256_of() { sha256sum "$1" | cut -c1-64; }

download() {  # download URL FILE: curl where present, else Python's urllib (file:// too)
    if command -v curl >/dev/null; then
        curl -fsSL --retry 2 -o "$2" "$1"
    else
        python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$1" "$2"
    fi
}

# fetch_one FOLDER OWNER_REPO COMMIT PATH SHA256: 0 when the file is in place and verified
fetch_one() {
    local folder=$1 repo=$2 commit=$3 path=$4 want=$5 dest got
    dest="$DEST/$folder/$path"
    [ "$path" = LICENSE ] && dest="$DEST/$folder/LICENSE.upstream"  # the licence, kept beside its files
    if [ -f "$dest" ] && { [ "$want" = - ] || [ "$(sha256_of "$dest")" = "$want" ]; }; then
        echo "present   $folder/${dest#"$DEST/$folder/"}"
        return 0
    fi
    mkdir -p "$(dirname "$dest")"
    if ! download "$BASE_URL/$repo/$commit/$path" "$dest.part"; then
        rm -f "$dest.part"
        echo "FAILED    $folder/$path: download of $BASE_URL/$repo/$commit/$path failed" >&2
        return 1
    fi
    got=$(sha256_of "$dest.part")
    if [ "$want" != - ] && [ "$got" != "$want" ]; then
        rm -f "$dest.part"
        echo "MISMATCH  $folder/$path: sha256 $got, expected $want" >&2
        return 1
    fi
    mv "$dest.part" "$dest"
    echo "fetched   $folder/${dest#"$DEST/$folder/"}"
}

failed=0
while read -r folder repo commit path want; do
    [ -n "$folder" ] || continue
    fetch_one "$folder" "$repo" "$commit" "$path" "$want" || failed=$((failed + 1))
done <<<"$PINNED"

if [ "$failed" -gt 0 ]; then
    echo "error: $failed file(s) not fetched or not verified into $DEST" >&2
    exit 1
fi
echo "real-trace corpus complete in $DEST"
