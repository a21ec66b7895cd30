/*
 * test_fault -- injected I/O faults at every io call of a small workload:
 * EIO, ENOSPC and short transfers, once or sticky, at call K for every K.
 *
 * The base store (made with the real POSIX backend) needs recovery: a few
 * committed transactions that no checkpoint covers and a long transaction
 * left in flight, then a crash-close.  A scenario's workload opens it
 * (analysis, redo, undo, checkpoint), runs a few transactions (writes,
 * allocations, frees, an abort, a long transaction, checkpoints by hand and
 * by log size, a log segment boundary), and closes.  A dry run counts the
 * io data calls C.  Then for every K in 1..C, every kind and both
 * stickinesses a child runs the same workload with the fault armed at K:
 *   - every engine call returns 0 or an error (EIO, ENOSPC, TP_EPANIC),
 *     never crashes the process (a signal or abort() fails the test);
 *   - no page stays pinned after any call;
 *   - TP_EPANIC is sticky: after it no transaction begins or commits;
 *   - a short transfer is no error at all: io retries it, so the whole
 *     workload must succeed;
 *   - the child ends with tp_close or tp_crash_close, then with its pending
 *     writes applied, dropped, or cut by a simulated power cut.
 *   - in AddressSanitizer builds, a run that ends with tp_close and its
 *     writes applied must not have leaked memory (counted and reported
 *     apart from wrong data, so the sweep goes on).
 * A verifier child then opens the store without faults and checks it
 * against the oracle (workload.h): durable commits present; a failed
 * commit followed by a successful one absent (the engine went on, so it
 * rolled it back: a failed sync that is retried shows up here); failed
 * and lazy commits after the last durable one kept as a prefix, each
 * entirely or not at all; nothing of aborted or in-flight transactions.
 * It commits one more transaction, reopens and checks again.
 *
 * Two targeted tests pin down cases the sweep reaches only by chance:
 *   - abort_after_failed_log_write: a log write fails (panic); aborting
 *     another open transaction must report the panic, not a corrupt store.
 *   - failed_append_leaves_no_trace: creating the next log segment fails
 *     with ENOSPC inside tp_page_write, for every position of the record
 *     near the end of a segment; the transaction is then aborted, another
 *     commits, the process crashes: the failed write must not reappear.
 *     (The store is opened on a full disk, so that the log has not made
 *     its segments ahead: tp.c E1.)
 *
 *   - full_disk_*: a disk that fills up (iosim_disk_full: no file grows):
 *     allocations fail cleanly until the page file is full, the store
 *     closes cleanly (or crashes) and opens again with the disk still full,
 *     small commits go on for many log segments, it frees everything and
 *     takes as many pages again; three rounds.
 *
 * Environment: TP_FAULT_JOBS (worker processes, default online CPUs <= 8),
 * TP_FAULT_ONLY=scenario:K:kind:sticky reruns one fault point.
 */
#include <criterion/criterion.h>

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
#include "tp_test.h"
#include "workload.h"

#define SETUP_PAGES 20
#define L_PAGES 4
#define NSCEN 2
#define CHILD_TIMEOUT 120
#define CHILD_FAIL 3
#define MAX_FAILURES 20 /* stop after this many failed fault points */

static const char *const kinds[] = {"", "EIO", "ENOSPC", "SHORT"};

/* ---- a scenario: base store, model, workload configuration ---- */

typedef struct scenario {
	wl_config cfg;      /* the fault workload */
	wl_model base;      /* committed state of the base store */
	char basedir[PATH_MAX];
	uint64_t calls;     /* io data calls of the dry run */
	uint64_t syncs;
} scenario;

typedef struct totals {
	uint64_t next;      /* next fault point (atomic) */
	uint64_t total;     /* fault points in all */
	uint64_t ran, open_failed, clean_error, panicked, no_error, injected, acked, failed_commits, doubt, doubt_kept;
	uint64_t leaks, leak_checks;   /* fault points where the engine leaked memory, of those checked */
	char leak_msg[1024];
	uint64_t failures;
	char msg[8192];
} totals;

static void add(uint64_t *p, uint64_t v) { __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST); }

/* ---- children ---- */

enum { END_CLOSE_APPLY, END_CRASHCLOSE_DROP, END_POWER_CUT, NEND };
static const char *const ends[] = {"tp_close, pending writes applied", "tp_crash_close, pending writes dropped",
				   "tp_close, then a power cut"};

typedef struct child {
	int verify;
	const scenario *sc;
	const char *store, *oracle;
	uint64_t sim_seed;
	uint64_t call;          /* fault at this call; 0: dry run */
	int kind, sticky, end;
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
	if (x->verify) {
		wl_check_result res;
		size_t leaked;
		if (ch_wl_check(x->store, &x->sc->cfg, &x->sc->base, x->oracle, x->sim_seed, &res, &leaked, err,
				sizeof err) != 0) {
			snprintf(x->sh->msg, sizeof x->sh->msg, "%s", err);
			return CHILD_FAIL;
		}
		if (leaked)
			snprintf(x->sh->leak, sizeof x->sh->leak, "recovery, reopen and close leaked %zu bytes", leaked);
		x->sh->val[0] = res.acked;
		x->sh->val[1] = res.in_doubt;
		x->sh->val[2] = (uint64_t)res.doubt_applied;
		x->sh->finished = 1;
		return 0;
	}
	int strict = !x->call || x->kind == IOSIM_FAULT_SHORT;
	if (x->call)
		iosim_fault_at(x->call, (enum iosim_fault)x->kind, x->sticky);
	size_t h0 = wl_heap_bytes();
	wl_options(&x->sc->cfg, &o);
	if ((rc = tp_open(x->store, &o, &env)) != 0) {
		wl_shared_counters(x->sh);
		if (strict || (rc != EIO && rc != ENOSPC && rc != TP_EPANIC)) {
			snprintf(x->sh->msg, sizeof x->sh->msg, "tp_open (recovery) failed: %d (%s): %s", rc,
				 tp_strerror(rc), tp_errmsg());
			return CHILD_FAIL;
		}
		x->sh->flags = 1; /* open failed cleanly */
		x->sh->finished = 1;
		if (x->end == END_CLOSE_APPLY) {
			iosim_uninstall();
			if (wl_heap_bytes() > h0)
				snprintf(x->sh->leak, sizeof x->sh->leak, "a failed tp_open leaked %zu bytes",
					 wl_heap_bytes() - h0);
		}
		return 0;
	}
	if (wl_run(env, &x->sc->cfg, &x->sc->base, x->oracle, strict ? WL_STRICT : 0, &st, err, sizeof err) != 0) {
		snprintf(x->sh->msg, sizeof x->sh->msg, "workload: %s", err);
		return CHILD_FAIL;
	}
	x->sh->val[0] = st.commits;
	x->sh->val[1] = st.failed_commits;
	x->sh->val[2] = st.errors;
	x->sh->val[3] = (uint64_t)st.panicked;
	if (x->end == END_CRASHCLOSE_DROP) {
		tp_crash_close(env);
	} else if ((rc = tp_close(env)) != 0 && (strict || (rc != EIO && rc != ENOSPC && rc != TP_EPANIC))) {
		snprintf(x->sh->msg, sizeof x->sh->msg, "tp_close failed: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
		return CHILD_FAIL;
	} else if (rc) {
		x->sh->val[2]++;
	}
	wl_shared_counters(x->sh);
	x->sh->finished = 1;
	switch (x->end) {
	case END_CLOSE_APPLY:
		iosim_uninstall(); /* the page cache reaches the disk after all */
		if (wl_heap_bytes() > h0)
			snprintf(x->sh->leak, sizeof x->sh->leak,
				 "tp_open, the workload and tp_close leaked %zu bytes (%u transactions were in flight at the "
				 "close)",
				 wl_heap_bytes() - h0, st.inflight);
		return 0;
	case END_CRASHCLOSE_DROP:
		return 0; /* unsynced writes die with the process's simulated cache */
	default:
		iosim_crash_now();
	}
}

/* ---- workers ---- */

typedef struct worker {
	totals *g;
	scenario *sc;
	char dir[256], work[PATH_MAX], oracle[PATH_MAX];
	wl_shared *sh;
	char where[512];
	char keep[PATH_MAX];    /* where the first failing store is copied */
	int has_only;
	uint64_t only;
} worker;

static void fail(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(worker *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ch_vnote_failure(&w->g->failures, w->g->msg, sizeof w->g->msg, "fault", w->where, w->work, w->keep, fmt, ap);
	va_end(ap);
}

/* A leak found by the child (sh->leak) is counted and reported apart: the
 * sweep goes on. */
static void note_leak(worker *w, int checked)
{
	add(&w->g->leak_checks, (uint64_t)checked);
	if (w->sh->leak[0] && __atomic_add_fetch(&w->g->leaks, 1, __ATOMIC_SEQ_CST) == 1)
		snprintf(w->g->leak_msg, sizeof w->g->leak_msg, "%.400s, at %.500s", w->sh->leak, w->where);
}

static int run_child(worker *w, child *c)
{
	char sb[128];
	wl_shared_reset(w->sh);
	c->sh = w->sh;
	c->store = w->work;
	c->oracle = w->oracle;
	int status = wl_fork(child_main, c, CHILD_TIMEOUT);
	int want_exit = !c->verify && c->end == END_POWER_CUT && !w->sh->flags ? IOSIM_CRASH_EXIT : 0;
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == want_exit && w->sh->finished &&
	    !w->sh->msg[0])
		return 0;
	fail(w, "%s child: %s; %s", c->verify ? "verifier" : "workload", wl_status_str(status, sb, sizeof sb),
	     w->sh->msg[0] ? w->sh->msg : "(no message)");
	return -1;
}

/* Fault point p: scenario, call, kind, stickiness, from one index. */
static void decode(const scenario *sc, uint64_t p, int *s, uint64_t *call, int *kind, int *sticky)
{
	for (*s = 0; *s < NSCEN && p >= sc[*s].calls * 6; (*s)++)
		p -= sc[*s].calls * 6;
	*call = 1 + p / 6;
	*kind = 1 + (int)(p % 6) / 2;
	*sticky = (int)(p % 2);
}

static int run_point(worker *w, uint64_t p)
{
	int s, kind, sticky;
	uint64_t call;
	decode(w->sc, p, &s, &call, &kind, &sticky);
	const scenario *sc = &w->sc[s];
	uint64_t h = wl_mix(sc->cfg.seed, p);
	child c = {.sc = sc, .sim_seed = h, .call = call, .kind = kind, .sticky = sticky, .end = (int)(h % NEND)};
	snprintf(w->where, sizeof w->where,
		 "scenario %d, %s%s at io call %" PRIu64 " of %" PRIu64 ", ended by %s (rerun: TP_FAULT_ONLY=%d:%" PRIu64
		 ":%s:%d)",
		 s, sticky ? "sticky " : "", kinds[kind], call, sc->calls, ends[c.end], s, call, kinds[kind], sticky);
	if (wl_copy_store(sc->basedir, w->work) != 0) {
		fail(w, "cannot copy %s", sc->basedir);
		return -1;
	}
	unlink(w->oracle);
	if (run_child(w, &c) != 0)
		return -1;
	add(&w->g->ran, 1);
	add(&w->g->injected, w->sh->faults ? 1 : 0);
	if (w->sh->flags)
		add(&w->g->open_failed, 1);
	else if (w->sh->val[3])
		add(&w->g->panicked, 1);
	else if (w->sh->val[2])
		add(&w->g->clean_error, 1);
	else
		add(&w->g->no_error, 1);
	add(&w->g->failed_commits, w->sh->val[1]);
	note_leak(w, c.end == END_CLOSE_APPLY);
	if (kind == IOSIM_FAULT_SHORT && w->sh->val[2]) {
		fail(w, "a short transfer made an engine call fail (io must retry it)");
		return -1;
	}
	child v = {.verify = 1, .sc = sc, .sim_seed = wl_mix(h, 1)};
	if (run_child(w, &v) != 0)
		return -1;
	note_leak(w, 1);
	add(&w->g->acked, w->sh->val[0]);
	add(&w->g->doubt, w->sh->val[1]);
	add(&w->g->doubt_kept, w->sh->val[2] ? 1 : 0);
	return 0;
}

static int worker_main(void *arg)
{
	worker *w = arg;
	if (!(w->sh = wl_shared_new()) || mkdir(w->dir, 0755) != 0) {
		fail(w, "cannot set up %s", w->dir);
		return CHILD_FAIL;
	}
	snprintf(w->work, sizeof w->work, "%s/work", w->dir);
	snprintf(w->oracle, sizeof w->oracle, "%s/oracle", w->dir);
	if (w->has_only)
		return run_point(w, w->only) ? CHILD_FAIL : 0;
	for (;;) {
		uint64_t p = __atomic_fetch_add(&w->g->next, 1, __ATOMIC_SEQ_CST);
		if (p >= w->g->total || __atomic_load_n(&w->g->failures, __ATOMIC_SEQ_CST) >= MAX_FAILURES)
			return 0;
		(void)run_point(w, p); /* a failure is counted and reported; go on */
	}
}

/* ---- set-up: base stores that need recovery, dry runs ---- */

/* The prelude runs in a child: it ends like a crash, with transactions in
 * flight whose handles the engine keeps (and the process loses). */
typedef struct prelude {
	const char *store, *oracle;
	const wl_config *c;
	const wl_model *base;
	wl_shared *sh;
} prelude;

static int prelude_child(void *arg)
{
	prelude *p = arg;
	tp_options o;
	tp_env *env;
	wl_stats st;
	int rc;
	wl_options(p->c, &o);
	if ((rc = tp_open(p->store, &o, &env)) != 0) {
		snprintf(p->sh->msg, sizeof p->sh->msg, "tp_open: %d: %s", rc, tp_errmsg());
		return CHILD_FAIL;
	}
	if (wl_run(env, p->c, p->base, p->oracle, WL_STRICT, &st, p->sh->msg, sizeof p->sh->msg) != 0)
		return CHILD_FAIL;
	tp_crash_close(env);
	return 0;
}

static void make_scenario(scenario *sc, int s, const char *top)
{
	char err[4096], oracle[PATH_MAX], sb[128];
	wl_config pre;

	snprintf(sc->basedir, sizeof sc->basedir, "%s/base%d", top, s);
	snprintf(oracle, sizeof oracle, "%s/prelude%d", top, s);
	wl_config_base(&pre, SETUP_PAGES, L_PAGES);
	pre.page_size = s ? 4096 : 1024;
	cr_assert_eq(wl_model_init(&sc->base, pre.page_size - 16), 0);
	cr_assert_eq(wl_make_base(sc->basedir, &pre, &sc->base, err, sizeof err), 0, "%s", err);
	/* prelude: commits no checkpoint covers, L in flight, then a crash */
	pre.seed = 0x9e1d0 + (uint64_t)s;
	pre.cache_pages = 8;
	pre.ckpt_log_bytes = 1 << 30;
	pre.ntx = 4;
	pre.long_txn = WL_END_INFLIGHT;
	pre.last_inflight = 1;
	pre.ckpt_pct = 0;
	pre.nosync_pct = 0; /* every commit durable: the base model is exact */
	wl_shared *sh = wl_shared_new();
	cr_assert_not_null(sh);
	prelude p = {.store = sc->basedir, .oracle = oracle, .c = &pre, .base = &sc->base, .sh = sh};
	int status = wl_fork(prelude_child, &p, CHILD_TIMEOUT);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "scenario %d prelude: %s; %s", s,
		  wl_status_str(status, sb, sizeof sb), sh->msg);
	wl_shared_free(sh);
	wl_model m;
	cr_assert_eq(wl_model_init(&m, sc->base.body), 0);
	cr_assert_eq(wl_oracle_apply(&sc->base, oracle, &m, err, sizeof err), 0, "%s", err);
	wl_model_copy(&sc->base, &m);
	wl_model_free(&m);

	/* the fault workload */
	sc->cfg = pre;
	sc->cfg.seed = 0xfa017 + (uint64_t)s;
	sc->cfg.cache_pages = 8;
	sc->cfg.ckpt_log_bytes = s ? 40 * 1024 : 24 * 1024;
	sc->cfg.ntx = s ? 7 : 10;
	sc->cfg.long_txn = s ? WL_END_ABORT : WL_END_COMMIT;
	sc->cfg.last_inflight = s;
	sc->cfg.ckpt_pct = 10;
	sc->cfg.nosync_pct = 15;
}

static int dry_child(void *arg)
{
	child *c = arg;
	c->call = 0;
	c->end = END_CLOSE_APPLY;
	int rc = child_main(c);
	return rc;
}

Test(fault, every_call, .timeout = 1500)
{
	char top[200];
	static scenario sc[NSCEN]; /* set up before the workers fork: they only read it */
	totals *g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(g != MAP_FAILED);
	memset(g, 0, sizeof *g);
	cr_assert_eq(wl_tmpdir("fault", top, sizeof top), 0, "cannot make a temporary directory: %s", strerror(errno));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);

	worker w0 = {.g = g, .sc = sc};
	snprintf(w0.dir, sizeof w0.dir, "%s/dry", top);
	cr_assert_eq(mkdir(w0.dir, 0755), 0);
	snprintf(w0.work, sizeof w0.work, "%s/work", w0.dir);
	snprintf(w0.oracle, sizeof w0.oracle, "%s/oracle", w0.dir);
	snprintf(w0.keep, sizeof w0.keep, "%s/failed", top);
	w0.sh = wl_shared_new();
	cr_assert_not_null(w0.sh);
	for (int s = 0; s < NSCEN; s++) {
		make_scenario(&sc[s], s, top);
		/* dry run: count the io calls; the result must verify too */
		cr_assert_eq(wl_copy_store(sc[s].basedir, w0.work), 0);
		child c = {.sc = &sc[s], .sim_seed = 1, .end = END_CLOSE_APPLY};
		snprintf(w0.where, sizeof w0.where, "scenario %d dry run", s);
		c.sh = w0.sh;
		c.store = w0.work;
		c.oracle = w0.oracle;
		wl_shared_reset(w0.sh);
		char sb[128];
		int status = wl_fork(dry_child, &c, CHILD_TIMEOUT);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0 && w0.sh->finished, "scenario %d dry run: %s; %s", s,
			  wl_status_str(status, sb, sizeof sb), w0.sh->msg);
		sc[s].calls = w0.sh->calls;
		sc[s].syncs = w0.sh->syncs;
		cr_assert_gt(w0.sh->val[0], 3, "scenario %d: only %" PRIu64 " commits", s, (uint64_t)w0.sh->val[0]);
		child v = {.verify = 1, .sc = &sc[s], .sim_seed = 2};
		cr_assert_eq(run_child(&w0, &v), 0, "%s", g->msg);
		printf("fault: scenario %d: %u-byte pages, %" PRIu64 " io data calls, %" PRIu64 " syncs, %" PRIu64
		       " commits in the dry run\n",
		       s, sc[s].cfg.page_size, sc[s].calls, sc[s].syncs, (uint64_t)w0.sh->val[0]);
		g->total += sc[s].calls * 6;
	}
	fflush(stdout);

	const char *only = getenv("TP_FAULT_ONLY");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	const char *jv = getenv("TP_FAULT_JOBS");
	unsigned jobs = jv && atoi(jv) > 0 ? (unsigned)atoi(jv) : ncpu > 0 ? (unsigned)(ncpu < 8 ? ncpu : 8) : 2;
	uint64_t only_p = 0;
	if (only && *only) {
		int s, st;
		unsigned long long k;
		char kn[16];
		cr_assert_eq(sscanf(only, "%d:%llu:%15[A-Z]:%d", &s, &k, kn, &st), 4, "TP_FAULT_ONLY=scenario:K:kind:sticky");
		int kind = !strcmp(kn, "EIO") ? 1 : !strcmp(kn, "ENOSPC") ? 2 : 3;
		for (int i = 0; i < s; i++)
			only_p += sc[i].calls * 6;
		only_p += (k - 1) * 6 + (uint64_t)(kind - 1) * 2 + (uint64_t)st;
		jobs = 1;
	}
	pid_t pids[8];
	worker ws[8];
	for (unsigned k = 0; k < jobs && k < 8; k++) {
		ws[k] = (worker){.g = g, .sc = sc, .has_only = only && *only, .only = only_p};
		snprintf(ws[k].dir, sizeof ws[k].dir, "%s/w%u", top, k);
		snprintf(ws[k].keep, sizeof ws[k].keep, "%s/failed", top);
		fflush(NULL);
		pids[k] = fork();
		cr_assert_geq(pids[k], 0);
		if (pids[k] == 0)
			_exit(worker_main(&ws[k]));
	}
	for (unsigned k = 0; k < jobs && k < 8; k++) {
		int status;
		char sb[128];
		while (waitpid(pids[k], &status, 0) < 0 && errno == EINTR)
			;
		if ((!WIFEXITED(status) || WEXITSTATUS(status)) && !g->failures) {
			g->failures = 1;
			snprintf(g->msg, sizeof g->msg, "worker %u: %s", k, wl_status_str(status, sb, sizeof sb));
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("fault: %" PRIu64 " fault points ran (%" PRIu64 " with a fault injected): %" PRIu64
	       " ended in a clean error, %" PRIu64 " in the sticky panic state, %" PRIu64 " failed to open (recover), %" PRIu64
	       " saw no error; %" PRIu64 " failures\n",
	       g->ran, g->injected, g->clean_error, g->panicked, g->open_failed, g->no_error, g->failures);
	printf("fault: %" PRIu64 " commits acknowledged, %" PRIu64 " failed, %" PRIu64 " in doubt after the last "
	       "acknowledged one (%" PRIu64 " kept by recovery); ",
	       g->acked, g->failed_commits, g->doubt, g->doubt_kept);
	if (wl_heap_counted())
		printf("%" PRIu64 " memory leaks in %" PRIu64 " checked runs; ", g->leaks, g->leak_checks);
	else
		printf("memory leaks not checked (only in AddressSanitizer builds); ");
	printf("%.1f s\n", secs);
	if (g->leaks)
		printf("fault: the first leak: %s\n", g->leak_msg);
	fflush(stdout);
	if (g->failures) {
		cr_log_error("%s", g->msg);
		cr_assert_fail("%" PRIu64 " fault point(s) failed%s; the first:\n%s", g->failures,
			       g->failures >= MAX_FAILURES ? " (stopped early)" : "", g->msg);
	}
	cr_assert_eq(g->leaks, 0, "the engine leaked memory in %" PRIu64 " of %" PRIu64 " checked runs; the first: %s",
		     g->leaks, g->leak_checks, g->leak_msg);
	if (!(only && *only)) {
		cr_assert_eq(g->ran + g->failures, g->total, "%" PRIu64 " of %" PRIu64 " fault points ran", g->ran, g->total);
		cr_assert_gt(g->panicked, 0, "no run reached the panic state");
		cr_assert_gt(g->clean_error, 0, "no run ended in a clean error");
	}
	wl_rmtree(top);
}

/* ---- targeted tests ---- */

static void small_options(tp_options *o, size_t cache)
{
	tp_options_init(o);
	o->page_size = 1024;
	o->seg_size = 64 * 1024;
	o->cache_pages = cache;
	o->ckpt_ms = 0;
	o->ckpt_log_bytes = 1 << 30;
	o->quiet = 1;
}

/* A new store of small pages in a temporary directory, opened under the io
 * simulator installed with seed (dir, store: its paths). */
static void fresh_store(uint64_t seed, char *dir, size_t dn, char *store, size_t sn, tp_options *o, tp_env **env)
{
	cr_assert_eq(wl_tmpdir("fault", dir, dn), 0);
	snprintf(store, sn, "%s/s", dir);
	small_options(o, 64);
	cr_assert_eq(tp_mkfs(store, o), 0, "%s", tp_errmsg());
	iosim_install(seed);
	cr_assert_eq(tp_open(store, o, env), 0, "%s", tp_errmsg());
}

Test(fault, abort_after_failed_log_write, .timeout = 60)
{
	char dir[200], store[256];
	tp_options o;
	tp_env *env;
	tp_txn *t, *u;
	uint64_t pg;
	unsigned char z[40], r[40];
	int rc;

	fresh_store(1, dir, sizeof dir, store, sizeof store, &o, &env);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_page_alloc(t, 1, &pg), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	memset(z, 0xab, sizeof z);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_page_write(t, pg, 0, z, 40), 0); /* T's record: in the log buffer only */
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_EIO, 0); /* the next io call fails */
	cr_assert_eq(tp_begin(env, &u), 0);
	cr_assert_eq(tp_page_write(u, pg, 100, z, 10), 0);
	rc = tp_commit(u, 0); /* its log write fails: panic */
	cr_assert(rc == EIO || rc == TP_EPANIC, "commit with a failing log write: %d (%s)", rc, tp_errmsg());
	rc = tp_abort(t);
	cr_expect(rc == 0 || rc == TP_EPANIC || rc == EIO,
		  "tp_abort after a failed log write returned %d (%s): %s -- expected the panic (TP_EPANIC), "
		  "not a corrupt store",
		  rc, tp_strerror(rc), tp_errmsg());
	cr_assert_eq(tp_debug_pinned(env), 0);
	cr_assert_neq(tp_begin(env, &t), 0, "a transaction began after the panic");
	tp_crash_close(env);
	iosim_uninstall();
	cr_assert_eq(tp_open(store, &o, &env), 0, "recovery: %s", tp_errmsg());
	cr_assert_eq(tp_page_read(env, pg, 0, r, 40), 0);
	for (int i = 0; i < 40; i++)
		cr_assert_eq(r[i], 0, "the aborted transaction's write survived recovery (byte %d)", i);
	cr_assert_eq(tp_close(env), 0);
	wl_rmtree(dir);
}

/* One trial of failed_append_leaves_no_trace, in a child: nbig commits of
 * 800 bytes and one of filler bytes bring the log end near the end of
 * segment 0; then a transaction writes a little (so its abort logs an
 * ABORT record) and makes one more write with the next io call -- the
 * creation of the spare segment, if the write reaches segment 1 -- failing
 * with ENOSPC.  Result in sh->val[0]: 0 the write succeeded, 1 it failed
 * and left no trace, 2 it failed and reappeared after recovery. */
typedef struct append_trial {
	const char *store;
	unsigned nbig, filler;
	wl_shared *sh;
} append_trial;

static int append_child(void *arg)
{
	append_trial *a = arg;
	tp_options o;
	tp_env *env;
	tp_txn *t;
	uint64_t pa, pb;
	unsigned char big[1008], z[40], r[40];
	char seg2[256];
	int rc;

	small_options(&o, 64);
	wl_rmtree(a->store);
	iosim_install(7);
#define CK(c)                                                                                                    \
	do {                                                                                                     \
		if (!(c)) {                                                                                      \
			snprintf(a->sh->msg, sizeof a->sh->msg, "line %d: %s: %s", __LINE__, #c, tp_errmsg());   \
			return CHILD_FAIL;                                                                       \
		}                                                                                                \
	} while (0)
	CK(tp_mkfs(a->store, &o) == 0);
	/* opened while the disk is full, the log keeps only the two segments
	 * mkfs made (tp.c E1): the append that enters segment 1 makes the
	 * spare after it, and that is where the fault goes */
	iosim_disk_full(1);
	CK(tp_open(a->store, &o, &env) == 0);
	iosim_disk_full(0);
	CK(tp_begin(env, &t) == 0 && tp_page_alloc(t, 1, &pa) == 0 && tp_page_alloc(t, 1, &pb) == 0);
	CK(tp_commit(t, 0) == 0);
	memset(big, 0x11, sizeof big);
	snprintf(seg2, sizeof seg2, "%s/log/log.%016x", a->store, 2);
	for (unsigned i = 0; i < a->nbig; i++) {
		CK(tp_begin(env, &t) == 0 && tp_page_write(t, pb, 0, big, 800) == 0 && tp_commit(t, 0) == 0);
		if (a->filler == 0 && access(seg2, F_OK) == 0) { /* calibration: the crossing */
			a->sh->val[1] = i;
			tp_crash_close(env);
			return 0;
		}
	}
	if (a->filler == 0)
		return 0;
	CK(tp_begin(env, &t) == 0 && tp_page_write(t, pb, 0, big, a->filler) == 0 && tp_commit(t, 0) == 0);
	if (access(seg2, F_OK) == 0) { /* already crossed */
		a->sh->val[2] = 1;
		tp_crash_close(env);
		return 0;
	}
	memset(z, 0xab, sizeof z);
	CK(tp_begin(env, &t) == 0 && tp_page_write(t, pb, 900, z, 8) == 0);
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_ENOSPC, 0);
	rc = tp_page_write(t, pa, 100, z, 40);
	iosim_fault_at(0, 0, 0);
	if (rc == 0) {
		tp_crash_close(env);
		return 0;
	}
	CK(rc == ENOSPC || rc == TP_EPANIC);
	CK(tp_debug_pinned(env) == 0);
	rc = tp_abort(t);
	CK(rc == 0 || rc == TP_EPANIC);
	if (rc == 0) /* a clean failure: the store goes on, and this commit flushes the log */
		CK(tp_begin(env, &t) == 0 && tp_page_write(t, pb, 0, big, 8) == 0 && tp_commit(t, 0) == 0);
	tp_crash_close(env);
	CK(tp_open(a->store, &o, &env) == 0);
	CK(tp_page_read(env, pa, 100, r, 40) == 0);
	a->sh->val[0] = r[0] == 0xab ? 2 : 1;
	CK(tp_close(env) == 0);
#undef CK
	return 0;
}

Test(fault, failed_append_leaves_no_trace, .timeout = 300)
{
	char dir[200], store[256], sb[128];
	wl_shared *sh = wl_shared_new();
	unsigned failed = 0, bad = 0, first_bad = 0;

	cr_assert_not_null(sh);
	cr_assert_eq(wl_tmpdir("fault", dir, sizeof dir), 0);
	snprintf(store, sizeof store, "%s/s", dir);
	append_trial a = {.store = store, .nbig = 200, .filler = 0, .sh = sh};
	int status = wl_fork(append_child, &a, 60);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "calibration: %s; %s",
		  wl_status_str(status, sb, sizeof sb), sh->msg);
	cr_assert_gt(sh->val[1], 1, "the log never reached segment 1");
	a.nbig = (unsigned)sh->val[1]; /* commits that stay in segment 0: one more would cross */
	/* every 8-byte position of the failing record near the segment end */
	for (a.filler = 1; a.filler <= 1008; a.filler += 4) {
		wl_shared_reset(sh);
		status = wl_fork(append_child, &a, 60);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "filler %u: %s; %s", a.filler,
			  wl_status_str(status, sb, sizeof sb), sh->msg);
		failed += sh->val[0] != 0;
		if (getenv("TP_FAULT_VERBOSE"))
			printf("nbig %u filler %u: %d%s\n", a.nbig, a.filler, (int)sh->val[0], sh->val[2] ? " (crossed before)" : "");
		if (sh->val[0] == 2 && !bad++)
			first_bad = a.filler;
	}
	printf("fault: failed_append_leaves_no_trace: %u positions where the segment creation failed, %u left the "
	       "failed write in the store\n",
	       failed, bad);
	cr_assert_gt(failed, 0, "no write failed: the test did not reach a segment boundary");
	cr_assert_eq(bad, 0,
		     "%u of %u failed and aborted writes reappeared after recovery (first: %u commits of 800 bytes, "
		     "one of %u bytes, then an 8-byte write and the failing 40-byte write, abort, a commit, crash): "
		     "a record was left in the log by an append that reported failure",
		     bad, failed, a.nbig, first_bad);
	wl_shared_free(sh);
	wl_rmtree(dir);
}

/* ---- a full disk ---- */

#define FULL_MAX 20000 /* pages the fill may take at most */

/* Allocates and writes pages, each in its own commit, until an allocation
 * fails: it must be ENOSPC, and abort cleanly.  Returns how many. */
static unsigned full_fill(tp_env *env, uint64_t *pages, unsigned have, unsigned round)
{
	unsigned char z[40];
	tp_txn *t;
	uint64_t pg;
	int rc;
	for (;;) {
		cr_assert_lt(have, FULL_MAX, "round %u: %u pages allocated and no ENOSPC: the disk is not full", round,
			     have);
		cr_assert_eq(tp_begin(env, &t), 0, "round %u: begin after %u pages: %s", round, have, tp_errmsg());
		if ((rc = tp_page_alloc(t, 1, &pg)) != 0) {
			cr_assert_eq(rc, ENOSPC, "round %u: allocation %u failed with %d (%s), not ENOSPC", round, have,
				     rc, tp_errmsg());
			cr_assert_eq(tp_abort(t), 0, "round %u: abort after ENOSPC: %s", round, tp_errmsg());
			return have;
		}
		memset(z, (int)(pg & 0xff), sizeof z);
		cr_assert_eq(tp_page_write(t, pg, 0, z, sizeof z), 0, "round %u: %s", round, tp_errmsg());
		cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0, "round %u: commit of page %u: %s", round, have,
			     tp_errmsg());
		pages[have++] = pg;
	}
}

static int full_fill_one(tp_env *env, uint64_t *pages)
{
	unsigned char z[40];
	tp_txn *t;
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_page_alloc(t, 1, &pages[0]), 0, "%s", tp_errmsg());
	memset(z, (int)(pages[0] & 0xff), sizeof z);
	cr_assert_eq(tp_page_write(t, pages[0], 0, z, sizeof z), 0);
	return tp_commit(t, 0);
}

/* Many small commits on the full disk: far more log than its segments
 * hold, so only checkpoints that free old segments let them go on. */
static void full_churn(tp_env *env, uint64_t pg, unsigned round)
{
	unsigned char big[800];
	tp_txn *t;
	memset(big, (int)round, sizeof big);
	for (unsigned i = 0; i < 1500; i++) {
		cr_assert_eq(tp_begin(env, &t), 0);
		int rc = tp_page_write(t, pg, 100, big, sizeof big);
		if (rc == 0)
			rc = tp_commit(t, TP_COMMIT_NOSYNC);
		else
			(void)tp_abort(t);
		cr_assert_eq(rc, 0,
			     "round %u: small commit %u on a full disk failed: %d (%s) -- the log ran out of "
			     "segments and no checkpoint freed one",
			     round, i, rc, tp_errmsg());
	}
}

static void full_disk_rounds(int crash)
{
	char dir[200], store[256];
	uint64_t *pages = calloc(FULL_MAX, sizeof *pages);
	tp_options o;
	tp_env *env;
	tp_txn *t;
	unsigned n = 0, first = 0;

	cr_assert_not_null(pages);
	fresh_store(11, dir, sizeof dir, store, sizeof store, &o, &env);
	cr_assert_eq(full_fill_one(env, pages), 0); /* the page file's first growth, a margin ahead */
	n = 1;
	iosim_disk_full(1); /* from here on no file of the store grows */
	for (unsigned round = 1; round <= 3; round++) {
		n = full_fill(env, pages, n, round);
		if (round == 1)
			first = n;
		cr_assert_gt(n, 0, "round %u: not one page could be allocated", round);
		cr_assert_geq(n, first, "round %u: %u pages allocated, %u in round 1: freed space was lost", round, n,
			      first);
		/* an open transaction that frees a page and allocates: a loser at a crash */
		cr_assert_eq(tp_begin(env, &t), 0);
		cr_assert_eq(tp_page_free(t, pages[n - 1]), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_debug_pinned(env), 0);
		if (crash) {
			cr_assert_eq(tp_sync(env), 0, "%s", tp_errmsg()); /* the lazy commits durable */
			tp_crash_close(env);
		} else {
			cr_assert_eq(tp_abort(t), 0, "%s", tp_errmsg());
			cr_assert_eq(tp_close(env), 0, "round %u: close on a full disk: %s", round, tp_errmsg());
		}
		cr_assert_eq(tp_open(store, &o, &env), 0, "round %u: open on a full disk after a %s: %s", round,
			     crash ? "crash" : "clean close", tp_errmsg());
		if (!crash)
			cr_assert(tp_clean(env), "round %u: the close on a full disk left the store needing recovery",
				  round);
		for (unsigned i = 0; i < n; i++) { /* every commit is there */
			unsigned char r[40];
			cr_assert_eq(tp_page_read(env, pages[i], 0, r, sizeof r), 0, "%s", tp_errmsg());
			cr_assert_eq(r[0], (unsigned char)(pages[i] & 0xff), "round %u: page %" PRIu64 " lost its data",
				     round, pages[i]);
		}
		full_churn(env, pages[0], round);
		/* empty it: every page freed in one commit, then taken again at once */
		cr_assert_eq(tp_begin(env, &t), 0);
		for (unsigned i = 0; i < n; i++)
			cr_assert_eq(tp_page_free(t, pages[i]), 0, "round %u: free %u: %s", round, i, tp_errmsg());
		cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0, "round %u: freeing everything: %s", round,
			     tp_errmsg());
		n = 0;
	}
	n = full_fill(env, pages, 0, 4);
	cr_assert_geq(n, first, "after the last round: %u pages, %u in round 1", n, first);
	cr_assert_eq(tp_close(env), 0, "last close: %s", tp_errmsg());
	iosim_uninstall();
	printf("fault: full_disk (%s): %u pages fill the page file in each of 4 rounds\n", crash ? "crash" : "close",
	       first);
	free(pages);
	wl_rmtree(dir);
}

Test(fault, full_disk_close_reopen_empty_refill, .timeout = 120) { full_disk_rounds(0); }

Test(fault, full_disk_crash_recover_empty_refill, .timeout = 120) { full_disk_rounds(1); }

/* A transaction deletes every key of a tree on a full disk (its leaves
 * merge, freeing pages), then is rolled back -- by tp_abort, or by recovery
 * after a crash: putting the keys back splits leaves again, which takes
 * pages.  On the full disk they must come from the pages kept for
 * rollbacks and the ones the merges freed (R7, B14), never from new disk
 * space, or the rollback fails and the store cannot be opened. */
static void full_disk_rollback(int crash)
{
	char dir[200], store[256];
	uint64_t *pages = calloc(FULL_MAX, sizeof *pages);
	unsigned char key[8], val[200], r[200];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	tp_txn *t;
	size_t vl;
	const unsigned nkeys = 1200;

	cr_assert_not_null(pages);
	fresh_store(13, dir, sizeof dir, store, sizeof store, &o, &env);
	cr_assert_eq(tp_tree_open(env, "t", TP_TREE_CREATE | TP_TREE_U64, &tr), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_begin(env, &t), 0);
	for (uint64_t k = 0; k < nkeys; k++) {
		memcpy(key, &k, 8);
		memset(val, (int)(k & 0xff), sizeof val);
		cr_assert_eq(tp_put(t, tr, key, 8, val, sizeof val, 0), 0, "%s", tp_errmsg());
	}
	cr_assert_eq(tp_commit(t, 0), 0, "%s", tp_errmsg());
	iosim_disk_full(1);
	unsigned n = full_fill(env, pages, 0, 1); /* every page ordinary allocations may take */
	cr_assert_eq(tp_begin(env, &t), 0);
	for (uint64_t k = 0; k < nkeys; k++) {
		memcpy(key, &k, 8);
		cr_assert_eq(tp_del(t, tr, key, 8), 0, "delete %" PRIu64 " on a full disk: %s", k, tp_errmsg());
	}
	if (crash) {
		cr_assert_eq(tp_sync(env), 0, "%s", tp_errmsg()); /* the deletes durable: recovery undoes them */
		tp_tree_close(tr);
		tp_crash_close(env);
		cr_assert_eq(tp_open(store, &o, &env), 0, "recovery on a full disk, undoing %u deletes: %s", nkeys,
			     tp_errmsg());
		cr_assert_eq(tp_tree_open(env, "t", TP_TREE_U64, &tr), 0, "%s", tp_errmsg());
	} else {
		cr_assert_eq(tp_abort(t), 0, "rollback of %u deletes on a full disk: %s", nkeys, tp_errmsg());
	}
	for (uint64_t k = 0; k < nkeys; k++) { /* every key is back */
		memcpy(key, &k, 8);
		cr_assert_eq(tp_get(NULL, tr, key, 8, r, sizeof r, &vl), 0, "key %" PRIu64 ": %s", k, tp_errmsg());
		cr_assert(vl == sizeof val && r[0] == (unsigned char)(k & 0xff), "key %" PRIu64 " has the wrong value", k);
	}
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "close: %s", tp_errmsg());
	cr_assert_eq(tp_open(store, &o, &env), 0, "%s", tp_errmsg());
	cr_assert(tp_clean(env), "the close left the store needing recovery");
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
	iosim_uninstall();
	printf("fault: full_disk rollback (%s): %u keys put back after %u pages filled the disk\n",
	       crash ? "recovery" : "abort", nkeys, n);
	free(pages);
	wl_rmtree(dir);
}

Test(fault, full_disk_abort_splits, .timeout = 120) { full_disk_rollback(0); }

Test(fault, full_disk_recovery_splits, .timeout = 120) { full_disk_rollback(1); }
