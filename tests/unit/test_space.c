/*
 * test_space -- free pages go back to the host file system (tp.c E3,
 * alloc.c A4-A5): a large tree deleted, a checkpoint, and the page file's
 * allocated blocks (st_blocks) drop; refilled, they come back; the pages
 * still live read back intact, also after a reopen; and a power cut right
 * after a punch (io simulator), with or without the punch reaching the
 * disk and with punched pages taken again before the cut, recovers every
 * committed value.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_sim.h"
#include "store_util.h"
#include "tp.h"

#define NKEYS 1024
#define VLEN (16u * 1024) /* overflow pages: 16 MiB of values */
#define KEEP 10           /* every KEEP-th key survives the deletion */

static void value(unsigned i, unsigned gen, unsigned char *v)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + gen * 0xbf58476d1ce4e5b9ull + 1;
	for (unsigned j = 0; j < VLEN; j++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		v[j] = (unsigned char)x;
	}
}

static void key(unsigned i, char *k) { snprintf(k, 16, "k%08u", i); }

static uint64_t blocks_kib(const char *sdir)
{
	char p[1024];
	struct stat st;
	snprintf(p, sizeof p, "%s/data", sdir);
	if (stat(p, &st) != 0)
		return 0;
	return (uint64_t)st.st_blocks / 2;
}

static void opts(tp_options *o)
{
	tp_options_init(o);
	o->quiet = 1;
	o->ckpt_log_bytes = 1ull << 40; /* checkpoints only when the test asks */
	o->ckpt_ms = 1u << 30;
}

/* Puts keys i % KEEP != 0 (which == 1), or all (which == 2), of generation gen. */
static int fill(tp_env *env, tp_tree *tr, int which, unsigned gen)
{
	unsigned char *v = malloc(VLEN);
	char k[16];
	tp_txn *t = NULL;
	int rc = 0;
	for (unsigned i = 0; i < NKEYS && !rc; i++) {
		if (which == 1 && i % KEEP == 0)
			continue;
		if (!t && (rc = tp_begin(env, &t)) != 0)
			break;
		key(i, k);
		value(i, gen, v);
		/* odd keys as ordered data: written in place, unlogged (O1) */
		if ((rc = tp_put(t, tr, k, strlen(k), v, VLEN, i % 2 ? TP_ORDERED : 0)) != 0)
			break;
		if (i % 64 == 63) {
			rc = tp_commit(t, 0);
			t = NULL;
		}
	}
	if (t)
		rc = rc ? tp_abort(t), rc : tp_commit(t, 0);
	free(v);
	return rc;
}

static int delete_most(tp_env *env, tp_tree *tr)
{
	char k[16];
	tp_txn *t = NULL;
	int rc = 0;
	for (unsigned i = 0; i < NKEYS && !rc; i++) {
		if (i % KEEP == 0)
			continue;
		if (!t && (rc = tp_begin(env, &t)) != 0)
			break;
		key(i, k);
		if ((rc = tp_del(t, tr, k, strlen(k))) != 0)
			break;
		if (i % 64 == 63) {
			rc = tp_commit(t, 0);
			t = NULL;
		}
	}
	if (t)
		rc = rc ? tp_abort(t), rc : tp_commit(t, 0);
	return rc;
}

/* Every key: present with generation gen's value if kept (or all), absent
 * otherwise.  0, or the first key found wrong. */
static int check(tp_env *env, tp_tree *tr, int all, unsigned gen, unsigned *bad)
{
	unsigned char *v = malloc(VLEN), *got = malloc(VLEN);
	char k[16];
	tp_txn *t;
	int rc = tp_begin(env, &t);
	for (unsigned i = 0; i < NKEYS && !rc; i++) {
		size_t n = 0;
		key(i, k);
		int r = tp_get(t, tr, k, strlen(k), got, VLEN, &n);
		int want = all || i % KEEP == 0;
		value(i, all && i % KEEP ? gen : 0, v);
		if (want ? r != 0 || n != VLEN || memcmp(got, v, VLEN) != 0 : r != TP_ENOTFOUND) {
			*bad = i;
			rc = -1;
		}
	}
	(void)tp_abort(t);
	free(v);
	free(got);
	return rc;
}

/* A fresh store dir/name in a new directory dir (su_tmpdir, tag), made with
 * opts() into o, open in env with its tree "t" created in tr. */
static void new_store(const char *tag, const char *name, char *dir, size_t dn, char *sdir, size_t sn, tp_options *o,
		      tp_env **env, tp_tree **tr)
{
	cr_assert_eq(su_tmpdir(dir, dn, tag), 0);
	snprintf(sdir, sn, "%s/%s", dir, name);
	opts(o);
	cr_assert_eq(tp_mkfs(sdir, o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(sdir, o, env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_tree_open(*env, "t", TP_TREE_CREATE, tr), 0, "%s", tp_errmsg());
}

/* Closes tree tr and store env, and opens them again from sdir. */
static void reopen(const char *sdir, const tp_options *o, tp_env **env, tp_tree **tr)
{
	tp_tree_close(*tr);
	cr_assert_eq(tp_close(*env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(sdir, o, env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_tree_open(*env, "t", 0, tr), 0, "%s", tp_errmsg());
}

Test(space, deleted_tree_gives_blocks_back_and_refill_takes_them, .timeout = 240)
{
	char dir[256], sdir[300];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	tp_stats s;
	unsigned bad = 0;
	new_store("space", "s", dir, sizeof dir, sdir, sizeof sdir, &o, &env, &tr);
	cr_assert_eq(tp_checkpoint(env), 0);
	uint64_t fresh = blocks_kib(sdir);

	cr_assert_eq(fill(env, tr, 2, 0), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_checkpoint(env), 0);
	uint64_t full = blocks_kib(sdir);
	cr_assert_geq(full, fresh + NKEYS * (VLEN / 1024) * 9 / 10, "filled: %" PRIu64 " KiB, fresh %" PRIu64, full,
		      fresh);

	cr_assert_eq(delete_most(env, tr), 0, "%s", tp_errmsg());
	uint64_t deleted = blocks_kib(sdir);
	cr_assert_eq(tp_checkpoint(env), 0);
	uint64_t after = blocks_kib(sdir);
	tp_stats_get(env, &s);
	uint64_t gone = (uint64_t)(NKEYS - NKEYS / KEEP) * (VLEN / 1024);
	printf("space: fresh %" PRIu64 " KiB, filled %" PRIu64 " KiB, right after deleting %" PRIu64
	       " KiB of values %" PRIu64 " KiB, after one checkpoint %" PRIu64 " KiB (%" PRIu64 " pages in %" PRIu64
	       " calls)\n",
	       fresh, full, gone, deleted, after, s.pages_returned, s.punch_calls);
	/* at least 80% of what was deleted is back with the file system */
	cr_assert_leq(after + gone * 8 / 10, deleted, "after the checkpoint %" PRIu64 " KiB, before %" PRIu64 " KiB", after,
		      deleted);
	cr_assert_gt(s.pages_returned, gone / 4 * 8 / 10);
	cr_assert_lt(s.punch_calls, s.pages_returned / 8, "runs of pages go in one call");
	cr_assert_eq(check(env, tr, 0, 0, &bad), 0, "key %u wrong after the punch", bad);
	cr_assert_eq(tp_verify(env, 0, NULL), 0, "%s", tp_errmsg());

	/* the holes are durable and read back as free pages after a reopen */
	reopen(sdir, &o, &env, &tr);
	cr_assert_eq(check(env, tr, 0, 0, &bad), 0, "key %u wrong after reopening", bad);
	cr_assert_leq(blocks_kib(sdir), after + 1024);

	/* refilled: the pages are taken again, with their blocks */
	cr_assert_eq(fill(env, tr, 1, 1), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_checkpoint(env), 0);
	uint64_t refilled = blocks_kib(sdir);
	printf("space: refilled %" PRIu64 " KiB\n", refilled);
	cr_assert_geq(refilled, after + gone * 9 / 10, "refilled %" PRIu64 " KiB, before %" PRIu64, refilled, after);
	cr_assert_leq(refilled, full + full / 4, "refilling reuses the pages: %" PRIu64 " KiB, first fill %" PRIu64,
		      refilled, full);
	cr_assert_eq(check(env, tr, 1, 1, &bad), 0, "key %u wrong after the refill", bad);
	cr_assert_eq(tp_verify(env, 0, NULL), 0, "%s", tp_errmsg());
	reopen(sdir, &o, &env, &tr);
	cr_assert_eq(check(env, tr, 1, 1, &bad), 0, "key %u wrong after the refill and a reopen", bad);
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
	su_rmtree(dir);
}

/* Pages freed and taken again before a checkpoint could give them back
 * are live: the checkpoint must not punch them (A4). */
Test(space, pages_taken_again_before_the_checkpoint_stay, .timeout = 240)
{
	char dir[256], sdir[300];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	tp_stats s;
	unsigned bad = 0;
	new_store("spacere", "s", dir, sizeof dir, sdir, sizeof sdir, &o, &env, &tr);
	cr_assert_eq(fill(env, tr, 2, 0), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_checkpoint(env), 0);
	cr_assert_eq(delete_most(env, tr), 0, "%s", tp_errmsg());
	cr_assert_eq(fill(env, tr, 1, 1), 0, "%s", tp_errmsg()); /* the freed pages, taken again */
	cr_assert_eq(tp_checkpoint(env), 0);
	tp_stats_get(env, &s);
	cr_assert_eq(check(env, tr, 1, 1, &bad), 0, "key %u wrong: a live page was punched (%" PRIu64 " pages)", bad,
		     s.pages_returned);
	cr_assert_eq(tp_verify(env, 0, NULL), 0, "%s", tp_errmsg());
	reopen(sdir, &o, &env, &tr);
	cr_assert_eq(check(env, tr, 1, 1, &bad), 0, "key %u wrong after a reopen", bad);
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
	su_rmtree(dir);
}

/* ---- a power cut right after a punch ---- */

typedef struct cut {
	const char *sdir;
	uint64_t seed;
	int refill; /* take punched pages again (and commit) before the cut */
} cut;

static void cut_child(void *arg)
{
	cut *c = arg;
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	opts(&o);
	iosim_install(c->seed);
	SU_CK(tp_open(c->sdir, &o, &env) == 0);
	SU_CK(tp_tree_open(env, "t", 0, &tr) == 0);
	SU_CK(delete_most(env, tr) == 0);
	if (!c->refill)
		iosim_crash_at_point("buf.punched", 1 + c->seed % 3); /* inside the checkpoint's punches */
	SU_CK(tp_checkpoint(env) == 0);
	tp_stats s;
	tp_stats_get(env, &s);
	SU_CK(s.pages_returned > 0);
	SU_CK(iosim_punches() > 0);
	if (!c->refill)
		iosim_crash_now(); /* fewer punches than the point's pass: right after them all */
	/* the punches are not synced yet: taken again, with new values */
	SU_CK(fill(env, tr, 1, 1) == 0);
	SU_CK(tp_sync(env) == 0);
	iosim_crash_now();
}

Test(space, power_cut_after_punching_recovers, .timeout = 300)
{
	char dir[256], sdir[300], base[512];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	unsigned bad = 0;
	new_store("spacecut", "base", dir, sizeof dir, base, sizeof base, &o, &env, &tr);
	snprintf(sdir, sizeof sdir, "%s/s", dir);
	cr_assert_eq(fill(env, tr, 2, 0), 0, "%s", tp_errmsg());
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());

	unsigned runs = 0, refilled = 0;
	for (uint64_t seed = 1; seed <= 12; seed++) {
		char cmd[2048];
		snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", sdir, base, sdir);
		cr_assert_eq(system(cmd), 0);
		cut c = {.sdir = sdir, .seed = seed, .refill = seed % 2 == 0};
		int st = su_run_child(cut_child, &c);
		cr_assert_eq(st, IOSIM_CRASH_EXIT, "seed %" PRIu64 ": the child ended with %d, not at the power cut", seed,
			     st);
		runs++;
		/* recovery: every committed value is there */
		cr_assert_eq(tp_open(sdir, &o, &env), 0, "seed %" PRIu64 ": %s", seed, tp_errmsg());
		cr_assert_eq(tp_tree_open(env, "t", 0, &tr), 0, "%s", tp_errmsg());
		cr_assert_eq(check(env, tr, c.refill, 1, &bad), 0, "seed %" PRIu64 " (%s): key %u wrong after recovery", seed,
			     c.refill ? "pages taken again" : "cut inside the punches", bad);
		cr_assert_eq(tp_verify(env, 0, NULL), 0, "seed %" PRIu64 ": %s", seed, tp_errmsg());
		/* and the sdir goes on: a checkpoint, a reopen */
		cr_assert_eq(tp_checkpoint(env), 0, "%s", tp_errmsg());
		tp_tree_close(tr);
		cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_open(sdir, &o, &env), 0, "seed %" PRIu64 ": %s", seed, tp_errmsg());
		cr_assert_eq(tp_tree_open(env, "t", 0, &tr), 0, "%s", tp_errmsg());
		cr_assert_eq(check(env, tr, c.refill, 1, &bad), 0, "seed %" PRIu64 ": key %u wrong after a reopen", seed, bad);
		tp_tree_close(tr);
		cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
		refilled += c.refill;
	}
	printf("space: %u power cuts after punches recovered (%u with punched pages taken again)\n", runs, refilled);
	su_rmtree(dir);
}

/* ---- df: the engine's reserve ---- */

static uint64_t dir_bytes(const char *d)
{
	char cmd[1100], line[64];
	snprintf(cmd, sizeof cmd, "du -sb --apparent-size '%s'", d);
	FILE *p = popen(cmd, "r");
	uint64_t n = 0;
	if (p && fgets(line, sizeof line, p))
		n = strtoull(line, NULL, 10);
	if (p)
		pclose(p);
	return n;
}

/* The reserve df leaves out is what the log still takes: a fresh store's
 * covers every segment file the log makes while it fills (and checkpoints
 * recycle), and once the log has its segments it is zero. */
Test(space, reserve_is_what_the_log_still_takes, .timeout = 240)
{
	char dir[256], sdir[300], logd[600];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	const uint64_t seg = 256 * 1024;
	cr_assert_eq(su_tmpdir(dir, sizeof dir, "spacedf"), 0);
	snprintf(sdir, sizeof sdir, "%s/s", dir);
	su_options(&o, 4096, seg, 256);
	o.ckpt_log_bytes = 4 * seg;
	o.ckpt_ms = 1u << 30;
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
	cr_assert_eq(su_logdir(sdir, logd, sizeof logd), 0);
	cr_assert_eq(tp_tree_open(env, "t", TP_TREE_CREATE, &tr), 0, "%s", tp_errmsg());
	uint64_t r0, r, l0 = dir_bytes(logd), lmax = l0;
	cr_assert_eq(tp_space_reserve(env, &r0), 0);
	cr_assert_gt(r0, 0, "a fresh store's log has not made its spare segments yet");
	cr_assert_eq(r0 % seg, 0);
	unsigned char v[3000];
	memset(v, 0x5a, sizeof v);
	for (unsigned i = 0; i < 1500; i++) {
		tp_txn *t;
		char k[16];
		key(i % 500, k);
		cr_assert_eq(tp_begin(env, &t), 0);
		cr_assert_eq(tp_put(t, tr, k, strlen(k), v, sizeof v, 0), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0, "%s", tp_errmsg());
		if (i % 50 == 0) {
			uint64_t l = dir_bytes(logd);
			lmax = l > lmax ? l : lmax;
		}
	}
	uint64_t l1 = dir_bytes(logd);
	lmax = l1 > lmax ? l1 : lmax;
	cr_assert_eq(tp_space_reserve(env, &r), 0);
	tp_stats s;
	tp_stats_get(env, &s);
	printf("df: log %" PRIu64 " KiB fresh, at most %" PRIu64 " KiB after %" PRIu64
	       " checkpoints; reserve %" PRIu64 " KiB fresh, %" PRIu64 " KiB now\n",
	       l0 / 1024, lmax / 1024, s.checkpoints, r0 / 1024, r / 1024);
	cr_assert_geq(s.checkpoints, 3, "the log went round: %" PRIu64 " checkpoints", s.checkpoints);
	cr_assert_leq(lmax - l0, r0, "the log took %" PRIu64 " bytes more, the reserve said %" PRIu64, lmax - l0, r0);
	/* and stays an upper bound within a segment: no more is kept back */
	cr_assert_leq(r + l1, r0 + l0 + seg, "reserve %" PRIu64 " + log %" PRIu64 ", fresh %" PRIu64 " + %" PRIu64, r, l1,
		      r0, l0);
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
	su_rmtree(dir);
}
