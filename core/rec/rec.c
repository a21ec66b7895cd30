/*
 * rec -- ARIES restart recovery and fuzzy checkpoints.
 *
 * Design
 *   Analysis starts at the checkpoint named by the master record, seeds the
 *   transaction table and dirty-page table (DPT) from it, and scans to the
 *   end of the log: a transaction is a loser unless its COMMIT or ABORT
 *   record is found; a page enters the DPT at the first record that changes
 *   it.  Redo repeats history from the smallest recovery LSN: a record is
 *   applied when its page is in the DPT at or before it and the page's LSN
 *   is older (W4).  A record that rewrites the whole page (a full-page image
 *   or PAGE_INIT) reads its page with BUF_REBUILD, so a page torn by the
 *   crash is rebuilt from the log.  Undo rolls each loser back through
 *   txn_abort, newest loser first, logging CLRs, so a crash during recovery
 *   resumes where it stopped (CLRs are redone, never undone).
 *
 *   A checkpoint sets the full-page horizon first (every page changed after
 *   it logs its image once), then writes back every dirty page, then logs
 *   the tables.  Recovery therefore starts near the checkpoint, and any page
 *   written after the horizon -- the only ones a crash can tear -- has its
 *   image in the log after the redo start.
 *
 * Invariants (W1-W6: core/DESIGN.md; each rule is its first sentence, the
 * lines under it say why)
 *   R1 (W4)  Redo applies record R to page P only if page_lsn(P) < lsn(R).
 *       With W1, redo is idempotent: a record already on a page is skipped.
 *   R2  The redo start is at or before the horizon and every DPT rec_lsn.
 *       Every change a crash may have lost from a page is then redone.
 *   R3  The log start kept by a checkpoint is at or before the redo start
 *       and the first record of every open transaction.
 *       Redo and undo then find every record they need.
 *   R4  Recovery run twice gives the same state as once.
 *       A crash during recovery is just another crash.
 *   R5  A checkpoint's snapshot reflects every record below its scan_from
 *       LSN (taken before the snapshot).
 *       Analysis scans from scan_from, so records racing with the snapshot
 *       are seen either way, and applying a record twice to the tables is
 *       harmless.
 *   R6  Recovery needs no new disk space for pages.
 *       Every page a record names was given its space before the record
 *       was logged (buf.c B14), and redo starts only once the page file
 *       holds every page analysis found named (a power cut may have lost
 *       the file's growth: then recovery asks for it first, and refuses
 *       cleanly if the disk cannot give it, before it writes anything).
 *       Pages of the dirty-page table get their blocks again too (they may
 *       be holes whose new blocks the power cut lost, alloc.c A5).
 *       The checkpoint that ends recovery and the one of a clean close log
 *       into the log's spare segment (L8) and write back only such pages.
 *   R7  Undo hands out pages as normal processing does.
 *       Each loser is adopted with the pages it freed that its rollback
 *       will take back (alloc.c A1) before any is rolled back, so a split
 *       inside a logical undo takes a free page of the file -- one of those
 *       kept for rollbacks (B14) on a full disk -- and needs no new disk
 *       space.  (A floor above every page the file held sent such splits
 *       past the end of the file: on a full disk the mount failed in
 *       recovery.)
 */
#include "rec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "op.h"
#include "tp.h"
#include "util.h"

/* ---- tables ---- */

typedef struct atx {
	uint64_t txid, first, last, undo_next;
	txn *t; /* the loser adopted for undo */
} atx;

typedef struct dpt {
	uint64_t *keys, *vals; /* open addressing; key 0 empty: stored as pgno+1 */
	size_t cap, n;
} dpt;

static int dpt_grow(dpt *d)
{
	size_t ncap = d->cap ? 2 * d->cap : 1024;
	uint64_t *k = calloc(ncap, sizeof *k), *v = calloc(ncap, sizeof *v);
	if (!k || !v) {
		free(k);
		free(v);
		return ENOMEM;
	}
	for (size_t i = 0; i < d->cap; i++) {
		if (!d->keys[i])
			continue;
		size_t j = (size_t)(d->keys[i] * 0x9e3779b97f4a7c15ull) & (ncap - 1);
		while (k[j])
			j = (j + 1) & (ncap - 1);
		k[j] = d->keys[i];
		v[j] = d->vals[i];
	}
	free(d->keys);
	free(d->vals);
	d->keys = k;
	d->vals = v;
	d->cap = ncap;
	return 0;
}

static uint64_t *dpt_slot(dpt *d, uint64_t pgno, int insert)
{
	if (insert && (d->n + 1) * 2 > d->cap && dpt_grow(d) != 0)
		return NULL;
	if (!d->cap)
		return NULL;
	uint64_t key = pgno + 1;
	size_t j = (size_t)(key * 0x9e3779b97f4a7c15ull) & (d->cap - 1);
	while (d->keys[j] && d->keys[j] != key)
		j = (j + 1) & (d->cap - 1);
	if (!d->keys[j]) {
		if (!insert)
			return NULL;
		d->keys[j] = key;
		d->vals[j] = 0;
		d->n++;
	}
	return &d->vals[j];
}

typedef struct analysis {
	atx *tx;
	size_t ntx, ctx;
	dpt dp;
	uint64_t redo_lsn, next_txid, scan_from;
	uint64_t max_pgno; /* the highest page any scanned record names */
} analysis;

static atx *tx_find(analysis *a, uint64_t txid, int insert)
{
	for (size_t i = 0; i < a->ntx; i++)
		if (a->tx[i].txid == txid)
			return &a->tx[i];
	if (!insert)
		return NULL;
	if (a->ntx == a->ctx) {
		size_t nc = a->ctx ? 2 * a->ctx : 16;
		atx *n = realloc(a->tx, nc * sizeof *n);
		if (!n)
			return NULL;
		a->tx = n;
		a->ctx = nc;
	}
	atx *t = &a->tx[a->ntx++];
	memset(t, 0, sizeof *t);
	t->txid = txid;
	return t;
}

static void tx_remove(analysis *a, atx *t)
{
	*t = a->tx[--a->ntx];
}

/* ---- checkpoint record ---- */

typedef struct ckpt_build {
	unsigned char *p;
	size_t len, cap;
	uint32_t ntx, npg;
	int err;
	uint64_t min_rec;
} ckpt_build;

static void cb_put(ckpt_build *b, uint64_t a, uint64_t c)
{
	if (b->err)
		return;
	if (b->len + 16 > b->cap) {
		size_t nc = b->cap * 2;
		unsigned char *n = realloc(b->p, nc);
		if (!n) {
			b->err = ENOMEM;
			return;
		}
		b->p = n;
		b->cap = nc;
	}
	util_put64(b->p + b->len, a);
	util_put64(b->p + b->len + 8, c);
	b->len += 16;
}

static void cb_txn(void *ctx, const txn *t)
{
	ckpt_build *b = ctx;
	uint64_t first, last, un;
	if (txn_lsns(t, &first, &last, &un) || !last)
		return; /* ended, or has logged nothing: nothing to recover */
	cb_put(b, txn_id(t), first);
	cb_put(b, last, un);
	b->ntx++;
}

static void cb_page(void *ctx, uint64_t pgno, uint64_t rec_lsn)
{
	ckpt_build *b = ctx;
	cb_put(b, pgno, rec_lsn);
	b->npg++;
	if (rec_lsn < b->min_rec)
		b->min_rec = rec_lsn;
}

static int ckpt_log(log_mgr *lg, uint64_t horizon, uint64_t next_txid, txn_mgr *tm, buf_pool *bp,
		    uint64_t *ckpt_lsn, uint64_t *redo_lsn)
{
	ckpt_build b = {.cap = 4096, .len = 32, .min_rec = UINT64_MAX};
	int rc;
	if (!(b.p = malloc(b.cap)))
		return ENOMEM;
	/* R5: every record below scan_from is in the snapshot (T6, B6) */
	uint64_t scan_from = log_end(lg);
	if (tm)
		txn_foreach(tm, cb_txn, &b);
	uint32_t ntx = b.ntx;
	if (bp)
		buf_dirty_pages(bp, cb_page, &b);
	if ((rc = b.err) != 0)
		goto out;
	*redo_lsn = horizon < b.min_rec ? horizon : b.min_rec; /* R2 */
	util_put64(b.p, *redo_lsn);
	util_put64(b.p + 8, next_txid);
	util_put64(b.p + 16, scan_from);
	util_put32(b.p + 24, ntx);
	util_put32(b.p + 28, b.npg);
	/* the txn entries were written first, then the pages: the same order */
	log_rec r = {.pgno = LOG_NOPAGE, .type = OP_CKPT, .flags = LOG_RESERVE, .len = (uint32_t)b.len, .data = b.p};
	if ((rc = log_put(lg, &r)) != 0)
		goto out;
	if ((rc = log_flush(lg, r.lsn)) != 0)
		goto out;
	*ckpt_lsn = r.lsn;
out:
	free(b.p);
	return rc;
}

int rec_first_checkpoint(log_mgr *lg, uint64_t *ckpt_lsn)
{
	uint64_t redo;
	return ckpt_log(lg, log_end(lg), 1, NULL, NULL, ckpt_lsn, &redo);
}

int rec_checkpoint(log_mgr *lg, buf_pool *bp, txn_mgr *tm, store *st, uint64_t *ckpt_lsn, uint64_t *log_start)
{
	uint64_t horizon, redo, start;
	int rc;

	horizon = log_set_horizon(lg);
	if ((rc = buf_flush_all(bp)) != 0)
		return rc;
	if ((rc = ckpt_log(lg, horizon, txn_next_id(tm), tm, bp, ckpt_lsn, &redo)) != 0)
		return rc;
	start = redo; /* R3 */
	uint64_t old = txn_oldest_lsn(tm);
	if (old < start)
		start = old;
	io_point("rec.ckpt.logged");
	uint64_t pages;
	if ((rc = buf_file_pages(bp, &pages)) != 0)
		return rc;
	if ((rc = store_master_put(st, *ckpt_lsn, start, pages)) != 0) {
		log_panic(lg, rc, "checkpoint master write");
		return rc;
	}
	io_point("rec.ckpt.master");
	*log_start = start;
	return log_truncate(lg, start);
}

/* ---- recovery ---- */

static int ckpt_read(log_mgr *lg, uint64_t lsn, analysis *a)
{
	log_rec r;
	void *buf;
	int rc;
	if ((rc = log_read(lg, lsn, &r, &buf)) != 0)
		return util_err(rc, "checkpoint record at LSN %" PRIu64 " named by the master is unreadable: %s", lsn,
				util_errmsg());
	const unsigned char *p = r.data;
	if (r.type != OP_CKPT || r.len < 32) {
		free(buf);
		return util_err(TP_ECORRUPT, "log: the record at LSN %" PRIu64 " named by the master is not a checkpoint",
				lsn);
	}
	a->redo_lsn = util_get64(p);
	a->next_txid = util_get64(p + 8);
	a->scan_from = util_get64(p + 16);
	uint32_t n = util_get32(p + 24), m = util_get32(p + 28);
	if (r.len != 32 + 32ull * n + 16ull * m || a->scan_from > lsn) {
		free(buf);
		return util_err(TP_ECORRUPT, "log: checkpoint at LSN %" PRIu64 " is malformed", lsn);
	}
	p += 32;
	for (uint32_t i = 0; i < n; i++, p += 32) {
		atx *t = tx_find(a, util_get64(p), 1);
		if (!t) {
			free(buf);
			return ENOMEM;
		}
		t->first = util_get64(p + 8);
		t->last = util_get64(p + 16);
		t->undo_next = util_get64(p + 24);
	}
	for (uint32_t i = 0; i < m; i++, p += 16) {
		uint64_t *v = dpt_slot(&a->dp, util_get64(p), 1);
		if (!v) {
			free(buf);
			return ENOMEM;
		}
		*v = util_get64(p + 8);
	}
	free(buf);
	return 0;
}

int rec_ckpt_quiet(log_mgr *lg, uint64_t ckpt_lsn)
{
	log_rec r;
	void *buf;
	if (log_read(lg, ckpt_lsn, &r, &buf) != 0)
		return 0;
	int quiet = r.type == OP_CKPT && r.len >= 32 && util_get32((const unsigned char *)r.data + 24) == 0 &&
		    util_get32((const unsigned char *)r.data + 28) == 0;
	free(buf);
	return quiet;
}

/* ---- progress on a terminal ---- */

typedef struct prog {
	int on;          /* asked for, and stderr is a terminal */
	int shown;       /* a line is on the terminal */
	uint64_t t0;     /* recovery began */
	uint64_t next;   /* no new line before this time */
	unsigned calls;  /* the clock is read every 256 calls */
	uint64_t delay;  /* ns of recovery before the first line */
} prog;

/* Shows "PHASE: N%" (done of total) once recovery has run for the delay
 * ($TPFS_PROGRESS_MS, default 500 ms), at most 4 times a second, over the
 * line before. */
static void prog_show(prog *p, const char *phase, uint64_t done, uint64_t total)
{
	if (!p->on || (p->calls++ & 255) != 0)
		return;
	uint64_t now = util_now_ns();
	if (now < p->t0 + p->delay || now < p->next)
		return;
	p->next = now + 250000000u;
	fprintf(stderr, "\rtpfs: recovery: %s %3u%%", phase, total ? (unsigned)(100 * done / total) : 100u);
	fflush(stderr);
	p->shown = 1;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* R6 for holes (alloc.c A5): a page redo writes back may be one the file
 * gave back whose new blocks a power cut lost; every page of the DPT gets
 * its blocks again first, runs of pages in one call. */
static int dpt_refill(buf_pool *bp, const dpt *d)
{
	if (!d->n)
		return 0;
	uint64_t *v = malloc(d->n * sizeof *v);
	size_t k = 0;
	int rc = 0;
	if (!v)
		return ENOMEM;
	for (size_t i = 0; i < d->cap; i++)
		if (d->keys[i])
			v[k++] = d->keys[i] - 1;
	qsort(v, k, sizeof *v, cmp_u64);
	for (size_t i = 0; i < k && !rc;) {
		size_t j = i + 1;
		while (j < k && v[j] == v[j - 1] + 1)
			j++;
		rc = buf_refill(bp, v[i], j - i);
		i = j;
	}
	free(v);
	return rc;
}

/* Clears the progress line, if one was shown. */
static void prog_end(prog *p)
{
	if (p->shown)
		fprintf(stderr, "\r%40s\r", "");
	p->shown = 0;
}

static int analyze(log_mgr *lg, uint64_t ckpt_lsn, prog *pg, analysis *a, rec_result *res)
{
	log_scan *s;
	log_rec r;
	int rc;

	if ((rc = ckpt_read(lg, ckpt_lsn, a)) != 0)
		return rc;
	if ((rc = log_scan_open(lg, a->scan_from, &s)) != 0)
		return rc;
	uint64_t from = a->scan_from, end = log_end(lg);
	while ((rc = log_scan_next(s, &r)) == 0) {
		const op_def *op = op_get(r.type);
		res->records++;
		prog_show(pg, "analysis", r.lsn - from, end - from);
		if (r.lsn == ckpt_lsn)
			continue;
		if (!op) {
			rc = util_err(TP_ECORRUPT, "log: record at LSN %" PRIu64 " has unknown type %u", r.lsn, r.type);
			break;
		}
		if (r.txid) {
			atx *t = tx_find(a, r.txid, 1);
			if (!t) {
				rc = ENOMEM;
				break;
			}
			if (r.txid >= a->next_txid)
				a->next_txid = r.txid + 1;
			if (!t->first)
				t->first = r.lsn;
			t->last = r.lsn;
			t->undo_next = (r.flags & LOG_CLR) ? r.undo_next : r.lsn;
			if (r.type == OP_COMMIT || r.type == OP_ABORT)
				tx_remove(a, t);
		}
		if ((op->flags & OPF_PAGE) && r.pgno != LOG_NOPAGE) {
			uint64_t named = r.pgno;
			if ((r.type == OP_PAGE_ALLOC || r.type == OP_PAGE_FREE) && r.len == 4)
				named = r.pgno + util_get32(r.data); /* the page a bitmap bit stands for */
			if (named > a->max_pgno)
				a->max_pgno = named;
			uint64_t *v = dpt_slot(&a->dp, r.pgno, 1);
			if (!v) {
				rc = ENOMEM;
				break;
			}
			if (!*v)
				*v = r.lsn;
		}
	}
	log_scan_close(s);
	return rc == TP_ENOTFOUND ? 0 : rc;
}

static int redo(log_mgr *lg, buf_pool *bp, prog *pgs, analysis *a, rec_result *res)
{
	uint64_t start = a->redo_lsn;
	log_scan *s;
	log_rec r;
	int rc;

	for (size_t i = 0; i < a->dp.cap; i++) /* R2 */
		if (a->dp.keys[i] && a->dp.vals[i] < start)
			start = a->dp.vals[i];
	res->from_lsn = start;
	if ((rc = log_scan_open(lg, start, &s)) != 0)
		return rc;
	uint64_t end = log_end(lg);
	while ((rc = log_scan_next(s, &r)) == 0) {
		const op_def *op = op_get(r.type);
		buf_page *pg;
		prog_show(pgs, "redo", r.lsn - start, end - start);
		if (!op || !(op->flags & OPF_PAGE) || r.pgno == LOG_NOPAGE)
			continue;
		int full = (op->flags & OPF_FULLPAGE) != 0;
		uint64_t *rl = dpt_slot(&a->dp, r.pgno, full);
		if (full && !rl) {
			rc = ENOMEM;
			break;
		}
		/* a page written after this image may be torn: rebuild it from
		 * the image and redo every later record (R1 skips what the page
		 * already has) */
		if (full && (!*rl || r.lsn < *rl))
			*rl = r.lsn;
		if (!rl || r.lsn < *rl)
			continue;
		int flags = BUF_X | ((op->flags & OPF_FULLPAGE) ? BUF_REBUILD : 0);
		if ((rc = buf_get(bp, r.pgno, flags, &pg)) != 0) {
			if (rc == TP_ECORRUPT)
				util_err(rc, "%s; the log from LSN %" PRIu64 " does not hold an image to rebuild it from",
					 util_errmsg(), start);
			break;
		}
		if (buf_page_lsn(pg) < r.lsn) { /* R1 */
			if ((rc = op->redo(buf_data(pg), buf_page_size(bp), &r)) == 0) {
				buf_dirty(bp, pg, r.lsn);
				buf_set_lsn(pg, r.lsn);
				res->redone++;
			}
		}
		buf_put(bp, pg);
		if (rc)
			break;
	}
	log_scan_close(s);
	res->to_lsn = log_end(lg);
	return rc == TP_ENOTFOUND ? 0 : rc;
}

/* R7: the pages loser t freed that its rollback will mark allocated again
 * -- its PAGE_FREE records on the path rollback takes from undo_next (a
 * CLR leads to its undo_next) -- are held from allocation until it ends
 * (alloc.c A1), as they were before the crash. */
static int loser_frees(log_mgr *lg, txn *t, uint64_t undo_next)
{
	uint64_t lsn = undo_next;
	while (lsn) {
		log_rec r;
		void *buf;
		int rc = log_read(lg, lsn, &r, &buf);
		if (rc)
			return util_err(rc, "recovery: record at LSN %" PRIu64 " of a transaction to roll back is "
					    "unreadable: %s",
					lsn, util_errmsg());
		if (r.flags & LOG_CLR) {
			lsn = r.undo_next;
		} else {
			if (r.type == OP_PAGE_FREE && r.len == 4 && r.pgno != LOG_NOPAGE)
				rc = alloc_note_free(txn_mgr_alloc(txn_mgr_of(t)), txn_freed(t), r.pgno + util_get32(r.data));
			lsn = r.prev_lsn;
		}
		free(buf);
		if (rc)
			return rc;
	}
	return 0;
}

static int cmp_last_desc(const void *x, const void *y)
{
	const atx *a = x, *b = y;
	return a->last < b->last ? 1 : a->last > b->last ? -1 : 0;
}

int rec_recover(log_mgr *lg, buf_pool *bp, uint64_t ckpt_lsn, int progress, txn_mgr **tmp, rec_result *res)
{
	analysis a = {0};
	txn_mgr *tm = NULL;
	uint64_t t0 = util_now_ns();
	const char *pd = getenv("TPFS_PROGRESS_MS");
	prog pg = {.on = progress && isatty(STDERR_FILENO), .t0 = t0,
		   .delay = (pd && *pd ? strtoull(pd, NULL, 10) : 500) * 1000000u};
	int rc;

	memset(res, 0, sizeof *res);
	if ((rc = analyze(lg, ckpt_lsn, &pg, &a, res)) != 0)
		goto out;
	if ((rc = txn_mgr_open(lg, bp, a.next_txid, &tm)) != 0)
		goto out;
	/* R6: every page redo may write back has its disk space before redo */
	if (a.max_pgno && (rc = buf_reserve(bp, a.max_pgno + 1, 1)) != 0) {
		rc = util_err(rc, "recovery: %s; redo would write page %" PRIu64 " (make room on the disk)",
			      util_errmsg(), a.max_pgno);
		goto out;
	}
	if ((rc = dpt_refill(bp, &a.dp)) != 0) {
		rc = util_err(rc, "recovery: %s; redo would write a page the file gave back (make room on the disk)",
			      util_errmsg());
		goto out;
	}
	if ((rc = redo(lg, bp, &pg, &a, res)) != 0)
		goto out;
	/* undo: newest loser first, every loser adopted with the pages it
	 * freed first (R7) */
	if (a.ntx)
		qsort(a.tx, a.ntx, sizeof *a.tx, cmp_last_desc);
	for (size_t i = 0; i < a.ntx; i++) {
		if ((rc = txn_adopt(tm, a.tx[i].txid, a.tx[i].first, a.tx[i].last, a.tx[i].undo_next, &a.tx[i].t)) != 0)
			goto out;
		if ((rc = loser_frees(lg, a.tx[i].t, a.tx[i].undo_next)) != 0)
			goto out;
	}
	log_stats before, after;
	log_stats_get(lg, &before);
	for (size_t i = 0; i < a.ntx; i++) {
		txn *t = a.tx[i].t;
		pg.calls = 0; /* (one look at the clock per loser) */
		prog_show(&pg, "undo", i, a.ntx);
		a.tx[i].t = NULL; /* ended by txn_abort, whatever it returns */
		if ((rc = txn_abort(t)) != 0)
			goto out;
		res->losers++;
	}
	log_stats_get(lg, &after);
	res->undone = after.records - before.records - res->losers;
	if ((rc = log_flush(lg, log_end(lg))) != 0)
		goto out;
	res->ms = (util_now_ns() - t0) / 1000000;
out:
	prog_end(&pg);
	free(a.tx);
	free(a.dp.keys);
	free(a.dp.vals);
	if (rc) {
		txn_mgr_close(tm);
		tm = NULL;
	}
	*tmp = tm;
	return rc;
}
