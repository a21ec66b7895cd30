#!/bin/sh
# test_progress -- a recovery shows how far it is on a terminal, and only
# there (issue 25, 9): tpfs check of a store tpfsd left by kill -9, under a
# pseudo-terminal (script(1)) with TPFS_PROGRESS_MS=0, prints
# "tpfs: recovery: analysis N%"; through a pipe it prints no such line.
# Environment: TPFSD, TPFS_BIN (set by meson).
set -u
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill -9 "$pid" 2>/dev/null; fusermount3 -u -z "$d/m" 2>/dev/null; rm -rf "$d"; exit 1; }
command -v script >/dev/null || { echo "FAIL: script(1) is missing (bsdutils)"; exit 1; }
d=$(mktemp -d /tmp/tpfs-progress-XXXXXX)
mkdir "$d/m"
"$TPFS_BIN" mkfs "$d/S" >/dev/null || fail "mkfs"
"$TPFSD" "$d/S" "$d/m" -f -o commit_interval=60000 2>"$d/err" &
pid=$!
i=0
until mountpoint -q "$d/m"; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "the mount did not come up: $(cat "$d/err")"
    sleep 0.1
done
for n in $(seq 1 40); do head -c 3000 /dev/urandom > "$d/m/f$n" || fail "write f$n"; done
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)" "$d/m" || fail "fsync"
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
fusermount3 -u -z "$d/m" || fail "lazy unmount of the dead mount"

out=$(TPFS_PROGRESS_MS=0 script -qec "'$TPFS_BIN' check '$d/S'" /dev/null 2>&1) || fail "tpfs check under a terminal: $out"
echo "$out" | tr '\r' '\n' | grep -q 'tpfs: recovery: analysis *[0-9]*%' ||
    fail "no progress line on a terminal: $out"
out=$(TPFS_PROGRESS_MS=0 "$TPFS_BIN" check "$d/S" 2>&1) || fail "tpfs check through a pipe: $out"
echo "$out" | grep -q 'recovery: analysis' && fail "a progress line through a pipe: $out"
echo "$out" | grep -q 'clean' || fail "check not clean: $out"
rm -rf "$d"
echo "progress: shown on a terminal, not through a pipe"
