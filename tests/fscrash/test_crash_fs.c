/*
 * test_crash_fs -- crash tests of tpfsd on real mounts: random plain calls
 * on the mount, the daemon killed at random moments, recovery at the next
 * mount, and a comparison with an oracle of what was acknowledged.
 *
 * A round (one crash point):
 *   1. A forked workload child makes random calls through the mount
 *      (fsc_model.c: creates, writes of 1 B..256 KiB, truncations, renames
 *      within and across directories and over existing files, unlinks,
 *      hard links, mkdir, rmdir, directory moves; now and then fsync or
 *      fdatasync of a file, fsync of a directory, syncfs), and appends to
 *      an oracle file in the test's temporary directory (outside the mount)
 *      what it began, what returned, and what a sync acknowledged.  It
 *      works relative to a descriptor of the mount's root, so once the
 *      mount is gone nothing can reach the directory underneath.
 *   2. After a random delay (0..600 ms) the test kills tpfsd with SIGKILL
 *      (tfs_kill9); the workload's calls fail with ENOTCONN/ECONNABORTED
 *      and it stops.
 *      Power-cut variant (the engine's io_sim model, emulated under the
 *      unchanged daemon by an LD_PRELOAD shim, pcut.h): tpfsd kills itself
 *      at its Nth sync of a store file (N in 1..60, before that sync takes
 *      effect) unless the timer comes first; then every write it made to a
 *      store file since that file's last fdatasync/fsync is dropped, kept,
 *      or torn (a prefix of it), and one time in three the power fails
 *      again during the recovery that follows (at one of its first syncs,
 *      up to three deep).
 *   3. tpfsd mounts the store again (recovery), the test reads the whole
 *      tree back and checks (fsc_model.c, FM1-FM3): every object is in a
 *      state it had at or after the last call that returned, after a kill
 *      -9 (a crash of the daemon alone loses nothing that returned, fs.c
 *      F4), or at or after the last acknowledged sync, after a power cut
 *      -- so every
 *      fsync'd file holds exactly the acknowledged bytes unless written
 *      again later, every rename is done or not (a file is under exactly
 *      one of its two names: never both, never neither), a create or
 *      unlink is entirely there or not; one single prefix of the calls
 *      explains every object (calls commit in order into one log); and
 *      nothing else is there.
 *   4. Most rounds: clean unmount (tpfsd exits 0), `tpfs check` clean, and
 *      mount again; otherwise the next crash hits a store that was
 *      recovered but never closed.  The tree read back is the next round's
 *      starting state.
 *
 * syncfs(2) is not a durability point: the kernel sends no request for it
 * to a FUSE daemon that is not virtiofs (README, durability), so the
 * workload calls it but the checker does not count what it acknowledged.
 *
 * returned_calls_survive_kill9: rounds of writes, creates, renames and
 * unlinks without any sync, kill -9 as soon as the last call returned,
 * remount: every call is there, byte for byte, and nothing else.
 *
 * The *_kill tests: one durability call (fsync, fdatasync, fsync of the
 * directory) after a create, a write and a rename, then kill -9 at once
 * (well within commit_interval), remount, and everything must be; and
 * commit_interval_kill: no call at all, but kill -9 only after the
 * commit interval has passed (lazy durability); everything must be
 * there.
 *
 * tpfs_sync_powercut: a new directory and files, no fsync, then
 * syncfs(2) of the mount, a power cut that drops every unsynced store
 * write: they are gone (the control: the cut has teeth).  The same with
 * `tpfs sync MOUNTPOINT`, and with `tpfs sync` run inside the mount: all
 * there, byte for byte.  commit_interval is an hour, so nothing else
 * makes them durable.
 *
 * Everything but the moment of the kill follows from the seed; the store
 * and the oracle of a failed round are kept.
 *
 * Environment
 *   TP_FSCRASH_POINTS   kill -9 crash points (default 200; without it,
 *                       TP_CRASH_POINTS/10 when that is set and larger)
 *   TP_FSCRASH_PCUT     power-cut crash points (default 60, or
 *                       TP_CRASH_POINTS/40)
 *   TP_FSCRASH_SYNC     kill -9 crash points on a -o sync mount, where
 *                       every call that returned must survive (default 30,
 *                       or TP_CRASH_POINTS/80)
 *   TP_FSCRASH_SEED     base seed (default: 1); a failure prints the seed
 *                       and round
 *   TP_FSCRASH_VERBOSE  one line per round
 *   TPFSD, TPFS_BIN     the binaries (set by meson); TPFS_PCUT_SHIM the
 *                       power-cut shim
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsc_model.h"
#include "mount_util.h"
#include "pcut.h"

#define MOUNT_OPTS "quiet,cache_size=8M" /* small: the cache evicts (STEAL), and mounts are quick */
#define MOUNT_OPTS_SYNC "quiet,cache_size=8M,sync"
#define CHILD_WAIT_S 20

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------------- */
/* A run: one mount, many rounds                                          */

typedef struct run {
	tfs_mount m;
	int live;          /* m is set up */
	int keep;          /* keep the temporary directory if the test fails */
	int pcut;          /* power-cut variant */
	int sync_mount;    /* -o sync: every call durable on return */
	const char *opts;  /* mount options */
	char oracle[400];
	char journal[400]; /* pcut: the shim's journal */
	char arm[400];     /* pcut: when present, the daemon cuts itself at that sync */
	fsc_model m0;      /* the state the next round starts from */
	uint32_t next_id;
	unsigned round;
	uint64_t seed;
	fsc_rng rng;
	/* statistics */
	uint64_t points, checks, ops, acked, syncs[4], inflight, lost_lazy, dead_before, orphans;
	uint64_t pc_writes, pc_dropped, pc_torn, pc_kept, pc_at_sync, pc_rec_cuts;
	uint64_t syncfs_bad;
	char syncfs_msg[4096];
	double t_work, t_recover, t_verify, t_check;
	char fail[12000];
} run;

static run *g_run; /* for fini: never leave a daemon or a mount behind */

static void fini(void)
{
	if (g_run && g_run->live) {
		if (g_run->m.pid)
			tfs_kill9(&g_run->m);
		if (!g_run->keep) /* a random run keeps its store and oracle for a look */
			tfs_cleanup(&g_run->m);
	}
	unsetenv("LD_PRELOAD");
}

TestSuite(fscrash, .fini = fini);

static void failf(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(run *r, const char *fmt, ...)
{
	va_list ap;
	size_t len;
	va_start(ap, fmt);
	vsnprintf(r->fail, sizeof r->fail, fmt, ap);
	va_end(ap);
	len = strlen(r->fail);
	snprintf(r->fail + len, sizeof r->fail - len,
		 "\n  seed %" PRIu64 " (TP_FSCRASH_SEED), round %u; store and oracle kept in %s", r->seed, r->round,
		 r->m.dir);
}

static int set_preload(run *r)
{
	if (!r->pcut)
		return 0;
	const char *shim = getenv("TPFS_PCUT_SHIM");
	if (!shim || access(shim, R_OK) != 0) {
		failf(r, "TPFS_PCUT_SHIM is not set to the power-cut shim (got %s)", shim ? shim : "nothing");
		return -1;
	}
	setenv("LD_PRELOAD", shim, 1);
	setenv(PCUT_ENV_JOURNAL, r->journal, 1);
	setenv(PCUT_ENV_DIR, r->m.store, 1);
	setenv(PCUT_ENV_ARM, r->arm, 1);
	return 0;
}

static int mount_again(run *r)
{
	int rc;
	if (r->pcut) {
		if (pcut_reset(r->journal) != 0) {
			failf(r, "cannot reset the journal %s", r->journal);
			return -1;
		}
		if (set_preload(r) != 0)
			return -1;
	}
	rc = tfs_remount(&r->m, r->opts);
	unsetenv("LD_PRELOAD");
	if (rc != 0)
		failf(r, "tpfsd could not mount the store again (after round %u's crash: recovery failed?)", r->round);
	return rc;
}

static int run_start(run *r, int pcut, int sync_mount, uint64_t seed)
{
	memset(r, 0, sizeof *r);
	g_run = r;
	r->pcut = pcut;
	r->sync_mount = sync_mount;
	r->opts = sync_mount ? MOUNT_OPTS_SYNC : MOUNT_OPTS;
	r->seed = seed;
	r->rng.s = fsc_mix(seed ^ 0x5eed);
	r->next_id = 1;
	fsc_model_init(&r->m0);
	if (tfs_start(&r->m, NULL, r->opts) != 0) {
		failf(r, "cannot make and mount a store (TPFSD, TPFS_BIN, /dev/fuse, fusermount3?)");
		return -1;
	}
	r->live = 1;
	snprintf(r->oracle, sizeof r->oracle, "%s/oracle", r->m.dir);
	snprintf(r->journal, sizeof r->journal, "%s/pcut-journal", r->m.dir);
	snprintf(r->arm, sizeof r->arm, "%s/pcut-arm", r->m.dir);
	if (pcut) { /* remount under the shim */
		if (tfs_stop(&r->m) != 0) {
			failf(r, "clean unmount of a new store failed");
			return -1;
		}
		return mount_again(r);
	}
	return 0;
}

/* Gives every file a crash left without its header one, so that the next
 * round's workload can identify it, and makes it durable; the model
 * follows. */
static int fix_headers(run *r)
{
	for (size_t i = 0; i < r->m0.ne; i++) {
		fsc_ent *e = &r->m0.e[i];
		fsc_obj *o = &r->m0.o[e->id];
		if (o->type != 'f' || o->size >= FSC_HDR)
			continue;
		char p[700], h[FSC_HDR + 1];
		uint32_t ids[64];
		fsc_op op;
		snprintf(p, sizeof p, "%s/%s", r->m.mnt, e->path);
		fsc_header(e->id, h);
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		/* durable: the next round starts from this state */
		if (fd < 0 || pwrite(fd, h, FSC_HDR, 0) != FSC_HDR || fsync(fd) != 0) {
			failf(r, "cannot write the header of %s: %s", e->path, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
		memset(&op, 0, sizeof op);
		op.kind = FSC_HDRW;
		op.id = e->id;
		memcpy(op.p, e->path, FSC_PATH);
		fsc_apply(&r->m0, &op, ids, 64);
	}
	return 0;
}

/* pcut: the daemon is dead; what reached its disk.  -1 when the journal
 * cannot be used; else whether the daemon cut itself at a sync. */
static int apply_powercut(run *r)
{
	pcut_stats st;
	uint64_t mode = fsc_below(&r->rng, 4); /* drop all, or keep a random part of each file's writes */
	unlink(r->arm);
	if (pcut_apply(r->journal, r->m.store, fsc_rand(&r->rng), mode == 0 ? PCUT_DROP_ALL : PCUT_RANDOM, &st) != 0) {
		failf(r, "the power cut could not be applied (see the pcut: message above)");
		return -1;
	}
	r->pc_writes += st.pending;
	r->pc_dropped += st.dropped;
	r->pc_torn += st.torn;
	r->pc_kept += st.kept;
	return st.at_sync;
}

/* pcut: the daemon cuts itself at its nth sync from now (unless the timer
 * comes first). */
static int arm(run *r, uint64_t nth)
{
	char n[32];
	int fd = open(r->arm, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), len;
	len = snprintf(n, sizeof n, "%" PRIu64 "\n", nth);
	if (fd < 0 || write(fd, n, (size_t)len) != len) {
		failf(r, "cannot write %s: %s", r->arm, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* The mount after a crash: recovery.  pcut: one time in three, the power
 * fails again during recovery, at one of its first syncs (and maybe again
 * during the recovery after that). */
static int recovery_mount(run *r)
{
	if (!r->pcut || fsc_below(&r->rng, 3) != 0)
		return mount_again(r);
	for (int depth = 0; depth < 3 && fsc_below(&r->rng, 3) != 0; depth++) {
		int rc, st, cut;
		if (arm(r, 1 + fsc_below(&r->rng, 4)) != 0 || pcut_reset(r->journal) != 0 || set_preload(r) != 0)
			return -1;
		rc = tfs_remount(&r->m, r->opts);
		unsetenv("LD_PRELOAD");
		unlink(r->arm); /* disarmed from its next sync on */
		if (rc == 0 && waitpid(r->m.pid, &st, WNOHANG) != r->m.pid)
			return 0; /* recovery was done before the armed sync */
		if (rc == 0)
			r->m.pid = 0; /* mounted, then cut before the arm went away */
		tfs_kill9(&r->m);
		if ((cut = apply_powercut(r)) < 0)
			return -1;
		if (!cut) {
			failf(r, "tpfsd could not mount the store after round %u's crash (recovery failed?)", r->round);
			return -1;
		}
		r->pc_rec_cuts++;
	}
	return mount_again(r);
}

/* One crash point.  0, or -1 with r->fail set. */
static int round_once(run *r, int verbose)
{
	fsc_oracle o;
	fsc_scan sc;
	fsc_verdict *v = NULL;
	char msg[1024] = "";
	int st, ofd, rootfd, rc = -1;
	pid_t child;
	uint64_t x = fsc_below(&r->rng, 100);
	useconds_t delay = (useconds_t)(x < 25	 ? fsc_below(&r->rng, 15000)
					: x < 90 ? 15000 + fsc_below(&r->rng, 185000)
						 : 200000 + fsc_below(&r->rng, 400000));
	double t0 = now(), t1, t2, t3;

	memset(&o, 0, sizeof o);
	memset(&sc, 0, sizeof sc);
	if ((ofd = open(r->oracle, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		failf(r, "cannot open the oracle %s: %s", r->oracle, strerror(errno));
		return -1;
	}
	if ((rootfd = open(r->m.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		failf(r, "cannot open the mount %s: %s", r->m.mnt, strerror(errno));
		close(ofd);
		return -1;
	}
	if (r->pcut && arm(r, 1 + fsc_below(&r->rng, 60)) != 0) {
		close(ofd);
		close(rootfd);
		return -1;
	}
	fflush(NULL);
	child = fork();
	if (child == 0) {
		fsc_wl_cfg c = {.rootfd = rootfd,
				.oracle = ofd,
				.seed = fsc_mix(r->seed * 1000003u + r->round),
				.next_id = r->next_id,
				.round = r->round,
				.max_files = 40,
				.max_dirs = 10};
		_exit(fsc_workload(&r->m0, &c));
	}
	close(rootfd);
	close(ofd);
	if (child < 0) {
		failf(r, "fork: %s", strerror(errno));
		return -1;
	}
	usleep(delay);
	tfs_kill9(&r->m);
	if (r->pcut) {
		int cut = apply_powercut(r);
		if (cut < 0) {
			kill(child, SIGKILL);
			waitpid(child, &st, 0);
			return -1;
		}
		r->pc_at_sync += (uint64_t)cut;
	}
	for (int i = 0; i < CHILD_WAIT_S * 100; i++) {
		if (waitpid(child, &st, WNOHANG) == child)
			goto reaped;
		usleep(10000);
	}
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	failf(r, "the workload did not stop within %d s of the daemon's death (a call hung on a dead mount)",
	      CHILD_WAIT_S);
	return -1;
reaped:
	t1 = now();
	if (fsc_oracle_read(r->oracle, &o, msg, sizeof msg) != 0) {
		failf(r, "%s", msg);
		goto out;
	}
	if (o.err_op >= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char text[512] = "a sync";
		if (o.err_op >= 0 && (size_t)o.err_op < o.n)
			fsc_op_format(&o.ops[o.err_op], text, sizeof text);
		failf(r, "a call on the live mount failed: %s: %s (errno %d)%s%s; workload status 0x%x", text,
		      strerror(o.err_no), o.err_no, msg[0] ? "; oracle: " : "", msg, (unsigned)st);
		goto out;
	}
	/* every call that returned survives: on a -o sync mount it is durable;
	 * otherwise its records reached the log files before the reply (fs.c
	 * F4), which a kill -9 of the daemon alone does not take back -- only
	 * the power cut drops what was not synced */
	if (r->sync_mount || !r->pcut) {
		if (o.acked > o.s_all)
			o.s_all = o.acked;
		if (o.acked > o.s_nosyncfs)
			o.s_nosyncfs = o.acked;
	}
	if (recovery_mount(r) != 0)
		goto out;
	t2 = now();
	if (fsc_scan_tree(r->m.mnt, &sc, msg, sizeof msg) != 0) {
		failf(r, "after recovery: %s", msg);
		goto out;
	}
	/* syncfs(2) never reaches a FUSE daemon (README, durability): it
	 * acknowledges nothing; every other sync does */
	if (!r->sync_mount && r->pcut)
		o.s_all = o.s_nosyncfs;
	v = malloc(sizeof *v);
	fsc_verify(&r->m0, &o, o.s_all, &sc, v);
	if (!v->ok && o.s_nosyncfs < o.s_all) {
		fsc_verdict *w = malloc(sizeof *w);
		fsc_verify(&r->m0, &o, o.s_nosyncfs, &sc, w);
		if (w->ok && w->prefix) { /* only syncfs's promise is broken */
			if (!r->syncfs_bad++)
				snprintf(r->syncfs_msg, sizeof r->syncfs_msg,
					 "round %u (seed %" PRIu64 "): syncfs acknowledged state %zu, other syncs state %zu; "
					 "the tree shows state %zu..%zu:\n%.3000s",
					 r->round, r->seed, o.s_all, o.s_nosyncfs, w->t_lo, w->t_hi, v->msg);
			*v = *w;
		}
		free(w);
	}
	if (!v->ok || !v->prefix) {
		failf(r, "after recovery the tree is not a state the calls went through since the last acknowledged sync "
			 "(%zu calls begun, %zu acknowledged, sync acknowledged state %zu):\n%s",
		      o.n, o.acked, o.s_all, v->msg);
		goto out;
	}
	t3 = now();
	r->points++;
	r->ops += o.n;
	r->acked += o.acked;
	for (int i = 0; i < 4; i++)
		r->syncs[i] += o.syncs[i];
	r->inflight += v->t_hi > o.acked;
	r->lost_lazy += v->t_hi < o.acked;
	r->dead_before += o.n == 0;
	r->orphans += o.held > 0;
	if (verbose)
		fprintf(stderr, "round %u: delay %u ms, %zu calls (%zu acked), sync state %zu, recovered state %zu..%zu\n",
			r->round, (unsigned)(delay / 1000), o.n, o.acked, o.s_all, v->t_lo, v->t_hi);

	/* the tree read back is the next start; then, most of the time, a
	 * clean unmount and `tpfs check` */
	fsc_model_free(&r->m0);
	fsc_scan_model(&sc, &r->m0);
	for (size_t i = 0; i < o.n; i++)
		if (o.ops[i].id >= r->next_id)
			r->next_id = o.ops[i].id + 1;
	if (fsc_below(&r->rng, 5) != 0) {
		int ex = tfs_stop(&r->m);
		if (ex != 0) {
			failf(r, "clean unmount after recovery: tpfsd exited with %d", ex);
			goto out;
		}
		if ((ex = tfs_check(&r->m)) != 0) {
			failf(r, "`tpfs check` after recovery and a clean unmount exited with %d", ex);
			goto out;
		}
		r->checks++;
		if (mount_again(r) != 0)
			goto out;
	}
	if (fix_headers(r) != 0)
		goto out;
	r->t_work += t1 - t0;
	r->t_recover += t2 - t1;
	r->t_verify += t3 - t2;
	r->t_check += now() - t3;
	rc = 0;
out:
	free(v);
	fsc_scan_free(&sc);
	fsc_oracle_free(&o);
	r->round++;
	return rc;
}

/* The end of a run: clean unmount, check, clean up. */
static int run_finish(run *r)
{
	int ex = tfs_stop(&r->m);
	if (ex != 0) {
		failf(r, "final clean unmount: tpfsd exited with %d", ex);
		return -1;
	}
	if ((ex = tfs_check(&r->m)) != 0) {
		failf(r, "final `tpfs check` exited with %d", ex);
		return -1;
	}
	r->checks++;
	tfs_cleanup(&r->m);
	r->live = 0;
	fsc_model_free(&r->m0);
	return 0;
}

static void report(const run *r, const char *name, double secs)
{
	printf("fscrash %s: %" PRIu64 " crash points in %.1f s (seed %" PRIu64 "): %" PRIu64 " calls begun, %" PRIu64
	       " acknowledged; syncs acknowledged: %" PRIu64 " fsync, %" PRIu64 " fdatasync, %" PRIu64 " fsync of a directory, %" PRIu64
	       " syncfs; %" PRIu64 " clean unmount + tpfs check; recovered trees: %" PRIu64 " with the in-flight call, %" PRIu64
	       " without some acknowledged lazy calls, %" PRIu64 " crashes before the first call, %" PRIu64
	       " with orphans held open; time: workload %.1f s, "
	       "recovery mount %.1f s, verify %.1f s, unmount+check+mount %.1f s\n",
	       name, r->points, secs, r->seed, r->ops, r->acked, r->syncs[0], r->syncs[1], r->syncs[2], r->syncs[3], r->checks,
	       r->inflight, r->lost_lazy, r->dead_before, r->orphans, r->t_work, r->t_recover, r->t_verify, r->t_check);
	if (r->pcut)
		printf("fscrash %s: %" PRIu64 " cuts at a sync of tpfsd's, the others by the timer; %" PRIu64
		       " more cuts during recovery; store writes pending at the cuts: %" PRIu64 " (%" PRIu64
		       " dropped, %" PRIu64 " torn, %" PRIu64 " kept)\n",
		       name, r->pc_at_sync, r->pc_rec_cuts, r->pc_writes, r->pc_dropped, r->pc_torn, r->pc_kept);
	fflush(stdout);
}

static void random_crashes(const char *name, int pcut, int sync_mount, uint64_t points)
{
	static run r;
	uint64_t seed = env_u64("TP_FSCRASH_SEED", 1) + (pcut ? 7777 : 0) + (sync_mount ? 3333 : 0);
	int verbose = getenv("TP_FSCRASH_VERBOSE") != NULL;
	double t0 = now();

	if (run_start(&r, pcut, sync_mount, seed) != 0)
		cr_assert_fail("%s", r.fail);
	r.keep = 1;
	while (r.points < points)
		if (round_once(&r, verbose) != 0) {
			report(&r, name, now() - t0);
			cr_assert_fail("%s", r.fail);
		}
	if (run_finish(&r) != 0)
		cr_assert_fail("%s", r.fail);
	report(&r, name, now() - t0);
	cr_expect(r.points >= points, "ran %" PRIu64 " crash points of %" PRIu64, r.points, points);

}

/* Crash points: name's value, else TP_CRASH_POINTS / div (scripts/test
 * --long sets 100000), but never fewer than dflt. */
static uint64_t points(const char *name, uint64_t dflt, uint64_t div)
{
	uint64_t p = env_u64(name, 0);
	if (p)
		return p;
	p = env_u64("TP_CRASH_POINTS", 0) / div;
	return p > dflt ? p : dflt;
}

/* No Criterion timeout on these three: their length follows the
 * environment, meson's timeout (scaled by scripts/test --long) bounds them,
 * and every wait inside is bounded. */
Test(fscrash, kill9_random)
{
	random_crashes("kill9", 0, 0, points("TP_FSCRASH_POINTS", 200, 10));
}

Test(fscrash, powercut_random)
{
	random_crashes("powercut", 1, 0, points("TP_FSCRASH_PCUT", 60, 40));
}

/* -o sync: every call that returned must survive, synced or not. */
Test(fscrash, kill9_sync_mount)
{
	random_crashes("kill9 -o sync", 0, 1, points("TP_FSCRASH_SYNC", 30, 80));
}

/* ---------------------------------------------------------------------- */
/* Each durability call, then kill -9 at once                             */

enum { VIA_FSYNC, VIA_FDATASYNC, VIA_FSYNCDIR, VIA_INTERVAL };

static void sync_then_kill(int via, int reps)
{
	static run r;
	static const char *const names[] = {"fsync", "fdatasync", "fsync of the directory",
					    "waiting 1.5 s (commit_interval is 1 s)"};
	static const char *const tags[] = {"fsync", "fdatasync", "fsyncdir", "commit_interval"};
	if (run_start(&r, 0, 0, 1) != 0)
		cr_assert_fail("%s", r.fail);
	for (int i = 0; i < reps; i++) {
		char p[700], q[700], buf[9000], want[9000];
		int fd;
		ssize_t n;
		snprintf(want, sizeof want, "rep %d via %s ", i, names[via]);
		for (size_t k = strlen(want); k < 8500; k++)
			want[k] = (char)('a' + (k * 7 + (size_t)i) % 26);
		want[8500] = 0;
		/* a new file, written; an old one renamed; then the sync */
		snprintf(p, sizeof p, "%s/new%d", r.m.mnt, i);
		fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		cr_assert(fd >= 0, "create %s: %s", p, strerror(errno));
		cr_assert(write(fd, want, 8500) == 8500, "write %s: %s", p, strerror(errno));
		if (i > 0) {
			snprintf(q, sizeof q, "%s/new%d", r.m.mnt, i - 1);
			snprintf(p, sizeof p, "%s/old%d", r.m.mnt, i - 1);
			cr_assert(rename(q, p) == 0, "rename %s: %s", q, strerror(errno));
		}
		int rc;
		switch (via) {
		case VIA_FSYNC: rc = fsync(fd); break;
		case VIA_FDATASYNC: rc = fdatasync(fd); break;
		case VIA_FSYNCDIR: {
			int dfd = open(r.m.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			rc = dfd < 0 ? -1 : fsync(dfd);
			if (dfd >= 0)
				close(dfd);
			break;
		}
		default: /* lazy durability: the tick makes it durable within commit_interval */
			rc = usleep(1500000);
			break;
		}
		cr_assert(rc == 0, "%s: %s", names[via], strerror(errno));
		tfs_kill9(&r.m); /* at once after the sync: well within commit_interval (1 s) */
		close(fd);
		cr_assert(tfs_remount(&r.m, r.opts) == 0, "mount after kill -9 failed");
		r.points++;
		snprintf(p, sizeof p, "%s/new%d", r.m.mnt, i);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		cr_assert(fd >= 0,
			  "%s returned 0, then kill -9 of tpfsd: the file it made durable (created, 8500 bytes written, "
			  "then %s) is gone after recovery: %s (repetition %d)",
			  names[via], names[via], strerror(errno), i);
		n = read(fd, buf, sizeof buf);
		close(fd);
		cr_assert(n == 8500 && !memcmp(buf, want, 8500),
			  "%s returned 0, then kill -9: the file holds %zd bytes%s, not the 8500 written (repetition %d)",
			  names[via], n, n == 8500 ? " that differ" : "", i);
		if (i > 0) {
			snprintf(q, sizeof q, "%s/new%d", r.m.mnt, i - 1);
			snprintf(p, sizeof p, "%s/old%d", r.m.mnt, i - 1);
			cr_assert(access(p, F_OK) == 0 && access(q, F_OK) != 0,
				  "%s returned 0 after a rename, then kill -9: the rename is not there after recovery "
				  "(repetition %d)",
				  names[via], i);
		}
	}
	cr_assert(run_finish(&r) == 0, "%s", r.fail);
	printf("fscrash %s_kill: %" PRIu64 " crash points\n", tags[via], r.points);
	fflush(stdout);
}

Test(fscrash, fsync_kill, .timeout = 120) { sync_then_kill(VIA_FSYNC, 8); }
Test(fscrash, fdatasync_kill, .timeout = 120) { sync_then_kill(VIA_FDATASYNC, 8); }
Test(fscrash, fsyncdir_kill, .timeout = 120) { sync_then_kill(VIA_FSYNCDIR, 8); }
Test(fscrash, commit_interval_kill, .timeout = 120) { sync_then_kill(VIA_INTERVAL, 4); }

/* ---------------------------------------------------------------------- */
/* Calls that returned, then kill -9 at once: all of them survive          */

/* Files f00..f11 in the root and f12..f23 in d/: the model of what the
 * calls that returned made. */
#define RK_SLOTS 24
#define RK_ROUNDS 50

typedef struct rk_file {
	int exists;
	size_t size;
	unsigned char *data;
} rk_file;

static void rk_path(const run *r, int slot, char *out, size_t n)
{
	snprintf(out, n, "%s/%sf%02d", r->m.mnt, slot < RK_SLOTS / 2 ? "" : "d/", slot);
}

static void rk_fill(unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(fsc_mix(seed + i / 8) >> (8 * (i % 8)));
}

/* One random call on the mount, no fsync; the model follows it once it
 * returned.  A description goes to what (the last call is named when a
 * check fails). */
static void rk_call(run *r, rk_file *fs, uint64_t tag, char *what, size_t wn)
{
	static const size_t sizes[] = {1, 100, 4096, 9000, 40000, 70000}; /* >= 32 KiB: ordered data */
	char p[700], q[700];
	int a = (int)fsc_below(&r->rng, RK_SLOTS), b = (int)fsc_below(&r->rng, RK_SLOTS);
	uint64_t k = fsc_below(&r->rng, 10);
	rk_path(r, a, p, sizeof p);
	rk_path(r, b, q, sizeof q);
	if (!fs[a].exists) { /* create and write */
		size_t n = sizes[fsc_below(&r->rng, 6)];
		unsigned char *d = malloc(n);
		rk_fill(d, n, tag);
		int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		cr_assert(fd >= 0, "create %s: %s", p, strerror(errno));
		cr_assert(write(fd, d, n) == (ssize_t)n, "write %s: %s", p, strerror(errno));
		cr_assert(close(fd) == 0, "close %s: %s", p, strerror(errno));
		free(fs[a].data);
		fs[a] = (rk_file){1, n, d};
		snprintf(what, wn, "create and write %zu bytes to %s", n, p);
	} else if (k < 4) { /* write into an existing file, maybe past its end */
		size_t n = sizes[fsc_below(&r->rng, 6)], off = fsc_below(&r->rng, fs[a].size + 1);
		unsigned char *d = malloc(n);
		rk_fill(d, n, tag);
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		cr_assert(fd >= 0, "open %s: %s", p, strerror(errno));
		cr_assert(pwrite(fd, d, n, (off_t)off) == (ssize_t)n, "pwrite %s: %s", p, strerror(errno));
		cr_assert(close(fd) == 0, "close %s: %s", p, strerror(errno));
		if (off + n > fs[a].size) {
			fs[a].data = realloc(fs[a].data, off + n);
			fs[a].size = off + n;
		}
		memcpy(fs[a].data + off, d, n);
		free(d);
		snprintf(what, wn, "write %zu bytes at %zu into %s", n, off, p);
	} else if (k < 8 && a != b) { /* rename, over an existing file or not, maybe across directories */
		cr_assert(rename(p, q) == 0, "rename %s %s: %s", p, q, strerror(errno));
		free(fs[b].data);
		fs[b] = fs[a];
		fs[a] = (rk_file){0, 0, NULL};
		snprintf(what, wn, "rename %s to %s", p, q);
	} else { /* unlink */
		cr_assert(unlink(p) == 0, "unlink %s: %s", p, strerror(errno));
		free(fs[a].data);
		fs[a] = (rk_file){0, 0, NULL};
		snprintf(what, wn, "unlink %s", p);
	}
}

/* Every file of the model is there with its bytes, and nothing else. */
static void rk_verify(run *r, const rk_file *fs, int round, int calls, const char *last)
{
	static unsigned char buf[1 << 20];
	char p[700];
	int found = 0;
	for (int s = 0; s < RK_SLOTS; s++) {
		rk_path(r, s, p, sizeof p);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (!fs[s].exists) {
			cr_assert(fd < 0 && errno == ENOENT,
				  "round %d: %s is there after kill -9 and recovery, but a call that returned had "
				  "removed it (%d calls, the last: %s)",
				  round, p, calls, last);
			continue;
		}
		cr_assert(fd >= 0,
			  "round %d: %s is gone after kill -9 and recovery, though the calls that made it returned "
			  "(%d calls without fsync, the last: %s): %s",
			  round, p, calls, last, strerror(errno));
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		cr_assert(n == (ssize_t)fs[s].size && !memcmp(buf, fs[s].data, fs[s].size),
			  "round %d: %s holds %zd bytes%s after kill -9 and recovery, not the %zu that calls which "
			  "returned wrote (%d calls, the last: %s)",
			  round, p, n, n == (ssize_t)fs[s].size ? " that differ" : "", fs[s].size, calls, last);
		found++;
	}
	for (int d = 0; d < 2; d++) { /* nothing else */
		char dir[400];
		int n = 0;
		snprintf(dir, sizeof dir, "%s%s", r->m.mnt, d ? "/d" : "");
		DIR *dp = opendir(dir);
		cr_assert(dp, "opendir %s: %s", dir, strerror(errno));
		for (struct dirent *e; (e = readdir(dp)) != NULL;)
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "d"))
				n++;
		closedir(dp);
		found -= n;
	}
	cr_assert_eq(found, 0, "round %d: after recovery the tree holds %d more entries than the calls made", round,
		     -found);
}

/* Writes, creates, renames and unlinks with no fsync; kill -9 of tpfsd as
 * soon as the last one returned; mount again: every call that returned is
 * there (fs.c F4: a crash of the daemon alone loses none of them).  Rounds
 * of 1..40 calls, each round on the tree the last one left. */
Test(fscrash, returned_calls_survive_kill9, .timeout = 180)
{
	static run r;
	static rk_file fs[RK_SLOTS];
	char d[400], last[2048] = "none";
	uint64_t calls = 0, tag = 1;
	double t0 = now();
	if (run_start(&r, 0, 0, env_u64("TP_FSCRASH_SEED", 1) + 4444) != 0)
		cr_assert_fail("%s", r.fail);
	snprintf(d, sizeof d, "%s/d", r.m.mnt);
	cr_assert(mkdir(d, 0755) == 0, "mkdir %s: %s", d, strerror(errno));
	for (int round = 0; round < RK_ROUNDS; round++) {
		int n = 1 + (int)fsc_below(&r.rng, round % 4 == 0 ? 40 : 8);
		for (int i = 0; i < n; i++)
			rk_call(&r, fs, tag++ * 1000003u, last, sizeof last);
		tfs_kill9(&r.m); /* at once: well within commit_interval (1 s) */
		cr_assert(tfs_remount(&r.m, r.opts) == 0, "round %d: mount after kill -9 failed", round);
		r.points++;
		calls += (uint64_t)n;
		rk_verify(&r, fs, round, n, last);
	}
	cr_assert(run_finish(&r) == 0, "%s", r.fail);
	for (int s = 0; s < RK_SLOTS; s++)
		free(fs[s].data);
	printf("fscrash returned_calls_kill9: %" PRIu64 " kill -9 points after %" PRIu64
	       " calls without fsync, every one there after recovery (%.1f s)\n",
	       r.points, calls, now() - t0);
	fflush(stdout);
}

/* ---------------------------------------------------------------------- */
/* tpfs sync, then a power cut                                            */

/* commit_interval of an hour: nothing becomes durable by itself during the
 * test, so only a sync can have saved what a power cut finds. */
#define SYNC_TEST_OPTS MOUNT_OPTS ",commit_interval=3600000"
#define ST_FILES 4

static const size_t st_sizes[ST_FILES] = {100, 8500, 100 * 1024, 3}; /* 100 KiB: blocks stored in place */

static void st_fill(char *buf, size_t n, int round, int k)
{
	for (size_t j = 0; j < n; j++)
		buf[j] = (char)('a' + (j * 13 + (size_t)round * 7 + (size_t)k) % 26);
}

/* Round i: a new directory s<i> holding f0..f3 and a subdirectory, and
 * f3 renamed to g3; no fsync, fdatasync or fsyncdir. */
static void st_make(const run *r, int i)
{
	static char buf[100 * 1024];
	char p[700], q[700];
	snprintf(p, sizeof p, "%s/s%d", r->m.mnt, i);
	cr_assert(mkdir(p, 0755) == 0, "mkdir %s: %s", p, strerror(errno));
	snprintf(p, sizeof p, "%s/s%d/sub", r->m.mnt, i);
	cr_assert(mkdir(p, 0700) == 0, "mkdir %s: %s", p, strerror(errno));
	for (int k = 0; k < ST_FILES; k++) {
		snprintf(p, sizeof p, "%s/s%d/f%d", r->m.mnt, i, k);
		int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		cr_assert(fd >= 0, "create %s: %s", p, strerror(errno));
		st_fill(buf, st_sizes[k], i, k);
		cr_assert(write(fd, buf, st_sizes[k]) == (ssize_t)st_sizes[k], "write %s: %s", p, strerror(errno));
		cr_assert(close(fd) == 0, "close %s: %s", p, strerror(errno));
	}
	snprintf(p, sizeof p, "%s/s%d/f3", r->m.mnt, i);
	snprintf(q, sizeof q, "%s/s%d/g3", r->m.mnt, i);
	cr_assert(rename(p, q) == 0, "rename %s: %s", p, strerror(errno));
}

/* After the power cut and recovery: 1 when round i's tree is there whole,
 * 0 when its directory is gone; anything in between fails the test. */
static int st_there(const run *r, int i, const char *how)
{
	static char buf[100 * 1024 + 1], want[100 * 1024];
	char p[700];
	struct stat sb;
	snprintf(p, sizeof p, "%s/s%d", r->m.mnt, i);
	if (stat(p, &sb) != 0) {
		cr_assert(errno == ENOENT, "stat %s after recovery: %s", p, strerror(errno));
		return 0;
	}
	snprintf(p, sizeof p, "%s/s%d/sub", r->m.mnt, i);
	cr_assert(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode), "after %s and a power cut: %s is missing: %s", how, p,
		  strerror(errno));
	for (int k = 0; k < ST_FILES; k++) {
		snprintf(p, sizeof p, "%s/s%d/%c%d", r->m.mnt, i, k == 3 ? 'g' : 'f', k);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		cr_assert(fd >= 0, "after %s and a power cut: %s is missing: %s", how, p, strerror(errno));
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		st_fill(want, st_sizes[k], i, k);
		cr_assert(n == (ssize_t)st_sizes[k] && !memcmp(buf, want, st_sizes[k]),
			  "after %s and a power cut: %s holds %zd bytes%s, not the %zu written", how, p, n,
			  n == (ssize_t)st_sizes[k] ? " that differ" : "", st_sizes[k]);
	}
	snprintf(p, sizeof p, "%s/s%d/f3", r->m.mnt, i);
	cr_assert(access(p, F_OK) != 0, "after %s and a power cut: %s is there: the rename was undone", how, p);
	return 1;
}

/* kill -9, every store write since its file's last sync lost, mount again. */
static void st_powercut(run *r)
{
	pcut_stats st;
	tfs_kill9(&r->m);
	cr_assert(pcut_apply(r->journal, r->m.store, 1, PCUT_DROP_ALL, &st) == 0,
		  "the power cut could not be applied (see the pcut: message above)");
	cr_assert(mount_again(r) == 0, "%s", r->fail);
	r->points++;
}

/* README, durability: sync(1) and syncfs(2) never reach a FUSE daemon, and
 * `tpfs sync MOUNTPOINT` makes everything on the mount durable.  Round 0
 * shows the power cut has teeth: after syncfs of the mount it still takes
 * a new directory and its files.  Rounds 1 and 2: after `tpfs sync M` (and
 * `tpfs sync` with no argument, run inside the mount) everything is there
 * after the same power cut. */
Test(fscrash, tpfs_sync_powercut, .timeout = 120)
{
	static run r;
	const char *tpfs = getenv("TPFS_BIN");
	cr_assert(tpfs && access(tpfs, X_OK) == 0, "TPFS_BIN is not set to the tpfs tool (got %s)",
		  tpfs ? tpfs : "nothing");
	if (run_start(&r, 1, 0, 1) != 0)
		cr_assert_fail("%s", r.fail);
	r.opts = SYNC_TEST_OPTS;
	cr_assert(tfs_stop(&r.m) == 0, "clean unmount failed");
	cr_assert(mount_again(&r) == 0, "%s", r.fail);

	/* 0: syncfs(2), as sync -f does: nothing reaches the daemon */
	st_make(&r, 0);
	int fd = open(r.m.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(fd >= 0 && syncfs(fd) == 0, "syncfs %s: %s", r.m.mnt, strerror(errno));
	close(fd);
	st_powercut(&r);
	cr_assert(st_there(&r, 0, "syncfs") == 0,
		  "a new directory and its files, with only syncfs(2) of the mount after them, survived a power cut "
		  "that drops every unsynced write: the power cut has no teeth, and the rounds with `tpfs sync` "
		  "below prove nothing");

	/* 1: tpfs sync MOUNTPOINT */
	st_make(&r, 1);
	cr_assert(tfs_sh(&r.m, "'%s' sync '%s'", tpfs, r.m.mnt) == 0, "tpfs sync %s failed", r.m.mnt);
	st_powercut(&r);
	cr_assert(st_there(&r, 1, "tpfs sync MOUNTPOINT") == 1,
		  "`tpfs sync %s` returned 0, then a power cut: the directory s1 made before it is gone", r.m.mnt);

	/* 2: tpfs sync, run in a directory of the mount */
	st_make(&r, 2);
	cr_assert(tfs_sh(&r.m, "cd s2/sub && env -u TPFS_MOUNT '%s' sync", tpfs) == 0, "tpfs sync (in %s/s2/sub) failed",
		  r.m.mnt);
	st_powercut(&r);
	cr_assert(st_there(&r, 2, "tpfs sync") == 1,
		  "`tpfs sync` in %s/s2/sub returned 0, then a power cut: the directory s2 made before it is gone",
		  r.m.mnt);
	cr_assert(st_there(&r, 1, "tpfs sync MOUNTPOINT") == 1, "s1 is gone after a later power cut");

	/* not a tpfs mount: said so, exit 1 */
	cr_assert(tfs_sh(&r.m, "'%s' sync '%s' 2>&1 | grep -q 'not on a tpfs mount$'", tpfs, r.m.dir) == 0,
		  "`tpfs sync %s` (no tpfs mount) does not say \"not on a tpfs mount\"", r.m.dir);
	cr_assert(tfs_sh(&r.m, "'%s' sync '%s' 2>/dev/null", tpfs, r.m.dir) == 1,
		  "`tpfs sync %s` (no tpfs mount) does not exit 1", r.m.dir);
	cr_assert(run_finish(&r) == 0, "%s", r.fail);
	printf("fscrash tpfs_sync_powercut: %" PRIu64 " power cuts: syncfs lost a new tree, tpfs sync kept it\n",
	       r.points);
	fflush(stdout);
}
