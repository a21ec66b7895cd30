/*
 * test_btree -- unit tests of the B-tree and the record API (tp_tree_*,
 * tp_get/put/del, cursors, tp_verify).
 *
 * random_ops: seeded random sequences of transactions against an oracle
 *   kept in SQLite (an in-memory table whose BLOB order is the bytes
 *   comparator's; u64 keys are stored big-endian so they sort as numbers).
 *   Each transaction does 1..60 operations: inserts and overwrites (keys of
 *   1..max_key bytes, values of 0..3 pages, so overflow chains, with
 *   TP_NOOVERWRITE and TP_APPEND now and then), deletes of present and
 *   absent keys, point reads (also into a too-small buffer), and cursor
 *   scans from random seek points in every mode (GE GT LE LT FIRST LAST),
 *   stepping forward and backward.  Reads inside a transaction see its own
 *   writes.  Three in four transactions commit, the rest abort (SQLite
 *   rolls back to a savepoint): afterwards the whole tree, forward and
 *   backward, equals the oracle, tp_verify(env, 0, ...) passes (order,
 *   fences, free space, overflow chains, and no page allocated outside a
 *   tree -- so an aborted transaction's overflow pages were freed), and no
 *   page is pinned.  Every 16th transaction the store is closed and opened
 *   (cleanly, or as a crash for protected trees).  Both comparators, 1 KiB
 *   and 4 KiB pages, protected and unprotected (TP_TREE_NOTXN) trees.
 *
 * Then targeted tests: seek modes on a small tree; in-order bulk loading
 * (TP_APPEND and plain ascending keys, both comparators) leaves leaves more
 * than 90% full (bt_verify's accounting, over the leaf level) and all
 * pages more than 85%; trees of height >= 3 (splits at every level) with
 * 1 KiB pages, an aborted insert of 400 keys, emptied and refilled;
 * merges at every level: deleting everything (ascending, descending or
 * random order, also after a rollback) collapses the tree to its root
 * leaf and frees every page; the rollback of a lock-timeout victim that
 * must split a leaf; tp_tree_drop frees every page; the catalog (several
 * trees, reopen by name, ENOENT, also in a store without trees);
 * TP_NOOVERWRITE (EEXIST, no overflow page leaked); key length limits;
 * partial reads; protected trees refuse changes without a transaction.
 *
 * Every failure message names the seed.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bt.h"
#include "bt_int.h"
#include "bt_model.h"
#include "op.h"
#include "io.h"
#include "store_util.h"
#include "tp.h"
#include "tp_test.h"
#include "tp_int.h"
#include "workload.h"

#define MAXV (3 * 4096 + 64)

static char tdir[256], sdir[512];

static void setup(void)
{
	cr_assert_eq(wl_tmpdir("btree", tdir, sizeof tdir), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
}

static void teardown(void) { wl_rmtree(tdir); }

static tp_env *open_store(uint32_t psize, size_t cache, int create)
{
	tp_options o;
	tp_env *env;
	tp_options_init(&o);
	o.quiet = 1;
	o.page_size = psize;
	o.seg_size = 1u << 20;
	o.cache_pages = cache;
	o.ckpt_log_bytes = 512u << 10;
	o.ckpt_ms = 0;
	int rc;
	if (create)
		cr_assert_eq(rc = tp_mkfs(sdir, &o), 0, "tp_mkfs: %d %s", rc, tp_errmsg());
	cr_assert_eq(rc = tp_open(sdir, &o, &env), 0, "tp_open: %d %s", rc, tp_errmsg());
	return env;
}

/* ---- white-box access: the bt_tree behind a named tree ---- */

static bt_tree *open_bt(tp_env *env, const char *name)
{
	unsigned char b[8], v[12];
	bt_tree *cat, *bt;
	size_t vl;
	int rc;
	cr_assert_eq(tp_page_read(env, 0, 0, b, 8), 0);
	cr_assert_neq(util_get64(b), 0, "no catalog");
	cr_assert_eq(bt_open(env->tm, util_get64(b), BT_CMP_BYTES, &cat), 0);
	rc = bt_get(cat, NULL, name, strlen(name), v, sizeof v, &vl);
	bt_close(cat);
	cr_assert_eq(rc, 0, "tree %s not in the catalog: %d", name, rc);
	cr_assert_eq(vl, 12);
	cr_assert_eq(bt_open(env->tm, util_get64(v), (util_get32(v + 8) & TP_TREE_U64) ? BT_CMP_U64 : BT_CMP_BYTES, &bt),
		     0);
	return bt;
}

static bt_verify_result verify_tree(tp_env *env, const char *name)
{
	bt_verify_result r;
	bt_tree *bt = open_bt(env, name);
	int rc = bt_verify(bt, NULL, NULL, &r);
	bt_close(bt);
	cr_assert_eq(rc, 0, "bt_verify %s: %d %s", name, rc, tp_errmsg());
	return r;
}

/* Fill of the leaf level: used bytes / usable bytes over all leaves, the
 * same accounting as bt_verify's bytes_used and bytes_free. */
static double leaf_fill(tp_env *env, const char *name, uint64_t *nleaves)
{
	bt_tree *bt = open_bt(env, name);
	buf_pool *bp = txn_mgr_pool(env->tm);
	buf_page *pg;
	uint64_t used = 0, total = 0, n = 0;
	cr_assert_eq(bt_descend(bt, "", 0, 0, 0, NULL, &pg), 0);
	for (;;) {
		const unsigned char *p = buf_data(pg);
		size_t fr = bt_free_space(p), usable = env->psize - BT_HDR;
		used += usable - fr;
		total += usable;
		n++;
		uint64_t r = bt_right(p);
		buf_put(bp, pg);
		if (!r)
			break;
		cr_assert_eq(buf_get(bp, r, BUF_S, &pg), 0);
	}
	bt_close(bt);
	*nleaves = n;
	return (double)used / (double)total;
}

static uint64_t allocated_pages(tp_env *env)
{
	char path[600];
	struct stat st;
	uint64_t n = 0;
	snprintf(path, sizeof path, "%s/data", sdir);
	cr_assert_eq(stat(path, &st), 0);
	uint64_t np = (uint64_t)st.st_size / env->psize + 64;
	for (uint64_t p = 1; p < np; p++) {
		int a;
		if (tp_page_allocated(env, p, &a) != 0)
			break;
		n += a != 0;
	}
	return n;
}

static void verify_all(tp_env *env, const char *what)
{
	int rc = tp_verify(env, 0, NULL);
	cr_assert_eq(rc, 0, "%s: tp_verify: %d %s", what, rc, tp_errmsg());
	cr_assert_eq(tp_debug_pinned(env), 0, "%s: pages left pinned", what);
}

/* ---- the SQLite oracle ---- */

typedef struct oracle {
	sqlite3 *db;
	int u64;
	sqlite3_stmt *put, *del, *get, *seek[6], *next, *prev, *count, *nth, *all;
} oracle;

/* u64 keys are stored big-endian: BLOB order is then numeric order. */
static void okey(const oracle *o, const void *k, size_t kl, unsigned char *out, size_t *ol)
{
	const unsigned char *p = k;
	if (o->u64 && kl == 8)
		for (int i = 0; i < 8; i++)
			out[i] = p[7 - i];
	else
		memcpy(out, p, kl);
	*ol = kl;
}

static void ostep_ck(oracle *o, int rc, const char *what)
{
	cr_assert(rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW, "sqlite %s: %s", what, sqlite3_errmsg(o->db));
}

static sqlite3_stmt *prep(oracle *o, const char *sql)
{
	sqlite3_stmt *s;
	ostep_ck(o, sqlite3_prepare_v2(o->db, sql, -1, &s, NULL), sql);
	return s;
}

static void oexec(oracle *o, const char *sql) { ostep_ck(o, sqlite3_exec(o->db, sql, NULL, NULL, NULL), sql); }

static void oracle_open(oracle *o, int u64)
{
	memset(o, 0, sizeof *o);
	o->u64 = u64;
	cr_assert_eq(sqlite3_open(":memory:", &o->db), SQLITE_OK);
	oexec(o, "CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID");
	o->put = prep(o, "INSERT OR REPLACE INTO kv VALUES(?1, ?2)");
	o->del = prep(o, "DELETE FROM kv WHERE k = ?1");
	o->get = prep(o, "SELECT k, v FROM kv WHERE k = ?1");
	o->seek[TP_SEEK_GE] = prep(o, "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT 1");
	o->seek[TP_SEEK_GT] = prep(o, "SELECT k, v FROM kv WHERE k > ?1 ORDER BY k LIMIT 1");
	o->seek[TP_SEEK_LE] = prep(o, "SELECT k, v FROM kv WHERE k <= ?1 ORDER BY k DESC LIMIT 1");
	o->seek[TP_SEEK_LT] = prep(o, "SELECT k, v FROM kv WHERE k < ?1 ORDER BY k DESC LIMIT 1");
	o->seek[TP_FIRST] = prep(o, "SELECT k, v FROM kv ORDER BY k LIMIT 1");
	o->seek[TP_LAST] = prep(o, "SELECT k, v FROM kv ORDER BY k DESC LIMIT 1");
	o->count = prep(o, "SELECT count(*) FROM kv");
	o->nth = prep(o, "SELECT k, v FROM kv ORDER BY k LIMIT 1 OFFSET ?1");
	o->all = prep(o, "SELECT k, v FROM kv ORDER BY k");
}

static void oracle_close(oracle *o)
{
	sqlite3_stmt *all[] = {o->put, o->del, o->get, o->count, o->nth, o->all};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		sqlite3_finalize(all[i]);
	for (int i = 0; i < 6; i++)
		sqlite3_finalize(o->seek[i]);
	sqlite3_close(o->db);
}

static void bindk(oracle *o, sqlite3_stmt *s, int i, const void *k, size_t kl)
{
	unsigned char b[LOCK_KEY_MAX];
	size_t bl;
	okey(o, k, kl, b, &bl);
	ostep_ck(o, sqlite3_bind_blob(s, i, bl ? (const void *)b : "", (int)bl, SQLITE_TRANSIENT), "bind");
}

static void oput(oracle *o, const void *k, size_t kl, const void *v, size_t vl)
{
	bindk(o, o->put, 1, k, kl);
	ostep_ck(o, sqlite3_bind_blob(o->put, 2, vl ? v : "", (int)vl, SQLITE_TRANSIENT), "bind");
	ostep_ck(o, sqlite3_step(o->put), "put");
	sqlite3_reset(o->put);
}

static int odel(oracle *o, const void *k, size_t kl)
{
	bindk(o, o->del, 1, k, kl);
	ostep_ck(o, sqlite3_step(o->del), "del");
	sqlite3_reset(o->del);
	return sqlite3_changes(o->db) > 0;
}

/* A row of s into the caller's buffers; 1 if there was one. */
static int orow(oracle *o, sqlite3_stmt *s, unsigned char *k, size_t *kl, unsigned char *v, size_t *vl)
{
	int rc = sqlite3_step(s);
	ostep_ck(o, rc, "step");
	if (rc != SQLITE_ROW) {
		sqlite3_reset(s);
		return 0;
	}
	size_t bl = (size_t)sqlite3_column_bytes(s, 0);
	const unsigned char *b = sqlite3_column_blob(s, 0);
	if (k) {
		if (o->u64 && bl == 8)
			for (int i = 0; i < 8; i++)
				k[i] = b[7 - i];
		else
			memcpy(k, b, bl);
		*kl = bl;
	}
	if (v) {
		*vl = (size_t)sqlite3_column_bytes(s, 1);
		if (*vl)
			memcpy(v, sqlite3_column_blob(s, 1), *vl);
	}
	sqlite3_reset(s);
	return 1;
}

static int oget(oracle *o, const void *k, size_t kl, unsigned char *v, size_t *vl)
{
	bindk(o, o->get, 1, k, kl);
	return orow(o, o->get, NULL, NULL, v, vl);
}

static int oseek(oracle *o, int how, const void *k, size_t kl, unsigned char *ok, size_t *okl, unsigned char *ov,
		 size_t *ovl)
{
	sqlite3_stmt *s = o->seek[how];
	if (how != TP_FIRST && how != TP_LAST)
		bindk(o, s, 1, k, kl);
	return orow(o, s, ok, okl, ov, ovl);
}

static int64_t ocount(oracle *o)
{
	ostep_ck(o, sqlite3_step(o->count), "count");
	int64_t n = sqlite3_column_int64(o->count, 0);
	sqlite3_reset(o->count);
	return n;
}

static int onth(oracle *o, int64_t i, unsigned char *k, size_t *kl)
{
	ostep_ck(o, sqlite3_bind_int64(o->nth, 1, i), "bind");
	return orow(o, o->nth, k, kl, NULL, NULL);
}

static void oload(oracle *o, btm *m)
{
	static unsigned char k[LOCK_KEY_MAX], v[MAXV];
	size_t kl, vl;
	btm_clear(m);
	for (;;) {
		int rc = sqlite3_step(o->all);
		ostep_ck(o, rc, "all");
		if (rc != SQLITE_ROW)
			break;
		kl = (size_t)sqlite3_column_bytes(o->all, 0);
		const unsigned char *b = sqlite3_column_blob(o->all, 0);
		if (o->u64 && kl == 8)
			for (int i = 0; i < 8; i++)
				k[i] = b[7 - i];
		else
			memcpy(k, b, kl);
		vl = (size_t)sqlite3_column_bytes(o->all, 1);
		if (vl)
			memcpy(v, sqlite3_column_blob(o->all, 1), vl);
		cr_assert_eq(btm_put(m, k, kl, v, vl), 0);
	}
	sqlite3_reset(o->all);
}

/* ---- random keys and values ---- */

static size_t gen_key(uint64_t *s, int u64, size_t maxk, unsigned char *k)
{
	if (u64) {
		uint64_t r = btm_rand(s) % 10, x;
		if (r < 4)
			x = btm_rand(s) % 3000;
		else if (r < 8)
			x = btm_rand(s);
		else if (r < 9)
			x = UINT64_MAX - btm_rand(s) % 100;
		else
			x = (uint64_t[]){0, 1, UINT64_MAX, 255, 256}[btm_rand(s) % 5];
		util_put64(k, x);
		return 8;
	}
	uint64_t r = btm_rand(s) % 20;
	size_t len = r < 8 ? 1 + btm_rand(s) % 8 : r < 16 ? 9 + btm_rand(s) % 56 : r < 19 ? 65 + btm_rand(s) % (maxk - 64)
										     : maxk;
	if (len > maxk)
		len = maxk;
	static const unsigned char alpha[] = {0x00, 0x01, 'a', 'b', 0x7f, 0xfe, 0xff};
	int small = btm_rand(s) % 2;
	for (size_t i = 0; i < len; i++)
		k[i] = small ? alpha[btm_rand(s) % sizeof alpha] : (unsigned char)btm_rand(s);
	return len;
}

static size_t gen_vlen(uint64_t *s, uint32_t psize)
{
	uint64_t r = btm_rand(s) % 100;
	if (r < 35)
		return btm_rand(s) % 17;
	if (r < 65)
		return 17 + btm_rand(s) % 184;
	if (r < 85)
		return 200 + btm_rand(s) % (psize / 4);
	return btm_rand(s) % (3 * (size_t)psize + 1);
}

/* ---- random_ops ---- */

typedef struct rparam {
	uint64_t seed;
	int u64;
	uint32_t psize;
	int notxn;
	int ntx;
} rparam;

#define CK(p, cond, ...)                                                                                               \
	cr_assert((cond), "seed %" PRIu64 " (%s, %u-byte pages%s): %s", (p)->seed, (p)->u64 ? "u64" : "bytes",         \
		  (p)->psize, (p)->notxn ? ", unprotected" : "", msgf(__VA_ARGS__))

static char msgbuf[2048];
static const char *msgf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *msgf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msgbuf, sizeof msgbuf, fmt, ap);
	va_end(ap);
	return msgbuf;
}

/* Picks a key: present (when any and `present`), or a fresh random one. */
static size_t pick_key(oracle *o, uint64_t *s, int present, size_t maxk, unsigned char *k)
{
	int64_t n;
	size_t kl;
	if (present && (n = ocount(o)) > 0 && onth(o, (int64_t)(btm_rand(s) % (uint64_t)n), k, &kl))
		return kl;
	return gen_key(s, o->u64, maxk, k);
}

/* A seek key near present ones: present, random, or a present one nudged. */
static size_t seek_key(oracle *o, uint64_t *s, size_t maxk, unsigned char *k)
{
	uint64_t r = btm_rand(s) % 4;
	size_t kl = pick_key(o, s, r != 1, maxk, k);
	if (r == 3) {
		if (o->u64) {
			uint64_t x = util_get64(k);
			util_put64(k, btm_rand(s) % 2 ? x + 1 : x - 1);
		} else if (btm_rand(s) % 2 && kl < maxk) {
			k[kl++] = 0;
		} else if (kl > 1) {
			kl--;
		} else {
			k[0] ^= 1;
		}
	}
	return kl;
}

static void check_pos(const rparam *p, tp_cursor *c, int rc, int ofound, const unsigned char *ok, size_t okl,
		      const unsigned char *ov, size_t ovl, const char *what)
{
	char a[96];
	if (!ofound) {
		const void *k = NULL;
		size_t kl = 0;
		if (rc == 0)
			tp_cursor_get(c, &k, &kl, NULL, NULL);
		CK(p, rc == TP_ENOTFOUND, "%s: expected the end, got rc %d (%s)", what, rc,
		   rc == 0 ? btm_keystr(k, kl, a, sizeof a) : tp_errmsg());
		CK(p, tp_cursor_get(c, NULL, NULL, NULL, NULL) == TP_ENOTFOUND, "%s: cursor at the end still positioned",
		   what);
		return;
	}
	CK(p, rc == 0, "%s: expected %s, got rc %d (%s)", what, btm_keystr(ok, okl, a, sizeof a), rc, tp_errmsg());
	const void *k, *v;
	size_t kl, vl;
	CK(p, tp_cursor_get(c, &k, &kl, &v, &vl) == 0, "%s: tp_cursor_get", what);
	char b[96];
	CK(p, kl == okl && memcmp(k, ok, kl) == 0, "%s: expected key %s, got %s", what, btm_keystr(ok, okl, a, sizeof a),
	   btm_keystr(k, kl, b, sizeof b));
	CK(p, vl == ovl && (vl == 0 || memcmp(v, ov, vl) == 0), "%s: key %s: value of %zu bytes, expected %zu", what,
	   btm_keystr(ok, okl, a, sizeof a), vl, ovl);
}

static void do_scan(const rparam *p, oracle *o, tp_txn *t, tp_tree *tr, uint64_t *s, size_t maxk)
{
	static unsigned char k[LOCK_KEY_MAX], ok[LOCK_KEY_MAX], ov[MAXV];
	size_t kl = 0, okl = 0, ovl = 0;
	static const char *names[] = {"GE", "GT", "LE", "LT", "FIRST", "LAST"};
	tp_cursor *c;
	int how = (int)(btm_rand(s) % 6);
	if (how != TP_FIRST && how != TP_LAST)
		kl = seek_key(o, s, maxk, k);
	CK(p, tp_cursor_open(t, tr, &c) == 0, "tp_cursor_open: %s", tp_errmsg());
	int rc = tp_cursor_seek(c, k, kl, how);
	int of = oseek(o, how, k, kl, ok, &okl, ov, &ovl);
	char what[200], a[96];
	snprintf(what, sizeof what, "seek %s %s", names[how], btm_keystr(k, kl, a, sizeof a));
	check_pos(p, c, rc, of, ok, okl, ov, ovl, what);
	int steps = (int)(btm_rand(s) % 30), fwd = how == TP_SEEK_GE || how == TP_SEEK_GT || how == TP_FIRST;
	for (int i = 0; i < steps && of; i++) {
		if (btm_rand(s) % 4 == 0)
			fwd = !fwd;
		memcpy(k, ok, okl);
		kl = okl;
		rc = fwd ? tp_cursor_next(c) : tp_cursor_prev(c);
		of = oseek(o, fwd ? TP_SEEK_GT : TP_SEEK_LT, k, kl, ok, &okl, ov, &ovl);
		snprintf(what, sizeof what, "seek %s then step %d (%s) from %s", names[how], i + 1, fwd ? "next" : "prev",
			 btm_keystr(k, kl, a, sizeof a));
		check_pos(p, c, rc, of, ok, okl, ov, ovl, what);
	}
	if (!of) /* a cursor past the end stays there */
		CK(p, tp_cursor_next(c) == TP_ENOTFOUND && tp_cursor_prev(c) == TP_ENOTFOUND, "steps after the end");
	tp_cursor_close(c);
}

static void compare_all(const rparam *p, oracle *o, tp_tree *tr, const char *when, int backward)
{
	btm want, got;
	char why[512];
	btm_init(&want, p->u64);
	btm_init(&got, p->u64);
	oload(o, &want);
	int rc = btm_load(&got, NULL, tr, why, sizeof why);
	CK(p, rc == 0, "%s: loading the tree: %s", when, why);
	CK(p, btm_equal(&want, &got, why, sizeof why), "%s: tree differs from the oracle: %s", when, why);
	if (backward) {
		rc = btm_check_backward(&want, NULL, tr, why, sizeof why);
		CK(p, rc == 0, "%s: %s", when, why);
	}
	btm_free(&want);
	btm_free(&got);
}

static void run_random(const rparam *p)
{
	static unsigned char k[LOCK_KEY_MAX], v[MAXV], g[MAXV + 1], ov[MAXV];
	uint64_t s = p->seed * 0x1000193 + (uint64_t)p->u64 * 7 + p->psize + (uint64_t)p->notxn * 13;
	int tflags = TP_TREE_CREATE | (p->u64 ? TP_TREE_U64 : 0) | (p->notxn ? TP_TREE_NOTXN : 0);
	tp_env *env = open_store(p->psize, 48, 1);
	tp_tree *tr;
	oracle o;
	int rc;
	unsigned commits = 0, aborts = 0, overflow_puts = 0, scans = 0, patches = 0;

	oracle_open(&o, p->u64);
	CK(p, tp_tree_open(env, "r", tflags, &tr) == 0, "tp_tree_open: %s", tp_errmsg());
	size_t maxk = tp_tree_max_key(tr);
	CK(p, maxk >= 16 && maxk < LOCK_KEY_MAX, "max key %zu", maxk);

	for (int x = 0; x < p->ntx; x++) {
		tp_txn *t = NULL;
		if (!p->notxn) {
			CK(p, tp_begin(env, &t) == 0, "tp_begin");
			oexec(&o, "SAVEPOINT tx");
		}
		int nops = 1 + (int)(btm_rand(&s) % 60);
		for (int i = 0; i < nops; i++) {
			uint64_t r = btm_rand(&s) % 100;
			size_t kl, vl, gl;
			char a[96];
			if (r < 45) { /* put */
				kl = pick_key(&o, &s, btm_rand(&s) % 5 < 2, maxk, k);
				size_t pl = 0;
				if (oget(&o, k, kl, ov, &pl) && pl > p->psize / 4 && btm_rand(&s) % 3 == 0) {
					/* TP_PATCH: the same length, a few runs of bytes changed */
					memcpy(v, ov, pl);
					for (int j = 0, runs = 1 + (int)(btm_rand(&s) % 3); j < runs; j++) {
						size_t at = btm_rand(&s) % pl, n = 1 + btm_rand(&s) % 80;
						for (size_t b = at; b < at + n && b < pl; b++)
							v[b] ^= (unsigned char)(1 + btm_rand(&s) % 255);
					}
					rc = tp_put(t, tr, k, kl, v, pl, TP_PATCH);
					CK(p, rc == 0, "tx %d op %d: patch of %s (%zu bytes): %d %s", x, i,
					   btm_keystr(k, kl, a, sizeof a), pl, rc, tp_errmsg());
					oput(&o, k, kl, v, pl);
					patches++;
					continue;
				}
				vl = gen_vlen(&s, p->psize);
				btm_fill(v, vl, btm_rand(&s));
				int flags = btm_rand(&s) % 10 == 0 ? TP_NOOVERWRITE : 0;
				if (btm_rand(&s) % 20 == 0)
					flags |= TP_APPEND; /* only a hint: any key must still work */
				int had = oget(&o, k, kl, ov, &gl);
				rc = tp_put(t, tr, k, kl, v, vl, flags);
				if ((flags & TP_NOOVERWRITE) && had) {
					CK(p, rc == EEXIST, "tx %d op %d: NOOVERWRITE put of present %s: rc %d, expected EEXIST", x,
					   i, btm_keystr(k, kl, a, sizeof a), rc);
				} else {
					CK(p, rc == 0, "tx %d op %d: put %s (%zu bytes): %d %s", x, i,
					   btm_keystr(k, kl, a, sizeof a), vl, rc, tp_errmsg());
					oput(&o, k, kl, v, vl);
					overflow_puts += vl > p->psize / 4;
				}
			} else if (r < 65) { /* delete */
				kl = pick_key(&o, &s, btm_rand(&s) % 10 < 7, maxk, k);
				rc = tp_del(t, tr, k, kl);
				int had = odel(&o, k, kl);
				CK(p, rc == (had ? 0 : TP_ENOTFOUND), "tx %d op %d: del %s: rc %d, the key was %s", x, i,
				   btm_keystr(k, kl, a, sizeof a), rc, had ? "present" : "absent");
			} else if (r < 85) { /* get */
				kl = pick_key(&o, &s, btm_rand(&s) % 10 < 7, maxk, k);
				vl = 0;
				int had = oget(&o, k, kl, ov, &vl);
				size_t cap = btm_rand(&s) % 4 == 0 ? btm_rand(&s) % (vl + 1) : MAXV;
				memset(g, 0xa5, cap + 1);
				gl = 7777;
				rc = tp_get(t, tr, k, kl, g, cap, &gl);
				if (!had) {
					CK(p, rc == TP_ENOTFOUND, "tx %d op %d: get absent %s: rc %d", x, i,
					   btm_keystr(k, kl, a, sizeof a), rc);
				} else {
					size_t n = cap < vl ? cap : vl;
					CK(p, rc == 0 && gl == vl, "tx %d op %d: get %s: rc %d, length %zu, expected %zu", x, i,
					   btm_keystr(k, kl, a, sizeof a), rc, gl, vl);
					CK(p, n == 0 || memcmp(g, ov, n) == 0, "tx %d op %d: get %s: wrong bytes", x, i,
					   btm_keystr(k, kl, a, sizeof a));
					CK(p, g[n] == 0xa5, "tx %d op %d: get %s wrote past cap %zu", x, i,
					   btm_keystr(k, kl, a, sizeof a), cap);
				}
			} else {
				do_scan(p, &o, t, tr, &s, maxk);
				scans++;
			}
		}
		if (!p->notxn) {
			if (btm_rand(&s) % 4 == 0) {
				CK(p, tp_abort(t) == 0, "tx %d: tp_abort: %s", x, tp_errmsg());
				oexec(&o, "ROLLBACK TO tx");
				oexec(&o, "RELEASE tx");
				aborts++;
			} else {
				CK(p, (rc = tp_commit(t, 0)) == 0, "tx %d: tp_commit: %d %s", x, rc, tp_errmsg());
				oexec(&o, "RELEASE tx");
				commits++;
			}
		}
		char when[64];
		snprintf(when, sizeof when, "after transaction %d", x);
		rc = tp_verify(env, 0, NULL);
		CK(p, rc == 0, "%s: tp_verify: %d %s", when, rc, tp_errmsg());
		CK(p, tp_debug_pinned(env) == 0, "%s: pages pinned", when);
		compare_all(p, &o, tr, when, x % 8 == 7);
		if (x % 16 == 15) { /* close and open: cleanly, or as a crash (protected trees) */
			tp_tree_close(tr);
			if (!p->notxn && x % 32 == 31)
				tp_crash_close(env);
			else
				CK(p, tp_close(env) == 0, "tp_close: %s", tp_errmsg());
			env = open_store(p->psize, 48, 0);
			CK(p, tp_tree_open(env, "r", p->u64 ? TP_TREE_U64 : 0, &tr) == 0, "reopen tree: %s", tp_errmsg());
			snprintf(when, sizeof when, "after reopening at transaction %d", x);
			verify_all(env, when);
			compare_all(p, &o, tr, when, 1);
		}
	}
	bt_verify_result vr = verify_tree(env, "r");
	cr_log_info("random seed %" PRIu64 " %s %u%s: %u commits, %u aborts, %u overflow puts, %u patches, %u scans; %" PRIu64
		    " records, %" PRIu64 " levels, %" PRIu64 " pages (%" PRIu64 " overflow)",
		    p->seed, p->u64 ? "u64" : "bytes", p->psize, p->notxn ? " notxn" : "", commits, aborts, overflow_puts,
		    patches, scans, vr.records, vr.levels, vr.pages, vr.overflow_pages);
	CK(p, overflow_puts > 0, "no overflow value was written");
	CK(p, patches > 0, "no value was patched (TP_PATCH)");
	tp_tree_close(tr);
	CK(p, tp_close(env) == 0, "tp_close: %s", tp_errmsg());
	oracle_close(&o);
}

ParameterizedTestParameters(btree, random_ops)
{
	static const uint64_t seeds[] = {1, 2, 3, 4, 5, 6};
	size_t n = 0, cap = 64;
	rparam *v = cr_malloc(cap * sizeof *v);
	for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
		for (int u = 0; u < 2; u++)
			v[n++] = (rparam){seeds[i], u, i % 2 ? 4096 : 1024, 0, 120};
	/* unprotected trees */
	for (int i = 0; i < 4; i++)
		v[n++] = (rparam){100 + (uint64_t)i, i % 2, i < 2 ? 1024 : 4096, 1, 80};
	return cr_make_param_array(rparam, v, n, NULL);
}

ParameterizedTest(rparam *p, btree, random_ops, .init = setup, .fini = teardown, .timeout = 300) { run_random(p); }

/* ---- seek modes on a small tree ---- */

Test(btree, seek_modes, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env = open_store(4096, 0, 1);
	tp_tree *tr;
	tp_cursor *c;
	tp_txn *t;
	const void *k;
	size_t kl;
	cr_assert_eq(tp_tree_open(env, "s", TP_TREE_CREATE, &tr), 0);

	/* an empty tree: every mode finds nothing */
	cr_assert_eq(tp_cursor_open(NULL, tr, &c), 0);
	for (int how = 0; how < 6; how++)
		cr_assert_eq(tp_cursor_seek(c, "m", 1, how), TP_ENOTFOUND, "mode %d on an empty tree", how);
	cr_assert_eq(tp_cursor_next(c), TP_ENOTFOUND);
	cr_assert_eq(tp_cursor_prev(c), TP_ENOTFOUND);
	tp_cursor_close(c);

	cr_assert_eq(tp_begin(env, &t), 0);
	const char *keys[] = {"b", "d", "dd", "f"};
	for (int i = 0; i < 4; i++)
		cr_assert_eq(tp_put(t, tr, keys[i], strlen(keys[i]), keys[i], 1, 0), 0);
	cr_assert_eq(tp_commit(t, 0), 0);

	struct {
		const char *key;
		int how;
		const char *want; /* NULL: not found */
	} cases[] = {
		{"a", TP_SEEK_GE, "b"},  {"b", TP_SEEK_GE, "b"},  {"c", TP_SEEK_GE, "d"},  {"d", TP_SEEK_GE, "d"},
		{"d", TP_SEEK_GT, "dd"}, {"da", TP_SEEK_GE, "dd"}, {"g", TP_SEEK_GE, NULL}, {"f", TP_SEEK_GT, NULL},
		{"a", TP_SEEK_LE, NULL}, {"b", TP_SEEK_LT, NULL}, {"b", TP_SEEK_LE, "b"},  {"c", TP_SEEK_LT, "b"},
		{"dd", TP_SEEK_LT, "d"}, {"dd", TP_SEEK_LE, "dd"}, {"e", TP_SEEK_LE, "dd"}, {"z", TP_SEEK_LT, "f"},
		{"", TP_FIRST, "b"},     {"", TP_LAST, "f"},
	};
	cr_assert_eq(tp_cursor_open(NULL, tr, &c), 0);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = tp_cursor_seek(c, cases[i].key, strlen(cases[i].key), cases[i].how);
		if (!cases[i].want) {
			cr_assert_eq(rc, TP_ENOTFOUND, "case %zu: seek %d '%s'", i, cases[i].how, cases[i].key);
			continue;
		}
		cr_assert_eq(rc, 0, "case %zu", i);
		cr_assert_eq(tp_cursor_get(c, &k, &kl, NULL, NULL), 0);
		cr_assert(kl == strlen(cases[i].want) && memcmp(k, cases[i].want, kl) == 0, "case %zu: seek %d '%s' got '%.*s'",
			  i, cases[i].how, cases[i].key, (int)kl, (const char *)k);
	}
	/* walk both ways across the whole tree, and off each end */
	cr_assert_eq(tp_cursor_seek(c, "", 0, TP_FIRST), 0);
	for (int i = 1; i < 4; i++) {
		cr_assert_eq(tp_cursor_next(c), 0);
		tp_cursor_get(c, &k, &kl, NULL, NULL);
		cr_assert(kl == strlen(keys[i]) && memcmp(k, keys[i], kl) == 0);
	}
	cr_assert_eq(tp_cursor_next(c), TP_ENOTFOUND);
	cr_assert_eq(tp_cursor_get(c, &k, &kl, NULL, NULL), TP_ENOTFOUND);
	cr_assert_eq(tp_cursor_seek(c, "", 0, TP_LAST), 0);
	for (int i = 2; i >= 0; i--) {
		cr_assert_eq(tp_cursor_prev(c), 0);
		tp_cursor_get(c, &k, &kl, NULL, NULL);
		cr_assert(kl == strlen(keys[i]) && memcmp(k, keys[i], kl) == 0);
	}
	cr_assert_eq(tp_cursor_prev(c), TP_ENOTFOUND);
	tp_cursor_close(c);
	/* a cursor positioned on a key that is then deleted steps on past it */
	cr_assert_eq(tp_cursor_open(NULL, tr, &c), 0);
	cr_assert_eq(tp_cursor_seek(c, "d", 1, TP_SEEK_GE), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_del(t, tr, "d", 1), 0);
	cr_assert_eq(tp_del(t, tr, "dd", 2), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_cursor_next(c), 0);
	tp_cursor_get(c, &k, &kl, NULL, NULL);
	cr_assert(kl == 1 && memcmp(k, "f", 1) == 0);
	cr_assert_eq(tp_cursor_prev(c), 0);
	tp_cursor_get(c, &k, &kl, NULL, NULL);
	cr_assert(kl == 1 && memcmp(k, "b", 1) == 0);
	tp_cursor_close(c);
	tp_tree_close(tr);
	verify_all(env, "seek modes");
	cr_assert_eq(tp_close(env), 0);
}

/* ---- in-order bulk loading ---- */

static void bulk(int u64, int append, uint32_t psize, unsigned n)
{
	tp_env *env = open_store(psize, 256, 1);
	tp_tree *tr;
	tp_txn *t;
	unsigned char k[16], v[64];
	uint64_t s = 99;
	cr_assert_eq(tp_tree_open(env, "bulk", TP_TREE_CREATE | (u64 ? TP_TREE_U64 : 0), &tr), 0);
	for (unsigned i = 0; i < n; i++) {
		if (i % 2000 == 0)
			cr_assert_eq(tp_begin(env, &t), 0);
		size_t kl;
		if (u64) {
			util_put64(k, 1000 + (uint64_t)i * 3);
			kl = 8;
		} else {
			kl = (size_t)snprintf((char *)k, sizeof k, "key%08u", i);
		}
		size_t vl = 16 + btm_rand(&s) % 33;
		btm_fill(v, vl, i);
		int rc = tp_put(t, tr, k, kl, v, vl, append ? TP_APPEND : 0);
		cr_assert_eq(rc, 0, "put %u: %s", i, tp_errmsg());
		if (i % 2000 == 1999 || i == n - 1)
			cr_assert_eq(tp_commit(t, 0), 0);
	}
	verify_all(env, "bulk load");
	bt_verify_result r = verify_tree(env, "bulk");
	uint64_t nleaves;
	double lf = leaf_fill(env, "bulk", &nleaves);
	double all = (double)r.bytes_used / (double)(r.bytes_used + r.bytes_free);
	cr_log_info("bulk %s %s, %u-byte pages: %u records, %" PRIu64 " leaves, %" PRIu64 " levels, leaf fill %.1f%%, "
		    "all pages %.1f%%",
		    u64 ? "u64" : "bytes", append ? "TP_APPEND" : "ascending", psize, n, nleaves, r.levels, 100 * lf,
		    100 * all);
	cr_assert_eq(r.records, n);
	cr_assert_eq(nleaves, r.leaves);
	cr_assert_gt(r.levels, 1);
	cr_assert_gt(lf, 0.90, "%s keys, %s, %u-byte pages: leaves only %.1f%% full (%" PRIu64 " leaves for %u records)",
		     u64 ? "u64" : "bytes", append ? "TP_APPEND" : "plain ascending puts", psize, 100 * lf, nleaves, n);
	cr_assert_gt(all, 0.85, "all tree pages only %.1f%% full", 100 * all);
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

Test(btree, bulk_append_bytes, .init = setup, .fini = teardown, .timeout = 120) { bulk(0, 1, 4096, 20000); }
Test(btree, bulk_ascending_bytes, .init = setup, .fini = teardown, .timeout = 120) { bulk(0, 0, 4096, 20000); }
Test(btree, bulk_append_bytes_1k, .init = setup, .fini = teardown, .timeout = 120) { bulk(0, 1, 1024, 8000); }
Test(btree, bulk_append_u64, .init = setup, .fini = teardown, .timeout = 120) { bulk(1, 1, 4096, 20000); }
Test(btree, bulk_ascending_u64, .init = setup, .fini = teardown, .timeout = 120) { bulk(1, 0, 4096, 20000); }

/* ---- height >= 3: splits at every level; emptied (empty pages may stay:
 * no merges are required) and refilled ---- */

static void tall(int u64, int ascending, uint64_t seed)
{
	tp_env *env = open_store(1024, 64, 1);
	tp_tree *tr;
	tp_txn *t;
	static unsigned char k[LOCK_KEY_MAX], v[64], g[64];
	uint64_t s = seed;
	btm m;
	char why[512];
	btm_init(&m, u64);
	cr_assert_eq(tp_tree_open(env, "tall", TP_TREE_CREATE | (u64 ? TP_TREE_U64 : 0), &tr), 0);
	size_t maxk = tp_tree_max_key(tr), kl;
	unsigned n = u64 ? 3000 : 1500;
	uint64_t prev_levels = 1;
	cr_assert_eq(tp_begin(env, &t), 0);
	for (unsigned i = 0; i < n; i++) {
		if (u64) {
			util_put64(k, ascending ? i : btm_rand(&s));
			kl = 8;
		} else {
			kl = ascending ? maxk : maxk - btm_rand(&s) % 40;
			btm_fill(k, kl, ascending ? 0 : btm_rand(&s));
			if (ascending) /* a long common prefix, then the number: strictly increasing */
				snprintf((char *)k + kl - 9, 10, "%09u", i);
		}
		size_t vl = 8 + btm_rand(&s) % 40;
		btm_fill(v, vl, i);
		cr_assert_eq(tp_put(t, tr, k, kl, v, vl, 0), 0, "seed %" PRIu64 " put %u: %s", seed, i, tp_errmsg());
		cr_assert_eq(btm_put(&m, k, kl, v, vl), 0);
		if (i % 100 == 99) {
			cr_assert_eq(tp_commit(t, 0), 0);
			bt_verify_result r = verify_tree(env, "tall");
			cr_assert_geq(r.levels, prev_levels, "the tree got lower");
			prev_levels = r.levels;
			cr_assert_eq(tp_begin(env, &t), 0);
		}
	}
	cr_assert_eq(tp_commit(t, 0), 0);
	verify_all(env, "tall tree");
	bt_verify_result r = verify_tree(env, "tall");
	cr_log_info("tall %s %s seed %" PRIu64 ": %" PRIu64 " records, %" PRIu64 " levels, %" PRIu64 " pages, %" PRIu64
		    " leaves",
		    u64 ? "u64" : "bytes", ascending ? "ascending" : "random", seed, r.records, r.levels, r.pages, r.leaves);
	cr_assert_geq(r.levels, 3, "seed %" PRIu64 ": only %" PRIu64 " levels", seed, r.levels);
	cr_assert_eq(r.records, m.n);
	btm got;
	btm_init(&got, u64);
	cr_assert_eq(btm_load(&got, NULL, tr, why, sizeof why), 0, "%s", why);
	cr_assert(btm_equal(&m, &got, why, sizeof why), "seed %" PRIu64 ": %s", seed, why);
	cr_assert_eq(btm_check_backward(&m, NULL, tr, why, sizeof why), 0, "%s", why);
	for (size_t i = 0; i < m.n; i += 7) {
		size_t gl;
		cr_assert_eq(tp_get(NULL, tr, m.r[i].k, m.r[i].kl, g, sizeof g, &gl), 0);
		cr_assert(gl == m.r[i].vl && memcmp(g, m.r[i].v, gl) == 0);
	}
	/* an aborted transaction that splits at every level leaves the splits
	 * (redo-only) but none of its records */
	cr_assert_eq(tp_begin(env, &t), 0);
	for (unsigned i = 0; i < 400; i++) {
		if (u64) {
			util_put64(k, btm_rand(&s) | 1ull << 63);
			kl = 8;
		} else {
			kl = maxk;
			btm_fill(k, kl, btm_rand(&s));
		}
		cr_assert_eq(tp_put(t, tr, k, kl, v, 30, 0), 0);
	}
	cr_assert_eq(tp_abort(t), 0);
	verify_all(env, "after an aborted bulk insert");
	cr_assert_eq(btm_load(&got, NULL, tr, why, sizeof why), 0, "%s", why);
	cr_assert(btm_equal(&m, &got, why, sizeof why), "after abort: %s", why);
	/* delete everything (in random order): still a valid tree */
	for (size_t left = m.n; left > 0; left--) {
		if (left % 200 == 0 || left == m.n)
			cr_assert_eq(tp_begin(env, &t), 0);
		size_t i = btm_rand(&s) % m.n;
		cr_assert_eq(tp_del(t, tr, m.r[i].k, m.r[i].kl), 0);
		btm_del(&m, m.r[i].k, m.r[i].kl);
		if (left % 200 == 1)
			cr_assert_eq(tp_commit(t, 0), 0);
	}
	verify_all(env, "emptied tree");
	bt_verify_result e = verify_tree(env, "tall");
	cr_assert_eq(e.records, 0);
	cr_assert_leq(e.levels, r.levels);
	cr_log_info("emptied: %" PRIu64 " levels, %" PRIu64 " pages (%" PRIu64 " leaves)", e.levels, e.pages, e.leaves);
	cr_assert_eq(btm_load(&got, NULL, tr, why, sizeof why), 0, "%s", why);
	cr_assert_eq(got.n, 0);
	/* and refilled through the empty pages */
	cr_assert_eq(tp_begin(env, &t), 0);
	for (unsigned i = 0; i < 300; i++) {
		if (u64) {
			util_put64(k, btm_rand(&s));
			kl = 8;
		} else {
			kl = 1 + btm_rand(&s) % maxk;
			btm_fill(k, kl, btm_rand(&s));
		}
		cr_assert_eq(tp_put(t, tr, k, kl, v, 20, 0), 0);
		btm_put(&m, k, kl, v, 20);
	}
	cr_assert_eq(tp_commit(t, 0), 0);
	verify_all(env, "refilled tree");
	cr_assert_eq(btm_load(&got, NULL, tr, why, sizeof why), 0, "%s", why);
	cr_assert(btm_equal(&m, &got, why, sizeof why), "refilled: %s", why);
	btm_free(&got);
	btm_free(&m);
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

Test(btree, tall_bytes_random, .init = setup, .fini = teardown, .timeout = 120) { tall(0, 0, 1); }
Test(btree, tall_bytes_ascending, .init = setup, .fini = teardown, .timeout = 120) { tall(0, 1, 2); }
Test(btree, tall_u64_random, .init = setup, .fini = teardown, .timeout = 120) { tall(1, 0, 3); }
Test(btree, tall_u64_ascending, .init = setup, .fini = teardown, .timeout = 120) { tall(1, 1, 4); }

/* ---- merges at every level: deleting everything collapses the tree ----
 *
 * A tall tree (1 KiB pages, long keys) is emptied in ascending,
 * descending or random key order, in transactions of 50 deletes; after
 * each, the tree verifies and may only get lower.  Every level must go in
 * turn (leaf merges, internal merges, root collapses) until the tree is its
 * root leaf alone, and the store has as many pages allocated as before the
 * tree was filled.  With rollback, the same after a transaction that
 * inserted 300 keys (splitting pages) was aborted first: the leaves its
 * undo emptied must be merged away too. */
static void merge_all(int u64, int order, int rollback)
{
	tp_env *env = open_store(1024, 64, 1);
	tp_tree *tr;
	tp_txn *t;
	static unsigned char k[LOCK_KEY_MAX], v[64];
	uint64_t s = 77 + (uint64_t)order;
	btm m;
	char why[512];
	btm_init(&m, u64);
	cr_assert_eq(tp_tree_open(env, "m", TP_TREE_CREATE | (u64 ? TP_TREE_U64 : 0), &tr), 0);
	uint64_t empty_pages = allocated_pages(env);
	size_t maxk = tp_tree_max_key(tr), kl;
	cr_assert_eq(tp_begin(env, &t), 0);
	for (unsigned i = 0; i < (u64 ? 4000u : 1200u); i++) {
		if (u64) {
			util_put64(k, btm_rand(&s));
			kl = 8;
		} else {
			kl = maxk - btm_rand(&s) % 20;
			btm_fill(k, kl, btm_rand(&s));
		}
		cr_assert_eq(tp_put(t, tr, k, kl, v, 8 + btm_rand(&s) % 40, 0), 0);
		btm_put(&m, k, kl, v, 0);
	}
	cr_assert_eq(tp_commit(t, 0), 0);
	if (rollback) {
		cr_assert_eq(tp_begin(env, &t), 0);
		for (unsigned i = 0; i < 300; i++) {
			if (u64) {
				util_put64(k, btm_rand(&s));
				kl = 8;
			} else {
				kl = maxk;
				btm_fill(k, kl, btm_rand(&s));
			}
			cr_assert_eq(tp_put(t, tr, k, kl, v, 30, TP_NOOVERWRITE), 0);
		}
		cr_assert_eq(tp_abort(t), 0);
	}
	bt_verify_result r0 = verify_tree(env, "m"), r;
	cr_assert_geq(r0.levels, 3, "only %" PRIu64 " levels", r0.levels);
	uint64_t prev_levels = r0.levels, gone[8] = {0};
	size_t n = m.n;
	for (size_t done = 0; done < n;) {
		cr_assert_eq(tp_begin(env, &t), 0);
		for (int j = 0; j < 50 && done < n; j++, done++) {
			size_t i = order == 0 ? 0 : order == 1 ? m.n - 1 : btm_rand(&s) % m.n;
			int rc = tp_del(t, tr, m.r[i].k, m.r[i].kl);
			cr_assert_eq(rc, 0, "delete %zu: %d %s", done, rc, tp_errmsg());
			btm_del(&m, m.r[i].k, m.r[i].kl);
		}
		cr_assert_eq(tp_commit(t, 0), 0);
		r = verify_tree(env, "m");
		cr_assert_eq(r.records, m.n);
		cr_assert_leq(r.levels, prev_levels, "the tree grew while records were deleted");
		for (uint64_t l = r.levels; l < prev_levels && l < 8; l++)
			gone[l] = done;
		prev_levels = r.levels;
	}
	verify_all(env, "emptied by deletes");
	r = verify_tree(env, "m");
	cr_log_info("merge %s order %d%s: %" PRIu64 " levels, %" PRIu64 " pages at the start; at the end %" PRIu64
		    " levels, %" PRIu64 " pages",
		    u64 ? "u64" : "bytes", order, rollback ? " after a rollback" : "", r0.levels, r0.pages, r.levels,
		    r.pages);
	cr_assert_eq(r.levels, 1, "%s keys deleted in %s order%s: %" PRIu64 " levels (%" PRIu64 " pages, %" PRIu64
		     " leaves) left in an empty tree",
		     u64 ? "u64" : "bytes", order == 0 ? "ascending" : order == 1 ? "descending" : "random",
		     rollback ? " after an aborted insert of 300 keys" : "", r.levels, r.pages, r.leaves);
	cr_assert_eq(r.pages, 1);
	for (uint64_t l = 1; l < r0.levels; l++)
		cr_assert_gt(gone[l], 0, "level %" PRIu64 " never went", l);
	cr_assert_eq(allocated_pages(env), empty_pages, "pages of the emptied tree stay allocated");
	cr_assert_eq(btm_load(&m, NULL, tr, why, sizeof why), 0, "%s", why);
	cr_assert_eq(m.n, 0);
	btm_free(&m);
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

Test(btree, merge_ascending_bytes, .init = setup, .fini = teardown, .timeout = 120) { merge_all(0, 0, 0); }
Test(btree, merge_descending_bytes, .init = setup, .fini = teardown, .timeout = 120) { merge_all(0, 1, 0); }
Test(btree, merge_random_bytes, .init = setup, .fini = teardown, .timeout = 120) { merge_all(0, 2, 0); }
Test(btree, merge_random_u64, .init = setup, .fini = teardown, .timeout = 120) { merge_all(1, 2, 0); }
Test(btree, merge_descending_u64, .init = setup, .fini = teardown, .timeout = 120) { merge_all(1, 1, 0); }
Test(btree, merge_after_rollback_bytes, .init = setup, .fini = teardown, .timeout = 120) { merge_all(0, 2, 1); }
Test(btree, merge_after_rollback_u64, .init = setup, .fini = teardown, .timeout = 120) { merge_all(1, 1, 1); }

/* ---- the rollback of a lock-timeout victim (a doomed transaction) that
 * must split a leaf ----
 * T2 shrinks the values of keys K0..K4 (REPLACE records whose logical undo
 * grows the cells back), T3 then fills the leaf holding K0 with small
 * records and commits, T2 times out waiting for T1's lock (so it may only
 * abort), and aborts: its undo needs a split of that leaf.  The abort must
 * succeed and restore T2's values; the store must stay usable. */
Test(btree, doomed_rollback_splits, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env = open_store(1024, 64, 1);
	tp_tree *tr;
	tp_txn *t0, *t1, *t2, *t3;
	unsigned char big[120], k[32], g[200];
	size_t gl;
	char K[5][8];
	memset(big, 'B', sizeof big);
	cr_assert_eq(tp_tree_open(env, "d", TP_TREE_CREATE, &tr), 0);
	cr_assert_eq(tp_begin(env, &t0), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(K[i], sizeof K[i], "k%03d", 100 + i);
		cr_assert_eq(tp_put(t0, tr, K[i], 4, big, sizeof big, 0), 0);
	}
	cr_assert_eq(tp_commit(t0, 0), 0);
	cr_assert_eq(tp_begin(env, &t2), 0);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(tp_put(t2, tr, K[i], 4, "s", 1, 0), 0);
	/* T3 fills K0's leaf until it has less room than the undo needs */
	bt_tree *bt = open_bt(env, "d");
	buf_pool *bp = txn_mgr_pool(env->tm);
	cr_assert_eq(tp_begin(env, &t3), 0);
	for (int i = 0; i < 1000; i++) {
		buf_page *pg;
		cr_assert_eq(bt_descend(bt, K[0], 4, 0, 0, NULL, &pg), 0);
		size_t fr = bt_free_space(buf_data(pg));
		buf_put(bp, pg);
		if (fr < sizeof big)
			break;
		int kl = snprintf((char *)k, sizeof k, "k100-%04d", i); /* just above K0, same leaf */
		cr_assert_eq(tp_put(t3, tr, k, (size_t)kl, "", 0, 0), 0);
	}
	cr_assert_eq(tp_commit(t3, 0), 0);
	bt_close(bt);
	/* T2 loses a lock wait: it may only abort now */
	cr_assert_eq(tp_begin(env, &t1), 0);
	cr_assert_eq(tp_put(t1, tr, "zzz", 3, "x", 1, 0), 0);
	tp_lock_timeout(t2, 10);
	cr_assert_eq(tp_get(t2, tr, "zzz", 3, g, sizeof g, &gl), TP_ETIMEOUT);
	int rc = tp_abort(t2);
	cr_assert_eq(rc, 0, "the rollback of a lock-timeout victim that must split a leaf: %d (%s): %s", rc,
		     tp_strerror(rc), tp_errmsg());
	cr_assert_eq(tp_commit(t1, 0), 0, "the store is still usable: %s", tp_errmsg());
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(tp_get(NULL, tr, K[i], 4, g, sizeof g, &gl), 0);
		cr_assert(gl == sizeof big && memcmp(g, big, gl) == 0, "%s restored", K[i]);
	}
	verify_all(env, "after the victim's rollback");
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

/* ---- drop ---- */

Test(btree, drop_frees_every_page, .init = setup, .fini = teardown, .timeout = 120)
{
	tp_env *env = open_store(1024, 32, 1);
	tp_tree *keep, *tr;
	tp_txn *t;
	static unsigned char k[64], v[4000];
	uint64_t s = 5;
	cr_assert_eq(tp_tree_open(env, "keep", TP_TREE_CREATE, &keep), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, keep, "x", 1, "y", 1, 0), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	uint64_t before = allocated_pages(env);
	for (int round = 0; round < 3; round++) {
		cr_assert_eq(tp_tree_open(env, "victim", TP_TREE_CREATE | (round == 1 ? TP_TREE_U64 : 0), &tr), 0);
		cr_assert_eq(tp_begin(env, &t), 0);
		for (int i = 0; i < 600; i++) {
			size_t kl = round == 1 ? 8 : 1 + btm_rand(&s) % 60, vl = btm_rand(&s) % 6 == 0 ? 3000 : 40;
			btm_fill(k, kl, btm_rand(&s));
			btm_fill(v, vl, 1);
			cr_assert_eq(tp_put(t, tr, k, kl, v, vl, 0), 0);
		}
		cr_assert_eq(tp_commit(t, 0), 0);
		bt_verify_result r = verify_tree(env, "victim");
		cr_assert_geq(r.levels, 2);
		cr_assert_gt(r.overflow_pages, 0);
		cr_assert_gt(allocated_pages(env), before + r.pages - 1);
		tp_tree_close(tr);
		if (round == 2) { /* drop after a restart */
			cr_assert_eq(tp_close(env), 0);
			env = open_store(1024, 32, 0);
			tp_tree_close(keep);
			cr_assert_eq(tp_tree_open(env, "keep", 0, &keep), 0);
		}
		cr_assert_eq(tp_tree_drop(env, "victim"), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_tree_open(env, "victim", 0, &tr), ENOENT);
		cr_assert_eq(tp_tree_drop(env, "victim"), ENOENT);
		verify_all(env, "after drop");
		cr_assert_eq(allocated_pages(env), before, "round %d: allocated pages after the drop", round);
	}
	size_t gl;
	char g[4];
	cr_assert_eq(tp_get(NULL, keep, "x", 1, g, sizeof g, &gl), 0);
	tp_tree_close(keep);
	cr_assert_eq(tp_close(env), 0);
	env = open_store(1024, 32, 0);
	verify_all(env, "after drops and a restart");
	cr_assert_eq(allocated_pages(env), before);
	cr_assert_eq(tp_close(env), 0);
}

/* ---- the catalog ---- */

Test(btree, catalog, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env = open_store(4096, 0, 1);
	tp_tree *tr[6];
	tp_txn *t;
	char name[300];
	unsigned char k[8];
	cr_assert_eq(tp_tree_drop(env, "nothing"), ENOENT, "no catalog yet");
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof name, "tree-%d", i);
		cr_assert_eq(tp_tree_open(env, name, TP_TREE_CREATE | (i % 2 ? TP_TREE_U64 : 0), &tr[i]), 0);
	}
	cr_assert_eq(tp_begin(env, &t), 0);
	for (int i = 0; i < 6; i++)
		for (uint64_t j = 0; j < 50; j++) {
			util_put64(k, j * 1000 + (uint64_t)i);
			char v[32];
			int vl = snprintf(v, sizeof v, "%d/%" PRIu64, i, j);
			cr_assert_eq(tp_put(t, tr[i], k, 8, v, (size_t)vl, 0), 0);
		}
	cr_assert_eq(tp_commit(t, 0), 0);
	for (int i = 0; i < 6; i++)
		tp_tree_close(tr[i]);
	cr_assert_eq(tp_close(env), 0);

	env = open_store(4096, 0, 0);
	verify_all(env, "catalog after reopen");
	cr_assert_eq(tp_tree_open(env, "tree-6", 0, &tr[0]), ENOENT);
	cr_assert_eq(tp_tree_open(env, "tree", 0, &tr[0]), ENOENT);
	cr_assert_eq(tp_tree_open(env, "", TP_TREE_CREATE, &tr[0]), TP_EINVAL);
	memset(name, 'n', 256);
	name[256] = 0;
	cr_assert_eq(tp_tree_open(env, name, TP_TREE_CREATE, &tr[0]), TP_EINVAL);
	name[255] = 0;
	cr_assert_eq(tp_tree_open(env, name, TP_TREE_CREATE, &tr[0]), 0, "a 255-byte name");
	tp_tree_close(tr[0]);
	for (int i = 5; i >= 0; i--) {
		snprintf(name, sizeof name, "tree-%d", i);
		/* the comparator is the tree's, from the catalog, whatever the flags */
		cr_assert_eq(tp_tree_open(env, name, 0, &tr[i]), 0);
		tp_cursor *c;
		cr_assert_eq(tp_cursor_open(NULL, tr[i], &c), 0);
		uint64_t prev = 0, cnt = 0;
		for (int rc = tp_cursor_seek(c, "", 0, TP_FIRST); rc == 0; rc = tp_cursor_next(c)) {
			const void *kk, *vv;
			size_t kl, vl;
			tp_cursor_get(c, &kk, &kl, &vv, &vl);
			cr_assert_eq(kl, 8);
			uint64_t x = util_get64(kk);
			if (cnt && i % 2)
				cr_assert_gt(x, prev, "u64 order survives a reopen by name");
			char want[32];
			int wl = snprintf(want, sizeof want, "%d/%" PRIu64, i, x / 1000);
			cr_assert(vl == (size_t)wl && memcmp(vv, want, vl) == 0, "tree %d: another tree's record", i);
			prev = x;
			cnt++;
		}
		tp_cursor_close(c);
		cr_assert_eq(cnt, 50);
	}
	/* a second handle on one tree sees the same records */
	tp_tree *again;
	cr_assert_eq(tp_tree_open(env, "tree-3", TP_TREE_CREATE, &again), 0);
	util_put64(k, 3);
	size_t vl;
	cr_assert_eq(tp_get(NULL, again, k, 8, NULL, 0, &vl), 0);
	tp_tree_close(again);
	cr_assert_eq(tp_tree_drop(env, "tree-2"), 0);
	tp_tree_close(tr[2]);
	cr_assert_eq(tp_tree_open(env, "tree-2", 0, &tr[2]), ENOENT);
	for (int i = 0; i < 6; i++)
		if (i != 2)
			tp_tree_close(tr[i]);
	verify_all(env, "catalog after a drop");
	cr_assert_eq(tp_close(env), 0);
}

/* Before the first tree exists there is no catalog: still ENOENT. */
Test(btree, catalog_empty_store, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env = open_store(4096, 0, 1);
	tp_tree *tr;
	cr_assert_eq(tp_tree_drop(env, "nothing"), ENOENT);
	int rc = tp_tree_open(env, "nothing", 0, &tr);
	cr_assert_eq(rc, ENOENT, "tp_tree_open of an unknown name in a store without trees: %d (%s)", rc, tp_strerror(rc));
	verify_all(env, "empty store");
	cr_assert_eq(tp_close(env), 0);
}

/* ---- flags, limits, partial reads, protection ---- */

Test(btree, nooverwrite, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env = open_store(1024, 0, 1);
	tp_tree *tr;
	tp_txn *t;
	static unsigned char big[3000], g[3000];
	size_t gl;
	btm_fill(big, sizeof big, 7);
	cr_assert_eq(tp_tree_open(env, "n", TP_TREE_CREATE, &tr), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "a", 1, "1", 1, TP_NOOVERWRITE), 0);
	cr_assert_eq(tp_put(t, tr, "a", 1, "2", 1, TP_NOOVERWRITE), EEXIST, "in the same transaction");
	cr_assert_eq(tp_put(t, tr, "big", 3, big, sizeof big, TP_NOOVERWRITE), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "a", 1, "3", 1, TP_NOOVERWRITE), EEXIST);
	cr_assert_eq(tp_put(t, tr, "big", 3, "x", 1, TP_NOOVERWRITE), EEXIST);
	cr_assert_eq(tp_put(t, tr, "big", 3, big, 2500, TP_NOOVERWRITE), EEXIST, "an overflow value refused: no leak");
	cr_assert_eq(tp_get(t, tr, "a", 1, g, sizeof g, &gl), 0);
	cr_assert(gl == 1 && g[0] == '1');
	cr_assert_eq(tp_del(t, tr, "a", 1), 0);
	cr_assert_eq(tp_put(t, tr, "a", 1, "4", 1, TP_NOOVERWRITE), 0, "after a delete in the same transaction");
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_get(NULL, tr, "a", 1, g, sizeof g, &gl), 0);
	cr_assert(gl == 1 && g[0] == '4');
	cr_assert_eq(tp_get(NULL, tr, "big", 3, g, sizeof g, &gl), 0);
	cr_assert(gl == sizeof big && memcmp(g, big, gl) == 0);
	verify_all(env, "nooverwrite");
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

static uint64_t log_bytes(tp_env *env)
{
	tp_stats st;
	tp_stats_get(env, &st);
	return st.log_bytes;
}

/* Puts key = v in a transaction left open, makes its records durable (so
 * recovery must undo them), crashes, and reopens the store (4 KiB pages)
 * and tree `name` in *tr. */
static tp_env *crash_after_uncommitted_put(tp_env *env, tp_tree **tr, const char *name, const char *key, size_t klen,
					   const void *v, size_t vl, int flags)
{
	tp_txn *t;
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, *tr, key, klen, v, vl, flags), 0);
	cr_assert_eq(tp_sync(env), 0);
	tp_tree_close(*tr);
	tp_crash_close(env);
	env = open_store(4096, 0, 0);
	cr_assert_eq(tp_tree_open(env, name, 0, tr), 0);
	return env;
}

static int sign(int x) { return (x > 0) - (x < 0); }

/* BT_CMP_BYTES orders as memcmp, then the shorter first: the in-line
 * comparison of short keys (up to 32 bytes, eight at a time) agrees with
 * that on keys that share prefixes of every length, differ first in any
 * byte (high bit included) and anyhow after it, and so does the memcmp
 * path of longer keys. */
Test(btree, bytes_comparison_is_memcmp_then_length)
{
	unsigned char a[48], b[48];
	uint64_t r = 12345;
	for (int i = 0; i < 200000; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		size_t al = (r >> 33) % 41, bl = (r >> 40) % 41;
		for (size_t k = 0; k < sizeof a; k++)
			a[k] = b[k] = (unsigned char)(k * 37);
		size_t at = (r >> 20) % 48; /* the first difference, if within both */
		b[at] = (unsigned char)(a[at] ^ (1u << ((r >> 8) % 8)));
		uint64_t q = r;
		for (size_t k = at + 1; k < sizeof b; k++) { /* then anything */
			q = q * 6364136223846793005ull + 1;
			b[k] = (unsigned char)(q >> 56);
		}
		size_t n = al < bl ? al : bl;
		int want = memcmp(a, b, n);
		want = want ? sign(want) : (al < bl ? -1 : al > bl);
		int got = sign(bt_cmp(BT_CMP_BYTES, a, al, b, bl));
		cr_assert_eq(got, want, "lengths %zu and %zu, first difference at %zu: %d, not %d", al, bl, at, got,
			     want);
	}
}

/* tp_get_rmw X-locks the record at once: a second reader waits, as a
 * second writer would; tp_get's S lock lets it read. */
Test(btree, get_rmw_locks_the_record_for_update, .init = setup, .fini = teardown, .timeout = 60)
{
	unsigned char g[16];
	size_t gl;
	tp_env *env = open_store(4096, 0, 1);
	tp_tree *tr;
	tp_txn *a, *b;
	cr_assert_eq(tp_tree_open(env, "r", TP_TREE_CREATE, &tr), 0);
	cr_assert_eq(tp_begin(env, &a), 0);
	cr_assert_eq(tp_put(a, tr, "k", 1, "v1", 2, 0), 0);
	cr_assert_eq(tp_commit(a, 0), 0);

	cr_assert_eq(tp_begin(env, &a), 0);
	cr_assert_eq(tp_begin(env, &b), 0);
	tp_lock_timeout(b, 30);
	cr_assert_eq(tp_get(a, tr, "k", 1, g, sizeof g, &gl), 0);
	cr_assert_eq(tp_get(b, tr, "k", 1, g, sizeof g, &gl), 0, "two plain reads conflicted");
	cr_assert_eq(tp_commit(b, 0), 0);
	cr_assert_eq(tp_get_rmw(a, tr, "k", 1, g, sizeof g, &gl), 0);
	cr_assert(gl == 2 && !memcmp(g, "v1", 2));
	cr_assert_eq(tp_begin(env, &b), 0);
	tp_lock_timeout(b, 30);
	cr_assert_eq(tp_get(b, tr, "k", 1, g, sizeof g, &gl), TP_ETIMEOUT, "a read got past a read for update");
	cr_assert_eq(tp_abort(b), 0);
	cr_assert_eq(tp_put(a, tr, "k", 1, "v2", 2, 0), 0);
	cr_assert_eq(tp_commit(a, 0), 0);
	cr_assert_eq(tp_get_rmw(NULL, tr, "k", 1, g, sizeof g, &gl), 0, "without a transaction: a plain read");
	cr_assert(gl == 2 && !memcmp(g, "v2", 2));
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

/* A record rewritten with a value of the same size (a balance updated in
 * place) is logged as a BT_PATCH of the bytes that differ, not as before
 * and after images of the whole record; an identical value logs nothing.
 * Its undo is logical: an abort finds the record where it lives now, after
 * another transaction's inserts split its leaf.  A committed patch is
 * redone after a crash, an uncommitted one undone. */
Test(btree, same_size_update_logs_only_the_changed_bytes, .init = setup, .fini = teardown, .timeout = 60)
{
	enum { N = 40, VL = 100 };
	unsigned char v[VL], g[VL + 8];
	char key[32];
	size_t gl;
	tp_env *env = open_store(4096, 0, 1);
	tp_tree *tr;
	tp_txn *t, *u;
	cr_assert_eq(tp_tree_open(env, "r", TP_TREE_CREATE, &tr), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof key, "k%03d", i);
		memset(v, 'a' + i % 26, VL);
		cr_assert_eq(tp_put(t, tr, key, 4, v, VL, 0), 0);
	}
	cr_assert_eq(tp_commit(t, 0), 0);

	/* 8 bytes changed: a small record */
	memset(v, 'a' + 20 % 26, VL);
	memcpy(v + 40, "12345678", 8);
	cr_assert_eq(tp_begin(env, &t), 0);
	uint64_t b0 = log_bytes(env);
	cr_assert_eq(tp_put(t, tr, "k020", 4, v, VL, 0), 0, "%s", tp_errmsg());
	uint64_t logged = log_bytes(env) - b0;
	/* header 64 + arguments 12 + key 2 + 4 + offset and count 8 + 2 x 8 */
	cr_assert_leq(logged, 112, "an update of 8 bytes of a %d-byte record logged %" PRIu64 " bytes", VL, logged);
	cr_assert_eq(tp_get(t, tr, "k020", 4, g, sizeof g, &gl), 0);
	cr_assert(gl == VL && !memcmp(g, v, VL), "the transaction does not read its update");
	/* the same bytes again: nothing to log */
	b0 = log_bytes(env);
	cr_assert_eq(tp_put(t, tr, "k020", 4, v, VL, 0), 0);
	cr_assert_eq(log_bytes(env), b0, "an identical value logged %" PRIu64 " bytes", log_bytes(env) - b0);

	/* another transaction splits the leaf under it; then the abort */
	cr_assert_eq(tp_begin(env, &u), 0);
	unsigned char w[VL];
	memset(w, 'w', VL);
	for (int i = 0; i < 200; i++) {
		snprintf(key, sizeof key, "k020.%03d", i);
		cr_assert_eq(tp_put(u, tr, key, strlen(key), w, VL, 0), 0, "%s", tp_errmsg());
	}
	cr_assert_eq(tp_commit(u, 0), 0);
	cr_assert_eq(tp_abort(t), 0, "%s", tp_errmsg());
	unsigned char old[VL];
	memset(old, 'a' + 20 % 26, VL);
	cr_assert_eq(tp_get(NULL, tr, "k020", 4, g, sizeof g, &gl), 0);
	cr_assert(gl == VL && !memcmp(g, old, VL), "after the abort the record is not as it was");
	verify_all(env, "after the abort");

	/* committed, then an uncommitted update on top, then a crash */
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "k020", 4, v, VL, 0), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	unsigned char v2[VL];
	memcpy(v2, v, VL);
	v2[0] ^= 0xff, v2[99] ^= 0xff;
	env = crash_after_uncommitted_put(env, &tr, "r", "k020", 4, v2, VL, 0);
	cr_assert_eq(tp_get(NULL, tr, "k020", 4, g, sizeof g, &gl), 0);
	cr_assert(gl == VL && !memcmp(g, v, VL), "after the crash: not the committed update (byte 0 %s, byte 40 %s)",
		  g[0] == v[0] ? "ok" : "wrong", g[40] == v[40] ? "ok" : "wrong");
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof key, "k%03d", i);
		cr_assert_eq(tp_get(NULL, tr, key, 4, g, sizeof g, &gl), 0);
		cr_assert(gl == VL && (i == 20 || g[0] == 'a' + i % 26), "%s changed", key);
	}
	verify_all(env, "after recovery");
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

/* TP_PATCH: a few changed bytes of a 3-page value log a few hundred bytes,
 * in the same chain; an abort, and a crash before the commit, restore the
 * old bytes; another length, or pages still holding ordered bytes never
 * written (B12), take a new chain; written ordered pages are imaged in the
 * log before their first patch. */
Test(btree, patch_logs_only_the_changed_bytes, .init = setup, .fini = teardown, .timeout = 60)
{
	enum { VL = 10000 };
	static unsigned char v0[VL], v1[VL], g[VL + 8];
	size_t gl;
	tp_env *env = open_store(4096, 0, 1);
	tp_tree *tr;
	tp_txn *t;
	btm_fill(v0, VL, 11);
	cr_assert_eq(tp_tree_open(env, "p", TP_TREE_CREATE, &tr), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "k", 1, v0, VL, 0), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	uint64_t pages = allocated_pages(env);
	memcpy(v1, v0, VL);
	v1[100] ^= 1, v1[101] ^= 2, v1[5000] ^= 3;
	memset(v1 + 9000, 0x5a, 40);
	/* aborted */
	cr_assert_eq(tp_begin(env, &t), 0);
	uint64_t b0 = log_bytes(env);
	cr_assert_eq(tp_put(t, tr, "k", 1, v1, VL, TP_PATCH), 0, "%s", tp_errmsg());
	uint64_t logged = log_bytes(env) - b0;
	cr_assert_lt(logged, 1000, "a patch of 43 bytes logged %" PRIu64 " bytes (a new chain logs > %d)", logged, VL);
	cr_assert_eq(allocated_pages(env), pages, "the patch allocated pages: a new chain, not in place");
	cr_assert_eq(tp_get(t, tr, "k", 1, g, sizeof g, &gl), 0);
	cr_assert(gl == VL && !memcmp(g, v1, VL), "the transaction does not read its patched value");
	cr_assert_eq(tp_abort(t), 0);
	cr_assert_eq(tp_get(NULL, tr, "k", 1, g, sizeof g, &gl), 0);
	cr_assert(gl == VL && !memcmp(g, v0, VL), "after the abort the old bytes are not back");
	/* identical: nothing logged */
	cr_assert_eq(tp_begin(env, &t), 0);
	b0 = log_bytes(env);
	cr_assert_eq(tp_put(t, tr, "k", 1, v0, VL, TP_PATCH), 0);
	cr_assert_eq(log_bytes(env), b0, "an identical value logged something");
	cr_assert_eq(tp_abort(t), 0);
	/* committed, then a crash: redo brings the patch back */
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "k", 1, v1, VL, TP_PATCH), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	/* and an uncommitted patch on top, lost in the crash: undone */
	static unsigned char v2[VL];
	memcpy(v2, v1, VL);
	v2[7] ^= 0xff;
	env = crash_after_uncommitted_put(env, &tr, "p", "k", 1, v2, VL, TP_PATCH);
	cr_assert_eq(tp_get(NULL, tr, "k", 1, g, sizeof g, &gl), 0);
	cr_assert(gl == VL && !memcmp(g, v1, VL), "after the crash: not the committed patch (byte 7 %s, byte 9000 %s)",
		  g[7] == v1[7] ? "ok" : "wrong", g[9000] == v1[9000] ? "ok" : "wrong");
	verify_all(env, "patch after recovery");
	/* another length: a new chain */
	cr_assert_eq(tp_begin(env, &t), 0);
	b0 = log_bytes(env);
	cr_assert_eq(tp_put(t, tr, "k", 1, v1, VL - 1, TP_PATCH), 0);
	cr_assert_gt(log_bytes(env) - b0, VL - 1, "a value of another length was not written whole");
	cr_assert_eq(tp_commit(t, 0), 0);
	/* ordered pages not written yet: a new chain; once written, in place */
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "o", 1, v0, VL, TP_ORDERED), 0);
	cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	b0 = log_bytes(env);
	cr_assert_eq(tp_put(t, tr, "o", 1, v1, VL, TP_PATCH), 0);
	cr_assert_gt(log_bytes(env) - b0, 2000,
		     "a value in ordered pages never written was patched in place: its record could reach the disk "
		     "without the pages' bytes");
	cr_assert_eq(tp_commit(t, 0), 0); /* the flush's barrier writes them */
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "o", 1, v2, VL, TP_ORDERED), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	/* written: in place, each page imaged first (its bytes are in no
	 * record: a torn write of it could not be repaired), then small */
	pages = allocated_pages(env);
	cr_assert_eq(tp_begin(env, &t), 0);
	b0 = log_bytes(env);
	cr_assert_eq(tp_put(t, tr, "o", 1, v0, VL, TP_PATCH), 0);
	logged = log_bytes(env) - b0;
	cr_assert_eq(allocated_pages(env), pages, "written ordered pages were not patched in place");
	cr_assert_gt(logged, 3 * 4096, "ordered pages patched without a full-page image each first (%" PRIu64 " bytes)",
		     logged);
	b0 = log_bytes(env);
	cr_assert_eq(tp_put(t, tr, "o", 1, v2, VL, TP_PATCH), 0);
	cr_assert_lt(log_bytes(env) - b0, 1000, "imaged pages were imaged again");
	cr_assert_eq(tp_put(t, tr, "o", 1, v0, VL, TP_PATCH), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_get(NULL, tr, "o", 1, g, sizeof g, &gl), 0);
	cr_assert(gl == VL && !memcmp(g, v0, VL));
	verify_all(env, "patch");
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

Test(btree, key_limits, .init = setup, .fini = teardown, .timeout = 60)
{
	static unsigned char k[LOCK_KEY_MAX + 16], g[16];
	uint32_t sizes[] = {1024, 4096, 16384};
	for (int i = 0; i < 3; i++) {
		char dir[300];
		snprintf(dir, sizeof dir, "%s/s%d", tdir, i);
		snprintf(sdir, sizeof sdir, "%s", dir);
		tp_env *env = open_store(sizes[i], 0, 1);
		tp_tree *tr, *u;
		tp_txn *t;
		size_t gl;
		cr_assert_eq(tp_tree_open(env, "k", TP_TREE_CREATE, &tr), 0);
		cr_assert_eq(tp_tree_open(env, "u", TP_TREE_CREATE | TP_TREE_U64, &u), 0);
		size_t maxk = tp_tree_max_key(tr);
		cr_log_info("%u-byte pages: max key %zu", sizes[i], maxk);
		cr_assert_geq(maxk, 64);
		cr_assert_leq(maxk, (sizes[i] - BT_HDR) / 4);
		cr_assert_lt(maxk, LOCK_KEY_MAX - 8);
		memset(k, 'k', sizeof k);
		cr_assert_eq(tp_begin(env, &t), 0);
		cr_assert_eq(tp_put(t, tr, k, maxk, "v", 1, 0), 0, "a key of max_key bytes");
		cr_assert_eq(tp_put(t, tr, k, maxk + 1, "v", 1, 0), TP_EINVAL);
		cr_assert_eq(tp_put(t, tr, k, 0, "v", 1, 0), TP_EINVAL);
		cr_assert_eq(tp_get(t, tr, k, maxk + 1, g, sizeof g, &gl), TP_EINVAL);
		cr_assert_eq(tp_del(t, tr, k, maxk + 1), TP_EINVAL);
		cr_assert_eq(tp_get(t, tr, k, 0, g, sizeof g, &gl), TP_EINVAL);
		cr_assert_eq(tp_del(t, tr, k, 0), TP_EINVAL);
		cr_assert_eq(tp_put(t, tr, k, 1, "", 0, 0), 0, "an empty value");
		cr_assert_eq(tp_commit(t, 0), 0);
		cr_assert_eq(tp_get(NULL, tr, k, maxk, g, sizeof g, &gl), 0);
		cr_assert_eq(gl, 1);
		cr_assert_eq(tp_get(NULL, tr, k, 1, g, sizeof g, &gl), 0);
		cr_assert_eq(gl, 0);
		tp_tree_close(tr);
		tp_tree_close(u);
		verify_all(env, "key limits");
		cr_assert_eq(tp_close(env), 0);
	}
}

Test(btree, partial_get, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env = open_store(1024, 0, 1);
	tp_tree *tr;
	tp_txn *t;
	static unsigned char v[5000], g[5001];
	btm_fill(v, sizeof v, 3);
	cr_assert_eq(tp_tree_open(env, "p", TP_TREE_CREATE, &tr), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "ovf", 3, v, sizeof v, 0), 0);
	cr_assert_eq(tp_put(t, tr, "small", 5, v, 100, 0), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	size_t caps[] = {0, 1, 99, 100, 1007, 1008, 2000, 4999, 5000};
	for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
		size_t gl = 0;
		memset(g, 0xee, sizeof g);
		cr_assert_eq(tp_get(NULL, tr, "ovf", 3, g, caps[i], &gl), 0);
		cr_assert_eq(gl, sizeof v, "the whole length whatever the cap");
		cr_assert(memcmp(g, v, caps[i]) == 0 && g[caps[i]] == 0xee, "cap %zu", caps[i]);
		memset(g, 0xee, sizeof g);
		cr_assert_eq(tp_get(NULL, tr, "small", 5, g, caps[i], &gl), 0);
		cr_assert_eq(gl, 100);
		size_t n = caps[i] < 100 ? caps[i] : 100;
		cr_assert(memcmp(g, v, n) == 0 && g[n] == 0xee, "cap %zu", caps[i]);
	}
	size_t gl;
	cr_assert_eq(tp_get(NULL, tr, "ovf", 3, NULL, 0, &gl), 0, "length only");
	cr_assert_eq(gl, sizeof v);
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0);
}

Test(btree, protected_needs_txn, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env = open_store(4096, 0, 1);
	tp_tree *tr, *nt;
	tp_txn *t;
	char g[8];
	size_t gl;
	cr_assert_eq(tp_tree_open(env, "p", TP_TREE_CREATE, &tr), 0);
	cr_assert_eq(tp_put(NULL, tr, "a", 1, "b", 1, 0), TP_EINVAL);
	cr_assert_eq(tp_del(NULL, tr, "a", 1), TP_EINVAL);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "a", 1, "b", 1, 0), 0);
	/* a read without a transaction sees the latest data, committed or not */
	cr_assert_eq(tp_get(NULL, tr, "a", 1, g, sizeof g, &gl), 0);
	cr_assert_eq(tp_abort(t), 0);
	cr_assert_eq(tp_get(NULL, tr, "a", 1, g, sizeof g, &gl), TP_ENOTFOUND);
	/* an unprotected tree takes changes without one (and ignores one) */
	cr_assert_eq(tp_tree_open(env, "np", TP_TREE_CREATE | TP_TREE_NOTXN, &nt), 0);
	cr_assert_eq(tp_put(NULL, nt, "a", 1, "b", 1, 0), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, nt, "c", 1, "d", 1, 0), 0);
	cr_assert_eq(tp_abort(t), 0);
	cr_assert_eq(tp_get(NULL, nt, "c", 1, g, sizeof g, &gl), 0, "unprotected: not rolled back");
	cr_assert_eq(tp_put(NULL, nt, "a", 1, "b", 1, TP_NOOVERWRITE), EEXIST);
	tp_tree_close(tr);
	tp_tree_close(nt);
	verify_all(env, "protection");
	cr_assert_eq(tp_close(env), 0);
	env = open_store(4096, 0, 0);
	cr_assert_eq(tp_tree_open(env, "np", 0, &nt), 0);
	cr_assert_eq(tp_get(NULL, nt, "a", 1, g, sizeof g, &gl), 0, "unprotected changes survive a clean close");
	tp_tree_close(nt);
	cr_assert_eq(tp_close(env), 0);
}

/* bt_prefetch: a range's leaves, and only they, are handed to the kernel
 * to read in the background, once each, the low key's leaf first; none of
 * what the pool holds already. */
static uint64_t pf_pg[256];
static int pf_n;
static void pf_willneed(void *h, uint64_t off, uint64_t len)
{
	(void)h;
	for (uint64_t o = off; o < off + len && pf_n < 256; o += 4096)
		pf_pg[pf_n++] = o / 4096;
}

static uint64_t leaf_of(bt_tree *bt, const char *key)
{
	buf_page *pg;
	cr_assert_eq(bt_descend(bt, key, strlen(key), 0, 0, NULL, &pg), 0);
	uint64_t no = buf_pgno(pg);
	buf_put(bt->bp, pg);
	return no;
}

Test(btree, prefetch_names_the_leaves_of_a_range, .init = setup, .fini = teardown, .timeout = 60)
{
	static io_backend be;
	char k[16], v[100];
	tp_tree *tr;
	tp_txn *t;
	be = *io_posix_backend();
	be.willneed = pf_willneed;
	io_set_backend(&be);
	tp_env *env = open_store(4096, 0, 1);
	memset(v, 'v', sizeof v);
	cr_assert_eq(tp_tree_open(env, "pf", TP_TREE_CREATE, &tr), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	for (int i = 0; i < 5000; i++) {
		snprintf(k, sizeof k, "k%08d", i);
		cr_assert_eq(tp_put(t, tr, k, strlen(k), v, sizeof v, 0), 0);
	}
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_close(env), 0);
	env = open_store(4096, 0, 0); /* a cold pool */
	cr_assert_eq(tp_tree_open(env, "pf", 0, &tr), 0);
	pf_n = 0;
	tp_prefetch(tr, "k00001000", 9, "k00001300", 9);
	int hinted = pf_n;
	bt_tree *bt = open_bt(env, "pf");
	uint64_t leaves[256];
	int nl = 0;
	for (int i = 1000; i <= 1300; i++) {
		snprintf(k, sizeof k, "k%08d", i);
		uint64_t no = leaf_of(bt, k);
		if (!nl || leaves[nl - 1] != no)
			leaves[nl++] = no;
	}
	cr_assert_gt(nl, 3, "the range spans %d leaves: too few to test", nl);
	cr_assert_gt(hinted, 0, "no leaf of the range was asked for");
	cr_assert_eq(pf_pg[0], leaves[0], "the first hint is page %" PRIu64 ", not the low key's leaf %" PRIu64, pf_pg[0],
		     leaves[0]);
	for (int i = 0; i < hinted; i++) {
		cr_assert(i < nl && pf_pg[i] == leaves[i],
			  "hint %d names page %" PRIu64 ", not the range's leaf %d in order (%d leaves, %d hints)", i, pf_pg[i],
			  i, nl, hinted);
	}
	/* (the range's leaves share one parent here: 5000 keys, two levels) */
	cr_assert_eq(hinted, nl, "%d hints for the %d leaves of the range", hinted, nl);
	pf_n = 0;
	tp_prefetch(tr, "k00001000", 9, "k00001300", 9); /* all in the pool now */
	cr_assert_eq(pf_n, 0, "%d hints for leaves the pool holds", pf_n);
	bt_close(bt);
	cr_assert_eq(tp_close(env), 0);
	io_set_backend(NULL);
}


/* ---- page primitives ---- */

static size_t leaf_cell(unsigned char *out, const char *key, const unsigned char *val, uint32_t vlen)
{
	size_t kl = strlen(key);
	memset(out, 0, BT_CELL_HDR);
	util_put16(out, (uint16_t)kl);
	util_put32(out + 4, vlen);
	memcpy(out + BT_CELL_HDR, key, kl);
	memcpy(out + BT_CELL_HDR + kl, val, vlen);
	return BT_CELL_HDR + kl + vlen;
}

static int replace_at(unsigned char *page, unsigned slot, const unsigned char *ncell, size_t nlen)
{
	unsigned char arg[2 * 4096];
	const unsigned char *oc = bt_ccell(page, slot);
	size_t olen = bt_csize(oc, 0);
	memset(arg, 0, BT_ARG_HDR);
	util_put16(arg + 10, (uint16_t)slot);
	util_put32(arg + BT_ARG_HDR, (uint32_t)olen);
	memcpy(arg + BT_ARG_HDR + 4, oc, olen);
	memcpy(arg + BT_ARG_HDR + 4 + olen, ncell, nlen);
	log_rec r = {.type = 13, .len = (uint32_t)(BT_ARG_HDR + 4 + olen + nlen), .data = arg};
	return bt_replace_redo(page, 4096, &r);
}

/* A record replaced by one of the same size (TPC-B's balances, a file's
 * fixed-size records) is overwritten where it is: no dead space, no
 * compaction, the other cells untouched.  Other sizes still move it. */
Test(btree, same_size_replace_overwrites_the_cell_in_place)
{
	unsigned char *page = calloc(1, 4096), cell[512], val[200];
	cr_assert(page);
	bt_shape s = {.level = 0, .lowlen = BT_HK_INF, .hklen = BT_HK_INF};
	bt_format(page, 4096, &s);
	char key[16];
	for (unsigned i = 0; i < 10; i++) {
		snprintf(key, sizeof key, "key%u", i);
		memset(val, 'a' + (int)i, 100);
		size_t n = leaf_cell(cell, key, val, 100);
		bt_put_cell(page, 4096, i, cell, n);
	}
	uint16_t off3 = util_get16(page + BT_HDR + 2 * 3);
	uint32_t frag = util_get32(page + BT_H_FRAG), cstart = util_get32(page + BT_H_CSTART);
	size_t fr = bt_free_space(page);
	unsigned char before[4096];
	memcpy(before, page, 4096);

	memset(val, 'Z', 100);
	size_t n = leaf_cell(cell, "key3", val, 100);
	cr_assert_eq(replace_at(page, 3, cell, n), 0);
	cr_assert_eq(util_get16(page + BT_HDR + 2 * 3), off3, "the cell moved");
	cr_assert_eq(util_get32(page + BT_H_FRAG), frag, "dead space left behind: %u bytes",
		     util_get32(page + BT_H_FRAG) - frag);
	cr_assert_eq(util_get32(page + BT_H_CSTART), cstart);
	cr_assert_eq(bt_free_space(page), fr);
	cr_assert_eq(memcmp(bt_ccell(page, 3), cell, n), 0);
	/* every byte but the cell's is as it was */
	for (size_t i = 0; i < 4096; i++)
		if (i < off3 || i >= off3 + n)
			cr_assert_eq(page[i], before[i], "byte %zu changed", i);

	/* a larger value: the cell moves, the page still holds every record */
	memset(val, 'Y', 150);
	n = leaf_cell(cell, "key3", val, 150);
	cr_assert_eq(replace_at(page, 3, cell, n), 0);
	cr_assert_eq(memcmp(bt_ccell(page, 3), cell, n), 0);
	cr_assert_eq(bt_free_space(page), fr - 50, "free space %zu, expected %zu", bt_free_space(page), fr - 50);
	for (unsigned i = 0; i < 10; i++) {
		snprintf(key, sizeof key, "key%u", i);
		const unsigned char *c = bt_ccell(page, i);
		cr_assert_eq(bt_cklen(c), strlen(key));
		cr_assert_eq(memcmp(bt_ckey(c), key, strlen(key)), 0);
		cr_assert_eq(bt_cvlen(c), i == 3 ? 150u : 100u);
		cr_assert_eq(bt_cpayload(c)[0], i == 3 ? 'Y' : 'a' + (int)i);
	}
	free(page);
}

/* ---- T4: a structure change inside an undo, then a crash ---- */

/* One try of the scenario with nfill keys: builds it and returns the LSN
 * just after the nested top action a rollback needed (0: the rollback
 * needed none).  A transaction deletes key-020 (150 bytes); another
 * commits nfill keys of 12 bytes beside it; the first aborts, and putting
 * key-020 back may need a split, a nested top action inside the undo of the
 * delete (with 3 keys it does, as the tree is built now). */
static uint64_t undo_split_try(int nfill, tp_env **envp, tp_tree **trp)
{
	unsigned char v[160];
	char k[32];
	tp_txn *t0, *t1, *t2;
	tp_tree *tr;
	wl_rmtree(sdir);
	tp_env *env = open_store(1024, 2000, 1);
	cr_assert_eq(tp_tree_open(env, "u", TP_TREE_CREATE, &tr), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_begin(env, &t0), 0);
	for (int i = 0; i < 60; i++) {
		snprintf(k, sizeof k, "key-%03d", i);
		memset(v, 'a' + i % 26, sizeof v);
		cr_assert_eq(tp_put(t0, tr, k, strlen(k), v, i == 20 ? 150 : 30, 0), 0, "%s", tp_errmsg());
	}
	cr_assert_eq(tp_commit(t0, 0), 0);
	cr_assert_eq(tp_begin(env, &t2), 0);
	cr_assert_eq(tp_del(t2, tr, "key-020", 7), 0, "%s", tp_errmsg());
	uint64_t id2 = txn_id(t2->t), fwd_end = log_end(env->lg);
	cr_assert_eq(tp_begin(env, &t1), 0);
	for (int j = 0; j < nfill; j++) {
		snprintf(k, sizeof k, "key-020-%02d", j);
		memset(v, 'A' + j % 26, sizeof v);
		cr_assert_eq(tp_put(t1, tr, k, strlen(k), v, 12, 0), 0, "%s", tp_errmsg());
	}
	cr_assert_eq(tp_commit(t1, 0), 0);
	uint64_t undo_start = log_end(env->lg);
	cr_assert_eq(tp_abort(t2), 0, "%s", tp_errmsg());
	cr_assert_lt(fwd_end, undo_start);
	/* the rollback's records: a split is a PAGE_ALLOC of t2 (not a CLR),
	 * and its nested top action ends with a BT_LINK CLR */
	log_scan *s;
	log_rec r;
	uint64_t cut = 0;
	int split = 0, linked = 0;
	cr_assert_eq(log_scan_open(env->lg, undo_start, &s), 0);
	while (!cut && log_scan_next(s, &r) == 0) {
		if (linked)
			cut = r.lsn; /* the first record after the action */
		else if (r.txid == id2 && r.type == OP_PAGE_ALLOC && !(r.flags & LOG_CLR))
			split = 1;
		else if (split && r.txid == id2 && r.type == OP_BT_LINK && (r.flags & LOG_CLR))
			linked = 1;
	}
	log_scan_close(s);
	*envp = env;
	*trp = tr;
	return cut;
}

/* T4: a crash after a rollback's split (a nested top action made to put a
 * deleted key back) but before the CLR that puts it back must leave the
 * delete to be undone by recovery -- not skip it.  The log is cut right
 * after the split; recovery must bring key-020 back whole, with every
 * committed key, and the store must verify.  (The split's CLR sent undo
 * past the delete: the key was lost, and an overflow value of it would
 * have been a page allocated in no tree; crash_btree seed 401 found it.) */
Test(btree, crash_after_a_split_inside_an_undo, .init = setup, .fini = teardown, .timeout = 60)
{
	tp_env *env = NULL;
	tp_tree *tr = NULL;
	uint64_t cut = 0;
	int nfill;
	for (nfill = 1; nfill <= 40 && !cut; nfill++) {
		cut = undo_split_try(nfill, &env, &tr);
		if (!cut) {
			tp_tree_close(tr);
			cr_assert_eq(tp_close(env), 0);
		}
	}
	nfill--;
	cr_assert_neq(cut, 0, "no rollback needed a split with up to 40 keys beside the deleted one");
	uint64_t seg = 1u << 20;
	cr_assert_eq(cut / seg, log_end(env->lg) / seg, "the scenario fits one log segment");
	tp_tree_close(tr);
	cr_assert_eq(tp_sync(env), 0); /* the rollback's records are in the file... */
	tp_crash_close(env);
	/* ...and the crash: the log ends right after the split, before the
	 * flush that made the rest durable (so the mark, L14, is below it) */
	char lp[600];
	snprintf(lp, sizeof lp, "%s/log", sdir);
	cr_assert_eq(su_raw_mark(lp, cut), 0);
	snprintf(lp, sizeof lp, "%s/log/log.%016" PRIx64, sdir, cut / seg);
	size_t zn = seg - cut % seg;
	unsigned char *z = calloc(1, zn);
	FILE *f = fopen(lp, "r+b");
	cr_assert_not_null(f, "%s", lp);
	cr_assert_eq(fseek(f, (long)(cut % seg), SEEK_SET), 0);
	cr_assert_eq(fwrite(z, 1, zn, f), zn);
	cr_assert_eq(fclose(f), 0);
	free(z);
	env = open_store(1024, 2000, 0);
	tp_stats st;
	tp_stats_get(env, &st);
	cr_assert_eq(st.rec_losers, 1, "the aborting transaction is a loser (%" PRIu64 ")", st.rec_losers);
	cr_assert_eq(tp_tree_open(env, "u", 0, &tr), 0, "%s", tp_errmsg());
	unsigned char v[200], want[160];
	size_t vl;
	int rc = tp_get(NULL, tr, "key-020", 7, v, sizeof v, &vl);
	cr_assert_eq(rc, 0, "key-020 is back after recovery (%d keys beside it): %s", nfill, tp_strerror(rc));
	memset(want, 'a' + 20, sizeof want);
	cr_assert(vl == 150 && memcmp(v, want, 150) == 0, "key-020's value (%zu bytes)", vl);
	for (int j = 0; j < nfill; j++) {
		char k[32];
		snprintf(k, sizeof k, "key-020-%02d", j);
		cr_assert_eq(tp_get(NULL, tr, k, strlen(k), v, sizeof v, &vl), 0, "committed %s", k);
	}
	tp_tree_close(tr);
	verify_all(env, "after recovery");
	cr_assert_eq(tp_close(env), 0);
}
