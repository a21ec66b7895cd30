/*
 * test_crash -- randomized crash tests: simulated power cuts at random
 * points of a random transaction workload, and during the recovery that
 * follows, each checked against an oracle of acknowledged commits.
 *
 * For each seed (seed i = wl_mix(TP_CRASH_SEED, i)):
 *   1. A dry run: a child installs the io simulator, opens a fresh copy of
 *      a base store (made once per worker with the real POSIX backend: 48
 *      pages of 1 KiB, or for one seed in three of 4 KiB, in 64 KiB log
 *      segments) and runs the seed's workload (a buffer pool of 8..16 frames
 *      so STEAL happens, a checkpoint every 24..160 KiB of log so
 *      checkpoints, log truncation and segment recycling happen) to its
 *      end, counting syncs (S) and passes through the named crash points.
 *      The run then ends in a power cut with transactions in flight (or, for
 *      one seed in four, a clean tp_close) -- itself a crash point.
 *   2. Three more runs of the same workload on fresh copies, each crashed
 *      at a random sync n in 1..S or at the nth pass through a random named
 *      point ("log.flush.written", "txn.commit.logged", ...).
 *   After each crash, one time in four (again one in three after that, up
 *   to three deep) recovery itself is crashed: a dry recovery on a scratch
 *   copy counts its syncs R, then a child recovers the real copy and is
 *   cut at sync m in 1..R or at a named point.  Finally a verifier child
 *   opens the store (recovery), compares every page with the oracle
 *   (acknowledged commits present, the one in doubt entirely or not at
 *   all, nothing of aborted or in-flight transactions), commits one more
 *   transaction, closes (cleanly or as a crash), reopens, compares again.
 *
 * Children never call cr_assert: they report through shared memory and
 * their exit status; the test fails with the seed and the crash point.
 *
 * Environment
 *   TP_CRASH_POINTS  crash points to run (default 1000; scripts/test --long
 *                    sets 100000)
 *   TP_CRASH_SEED    base seed (default 1); TP_CRASH_ONLY=i reruns seed i
 *   TP_CRASH_JOBS    worker processes (default: online CPUs, at most 8)
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <criterion/options.h>

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

#include "io_sim.h"
#include "workload.h"

#define SETUP_PAGES 48
#define L_PAGES 6
#define ARMED_PER_SEED 3
#define CHILD_TIMEOUT 300 /* seconds: one run never takes close to this */
#define CHILD_FAIL 3
#define MAX_FAILURES 10 /* stop after this many failed crash points */

/* ---- shared by the workers ---- */

typedef struct totals {
	uint64_t next;          /* next seed index (atomic) */
	uint64_t points;        /* crash points run (atomic) */
	uint64_t rec_points;    /* ...of them during recovery */
	uint64_t named;         /* ...of them at named points */
	uint64_t ends;          /* ...of them at the end of a run */
	uint64_t clean_ends;    /* runs that ended with a clean close (not crashes) */
	uint64_t seeds, verified;
	uint64_t redone, losers, doubt, doubt_kept, commits, aborts, ckpts, page_writes, fpis, log_bytes, cuts;
	uint64_t by_point[WL_NPOINTS]; /* crashes at each named point */
	uint64_t after_lazy;           /* crashes at the first sync after a lazy commit or tp_sync */
	uint64_t failures;
	char msg[8192];
} totals;

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

static void count_named(totals *g, const char *point)
{
	for (int i = 0; point && i < WL_NPOINTS; i++)
		if (!strcmp(point, wl_points[i])) {
			add(&g->named, 1);
			add(&g->by_point[i], 1);
		}
}

/* ---- children ---- */

enum { RUN_WORKLOAD, RUN_RECOVERY_DRY, RUN_RECOVERY_CRASH, RUN_VERIFY };

typedef struct child {
	int kind;
	const wl_config *c;
	const wl_model *base;
	const char *store, *oracle;
	uint64_t sim_seed;
	uint64_t sync_n;        /* crash at this sync (0: not armed) */
	const char *point;      /* or at this named point */
	uint64_t nth;
	int end_close;          /* workload: end with tp_close, not a power cut */
	wl_shared *sh;
} child;

static int child_main(void *arg)
{
	child *x = arg;
	tp_options o;
	tp_env *env;
	wl_stats st;
	char err[sizeof x->sh->msg];
	int rc;

	err[0] = 0;
	iosim_install(x->sim_seed);
	if (x->kind == RUN_VERIFY) {
		wl_check_opts co = {.seed = x->sim_seed, .extra_txn = 1};
		wl_check_result res;
		size_t h0 = wl_heap_bytes();
		if (wl_check(x->store, x->c, x->base, x->oracle, &co, &res, err, sizeof err) != 0) {
			snprintf(x->sh->msg, sizeof x->sh->msg, "%s", err);
			return CHILD_FAIL;
		}
		iosim_uninstall();
		size_t h1 = wl_heap_bytes();
		if (h1 > h0) {
			snprintf(x->sh->msg, sizeof x->sh->msg,
				 "the engine leaked %zu bytes in recovery, reopen and close", h1 - h0);
			return CHILD_FAIL;
		}
		x->sh->val[0] = res.rec_redone;
		x->sh->val[1] = res.rec_losers;
		x->sh->val[2] = res.in_doubt;
		x->sh->val[3] = (uint64_t)res.doubt_applied;
		x->sh->val[4] = res.rec_cut_bytes;
		x->sh->finished = 1;
		return 0;
	}
	if (x->sync_n)
		iosim_crash_at_sync(x->sync_n);
	if (x->point)
		iosim_crash_at_point(x->point, x->nth);
	wl_options(x->c, &o);
	if ((rc = tp_open(x->store, &o, &env)) != 0) {
		snprintf(x->sh->msg, sizeof x->sh->msg, "%s: tp_open: %d (%s): %s",
			 x->kind == RUN_WORKLOAD ? "before the workload" : "recovery", rc, tp_strerror(rc), tp_errmsg());
		return CHILD_FAIL;
	}
	if (x->kind == RUN_WORKLOAD) {
		if (wl_run(env, x->c, x->base, x->oracle, WL_STRICT, &st, err, sizeof err) != 0) {
			snprintf(x->sh->msg, sizeof x->sh->msg, "workload: %s", err);
			return CHILD_FAIL;
		}
		x->sh->val[0] = st.commits;
		x->sh->val[1] = st.aborts;
		tp_stats ts;
		tp_stats_get(env, &ts);
		x->sh->val[2] = ts.checkpoints;
		x->sh->val[3] = ts.page_writes;
		x->sh->val[4] = ts.log_fpis;
		x->sh->val[5] = ts.log_bytes;
		/* one sync right after a lazy commit or tp_sync returned */
		x->sh->val[6] = st.nmarks ? st.marks[wl_below(&(wl_rng){x->sim_seed}, st.nmarks)] : 0;
		x->sh->val[7] = st.nmarks;
	}
	wl_shared_counters(x->sh);
	x->sh->finished = 1;
	if (x->kind == RUN_RECOVERY_DRY) {
		tp_crash_close(env);
		return 0;
	}
	if (x->kind == RUN_WORKLOAD && x->end_close) {
		if ((rc = tp_close(env)) != 0) {
			snprintf(x->sh->msg, sizeof x->sh->msg, "tp_close at the end: %d (%s): %s", rc, tp_strerror(rc),
				 tp_errmsg());
			return CHILD_FAIL;
		}
		iosim_uninstall(); /* a clean shutdown: everything reaches the disk */
		return 0;
	}
	iosim_crash_now(); /* a power cut with whatever is still pending */
}

/* ---- one worker: seeds until enough crash points ran ---- */

typedef struct worker {
	totals *g;
	uint64_t base_seed, target, only;
	int has_only;
	wl_config base_cfg[2];  /* two geometries: 1 KiB and 4 KiB pages */
	wl_model base[2];
	const wl_model *cur_base;
	char dir[PATH_MAX], basedir[2][PATH_MAX], work[PATH_MAX], scratch[PATH_MAX], oracle[PATH_MAX];
	wl_shared *sh;
	/* the point being run, for messages */
	uint64_t idx, seed;
	char where[512];
	char keep[PATH_MAX];    /* where the first failing store is copied */
} worker;

static void fail(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(worker *w, const char *fmt, ...)
{
	char m[6144];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	if (__atomic_add_fetch(&w->g->failures, 1, __ATOMIC_SEQ_CST) == 1) {
		int kept = wl_copy_store(w->work, w->keep) == 0;
		snprintf(w->g->msg, sizeof w->g->msg,
			 "crash point failed: %.4000s\n  at: seed index %" PRIu64 " (seed %" PRIu64 "), %.500s\n"
			 "  rerun: TP_CRASH_SEED=%" PRIu64 " TP_CRASH_ONLY=%" PRIu64 "\n  store (after the failed step) %s %.200s",
			 m, w->idx, w->seed, w->where, w->base_seed, w->idx, kept ? "kept in" : "could not be copied to",
			 w->keep);
	}
}

/* Runs one child; 1 if it crashed as planned, 0 if it finished, -1 on a
 * failure (reported). */
static int run_child(worker *w, child *c, int expect_crash)
{
	char sb[128];
	wl_shared_reset(w->sh);
	c->sh = w->sh;
	int status = wl_fork(child_main, c, CHILD_TIMEOUT);
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == IOSIM_CRASH_EXIT && !w->sh->msg[0]) {
		if (w->sh->finished && expect_crash) { /* it reached the power cut at its end */
			fail(w, "the crash armed in the %s did not happen, although the dry run passed that point: "
				"the engine's io is not deterministic",
			     c->kind == RUN_WORKLOAD ? "workload" : "recovery");
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
	     c->kind == RUN_WORKLOAD ? "workload" : c->kind == RUN_VERIFY ? "verifier" : "recovery",
	     wl_status_str(status, sb, sizeof sb), w->sh->msg[0] ? w->sh->msg : "(no message)");
	return -1;
}

/* Picks a crash: a sync in 1..syncs, or (pct_named % of the time, if any
 * was passed) the nth pass through a named point. */
static void pick_crash(wl_rng *r, const wl_shared *dry, uint64_t syncs, int pct_named, child *c, char *desc,
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
static int after_crash(worker *w, const wl_config *cfg, wl_rng *r)
{
	size_t wl = strlen(w->where);
	for (int depth = 0; depth < 3 && wl_below(r, depth ? 3 : 4) == 0; depth++) {
		child c = {.kind = RUN_RECOVERY_DRY, .c = cfg, .base = w->cur_base, .store = w->scratch,
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
		c.kind = RUN_RECOVERY_CRASH;
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
	child v = {.kind = RUN_VERIFY, .c = cfg, .base = w->cur_base, .store = w->work, .oracle = w->oracle,
		   .sim_seed = wl_rand(r)};
	snprintf(w->where + wl, sizeof w->where - wl, "; verify");
	if (run_child(w, &v, 0) < 0)
		return -1;
	w->where[wl] = 0;
	add(&w->g->verified, 1);
	add(&w->g->redone, w->sh->val[0]);
	add(&w->g->losers, w->sh->val[1]);
	add(&w->g->doubt, w->sh->val[2]);
	add(&w->g->doubt_kept, w->sh->val[3] ? 1 : 0);
	add(&w->g->cuts, w->sh->val[4] ? 1 : 0);
	return 0;
}

static int run_seed(worker *w, uint64_t idx)
{
	w->idx = idx;
	w->seed = wl_mix(w->base_seed, idx);
	wl_rng r = {wl_mix(w->seed, 0xc4a54)};
	int geo = wl_below(&r, 3) == 0; /* one seed in three: 4 KiB pages */
	int end_close = wl_below(&r, 4) == 0;
	wl_config cfg = w->base_cfg[geo];
	wl_config_seed(&cfg, w->seed, 20, 60);
	w->cur_base = &w->base[geo];
	child c = {.kind = RUN_WORKLOAD, .c = &cfg, .base = w->cur_base, .store = w->work, .oracle = w->oracle,
		   .end_close = end_close};
	wl_shared dry;

	add(&w->g->seeds, 1);
	for (int j = 0; j <= ARMED_PER_SEED; j++) {
		char desc[160];
		if (wl_copy_store(w->basedir[geo], w->work) != 0) {
			fail(w, "cannot copy %s to %s", w->basedir[geo], w->work);
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
		if (j == 0) {
			c.sync_n = 0;
			c.point = NULL;
			snprintf(w->where, sizeof w->where, "dry run (%u-byte pages, %u transactions, cache %zu, checkpoint every %" PRIu64
				 " bytes), ending in %s",
				 cfg.page_size, cfg.ntx, cfg.cache_pages, cfg.ckpt_log_bytes, end_close ? "a clean close" : "a power cut");
		} else if (j == 1 && dry.val[6] && dry.val[6] < dry.syncs) {
			/* the first sync after a lazy commit or tp_sync returned */
			c.sync_n = dry.val[6] + 1;
			c.point = NULL;
			snprintf(w->where, sizeof w->where,
				 "point %d: workload crashed at sync %" PRIu64 " of %" PRIu64 ", the first after a lazy "
				 "commit or tp_sync returned",
				 j, c.sync_n, (uint64_t)dry.syncs);
			add(&w->g->after_lazy, 1);
		} else {
			pick_crash(&r, &dry, dry.syncs, 30, &c, desc, sizeof desc);
			snprintf(w->where, sizeof w->where, "point %d: workload crashed %s", j, desc);
		}
		int rc = run_child(w, &c, j > 0);
		if (rc < 0)
			return -1;
		if (j == 0) {
			dry = *w->sh;
			add(&w->g->commits, w->sh->val[0]);
			add(&w->g->aborts, w->sh->val[1]);
			add(&w->g->ckpts, w->sh->val[2]);
			add(&w->g->page_writes, w->sh->val[3]);
			add(&w->g->fpis, w->sh->val[4]);
			add(&w->g->log_bytes, w->sh->val[5]);
			if (getenv("TP_CRASH_VERBOSE"))
				fprintf(stderr, "seed index %" PRIu64 ": %u txns, cache %zu, ckpt %" PRIu64 ", L %d, syncs %" PRIu64
					", calls %" PRIu64 ", page writes %" PRIu64 ", fpis %" PRIu64 ", log %" PRIu64
					" bytes, checkpoints %" PRIu64 "\n",
					idx, cfg.ntx, cfg.cache_pages, cfg.ckpt_log_bytes, cfg.long_txn, (uint64_t)dry.syncs,
					(uint64_t)dry.calls, (uint64_t)w->sh->val[3], (uint64_t)w->sh->val[4],
					(uint64_t)w->sh->val[5], (uint64_t)w->sh->val[2]);
			if (rc == 1) {
				add(&w->g->points, 1);
				add(&w->g->ends, 1);
			} else {
				add(&w->g->clean_ends, 1);
			}
			if (!dry.syncs) {
				fail(w, "the dry run made no sync at all");
				return -1;
			}
		} else {
			add(&w->g->points, 1);
			count_named(w->g, c.point);
		}
		if (after_crash(w, &cfg, &r) != 0)
			return -1;
	}
	return 0;
}

static int worker_main(void *arg)
{
	worker *w = arg;
	char err[4096];
	if (!(w->sh = wl_shared_new()))
		return CHILD_FAIL;
	snprintf(w->work, sizeof w->work, "%s/work", w->dir);
	snprintf(w->scratch, sizeof w->scratch, "%s/scratch", w->dir);
	snprintf(w->oracle, sizeof w->oracle, "%s/oracle", w->dir);
	if (mkdir(w->dir, 0755) != 0) {
		fail(w, "cannot set up %s: %s", w->dir, strerror(errno));
		return CHILD_FAIL;
	}
	/* the base stores: the real POSIX backend */
	for (int geo = 0; geo < 2; geo++) {
		snprintf(w->basedir[geo], sizeof w->basedir[geo], "%s/base%d", w->dir, geo);
		if (wl_model_init(&w->base[geo], w->base_cfg[geo].page_size - 16) != 0 ||
		    wl_make_base(w->basedir[geo], &w->base_cfg[geo], &w->base[geo], err, sizeof err) != 0) {
			fail(w, "base store %s: %s", w->basedir[geo], err);
			return CHILD_FAIL;
		}
	}
	if (w->has_only)
		return run_seed(w, w->only) ? CHILD_FAIL : 0;
	while (__atomic_load_n(&w->g->points, __ATOMIC_SEQ_CST) < w->target &&
	       __atomic_load_n(&w->g->failures, __ATOMIC_SEQ_CST) < MAX_FAILURES) {
		uint64_t idx = __atomic_fetch_add(&w->g->next, 1, __ATOMIC_SEQ_CST);
		(void)run_seed(w, idx); /* a failure is counted and reported; go on */
	}
	return 0;
}

/* ---- the test ---- */

static uint64_t points_wanted(void) { return env_u64("TP_CRASH_POINTS", 1000); }

/* The time limit scales with the number of crash points (--long). */
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	(void)set;
	criterion_options.timeout = 120.0 + 0.5 * (double)points_wanted();
}

Test(crash, random_points)
{
	uint64_t target = points_wanted();
	uint64_t base_seed = env_u64("TP_CRASH_SEED", 1);
	const char *only = getenv("TP_CRASH_ONLY");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned jobs = (unsigned)env_u64("TP_CRASH_JOBS", ncpu > 0 ? (uint64_t)(ncpu < 8 ? ncpu : 8) : 2);
	char top[256];
	struct timespec t0, t1;

	totals *g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(g, MAP_FAILED);
	memset(g, 0, sizeof *g);
	cr_assert_eq(wl_tmpdir("crash", top, sizeof top), 0, "cannot make a temporary directory: %s", strerror(errno));
	if (only && *only)
		jobs = 1;
	if (jobs < 1)
		jobs = 1;
	printf("crash: %" PRIu64 " crash points wanted, %u worker(s), TP_CRASH_SEED=%" PRIu64 "%s%s\n", target, jobs,
	       base_seed, only && *only ? " TP_CRASH_ONLY=" : "", only && *only ? only : "");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);

	pid_t pids[64];
	worker ws[64];
	for (unsigned k = 0; k < jobs && k < 64; k++) {
		worker *w = &ws[k];
		memset(w, 0, sizeof *w);
		w->g = g;
		w->base_seed = base_seed;
		w->target = target;
		w->has_only = only && *only;
		w->only = env_u64("TP_CRASH_ONLY", 0);
		wl_config_base(&w->base_cfg[0], SETUP_PAGES, L_PAGES);
		wl_config_base(&w->base_cfg[1], SETUP_PAGES, L_PAGES);
		w->base_cfg[1].page_size = 4096;
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
	for (unsigned k = 0; k < jobs && k < 64; k++) {
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
	printf("crash: %" PRIu64 " crash points survived (%" PRIu64 " during recovery, %" PRIu64 " at named points, %" PRIu64
	       " at the end of a run), %" PRIu64 " failures\n",
	       g->points, g->rec_points, g->named, g->ends, failures);
	printf("crash: %" PRIu64 " seeds, %" PRIu64 " recoveries verified, %" PRIu64 " runs ended cleanly; dry runs "
	       "committed %" PRIu64 " and aborted %" PRIu64 " transactions, logged %" PRIu64 " bytes (%" PRIu64
	       " full-page images), took %" PRIu64 " checkpoints, wrote back %" PRIu64 " pages; "
	       "recoveries redid %" PRIu64 " records, rolled back %" PRIu64 " losers, cut %" PRIu64 " torn log tails; %" PRIu64
	       " commits in doubt, %" PRIu64 " of them kept; %.1f s, %.0f crash points/s\n",
	       g->seeds, g->verified, g->clean_ends, g->commits, g->aborts, g->log_bytes, g->fpis, g->ckpts,
	       g->page_writes, g->redone, g->losers, g->cuts, g->doubt, g->doubt_kept, secs,
	       secs > 0 ? (double)g->points / secs : 0.0);
	printf("crash: %" PRIu64 " at the first sync after a lazy commit or tp_sync; at named points:", g->after_lazy);
	for (int i = 0; i < WL_NPOINTS; i++)
		printf(" %s %" PRIu64 "%s", wl_points[i], g->by_point[i], i + 1 < WL_NPOINTS ? "," : "\n");
	fflush(stdout);
	if (failures) {
		cr_log_error("%s", g->msg);
		cr_assert_fail("%" PRIu64 " crash point(s) failed%s; the first:\n%s", failures,
			       failures >= MAX_FAILURES ? " (stopped early)" : "", g->msg);
	}
	wl_rmtree(top);
	if (!(only && *only))
		cr_assert_geq(g->points, target, "only %" PRIu64 " of %" PRIu64 " crash points ran", g->points, target);
	if (!(only && *only) && target >= 100)
		cr_assert_gt(g->rec_points, 0, "no crash during recovery was run");
	munmap(g, sizeof *g);
}
