#!/bin/sh
# fuzz-cover.sh prints, for every fuzz target of the module, the statement
# coverage reached by the target's seeds alone (f.Add and
# testdata/fuzz/FuzzNAME: the baseline) and by the seeds together with the
# corpus that `make fuzz` grew in go test's cache ($GOCACHE/fuzz), and the
# size of that corpus: of its whole package, and of the functions the
# seeds and corpus reach (the code the target exercises). It works on a copy of the working tree, so nothing
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

# cover runs target $2 of package directory $1 in the copy, writing its
# profile to $3, and prints the package's statement coverage.
cover() {
	(cd "$tmp" && $go test -count=1 -run "^$2\$" -coverprofile="$3" "./$1" >/dev/null) ||
		{ echo "fuzz-cover: $1 $2 failed" >&2; exit 1; }
	$go tool cover -func="$3" | awk '/^total:/ { print $3 }'
}

# reached prints the statement coverage of profile $1 over the functions
# profile $2 reaches (a function is reached when a statement of it ran):
# the code a target exercises, as against its whole package. A block
# belongs to the function that starts last at or before it.
reached() {
	$go tool cover -func="$2" | awk -v base="$1" -v with="$2" '
		$1 != "total:" { split($1, f, ":"); start[f[1], ++n[f[1]]] = f[2] }
		END {
			load(with, wt, wc); load(base, bt, bc)
			for (k in wc) if (wc[k] > 0) { t += wt[k]; c += bc[k] }
			printf "%.1f%%", t ? 100 * c / t : 0
		}
		function load(file, tot, cov,   line, a, b, fn, i, best) {
			while ((getline line < file) > 0) {
				if (line ~ /^mode:/) continue
				split(line, a, " "); split(a[1], b, ":"); split(b[2], pos, ".")
				fn = b[1]; best = 0
				for (i = 1; i <= n[fn]; i++) if (start[fn, i] + 0 <= pos[1] + 0 && start[fn, i] + 0 > best) best = start[fn, i] + 0
				tot[fn, best] += a[2]; if (a[3] > 0) cov[fn, best] += a[2]
			}
			close(file)
		}'
}

printf '%-22s %-20s %7s %14s %14s\n' package target corpus package reached
printf '%-22s %-20s %7s %14s %14s\n' "" "" "" "seeds/+corpus" "seeds/+corpus"
[ $# -gt 0 ] || set -- ./...
for pkg in $($go list "$@"); do
	dir=${pkg#"$mod"/}
	for target in $($go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		base=$(cover "$dir" "$target" "$tmp/base.out")
		n=0
		if [ -d "$cache/$pkg/$target" ]; then
			mkdir -p "$tmp/$dir/testdata/fuzz/$target"
			cp "$cache/$pkg/$target"/* "$tmp/$dir/testdata/fuzz/$target/"
			n=$(ls "$cache/$pkg/$target" | wc -l)
		fi
		with=$(cover "$dir" "$target" "$tmp/with.out")
		printf '%-22s %-20s %7d %14s %14s\n' "$dir" "$target" "$n" "$base/$with" \
			"$(reached "$tmp/base.out" "$tmp/with.out")/$(reached "$tmp/with.out" "$tmp/with.out")"
	done
done
