/*
 * test_buf -- the buffer pool: pins, CLOCK eviction with write-back
 * (STEAL), the WAL rule (B1), checksums on read (B2), BUF_REBUILD and
 * BUF_NOREAD, an all-pinned pool, dirty-page tracking (B4, B6), write failures
 * (B5), read-ahead and the rings streams cycle through (B8, B10), page LSNs
 * beyond the log (B9), misses read outside the pool mutex with a second
 * reader waiting for the first read (B11), and many threads on a tiny pool.
 *
 * Each test builds a log and a page file in a fresh directory; pages are
 * changed the way txn_update does it: X latch, log a record, change the
 * bytes, buf_mark.  The "disk" is read with plain POSIX calls.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "io.h"
#include "io_sim.h"
#include "log.h"
#include "store_util.h"
#include "tp.h"
#include "util.h"

#define PS 4096u

static char tdir[64], logdir[128], datapath[128];
static log_mgr *lg;
static io_file *df;
static buf_pool *bp;

static void open_all(size_t frames, int readonly)
{
	log_config c = {.dir = logdir, .seg_size = 1u << 20, .quiet = 1};
	int rc = log_open(&c, LOG_SEG_HDR, &lg);
	cr_assert_eq(rc, 0, "log_open: %s", tp_errmsg());
	cr_assert_eq(io_open(datapath, readonly ? IO_RDONLY : IO_CREATE, &df), 0);
	cr_assert_eq(buf_open(df, lg, PS, frames, readonly, &bp), 0);
}

static void close_all(void)
{
	buf_close(bp);
	bp = NULL;
	if (df)
		io_close(df);
	df = NULL;
	log_close(lg);
	lg = NULL;
}

static void setup(void)
{
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "buf"), 0);
	snprintf(logdir, sizeof logdir, "%s/log", tdir);
	snprintf(datapath, sizeof datapath, "%s/data", tdir);
	cr_assert_eq(mkdir(logdir, 0755), 0);
	log_config c = {.dir = logdir, .seg_size = 1u << 20, .quiet = 1};
	cr_assert_eq(log_create(&c), 0);
}

static void teardown(void)
{
	if (bp)
		close_all();
	io_set_backend(NULL);
	su_rmtree(tdir);
}

/* Changes page pgno as txn_update would: body filled with v.  Returns the
 * record's LSN. */
static uint64_t modify(uint64_t pgno, unsigned char v)
{
	buf_page *pg;
	int rc = buf_get(bp, pgno, BUF_X, &pg);
	cr_assert_eq(rc, 0, "buf_get %" PRIu64 ": %d %s", pgno, rc, tp_errmsg());
	cr_assert_eq(buf_pgno(pg), pgno);
	log_rec r = {.txid = 1, .pgno = pgno, .type = 6, .len = 1, .data = &v};
	buf_dirty(bp, pg, log_end(lg)); /* B6: dirty before the record */
	cr_assert_eq(log_put(lg, &r), 0);
	memset(buf_data(pg) + BUF_HDR, v, PS - BUF_HDR);
	buf_set_lsn(pg, r.lsn);
	cr_assert_eq(buf_page_lsn(pg), r.lsn);
	buf_put(bp, pg);
	return r.lsn;
}

static void expect_page(uint64_t pgno, unsigned char v, uint64_t lsn)
{
	buf_page *pg;
	int rc = buf_get(bp, pgno, BUF_S, &pg);
	cr_assert_eq(rc, 0, "buf_get %" PRIu64 ": %d %s", pgno, rc, tp_errmsg());
	const unsigned char *d = buf_data(pg);
	for (uint32_t i = BUF_HDR; i < PS; i++)
		if (d[i] != v) {
			buf_put(bp, pg);
			cr_assert_fail("page %" PRIu64 " byte %" PRIu32 " is 0x%02x, wrote 0x%02x", pgno, i, d[i], v);
		}
	cr_assert_eq(buf_page_lsn(pg), lsn, "page %" PRIu64 " LSN", pgno);
	buf_put(bp, pg);
}

/* Every page on disk: checksum right (B2) and its LSN durable in the log
 * (B1: the record at the page LSN is durable whole: durable > LSN). */
static void check_disk(void)
{
	static unsigned char p[PS];
	int64_t size = su_raw_size(datapath);
	for (uint64_t i = 0; (int64_t)((i + 1) * PS) <= size; i++) {
		cr_assert_eq(su_raw_read(datapath, i * PS, p, PS, NULL), 0);
		int zero = 1;
		for (uint32_t k = 0; k < PS && zero; k++)
			zero = p[k] == 0;
		if (zero)
			continue;
		cr_assert_eq(util_get32(p), util_crc32c(0, p + 4, PS - 4), "page %" PRIu64 " on disk: bad checksum", i);
		cr_assert_gt(log_durable(lg), util_get64(p + 8),
			     "W2 broken: page %" PRIu64 " with LSN %" PRIu64 " on disk, log durable only to %" PRIu64, i,
			     util_get64(p + 8), log_durable(lg));
	}
}

static int has_page_word(const char *msg, uint64_t pgno)
{
	char w[40];
	snprintf(w, sizeof w, "page %" PRIu64, pgno);
	for (const char *s = strstr(msg, w); s; s = strstr(s + 1, w))
		if (s[strlen(w)] < '0' || s[strlen(w)] > '9')
			return 1;
	return 0;
}

TestSuite(buf, .init = setup, .fini = teardown, .timeout = 60);

Test(buf, pins_are_counted)
{
	buf_page *a, *b, *c;
	open_all(16, 0);
	cr_assert_eq(buf_pinned(bp), 0);
	cr_assert_eq(buf_page_size(bp), PS);
	cr_assert_eq(buf_get(bp, 3, BUF_S, &a), 0);
	cr_assert_eq(buf_pinned(bp), 1);
	cr_assert_eq(buf_get(bp, 3, BUF_S, &b), 0, "two shared latches on one page");
	cr_assert_eq(a, b, "the same frame");
	cr_assert_eq(buf_pinned(bp), 2);
	cr_assert_eq(buf_get(bp, 4, BUF_S, &c), 0);
	cr_assert_eq(buf_pinned(bp), 3);
	buf_put(bp, a);
	buf_put(bp, b);
	cr_assert_eq(buf_pinned(bp), 1);
	buf_put(bp, c);
	cr_assert_eq(buf_pinned(bp), 0);
	buf_stats st;
	buf_stats_get(bp, &st);
	cr_assert_eq(st.misses, 2);
	cr_assert_eq(st.hits, 1);
}

Test(buf, never_written_page_is_zero)
{
	buf_page *pg;
	open_all(8, 0);
	cr_assert_eq(buf_get(bp, 1000, BUF_S, &pg), 0, "past the end of the file: %s", tp_errmsg());
	for (uint32_t i = 0; i < PS; i++)
		cr_assert_eq(buf_data(pg)[i], 0);
	cr_assert_eq(buf_page_lsn(pg), 0);
	buf_put(bp, pg);
}

Test(buf, eviction_writes_dirty_pages_and_rereads)
{
	enum { NP = 40 };
	uint64_t lsn[NP + 1];
	open_all(8, 0);
	for (uint64_t p = 1; p <= NP; p++) {
		lsn[p] = modify(p, (unsigned char)p);
		check_disk();
	}
	buf_stats st;
	buf_stats_get(bp, &st);
	cr_assert_geq(st.writes, NP - 8, "dirty victims are written back (%" PRIu64 ")", st.writes);
	cr_assert_eq(buf_pinned(bp), 0);
	for (uint64_t p = 1; p <= NP; p++) {
		expect_page(p, (unsigned char)p, lsn[p]);
		check_disk();
	}
	buf_stats_get(bp, &st);
	cr_assert_geq(st.reads, NP - 8, "evicted pages are read back");
	/* a second round over the same pages */
	for (uint64_t p = NP; p >= 1; p--)
		lsn[p] = modify(p, (unsigned char)(p + 100));
	for (uint64_t p = 1; p <= NP; p++)
		expect_page(p, (unsigned char)(p + 100), lsn[p]);
	check_disk();
	cr_assert_eq(buf_flush_all(bp), 0);
	check_disk();
	close_all();
	/* a new pool sees the same data */
	open_all(8, 0);
	for (uint64_t p = 1; p <= NP; p++)
		expect_page(p, (unsigned char)(p + 100), lsn[p]);
}

static int dirty_already(uint64_t pgno)
{
	buf_page *pg;
	cr_assert_eq(buf_get(bp, pgno, BUF_X, &pg), 0);
	int d = buf_dirty_already(pg);
	buf_put(bp, pg);
	return d;
}

/* buf_dirty_already says a change needs no buf_dirty only while that
 * would change nothing: not for a clean page (B6 would lose its recovery
 * LSN), nor one written back since, nor one with a saved checksum (B13). */
Test(buf, dirty_already_only_while_dirty)
{
	open_all(16, 0);
	cr_assert_eq(dirty_already(5), 0, "a page never changed");
	modify(5, 1);
	cr_assert_eq(dirty_already(5), 1, "a page just changed");
	cr_assert_eq(buf_flush_all(bp), 0);
	cr_assert_eq(dirty_already(5), 0, "a page written back");
	modify(5, 2);
	cr_assert_eq(dirty_already(5), 1);
	buf_page *pg;
	cr_assert_eq(buf_get(bp, 5, BUF_X, &pg), 0);
	buf_mark_ordered(bp, pg);
	cr_assert_eq(buf_dirty_already(pg), 0, "a page with a saved checksum");
	buf_put(bp, pg);
	modify(5, 3);
	cr_assert_eq(dirty_already(5), 1);
}

/* B1 directly: an unflushed change, then eviction by clean reads. */
Test(buf, wal_rule_on_eviction)
{
	open_all(8, 0);
	uint64_t l = modify(1, 0x42);
	cr_assert_leq(log_durable(lg), l, "the record is not durable yet");
	for (uint64_t p = 100; p < 120; p++) {
		buf_page *pg;
		cr_assert_eq(buf_get(bp, p, BUF_S, &pg), 0);
		buf_put(bp, pg);
	}
	unsigned char d[PS];
	cr_assert_eq(su_raw_read(datapath, PS, d, PS, NULL), 0);
	cr_assert_eq(util_get64(d + 8), l, "page 1 was evicted and written");
	cr_assert_gt(log_durable(lg), l, "W2: the log was made durable past the page LSN first");
	check_disk();
}

Test(buf, checksum_failure_names_file_and_page)
{
	buf_page *pg;
	open_all(8, 0);
	uint64_t l5 = modify(5, 0x55);
	uint64_t l6 = modify(6, 0x66);
	cr_assert_eq(buf_flush_all(bp), 0);
	close_all();
	cr_assert_eq(su_raw_flip(datapath, 5 * PS + 1000, 0x01), 0);
	open_all(8, 0);
	util_err_clear();
	int rc = buf_get(bp, 5, BUF_S, &pg);
	cr_assert_eq(rc, TP_ECORRUPT, "a page failing its checksum is refused (rc %d)", rc);
	cr_assert(has_page_word(tp_errmsg(), 5), "the message names page 5: %s", tp_errmsg());
	cr_assert_not_null(strstr(tp_errmsg(), datapath), "the message names the file: %s", tp_errmsg());
	cr_assert_eq(buf_pinned(bp), 0, "a failed get leaves nothing pinned");
	cr_assert_eq(buf_get(bp, 5, BUF_X, &pg), TP_ECORRUPT, "still refused: never cached as valid");
	expect_page(6, 0x66, l6);
	/* BUF_REBUILD: the page reads as zeros with LSN 0, for redo to rebuild */
	cr_assert_eq(buf_get(bp, 5, BUF_X | BUF_REBUILD, &pg), 0);
	for (uint32_t i = 0; i < PS; i++)
		cr_assert_eq(buf_data(pg)[i], 0, "byte %" PRIu32, i);
	cr_assert_eq(buf_page_lsn(pg), 0);
	buf_put(bp, pg);
	(void)l5;
	/* REBUILD leaves a good page alone */
	close_all();
	open_all(8, 0);
	cr_assert_eq(buf_get(bp, 6, BUF_X | BUF_REBUILD, &pg), 0);
	cr_assert_eq(buf_page_lsn(pg), l6);
	cr_assert_eq(buf_data(pg)[BUF_HDR], 0x66);
	buf_put(bp, pg);
}

Test(buf, noread_gives_zeros)
{
	buf_page *pg;
	open_all(8, 0);
	modify(7, 0x77);
	cr_assert_eq(buf_flush_all(bp), 0);
	close_all();
	open_all(8, 0);
	cr_assert_eq(buf_get(bp, 7, BUF_X | BUF_NOREAD, &pg), 0);
	for (uint32_t i = 0; i < PS; i++)
		cr_assert_eq(buf_data(pg)[i], 0);
	buf_put(bp, pg);
	buf_stats st;
	buf_stats_get(bp, &st);
	cr_assert_eq(st.reads, 0, "NOREAD does not read");
}

Test(buf, all_pinned_is_enobufs)
{
	buf_page *pg[9];
	open_all(8, 0);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(buf_get(bp, 10 + (uint64_t)i, BUF_S, &pg[i]), 0);
	cr_assert_eq(buf_pinned(bp), 8);
	cr_assert_eq(buf_get(bp, 50, BUF_S, &pg[8]), ENOBUFS);
	cr_assert_str_neq(tp_errmsg(), "");
	cr_assert_eq(buf_pinned(bp), 8);
	cr_assert_eq(buf_get(bp, 12, BUF_S, &pg[8]), 0, "a cached page is still found");
	buf_put(bp, pg[8]);
	buf_put(bp, pg[0]);
	cr_assert_eq(buf_get(bp, 50, BUF_S, &pg[8]), 0, "one frame free again");
	buf_put(bp, pg[8]);
	for (int i = 1; i < 8; i++)
		buf_put(bp, pg[i]);
	cr_assert_eq(buf_pinned(bp), 0);
}

static size_t ndirty;
static uint64_t dirty_pg[64], dirty_rec[64];

static void count_dirty(void *ctx, uint64_t pgno, uint64_t rec_lsn)
{
	(void)ctx;
	if (ndirty < 64) {
		dirty_pg[ndirty] = pgno;
		dirty_rec[ndirty] = rec_lsn;
	}
	ndirty++;
}

Test(buf, dirty_pages_and_flush_all)
{
	open_all(16, 0);
	uint64_t first2 = modify(2, 1);
	ndirty = 0;
	cr_assert_eq(buf_dirty_pages(bp, count_dirty, NULL), 0);
	cr_assert_eq(ndirty, 1);
	cr_assert_eq(dirty_pg[0], 2);
	uint64_t rec2 = dirty_rec[0];
	cr_assert_gt(rec2, 0, "B4: a dirty page has a recovery LSN");
	cr_assert_leq(rec2, first2, "B4/B6: at or before the first record that changed it");
	modify(3, 1);
	uint64_t last2 = modify(2, 2);
	ndirty = 0;
	cr_assert_eq(buf_dirty_pages(bp, count_dirty, NULL), 0);
	cr_assert_eq(ndirty, 2);
	for (size_t i = 0; i < ndirty; i++)
		if (dirty_pg[i] == 2)
			cr_assert_eq(dirty_rec[i], rec2, "B4: a later change keeps the first recovery LSN");
	cr_assert_eq(buf_flush_all(bp), 0);
	cr_assert_gt(log_durable(lg), last2);
	ndirty = 0;
	buf_dirty_pages(bp, count_dirty, NULL);
	cr_assert_eq(ndirty, 0, "flush_all leaves every page clean");
	check_disk();
	buf_stats st;
	buf_stats_get(bp, &st);
	cr_assert_eq(st.writes, 2);
	cr_assert_eq(buf_flush_all(bp), 0);
	buf_stats_get(bp, &st);
	cr_assert_eq(st.writes, 2, "clean pages are not written again");
	/* dirty again: rec_lsn is the new first change */
	uint64_t again = modify(2, 3);
	ndirty = 0;
	buf_dirty_pages(bp, count_dirty, NULL);
	cr_assert_eq(ndirty, 1);
	cr_assert_leq(dirty_rec[0], again);
	cr_assert_gt(dirty_rec[0], last2, "the recovery LSN of the new change, not the old one");
}

Test(buf, readonly_pool_never_writes)
{
	open_all(8, 0);
	modify(1, 9);
	cr_assert_eq(buf_flush_all(bp), 0);
	close_all();
	su_tree *before = su_tree_take(tdir);
	open_all(8, 1);
	buf_page *pg;
	cr_assert_eq(buf_get(bp, 1, BUF_X, &pg), 0);
	buf_dirty(bp, pg, 1);
	buf_data(pg)[100] = 1;
	buf_set_lsn(pg, 1);
	buf_put(bp, pg);
	cr_assert_eq(buf_flush_all(bp), EROFS);
	close_all();
	su_tree *after = su_tree_take(tdir);
	char why[256];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "%s", why);
	su_tree_free(before);
	su_tree_free(after);
}

Test(buf, failed_page_write_panics)
{
	iosim_install(1);
	open_all(8, 0);
	modify(1, 1);
	cr_assert_eq(log_flush(lg, log_end(lg)), 0);
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_EIO, 0); /* the page write */
	int rc = buf_flush_all(bp);
	cr_assert_eq(rc, EIO, "rc %d", rc);
	cr_assert(log_panicked(lg), "B5: a failed page write panics the log");
	cr_assert_not_null(strstr(tp_errmsg(), datapath), "%s", tp_errmsg());
	log_rec r = {.txid = 1, .pgno = LOG_NOPAGE, .type = 1};
	cr_assert_eq(log_put(lg, &r), TP_EPANIC);
	cr_assert_eq(buf_pinned(bp), 0);
	close_all();
	iosim_uninstall();
}

/* ---- threads on a tiny pool ---- */

#define MT_THREADS 4
#define MT_PAGES 10 /* per thread */
#define MT_ROUNDS 400

typedef struct mt_arg {
	int id;
	uint32_t count[MT_PAGES];
	int bad;
	char why[128];
} mt_arg;

static void *mt_thread(void *p)
{
	mt_arg *a = p;
	uint32_t x = (uint32_t)a->id * 7919 + 1;
	for (int i = 0; i < MT_ROUNDS && !a->bad; i++) {
		x = x * 1103515245 + 12345;
		int k = (int)((x >> 16) % MT_PAGES);
		uint64_t pgno = 1 + (uint64_t)a->id * MT_PAGES + (uint64_t)k;
		buf_page *pg;
		int rc = buf_get(bp, pgno, BUF_X, &pg);
		if (rc) {
			a->bad = 1;
			snprintf(a->why, sizeof a->why, "buf_get %" PRIu64 ": %d", pgno, rc);
			break;
		}
		unsigned char *d = buf_data(pg);
		if (util_get32(d + BUF_HDR) != a->count[k] || (a->count[k] && util_get64(d + BUF_HDR + 4) != pgno)) {
			a->bad = 1;
			snprintf(a->why, sizeof a->why, "page %" PRIu64 ": counter %" PRIu32 ", expected %" PRIu32, pgno,
				 util_get32(d + BUF_HDR), a->count[k]);
		}
		a->count[k]++;
		unsigned char arg[12];
		util_put32(arg, a->count[k]);
		util_put64(arg + 4, pgno);
		log_rec r = {.txid = (uint64_t)a->id + 1, .pgno = pgno, .type = 6, .len = 12, .data = arg};
		buf_dirty(bp, pg, log_end(lg));
		if (log_put(lg, &r) != 0)
			a->bad = 1;
		memcpy(d + BUF_HDR, arg, 12);
		buf_set_lsn(pg, r.lsn);
		buf_put(bp, pg);
	}
	return NULL;
}

Test(buf, threads_on_a_tiny_pool)
{
	static mt_arg a[MT_THREADS];
	pthread_t th[MT_THREADS];
	open_all(8, 0);
	for (int i = 0; i < MT_THREADS; i++) {
		a[i].id = i;
		cr_assert_eq(pthread_create(&th[i], NULL, mt_thread, &a[i]), 0);
	}
	for (int i = 0; i < MT_THREADS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_not(a[i].bad, "thread %d: %s", i, a[i].why);
	}
	cr_assert_eq(buf_pinned(bp), 0);
	cr_assert_eq(buf_flush_all(bp), 0);
	check_disk();
	close_all();
	open_all(8, 0);
	for (int i = 0; i < MT_THREADS; i++)
		for (int k = 0; k < MT_PAGES; k++) {
			buf_page *pg;
			uint64_t pgno = 1 + (uint64_t)i * MT_PAGES + (uint64_t)k;
			cr_assert_eq(buf_get(bp, pgno, BUF_S, &pg), 0);
			cr_assert_eq(util_get32(buf_data(pg) + BUF_HDR), a[i].count[k], "page %" PRIu64, pgno);
			buf_put(bp, pg);
		}
}

/* pages [1, n] on disk, page i filled with (unsigned char)i; the pool is
 * then reopened empty with frames frames. */
static void pages_on_disk(uint64_t n, size_t frames)
{
	for (uint64_t i = 1; i <= n; i++)
		(void)modify(i, (unsigned char)i);
	cr_assert_eq(buf_flush_all(bp), 0);
	buf_close(bp);
	cr_assert_eq(buf_open(df, lg, PS, frames, 0, &bp), 0);
}

static void read_page(uint64_t pgno)
{
	buf_page *pg;
	cr_assert_eq(buf_get(bp, pgno, BUF_S, &pg), 0, "page %" PRIu64 ": %s", pgno, tp_errmsg());
	cr_assert_eq(buf_data(pg)[BUF_HDR], (unsigned char)pgno, "page %" PRIu64 " holds another page's bytes", pgno);
	buf_put(bp, pg);
}

/* The misses of a read of pages [first, last]. */
static uint64_t misses_reading(uint64_t first, uint64_t last)
{
	buf_stats s0, s1;
	buf_stats_get(bp, &s0);
	for (uint64_t i = first; i <= last; i++)
		read_page(i);
	buf_stats_get(bp, &s1);
	return s1.misses - s0.misses;
}

/* B8: a sequential scan reads ahead, so most of its pages are hits */
Test(buf, sequential_reads_are_read_ahead)
{
	open_all(1024, 0);
	pages_on_disk(400, 1024);
	buf_stats s0, s1;
	buf_stats_get(bp, &s0);
	uint64_t m = misses_reading(1, 400);
	buf_stats_get(bp, &s1);
	cr_assert_lt(m, 40, "a scan of 400 pages missed %" PRIu64 " times: no read-ahead", m);
	cr_assert_eq(s1.reads - s0.reads, 400, "every page read once, none twice or skipped");
}

/* B8: two readers reading in order at once, their pages interleaved (the
 * kernel sends a FUSE file's read-ahead as two or three requests served
 * together), are each read ahead: a single "last page read" would see
 * neither as sequential */
Test(buf, interleaved_streams_are_each_read_ahead)
{
	open_all(2048, 0);
	pages_on_disk(1200, 2048);
	buf_stats s0, s1;
	buf_stats_get(bp, &s0);
	for (uint64_t i = 1; i <= 600; i++) {
		read_page(i);
		read_page(600 + i);
	}
	buf_stats_get(bp, &s1);
	uint64_t m = s1.misses - s0.misses;
	cr_assert_lt(m, 120, "two interleaved scans of 600 pages each missed %" PRIu64 " times: no read-ahead", m);
	/* each page once; and where the first scan's last window runs past
	 * its end into the second's first pages, which went through the ring
	 * and may be gone, those again: at most a window (32 pages) more */
	uint64_t r = s1.reads - s0.reads;
	cr_assert(r >= 1200 && r <= 1200 + 32, "%" PRIu64 " page reads for 1200 pages", r);
}

/* B8: a stream hands the pages beyond its read-ahead window to the kernel
 * ahead of time (io_willneed), each page once, in order, and always ahead
 * of the page being read -- so the disk works while the stream is served */
static uint64_t wn_next, wn_pages, wn_calls, wn_behind, wn_reading;
static void counting_willneed(void *h, uint64_t off, uint64_t len)
{
	(void)h;
	if (off / PS != wn_next && wn_next)
		wn_behind++; /* a gap or an overlap */
	if (off / PS <= wn_reading)
		wn_behind++;
	wn_next = (off + len) / PS;
	wn_pages += len / PS;
	wn_calls++;
}

Test(buf, stream_asks_the_kernel_to_read_ahead)
{
	static io_backend be;
	be = *io_posix_backend();
	be.willneed = counting_willneed;
	io_set_backend(&be);
	open_all(1024, 0);
	pages_on_disk(3000, 1024);
	wn_next = wn_pages = wn_calls = wn_behind = 0; /* (writing them read ahead too) */
	for (wn_reading = 1; wn_reading <= 3000; wn_reading++)
		read_page(wn_reading);
	cr_assert_gt(wn_calls, 0, "a 3000-page scan never asked the kernel to read ahead");
	cr_assert_eq(wn_behind, 0, "a hint overlapped another, skipped pages, or named a page already read");
	cr_assert_geq(wn_pages, 2500, "the hints covered %" PRIu64 " pages of a 3000-page scan", wn_pages);
	cr_assert_lt(wn_calls, 20, "%" PRIu64 " hints for 3000 pages: not in steps", wn_calls);
	wn_calls = 0;
	read_page(1); /* cached: no stream, no hint */
	read_page(2500);
	cr_assert_eq(wn_calls, 0, "reads out of order asked the kernel to read ahead");
}

/* A 1024-frame pool over 3,200 pages on disk, of which 3101-3200 are a hot
 * set, read twice. */
static void pool_with_hot_set(void)
{
	open_all(1024, 0);
	pages_on_disk(3200, 1024);
	(void)misses_reading(3101, 3200);
	(void)misses_reading(3101, 3200);
}

/* B8: a scan longer than the pool cycles through a ring of frames, so the
 * pages others use keep theirs (the ring's frames are taken again even
 * though the scan itself set their reference bits) */
Test(buf, long_scan_leaves_the_rest_of_the_pool_alone)
{
	pool_with_hot_set();
	(void)misses_reading(1, 3000);
	uint64_t m = misses_reading(3101, 3200);
	cr_assert_eq(m, 0, "a 3000-page scan through a 1024-frame pool evicted %" PRIu64 " of the 100 hot pages", m);
}

/* B8: a file read as the kernel reads a FUSE file -- pieces served out of
 * order, each starting a stream of its own -- reads ahead through the
 * ring from a stream's first window, so it neither evicts the pages others
 * use nor touches new frames (a fresh pool's first touch of a frame is a
 * page fault and a zeroed page: 12% of a cold sequential read's CPU) */
Test(buf, streams_read_ahead_through_the_ring_from_their_first_window)
{
	pool_with_hot_set();
	for (uint64_t c = 0; c < 100; c += 2) { /* pieces of 30 pages, each pair swapped */
		(void)misses_reading(1 + (c + 1) * 30, (c + 2) * 30);
		(void)misses_reading(1 + c * 30, (c + 1) * 30);
	}
	uint64_t m = misses_reading(3101, 3200);
	cr_assert_eq(m, 0, "100 streams of 30 pages through a 1024-frame pool evicted %" PRIu64 " of the 100 hot pages", m);
}

/* BUF_DATA: bulk data pages read out of order (no read-ahead stream) take
 * their frames from the ring too; a data page used again stays */
Test(buf, data_pages_cycle_through_the_ring)
{
	pool_with_hot_set();
	buf_page *pg;
	for (int twice = 0; twice < 2; twice++) { /* a data page used twice */
		cr_assert_eq(buf_get(bp, 3050, BUF_S | BUF_DATA, &pg), 0);
		buf_put(bp, pg);
	}
	for (uint64_t i = 0; i < 3000; i++) { /* 3,000 pages, every 7th: never a stream */
		uint64_t q = 1 + (i * 7) % 3000;
		cr_assert_eq(buf_get(bp, q, BUF_S | BUF_DATA, &pg), 0, "page %" PRIu64 ": %s", q, tp_errmsg());
		cr_assert_eq(buf_data(pg)[BUF_HDR], (unsigned char)q);
		buf_put(bp, pg);
	}
	uint64_t m = misses_reading(3101, 3200) + misses_reading(3050, 3050);
	cr_assert_eq(m, 0, "3000 data pages read once through a 1024-frame pool evicted %" PRIu64 " of the 101 pages used twice", m);
}

/* B9: a page whose checksum holds but whose LSN is beyond the log's end
 * claims records the log does not have: damage, named, never data; read
 * ahead does not take it either; BUF_REBUILD gets zeros */
Test(buf, page_lsn_beyond_the_log_is_damage)
{
	static unsigned char p[PS];
	open_all(1024, 0);
	pages_on_disk(8, 1024);
	cr_assert_eq(su_raw_read(datapath, 5 * PS, p, PS, NULL), 0);
	util_put64(p + 8, log_end(lg) + 4096);
	util_put32(p, util_crc32c(0, p + 4, PS - 4));
	cr_assert_eq(su_raw_write(datapath, 5 * PS, p, PS), 0);
	for (uint64_t i = 1; i <= 4; i++) /* read-ahead covers page 5 */
		read_page(i);
	buf_page *pg;
	int rc = buf_get(bp, 5, BUF_S, &pg);
	cr_assert_eq(rc, TP_ECORRUPT, "a page claiming LSN beyond the log was returned as data (rc %d)", rc);
	cr_assert(has_page_word(tp_errmsg(), 5) && strstr(tp_errmsg(), "beyond the end of the log"), "message: %s",
		  tp_errmsg());
	read_page(6);
	cr_assert_eq(buf_get(bp, 5, BUF_X | BUF_REBUILD, &pg), 0);
	cr_assert_eq(buf_page_lsn(pg), 0, "rebuilt from zeros");
	buf_put(bp, pg);
}

/* B10: pages of a stream (BUF_ONCE: ordered data, written once) cycle
 * through a ring of frames once written, so a large write leaves the pages
 * others use in the pool (and does not touch the whole pool's memory) */
Test(buf, pages_used_once_leave_the_rest_of_the_pool_alone)
{
	open_all(1024, 0);
	pages_on_disk(100, 1024);
	(void)misses_reading(1, 100); /* a hot set, used twice */
	(void)misses_reading(1, 100);
	for (uint64_t i = 1000; i < 4000; i++) {
		buf_page *pg;
		cr_assert_eq(buf_get(bp, i, BUF_X | BUF_NOREAD | BUF_ONCE, &pg), 0, "%s", tp_errmsg());
		memset(buf_data(pg) + BUF_HDR, (unsigned char)i, PS - BUF_HDR);
		buf_dirty(bp, pg, log_end(lg) - 1);
		buf_set_lsn(pg, log_end(lg) - 1);
		buf_put(bp, pg);
		if (i % 100 == 99) /* the log's barrier writes them */
			cr_assert_eq(buf_flush_all(bp), 0);
	}
	uint64_t m = misses_reading(1, 100);
	cr_assert_eq(m, 0, "3000 pages written once through a 1024-frame pool evicted %" PRIu64 " of the 100 hot pages",
		     m);
	for (uint64_t i = 3990; i < 4000; i++) { /* and the stream's pages are what was written */
		buf_page *pg;
		cr_assert_eq(buf_get(bp, i, BUF_S, &pg), 0);
		cr_assert_eq(buf_data(pg)[BUF_HDR], (unsigned char)i);
		buf_put(bp, pg);
	}
}

/* B11: a miss reads outside the pool mutex.  The page file's backend holds
 * the read of one page until told; meanwhile the pool serves other pages,
 * and a second reader of the held page waits for the first one's read
 * instead of reading it again. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static uint64_t gate_off = UINT64_MAX; /* the read held, by offset */
static int gate_open, gate_waiting;

static int gated_pread(void *h, void *buf, size_t len, uint64_t off, size_t *done)
{
	pthread_mutex_lock(&gate_mu);
	if (off == gate_off && len == PS) {
		gate_waiting++;
		pthread_cond_broadcast(&gate_cv);
		while (!gate_open)
			pthread_cond_wait(&gate_cv, &gate_mu);
	}
	pthread_mutex_unlock(&gate_mu);
	return io_posix_backend()->pread(h, buf, len, off, done);
}

/* A read-ahead run's preadv, held likewise when it starts at gate_off. */
static int gated_preadv(void *h, const struct iovec *iov, int cnt, uint64_t off, size_t *done)
{
	pthread_mutex_lock(&gate_mu);
	if (off == gate_off && cnt > 1) {
		gate_waiting++;
		pthread_cond_broadcast(&gate_cv);
		while (!gate_open)
			pthread_cond_wait(&gate_cv, &gate_mu);
	}
	pthread_mutex_unlock(&gate_mu);
	return io_posix_backend()->preadv(h, iov, cnt, off, done);
}

struct getter {
	uint64_t pgno;
	int rc, done;
	unsigned char first;
};

static void *getter_main(void *arg)
{
	struct getter *g = arg;
	buf_page *pg;
	g->rc = buf_get(bp, g->pgno, BUF_S, &pg);
	if (!g->rc) {
		g->first = buf_data(pg)[BUF_HDR];
		buf_put(bp, pg);
	}
	pthread_mutex_lock(&gate_mu);
	g->done = 1;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
	return NULL;
}

/* The page file's reads through gated_pread (before open_all). */
static void install_gate(void)
{
	static io_backend be; /* the data file keeps a pointer to it until teardown */
	be = *io_posix_backend();
	be.pread = gated_pread;
	be.preadv = gated_preadv;
	io_set_backend(&be);
}

/* Starts a thread reading g->pgno, one of whose reads (at gate_off, or g's
 * page when that is unset) the gate holds: returns once it is held there. */
static void start_held_read(struct getter *g, pthread_t *t)
{
	if (gate_off == UINT64_MAX)
		gate_off = g->pgno * PS;
	cr_assert_eq(pthread_create(t, NULL, getter_main, g), 0);
	pthread_mutex_lock(&gate_mu);
	while (!gate_waiting)
		pthread_cond_wait(&gate_cv, &gate_mu);
	pthread_mutex_unlock(&gate_mu);
}

static void open_gate(void)
{
	pthread_mutex_lock(&gate_mu);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

/* Waits up to ms for g to finish; 1 if it did. */
static int finished(struct getter *g, int ms)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&gate_mu);
	while (!g->done && pthread_cond_timedwait(&gate_cv, &gate_mu, &dl) == 0)
		;
	int d = g->done;
	pthread_mutex_unlock(&gate_mu);
	return d;
}

Test(buf, a_miss_reads_without_holding_up_the_pool)
{
	install_gate();
	open_all(1024, 0);
	pages_on_disk(10, 1024);
	read_page(2); /* cached; not adjacent to 7, so nothing reads 7 ahead */
	buf_stats s0, s1;
	buf_stats_get(bp, &s0);
	struct getter a = {.pgno = 7}, b = {.pgno = 7}, c = {.pgno = 2};
	pthread_t ta, tb, tc;
	start_held_read(&a, &ta);
	cr_assert_eq(pthread_create(&tb, NULL, getter_main, &b), 0);
	cr_assert_eq(pthread_create(&tc, NULL, getter_main, &c), 0);
	int c_done = finished(&c, 5000); /* while page 7's read is held */
	int b_early = finished(&b, 100);
	open_gate();
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_join(tc, NULL);
	buf_stats_get(bp, &s1);
	cr_assert(c_done, "a hit on page 2 waited for the read of page 7");
	cr_assert_not(b_early, "the second reader of page 7 got it before its read was over");
	cr_assert(a.rc == 0 && b.rc == 0 && c.rc == 0, "rc %d %d %d", a.rc, b.rc, c.rc);
	cr_assert(a.first == 7 && b.first == 7 && c.first == 2, "bytes %u %u %u", a.first, b.first, c.first);
	cr_assert_eq(gate_waiting, 1, "page 7 was read %d times", gate_waiting);
	cr_assert_eq(s1.reads - s0.reads, 1);
	cr_assert_eq(buf_pinned(bp), 0);
}

/* B8, B11: a read-ahead run is read straight into its frames without
 * holding up the pool: a hit elsewhere goes on while the run's read is
 * held, a reader of a page of the run waits for that read (and gets the
 * page's own bytes, read once), and a damaged page of the run is left out */
Test(buf, read_ahead_holds_up_only_the_readers_of_its_pages)
{
	install_gate();
	open_all(1024, 0);
	pages_on_disk(20, 1024);
	cr_assert_eq(su_raw_flip(datapath, 5 * PS + 100, 0x40), 0);
	read_page(12); /* cached, away from the run */
	gate_off = 3 * PS; /* the run read ahead after page 2: pages 3..6 */
	read_page(1);
	buf_stats s0, s1;
	buf_stats_get(bp, &s0);
	struct getter a = {.pgno = 2}, b = {.pgno = 4}, c = {.pgno = 12};
	pthread_t ta, tb, tc;
	start_held_read(&a, &ta);
	cr_assert_eq(pthread_create(&tb, NULL, getter_main, &b), 0);
	cr_assert_eq(pthread_create(&tc, NULL, getter_main, &c), 0);
	int c_done = finished(&c, 5000); /* while the run's read is held */
	int b_early = finished(&b, 100);
	open_gate();
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_join(tc, NULL);
	buf_stats_get(bp, &s1);
	cr_assert(c_done, "a hit on page 12 waited for the read-ahead of pages 3..6");
	cr_assert_not(b_early, "a reader of page 4 got it before the run's read was over");
	cr_assert(a.rc == 0 && b.rc == 0 && c.rc == 0, "rc %d %d %d", a.rc, b.rc, c.rc);
	cr_assert(a.first == 2 && b.first == 4 && c.first == 12, "bytes %u %u %u", a.first, b.first, c.first);
	cr_assert_eq(gate_waiting, 1, "the run was read %d times", gate_waiting);
	cr_assert_eq(s1.misses - s0.misses, 1, "page 4 was read ahead: only page 2 missed");
	cr_assert_eq(buf_pinned(bp), 0);
	read_page(3);
	read_page(6);
	buf_page *pg;
	cr_assert_eq(buf_get(bp, 5, BUF_S, &pg), TP_ECORRUPT, "the damaged page of the run was kept as data");
	buf_stats_get(bp, &s1);
	cr_assert_eq(s1.misses - s0.misses, 2, "pages 3 and 6 were read ahead; page 5 read again, for real");
}

/* B11: a read that fails (checksum) while another reader waits for it:
 * both get the error, and the frame is left to nobody */
Test(buf, a_failed_read_fails_its_waiters_too)
{
	install_gate();
	open_all(1024, 0);
	pages_on_disk(10, 1024);
	cr_assert_eq(su_raw_flip(datapath, 7 * PS + 100, 0x40), 0);
	struct getter a = {.pgno = 7}, b = {.pgno = 7};
	pthread_t ta, tb;
	start_held_read(&a, &ta);
	cr_assert_eq(pthread_create(&tb, NULL, getter_main, &b), 0);
	(void)finished(&b, 100);
	open_gate();
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert(a.rc == TP_ECORRUPT && b.rc == TP_ECORRUPT, "rc %d %d", a.rc, b.rc);
	cr_assert_eq(buf_pinned(bp), 0);
	buf_page *pg;
	cr_assert_eq(buf_get(bp, 7, BUF_S, &pg), TP_ECORRUPT, "the damaged page was left in the pool as data");
	read_page(6);
}
