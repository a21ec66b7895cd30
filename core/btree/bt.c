/*
 * bt -- B-link tree search, update and split.
 *
 * Design
 *   Concurrency follows Lehman and Yao's B-link tree rather than holding
 *   a path of latches: every page has a high key and a right link, so a
 *   reader that reaches a page after a concurrent split moves right until
 *   the key is below the high key.  A descent therefore holds one page's
 *   latch, and the next page's only for the moment it takes to latch it
 *   (P7; S on internal pages, S or X on the leaf); it never latches
 *   upward, and a split holds only the page being split and its new
 *   sibling.  Holding the whole path would hold a parent while waiting
 *   for a child and serialize writers at the root; with B-links a writer never blocks a reader for more than one
 *   page's update.
 *
 *   A split is two steps, each leaving a correct tree (LLADD 2.4): (1) fill
 *   a newly allocated right sibling and link it from the old page, (2) add
 *   the separator to the parent.  Step 1 is a nested top action: the page
 *   allocation and fill are ordinary records, and the final BT_LINK record on
 *   the old page is a CLR whose undo_next skips them, so once it is logged
 *   the split survives any rollback, and before it a rollback frees the page.
 *   "Skips them" means: undo goes on at txn_undo_next as the split began --
 *   inside a rollback's logical undo (a key put back into a full leaf), the
 *   record being undone, which its compensation then skips (txn.c T4).
 *   Step 2 is a single redo-only record (a CLR).  A crash between the steps
 *   leaves a half split that the right link still covers.  The root never
 *   moves: a root split copies its halves into two new pages and rewrites
 *   the root as their parent in one final CLR.
 *
 *   Records are locked (txn_lock on "K" + root + key) before their leaf is
 *   latched, and held to commit; leaf changes are logged with logical undo.
 *   A record replaced by one of the same size is logged as a BT_PATCH of
 *   the bytes that differ (LIBTP logged before and after images of the
 *   bytes changed): a TPC-B balance update logs 16 bytes of images, not
 *   two 116-byte cells.  Reads for update (bt_get_rmw) lock X at once.
 *   Inserts at the right end of a page that has no right sibling (in-order
 *   loading) split at the insertion point, leaving full pages behind
 *   (LIBTP's footnote on uneven splits).
 *
 * Invariants: P1..P6 (the pages) in bt_int.h, and
 *   P7  Latches are taken top-down and left-to-right only.
 *       A descent latches the next page before it lets go of the current
 *       one, never upward, so two descents never wait for each other in a
 *       cycle and no merge frees a page between reading a pointer and
 *       latching it.
 *   P8  No latch is held while waiting for a lock.
 *       A lock waits for a transaction's end, which may need that latch.
 *   P9  A page is reachable from its left sibling before its parent knows it.
 *       A reader that misses the parent's separator still finds the page
 *       by moving right (B-link), so a half split is a correct tree.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "bt_int.h"
#include "lock.h"
#include "op.h"
#include "tp.h"

int bt_open(txn_mgr *tm, uint64_t root, int cmp, bt_tree **out)
{
	bt_tree *bt;
	if (cmp < 0 || cmp >= BT_NCMP)
		return util_err(TP_EINVAL, "btree: unknown comparator %d", cmp);
	if (!(bt = calloc(1, sizeof *bt)))
		return ENOMEM;
	bt->tm = tm;
	bt->bp = txn_mgr_pool(tm);
	bt->root = root;
	bt->cmp = cmp;
	bt->psize = buf_page_size(bt->bp);
	/* P5: both fences take at most a quarter of the body, and every cell at
	 * most a sixth, so a page that is full has at least four cells */
	bt->max_cell = (bt->psize - BT_HDR) / 6 - 2;
	bt->max_key = (bt->psize - BT_HDR) / 8 - BT_CELL_HDR - 8;
	if (bt->max_key > LOCK_KEY_MAX - 9)
		bt->max_key = LOCK_KEY_MAX - 9;
	*out = bt;
	return 0;
}

void bt_close(bt_tree *bt) { free(bt); }
void bt_set_nolock(bt_tree *bt) { bt->nolock = 1; }
uint64_t bt_root(const bt_tree *bt) { return bt->root; }
size_t bt_max_key(const bt_tree *bt) { return bt->max_key; }
size_t bt_value_page(const bt_tree *bt) { return bt->psize - BT_OVF_HDR; }

/* A change to page pg: logged in t (as a CLR when clr), or unlogged. */
static int bt_log(bt_tree *bt, txn *t, buf_page *pg, uint16_t op, const void *a, size_t len, int clr,
		  uint64_t undo_next)
{
	if (!t)
		return txn_apply_unlogged(bt->tm, pg, op, a, (uint32_t)len);
	if (clr)
		return txn_update_clr(t, pg, op, a, (uint32_t)len, undo_next);
	return txn_update(t, pg, op, a, (uint32_t)len);
}

static int lock_key(bt_tree *bt, txn *t, const void *key, size_t klen, int mode)
{
	unsigned char name[LOCK_KEY_MAX];
	if (!t || bt->nolock)
		return 0;
	name[0] = 'K';
	util_put64(name + 1, bt->root);
	memcpy(name + 9, key, klen);
	/* the tree ('K' and its root, 9 bytes) is the parent of its keys */
	return txn_lock_child(t, name, 9, name, 9 + klen, mode);
}

int bt_check_page(bt_tree *bt, buf_page *pg)
{
	const unsigned char *p = buf_data(pg);
	uint16_t type = util_get16(p + 4);
	if ((type != BT_PT_LEAF && type != BT_PT_INTERNAL) || (type == BT_PT_LEAF) != (bt_level(p) == 0) ||
	    bt_tree_of(p) != bt->root ||
	    util_get32(p + BT_H_CSTART) > bt->psize || BT_HDR + 2u * bt_nslots(p) > util_get32(p + BT_H_CSTART))
		return util_err(TP_ECORRUPT,
				"btree %" PRIu64 ": page %" PRIu64 " is not a valid B-tree page (type 0x%04x, level %u, tree %" PRIu64
				", %u slots, cells from %" PRIu32 ")",
				bt->root, buf_pgno(pg), type, bt_level(p), bt_tree_of(p), bt_nslots(p),
				util_get32(p + BT_H_CSTART));
	return 0;
}

/* Latches the page at level `target` that covers key (moving right past
 * concurrent splits), X-latched if x.  Latches are coupled: the next page
 * is latched before the current one is released (P7), so no merge can free
 * a page between reading a pointer to it and latching it.  A page reached
 * after a latch was dropped (the X relatch) is checked against its tree,
 * level and fences, and the descent restarts if it no longer fits (P2).
 * With d->pred the page is the one holding the keys just below key (so a
 * separator equal to key leads left, and a high key equal to key does not
 * lead right), or the right edge when d->inf; d->low then receives the
 * page's low fence: every key of the page's range is at or above it. */
int bt_descend(bt_tree *bt, const void *key, size_t klen, unsigned target, int x, bt_descent *d, buf_page **out)
{
	buf_page *pg, *nx;
	int rc, held_x, pred = d && d->pred, inf = d && d->inf;

	for (int restarts = 0;; restarts++) {
		if (restarts > 1000)
			return util_err(TP_ECORRUPT, "btree %" PRIu64 ": a search keeps landing on pages that do not fit",
					bt->root);
		if (d)
			d->have_low = 0;
		held_x = 0;
		if ((rc = buf_get(bt->bp, bt->root, BUF_S, &pg)) != 0)
			return rc;
		for (;;) {
			if ((rc = bt_check_page(bt, pg)) != 0)
				goto err;
			const unsigned char *p = buf_data(pg);
			unsigned lvl = bt_level(p);
			if (lvl == target && x && !held_x) { /* relatch X: the page may change meanwhile */
				uint64_t no = buf_pgno(pg);
				buf_put(bt->bp, pg);
				if ((rc = buf_get(bt->bp, no, BUF_X, &pg)) != 0)
					return rc;
				held_x = 1;
				p = buf_data(pg);
				if (util_get16(p + 4) != (target ? BT_PT_INTERNAL : BT_PT_LEAF) || bt_tree_of(p) != bt->root ||
				    bt_level(p) != target || (!inf && !bt_in_fences(p, bt->cmp, key, klen, pred))) {
					buf_put(bt->bp, pg); /* merged away, or reused: start again */
					break;
				}
				continue;
			}
			int right;
			if (bt_hk_inf(p))
				right = 0;
			else if (inf)
				right = 1;
			else {
				int c = bt_cmp(bt->cmp, key, klen, p + util_get16(p + BT_H_HKOFF), util_get16(p + BT_H_HKLEN));
				right = pred ? c > 0 : c >= 0;
			}
			if (right) {
				uint64_t r = bt_right(p);
				if (!r) {
					rc = util_err(TP_ECORRUPT, "btree %" PRIu64 ": page %" PRIu64 " has a high key but no right sibling",
						      bt->root, buf_pgno(pg));
					goto err;
				}
				if (d) { /* the high key left behind is the new page's low fence */
					d->lowlen = util_get16(p + BT_H_HKLEN);
					memcpy(d->low, p + util_get16(p + BT_H_HKOFF), d->lowlen);
					d->have_low = 1;
				}
				if ((rc = buf_get(bt->bp, r, held_x ? BUF_X : BUF_S, &nx)) != 0)
					goto err;
				buf_put(bt->bp, pg);
				pg = nx;
				continue;
			}
			if (lvl == target) {
				*out = pg;
				return 0;
			}
			if (lvl < target) {
				rc = util_err(TP_ECORRUPT, "btree %" PRIu64 ": no level %u above page %" PRIu64, bt->root,
					      target, buf_pgno(pg));
				goto err;
			}
			uint64_t child;
			if (!pred) {
				child = bt_child_for(p, bt->cmp, key, klen);
			} else {
				int found;
				unsigned i = inf ? bt_nslots(p) : bt_search(p, bt->cmp, key, klen, &found);
				child = i == 0 ? bt_leftmost(p) : bt_cchild(bt_ccell(p, i - 1));
				if (i > 0) {
					const unsigned char *c = bt_ccell(p, i - 1);
					d->lowlen = bt_cklen(c);
					memcpy(d->low, bt_ckey(c), d->lowlen);
					d->have_low = 1;
				}
			}
			int want_x = x && lvl - 1 == target;
			if ((rc = buf_get(bt->bp, child, want_x ? BUF_X : BUF_S, &nx)) != 0)
				goto err;
			buf_put(bt->bp, pg);
			pg = nx;
			held_x = want_x;
		}
	}
err:
	buf_put(bt->bp, pg);
	return rc;
}

static int descend(bt_tree *bt, const void *key, size_t klen, unsigned target, int x, buf_page **out)
{
	return bt_descend(bt, key, klen, target, x, NULL, out);
}

/* The leaf that covers key, latched (X if x): the leaf the last search of
 * this tree ended in, when it still covers key -- checked as a page reached
 * through a stale pointer is (P2: its type, tree, level and both fences;
 * a merge marks the page it frees as no tree's, P6) -- else a descent from
 * the root, whose leaf becomes the hint.  In-order loads and sequential
 * reads then skip almost every descent.  Nothing else is latched on entry,
 * so latching the hint first cannot deadlock. */
static int leaf_for(bt_tree *bt, const void *key, size_t klen, int x, buf_page **out)
{
	uint64_t h = __atomic_load_n(&bt->hint, __ATOMIC_RELAXED);
	buf_page *pg;
	int rc;
	/* checked under S first: the hint may name any page by now, an
	 * ordered data page among them, and an X latch on one would make the
	 * log's barrier take it for reused and skip it (buf.c, take_unlogged);
	 * only a page that fits, which an ordered page never does, is then
	 * latched X */
	for (int mode = BUF_S; h && buf_get(bt->bp, h, mode, &pg) == 0;) {
		const unsigned char *p = buf_data(pg);
		int fits = util_get16(p + 4) == BT_PT_LEAF && bt_tree_of(p) == bt->root && bt_level(p) == 0 &&
			   bt_in_fences(p, bt->cmp, key, klen, 0) &&
			   (bt_hk_inf(p) ||
			    bt_cmp(bt->cmp, key, klen, p + util_get16(p + BT_H_HKOFF), util_get16(p + BT_H_HKLEN)) < 0);
		if (fits && (!x || mode == BUF_X)) {
			*out = pg;
			return 0;
		}
		buf_put(bt->bp, pg);
		if (!fits || mode == BUF_X)
			break;
		mode = BUF_X; /* it fits: latch it X and check again */
	}
	if ((rc = descend(bt, key, klen, 0, x, &pg)) != 0)
		return rc;
	__atomic_store_n(&bt->hint, buf_pgno(pg), __ATOMIC_RELAXED);
	*out = pg;
	return 0;
}

/* ---- overflow values ---- */

/* Bytes at off of page pgno, just allocated by t: a logged PAGE_FILL, or
 * unlogged without t. */
static int raw_set(bt_tree *bt, txn *t, uint64_t pgno, uint32_t off, const void *data, size_t len)
{
	if (t)
		return op_page_fill(t, pgno, off, data, (uint32_t)len);
	unsigned char *a = calloc(1, 4 + 2 * len);
	buf_page *pg;
	int rc;
	if (!a)
		return ENOMEM;
	util_put16(a, (uint16_t)off);
	util_put16(a + 2, (uint16_t)len);
	memcpy(a + 4 + len, data, len);
	if ((rc = buf_get(bt->bp, pgno, BUF_X, &pg)) == 0) {
		rc = txn_apply_unlogged(bt->tm, pg, OP_PAGE_SET, a, (uint32_t)(4 + 2 * len));
		buf_put(bt->bp, pg);
	}
	free(a);
	return rc;
}

/* An overflow page of ordered data (op.h): its bytes are not logged. */
static int ovf_page_ordered(txn *t, uint64_t next, const unsigned char *part, size_t n, uint64_t *pgno)
{
	buf_page *pg;
	int rc = op_page_alloc_ordered(t, BT_PT_OVERFLOW, (uint32_t)(BT_OVF_HDR + n), pgno, &pg);
	if (rc)
		return rc;
	unsigned char *p = buf_data(pg);
	util_put64(p + BUF_HDR, next);
	util_put32(p + BUF_HDR + 8, (uint32_t)n);
	memcpy(p + BT_OVF_HDR, part, n);
	return op_page_ordered_done(t, pg);
}

static int ovf_write(bt_tree *bt, txn *t, const unsigned char *val, size_t vlen, int ordered, uint64_t *first)
{
	size_t per = bt->psize - BT_OVF_HDR, nparts = (vlen + per - 1) / per;
	uint64_t next = 0;
	int rc = 0;
	/* written back to front, so each page knows its successor */
	for (size_t i = nparts; i-- > 0;) {
		uint64_t pgno;
		size_t off = i * per, n = vlen - off < per ? vlen - off : per;
		unsigned char hdr[12];
		if (t && ordered) {
			if ((rc = ovf_page_ordered(t, next, val + off, n, &pgno)) != 0)
				return rc;
			next = pgno;
			continue;
		}
		if ((rc = t ? op_page_alloc(t, BT_PT_OVERFLOW, &pgno) : op_page_alloc_unlogged(bt->tm, BT_PT_OVERFLOW, &pgno)) != 0)
			return rc;
		util_put64(hdr, next);
		util_put32(hdr + 8, (uint32_t)n);
		if ((rc = raw_set(bt, t, pgno, BUF_HDR, hdr, 12)) != 0 ||
		    (rc = raw_set(bt, t, pgno, BT_OVF_HDR, val + off, n)) != 0)
			return rc;
		next = pgno;
	}
	*first = next;
	return 0;
}

/* Reads an overflow chain into out (up to cap bytes). */
int bt_ovf_read(bt_tree *bt, uint64_t pgno, uint32_t vlen, void *out, size_t cap)
{
	size_t done = 0;
	while (done < vlen) {
		buf_page *pg;
		int rc;
		if (!pgno)
			return util_err(TP_ECORRUPT, "btree %" PRIu64 ": overflow chain ends %zu bytes short of %" PRIu32,
					bt->root, (size_t)(vlen - done), vlen);
		if ((rc = buf_get(bt->bp, pgno, BUF_S | BUF_DATA, &pg)) != 0)
			return rc;
		const unsigned char *p = buf_data(pg);
		uint32_t n = util_get32(p + BUF_HDR + 8);
		if (util_get16(p + 4) != BT_PT_OVERFLOW || n > bt->psize - BT_OVF_HDR || n > vlen - done) {
			buf_put(bt->bp, pg);
			return util_err(TP_ECORRUPT, "btree %" PRIu64 ": page %" PRIu64 " is not a valid overflow page",
					bt->root, pgno);
		}
		if (done < cap)
			memcpy((unsigned char *)out + done, p + BT_OVF_HDR, n < cap - done ? n : cap - done);
		done += n;
		pgno = util_get64(p + BUF_HDR);
		buf_put(bt->bp, pg);
	}
	return 0;
}

static int ovf_free(bt_tree *bt, txn *t, uint64_t pgno)
{
	while (pgno) {
		buf_page *pg;
		int rc;
		if ((rc = buf_get(bt->bp, pgno, BUF_S, &pg)) != 0)
			return rc;
		uint64_t next = util_get64(buf_data(pg) + BUF_HDR);
		buf_put(bt->bp, pg);
		if ((rc = t ? op_page_free(t, pgno) : op_page_free_unlogged(bt->tm, pgno)) != 0)
			return rc;
		pgno = next;
	}
	return 0;
}

/* ---- split ---- */

static int insert_parent(bt_tree *bt, txn *t, unsigned level, const void *sep, size_t seplen, uint64_t child);
static int merge(bt_tree *bt, txn *t, unsigned level, const void *key, size_t klen);
static int collapse_root(bt_tree *bt, txn *t);
static size_t used_bytes(const bt_tree *bt, const unsigned char *p);

/* Where to split page p (n >= 4 cells, P5): the first slot that moves
 * right.  For an append (an insertion past the last cell of the rightmost
 * leaf: keys arriving in order) only the last cell moves, so the pages left
 * behind stay full (LIBTP's uneven split). */
static unsigned split_point(const unsigned char *p, unsigned ins, int append)
{
	unsigned n = bt_nslots(p), level = bt_level(p);
	if (append && ins == n && !bt_right(p) && level == 0)
		return n - 1;
	size_t total = 0, half, acc = 0;
	for (unsigned i = 0; i < n; i++)
		total += bt_csize(bt_ccell(p, i), level) + 2;
	half = total / 2;
	unsigned k = 0;
	while (k < n && acc + bt_csize(bt_ccell(p, k), level) + 2 <= half) {
		acc += bt_csize(bt_ccell(p, k), level) + 2;
		k++;
	}
	if (level) { /* the middle cell moves up: keep one on each side */
		if (k < 1)
			k = 1;
		if (k > n - 2)
			k = n - 2;
	} else {
		if (k < 1)
			k = 1;
		if (k > n - 1)
			k = n - 1;
	}
	return k;
}

static int alloc_page(bt_tree *bt, txn *t, unsigned level, uint64_t *pgno)
{
	uint16_t type = level ? BT_PT_INTERNAL : BT_PT_LEAF;
	return t ? op_page_alloc(t, type, pgno) : op_page_alloc_unlogged(bt->tm, type, pgno);
}

/* The cells [from, to) of page p, as pointers. */
static const unsigned char **cells_of(const unsigned char *p, unsigned from, unsigned to)
{
	const unsigned char **v = malloc((to - from + 1) * sizeof *v);
	if (v)
		for (unsigned i = from; i < to; i++)
			v[i - from] = bt_ccell(p, i);
	return v;
}

/* Logs op (BT_INIT or BT_REWRITE) building page no (X-latched pg, or
 * latched here when pg is NULL) with shape s and cells. */
static int build_page(bt_tree *bt, txn *t, buf_page *pg, uint64_t no, const bt_shape *s,
		      const unsigned char *const *cells, unsigned n, int clr, uint64_t undo_next)
{
	unsigned char *a = malloc(2 * bt->psize + 4 * LOCK_KEY_MAX);
	buf_page *own = NULL;
	int rc;
	if (!a)
		return ENOMEM;
	if (!pg) {
		if ((rc = buf_get(bt->bp, no, BUF_X, &own)) != 0) {
			free(a);
			return rc;
		}
		pg = own;
	}
	size_t len = bt_init_args(a, s, cells, n);
	rc = bt_log(bt, t, pg, OP_BT_INIT, a, len, clr, undo_next);
	if (own)
		buf_put(bt->bp, own);
	free(a);
	return rc;
}

/* Splits the X-latched page pg, which lacks room for an insertion at slot
 * ins; releases pg.  The caller then retries its change from the root. */
static int split(bt_tree *bt, txn *t, buf_page *pg, unsigned ins, int append)
{
	unsigned char *p = buf_data(pg), *sep = NULL;
	const unsigned char **cells = NULL;
	unsigned n = bt_nslots(p), level = bt_level(p);
	uint64_t saved = t ? txn_undo_next(t) : 0, left, right;
	bt_shape old, ls, rs;
	int rc;

	bt_shape_of(p, &old);
	unsigned k = split_point(p, ins, append);
	const unsigned char *kc = bt_ccell(p, k);
	size_t seplen = bt_cklen(kc);
	if (!(sep = malloc(seplen + 1))) {
		rc = ENOMEM;
		goto out;
	}
	memcpy(sep, bt_ckey(kc), seplen);
	unsigned move = level ? k + 1 : k; /* internal: cell k moves up */
	uint64_t mid_child = level ? bt_cchild(bt_ccell(p, k)) : 0;
	if (!(cells = cells_of(p, 0, n))) {
		rc = ENOMEM;
		goto out;
	}
	/* the right half, in either case: [sep, old high key) */
	rs = old;
	rs.leftmost = mid_child;
	rs.low = sep;
	rs.lowlen = (unsigned)seplen;

	if (buf_pgno(pg) == bt->root) {
		/* root split: both halves move to new pages; the root becomes their parent */
		if ((rc = alloc_page(bt, t, level, &left)) != 0 || (rc = alloc_page(bt, t, level, &right)) != 0)
			goto out;
		ls = old;
		ls.right = right;
		ls.hk = sep;
		ls.hklen = (unsigned)seplen;
		rs.right = 0;
		if ((rc = build_page(bt, t, NULL, left, &ls, cells, k, 0, 0)) != 0 ||
		    (rc = build_page(bt, t, NULL, right, &rs, cells + move, n - move, 0, 0)) != 0)
			goto out;
		unsigned char cell[BT_CELL_HDR + LOCK_KEY_MAX + 8];
		const unsigned char *one = cell;
		util_put16(cell, (uint16_t)seplen);
		cell[2] = cell[3] = 0;
		util_put32(cell + 4, 0);
		memcpy(cell + BT_CELL_HDR, sep, seplen);
		util_put64(cell + BT_CELL_HDR + seplen, right);
		bt_shape top = {.level = level + 1, .leftmost = left, .tree = bt->root, .lowlen = BT_HK_INF,
				.hklen = BT_HK_INF};
		rc = build_page(bt, t, pg, buf_pgno(pg), &top, &one, 1, 1, saved);
		goto out;
	}
	if ((rc = alloc_page(bt, t, level, &right)) != 0)
		goto out;
	if ((rc = build_page(bt, t, NULL, right, &rs, cells + move, n - move, 0, 0)) != 0)
		goto out;
	unsigned char *a = malloc(12 + seplen);
	if (!a) {
		rc = ENOMEM;
		goto out;
	}
	util_put16(a, (uint16_t)k);
	util_put64(a + 2, right);
	util_put16(a + 10, (uint16_t)seplen);
	memcpy(a + 12, sep, seplen);
	rc = bt_log(bt, t, pg, OP_BT_LINK, a, 12 + seplen, 1, saved); /* P9 */
	free(a);
	if (rc)
		goto out;
	buf_put(bt->bp, pg);
	pg = NULL;
	rc = insert_parent(bt, t, level + 1, sep, seplen, right);
out:
	if (pg)
		buf_put(bt->bp, pg);
	free(cells);
	free(sep);
	return rc;
}

/* Adds (sep -> child) to the page at `level` that covers sep: redo-only. */
static int insert_parent(bt_tree *bt, txn *t, unsigned level, const void *sep, size_t seplen, uint64_t child)
{
	size_t clen = BT_CELL_HDR + seplen + 8;
	unsigned char *a = malloc(BT_ARG_HDR + clen);
	buf_page *pg;
	int rc, found;
	if (!a)
		return ENOMEM;
	for (;;) {
		if ((rc = descend(bt, sep, seplen, level, 1, &pg)) != 0)
			break;
		unsigned char *p = buf_data(pg);
		unsigned slot = bt_search(p, bt->cmp, sep, seplen, &found);
		if (found) {
			buf_put(bt->bp, pg);
			rc = util_err(TP_ECORRUPT, "btree %" PRIu64 ": separator already in page %" PRIu64, bt->root,
				      buf_pgno(pg));
			break;
		}
		if (bt_free_space(p) < clen + 2) {
			if ((rc = split(bt, t, pg, slot, 0)) != 0)
				break;
			continue;
		}
		util_put64(a, bt->root);
		util_put16(a + 8, (uint16_t)bt->cmp);
		util_put16(a + 10, (uint16_t)slot);
		unsigned char *c = a + BT_ARG_HDR;
		util_put16(c, (uint16_t)seplen);
		c[2] = c[3] = 0;
		util_put32(c + 4, 0);
		memcpy(c + BT_CELL_HDR, sep, seplen);
		util_put64(c + BT_CELL_HDR + seplen, child);
		rc = bt_log(bt, t, pg, OP_BT_INSERT, a, BT_ARG_HDR + clen, 1, t ? txn_undo_next(t) : 0);
		buf_put(bt->bp, pg);
		break;
	}
	free(a);
	return rc;
}

/* ---- merge ---- */

/* Bytes of cells and slots (fences and dead space excluded). */
static size_t used_bytes(const bt_tree *bt, const unsigned char *p)
{
	size_t fences = (bt_hk_inf(p) ? 0 : util_get16(p + BT_H_HKLEN)) + (bt_lo_inf(p) ? 0 : util_get16(p + BT_H_LOLEN));
	return bt->psize - util_get32(p + BT_H_CSTART) - util_get32(p + BT_H_FRAG) - fences + 2u * bt_nslots(p);
}

/* BT_REWRITE of the X-latched page pg from its current content to shape s
 * with cells; an ordinary (undoable) record. */
static int rewrite_page(bt_tree *bt, txn *t, buf_page *pg, const bt_shape *s, const unsigned char *const *cells,
			unsigned n)
{
	const unsigned char *p = buf_data(pg);
	const unsigned char **oc = cells_of(p, 0, bt_nslots(p));
	unsigned char *a = malloc(4 * bt->psize + 8 * LOCK_KEY_MAX);
	bt_shape os;
	int rc = ENOMEM;
	if (oc && a) {
		bt_shape_of(p, &os);
		size_t olen = bt_init_args(a + 4, &os, oc, bt_nslots(p));
		util_put32(a, (uint32_t)olen);
		size_t nlen = bt_init_args(a + 4 + olen, s, cells, n);
		rc = bt_log(bt, t, pg, OP_BT_REWRITE, a, 4 + olen + nlen, 0, 0);
	}
	free(oc);
	free(a);
	return rc;
}

/* Absorbs the right sibling R of the page L at `level` that covers key into
 * L, when both fit in one page: a nested top action that
 * (1) drops R's entry from their parent P (redo-only: R stays reachable from
 * L's right link, a correct tree), (2) rewrites L with R's cells, high key
 * and right link, (3) frees R, then ends with a dummy CLR; a crash before
 * the end undoes (2) and (3).  P, L, R are latched in that order (P7), so
 * no reader can hold a pointer to R when it is freed.  If P underflows in
 * turn it is merged the same way; a root left with one child absorbs it. */
static int merge(bt_tree *bt, txn *t, unsigned level, const void *key, size_t klen)
{
	buf_page *pp = NULL, *lp = NULL, *rp = NULL;
	const unsigned char **cells = NULL;
	unsigned char *sepcell = NULL;
	int rc, found, parent_under = 0, collapse = 0;

	if ((rc = descend(bt, key, klen, level + 1, 1, &pp)) != 0)
		return rc == TP_ECORRUPT && strstr(util_errmsg(), "no level") ? 0 : rc; /* the root is at this level */
	unsigned char *p = buf_data(pp);
	unsigned n = bt_nslots(p), slot = bt_search(p, bt->cmp, key, klen, &found);
	int idx = found ? (int)slot : (int)slot - 1; /* the entry of key's page; -1: the leftmost child */
	int rslot = idx + 1 < (int)n ? idx + 1 : idx; /* R's entry */
	if (rslot < 0)
		goto out; /* an only child: nothing to merge with */
	uint64_t lno = rslot == 0 ? bt_leftmost(p) : bt_cchild(bt_ccell(p, (unsigned)rslot - 1));
	uint64_t rno = bt_cchild(bt_ccell(p, (unsigned)rslot));
	if ((rc = buf_get(bt->bp, lno, BUF_X, &lp)) != 0)
		goto out;
	if ((rc = bt_check_page(bt, lp)) != 0)
		goto out;
	const unsigned char *l = buf_data(lp);
	if (bt_right(l) != rno || bt_level(l) != level)
		goto out; /* a half split between them: leave it */
	if ((rc = buf_get(bt->bp, rno, BUF_X, &rp)) != 0)
		goto out;
	if ((rc = bt_check_page(bt, rp)) != 0)
		goto out;
	const unsigned char *r = buf_data(rp);
	const unsigned char *rentry = bt_ccell(p, (unsigned)rslot);
	size_t seplen = bt_cklen(rentry);
	size_t need = used_bytes(bt, l) + used_bytes(bt, r) + (level ? BT_CELL_HDR + seplen + 8 + 2 : 0) +
		      (bt_lo_inf(l) ? 0 : util_get16(l + BT_H_LOLEN)) + (bt_hk_inf(r) ? 0 : util_get16(r + BT_H_HKLEN));
	if (need > bt->psize - BT_HDR)
		goto out; /* does not fit in one page */
	unsigned nl = bt_nslots(l), nr = bt_nslots(r), nc = 0;
	if (!(cells = malloc((nl + nr + 1) * sizeof *cells)) || !(sepcell = malloc(BT_CELL_HDR + seplen + 8))) {
		rc = ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < nl; i++)
		cells[nc++] = bt_ccell(l, i);
	if (level) { /* the separator comes down, pointing at R's leftmost child */
		util_put16(sepcell, (uint16_t)seplen);
		sepcell[2] = sepcell[3] = 0;
		util_put32(sepcell + 4, 0);
		memcpy(sepcell + BT_CELL_HDR, bt_ckey(rentry), seplen);
		util_put64(sepcell + BT_CELL_HDR + seplen, bt_leftmost(r));
		cells[nc++] = sepcell;
	}
	for (unsigned i = 0; i < nr; i++)
		cells[nc++] = bt_ccell(r, i);
	bt_shape ls, rs;
	bt_shape_of(l, &ls);
	bt_shape_of(r, &rs);
	ls.hk = rs.hk;
	ls.hklen = rs.hklen;
	ls.right = rs.right;

	uint64_t saved = t ? txn_undo_next(t) : 0;
	/* (1) the parent forgets R: redo-only */
	unsigned char *a = malloc(BT_ARG_HDR + BT_CELL_HDR + seplen + 8);
	if (!a) {
		rc = ENOMEM;
		goto out;
	}
	size_t esz = bt_csize(rentry, level + 1);
	util_put64(a, bt->root);
	util_put16(a + 8, (uint16_t)bt->cmp);
	util_put16(a + 10, (uint16_t)rslot);
	memcpy(a + BT_ARG_HDR, rentry, esz);
	rc = bt_log(bt, t, pp, OP_BT_DELETE, a, BT_ARG_HDR + esz, 1, saved);
	free(a);
	if (rc)
		goto out;
	/* (2) L takes R's cells, (3) R is freed, then the action ends */
	if ((rc = rewrite_page(bt, t, lp, &ls, cells, nc)) != 0)
		goto out;
	/* P6: R belongs to no tree now, so a search that reaches it through a
	 * stale pointer or a hint (its old fences still fit) starts again */
	bt_shape dead = rs;
	dead.tree = 0;
	if ((rc = rewrite_page(bt, t, rp, &dead, NULL, 0)) != 0)
		goto out;
	buf_put(bt->bp, rp);
	rp = NULL;
	if ((rc = t ? op_page_free(t, rno) : op_page_free_unlogged(bt->tm, rno)) != 0)
		goto out;
	if (t && (rc = txn_nta_end(t, saved)) != 0)
		goto out;
	p = buf_data(pp);
	parent_under = buf_pgno(pp) != bt->root && used_bytes(bt, p) < (bt->psize - BT_HDR) / 4;
	collapse = buf_pgno(pp) == bt->root && bt_nslots(p) == 0;
out:
	if (rp)
		buf_put(bt->bp, rp);
	if (lp)
		buf_put(bt->bp, lp);
	if (pp)
		buf_put(bt->bp, pp);
	free(cells);
	free(sepcell);
	if (!rc && parent_under)
		rc = merge(bt, t, level + 1, key, klen);
	if (!rc && collapse)
		rc = collapse_root(bt, t);
	return rc;
}

/* A root with no key left and one child takes that child's content (the
 * tree gets one level lower), as a nested top action. */
static int collapse_root(bt_tree *bt, txn *t)
{
	buf_page *rootp, *cp = NULL;
	const unsigned char **cells = NULL;
	int rc;
	if ((rc = buf_get(bt->bp, bt->root, BUF_X, &rootp)) != 0)
		return rc;
	const unsigned char *p = buf_data(rootp);
	if (bt_level(p) == 0 || bt_nslots(p) != 0)
		goto out; /* changed meanwhile */
	uint64_t cno = bt_leftmost(p);
	if ((rc = buf_get(bt->bp, cno, BUF_X, &cp)) != 0 || (rc = bt_check_page(bt, cp)) != 0)
		goto out;
	const unsigned char *c = buf_data(cp);
	if (bt_right(c) != 0) /* a half-split child: not alone after all */
		goto out;
	if (!(cells = cells_of(c, 0, bt_nslots(c)))) {
		rc = ENOMEM;
		goto out;
	}
	bt_shape s;
	bt_shape_of(c, &s);
	uint64_t saved = t ? txn_undo_next(t) : 0;
	if ((rc = rewrite_page(bt, t, rootp, &s, cells, bt_nslots(c))) != 0)
		goto out;
	bt_shape dead = s; /* P6 */
	dead.tree = 0;
	if ((rc = rewrite_page(bt, t, cp, &dead, NULL, 0)) != 0)
		goto out;
	buf_put(bt->bp, cp);
	cp = NULL;
	if ((rc = t ? op_page_free(t, cno) : op_page_free_unlogged(bt->tm, cno)) != 0)
		goto out;
	if (t)
		rc = txn_nta_end(t, saved);
out:
	if (cp)
		buf_put(bt->bp, cp);
	buf_put(bt->bp, rootp);
	free(cells);
	return rc;
}

/* ---- leaf changes ---- */

/* The size of a BT_PATCH's arguments for n bytes of cell c (the page's);
 * patch_args fills them, but their header: bytes [off, off + n) from c's
 * to nb's. */
static size_t patch_len(const unsigned char *c, size_t n) { return BT_ARG_HDR + 2 + bt_cklen(c) + 8 + 2 * n; }

static void patch_args(unsigned char *a, const unsigned char *c, size_t off, size_t n, const unsigned char *nb)
{
	size_t klen = bt_cklen(c);
	unsigned char *q = a + BT_ARG_HDR; /* (the header: leaf_change) */
	util_put16(q, (uint16_t)klen);
	memcpy(q + 2, bt_ckey(c), klen);
	q += 2 + klen;
	util_put32(q, (uint32_t)off);
	util_put32(q + 4, (uint32_t)n);
	memcpy(q + 8, c + off, n);
	memcpy(q + 8 + n, nb, n);
}

/* Arguments and cells up to this size are built on the stack. */
#define BT_STACK_BUF 512

/* Applies what (insert, delete, replace; patch: a compensation) of cell to
 * the leaf holding its key.  A replace by a cell of the same size is logged
 * as a BT_PATCH of the bytes that differ (none: nothing is logged).
 * *old_ovf (when old_ovf is non-NULL) receives the first overflow page of
 * the value replaced or deleted, 0 when it was inline or there was none:
 * the caller frees those pages.  clr: log as a CLR with undo_next.  For
 * BT_DO_PATCH, cell is u16 klen, key, u32 off, u32 n, n bytes to put at
 * off in the key's cell. */
static int leaf_change(bt_tree *bt, txn *t, int what, const unsigned char *cell, size_t len, int flags, int clr,
		       uint64_t undo_next, uint64_t *old_ovf, int *underflow)
{
	unsigned char abuf[BT_STACK_BUF];
	const void *key = what == BT_DO_PATCH ? cell + 2 : bt_ckey(cell);
	size_t klen = what == BT_DO_PATCH ? util_get16(cell) : bt_cklen(cell);
	unsigned char *a = NULL;
	buf_page *pg;
	int rc, found;

	for (;;) {
		if ((rc = leaf_for(bt, key, klen, 1, &pg)) != 0)
			return rc;
		unsigned char *p = buf_data(pg);
		unsigned slot = bt_search(p, bt->cmp, key, klen, &found);
		int op = what;
		if (op == BT_DO_INSERT && found) {
			if (flags & BT_NOOVERWRITE) {
				buf_put(bt->bp, pg);
				return EEXIST;
			}
			op = BT_DO_REPLACE;
		}
		if ((op == BT_DO_DELETE || op == BT_DO_REPLACE || op == BT_DO_PATCH) && !found) {
			buf_put(bt->bp, pg);
			return TP_ENOTFOUND;
		}
		size_t osz = found ? bt_csize(bt_ccell(p, slot), 0) : 0;
		/* a patch: bytes [off, off + n) of the cell become nb's */
		size_t off = 0, n = 0;
		const unsigned char *nb = NULL;
		if (op == BT_DO_PATCH) {
			off = util_get32(cell + 2 + klen);
			n = util_get32(cell + 2 + klen + 4);
			nb = cell + 2 + klen + 8;
			if (off + n > osz) {
				buf_put(bt->bp, pg);
				return util_err(TP_ECORRUPT, "btree %" PRIu64 ": a patch of bytes %zu..%zu of a %zu-byte cell",
						bt->root, off, off + n, osz);
			}
		} else if (op == BT_DO_REPLACE && len == osz) { /* the bytes that differ */
			const unsigned char *c = bt_ccell(p, slot);
			size_t lo = 0, hi = len;
			while (lo + 8 <= len && util_get64(c + lo) == util_get64(cell + lo))
				lo += 8;
			while (lo < len && c[lo] == cell[lo])
				lo++;
			while (hi >= lo + 8 && util_get64(c + hi - 8) == util_get64(cell + hi - 8))
				hi -= 8;
			while (hi > lo && c[hi - 1] == cell[hi - 1])
				hi--;
			op = BT_DO_PATCH;
			off = lo;
			n = hi - lo;
			nb = cell + lo;
		}
		size_t need = op == BT_DO_INSERT ? len + 2 : op == BT_DO_REPLACE && len > osz ? len - osz : 0;
		if (bt_free_space(p) < need) {
			if (bt_nslots(p) == 0) { /* P5 makes this impossible */
				buf_put(bt->bp, pg);
				return util_err(TP_ECORRUPT, "btree %" PRIu64 ": page %" PRIu64 " cannot hold one cell",
						bt->root, buf_pgno(pg));
			}
			if ((rc = split(bt, t, pg, slot, (flags & BT_APPEND) || slot == bt_nslots(p))) != 0)
				return rc;
			continue;
		}
		if (old_ovf)
			*old_ovf = found && bt_covf(bt_ccell(p, slot)) ? util_get64(bt_cpayload(bt_ccell(p, slot))) : 0;
		if (op == BT_DO_PATCH && n == 0) { /* the same bytes: nothing to change */
			if (underflow)
				*underflow = 0;
			buf_put(bt->bp, pg);
			return 0;
		}
		size_t alen = op == BT_DO_PATCH ? patch_len(bt_ccell(p, slot), n)
						: BT_ARG_HDR + (op == BT_DO_REPLACE ? 4 + osz + len : op == BT_DO_DELETE ? osz : len);
		a = alen <= sizeof abuf ? abuf : malloc(alen);
		if (!a) {
			buf_put(bt->bp, pg);
			return ENOMEM;
		}
		if (op == BT_DO_PATCH)
			patch_args(a, bt_ccell(p, slot), off, n, nb);
		util_put64(a, bt->root);
		util_put16(a + 8, (uint16_t)bt->cmp);
		util_put16(a + 10, (uint16_t)slot);
		uint16_t type = OP_BT_PATCH; /* (its arguments filled by patch_args) */
		if (op == BT_DO_INSERT) {
			memcpy(a + BT_ARG_HDR, cell, len);
			type = OP_BT_INSERT;
		} else if (op == BT_DO_DELETE) {
			memcpy(a + BT_ARG_HDR, bt_ccell(p, slot), osz);
			type = OP_BT_DELETE;
		} else if (op == BT_DO_REPLACE) {
			util_put32(a + BT_ARG_HDR, (uint32_t)osz);
			memcpy(a + BT_ARG_HDR + 4, bt_ccell(p, slot), osz);
			memcpy(a + BT_ARG_HDR + 4 + osz, cell, len);
			type = OP_BT_REPLACE;
		}
		rc = bt_log(bt, t, pg, type, a, alen, clr, undo_next);
		if (underflow)
			*underflow = !rc && buf_pgno(pg) != bt->root && used_bytes(bt, p) < (bt->psize - BT_HDR) / 4;
		buf_put(bt->bp, pg);
		if (a != abuf)
			free(a);
		return rc;
	}
}

int bt_compensate(txn *t, uint64_t root, int cmp, int what, const unsigned char *cell, size_t len, uint64_t undo_next)
{
	bt_tree *bt;
	int rc = bt_open(txn_mgr_of(t), root, cmp, &bt);
	if (rc)
		return rc;
	rc = leaf_change(bt, t, what, cell, len, what == BT_DO_INSERT ? BT_NOOVERWRITE : 0, 1, undo_next, NULL, NULL);
	if (rc == TP_ENOTFOUND || rc == EEXIST)
		rc = util_err(TP_ECORRUPT, "btree %" PRIu64 ": undo found the tree without the change it undoes", root);
	bt_close(bt);
	return rc;
}

/* ---- the interface ---- */

int bt_create(txn *t, uint64_t *root)
{
	unsigned char a[64];
	buf_page *pg;
	int rc;
	if ((rc = op_page_alloc(t, BT_PT_LEAF, root)) != 0)
		return rc;
	bt_shape s = {.tree = *root, .lowlen = BT_HK_INF, .hklen = BT_HK_INF};
	size_t len = bt_init_args(a, &s, NULL, 0);
	if ((rc = buf_get(txn_pool(t), *root, BUF_X, &pg)) != 0)
		return rc;
	rc = txn_update(t, pg, OP_BT_INIT, a, (uint32_t)len);
	buf_put(txn_pool(t), pg);
	return rc;
}

static int check_key(bt_tree *bt, size_t klen)
{
	if (klen == 0 || klen > bt->max_key)
		return util_err(TP_EINVAL, "btree %" PRIu64 ": key of %zu bytes (allowed 1..%zu)", bt->root, klen,
				bt->max_key);
	return 0;
}

static int get(bt_tree *bt, txn *t, const void *key, size_t klen, void *val, size_t cap, size_t *vlen, int mode)
{
	buf_page *pg;
	int rc, found;
	if ((rc = check_key(bt, klen)) != 0 || (rc = lock_key(bt, t, key, klen, mode)) != 0)
		return rc;
	if ((rc = leaf_for(bt, key, klen, 0, &pg)) != 0)
		return rc;
	const unsigned char *p = buf_data(pg);
	unsigned slot = bt_search(p, bt->cmp, key, klen, &found);
	if (!found) {
		buf_put(bt->bp, pg);
		return TP_ENOTFOUND;
	}
	const unsigned char *c = bt_ccell(p, slot);
	uint32_t n = bt_cvlen(c);
	if (vlen)
		*vlen = n;
	if (bt_covf(c))
		rc = cap ? bt_ovf_read(bt, util_get64(bt_cpayload(c)), n, val, cap) : 0; /* cap 0: no page read */
	else if (val)
		memcpy(val, bt_cpayload(c), n < cap ? n : cap);
	buf_put(bt->bp, pg);
	return rc;
}

int bt_get(bt_tree *bt, txn *t, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	return get(bt, t, key, klen, val, cap, vlen, LOCK_S);
}

int bt_get_rmw(bt_tree *bt, txn *t, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	return get(bt, t, key, klen, val, cap, vlen, LOCK_X);
}

void bt_prefetch(bt_tree *bt, const void *lo, size_t lolen, const void *hi, size_t hilen)
{
	buf_page *pg;
	uint64_t leaves[64];
	int n = 0, found;
	if (check_key(bt, lolen) != 0 || check_key(bt, hilen) != 0 || buf_get(bt->bp, bt->root, BUF_S, &pg) != 0)
		return;
	int leaf = bt_level(buf_data(pg)) == 0;
	buf_put(bt->bp, pg);
	if (leaf || bt_descend(bt, lo, lolen, 1, 0, NULL, &pg) != 0)
		return; /* (a root that is the leaf: in memory already) */
	const unsigned char *p = buf_data(pg);
	unsigned i = bt_search(p, bt->cmp, lo, lolen, &found), ns = bt_nslots(p);
	long k = found ? (long)i : (long)i - 1; /* the child that covers lo; -1: the leftmost */
	for (long first = k; k < (long)ns && n < 64; k++) {
		if (k < 0) {
			leaves[n++] = bt_leftmost(p);
			continue;
		}
		const unsigned char *c = bt_ccell(p, (unsigned)k);
		if (k > first && bt_cmp(bt->cmp, bt_ckey(c), bt_cklen(c), hi, hilen) > 0)
			break;
		leaves[n++] = bt_cchild(c);
	}
	buf_put(bt->bp, pg);
	for (int j = 0; j < n; j++)
		buf_prefetch(bt->bp, leaves[j]);
}

/* A byte range of an overflow page to change in place. */
typedef struct patch {
	uint64_t pgno;
	uint32_t off, len; /* off: in the page */
	size_t at;         /* in the value */
} patch;

#define PATCH_GAP 48 /* bytes alike between two differing runs that one record still covers */

/* The differing runs of page bytes old[0..n) and new[0..n) (value offset
 * at) appended to *v; the bytes they cover added to *changed. */
static int diff_runs(uint64_t pgno, const unsigned char *old, const unsigned char *nw, size_t n, size_t at, patch **v,
		     size_t *nv, size_t *cap, size_t *changed)
{
	size_t i = 0;
	while (i < n) {
		while (i < n && old[i] == nw[i])
			i++;
		if (i == n)
			break;
		size_t start = i, end = i + 1, same = 0;
		for (i = end; i < n && same <= PATCH_GAP; i++)
			if (old[i] == nw[i]) {
				same++;
			} else {
				same = 0;
				end = i + 1;
			}
		i = end;
		if (*nv == *cap) {
			size_t nc = *cap ? 2 * *cap : 8;
			patch *nvv = realloc(*v, nc * sizeof *nvv);
			if (!nvv)
				return ENOMEM;
			*v = nvv;
			*cap = nc;
		}
		(*v)[(*nv)++] = (patch){.pgno = pgno, .off = (uint32_t)(BT_OVF_HDR + start), .len = (uint32_t)(end - start),
					.at = at + start};
		*changed += end - start;
	}
	return 0;
}

/* BT_PATCH: key's value, vlen bytes in overflow pages already, becomes val
 * by byte-range updates (OP_PAGE_SET: before and after images of just
 * those bytes) of the pages where the two differ, not by a new chain: a
 * small change to a large value logs little.  The chain belongs to this key
 * alone, which t holds X-locked (or, nolock, its caller's lock covers), so
 * the physical undo of those updates is right wherever the cell has moved
 * since.  A page that may hold bytes no record has (ordered data) gets a
 * full-page image logged first (op_page_patch, B12), and one whose
 * ordered bytes are not written yet is left alone.  EAGAIN: not
 * applicable (the key absent, its value inline or of another length, most
 * bytes changed, such a page) -- the caller writes a new chain. */
static int put_in_place(bt_tree *bt, txn *t, const void *key, size_t klen, const unsigned char *val, size_t vlen)
{
	buf_page *pg;
	int rc, found;
	if ((rc = leaf_for(bt, key, klen, 0, &pg)) != 0)
		return rc;
	const unsigned char *p = buf_data(pg);
	unsigned slot = bt_search(p, bt->cmp, key, klen, &found);
	uint64_t pgno = 0;
	if (found) {
		const unsigned char *c = bt_ccell(p, slot);
		if (bt_covf(c) && bt_cvlen(c) == vlen)
			pgno = util_get64(bt_cpayload(c));
	}
	buf_put(bt->bp, pg);
	if (!pgno)
		return EAGAIN;
	patch *v = NULL;
	size_t nv = 0, cap = 0, changed = 0, done = 0;
	while (done < vlen && !rc) { /* the runs, and whether every page may take them */
		if (!pgno) {
			rc = util_err(TP_ECORRUPT, "btree %" PRIu64 ": overflow chain ends %zu bytes short of %zu", bt->root,
				      vlen - done, vlen);
			break;
		}
		if ((rc = buf_get(bt->bp, pgno, BUF_S, &pg)) != 0)
			break;
		p = buf_data(pg);
		uint32_t n = util_get32(p + BUF_HDR + 8);
		if (util_get16(p + 4) != BT_PT_OVERFLOW || n > bt->psize - BT_OVF_HDR || n > vlen - done)
			rc = util_err(TP_ECORRUPT, "btree %" PRIu64 ": page %" PRIu64 " is not a valid overflow page",
				      bt->root, pgno);
		else if (buf_unwritten(bt->bp, pg))
			rc = EAGAIN; /* no X latch on it before it is written (B12) */
		else
			rc = diff_runs(pgno, p + BT_OVF_HDR, val + done, n, done, &v, &nv, &cap, &changed);
		uint64_t next = util_get64(p + BUF_HDR);
		buf_put(bt->bp, pg);
		done += n;
		pgno = next;
	}
	if (!rc && 2 * changed > vlen)
		rc = EAGAIN; /* a new chain logs no more */
	for (size_t i = 0; i < nv && !rc; i++)
		rc = op_page_patch(t, v[i].pgno, v[i].off, val + v[i].at, v[i].len);
	free(v);
	return rc;
}

int bt_put(bt_tree *bt, txn *t, const void *key, size_t klen, const void *val, size_t vlen, int flags)
{
	unsigned char cbuf[BT_STACK_BUF], *cell;
	size_t clen;
	uint64_t ovf = 0, old_ovf = 0;
	int rc;

	if ((rc = check_key(bt, klen)) != 0)
		return rc;
	if (vlen > UINT32_MAX)
		return util_err(EFBIG, "btree %" PRIu64 ": value of %zu bytes is too large", bt->root, vlen);
	if ((rc = lock_key(bt, t, key, klen, LOCK_X)) != 0)
		return rc;
	int inline_val = BT_CELL_HDR + klen + vlen <= bt->max_cell;
	if (t && !inline_val && (flags & BT_PATCH) && !(flags & BT_NOOVERWRITE) &&
	    (rc = put_in_place(bt, t, key, klen, val, vlen)) != EAGAIN)
		return rc;
	clen = BT_CELL_HDR + klen + (inline_val ? vlen : 8);
	if (!(cell = clen <= sizeof cbuf ? cbuf : malloc(clen)))
		return ENOMEM;
	if (!inline_val && (rc = ovf_write(bt, t, val, vlen, flags & BT_ORDERED, &ovf)) != 0)
		goto out;
	util_put16(cell, (uint16_t)klen);
	cell[2] = inline_val ? 0 : BT_CF_OVF;
	cell[3] = 0;
	util_put32(cell + 4, (uint32_t)vlen);
	memcpy(cell + BT_CELL_HDR, key, klen);
	if (inline_val)
		memcpy(cell + BT_CELL_HDR + klen, val, vlen);
	else
		util_put64(cell + BT_CELL_HDR + klen, ovf);
	rc = leaf_change(bt, t, BT_DO_INSERT, cell, clen, flags, 0, 0, &old_ovf, NULL);
	if (rc == 0 && old_ovf) /* the replaced value's pages */
		rc = ovf_free(bt, t, old_ovf);
	if (rc && ovf) /* the new value's pages, written before the leaf refused it */
		(void)ovf_free(bt, t, ovf);
out:
	if (cell != cbuf)
		free(cell);
	return rc;
}

int bt_delete(bt_tree *bt, txn *t, const void *key, size_t klen)
{
	unsigned char cell[BT_CELL_HDR + LOCK_KEY_MAX];
	uint64_t old_ovf = 0;
	int rc;
	if ((rc = check_key(bt, klen)) != 0 || (rc = lock_key(bt, t, key, klen, LOCK_X)) != 0)
		return rc;
	util_put16(cell, (uint16_t)klen);
	cell[2] = cell[3] = 0;
	util_put32(cell + 4, 0);
	memcpy(cell + BT_CELL_HDR, key, klen);
	int under = 0;
	rc = leaf_change(bt, t, BT_DO_DELETE, cell, BT_CELL_HDR + klen, 0, 0, 0, &old_ovf, &under);
	if (rc == 0 && old_ovf)
		rc = ovf_free(bt, t, old_ovf);
	if (rc == 0 && under)
		rc = merge(bt, t, 0, key, klen);
	return rc;
}

/* Frees the pages of one level, starting at pgno; *down is the first page
 * of the level below (0 at the leaves). */
static int drop_level(bt_tree *bt, txn *t, uint64_t pgno, uint64_t *down)
{
	int rc = 0;
	*down = 0;
	while (pgno) {
		buf_page *pg;
		if ((rc = buf_get(bt->bp, pgno, BUF_S, &pg)) != 0)
			return rc;
		const unsigned char *p = buf_data(pg);
		unsigned lvl = bt_level(p), n = bt_nslots(p);
		uint64_t next = bt_right(p);
		if (!*down && lvl)
			*down = bt_leftmost(p);
		/* overflow chains of the leaf's values */
		uint64_t *chains = NULL;
		size_t nc = 0;
		if (!lvl && n && (chains = malloc(n * sizeof *chains)))
			for (unsigned i = 0; i < n; i++)
				if (bt_covf(bt_ccell(p, i)))
					chains[nc++] = util_get64(bt_cpayload(bt_ccell(p, i)));
		buf_put(bt->bp, pg);
		for (size_t i = 0; i < nc && !rc; i++)
			rc = ovf_free(bt, t, chains[i]);
		free(chains);
		if (!rc)
			rc = t ? op_page_free(t, pgno) : op_page_free_unlogged(bt->tm, pgno);
		if (rc)
			return rc;
		pgno = next;
	}
	return 0;
}

int bt_drop(bt_tree *bt, txn *t)
{
	uint64_t pgno = bt->root, down;
	int rc;
	do {
		if ((rc = drop_level(bt, t, pgno, &down)) != 0)
			return rc;
		pgno = down;
	} while (pgno);
	return 0;
}
