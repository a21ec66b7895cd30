/*
 * test_recover_btree -- per-operation recovery tests of the B-tree: for
 * each B-tree operation (insert small, insert overflow, insert into a u64
 * tree, update small->small, small->overflow, overflow->small,
 * overflow->overflow, delete small, delete overflow, delete from a u64
 * tree, an insert that splits a leaf, one that splits an internal page,
 * one that splits a root leaf, one that splits an internal root, a delete
 * that merges two leaves, one that merges two internal pages, one that
 * collapses the root, a tree drop, and a transaction mixing 80 of them),
 * under several seeds (odd:
 * an 8-page pool, so uncommitted pages are stolen; multiples of 3: a
 * checkpoint right before the operation, so full-page images are logged):
 *
 *   A. snapshot the logical contents (every tree in the catalog, every
 *      record through a cursor); run the operation; abort: the snapshot
 *      again, tp_verify passes (no page leaked), and a split the operation
 *      made is still there (splits and merges are nested top actions; if
 *      the undo itself splits or merges again, that is logged, not failed);
 *   C. run it and commit (the after-state); crash without writing back;
 *      recover: the after-state, tp_verify passes; crash and recover
 *      again: the same, no loser; clean close and open: the same;
 *   U. run it, make its records durable (tp_sync) without committing,
 *      crash: recovery redoes it and rolls it back by logical undo -- the
 *      snapshot, tp_verify passes, the split still there; recover twice;
 *   L. run it and commit with TP_COMMIT_NOSYNC, crash: all or nothing;
 *   P. a power cut at the k-th sync of the operation and its commit, for
 *      k = 1, 2, ... until a run gets through (io simulator, in a child):
 *      recovery gives the snapshot or the after-state -- the after-state
 *      whenever the commit had returned -- twice, and tp_verify passes.
 *
 * Each step starts from a copy of the same base store.  For the split and
 * merge operations the base is built so that the operation's insert or
 * delete is the one that splits or merges: a dry run on a scratch store
 * inserts the seed's key sequence (and deletes keys in the seed's order)
 * and watches bt_verify's counts after each change.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bt.h"
#include "bt_int.h"
#include "bt_model.h"
#include "recover_harness.h"
#include "io_sim.h"
#include "store_util.h"
#include "tp.h"
#include "tp_test.h"
#include "tp_int.h"
#include "workload.h"

enum bop {
	B_INS_SMALL,
	B_INS_OVF,
	B_INS_U64,
	B_UPD_SMALL,
	B_UPD_GROW,
	B_UPD_SHRINK,
	B_UPD_OVF,
	B_DEL_SMALL,
	B_DEL_OVF,
	B_DEL_U64,
	B_SPLIT_LEAF,
	B_SPLIT_INTERNAL,
	B_SPLIT_ROOT_LEAF,
	B_SPLIT_ROOT_INTERNAL,
	B_MERGE_LEAF,
	B_MERGE_INTERNAL,
	B_COLLAPSE_ROOT,
	B_DROP,
	B_MULTI,
	B_N
};

static const char *bop_name[B_N] = {
	"insert small",         "insert overflow",        "insert (u64 tree)",  "update small->small",
	"update small->overflow", "update overflow->small", "update overflow->overflow", "delete small",
	"delete overflow",      "delete (u64 tree)",      "insert splitting a leaf", "insert splitting an internal page",
	"insert splitting the root leaf", "insert splitting the internal root", "delete merging two leaves",
	"delete merging two internal pages", "delete collapsing the root", "drop tree", "80 mixed operations",
};

typedef op_seed bparam; /* an operation and a seed */
#define SEEDS 1, 2, 3, 6 /* each operation runs under each */

#define PSIZE 1024
#define NA 150 /* records of tree "a" for the operations that do not split on purpose */
#define NM 400 /* records of tree "a" before the deletes of the merge operations */

static char tdir[256], sdir[512], bdir[512];
static uint64_t split_at; /* index of the key whose insert splits (split operations) */
static uint64_t merge_at; /* deletes (in perm order) before the one that merges (merge operations) */
static uint64_t perm[NM]; /* the order of the deletes */

static void setup(void)
{
	cr_assert_eq(wl_tmpdir("recbt", tdir, sizeof tdir), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
	snprintf(bdir, sizeof bdir, "%s/base", tdir);
}

static void teardown(void) { wl_rmtree(tdir); }

static void options(const bparam *p, tp_options *o)
{
	tp_options_init(o);
	o->quiet = 1;
	o->page_size = PSIZE;
	o->seg_size = 1u << 20;
	o->cache_pages = p->seed % 2 ? 8 : 0; /* odd seeds: a tiny pool (STEAL) */
	o->ckpt_log_bytes = UINT64_MAX / 2;
	o->ckpt_ms = 0;
}

static char emsg[1024];
static int fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(emsg, sizeof emsg, fmt, ap);
	va_end(ap);
	return rc ? rc : -100;
}

#define TRY(call)                                                                                                      \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_ != 0)                                                                                          \
			return fail(rc_, "%s: %d (%s): %s", #call, rc_, tp_strerror(rc_), tp_errmsg());                \
	} while (0)

/* ---- keys and values ---- */

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t s = a * 0x9e3779b97f4a7c15ull ^ b;
	return btm_rand(&s);
}

static size_t maxk; /* the store's max key (set before any key is made) */

/* Tree "a": key i, 40..max key bytes (long keys: few per page, so the tree
 * gets tall quickly); value: every 10th (i % 10 == 3) spans 1.5..3 pages,
 * the rest 0..30 bytes (the cell stays inline). */
static size_t a_key(uint64_t seed, uint64_t i, unsigned char *k)
{
	uint64_t h = mix(seed, i);
	size_t kl = 40 + h % (maxk - 39);
	btm_fill(k, kl, h);
	return kl;
}

static size_t a_val(uint64_t seed, uint64_t i, unsigned char *v)
{
	uint64_t h = mix(seed ^ 0x5a5a, i);
	size_t vl = i % 10 == 3 ? PSIZE * 3 / 2 + h % (PSIZE * 3 / 2) : h % 31;
	btm_fill(v, vl, h);
	return vl;
}

/* Tree "u": u64 keys; every 7th value overflows. */
static void u_key(uint64_t seed, uint64_t i, unsigned char *k) { util_put64(k, mix(seed ^ 0x77, i)); }
static size_t u_val(uint64_t seed, uint64_t i, unsigned char *v)
{
	uint64_t h = mix(seed ^ 0x99, i);
	size_t vl = i % 7 == 0 ? 2000 + h % 500 : 8 + h % 40;
	btm_fill(v, vl, h);
	return vl;
}

/* ---- white-box: counts of a tree ---- */

static int tree_stats(tp_env *env, const char *name, bt_verify_result *r)
{
	unsigned char b[8], v[12];
	bt_tree *cat, *bt;
	size_t vl;
	int rc;
	TRY(tp_page_read(env, 0, 0, b, 8));
	TRY(bt_open(env->tm, util_get64(b), BT_CMP_BYTES, &cat));
	rc = bt_get(cat, NULL, name, strlen(name), v, sizeof v, &vl);
	bt_close(cat);
	TRY(rc);
	TRY(bt_open(env->tm, util_get64(v), (util_get32(v + 8) & TP_TREE_U64) ? BT_CMP_U64 : BT_CMP_BYTES, &bt));
	rc = bt_verify(bt, NULL, NULL, r);
	bt_close(bt);
	TRY(rc);
	return 0;
}

static uint64_t internal_pages(const bt_verify_result *r) { return r->pages - r->leaves - r->overflow_pages; }

/* Does the insert that turned before into after split the way op wants? */
static int split_kind(int op, const bt_verify_result *b, const bt_verify_result *a)
{
	switch (op) {
	case B_SPLIT_LEAF:
		return b->levels >= 2 && a->levels == b->levels && a->leaves == b->leaves + 1 &&
		       internal_pages(a) == internal_pages(b);
	case B_SPLIT_INTERNAL:
		return b->levels >= 3 && a->levels == b->levels && internal_pages(a) > internal_pages(b);
	case B_SPLIT_ROOT_LEAF:
		return b->levels == 1 && a->levels == 2;
	case B_SPLIT_ROOT_INTERNAL:
		return b->levels == 2 && a->levels == 3;
	case B_MERGE_LEAF:
		return b->levels >= 2 && a->levels == b->levels && a->leaves < b->leaves &&
		       internal_pages(a) == internal_pages(b);
	case B_MERGE_INTERNAL:
		return b->levels >= 3 && a->levels == b->levels && internal_pages(a) < internal_pages(b);
	case B_COLLAPSE_ROOT:
		return a->levels < b->levels;
	}
	return 0;
}

static int is_split(int op) { return op >= B_SPLIT_LEAF && op <= B_SPLIT_ROOT_INTERNAL; }
static int is_merge(int op) { return op >= B_MERGE_LEAF && op <= B_COLLAPSE_ROOT; }
static int is_shape(int op) { return is_split(op) || is_merge(op); }

/* ---- snapshots of the logical contents: every tree of the catalog ---- */

#define MAXTREES 8
typedef struct snap {
	int n;
	char name[MAXTREES][32];
	btm m[MAXTREES];
} snap;

static void snap_free(snap *s)
{
	for (int i = 0; i < s->n; i++)
		btm_free(&s->m[i]);
	s->n = 0;
}

/* Reads a tree with a bt cursor and no transaction (no locks: works
 * while a transaction holds X locks, even on the catalog entry). */
static int read_tree(bt_tree *bt, btm *m)
{
	bt_cursor *c;
	int rc;
	TRY(bt_cursor_open(bt, NULL, &c));
	for (rc = bt_cursor_seek(c, "", 0, BT_FIRST); rc == 0; rc = bt_cursor_next(c)) {
		const void *k, *v;
		size_t kl, vl;
		bt_cursor_get(c, &k, &kl, &v, &vl);
		if (m->n && btm_cmp(m->u64, m->r[m->n - 1].k, m->r[m->n - 1].kl, k, kl) >= 0) {
			bt_cursor_close(c);
			return fail(TP_ECORRUPT, "cursor: keys out of order after %zu records", m->n);
		}
		if ((rc = btm_put(m, k, kl, v, vl)) != 0)
			break;
	}
	bt_cursor_close(c);
	if (rc != TP_ENOTFOUND)
		return fail(rc, "cursor step: %d %s", rc, tp_errmsg());
	return 0;
}

static int snap_take(tp_env *env, snap *s)
{
	unsigned char b[8];
	bt_tree *cat;
	bt_cursor *c;
	int rc;
	memset(s, 0, sizeof *s);
	TRY(tp_page_read(env, 0, 0, b, 8));
	if (!util_get64(b))
		return 0;
	TRY(bt_open(env->tm, util_get64(b), BT_CMP_BYTES, &cat));
	if ((rc = bt_cursor_open(cat, NULL, &c)) != 0) {
		bt_close(cat);
		return fail(rc, "catalog cursor");
	}
	for (rc = bt_cursor_seek(c, "", 0, BT_FIRST); rc == 0 && s->n < MAXTREES; rc = bt_cursor_next(c)) {
		const void *k, *v;
		size_t kl, vl;
		bt_tree *bt;
		bt_cursor_get(c, &k, &kl, &v, &vl);
		if (vl != 12 || kl >= sizeof s->name[0]) {
			rc = fail(TP_ECORRUPT, "catalog entry of %zu/%zu bytes", kl, vl);
			break;
		}
		int u64 = (util_get32((const unsigned char *)v + 8) & TP_TREE_U64) != 0;
		memcpy(s->name[s->n], k, kl);
		s->name[s->n][kl] = 0;
		btm_init(&s->m[s->n], u64);
		s->n++;
		if ((rc = bt_open(env->tm, util_get64(v), u64 ? BT_CMP_U64 : BT_CMP_BYTES, &bt)) != 0)
			break;
		rc = read_tree(bt, &s->m[s->n - 1]);
		bt_close(bt);
		if (rc)
			break;
	}
	bt_cursor_close(c);
	bt_close(cat);
	if (rc == TP_ENOTFOUND)
		return 0;
	return rc ? rc : fail(-100, "more than %d trees", MAXTREES);
}

static int snap_equal(const snap *a, const snap *b, char *why, size_t n)
{
	char w[512];
	if (a->n != b->n) {
		snprintf(why, n, "%d trees expected, %d found", a->n, b->n);
		return 0;
	}
	for (int i = 0; i < a->n; i++) {
		if (strcmp(a->name[i], b->name[i]) != 0) {
			snprintf(why, n, "tree '%s' expected, '%s' found", a->name[i], b->name[i]);
			return 0;
		}
		if (!btm_equal(&a->m[i], &b->m[i], w, sizeof w)) {
			snprintf(why, n, "tree '%s': %s", a->name[i], w);
			return 0;
		}
	}
	return 1;
}

/* ---- the base store ---- */

static int put_a(tp_txn *t, tp_tree *a, uint64_t seed, uint64_t i)
{
	static unsigned char k[256], v[4 * PSIZE];
	size_t kl = a_key(seed, i, k), vl = a_val(seed, i, v);
	TRY(tp_put(t, a, k, kl, v, vl, 0));
	return 0;
}

static void make_perm(uint64_t seed)
{
	uint64_t s = mix(seed, 0x9e7);
	for (uint64_t i = 0; i < NM; i++)
		perm[i] = i;
	for (uint64_t i = NM - 1; i > 0; i--) {
		uint64_t j = btm_rand(&s) % (i + 1), x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
}

static int del_a(tp_txn *t, tp_tree *a, uint64_t seed, uint64_t i)
{
	static unsigned char k[256];
	size_t kl = a_key(seed, i, k);
	TRY(tp_del(t, a, k, kl));
	return 0;
}

/* Finds the first i (>= a minimum) whose insert, after keys 0..i-1,
 * splits the way op wants, or for a merge operation the first d whose
 * delete (of key perm[d], after NM inserts and the deletes before it)
 * merges the way it wants: a dry run on a scratch store. */
static uint64_t find_shape(const bparam *p)
{
	char dir[600];
	tp_options o;
	tp_env *env;
	tp_tree *a;
	tp_txn *t;
	bt_verify_result before, after;
	uint64_t min = p->op == B_SPLIT_LEAF ? 40 : p->op == B_SPLIT_INTERNAL ? 60 : 0;
	snprintf(dir, sizeof dir, "%s/dry", tdir);
	options(p, &o);
	o.cache_pages = 0;
	cr_assert_eq(tp_mkfs(dir, &o), 0);
	cr_assert_eq(tp_open(dir, &o, &env), 0);
	cr_assert_eq(tp_tree_open(env, "a", TP_TREE_CREATE, &a), 0);
	maxk = tp_tree_max_key(a);
	cr_assert_geq(maxk, 60);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tree_stats(env, "a", &before), 0, "%s", emsg);
	uint64_t i;
	if (is_merge(p->op)) {
		for (i = 0; i < NM; i++)
			cr_assert_eq(put_a(t, a, p->seed, i), 0, "%s", emsg);
		cr_assert_eq(tree_stats(env, "a", &before), 0, "%s", emsg);
		for (i = 0; i < NM; i++) {
			cr_assert_eq(del_a(t, a, p->seed, perm[i]), 0, "%s", emsg);
			cr_assert_eq(tree_stats(env, "a", &after), 0, "%s", emsg);
			if (split_kind(p->op, &before, &after))
				break;
			before = after;
		}
		cr_assert_lt(i, NM, "%s seed %" PRIu64 ": no delete merged so", bop_name[p->op], p->seed);
	} else {
		for (i = 0; i < 5000; i++) {
			cr_assert_eq(put_a(t, a, p->seed, i), 0, "%s", emsg);
			cr_assert_eq(tree_stats(env, "a", &after), 0, "%s", emsg);
			if (i >= min && split_kind(p->op, &before, &after))
				break;
			before = after;
		}
		cr_assert_lt(i, 5000, "%s seed %" PRIu64 ": no such split in 5000 inserts", bop_name[p->op], p->seed);
	}
	cr_assert_eq(tp_commit(t, 0), 0);
	tp_tree_close(a);
	cr_assert_eq(tp_close(env), 0);
	wl_rmtree(dir);
	return i;
}

static void make_base(const bparam *p)
{
	tp_options o;
	tp_env *env;
	tp_tree *a, *u, *d;
	tp_txn *t;
	static unsigned char k[256], v[4 * PSIZE];
	uint64_t na = NA;
	make_perm(p->seed);
	if (is_split(p->op))
		na = split_at = find_shape(p);
	if (is_merge(p->op)) {
		merge_at = find_shape(p);
		na = NM;
	}
	options(p, &o);
	maxk = 0;
	cr_assert_eq(tp_mkfs(bdir, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(bdir, &o, &env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "u", TP_TREE_CREATE | TP_TREE_U64, &u), 0);
	cr_assert_eq(tp_tree_open(env, "d", TP_TREE_CREATE, &d), 0);
	cr_assert_eq(tp_tree_open(env, "a", TP_TREE_CREATE, &a), 0);
	maxk = tp_tree_max_key(a);
	cr_assert_geq(maxk, 60);
	cr_assert_eq(tp_begin(env, &t), 0);
	for (uint64_t i = 0; i < 200; i++) {
		u_key(p->seed, i, k);
		size_t vl = u_val(p->seed, i, v);
		cr_assert_eq(tp_put(t, u, k, 8, v, vl, 0), 0, "%s", tp_errmsg());
	}
	for (uint64_t i = 0; i < 120; i++) {
		size_t kl = a_key(p->seed + 1000, i, k), vl = i % 5 ? 20 : 2500;
		btm_fill(v, vl, i);
		cr_assert_eq(tp_put(t, d, k, kl, v, vl, 0), 0, "%s", tp_errmsg());
	}
	for (uint64_t i = 0; i < na; i++)
		cr_assert_eq(put_a(t, a, p->seed, i), 0, "%s", emsg);
	cr_assert_eq(tp_commit(t, 0), 0);
	if (is_merge(p->op)) {
		cr_assert_eq(tp_begin(env, &t), 0);
		for (uint64_t j = 0; j < merge_at; j++)
			cr_assert_eq(del_a(t, a, p->seed, perm[j]), 0, "%s", emsg);
		cr_assert_eq(tp_commit(t, 0), 0);
	}
	tp_tree_close(a);
	tp_tree_close(u);
	tp_tree_close(d);
	cr_assert_eq(tp_verify(env, 0, NULL), 0, "base: %s", tp_errmsg());
	cr_assert_eq(tp_close(env), 0);
}

/* ---- the operations: deterministic for a given base and seed ---- */

static int do_drop(tp_env *env, tp_txn *t, const char *name)
{
	unsigned char b[8], v[12];
	bt_tree *cat, *bt;
	size_t vl;
	int rc;
	txn *x = t->t;
	TRY(txn_lock(x, "catalog", 7, LOCK_X));
	TRY(tp_page_read(env, 0, 0, b, 8));
	TRY(bt_open(env->tm, util_get64(b), BT_CMP_BYTES, &cat));
	if ((rc = bt_get(cat, x, name, strlen(name), v, sizeof v, &vl)) == 0 &&
	    (rc = bt_open(env->tm, util_get64(v), (util_get32(v + 8) & TP_TREE_U64) ? BT_CMP_U64 : BT_CMP_BYTES, &bt)) ==
		    0) {
		rc = bt_drop(bt, x);
		if (rc == 0)
			rc = bt_delete(cat, x, name, strlen(name));
		bt_close(bt);
	}
	bt_close(cat);
	TRY(rc);
	return 0;
}

/* A present record of "a" with a small (want_ovf = 0) or an overflow value. */
static uint64_t pick_a(uint64_t seed, int want_ovf)
{
	uint64_t i = mix(seed, 4242) % (NA - 10);
	while ((i % 10 == 3) != want_ovf)
		i++;
	return i;
}

static int run_op(tp_env *env, tp_txn *t, const bparam *p, int public_drop)
{
	static unsigned char k[256], v[4 * PSIZE];
	uint64_t s = mix(p->seed, 31 + (uint64_t)p->op);
	tp_tree *a, *u;
	size_t kl, vl;
	int rc = 0;
	if (p->op == B_DROP) {
		if (public_drop)
			TRY(tp_tree_drop(env, "d"));
		else
			TRY(do_drop(env, t, "d"));
		return 0;
	}
	TRY(tp_tree_open(env, "a", 0, &a));
	TRY(tp_tree_open(env, "u", 0, &u));
	switch (p->op) {
	case B_INS_SMALL:
	case B_INS_OVF:
		kl = a_key(p->seed, 100000 + p->seed, k);
		vl = p->op == B_INS_SMALL ? 1 + btm_rand(&s) % 30 : 2 * PSIZE + btm_rand(&s) % PSIZE;
		btm_fill(v, vl, btm_rand(&s));
		rc = tp_put(t, a, k, kl, v, vl, TP_NOOVERWRITE);
		break;
	case B_INS_U64:
		util_put64(k, btm_rand(&s));
		rc = tp_put(t, u, k, 8, "new", 3, TP_NOOVERWRITE);
		break;
	case B_UPD_SMALL:
	case B_UPD_GROW:
	case B_UPD_SHRINK:
	case B_UPD_OVF: {
		int from_ovf = p->op == B_UPD_SHRINK || p->op == B_UPD_OVF;
		int to_ovf = p->op == B_UPD_GROW || p->op == B_UPD_OVF;
		kl = a_key(p->seed, pick_a(p->seed, from_ovf), k);
		vl = to_ovf ? PSIZE + btm_rand(&s) % (2 * PSIZE) : btm_rand(&s) % 31;
		btm_fill(v, vl, btm_rand(&s));
		rc = tp_put(t, a, k, kl, v, vl, 0);
		break;
	}
	case B_DEL_SMALL:
	case B_DEL_OVF:
		kl = a_key(p->seed, pick_a(p->seed, p->op == B_DEL_OVF), k);
		rc = tp_del(t, a, k, kl);
		break;
	case B_DEL_U64:
		u_key(p->seed, mix(p->seed, 5) % 200, k);
		rc = tp_del(t, u, k, 8);
		break;
	case B_SPLIT_LEAF:
	case B_SPLIT_INTERNAL:
	case B_SPLIT_ROOT_LEAF:
	case B_SPLIT_ROOT_INTERNAL:
		rc = put_a(t, a, p->seed, split_at);
		break;
	case B_MERGE_LEAF:
	case B_MERGE_INTERNAL:
	case B_COLLAPSE_ROOT:
		kl = a_key(p->seed, perm[merge_at], k);
		rc = tp_del(t, a, k, kl);
		break;
	case B_MULTI:
		for (int i = 0; i < 80 && rc == 0; i++) {
			uint64_t r = btm_rand(&s) % 10;
			if (r < 5) {
				kl = a_key(p->seed, 200000 + btm_rand(&s) % 1000, k);
				vl = btm_rand(&s) % 4 == 0 ? PSIZE + btm_rand(&s) % (2 * PSIZE) : btm_rand(&s) % 31;
				btm_fill(v, vl, btm_rand(&s));
				rc = tp_put(t, a, k, kl, v, vl, 0);
			} else if (r < 8) {
				kl = a_key(p->seed, btm_rand(&s) % NA, k);
				rc = tp_del(t, a, k, kl);
				if (rc == TP_ENOTFOUND)
					rc = 0;
			} else if (r < 9) {
				util_put64(k, btm_rand(&s));
				vl = btm_rand(&s) % 2 ? 3000 : 10;
				btm_fill(v, vl, 9);
				rc = tp_put(t, u, k, 8, v, vl, 0);
			} else {
				u_key(p->seed, btm_rand(&s) % 200, k);
				rc = tp_del(t, u, k, 8);
				if (rc == TP_ENOTFOUND)
					rc = 0;
			}
		}
		break;
	}
	tp_tree_close(a);
	tp_tree_close(u);
	if (rc)
		return fail(rc, "the operation: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
	return 0;
}

/* ---- checks ---- */

#define PCK(cond, ...) cr_assert((cond), "%s seed %" PRIu64 ": %s", bop_name[p->op], p->seed, msgf(__VA_ARGS__))
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

static tp_env *open_env(const bparam *p, const char *when)
{
	tp_options o;
	tp_env *env;
	options(p, &o);
	int rc = tp_open(sdir, &o, &env);
	PCK(rc == 0, "%s: tp_open: %d %s", when, rc, tp_errmsg());
	return env;
}

static void fresh(const bparam *p)
{
	PCK(wl_copy_store(bdir, sdir) == 0, "cannot copy the base store");
}

static void take(tp_env *env, const bparam *p, snap *s, const char *when)
{
	int rc = snap_take(env, s);
	PCK(rc == 0, "%s: snapshot: %s", when, emsg);
}

static void same(const bparam *p, const snap *want, const snap *got, const char *when)
{
	char why[700];
	PCK(snap_equal(want, got, why, sizeof why), "%s: %s", when, why);
}

/* The store now (env) is want; what: the step, for the message. */
static void same_now(tp_env *env, const bparam *p, const snap *want, const char *when, const char *what)
{
	snap s;
	take(env, p, &s, when);
	same(p, want, &s, what);
	snap_free(&s);
}

static void verify(tp_env *env, const bparam *p, const char *when)
{
	int rc = tp_verify(env, 0, NULL);
	PCK(rc == 0, "%s: tp_verify: %d %s", when, rc, tp_errmsg());
	PCK(tp_debug_pinned(env) == 0, "%s: pages left pinned", when);
}

/* A fresh copy of the base store, opened for a phase of the test; with
 * ckpt, a checkpoint first for one seed in three (the operation then logs
 * full-page images). */
static tp_env *fresh_open(const bparam *p, const char *phase, int ckpt)
{
	fresh(p);
	tp_env *env = open_env(p, phase);
	if (ckpt && p->seed % 3 == 0)
		PCK(tp_checkpoint(env) == 0, "checkpoint");
	return env;
}

/* Begins a transaction and runs the operation in it. */
static tp_txn *begin_op(tp_env *env, const bparam *p, const char *phase, int public_drop)
{
	tp_txn *t;
	PCK(tp_begin(env, &t) == 0, "begin");
	PCK(run_op(env, t, p, public_drop) == 0, "%s: %s", phase, emsg);
	return t;
}

/* After the operation's rollback, the split or merge it made is still there. */
static void split_kept(tp_env *env, const bparam *p, const bt_verify_result *base, const bt_verify_result *done,
		       const char *when)
{
	bt_verify_result r;
	if (!is_shape(p->op))
		return;
	PCK(tree_stats(env, "a", &r) == 0, "%s: %s", when, emsg);
	/* the structure change is a nested top action: it stays after the
	 * rollback, unless the undo's own insert or delete splits or merges
	 * again (logged) */
	if (r.levels == done->levels && r.leaves == done->leaves && internal_pages(&r) == internal_pages(done))
		return;
	cr_log_info("%s seed %" PRIu64 ": %s: the shape changed after the rollback (levels %" PRIu64 " leaves %" PRIu64
		    " internal %" PRIu64 "; before the operation %" PRIu64 "/%" PRIu64 "/%" PRIu64 ", after it %" PRIu64
		    "/%" PRIu64 "/%" PRIu64 ")",
		    bop_name[p->op], p->seed, when, r.levels, r.leaves, internal_pages(&r), base->levels, base->leaves,
		    internal_pages(base), done->levels, done->leaves, internal_pages(done));
	if (is_split(p->op))
		PCK(r.levels >= base->levels, "%s: the tree lost a level after the rollback", when);
}

/* ---- the test ---- */

OP_SEED_PARAMS(recover, btree_per_operation, B_N, SEEDS)

ParameterizedTest(bparam *p, recover, btree_per_operation, .init = setup, .fini = teardown, .timeout = 120)
{
	tp_env *env;
	tp_txn *t;
	tp_stats st;
	snap s0, in, s1, s;
	char why[700];
	bt_verify_result base_stats = {0}, done_stats = {0};
	make_base(p);

	/* A. run and abort */
	env = fresh_open(p, "A", 1);
	take(env, p, &s0, "before");
	if (is_shape(p->op))
		PCK(tree_stats(env, "a", &base_stats) == 0, "%s", emsg);
	t = begin_op(env, p, "A", 0);
	take(env, p, &in, "in flight");
	PCK(!snap_equal(&s0, &in, why, sizeof why), "the operation changed nothing");
	if (is_shape(p->op)) {
		PCK(tree_stats(env, "a", &done_stats) == 0, "%s", emsg);
		PCK(split_kind(p->op, &base_stats, &done_stats), "the operation did not change the tree's shape as planned");
	}
	PCK(tp_abort(t) == 0, "A: tp_abort: %s", tp_errmsg());
	same_now(env, p, &s0, "after abort", "A: abort does not restore the snapshot");
	verify(env, p, "A: after abort");
	split_kept(env, p, &base_stats, &done_stats, "A: after abort");
	tp_crash_close(env);
	env = open_env(p, "A, recovery after the abort");
	same_now(env, p, &s0, "A: recovered after abort", "A: recovery after an abort");
	verify(env, p, "A: recovered after abort");
	PCK(tp_close(env) == 0, "close");

	/* C. run and commit; crash; recover; twice; clean close */
	env = fresh_open(p, "C", 1);
	t = begin_op(env, p, "C", 1);
	PCK(tp_commit(t, 0) == 0, "C: tp_commit: %s", tp_errmsg());
	take(env, p, &s1, "after commit");
	same(p, &in, &s1, "C: the committed state differs from the in-flight state of run A");
	tp_crash_close(env);
	env = open_env(p, "C: first recovery");
	same_now(env, p, &s1, "C: first recovery", "C: crash after commit, recover");
	verify(env, p, "C: after the first recovery");
	tp_crash_close(env);
	env = open_env(p, "C: second recovery");
	tp_stats_get(env, &st);
	PCK(st.rec_losers == 0, "C: %" PRIu64 " losers", st.rec_losers);
	same_now(env, p, &s1, "C: second recovery", "C: recovered twice");
	verify(env, p, "C: after the second recovery");
	PCK(tp_close(env) == 0, "close");
	env = open_env(p, "C: clean open");
	same_now(env, p, &s1, "C: clean open", "C: clean close and open");
	PCK(tp_close(env) == 0, "close");

	/* U. durable but not committed: redone, then rolled back by logical undo */
	env = fresh_open(p, "U", 1);
	t = begin_op(env, p, "U", 0);
	PCK(tp_sync(env) == 0, "tp_sync");
	tp_crash_close(env);
	env = open_env(p, "U: recovery");
	tp_stats_get(env, &st);
	PCK(st.rec_losers == 1, "U: %" PRIu64 " losers, expected 1", st.rec_losers);
	same_now(env, p, &s0, "U: recovery", "U: an uncommitted durable operation is rolled back");
	verify(env, p, "U: after the loser's rollback");
	split_kept(env, p, &base_stats, &done_stats, "U: after the loser's rollback");
	tp_crash_close(env);
	env = open_env(p, "U: second recovery");
	tp_stats_get(env, &st);
	PCK(st.rec_losers == 0, "U: the rollback was not finished: %" PRIu64 " losers again", st.rec_losers);
	same_now(env, p, &s0, "U: second recovery", "U: the rollback recovered twice");
	verify(env, p, "U: after the second recovery");
	PCK(tp_close(env) == 0, "close");

	/* L. a lazy commit lost in the crash: all of it or none of it */
	env = fresh_open(p, "L", 0);
	t = begin_op(env, p, "L", 0);
	PCK(tp_commit(t, TP_COMMIT_NOSYNC) == 0, "L: commit");
	tp_crash_close(env);
	env = open_env(p, "L: recovery");
	take(env, p, &s, "L: recovery");
	char why2[700];
	PCK(snap_equal(&s0, &s, why, sizeof why) || snap_equal(&s1, &s, why2, sizeof why2),
	    "L: a lazy commit was applied in part: not before (%s), not after (%s)", why, why2);
	snap_free(&s);
	verify(env, p, "L: after recovery");
	PCK(tp_close(env) == 0, "close");

	snap_free(&s0);
	snap_free(&in);
	snap_free(&s1);
}

/* ---- P: a power cut at each sync of the operation and its commit ---- */

/* The loop is tests/lib/recover_harness.h; these are the suite's steps. */
typedef struct cut_ctx {
	const bparam *p;
	snap s0, s1;
} cut_ctx;

static void cut_fresh(void *arg)
{
	cut_ctx *x = arg;
	fresh(x->p);
}

static tp_env *cut_open(void *arg)
{
	cut_ctx *x = arg;
	tp_options o;
	tp_env *env;
	options(x->p, &o);
	if (tp_open(sdir, &o, &env) != 0) {
		fprintf(stderr, "cut child: tp_open: %s\n", tp_errmsg());
		_exit(SU_CHILD_FAIL);
	}
	if (x->p->seed % 3 == 0 && tp_checkpoint(env) != 0)
		_exit(SU_CHILD_FAIL);
	return env;
}

static int cut_op(void *arg, tp_env *env, tp_txn *t)
{
	cut_ctx *x = arg;
	if (run_op(env, t, x->p, 0) != 0) {
		fprintf(stderr, "cut child: %s\n", emsg);
		return -1;
	}
	return 0;
}

static void cut_check(void *arg, uint64_t k, int acked, int round)
{
	cut_ctx *x = arg;
	const bparam *p = x->p;
	snap s;
	char why0[700], why1[700];
	tp_env *env = open_env(p, "after the power cut");
	take(env, p, &s, "after the power cut");
	int is0 = snap_equal(&x->s0, &s, why0, sizeof why0), is1 = snap_equal(&x->s1, &s, why1, sizeof why1);
	snap_free(&s);
	PCK(is1 || (!acked && is0), "cut at sync %" PRIu64 " (commit %s), recovery %d: neither before (%s) nor after (%s)",
	    k, acked ? "acknowledged" : "not acknowledged", round + 1, why0, why1);
	verify(env, p, "after the power cut");
	tp_crash_close(env);
}

OP_SEED_PARAMS(recover, btree_power_cut_at_each_sync, B_N, SEEDS)

ParameterizedTest(bparam *p, recover, btree_power_cut_at_each_sync, .init = setup, .fini = teardown, .timeout = 300)
{
	cut_ctx x = {.p = p};
	char what[160];
	tp_env *env;
	tp_txn *t;
	make_base(p);

	env = fresh_open(p, "before", 0);
	take(env, p, &x.s0, "before");
	t = begin_op(env, p, "before", 0);
	PCK(tp_commit(t, 0) == 0, "commit");
	take(env, p, &x.s1, "after");
	tp_crash_close(env);

	snprintf(what, sizeof what, "%s seed %" PRIu64, bop_name[p->op], p->seed);
	cut_each c = {.what = what, .dir = tdir, .seed = p->seed, .max_k = 80, .arg = &x,
		      .fresh = cut_fresh, .open = cut_open, .op = cut_op, .check = cut_check};
	uint64_t cuts = cut_each_sync(&c);
	cr_log_info("%s seed %" PRIu64 ": %" PRIu64 " power cuts", bop_name[p->op], p->seed, cuts);
	snap_free(&x.s0);
	snap_free(&x.s1);
}
