/*
 * tp_tree -- the record interface of tp.h: named B-trees in one store.
 *
 * The catalog is itself a B-tree; its root page number lives in the first
 * 8 bytes of the store's root page (page 0), 0 until the first tree is
 * made.  A catalog entry maps a tree's name to 12 bytes: its root page (u64)
 * and its flags (u32).  Creating, opening and dropping trees run in short
 * transactions of their own, holding an X lock on the catalog name, so
 * concurrent creators of one name are serialized.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bt.h"
#include "lock.h"
#include "op.h"
#include "tp_int.h"
#include "util.h"

struct tp_tree {
	tp_env *env;
	bt_tree *bt;
	int flags;
};

struct tp_cursor {
	bt_cursor *c;
};

static const char cat_lock[] = "catalog";

static int tree_cmp(int flags) { return (flags & TP_TREE_U64) ? BT_CMP_U64 : BT_CMP_BYTES; }

/* The catalog tree, made in t if missing and create. */
static int catalog(tp_env *env, txn *t, int create, bt_tree **out)
{
	unsigned char b[8];
	uint64_t root;
	int rc;
	if ((rc = tp_page_read(env, 0, 0, b, 8)) != 0)
		return rc;
	root = util_get64(b);
	if (!root) {
		if (!create)
			return TP_ENOTFOUND;
		if ((rc = bt_create(t, &root)) != 0)
			return rc;
		util_put64(b, root);
		if ((rc = op_page_set(t, 0, BUF_HDR, b, 8)) != 0)
			return rc;
	}
	return bt_open(env->tm, root, BT_CMP_BYTES, out);
}

int tp_tree_open(tp_env *env, const char *name, int flags, tp_tree **out)
{
	size_t nlen = strlen(name), vlen;
	unsigned char v[12];
	bt_tree *cat = NULL;
	txn *t = NULL;
	tp_tree *tr;
	int rc;

	if (nlen == 0 || nlen > 255)
		return util_err(TP_EINVAL, "tree name must be 1 to 255 bytes");
	if (env->opt.readonly && (flags & TP_TREE_CREATE))
		return util_err(EROFS, "%s: the store is open read-only", env->path);
	if (!(tr = calloc(1, sizeof *tr)))
		return ENOMEM;
	tr->env = env;
	if (env->opt.readonly) {
		if ((rc = catalog(env, NULL, 0, &cat)) == 0)
			rc = bt_get(cat, NULL, name, nlen, v, sizeof v, &vlen);
	} else {
		if ((rc = txn_begin(env->tm, &t)) != 0)
			goto err;
		if ((rc = txn_lock(t, cat_lock, sizeof cat_lock - 1, LOCK_X)) != 0)
			goto err;
		if ((rc = catalog(env, t, flags & TP_TREE_CREATE, &cat)) == 0)
			rc = bt_get(cat, t, name, nlen, v, sizeof v, &vlen);
	}
	if (rc == TP_ENOTFOUND && (flags & TP_TREE_CREATE) && t) {
		uint64_t root;
		if ((rc = bt_create(t, &root)) != 0)
			goto err;
		util_put64(v, root);
		util_put32(v + 8, (uint32_t)(flags & ~TP_TREE_CREATE));
		if ((rc = bt_put(cat, t, name, nlen, v, 12, BT_NOOVERWRITE)) != 0)
			goto err;
		vlen = 12;
	}
	if (rc == TP_ENOTFOUND)
		rc = util_err(ENOENT, "%s: no tree named '%s'", env->path, name);
	if (rc)
		goto err;
	if (vlen != 12) {
		rc = util_err(TP_ECORRUPT, "%s: catalog entry of tree '%s' is malformed", env->path, name);
		goto err;
	}
	tr->flags = (int)util_get32(v + 8);
	if ((rc = bt_open(env->tm, util_get64(v), tree_cmp(tr->flags), &tr->bt)) != 0)
		goto err;
	if (tr->flags & TP_TREE_NOLOCK)
		bt_set_nolock(tr->bt);
	if (t && (rc = txn_commit(t, 0)) != 0) {
		t = NULL;
		goto err;
	}
	bt_close(cat);
	*out = tr;
	return 0;
err:
	if (t)
		(void)txn_abort(t);
	bt_close(cat);
	if (tr->bt)
		bt_close(tr->bt);
	free(tr);
	return rc;
}

void tp_tree_close(tp_tree *tr)
{
	if (!tr)
		return;
	bt_close(tr->bt);
	free(tr);
}

size_t tp_tree_max_key(const tp_tree *tr) { return bt_max_key(tr->bt); }
size_t tp_tree_value_page(const tp_tree *tr) { return bt_value_page(tr->bt); }

int tp_tree_drop(tp_env *env, const char *name)
{
	size_t nlen = strlen(name), vlen;
	unsigned char v[12];
	bt_tree *cat = NULL, *bt = NULL;
	txn *t;
	int rc;

	if ((rc = txn_begin(env->tm, &t)) != 0)
		return rc;
	if ((rc = txn_lock(t, cat_lock, sizeof cat_lock - 1, LOCK_X)) != 0 ||
	    (rc = catalog(env, t, 0, &cat)) != 0 || (rc = bt_get(cat, t, name, nlen, v, sizeof v, &vlen)) != 0)
		goto err;
	if ((rc = bt_open(env->tm, util_get64(v), tree_cmp((int)util_get32(v + 8)), &bt)) != 0 ||
	    (rc = bt_drop(bt, t)) != 0 || (rc = bt_delete(cat, t, name, nlen)) != 0)
		goto err;
	bt_close(bt);
	bt_close(cat);
	return txn_commit(t, 0);
err:
	if (rc == TP_ENOTFOUND)
		rc = util_err(ENOENT, "%s: no tree named '%s'", env->path, name);
	(void)txn_abort(t);
	bt_close(bt);
	bt_close(cat);
	return rc;
}

/* The transaction to use: none for unprotected trees; writes to protected
 * trees need one. */
static int pick(tp_txn *t, tp_tree *tr, int write, txn **out)
{
	*out = NULL;
	if (tr->flags & TP_TREE_NOTXN)
		return 0;
	if (!t) {
		if (write)
			return util_err(TP_EINVAL, "a change to a protected tree needs a transaction");
		return 0;
	}
	*out = t->t;
	return 0;
}

int tp_get(tp_txn *t, tp_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	txn *x;
	int rc = pick(t, tr, 0, &x);
	return rc ? rc : bt_get(tr->bt, x, key, klen, val, cap, vlen);
}

int tp_get_rmw(tp_txn *t, tp_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	txn *x;
	int rc = pick(t, tr, 0, &x);
	return rc ? rc : bt_get_rmw(tr->bt, x, key, klen, val, cap, vlen);
}

void tp_prefetch(tp_tree *tr, const void *lo, size_t lolen, const void *hi, size_t hilen)
{
	bt_prefetch(tr->bt, lo, lolen, hi, hilen);
}

int tp_put(tp_txn *t, tp_tree *tr, const void *key, size_t klen, const void *val, size_t vlen, int flags)
{
	txn *x;
	int rc = pick(t, tr, 1, &x);
	int bf = ((flags & TP_NOOVERWRITE) ? BT_NOOVERWRITE : 0) | ((flags & TP_APPEND) ? BT_APPEND : 0) |
		 ((flags & TP_ORDERED) ? BT_ORDERED : 0) | ((flags & TP_PATCH) ? BT_PATCH : 0);
	return rc ? rc : bt_put(tr->bt, x, key, klen, val, vlen, bf);
}

int tp_del(tp_txn *t, tp_tree *tr, const void *key, size_t klen)
{
	txn *x;
	int rc = pick(t, tr, 1, &x);
	return rc ? rc : bt_delete(tr->bt, x, key, klen);
}

int tp_cursor_open(tp_txn *t, tp_tree *tr, tp_cursor **out)
{
	tp_cursor *c;
	txn *x;
	int rc = pick(t, tr, 0, &x);
	if (rc)
		return rc;
	if (!(c = calloc(1, sizeof *c)))
		return ENOMEM;
	if ((rc = bt_cursor_open(tr->bt, x, &c->c)) != 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int tp_cursor_seek(tp_cursor *c, const void *key, size_t klen, int how) { return bt_cursor_seek(c->c, key, klen, how); }
int tp_cursor_next(tp_cursor *c) { return bt_cursor_next(c->c); }
int tp_cursor_prev(tp_cursor *c) { return bt_cursor_prev(c->c); }

int tp_cursor_get(tp_cursor *c, const void **key, size_t *klen, const void **val, size_t *vlen)
{
	return bt_cursor_get(c->c, key, klen, val, vlen);
}

void tp_cursor_close(tp_cursor *c)
{
	if (!c)
		return;
	bt_cursor_close(c->c);
	free(c);
}

/* ---- verification ---- */

typedef struct owners {
	uint64_t *pg;
	size_t n, cap;
	int oom;
} owners;

static void own(void *ctx, uint64_t pgno)
{
	owners *o = ctx;
	if (o->oom)
		return;
	if (o->n == o->cap) {
		size_t nc = o->cap ? 2 * o->cap : 1024;
		uint64_t *np = realloc(o->pg, nc * sizeof *np);
		if (!np) {
			o->oom = 1;
			return;
		}
		o->pg = np;
		o->cap = nc;
	}
	o->pg[o->n++] = pgno;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int tp_verify(tp_env *env, int pages_ok, FILE *out)
{
	owners o = {0};
	bt_tree *cat = NULL;
	bt_cursor *c = NULL;
	bt_verify_result r, total = {0};
	uint64_t ntrees = 0;
	int rc;

	rc = catalog(env, NULL, 0, &cat);
	if (rc == TP_ENOTFOUND) {
		rc = 0;
	} else if (rc == 0) {
		if ((rc = bt_verify(cat, own, &o, &r)) != 0)
			goto out;
		if ((rc = bt_cursor_open(cat, NULL, &c)) != 0)
			goto out;
		for (rc = bt_cursor_seek(c, "", 0, BT_FIRST); rc == 0; rc = bt_cursor_next(c)) {
			const void *k, *v;
			size_t kl, vl;
			bt_tree *bt;
			bt_cursor_get(c, &k, &kl, &v, &vl);
			if (vl != 12) {
				rc = util_err(TP_ECORRUPT, "catalog: entry '%.*s' is malformed", (int)kl, (const char *)k);
				goto out;
			}
			if ((rc = bt_open(env->tm, util_get64(v), tree_cmp((int)util_get32((const unsigned char *)v + 8)),
					  &bt)) != 0)
				goto out;
			rc = bt_verify(bt, own, &o, &r);
			bt_close(bt);
			if (rc) {
				util_err(rc, "tree '%.*s': %s", (int)kl, (const char *)k, util_errmsg());
				goto out;
			}
			ntrees++;
			total.pages += r.pages;
			total.records += r.records;
			total.overflow_pages += r.overflow_pages;
			total.half_splits += r.half_splits;
			total.bytes_used += r.bytes_used;
			total.bytes_free += r.bytes_free;
		}
		if (rc != TP_ENOTFOUND)
			goto out;
		rc = 0;
	} else {
		goto out;
	}
	if (o.oom) {
		rc = ENOMEM;
		goto out;
	}
	/* every page is in at most one tree, and every allocated page in one */
	if (o.n)
		qsort(o.pg, o.n, sizeof *o.pg, cmp_u64);
	for (size_t i = 1; i < o.n; i++)
		if (o.pg[i] == o.pg[i - 1]) {
			rc = util_err(TP_ECORRUPT, "page %" PRIu64 " belongs to two places of the trees", o.pg[i]);
			goto out;
		}
	for (size_t i = 0; i < o.n; i++) {
		int a;
		if ((rc = tp_page_allocated(env, o.pg[i], &a)) != 0)
			goto out;
		if (!a) {
			rc = util_err(TP_ECORRUPT, "page %" PRIu64 " is in a tree but marked free", o.pg[i]);
			goto out;
		}
	}
	if (!pages_ok) {
		uint64_t g = op_group_pages(env->psize), npages;
		if ((rc = io_size(env->data, &npages)) != 0)
			goto out;
		npages /= env->psize;
		if (o.n && o.pg[o.n - 1] >= npages)
			npages = o.pg[o.n - 1] + 1;
		uint64_t limit = 1 + ((npages + g - 1) / g) * g; /* the end of the last group in use */
		for (uint64_t p = 1; p < limit; p++) {
			int a;
			if (op_is_bitmap(env->psize, p))
				continue;
			if ((rc = tp_page_allocated(env, p, &a)) != 0)
				goto out;
			if (a && (!o.n || !bsearch(&p, o.pg, o.n, sizeof p, cmp_u64))) {
				rc = util_err(TP_ECORRUPT, "page %" PRIu64 " is allocated but in no tree (leaked)", p);
				goto out;
			}
		}
	}
	if (out)
		fprintf(out,
			"verify: %" PRIu64 " trees, %" PRIu64 " pages (%" PRIu64 " overflow), %" PRIu64
			" records, %" PRIu64 " half splits, %.0f%% of tree page space used\n",
			ntrees, total.pages, total.overflow_pages, total.records, total.half_splits,
			total.bytes_used + total.bytes_free
				? 100.0 * (double)total.bytes_used / (double)(total.bytes_used + total.bytes_free)
				: 0.0);
out:
	bt_cursor_close(c);
	bt_close(cat);
	free(o.pg);
	return rc;
}
