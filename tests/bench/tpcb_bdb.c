/*
 * tpcb_bdb -- TPC-B on Berkeley DB 5.3 (libdb5.3-dev).
 *
 * Environment dir/bdb with DB_INIT_TXN | DB_INIT_LOCK | DB_INIT_LOG |
 * DB_INIT_MPOOL | DB_THREAD | DB_RECOVER, the same cache as every system,
 * an 8 MiB log buffer, automatic deadlock detection (DB_LOCK_DEFAULT) and
 * log files removed when no longer needed.  Four DB_BTREE databases keyed
 * by 8-byte big-endian ids (history by its sequence number).  Reads use
 * DB_RMW (write locks at once, no upgrade deadlocks); a transaction that
 * gets DB_LOCK_DEADLOCK or DB_LOCK_NOTGRANTED is aborted and retried.
 * Berkeley DB locks pages: the 10 branch records share one leaf page, as
 * do the 100 tellers, and appends share the last history page.
 *
 * Modes: durable (txn->commit(t, 0)), nosync (DB_TXN_NOSYNC), and
 * unprotected: a second environment, dir/bdb-notxn, with DB_INIT_MPOOL
 * alone (no transactions, locks or log, as db(3) was used before LIBTP),
 * its transactions serialized by a global mutex as tpfs's unprotected
 * trees are.  Its ratio to nosync is what protection costs Berkeley DB,
 * LIBTP's descendant, on the same machine (a reference for tpfs's).
 */
#include <db.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "benchutil.h"
#include "tpcb.h"

enum { D_ACC, D_TEL, D_BR, D_HIST, NDB };
static const char *const db_name[NDB] = {"account.db", "teller.db", "branch.db", "history.db"};

static const tpcb_mode modes[] = {
	{"durable", TPCB_DURABLE, "durable at commit: the log is flushed (group commit)", 0},
	{"nosync", TPCB_NOSYNC, "atomic; DB_TXN_NOSYNC: commits in the log buffer lost at a crash, even a process crash", 0},
	{"unprotected", TPCB_NONE, "DB_INIT_MPOOL alone, no log or locks, global mutex: a crash may damage the trees", 1},
};
enum { B_DURABLE, B_NOSYNC, B_UNPROTECTED };

/* One environment and its four databases; st[1] is unprotected. */
typedef struct bstore {
	DB_ENV *env;
	DB *db[NDB];
} bstore;

typedef struct bdb {
	bstore st[2];
	int mode;
	u_int32_t commit_flags;
	pthread_mutex_t mu; /* the unprotected store's transactions, one at a time */
} bdb;

static int fail(const char *what, int rc)
{
	fprintf(stderr, "tpcb: bdb: %s: %s\n", what, db_strerror(rc));
	return rc ? rc : -1;
}

static int env_open(const char *home, size_t cache, int notxn, DB_ENV **out)
{
	DB_ENV *env;
	int rc;
	tpcb_rmtree(home);
	if (mkdir(home, 0755) != 0)
		return fail(home, errno);
	if ((rc = db_env_create(&env, 0)) != 0)
		return fail("db_env_create", rc);
	env->set_errfile(env, stderr);
	env->set_errpfx(env, "tpcb: bdb");
	if ((rc = env->set_cachesize(env, (u_int32_t)(cache >> 30), (u_int32_t)(cache & ((1u << 30) - 1)), 1)) != 0 ||
	    (rc = env->set_lk_detect(env, DB_LOCK_DEFAULT)) != 0 || (rc = env->set_lk_max_locks(env, 200000)) != 0 ||
	    (rc = env->set_lk_max_objects(env, 200000)) != 0 || (rc = env->set_lg_bsize(env, 8u << 20)) != 0 ||
	    (rc = env->log_set_config(env, DB_LOG_AUTO_REMOVE, 1)) != 0) {
		env->close(env, 0);
		return fail("configure", rc);
	}
	u_int32_t flags = notxn ? DB_CREATE | DB_INIT_MPOOL | DB_THREAD
				: DB_CREATE | DB_INIT_TXN | DB_INIT_LOCK | DB_INIT_LOG | DB_INIT_MPOOL | DB_THREAD | DB_RECOVER;
	if ((rc = env->open(env, home, flags, 0644)) != 0) {
		env->close(env, 0);
		return fail("open environment", rc);
	}
	*out = env;
	return 0;
}

static int db_open(DB_ENV *env, const char *name, int notxn, DB **out)
{
	DB *db;
	int rc;
	if ((rc = db_create(&db, env, 0)) != 0)
		return fail("db_create", rc);
	if ((rc = db->set_pagesize(db, 4096)) != 0 ||
	    (rc = db->open(db, NULL, name, NULL, DB_BTREE, DB_CREATE | DB_THREAD | (notxn ? 0 : DB_AUTO_COMMIT),
			   0644)) != 0) {
		db->close(db, 0);
		return fail(name, rc);
	}
	*out = db;
	return 0;
}

static void dbt(DBT *d, void *p, u_int32_t len)
{
	memset(d, 0, sizeof *d);
	d->data = p;
	d->size = len;
	d->ulen = len;
	d->flags = DB_DBT_USERMEM;
}

static void store_close(bstore *st)
{
	for (int i = 0; i < NDB; i++)
		if (st->db[i])
			st->db[i]->close(st->db[i], 0);
	if (st->env)
		st->env->close(st->env, 0);
}

static void b_close(void *h)
{
	bdb *d = h;
	store_close(&d->st[0]);
	store_close(&d->st[1]);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

/* Creates store st in dir/name and loads accounts, tellers and branches
 * (in transactions of 1,000 records unless notxn). */
static int store_load(const tpcb_cfg *cfg, bstore *st, const char *name, int notxn)
{
	char home[4096];
	const char *sys = notxn ? "bdb (unprotected)" : "bdb";
	int rc;
	tpcb_path(home, sizeof home, cfg->dir, name);
	if ((rc = env_open(home, cfg->cache_bytes, notxn, &st->env)) != 0)
		return rc;
	for (int i = 0; i < NDB; i++)
		if ((rc = db_open(st->env, db_name[i], notxn, &st->db[i])) != 0)
			return rc;
	uint32_t n[3] = {cfg->accounts, cfg->tellers, cfg->branches};
	uint32_t per[3] = {cfg->accounts / cfg->branches, cfg->tellers / cfg->branches, 1};
	static const char *const what[3] = {"accounts", "tellers", "branches"};
	for (int k = 0; k < 3; k++) {
		DB_TXN *t = NULL;
		for (uint32_t i = 0; i < n[k]; i++) {
			unsigned char kb[8];
			tpcb_rec r;
			DBT key, val;
			if (i % 10000 == 0)
				tpcb_progress(sys, what[k], i, n[k]);
			if (!notxn && !t && (rc = st->env->txn_begin(st->env, NULL, &t, 0)) != 0)
				return fail("load", rc);
			tpcb_be64(kb, i);
			tpcb_rec_init(&r, i, i / per[k]);
			dbt(&key, kb, 8);
			dbt(&val, &r, TPCB_REC);
			if ((rc = st->db[k]->put(st->db[k], t, &key, &val, 0)) != 0) {
				if (t)
					t->abort(t);
				return fail("load", rc);
			}
			if (t && (i % 1000 == 999 || i == n[k] - 1)) {
				rc = t->commit(t, DB_TXN_NOSYNC);
				t = NULL;
				if (rc)
					return fail("load", rc);
			}
		}
		tpcb_progress(sys, what[k], n[k], n[k]);
	}
	if (notxn) {
		for (int i = 0; i < NDB; i++)
			if ((rc = st->db[i]->sync(st->db[i], 0)) != 0)
				return fail("load sync", rc);
	} else if ((rc = st->env->log_flush(st->env, NULL)) != 0 ||
		   (rc = st->env->txn_checkpoint(st->env, 0, 0, DB_FORCE)) != 0) {
		return fail("load checkpoint", rc);
	}
	return 0;
}

static int b_open(const tpcb_cfg *cfg, void **out)
{
	bdb *d = calloc(1, sizeof *d);
	if (!d)
		return ENOMEM;
	pthread_mutex_init(&d->mu, NULL);
	int rc = store_load(cfg, &d->st[0], "bdb", 0);
	if (!rc)
		rc = store_load(cfg, &d->st[1], "bdb-notxn", 1);
	if (rc) {
		b_close(d);
		return rc;
	}
	*out = d;
	return 0;
}

static int b_set_mode(void *h, int mode)
{
	bdb *d = h;
	d->mode = mode;
	d->commit_flags = mode == B_NOSYNC ? DB_TXN_NOSYNC : 0;
	return 0;
}

static int b_worker_open(void *h, void **w)
{
	*w = h;
	return 0;
}

static void b_worker_close(void *w) { (void)w; }

/* Adds delta to record id of db (read with DB_RMW where t locks). */
static int update(DB *db, DB_TXN *t, uint64_t id, int64_t delta)
{
	unsigned char kb[8];
	tpcb_rec r;
	DBT key, val;
	int rc;
	tpcb_be64(kb, id);
	dbt(&key, kb, 8);
	dbt(&val, &r, TPCB_REC);
	if ((rc = db->get(db, t, &key, &val, t ? DB_RMW : 0)) != 0)
		return rc;
	r.balance += delta;
	return db->put(db, t, &key, &val, 0);
}

/* The transaction's four changes in t (NULL: unprotected). */
static int body(bstore *st, DB_TXN *t, const tpcb_args *a)
{
	unsigned char kb[8];
	tpcb_hist h;
	DBT key, val;
	int rc;
	tpcb_be64(kb, a->hseq);
	tpcb_hist_init(&h, a);
	dbt(&key, kb, 8);
	dbt(&val, h.b, TPCB_HIST);
	if ((rc = update(st->db[D_ACC], t, a->account, a->delta)) != 0 ||
	    (rc = update(st->db[D_TEL], t, a->teller, a->delta)) != 0 ||
	    (rc = update(st->db[D_BR], t, a->branch, a->delta)) != 0)
		return rc;
	return st->db[D_HIST]->put(st->db[D_HIST], t, &key, &val, 0);
}

static int b_txn(void *w, const tpcb_args *a, uint64_t *retries)
{
	bdb *d = w;
	bstore *st = &d->st[0];
	int rc;
	if (d->mode == B_UNPROTECTED) {
		pthread_mutex_lock(&d->mu);
		rc = body(&d->st[1], NULL, a);
		pthread_mutex_unlock(&d->mu);
		return rc ? fail("unprotected transaction", rc) : 0;
	}
	for (;;) {
		DB_TXN *t;
		if ((rc = st->env->txn_begin(st->env, NULL, &t, 0)) != 0)
			return fail("txn_begin", rc);
		if ((rc = body(st, t, a)) != 0)
			t->abort(t);
		else if ((rc = t->commit(t, d->commit_flags)) == 0)
			return 0;
		if (rc != DB_LOCK_DEADLOCK && rc != DB_LOCK_NOTGRANTED)
			return fail("transaction", rc);
		(*retries)++;
	}
}

/* hist: 0 balances, 1 history deltas, 2 value bytes */
static int sum_db(DB *db, int hist, int64_t *sum, uint64_t *n)
{
	DBC *c;
	DBT key, val;
	int rc;
	*sum = 0;
	*n = 0;
	if ((rc = db->cursor(db, NULL, &c, 0)) != 0)
		return fail("cursor", rc);
	memset(&key, 0, sizeof key);
	memset(&val, 0, sizeof val);
	key.flags = val.flags = DB_DBT_MALLOC;
	while ((rc = c->get(c, &key, &val, DB_NEXT)) == 0) {
		if (hist == 2) {
			*sum += val.size;
		} else if (hist) {
			*sum += tpcb_hist_delta(val.data);
		} else {
			tpcb_rec r;
			memcpy(&r, val.data, TPCB_REC);
			*sum += r.balance;
		}
		(*n)++;
		free(key.data);
		free(val.data);
	}
	c->close(c);
	return rc == DB_NOTFOUND ? 0 : fail("scan", rc);
}

static int b_sums(void *h, tpcb_sums *s)
{
	bdb *d = h;
	DB **db = d->st[d->mode == B_UNPROTECTED].db;
	uint64_t n;
	int rc;
	if ((rc = sum_db(db[D_ACC], 0, &s->accounts, &n)) != 0 || (rc = sum_db(db[D_TEL], 0, &s->tellers, &n)) != 0 ||
	    (rc = sum_db(db[D_BR], 0, &s->branches, &n)) != 0 || (rc = sum_db(db[D_HIST], 1, &s->history, &s->history_n)) != 0)
		return rc;
	return 0;
}

static int b_bulk(const char *dir, uint32_t n, double *secs)
{
	char home[4096];
	DB_ENV *env;
	DB *db;
	DB_TXN *t;
	int rc;
	tpcb_path(home, sizeof home, dir, "bulk-bdb");
	if ((rc = env_open(home, 160u << 20, 0, &env)) != 0)
		return rc;
	if ((rc = db_open(env, "pairs.db", 0, &db)) != 0) {
		env->close(env, 0);
		return rc;
	}
	double a = bench_now();
	if ((rc = env->txn_begin(env, NULL, &t, 0)) != 0)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		unsigned char kb[4], vb[4];
		DBT key, val;
		tpcb_be32(kb, i);
		memcpy(vb, &i, 4);
		dbt(&key, kb, 4);
		dbt(&val, vb, 4);
		if ((rc = db->put(db, t, &key, &val, 0)) != 0) {
			t->abort(t);
			goto out;
		}
	}
	if ((rc = t->commit(t, 0)) != 0)
		goto out;
	*secs = bench_now() - a;
	int64_t sum;
	uint64_t cnt;
	if ((rc = sum_db(db, 2, &sum, &cnt)) == 0 && cnt != n) {
		fprintf(stderr, "tpcb: bdb: bulk check FAILED: %" PRIu64 " pairs of %" PRIu32 "\n", cnt, n);
		rc = -1;
	}
out:
	if (rc)
		fail("bulk", rc);
	db->close(db, 0);
	env->close(env, 0);
	tpcb_rmtree(home);
	return rc;
}

const tpcb_system tpcb_bdb = {
	.name = "bdb",
	.modes = modes,
	.nmodes = 3,
	.notes = DB_VERSION_STRING "; DB_BTREE, page locks, DB_RMW reads, 8 MiB log buffer, cache = the data",
	.open = b_open,
	.set_mode = b_set_mode,
	.worker_open = b_worker_open,
	.txn = b_txn,
	.worker_close = b_worker_close,
	.sums = b_sums,
	.close = b_close,
	.bulk = b_bulk,
};
