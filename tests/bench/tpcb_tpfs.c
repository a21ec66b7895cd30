/*
 * tpcb_tpfs -- TPC-B on the tpfs engine (tp.h record API).
 *
 * Store dir/tpfs: four trees, "account", "teller", "branch" (TP_TREE_U64,
 * keyed by the 8-byte id, 100-byte values) and "history" (TP_TREE_U64,
 * keyed by the 8-byte sequence number, 50-byte values, put with TP_APPEND).
 *
 * A transaction reads each record with tp_get_rmw, which X-locks it at
 * once, so that the lock is never upgraded: two transactions reading the
 * same branch and then both upgrading would deadlock on nearly every
 * transaction at 10 branches (Berkeley DB's DB_RMW, which its side of the
 * benchmark uses).  Records are locked in the order account, teller,
 * branch, so transactions never deadlock with each other; TP_EDEADLOCK /
 * TP_EROLLBACK / TP_ETIMEOUT are retried all the same.
 *
 * Modes
 *   durable      tp_commit(t, 0)
 *   nosync       tp_commit(t, TP_COMMIT_NOSYNC)
 *   unprotected  a second store, dir/tpfs-notxn, loaded the same way, whose
 *                trees are TP_TREE_NOTXN, written with t == NULL: no log,
 *                no locks.
 *                The record read-modify-writes would race, so a global
 *                mutex makes each transaction's body exclusive (at 2+
 *                threads this measures the serialized engine).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "tp.h"
#include "tpcb.h"

enum { M_DURABLE, M_NOSYNC, M_UNPROTECTED };
enum { T_ACC, T_TEL, T_BR, T_HIST, NTREE };
static const char *const tree_name[NTREE] = {"account", "teller", "branch", "history"};

static const tpcb_mode modes[] = {
	{"durable", TPCB_DURABLE, "durable at commit: tp_commit(t, 0) flushes the log (group commit)", 0},
	{"nosync", TPCB_NOSYNC, "atomic; TP_COMMIT_NOSYNC: commits not yet flushed lost at a crash", 0},
	{"unprotected", TPCB_NONE, "TP_TREE_NOTXN, no log or locks, global mutex: a crash may damage the trees", 1},
};

typedef struct tstore {
	tp_env *env;
	tp_tree *tr[NTREE];
} tstore;

typedef struct tdb {
	tpcb_cfg cfg;
	tstore st[2];       /* 0: protected trees, 1: unprotected */
	int mode;           /* set between measurements only */
	tp_stats s0;        /* at the start of a measurement */
	pthread_mutex_t mu; /* unprotected mode: one transaction body at a time */
} tdb;

static int fail(const char *what, int rc)
{
	fprintf(stderr, "tpcb: tpfs: %s: %s (%s)\n", what, tp_strerror(rc), tp_errmsg());
	return rc ? rc : -1;
}

static void put64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static void close_store(tstore *st)
{
	for (int i = 0; i < NTREE; i++) {
		tp_tree_close(st->tr[i]);
		st->tr[i] = NULL;
	}
	if (st->env) {
		int rc = tp_close(st->env);
		if (rc)
			fail("close", rc);
	}
	st->env = NULL;
}

/* Makes and loads store dir/name into st; notxn: unprotected trees. */
static int open_store(tdb *d, tstore *st, const char *name, int notxn)
{
	char store[4096];
	tp_options o;
	tp_txn *t = NULL;
	int rc;
	const char *sys = notxn ? "tpfs (unprotected)" : "tpfs";

	tpcb_path(store, sizeof store, d->cfg.dir, name);
	tpcb_rmtree(store);
	tp_options_init(&o);
	o.quiet = 1;
	o.background = !getenv("TPCB_NOBG"); /* as tpfsd: no commit waits for a checkpoint */
	o.cache_pages = d->cfg.cache_bytes / 4096;
	if ((rc = tp_mkfs(store, &o)) != 0)
		return fail("mkfs", rc);
	if ((rc = tp_open(store, &o, &st->env)) != 0)
		return fail("open", rc);
	for (int i = 0; i < NTREE; i++)
		if ((rc = tp_tree_open(st->env, tree_name[i], TP_TREE_CREATE | TP_TREE_U64 | (notxn ? TP_TREE_NOTXN : 0),
				       &st->tr[i])) != 0)
			return fail("tree open", rc);
	uint32_t n[3] = {d->cfg.accounts, d->cfg.tellers, d->cfg.branches};
	uint32_t per[3] = {d->cfg.accounts / d->cfg.branches, d->cfg.tellers / d->cfg.branches, 1};
	static const char *const what[3] = {"accounts", "tellers", "branches"};
	for (int k = 0; k < 3; k++) {
		for (uint32_t i = 0; i < n[k]; i++) {
			unsigned char key[8];
			tpcb_rec r;
			if (i % 10000 == 0)
				tpcb_progress(sys, what[k], i, n[k]);
			if (!notxn && !t && (rc = tp_begin(st->env, &t)) != 0)
				return fail("begin", rc);
			tpcb_rec_init(&r, i, i / per[k]);
			put64(key, i);
			if ((rc = tp_put(t, st->tr[k], key, 8, &r, TPCB_REC, TP_APPEND)) != 0)
				return fail("load put", rc);
			if (t && (i % 1000 == 999 || i == n[k] - 1)) {
				rc = tp_commit(t, TP_COMMIT_NOSYNC);
				t = NULL;
				if (rc)
					return fail("load commit", rc);
			}
		}
		tpcb_progress(sys, what[k], n[k], n[k]);
	}
	if ((rc = tp_checkpoint(st->env)) != 0) /* the loaded pages on disk, the log short */
		return fail("checkpoint", rc);
	return 0;
}

static void t_close(void *db)
{
	tdb *d = db;
	close_store(&d->st[0]);
	close_store(&d->st[1]);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

static int t_open(const tpcb_cfg *cfg, void **out)
{
	tdb *d = calloc(1, sizeof *d);
	int rc;
	if (!d)
		return ENOMEM;
	d->cfg = *cfg;
	pthread_mutex_init(&d->mu, NULL);
	if ((rc = open_store(d, &d->st[0], "tpfs", 0)) != 0 || (rc = open_store(d, &d->st[1], "tpfs-notxn", 1)) != 0) {
		t_close(d);
		return rc;
	}
	*out = d;
	return 0;
}

static int t_set_mode(void *db, int mode)
{
	((tdb *)db)->mode = mode;
	return 0;
}

static int t_worker_open(void *db, void **w)
{
	*w = db;
	return 0;
}

static void t_worker_close(void *w) { (void)w; }

/* The store of the current mode. */
static tstore *cur(tdb *d) { return &d->st[d->mode == M_UNPROTECTED]; }

/* Adds delta to record id of tree k (read for update: X-locked at once). */
static int update(tstore *st, tp_txn *t, int k, uint64_t id, int64_t delta)
{
	unsigned char key[8];
	tpcb_rec r;
	size_t vlen;
	int rc;
	put64(key, id);
	if ((rc = tp_get_rmw(t, st->tr[k], key, 8, &r, sizeof r, &vlen)) != 0)
		return rc;
	if (vlen != TPCB_REC)
		return TP_ECORRUPT;
	r.balance += delta;
	return tp_put(t, st->tr[k], key, 8, &r, TPCB_REC, 0);
}

static int body(tstore *st, tp_txn *t, const tpcb_args *a)
{
	unsigned char key[8];
	tpcb_hist h;
	int rc;
	if ((rc = update(st, t, T_ACC, a->account, a->delta)) != 0 ||
	    (rc = update(st, t, T_TEL, a->teller, a->delta)) != 0 || (rc = update(st, t, T_BR, a->branch, a->delta)) != 0)
		return rc;
	put64(key, a->hseq);
	tpcb_hist_init(&h, a);
	return tp_put(t, st->tr[T_HIST], key, 8, h.b, TPCB_HIST, TP_APPEND);
}

static int t_txn(void *w, const tpcb_args *a, uint64_t *retries)
{
	tdb *d = w;
	tstore *st = cur(d);
	int rc;
	if (d->mode == M_UNPROTECTED) {
		pthread_mutex_lock(&d->mu);
		rc = body(st, NULL, a);
		pthread_mutex_unlock(&d->mu);
		return rc ? fail("unprotected transaction", rc) : 0;
	}
	for (;;) {
		tp_txn *t;
		if ((rc = tp_begin(st->env, &t)) != 0)
			return fail("begin", rc);
		if ((rc = body(st, t, a)) != 0) {
			(void)tp_abort(t);
		} else {
			rc = tp_commit(t, d->mode == M_NOSYNC ? TP_COMMIT_NOSYNC : 0);
			if (rc == 0)
				return 0;
		}
		if (rc != TP_EDEADLOCK && rc != TP_EROLLBACK && rc != TP_ETIMEOUT)
			return fail("transaction", rc);
		(*retries)++;
	}
}

static int sum_tree(tstore *st, int k, int64_t *sum, uint64_t *n)
{
	tp_cursor *c;
	const void *key, *val;
	size_t klen, vlen;
	int rc;
	*sum = 0;
	*n = 0;
	if ((rc = tp_cursor_open(NULL, st->tr[k], &c)) != 0)
		return fail("cursor", rc);
	for (rc = tp_cursor_seek(c, "", 0, TP_FIRST); rc == 0; rc = tp_cursor_next(c)) {
		tp_cursor_get(c, &key, &klen, &val, &vlen);
		if (k == T_HIST) {
			*sum += tpcb_hist_delta(val);
		} else {
			tpcb_rec r;
			memcpy(&r, val, TPCB_REC);
			*sum += r.balance;
		}
		(*n)++;
	}
	tp_cursor_close(c);
	return rc == TP_ENOTFOUND ? 0 : fail("scan", rc);
}

static int t_sums(void *db, tpcb_sums *s)
{
	tstore *st = cur(db);
	uint64_t n;
	int rc;
	if ((rc = sum_tree(st, T_ACC, &s->accounts, &n)) != 0 || (rc = sum_tree(st, T_TEL, &s->tellers, &n)) != 0 ||
	    (rc = sum_tree(st, T_BR, &s->branches, &n)) != 0 ||
	    (rc = sum_tree(st, T_HIST, &s->history, &s->history_n)) != 0)
		return rc;
	return 0;
}

/* The bulk test's check: n pairs, key i (big-endian) with value i. */
static int count_pairs(tp_tree *tr, uint32_t n)
{
	tp_cursor *c;
	const void *key, *val;
	size_t klen, vlen;
	uint32_t i = 0;
	int rc;
	if ((rc = tp_cursor_open(NULL, tr, &c)) != 0)
		return fail("bulk check", rc);
	for (rc = tp_cursor_seek(c, "", 0, TP_FIRST); rc == 0; rc = tp_cursor_next(c), i++) {
		uint32_t v;
		tp_cursor_get(c, &key, &klen, &val, &vlen);
		memcpy(&v, val, 4);
		if (klen != 4 || vlen != 4 || tpcb_get_be32(key) != i || v != i)
			break;
	}
	tp_cursor_close(c);
	if (rc != TP_ENOTFOUND || i != n) {
		fprintf(stderr, "tpcb: tpfs: bulk check FAILED at pair %" PRIu32 " of %" PRIu32 "\n", i, n);
		return -1;
	}
	return 0;
}

static void t_stats(void *db, int start, uint64_t commits, char *buf, size_t cap)
{
	tdb *d = db;
	tp_stats s;
	tp_stats_get(cur(d)->env, &s);
	if (start) {
		d->s0 = s;
		return;
	}
	double c = commits ? (double)commits : 1;
	snprintf(buf, cap,
		 "per txn: log flushes %.3f, records %.1f, bytes %.0f, page images %.3f, page writes %.3f, "
		 "lock requests %.1f, lock waits %.3f; checkpoints %" PRIu64 ", log segments made %" PRIu64
		 " (recycled %" PRIu64 ")",
		 (double)(s.log_flushes - d->s0.log_flushes) / c, (double)(s.log_records - d->s0.log_records) / c,
		 (double)(s.log_bytes - d->s0.log_bytes) / c, (double)(s.log_fpis - d->s0.log_fpis) / c,
		 (double)(s.page_writes - d->s0.page_writes) / c, (double)(s.lock_requests - d->s0.lock_requests) / c,
		 (double)(s.lock_waits - d->s0.lock_waits) / c, s.checkpoints - d->s0.checkpoints,
		 s.log_segs_made - d->s0.log_segs_made, s.log_segs_recycled - d->s0.log_segs_recycled);
}

static int t_bulk(const char *dir, uint32_t n, double *secs)
{
	char store[4096];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	tp_txn *t;
	int rc;
	tpcb_path(store, sizeof store, dir, "bulk-tpfs");
	tpcb_rmtree(store);
	tp_options_init(&o);
	o.quiet = 1;
	o.cache_pages = 40000;
	if ((rc = tp_mkfs(store, &o)) != 0 || (rc = tp_open(store, &o, &env)) != 0)
		return fail("bulk open", rc);
	if ((rc = tp_tree_open(env, "pairs", TP_TREE_CREATE, &tr)) != 0)
		return fail("bulk tree", rc);
	double a = bench_now();
	if ((rc = tp_begin(env, &t)) != 0)
		return fail("bulk begin", rc);
	for (uint32_t i = 0; i < n; i++) {
		unsigned char k[4], v[4];
		tpcb_be32(k, i);
		memcpy(v, &i, 4);
		if ((rc = tp_put(t, tr, k, 4, v, 4, TP_APPEND)) != 0) {
			(void)tp_abort(t);
			return fail("bulk put", rc);
		}
	}
	if ((rc = tp_commit(t, 0)) != 0)
		return fail("bulk commit", rc);
	*secs = bench_now() - a;
	if ((rc = count_pairs(tr, n)) != 0)
		return rc;
	tp_tree_close(tr);
	if ((rc = tp_close(env)) != 0)
		return fail("bulk close", rc);
	tpcb_rmtree(store);
	return 0;
}

const tpcb_system tpcb_tpfs = {
	.name = "tpfs",
	.modes = modes,
	.nmodes = 3,
	.notes = "U64 trees, records read with tp_get_rmw (X at once, no S->X upgrade), cache = the data",
	.open = t_open,
	.set_mode = t_set_mode,
	.worker_open = t_worker_open,
	.txn = t_txn,
	.worker_close = t_worker_close,
	.sums = t_sums,
	.close = t_close,
	.stats = t_stats,
	.bulk = t_bulk,
};
