#!/usr/bin/env bash
# Gives every source file whose content changed since the last build in BUILD_DIR (default
# build-gpu) this machine's current time, so ninja rebuilds everything that depends on it.
# Why: the device tool copies the working tree onto a machine that may keep build-gpu from an
# earlier call, and ninja decides by modification times. A copied file whose time is not later
# than the objects built there (another clock, a preserved time) leaves those objects stale; a
# changed struct in a header then reaches different files with different layouts. Content hashes
# do not depend on either clock. Run it after cmake and before ninja.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
[ -d "$BUILD" ] || exit 0
list=$(mktemp)
find src include tests bench tools cmake CMakeLists.txt -type f \
  \( -name '*.h' -o -name '*.hpp' -o -name '*.cuh' -o -name '*.cu' -o -name '*.cpp' -o -name '*.c' \
     -o -name 'CMakeLists.txt' -o -name '*.cmake' \) 2>/dev/null | LC_ALL=C sort | xargs -r sha1sum >"$list"
old="$BUILD/.frost-src.sha1"
if [ -f "$old" ]; then
  # lines of the new list absent from the old one: changed or new files
  changed=$(LC_ALL=C comm -13 <(LC_ALL=C sort "$old") <(LC_ALL=C sort "$list") | awk '{print $2}')
  n=0
  for f in $changed; do touch "$f"; n=$((n + 1)); done
  echo "touch_changed: $n source files changed since the last build in $BUILD"
fi
mv "$list" "$old"
