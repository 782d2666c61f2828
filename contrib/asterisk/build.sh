#!/usr/bin/env bash
# Builds Asterisk with qualifyd's res_pjsip qualify patches (the *.patch files beside this script,
# applied in order with `git apply`) into PREFIX: the same source (ASTERISK_SRC, default
# peers/asterisk in the shared peers' directory, contrib/shared-dir.sh), configure flags and modules (its menuselect.args) as its
# build.sh, which builds the unpatched one. About as long as that build.
# Usage: build.sh PREFIX
# Does nothing when PREFIX already holds this build (PREFIX/.stamp: the source, the modules, the
# patches and this script but its source lookup). It also installs the patched tree's Alembic scripts (the realtime
# schema) into PREFIX/share/ast-db-manage. ASTERISK_DEVMODE=1 configures with --enable-dev-mode
# (warnings are errors), the test framework and app_userevent, and installs the headers, for
# unit.sh and Asterisk's own test suite (testsuite.sh). ASTERISK_UNPATCHED=1 builds the same source with none of the
# patches (version GIT-master-49fe30d0ff), the unpatched side of testsuite.sh's comparison.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:?usage: build.sh PREFIX}
src=${ASTERISK_SRC:-} # lookup
if [ -z "$src" ]; then src=$("$here/../shared-dir.sh")/peers/asterisk; fi # lookup
if [ ! -f "$src/asterisk-49fe30d0ff.tar.gz" ]; then # lookup
  echo "build.sh: no asterisk-49fe30d0ff.tar.gz in $src (ASTERISK_SRC, else peers/asterisk in contrib/shared-dir.sh's directory)" >&2 # lookup
  exit 1 # lookup
fi # lookup
patches=("$here"/[0-9][0-9][0-9][0-9]-*.patch)
devmode=${ASTERISK_DEVMODE:-0}
version=GIT-master-49fe30d0ff-qualify
# The stamp's script is its build steps: the source's lookup (lines ending "# lookup") is not one.
script=$(grep -v '# lookup$' "$0")
kind="qualify-$( (cat "${patches[@]}"; echo "$script") | md5sum | cut -c1-8)"
if [ "${ASTERISK_UNPATCHED:-0}" = 1 ]; then
  patches=()
  version=GIT-master-49fe30d0ff
  kind="unpatched-$(echo "$script" | md5sum | cut -c1-8)"
fi
stamp="asterisk-49fe30d0ff pjproject-2.17 $(md5sum "$src/menuselect.args" | cut -c1-8) $kind devmode-$devmode"
if [ -x "$prefix/sbin/asterisk" ] && [ "$(cat "$prefix/.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
if ! dpkg -s libjansson-dev libedit-dev libsrtp2-dev uuid-dev libxml2-dev libsqlite3-dev git >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
    build-essential libjansson-dev libxml2-dev libsqlite3-dev uuid-dev libedit-dev libssl-dev \
    libsrtp2-dev pkg-config bzip2 patch libncurses-dev xmlstarlet python3 git >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/cache"
tar -xzf "$src/asterisk-49fe30d0ff.tar.gz" -C "$work"
cp "$src/pjproject-2.17.tar.bz2" "$work/cache/"
cd "$work/asterisk"
for p in ${patches[@]+"${patches[@]}"}; do
  git apply --whitespace=nowarn "$p" || { echo "build.sh: $p does not apply" >&2; exit 1; }
done
# A git archive has no .git: without this the version reads UNKNOWN__and_probably_unsupported.
echo "$version" > .version
flags=()
extra=()
if [ "$devmode" = 1 ]; then
  flags+=(--enable-dev-mode)
  # app_userevent: the test suite's qualify/call_unreachable reports its result with UserEvent.
  extra+=(--enable TEST_FRAMEWORK --enable app_userevent)
fi
./configure -q --with-pjproject-bundled --with-externals-cache="$work/cache" \
  --without-jansson-bundled --prefix="$prefix" "${flags[@]}" > "$work/configure.log" 2>&1 \
  || { tail -20 "$work/configure.log"; exit 1; }
make -s menuselect.makeopts > /dev/null
# shellcheck disable=SC2046
menuselect/menuselect $(grep -v '^#' "$src/menuselect.args") "${extra[@]}" menuselect.makeopts > /dev/null
menuselect/menuselect --check-deps menuselect.makeopts > /dev/null
make -s -j"$(nproc)" > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
make -s install > "$work/install.log" 2>&1 || { tail -20 "$work/install.log"; exit 1; }
if [ "$devmode" = 1 ]; then
  # PREFIX/include/asterisk: the test suite reads the build's options from buildopts.h.
  make -s install-headers >> "$work/install.log" 2>&1 || { tail -20 "$work/install.log"; exit 1; }
fi
rm -rf "$prefix/share/ast-db-manage"
mkdir -p "$prefix/share"
cp -r contrib/ast-db-manage "$prefix/share/ast-db-manage"
echo "$stamp" > "$prefix/.stamp"
echo "asterisk ($kind devmode-$devmode) built into $prefix: $("$prefix/sbin/asterisk" -V)"
