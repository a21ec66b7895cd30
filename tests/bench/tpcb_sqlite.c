/*
 * tpcb_sqlite -- TPC-B on SQLite 3 (libsqlite3-dev).
 *
 * Database dir/sqlite/tpcb.db in WAL mode, 4 KiB pages, the same cache as
 * every system per connection; one connection per thread.  Tables
 * account/teller/branch (id INTEGER PRIMARY KEY, branch, balance, filler:
 * 100-byte rows) and history (id INTEGER PRIMARY KEY = the sequence number,
 * account, teller, branch, delta, time, filler).  A transaction is BEGIN
 * IMMEDIATE (SQLite has one writer at a time), three UPDATE ... RETURNING
 * balance, one INSERT, COMMIT; SQLITE_BUSY after the 10 s busy timeout
 * rolls back and retries.
 *
 * Modes (PRAGMA synchronous on every connection)
 *   FULL    the WAL is synced at every commit
 *   NORMAL  the WAL is synced at checkpoints only
 *   OFF     never synced
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "benchutil.h"
#include "tpcb.h"

static const tpcb_mode modes[] = {
	{"FULL", TPCB_DURABLE, "durable at commit: WAL synced at every commit", 0},
	{"NORMAL", TPCB_NOSYNC, "WAL synced at checkpoints: atomic; recent commits lost at power loss, not at a process crash", 0},
	{"OFF", TPCB_NOSYNC, "never synced: atomic at a process crash; an OS crash or power loss may corrupt", 0},
};
static const char *const sync_pragma[] = {"PRAGMA synchronous=FULL", "PRAGMA synchronous=NORMAL",
					  "PRAGMA synchronous=OFF"};

typedef struct sdb {
	char path[4096];
	size_t cache_bytes;
	int mode;
} sdb;

enum { S_BEGIN, S_ACC, S_TEL, S_BR, S_HIST, S_COMMIT, S_ROLLBACK, NSTMT };
static const char *const stmt_sql[NSTMT] = {
	"BEGIN IMMEDIATE",
	"UPDATE account SET balance = balance + ?1 WHERE id = ?2 RETURNING balance",
	"UPDATE teller SET balance = balance + ?1 WHERE id = ?2 RETURNING balance",
	"UPDATE branch SET balance = balance + ?1 WHERE id = ?2 RETURNING balance",
	"INSERT INTO history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	"COMMIT",
	"ROLLBACK",
};

typedef struct sworker {
	sqlite3 *c;
	sqlite3_stmt *st[NSTMT];
} sworker;

static int fail(sqlite3 *c, const char *what, int rc)
{
	fprintf(stderr, "tpcb: sqlite: %s: %s\n", what, c ? sqlite3_errmsg(c) : sqlite3_errstr(rc));
	return rc ? rc : -1;
}

static int exec(sqlite3 *c, const char *sql)
{
	int rc = sqlite3_exec(c, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : fail(c, sql, rc);
}

static int s_connect(const char *path, size_t cache_bytes, int mode, sqlite3 **out)
{
	char sql[128];
	sqlite3 *c;
	int rc;
	if ((rc = sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL)) !=
	    SQLITE_OK) {
		fail(c, path, rc);
		sqlite3_close(c);
		return rc;
	}
	sqlite3_busy_timeout(c, 10000);
	snprintf(sql, sizeof sql, "PRAGMA cache_size=-%zu", cache_bytes >> 10);
	if ((rc = exec(c, "PRAGMA page_size=4096")) != 0 || (rc = exec(c, "PRAGMA journal_mode=WAL")) != 0 ||
	    (rc = exec(c, sql)) != 0 || (rc = exec(c, sync_pragma[mode])) != 0) {
		sqlite3_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

static int s_open(const tpcb_cfg *cfg, void **out)
{
	char dir[4096];
	sqlite3 *c = NULL;
	sqlite3_stmt *st = NULL;
	sdb *d = calloc(1, sizeof *d);
	int rc;
	if (!d)
		return ENOMEM;
	tpcb_path(dir, sizeof dir, cfg->dir, "sqlite");
	tpcb_rmtree(dir);
	if (mkdir(dir, 0755) != 0) {
		free(d);
		return fail(NULL, dir, errno);
	}
	tpcb_path(d->path, sizeof d->path, dir, "tpcb.db");
	d->cache_bytes = cfg->cache_bytes;
	if ((rc = s_connect(d->path, d->cache_bytes, 1, &c)) != 0)
		goto err;
	static const char *const table[3] = {"account", "teller", "branch"};
	uint32_t n[3] = {cfg->accounts, cfg->tellers, cfg->branches};
	uint32_t per[3] = {cfg->accounts / cfg->branches, cfg->tellers / cfg->branches, 1};
	static const char *const what[3] = {"accounts", "tellers", "branches"};
	if ((rc = exec(c, "CREATE TABLE account (id INTEGER PRIMARY KEY, branch INTEGER, balance INTEGER, filler BLOB);"
			  "CREATE TABLE teller (id INTEGER PRIMARY KEY, branch INTEGER, balance INTEGER, filler BLOB);"
			  "CREATE TABLE branch (id INTEGER PRIMARY KEY, branch INTEGER, balance INTEGER, filler BLOB);"
			  "CREATE TABLE history (id INTEGER PRIMARY KEY, account INTEGER, teller INTEGER, "
			  "branch INTEGER, delta INTEGER, time INTEGER, filler BLOB)")) != 0)
		goto err;
	for (int k = 0; k < 3; k++) {
		char sql[128];
		snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (?1, ?2, 0, ?3)", table[k]);
		if ((rc = sqlite3_prepare_v2(c, sql, -1, &st, NULL)) != SQLITE_OK || (rc = exec(c, "BEGIN")) != 0)
			goto err;
		for (uint32_t i = 0; i < n[k]; i++) {
			tpcb_rec r;
			if (i % 10000 == 0)
				tpcb_progress("sqlite", what[k], i, n[k]);
			tpcb_rec_init(&r, i, i / per[k]);
			sqlite3_bind_int64(st, 1, i);
			sqlite3_bind_int64(st, 2, i / per[k]);
			sqlite3_bind_blob(st, 3, r.filler, sizeof r.filler, SQLITE_STATIC);
			if ((rc = sqlite3_step(st)) != SQLITE_DONE)
				goto err;
			sqlite3_reset(st);
		}
		sqlite3_finalize(st);
		st = NULL;
		if ((rc = exec(c, "COMMIT")) != 0)
			goto err;
		tpcb_progress("sqlite", what[k], n[k], n[k]);
	}
	if ((rc = exec(c, "PRAGMA wal_checkpoint(TRUNCATE)")) != 0)
		goto err;
	sqlite3_close(c);
	*out = d;
	return 0;
err:
	if (c) {
		fail(c, "load", rc);
		sqlite3_finalize(st);
		sqlite3_close(c);
	}
	free(d);
	return rc ? rc : -1;
}

static int s_set_mode(void *h, int mode)
{
	((sdb *)h)->mode = mode;
	return 0;
}

static void s_worker_close(void *h)
{
	sworker *w = h;
	for (int i = 0; i < NSTMT; i++)
		sqlite3_finalize(w->st[i]);
	sqlite3_close(w->c);
	free(w);
}

static int s_worker_open(void *h, void **out)
{
	sdb *d = h;
	sworker *w = calloc(1, sizeof *w);
	int rc;
	if (!w)
		return ENOMEM;
	if ((rc = s_connect(d->path, d->cache_bytes, d->mode, &w->c)) != 0) {
		free(w);
		return rc;
	}
	for (int i = 0; i < NSTMT; i++)
		if ((rc = sqlite3_prepare_v2(w->c, stmt_sql[i], -1, &w->st[i], NULL)) != SQLITE_OK) {
			fail(w->c, stmt_sql[i], rc);
			s_worker_close(w);
			return rc;
		}
	*out = w;
	return 0;
}

/* Runs a statement to its end; SQLITE_DONE becomes 0. */
static int step(sqlite3_stmt *st)
{
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : rc;
}

static int update(sworker *w, int s, int64_t delta, uint32_t id)
{
	sqlite3_bind_int64(w->st[s], 1, delta);
	sqlite3_bind_int64(w->st[s], 2, id);
	return step(w->st[s]);
}

static int s_txn(void *h, const tpcb_args *a, uint64_t *retries)
{
	sworker *w = h;
	static const char filler[10] = "hhhhhhhhhh";
	int rc;
	for (;;) {
		sqlite3_stmt *hs = w->st[S_HIST];
		if ((rc = step(w->st[S_BEGIN])) == 0) {
			sqlite3_bind_int64(hs, 1, (sqlite3_int64)a->hseq);
			sqlite3_bind_int64(hs, 2, a->account);
			sqlite3_bind_int64(hs, 3, a->teller);
			sqlite3_bind_int64(hs, 4, a->branch);
			sqlite3_bind_int64(hs, 5, a->delta);
			sqlite3_bind_int64(hs, 6, (sqlite3_int64)a->time);
			sqlite3_bind_blob(hs, 7, filler, sizeof filler, SQLITE_STATIC);
			if ((rc = update(w, S_ACC, a->delta, a->account)) == 0 &&
			    (rc = update(w, S_TEL, a->delta, a->teller)) == 0 &&
			    (rc = update(w, S_BR, a->delta, a->branch)) == 0 && (rc = step(hs)) == 0 &&
			    (rc = step(w->st[S_COMMIT])) == 0)
				return 0;
			if (sqlite3_get_autocommit(w->c) == 0)
				(void)step(w->st[S_ROLLBACK]);
		}
		if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
			return fail(w->c, "transaction", rc);
		(*retries)++;
	}
}

static int sum_sql(sqlite3 *c, const char *sql, int64_t *out, uint64_t *n)
{
	sqlite3_stmt *st;
	int rc;
	if ((rc = sqlite3_prepare_v2(c, sql, -1, &st, NULL)) != SQLITE_OK)
		return fail(c, sql, rc);
	if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return fail(c, sql, rc);
	}
	*out = sqlite3_column_int64(st, 0);
	if (n)
		*n = (uint64_t)sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	return 0;
}

static int s_sums(void *h, tpcb_sums *s)
{
	sdb *d = h;
	sqlite3 *c;
	int rc;
	if ((rc = s_connect(d->path, 1 << 20, d->mode, &c)) != 0)
		return rc;
	if ((rc = sum_sql(c, "SELECT sum(balance), 0 FROM account", &s->accounts, NULL)) == 0 &&
	    (rc = sum_sql(c, "SELECT sum(balance), 0 FROM teller", &s->tellers, NULL)) == 0 &&
	    (rc = sum_sql(c, "SELECT sum(balance), 0 FROM branch", &s->branches, NULL)) == 0)
		rc = sum_sql(c, "SELECT sum(delta), count(*) FROM history", &s->history, &s->history_n);
	sqlite3_close(c);
	return rc;
}

static void s_close(void *h) { free(h); }

static int s_bulk(const char *dir, uint32_t n, double *secs)
{
	char sub[4096], path[4096];
	sqlite3 *c;
	sqlite3_stmt *st = NULL;
	int rc;
	tpcb_path(sub, sizeof sub, dir, "bulk-sqlite");
	tpcb_rmtree(sub);
	if (mkdir(sub, 0755) != 0)
		return fail(NULL, sub, errno);
	tpcb_path(path, sizeof path, sub, "pairs.db");
	if ((rc = s_connect(path, 160u << 20, 0, &c)) != 0)
		return rc;
	if ((rc = exec(c, "CREATE TABLE pairs (k INTEGER PRIMARY KEY, v INTEGER)")) != 0 ||
	    (rc = sqlite3_prepare_v2(c, "INSERT INTO pairs VALUES (?1, ?2)", -1, &st, NULL)) != SQLITE_OK)
		goto out;
	double a = bench_now();
	if ((rc = exec(c, "BEGIN")) != 0)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		sqlite3_bind_int64(st, 2, i);
		if ((rc = step(st)) != 0)
			goto out;
	}
	if ((rc = exec(c, "COMMIT")) != 0)
		goto out;
	*secs = bench_now() - a;
	int64_t sum;
	uint64_t cnt;
	if ((rc = sum_sql(c, "SELECT sum(k = v), count(*) FROM pairs", &sum, &cnt)) == 0 && (sum != n || cnt != n)) {
		fprintf(stderr, "tpcb: sqlite: bulk check FAILED: %" PRIu64 " pairs of %" PRIu32 "\n", cnt, n);
		rc = -1;
	}
out:
	if (rc)
		fail(c, "bulk", rc);
	sqlite3_finalize(st);
	sqlite3_close(c);
	tpcb_rmtree(sub);
	return rc;
}

const tpcb_system tpcb_sqlite = {
	.name = "sqlite",
	.modes = modes,
	.nmodes = 3,
	.notes = "SQLite " SQLITE_VERSION ", WAL, connection per thread, BEGIN IMMEDIATE, cache = the data",
	.open = s_open,
	.set_mode = s_set_mode,
	.worker_open = s_worker_open,
	.txn = s_txn,
	.worker_close = s_worker_close,
	.sums = s_sums,
	.close = s_close,
	.bulk = s_bulk,
};
