/*
 * bt_cursor -- cursors over a B-link tree.
 *
 * A cursor remembers the last key it returned, not a page and slot: each
 * step searches again from the root for the next key above (or below) it,
 * so no split, delete or insert by anyone can make it lose its place or
 * return a key twice.  Forward steps follow right links from the leaf that
 * covers the key; backward steps search for the leaf holding the keys just
 * below it, and when that leaf has none, continue below its low fence.
 *
 * With a transaction each record returned is S-locked (after the latch is
 * released: P8) and read again under the lock; a record deleted meanwhile
 * is skipped.  Phantoms are not prevented here: a caller that needs a stable
 * range locks a name that covers it (the file system locks a directory).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "bt_int.h"
#include "tp.h"

struct bt_cursor {
	bt_tree *bt;
	txn *t;
	int valid;
	unsigned char *key;
	size_t klen, kcap;
	unsigned char *val;
	size_t vlen, vcap;
};

int bt_cursor_open(bt_tree *bt, txn *t, bt_cursor **out)
{
	bt_cursor *c = calloc(1, sizeof *c);
	if (!c)
		return ENOMEM;
	c->bt = bt;
	c->t = t;
	*out = c;
	return 0;
}

void bt_cursor_close(bt_cursor *c)
{
	if (!c)
		return;
	free(c->key);
	free(c->val);
	free(c);
}

static int grow(unsigned char **p, size_t *cap, size_t n)
{
	if (n <= *cap)
		return 0;
	unsigned char *q = realloc(*p, n);
	if (!q)
		return ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* Copies the record of cell into the cursor. */
static int load(bt_cursor *c, const unsigned char *cell)
{
	size_t kl = bt_cklen(cell), vl = bt_cvlen(cell);
	int rc;
	if ((rc = grow(&c->key, &c->kcap, kl)) != 0 || (rc = grow(&c->val, &c->vcap, vl ? vl : 1)) != 0)
		return rc;
	memcpy(c->key, bt_ckey(cell), kl);
	c->klen = kl;
	c->vlen = vl;
	if (bt_covf(cell))
		return bt_ovf_read(c->bt, util_get64(bt_cpayload(cell)), (uint32_t)vl, c->val, vl);
	memcpy(c->val, bt_cpayload(cell), vl);
	return 0;
}

/* The first record at or above key (strictly above when strict). */
static int find_fwd(bt_cursor *c, const void *key, size_t klen, int strict)
{
	bt_tree *bt = c->bt;
	buf_page *pg, *nx;
	int rc, found;
	if ((rc = bt_descend(bt, key, klen, 0, 0, NULL, &pg)) != 0)
		return rc;
	unsigned pos = bt_search(buf_data(pg), bt->cmp, key, klen, &found);
	if (strict && found)
		pos++;
	for (;;) {
		const unsigned char *p = buf_data(pg);
		if (pos < bt_nslots(p)) {
			rc = load(c, bt_ccell(p, pos));
			buf_put(bt->bp, pg);
			return rc;
		}
		uint64_t r = bt_right(p);
		if (!r) {
			buf_put(bt->bp, pg);
			return TP_ENOTFOUND;
		}
		if ((rc = buf_get(bt->bp, r, BUF_S, &nx)) != 0) {
			buf_put(bt->bp, pg);
			return rc;
		}
		buf_put(bt->bp, pg);
		pg = nx;
		if ((rc = bt_check_page(bt, pg)) != 0) {
			buf_put(bt->bp, pg);
			return rc;
		}
		pos = 0;
	}
}

/* The last record below key (at or below when inclusive); key NULL: the
 * last record of the tree. */
static int find_bwd(bt_cursor *c, const void *key, size_t klen, int inclusive)
{
	bt_tree *bt = c->bt;
	bt_descent d;
	unsigned char bound[LOCK_KEY_MAX];
	size_t blen = klen;
	int inf = key == NULL, rc;
	if (!inf)
		memcpy(bound, key, klen);
	for (;;) {
		buf_page *pg;
		int found;
		memset(&d, 0, offsetof(bt_descent, low));
		d.pred = 1;
		d.inf = inf;
		if ((rc = bt_descend(bt, bound, blen, 0, 0, &d, &pg)) != 0)
			return rc;
		const unsigned char *p = buf_data(pg);
		unsigned n = bt_nslots(p), pos = inf ? n : bt_search(p, bt->cmp, bound, blen, &found);
		if (!inf && inclusive && found)
			pos++;
		if (pos > 0) {
			rc = load(c, bt_ccell(p, pos - 1));
			buf_put(bt->bp, pg);
			return rc;
		}
		buf_put(bt->bp, pg);
		if (!d.have_low)
			return TP_ENOTFOUND;
		/* nothing below the bound here: look below this page's low fence */
		memcpy(bound, d.low, d.lowlen);
		blen = d.lowlen;
		inf = 0;
		inclusive = 0;
	}
}

/* Locks the record found (with a transaction) and checks it is still
 * there; *gone if it was deleted meanwhile. */
static int lock_found(bt_cursor *c, int *gone)
{
	unsigned char *v;
	size_t vl;
	int rc;
	*gone = 0;
	if (!c->t)
		return 0;
	/* bt_get takes the S lock and reads the value again under it */
	if (!(v = malloc(c->vlen ? c->vlen : 1)))
		return ENOMEM;
	rc = bt_get(c->bt, c->t, c->key, c->klen, v, c->vlen, &vl);
	if (rc == TP_ENOTFOUND) {
		*gone = 1;
		rc = 0;
	} else if (rc == 0 && vl != c->vlen) { /* changed before we locked it: reread it all */
		if ((rc = grow(&c->val, &c->vcap, vl)) == 0)
			rc = bt_get(c->bt, c->t, c->key, c->klen, c->val, vl, &vl);
		c->vlen = vl;
	} else if (rc == 0) {
		memcpy(c->val, v, vl);
	}
	free(v);
	return rc;
}

static int step(bt_cursor *c, int how, const void *key, size_t klen)
{
	for (;;) {
		int rc, gone;
		switch (how) {
		case BT_FIRST: rc = find_fwd(c, "", 0, 0); break;
		case BT_LAST: rc = find_bwd(c, NULL, 0, 0); break;
		case BT_SEEK_GE: rc = find_fwd(c, key, klen, 0); break;
		case BT_SEEK_GT: rc = find_fwd(c, key, klen, 1); break;
		case BT_SEEK_LE: /* the key itself, else the last one below it */
			rc = find_fwd(c, key, klen, 0);
			if (rc == 0 && bt_cmp(c->bt->cmp, c->key, c->klen, key, klen) == 0)
				break;
			if (rc && rc != TP_ENOTFOUND)
				break;
			rc = find_bwd(c, key, klen, 0);
			break;
		case BT_SEEK_LT: rc = find_bwd(c, key, klen, 0); break;
		default: return util_err(TP_EINVAL, "btree cursor: bad seek mode %d", how);
		}
		c->valid = rc == 0;
		if (rc)
			return rc;
		if ((rc = lock_found(c, &gone)) != 0) {
			c->valid = 0;
			return rc;
		}
		if (!gone)
			return 0;
		/* deleted before we could lock it: go on past it */
		how = how == BT_LAST || how == BT_SEEK_LE || how == BT_SEEK_LT ? BT_SEEK_LT : BT_SEEK_GT;
		key = c->key;
		klen = c->klen;
	}
}

int bt_cursor_seek(bt_cursor *c, const void *key, size_t klen, int how) { return step(c, how, key, klen); }

int bt_cursor_next(bt_cursor *c)
{
	if (!c->valid)
		return TP_ENOTFOUND;
	return step(c, BT_SEEK_GT, c->key, c->klen);
}

int bt_cursor_prev(bt_cursor *c)
{
	if (!c->valid)
		return TP_ENOTFOUND;
	return step(c, BT_SEEK_LT, c->key, c->klen);
}

int bt_cursor_get(bt_cursor *c, const void **key, size_t *klen, const void **val, size_t *vlen)
{
	if (!c->valid)
		return TP_ENOTFOUND;
	if (key)
		*key = c->key;
	if (klen)
		*klen = c->klen;
	if (val)
		*val = c->val;
	if (vlen)
		*vlen = c->vlen;
	return 0;
}
