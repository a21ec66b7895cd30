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
#include <stddef.h>
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
	size_t n = alen < blen ? alen : blen;
	if (n <= 32) { /* short keys (most): eight bytes at a time, in line */
		const unsigned char *x = a, *y = b;
		size_t i = 0;
		for (; i + 8 <= n; i += 8) {
			uint64_t u = util_get64(x + i), v = util_get64(y + i);
			if (u != v) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
				u = __builtin_bswap64(u), v = __builtin_bswap64(v);
#endif
				return u < v ? -1 : 1;
			}
		}
		for (; i < n; i++)
			if (x[i] != y[i])
				return x[i] < y[i] ? -1 : 1;
		return alen < blen ? -1 : alen > blen;
	}
	int c = memcmp(a, b, n);
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

void bt_shape_of(const unsigned char *p, bt_shape *s)
{
	s->level = bt_level(p);
	s->right = bt_right(p);
	s->leftmost = bt_leftmost(p);
	s->tree = bt_tree_of(p);
	s->lowlen = util_get16(p + BT_H_LOLEN);
	s->low = s->lowlen == BT_HK_INF ? NULL : p + util_get16(p + BT_H_LOOFF);
	s->hklen = util_get16(p + BT_H_HKLEN);
	s->hk = s->hklen == BT_HK_INF ? NULL : p + util_get16(p + BT_H_HKOFF);
}

int bt_in_fences(const unsigned char *p, int cmp, const void *key, size_t klen, int pred)
{
	if (bt_lo_inf(p))
		return 1;
	int c = bt_cmp(cmp, key, klen, p + util_get16(p + BT_H_LOOFF), util_get16(p + BT_H_LOLEN));
	return pred ? c > 0 : c >= 0;
}

/* Puts a fence's bytes at the bottom of the cell area (header at lenoff). */
static uint32_t put_fence(unsigned char *p, uint32_t cs, unsigned lenoff, const void *f, unsigned flen)
{
	util_put16(p + lenoff, (uint16_t)flen);
	if (flen == BT_HK_INF)
		return cs;
	cs -= flen;
	memmove(p + cs, f, flen);
	util_put16(p + lenoff + 2, (uint16_t)cs);
	return cs;
}

void bt_format(unsigned char *p, uint32_t psize, const bt_shape *s)
{
	unsigned char fences[2 * LOCK_KEY_MAX];
	unsigned lo = s->lowlen == BT_HK_INF ? 0 : s->lowlen, hi = s->hklen == BT_HK_INF ? 0 : s->hklen;
	memcpy(fences, s->low ? s->low : "", lo); /* the shape may point into p itself */
	memcpy(fences + lo, s->hk ? s->hk : "", hi);
	memset(p + BUF_HDR, 0, psize - BUF_HDR);
	util_put16(p + 4, s->level ? BT_PT_INTERNAL : BT_PT_LEAF);
	util_put16(p + BT_H_LEVEL, (uint16_t)s->level);
	util_put64(p + BT_H_RIGHT, s->right);
	util_put64(p + BT_H_LEFT, s->leftmost);
	util_put64(p + BT_H_TREE, s->tree);
	uint32_t cs = put_fence(p, psize, BT_H_HKLEN, fences + lo, s->hklen);
	cs = put_fence(p, cs, BT_H_LOLEN, fences, s->lowlen);
	util_put32(p + BT_H_CSTART, cs);
}

void bt_compact(unsigned char *p, uint32_t psize)
{
	unsigned n = bt_nslots(p), level = bt_level(p);
	unsigned char stack[8192]; /* the default page sizes need no malloc */
	unsigned char *tmp = psize <= sizeof stack ? stack : malloc(psize);
	uint32_t cs = psize;
	if (!tmp)
		return; /* compaction is an optimization of space only if it fails;
			   callers check the free space again */
	for (unsigned f = BT_H_HKLEN; f <= BT_H_LOLEN; f += BT_H_LOLEN - BT_H_HKLEN) { /* both fences */
		unsigned fl = util_get16(p + f);
		if (fl == BT_HK_INF)
			continue;
		cs -= fl;
		memcpy(tmp + cs, p + util_get16(p + f + 2), fl);
		util_put16(p + f + 2, (uint16_t)cs);
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
	if (tmp != stack)
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

size_t bt_init_args(unsigned char *out, const bt_shape *s, const unsigned char *const *cells, unsigned n)
{
	unsigned char *q = out;
	util_put16(q, (uint16_t)s->level);
	util_put64(q + 2, s->right);
	util_put64(q + 10, s->leftmost);
	util_put64(q + 18, s->tree);
	q += 26;
	util_put16(q, (uint16_t)s->lowlen);
	q += 2;
	if (s->lowlen != BT_HK_INF) {
		memcpy(q, s->low, s->lowlen);
		q += s->lowlen;
	}
	util_put16(q, (uint16_t)s->hklen);
	q += 2;
	if (s->hklen != BT_HK_INF) {
		memcpy(q, s->hk, s->hklen);
		q += s->hklen;
	}
	util_put16(q, (uint16_t)n);
	q += 2;
	for (unsigned i = 0; i < n; i++) {
		size_t sz = bt_csize(cells[i], s->level);
		memcpy(q, cells[i], sz);
		q += sz;
	}
	return (size_t)(q - out);
}

/* Parses BT_INIT arguments up to the cells; NULL if malformed. */
static const unsigned char *init_shape(const unsigned char *q, const unsigned char *end, bt_shape *s, unsigned *n)
{
	if (end - q < 28)
		return NULL;
	s->level = util_get16(q);
	s->right = util_get64(q + 2);
	s->leftmost = util_get64(q + 10);
	s->tree = util_get64(q + 18);
	q += 26;
	s->lowlen = util_get16(q);
	q += 2;
	s->low = q;
	if (s->lowlen != BT_HK_INF) {
		if (s->lowlen > LOCK_KEY_MAX || end - q < (ptrdiff_t)s->lowlen)
			return NULL;
		q += s->lowlen;
	}
	if (end - q < 2)
		return NULL;
	s->hklen = util_get16(q);
	q += 2;
	s->hk = q;
	if (s->hklen != BT_HK_INF) {
		if (s->hklen > LOCK_KEY_MAX || end - q < (ptrdiff_t)s->hklen)
			return NULL;
		q += s->hklen;
	}
	if (end - q < 2)
		return NULL;
	*n = util_get16(q);
	return q + 2;
}

/* ---- redo ---- */

static int bad(const log_rec *r, const char *what)
{
	return util_err(TP_ECORRUPT, "log: %s record at LSN %" PRIu64 " does not fit page %" PRIu64, what, r->lsn,
			r->pgno);
}

int bt_init_redo(unsigned char *page, uint32_t psize, const log_rec *r)
{
	const unsigned char *end = (const unsigned char *)r->data + r->len, *q;
	bt_shape sh;
	unsigned n;
	if (!(q = init_shape(r->data, end, &sh, &n)))
		return bad(r, "BT_INIT");
	bt_format(page, psize, &sh);
	for (unsigned i = 0; i < n; i++) {
		if (q + BT_CELL_HDR > end)
			return bad(r, "BT_INIT");
		size_t sz = bt_csize(q, sh.level);
		if (q + sz > end || bt_free_space(page) < sz + 2)
			return bad(r, "BT_INIT");
		bt_put_cell(page, psize, i, q, sz);
		q += sz;
	}
	return q == end ? 0 : bad(r, "BT_INIT");
}

/* BT_REWRITE: u32 length of the old image's BT_INIT arguments, those, then
 * the new image's.  Redo builds the new image; undo puts the old one back. */
int bt_rewrite_redo(unsigned char *page, uint32_t psize, const log_rec *r)
{
	if (r->len < 4 || 4 + (uint64_t)util_get32(r->data) > r->len)
		return bad(r, "BT_REWRITE");
	uint32_t olen = util_get32(r->data);
	log_rec sub = *r;
	sub.data = (const unsigned char *)r->data + 4 + olen;
	sub.len = r->len - 4 - olen;
	return bt_init_redo(page, psize, &sub);
}

int bt_rewrite_undo(txn *t, const log_rec *r)
{
	uint32_t olen = util_get32(r->data), nlen = r->len - 4 - olen;
	unsigned char *a = malloc(r->len);
	int rc;
	if (!a)
		return ENOMEM;
	util_put32(a, nlen);
	memcpy(a + 4, (const unsigned char *)r->data + 4 + olen, nlen);
	memcpy(a + 4 + nlen, (const unsigned char *)r->data + 4, olen);
	rc = txn_compensate(t, r->pgno, OP_BT_REWRITE, a, r->len);
	free(a);
	return rc;
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
	unsigned char *c = bt_cell(page, slot);
	if (bt_csize(c, bt_level(page)) == nlen) { /* same size (a record updated in place): overwrite it */
		memcpy(c, ncell, nlen);
		return 0;
	}
	bt_del_cell(page, slot);
	if (bt_free_space(page) < nlen + 2)
		return bad(r, "BT_REPLACE");
	bt_put_cell(page, psize, slot, ncell, nlen);
	return 0;
}

/* BT_PATCH (bt_int.h): the cell at slot must carry the key; its bytes
 * [off, off + n) become the after image. */
static int patch_parse(const log_rec *r, const unsigned char **key, size_t *klen, size_t *off, size_t *n)
{
	const unsigned char *q = r->data;
	if (r->len < BT_ARG_HDR + 2)
		return 0;
	*klen = util_get16(q + BT_ARG_HDR);
	*key = q + BT_ARG_HDR + 2;
	if (BT_ARG_HDR + 2 + *klen + 8 > r->len)
		return 0;
	*off = util_get32(*key + *klen);
	*n = util_get32(*key + *klen + 4);
	return BT_ARG_HDR + 2 + *klen + 8 + 2 * (uint64_t)*n == r->len;
}

int bt_patch_redo(unsigned char *page, uint32_t psize, const log_rec *r)
{
	const unsigned char *key;
	size_t klen, off, n;
	(void)psize;
	if (!patch_parse(r, &key, &klen, &off, &n))
		return bad(r, "BT_PATCH");
	unsigned slot = util_get16((const unsigned char *)r->data + 10);
	if (slot >= bt_nslots(page))
		return bad(r, "BT_PATCH");
	unsigned char *c = bt_cell(page, slot);
	if (bt_cklen(c) != klen || memcmp(bt_ckey(c), key, klen) != 0 || off + n > bt_csize(c, bt_level(page)))
		return bad(r, "BT_PATCH");
	memcpy(c + off, key + klen + 8 + n, n);
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
			     txn_undo_after(t));
}

int bt_delete_undo(txn *t, const log_rec *r)
{
	const unsigned char *q = r->data;
	return bt_compensate(t, util_get64(q), util_get16(q + 8), BT_DO_INSERT, q + BT_ARG_HDR, r->len - BT_ARG_HDR,
			     txn_undo_after(t));
}

int bt_replace_undo(txn *t, const log_rec *r)
{
	const unsigned char *q = r->data;
	uint32_t olen = util_get32(q + BT_ARG_HDR);
	return bt_compensate(t, util_get64(q), util_get16(q + 8), BT_DO_REPLACE, q + BT_ARG_HDR + 4, olen,
			     txn_undo_after(t));
}

int bt_patch_undo(txn *t, const log_rec *r)
{
	const unsigned char *q = r->data, *key;
	size_t klen, off, n;
	if (!patch_parse(r, &key, &klen, &off, &n))
		return util_err(TP_ECORRUPT, "log: malformed BT_PATCH record at LSN %" PRIu64, r->lsn);
	/* put the before image back: u16 klen, key, u32 off, u32 n, the bytes */
	size_t len = 2 + klen + 8 + n;
	unsigned char *a = malloc(len);
	if (!a)
		return ENOMEM;
	memcpy(a, q + BT_ARG_HDR, 2 + klen + 8);
	memcpy(a + 2 + klen + 8, key + klen + 8, n);
	int rc = bt_compensate(t, util_get64(q), util_get16(q + 8), BT_DO_PATCH, a, len, txn_undo_after(t));
	free(a);
	return rc;
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

void bt_patch_print(FILE *out, const log_rec *r)
{
	const unsigned char *key;
	size_t klen, off, n;
	if (!patch_parse(r, &key, &klen, &off, &n)) {
		fprintf(out, " (malformed: %" PRIu32 " bytes)", r->len);
		return;
	}
	fprintf(out, " tree %" PRIu64 " slot %u", util_get64(r->data), util_get16((const unsigned char *)r->data + 10));
	print_key(out, key, klen);
	fprintf(out, " bytes %zu..%zu", off, off + n);
}

void bt_init_print(FILE *out, const log_rec *r)
{
	const unsigned char *q = r->data, *end = q + r->len;
	bt_shape sh;
	unsigned n;
	if (r->type == OP_BT_REWRITE) {
		if (r->len < 4 || 4 + (uint64_t)util_get32(q) > r->len) {
			fprintf(out, " (malformed: %" PRIu32 " bytes)", r->len);
			return;
		}
		q += 4 + util_get32(q);
	}
	if (!init_shape(q, end, &sh, &n)) {
		fprintf(out, " (malformed: %" PRIu32 " bytes)", r->len);
		return;
	}
	fprintf(out, " tree %" PRIu64 " level %u right %" PRIu64 " leftmost %" PRIu64 " cells %u", sh.tree, sh.level,
		sh.right, sh.leftmost, n);
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
