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
 * The loop over seeds, crash points and recovery crashes is the shared
 * crash harness (tests/lib/crash_harness.h); this file is the workload,
 * its base stores and its check.
 *
 * Environment
 *   TP_CRASH_POINTS  crash points to run (default 1000; scripts/test --long
 *                    sets 100000)
 *   TP_CRASH_SEED    base seed (default 1); TP_CRASH_ONLY=i reruns seed i
 *   TP_CRASH_JOBS    worker processes (default: online CPUs, at most 8)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "crash_harness.h"
#include "io_sim.h"
#include "workload.h"

#define SETUP_PAGES 48
#define L_PAGES 6
#define MAX_FAILURES 10 /* stop after this many failed crash points */

/* A worker's base stores (each worker is a process of its own): two
 * geometries, 1 KiB and 4 KiB pages. */
static wl_config base_cfg[2];
static wl_model base[2];
static wl_config seed_cfg; /* the seed being run */

static int make_base(int geo, const char *dir, char *err, size_t n)
{
	wl_config_base(&base_cfg[geo], SETUP_PAGES, L_PAGES);
	if (geo)
		base_cfg[geo].page_size = 4096;
	if (wl_model_init(&base[geo], base_cfg[geo].page_size - 16) != 0) {
		snprintf(err, n, "cannot make the model");
		return -1;
	}
	return wl_make_base(dir, &base_cfg[geo], &base[geo], err, n);
}

static void seed(uint64_t s, wl_rng *r, ch_seed *out)
{
	int geo = wl_below(r, 3) == 0; /* one seed in three: 4 KiB pages */
	int end_close = wl_below(r, 4) == 0;
	wl_config *cfg = &seed_cfg;
	*cfg = base_cfg[geo];
	wl_config_seed(cfg, s, 20, 60);
	out->cfg = cfg;
	out->base = &base[geo];
	out->geo = geo;
	out->end_close = end_close;
	snprintf(out->dry, sizeof out->dry,
		 "dry run (%u-byte pages, %u transactions, cache %zu, checkpoint every %" PRIu64 " bytes), ending in %s",
		 cfg->page_size, cfg->ntx, cfg->cache_pages, cfg->ckpt_log_bytes, end_close ? "a clean close" : "a power cut");
	snprintf(out->workload, sizeof out->workload, "workload");
	snprintf(out->brief, sizeof out->brief, "%u txns, cache %zu, ckpt %" PRIu64 ", L %d", cfg->ntx, cfg->cache_pages,
		 cfg->ckpt_log_bytes, cfg->long_txn);
}

/* The verifier child: wl_check (recovery, every page against the oracle,
 * one more transaction, close, reopen, again), and no memory leaked. */
static int verify(ch_child *x)
{
	wl_check_result res;
	size_t leaked;
	char err[sizeof x->sh->msg] = "";
	if (ch_wl_check(x->store, x->cfg, x->base, x->oracle, x->sim_seed, &res, &leaked, err, sizeof err) != 0)
		return ch_child_fail(x, "%s", err);
	if (leaked)
		return ch_child_fail(x, "the engine leaked %zu bytes in recovery, reopen and close", leaked);
	x->sh->val[CH_V_REDONE] = res.rec_redone;
	x->sh->val[CH_V_LOSERS] = res.rec_losers;
	x->sh->val[CH_V_DOUBT] = res.in_doubt;
	x->sh->val[CH_V_DOUBT_KEPT] = (uint64_t)res.doubt_applied;
	x->sh->val[CH_V_CUT] = res.rec_cut_bytes;
	x->sh->finished = 1;
	return 0;
}

/* In a child, under the simulator: the workload, a recovery, or the
 * verifier. */
static int child(ch_child *x)
{
	if (x->kind == CH_VERIFY)
		return verify(x);
	tp_options o;
	tp_env *env;
	int rc;
	wl_options(x->cfg, &o);
	if ((rc = ch_child_open(x, &o, &env)) != 0)
		return rc;
	if (x->kind != CH_WORKLOAD)
		return ch_child_end(x, env, 0, 0, 0);
	wl_stats st;
	char err[sizeof x->sh->msg] = "";
	if (wl_run(env, x->cfg, x->base, x->oracle, WL_STRICT, &st, err, sizeof err) != 0)
		return ch_child_fail(x, "workload: %s", err);
	/* one sync right after a lazy commit or tp_sync returned */
	uint64_t lazy = st.nmarks ? st.marks[wl_below(&(wl_rng){x->sim_seed}, st.nmarks)] : 0;
	return ch_child_end(x, env, st.commits, st.aborts, lazy);
}

static void report(const ch_totals *g, double secs)
{
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
}

static const ch_suite suite = {
	.name = "crash",
	.tmp_name = "crash",
	.default_points = 1000,
	.armed_per_seed = 3,
	.salt = 0xc4a54,
	.max_failures = MAX_FAILURES,
	.lazy_first = 1,
	.make_base = make_base,
	.seed = seed,
	.child = child,
	.report = report,
};

/* The time limit grows with the number of crash points (--long). */
CH_TEST(crash, random_points, suite, 0.5)
