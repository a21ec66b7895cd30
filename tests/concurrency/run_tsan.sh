#!/usr/bin/env bash
# tests/concurrency/run_tsan.sh -- the concurrent TPC-B workload (tpcb_mt)
# and the daemon (tpfsd) under ThreadSanitizer.
#
# Criterion does not run under TSan, so this builds build-tsan/ (meson,
# -Db_sanitize=thread) and runs the plain program tpcb_mt with 2, 8 and 32
# threads, a hot-spot configuration (deadlocks, STEAL and checkpoints all
# the time) and crash runs (children under the io crash simulator, then
# recovery).  Any TSan report (data race, lock-order inversion, ...) makes
# the run fail: halt_on_error=1, exitcode=66; a report in a crash child
# makes the parent fail too.  tpcb_mt's own checks (exact oracle, TPC-B
# sums) count as well.
#
# Then the daemon: the Criterion suites that drive real mounts (tx: user
# transactions, isolation through warm caches, commits racing readers;
# tx_clients: real programs, members and daemons killed; fs integrity:
# concurrent writers, rename storms; fs fsx and posix without --quick)
# run from the plain build (--plain-dir, default build/) with TPFSD
# pointing at build-tsan/'s tpfsd, so every FUSE worker, the reaper, the
# invalidation and checkpoint threads run instrumented.  Each daemon
# writes its reports to a log of its own (log_path); any report fails the
# run, and so does a failing test.  (detect_deadlocks=0 here: the daemon
# can hold more mutexes at once than the 64 TSan's deadlock detector
# tracks -- the frames of a page run being written -- and TSan aborts.)
#
# Ends with the line "N passed, M failed"; exits 1 if anything failed
# (build included), 0 otherwise.
#
# Needs the TSan runtime: on Debian 12 gcc-12 pulls it in (libgcc-12-dev
# ships libtsan.so and depends on libtsan2).
#
# Usage: tests/concurrency/run_tsan.sh [--build-dir DIR] [--plain-dir DIR] [--quick]
#   --quick   fewer transactions and crash points (about a third of the
#             time); of the daemon's suites only tx, tx_clients and fs
#             integrity
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2

dir=build-tsan
plain=build
quick=0
while (($# > 0)); do
    case "$1" in
        --build-dir) dir=$2; shift ;;
        --plain-dir) plain=$2; shift ;;
        --quick) quick=1 ;;
        -h | --help) sed -n '2,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run_tsan: unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

pass=0
fail=0
failures=()

summary() {
    echo
    for f in "${failures[@]}"; do
        echo "failed: $f"
    done
    echo "$pass passed, $fail failed"
    if ((fail > 0)); then
        exit 1
    fi
    exit 0
}

opts=(-Db_sanitize=thread -Db_lundef=false -Dtests=true -Dwerror=true --buildtype=debugoptimized)
configure() {
    if [[ -f "$dir/meson-private/coredata.dat" ]]; then
        meson setup --reconfigure "$dir" "${opts[@]}" >/dev/null ||
            meson setup --wipe "$dir" "${opts[@]}" >/dev/null
    else
        meson setup "$dir" "${opts[@]}" >/dev/null
    fi
}
echo "== configure and build $dir/ (ThreadSanitizer)"
if ! configure || ! ninja -C "$dir" tests/concurrency/tpcb_mt fsd/fuse/tpfsd; then
    fail=$((fail + 1))
    failures+=("build of $dir/ tpcb_mt and tpfsd (is the TSan runtime, libtsan2, installed?)")
    summary
fi
exe=$dir/tests/concurrency/tpcb_mt

# report_thread_leaks=0 is also tpcb_mt's default: a crash child dies with
# its threads running, by design.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 report_thread_leaks=0"

scale() { # scale N: N, or a third of it with --quick
    if ((quick)); then echo $((($1 + 2) / 3)); else echo "$1"; fi
}

hot=(--branches 1 --tellers 4 --accounts 16 --per-page 2 --page-size 1024 --cache 8
     --seg-size 65536 --ckpt-bytes 8192)

runs=(
    "--threads 2 --txns $(scale 600) --ckpt-bytes 65536 --seed 2"
    "--threads 8 --txns $(scale 300) --ckpt-bytes 65536 --seed 8"
    "--threads 32 --txns $(scale 60) --ckpt-bytes 65536 --seed 32"
    "--threads 8 --txns $(scale 300) ${hot[*]} --seed 88"
    "--threads 8 --txns $(scale 300) --seg-size 65536 --ckpt-bytes 32768 --background --seed 18"
    "--threads 8 --txns $(scale 120) --crash $(scale 9) --ckpt-bytes 32768 --seed 81"
    "--threads 32 --txns $(scale 30) --crash $(scale 6) --ckpt-bytes 32768 --seed 321"
    "--threads 8 --txns $(scale 100) --crash $(scale 9) ${hot[*]} --seed 89"
)

log=$(mktemp /tmp/run_tsan.XXXXXX)
trap 'rm -f "$log"' EXIT
for args in "${runs[@]}"; do
    echo "== tpcb_mt $args"
    start=$SECONDS
    # shellcheck disable=SC2086 # args is a list of words
    timeout 600 "$exe" $args >"$log" 2>&1
    rc=$?
    if ((rc != 0)) && grep -q "unexpected memory mapping" "$log"; then
        # gcc 12's TSan cannot map its shadow with a high mmap ASLR entropy
        # (newer kernels): run it again without address randomization
        echo "   (TSan cannot map its shadow memory here: again with setarch -R)"
        # shellcheck disable=SC2086
        timeout 600 setarch "$(uname -m)" -R "$exe" $args >"$log" 2>&1
        rc=$?
    fi
    tail -n 1 "$log" | sed 's/^/   /'
    if ((rc == 0)) && ! grep -q "ThreadSanitizer" "$log"; then
        pass=$((pass + 1))
        echo "   ok ($((SECONDS - start)) s)"
    else
        fail=$((fail + 1))
        if grep -q "WARNING: ThreadSanitizer" "$log"; then
            why="ThreadSanitizer report"
        elif ((rc == 124)); then
            why="timed out"
        else
            why="exit $rc"
        fi
        failures+=("tpcb_mt $args: $why")
        echo "   FAILED: $why; its output:"
        sed 's/^/   | /' "$log" | head -n 200
    fi
done

# ---- the daemon under TSan, driven by the plain build's mount tests ----
daemon_suites=("tx/test_tx" "tx/test_tx_clients -j1" "fs/test_fs_integrity")
if ((!quick)); then
    daemon_suites+=("fs/test_fs_fsx" "fs/test_fs_posix")
fi
reports=$(mktemp -d /tmp/run_tsan_daemon.XXXXXX)
trap 'rm -f "$log"; rm -rf "$reports"' EXIT
for t in "${daemon_suites[@]}"; do
    read -r t targs <<<"$t"
    exe=$plain/tests/$t
    echo "== tpfsd under TSan: $exe"
    if [[ ! -x "$exe" || ! -x "$plain/tools/tpfs" ]]; then
        fail=$((fail + 1))
        failures+=("$exe: not built (build $plain/ first: scripts/test does)")
        echo "   FAILED: $exe is not built"
        continue
    fi
    start=$SECONDS
    rm -f "$reports"/tsan.*
    tsan_dir=$(realpath "$dir") plain_dir=$(realpath "$plain")
    # shellcheck disable=SC2086 # targs: the test's arguments, a list of words
    TSAN_OPTIONS="halt_on_error=0 detect_deadlocks=0 report_thread_leaks=0 log_path=$reports/tsan" \
        TPFSD="$tsan_dir/fsd/fuse/tpfsd" TPFS_DAEMON_SANITIZED=1 TPFS_BIN="$plain_dir/tools/tpfs" TX_BIN="$plain_dir/tools" \
        TPFS_SRC="$PWD" TPFS_SLOWLOG_SHIM="$plain_dir/tests/tx/libtpfs_slowlog.so" \
        timeout 900 setarch "$(uname -m)" -R "$exe" $targs >"$log" 2>&1
    rc=$?
    grep -E '^\[====\] Synthesis' "$log" | sed 's/^/   /'
    nrep=$(find "$reports" -name 'tsan.*' | wc -l)
    if ((rc == 0 && nrep == 0)); then
        pass=$((pass + 1))
        echo "   ok ($((SECONDS - start)) s, no ThreadSanitizer report)"
    else
        fail=$((fail + 1))
        if ((nrep > 0)); then
            failures+=("tpfsd under $exe: $nrep daemon(s) with ThreadSanitizer reports")
            echo "   FAILED: ThreadSanitizer reports from $nrep daemon(s); the first:"
            sed 's/^/   | /' "$(find "$reports" -name 'tsan.*' | head -n 1)" | head -n 80
        else
            failures+=("tpfsd under $exe: exit $rc")
            echo "   FAILED: exit $rc; the failing tests:"
            grep -E '^\[(FAIL|----)\]' "$log" | sed 's/^/   | /' | head -n 60
        fi
    fi
done
summary
