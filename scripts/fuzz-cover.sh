#!/bin/sh
# fuzz-cover.sh prints, for every fuzz target of the module, the statement
# coverage of its package reached by the target's seeds alone (f.Add and
# testdata/fuzz/FuzzNAME: the baseline) and by the seeds together with the
# corpus that `make fuzz` grew in go test's cache ($GOCACHE/fuzz), and the
# size of that corpus. It works on a copy of the working tree, so nothing
# of the cache is left in testdata/.
#
# Usage: scripts/fuzz-cover.sh [PACKAGE...]   (from the repository's root;
# every package by default; make fuzz-cover)
set -eu

go=${GO:-go}
mod=$($go list -m)
cache=$($go env GOCACHE)/fuzz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# The working tree's files, tracked or not (but not ignored), that exist.
git ls-files -z --cached --others --exclude-standard |
	xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
	xargs -0 cp --parents -t "$tmp"

# cover runs target $2 of package directory $1 in the copy and prints the
# package's statement coverage.
cover() {
	(cd "$tmp" && $go test -count=1 -run "^$2\$" -coverprofile="$tmp/cover.out" "./$1" >/dev/null) ||
		{ echo "fuzz-cover: $1 $2 failed" >&2; exit 1; }
	$go tool cover -func="$tmp/cover.out" | awk '/^total:/ { print $3 }'
}

printf '%-22s %-20s %8s %10s %12s\n' package target corpus seeds seeds+corpus
[ $# -gt 0 ] || set -- ./...
for pkg in $($go list "$@"); do
	dir=${pkg#"$mod"/}
	for target in $($go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		base=$(cover "$dir" "$target")
		n=0
		if [ -d "$cache/$pkg/$target" ]; then
			mkdir -p "$tmp/$dir/testdata/fuzz/$target"
			cp "$cache/$pkg/$target"/* "$tmp/$dir/testdata/fuzz/$target/"
			n=$(ls "$cache/$pkg/$target" | wc -l)
		fi
		with=$(cover "$dir" "$target")
		printf '%-22s %-20s %8d %10s %12s\n' "$dir" "$target" "$n" "$base" "$with"
	done
done
