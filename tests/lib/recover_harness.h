/*
 * recover_harness.h -- what the recover suites share (tests/recover/
 * test_recover.c, test_recover_btree.c): their parameters, each operation
 * under each seed, and the loop of a power cut at each sync of one
 * operation and its commit.
 *
 * The loop.
 * For k = 1, 2, ... a child (su_run_child) opens a fresh copy of the store
 * under the io simulator (seed * 131 + k), which cuts the power at the k-th
 * sync from the operation's start (unsynced writes kept, lost or torn under
 * that seed); it begins a transaction, runs the operation and commits.
 * Files in dir say how far it got: "acked" once the commit returned 0,
 * "done" once it got through without a cut.  After each cut the suite
 * checks recovery twice (the store is recovered, crash-closed, recovered
 * again).  The loop ends when a child gets through.
 */
#ifndef TPFS_RECOVER_HARNESS_H
#define TPFS_RECOVER_HARNESS_H

#include <criterion/parameterized.h>

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

/* ---- parameters: each operation under each seed ---- */

typedef struct op_seed {
	int op;
	uint64_t seed;
} op_seed;

/* nops x nseeds parameters, operation-major (cr_malloc'd, for
 * cr_make_param_array); *n: their number. */
op_seed *op_seed_params(int nops, const uint64_t *seeds, size_t nseeds, size_t *n);

/* The parameters of test (suite, name): operations 0..nops-1, each under
 * the seeds listed. */
#define OP_SEED_PARAMS(suite, name, nops, ...)                                                                         \
	ParameterizedTestParameters(suite, name)                                                                       \
	{                                                                                                              \
		static const uint64_t seeds_[] = {__VA_ARGS__};                                                        \
		size_t n_;                                                                                             \
		op_seed *v_ = op_seed_params((nops), seeds_, sizeof seeds_ / sizeof seeds_[0], &n_);                   \
		return cr_make_param_array(op_seed, v_, n_, NULL);                                                     \
	}

/* ---- a power cut at each sync ---- */

typedef struct cut_each {
	const char *what;     /* the operation and seed, for messages */
	const char *dir;      /* a directory for the "acked" and "done" files */
	uint64_t seed;
	uint64_t max_k;       /* the operation must get through within this many syncs */
	void *arg;            /* the suite's, passed to the calls below */
	/* In the parent: a fresh copy of the base store. */
	void (*fresh)(void *arg);
	/* In the child, under the simulator: opens the store (and prepares it,
	 * e.g. a checkpoint) before the cut is armed; exits SU_CHILD_FAIL on a
	 * failure. */
	tp_env *(*open)(void *arg);
	/* In the child: the operation in transaction t; 0, or a failure. */
	int (*op)(void *arg, tp_env *env, tp_txn *t);
	/* In the parent: recovery number round (0, 1) after cut k, whose
	 * commit was acknowledged or not; asserts, and crash-closes. */
	void (*check)(void *arg, uint64_t k, int acked, int round);
} cut_each;

/* Runs the loop; asserts that every child died of its cut, that one got
 * through within max_k syncs and that some cut came after an acknowledged
 * commit.  Returns the number of cuts. */
uint64_t cut_each_sync(const cut_each *c);

#endif
