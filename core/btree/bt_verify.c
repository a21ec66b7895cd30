/*
 * bt_verify -- checks a B-link tree level by level.
 *
 * Each level is walked left to right along right links, from the leftmost
 * page (the root, then each first page's leftmost child).  Checked: page
 * type and level, key order inside pages (P1), keys below the high key and
 * at or above the left neighbour's high key (P2), the free-space account of
 * every page (P4), cell sizes (P5), every child of a level being a page of
 * the level below (P3), overflow chains (type, lengths).  Pages of the level
 * below that no parent names are half splits (a crash between a split's two
 * steps): legal, counted.  The walk holds one S latch at a time, so it is
 * meant for a quiet tree (after recovery, in tests, in `tpfs check`).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "bt_int.h"
#include "tp.h"

typedef struct pgset {
	uint64_t *v;
	size_t n, cap;
} pgset;

static int set_add(pgset *s, uint64_t x)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 64;
		uint64_t *nv = realloc(s->v, nc * sizeof *nv);
		if (!nv)
			return ENOMEM;
		s->v = nv;
		s->cap = nc;
	}
	s->v[s->n++] = x;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int set_has(const pgset *s, uint64_t x)
{
	return s->n && bsearch(&x, s->v, s->n, sizeof x, cmp_u64) != NULL;
}

#define BAD(...) (rc = util_err(TP_ECORRUPT, __VA_ARGS__))

static int check_ovf(bt_tree *bt, uint64_t leaf, unsigned slot, uint64_t pgno, uint32_t vlen,
		     void (*seen)(void *, uint64_t), void *ctx, bt_verify_result *res)
{
	uint64_t done = 0, first = pgno, last = 0;
	int rc = 0;
	while (pgno) {
		buf_page *pg;
		if ((rc = buf_get(bt->bp, pgno, BUF_S, &pg)) != 0)
			return rc;
		const unsigned char *p = buf_data(pg);
		uint32_t n = util_get32(p + BUF_HDR + 8);
		uint64_t next = util_get64(p + BUF_HDR);
		if (util_get16(p + 4) != BT_PT_OVERFLOW || n == 0 || n > bt->psize - BT_OVF_HDR)
			BAD("btree %" PRIu64 ": overflow page %" PRIu64 " is malformed", bt->root, pgno);
		buf_put(bt->bp, pg);
		if (rc)
			return rc;
		if (seen)
			seen(ctx, pgno);
		res->overflow_pages++;
		res->pages++;
		done += n;
		last = pgno;
		pgno = next;
	}
	if (done != vlen)
		return BAD("btree %" PRIu64 ": page %" PRIu64 " slot %u: overflow chain (pages %" PRIu64 "..%" PRIu64
			   ") holds %" PRIu64 " bytes, the cell says %" PRIu32,
			   bt->root, leaf, slot, first, last, done, vlen);
	return 0;
}

/* Checks one page; adds its children to kids. */
static int check_page_full(bt_tree *bt, buf_page *pg, unsigned level, const unsigned char *lowk, size_t lowlen,
			   int have_low, pgset *kids, void (*seen)(void *, uint64_t), void *ctx, bt_verify_result *res)
{
	const unsigned char *p = buf_data(pg);
	uint64_t no = buf_pgno(pg);
	unsigned n = bt_nslots(p);
	size_t live = 0;
	int rc = 0;

	if ((rc = bt_check_page(bt, pg)) != 0)
		return rc;
	if (bt_tree_of(p) != bt->root)
		return BAD("btree %" PRIu64 ": page %" PRIu64 " belongs to tree %" PRIu64, bt->root, no, bt_tree_of(p));
	if (bt_level(p) != level)
		return BAD("btree %" PRIu64 ": page %" PRIu64 " is at level %u, expected %u", bt->root, no, bt_level(p),
			   level);
	for (unsigned i = 0; i < n; i++) {
		unsigned off = util_get16(p + BT_HDR + 2 * i);
		if (off < util_get32(p + BT_H_CSTART) || off + BT_CELL_HDR > bt->psize)
			return BAD("btree %" PRIu64 ": page %" PRIu64 " slot %u points outside the cell area", bt->root,
				   no, i);
		const unsigned char *c = bt_ccell(p, i);
		size_t sz = bt_csize(c, level);
		if (off + sz > bt->psize || sz > bt->max_cell + 2)
			return BAD("btree %" PRIu64 ": page %" PRIu64 " cell %u has a bad size (%zu)", bt->root, no, i, sz);
		live += sz;
		if (i > 0) {
			const unsigned char *b = bt_ccell(p, i - 1);
			if (bt_cmp(bt->cmp, bt_ckey(b), bt_cklen(b), bt_ckey(c), bt_cklen(c)) >= 0)
				return BAD("btree %" PRIu64 ": page %" PRIu64 " keys out of order at slot %u", bt->root, no, i);
		}
		if (bt_beyond(p, bt->cmp, bt_ckey(c), bt_cklen(c)))
			return BAD("btree %" PRIu64 ": page %" PRIu64 " slot %u is at or above the high key", bt->root, no, i);
		if (have_low && bt_cmp(bt->cmp, bt_ckey(c), bt_cklen(c), lowk, lowlen) < 0)
			return BAD("btree %" PRIu64 ": page %" PRIu64 " slot %u is below the left neighbour's high key",
				   bt->root, no, i);
		if (level) {
			if ((rc = set_add(kids, bt_cchild(c))) != 0)
				return rc;
		} else {
			res->records++;
			if (bt_covf(c) && (rc = check_ovf(bt, no, i, util_get64(bt_cpayload(c)), bt_cvlen(c), seen, ctx, res)) != 0)
				return rc;
		}
	}
	if (level && (rc = set_add(kids, bt_leftmost(p))) != 0)
		return rc;
	size_t hk = (bt_hk_inf(p) ? 0 : util_get16(p + BT_H_HKLEN)) + (bt_lo_inf(p) ? 0 : util_get16(p + BT_H_LOLEN));
	/* the low fence is the left neighbour's high key (none at the left edge) */
	if (have_low != !bt_lo_inf(p) ||
	    (have_low && (util_get16(p + BT_H_LOLEN) != lowlen ||
			  memcmp(p + util_get16(p + BT_H_LOOFF), lowk, lowlen) != 0)))
		return BAD("btree %" PRIu64 ": page %" PRIu64 " low fence differs from its left neighbour's high key",
			   bt->root, no);
	uint32_t cs = util_get32(p + BT_H_CSTART), frag = util_get32(p + BT_H_FRAG);
	if ((size_t)cs + live + hk + frag != bt->psize)
		return BAD("btree %" PRIu64 ": page %" PRIu64 " space does not add up: cells %zu + high key %zu + dead %" PRIu32
			   " + start %" PRIu32 " != %" PRIu32,
			   bt->root, no, live, hk, frag, cs, bt->psize);
	res->bytes_used += live + hk + 2u * n;
	res->bytes_free += bt_free_space(p);
	return 0;
}

int bt_verify(bt_tree *bt, void (*seen)(void *ctx, uint64_t pgno), void *ctx, bt_verify_result *res)
{
	pgset kids = {0}, next = {0};
	uint64_t first = bt->root;
	int rc = 0, top = 1;
	unsigned level = 0;

	memset(res, 0, sizeof *res);
	for (;;) {
		buf_page *pg;
		if ((rc = buf_get(bt->bp, first, BUF_S, &pg)) != 0)
			goto out;
		if ((rc = bt_check_page(bt, pg)) != 0) {
			buf_put(bt->bp, pg);
			goto out;
		}
		if (top)
			level = bt_level(buf_data(pg));
		buf_put(bt->bp, pg);
		res->levels++;
		if (kids.n)
			qsort(kids.v, kids.n, sizeof *kids.v, cmp_u64);
		next.n = 0;
		unsigned char low[LOCK_KEY_MAX];
		size_t lowlen = 0;
		int have_low = 0;
		uint64_t no = first, down = 0, onlevel = 0;
		while (no) {
			if ((rc = buf_get(bt->bp, no, BUF_S, &pg)) != 0)
				goto out;
			const unsigned char *p = buf_data(pg);
			rc = check_page_full(bt, pg, level, low, lowlen, have_low, &next, seen, ctx, res);
			uint64_t r = bt_right(p);
			if (!rc && !down && level)
				down = bt_leftmost(p);
			if (!rc && r && bt_hk_inf(p))
				BAD("btree %" PRIu64 ": page %" PRIu64 " has a right sibling but no high key", bt->root, no);
			if (!rc && !r && !bt_hk_inf(p))
				BAD("btree %" PRIu64 ": page %" PRIu64 " ends its level but has a high key", bt->root, no);
			if (!rc && !bt_hk_inf(p)) {
				lowlen = util_get16(p + BT_H_HKLEN);
				memcpy(low, p + util_get16(p + BT_H_HKOFF), lowlen);
				have_low = 1;
			}
			buf_put(bt->bp, pg);
			if (rc)
				goto out;
			if (seen)
				seen(ctx, no);
			res->pages++;
			if (!level)
				res->leaves++;
			if (!top && !set_has(&kids, no))
				res->half_splits++;
			if (++onlevel > 1000000000u) {
				BAD("btree %" PRIu64 ": level %u does not end (a cycle of right links)", bt->root, level);
				goto out;
			}
			no = r;
		}
		/* every child named by the level above must have been on this level */
		if (!top) {
			for (size_t i = 0; i < kids.n; i++)
				if (!kids.v[i]) {
					BAD("btree %" PRIu64 ": a page at level %u names child page 0", bt->root, level + 1);
					goto out;
				}
		}
		if (!level)
			break;
		pgset tmp = kids;
		kids = next;
		next = tmp;
		first = down;
		level--;
		top = 0;
		/* the children of level+1 must all sit on this level: checked by
		 * counting them as we walk (below) */
		if (kids.n)
			qsort(kids.v, kids.n, sizeof *kids.v, cmp_u64);
		size_t uniq = 0;
		for (size_t i = 0; i < kids.n; i++)
			if (i == 0 || kids.v[i] != kids.v[i - 1])
				kids.v[uniq++] = kids.v[i];
		kids.n = uniq;
		/* walk this level once to confirm each child is on it */
		pgset onlv = {0};
		for (uint64_t q = first; q;) {
			if ((rc = buf_get(bt->bp, q, BUF_S, &pg)) != 0) {
				free(onlv.v);
				goto out;
			}
			uint64_t r = bt_right(buf_data(pg));
			buf_put(bt->bp, pg);
			if ((rc = set_add(&onlv, q)) != 0) {
				free(onlv.v);
				goto out;
			}
			if (onlv.n > 1000000000u)
				break;
			q = r;
		}
		if (onlv.n)
			qsort(onlv.v, onlv.n, sizeof *onlv.v, cmp_u64);
		for (size_t i = 0; i < kids.n; i++)
			if (!set_has(&onlv, kids.v[i])) {
				BAD("btree %" PRIu64 ": child page %" PRIu64 " is not on level %u", bt->root, kids.v[i],
					 level);
				free(onlv.v);
				goto out;
			}
		free(onlv.v);
	}
out:
	free(kids.v);
	free(next.v);
	return rc;
}
