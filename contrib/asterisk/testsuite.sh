#!/usr/bin/env bash
# Runs Asterisk's own functional test suite (asterisk/testsuite, the shared peers' tarball, with
# the testsuite-*.patch beside this script: the companion test-suite change of the series) on
# two builds of the same source, main at 49fe30d0ff, both with the test framework: unpatched
# and with the res_pjsip qualify patches (build.sh with ASTERISK_DEVMODE=1, with and without
# ASTERISK_UNPATCHED=1).
#   - The suite's existing qualify tests run on both, side by side in the same run: the script
#     fails if the patched build fails a test the unpatched one passes.
#   - The new tests (the patch's) must pass on the patched build. On the unpatched one they are
#     expected to fail (it refuses the options they set): that is printed, not an error; a new
#     test that passes there is an error (it would test nothing).
# Usage: testsuite.sh [deps]
#   deps: only install what the run needs (Debian's python3 packages, the suite and starpy
#   extracted under CACHE/asterisk-testsuite, the two builds under CACHE/asterisk-ats-base and
#   CACHE/asterisk-ats-qualify), each step skipped when its stamp says it is done.
# CACHE is ${XDG_CACHE_HOME:-$HOME/.cache}/qualifyd. The suite binds 127.0.0.1:5060-5062 and the
# Manager's 5038: runs take turns on this machine (flock), and nothing else may use those ports.
# Each build's logs stay in the run's directory (printed) when one of its tests fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/qualifyd
suite_src=${ASTERISK_TESTSUITE_SRC:-}
if [ -z "$suite_src" ]; then suite_src=$("$here/../shared-dir.sh")/peers/asterisk-testsuite; fi
if [ ! -f "$suite_src/testsuite-379b3a56.tar.gz" ]; then
  echo "testsuite.sh: no testsuite-379b3a56.tar.gz in $suite_src (ASTERISK_TESTSUITE_SRC, else peers/asterisk-testsuite in contrib/shared-dir.sh's directory)" >&2
  exit 1
fi
base=$cache/asterisk-ats-base
qualify=$cache/asterisk-ats-qualify
suite=$cache/asterisk-testsuite
suite_patches=("$here"/testsuite-[0-9][0-9][0-9][0-9]-*.patch)

# The suite's existing qualify tests, and the new ones of testsuite-*.patch.
existing=(
  tests/channels/pjsip/qualify/basic
  tests/channels/pjsip/qualify/auth
  tests/channels/pjsip/qualify/max_initial_qualify_time
  tests/channels/pjsip/qualify/qualify_timeout
  tests/channels/pjsip/qualify/no_qualify
  tests/channels/pjsip/qualify/call_unreachable
  tests/channels/pjsip/ami/pjsip_qualify
  tests/channels/pjsip/transport/reuse/options
)
new=(
  tests/channels/pjsip/qualify/failures
  tests/channels/pjsip/qualify/retry_interval
  tests/channels/pjsip/qualify/down_interval
  tests/channels/pjsip/qualify/successes
  tests/channels/pjsip/qualify/latency_only
  tests/channels/pjsip/qualify/latency_only_registered
  tests/channels/pjsip/qualify/reload_failures
  tests/channels/pjsip/qualify/endpoint_reload
  tests/channels/pjsip/qualify/reregister
)

deps() {
  local pkgs=(python3-yaml python3-twisted python3-lxml python3-construct python3-scapy
    python3-numpy python3-netifaces python3-requests)
  if ! dpkg -s "${pkgs[@]}" >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -o DPkg::Lock::Timeout=600 "${pkgs[@]}" >/dev/null
  fi
  command -v sipp >/dev/null || { echo "testsuite.sh: no sipp (Debian's sip-tester)" >&2; exit 1; }
  local stamp
  stamp="testsuite-379b3a56 starpy-1.1.1 $(cat "${suite_patches[@]}" | md5sum | cut -c1-8)"
  if [ "$(cat "$suite/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$suite"
    mkdir -p "$suite"
    tar -xzf "$suite_src/testsuite-379b3a56.tar.gz" -C "$suite"
    tar -xzf "$suite_src/starpy-1.1.1.tar.gz" -C "$suite"
    for p in "${suite_patches[@]}"; do
      (cd "$suite/testsuite" && git apply --whitespace=nowarn "$p") || { echo "testsuite.sh: $p does not apply" >&2; exit 1; }
    done
    echo "$stamp" > "$suite/.stamp"
  fi
  ASTERISK_DEVMODE=1 ASTERISK_UNPATCHED=1 "$here/build.sh" "$base"
  ASTERISK_DEVMODE=1 "$here/build.sh" "$qualify"
}

# layout ROOT PREFIX: the install root the suite expects (AST_TEST_ROOT: usr/sbin/asterisk,
# usr/lib/asterisk/modules, var/lib/asterisk, etc/asterisk/asterisk.conf naming them by their
# paths inside ROOT), made of links to the build installed into PREFIX.
layout() {
  local root=$1 prefix=$2
  mkdir -p "$root/usr" "$root/var/lib" "$root/etc/asterisk" "$root/tmp"
  for d in spool run log cache; do mkdir -p "$root/var/$d/asterisk"; done
  ln -s "$prefix/sbin" "$root/usr/sbin"
  ln -s "$prefix/lib" "$root/usr/lib"
  ln -s "$prefix/include" "$root/usr/include"
  ln -s "$prefix/var/lib/asterisk" "$root/var/lib/asterisk"
  cat > "$root/etc/asterisk/asterisk.conf" <<'CONF'
[directories]
astetcdir => /etc/asterisk
astmoddir => /usr/lib/asterisk/modules
astvarlibdir => /var/lib/asterisk
astdbdir => /var/lib/asterisk
astkeydir => /var/lib/asterisk
astdatadir => /var/lib/asterisk
astagidir => /var/lib/asterisk/agi-bin
astspooldir => /var/spool/asterisk
astrundir => /var/run/asterisk
astlogdir => /var/log/asterisk
astsbindir => /usr/sbin
astcachedir => /var/cache/asterisk

[options]
CONF
}

# run NAME PREFIX TEST...: runs the tests on one build, in a copy of the suite of its own (the
# harness reads the build's options from ./astroot/usr/include/asterisk/buildopts.h); prints
# each test's result and writes "TEST passed|failed" lines to $work/NAME.results.
run() {
  local name=$1 prefix=$2
  shift 2
  local root=$work/$name
  layout "$root" "$prefix"
  cp -a "$suite/testsuite" "$work/suite-$name"
  ln -s "$root" "$work/suite-$name/astroot"
  local args=()
  for t in "$@"; do args+=(-t "$t"); done
  echo "== $name ($("$prefix/sbin/asterisk" -V)): ${#@} tests"
  # The harness runs `killall -9 asterisk` before each test: in a PID namespace of its own it
  # sees only its own Asterisks, never another on the machine (a Go test's, an operator's).
  (cd "$work/suite-$name" && AST_TEST_ROOT=$root PYTHONPATH=$suite/starpy \
    unshare --pid --fork --mount-proc \
    /usr/bin/python3 -W ignore ./runtests.py --keep-full-logs --timeout 120 "${args[@]}") \
    > "$work/$name.log" 2>&1 || true
  /usr/bin/python3 - "$work/suite-$name/asterisk-test-suite-report.xml" "$@" > "$work/$name.results" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    cases = {'tests/%s/%s' % (c.get('classname', '').replace('.', '/'), c.get('name')): c
             for c in ET.parse(sys.argv[1]).iter('testcase')}
except (OSError, ET.ParseError):
    cases = {}
for test in sys.argv[2:]:
    c = cases.get(test)
    if c is None:
        verdict = 'missing'
    elif c.find('failure') is not None or c.find('error') is not None:
        verdict = 'failed'
    elif c.find('skipped') is not None:
        verdict = 'skipped'
    else:
        verdict = 'passed'
    print(test, verdict, c.get('time', '?') if c is not None else '?')
PY
  sed 's/^/   /' "$work/$name.results"
}

deps
if [ "${1:-}" = deps ]; then exit 0; fi

exec 9> /tmp/qualifyd-asterisk-testsuite.lock
flock 9
work=$(mktemp -d /tmp/qdats.XXXXXX)
start=$(date +%s)
run base "$base" "${existing[@]}" "${new[@]}"
run qualify "$qualify" "${existing[@]}" "${new[@]}"
verdict() { awk -v t="$2" '$1 == t { print $2 }' "$work/$1.results"; }
fail=0
echo "== existing qualify tests (unpatched | patched)"
for t in "${existing[@]}"; do
  b=$(verdict base "$t"); q=$(verdict qualify "$t")
  mark=ok
  if [ "$b" = passed ] && [ "$q" != passed ]; then mark="FAIL: the patched build fails a test the unpatched one passes"; fail=1; fi
  if [ "$q" != passed ]; then [ "$mark" = ok ] && mark="(fails on both)"; fi
  printf '   %-52s %-8s | %-8s %s\n' "${t#tests/channels/pjsip/}" "$b" "$q" "$mark"
done
echo "== new tests (unpatched: expected to fail | patched: must pass)"
for t in "${new[@]}"; do
  b=$(verdict base "$t"); q=$(verdict qualify "$t")
  mark=ok
  if [ "$q" != passed ]; then mark="FAIL: the patched build must pass it"; fail=1; fi
  if [ "$b" = passed ]; then mark="FAIL: passes on the unpatched build too, so it tests nothing"; fail=1; fi
  if [ "$b" != passed ]; then
    # Why: the unpatched build's log names the option it refused.
    why=$(grep -rhoa "named 'qualify_[a-z_]*'" "$work/suite-base/logs/${t#tests/}" 2>/dev/null | sort -u | paste -sd' ')
    [ -n "$why" ] && mark="$mark (unpatched: no option $why)"
  fi
  printf '   %-52s %-8s | %-8s %s\n' "${t#tests/channels/pjsip/}" "$b" "$q" "$mark"
done
# The intervals the timed tests measured on the patched build (SIPp's log lines in the suite's
# full logs).
for t in retry_interval down_interval; do
  grep -rhoa 'OPTIONS [0-9]*: [a-z]*, [0-9.]* s after the previous one (expected: [0-9.]*)' \
    "$work/suite-qualify/logs/channels/pjsip/qualify/$t" 2>/dev/null \
    | grep -v '(expected: 0)' | sed "s/^/   patched $t: /" || true
done
echo "== testsuite: $(( $(date +%s) - start )) s"
if [ "$fail" = 1 ]; then
  echo "testsuite.sh: failed; the suite's output and logs are in $work (base.log, qualify.log, suite-*/logs)" >&2
  exit 1
fi
rm -rf "$work"
