/*
 * recover_harness.c -- what the recover suites share: their parameters and
 * a power cut at each sync of one operation and its commit
 * (recover_harness.h).
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recover_harness.h"
#include "io_sim.h"
#include "store_util.h"

op_seed *op_seed_params(int nops, const uint64_t *seeds, size_t nseeds, size_t *n)
{
	*n = (size_t)nops * nseeds;
	op_seed *v = cr_malloc(*n * sizeof *v);
	cr_assert(v, "cr_malloc of %zu parameters", *n);
	for (int op = 0; op < nops; op++)
		for (size_t i = 0; i < nseeds; i++)
			v[(size_t)op * nseeds + i] = (op_seed){op, seeds[i]};
	return v;
}

typedef struct cut_arg {
	const cut_each *c;
	uint64_t k;
	char acked[700], done[700];
} cut_arg;

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
}

static void cut_child(void *arg)
{
	cut_arg *a = arg;
	const cut_each *c = a->c;
	tp_txn *t;
	iosim_install(c->seed * 131 + a->k);
	tp_env *env = c->open(c->arg);
	iosim_crash_at_sync(iosim_syncs() + a->k);
	if (tp_begin(env, &t) != 0) {
		fprintf(stderr, "cut child: tp_begin: %s\n", tp_errmsg());
		_exit(SU_CHILD_FAIL);
	}
	if (c->op(c->arg, env, t) != 0)
		_exit(SU_CHILD_FAIL);
	if (tp_commit(t, 0) == 0)
		touch(a->acked);
	touch(a->done);
	iosim_crash_now();
}

uint64_t cut_each_sync(const cut_each *c)
{
	int through = 0, acked_cuts = 0;
	uint64_t k;
	for (k = 1; k <= c->max_k && !through; k++) {
		cut_arg a = {.c = c, .k = k};
		snprintf(a.acked, sizeof a.acked, "%s/acked", c->dir);
		snprintf(a.done, sizeof a.done, "%s/done", c->dir);
		remove(a.acked);
		remove(a.done);
		c->fresh(c->arg);
		int ex = su_run_child(cut_child, &a);
		cr_assert_eq(ex, IOSIM_CRASH_EXIT, "%s cut at sync %" PRIu64 ": child exit %d", c->what, k, ex);
		struct stat st;
		int acked = stat(a.acked, &st) == 0;
		through = stat(a.done, &st) == 0;
		acked_cuts += acked;
		for (int round = 0; round < 2; round++)
			c->check(c->arg, k, acked, round);
	}
	cr_assert(through, "%s: still cutting after %" PRIu64 " syncs", c->what, c->max_k);
	cr_assert_gt(acked_cuts, 0, "%s: no cut after the commit", c->what);
	return k - 1;
}
