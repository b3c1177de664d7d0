#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, build, every test (C++ and Python reference
# comparisons through ctest), then a short fuzz smoke run when clang's libFuzzer is available.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
JOBS=${JOBS:-$(nproc)}
ctest --test-dir build -j"$JOBS" --output-on-failure --timeout 900
if [ -x scripts/fuzz_smoke.sh ] && [ "${FROST_SKIP_FUZZ:-0}" != 1 ]; then
  scripts/fuzz_smoke.sh
fi
