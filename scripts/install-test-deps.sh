#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine (it runs nothing).
# torch is installed first and pinned: a bare "torch" requirement would pull a
# multi-GB CUDA build, while torch==2.13.0 resolves to the CPU wheel.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[test]'
python3 -m pip install -q -r scripts/test-requirements.txt

# Headless Chromium for the HTML report's browser test.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if command -v apt-get >/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq chromium chromium-driver >/dev/null
    fi
fi
