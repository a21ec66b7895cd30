/*
 * test_recover -- per-operation recovery tests (Berkeley DB's recovery
 * suite in spirit): for each page operation, and for a transaction mixing
 * them, under several seeds (which vary the pages, offsets and sizes, the
 * pool size -- a tiny pool steals uncommitted pages -- and whether a
 * checkpoint precedes the operation, so that full-page images are logged):
 *
 *   1. snapshot; run the operation in a transaction; abort; compare with
 *      the snapshot;
 *   2. run it again and commit (the after-state); crash without writing
 *      anything back; recover; compare with the after-state (replay);
 *   3. crash again at once; recover; compare (recovery twice, R4); then a
 *      clean close and open; compare;
 *   4. run it again, make its records durable without committing, crash,
 *      recover: the state before it (the loser is rolled back);
 *   5. run it again, commit lazily, crash before any sync: all of it or
 *      none of it.
 *
 * A snapshot is the allocation state of pages [0, NSNAP) and the body of
 * every allocated page (a freed page's bytes do not matter).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "recover_harness.h"
#include "io_sim.h"
#include "store_util.h"
#include "tp.h"
#include "tp_test.h"

#define NSNAP 48   /* pages compared */
#define NBASE 14   /* pages allocated by the base state */

enum rop {
	ROP_SET_SMALL,
	ROP_SET_WHOLE,
	ROP_ALLOC,
	ROP_FREE,
	ROP_ALLOC_INIT,
	ROP_FREE_ALLOC,
	ROP_MULTI,
	ROP_N
};

static const char *rop_name[ROP_N] = {"PAGE_SET small", "PAGE_SET whole body", "PAGE_ALLOC", "PAGE_FREE",
				      "alloc+init+write", "free then alloc", "multi-op transaction"};

typedef op_seed rparam; /* an operation and a seed */
#define SEEDS 1, 2, 3, 4, 5, 6, 7, 11 /* each operation runs under each */

static char tdir[64], sdir[128];
static uint32_t body;
static uint64_t base_pages[NBASE];

/* splitmix64 */
static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void setup(void)
{
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "recover"), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
}

static void teardown(void) { su_rmtree(tdir); }

static tp_env *open_env(const rparam *p)
{
	tp_options o;
	tp_env *env;
	su_options(&o, 0, 0, p->seed % 2 ? 8 : 0); /* odd seeds: a tiny pool (STEAL) */
	o.ckpt_log_bytes = UINT64_MAX / 2;
	o.ckpt_ms = 0;
	int rc = tp_open(sdir, &o, &env);
	cr_assert_eq(rc, 0, "%s seed %" PRIu64 ": tp_open: %d %s", rop_name[p->op], p->seed, rc, tp_errmsg());
	return env;
}

/* The base state: NBASE pages with seeded bodies, some freed again (holes
 * for first-fit allocation), a root page with data. */
static void make_base(const rparam *p)
{
	tp_options o;
	tp_env *env;
	tp_txn *t;
	uint64_t s = p->seed * 1000 + 7;
	unsigned char b[4096];
	su_options(&o, 4096, 1u << 20, 0);
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
	env = open_env(p);
	body = tp_page_body(env);
	cr_assert_eq(tp_begin(env, &t), 0);
	for (int i = 0; i < NBASE; i++) {
		cr_assert_eq(tp_page_alloc(t, (uint16_t)(1 + i % 3), &base_pages[i]), 0);
		for (uint32_t k = 0; k < body; k++)
			b[k] = (unsigned char)rnd(&s);
		cr_assert_eq(tp_page_write(t, base_pages[i], 0, b, body), 0);
	}
	cr_assert_eq(tp_page_write(t, 0, 0, "root page", 9), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_page_free(t, base_pages[3]), 0);
	cr_assert_eq(tp_page_free(t, base_pages[9]), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_close(env), 0);
}

static su_snap snap(tp_env *env, const rparam *p, const char *when)
{
	su_snap s;
	int rc = su_snap_take(env, NSNAP, &s);
	cr_assert_eq(rc, 0, "%s seed %" PRIu64 " (%s): snapshot: %d %s", rop_name[p->op], p->seed, when, rc,
		     tp_errmsg());
	return s;
}

static void same(const su_snap *want, const su_snap *got, const rparam *p, const char *when)
{
	char why[256];
	cr_assert(su_snap_equal(want, got, why, sizeof why), "%s seed %" PRIu64 ": %s: %s", rop_name[p->op],
		  p->seed, when, why);
}

/* The store now (env) is want; what: the step, for the message. */
static void same_now(tp_env *env, const rparam *p, const su_snap *want, const char *when, const char *what)
{
	su_snap s = snap(env, p, when);
	same(want, &s, p, what);
	su_snap_free(&s);
}

/* Opens the store (recovery) and checks that it is want. */
static tp_env *open_same(const rparam *p, const su_snap *want, const char *when, const char *what)
{
	tp_env *env = open_env(p);
	same_now(env, p, want, when, what);
	return env;
}

/* An allocated data page (not the root), chosen by the seed. */
static uint64_t pick_page(tp_env *env, uint64_t *s)
{
	for (int tries = 0; tries < 1000; tries++) {
		uint64_t pg = base_pages[rnd(s) % NBASE];
		int a;
		cr_assert_eq(tp_page_allocated(env, pg, &a), 0);
		if (a)
			return pg;
	}
	cr_assert_fail("no allocated page");
	return 0;
}

static void set_small(tp_env *env, tp_txn *t, uint64_t *s, uint64_t pg)
{
	unsigned char b[64];
	uint32_t len = 1 + (uint32_t)(rnd(s) % sizeof b);
	uint32_t off = (uint32_t)(rnd(s) % (body - len + 1));
	for (uint32_t i = 0; i < len; i++)
		b[i] = (unsigned char)rnd(s);
	(void)env;
	cr_assert_eq(tp_page_write(t, pg, off, b, len), 0, "%s", tp_errmsg());
}

static void set_whole(tp_txn *t, uint64_t *s, uint64_t pg)
{
	unsigned char b[4096];
	for (uint32_t i = 0; i < body; i++)
		b[i] = (unsigned char)rnd(s);
	cr_assert_eq(tp_page_write(t, pg, 0, b, body), 0, "%s", tp_errmsg());
}

/* Runs the operation of p in t.  Deterministic for a given state and seed. */
static void run_op(tp_env *env, tp_txn *t, const rparam *p)
{
	uint64_t s = p->seed * 7919 + (uint64_t)p->op, pg, q;
	switch (p->op) {
	case ROP_SET_SMALL:
		set_small(env, t, &s, pick_page(env, &s));
		break;
	case ROP_SET_WHOLE:
		set_whole(t, &s, pick_page(env, &s));
		break;
	case ROP_ALLOC:
		cr_assert_eq(tp_page_alloc(t, (uint16_t)(5 + p->seed), &q), 0, "%s", tp_errmsg());
		break;
	case ROP_FREE:
		cr_assert_eq(tp_page_free(t, pick_page(env, &s)), 0, "%s", tp_errmsg());
		break;
	case ROP_ALLOC_INIT:
		cr_assert_eq(tp_page_alloc(t, 2, &q), 0, "%s", tp_errmsg());
		set_small(env, t, &s, q);
		set_whole(t, &s, q);
		set_small(env, t, &s, q);
		break;
	case ROP_FREE_ALLOC:
		pg = pick_page(env, &s);
		cr_assert_eq(tp_page_free(t, pg), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_page_alloc(t, 3, &q), 0, "%s", tp_errmsg());
		cr_assert_neq(q, pg, "alloc.c A1: the page just freed is not reallocated");
		set_small(env, t, &s, q);
		break;
	case ROP_MULTI:
		pg = pick_page(env, &s);
		set_small(env, t, &s, pg);
		set_whole(t, &s, pg);
		set_small(env, t, &s, pg); /* overlapping changes of one page */
		set_small(env, t, &s, 0);  /* the root page */
		cr_assert_eq(tp_page_alloc(t, 4, &q), 0, "%s", tp_errmsg());
		set_small(env, t, &s, q);
		for (int i = 0; i < 6; i++)
			set_small(env, t, &s, pick_page(env, &s));
		pg = pick_page(env, &s);
		cr_assert_eq(tp_page_free(t, pg), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_page_alloc(t, 4, &q), 0, "%s", tp_errmsg());
		set_whole(t, &s, q);
		break;
	default:
		cr_assert_fail("op %d", p->op);
	}
}

OP_SEED_PARAMS(recover, per_operation, ROP_N, SEEDS)

ParameterizedTest(rparam *p, recover, per_operation, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env;
	tp_txn *t;
	make_base(p);

	/* 1. run and abort: the snapshot again */
	env = open_env(p);
	if (p->seed % 3 == 0) /* the operation follows a checkpoint: images */
		cr_assert_eq(tp_checkpoint(env), 0);
	su_snap s0 = snap(env, p, "before");
	cr_assert_eq(tp_begin(env, &t), 0);
	run_op(env, t, p);
	su_snap inflight = snap(env, p, "in flight");
	char why[256];
	cr_assert_not(su_snap_equal(&s0, &inflight, why, sizeof why), "%s seed %" PRIu64 ": the operation changed nothing",
		      rop_name[p->op], p->seed);
	cr_assert_eq(tp_abort(t), 0, "%s", tp_errmsg());
	same_now(env, p, &s0, "after abort", "abort does not restore the snapshot");
	cr_assert_eq(tp_debug_pinned(env), 0);

	/* 2. run and commit; crash before anything is written back; replay */
	cr_assert_eq(tp_begin(env, &t), 0);
	run_op(env, t, p);
	cr_assert_eq(tp_commit(t, 0), 0, "%s", tp_errmsg());
	su_snap s1 = snap(env, p, "after commit");
	same(&inflight, &s1, p, "the committed state differs from the same operation's first run");
	tp_crash_close(env);
	env = open_same(p, &s1, "after the first recovery", "crash after commit, recover");

	/* 3. recover twice, then a clean close */
	tp_crash_close(env);
	env = open_env(p);
	tp_stats st;
	tp_stats_get(env, &st);
	cr_assert_eq(st.rec_losers, 0);
	same_now(env, p, &s1, "after the second recovery", "recovered twice");
	cr_assert_eq(tp_close(env), 0);
	env = open_same(p, &s1, "after a clean close", "clean close and open");

	/* 4. durable but not committed: rolled back by recovery */
	cr_assert_eq(tp_begin(env, &t), 0);
	run_op(env, t, p);
	cr_assert_eq(tp_sync(env), 0);
	tp_crash_close(env); /* t is gone with the process */
	env = open_env(p);
	tp_stats_get(env, &st);
	cr_assert_eq(st.rec_losers, 1, "%s seed %" PRIu64 ": one loser", rop_name[p->op], p->seed);
	same_now(env, p, &s1, "after the loser's rollback", "an uncommitted durable operation is rolled back");
	tp_crash_close(env);
	env = open_same(p, &s1, "after recovering the rollback again", "the rollback recovered twice");

	/* 5. a lazy commit lost in the crash: all of it or none of it */
	cr_assert_eq(tp_begin(env, &t), 0);
	run_op(env, t, p);
	cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0);
	su_snap s2 = snap(env, p, "after the lazy commit");
	tp_crash_close(env);
	env = open_env(p);
	su_snap s = snap(env, p, "after the lazy commit's crash");
	int none = su_snap_equal(&s1, &s, why, sizeof why), all = su_snap_equal(&s2, &s, why, sizeof why);
	cr_assert(none || all, "%s seed %" PRIu64 ": a lazy commit was applied in part: %s", rop_name[p->op], p->seed,
		  why);
	su_snap_free(&s);
	cr_assert_eq(tp_close(env), 0);

	su_snap_free(&s0);
	su_snap_free(&inflight);
	su_snap_free(&s1);
	su_snap_free(&s2);
}

/* ---- a power cut at every sync of the operation and its commit ----
 *
 * A child process runs the operation and commits it under the io
 * simulator, which cuts the power at the k-th sync from the operation's
 * start (unsynced writes kept, lost or torn under the seed), for k = 1, 2,
 * ... until the child gets through (the loop: tests/lib/recover_harness.h).
 * Recovery must give the state before the operation or after it -- after
 * it whenever the commit had returned -- and the same again when recovered
 * twice. */

/* The base store, the states before and after the operation. */
typedef struct cut_ctx {
	const rparam *p;
	char base[160];
	su_snap s0, s1;
} cut_ctx;

static void copy_tree(const char *from, const char *to)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void cut_fresh(void *arg)
{
	cut_ctx *x = arg;
	copy_tree(x->base, sdir);
}

static tp_env *cut_open(void *arg)
{
	cut_ctx *x = arg;
	tp_options o;
	tp_env *env;
	su_options(&o, 0, 0, x->p->seed % 2 ? 8 : 0);
	o.ckpt_log_bytes = UINT64_MAX / 2;
	o.ckpt_ms = 0;
	SU_CK(tp_open(sdir, &o, &env) == 0);
	if (x->p->seed % 3 == 0)
		SU_CK(tp_checkpoint(env) == 0);
	return env;
}

static int cut_op(void *arg, tp_env *env, tp_txn *t)
{
	cut_ctx *x = arg;
	run_op(env, t, x->p); /* cr_assert in a child: a failure exits non-zero */
	return 0;
}

static void cut_check(void *arg, uint64_t k, int acked, int round)
{
	cut_ctx *x = arg;
	const rparam *p = x->p;
	tp_env *env = open_env(p);
	su_snap s = snap(env, p, "after the power cut");
	char why0[256], why1[256];
	int is0 = su_snap_equal(&x->s0, &s, why0, sizeof why0);
	int is1 = su_snap_equal(&x->s1, &s, why1, sizeof why1);
	su_snap_free(&s);
	cr_assert(is1 || (!acked && is0),
		  "%s seed %" PRIu64 " cut at sync %" PRIu64 " (commit %s), recovery %d: "
		  "neither before (%s) nor after (%s)",
		  rop_name[p->op], p->seed, k, acked ? "acknowledged" : "not acknowledged", round + 1, why0, why1);
	tp_crash_close(env); /* and recover once more */
}

OP_SEED_PARAMS(recover, power_cut_at_each_sync, ROP_N, SEEDS)

ParameterizedTest(rparam *p, recover, power_cut_at_each_sync, .init = setup, .fini = teardown, .timeout = 120)
{
	cut_ctx x = {.p = p};
	char what[160];
	tp_env *env;
	tp_txn *t;
	make_base(p);
	snprintf(x.base, sizeof x.base, "%s/base", tdir);
	copy_tree(sdir, x.base);

	/* the states before and after the operation */
	env = open_env(p);
	if (p->seed % 3 == 0)
		cr_assert_eq(tp_checkpoint(env), 0);
	x.s0 = snap(env, p, "before");
	cr_assert_eq(tp_begin(env, &t), 0);
	run_op(env, t, p);
	cr_assert_eq(tp_commit(t, 0), 0);
	x.s1 = snap(env, p, "after");
	tp_crash_close(env);

	snprintf(what, sizeof what, "%s seed %" PRIu64, rop_name[p->op], p->seed);
	cut_each c = {.what = what, .dir = tdir, .seed = p->seed, .max_k = 40, .arg = &x,
		      .fresh = cut_fresh, .open = cut_open, .op = cut_op, .check = cut_check};
	cut_each_sync(&c);
	su_snap_free(&x.s0);
	su_snap_free(&x.s1);
}
