#!/bin/sh
# test_man -- the manual pages (issue 25, 2).
#
#   test_man.sh render MANDIR
#       every page tpfs installs is in MANDIR and renders with man(1) with
#       all of groff's warnings on (man --warnings=w -l) without a single
#       warning or error, into a page that has NAME, SYNOPSIS, DESCRIPTION,
#       EXIT STATUS (or RETURN VALUE) and SEE ALSO sections;
#   test_man.sh options MANDIR COMMAND...
#       every option that COMMAND --help lists appears, as a word, in its
#       page (tpfs and tpfsd: section 8; the tx tools: section 1): the
#       options of the usage lines and of the option lines ("  -x, --long"),
#       tpfs's commands and their options, and tpfsd's -o mount options.
#
# The pages are read as the configured ones of the build directory (the
# version set by meson).  man-db and groff-base come from scripts/setup.
set -u
mode=$1; mandir=$2; shift 2
pages="tpfs.8 tpfsd.8 txbegin.1 txcommit.1 txabort.1 txrun.1 txstatus.1 libtpfs_tx.3"
fail=0
say() { echo "FAIL: $*"; fail=1; }

case $mode in
render)
	command -v man >/dev/null 2>&1 || { echo "FAIL: man(1) is missing: run scripts/setup"; exit 1; }
	for p in $pages; do
		f=$mandir/$p
		[ -f "$f" ] || { say "$p: no such page in $mandir"; continue; }
		warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=w -l "$f" 2>&1 >/dev/null)
		[ -z "$warn" ] || say "$p: warnings: $warn"
		for w in 120 200; do
			warn=$(LC_ALL=C.UTF-8 MANWIDTH=$w man --warnings=w -l "$f" 2>&1 >/dev/null)
			[ -z "$warn" ] || say "$p at width $w: warnings: $warn"
		done
		text=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$f" 2>/dev/null | col -b)
		for s in NAME SYNOPSIS DESCRIPTION 'SEE ALSO'; do
			printf '%s\n' "$text" | grep -qx "$s" || say "$p: no $s section"
		done
		printf '%s\n' "$text" | grep -qxE 'EXIT STATUS|RETURN VALUE' || say "$p: no EXIT STATUS or RETURN VALUE section"
	done
	[ $fail -eq 0 ] && echo "man render: $(echo $pages | wc -w) pages, no warnings"
	;;
options)
	total=0
	for cmd in "$@"; do
		name=${cmd##*/}
		case $name in tpfs|tpfsd) page=$mandir/$name.8 ;; *) page=$mandir/$name.1 ;; esac
		[ -f "$page" ] || { say "$name: no page $page"; continue; }
		help=$("$cmd" --help 2>&1) || { say "$name --help failed"; continue; }
		# The options --help lists, one a line.
		opts=$(printf '%s\n' "$help" | awk -v cmd="$name" '
			function dashes(s,   t) {
				while (match(s, /(^|[][ ,|])--?[A-Za-z][-A-Za-z0-9]*/)) {
					t = substr(s, RSTART, RLENGTH); sub(/^[][ ,|]/, "", t)
					print t; s = substr(s, RSTART + RLENGTH)
				}
			}
			/^[^ ]/ { sect = $0; usage = ($0 ~ /^[Uu]sage:/) }
			usage && /^[Uu]sage:/ { dashes($0); next }
			usage && $0 ~ "^ +" cmd " " { dashes($0); next }
			/^ +-/ { s = $0; sub(/^ +/, "", s); sub(/   *.*/, "", s); dashes(" " s); next }
			sect ~ /^Commands:/ && /^  [a-z]/ { print $1; dashes($0); next }
			sect ~ /options of tpfs:|options that tpfsd sets:/ && /^  [a-z_]/ {
				o = $1; sub(/=.*/, "", o); print o; next }
		' | sort -u)
		# The page as text: escapes of man(7) removed.
		text=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\f(..//g' -e 's/\\&//g' -e 's/\\c//g' "$page")
		n=0
		for o in $opts; do
			n=$((n + 1))
			printf '%s\n' "$text" | grep -qE -- "(^|[^-A-Za-z0-9_])$o([^-A-Za-z0-9_]|\$)" ||
				say "$name: option '$o' of --help is not in ${page##*/}"
		done
		[ $n -gt 0 ] || say "$name: no options found in --help (parser broken?)"
		total=$((total + n))
	done
	[ $fail -eq 0 ] && echo "man options: $total options of $# commands, each in its page"
	;;
*) echo "usage: test_man.sh render|options MANDIR [COMMAND...]" >&2; exit 2 ;;
esac
exit $fail
