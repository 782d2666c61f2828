#!/usr/bin/env bash
# Runs the patches' unit tests (Asterisk's test framework, category /res/res_pjsip/qualify/) in
# the Asterisk built into PREFIX with ASTERISK_DEVMODE=1 build.sh PREFIX, from a directory of
# its own with a loopback-only PJSIP transport. Exits 1 unless every test passes.
# Usage: unit.sh PREFIX
set -euo pipefail
prefix=${1:?usage: unit.sh PREFIX}
run=$(mktemp -d)
ast() { "$prefix/sbin/asterisk" -C "$run/etc/asterisk.conf" "$@"; }
trap 'ast -rx "core stop now" >/dev/null 2>&1 || true; rm -rf "$run"' EXIT
mkdir -p "$run"/{etc,lib,spool,run,log,cache}
{
  echo "[directories]"
  for kv in "astetcdir $run/etc" "astmoddir $prefix/lib/asterisk/modules" "astvarlibdir $run/lib" \
    "astdbdir $run/lib" "astkeydir $run/lib" "astdatadir $prefix/var/lib/asterisk" \
    "astagidir $run/lib/agi-bin" "astspooldir $run/spool" "astrundir $run/run" "astlogdir $run/log" \
    "astcachedir $run/cache" "astsbindir $prefix/sbin"; do
    set -- $kv; echo "$1 => $2"
  done
  printf '[options]\nverbose = 0\n'
} > "$run/etc/asterisk.conf"
printf '[modules]\nautoload = yes\n' > "$run/etc/modules.conf"
printf '[general]\n[logfiles]\nmessages => error\n' > "$run/etc/logger.conf"
printf '[udp]\ntype=transport\nprotocol=udp\nbind=127.0.0.1:0\n' > "$run/etc/pjsip.conf"
ast
for _ in $(seq 100); do ast -rx "core waitfullybooted" >/dev/null 2>&1 && break; sleep 0.2; done
out=$(ast -rx "test execute category /res/res_pjsip/qualify/")
echo "$out"
echo "$out" | grep -q ' 0 Failed' && ! echo "$out" | grep -q '^0 Test(s) Executed'
