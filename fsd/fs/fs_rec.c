/*
 * fs_rec -- records as a call sees them.  Every read and change of a record
 * of the five trees by the file-system layer goes through here, so that a
 * member of a user transaction sees its transaction's write set over the
 * committed store, and changes only the write set (fs_ws.h), while a plain
 * call reads and changes the store through its engine transaction.
 *
 *   J1  A member's call never changes the store: puts and deletes go to
 *       the write set; reads take the write set's record if it has one
 *       (a deletion mark reads as absent), else the store's (Y1).
 *   J2  A merged cursor returns, in key order, every key present in the
 *       write set or the store and not marked deleted in the write set,
 *       with the write set's value where it has one.  It is positioned by
 *       key, so records put or deleted behind or at it never make it lose
 *       its place (the engine's cursors are positioned the same way).
 *   J3  A member's reads of the store are plain reads (t == NULL) on a
 *       store with locks, and the user transaction's be_txn on a
 *       validating store (member_reads), so its commit validates them.
 */
#include "fs_int.h"

#include <errno.h>
#include <stdlib.h>

/* J3: the transaction a member's reads of the committed store go
 * through.  A store with locks: none (t == NULL, Z3): the member's locks
 * guard what it reads.  A validating store (BE_CAP_VALIDATE): the user
 * transaction's own be_txn, so that its commit validates every key and
 * range any member read (issue 28, 3); member calls are serialized by the
 * transaction's mutex (fs_tx_run), so the be_txn has one user at a time. */
static be_txn *member_reads(const fs_op *op)
{
	return be_caps_of(op->f->be)->flags & BE_CAP_VALIDATE ? op->t : NULL;
}

be_tree *fs_tree(const fs *f, int tree)
{
	switch (tree) {
	case WS_INODE: return f->inodes;
	case WS_DIRENT: return f->dirents;
	case WS_DATA: return f->data;
	case WS_XATTR: return f->xattrs;
	case WS_ORPHAN: return f->orphans;
	default: return NULL;
	}
}

int fs_rget(fs_op *op, int tree, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	size_t dummy;
	if (!vlen)
		vlen = &dummy;
	if (op->ws) { /* J1 */
		int rc = ws_get(op->ws, tree, key, klen, val, cap, vlen);
		if (rc == 1)
			return 0;
		if (rc == 0)
			return BE_ENOTFOUND;
		if (rc > 0)
			return rc;
		return be_get(member_reads(op), fs_tree(op->f, tree), key, klen, val, cap, vlen); /* J3 */
	}
	return be_get(op->t, fs_tree(op->f, tree), key, klen, val, cap, vlen);
}

static int put_flags(const fs_op *op, int tree) { return tree == WS_DATA && op->ordered ? BE_ORDERED : 0; }

int fs_rput(fs_op *op, int tree, const void *key, size_t klen, const void *val, size_t vlen)
{
	if (op->ws)
		return ws_put(op->ws, tree, key, klen, val, vlen);
	return be_put(op->t, fs_tree(op->f, tree), key, klen, val, vlen, put_flags(op, tree));
}

int fs_rins(fs_op *op, int tree, const void *key, size_t klen, const void *val, size_t vlen)
{
	if (op->ws) {
		int rc = fs_rget(op, tree, key, klen, NULL, 0, NULL);
		if (rc == 0)
			return EEXIST;
		if (rc != BE_ENOTFOUND)
			return rc;
		return ws_put(op->ws, tree, key, klen, val, vlen);
	}
	return be_put(op->t, fs_tree(op->f, tree), key, klen, val, vlen, BE_NOOVERWRITE | put_flags(op, tree));
}

int fs_rdel(fs_op *op, int tree, const void *key, size_t klen)
{
	if (op->ws) {
		int rc = fs_rget(op, tree, key, klen, NULL, 0, NULL);
		return rc ? rc : ws_put(op->ws, tree, key, klen, NULL, 0);
	}
	return be_del(op->t, fs_tree(op->f, tree), key, klen);
}

/* ---- merged cursors (J2) ---- */

#define CUR_KEY_MAX 600

struct fs_cur {
	fs_op *op;
	int tree;
	be_cursor *c;
	int crc;                 /* the store cursor: 0 positioned, else BE_ENOTFOUND or an error */
	ws_node *w;              /* the first write-set node not before the position */
	int from_ws;             /* the current record is w's */
	unsigned char key[CUR_KEY_MAX];
	size_t klen;
	const void *val;
	size_t vlen;
	unsigned char *vbuf;     /* a write-set value */
	size_t vcap;
};

int fs_cur_open(fs_op *op, int tree, fs_cur **out)
{
	fs_cur *k = calloc(1, sizeof *k);
	int rc;
	if (!k)
		return ENOMEM;
	k->op = op;
	k->tree = tree;
	k->crc = BE_ENOTFOUND;
	if ((rc = be_cursor_open(op->ws ? member_reads(op) : op->t, fs_tree(op->f, tree), &k->c)) != 0) { /* J3 */
		free(k);
		return rc;
	}
	*out = k;
	return 0;
}

void fs_cur_close(fs_cur *k)
{
	if (!k)
		return;
	be_cursor_close(k->c);
	free(k->vbuf);
	free(k);
}

static int keycmp(const void *a, size_t al, const void *b, size_t bl)
{
	size_t m = al < bl ? al : bl;
	int c = memcmp(a, b, m);
	return c ? c : (al < bl ? -1 : al > bl);
}

static int take_ws(fs_cur *k)
{
	size_t kl, vl;
	const unsigned char *key = ws_node_key(k->w, &kl);
	if (kl > CUR_KEY_MAX)
		return BE_ECORRUPT;
	memcpy(k->key, key, kl);
	k->klen = kl;
	ws_node_value(k->op->ws, k->w, NULL, 0, &vl);
	if (vl > k->vcap) {
		unsigned char *b = realloc(k->vbuf, vl);
		if (!b)
			return ENOMEM;
		k->vbuf = b;
		k->vcap = vl;
	}
	int rc = ws_node_value(k->op->ws, k->w, k->vbuf, k->vcap, &vl);
	if (rc)
		return rc;
	k->val = k->vbuf;
	k->vlen = vl;
	k->from_ws = 1;
	return 0;
}

/* Makes the current record the smaller of the two sides (J2). */
static int settle(fs_cur *k)
{
	for (;;) {
		const void *sk = NULL, *sv = NULL;
		size_t skl = 0, svl = 0;
		if (k->crc == 0)
			be_cursor_get(k->c, &sk, &skl, &sv, &svl);
		else if (k->crc != BE_ENOTFOUND)
			return k->crc;
		if (k->w) {
			size_t wkl;
			const unsigned char *wk = ws_node_key(k->w, &wkl);
			int c = sk ? keycmp(wk, wkl, sk, skl) : -1;
			if (c <= 0) {
				if (c == 0) /* the write set shadows the store (Y1) */
					k->crc = be_cursor_next(k->c);
				if (ws_node_is_del(k->w)) {
					k->w = ws_next(k->op->ws, k->w);
					continue;
				}
				return take_ws(k);
			}
		}
		if (!sk)
			return BE_ENOTFOUND;
		if (skl > CUR_KEY_MAX)
			return BE_ECORRUPT;
		memcpy(k->key, sk, skl);
		k->klen = skl;
		k->val = sv;
		k->vlen = svl;
		k->from_ws = 0;
		return 0;
	}
}

int fs_cur_seek(fs_cur *k, const void *key, size_t klen)
{
	k->crc = be_cursor_seek(k->c, key, klen, BE_SEEK_GE);
	if (!k->op->ws)
		return k->crc;
	k->w = ws_seek(k->op->ws, k->tree, key, klen, 0);
	return settle(k);
}

int fs_cur_next(fs_cur *k)
{
	if (!k->op->ws)
		return k->crc = be_cursor_next(k->c);
	/* positioned by key: both sides move past the current key */
	k->w = ws_seek(k->op->ws, k->tree, k->key, k->klen, 1);
	k->crc = be_cursor_seek(k->c, k->key, k->klen, BE_SEEK_GT);
	return settle(k);
}

void fs_cur_get(fs_cur *k, const void **key, size_t *klen, const void **val, size_t *vlen)
{
	if (!k->op->ws) {
		be_cursor_get(k->c, key, klen, val, vlen);
		return;
	}
	if (key)
		*key = k->key;
	if (klen)
		*klen = k->klen;
	if (val)
		*val = k->val;
	if (vlen)
		*vlen = k->vlen;
}
