#!/usr/bin/env bash
# The main job, from a fresh machine: set-up, build, then `frost demo` on the built-in model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/tools/frost/frost demo "$@"
