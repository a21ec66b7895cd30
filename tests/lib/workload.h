/*
 * workload -- a deterministic, seeded transaction workload over the page
 * API, the model of committed state it implies, an append-only oracle file
 * of what was attempted and acknowledged, and the checker that compares a
 * recovered store with that oracle.  Shared by the crash and fault suites.
 *
 * What the workload does (wl_run), all decided by the seed:
 *   - regular transactions, one after the other, each doing 1..8 steps:
 *     a random byte range written on an allocated page (random page,
 *     offset, length 1..200, sometimes the whole body), now and then a page
 *     allocated (and then written) or freed; then commit (most), abort
 *     (some; a few with TP_COMMIT_NOSYNC, made durable by a later commit
 *     or tp_sync); the last one may be left in flight;
 *   - a long transaction L, begun early, that owns a few pages of its own,
 *     takes a step between regular transactions and spans checkpoints, log
 *     truncation and segment recycling; at the end it commits, aborts or
 *     stays in flight;
 *   - explicit checkpoints between and inside transactions, plus the
 *     engine's own (a small ckpt_log_bytes), and a small buffer pool so
 *     STEAL writes uncommitted pages back;
 *   - live checks: after each commit or abort the pages it touched read
 *     back as the model says, and every allocation returns the first free
 *     page (first fit) that no open transaction freed.
 * Regular transactions never touch L's pages, so the two never conflict
 * (page operations take no locks: tp_page_write and the like leave a
 * caller that shares pages between transactions to lock them, tp_lock).
 *
 * Oracle (written with write(2), never through io_*, so no simulated crash
 * can lose it): before tp_commit an INTENT record lists every step of the
 * transaction in order (pages written with the bytes, pages allocated and
 * freed); after tp_commit returns 0 an ACK (LAZY for a NOSYNC commit)
 * record; after it fails a FAIL record; after tp_sync returns 0 a SYNC
 * record.  Each record is framed and checksummed; a torn last record is
 * ignored.
 *
 * Expected state after recovery (wl_check): the base state, then every
 * durable transaction in order: acknowledged, or lazy and followed by an
 * acknowledged commit or a sync.  Lazy commits after the last of those,
 * and a commit that was not acknowledged (crash inside tp_commit, or
 * tp_commit failed) after the last success, are in doubt: the log is
 * durable as a prefix, so the store must show exactly the first j of them,
 * each entirely, for some j.  A failed commit followed by a success must
 * be absent (the engine went on, so it was rolled back).  Nothing else:
 * aborted and in-flight transactions leave no trace.  Every page's
 * allocation bit and every allocated page's whole body is compared.
 */
#ifndef TP_TEST_WORKLOAD_H
#define TP_TEST_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

/* ---- random numbers ---- */

typedef struct wl_rng {
	uint64_t s;
} wl_rng;

uint64_t wl_rand(wl_rng *r);            /* splitmix64 */
uint64_t wl_below(wl_rng *r, uint64_t n); /* uniform in [0, n), n > 0 */
uint64_t wl_mix(uint64_t a, uint64_t b);  /* a seed derived from two values */

/* ---- the model of committed (or current) page state ---- */

#define WL_MAXPG 256u /* pages tracked: [0, WL_MAXPG) */

typedef struct wl_model {
	uint32_t body;                  /* bytes of a page body */
	unsigned char alloc[WL_MAXPG];  /* allocation bit of each page */
	unsigned char *data;            /* WL_MAXPG * body bytes */
} wl_model;

int wl_model_init(wl_model *m, uint32_t body);
void wl_model_free(wl_model *m);
void wl_model_copy(wl_model *dst, const wl_model *src);
unsigned char *wl_page(const wl_model *m, uint64_t pgno);
/* Is pgno an allocation-bitmap page (never written through the API)? */
int wl_is_bitmap(uint32_t body, uint64_t pgno);

/* ---- configuration ---- */

typedef struct wl_config {
	uint64_t seed;
	uint32_t page_size;
	uint64_t seg_size;
	size_t cache_pages;
	uint64_t ckpt_log_bytes;
	unsigned setup_pages;   /* pages the base allocates (after page 0 and the bitmap) */
	unsigned l_pages;       /* of those, owned by the long transaction */
	unsigned ntx;           /* regular transactions */
	int long_txn;           /* 0 none, else WL_END_COMMIT/ABORT/INFLIGHT */
	int last_inflight;      /* leave the last regular transaction open */
	int ckpt_pct;           /* % chance of an explicit checkpoint per transaction */
	int nosync_pct;         /* % of commits with TP_COMMIT_NOSYNC (tp_sync now and then) */
} wl_config;

enum { WL_END_COMMIT = 1, WL_END_ABORT, WL_END_INFLIGHT };

/* The store geometry and base shared by every seed of a suite. */
void wl_config_base(wl_config *c, unsigned setup_pages, unsigned l_pages);
/* Randomizes the per-run knobs (cache, checkpoint size, L's fate, ...)
 * from seed; ntx_min..ntx_max regular transactions. */
void wl_config_seed(wl_config *c, uint64_t seed, unsigned ntx_min, unsigned ntx_max);
/* Options for tp_open with this configuration (quiet, no timed checkpoints:
 * runs are deterministic). */
void wl_options(const wl_config *c, tp_options *o);

/* ---- the base store ---- */

/* tp_mkfs + setup transactions (committed, cleanly closed) with whatever
 * io backend is installed; *m (initialized) becomes its state.  0 or -1
 * with a message in err. */
int wl_make_base(const char *store, const wl_config *c, wl_model *m, char *err, size_t errlen);

/* ---- running ---- */

typedef struct wl_stats {
	unsigned commits, lazy, aborts, failed_commits, inflight, checkpoints;
	unsigned errors;      /* engine calls that failed (fault runs) */
	int panicked;         /* TP_EPANIC was seen */
	/* simulated syncs so far (iosim_syncs) right after each lazy commit and
	 * tp_sync returned, the first WL_MARKS of them: a crash at the next
	 * sync tests what those calls promised */
	uint64_t marks[16];
	unsigned nmarks;
} wl_stats;
#define WL_MARKS 16

enum {
	WL_STRICT = 1 << 0, /* every engine call must succeed (crash runs, SHORT faults) */
};

/* Runs the workload of c on the open env, whose committed state is *base,
 * appending to the oracle file (created).  In strict mode any engine error
 * is a failure; otherwise errors are expected and checked: no page stays
 * pinned, TP_EPANIC is sticky (no later commit succeeds), codes are sane.
 * Returns 0, or -1 with a message in err.  Open transactions are left
 * open (in flight) when it returns. */
int wl_run(tp_env *env, const wl_config *c, const wl_model *base, const char *oracle, int flags,
	   wl_stats *st, char *err, size_t errlen);

/* ---- checking ---- */

/* *out (initialized) = base with every acknowledged transaction of the
 * oracle applied; -1 (message in err) if any is in doubt. */
int wl_oracle_apply(const wl_model *base, const char *oracle, wl_model *out, char *err, size_t errlen);

typedef struct wl_check_opts {
	uint64_t seed;        /* drives the extra transaction and close mode */
	int extra_txn;        /* after the first check, commit one more transaction */
} wl_check_opts;

typedef struct wl_check_result {
	unsigned acked;       /* acknowledged transactions in the oracle */
	unsigned in_doubt;    /* commits that may go either way (a prefix of them is kept) */
	int doubt_applied;    /* how many of them recovery kept */
	uint64_t rec_redone, rec_losers, rec_cut_bytes;
} wl_check_result;

/* Opens store (recovering it), compares it with base + oracle, checks no
 * page is pinned, optionally commits one more transaction, closes (cleanly
 * or as a crash), reopens and compares again, closes.  0, or -1 with a
 * message in err. */
int wl_check(const char *store, const wl_config *c, const wl_model *base, const char *oracle,
	     const wl_check_opts *o, wl_check_result *res, char *err, size_t errlen);

/* ---- files ---- */

/* A new private directory for a test's stores: under $TMPDIR, else
 * /dev/shm (fast; the simulator, not the medium, models durability), else
 * /tmp.  out gets its path; 0 or -1. */
int wl_tmpdir(const char *tag, char *out, size_t n);
/* Removes path recursively (no error if missing). */
int wl_rmtree(const char *path);
/* Copies the store directory src (super, data, log/) to dst (replaced). */
int wl_copy_store(const char *src, const char *dst);

/* ---- children ---- */

/* Memory shared with forked children: counters and the first failure. */
#define WL_NPOINTS 7
extern const char *const wl_points[WL_NPOINTS];

typedef struct wl_shared {
	volatile uint64_t syncs, calls, faults;
	volatile uint64_t hits[WL_NPOINTS];
	volatile int finished;     /* the child reached the end of its work */
	volatile int flags;        /* child-specific */
	volatile uint64_t val[8];  /* child-specific results */
	char msg[4096];            /* failure message, "" if none */
	char leak[512];            /* memory leak found, "" if none */
} wl_shared;

wl_shared *wl_shared_new(void);   /* MAP_SHARED, zeroed */
void wl_shared_free(wl_shared *s);
void wl_shared_reset(wl_shared *s);
/* Records the simulator's counters (iosim_*) in s. */
void wl_shared_counters(wl_shared *s);

/* Forks; the child runs fn(arg) and _exits with its return value (never
 * returns to the caller).  The parent waits: returns the wait status, or -1
 * if fork failed.  timeout_s > 0: a child still running after that long
 * dies of SIGALRM (a hang shows as that signal). */
int wl_fork(int (*fn)(void *arg), void *arg, unsigned timeout_s);
/* "exit 3", "killed by signal 11 (Segmentation fault)", ... */
const char *wl_status_str(int status, char *buf, size_t n);
/* Formats a message into err (n bytes); returns -1. */
int wl_failf(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* write(2) of all n bytes, through EINTR and short writes: 0, or -1. */
int wl_write_all(int fd, const void *buf, size_t n);

/* Bytes allocated on the heap now, under AddressSanitizer (exact); 0 in
 * other builds.  A child compares it before tp_open and after the last
 * close (and iosim_uninstall, which frees the simulator's state): a
 * difference is memory the engine leaked.  (LeakSanitizer itself reports
 * false leaks in forked children, and glibc's own counts include its
 * caches of freed chunks.) */
size_t wl_heap_bytes(void);
/* 1 when wl_heap_bytes counts (AddressSanitizer builds). */
int wl_heap_counted(void);

#endif
