/*
 * crash_harness.h -- the crash-point loop that the crash suites share
 * (tests/crash/test_crash.c, test_crash_btree.c): the suite says what a
 * store, a workload and a check are; the harness runs the points.
 *
 * Per seed (seed i = wl_mix(TP_CRASH_SEED, i)):
 *   1. a dry run of the seed's workload on a fresh copy of a base store
 *      counts the syncs S and the passes through the named points; it ends
 *      in a power cut (a crash point itself) or a clean close;
 *   2. armed_per_seed more runs of the same workload on fresh copies are
 *      cut at sync n in 1..S or at the nth pass through a named point (and,
 *      where the suite names one, first at the sync after a lazy commit);
 *   after each crash, one time in four (then one in three again, up to three
 *   deep) recovery itself is cut: a dry recovery on a scratch copy counts its
 *   syncs R, then a child recovers the real copy and dies at sync m in 1..R
 *   or at a named point; finally a verifier child checks the store.
 * Workers (processes) take seeds until enough crash points ran.  Children
 * never call cr_assert: they report through shared memory (wl_shared) and
 * their exit status; a failure names the seed and the crash point, and the
 * store is copied to TOP/failed.
 *
 * Environment: TP_CRASH_POINTS, TP_CRASH_SEED (default 1), TP_CRASH_ONLY=i
 * (rerun seed index i alone), TP_CRASH_JOBS (workers, default online CPUs,
 * at most 8), TP_CRASH_VERBOSE (a line per seed).
 */
#ifndef TPFS_CRASH_HARNESS_H
#define TPFS_CRASH_HARNESS_H

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <criterion/options.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "tp.h"
#include "workload.h"

/* ---- what the runs count (shared by the workers) ---- */

typedef struct ch_totals {
	uint64_t next;          /* next seed index (atomic) */
	uint64_t points;        /* crash points run (atomic) */
	uint64_t rec_points;    /* ...of them during recovery */
	uint64_t named;         /* ...of them at named points */
	uint64_t ends;          /* ...of them at the end of a run */
	uint64_t clean_ends;    /* runs that ended with a clean close (not crashes) */
	uint64_t seeds, verified;
	uint64_t commits, aborts, ckpts, page_writes, fpis, log_bytes; /* dry runs */
	uint64_t redone, losers, doubt, doubt_kept, cuts;              /* verified recoveries */
	uint64_t by_point[WL_NPOINTS]; /* crashes at each named point */
	uint64_t after_lazy;           /* crashes at the first sync after a lazy commit or tp_sync */
	uint64_t failures;
	char msg[8192];
} ch_totals;

/* ---- children ---- */

enum { CH_WORKLOAD, CH_RECOVERY_DRY, CH_RECOVERY_CRASH, CH_VERIFY };

/* What a child reports in sh->val: a workload child (ch_workload_done) */
enum { CH_W_COMMITS, CH_W_ABORTS, CH_W_CKPTS, CH_W_PAGE_WRITES, CH_W_FPIS, CH_W_LOG_BYTES,
       CH_W_LAZY_SYNC /* a sync right after a lazy commit or tp_sync returned (0: none) */ };
/* ...and a verifier child */
enum { CH_V_REDONE, CH_V_LOSERS, CH_V_DOUBT /* a commit was in doubt */, CH_V_DOUBT_KEPT, CH_V_CUT /* bytes */ };

typedef struct ch_child {
	int kind;               /* CH_* */
	const void *cfg;        /* the suite's configuration of the seed */
	const void *base;       /* the suite's model of the base store */
	const char *store, *oracle;
	uint64_t sim_seed;
	uint64_t sync_n;        /* crash at this sync (0: not armed) */
	const char *point;      /* or at this named point */
	uint64_t nth;
	int end_close;          /* workload: end with tp_close, not a power cut */
	wl_shared *sh;
} ch_child;

/* In a child: installs the simulator and arms the crash (not for a
 * verifier). */
void ch_child_begin(const ch_child *x);
/* In a workload or recovery child whose engine is open: records the
 * counters and the workload's stats (workload: commits, aborts, lazy sync
 * or 0), then ends as the kind says -- a dry recovery crash-closes, a
 * workload with end_close closes cleanly, else a power cut.  Returns the
 * child's exit status. */
int ch_child_end(const ch_child *x, tp_env *env, uint64_t commits, uint64_t aborts, uint64_t lazy_sync);
/* In a workload or recovery child: tp_open of the store (recovery); 0, or
 * CH_CHILD_FAIL with the message in sh->msg. */
int ch_child_open(const ch_child *x, const tp_options *o, tp_env **env);
/* A child's failure: its message in sh->msg; returns CH_CHILD_FAIL. */
int ch_child_fail(const ch_child *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define CH_CHILD_FAIL 3

/* In a verifier child under the simulator (the crash and fault suites):
 * wl_check -- recovery, every page against the oracle, one more
 * transaction, close, reopen, again -- then the simulator uninstalled;
 * *leaked: the bytes the engine did not free meanwhile (0 unless
 * wl_heap_bytes counts).  0, or -1 with the message in err. */
int ch_wl_check(const char *store, const wl_config *c, const wl_model *base, const char *oracle, uint64_t seed,
		wl_check_result *res, size_t *leaked, char *err, size_t n);

/* In the parent: counts a failed point (atomically, in *failures); the
 * first one's message goes to msg (size bytes) -- "KIND point failed: ...
 * at: AT", the store copied to keep for a post-mortem, and where. */
void ch_vnote_failure(uint64_t *failures, char *msg, size_t size, const char *kind, const char *at,
		      const char *store, const char *keep, const char *fmt, va_list ap);

/* ---- a seed ---- */

typedef struct ch_seed {
	const void *cfg, *base; /* handed to the children (the suite's own storage) */
	int geo;                /* which base store (0 or 1) */
	int end_close;          /* the workload ends with a clean close */
	char dry[400];          /* the dry run, for messages */
	char workload[200];     /* "workload", or with details, for messages */
	char brief[200];        /* the configuration in short (TP_CRASH_VERBOSE) */
} ch_seed;

/* ---- a suite ---- */

typedef struct ch_suite {
	const char *name;            /* "crash": begins the lines printed */
	const char *tmp_name;        /* of the temporary directory (wl_tmpdir) */
	uint64_t default_points;     /* TP_CRASH_POINTS unset */
	int armed_per_seed;          /* crashed runs after each dry run */
	uint64_t salt;               /* of the seed's own random choices */
	uint64_t max_failures;       /* stop after this many failed points */
	int lazy_first;              /* the first armed run crashes at CH_W_LAZY_SYNC + 1 */
	/* In a worker: makes base store geo (0 or 1) in dir with the real io. */
	int (*make_base)(int geo, const char *dir, char *err, size_t n);
	/* In a worker: the seed's configuration; r: the seed's generator. */
	void (*seed)(uint64_t seed, wl_rng *r, ch_seed *out);
	/* In a child (ch_child_begin already called): the run; its exit status. */
	int (*child)(ch_child *x);
	/* After the common line of results: the suite's own. */
	void (*report)(const ch_totals *g, double secs);
} ch_suite;

/* The suite's Criterion test (category, name) and its time limit, which
 * grows with the crash points (per_point seconds each: --long). */
#define CH_TEST(category, name, suite, per_point)                                                                      \
	ReportHook(PRE_ALL)(struct criterion_test_set * set)                                                           \
	{                                                                                                              \
		(void)set;                                                                                             \
		criterion_options.timeout = 120.0 + (per_point) * (double)ch_points_wanted(&(suite));                  \
	}                                                                                                              \
	Test(category, name) { ch_run(&(suite)); }

/* TP_CRASH_POINTS, or the suite's default. */
uint64_t ch_points_wanted(const ch_suite *s);
/* The test: runs the workers, prints the counts, asserts that no point
 * failed and that enough points ran (crashes during recovery among them). */
void ch_run(const ch_suite *s);

#endif
