/*
 * bt_page -- B-tree page primitives and the B-tree operations' redo, undo
 * and print functions (registered in op/ops.def).
 *
 * Redo is physiological: a record names its page and a slot, and replays
 * the change on that page alone (LLADD: redo may rely only on the page).
 * Undo is logical (ARIES/LLADD): the undo of an insert deletes the key from
 * whichever leaf holds it now, since splits by other transactions may have
 * moved it.  BT_INIT and BT_LINK have no undo: BT_INIT only fills a page just
 * allocated (undoing the allocation frees it) or rewrites a root as the last,
 * redo-only record of a root split; BT_LINK is always logged as a CLR.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "bt_int.h"
#include "op.h"
#include "tp.h"

int bt_cmp(int cmp, const void *a, size_t alen, const void *b, size_t blen)
{
	if (cmp == BT_CMP_U64 && alen == 8 && blen == 8) {
		uint64_t x = util_get64(a), y = util_get64(b);
		return x < y ? -1 : x > y;
	}
	int c = memcmp(a, b, alen < blen ? alen : blen);
	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

unsigned bt_search(const unsigned char *p, int cmp, const void *key, size_t klen, int *found)
{
	unsigned lo = 0, hi = bt_nslots(p);
	*found = 0;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		const unsigned char *c = bt_ccell(p, mid);
		int r = bt_cmp(cmp, bt_ckey(c), bt_cklen(c), key, klen);
		if (r < 0) {
			lo = mid + 1;
		} else {
			if (r == 0)
				*found = 1;
			hi = mid;
		}
	}
	return lo;
}

int bt_beyond(const unsigned char *p, int cmp, const void *key, size_t klen)
{
	if (bt_hk_inf(p))
		return 0;
	return bt_cmp(cmp, key, klen, p + util_get16(p + BT_H_HKOFF), util_get16(p + BT_H_HKLEN)) >= 0;
}

uint64_t bt_child_for(const unsigned char *p, int cmp, const void *key, size_t klen)
{
	int found;
	unsigned i = bt_search(p, cmp, key, klen, &found);
	if (found)
		return bt_cchild(bt_ccell(p, i));
	return i == 0 ? bt_leftmost(p) : bt_cchild(bt_ccell(p, i - 1));
}

size_t bt_free_space(const unsigned char *p)
{
	return util_get32(p + BT_H_CSTART) - (BT_HDR + 2u * bt_nslots(p)) + util_get32(p + BT_H_FRAG);
}

void bt_format(unsigned char *p, uint32_t psize, unsigned level, uint64_t right, uint64_t leftmost, const void *hk,
	       unsigned hklen)
{
	memset(p + BUF_HDR, 0, psize - BUF_HDR);
	util_put16(p + 4, level ? BT_PT_INTERNAL : BT_PT_LEAF);
	util_put16(p + BT_H_LEVEL, (uint16_t)level);
	util_put64(p + BT_H_RIGHT, right);
	util_put64(p + BT_H_LEFT, leftmost);
	uint32_t cs = psize;
	if (hklen == BT_HK_INF) {
		util_put16(p + BT_H_HKLEN, BT_HK_INF);
	} else {
		cs -= hklen;
		memcpy(p + cs, hk, hklen);
		util_put16(p + BT_H_HKLEN, (uint16_t)hklen);
		util_put16(p + BT_H_HKOFF, (uint16_t)cs);
	}
	util_put32(p + BT_H_CSTART, cs);
}

void bt_compact(unsigned char *p, uint32_t psize)
{
	unsigned n = bt_nslots(p), level = bt_level(p);
	unsigned char *tmp = malloc(psize);
	uint32_t cs = psize;
	if (!tmp)
		return; /* compaction is an optimization of space only if it fails;
			   callers check the free space again */
	if (!bt_hk_inf(p)) {
		unsigned hl = util_get16(p + BT_H_HKLEN);
		cs -= hl;
		memcpy(tmp + cs, p + util_get16(p + BT_H_HKOFF), hl);
		util_put16(p + BT_H_HKOFF, (uint16_t)cs);
	}
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *c = bt_ccell(p, i);
		size_t sz = bt_csize(c, level);
		cs -= (uint32_t)sz;
		memcpy(tmp + cs, c, sz);
		util_put16(p + BT_HDR + 2 * i, (uint16_t)cs);
	}
	memcpy(p + cs, tmp + cs, psize - cs);
	util_put32(p + BT_H_CSTART, cs);
	util_put32(p + BT_H_FRAG, 0);
	free(tmp);
}

void bt_put_cell(unsigned char *p, uint32_t psize, unsigned i, const void *cell, size_t len)
{
	unsigned n = bt_nslots(p);
	uint32_t cs = util_get32(p + BT_H_CSTART);
	if (cs - (BT_HDR + 2u * n) < len + 2) {
		bt_compact(p, psize);
		cs = util_get32(p + BT_H_CSTART);
	}
	cs -= (uint32_t)len;
	memcpy(p + cs, cell, len);
	memmove(p + BT_HDR + 2 * (i + 1), p + BT_HDR + 2 * i, 2u * (n - i));
	util_put16(p + BT_HDR + 2 * i, (uint16_t)cs);
	util_put16(p + BT_H_NSLOTS, (uint16_t)(n + 1));
	util_put32(p + BT_H_CSTART, cs);
}

void bt_del_cell(unsigned char *p, unsigned i)
{
	unsigned n = bt_nslots(p);
	size_t sz = bt_csize(bt_ccell(p, i), bt_level(p));
	util_put32(p + BT_H_FRAG, util_get32(p + BT_H_FRAG) + (uint32_t)sz);
	memmove(p + BT_HDR + 2 * i, p + BT_HDR + 2 * (i + 1), 2u * (n - i - 1));
	util_put16(p + BT_H_NSLOTS, (uint16_t)(n - 1));
}

/* Sets the high key (the old one becomes dead space). */
static void set_hikey(unsigned char *p, uint32_t psize, const void *hk, unsigned hklen)
{
	if (!bt_hk_inf(p))
		util_put32(p + BT_H_FRAG, util_get32(p + BT_H_FRAG) + util_get16(p + BT_H_HKLEN));
	if (hklen == BT_HK_INF) {
		util_put16(p + BT_H_HKLEN, BT_HK_INF);
		return;
	}
	util_put16(p + BT_H_HKLEN, BT_HK_INF); /* compaction must not keep the old one */
	uint32_t cs = util_get32(p + BT_H_CSTART);
	if (cs - (BT_HDR + 2u * bt_nslots(p)) < hklen) {
		bt_compact(p, psize);
		cs = util_get32(p + BT_H_CSTART);
	}
	cs -= hklen;
	memcpy(p + cs, hk, hklen);
	util_put32(p + BT_H_CSTART, cs);
	util_put16(p + BT_H_HKLEN, (uint16_t)hklen);
	util_put16(p + BT_H_HKOFF, (uint16_t)cs);
}

size_t bt_init_args(unsigned char *out, const unsigned char *src, unsigned from, unsigned to, unsigned level,
		    uint64_t right, uint64_t leftmost, const void *hk, unsigned hklen)
{
	unsigned char *q = out;
	util_put16(q, (uint16_t)level);
	util_put64(q + 2, right);
	util_put64(q + 10, leftmost);
	util_put16(q + 18, (uint16_t)hklen);
	q += 20;
	if (hklen != BT_HK_INF) {
		memcpy(q, hk, hklen);
		q += hklen;
	}
	util_put16(q, (uint16_t)(to - from));
	q += 2;
	for (unsigned i = from; i < to; i++) {
		const unsigned char *c = bt_ccell(src, i);
		size_t sz = bt_csize(c, level);
		memcpy(q, c, sz);
		q += sz;
	}
	return (size_t)(q - out);
}

/* ---- redo ---- */

static int bad(const log_rec *r, const char *what)
{
	return util_err(TP_ECORRUPT, "log: %s record at LSN %" PRIu64 " does not fit page %" PRIu64, what, r->lsn,
			r->pgno);
}

int bt_init_redo(unsigned char *page, uint32_t psize, const log_rec *r)
{
	const unsigned char *q = r->data, *end = q + r->len;
	if (r->len < 22)
		return bad(r, "BT_INIT");
	unsigned level = util_get16(q), hklen = util_get16(q + 18);
	uint64_t right = util_get64(q + 2), left = util_get64(q + 10);
	const unsigned char *hk = q + 20;
	q += 20 + (hklen == BT_HK_INF ? 0 : hklen);
	if (q + 2 > end)
		return bad(r, "BT_INIT");
	unsigned n = util_get16(q);
	q += 2;
	bt_format(page, psize, level, right, left, hk, hklen);
	for (unsigned i = 0; i < n; i++) {
		if (q + BT_CELL_HDR > end)
			return bad(r, "BT_INIT");
		size_t sz = bt_csize(q, level);
		if (q + sz > end || bt_free_space(page) < sz + 2)
			return bad(r, "BT_INIT");
		bt_put_cell(page, psize, i, q, sz);
		q += sz;
	}
	return q == end ? 0 : bad(r, "BT_INIT");
}

int bt_insert_redo(unsigned char *page, uint32_t psize, const log_rec *r)
{
	const unsigned char *q = r->data;
	if (r->len < BT_ARG_HDR + BT_CELL_HDR)
		return bad(r, "BT_INSERT");
	unsigned slot = util_get16(q + 10);
	size_t len = r->len - BT_ARG_HDR;
	if (slot > bt_nslots(page) || bt_csize(q + BT_ARG_HDR, bt_level(page)) != len || bt_free_space(page) < len + 2)
		return bad(r, "BT_INSERT");
	bt_put_cell(page, psize, slot, q + BT_ARG_HDR, len);
	return 0;
}

/* The cell at slot must carry the record's key. */
static int slot_matches(const unsigned char *page, unsigned slot, const unsigned char *cell)
{
	if (slot >= bt_nslots(page))
		return 0;
	const unsigned char *c = bt_ccell(page, slot);
	return bt_cklen(c) == bt_cklen(cell) && memcmp(bt_ckey(c), bt_ckey(cell), bt_cklen(c)) == 0;
}

int bt_delete_redo(unsigned char *page, uint32_t psize, const log_rec *r)
{
	const unsigned char *q = r->data;
	(void)psize;
	if (r->len < BT_ARG_HDR + BT_CELL_HDR || !slot_matches(page, util_get16(q + 10), q + BT_ARG_HDR))
		return bad(r, "BT_DELETE");
	bt_del_cell(page, util_get16(q + 10));
	return 0;
}

int bt_replace_redo(unsigned char *page, uint32_t psize, const log_rec *r)
{
	const unsigned char *q = r->data;
	if (r->len < BT_ARG_HDR + 4)
		return bad(r, "BT_REPLACE");
	unsigned slot = util_get16(q + 10);
	uint32_t olen = util_get32(q + BT_ARG_HDR);
	if (BT_ARG_HDR + 4 + (size_t)olen > r->len || !slot_matches(page, slot, q + BT_ARG_HDR + 4))
		return bad(r, "BT_REPLACE");
	const unsigned char *ncell = q + BT_ARG_HDR + 4 + olen;
	size_t nlen = r->len - BT_ARG_HDR - 4 - olen;
	bt_del_cell(page, slot);
	if (bt_free_space(page) < nlen + 2)
		return bad(r, "BT_REPLACE");
	bt_put_cell(page, psize, slot, ncell, nlen);
	return 0;
}

/* BT_LINK: u16 first slot moved right, u64 new right sibling, u16 high key
 * length, high key. */
int bt_link_redo(unsigned char *page, uint32_t psize, const log_rec *r)
{
	const unsigned char *q = r->data;
	if (r->len < 12)
		return bad(r, "BT_LINK");
	unsigned from = util_get16(q), hklen = util_get16(q + 10);
	if (from > bt_nslots(page) || (hklen != BT_HK_INF && 12u + hklen != r->len))
		return bad(r, "BT_LINK");
	while (bt_nslots(page) > from)
		bt_del_cell(page, bt_nslots(page) - 1);
	util_put64(page + BT_H_RIGHT, util_get64(q + 2));
	set_hikey(page, psize, q + 12, hklen);
	return 0;
}

/* ---- undo: logical, through the tree ---- */

int bt_insert_undo(txn *t, const log_rec *r)
{
	const unsigned char *q = r->data;
	return bt_compensate(t, util_get64(q), util_get16(q + 8), BT_DO_DELETE, q + BT_ARG_HDR, r->len - BT_ARG_HDR,
			     txn_undo_next(t));
}

int bt_delete_undo(txn *t, const log_rec *r)
{
	const unsigned char *q = r->data;
	return bt_compensate(t, util_get64(q), util_get16(q + 8), BT_DO_INSERT, q + BT_ARG_HDR, r->len - BT_ARG_HDR,
			     txn_undo_next(t));
}

int bt_replace_undo(txn *t, const log_rec *r)
{
	const unsigned char *q = r->data;
	uint32_t olen = util_get32(q + BT_ARG_HDR);
	return bt_compensate(t, util_get64(q), util_get16(q + 8), BT_DO_REPLACE, q + BT_ARG_HDR + 4, olen,
			     txn_undo_next(t));
}

/* ---- print ---- */

static void print_key(FILE *out, const unsigned char *k, size_t n)
{
	int text = 1;
	for (size_t i = 0; i < n; i++)
		if (k[i] < 32 || k[i] > 126)
			text = 0;
	if (text) {
		fprintf(out, " key \"%.*s\"", (int)(n > 40 ? 40 : n), (const char *)k);
	} else {
		fprintf(out, " key ");
		for (size_t i = 0; i < n && i < 16; i++)
			fprintf(out, "%02x", k[i]);
	}
	if (n > 40 || (!text && n > 16))
		fprintf(out, "...");
}

void bt_cell_print(FILE *out, const log_rec *r)
{
	const unsigned char *q = r->data;
	if (r->len < BT_ARG_HDR + BT_CELL_HDR)
		return;
	const unsigned char *c = q + BT_ARG_HDR;
	if (r->type == OP_BT_REPLACE)
		c += 4;
	fprintf(out, " tree %" PRIu64 " slot %u", util_get64(q), util_get16(q + 10));
	if ((size_t)(c - q) + BT_CELL_HDR > r->len || (size_t)(c - q) + BT_CELL_HDR + bt_cklen(c) > r->len) {
		fprintf(out, " (malformed: %" PRIu32 " bytes)", r->len);
		return;
	}
	print_key(out, bt_ckey(c), bt_cklen(c));
	fprintf(out, " vlen %" PRIu32 "%s", bt_cvlen(c), bt_covf(c) ? " (overflow)" : "");
}

void bt_init_print(FILE *out, const log_rec *r)
{
	const unsigned char *q = r->data;
	if (r->len < 22)
		return;
	unsigned hk = util_get16(q + 18);
	fprintf(out, " level %u right %" PRIu64 " leftmost %" PRIu64, util_get16(q), util_get64(q + 2),
		util_get64(q + 10));
	if (hk != BT_HK_INF && 22u + hk <= r->len)
		fprintf(out, " cells %u", util_get16(q + 20 + hk));
	else if (hk == BT_HK_INF)
		fprintf(out, " cells %u", util_get16(q + 20));
	else
		fprintf(out, " (malformed: %" PRIu32 " bytes)", r->len);
}

void bt_link_print(FILE *out, const log_rec *r)
{
	const unsigned char *q = r->data;
	if (r->len < 12)
		return;
	fprintf(out, " keep %u right %" PRIu64, util_get16(q), util_get64(q + 2));
	if (util_get16(q + 10) != BT_HK_INF && 12u + util_get16(q + 10) == r->len)
		print_key(out, q + 12, util_get16(q + 10));
}
