/*
 * test_op -- the operation registry (ops.def), the redo functions of the
 * page operations applied to page images directly, the record printer,
 * the allocation map geometry, and the page operations through a
 * transaction: alloc/free/allocated, alloc.c A1 (a page freed by an open
 * transaction is not reallocated), undo of alloc and free, and every bad
 * argument refused with TP_EINVAL before anything is logged or changed.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "io.h"
#include "log.h"
#include "op.h"
#include "store_util.h"
#include "tp.h"
#include "tp_test.h"
#include "txn.h"
#include "util.h"

#define PS 4096u
#define BODY (PS - BUF_HDR)

static char tdir[64], sdir[128];
static su_engine E;

static void setup(void)
{
	tp_options o;
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "op"), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
	su_options(&o, PS, 1u << 20, 0);
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
}

static void open_engine(size_t frames)
{
	int rc = su_engine_open(sdir, frames, &E);
	cr_assert_eq(rc, 0, "open: %d %s", rc, tp_errmsg());
}

static void teardown(void)
{
	if (E.st)
		su_engine_crash(&E);
	su_rmtree(tdir);
}

static txn *begin(void)
{
	txn *t;
	cr_assert_eq(txn_begin(E.tm, &t), 0);
	return t;
}

static void page_image(uint64_t pgno, unsigned char *out)
{
	buf_page *pg;
	cr_assert_eq(buf_get(E.bp, pgno, BUF_S, &pg), 0, "page %" PRIu64 ": %s", pgno, tp_errmsg());
	memcpy(out, buf_data(pg), PS);
	buf_put(E.bp, pg);
}

static int allocated(uint64_t pgno)
{
	int a;
	cr_assert_eq(op_page_allocated(E.bp, pgno, &a), 0);
	return a;
}

/* ================================================================== */

TestSuite(registry, .timeout = 30);

Test(registry, every_operation_is_listed)
{
	static const char *names[] = {NULL,	   "COMMIT",	"ABORT",      "CKPT",	   "FPI",
				      "NTA",	   "PAGE_SET",	"PAGE_INIT", "PAGE_ALLOC", "PAGE_FREE"};
	for (uint16_t id = 1; id < OP__END; id++) {
		const op_def *d = op_get(id);
		cr_assert_not_null(d, "operation %u", id);
		cr_assert_eq(d->id, id);
		cr_assert_not_null(d->print, "%s has a printer (the log dumper prints every type)", d->name);
		if (id < sizeof names / sizeof names[0])
			cr_assert_str_eq(d->name, names[id], "ids are on disk: %u must stay %s", id, names[id]);
		if (d->flags & OPF_PAGE)
			cr_assert_not_null(d->redo, "%s changes pages, so it has a redo", d->name);
		if (d->flags & OPF_FULLPAGE)
			cr_assert(d->flags & OPF_PAGE);
	}
	cr_assert_geq(OP__END, 10, "ids are never removed");
	cr_assert_not_null(op_get(0), "0 is the log's padding");
	cr_assert_str_eq(op_get(0)->name, "PAD");
	cr_assert_null(op_get(OP__END));
	cr_assert_null(op_get(999));
	cr_assert_null(op_get(UINT16_MAX));
	cr_assert_not_null(op_get(OP_PAGE_SET)->undo);
	cr_assert_not_null(op_get(OP_PAGE_ALLOC)->undo);
	cr_assert_not_null(op_get(OP_PAGE_FREE)->undo);
	cr_assert_null(op_get(OP_PAGE_INIT)->undo, "init is undone by freeing the page");
	cr_assert_null(op_get(OP_FPI)->undo);
	cr_assert_null(op_get(OP_COMMIT)->redo);
	cr_assert(op_get(OP_PAGE_INIT)->flags & OPF_FULLPAGE);
	cr_assert(op_get(OP_FPI)->flags & OPF_FULLPAGE);
	cr_assert_not(op_get(OP_PAGE_SET)->flags & OPF_FULLPAGE);
}

Test(registry, allocation_map_geometry)
{
	cr_assert_eq(op_group_pages(4096), 8ull * 4080);
	cr_assert_eq(op_group_pages(1024), 8ull * 1008);
	uint64_t g = op_group_pages(4096);
	cr_assert_not(op_is_bitmap(4096, 0), "page 0 is the root");
	cr_assert(op_is_bitmap(4096, 1));
	cr_assert_not(op_is_bitmap(4096, 2));
	cr_assert_not(op_is_bitmap(4096, g));
	cr_assert(op_is_bitmap(4096, g + 1));
	cr_assert(op_is_bitmap(4096, 2 * g + 1));
	cr_assert_not(op_is_bitmap(4096, 2 * g + 2));
}

/* ---- redo on page images ---- */

static log_rec mk(uint16_t type, uint64_t pgno, const void *data, uint32_t len)
{
	log_rec r = {.lsn = 4242, .txid = 1, .pgno = pgno, .type = type, .len = len, .data = data};
	return r;
}

Test(registry, set_redo)
{
	static unsigned char page[PS], copy[PS];
	unsigned char a[4 + 2 * 5];
	memset(page, 0xaa, sizeof page);
	util_put16(a, 100);
	util_put16(a + 2, 5);
	memcpy(a + 4, "BBBBB", 5);
	memcpy(a + 9, "hello", 5);
	log_rec r = mk(OP_PAGE_SET, 3, a, sizeof a);
	cr_assert_eq(op_set_redo(page, PS, &r), 0);
	cr_assert_arr_eq(page + 100, "hello", 5, "the after-image is applied");
	cr_assert_eq(page[99], 0xaa);
	cr_assert_eq(page[105], 0xaa);
	/* malformed: refused, page untouched */
	memcpy(copy, page, PS);
	util_put16(a, 8); /* inside the page header */
	cr_assert_eq(op_set_redo(page, PS, &r), TP_ECORRUPT);
	util_put16(a, PS - 3); /* past the end */
	cr_assert_eq(op_set_redo(page, PS, &r), TP_ECORRUPT);
	util_put16(a, 100);
	r.len = sizeof a - 1; /* length does not match */
	cr_assert_eq(op_set_redo(page, PS, &r), TP_ECORRUPT);
	r.len = 3;
	cr_assert_eq(op_set_redo(page, PS, &r), TP_ECORRUPT);
	cr_assert_arr_eq(page, copy, PS, "a refused redo changes nothing");
	cr_assert_not_null(strstr(tp_errmsg(), "4242"), "the message names the record's LSN: %s", tp_errmsg());
}

Test(registry, init_and_fpi_redo)
{
	static unsigned char page[PS], img[PS];
	memset(page, 0xaa, sizeof page);
	unsigned char t[2];
	util_put16(t, 0x1234);
	log_rec r = mk(OP_PAGE_INIT, 3, t, 2);
	cr_assert_eq(op_init_redo(page, PS, &r), 0);
	cr_assert_eq(util_get16(page + 4), 0x1234, "the page type");
	for (uint32_t i = 6; i < PS; i++)
		cr_assert_eq(page[i], 0, "byte %" PRIu32 " zeroed", i);
	r.len = 3;
	cr_assert_eq(op_init_redo(page, PS, &r), TP_ECORRUPT);

	for (uint32_t i = 0; i < PS; i++)
		img[i] = (unsigned char)(i * 3);
	r = mk(OP_FPI, 3, img, PS);
	cr_assert_eq(op_fpi_redo(page, PS, &r), 0);
	cr_assert_arr_eq(page, img, PS);
	r.len = PS / 2;
	cr_assert_eq(op_fpi_redo(page, PS, &r), TP_ECORRUPT, "an image of another page size");
}

Test(registry, bitmap_redo_changes_one_bit)
{
	static unsigned char page[PS];
	unsigned char a[4];
	memset(page, 0, sizeof page);
	page[BUF_HDR + 1] = 0x81; /* other transactions' bits 8 and 15 */
	util_put32(a, 11);
	log_rec r = mk(OP_PAGE_ALLOC, 1, a, 4);
	cr_assert_eq(op_alloc_redo(page, PS, &r), 0);
	cr_assert_eq(page[BUF_HDR + 1], 0x89);
	r.type = OP_PAGE_FREE;
	cr_assert_eq(op_free_redo(page, PS, &r), 0);
	cr_assert_eq(page[BUF_HDR + 1], 0x81, "only bit 11 changed");
	util_put32(a, 0);
	cr_assert_eq(op_alloc_redo(page, PS, &r), TP_ECORRUPT, "bit 0 is the bitmap itself");
	util_put32(a, (uint32_t)op_group_pages(PS));
	cr_assert_eq(op_free_redo(page, PS, &r), TP_ECORRUPT, "past the group");
	r.len = 2;
	cr_assert_eq(op_alloc_redo(page, PS, &r), TP_ECORRUPT);
	for (uint32_t i = 0; i < PS; i++)
		if (i != BUF_HDR + 1)
			cr_assert_eq(page[i], 0);
}

static char *print_rec(const log_rec *r)
{
	static char out[1024];
	FILE *f = fmemopen(out, sizeof out, "w");
	cr_assert_not_null(f);
	op_print(f, r);
	fclose(f);
	return out;
}

/* Every registered type prints its name, even for a short or empty
 * payload (the dumper must survive any record a scan returns). */
Test(registry, every_type_prints_its_name)
{
	static unsigned char junk[64];
	memset(junk, 0xff, sizeof junk);
	for (uint16_t id = 1; id < OP__END; id++) {
		const op_def *d = op_get(id);
		for (uint32_t len = 0; len <= sizeof junk; len += 8) {
			log_rec r = mk(id, 5, len ? junk : NULL, len);
			char *s = print_rec(&r);
			cr_assert_not_null(strstr(s, d->name), "%u: %s", id, s);
			cr_assert_null(strstr(s, "UNKNOWN"), "%s", s);
		}
	}
}

Test(registry, printer)
{
	unsigned char a[4 + 2 * 3];
	util_put16(a, 40);
	util_put16(a + 2, 3);
	memcpy(a + 4, "old", 3);
	memcpy(a + 7, "new", 3);
	log_rec r = mk(OP_PAGE_SET, 77, a, sizeof a);
	r.prev_lsn = 1111;
	char *s = print_rec(&r);
	cr_assert_not_null(strstr(s, "4242"), "%s", s);
	cr_assert_not_null(strstr(s, "PAGE_SET"), "%s", s);
	cr_assert_not_null(strstr(s, "page 77"), "%s", s);
	cr_assert_not_null(strstr(s, "prev 1111"), "%s", s);
	cr_assert_not_null(strstr(s, "off 40 len 3"), "%s", s);
	cr_assert_not_null(strstr(s, "6e6577"), "the after-image in hex: %s", s);
	cr_assert_null(strstr(s, "CLR"), "%s", s);
	cr_assert_eq(s[strlen(s) - 1], '\n', "one line per record");
	r.flags = LOG_CLR;
	r.undo_next = 999;
	s = print_rec(&r);
	cr_assert_not_null(strstr(s, "CLR undo_next 999"), "%s", s);
	r = mk(OP_COMMIT, LOG_NOPAGE, NULL, 0);
	s = print_rec(&r);
	cr_assert_not_null(strstr(s, "COMMIT"), "%s", s);
	cr_assert_null(strstr(s, "page"), "no page for a record of no page: %s", s);
	r = mk(500, LOG_NOPAGE, a, 4);
	s = print_rec(&r);
	cr_assert_not_null(strstr(s, "UNKNOWN"), "%s", s);
	cr_assert_not_null(strstr(s, "type 500"), "%s", s);
	unsigned char ck[8];
	r = mk(OP_CKPT, LOG_NOPAGE, ck, sizeof ck);
	s = print_rec(&r); /* a short checkpoint payload is printed, not overread */
	cr_assert_not_null(strstr(s, "CKPT"), "%s", s);
}

/* ================================================================== */

TestSuite(pages, .init = setup, .fini = teardown, .timeout = 60);

Test(pages, alloc_is_first_fit_and_initializes)
{
	static unsigned char img[PS];
	uint64_t p[5];
	open_engine(64);
	cr_assert(allocated(0), "the root page");
	cr_assert(allocated(1), "a bitmap page");
	cr_assert_not(allocated(2));
	txn *t = begin();
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(op_page_alloc(t, (uint16_t)(40 + i), &p[i]), 0, "%s", tp_errmsg());
		cr_assert_eq(p[i], 2 + (uint64_t)i, "first fit: page %" PRIu64, p[i]);
		cr_assert(allocated(p[i]));
		page_image(p[i], img);
		cr_assert_eq(util_get16(img + 4), 40 + i, "the page type");
		for (uint32_t k = BUF_HDR; k < PS; k++)
			cr_assert_eq(img[k], 0, "a new page's body is zero");
	}
	cr_assert_not(allocated(7));
	cr_assert_eq(txn_commit(t, 0), 0);
	for (int i = 0; i < 5; i++)
		cr_assert(allocated(p[i]));
	cr_assert_eq(buf_pinned(E.bp), 0);
}

Test(pages, new_page_contents_are_rebuilt_whole)
{
	static unsigned char img[PS];
	uint64_t p, q;
	open_engine(64);
	txn *t = begin();
	cr_assert_eq(op_page_alloc(t, 1, &p), 0);
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "leftover", 8), 0);
	cr_assert_eq(op_page_free(t, p), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	t = begin();
	cr_assert_eq(op_page_alloc(t, 2, &q), 0);
	cr_assert_eq(q, p, "the freed page is reused");
	page_image(q, img);
	for (uint32_t k = BUF_HDR; k < PS; k++)
		cr_assert_eq(img[k], 0, "no leftover bytes of the freed page (byte %" PRIu32 ")", k);
	cr_assert_eq(txn_commit(t, 0), 0);
}

Test(pages, freed_page_is_held_until_the_freeing_transaction_ends)
{
	uint64_t p[4], q;
	open_engine(64);
	txn *t = begin();
	for (int i = 0; i < 4; i++)
		cr_assert_eq(op_page_alloc(t, 1, &p[i]), 0);
	cr_assert_eq(txn_commit(t, 0), 0);

	txn *t1 = begin();
	cr_assert_eq(op_page_free(t1, p[1]), 0);
	cr_assert_not(allocated(p[1]), "free clears the bit at once");
	cr_assert(alloc_held(txn_mgr_alloc(E.tm), p[1], 0));
	txn *t2 = begin();
	cr_assert_eq(op_page_alloc(t2, 1, &q), 0);
	cr_assert_neq(q, p[1], "A1: not reallocated while the freeing transaction may still roll back");
	cr_assert_eq(op_page_alloc(t1, 1, &q), 0);
	cr_assert_neq(q, p[1], "not even by the freeing transaction itself");
	cr_assert_eq(txn_commit(t2, 0), 0);
	cr_assert_eq(txn_commit(t1, 0), 0);
	cr_assert_not(alloc_held(txn_mgr_alloc(E.tm), p[1], 0));
	t = begin();
	cr_assert_eq(op_page_alloc(t, 1, &q), 0);
	cr_assert_eq(q, p[1], "after the commit the page is free for anyone");
	cr_assert_eq(txn_commit(t, 0), 0);
}

Test(pages, abort_of_alloc_frees_and_of_free_reallocates)
{
	static unsigned char before[PS], after[PS];
	uint64_t p, q;
	open_engine(64);
	txn *t = begin();
	cr_assert_eq(op_page_alloc(t, 1, &p), 0);
	cr_assert_eq(op_page_set(t, p, BUF_HDR + 10, "keep me", 7), 0);
	cr_assert_eq(txn_commit(t, 0), 0);

	t = begin();
	cr_assert_eq(op_page_alloc(t, 1, &q), 0);
	cr_assert(allocated(q));
	cr_assert_eq(txn_abort(t), 0);
	cr_assert_not(allocated(q), "the undo of an alloc frees the page");
	t = begin();
	uint64_t q2;
	cr_assert_eq(op_page_alloc(t, 1, &q2), 0);
	cr_assert_eq(q2, q, "and it can be allocated again");
	cr_assert_eq(txn_abort(t), 0);

	page_image(p, before);
	t = begin();
	cr_assert_eq(op_page_free(t, p), 0);
	cr_assert_not(allocated(p));
	cr_assert_eq(txn_abort(t), 0);
	cr_assert(allocated(p), "the undo of a free allocates the page again");
	page_image(p, after);
	cr_assert_arr_eq(after + BUF_HDR, before + BUF_HDR, BODY, "its contents are intact");
	cr_assert_not(alloc_held(txn_mgr_alloc(E.tm), p, 0));
	cr_assert_eq(buf_pinned(E.bp), 0);
}

/* An ordered page: allocated with a logged bitmap change, its bytes never
 * logged, written to the page file by the log's barrier (ord.c N1). */
static uint64_t ordered_page(txn *t, unsigned char fill)
{
	uint64_t p;
	buf_page *pg;
	cr_assert_eq(op_page_alloc_ordered(t, 7, 0, &p, &pg), 0, "%s", tp_errmsg());
	memset(buf_data(pg) + BUF_HDR, fill, BODY);
	cr_assert_eq(op_page_ordered_done(t, pg), 0);
	return p;
}

/* The page as the page file holds it now (what a crash would leave). */
static void disk_image(uint64_t pgno, unsigned char *out)
{
	char path[200];
	size_t got;
	cr_assert_eq(su_raw_read(su_path(path, sizeof path, sdir, "data"), pgno * PS, out, PS, &got), 0);
	if (got < PS)
		memset(out + got, 0, PS - got);
}

Test(pages, ordered_page_bytes_are_not_logged_and_reach_the_disk_before_the_log)
{
	static unsigned char img[PS];
	open_engine(64);
	log_stats l0, l1;
	txn *t = begin();
	(void)ordered_page(t, 0x11); /* the bitmap's first change after a checkpoint logs its image */
	log_stats_get(E.lg, &l0);
	uint64_t p = ordered_page(t, 0x5a);
	log_stats_get(E.lg, &l1);
	cr_assert_lt(l1.bytes - l0.bytes, 512, "an ordered page logs its allocation only, not its %u bytes", BODY);
	disk_image(p, img);
	cr_assert_neq(img[BUF_HDR], 0x5a, "not written before the log is");
	cr_assert_eq(txn_commit(t, 0), 0); /* the commit's flush runs the barrier first */
	disk_image(p, img);
	for (unsigned i = BUF_HDR; i < PS; i++)
		cr_assert_eq(img[i], 0x5a, "byte %u of the ordered page is not on disk after a durable commit", i);
	cr_assert_eq(util_get32(img), util_crc32c(0, img + 4, PS - 4), "written with its checksum");
	cr_assert_lt(util_get64(img + 8), log_durable(E.lg), "its LSN is below the durable log");
}

Test(pages, ordered_page_freed_and_reused_by_a_logged_one_is_not_written_unlogged)
{
	static unsigned char before[PS], img[PS];
	open_engine(64);
	txn *t = begin();
	uint64_t p = ordered_page(t, 0x33);
	buf_page *pg;
	cr_assert_eq(buf_get(E.bp, p, BUF_S, &pg), 0);
	uint64_t lsn = buf_page_lsn(pg); /* what the barrier has registered */
	buf_put(E.bp, pg);
	cr_assert_eq(txn_abort(t), 0); /* frees p at once: a rollback is not a commit */
	t = begin();
	uint64_t q;
	cr_assert_eq(op_page_alloc(t, 1, &q), 0);
	cr_assert_eq(q, p, "first fit takes the page the rollback freed");
	cr_assert_eq(op_page_set(t, q, BUF_HDR, "logged", 6), 0);
	/* the barrier, running in a flush that took the log buffer before
	 * these records, still has p registered: the page is a logged one now,
	 * and writing it without the WAL rule would put on disk an LSN the log
	 * may never get (a kill -9 found this) */
	disk_image(p, before);
	buf_unlogged u = {.pgno = p, .lsn = lsn};
	cr_assert_eq(buf_write_unlogged(E.bp, &u, 1), 0);
	disk_image(p, img);
	cr_assert_arr_eq(img, before, PS, "a page logged since its registration was written without the WAL rule");
	cr_assert_eq(txn_commit(t, 0), 0);
}

/* B13: an ordered page goes to disk with the checksum taken when it was
 * done (its bytes then in the CPU's cache); a frame changed since (a
 * caller breaking the rule that it is not touched until written, or a
 * reuse) is written with the checksum of what it holds then */
Test(pages, ordered_pages_reach_the_disk_with_the_checksum_of_their_bytes)
{
	static unsigned char img[PS];
	open_engine(64);
	txn *t = begin();
	uint64_t p = ordered_page(t, 0x55), q = ordered_page(t, 0x66);
	buf_page *pg;
	cr_assert_eq(buf_get(E.bp, q, BUF_X, &pg), 0);
	uint64_t lsn_q = buf_page_lsn(pg);
	buf_data(pg)[BUF_HDR + 7] = 0x77; /* changed as an unlogged apply would */
	buf_dirty(E.bp, pg, lsn_q);
	buf_put(E.bp, pg);
	cr_assert_eq(buf_get(E.bp, p, BUF_S, &pg), 0);
	buf_unlogged u[2] = {{.pgno = p, .lsn = buf_page_lsn(pg)}, {.pgno = q, .lsn = lsn_q}};
	buf_put(E.bp, pg);
	cr_assert_eq(buf_write_unlogged(E.bp, u, 2), 0);
	disk_image(p, img);
	cr_assert_eq(img[BUF_HDR], 0x55);
	cr_assert_eq(util_get32(img), util_crc32c(0, img + 4, PS - 4), "page %" PRIu64 ": checksum", p);
	disk_image(q, img);
	cr_assert_eq(img[BUF_HDR + 7], 0x77, "the change was written");
	cr_assert_eq(util_get32(img), util_crc32c(0, img + 4, PS - 4),
		     "page %" PRIu64 " was written with the checksum of its bytes before the change", q);
	cr_assert_eq(txn_commit(t, 0), 0);
}

Test(pages, a_page_registered_twice_is_written_for_its_latest_registration)
{
	static unsigned char img[PS];
	open_engine(64);
	txn *t = begin();
	uint64_t p = ordered_page(t, 0x44);
	buf_page *pg;
	cr_assert_eq(buf_get(E.bp, p, BUF_S, &pg), 0);
	uint64_t lsn = buf_page_lsn(pg);
	buf_put(E.bp, pg);
	/* an older registration of the same page (an earlier life) listed
	 * first, then after it: either way the page must be written */
	buf_unlogged u[2] = {{.pgno = p, .lsn = lsn - 8}, {.pgno = p, .lsn = lsn}};
	cr_assert_eq(buf_write_unlogged(E.bp, u, 2), 0);
	disk_image(p, img);
	cr_assert_eq(img[BUF_HDR], 0x44, "the page was skipped for its stale registration");
	cr_assert_eq(txn_abort(t), 0);
}

Test(pages, ordered_reuse_waits_for_the_freeing_commit_to_be_durable)
{
	open_engine(64);
	txn *t = begin();
	uint64_t p = ordered_page(t, 1);
	cr_assert_eq(txn_commit(t, 0), 0);
	t = begin();
	cr_assert_eq(op_page_free(t, p), 0);
	cr_assert_eq(txn_commit(t, 1 /* lazily */), 0);
	cr_assert(alloc_held(txn_mgr_alloc(E.tm), p, 1), "A2: not an ordered page again before the free is durable");
	cr_assert_not(alloc_held(txn_mgr_alloc(E.tm), p, 0), "a logged reuse is fine");
	t = begin();
	for (int i = 0; i < 4; i++)
		cr_assert_neq(ordered_page(t, 2), p, "A2: reused before the freeing commit was durable");
	cr_assert_eq(txn_abort(t), 0);
	cr_assert_eq(log_flush(E.lg, log_end(E.lg) - 1), 0);
	cr_assert_not(alloc_held(txn_mgr_alloc(E.tm), p, 1), "once durable, the page is free for ordered data too");
}

/* O1: a power cut keeps an ordered page (the barrier synced the page file)
 * but loses the log records written after the last sync, so the log
 * restarts below where it was.  The page must not claim an LSN the log
 * will hand out again: the page's next, logged life gets those LSNs, and
 * redo would skip its records as already applied. */
Test(pages, ordered_page_lsn_is_below_what_a_power_cut_leaves_of_the_log)
{
	static unsigned char img[PS], zeros[1u << 20];
	char seg[PATH_MAX];
	open_engine(64);
	txn *t = begin();
	uint64_t a, p, q;
	cr_assert_eq(op_page_alloc(t, 1, &a), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	uint64_t e0 = log_durable(E.lg); /* what the power cut will leave */
	t = begin();
	memset(img, 0x77, sizeof img);
	for (int i = 0; i < 6; i++) /* log well past the durable end, unsynced */
		cr_assert_eq(op_page_set(t, a, BUF_HDR, img, 2000), 0);
	p = ordered_page(t, 0xaa);
	cr_assert_eq(txn_commit(t, 0), 0); /* barrier: p written and synced; then the log */
	disk_image(p, img);
	cr_assert_eq(img[BUF_HDR], 0xaa, "the barrier wrote the ordered page");
	uint64_t plsn = util_get64(img + 8);
	su_engine_crash(&E);

	/* the power cut: every log byte from e0 on is lost, and so is the
	 * durable mark's write after the last commit's sync (L14) */
	char ld[PATH_MAX];
	cr_assert_eq(su_logdir(sdir, ld, sizeof ld), 0);
	cr_assert_eq(su_raw_mark(ld, e0), 0);
	cr_assert_eq(su_segpath(sdir, e0 / (1u << 20), seg, sizeof seg), 0);
	cr_assert_eq(su_raw_write(seg, e0 % (1u << 20), zeros, (1u << 20) - e0 % (1u << 20)), 0);
	open_engine(64);
	cr_assert_eq(log_end(E.lg), e0, "recovery found the log cut where the power cut left it");
	cr_assert_lt(plsn, e0, "O1: the ordered page claims LSN %" PRIu64 ", beyond the %" PRIu64
			      " bytes of log that were durable when it was written", plsn, e0);
	cr_assert_not(allocated(p), "the allocation was lost with the log");

	/* the page's next life is logged, and durable only in the log */
	t = begin();
	cr_assert_eq(op_page_alloc(t, 1, &q), 0);
	cr_assert_eq(q, p, "first fit takes the page again");
	cr_assert_eq(op_page_set(t, q, BUF_HDR, "logged", 6), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	su_engine_crash(&E);
	open_engine(64);
	page_image(p, img);
	cr_assert_eq(memcmp(img + BUF_HDR, "logged", 6), 0, "redo skipped the records of the page's logged life");
	cr_assert(allocated(p));
}

/* A logged allocation reserves the page's disk space at once: a full disk
 * fails the allocation (its transaction rolls back cleanly) instead of a
 * later write-back, which would panic the store (B5). */
static int no_room(void *h, uint64_t size)
{
	(void)h;
	(void)size;
	return ENOSPC;
}

static int no_room_range(void *h, uint64_t off, uint64_t len)
{
	(void)h;
	(void)off;
	(void)len;
	return ENOSPC;
}

Test(pages, logged_allocation_on_a_full_disk_fails_cleanly)
{
	static io_backend full; /* files keep a pointer to it until closed */
	full = *io_posix_backend();
	full.reserve = no_room; /* the page file cannot grow */
	full.reserve_range = no_room_range;
	io_set_backend(&full);
	open_engine(64);
	txn *t = begin();
	uint64_t p;
	int rc = op_page_alloc(t, 1, &p);
	cr_assert_eq(rc, ENOSPC, "an allocation past the page file's end on a full disk: rc %d", rc);
	cr_assert_eq(txn_abort(t), 0, "%s", tp_errmsg());
	cr_assert_not(log_panicked(E.lg));
	cr_assert_eq(su_engine_checkpoint(&E), 0, "the store goes on: %s", tp_errmsg());
	su_engine_crash(&E);
	io_set_backend(NULL);
}

/* Every bad argument: TP_EINVAL, nothing logged, nothing changed. */
Test(pages, bad_arguments_change_nothing)
{
	static unsigned char img[PS], img2[PS], bm[PS], bm2[PS];
	uint64_t p, g = op_group_pages(PS);
	open_engine(64);
	txn *t = begin();
	cr_assert_eq(op_page_alloc(t, 1, &p), 0);
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "data", 4), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	page_image(p, img);
	page_image(1, bm);
	uint64_t end = log_end(E.lg);
	unsigned char big[PS];
	memset(big, 7, sizeof big);

	t = begin();
	cr_assert_eq(op_page_free(t, 0), TP_EINVAL, "page 0 is the root");
	cr_assert_not_null(strstr(tp_errmsg(), "page 0"), "%s", tp_errmsg());
	cr_assert_eq(op_page_free(t, 1), TP_EINVAL, "a bitmap page");
	cr_assert_eq(op_page_free(t, g + 1), TP_EINVAL, "the bitmap page of group 1");
	cr_assert_eq(op_page_free(t, p + 1), TP_EINVAL, "an unallocated page");
	cr_assert_not_null(strstr(tp_errmsg(), "not allocated"), "%s", tp_errmsg());
	cr_assert_eq(op_page_set(t, 1, BUF_HDR, "x", 1), TP_EINVAL, "writing a bitmap page");
	cr_assert_eq(op_page_set(t, p + 5, BUF_HDR, "x", 1), TP_EINVAL, "writing an unallocated page");
	cr_assert_eq(op_page_set(t, p, 0, "x", 1), TP_EINVAL, "the page header");
	cr_assert_eq(op_page_set(t, p, BUF_HDR - 1, "xy", 2), TP_EINVAL, "straddling the header");
	cr_assert_eq(op_page_set(t, p, PS - 2, "xyz", 3), TP_EINVAL, "past the end");
	cr_assert_eq(op_page_set(t, p, PS + 8, "x", 1), TP_EINVAL, "beyond the page");
	cr_assert_eq(op_page_set(t, p, BUF_HDR, big, PS), TP_EINVAL, "longer than the body");
	cr_assert_eq(op_page_set(t, p, UINT32_MAX, "x", 1), TP_EINVAL, "offset overflow");
	cr_assert_eq(op_page_set(t, p, BUF_HDR + 1, big, UINT32_MAX), TP_EINVAL, "length overflow");
	cr_assert_eq(log_end(E.lg), end, "nothing was logged");
	page_image(p, img2);
	cr_assert_arr_eq(img2, img, PS, "the page is unchanged");
	page_image(1, bm2);
	cr_assert_arr_eq(bm2, bm, PS, "the bitmap is unchanged");
	cr_assert_eq(txn_abort(t), 0);
	cr_assert_eq(log_end(E.lg), end, "a transaction that logged nothing aborts without a record");

	/* a whole-body write is fine; the same at the last byte too */
	t = begin();
	cr_assert_eq(op_page_set(t, p, BUF_HDR, big, BODY), 0);
	cr_assert_eq(op_page_set(t, p, PS - 1, "z", 1), 0);
	cr_assert_eq(op_page_set(t, p, PS, "", 0), 0, "an empty write at the end is harmless");
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(buf_pinned(E.bp), 0);
}

/* The same through tp.h, with body offsets. */
Test(pages, public_api_bounds)
{
	tp_env *env;
	tp_txn *t;
	tp_options o;
	uint64_t p;
	unsigned char buf[16];
	su_options(&o, 0, 0, 0);
	cr_assert_eq(tp_open(sdir, &o, &env), 0);
	uint32_t body = tp_page_body(env);
	cr_assert_eq(body, BODY);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_page_alloc(t, 1, &p), 0);
	cr_assert_eq(tp_page_write(t, p, body - 4, "abcd", 4), 0);
	cr_assert_eq(tp_page_write(t, p, body - 3, "abcd", 4), TP_EINVAL);
	cr_assert_eq(tp_page_write(t, p, body + 1, "a", 1), TP_EINVAL);
	cr_assert_eq(tp_page_write(t, p, UINT32_MAX - 2, "abcd", 4), TP_EINVAL);
	cr_assert_eq(tp_page_read(env, p, body - 4, buf, 4), 0);
	cr_assert_arr_eq(buf, "abcd", 4);
	cr_assert_eq(tp_page_read(env, p, body - 3, buf, 4), TP_EINVAL);
	cr_assert_eq(tp_page_read(env, p, UINT32_MAX - 2, buf, 4), TP_EINVAL);
	cr_assert_eq(tp_page_free(t, 0), TP_EINVAL);
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_debug_pinned(env), 0);
	cr_assert_eq(tp_close(env), 0);
}

/* A page number so large that its byte offset overflows must not alias a
 * real page: reading it may fail, but never returns page 0's bytes. */
Test(pages, huge_page_number_does_not_alias_page_zero)
{
	tp_env *env;
	tp_txn *t;
	tp_options o;
	unsigned char buf[8] = {0};
	su_options(&o, 0, 0, 0);
	cr_assert_eq(tp_open(sdir, &o, &env), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_page_write(t, 0, 0, "ROOTROOT", 8), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_checkpoint(env), 0); /* page 0 on disk */
	tp_crash_close(env);
	cr_assert_eq(tp_open(sdir, &o, &env), 0);
	uint64_t alias = UINT64_C(1) << 52; /* alias * 4096 == 2^64 == 0 */
	int rc = tp_page_read(env, alias, 0, buf, 8);
	int a = 0;
	int rc2 = tp_page_allocated(env, alias, &a);
	tp_close(env);
	cr_assert(rc != 0 || memcmp(buf, "ROOTROOT", 8) != 0,
		  "tp_page_read(page 2^52) returned page 0's bytes: its offset 2^52 * 4096 wrapped to 0; "
		  "out-of-range pages should be TP_EINVAL");
	cr_assert(rc2 != 0 || !a, "page 2^52 reported allocated");
}

/* T3 (W6): an update that cannot be logged leaves the page as it was. */
Test(pages, failed_append_changes_no_page)
{
	static unsigned char img[PS], img2[PS];
	uint64_t p;
	open_engine(64);
	txn *t = begin();
	cr_assert_eq(op_page_alloc(t, 1, &p), 0);
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "before", 6), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	page_image(p, img);
	t = begin();
	log_panic(E.lg, EIO, NULL);
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "after!", 6), TP_EPANIC);
	page_image(p, img2);
	cr_assert_arr_eq(img2 + BUF_HDR, img + BUF_HDR, BODY, "the body is unchanged");
	cr_assert_eq(util_get64(img2 + 8), util_get64(img + 8), "the page LSN is unchanged");
	uint64_t q;
	cr_assert_eq(op_page_alloc(t, 1, &q), TP_EPANIC);
	cr_assert_eq(buf_pinned(E.bp), 0);
	txn_abort(t);
	cr_assert_eq(txn_begin(E.tm, &t), TP_EPANIC, "no new transactions after a panic");
}

/* A new store of 1 KiB pages (groups of 8064 pages) at s2, opened. */
static void open_small(char *s2, size_t size, su_engine *e)
{
	tp_options o;
	snprintf(s2, size, "%s/small", tdir);
	su_options(&o, 1024, 1u << 20, 0);
	cr_assert_eq(tp_mkfs(s2, &o), 0);
	cr_assert_eq(su_engine_open(s2, 64, e), 0);
}

/* With 1 KiB pages a group is 8064 pages: fill group 0, and allocation
 * moves on past the next bitmap page. */
Test(pages, allocation_moves_to_the_next_group)
{
	char s2[160];
	su_engine e;
	open_small(s2, sizeof s2, &e);
	uint64_t g = op_group_pages(1024), p = 0;
	cr_assert_eq(g, 8064);
	txn *t;
	for (uint64_t i = 0; i < g - 1; i++) {
		if (i % 1000 == 0) {
			if (i)
				cr_assert_eq(txn_commit(t, 1), 0);
			cr_assert_eq(txn_begin(e.tm, &t), 0);
		}
		cr_assert_eq(op_page_alloc(t, 1, &p), 0, "%s", tp_errmsg());
		cr_assert_eq(p, 2 + i, "first fit in group 0");
	}
	cr_assert_eq(p, g, "the last page of group 0");
	cr_assert_eq(op_page_alloc(t, 1, &p), 0);
	cr_assert_eq(p, g + 2, "group 0 is full: the first page after group 1's bitmap (page %" PRIu64 ")", g + 1);
	int a;
	cr_assert_eq(op_page_allocated(e.bp, g + 1, &a), 0);
	cr_assert(a, "a bitmap page counts as allocated");
	cr_assert_eq(op_page_free(t, g + 1), TP_EINVAL);
	cr_assert_eq(op_page_free(t, 500), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(txn_begin(e.tm, &t), 0);
	cr_assert_eq(op_page_alloc(t, 1, &p), 0);
	cr_assert_eq(p, 500, "a hole in group 0 is found first");
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(su_engine_close(&e), 0);
	/* and after a restart */
	cr_assert_eq(su_engine_open(s2, 64, &e), 0);
	cr_assert_eq(op_page_allocated(e.bp, g + 2, &a), 0);
	cr_assert(a);
	cr_assert_eq(op_page_allocated(e.bp, g + 3, &a), 0);
	cr_assert_not(a);
	su_engine_crash(&e);
}

/* Ordered data is next fit: from the page after the last ordered page on,
 * then wrapping to the start of the group, before a full group is left. */
Test(pages, ordered_allocation_is_next_fit_and_wraps)
{
	char s2[160];
	su_engine e;
	open_small(s2, sizeof s2, &e);
	uint64_t g = op_group_pages(1024), p = 0;
	buf_page *pg;
	txn *t = NULL;
	for (uint64_t i = 0; i < g - 1; i++) { /* pages 2..g: group 0 full */
		if (i % 50 == 0) {
			if (i)
				cr_assert_eq(txn_commit(t, 0), 0);
			cr_assert_eq(txn_begin(e.tm, &t), 0);
		}
		cr_assert_eq(op_page_alloc_ordered(t, 7, 0, &p, &pg), 0, "%s", tp_errmsg());
		cr_assert_eq(op_page_ordered_done(t, pg), 0);
		cr_assert_eq(p, 2 + i, "ordered pages of a new store follow each other");
	}
	cr_assert_eq(op_page_free(t, 10), 0);
	cr_assert_eq(op_page_free(t, g - 100), 0);
	cr_assert_eq(txn_commit(t, 0), 0); /* durable: the pages may be reused (A2) */
	uint64_t want[2] = {10, g - 100};
	cr_assert_eq(txn_begin(e.tm, &t), 0);
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(op_page_alloc_ordered(t, 7, 0, &p, &pg), 0, "%s", tp_errmsg());
		cr_assert_eq(op_page_ordered_done(t, pg), 0);
		cr_assert_eq(p, want[k], "ordered allocation %d: page %" PRIu64 ", expected %" PRIu64, k, p, want[k]);
	}
	cr_assert_eq(op_page_free(t, 20), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(txn_begin(e.tm, &t), 0);
	cr_assert_eq(op_page_alloc_ordered(t, 7, 0, &p, &pg), 0, "%s", tp_errmsg());
	cr_assert_eq(op_page_ordered_done(t, pg), 0);
	cr_assert_eq(p, 20, "nothing free after page %" PRIu64 ": the search wraps to page 20, not %" PRIu64, g - 100, p);
	cr_assert_eq(op_page_alloc_ordered(t, 7, 0, &p, &pg), 0, "%s", tp_errmsg());
	cr_assert_eq(op_page_ordered_done(t, pg), 0);
	cr_assert_eq(p, g + 2, "group 0 full again: group 1's first page (%" PRIu64 ")", p);
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(su_engine_close(&e), 0);
}
