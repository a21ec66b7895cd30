#!/bin/sh
# test_version -- every command prints the project's version with --version
# (and -V), exit 0, and lists --version in its --help (issue 25, 7).
# Arguments: VERSION, then the commands' paths.
set -u
want=$1; shift
fail=0
for cmd in "$@"; do
    name=${cmd##*/}
    for opt in --version -V; do
        out=$("$cmd" "$opt" 2>&1); rc=$?
        case "$rc:$out" in
            0:*"$want"*) ;;
            *) echo "FAIL: $name $opt: exit $rc, output: $out (want $want)"; fail=1 ;;
        esac
    done
    if ! "$cmd" --help 2>&1 | grep -q -- '--version'; then
        echo "FAIL: $name --help does not list --version"; fail=1
    fi
done
[ $fail -eq 0 ] && echo "version: $# commands print $want"
exit $fail
