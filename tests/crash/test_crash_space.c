/*
 * test_crash_space -- power cuts while free pages go back to the file
 * system (tp.c E3): before and after each hole punch of a checkpoint
 * (io points "buf.punch", "buf.punched"), at every sync of that
 * checkpoint, and at the syncs after it while the punched pages are taken
 * again (their punches not yet durable), each under the io simulator
 * (pending punches applied whole, dropped, or cut at a 4 KiB block).
 *
 * The workload, on a copy of a base store holding NK values: delete three
 * keys in four in batches (durable commits), checkpoint (the punches),
 * put them back with new values in batches, sync, power cut.  A child
 * counts acknowledged batches in shared memory; the check after recovery
 * allows exactly the states those acknowledgements permit (the batch in
 * flight either way), then tp_verify, a checkpoint, a reopen and the same
 * check again.  TP_CRASH_SPACE_SEEDS (default 2) simulator seeds.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "io_sim.h"
#include "store_util.h"
#include "tp.h"

#define NK 400
#define VLEN (8u * 1024)
#define BATCH 25

typedef struct shm {
	volatile unsigned ack_del, ack_put; /* batches acknowledged */
	volatile uint64_t s0, s1;           /* syncs before and after the checkpoint */
	volatile uint64_t punches;          /* pages punched by the checkpoint */
	volatile uint64_t hits[2];          /* passes through buf.punch, buf.punched */
} shm;

static shm *sh;

static void key(unsigned i, char *k) { snprintf(k, 16, "k%08u", i); }

static void value(unsigned i, unsigned gen, unsigned char *v)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + gen * 0xbf58476d1ce4e5b9ull + 7;
	for (unsigned j = 0; j < VLEN; j++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		v[j] = (unsigned char)x;
	}
}

static void opts(tp_options *o)
{
	su_options(o, 4096, 1u << 20, 128);
	o->ckpt_log_bytes = 1ull << 40; /* checkpoints when the workload says */
	o->ckpt_ms = 1u << 30;
}

/* Deleted keys are i % 4 != 0; the nth of them is in batch n / BATCH. */
static unsigned batch_of(unsigned i) { return (i - i / 4 - 1) / BATCH; }
static unsigned nbatches(void) { return batch_of(NK - 1) + 1; }

/* del: delete batch b; else put generation 1 back. */
static int run_batch(tp_env *env, tp_tree *tr, unsigned b, int del)
{
	unsigned char *v = malloc(VLEN);
	tp_txn *t;
	char k[16];
	int rc = tp_begin(env, &t);
	for (unsigned i = 0; i < NK && !rc; i++) {
		if (i % 4 == 0 || batch_of(i) != b)
			continue;
		key(i, k);
		if (del)
			rc = tp_del(t, tr, k, strlen(k));
		else {
			value(i, 1, v);
			rc = tp_put(t, tr, k, strlen(k), v, VLEN, i % 2 ? TP_ORDERED : 0);
		}
	}
	free(v);
	if (rc) {
		(void)tp_abort(t);
		return rc;
	}
	return tp_commit(t, 0);
}

typedef struct arm {
	const char *sdir;
	uint64_t seed;
	const char *point; /* NULL: sync */
	uint64_t n;        /* pass or sync number; 0: dry run */
} arm;

static void workload(void *arg)
{
	arm *a = arg;
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	opts(&o);
	iosim_install(a->seed);
	if (a->n && a->point)
		iosim_crash_at_point(a->point, a->n);
	else if (a->n)
		iosim_crash_at_sync(a->n);
	SU_CK(tp_open(a->sdir, &o, &env) == 0);
	SU_CK(tp_tree_open(env, "t", 0, &tr) == 0);
	for (unsigned b = 0; b < nbatches(); b++) {
		SU_CK(run_batch(env, tr, b, 1) == 0);
		sh->ack_del = b + 1;
	}
	sh->s0 = iosim_syncs();
	SU_CK(tp_checkpoint(env) == 0);
	sh->s1 = iosim_syncs();
	tp_stats s;
	tp_stats_get(env, &s);
	sh->punches = s.pages_returned;
	sh->hits[0] = iosim_point_hits("buf.punch");
	sh->hits[1] = iosim_point_hits("buf.punched");
	for (unsigned b = 0; b < nbatches(); b++) {
		SU_CK(run_batch(env, tr, b, 0) == 0);
		sh->ack_put = b + 1;
	}
	SU_CK(tp_sync(env) == 0);
	iosim_crash_now();
}

/* Every key in a state the acknowledgements allow.  0 or the bad key + 1. */
static unsigned check(tp_env *env, tp_tree *tr)
{
	unsigned char *v = malloc(VLEN), *got = malloc(VLEN);
	unsigned bad = 0, nb = nbatches();
	tp_txn *t;
	char k[16];
	if (tp_begin(env, &t) != 0)
		return 1;
	for (unsigned i = 0; i < NK && !bad; i++) {
		size_t n = 0;
		key(i, k);
		int r = tp_get(t, tr, k, strlen(k), got, VLEN, &n);
		int has0 = 0, has1 = 0;
		if (r == 0 && n == VLEN) {
			value(i, 0, v);
			has0 = !memcmp(got, v, VLEN);
			value(i, 1, v);
			has1 = !memcmp(got, v, VLEN);
		}
		int absent = r == TP_ENOTFOUND;
		int ok;
		if (i % 4 == 0)
			ok = has0;
		else {
			unsigned b = batch_of(i);
			if (sh->ack_del < nb) /* cut while deleting: b in flight either way */
				ok = b < sh->ack_del ? absent : b == sh->ack_del ? absent || has0 : has0;
			else
				ok = b < sh->ack_put ? has1 : b == sh->ack_put ? absent || has1 : absent;
		}
		if (!ok)
			bad = i + 1;
	}
	(void)tp_abort(t);
	free(v);
	free(got);
	return bad;
}

static int copy(const char *from, const char *to)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
	return system(cmd);
}

/* One crash point: run, cut, recover, check twice.  0 or a message. */
static const char *one(const char *base, const char *sdir, arm *a, char *msg, size_t mn)
{
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	unsigned bad;
	opts(&o);
	if (copy(base, sdir) != 0)
		return "copy failed";
	sh->ack_del = sh->ack_put = 0;
	int st = su_run_child(workload, a);
	if (st != IOSIM_CRASH_EXIT) {
		snprintf(msg, mn, "the workload ended with %d", st);
		return msg;
	}
	for (int round = 0; round < 2; round++) {
		if (tp_open(sdir, &o, &env) != 0 || tp_tree_open(env, "t", 0, &tr) != 0) {
			snprintf(msg, mn, "open %d: %s", round, tp_errmsg());
			return msg;
		}
		if ((bad = check(env, tr)) != 0) {
			snprintf(msg, mn, "round %d: key %u wrong (batches acknowledged: %u deleted, %u put back)", round,
				 bad - 1, sh->ack_del, sh->ack_put);
			return msg;
		}
		if (tp_verify(env, 0, NULL) != 0) {
			snprintf(msg, mn, "round %d: verify: %s", round, tp_errmsg());
			return msg;
		}
		if (tp_checkpoint(env) != 0) {
			snprintf(msg, mn, "round %d: checkpoint: %s", round, tp_errmsg());
			return msg;
		}
		tp_tree_close(tr);
		if (tp_close(env) != 0) {
			snprintf(msg, mn, "round %d: close: %s", round, tp_errmsg());
			return msg;
		}
	}
	return NULL;
}

Test(crash_space, power_cuts_while_space_goes_back, .timeout = 1800)
{
	char dir[256], sdir[300], base[300], msg[512];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
	cr_assert_eq(su_tmpdir(dir, sizeof dir, "crashspace"), 0);
	snprintf(base, sizeof base, "%s/base", dir);
	snprintf(sdir, sizeof sdir, "%s/s", dir);
	opts(&o);
	cr_assert_eq(tp_mkfs(base, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(base, &o, &env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "t", TP_TREE_CREATE, &tr), 0, "%s", tp_errmsg());
	unsigned char *v = malloc(VLEN);
	for (unsigned i = 0; i < NK; i += 20) {
		tp_txn *t;
		char k[16];
		cr_assert_eq(tp_begin(env, &t), 0);
		for (unsigned j = i; j < i + 20 && j < NK; j++) {
			key(j, k);
			value(j, 0, v);
			cr_assert_eq(tp_put(t, tr, k, strlen(k), v, VLEN, j % 2 ? TP_ORDERED : 0), 0, "%s", tp_errmsg());
		}
		cr_assert_eq(tp_commit(t, 0), 0, "%s", tp_errmsg());
	}
	free(v);
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());

	const char *e = getenv("TP_CRASH_SPACE_SEEDS");
	uint64_t seeds = e && atoi(e) > 0 ? (uint64_t)atoi(e) : 2;
	uint64_t points = 0, at_punch = 0, at_punched = 0, at_sync = 0, punched = 0;
	for (uint64_t seed = 1; seed <= seeds; seed++) {
		/* the dry run: how many punches and syncs */
		arm dry = {.sdir = sdir, .seed = seed};
		cr_assert_eq(copy(base, sdir), 0);
		cr_assert_eq(su_run_child(workload, &dry), IOSIM_CRASH_EXIT, "seed %" PRIu64 ": dry run", seed);
		cr_assert_gt(sh->punches, 0, "the checkpoint gave pages back");
		punched += sh->punches;
		uint64_t s0 = sh->s0, s1 = sh->s1;
		/* the passes through the points: the punches of the checkpoint */
		uint64_t hits[2] = {sh->hits[0], sh->hits[1]};
		cr_assert_gt(hits[0], 0);
		struct {
			const char *point;
			uint64_t *count;
		} pts[2] = {{"buf.punch", &at_punch}, {"buf.punched", &at_punched}};
		for (int p = 0; p < 2; p++) {
			/* every pass, or about 40 spread evenly over them */
			uint64_t calls = 0, step = hits[p] / 40 + 1;
			for (uint64_t n = 1 + seed % step; n <= hits[p]; n += step) {
				arm a = {.sdir = sdir, .seed = seed * 1000 + n, .point = pts[p].point, .n = n};
				const char *err = one(base, sdir, &a, msg, sizeof msg);
				cr_assert_null(err, "seed %" PRIu64 ", cut at pass %" PRIu64 " of %s: %s", seed, n,
					       pts[p].point, err);
				(*pts[p].count)++;
				points++;
				calls++;
			}
		}
		/* every sync of the checkpoint, and the next 12 (the pages
		 * taken again while their punches are not yet durable) */
		for (uint64_t n = s0 + 1; n <= s1 + 12; n++) {
			arm a = {.sdir = sdir, .seed = seed * 1000 + 500 + n, .n = n};
			const char *err = one(base, sdir, &a, msg, sizeof msg);
			cr_assert_null(err, "seed %" PRIu64 ", cut at sync %" PRIu64 " (checkpoint syncs %" PRIu64 "..%" PRIu64
					    "): %s",
				       seed, n, s0 + 1, s1, err);
			at_sync++;
			points++;
		}
	}
	printf("crash_space: %" PRIu64 " crash points while space went back (%" PRIu64 " before a punch, %" PRIu64
	       " after one, %" PRIu64 " at syncs of the checkpoint and after it), all recovered; the dry runs punched %" PRIu64
	       " pages\n",
	       points, at_punch, at_punched, at_sync, punched);
	munmap(sh, sizeof *sh);
	su_rmtree(dir);
}
