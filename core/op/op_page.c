/*
 * op_page -- page operations: byte-range set, page init, full-page image,
 * and page allocation in bitmap pages; their wrappers (LLADD's Tset).
 *
 * Allocation map
 *   Page 0 is the store's root page.  Pages 1.. form groups of G pages, G =
 *   8 * (page_size - BUF_HDR); the first page of each group is its bitmap,
 *   bit i <-> page (first + i).  Bit 0 (the bitmap itself) always counts as
 *   allocated.  A bitmap page never written reads as zeros: all free.
 *   Allocation takes the lowest group that may have a free page
 *   (alloc_hint), so low pages stay dense and full groups are not
 *   searched again on every allocation.  Within the group it is first fit,
 *   except for ordered data: next fit from the page after the last ordered
 *   page (alloc_rover), wrapping around, so that a large file's blocks
 *   follow each other on disk and a run of allocations does not rescan the
 *   bits it took.
 *
 * Record payloads
 *   PAGE_SET    u16 off, u16 len, len bytes before-image, len bytes after
 *   PAGE_FILL   u16 off, the bytes (a page just allocated: no before-image)
 *   PAGE_INIT   u16 page type
 *   PAGE_ALLOC  u32 bit     (PAGE_FREE the same)
 *   FPI         the whole page
 *
 * Ordered pages (op_page_alloc_ordered) break LLADD's rule that every
 * change goes through a logged redo, on purpose and only for file data:
 * their bytes are written in place and synced before the log moves past
 * the records that make them reachable (ord.c N1), as ext4's data=ordered and
 * ZFS's indirect writes do, so large writes are not written twice.  Redo
 * never touches them: their LSN is above every record of their earlier
 * lives and below the durable end of the log (O1), and a page freed by a
 * commit is reused only once that commit is durable (alloc.c A2), so no crash can
 * hand it back to an owner that still needs its old bytes.  An LSN taken
 * from the log's end instead (the first version) could exceed what a
 * power cut left of the log: the log restarted below it, and the page's
 * next logged life got LSNs its on-disk image already claimed, so redo
 * skipped them (fscrash powercut_random found it).  A torn ordered page
 * whose transaction committed cannot be rebuilt: its checksum fails and
 * the error names it.
 *
 * Undo: PAGE_SET's is a PAGE_SET of the before-image; ALLOC and FREE undo
 * each other on one bit (never a byte image: other transactions' bits in
 * the same byte must survive).  The undo of an ALLOC first zeroes the page
 * (a PAGE_INIT of type 0 as a CLR), so a page given back never looks like
 * what it was made into.  PAGE_INIT has no undo: it only follows the
 * allocation of a page, and the undo of that allocation frees the page,
 * whose contents then no longer matter.
 */
#include "op.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ord.h"
#include "tp.h"
#include "txn.h"
#include "util.h"

uint64_t op_group_pages(uint32_t page_size) { return 8ull * (page_size - BUF_HDR); }

int op_is_bitmap(uint32_t page_size, uint64_t pgno)
{
	return pgno >= 1 && (pgno - 1) % op_group_pages(page_size) == 0;
}

/* ---- redo ---- */

int op_fpi_redo(unsigned char *page, uint32_t page_size, const log_rec *r)
{
	if (r->len != page_size)
		return util_err(TP_ECORRUPT, "log: FPI at LSN %" PRIu64 " has %" PRIu32 " bytes, pages have %" PRIu32,
				r->lsn, r->len, page_size);
	memcpy(page, r->data, page_size);
	return 0;
}

int op_set_redo(unsigned char *page, uint32_t page_size, const log_rec *r)
{
	const unsigned char *p = r->data;
	if (r->len < 4)
		goto bad;
	uint32_t off = util_get16(p), len = util_get16(p + 2);
	if (r->len != 4 + 2 * len || off < BUF_HDR || off + len > page_size)
		goto bad;
	memcpy(page + off, p + 4 + len, len);
	return 0;
bad:
	return util_err(TP_ECORRUPT, "log: PAGE_SET at LSN %" PRIu64 " does not fit page %" PRIu64, r->lsn, r->pgno);
}

int op_fill_redo(unsigned char *page, uint32_t page_size, const log_rec *r)
{
	if (r->len < 2 || util_get16(r->data) < BUF_HDR || util_get16(r->data) + (uint64_t)r->len - 2 > page_size)
		return util_err(TP_ECORRUPT, "log: PAGE_FILL at LSN %" PRIu64 " does not fit page %" PRIu64, r->lsn, r->pgno);
	memcpy(page + util_get16(r->data), (const unsigned char *)r->data + 2, r->len - 2);
	return 0;
}

int op_init_redo(unsigned char *page, uint32_t page_size, const log_rec *r)
{
	if (r->len != 2)
		return util_err(TP_ECORRUPT, "log: PAGE_INIT at LSN %" PRIu64 " is malformed", r->lsn);
	memset(page, 0, page_size);
	util_put16(page + 4, util_get16(r->data));
	return 0;
}

static int bit_arg(uint32_t page_size, const log_rec *r, uint32_t *bit)
{
	*bit = r->len == 4 ? util_get32(r->data) : 0;
	if (*bit >= op_group_pages(page_size) || *bit == 0)
		return util_err(TP_ECORRUPT, "log: bitmap record at LSN %" PRIu64 " is malformed", r->lsn);
	return 0;
}

int op_alloc_redo(unsigned char *page, uint32_t page_size, const log_rec *r)
{
	uint32_t bit;
	int rc = bit_arg(page_size, r, &bit);
	if (!rc)
		page[BUF_HDR + bit / 8] |= (unsigned char)(1u << (bit % 8));
	return rc;
}

int op_free_redo(unsigned char *page, uint32_t page_size, const log_rec *r)
{
	uint32_t bit;
	int rc = bit_arg(page_size, r, &bit);
	if (!rc)
		page[BUF_HDR + bit / 8] &= (unsigned char)~(1u << (bit % 8));
	return rc;
}

/* ---- undo ---- */

int op_set_undo(txn *t, const log_rec *r)
{
	const unsigned char *p = r->data;
	uint32_t len = util_get16(p + 2);
	unsigned char *a = malloc(r->len);
	int rc;
	if (!a)
		return ENOMEM;
	memcpy(a, p, 4);
	memcpy(a + 4, p + 4 + len, len); /* "before" of the CLR: what is there now */
	memcpy(a + 4 + len, p + 4, len); /* "after": the old before-image */
	rc = txn_compensate(t, r->pgno, OP_PAGE_SET, a, r->len);
	free(a);
	return rc;
}

int op_alloc_undo(txn *t, const log_rec *r)
{
	/* the page goes back zeroed (type 0), before its bit is freed (after,
	 * another transaction could have it already): whatever it became --
	 * a B-tree page, say -- no search reaching it through a stale pointer
	 * or hint takes it for a live page (bt_int.h, P6) */
	buf_pool *bp = txn_pool(t);
	uint64_t after = txn_undo_after(t); /* where rollback goes on after this record */
	unsigned char type0[2] = {0, 0};
	buf_page *pg;
	uint32_t bit;
	int rc = bit_arg(buf_page_size(bp), r, &bit);
	/* a crash between the two CLRs must not skip the free: the first one
	 * sends undo back to this record, which is then undone again whole */
	if (!rc && (rc = buf_get(bp, r->pgno + bit, BUF_X | BUF_NOREAD, &pg)) == 0) {
		rc = txn_update_clr(t, pg, OP_PAGE_INIT, type0, 2, r->lsn);
		buf_put(bp, pg);
	}
	if (!rc && (rc = buf_get(bp, r->pgno, BUF_X, &pg)) == 0) {
		rc = txn_update_clr(t, pg, OP_PAGE_FREE, r->data, r->len, after);
		buf_put(bp, pg);
	}
	return rc;
}

int op_free_undo(txn *t, const log_rec *r)
{
	return txn_compensate(t, r->pgno, OP_PAGE_ALLOC, r->data, r->len);
}

/* ---- print ---- */

void op_fpi_print(FILE *out, const log_rec *r)
{
	fprintf(out, " image of %" PRIu32 " bytes", r->len);
}

void op_set_print(FILE *out, const log_rec *r)
{
	const unsigned char *p = r->data;
	if (r->len < 4)
		return;
	uint32_t off = util_get16(p), len = util_get16(p + 2);
	fprintf(out, " off %" PRIu32 " len %" PRIu32, off, len);
	if (r->len == 4 + 2 * len) {
		fprintf(out, " after ");
		for (uint32_t i = 0; i < len && i < 16; i++)
			fprintf(out, "%02x", p[4 + len + i]);
		if (len > 16)
			fprintf(out, "...");
	}
}

void op_fill_print(FILE *out, const log_rec *r)
{
	if (r->len >= 2)
		fprintf(out, " off %u len %" PRIu32, util_get16(r->data), r->len - 2);
}

void op_init_print(FILE *out, const log_rec *r)
{
	if (r->len == 2)
		fprintf(out, " type %u", util_get16(r->data));
}

void op_bit_print(FILE *out, const log_rec *r)
{
	if (r->len == 4)
		fprintf(out, " bit %" PRIu32, util_get32(r->data));
}

/* ---- wrappers ---- */

int op_page_allocated(buf_pool *bp, uint64_t pgno, int *allocated)
{
	uint32_t ps = buf_page_size(bp);
	uint64_t g = op_group_pages(ps);
	buf_page *pg;
	int rc;
	if (pgno == 0 || op_is_bitmap(ps, pgno)) {
		*allocated = 1;
		return 0;
	}
	uint64_t bm = 1 + (pgno - 1) / g * g, bit = pgno - bm;
	if ((rc = buf_get(bp, bm, BUF_S, &pg)) != 0)
		return rc;
	*allocated = (buf_data(pg)[BUF_HDR + bit / 8] >> (bit % 8)) & 1;
	buf_put(bp, pg);
	return 0;
}

/* The page must be an allocated data page for writes and frees. */
static int check_data_page(buf_pool *bp, uint64_t pgno, const char *what)
{
	int a, rc;
	if (op_is_bitmap(buf_page_size(bp), pgno))
		return util_err(TP_EINVAL, "%s page %" PRIu64 ": it is an allocation bitmap page", what, pgno);
	if ((rc = op_page_allocated(bp, pgno, &a)) != 0)
		return rc;
	if (!a)
		return util_err(TP_EINVAL, "%s page %" PRIu64 ": the page is not allocated", what, pgno);
	return 0;
}

static int page_set(txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len, int patch);

int op_page_set(txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len)
{
	return page_set(t, pgno, off, data, len, 0);
}

int op_page_patch(txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len)
{
	return page_set(t, pgno, off, data, len, 1);
}

static int page_set(txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len, int patch)
{
	buf_pool *bp = txn_pool(t);
	uint32_t ps = buf_page_size(bp);
	buf_page *pg;
	unsigned char *a;
	int rc;

	if (off < BUF_HDR || off > ps || len > ps - off)
		return util_err(TP_EINVAL, "write to page %" PRIu64 ": range %" PRIu32 "+%" PRIu32 " is outside the body",
				pgno, off, len);
	if (len == 0)
		return 0;
	if ((rc = check_data_page(bp, pgno, "write to")) != 0)
		return rc;
	if (!(a = malloc(4 + 2 * (size_t)len)))
		return ENOMEM;
	if ((rc = buf_get(bp, pgno, BUF_X, &pg)) == 0) {
		util_put16(a, (uint16_t)off);
		util_put16(a + 2, (uint16_t)len);
		memcpy(a + 4, buf_data(pg) + off, len);
		memcpy(a + 4 + len, data, len);
		if (patch && !buf_logged(bp, pg)) /* B12 */
			rc = txn_update_imaged(t, pg, OP_PAGE_SET, a, 4 + 2 * len);
		else
			rc = txn_update(t, pg, OP_PAGE_SET, a, 4 + 2 * len);
		buf_put(bp, pg);
	}
	free(a);
	return rc;
}

int op_page_fill(txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len)
{
	buf_pool *bp = txn_pool(t);
	uint32_t ps = buf_page_size(bp);
	buf_page *pg;
	unsigned char *a;
	int rc;
	if (off < BUF_HDR || off > ps || len > ps - off || off > 65535)
		return util_err(TP_EINVAL, "fill of page %" PRIu64 ": range %" PRIu32 "+%" PRIu32 " is outside the body",
				pgno, off, len);
	if (!(a = malloc(2 + (size_t)len)))
		return ENOMEM;
	util_put16(a, (uint16_t)off);
	memcpy(a + 2, data, len);
	if ((rc = buf_get(bp, pgno, BUF_X, &pg)) == 0) {
		rc = txn_update(t, pg, OP_PAGE_FILL, a, 2 + len);
		buf_put(bp, pg);
	}
	free(a);
	return rc;
}

/* The first byte of body[i..end) that is not 0xff (a page free in it), or
 * end: eight bytes at a time, since most of a busy group is full. */
static uint64_t open_byte(const unsigned char *body, uint64_t i, uint64_t end)
{
	for (; i < end && (i & 7); i++)
		if (body[i] != 0xff)
			return i;
	for (; i + 8 <= end; i += 8) {
		uint64_t w;
		memcpy(&w, body + i, 8);
		if (w != UINT64_MAX)
			break;
	}
	for (; i < end; i++)
		if (body[i] != 0xff)
			return i;
	return end;
}

/* Pages in a group's chunk (alloc.c A5): reserved again as one range. */
#define CHUNK_PAGES 64

static uint64_t chunk_of(uint64_t g, uint64_t grp, uint64_t i)
{
	return grp * ((g + CHUNK_PAGES - 1) / CHUNK_PAGES) + i / CHUNK_PAGES;
}

/* Pages a failed reserve sent the search past (a hole on a full disk). */
typedef struct skipset {
	uint64_t pg[16];
	int n;
} skipset;

static int skipped(const skipset *sk, uint64_t pgno)
{
	for (int i = 0; sk && i < sk->n; i++)
		if (sk->pg[i] == pgno)
			return 1;
	return 0;
}

/* First clear bit >= 1 of a bitmap body, from bit `from` on and then from
 * the start, that no open transaction freed (alloc.c A1), nor for ordered data a
 * commit not yet durable (A2), nor a hole a full disk could not fill (sk). */
static int find_free(txn_mgr *tm, const unsigned char *body, uint64_t g, uint64_t first, uint64_t from, int ordered,
		     const skipset *sk, uint32_t *bit)
{
	uint64_t nbytes = g / 8, start = from / 8;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t lo = pass ? 0 : start, hi = pass ? start : nbytes; /* (pass 0 saw all of byte start) */
		for (uint64_t byte = open_byte(body, lo, hi); byte < hi; byte = open_byte(body, byte + 1, hi)) {
			for (unsigned b = 0; b < 8; b++) {
				uint64_t i = byte * 8 + b;
				if (i == 0 || (body[byte] >> b) & 1)
					continue;
				if (alloc_held(txn_mgr_alloc(tm), first + i, ordered) || skipped(sk, first + i))
					continue;
				*bit = (uint32_t)i;
				return 1;
			}
		}
	}
	return 0;
}

/* A5: the page's chunk gets its disk blocks again, unless known to have
 * them (bitmap page bm X-latched, so no punch of the group runs): the
 * whole chunk, or on a full disk the page alone.  ENOSPC: the page is a
 * hole the disk cannot fill. */
static int chunk_reserve(buf_pool *bp, alloc_mgr *am, uint64_t g, uint64_t grp, uint64_t bm, uint32_t bit)
{
	uint64_t c = chunk_of(g, grp, bit), lo = (uint64_t)bit / CHUNK_PAGES * CHUNK_PAGES;
	int rc;
	if (alloc_chunk_known(am, c))
		return 0;
	uint64_t n = g - lo < CHUNK_PAGES ? g - lo : CHUNK_PAGES;
	if ((rc = buf_refill(bp, bm + lo, n)) == 0)
		alloc_chunk_mark(am, c, 1);
	else if (rc == ENOSPC)
		rc = buf_refill(bp, bm + bit, 1);
	return rc;
}

/* A logged update in t, or an unlogged one when t is NULL. */
static int upd(txn *t, txn_mgr *tm, buf_page *pg, uint16_t op, const void *args, uint32_t len)
{
	return t ? txn_update(t, pg, op, args, len) : txn_apply_unlogged(tm, pg, op, args, len);
}

/* Takes a free page in its bitmap (logged in t, or unlogged): first fit,
 * or next fit for ordered data.  The page gets its disk space before its
 * allocation is logged (B14): a full disk fails here with nothing logged.
 * Ordered data on a full disk first waits for the pages freed by commits
 * not yet durable (alloc.c A2): space freed by a removal is writable at once. */
static int alloc_bit(txn *t, txn_mgr *tm, int ordered, uint64_t *pgno)
{
	buf_pool *bp = txn_mgr_pool(tm);
	alloc_mgr *am = txn_mgr_alloc(tm);
	uint32_t ps = buf_page_size(bp);
	uint64_t g = op_group_pages(ps);
	int rollback = t && txn_rolling_back(t);
	int retried = 0, flushed;
	skipset sk = {.n = 0};
	unsigned char arg[4];
	buf_page *pg;
	uint32_t bit;
	int rc;

again:
	for (uint64_t grp = alloc_hint(am);; grp++) {
		uint64_t bm = 1 + grp * g;
		if ((rc = buf_get(bp, bm, BUF_X, &pg)) != 0)
			return rc;
		uint64_t rover = ordered ? alloc_rover(am) : 0; /* sequential data stays O(1) */
		uint64_t from = rover > bm && rover - bm < g ? rover - bm : 0;
		if (!find_free(tm, buf_data(pg) + BUF_HDR, g, bm, from, ordered, &sk, &bit)) {
			buf_put(bp, pg);
			alloc_full(am, grp);
			continue;
		}
		if ((rc = buf_reserve(bp, bm + bit + 1, rollback)) != 0) { /* B14 */
			buf_put(bp, pg);
			if (rc == ENOSPC && ordered && !retried) {
				/* next fit ran into the end of the file's space:
				 * once more from the first page, with the pages
				 * freed by commits not yet durable free too (A2) */
				retried = 1;
				alloc_set_rover(am, 0);
				if ((rc = alloc_limbo_flush(am, &flushed)) != 0)
					return rc;
				goto again;
			}
			return rc;
		}
		if ((rc = chunk_reserve(bp, am, g, grp, bm, bit)) != 0) { /* B14, alloc.c A5 */
			buf_put(bp, pg);
			if (rc == ENOSPC && sk.n < (int)(sizeof sk.pg / sizeof sk.pg[0])) {
				sk.pg[sk.n++] = bm + bit; /* a hole the full disk cannot fill: another page */
				goto again;
			}
			return rc;
		}
		util_put32(arg, bit);
		rc = upd(t, tm, pg, OP_PAGE_ALLOC, arg, 4);
		if (!rc)
			alloc_taken(am, bm + bit); /* A4: no longer to be given back */
		buf_put(bp, pg);
		if (rc)
			return rc;
		*pgno = bm + bit;
		if (ordered)
			alloc_set_rover(am, *pgno + 1);
		return 0;
	}
}

static int page_alloc(txn *t, txn_mgr *tm, uint16_t type, uint64_t *pgno)
{
	buf_pool *bp = txn_mgr_pool(tm);
	unsigned char arg[2];
	buf_page *pg;
	int rc;
	if ((rc = alloc_bit(t, tm, 0, pgno)) != 0)
		return rc;
	/* the new page's old contents do not matter: it is rebuilt whole */
	if ((rc = buf_get(bp, *pgno, BUF_X | BUF_NOREAD, &pg)) != 0)
		return rc;
	util_put16(arg, type);
	rc = upd(t, tm, pg, OP_PAGE_INIT, arg, 2);
	buf_put(bp, pg);
	return rc;
}

int op_page_alloc_ordered(txn *t, uint16_t type, uint32_t fill, uint64_t *pgno, buf_page **out)
{
	txn_mgr *tm = txn_mgr_of(t);
	buf_pool *bp = txn_mgr_pool(tm);
	buf_page *pg;
	int rc;
	if ((rc = alloc_bit(t, tm, 1, pgno)) != 0)
		return rc;
	if ((rc = buf_get(bp, *pgno, BUF_X | BUF_NOREAD | BUF_ONCE, &pg)) != 0)
		return rc;
	/* O1: the LSN is above every record of the page's earlier lives, so
	 * redo skips them, and below the durable end, so that no crash can cut
	 * the log below it and give its LSNs to records of a later life (redo
	 * would skip those).  The frame's LSN covers the earlier lives when the
	 * pool holds the page; when it does not, the page was written after its
	 * last record was durable (B1), and NOREAD left the LSN 0. */
	log_mgr *lg = txn_mgr_log(tm);
	uint64_t prev = buf_page_lsn(pg), durable = log_durable(lg);
	if (prev && prev + 1 >= durable) {
		if ((rc = log_flush(lg, prev)) != 0) {
			buf_put(bp, pg);
			return rc;
		}
		durable = log_durable(lg);
	}
	uint64_t lsn = durable - 1;
	uint32_t psize = buf_page_size(bp);
	if (fill < BUF_HDR || fill > psize)
		fill = BUF_HDR;
	memset(buf_data(pg), 0, BUF_HDR); /* the caller writes [BUF_HDR, fill) */
	memset(buf_data(pg) + fill, 0, psize - fill);
	util_put16(buf_data(pg) + 4, type);
	buf_dirty(bp, pg, lsn);
	buf_set_lsn(pg, lsn);
	*out = pg;
	return 0;
}

int op_page_ordered_done(txn *t, buf_page *pg)
{
	txn_mgr *tm = txn_mgr_of(t);
	uint64_t pgno = buf_pgno(pg), lsn = buf_page_lsn(pg);
	buf_mark_ordered(txn_mgr_pool(tm), pg); /* B12 */
	buf_put(txn_mgr_pool(tm), pg);
	return ord_note(txn_mgr_ord(tm), pgno, lsn);
}

static int page_free(txn *t, txn_mgr *tm, uint64_t pgno)
{
	buf_pool *bp = txn_mgr_pool(tm);
	uint64_t g = op_group_pages(buf_page_size(bp));
	unsigned char arg[4];
	buf_page *pg;
	int rc;

	if (pgno == 0)
		return util_err(TP_EINVAL, "free page 0: it is the store's root page");
	if ((rc = check_data_page(bp, pgno, "free")) != 0)
		return rc;
	uint64_t bm = 1 + (pgno - 1) / g * g;
	if (t && (rc = alloc_note_free(txn_mgr_alloc(tm), txn_freed(t), pgno)) != 0)
		return rc;
	util_put32(arg, (uint32_t)(pgno - bm));
	if ((rc = buf_get(bp, bm, BUF_X, &pg)) != 0)
		return rc;
	rc = upd(t, tm, pg, OP_PAGE_FREE, arg, 4);
	buf_put(bp, pg);
	return rc;
}

int op_page_alloc(txn *t, uint16_t type, uint64_t *pgno) { return page_alloc(t, txn_mgr_of(t), type, pgno); }
int op_page_free(txn *t, uint64_t pgno) { return page_free(t, txn_mgr_of(t), pgno); }
int op_page_alloc_unlogged(txn_mgr *tm, uint16_t type, uint64_t *pgno) { return page_alloc(NULL, tm, type, pgno); }
int op_page_free_unlogged(txn_mgr *tm, uint64_t pgno) { return page_free(NULL, tm, pgno); }

/* ---- space that goes back to the file system (alloc.c A4) ---- */

/* Punches the run [first, first+n) (bitmap latched): its chunks are
 * unknown first (A5), so no allocation skips reserving them again. */
static int punch_run(buf_pool *bp, alloc_mgr *am, uint64_t g, uint64_t grp, uint64_t bm, uint64_t first, uint64_t n,
		     op_space *sp)
{
	if (!n)
		return 0;
	for (uint64_t c = chunk_of(g, grp, first - bm); c <= chunk_of(g, grp, first + n - 1 - bm); c++)
		alloc_chunk_mark(am, c, 0);
	int rc = buf_punch(bp, first, n);
	if (rc == 0) {
		sp->pages += n;
		sp->calls++;
	}
	return rc;
}

int op_page_return(txn_mgr *tm, uint64_t before, op_space *sp)
{
	buf_pool *bp = txn_mgr_pool(tm);
	alloc_mgr *am = txn_mgr_alloc(tm);
	uint64_t g = op_group_pages(buf_page_size(bp));
	uint64_t *cand, *done;
	size_t n, nd = 0;
	int rc;

	memset(sp, 0, sizeof *sp);
	if ((rc = alloc_returnable(am, before, &cand, &n)) != 0 || !n)
		return rc;
	if (!(done = malloc(n * sizeof *done))) {
		free(cand);
		return ENOMEM;
	}
	for (size_t i = 0; i < n && !rc;) {
		uint64_t grp = (cand[i] - 1) / g, bm = 1 + grp * g;
		buf_page *pg;
		/* the group's bitmap X-latched: no allocation in it meanwhile */
		if ((rc = buf_get(bp, bm, BUF_X, &pg)) != 0)
			break;
		const unsigned char *body = buf_data(pg) + BUF_HDR;
		uint64_t run = 0, run_n = 0;
		for (; i < n && (cand[i] - 1) / g == grp && !rc; i++) {
			uint64_t p = cand[i], bit = p - bm;
			if (bit == 0 || (body[bit / 8] >> (bit % 8)) & 1) {
				done[nd++] = p; /* allocated again (or a bitmap): not a candidate */
				continue;
			}
			/* A4: no open transaction freed it (A1), no commit a
			 * crash may lose (A2), no frame that could write it */
			if (alloc_held(am, p, 1) || buf_held_dirty(bp, p))
				continue;
			done[nd++] = p;
			if (run_n && run + run_n == p) {
				run_n++;
				continue;
			}
			rc = punch_run(bp, am, g, grp, bm, run, run_n, sp);
			run = p;
			run_n = 1;
		}
		if (!rc)
			rc = punch_run(bp, am, g, grp, bm, run, run_n, sp);
		buf_put(bp, pg);
	}
	if (rc == ENOTSUP) /* a file system without holes: nothing to give back */
		rc = 0;
	alloc_forget(am, done, nd);
	free(done);
	free(cand);
	return rc;
}
