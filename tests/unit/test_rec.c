/*
 * test_rec -- ARIES restart recovery and checkpoints through tp.h:
 * recovery scans only from the last checkpoint, losers are rolled back and
 * winners kept, a loser older than the checkpoint keeps its log, recovery
 * run twice gives the same state (R4), a clean open writes nothing, a
 * crash in the middle of a rollback or of recovery itself is finished by
 * the next open, a page torn by a crash is rebuilt from its full-page image,
 * and a checkpoint racing with updates misses none of them (R5).
 *
 * Crashes are tp_crash_close (nothing more written: the log buffer and the
 * dirty pages are lost) or, where a crash must land inside an operation, a
 * forked child under the io simulator that crashes at its Nth sync and
 * loses, keeps or tears each unsynced write under a seed.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "io_sim.h"
#include "log.h"
#include "op.h"
#include "txn.h"
#include "store_util.h"
#include "tp.h"
#include "util.h"

static char tdir[64], sdir[128];
static uint32_t body;

static void mkfs_with(uint64_t seg)
{
	tp_options o;
	su_options(&o, 4096, seg, 0);
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
	body = 4096 - 16;
}

static void setup(void)
{
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "rec"), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
	mkfs_with(1u << 20);
}

static void teardown(void) { su_rmtree(tdir); }

static tp_env *open_env(size_t cache)
{
	tp_options o;
	tp_env *env;
	su_options(&o, 0, 0, cache);
	o.ckpt_log_bytes = UINT64_MAX / 2; /* checkpoints only when the test asks */
	o.ckpt_ms = 0;
	int rc = tp_open(sdir, &o, &env);
	cr_assert_eq(rc, 0, "tp_open: %d %s", rc, tp_errmsg());
	return env;
}

static void fill(unsigned char *p, size_t n, unsigned v)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(v * 29 + i * 3 + (i >> 7));
}

/* Allocates n pages with distinct bodies in one committed transaction. */
static void make_pages(tp_env *env, uint64_t *p, int n)
{
	tp_txn *t;
	unsigned char b[4096];
	cr_assert_eq(tp_begin(env, &t), 0);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(tp_page_alloc(t, 1, &p[i]), 0, "%s", tp_errmsg());
		fill(b, body, (unsigned)i + 1);
		cr_assert_eq(tp_page_write(t, p[i], 0, b, body), 0);
	}
	cr_assert_eq(tp_commit(t, 0), 0);
}

static void write1(tp_txn *t, uint64_t pg, uint32_t off, const char *s)
{
	int rc = tp_page_write(t, pg, off, s, (uint32_t)strlen(s));
	cr_assert_eq(rc, 0, "write page %" PRIu64 ": %s", pg, tp_errmsg());
}

static void expect(tp_env *env, uint64_t pg, uint32_t off, const char *s)
{
	char b[256];
	size_t n = strlen(s);
	cr_assert_eq(tp_page_read(env, pg, off, b, (uint32_t)n), 0, "%s", tp_errmsg());
	cr_assert(memcmp(b, s, n) == 0, "page %" PRIu64 " at %" PRIu32 ": '%.*s', expected '%s'", pg, off, (int)n, b, s);
}

static su_snap snap(tp_env *env, uint64_t npages)
{
	su_snap s;
	cr_assert_eq(su_snap_take(env, npages, &s), 0, "%s", tp_errmsg());
	return s;
}

static void same(const su_snap *want, const su_snap *got, const char *what)
{
	char why[256];
	cr_assert(su_snap_equal(want, got, why, sizeof why), "%s: %s", what, why);
}

TestSuite(rec, .init = setup, .fini = teardown, .timeout = 60);

Test(rec, clean_open_recovers_nothing_and_writes_nothing)
{
	uint64_t p[3];
	tp_env *env = open_env(0);
	make_pages(env, p, 3);
	cr_assert_eq(tp_close(env), 0);
	su_tree *before = su_tree_take(sdir);
	env = open_env(0);
	tp_stats st;
	tp_stats_get(env, &st);
	cr_assert_leq(st.rec_records, 1, "only the checkpoint record is scanned");
	cr_assert_eq(st.rec_redone, 0);
	cr_assert_eq(st.rec_losers, 0);
	cr_assert_eq(st.checkpoints, 0, "no checkpoint at a clean open");
	tp_crash_close(env);
	su_tree *after = su_tree_take(sdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "a clean open changed the store: %s", why);
	su_tree_free(before);
	su_tree_free(after);
}

/* A checkpoint taken while a transaction had logged a change, then a
 * crash with no record after the checkpoint: the store still needs
 * recovery (undo, and redo from before the checkpoint), so it is not
 * clean, and a read-only open must not take it for clean. */
Test(rec, a_fuzzy_checkpoint_last_is_not_clean)
{
	tp_env *env = open_env(64);
	uint64_t p[1];
	tp_txn *t;
	make_pages(env, p, 1);
	cr_assert_eq(tp_checkpoint(env), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	write1(t, p[0], 10, "in flight");
	cr_assert_eq(tp_checkpoint(env), 0, "%s", tp_errmsg()); /* names t, and the page t dirtied */
	tp_crash_close(env);
	tp_options o;
	su_options(&o, 0, 0, 64);
	o.readonly = 1;
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
	cr_assert(!tp_clean(env), "a store whose last checkpoint names an open transaction counts as clean");
	tp_close(env);
	env = open_env(64);
	cr_assert(tp_clean(env), "recovery's own checkpoint should leave the store clean");
	tp_close(env);
}

Test(rec, recovery_scans_from_the_last_checkpoint)
{
	enum { NP = 20, NTX = 300 };
	uint64_t p[NP];
	char s[32];
	tp_env *env = open_env(0);
	make_pages(env, p, NP);
	for (int i = 0; i < NTX; i++) {
		tp_txn *t;
		cr_assert_eq(tp_begin(env, &t), 0);
		snprintf(s, sizeof s, "v%05d", i);
		write1(t, p[i % NP], 8 * (uint32_t)(i / NP), s);
		cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0);
	}
	cr_assert_eq(tp_checkpoint(env), 0);
	for (int i = 0; i < 3; i++) {
		tp_txn *t;
		cr_assert_eq(tp_begin(env, &t), 0);
		write1(t, p[i], 2000, "after the checkpoint");
		cr_assert_eq(tp_commit(t, 0), 0);
	}
	tp_stats st;
	tp_stats_get(env, &st);
	cr_assert_gt(st.log_records, 2 * NTX);
	tp_crash_close(env);

	env = open_env(0);
	tp_stats_get(env, &st);
	cr_assert_gt(st.rec_records, 3, "the changes after the checkpoint are scanned");
	cr_assert_lt(st.rec_records, 20, "recovery scanned %" PRIu64 " records: only from the checkpoint",
		     st.rec_records);
	cr_assert_gt(st.rec_redone, 0, "the lost page changes are redone");
	cr_assert_leq(st.rec_redone, st.rec_records);
	cr_assert_eq(st.rec_losers, 0);
	for (int i = 0; i < NTX; i++) {
		snprintf(s, sizeof s, "v%05d", i);
		expect(env, p[i % NP], 8 * (uint32_t)(i / NP), s);
	}
	for (int i = 0; i < 3; i++)
		expect(env, p[i], 2000, "after the checkpoint");
	cr_assert_eq(tp_close(env), 0);
}

/* Checkpoints free old segments; tp_open keeps as many of them, renamed
 * ahead, as an interval between checkpoints fills, so that appends do not
 * make new segments (a segment of zeros written and synced while every
 * appender waits) once the log has reached its steady size: at most one or
 * two more as the checkpoints' phase drifts across segment boundaries.
 * With two spares, as before, every interval made two. */
Test(rec, steady_checkpoints_reuse_every_log_segment)
{
	enum { NP = 16, SEGB = 65536 };
	uint64_t p[NP];
	unsigned char b[4096];
	tp_options o;
	tp_env *env;
	su_rmtree(sdir);
	mkfs_with(SEGB);
	su_options(&o, 0, 0, 0);
	o.ckpt_log_bytes = 4 * SEGB;
	o.ckpt_ms = 0;
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
	make_pages(env, p, NP);
	tp_stats st, warm = {0};
	for (int i = 0;; i++) {
		tp_txn *t;
		cr_assert_eq(tp_begin(env, &t), 0);
		fill(b, 3000, (unsigned)i);
		cr_assert_eq(tp_page_write(t, p[i % NP], 0, b, 3000), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0);
		tp_stats_get(env, &st);
		if (st.checkpoints == 3 && !warm.checkpoints)
			warm = st; /* the log has its steady size */
		if (st.checkpoints >= 33)
			break;
	}
	cr_assert_gt(st.log_bytes - warm.log_bytes, 100 * SEGB, "the run appended %" PRIu64 " bytes",
		     st.log_bytes - warm.log_bytes);
	cr_assert_leq(st.log_segs_made - warm.log_segs_made, 2,
		      "after the third checkpoint, appends made %" PRIu64 " new segments (%" PRIu64 " recycled)",
		      st.log_segs_made - warm.log_segs_made, st.log_segs_recycled - warm.log_segs_recycled);
	cr_assert_geq(st.log_segs_recycled - warm.log_segs_recycled, 100);
	/* the spares are bounded: the live log and as many spares, each the
	 * interval's 4 segments and 2 partly filled */
	int files = 0;
	for (uint64_t i = 0; i < 1000; i++) {
		char path[512];
		cr_assert_eq(su_segpath(sdir, i, path, sizeof path), 0);
		files += access(path, F_OK) == 0;
	}
	cr_assert_leq(files, 2 * (4 + 2), "%d segment files", files);
	cr_assert_eq(tp_close(env), 0);
}

/* opt.background: the checkpoints a commit finds due are taken by the
 * engine's thread (the commit only wakes it), and a store idle since a
 * change gets one after ckpt_ms; the store recovers as ever.  Without it,
 * the commits take every one and an idle store gets none.  At least
 * ncommits commits of 3 KB are made, the last one durable; more, up to 20
 * times as many, while fewer than min_ckpts checkpoints have been counted
 * (the thread may be starved on a busy machine, and one checkpoint that
 * ends after the log grew past the next is not followed by another until
 * the log grows again).  st is read after the commits, idle after up to
 * 1 s more. */
static void bg_run(int background, uint64_t ckpt_bytes, uint32_t ckpt_ms, uint64_t min_ckpts, int ncommits,
		   tp_stats *st, tp_stats *idle)
{
	enum { NP = 8 };
	uint64_t p[NP];
	unsigned char b[4096];
	tp_options o;
	tp_env *env;
	su_rmtree(sdir);
	mkfs_with(1u << 20);
	su_options(&o, 0, 0, 0);
	o.ckpt_log_bytes = ckpt_bytes;
	o.ckpt_ms = ckpt_ms;
	o.background = background;
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
	make_pages(env, p, NP);
	int n = 0, last = 0;
	memset(st, 0, sizeof *st);
	do {
		tp_txn *t;
		last = n + 1 >= ncommits && (st->checkpoints >= min_ckpts || n + 1 >= 20 * ncommits);
		cr_assert_eq(tp_begin(env, &t), 0);
		fill(b, 3000, (unsigned)n);
		cr_assert_eq(tp_page_write(t, p[n % NP], 0, b, 3000), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_commit(t, last ? 0 : TP_COMMIT_NOSYNC), 0);
		if (++n % 64 == 0 || n + 1 == ncommits)
			tp_stats_get(env, st);
	} while (!last);
	tp_stats_get(env, st);
	for (int i = 0; i < 20; i++) { /* idle for up to 1 s */
		usleep(50000);
		tp_stats_get(env, idle);
		if (idle->checkpoints > st->checkpoints)
			break;
	}
	tp_crash_close(env);
	env = open_env(0);
	tp_stats s;
	tp_stats_get(env, &s);
	fill(b, 3000, (unsigned)n - 1);
	char got[3000];
	cr_assert_eq(tp_page_read(env, p[(n - 1) % NP], 0, got, 3000), 0);
	if (memcmp(got, b, 3000) != 0) {
		int found = -1; /* which earlier commit to the page the crash left */
		for (int i = n - 1 - NP; i >= 0 && found < 0; i -= NP) {
			fill(b, 3000, (unsigned)i);
			if (!memcmp(got, b, 3000))
				found = i;
		}
		cr_assert_fail("the last commit (durable, %d of %d) did not survive the crash (background %d, "
			       "checkpoints %" PRIu64 " before it; the page holds commit %d); recovery: %" PRIu64
			       " records scanned, %" PRIu64 " redone, %" PRIu64 " losers, %" PRIu64 " bytes of torn tail cut",
			       n - 1, n, background, idle->checkpoints, found, s.rec_records, s.rec_redone,
			       s.rec_losers, s.rec_cut_bytes);
	}
	cr_assert_eq(tp_close(env), 0);
}

Test(rec, background_thread_takes_the_checkpoints)
{
	tp_stats st, idle;
	/* by log size (no clock: ckpt_ms 0) */
	bg_run(1, 256 * 1024, 0, 2, 2000, &st, &idle);
	cr_assert_geq(st.checkpoints, 2, "2000 to 40000 commits of 3 KB: %" PRIu64 " checkpoints", st.checkpoints);
	cr_assert_eq(st.checkpoints_bg, st.checkpoints, "%" PRIu64 " of %" PRIu64 " by the thread",
		     st.checkpoints_bg, st.checkpoints);
	bg_run(0, 256 * 1024, 0, 0, 2000, &st, &idle);
	cr_assert_geq(st.checkpoints, 5);
	cr_assert_eq(st.checkpoints_bg, 0, "without it, the commits take them");

	/* by time, on an idle store */
	bg_run(1, UINT64_MAX / 2, 100, 0, 5, &st, &idle);
	cr_assert_eq(st.checkpoints, 0);
	cr_assert_eq(idle.checkpoints, 1, "a store idle since a change gets a checkpoint");
	cr_assert_eq(idle.checkpoints_bg, 1);
	bg_run(0, UINT64_MAX / 2, 100, 0, 5, &st, &idle);
	cr_assert_eq(idle.checkpoints, 0, "without the thread, none while idle");
}

Test(rec, losers_rolled_back_winners_kept)
{
	uint64_t p[4];
	tp_env *env = open_env(0);
	make_pages(env, p, 4);
	su_snap s0 = snap(env, 8);
	tp_txn *t1, *t2, *t3, *t4;
	cr_assert_eq(tp_begin(env, &t1), 0);
	cr_assert_eq(tp_begin(env, &t2), 0);
	cr_assert_eq(tp_begin(env, &t3), 0);
	cr_assert_eq(tp_begin(env, &t4), 0);
	write1(t1, p[0], 0, "winner");
	write1(t2, p[1], 0, "loser");
	write1(t3, p[2], 0, "aborted");
	write1(t2, p[3], 100, "loser again");
	uint64_t q;
	cr_assert_eq(tp_page_alloc(t4, 1, &q), 0);
	write1(t4, q, 0, "loser's new page");
	cr_assert_eq(tp_abort(t3), 0);
	cr_assert_eq(tp_commit(t1, 0), 0);
	cr_assert_eq(tp_sync(env), 0); /* the losers' records are durable */
	tp_crash_close(env);

	env = open_env(0);
	tp_stats st;
	tp_stats_get(env, &st);
	cr_assert_eq(st.rec_losers, 2);
	cr_assert_geq(st.rec_undone, 4, "one CLR per loser update at least (%" PRIu64 ")", st.rec_undone);
	expect(env, p[0], 0, "winner");
	su_snap s1 = snap(env, 8);
	/* the winner's page differs from s0: patch s0 with it */
	memcpy(s0.data + p[0] * s0.body, "winner", 6);
	same(&s0, &s1, "after recovery");
	int a;
	cr_assert_eq(tp_page_allocated(env, q, &a), 0);
	cr_assert_not(a, "the loser's allocation is undone");
	tp_crash_close(env);

	/* R4: recovering again changes nothing */
	env = open_env(0);
	tp_stats_get(env, &st);
	cr_assert_eq(st.rec_losers, 0, "the losers were finished for good");
	su_snap s2 = snap(env, 8);
	same(&s1, &s2, "recovered twice");
	cr_assert_eq(tp_close(env), 0);
	su_snap_free(&s0);
	su_snap_free(&s1);
	su_snap_free(&s2);
}

Test(rec, lazy_commit_lost_entirely_or_kept_entirely)
{
	uint64_t p[2];
	tp_env *env = open_env(0);
	make_pages(env, p, 2);
	su_snap s0 = snap(env, 4);
	tp_txn *t;
	cr_assert_eq(tp_begin(env, &t), 0);
	write1(t, p[0], 0, "lazy one");
	write1(t, p[1], 0, "lazy two");
	cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0);
	tp_crash_close(env); /* before any flush */
	env = open_env(0);
	su_snap s1 = snap(env, 4);
	same(&s0, &s1, "an unflushed lazy commit is gone entirely");
	cr_assert_eq(tp_begin(env, &t), 0);
	write1(t, p[0], 0, "lazy one");
	write1(t, p[1], 0, "lazy two");
	cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0);
	cr_assert_eq(tp_sync(env), 0);
	tp_crash_close(env);
	env = open_env(0);
	expect(env, p[0], 0, "lazy one");
	expect(env, p[1], 0, "lazy two");
	cr_assert_eq(tp_close(env), 0);
	su_snap_free(&s0);
	su_snap_free(&s1);
}

/* An open transaction's records before a checkpoint stay in the log (R3),
 * however much log follows, so recovery can still roll it back. */
Test(rec, old_loser_keeps_its_log)
{
	uint64_t p[8];
	su_rmtree(sdir);
	mkfs_with(65536);
	tp_env *env = open_env(0);
	make_pages(env, p, 8);
	su_snap s0 = snap(env, 12);
	tp_txn *old, *t;
	cr_assert_eq(tp_begin(env, &old), 0);
	write1(old, p[0], 0, "old loser");
	unsigned char b[4096];
	for (int i = 0; i < 100; i++) { /* ~12 segments of log */
		cr_assert_eq(tp_begin(env, &t), 0);
		fill(b, body, (unsigned)i);
		cr_assert_eq(tp_page_write(t, p[1 + i % 7], 0, b, body), 0);
		cr_assert_eq(tp_abort(t), 0);
		if (i % 20 == 19)
			cr_assert_eq(tp_checkpoint(env), 0, "%s", tp_errmsg());
	}
	write1(old, p[7], 0, "old loser, later");
	cr_assert_eq(tp_checkpoint(env), 0);
	cr_assert_eq(tp_sync(env), 0);
	tp_crash_close(env);
	env = open_env(0);
	tp_stats st;
	tp_stats_get(env, &st);
	cr_assert_eq(st.rec_losers, 1);
	su_snap s1 = snap(env, 12);
	same(&s0, &s1, "the old loser is rolled back");
	cr_assert_eq(tp_close(env), 0);
	/* and with it gone, the log is truncated at the next checkpoint */
	su_snap_free(&s0);
	su_snap_free(&s1);
}

Test(rec, close_with_an_open_transaction_rolls_it_back_at_open)
{
	uint64_t p[2];
	tp_env *env = open_env(0);
	make_pages(env, p, 2);
	tp_txn *t1, *t2;
	cr_assert_eq(tp_begin(env, &t1), 0);
	write1(t1, p[0], 0, "committed");
	cr_assert_eq(tp_commit(t1, 0), 0);
	cr_assert_eq(tp_begin(env, &t2), 0);
	write1(t2, p[1], 0, "left open");
	cr_assert_eq(tp_close(env), 0); /* t2 is never used again */
	env = open_env(0);
	expect(env, p[0], 0, "committed");
	char b[9];
	cr_assert_eq(tp_page_read(env, p[1], 0, b, 9), 0);
	cr_assert(memcmp(b, "left open", 9) != 0, "an open transaction is not committed by close");
	cr_assert_eq(tp_close(env), 0);
}

/* Keeps a copy of the store under tdir/name (each crash run starts again
 * from it), and puts it back in place of the store. */
static void store_save(char *copy, size_t n, const char *name)
{
	char cmd[512];
	snprintf(copy, n, "%s/%s", tdir, name);
	snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", sdir, copy);
	cr_assert_eq(system(cmd), 0);
}

static void store_restore(const char *copy)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", sdir, copy, sdir);
	cr_assert_eq(system(cmd), 0);
}

/* ---- crashes inside operations (forked children under the simulator) ---- */

enum { RB_PAGES = 30 };

typedef struct rb_arg {
	const char *store;
	uint64_t seed, k;
	const uint64_t *p;
} rb_arg;

/* Puts the saved store copy back and runs fn in a child under the io
 * simulator (seed, crash at the k-th sync of its own counting), which must
 * die in the simulated power cut. */
static void run_crash_child(void (*fn)(void *), const char *copy, uint64_t seed, uint64_t k, const uint64_t *p)
{
	store_restore(copy);
	rb_arg a = {.store = sdir, .seed = seed, .k = k, .p = p};
	int ex = su_run_child(fn, &a);
	cr_assert_eq(ex, IOSIM_CRASH_EXIT, "seed %" PRIu64 " k %" PRIu64 ": child exit %d", seed, k, ex);
}

static void child_open(const char *dir, size_t cache, tp_env **env)
{
	tp_options o;
	su_options(&o, 0, 0, cache);
	o.ckpt_log_bytes = UINT64_MAX / 2;
	o.ckpt_ms = 0;
	SU_CK(tp_open(dir, &o, env) == 0);
}

/* Child: a transaction rewrites every page (a tiny pool: the log is
 * flushed as dirty pages are stolen), then aborts; the k-th sync from the
 * abort's start crashes, so part of the rollback's CLRs may be durable. */
static void rollback_child(void *arg)
{
	rb_arg *a = arg;
	tp_env *env;
	tp_txn *t;
	unsigned char b[4096];
	iosim_install(a->seed);
	child_open(a->store, 8, &env);
	SU_CK(tp_begin(env, &t) == 0);
	for (int i = 0; i < RB_PAGES; i++) {
		memset(b, 0xc0 + i % 16, sizeof b);
		SU_CK(tp_page_write(t, a->p[i], 0, b, 4096 - 16) == 0);
	}
	SU_CK(tp_sync(env) == 0);
	iosim_crash_at_sync(iosim_syncs() + a->k);
	tp_abort(t);
	iosim_crash_now(); /* the abort finished first: crash anyway */
}

static uint64_t count_clrs(const char *dir)
{
	store *st;
	log_mgr *lg;
	log_scan *s;
	log_rec r;
	uint64_t n = 0;
	cr_assert_eq(su_log_open_ro(dir, &st, &lg), 0, "%s", tp_errmsg());
	cr_assert_eq(log_scan_open(lg, log_start(lg), &s), 0);
	while (log_scan_next(s, &r) == 0)
		if ((r.flags & LOG_CLR) && r.type != 5 /* NTA */)
			n++;
	log_scan_close(s);
	log_close(lg);
	store_close(st);
	return n;
}

Test(rec, crash_during_rollback_is_finished_by_recovery, .timeout = 120)
{
	uint64_t p[RB_PAGES];
	tp_env *env = open_env(0);
	make_pages(env, p, RB_PAGES);
	cr_assert_eq(tp_close(env), 0);
	env = open_env(0);
	su_snap s0 = snap(env, RB_PAGES + 4);
	tp_crash_close(env);
	/* a copy of the clean store to restart each run from */
	char clean[160];
	store_save(clean, sizeof clean, "clean");
	int partial = 0;
	for (uint64_t seed = 1; seed <= 3; seed++)
		for (uint64_t k = 1; k <= 8; k++) {
			run_crash_child(rollback_child, clean, seed, k, p);
			uint64_t clrs = count_clrs(sdir);
			if (clrs > 0 && clrs < RB_PAGES)
				partial++;
			env = open_env(8);
			su_snap s1 = snap(env, RB_PAGES + 4);
			char why[256];
			int ok = su_snap_equal(&s0, &s1, why, sizeof why);
			su_snap_free(&s1);
			cr_assert(ok, "seed %" PRIu64 " k %" PRIu64 " (%" PRIu64 " CLRs durable): %s", seed, k, clrs, why);
			tp_crash_close(env);
			env = open_env(8);
			s1 = snap(env, RB_PAGES + 4);
			ok = su_snap_equal(&s0, &s1, why, sizeof why);
			su_snap_free(&s1);
			cr_assert(ok, "seed %" PRIu64 " k %" PRIu64 ": second recovery: %s", seed, k, why);
			cr_assert_eq(tp_close(env), 0);
		}
	cr_assert_gt(partial, 0, "some crash landed in the middle of a rollback");
	su_snap_free(&s0);
}

/* Child: a transaction allocates and fills RB_PAGES pages, then aborts; the
 * k-th sync from the abort's start crashes.  Each allocation's undo is two
 * CLRs (zero the page, free its bit): a crash between them must still free
 * the page. */
static void alloc_rollback_child(void *arg)
{
	rb_arg *a = arg;
	tp_env *env;
	tp_txn *t;
	unsigned char b[4096];
	uint64_t p;
	iosim_install(a->seed);
	child_open(a->store, 8, &env);
	SU_CK(tp_begin(env, &t) == 0);
	for (int i = 0; i < RB_PAGES; i++) {
		memset(b, 0xa0 + i % 16, sizeof b);
		SU_CK(tp_page_alloc(t, 1, &p) == 0);
		SU_CK(tp_page_write(t, p, 0, b, 4096 - 16) == 0);
	}
	SU_CK(tp_sync(env) == 0);
	iosim_crash_at_sync(iosim_syncs() + a->k);
	tp_abort(t);
	iosim_crash_now();
}

Test(rec, crash_during_rollback_of_allocations_frees_every_page, .timeout = 120)
{
	tp_env *env = open_env(0);
	cr_assert_eq(tp_close(env), 0);
	char clean[160];
	store_save(clean, sizeof clean, "clean");
	int points = 0;
	for (uint64_t seed = 1; seed <= 3; seed++)
		for (uint64_t k = 1; k <= 12; k++) {
			run_crash_child(alloc_rollback_child, clean, seed, k, NULL);
			points++;
			env = open_env(8);
			/* every page the loser had is free again: nothing is leaked */
			int rc = tp_verify(env, 0, NULL);
			cr_assert_eq(rc, 0, "seed %" PRIu64 " k %" PRIu64 ": %s", seed, k, tp_errmsg());
			for (uint64_t pg = 2; pg < 2 + 2 * RB_PAGES; pg++) {
				int al;
				cr_assert_eq(tp_page_allocated(env, pg, &al), 0);
				cr_assert_not(al, "seed %" PRIu64 " k %" PRIu64 ": page %" PRIu64 " is still allocated", seed, k,
					      pg);
			}
			cr_assert_eq(tp_close(env), 0);
		}
	fprintf(stderr, "rec: %d crash points during rollbacks of allocations\n", points);
}

/* Child: opens a crashed store (recovery rolls back a big loser through a
 * tiny pool) and crashes at recovery's k-th sync. */
static void recovery_child(void *arg)
{
	rb_arg *a = arg;
	tp_env *env;
	iosim_install(a->seed);
	iosim_crash_at_sync(a->k);
	child_open(a->store, 8, &env);
	iosim_crash_now();
}

Test(rec, crash_during_recovery_is_finished_by_the_next, .timeout = 120)
{
	uint64_t p[RB_PAGES];
	unsigned char b[4096];
	tp_env *env = open_env(0);
	make_pages(env, p, RB_PAGES);
	cr_assert_eq(tp_close(env), 0);
	env = open_env(8);
	su_snap s0 = snap(env, RB_PAGES + 4);
	tp_txn *t, *w;
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_begin(env, &w), 0);
	for (int i = 0; i < RB_PAGES; i++) {
		memset(b, 0xd0 + i % 16, sizeof b);
		cr_assert_eq(tp_page_write(t, p[i], 100, b, 3000), 0);
	}
	write1(w, p[0], 3500, "winner");
	cr_assert_eq(tp_commit(w, 0), 0);
	tp_crash_close(env);
	memcpy(s0.data + p[0] * s0.body + 3500, "winner", 6);
	char crashed[160];
	store_save(crashed, sizeof crashed, "crashed");
	int crashes = 0;
	for (uint64_t k = 1; k <= 12; k++) {
		run_crash_child(recovery_child, crashed, k, k, NULL);
		crashes++;
		env = open_env(8);
		su_snap s1 = snap(env, RB_PAGES + 4);
		char why[256];
		int ok = su_snap_equal(&s0, &s1, why, sizeof why);
		su_snap_free(&s1);
		cr_assert(ok, "crash at recovery sync %" PRIu64 ": %s", k, why);
		cr_assert_eq(tp_close(env), 0);
	}
	cr_assert_gt(crashes, 0);
	su_snap_free(&s0);
}

/* Child: a clean store is opened, a page changed and committed, then a
 * checkpoint writes it back and crashes at the page file's sync: the
 * unsynced page write is kept, lost or torn under the seed. */
static void torn_child(void *arg)
{
	rb_arg *a = arg;
	tp_env *env;
	tp_txn *t;
	iosim_install(a->seed);
	child_open(a->store, 0, &env);
	SU_CK(tp_begin(env, &t) == 0);
	SU_CK(tp_page_write(t, a->p[0], 1000, "changed after a clean open", 26) == 0);
	SU_CK(tp_commit(t, 0) == 0);
	iosim_crash_at_sync(iosim_syncs() + 1); /* the page file's sync in the checkpoint */
	tp_checkpoint(env);
	iosim_crash_now();
}

Test(rec, torn_page_is_rebuilt_from_its_image, .timeout = 120)
{
	uint64_t p[1];
	tp_env *env = open_env(0);
	make_pages(env, p, 1);
	cr_assert_eq(tp_close(env), 0);
	char clean[160], data[200];
	store_save(clean, sizeof clean, "clean");
	su_path(data, sizeof data, sdir, "data");
	int torn = 0;
	/* (40 seeds: the page write is one of several pending writes each
	 * seed applies, drops or tears; 12 tore it none of the times once the
	 * log's durable mark became one of them) */
	for (uint64_t seed = 1; seed <= 40; seed++) {
		run_crash_child(torn_child, clean, seed, 0, p);
		unsigned char pg[4096];
		cr_assert_eq(su_raw_read(data, p[0] * 4096, pg, sizeof pg, NULL), 0);
		if (util_get32(pg) != util_crc32c(0, pg + 4, 4092))
			torn++;
		tp_options o;
		su_options(&o, 0, 0, 0);
		tp_env *e2;
		int rc = tp_open(sdir, &o, &e2);
		cr_assert_eq(rc, 0, "seed %" PRIu64 ": recovery failed on a page torn after a clean open: %s", seed,
			     tp_errmsg());
		expect(e2, p[0], 1000, "changed after a clean open");
		cr_assert_eq(tp_close(e2), 0);
	}
	cr_assert_gt(torn, 0, "some seed tore the page write");
}

/* ---- R5: a checkpoint racing with updates ---- */

/* many pages, so that most are clean when the checkpoint lists them: a
 * record logged before the list but marking its page after would be lost */
#define RC_PAGES 1024
#define RC_SLOTS 4

typedef struct race {
	tp_env *env;
	uint64_t p[RC_PAGES];
	uint64_t val[RC_PAGES][RC_SLOTS]; /* committed values (the oracle) */
	uint64_t n;
	int stop, err;
} race;

static void *race_writer(void *arg)
{
	race *r = arg;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		tp_txn *t;
		uint64_t i = r->n++, v = i + 1;
		int pg = (int)(i % RC_PAGES), sl = (int)(i / RC_PAGES % RC_SLOTS);
		unsigned char b[8];
		util_put64(b, v);
		if (tp_begin(r->env, &t) || tp_page_write(t, r->p[pg], 8 * (uint32_t)sl, b, 8) ||
		    tp_commit(t, TP_COMMIT_NOSYNC)) {
			r->err = 1;
			break;
		}
		r->val[pg][sl] = v;
	}
	return NULL;
}

Test(rec, checkpoint_racing_with_updates_misses_none, .timeout = 120)
{
	static race r;
	tp_env *env = open_env(0);
	memset(&r, 0, sizeof r);
	unsigned char z[8 * RC_SLOTS];
	memset(z, 0, sizeof z);
	tp_txn *t;
	cr_assert_eq(tp_begin(env, &t), 0);
	for (int i = 0; i < RC_PAGES; i++)
		cr_assert_eq(tp_page_alloc(t, 1, &r.p[i]), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	for (int trial = 0; trial < 25; trial++) {
		pthread_t th;
		r.env = env;
		r.stop = 0;
		cr_assert_eq(pthread_create(&th, NULL, race_writer, &r), 0);
		struct timespec ts = {0, 300000};
		nanosleep(&ts, NULL);
		int rc = tp_checkpoint(env);
		__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
		cr_assert_eq(rc, 0, "%s", tp_errmsg());
		cr_assert_not(r.err, "%s", tp_errmsg());
		cr_assert_eq(tp_sync(env), 0);
		tp_crash_close(env);
		env = open_env(0);
		for (int pg = 0; pg < RC_PAGES; pg++) {
			unsigned char b[8 * RC_SLOTS];
			cr_assert_eq(tp_page_read(env, r.p[pg], 0, b, sizeof b), 0);
			for (int sl = 0; sl < RC_SLOTS; sl++)
				cr_assert_eq(util_get64(b + 8 * sl), r.val[pg][sl],
					     "trial %d: page %" PRIu64 " slot %d: a committed update was lost", trial,
					     r.p[pg], sl);
		}
	}
	cr_assert_gt(r.n, 100, "the writer ran");
	cr_assert_eq(tp_close(env), 0);
}

/* ---- R5, deterministically ----
 *
 * A checkpoint must not miss an update whose record is appended before the
 * checkpoint takes its snapshot while the page is marked dirty after it.
 * The io backend below stretches that window: the page file's sync in the
 * checkpoint's write-back waits until the writer is inside the log append
 * of its record (the append creates a log segment, whose sync sleeps while
 * the record is already in the log buffer).  The writer's record is placed
 * to end exactly at a segment end, so that its own append creates the next
 * spare segment. */

static const io_backend *rp_posix;
static io_backend rp_be;
static pthread_mutex_t rp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rp_cv = PTHREAD_COND_INITIALIZER;
static int rp_arm_data, rp_arm_log, rp_in_data_sync, rp_in_log_sync;

typedef struct rp_h {
	void *h;
	char *path;
} rp_h;

static int rp_open(const char *path, int flags, void **h)
{
	rp_h *s = calloc(1, sizeof *s);
	int rc;
	if (!s || !(s->path = strdup(path))) {
		free(s);
		return ENOMEM;
	}
	if ((rc = rp_posix->open(path, flags, &s->h)) != 0) {
		free(s->path);
		free(s);
		return rc;
	}
	*h = s;
	return 0;
}

static int rp_close(void *h)
{
	rp_h *s = h;
	int rc = rp_posix->close(s->h);
	free(s->path);
	free(s);
	return rc;
}

static int rp_pread(void *h, void *b, size_t l, uint64_t o, size_t *d) { return rp_posix->pread(((rp_h *)h)->h, b, l, o, d); }
static int rp_pwrite(void *h, const void *b, size_t l, uint64_t o, size_t *d)
{
	return rp_posix->pwrite(((rp_h *)h)->h, b, l, o, d);
}
static int rp_size(void *h, uint64_t *o) { return rp_posix->size(((rp_h *)h)->h, o); }
static int rp_truncate(void *h, uint64_t s) { return rp_posix->truncate(((rp_h *)h)->h, s); }

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* waits (mu held) until *flag, at most 5 s; 0 on time out */
static int rp_wait(int *flag)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	while (!*flag)
		if (pthread_cond_timedwait(&rp_cv, &rp_mu, &until) != 0)
			return *flag;
	return 1;
}

static int rp_sync(void *h)
{
	rp_h *s = h;
	pthread_mutex_lock(&rp_mu);
	if (rp_arm_data && ends_with(s->path, "/data")) {
		rp_arm_data = 0;
		rp_in_data_sync = 1;
		pthread_cond_broadcast(&rp_cv);
		rp_wait(&rp_in_log_sync); /* the writer's record is in the log now */
	} else if (rp_arm_log && ends_with(s->path, "/log.tmp")) {
		rp_arm_log = 0;
		rp_in_log_sync = 1;
		pthread_cond_broadcast(&rp_cv);
		pthread_mutex_unlock(&rp_mu);
		struct timespec ts = {0, 150000000}; /* the checkpoint takes its snapshot now */
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&rp_mu);
	}
	pthread_mutex_unlock(&rp_mu);
	return rp_posix->sync(s->h);
}

typedef struct rp_arg {
	su_engine *e;
	uint64_t P, F;
	uint32_t off;
	unsigned char val[8];
	int err;
	char why[200];
} rp_arg;

static uint64_t rp_rsize(uint32_t len) { return (64 + 4 + 2 * (uint64_t)len + 7) & ~(uint64_t)7; }

static void *rp_writer(void *arg)
{
	rp_arg *a = arg;
	log_mgr *lg = a->e->lg;
	const uint64_t seg = 65536, fpi = 64 + 4096;
	unsigned char junk[4080];
	txn *t;
	char segp[300];
	memset(junk, 0x3c, sizeof junk);
	pthread_mutex_lock(&rp_mu);
	int ok = rp_wait(&rp_in_data_sync);
	pthread_mutex_unlock(&rp_mu);
	if (!ok || txn_begin(a->e->tm, &t) != 0) {
		snprintf(a->why, sizeof a->why, "the checkpoint never reached its page-file sync");
		a->err = 1;
		return NULL;
	}
	/* the filler page's first change after the horizon logs its image */
	if (op_page_set(t, a->F, 16, junk, 1) != 0)
		goto fail;
	for (int guard = 0; guard < 200; guard++) {
		uint64_t end = log_end(lg), rem = seg - end % seg;
		su_segpath(sdir, end / seg + 2, segp, sizeof segp);
		int spare2 = su_raw_size(segp) >= 0;
		/* R (after P's image) must end exactly at the segment end, and
		 * that must create the next spare segment */
		if (!spare2 && rem >= fpi + 72 && rem - fpi <= 68 + 2 * 4080) {
			uint64_t s = rem - fpi;
			uint32_t len = (uint32_t)((s - 68) / 2);
			if (rp_rsize(len) != s)
				goto fail;
			a->off = 16 + 4080 - len;
			memset(junk, 0x5a, len);
			memcpy(a->val, "RACED!!!", 8);
			memcpy(junk + len - 8, a->val, 8);
			pthread_mutex_lock(&rp_mu);
			rp_arm_log = 1;
			pthread_mutex_unlock(&rp_mu);
			if (op_page_set(t, a->P, a->off, junk, len) != 0)
				goto fail;
			if (rp_arm_log) {
				snprintf(a->why, sizeof a->why, "the record did not create a segment (end %" PRIu64 ")",
					 log_end(lg));
				a->err = 1;
			}
			return txn_commit(t, 0) == 0 ? NULL : (a->err = 1, NULL);
		}
		/* filler: shrink the room to ~8000 bytes, or move to a new segment */
		uint64_t want = rem > fpi + 72 + 8000 ? rem - 8000 : rem + 8;
		uint64_t flen = want < 72 ? 2 : (want - 68) / 2;
		if (flen > 4080)
			flen = 4080;
		if (op_page_set(t, a->F, 16, junk, (uint32_t)flen) != 0)
			goto fail;
	}
fail:
	snprintf(a->why, sizeof a->why, "writer: %s", tp_errmsg());
	a->err = 1;
	return NULL;
}

Test(rec, checkpoint_snapshot_does_not_miss_a_racing_update, .timeout = 60)
{
	su_engine e;
	su_rmtree(sdir);
	mkfs_with(65536);
	cr_assert_eq(su_engine_open(sdir, 256, &e), 0, "%s", tp_errmsg());
	txn *t;
	uint64_t P, F;
	cr_assert_eq(txn_begin(e.tm, &t), 0);
	cr_assert_eq(op_page_alloc(t, 1, &P), 0);
	cr_assert_eq(op_page_alloc(t, 1, &F), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(su_engine_checkpoint(&e), 0);

	rp_posix = io_posix_backend();
	rp_be = *rp_posix;
	rp_be.open = rp_open;
	rp_be.close = rp_close;
	rp_be.pread = rp_pread;
	rp_be.pwrite = rp_pwrite;
	rp_be.sync = rp_sync;
	rp_be.pwrite_durable = NULL; /* (its handles are the spy's: the log writes and syncs) */
	rp_be.size = rp_size;
	rp_be.truncate = rp_truncate;
	/* files opened before keep the POSIX handles: reopen under the spy */
	su_engine_crash(&e);
	io_set_backend(&rp_be);
	cr_assert_eq(su_engine_open(sdir, 256, &e), 0, "%s", tp_errmsg());

	rp_arg a = {.e = &e, .P = P, .F = F};
	pthread_t th;
	rp_arm_data = 1;
	cr_assert_eq(pthread_create(&th, NULL, rp_writer, &a), 0);
	int rc = su_engine_checkpoint(&e);
	pthread_join(th, NULL);
	cr_assert_eq(rc, 0, "%s", tp_errmsg());
	cr_assert_not(a.err, "test set-up failed: %s", a.why);
	cr_assert(rp_in_log_sync, "the race window was not reached");
	su_engine_crash(&e); /* the page is dirty only in the pool */
	io_set_backend(NULL);

	tp_env *env = open_env(0);
	unsigned char got[8];
	cr_assert_eq(tp_page_read(env, P, 4080 - 8, got, 8), 0); /* R's last bytes */
	cr_assert_arr_eq(got, a.val, 8,
			 "R5: a committed update logged while the checkpoint took its snapshot was lost "
			 "(its page was missing from the checkpoint's dirty-page table)");
	cr_assert_eq(tp_close(env), 0);
}

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>

/* tp_close with a transaction still open: its handle may not be used
 * afterwards, so the caller cannot free it: tp_close must. */
Test(rec, close_frees_the_handles_of_open_transactions)
{
	uint64_t p[1];
	tp_env *env = open_env(0);
	make_pages(env, p, 1);
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "a leak before the test");
	tp_txn *t;
	cr_assert_eq(tp_begin(env, &t), 0);
	write1(t, p[0], 0, "open at close");
	t = NULL;
	cr_assert_eq(tp_close(env), 0);
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0,
		     "tp_close leaked the handle of a transaction left open (see the LeakSanitizer report)");
}
#endif

/* ---- E2: a read-only open recovers in memory and writes nothing ---- */

Test(rec, readonly_open_recovers_in_memory_and_writes_nothing)
{
	enum { N = 48 };
	uint64_t p[N];
	tp_txn *t;
	tp_env *env = open_env(16); /* a small pool: recovery must evict dirty pages (into memory) */
	make_pages(env, p, N);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_page_write(t, p[0], 100, "committed", 9), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	for (int i = 1; i < N; i++) /* more pages than frames */
		cr_assert_eq(tp_page_write(t, p[i], 100, "in flight", 9), 0);
	cr_assert_eq(tp_sync(env), 0); /* its records are durable: recovery must undo them */
	tp_crash_close(env);

	su_tree *before = su_tree_take(sdir);
	tp_options o;
	su_options(&o, 0, 0, 16);
	o.readonly = 1;
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
	cr_assert(tp_recovered(env), "the read-only open found the crash");
	expect(env, p[0], 100, "committed");
	char b[16];
	for (int i = 1; i < N; i++) {
		cr_assert_eq(tp_page_read(env, p[i], 100, b, 9), 0);
		cr_assert_neq(memcmp(b, "in flight", 9), 0, "the loser's write to page %d was undone in memory", i);
	}
	cr_assert_eq(tp_begin(env, &t), EROFS, "no transaction on a read-only open");
	cr_assert_eq(tp_verify(env, 1, NULL), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_close(env), 0);
	su_tree *after = su_tree_take(sdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "the read-only open wrote to the store: %s", why);
	su_tree_free(before);
	su_tree_free(after);

	env = open_env(16); /* a read-write open recovers it on disk, the same way */
	cr_assert(tp_recovered(env));
	expect(env, p[0], 100, "committed");
	cr_assert_eq(tp_page_read(env, p[1], 100, b, 9), 0);
	cr_assert_neq(memcmp(b, "in flight", 9), 0);
	cr_assert_eq(tp_close(env), 0);
}
