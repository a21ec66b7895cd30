/*
 * tpcb_lmdb -- TPC-B on LMDB (liblmdb-dev).
 *
 * Environment dir/lmdb (a 4 GiB map), four databases with MDB_INTEGERKEY
 * keyed by the 64-bit id (history by its sequence number).  LMDB has one
 * writer at a time (a mutex in mdb_txn_begin), so threads queue there and
 * transactions never conflict; each updates its three records in place
 * (mdb_get, copy, mdb_put) and puts the history record.
 *
 * Modes: durable (the default: data pages and meta page synced at
 * commit), nosync (mdb_env_set_flags MDB_NOSYNC).
 */
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "benchutil.h"
#include "tpcb.h"

enum { L_ACC, L_TEL, L_BR, L_HIST, NDBI };
static const char *const dbi_name[NDBI] = {"account", "teller", "branch", "history"};

static const tpcb_mode modes[] = {
	{"durable", TPCB_DURABLE, "durable at commit: data and meta pages synced", 0},
	{"nosync", TPCB_NOSYNC, "MDB_NOSYNC: survives a process crash; an OS crash loses recent commits (or corrupts, if writes reorder)", 0},
};

typedef struct ldb {
	MDB_env *env;
	MDB_dbi dbi[NDBI];
} ldb;

static int fail(const char *what, int rc)
{
	fprintf(stderr, "tpcb: lmdb: %s: %s\n", what, mdb_strerror(rc));
	return rc ? rc : -1;
}

static int env_open(const char *home, int maxreaders, MDB_env **out)
{
	MDB_env *env;
	int rc;
	tpcb_rmtree(home);
	if (mkdir(home, 0755) != 0)
		return fail(home, errno);
	if ((rc = mdb_env_create(&env)) != 0)
		return fail("mdb_env_create", rc);
	if ((rc = mdb_env_set_mapsize(env, (size_t)4 << 30)) != 0 || (rc = mdb_env_set_maxdbs(env, 8)) != 0 ||
	    (rc = mdb_env_set_maxreaders(env, (unsigned)maxreaders + 16)) != 0 ||
	    (rc = mdb_env_open(env, home, 0, 0644)) != 0) {
		mdb_env_close(env);
		return fail("open environment", rc);
	}
	*out = env;
	return 0;
}

static void l_close(void *h)
{
	ldb *d = h;
	if (d->env)
		mdb_env_close(d->env);
	free(d);
}

static int l_open(const tpcb_cfg *cfg, void **out)
{
	char home[4096];
	ldb *d = calloc(1, sizeof *d);
	MDB_txn *t;
	int rc;
	if (!d)
		return ENOMEM;
	tpcb_path(home, sizeof home, cfg->dir, "lmdb");
	if ((rc = env_open(home, cfg->max_threads, &d->env)) != 0) {
		free(d);
		return rc;
	}
	if ((rc = mdb_txn_begin(d->env, NULL, 0, &t)) != 0)
		goto err;
	for (int i = 0; i < NDBI; i++)
		if ((rc = mdb_dbi_open(t, dbi_name[i], MDB_CREATE | MDB_INTEGERKEY, &d->dbi[i])) != 0) {
			mdb_txn_abort(t);
			goto err;
		}
	if ((rc = mdb_txn_commit(t)) != 0)
		goto err;
	uint32_t n[3] = {cfg->accounts, cfg->tellers, cfg->branches};
	uint32_t per[3] = {cfg->accounts / cfg->branches, cfg->tellers / cfg->branches, 1};
	static const char *const what[3] = {"accounts", "tellers", "branches"};
	for (int k = 0; k < 3; k++) {
		if ((rc = mdb_txn_begin(d->env, NULL, 0, &t)) != 0)
			goto err;
		for (uint32_t i = 0; i < n[k]; i++) {
			size_t id = i;
			tpcb_rec r;
			MDB_val key = {sizeof id, &id}, val = {TPCB_REC, &r};
			if (i % 10000 == 0)
				tpcb_progress("lmdb", what[k], i, n[k]);
			tpcb_rec_init(&r, i, i / per[k]);
			if ((rc = mdb_put(t, d->dbi[k], &key, &val, MDB_APPEND)) != 0) {
				mdb_txn_abort(t);
				goto err;
			}
		}
		if ((rc = mdb_txn_commit(t)) != 0)
			goto err;
		tpcb_progress("lmdb", what[k], n[k], n[k]);
	}
	*out = d;
	return 0;
err:
	fail("load", rc);
	l_close(d);
	return rc;
}

static int l_set_mode(void *h, int mode)
{
	ldb *d = h;
	int rc = mdb_env_set_flags(d->env, MDB_NOSYNC, mode == 1);
	return rc ? fail("set MDB_NOSYNC", rc) : 0;
}

static int l_worker_open(void *h, void **w)
{
	*w = h;
	return 0;
}

static void l_worker_close(void *w) { (void)w; }

static int update(MDB_txn *t, MDB_dbi dbi, size_t id, int64_t delta)
{
	MDB_val key = {sizeof id, &id}, val;
	tpcb_rec r;
	int rc;
	if ((rc = mdb_get(t, dbi, &key, &val)) != 0)
		return rc;
	if (val.mv_size != TPCB_REC)
		return MDB_CORRUPTED;
	memcpy(&r, val.mv_data, TPCB_REC);
	r.balance += delta;
	val.mv_data = &r;
	return mdb_put(t, dbi, &key, &val, 0);
}

static int l_txn(void *w, const tpcb_args *a, uint64_t *retries)
{
	ldb *d = w;
	MDB_txn *t;
	size_t hk = a->hseq;
	tpcb_hist h;
	MDB_val key = {sizeof hk, &hk}, val = {TPCB_HIST, h.b};
	int rc;
	(void)retries;
	tpcb_hist_init(&h, a);
	if ((rc = mdb_txn_begin(d->env, NULL, 0, &t)) != 0)
		return fail("txn_begin", rc);
	if ((rc = update(t, d->dbi[L_ACC], a->account, a->delta)) != 0 ||
	    (rc = update(t, d->dbi[L_TEL], a->teller, a->delta)) != 0 ||
	    (rc = update(t, d->dbi[L_BR], a->branch, a->delta)) != 0 ||
	    (rc = mdb_put(t, d->dbi[L_HIST], &key, &val, 0)) != 0) {
		mdb_txn_abort(t);
		return fail("transaction", rc);
	}
	if ((rc = mdb_txn_commit(t)) != 0)
		return fail("commit", rc);
	return 0;
}

static int sum_dbi(MDB_txn *t, MDB_dbi dbi, int hist, int64_t *sum, uint64_t *n)
{
	MDB_cursor *c;
	MDB_val key, val;
	int rc;
	*sum = 0;
	*n = 0;
	if ((rc = mdb_cursor_open(t, dbi, &c)) != 0)
		return fail("cursor", rc);
	for (rc = mdb_cursor_get(c, &key, &val, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
		if (hist) {
			*sum += tpcb_hist_delta(val.mv_data);
		} else {
			tpcb_rec r;
			memcpy(&r, val.mv_data, TPCB_REC);
			*sum += r.balance;
		}
		(*n)++;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : fail("scan", rc);
}

static int l_sums(void *h, tpcb_sums *s)
{
	ldb *d = h;
	MDB_txn *t;
	uint64_t n;
	int rc;
	if ((rc = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &t)) != 0)
		return fail("read txn", rc);
	if ((rc = sum_dbi(t, d->dbi[L_ACC], 0, &s->accounts, &n)) == 0 &&
	    (rc = sum_dbi(t, d->dbi[L_TEL], 0, &s->tellers, &n)) == 0 &&
	    (rc = sum_dbi(t, d->dbi[L_BR], 0, &s->branches, &n)) == 0)
		rc = sum_dbi(t, d->dbi[L_HIST], 1, &s->history, &s->history_n);
	mdb_txn_abort(t);
	return rc;
}

static int l_bulk(const char *dir, uint32_t n, double *secs)
{
	char home[4096];
	MDB_env *env;
	MDB_txn *t;
	MDB_dbi dbi;
	int rc;
	tpcb_path(home, sizeof home, dir, "bulk-lmdb");
	if ((rc = env_open(home, 1, &env)) != 0)
		return rc;
	double a = bench_now();
	if ((rc = mdb_txn_begin(env, NULL, 0, &t)) != 0)
		goto out;
	if ((rc = mdb_dbi_open(t, "pairs", MDB_CREATE | MDB_INTEGERKEY, &dbi)) != 0) {
		mdb_txn_abort(t);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		unsigned int k = i, v = i;
		MDB_val key = {sizeof k, &k}, val = {sizeof v, &v};
		if ((rc = mdb_put(t, dbi, &key, &val, MDB_APPEND)) != 0) {
			mdb_txn_abort(t);
			goto out;
		}
	}
	if ((rc = mdb_txn_commit(t)) != 0)
		goto out;
	*secs = bench_now() - a;
	MDB_stat st;
	if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &t)) != 0)
		goto out;
	rc = mdb_stat(t, dbi, &st);
	mdb_txn_abort(t);
	if (rc == 0 && st.ms_entries != n) {
		fprintf(stderr, "tpcb: lmdb: bulk check FAILED: %zu pairs of %" PRIu32 "\n", st.ms_entries, n);
		rc = -1;
	}
out:
	if (rc)
		fail("bulk", rc);
	mdb_env_close(env);
	tpcb_rmtree(home);
	return rc;
}

const tpcb_system tpcb_lmdb = {
	.name = "lmdb",
	.modes = modes,
	.nmodes = 2,
	.notes = MDB_VERSION_STRING "; one writer at a time, MDB_INTEGERKEY, 4 GiB map",
	.open = l_open,
	.set_mode = l_set_mode,
	.worker_open = l_worker_open,
	.txn = l_txn,
	.worker_close = l_worker_close,
	.sums = l_sums,
	.close = l_close,
	.bulk = l_bulk,
};
