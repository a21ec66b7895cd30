/*
 * tpcb_mt -- a TPC-B-like multi-threaded workload on the engine, checked
 * against an exact oracle; with --crash, the same workload dies at
 * simulated power cuts and the recovered store is checked.
 *
 * A plain program (no Criterion), so it runs under ThreadSanitizer;
 * test_concurrency.c runs it with several argument sets, run_tsan.sh under
 * TSan.
 *
 * Data
 *   Four regions of records on engine pages: branches, tellers and accounts
 *   (8-byte balances) and one history record per thread (8-byte count of
 *   its committed transactions, 8-byte sum of their deltas).  Each page
 *   holds --per-page records packed from the start of its body, so several
 *   transactions change the same page at once (record locks, page latches,
 *   byte-range undo), and with the default sizes the store has more pages
 *   than the cache: STEAL writes uncommitted changes back.  Page 0 (root)
 *   describes the layout.  Record locks are named "A<i>", "T<i>", "B<i>",
 *   "H<i>".
 *
 * Workload (per thread, --txns transactions)
 *   - an update (TPC-B): X-lock account, teller, branch and the thread's
 *     history record in a RANDOM order, each updated by the same delta
 *     right after its lock (so deadlock victims have work to roll back);
 *     --abort-pct of them are aborted on purpose after all updates;
 *   - a read-only transaction (--ro-pct): S locks on 2..6 random accounts
 *     in random order, reads them, commits (these deadlock with updates);
 *   - on TP_EDEADLOCK / TP_EROLLBACK / TP_ETIMEOUT: abort, back off, retry.
 *
 * Oracle (outside the engine and the simulator: shared memory that
 * survives the child's death)
 *   Before committing, a thread records its transaction as intent number
 *   seq = its new history count, and raises attempted[t]; when the commit
 *   returns 0 it raises acked[t].  After a run (or a crash and recovery)
 *   the history count c[t] found in the store must satisfy
 *   acked[t] <= c[t] <= attempted[t] (acknowledged commits are durable; at
 *   most the one in flight may be there too), and every record must equal
 *   its value after exactly the intents seq <= c[t] of each thread: nothing
 *   of an aborted or rolled-back transaction remains, nothing committed is
 *   lost.  The TPC-B invariant sum(accounts) == sum(tellers) ==
 *   sum(branches) == sum(history deltas) is checked too.
 *
 * --crash P: P crash points, each a forked child that runs the workload
 * under the io simulator (iosim_install) and crashes: the first child runs
 * to the end and crashes there, counting syncs, commits and checkpoints;
 * each later one crashes at a random sync, a random pass through
 * "txn.commit.logged" (a commit record appended, not durable) or through
 * "rec.ckpt.logged" (a checkpoint logged, not yet named by the master).
 * The parent reopens (recovery), checks the oracle and rec_losers (at most
 * one loser per thread), closes without a checkpoint, reopens again: no
 * loser, the same values.  The next point starts from that state.
 *
 * Exit: 0 all checks passed, 1 a check failed, 2 usage.  Last line:
 * "tpcb_mt: threads N, commits C (R read-only), aborts A (V on purpose),
 * deadlocks D, crash points P, losers L, S s".
 */
#include "io_sim.h"
#include "tp.h"
#include "tp_test.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXT 256
#define ROOT_MAGIC 0x31304d4243505454ull /* "TTPCBM01" */
#define CHILD_FAIL 3
#define MAX_RETRIES 100000

enum { R_BRANCH, R_TELLER, R_ACCOUNT, R_HIST, NREG };
static const char reg_tag[NREG] = {'B', 'T', 'A', 'H'};
static const uint32_t reg_size[NREG] = {8, 8, 8, 16};

typedef struct layout {
	uint32_t n[NREG];     /* records per region */
	uint32_t per_page;    /* records per page */
	uint64_t first[NREG]; /* first page of each region (pages are consecutive) */
	uint32_t pages[NREG];
} layout;

/* ---- options ---- */

static struct {
	int threads;
	int txns;      /* per thread */
	int crash;     /* crash points; 0: no crash */
	uint64_t seed;
	int abort_pct, ro_pct;
	uint32_t branches, tellers, accounts, per_page;
	size_t cache;
	uint32_t page_size;
	uint64_t seg_size, ckpt_bytes;
	const char *dir;
	const char *check; /* --check STORE: recover it and check the sums only */
	int keep, verbose;
	int background; /* opt.background: the log's writer thread and the checkpoint thread */
} opt = {
	.threads = 4,
	.txns = 200,
	.seed = 1,
	.abort_pct = 10,
	.ro_pct = 10,
	.branches = 4,
	.tellers = 40,
	.accounts = 1000,
	.per_page = 8,
	.cache = 64,
	.page_size = 4096,
	.seg_size = 256 << 10,
	.ckpt_bytes = 1 << 20,
};

static void usage(void)
{
	fprintf(stderr,
		"usage: tpcb_mt [--threads N] [--txns N] [--crash POINTS] [--seed S]\n"
		"               [--abort-pct P] [--ro-pct P] [--branches N] [--tellers N]\n"
		"               [--accounts N] [--per-page N] [--cache PAGES] [--page-size B]\n"
		"               [--seg-size B] [--ckpt-bytes B] [--background] [--dir DIR]\n"
		"               [--keep] [--verbose]\n"
		"       tpcb_mt --check STORE [--verbose]\n"
		"TPC-B-like concurrent transactions on a fresh store, checked exactly;\n"
		"--crash runs POINTS simulated power cuts with recovery and checks after each;\n"
		"without it the run ends with a kill (tp_crash_close) and a recovery, checked,\n"
		"then a clean close and reopen.  --background: the store is opened with its\n"
		"log writer and checkpoint threads (as tpfsd opens it).\n"
		"A failed run keeps its store and names it; --check STORE opens (recovers)\n"
		"such a store and checks the TPC-B sums.\n");
}

/* ---- messages ---- */

static int failed;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tpcb_mt: FAIL (seed %" PRIu64 "): ", opt.seed);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	failed = 1;
}

static void die(const char *what, int rc) __attribute__((noreturn));
static void die(const char *what, int rc)
{
	fprintf(stderr, "tpcb_mt: FAIL (seed %" PRIu64 "): %s: %s (%d): %s\n", opt.seed, what, tp_strerror(rc), rc,
		tp_errmsg());
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- the oracle (shared memory in crash mode) ---- */

typedef struct intent {
	uint32_t acc, teller, branch, pad;
	int64_t delta;
} intent;

typedef struct oracle {
	uint64_t base[MAXT];               /* history count when the run started */
	_Atomic uint64_t attempted[MAXT];  /* last seq whose commit was called */
	_Atomic uint64_t acked[MAXT];      /* last seq whose commit returned 0 */
	_Atomic uint64_t commits, ro_commits, aborts, vol_aborts, victims;
	_Atomic uint64_t syncs, ckpts;     /* seen by the calibrating child */
	_Atomic int child_failed;
	size_t cap;                        /* intents per thread */
} oracle;

static oracle *orc;
static intent *intents; /* [thread][cap], by seq - base - 1 */

static void oracle_alloc(void)
{
	size_t cap = (size_t)opt.txns + 1;
	size_t len = sizeof *orc + (size_t)opt.threads * cap * sizeof *intents;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("tpcb_mt: mmap");
		exit(1);
	}
	orc = p;
	orc->cap = cap;
	intents = (intent *)(orc + 1);
}

static intent *intent_of(int t, uint64_t seq) { return &intents[(size_t)t * orc->cap + (seq - orc->base[t] - 1)]; }

/* ---- records ---- */

static void rec_addr(const layout *L, int reg, uint32_t i, uint64_t *pgno, uint32_t *off)
{
	*pgno = L->first[reg] + i / L->per_page;
	*off = (i % L->per_page) * reg_size[reg];
}

static size_t rec_name(int reg, uint32_t i, char *buf)
{
	return (size_t)sprintf(buf, "%c%" PRIu32, reg_tag[reg], i);
}

static int rec_read(tp_env *env, const layout *L, int reg, uint32_t i, int64_t v[2])
{
	uint64_t pg;
	uint32_t off;
	rec_addr(L, reg, i, &pg, &off);
	return tp_page_read(env, pg, off, v, reg_size[reg]);
}

static int rec_write(tp_txn *t, const layout *L, int reg, uint32_t i, const int64_t v[2])
{
	uint64_t pg;
	uint32_t off;
	rec_addr(L, reg, i, &pg, &off);
	return tp_page_write(t, pg, off, v, reg_size[reg]);
}

/* ---- store set-up ---- */

static void options(tp_options *o)
{
	tp_options_init(o);
	o->cache_pages = opt.cache;
	o->page_size = opt.page_size;
	o->seg_size = opt.seg_size;
	o->ckpt_log_bytes = opt.ckpt_bytes;
	o->background = opt.background;
	o->quiet = !opt.verbose;
}

static void root_encode(const layout *L, unsigned char *b)
{
	uint64_t w[2 + NREG + NREG];
	w[0] = ROOT_MAGIC;
	w[1] = L->per_page;
	for (int r = 0; r < NREG; r++) {
		w[2 + r] = L->n[r];
		w[2 + NREG + r] = L->first[r];
	}
	memcpy(b, w, sizeof w);
}

static int root_decode(const unsigned char *b, layout *L)
{
	uint64_t w[2 + NREG + NREG];
	memcpy(w, b, sizeof w);
	if (w[0] != ROOT_MAGIC)
		return -1;
	L->per_page = (uint32_t)w[1];
	for (int r = 0; r < NREG; r++) {
		L->n[r] = (uint32_t)w[2 + r];
		L->first[r] = w[2 + NREG + r];
		L->pages[r] = (L->n[r] + L->per_page - 1) / L->per_page;
	}
	return 0;
}

static void read_layout(tp_env *env, layout *L)
{
	unsigned char b[8 * (2 + 2 * NREG)];
	int rc = tp_page_read(env, 0, 0, b, sizeof b);
	if (rc)
		die("read the root page", rc);
	if (root_decode(b, L) != 0) {
		fail("the root page lost its layout");
		exit(1);
	}
}

static void make_store(const char *store, layout *L)
{
	tp_options o;
	tp_env *env;
	tp_txn *t;
	int rc;
	options(&o);
	if ((rc = tp_mkfs(store, &o)) != 0)
		die("tp_mkfs", rc);
	if ((rc = tp_open(store, &o, &env)) != 0)
		die("tp_open", rc);
	memset(L, 0, sizeof *L);
	L->n[R_BRANCH] = opt.branches;
	L->n[R_TELLER] = opt.tellers;
	L->n[R_ACCOUNT] = opt.accounts;
	L->n[R_HIST] = (uint32_t)opt.threads;
	L->per_page = opt.per_page;
	if ((uint64_t)opt.per_page * 16 > tp_page_body(env)) {
		fprintf(stderr, "tpcb_mt: --per-page %" PRIu32 " does not fit a page\n", opt.per_page);
		exit(2);
	}
	if ((rc = tp_begin(env, &t)) != 0)
		die("tp_begin", rc);
	for (int r = 0; r < NREG; r++) {
		L->pages[r] = (L->n[r] + L->per_page - 1) / L->per_page;
		for (uint32_t p = 0; p < L->pages[r]; p++) {
			uint64_t pg;
			if ((rc = tp_page_alloc(t, 1, &pg)) != 0)
				die("tp_page_alloc", rc);
			if (p == 0)
				L->first[r] = pg;
			else if (pg != L->first[r] + p) {
				fprintf(stderr, "tpcb_mt: pages of a fresh store are not allocated consecutively (%" PRIu64
						" after %" PRIu64 ")\n",
					pg, L->first[r] + p - 1);
				exit(1);
			}
		}
	}
	unsigned char b[8 * (2 + 2 * NREG)];
	root_encode(L, b);
	if ((rc = tp_page_write(t, 0, 0, b, sizeof b)) != 0)
		die("write the root page", rc);
	if ((rc = tp_commit(t, 0)) != 0)
		die("commit the layout", rc);
	if ((rc = tp_close(env)) != 0)
		die("tp_close", rc);
}

/* ---- the workload ---- */

typedef struct worker {
	int id;
	tp_env *env;
	const layout *L;
	uint64_t rng;
	pthread_t th;
} worker;

enum { DONE, RETRY, ABORTED };

static int retryable(int rc) { return rc == TP_EDEADLOCK || rc == TP_EROLLBACK || rc == TP_ETIMEOUT; }

static void backoff(worker *w, int attempt)
{
	long max_us = 50L << (attempt < 6 ? attempt : 6);
	struct timespec ts = {0, (long)(rnd(&w->rng) % (uint64_t)max_us) * 1000L};
	nanosleep(&ts, NULL);
}

static void worker_fail(worker *w, const char *what, int rc)
{
	fprintf(stderr, "tpcb_mt: FAIL (seed %" PRIu64 ") thread %d: %s: %s (%d): %s\n", opt.seed, w->id, what,
		tp_strerror(rc), rc, tp_errmsg());
	atomic_store(&orc->child_failed, 1);
}

/* One TPC-B transaction; the same parameters on every retry. */
static int tpcb_update(worker *w, const intent *p, int abort_it)
{
	const layout *L = w->L;
	int order[4] = {R_ACCOUNT, R_TELLER, R_BRANCH, R_HIST};
	uint32_t idx[NREG];
	tp_txn *t;
	char name[16];
	uint64_t seq = 0;
	int rc;

	idx[R_ACCOUNT] = p->acc;
	idx[R_TELLER] = p->teller;
	idx[R_BRANCH] = p->branch;
	idx[R_HIST] = (uint32_t)w->id;
	for (int i = 3; i > 0; i--) { /* random lock order: deadlocks happen */
		int j = (int)(rnd(&w->rng) % (uint64_t)(i + 1)), x = order[i];
		order[i] = order[j];
		order[j] = x;
	}
	if ((rc = tp_begin(w->env, &t)) != 0) {
		worker_fail(w, "tp_begin", rc);
		return -1;
	}
	for (int k = 0; k < 4; k++) {
		int reg = order[k];
		int64_t v[2] = {0, 0};
		size_t len = rec_name(reg, idx[reg], name);
		if ((rc = tp_lock(t, name, len, TP_LOCK_X)) != 0)
			goto fail;
		if ((rc = rec_read(w->env, L, reg, idx[reg], v)) != 0)
			goto fail;
		if (reg == R_HIST) {
			seq = (uint64_t)v[0] + 1;
			v[0] = (int64_t)seq;
			v[1] += p->delta;
		} else {
			v[0] += p->delta;
		}
		if ((rc = rec_write(t, L, reg, idx[reg], v)) != 0)
			goto fail;
	}
	if (abort_it) {
		if ((rc = tp_abort(t)) != 0) {
			worker_fail(w, "tp_abort", rc);
			return -1;
		}
		atomic_fetch_add(&orc->aborts, 1);
		atomic_fetch_add(&orc->vol_aborts, 1);
		return ABORTED;
	}
	if (seq != atomic_load(&orc->attempted[w->id]) + 1 || seq - orc->base[w->id] > (uint64_t)opt.txns) {
		fprintf(stderr, "tpcb_mt: FAIL thread %d: history count %" PRIu64 " after %" PRIu64 " attempted commits\n",
			w->id, seq - 1, atomic_load(&orc->attempted[w->id]));
		atomic_store(&orc->child_failed, 1);
		tp_abort(t);
		return -1;
	}
	*intent_of(w->id, seq) = *p;
	atomic_store(&orc->attempted[w->id], seq);
	if ((rc = tp_commit(t, 0)) != 0) {
		worker_fail(w, "tp_commit", rc);
		return -1;
	}
	atomic_store(&orc->acked[w->id], seq);
	atomic_fetch_add(&orc->commits, 1);
	return DONE;
fail:
	if (!retryable(rc)) {
		worker_fail(w, "update", rc);
		tp_abort(t);
		return -1;
	}
	if (rc == TP_EDEADLOCK)
		atomic_fetch_add(&orc->victims, 1);
	if ((rc = tp_abort(t)) != 0) {
		worker_fail(w, "tp_abort of a deadlock victim", rc);
		return -1;
	}
	atomic_fetch_add(&orc->aborts, 1);
	return RETRY;
}

/* S locks on a few accounts in random order; reads them. */
static int read_only(worker *w, const uint32_t *acc, int n)
{
	tp_txn *t;
	char name[16];
	int rc;
	if ((rc = tp_begin(w->env, &t)) != 0) {
		worker_fail(w, "tp_begin", rc);
		return -1;
	}
	for (int k = 0; k < n; k++) {
		int64_t v[2];
		size_t len = rec_name(R_ACCOUNT, acc[k], name);
		if ((rc = tp_lock(t, name, len, TP_LOCK_S)) != 0)
			goto fail;
		if ((rc = rec_read(w->env, w->L, R_ACCOUNT, acc[k], v)) != 0)
			goto fail;
	}
	if ((rc = tp_commit(t, 0)) != 0) {
		worker_fail(w, "read-only commit", rc);
		return -1;
	}
	atomic_fetch_add(&orc->ro_commits, 1);
	return DONE;
fail:
	if (!retryable(rc)) {
		worker_fail(w, "read-only", rc);
		tp_abort(t);
		return -1;
	}
	if (rc == TP_EDEADLOCK)
		atomic_fetch_add(&orc->victims, 1);
	if ((rc = tp_abort(t)) != 0) {
		worker_fail(w, "tp_abort of a read-only victim", rc);
		return -1;
	}
	atomic_fetch_add(&orc->aborts, 1);
	return RETRY;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	const layout *L = w->L;
	uint32_t per_branch = L->n[R_TELLER] / L->n[R_BRANCH];
	for (int k = 0; k < opt.txns && !atomic_load(&orc->child_failed); k++) {
		int rc, attempt = 0;
		if ((int)(rnd(&w->rng) % 100) < opt.ro_pct) {
			uint32_t acc[6];
			int n = 2 + (int)(rnd(&w->rng) % 5);
			for (int i = 0; i < n; i++)
				acc[i] = (uint32_t)(rnd(&w->rng) % L->n[R_ACCOUNT]);
			while ((rc = read_only(w, acc, n)) == RETRY && attempt++ < MAX_RETRIES)
				backoff(w, attempt);
		} else {
			intent p = {0};
			p.acc = (uint32_t)(rnd(&w->rng) % L->n[R_ACCOUNT]);
			p.teller = (uint32_t)(rnd(&w->rng) % L->n[R_TELLER]);
			p.branch = per_branch ? p.teller / per_branch : 0;
			if (p.branch >= L->n[R_BRANCH])
				p.branch = L->n[R_BRANCH] - 1;
			p.delta = (int64_t)(rnd(&w->rng) % 1999999) - 999999;
			int abort_it = (int)(rnd(&w->rng) % 100) < opt.abort_pct;
			while ((rc = tpcb_update(w, &p, abort_it)) == RETRY && attempt++ < MAX_RETRIES)
				backoff(w, attempt);
		}
		if (rc == RETRY) {
			fprintf(stderr, "tpcb_mt: FAIL thread %d: %d retries without success (livelock?)\n", w->id,
				MAX_RETRIES);
			atomic_store(&orc->child_failed, 1);
		}
		if (rc < 0)
			break;
	}
	return NULL;
}

/* Runs the workload on env with opt.threads threads; returns when all end. */
static void run_workload(tp_env *env, const layout *L, uint64_t seed)
{
	worker *ws = calloc((size_t)opt.threads, sizeof *ws);
	if (!ws) {
		perror("tpcb_mt");
		exit(1);
	}
	for (int i = 0; i < opt.threads; i++) {
		ws[i].id = i;
		ws[i].env = env;
		ws[i].L = L;
		ws[i].rng = seed * 1000003u + (uint64_t)i * 7919u + 1;
		int rc = pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
		if (rc) {
			fprintf(stderr, "tpcb_mt: pthread_create: %s\n", strerror(rc));
			exit(1);
		}
	}
	for (int i = 0; i < opt.threads; i++)
		pthread_join(ws[i].th, NULL);
	free(ws);
}

/* ---- checks ---- */

/* The expected state: committed intents applied over the zero state. */
typedef struct expect {
	int64_t *bal[NREG - 1];
	uint64_t count[MAXT];
	int64_t hsum[MAXT];
} expect;

static void expect_init(expect *e, const layout *L)
{
	memset(e, 0, sizeof *e);
	for (int r = 0; r < R_HIST; r++)
		if (!(e->bal[r] = calloc(L->n[r], sizeof(int64_t)))) {
			perror("tpcb_mt");
			exit(1);
		}
}

static void expect_free(expect *e)
{
	for (int r = 0; r < R_HIST; r++)
		free(e->bal[r]);
}

/* Reads the history counts found in the store, checks them against the
 * oracle, and applies the intents they say committed to e. */
static void apply_committed(tp_env *env, const layout *L, expect *e, int crashed)
{
	for (int t = 0; t < opt.threads; t++) {
		int64_t v[2];
		int rc = rec_read(env, L, R_HIST, (uint32_t)t, v);
		if (rc)
			die("read a history record", rc);
		uint64_t c = (uint64_t)v[0], acked = atomic_load(&orc->acked[t]),
			 att = atomic_load(&orc->attempted[t]);
		if (c < acked || c > att || (!crashed && c != acked)) {
			fail("thread %d: %" PRIu64 " commits in the store, %" PRIu64 " acknowledged, %" PRIu64
			     " attempted%s",
			     t, c, acked, att, c < acked ? ": an acknowledged commit was lost" : "");
		}
		/* what the oracle can explain; a mismatch then shows as wrong
		 * records below */
		uint64_t upto = c > att ? att : c;
		for (uint64_t s = orc->base[t] + 1; s <= upto; s++) {
			const intent *p = intent_of(t, s);
			e->bal[R_ACCOUNT][p->acc] += p->delta;
			e->bal[R_TELLER][p->teller] += p->delta;
			e->bal[R_BRANCH][p->branch] += p->delta;
			e->hsum[t] += p->delta;
		}
		e->count[t] = upto;
	}
}

/* Compares every record with e, and the TPC-B sums; returns 0 if equal. */
static int check_state(tp_env *env, const layout *L, const expect *e, const char *when)
{
	static const char *rname[NREG] = {"branch", "teller", "account", "history"};
	int64_t sum[NREG] = {0};
	int bad = 0;
	for (int r = 0; r < NREG; r++)
		for (uint32_t i = 0; i < L->n[r]; i++) {
			int64_t v[2];
			int rc = rec_read(env, L, r, i, v);
			if (rc)
				die("read a record", rc);
			if (r == R_HIST) {
				sum[r] += v[1];
				if ((uint64_t)v[0] != e->count[i] || v[1] != e->hsum[i]) {
					if (bad++ < 10)
						fail("%s: history of thread %" PRIu32 ": count %" PRId64 " sum %" PRId64
						     ", expected %" PRIu64 " and %" PRId64,
						     when, i, v[0], v[1], e->count[i], e->hsum[i]);
				}
			} else {
				sum[r] += v[0];
				if (v[0] != e->bal[r][i] && bad++ < 10)
					fail("%s: %s %" PRIu32 " holds %" PRId64 ", expected %" PRId64 " (diff %" PRId64 ")",
					     when, rname[r], i, v[0], e->bal[r][i], v[0] - e->bal[r][i]);
			}
		}
	if (sum[R_ACCOUNT] != sum[R_TELLER] || sum[R_TELLER] != sum[R_BRANCH] || sum[R_BRANCH] != sum[R_HIST]) {
		fail("%s: TPC-B invariant broken: sum(accounts) %" PRId64 ", sum(tellers) %" PRId64
		     ", sum(branches) %" PRId64 ", sum(history) %" PRId64,
		     when, sum[R_ACCOUNT], sum[R_TELLER], sum[R_BRANCH], sum[R_HIST]);
		bad++;
	}
	if (bad > 10)
		fail("%s: %d mismatches in all", when, bad);
	if (tp_debug_pinned(env) != 0) {
		fail("%s: %zu pages still pinned", when, tp_debug_pinned(env));
		bad++;
	}
	return bad;
}

static void oracle_start_run(const expect *e)
{
	for (int t = 0; t < opt.threads; t++) {
		orc->base[t] = e->count[t];
		atomic_store(&orc->attempted[t], e->count[t]);
		atomic_store(&orc->acked[t], e->count[t]);
	}
	atomic_store(&orc->child_failed, 0);
}

/* ---- the two modes ---- */

static void run_plain(const char *store, const layout *L)
{
	tp_options o;
	tp_env *env;
	tp_stats st;
	expect e;
	int rc;

	options(&o);
	expect_init(&e, L);
	oracle_start_run(&e);
	if ((rc = tp_open(store, &o, &env)) != 0)
		die("tp_open", rc);
	tp_stats_get(env, &st);
	uint64_t commits0 = st.commits, aborts0 = st.aborts;
	run_workload(env, L, opt.seed);
	if (atomic_load(&orc->child_failed)) {
		fail("a worker failed");
		exit(1);
	}
	apply_committed(env, L, &e, 0);
	check_state(env, L, &e, "after the run");
	tp_stats_get(env, &st);
	if (st.aborts - aborts0 != atomic_load(&orc->aborts))
		fail("tp_stats: %" PRIu64 " aborts, the workload made %" PRIu64, st.aborts - aborts0,
		     atomic_load(&orc->aborts));
	if (st.commits - commits0 < atomic_load(&orc->commits))
		fail("tp_stats: %" PRIu64 " commits, the workload made %" PRIu64 " updates", st.commits - commits0,
		     atomic_load(&orc->commits));
	if (opt.verbose)
		fprintf(stderr, "tpcb_mt: %" PRIu64 " log flushes for %" PRIu64 " commits, %" PRIu64
				" page writes, %" PRIu64 " checkpoints\n",
			st.log_flushes, st.commits - commits0, st.page_writes, st.checkpoints);
	/* a kill: what is in memory is lost, the files stay; every commit was
	 * durable, so recovery finds them all and no transaction to undo */
	tp_crash_close(env);
	if ((rc = tp_open(store, &o, &env)) != 0)
		die("tp_open after a kill (recovery)", rc);
	tp_stats_get(env, &st);
	if (st.rec_losers != 0)
		fail("recovery after a kill with no transaction open rolled back %" PRIu64 " transactions",
		     st.rec_losers);
	check_state(env, L, &e, "after a kill and recovery");
	if ((rc = tp_close(env)) != 0)
		die("tp_close", rc);
	/* a clean close leaves nothing to recover */
	if ((rc = tp_open(store, &o, &env)) != 0)
		die("tp_open after close", rc);
	tp_stats_get(env, &st);
	if (st.rec_losers != 0)
		fail("reopen after a clean close rolled back %" PRIu64 " transactions", st.rec_losers);
	check_state(env, L, &e, "after a clean reopen");
	if ((rc = tp_close(env)) != 0)
		die("tp_close", rc);
	expect_free(&e);
}

/* The child of one crash point: never returns. */
static void crash_child(const char *store, int point, uint64_t seed, uint64_t cal_syncs, uint64_t cal_commits,
			uint64_t cal_ckpts)
{
	tp_options o;
	tp_env *env;
	layout L;
	uint64_t rng = seed ^ 0x5bd1e995u;
	int rc;

	iosim_install(seed);
	if (point > 0 && point % 4 == 2 && cal_commits > 0)
		iosim_crash_at_point("txn.commit.logged", 1 + rnd(&rng) % cal_commits);
	else if (point > 0 && point % 4 == 3 && cal_ckpts > 0)
		iosim_crash_at_point("rec.ckpt.logged", 1 + rnd(&rng) % cal_ckpts);
	else if (point > 0)
		iosim_crash_at_sync(1 + rnd(&rng) % (cal_syncs ? cal_syncs : 1));
	options(&o);
	if ((rc = tp_open(store, &o, &env)) != 0) {
		fprintf(stderr, "tpcb_mt: child: tp_open: %s: %s\n", tp_strerror(rc), tp_errmsg());
		_exit(CHILD_FAIL);
	}
	read_layout(env, &L);
	run_workload(env, &L, seed);
	if (atomic_load(&orc->child_failed))
		_exit(CHILD_FAIL);
	atomic_store(&orc->syncs, iosim_syncs());
	atomic_store(&orc->ckpts, iosim_point_hits("rec.ckpt.logged"));
	iosim_crash_now(); /* the run ended before the crash point: crash here */
}

static uint64_t crash_run(const char *store, const layout *L0)
{
	tp_options o;
	tp_env *env;
	tp_stats st;
	expect e;
	uint64_t losers = 0, cal_syncs = 0, cal_commits = 0, cal_ckpts = 0;
	int rc;

	options(&o);
	expect_init(&e, L0);
	for (int point = 0; point < opt.crash && !failed; point++) {
		uint64_t seed = opt.seed * 1000u + (uint64_t)point;
		oracle_start_run(&e);
		uint64_t c0 = atomic_load(&orc->commits);
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			perror("tpcb_mt: fork");
			exit(1);
		}
		if (pid == 0)
			crash_child(store, point, seed, cal_syncs, cal_commits, cal_ckpts);
		int status;
		if (waitpid(pid, &status, 0) != pid) {
			perror("tpcb_mt: waitpid");
			exit(1);
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != IOSIM_CRASH_EXIT) {
			if (WIFSIGNALED(status))
				fail("crash point %d: the child died of signal %d", point, WTERMSIG(status));
			else
				fail("crash point %d: the child exited %d, not %d (a crash)", point, WEXITSTATUS(status),
				     IOSIM_CRASH_EXIT);
			break;
		}
		if (point == 0) {
			cal_syncs = atomic_load(&orc->syncs);
			cal_commits = atomic_load(&orc->commits) - c0;
			cal_ckpts = atomic_load(&orc->ckpts);
		}
		/* recovery */
		if ((rc = tp_open(store, &o, &env)) != 0)
			die("tp_open after a crash (recovery)", rc);
		layout L;
		read_layout(env, &L);
		if (memcmp(&L, L0, sizeof L) != 0)
			fail("crash point %d: the layout changed", point);
		tp_stats_get(env, &st);
		losers += st.rec_losers;
		if (st.rec_losers > (uint64_t)opt.threads)
			fail("crash point %d: recovery rolled back %" PRIu64 " transactions, but only %d were in flight",
			     point, st.rec_losers, opt.threads);
		if (opt.verbose)
			fprintf(stderr, "tpcb_mt: crash point %d: %" PRIu64 " commits acknowledged; recovery: %" PRIu64
					" records, %" PRIu64 " redone, %" PRIu64 " losers, %" PRIu64 " undone\n",
				point, atomic_load(&orc->commits) - c0, st.rec_records, st.rec_redone, st.rec_losers,
				st.rec_undone);
		apply_committed(env, &L, &e, 1);
		char when[64];
		snprintf(when, sizeof when, "crash point %d, after recovery", point);
		check_state(env, &L, &e, when);
		tp_crash_close(env); /* no checkpoint: the next open sees the same log */
		/* a second recovery changes nothing */
		if ((rc = tp_open(store, &o, &env)) != 0)
			die("tp_open after recovery", rc);
		tp_stats_get(env, &st);
		if (st.rec_losers != 0)
			fail("crash point %d: a second recovery rolled back %" PRIu64 " more transactions", point,
			     st.rec_losers);
		snprintf(when, sizeof when, "crash point %d, second recovery", point);
		check_state(env, &L, &e, when);
		if ((rc = tp_close(env)) != 0)
			die("tp_close", rc);
	}
	expect_free(&e);
	return losers;
}

/* --check: recover a kept store and check what needs no oracle. */
static int check_only(const char *store)
{
	static const char *rname[NREG] = {"branches", "tellers", "accounts", "history"};
	tp_options o;
	tp_env *env;
	tp_stats st;
	layout L;
	int64_t sum[NREG] = {0};
	int rc;

	tp_options_init(&o);
	o.quiet = !opt.verbose;
	if ((rc = tp_open(store, &o, &env)) != 0)
		die("tp_open (recovery)", rc);
	tp_stats_get(env, &st);
	printf("tpcb_mt: %s: recovery scanned %" PRIu64 " records, redid %" PRIu64 ", rolled back %" PRIu64
	       " transactions\n",
	       store, st.rec_records, st.rec_redone, st.rec_losers);
	read_layout(env, &L);
	for (int r = 0; r < NREG; r++)
		for (uint32_t i = 0; i < L.n[r]; i++) {
			int64_t v[2];
			if ((rc = rec_read(env, &L, r, i, v)) != 0)
				die("read a record", rc);
			sum[r] += r == R_HIST ? v[1] : v[0];
		}
	for (int r = 0; r < NREG; r++)
		printf("tpcb_mt: sum(%s) = %" PRId64 "\n", rname[r], sum[r]);
	if (sum[R_ACCOUNT] != sum[R_TELLER] || sum[R_TELLER] != sum[R_BRANCH] || sum[R_BRANCH] != sum[R_HIST])
		fail("%s: TPC-B invariant broken", store);
	tp_crash_close(env);
	return failed ? 1 : 0;
}

/* ---- main ---- */

/* Under ThreadSanitizer: a crash child dies in _exit with its threads
 * still running, as a power cut would; that is no thread leak to report.
 * Races are reported as usual (TSAN_OPTIONS adds to these defaults). */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "report_thread_leaks=0"; }

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static long num(const char *s, const char *name)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || *end || v < 0) {
		fprintf(stderr, "tpcb_mt: %s: not a number: %s\n", name, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(s) (strcmp(a, s) == 0 && v && (i++, 1))
		if (ARG("--threads"))
			opt.threads = (int)num(v, a);
		else if (ARG("--txns"))
			opt.txns = (int)num(v, a);
		else if (ARG("--crash"))
			opt.crash = (int)num(v, a);
		else if (ARG("--seed"))
			opt.seed = (uint64_t)num(v, a);
		else if (ARG("--abort-pct"))
			opt.abort_pct = (int)num(v, a);
		else if (ARG("--ro-pct"))
			opt.ro_pct = (int)num(v, a);
		else if (ARG("--branches"))
			opt.branches = (uint32_t)num(v, a);
		else if (ARG("--tellers"))
			opt.tellers = (uint32_t)num(v, a);
		else if (ARG("--accounts"))
			opt.accounts = (uint32_t)num(v, a);
		else if (ARG("--per-page"))
			opt.per_page = (uint32_t)num(v, a);
		else if (ARG("--cache"))
			opt.cache = (size_t)num(v, a);
		else if (ARG("--page-size"))
			opt.page_size = (uint32_t)num(v, a);
		else if (ARG("--seg-size"))
			opt.seg_size = (uint64_t)num(v, a);
		else if (ARG("--ckpt-bytes"))
			opt.ckpt_bytes = (uint64_t)num(v, a);
		else if (ARG("--dir"))
			opt.dir = v;
		else if (ARG("--check"))
			opt.check = v;
		else if (strcmp(a, "--keep") == 0)
			opt.keep = 1;
		else if (strcmp(a, "--background") == 0)
			opt.background = 1;
		else if (strcmp(a, "--verbose") == 0)
			opt.verbose = 1;
		else {
			usage();
			return strcmp(a, "--help") == 0 ? 0 : 2;
		}
#undef ARG
	}
	if (opt.check)
		return check_only(opt.check);
	if (opt.threads < 1 || opt.threads > MAXT || opt.branches < 1 || opt.tellers < opt.branches ||
	    opt.accounts < 1 || opt.per_page < 1 || opt.abort_pct > 100 || opt.ro_pct > 100) {
		usage();
		return 2;
	}

	char tmp[PATH_MAX], store[PATH_MAX + 8];
	if (opt.dir) {
		snprintf(tmp, sizeof tmp, "%s", opt.dir);
	} else {
		const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
		snprintf(tmp, sizeof tmp, "%s/tpcb_mt-XXXXXX", base);
		if (!mkdtemp(tmp)) {
			perror("tpcb_mt: mkdtemp");
			return 1;
		}
	}
	snprintf(store, sizeof store, "%s/store", tmp);

	uint64_t t0 = now_ns(), losers = 0;
	layout L;
	oracle_alloc();
	make_store(store, &L);
	if (opt.crash > 0)
		losers = crash_run(store, &L);
	else
		run_plain(store, &L);
	double secs = (double)(now_ns() - t0) / 1e9;

	printf("tpcb_mt: threads %d, commits %" PRIu64 " (%" PRIu64 " read-only), aborts %" PRIu64 " (%" PRIu64
	       " on purpose), deadlocks %" PRIu64 ", crash points %d, losers %" PRIu64 ", %.1f s%s\n",
	       opt.threads, atomic_load(&orc->commits) + atomic_load(&orc->ro_commits), atomic_load(&orc->ro_commits),
	       atomic_load(&orc->aborts), atomic_load(&orc->vol_aborts), atomic_load(&orc->victims), opt.crash, losers,
	       secs, failed ? " -- FAILED" : "");
	if (!opt.keep && !opt.dir && !failed)
		nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	else if (!opt.dir)
		fprintf(stderr, "tpcb_mt: store kept in %s\n", store);
	return failed ? 1 : 0;
}
