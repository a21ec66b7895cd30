#!/bin/sh
# test_options -- tpfsd refuses a mount option out of its range and says
# the range (issue 25, 6): -o commit_interval=0 names the valid interval,
# -o cache_size=1 is refused (the engine would quietly run with 8 pages)
# and names the minimum.  Refused before any store or mount point is
# touched: exit 2, nothing mounted.
# Arguments: the tpfsd binary.
set -u
tpfsd=$1
fail=0
expect() { # OPTION EXIT PATTERN
    out=$("$tpfsd" /nonexistent-store /nonexistent-mnt -f -o "$1" 2>&1); rc=$?
    if [ "$rc" != "$2" ]; then
        echo "FAIL: tpfsd -o $1: exit $rc, expected $2; output: $out"; fail=1
    fi
    case "$out" in
        *$3*) ;;
        *) echo "FAIL: tpfsd -o $1 does not say \"$3\": $out"; fail=1 ;;
    esac
}
expect commit_interval=0 2 'commit_interval=0: milliseconds, from 1 to 86400000'
expect commit_interval=86400001 2 'from 1 to 86400000'
expect cache_size=1 2 'cache_size=1: bytes, at least 1M'
expect cache_size=1023K 2 'at least 1M'
# in range: refused only later, for the missing store
expect cache_size=1M 1 'nonexistent-store'
expect commit_interval=86400000 1 'nonexistent-store'
[ $fail -eq 0 ] && echo "options: out-of-range values refused with their range"
exit $fail
