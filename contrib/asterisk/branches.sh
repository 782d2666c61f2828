#!/usr/bin/env bash
# Applies the series (the 000*.patch files beside this script) to other Asterisk branches and
# builds each with --enable-dev-mode (warnings are errors), as the `cherry-pick-to:` lines of an
# upstream pull request promise. For each BRANCH (default: main 22 20, the shared peers'
# tarballs in ASTERISK_SRC, default peers/asterisk in contrib/shared-dir.sh's directory; or the
# path of any Asterisk source tarball, such as a 23 release) the source is extracted and committed to a
# fresh git repository; upstream PR #2041 ($ASTERISK_SRC/pr-2041-e183ff09d5.patch) is applied
# with `git am` when the tree lacks it, then the series with `git am`; the tree is configured and
# built with build.sh's flags and modules plus the test framework and app_userevent (as
# ASTERISK_DEVMODE=1 build.sh), installed into
# ${XDG_CACHE_HOME:-$HOME/.cache}/qualifyd/asterisk-branch-NAME (ASTERISK_BRANCHES_DIR= to move
# them), and the series' unit tests run there (unit.sh). main (49fe30d0ff, #2041 merged) is the
# baseline: each other build's wall and CPU time (user + system of configure and make) is
# printed as a ratio to main's in the same run.
# Builds run one at a time under `nice -n 15` with `make -j2` (the machine is shared).
# A build whose PREFIX/.stamp names it (tarball, #2041, menuselect.args, patches, this script)
# is not made again: the result of the run that built it is printed, marked cached;
# ASTERISK_BRANCHES_FORCE=1 builds every one again (fresh times).
# Usage: branches.sh [main|22|20|TARBALL ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${ASTERISK_SRC:-}
if [ -z "$src" ]; then src=$("$here/../shared-dir.sh")/peers/asterisk; fi
out=${ASTERISK_BRANCHES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/qualifyd}
force=${ASTERISK_BRANCHES_FORCE:-0}
run=$(date -u +%Y-%m-%dT%H:%M:%SZ)
pr2041=$src/pr-2041-e183ff09d5.patch
patches=("$here"/[0-9][0-9][0-9][0-9]-*.patch)
export GIT_AUTHOR_NAME=branches.sh GIT_AUTHOR_EMAIL=branches.sh@localhost
export GIT_COMMITTER_NAME=branches.sh GIT_COMMITTER_EMAIL=branches.sh@localhost

# tarball BRANCH: the source tarball of BRANCH (a shared peers' branch or a path).
tarball() {
  case $1 in
    main) echo "$src/asterisk-49fe30d0ff.tar.gz" ;;
    22) echo "$src/asterisk-22-69535d4837.tar.gz" ;;
    20) echo "$src/asterisk-20-516d2c60ac.tar.gz" ;;
    *.tar.gz | *.tgz | *.tar.bz2 | *.tar.xz) [ -f "$1" ] && echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" \
      || { echo "branches.sh: no file $1" >&2; return 1; } ;;
    23) echo "branches.sh: the shared peers hold no 23 branch: pass the path of a 23 source tarball (a release, or git archive of the branch)" >&2; return 1 ;;
    *) echo "branches.sh: unknown branch '$1' (main, 22, 20 or the path of a source tarball)" >&2; return 1 ;;
  esac
}

# label BRANCH: the name of BRANCH's build (asterisk-branch-LABEL).
label() {
  case $1 in
    main | 22 | 20) echo "$1" ;;
    *) basename "$1" | sed -E 's/\.(tar\.gz|tgz|tar\.bz2|tar\.xz)$//' ;;
  esac
}

# offsets PATCH: how git applies PATCH to the tree in the current directory ("clean", or how many
# hunks land at an offset: git applies no hunk with fuzz), or fails naming the hunks that do not apply.
offsets() {
  local log n
  log=$(git apply -v --check "$1" 2>&1) || { echo "$log" | grep -E '^error|failed' >&2; return 1; }
  n=$(echo "$log" | grep -c 'succeeded at .*offset' || true)
  echo "$(grep -c '^@@ ' "$1") hunks, $n at an offset, no fuzz"
}

# apply BRANCH WORK: extracts BRANCH into WORK/asterisk as a git repository and applies #2041
# (when the tree lacks it) and the series with git am, printing one line per patch.
apply() {
  local b=$1 work=$2 p how list=()
  mkdir -p "$work/asterisk" && tar -xf "$(tarball "$b")" --strip-components=1 -C "$work/asterisk" \
    && cd "$work/asterisk" || return 1
  [ -f .version ] || basename "$(tarball "$b")" | sed -E 's/^asterisk-//; s/\.(tar\.gz|tgz|tar\.bz2|tar\.xz)$//; s/^[0-9a-f]{10}$/master-&/; s/^/GIT-/; s/$/-qualify/' > .version
  git init -q && git add -A && git commit -qm "$(basename "$(tarball "$b")")" || return 1
  # #2041 adds the resolver callback that sends one OPTIONS per resolved target.
  if grep -q sip_options_qualify_resolve_cb res/res_pjsip/pjsip_options.c; then
    echo "  #2041: in the tree"
  else
    list+=("$pr2041")
  fi
  list+=("${patches[@]}")
  for p in "${list[@]}"; do
    how=$(offsets "$p") || { echo "  $(basename "$p"): DOES NOT APPLY"; return 1; }
    git am -q "$p" || { git am --abort; echo "  $(basename "$p"): git am FAILED"; return 1; }
    echo "  $(basename "$p"): applies, $how"
  done
  if command -v alembic >/dev/null; then
    echo "  alembic heads: $(cd contrib/ast-db-manage && alembic -c config.ini.sample heads 2>&1 | paste -sd' ')"
  fi
}

# build PREFIX WORK: configures (dev mode), builds and installs the tree in WORK/asterisk,
# printing the build's wall and CPU time (configure to the end of make) and its warnings.
build() {
  local prefix=$1 work=$2 t0 t1 cpu
  cd "$work/asterisk" || return 1
  mkdir -p "$work/cache" && cp "$src/pjproject-2.17.tar.bz2" "$work/cache/" || return 1
  t0=$(date +%s)
  nice -n 15 ./configure -q --with-pjproject-bundled --with-externals-cache="$work/cache" \
    --without-jansson-bundled --prefix="$prefix" --enable-dev-mode > "$work/configure.log" 2>&1 \
    || { tail -20 "$work/configure.log"; echo "  configure FAILED"; return 1; }
  nice -n 15 make -s menuselect.makeopts > /dev/null || return 1
  # shellcheck disable=SC2046
  menuselect/menuselect $(grep -v '^#' "$src/menuselect.args") --enable TEST_FRAMEWORK \
    --enable app_userevent menuselect.makeopts > /dev/null || return 1
  menuselect/menuselect --check-deps menuselect.makeopts > /dev/null || return 1
  nice -n 15 make -s -j2 > "$work/build.log" 2>&1 \
    || { grep -E 'error|warning' "$work/build.log" | head -30; echo "  dev-mode build FAILED"; return 1; }
  t1=$(date +%s)
  # CPU: user + system of configure and make (this subshell's children), less sensitive than the
  # wall time to what else the machine runs (times in this shell: a pipe's subshell counts none).
  times > "$work/times"
  cpu=$(tail -1 "$work/times" | awk '{ for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%d", n }')
  echo "  dev-mode build: ok in $((t1 - t0)) s wall, $cpu s CPU, $(grep -c 'warning:' "$work/build.log" || true) warnings (load average at the end $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "$((t1 - t0)) $cpu" > "$work/seconds"
  nice -n 15 make -s install > "$work/install.log" 2>&1 || { tail -20 "$work/install.log"; return 1; }
}

# unit PREFIX: runs the series' unit tests in the build installed in PREFIX (unit.sh).
unit() {
  local log rc=0
  log=$("$here/unit.sh" "$1" 2>&1) || rc=1
  echo "  unit tests: $(echo "$log" | grep -oE '[0-9]+ Test\(s\) Executed|[0-9]+ Passed|[0-9]+ Failed' | paste -sd' ')$([ $rc = 0 ] || echo ' FAILED')"
  [ $rc = 0 ] || echo "$log" | grep -E 'FAIL|fail' | head -20
  return $rc
}

# one BRANCH: applies, builds and unit-tests BRANCH unless its stamp matches; prints its result and
# leaves its wall and CPU seconds in $secs (empty when it failed) and the run that built it in $from.
one() {
  local b=$1 prefix stamp work w c rc=0
  prefix="$out/asterisk-branch-$(label "$b")"
  secs= from=
  stamp="$(basename "$(tarball "$b")") pjproject-2.17 $(cat "$(tarball "$b")" "$pr2041" "$src/menuselect.args" "${patches[@]}" "$0" | md5sum | cut -c1-8)"
  if [ "$force" != 1 ] && [ -x "$prefix/sbin/asterisk" ] && [ "$(cat "$prefix/.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$b ($(basename "$(tarball "$b")")), cached in $prefix (built by the run of $(head -1 "$prefix/.result" | cut -d' ' -f3)):"
    sed -n '2,$p' "$prefix/.result"
    read -r w c from < "$prefix/.result"; secs="$w $c"; return 0
  fi
  work=$(mktemp -d /tmp/asterisk-branch-XXXXXX)
  echo "$b ($(basename "$(tarball "$b")")), into $prefix:"
  rm -rf "$prefix" && mkdir -p "$prefix"
  { (apply "$b" "$work") && (build "$prefix" "$work") && unit "$prefix"; } | tee "$work/result" || rc=1
  if [ "$rc" = 0 ] && [ -f "$work/seconds" ]; then
    secs=$(cat "$work/seconds") from=$run
    { echo "$secs $run"; cat "$work/result"; } > "$prefix/.result"
    echo "$stamp" > "$prefix/.stamp"
  fi
  rm -rf "$work"
  return $rc
}

if [ ! -f "$pr2041" ] || [ ! -f "$src/pjproject-2.17.tar.bz2" ] || [ ! -f "$src/menuselect.args" ]; then
  echo "branches.sh: no Asterisk source in $src (set ASTERISK_SRC to the shared peers' asterisk directory: $(basename "$pr2041"), pjproject-2.17.tar.bz2, menuselect.args and the branches' tarballs)" >&2
  exit 1
fi
branches=("$@")
[ ${#branches[@]} -gt 0 ] || branches=(main 22 20)
for b in "${branches[@]}"; do
  f=$(tarball "$b") || exit 1
  [ -f "$f" ] || { echo "branches.sh: no $f (branch $b) in the shared peers" >&2; exit 1; }
done
declare -A took runs
failed=0
for b in "${branches[@]}"; do
  one "$b" || failed=1
  took[$b]=$secs runs[$b]=$from
done
read -r wall cpu <<< "${took[main]:-}"
for b in "${branches[@]}"; do
  [ "$b" != main ] && [ -n "${wall:-}" ] && [ -n "${took[$b]}" ] || continue
  note=
  if [ "${runs[$b]}" != "${runs[main]}" ]; then note=" (not one run: ASTERISK_BRANCHES_FORCE=1 builds both again)"; fi
  echo "$b against main: $(echo "${took[$b]} $wall $cpu" | awk '{ printf "wall %d s / %d s = %.2f, CPU %d s / %d s = %.2f", $1, $3, $1 / $3, $2, $4, $2 / $4 }')$note"
done
exit $failed
