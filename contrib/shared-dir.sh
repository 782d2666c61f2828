#!/usr/bin/env bash
# Prints the directory of the shared peers (peers/asterisk: Asterisk's source tarballs and their
# build.sh; peers/asterisk-testsuite: Asterisk's test suite), found by one rule, first match:
#   1. QUALIFYD_SHARED, when set (an error if it holds no peers/);
#   2. ../shared beside the checkout;
#   3. in a clone of a repository on this machine (remote.origin.url a local path, as in
#      `git clone /path/to/qualifyd /tmp/ci`), ../shared beside that repository.
# Fails, saying where it looked, when none holds peers/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${QUALIFYD_SHARED:-}" ]; then
  if [ -d "$QUALIFYD_SHARED/peers" ]; then cd "$QUALIFYD_SHARED" && pwd; exit 0; fi
  echo "shared-dir.sh: QUALIFYD_SHARED=$QUALIFYD_SHARED holds no peers/ directory" >&2
  exit 1
fi
tried=("$top/../shared")
origin=$(git -C "$top" config remote.origin.url 2>/dev/null || true)
origin=${origin#file://}
if [ -n "$origin" ] && [ -d "$origin" ]; then tried+=("$origin/../shared"); fi
for d in "${tried[@]}"; do
  if [ -d "$d/peers" ]; then cd "$d" && pwd; exit 0; fi
done
echo "shared-dir.sh: no shared peers: no peers/ directory in ${tried[*]}; set QUALIFYD_SHARED to the directory holding peers/asterisk and peers/asterisk-testsuite" >&2
exit 1
