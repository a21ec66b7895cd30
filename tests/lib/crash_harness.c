/*
 * crash_harness.c -- the crash-point loop of the crash suites: workers,
 * seeds, armed runs, chained recovery crashes, the verifier, the counts.
 * What each step does: crash_harness.h.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crash_harness.h"
#include "io_sim.h"

#define CHILD_TIMEOUT 300 /* seconds: one run never takes close to this */

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return def;
	unsigned long long x = strtoull(v, &end, 0);
	return *end ? def : (uint64_t)x;
}

static void add(uint64_t *p, uint64_t v) { __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST); }

static void count_named(ch_totals *g, const char *point)
{
	for (int i = 0; point && i < WL_NPOINTS; i++)
		if (!strcmp(point, wl_points[i])) {
			add(&g->named, 1);
			add(&g->by_point[i], 1);
		}
}

/* ---- children ---- */

void ch_child_begin(const ch_child *x)
{
	iosim_install(x->sim_seed);
	if (x->kind == CH_VERIFY)
		return;
	if (x->sync_n)
		iosim_crash_at_sync(x->sync_n);
	if (x->point)
		iosim_crash_at_point(x->point, x->nth);
}

int ch_child_open(const ch_child *x, const tp_options *o, tp_env **env)
{
	int rc = tp_open(x->store, o, env);
	if (rc != 0)
		return ch_child_fail(x, "%s: tp_open: %d (%s): %s",
				     x->kind == CH_WORKLOAD ? "before the workload" : "recovery", rc, tp_strerror(rc),
				     tp_errmsg());
	return 0;
}

int ch_wl_check(const char *store, const wl_config *c, const wl_model *base, const char *oracle, uint64_t seed,
		wl_check_result *res, size_t *leaked, char *err, size_t n)
{
	wl_check_opts co = {.seed = seed, .extra_txn = 1};
	size_t h0 = wl_heap_bytes();
	if (wl_check(store, c, base, oracle, &co, res, err, n) != 0)
		return -1;
	iosim_uninstall();
	size_t h1 = wl_heap_bytes();
	*leaked = h1 > h0 ? h1 - h0 : 0;
	return 0;
}

void ch_vnote_failure(uint64_t *failures, char *msg, size_t size, const char *kind, const char *at,
		      const char *store, const char *keep, const char *fmt, va_list ap)
{
	char m[6144];
	if (__atomic_add_fetch(failures, 1, __ATOMIC_SEQ_CST) != 1)
		return;
	vsnprintf(m, sizeof m, fmt, ap);
	int kept = wl_copy_store(store, keep) == 0;
	snprintf(msg, size, "%s point failed: %.4000s\n  at: %.1200s\n  store (after the failed step) %s %.200s", kind, m,
		 at, kept ? "kept in" : "could not be copied to", keep);
}

int ch_child_fail(const ch_child *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->sh->msg, sizeof x->sh->msg, fmt, ap);
	va_end(ap);
	return CH_CHILD_FAIL;
}

int ch_child_end(const ch_child *x, tp_env *env, uint64_t commits, uint64_t aborts, uint64_t lazy_sync)
{
	int rc;
	if (x->kind == CH_WORKLOAD) {
		tp_stats ts;
		tp_stats_get(env, &ts);
		x->sh->val[CH_W_COMMITS] = commits;
		x->sh->val[CH_W_ABORTS] = aborts;
		x->sh->val[CH_W_CKPTS] = ts.checkpoints;
		x->sh->val[CH_W_PAGE_WRITES] = ts.page_writes;
		x->sh->val[CH_W_FPIS] = ts.log_fpis;
		x->sh->val[CH_W_LOG_BYTES] = ts.log_bytes;
		x->sh->val[CH_W_LAZY_SYNC] = lazy_sync;
	}
	wl_shared_counters(x->sh);
	x->sh->finished = 1;
	if (x->kind == CH_RECOVERY_DRY) {
		tp_crash_close(env);
		return 0;
	}
	if (x->kind == CH_WORKLOAD && x->end_close) {
		if ((rc = tp_close(env)) != 0)
			return ch_child_fail(x, "tp_close at the end: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
		iosim_uninstall(); /* a clean shutdown: everything reaches the disk */
		return 0;
	}
	iosim_crash_now(); /* a power cut with whatever is still pending */
}

/* ---- one worker: seeds until enough crash points ran ---- */

typedef struct worker {
	const ch_suite *s;
	ch_totals *g;
	uint64_t base_seed, target, only;
	int has_only;
	char dir[PATH_MAX], basedir[2][PATH_MAX], work[PATH_MAX], scratch[PATH_MAX], oracle[PATH_MAX];
	wl_shared *sh;
	/* the point being run, for messages */
	uint64_t idx, seed;
	char where[1024];
	char keep[PATH_MAX];    /* where the first failing store is copied */
} worker;

static void fail(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(worker *w, const char *fmt, ...)
{
	char at[1200];
	va_list ap;
	snprintf(at, sizeof at, "seed index %" PRIu64 " (seed %" PRIu64 "), %.700s\n  rerun: TP_CRASH_SEED=%" PRIu64
		 " TP_CRASH_ONLY=%" PRIu64, w->idx, w->seed, w->where, w->base_seed, w->idx);
	va_start(ap, fmt);
	ch_vnote_failure(&w->g->failures, w->g->msg, sizeof w->g->msg, w->s->name, at, w->work, w->keep, fmt, ap);
	va_end(ap);
}

/* A child and the suite that runs it. */
typedef struct child_run {
	ch_child c;
	const ch_suite *s;
} child_run;

static int child_main(void *arg)
{
	child_run *cr = arg;
	ch_child_begin(&cr->c);
	return cr->s->child(&cr->c);
}

/* Runs one child; 1 if it crashed as planned, 0 if it finished, -1 on a
 * failure (reported). */
static int run_child(worker *w, ch_child *c, int expect_crash)
{
	char sb[128];
	wl_shared_reset(w->sh);
	c->sh = w->sh;
	child_run cr = {.c = *c, .s = w->s};
	int status = wl_fork(child_main, &cr, CHILD_TIMEOUT);
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == IOSIM_CRASH_EXIT && !w->sh->msg[0]) {
		if (w->sh->finished && expect_crash) { /* it reached the power cut at its end */
			fail(w, "the crash armed in the %s did not happen, although the dry run passed that point: "
				"the engine's io is not deterministic",
			     c->kind == CH_WORKLOAD ? "workload" : "recovery");
			return -1;
		}
		return 1;
	}
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && w->sh->finished) {
		if (expect_crash) {
			fail(w, "the armed crash did not happen");
			return -1;
		}
		return 0;
	}
	fail(w, "%s child: %s; %s",
	     c->kind == CH_WORKLOAD ? "workload" : c->kind == CH_VERIFY ? "verifier" : "recovery",
	     wl_status_str(status, sb, sizeof sb), w->sh->msg[0] ? w->sh->msg : "(no message)");
	return -1;
}

/* Picks a crash: a sync in 1..syncs, or (pct_named % of the time, if any
 * was passed) the nth pass through a named point. */
static void pick_crash(wl_rng *r, const wl_shared *dry, uint64_t syncs, int pct_named, ch_child *c, char *desc,
		       size_t n)
{
	int names[WL_NPOINTS], nn = 0;
	for (int i = 0; i < WL_NPOINTS; i++)
		if (dry->hits[i])
			names[nn++] = i;
	c->sync_n = 0;
	c->point = NULL;
	c->nth = 0;
	if (nn && ((int)wl_below(r, 100) < pct_named || !syncs)) {
		int k = names[wl_below(r, (uint64_t)nn)];
		c->point = wl_points[k];
		c->nth = 1 + wl_below(r, dry->hits[k]);
		snprintf(desc, n, "at pass %" PRIu64 " of %" PRIu64 " through \"%s\"", c->nth, (uint64_t)dry->hits[k],
			 c->point);
	} else {
		c->sync_n = 1 + wl_below(r, syncs);
		snprintf(desc, n, "at sync %" PRIu64 " of %" PRIu64, c->sync_n, syncs);
	}
}

/* After a crash of the workload: maybe crash recovery (chained), then
 * verify.  0 or -1 (failure reported). */
static int after_crash(worker *w, const ch_seed *sd, wl_rng *r)
{
	size_t wl = strlen(w->where);
	for (int depth = 0; depth < 3 && wl_below(r, depth ? 3 : 4) == 0; depth++) {
		ch_child c = {.kind = CH_RECOVERY_DRY, .cfg = sd->cfg, .base = sd->base, .store = w->scratch,
			      .oracle = w->oracle, .sim_seed = wl_rand(r)};
		char desc[160];
		if (wl_copy_store(w->work, w->scratch) != 0) {
			fail(w, "cannot copy %s to %s", w->work, w->scratch);
			return -1;
		}
		snprintf(w->where + wl, sizeof w->where - wl, "; dry recovery %d", depth + 1);
		if (run_child(w, &c, 0) < 0)
			return -1;
		uint64_t syncs = w->sh->syncs;
		wl_shared dry = *w->sh;
		if (!syncs)
			break;
		c.kind = CH_RECOVERY_CRASH;
		c.store = w->work;
		c.sim_seed = wl_rand(r);
		pick_crash(r, &dry, syncs, 25, &c, desc, sizeof desc);
		snprintf(w->where + wl, sizeof w->where - wl, "; recovery crash %d %s", depth + 1, desc);
		wl = strlen(w->where);
		if (run_child(w, &c, 1) < 0)
			return -1;
		add(&w->g->points, 1);
		add(&w->g->rec_points, 1);
		count_named(w->g, c.point);
	}
	ch_child v = {.kind = CH_VERIFY, .cfg = sd->cfg, .base = sd->base, .store = w->work, .oracle = w->oracle,
		      .sim_seed = wl_rand(r)};
	snprintf(w->where + wl, sizeof w->where - wl, "; verify");
	if (run_child(w, &v, 0) < 0)
		return -1;
	w->where[wl] = 0;
	add(&w->g->verified, 1);
	add(&w->g->redone, w->sh->val[CH_V_REDONE]);
	add(&w->g->losers, w->sh->val[CH_V_LOSERS]);
	add(&w->g->doubt, w->sh->val[CH_V_DOUBT]);
	add(&w->g->doubt_kept, w->sh->val[CH_V_DOUBT_KEPT] ? 1 : 0);
	add(&w->g->cuts, w->sh->val[CH_V_CUT] ? 1 : 0);
	return 0;
}

/* The dry run's results (j == 0): counted; 0 or -1 (failure reported). */
static int count_dry(worker *w, const ch_seed *sd, int rc)
{
	const wl_shared *d = w->sh;
	add(&w->g->commits, d->val[CH_W_COMMITS]);
	add(&w->g->aborts, d->val[CH_W_ABORTS]);
	add(&w->g->ckpts, d->val[CH_W_CKPTS]);
	add(&w->g->page_writes, d->val[CH_W_PAGE_WRITES]);
	add(&w->g->fpis, d->val[CH_W_FPIS]);
	add(&w->g->log_bytes, d->val[CH_W_LOG_BYTES]);
	if (getenv("TP_CRASH_VERBOSE"))
		fprintf(stderr, "seed index %" PRIu64 ": %s, syncs %" PRIu64 ", calls %" PRIu64 ", commits %" PRIu64
			", page writes %" PRIu64 ", fpis %" PRIu64 ", log %" PRIu64 " bytes, checkpoints %" PRIu64 "\n",
			w->idx, sd->brief, (uint64_t)d->syncs, (uint64_t)d->calls, (uint64_t)d->val[CH_W_COMMITS],
			(uint64_t)d->val[CH_W_PAGE_WRITES], (uint64_t)d->val[CH_W_FPIS], (uint64_t)d->val[CH_W_LOG_BYTES],
			(uint64_t)d->val[CH_W_CKPTS]);
	if (rc == 1) {
		add(&w->g->points, 1);
		add(&w->g->ends, 1);
	} else {
		add(&w->g->clean_ends, 1);
	}
	if (!d->syncs) {
		fail(w, "the dry run made no sync at all");
		return -1;
	}
	return 0;
}

static int run_seed(worker *w, uint64_t idx)
{
	ch_seed sd;
	wl_shared dry;
	w->idx = idx;
	w->seed = wl_mix(w->base_seed, idx);
	wl_rng r = {wl_mix(w->seed, w->s->salt)};
	memset(&sd, 0, sizeof sd);
	w->s->seed(w->seed, &r, &sd);
	ch_child c = {.kind = CH_WORKLOAD, .cfg = sd.cfg, .base = sd.base, .store = w->work, .oracle = w->oracle,
		      .end_close = sd.end_close};
	memset(&dry, 0, sizeof dry);

	add(&w->g->seeds, 1);
	for (int j = 0; j <= w->s->armed_per_seed; j++) {
		char desc[160];
		if (wl_copy_store(w->basedir[sd.geo], w->work) != 0) {
			fail(w, "cannot copy %s to %s", w->basedir[sd.geo], w->work);
			return -1;
		}
		/* the oracle of an earlier point must not stand for this one: a
		 * crash inside tp_open (the durable mark's sync, log.c L16) comes
		 * before the workload starts writing it */
		if (truncate(w->oracle, 0) != 0 && errno != ENOENT) {
			fail(w, "cannot empty the oracle %s: %s", w->oracle, strerror(errno));
			return -1;
		}
		c.sim_seed = wl_rand(&r);
		uint64_t lazy = dry.val[CH_W_LAZY_SYNC];
		if (j == 0) {
			c.sync_n = 0;
			c.point = NULL;
			snprintf(w->where, sizeof w->where, "%s", sd.dry);
		} else if (j == 1 && w->s->lazy_first && lazy && lazy < dry.syncs) {
			/* the first sync after a lazy commit or tp_sync returned */
			c.sync_n = lazy + 1;
			c.point = NULL;
			snprintf(w->where, sizeof w->where,
				 "point %d: %s crashed at sync %" PRIu64 " of %" PRIu64 ", the first after a lazy "
				 "commit or tp_sync returned",
				 j, sd.workload, c.sync_n, (uint64_t)dry.syncs);
			add(&w->g->after_lazy, 1);
		} else {
			pick_crash(&r, &dry, dry.syncs, 30, &c, desc, sizeof desc);
			snprintf(w->where, sizeof w->where, "point %d: %s crashed %s", j, sd.workload, desc);
		}
		int rc = run_child(w, &c, j > 0);
		if (rc < 0)
			return -1;
		if (j == 0) {
			dry = *w->sh;
			if (count_dry(w, &sd, rc) != 0)
				return -1;
		} else {
			add(&w->g->points, 1);
			count_named(w->g, c.point);
		}
		if (after_crash(w, &sd, &r) != 0)
			return -1;
	}
	return 0;
}

static int worker_main(worker *w)
{
	char err[4096];
	if (!(w->sh = wl_shared_new()))
		return CH_CHILD_FAIL;
	snprintf(w->work, sizeof w->work, "%s/work", w->dir);
	snprintf(w->scratch, sizeof w->scratch, "%s/scratch", w->dir);
	snprintf(w->oracle, sizeof w->oracle, "%s/oracle", w->dir);
	if (mkdir(w->dir, 0755) != 0) {
		fail(w, "cannot set up %s: %s", w->dir, strerror(errno));
		return CH_CHILD_FAIL;
	}
	/* the base stores: the real POSIX backend */
	for (int geo = 0; geo < 2; geo++) {
		snprintf(w->basedir[geo], sizeof w->basedir[geo], "%s/base%d", w->dir, geo);
		if (w->s->make_base(geo, w->basedir[geo], err, sizeof err) != 0) {
			fail(w, "base store %s: %s", w->basedir[geo], err);
			return CH_CHILD_FAIL;
		}
	}
	if (w->has_only)
		return run_seed(w, w->only) ? CH_CHILD_FAIL : 0;
	while (__atomic_load_n(&w->g->points, __ATOMIC_SEQ_CST) < w->target &&
	       __atomic_load_n(&w->g->failures, __ATOMIC_SEQ_CST) < w->s->max_failures) {
		uint64_t idx = __atomic_fetch_add(&w->g->next, 1, __ATOMIC_SEQ_CST);
		(void)run_seed(w, idx); /* a failure is counted and reported; go on */
	}
	return 0;
}

/* ---- the test ---- */

uint64_t ch_points_wanted(const ch_suite *s) { return env_u64("TP_CRASH_POINTS", s->default_points); }

void ch_run(const ch_suite *s)
{
	uint64_t target = ch_points_wanted(s);
	uint64_t base_seed = env_u64("TP_CRASH_SEED", 1);
	const char *only = getenv("TP_CRASH_ONLY");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned jobs = (unsigned)env_u64("TP_CRASH_JOBS", ncpu > 0 ? (uint64_t)(ncpu < 8 ? ncpu : 8) : 2);
	char top[256];
	struct timespec t0, t1;

	ch_totals *g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(g, MAP_FAILED);
	memset(g, 0, sizeof *g);
	cr_assert_eq(wl_tmpdir(s->tmp_name, top, sizeof top), 0, "cannot make a temporary directory: %s",
		     strerror(errno));
	if (only && *only)
		jobs = 1;
	if (jobs < 1)
		jobs = 1;
	if (jobs > 64)
		jobs = 64;
	printf("%s: %" PRIu64 " crash points wanted, %u worker(s), TP_CRASH_SEED=%" PRIu64 "%s%s\n", s->name, target,
	       jobs, base_seed, only && *only ? " TP_CRASH_ONLY=" : "", only && *only ? only : "");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);

	pid_t pids[64];
	static worker ws[64];
	for (unsigned k = 0; k < jobs; k++) {
		worker *w = &ws[k];
		memset(w, 0, sizeof *w);
		w->s = s;
		w->g = g;
		w->base_seed = base_seed;
		w->target = target;
		w->has_only = only && *only;
		w->only = env_u64("TP_CRASH_ONLY", 0);
		snprintf(w->dir, sizeof w->dir, "%s/w%u", top, k);
		snprintf(w->keep, sizeof w->keep, "%s/failed", top);
		fflush(NULL);
		pids[k] = fork();
		cr_assert_geq(pids[k], 0, "fork: %s", strerror(errno));
		if (pids[k] == 0)
			_exit(worker_main(w));
	}
	int bad = 0;
	char sb[128];
	for (unsigned k = 0; k < jobs; k++) {
		int status;
		while (waitpid(pids[k], &status, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			bad++;
			if (!g->failures)
				snprintf(g->msg, sizeof g->msg, "worker %u: %s", k, wl_status_str(status, sb, sizeof sb));
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	uint64_t failures = g->failures + (uint64_t)(bad && !g->failures);
	printf("%s: %" PRIu64 " crash points survived (%" PRIu64 " during recovery, %" PRIu64 " at named points, %" PRIu64
	       " at the end of a run), %" PRIu64 " failures\n",
	       s->name, g->points, g->rec_points, g->named, g->ends, failures);
	s->report(g, secs);
	fflush(stdout);
	if (failures) {
		cr_log_error("%s", g->msg);
		cr_assert_fail("%" PRIu64 " crash point(s) failed%s; the first:\n%s", failures,
			       failures >= s->max_failures ? " (stopped early)" : "", g->msg);
	}
	wl_rmtree(top);
	if (!(only && *only))
		cr_assert_geq(g->points, target, "only %" PRIu64 " of %" PRIu64 " crash points ran", g->points, target);
	if (!(only && *only) && target >= 100)
		cr_assert_gt(g->rec_points, 0, "no crash during recovery was run");
	munmap(g, sizeof *g);
}
