/*
 * test_log -- the write-ahead log: appends and reads, LSNs as positions,
 * back-chains, forward and backward scans, segments (preallocated, padded,
 * recycled), reopening, torn tails (L4, L5), corruption inside the log,
 * group commit, log_write (L14: written, not synced), panic (L7),
 * full-page images, and the never-rewrite rule for durable bytes (L3).
 *
 * Each test gets a fresh directory under /tmp that is the log directory;
 * damage is done with plain POSIX calls on the segment files, outside io.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io.h"
#include "io_sim.h"
#include "log.h"
#include "store_util.h"
#include "tp.h"
#include "util.h"

#define SEG 65536u
#define SEGP 256 /* room for a segment path under tdir */

static char tdir[64];

static void setup(void)
{
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "log"), 0);
}

static void teardown(void)
{
	io_set_backend(NULL);
	su_rmtree(tdir);
}

static log_config cfg_of(uint64_t seg, int readonly)
{
	log_config c = {.dir = tdir, .seg_size = seg, .readonly = readonly, .quiet = 1};
	for (int i = 0; i < 16; i++)
		c.uuid[i] = (uint8_t)(0xa0 + i);
	return c;
}

static log_mgr *open_log(uint64_t start)
{
	log_config c = cfg_of(SEG, 0);
	log_mgr *lg;
	int rc = log_open(&c, start, &lg);
	cr_assert_eq(rc, 0, "log_open: %d %s", rc, tp_errmsg());
	return lg;
}

static log_mgr *create_open(void)
{
	log_config c = cfg_of(SEG, 0);
	cr_assert_eq(log_create(&c), 0, "log_create: %s", tp_errmsg());
	return open_log(LOG_SEG_HDR);
}

static char *segpath(char *out, uint64_t idx)
{
	snprintf(out, SEGP, "%s/log.%016" PRIx64, tdir, idx);
	return out;
}

static uint64_t rsize(uint32_t len) { return (LOG_REC_HDR + (uint64_t)len + 7) & ~(uint64_t)7; }

/* ---- expected records ---- */

typedef struct exp_rec {
	uint64_t lsn, prev, txid, pgno, undo_next;
	uint16_t type, flags;
	uint32_t len, seed;
} exp_rec;

static void payload(unsigned char *p, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

static unsigned char pbuf[SEG];

/* Appends a record described by e (e->lsn set) and checks its LSN is the
 * end of the log before it (or the first position of the next segment). */
static void put_exp(log_mgr *lg, exp_rec *e)
{
	payload(pbuf, e->len, e->seed);
	log_rec r = {.prev_lsn = e->prev, .txid = e->txid, .pgno = e->pgno, .undo_next = e->undo_next,
		     .type = e->type, .flags = e->flags, .len = e->len, .data = pbuf};
	uint64_t before = log_end(lg);
	int rc = log_put(lg, &r);
	cr_assert_eq(rc, 0, "log_put: %d %s", rc, tp_errmsg());
	uint64_t want = before;
	if (before % SEG + rsize(e->len) > SEG) /* does not fit: the next segment */
		want = before - before % SEG + SEG + LOG_SEG_HDR;
	cr_assert_eq(r.lsn, want, "LSN %" PRIu64 " is the position %" PRIu64, r.lsn, want);
	cr_assert_eq(r.lsn % 8, 0);
	cr_assert_geq(r.lsn % SEG, LOG_SEG_HDR, "not inside a segment header");
	cr_assert_leq(r.lsn % SEG + rsize(e->len), SEG, "records never span segments");
	uint64_t end = log_end(lg);
	cr_assert_geq(end, r.lsn + rsize(e->len));
	e->lsn = r.lsn;
}

static void check_rec(const log_rec *r, const exp_rec *e)
{
	cr_assert_eq(r->lsn, e->lsn);
	cr_assert_eq(r->prev_lsn, e->prev, "prev of %" PRIu64, e->lsn);
	cr_assert_eq(r->txid, e->txid);
	cr_assert_eq(r->pgno, e->pgno);
	cr_assert_eq(r->undo_next, e->undo_next);
	cr_assert_eq(r->type, e->type);
	cr_assert_eq(r->flags, e->flags);
	cr_assert_eq(r->len, e->len);
	payload(pbuf, e->len, e->seed);
	cr_assert(e->len == 0 || memcmp(r->data, pbuf, e->len) == 0, "payload of %" PRIu64, e->lsn);
}

static void read_check(log_mgr *lg, const exp_rec *e)
{
	log_rec r;
	void *b;
	int rc = log_read(lg, e->lsn, &r, &b);
	cr_assert_eq(rc, 0, "log_read %" PRIu64 ": %d %s", e->lsn, rc, tp_errmsg());
	check_rec(&r, e);
	free(b);
}

/* n records of txids 1..3 chained per transaction; lengths vary. */
static void make_records(log_mgr *lg, exp_rec *v, size_t n, uint32_t maxlen)
{
	uint64_t last[4] = {0, 0, 0, 0};
	for (size_t i = 0; i < n; i++) {
		exp_rec *e = &v[i];
		memset(e, 0, sizeof *e);
		e->txid = 1 + i % 3;
		e->prev = last[e->txid];
		e->pgno = i % 5 == 0 ? LOG_NOPAGE : i * 3;
		e->type = (uint16_t)(1 + i % 9);
		e->flags = i % 7 == 0 ? LOG_CLR : 0;
		e->undo_next = e->flags ? e->prev : 0;
		e->len = (uint32_t)((i * 977) % (maxlen + 1));
		e->seed = (uint32_t)i;
		put_exp(lg, e);
		last[e->txid] = e->lsn;
	}
}

/* Scans forward from from; checks the records are v[0..n). */
static void scan_all(log_mgr *lg, uint64_t from, const exp_rec *v, size_t n)
{
	log_scan *s;
	log_rec r;
	size_t k = 0;
	int rc;
	cr_assert_eq(log_scan_open(lg, from, &s), 0);
	while ((rc = log_scan_next(s, &r)) == 0) {
		cr_assert_lt(k, n, "more records than written (extra at LSN %" PRIu64 ")", r.lsn);
		check_rec(&r, &v[k]);
		k++;
	}
	cr_assert_eq(rc, TP_ENOTFOUND, "scan ends with ENOTFOUND, not %d (%s)", rc, tp_errmsg());
	cr_assert_eq(k, n, "scan found %zu of %zu records", k, n);
	log_scan_close(s);
}

static int hdr_valid(uint64_t idx, char *why, size_t wn)
{
	char p[SEGP];
	unsigned char h[LOG_SEG_HDR];
	size_t got;
	log_config c = cfg_of(SEG, 0);
	if (su_raw_read(segpath(p, idx), 0, h, sizeof h, &got) || got != sizeof h)
		return snprintf(why, wn, "%s: unreadable header", p), 0;
	if (memcmp(h, "TPFSLOG1", 8) != 0)
		return snprintf(why, wn, "%s: bad magic", p), 0;
	if (util_get32(h + 508) != util_crc32c(0, h, 508))
		return snprintf(why, wn, "%s: bad header crc", p), 0;
	if (util_get64(h + 16) != idx)
		return snprintf(why, wn, "%s: header names %" PRIu64, p, util_get64(h + 16)), 0;
	if (util_get64(h + 24) != SEG || memcmp(h + 32, c.uuid, 16) != 0)
		return snprintf(why, wn, "%s: size or uuid wrong", p), 0;
	if (su_raw_size(p) != SEG)
		return snprintf(why, wn, "%s: size %" PRId64, p, su_raw_size(p)), 0;
	return 1;
}

/* ================================================================== */

TestSuite(log, .init = setup, .fini = teardown, .timeout = 60);

Test(log, create_makes_two_full_segments)
{
	log_config c = cfg_of(SEG, 0);
	char p[SEGP], why[512];
	cr_assert_eq(log_create(&c), 0);
	for (uint64_t i = 0; i < 2; i++)
		cr_assert(hdr_valid(i, why, sizeof why), "%s", why);
	cr_assert_eq(su_raw_size(segpath(p, 2)), -1, "no third segment");
	c.seg_size = 4096 * 15; /* < 64 KiB */
	cr_assert_eq(log_create(&c), TP_EINVAL);
	c.seg_size = 65536 + 100; /* not a multiple of 4096 */
	cr_assert_eq(log_create(&c), TP_EINVAL);
	cr_assert_str_neq(tp_errmsg(), "");
}

Test(log, round_trip_lsns_are_positions)
{
	enum { N = 60 };
	exp_rec v[N];
	log_mgr *lg = create_open();
	cr_assert_eq(log_end(lg), LOG_SEG_HDR, "an empty log ends at the first record position");
	cr_assert_eq(log_start(lg), LOG_SEG_HDR);
	make_records(lg, v, N, 500);
	for (size_t i = 1; i < N; i++) {
		cr_assert_gt(v[i].lsn, v[i - 1].lsn, "LSNs increase");
		cr_assert_eq(v[i].lsn, v[i - 1].lsn + rsize(v[i - 1].len), "record %zu follows %zu directly", i, i - 1);
	}
	/* readable before they are durable: from the buffer */
	for (size_t i = 0; i < N; i++)
		read_check(lg, &v[i]);
	cr_assert_leq(log_durable(lg), v[0].lsn, "nothing flushed yet");
	cr_assert_eq(log_flush(lg, v[N - 1].lsn), 0);
	cr_assert_gt(log_durable(lg), v[N - 1].lsn, "the last record is durable whole");
	cr_assert_leq(log_durable(lg), log_end(lg));
	for (size_t i = 0; i < N; i++)
		read_check(lg, &v[i]);
	uint64_t end = log_end(lg);
	cr_assert_eq(log_close(lg), 0);

	lg = open_log(LOG_SEG_HDR);
	cr_assert_eq(log_end(lg), end, "reopen finds the end");
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.cut_bytes, 0, "a clean log has no torn tail");
	for (size_t i = 0; i < N; i++)
		read_check(lg, &v[i]);
	scan_all(lg, LOG_SEG_HDR, v, N);
	log_close(lg);
}

Test(log, back_chains_walk_each_transaction)
{
	enum { N = 90 };
	exp_rec v[N];
	log_mgr *lg = create_open();
	make_records(lg, v, N, 300);
	cr_assert_eq(log_close(lg), 0);
	lg = open_log(LOG_SEG_HDR);
	for (uint64_t tx = 1; tx <= 3; tx++) {
		int k = N - 1;
		while (v[k].txid != tx)
			k--;
		uint64_t lsn = v[k].lsn;
		size_t seen = 0;
		while (lsn) {
			log_rec r;
			void *b;
			cr_assert_eq(log_read(lg, lsn, &r, &b), 0);
			while (k >= 0 && v[k].txid != tx)
				k--;
			cr_assert_geq(k, 0);
			check_rec(&r, &v[k]);
			lsn = r.prev_lsn;
			free(b);
			k--;
			seen++;
		}
		cr_assert_eq(seen, N / 3, "txn %" PRIu64 ": chain has %zu records", tx, seen);
	}
	log_close(lg);
}

Test(log, forward_and_backward_scans_agree)
{
	enum { N = 300 };
	static exp_rec v[N];
	log_mgr *lg = create_open();
	make_records(lg, v, N, 2000);
	cr_assert_geq(log_end(lg) / SEG, 4, "the records cross several segments");

	/* in memory (not flushed) and then from the files */
	for (int pass = 0; pass < 2; pass++) {
		scan_all(lg, LOG_SEG_HDR, v, N);
		log_scan *s;
		log_rec r;
		cr_assert_eq(log_scan_open(lg, LOG_SEG_HDR, &s), 0);
		for (int i = N - 1; i >= 0; i--) {
			int rc = log_scan_prev(s, &r);
			cr_assert_eq(rc, 0, "prev %d: %d %s", i, rc, tp_errmsg());
			check_rec(&r, &v[i]);
		}
		cr_assert_eq(log_scan_prev(s, &r), TP_ENOTFOUND, "nothing before the first record");
		log_scan_close(s);

		/* forward k records, then back: the record before the last returned */
		cr_assert_eq(log_scan_open(lg, LOG_SEG_HDR, &s), 0);
		for (int i = 0; i < 150; i++)
			cr_assert_eq(log_scan_next(s, &r), 0);
		check_rec(&r, &v[149]);
		for (int i = 148; i >= 140; i--) {
			cr_assert_eq(log_scan_prev(s, &r), 0);
			check_rec(&r, &v[i]);
		}
		log_scan_close(s);

		/* a scan may start at any record */
		cr_assert_eq(log_scan_open(lg, v[200].lsn, &s), 0);
		cr_assert_eq(log_scan_next(s, &r), 0);
		check_rec(&r, &v[200]);
		log_scan_close(s);
		cr_assert_eq(log_flush(lg, log_end(lg)), 0);
		cr_assert_eq(log_close(lg), 0);
		lg = open_log(LOG_SEG_HDR);
	}
	log_close(lg);
}

Test(log, segments_preallocated_and_padded)
{
	enum { N = 120 };
	static exp_rec v[N];
	char p[SEGP], why[512];
	log_mgr *lg = create_open();
	uint64_t prev_end = 0;
	for (size_t i = 0; i < N; i++) {
		memset(&v[i], 0, sizeof v[i]);
		v[i].txid = 7;
		v[i].pgno = LOG_NOPAGE;
		v[i].type = 6;
		v[i].len = 2900 + (uint32_t)(i % 5) * 41;
		v[i].seed = (uint32_t)i;
		put_exp(lg, &v[i]);
		uint64_t k = v[i].lsn / SEG;
		/* the record's segment and the next exist at full size at once */
		cr_assert_eq(su_raw_size(segpath(p, k)), SEG, "segment %" PRIu64 " full size", k);
		cr_assert_eq(su_raw_size(segpath(p, k + 1)), SEG, "the spare after segment %" PRIu64, k);
		if (i && v[i].lsn % SEG == LOG_SEG_HDR && SEG - prev_end % SEG >= LOG_REC_HDR && prev_end % SEG) {
			/* the tail of the previous segment holds a padding record */
			unsigned char h[LOG_REC_HDR];
			cr_assert_eq(log_flush(lg, v[i].lsn), 0);
			cr_assert_eq(su_raw_read(segpath(p, prev_end / SEG), prev_end % SEG, h, sizeof h, NULL), 0);
			cr_assert_eq(util_get64(h + 8), prev_end, "padding record at %" PRIu64, prev_end);
			cr_assert_eq(util_get16(h + 56), 0, "padding has type 0");
			cr_assert_eq(util_get32(h + 4), SEG - prev_end % SEG, "padding reaches the segment end");
		}
		prev_end = v[i].lsn + rsize(v[i].len);
	}
	uint64_t end = log_end(lg);
	cr_assert_geq(end / SEG, 5);
	cr_assert_eq(log_close(lg), 0);
	for (uint64_t k = 0; k <= end / SEG + 1; k++)
		cr_assert(hdr_valid(k, why, sizeof why), "%s", why);
	lg = open_log(LOG_SEG_HDR);
	scan_all(lg, LOG_SEG_HDR, v, N); /* padding is never returned */
	log_close(lg);
}

/* A writer that logs far more than it syncs: buffer spills write (and
 * sync, segment by segment) without moving the durable point, across more
 * segments than the log keeps open.  The cache of open segments must still
 * find one to close (it once looked only below the durable point: EMFILE,
 * a panicked log). */
Test(log, spills_across_more_segments_than_are_kept_open)
{
	enum { N = 500 };
	static exp_rec v[N];
	log_mgr *lg = create_open();
	for (size_t i = 0; i < N; i++) { /* about 23 segments, never flushed */
		memset(&v[i], 0, sizeof v[i]);
		v[i].txid = 9;
		v[i].pgno = LOG_NOPAGE;
		v[i].type = 6;
		v[i].len = 3000;
		v[i].seed = (uint32_t)i;
		put_exp(lg, &v[i]);
	}
	cr_assert_gt(log_end(lg) / SEG, 20);
	cr_assert_eq(log_flush(lg, log_end(lg) - 1), 0, "%s", tp_errmsg());
	cr_assert_eq(log_close(lg), 0);
	lg = open_log(LOG_SEG_HDR);
	scan_all(lg, LOG_SEG_HDR, v, N);
	log_close(lg);
}

Test(log, record_sizes_at_the_limit)
{
	log_mgr *lg = create_open();
	uint32_t max = SEG - LOG_SEG_HDR - LOG_REC_HDR; /* fills a segment exactly */
	log_rec r = {.txid = 1, .pgno = LOG_NOPAGE, .type = 6, .len = max + 8, .data = pbuf};
	cr_assert_eq(log_put(lg, &r), TP_EINVAL, "a record larger than a segment is refused");
	uint64_t end = log_end(lg);
	cr_assert_eq(end, LOG_SEG_HDR, "a refused record changes nothing");
	exp_rec v[4] = {
		{.txid = 1, .pgno = LOG_NOPAGE, .type = 6, .len = 100, .seed = 1},
		{.txid = 1, .pgno = 3, .type = 6, .len = max, .seed = 2}, /* pads, then a whole segment */
		{.txid = 1, .pgno = 4, .type = 6, .len = 0, .seed = 3},
		{.txid = 1, .pgno = 5, .type = 6, .len = max, .seed = 4},
	};
	for (int i = 0; i < 4; i++) {
		v[i].prev = i ? v[i - 1].lsn : 0;
		put_exp(lg, &v[i]);
	}
	cr_assert_eq(v[1].lsn, SEG + LOG_SEG_HDR);
	cr_assert_eq(v[2].lsn, 2 * SEG + LOG_SEG_HDR, "after a full segment: the next one");
	cr_assert_eq(v[3].lsn, 3 * SEG + LOG_SEG_HDR);
	cr_assert_eq(log_close(lg), 0);
	lg = open_log(LOG_SEG_HDR);
	cr_assert_eq(log_end(lg), 4 * SEG + LOG_SEG_HDR);
	scan_all(lg, LOG_SEG_HDR, v, 4);
	for (int i = 0; i < 4; i++)
		read_check(lg, &v[i]);
	log_close(lg);
}

Test(log, reopen_appends_at_the_end_and_chains_back)
{
	enum { N = 40 };
	exp_rec v[2 * N];
	log_mgr *lg = create_open();
	make_records(lg, v, N, 700);
	cr_assert_eq(log_close(lg), 0);
	lg = open_log(LOG_SEG_HDR);
	uint64_t end = log_end(lg);
	cr_assert_eq(end, v[N - 1].lsn + rsize(v[N - 1].len));
	make_records(lg, v + N, N, 700);
	cr_assert_eq(v[N].lsn, end, "the first new record goes at the end found");
	cr_assert_eq(log_close(lg), 0);
	lg = open_log(LOG_SEG_HDR);
	log_scan *s;
	log_rec r;
	cr_assert_eq(log_scan_open(lg, LOG_SEG_HDR, &s), 0);
	for (int i = 2 * N - 1; i >= 0; i--) {
		cr_assert_eq(log_scan_prev(s, &r), 0, "backward across the reopen, record %d", i);
		check_rec(&r, &v[i]);
	}
	log_scan_close(s);
	log_close(lg);
}

Test(log, close_after_panic_writes_nothing)
{
	exp_rec v[6];
	log_mgr *lg = create_open();
	make_records(lg, v, 3, 100);
	cr_assert_eq(log_flush(lg, v[2].lsn), 0);
	make_records(lg, v + 3, 3, 100);
	log_panic(lg, TP_EPANIC, NULL);
	cr_assert(log_panicked(lg));
	log_close(lg);
	lg = open_log(LOG_SEG_HDR);
	scan_all(lg, LOG_SEG_HDR, v, 3);
	log_close(lg);
}

Test(log, read_at_a_bad_lsn_fails)
{
	exp_rec v[3];
	log_mgr *lg = create_open();
	make_records(lg, v, 3, 100);
	cr_assert_eq(log_flush(lg, log_end(lg)), 0);
	log_rec r;
	void *b = NULL;
	cr_assert_eq(log_read(lg, v[1].lsn + 8, &r, &b), TP_ECORRUPT, "not a record start");
	cr_assert_neq(log_read(lg, log_end(lg), &r, &b), 0, "the end holds no record");
	cr_assert_neq(log_read(lg, 5 * SEG + LOG_SEG_HDR, &r, &b), 0, "beyond every segment");
	log_close(lg);
}

/* ---- torn tails ---- */

static void five_records(exp_rec v[5])
{
	log_mgr *lg = create_open();
	for (int i = 0; i < 5; i++) {
		memset(&v[i], 0, sizeof v[i]);
		v[i].txid = 1;
		v[i].prev = i ? v[i - 1].lsn : 0;
		v[i].pgno = 10 + (uint64_t)i;
		v[i].type = 6;
		v[i].len = 200 + 8 * (uint32_t)i;
		v[i].seed = 100 + (uint32_t)i;
		put_exp(lg, &v[i]);
	}
	cr_assert_eq(log_close(lg), 0);
}

static void damage(uint64_t lsn, uint64_t at)
{
	char p[SEGP];
	cr_assert_eq(su_raw_flip(segpath(p, lsn / SEG), lsn % SEG + at, 0x5a), 0);
}

/* A power cut during the last flush (five_records' close): the mark of
 * what was durable still says LSN 512 (L14), and the byte at lsn + at is
 * torn. */
static void tear(uint64_t lsn, uint64_t at)
{
	cr_assert_eq(su_raw_mark(tdir, LOG_SEG_HDR), 0);
	damage(lsn, at);
}

Test(log, torn_last_record_is_cut)
{
	exp_rec v[5];
	char p[SEGP];
	five_records(v);
	tear(v[4].lsn, rsize(v[4].len) - 9); /* inside the payload's last bytes */
	log_mgr *lg = open_log(LOG_SEG_HDR);
	cr_assert_eq(log_end(lg), v[4].lsn, "the end is cut at the last whole record");
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.cut_bytes, rsize(v[4].len), "cut_bytes reports the torn record");
	scan_all(lg, LOG_SEG_HDR, v, 4);
	log_close(lg);
	/* L5: the cut bytes were zeroed on disk */
	unsigned char z[512];
	cr_assert_eq(su_raw_read(segpath(p, 0), v[4].lsn, z, rsize(v[4].len), NULL), 0);
	for (uint64_t i = 0; i < rsize(v[4].len); i++)
		cr_assert_eq(z[i], 0, "byte %" PRIu64 " of the cut record zeroed", i);
	lg = open_log(LOG_SEG_HDR);
	log_stats_get(lg, &st);
	cr_assert_eq(st.cut_bytes, 0, "nothing left to cut at the next open");
	log_close(lg);
}

Test(log, torn_header_is_cut)
{
	exp_rec v[5];
	five_records(v);
	tear(v[4].lsn, 4); /* the size field */
	log_mgr *lg = open_log(LOG_SEG_HDR);
	cr_assert_eq(log_end(lg), v[4].lsn);
	scan_all(lg, LOG_SEG_HDR, v, 4);
	log_close(lg);
}

/* A torn record followed by a whole one (a reordered write): both are cut
 * and zeroed, so a new, shorter history can never be followed by the old
 * record again (L5). */
Test(log, no_stale_record_reappears_after_a_cut)
{
	exp_rec v[5], n[2];
	five_records(v);
	tear(v[3].lsn, LOG_REC_HDR + 3);
	log_mgr *lg = open_log(LOG_SEG_HDR);
	cr_assert_eq(log_end(lg), v[3].lsn);
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.cut_bytes, rsize(v[3].len) + rsize(v[4].len), "the torn record and the one after it");
	/* new records of exactly the old sizes: v[4] would line up again */
	n[0] = (exp_rec){.txid = 9, .pgno = LOG_NOPAGE, .type = 6, .len = v[3].len, .seed = 999};
	put_exp(lg, &n[0]);
	cr_assert_eq(n[0].lsn, v[3].lsn);
	cr_assert_eq(log_close(lg), 0);
	lg = open_log(LOG_SEG_HDR);
	exp_rec want[4] = {v[0], v[1], v[2], n[0]};
	scan_all(lg, LOG_SEG_HDR, want, 4);
	cr_assert_eq(log_end(lg), n[0].lsn + rsize(n[0].len));
	log_stats_get(lg, &st);
	cr_assert_eq(st.cut_bytes, 0);
	/* and once more after another append and reopen */
	n[1] = (exp_rec){.txid = 9, .prev = n[0].lsn, .pgno = 1, .type = 7, .len = 16, .seed = 5};
	put_exp(lg, &n[1]);
	cr_assert_eq(log_close(lg), 0);
	lg = open_log(LOG_SEG_HDR);
	exp_rec want2[5] = {v[0], v[1], v[2], n[0], n[1]};
	scan_all(lg, LOG_SEG_HDR, want2, 5);
	log_close(lg);
}

Test(log, readonly_open_cuts_in_memory_only)
{
	exp_rec v[5];
	five_records(v);
	tear(v[4].lsn, LOG_REC_HDR + 1);
	su_tree *before = su_tree_take(tdir);
	log_config c = cfg_of(SEG, 1);
	log_mgr *lg;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "%s", tp_errmsg());
	cr_assert_eq(log_end(lg), v[4].lsn);
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.cut_bytes, rsize(v[4].len));
	scan_all(lg, LOG_SEG_HDR, v, 4);
	log_close(lg);
	su_tree *after = su_tree_take(tdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "read-only open changed the log: %s", why);
	su_tree_free(before);
	su_tree_free(after);
}

/* L15: the same damage as a torn tail, but in bytes the durable mark says
 * were durable before the crash: refused, naming the file, offset and
 * LSN and what was found, and nothing is written. */
Test(log, damage_below_the_durable_mark_is_refused)
{
	exp_rec v[5];
	char p[SEGP], why[512], want[128];
	five_records(v); /* closed: synced, the mark names the end */
	damage(v[3].lsn, LOG_REC_HDR + 3);
	su_tree *before = su_tree_take(tdir);
	log_config c = cfg_of(SEG, 0);
	log_mgr *lg = NULL;
	int rc = log_open(&c, LOG_SEG_HDR, &lg);
	cr_assert_eq(rc, TP_ECORRUPT, "damage below the mark is not a torn tail (rc %d)", rc);
	const char *m = tp_errmsg();
	cr_assert_not_null(strstr(m, segpath(p, 0)), "names the file: %s", m);
	snprintf(want, sizeof want, "offset %" PRIu64 " (LSN %" PRIu64 ")", v[3].lsn % SEG, v[3].lsn);
	cr_assert_not_null(strstr(m, want), "names offset and LSN (%s): %s", want, m);
	cr_assert_not_null(strstr(m, "checksum mismatch"), "says what was found: %s", m);
	cr_assert_not_null(strstr(m, "durable mark"), "says why it was durable: %s", m);
	cr_assert_not_null(strstr(m, "--discard-after"), "says how to accept the loss: %s", m);
	c.readonly = 1;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_ECORRUPT, "a read-only open refuses too");
	su_tree *after = su_tree_take(tdir);
	cr_assert(su_tree_equal(before, after, why, sizeof why), "refusing changed the log: %s", why);
	su_tree_free(before);
	su_tree_free(after);
}

/* A zeroed sector in the middle of durable records, and a record whose
 * header was zeroed: both refused. */
Test(log, zeroed_sector_below_the_durable_mark_is_refused)
{
	exp_rec v[5];
	char p[SEGP];
	static const unsigned char z[512];
	five_records(v);
	uint64_t at = (v[0].lsn + 511) & ~(uint64_t)511; /* a whole sector inside the records */
	cr_assert_leq(at + 512, v[4].lsn);
	cr_assert_eq(su_raw_write(segpath(p, 0), at, z, sizeof z), 0);
	log_config c = cfg_of(SEG, 0);
	log_mgr *lg = NULL;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_ECORRUPT, "%s", tp_errmsg());
}

/* The durable floor (the checkpoint's record) holds even when the mark is
 * older or gone. */
Test(log, damage_below_the_durable_floor_is_refused)
{
	exp_rec v[5];
	five_records(v);
	tear(v[1].lsn, LOG_REC_HDR + 1);
	log_config c = cfg_of(SEG, 0);
	c.durable_floor = v[2].lsn + 1;
	log_mgr *lg = NULL;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_ECORRUPT, "rc: below the floor");
	cr_assert_not_null(strstr(tp_errmsg(), "checkpoint"), "%s", tp_errmsg());
	c.durable_floor = v[1].lsn; /* the floor at the record: it may be cut */
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "%s", tp_errmsg());
	cr_assert_eq(log_end(lg), v[1].lsn);
	log_close(lg);
}

/* The mark moves with every durable flush, not only at close. */
Test(log, every_durable_flush_moves_the_mark)
{
	exp_rec v[3];
	log_mgr *lg = create_open();
	for (int i = 0; i < 3; i++) {
		v[i] = (exp_rec){.txid = 1, .prev = i ? v[i - 1].lsn : 0, .pgno = 1, .type = 6, .len = 300,
				 .seed = 7 + (uint32_t)i};
		put_exp(lg, &v[i]);
		if (i == 1)
			cr_assert_eq(log_flush(lg, v[1].lsn), 0);
	}
	/* the process dies: v[2] was never written; v[1] was durable */
	log_panic(lg, TP_EPANIC, NULL);
	log_close(lg);
	damage(v[0].lsn, LOG_REC_HDR + 2);
	log_config c = cfg_of(SEG, 0);
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_ECORRUPT, "the flush of v[1] marked it durable");
}

static void many_segments(exp_rec *v, size_t n)
{
	log_mgr *lg = create_open();
	for (size_t i = 0; i < n; i++) {
		memset(&v[i], 0, sizeof v[i]);
		v[i].txid = 1 + i % 2;
		v[i].prev = i >= 2 ? v[i - 2].lsn : 0;
		v[i].pgno = i;
		v[i].type = 6;
		v[i].len = 2500 + (uint32_t)(i * 13 % 400);
		v[i].seed = (uint32_t)i;
		put_exp(lg, &v[i]);
	}
	cr_assert_eq(log_close(lg), 0);
}

static size_t first_in_seg(const exp_rec *v, size_t n, uint64_t seg)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].lsn / SEG == seg)
			return i;
	cr_assert_fail("no record in segment %" PRIu64, seg);
	return 0;
}

Test(log, corrupt_record_inside_the_log_is_refused)
{
	enum { N = 100 };
	static exp_rec v[N];
	char p[SEGP], why[512];
	many_segments(v, N);
	cr_assert_geq(v[N - 1].lsn / SEG, 2);
	size_t k = first_in_seg(v, N, 1) / 2; /* the middle of segment 0 */
	damage(v[k].lsn, LOG_REC_HDR + 10);
	su_tree *before = su_tree_take(tdir);
	log_config c = cfg_of(SEG, 0);
	log_mgr *lg = NULL;
	int rc = log_open(&c, LOG_SEG_HDR, &lg);
	cr_assert_eq(rc, TP_ECORRUPT, "a bad record followed by valid segments is corruption, not a torn tail (rc %d)",
		     rc);
	cr_assert_not_null(strstr(tp_errmsg(), segpath(p, 0)), "the message names the segment: %s", tp_errmsg());
	su_tree *after = su_tree_take(tdir);
	cr_assert(su_tree_equal(before, after, why, sizeof why), "refusing changed the log: %s", why);
	su_tree_free(before);
	su_tree_free(after);
}

Test(log, corrupt_last_record_of_a_segment_is_refused)
{
	enum { N = 100 };
	static exp_rec v[N];
	many_segments(v, N);
	size_t k = first_in_seg(v, N, 2) - 1; /* the last record of segment 1 */
	cr_assert_eq(v[k].lsn / SEG, 1);
	damage(v[k].lsn, LOG_REC_HDR + 100);
	log_config c = cfg_of(SEG, 0);
	log_mgr *lg = NULL;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_ECORRUPT);
}

/* A segment file between the start and the newest one is gone: the records
 * in it are lost, so open must refuse rather than end the log early. */
Test(log, missing_segment_inside_the_log_is_refused)
{
	enum { N = 100 };
	static exp_rec v[N];
	char p[SEGP], why[512];
	many_segments(v, N);
	uint64_t last = v[N - 1].lsn / SEG;
	cr_assert_geq(last, 3);
	/* (a) a middle segment: the log visibly goes on after it */
	char keep1[SEGP];
	snprintf(keep1, sizeof keep1, "%s/moved-1", tdir);
	cr_assert_eq(rename(segpath(p, 1), keep1), 0);
	log_config c = cfg_of(SEG, 0);
	log_mgr *lg = NULL;
	int rc = log_open(&c, LOG_SEG_HDR, &lg);
	cr_assert(rc == TP_ECORRUPT || rc == TP_EBADSTORE, "missing middle segment: rc %d", rc);
	cr_assert_eq(rename(keep1, segpath(p, 1)), 0);

	/* (b) the newest segment holding records: only the spares follow */
	cr_assert_eq(unlink(segpath(p, last)), 0);
	su_tree *before = su_tree_take(tdir);
	rc = log_open(&c, LOG_SEG_HDR, &lg);
	if (rc == 0) {
		uint64_t end = log_end(lg);
		log_close(lg);
		cr_assert_fail("open succeeded without %s: the log now ends at LSN %" PRIu64
			       " instead of %" PRIu64 ", losing %zu records (and the file was re-created)",
			       segpath(p, last), end, v[N - 1].lsn + rsize(v[N - 1].len),
			       N - first_in_seg(v, N, last));
	}
	cr_assert(rc == TP_ECORRUPT || rc == TP_EBADSTORE, "rc %d", rc);
	cr_assert_not_null(strstr(tp_errmsg(), segpath(p, last)), "names the missing file: %s", tp_errmsg());
	su_tree *after = su_tree_take(tdir);
	cr_assert(su_tree_equal(before, after, why, sizeof why), "%s", why);
	su_tree_free(before);
	su_tree_free(after);

	/* (c) the newest segment and every spare after it: no hole is left,
	 * but the log reached a segment that is gone (L15) */
	for (uint64_t k = last + 1; k < last + 16; k++)
		(void)unlink(segpath(p, k));
	rc = log_open(&c, LOG_SEG_HDR, &lg);
	if (rc == 0) {
		uint64_t end = log_end(lg);
		log_close(lg);
		cr_assert_fail("open succeeded without segments %" PRIu64 " and after: the log now ends at LSN %" PRIu64,
			       last, end);
	}
	cr_assert_eq(rc, TP_ECORRUPT, "rc %d", rc);
	cr_assert_not_null(strstr(tp_errmsg(), segpath(p, last)), "names the missing file: %s", tp_errmsg());
}

/* The administrator accepts a loss: a read-only open with discard_after
 * shows what would go, changing nothing; a read-write one cuts there,
 * keeps the cut segments aside, and the log opens normally after it. */
Test(log, discard_after_cuts_and_keeps_the_evidence)
{
	enum { N = 100 };
	static exp_rec v[N];
	char p[SEGP], aside[SEGP + 48], why[512];
	many_segments(v, N);
	uint64_t last = v[N - 1].lsn / SEG;
	size_t k = first_in_seg(v, N, 1) + 3; /* inside segment 1 */
	damage(v[k].lsn, LOG_REC_HDR + 10);
	log_config c = cfg_of(SEG, 0);
	log_mgr *lg = NULL;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_ECORRUPT);

	c.discard_after = v[k].lsn + 8; /* not a record's start */
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_EINVAL, "%s", tp_errmsg());

	c.discard_after = v[k].lsn;
	c.readonly = 1;
	su_tree *before = su_tree_take(tdir);
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "%s", tp_errmsg());
	cr_assert_eq(log_end(lg), v[k].lsn);
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_geq(st.cut_bytes, v[N - 1].lsn - v[k].lsn, "the dry run counts everything after the cut");
	scan_all(lg, LOG_SEG_HDR, v, k);
	log_close(lg);
	su_tree *after = su_tree_take(tdir);
	cr_assert(su_tree_equal(before, after, why, sizeof why), "the read-only discard changed the log: %s", why);
	su_tree_free(before);
	su_tree_free(after);

	c.readonly = 0;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "%s", tp_errmsg());
	cr_assert_eq(log_end(lg), v[k].lsn);
	log_close(lg);
	for (uint64_t i = 1; i <= last; i++) {
		snprintf(aside, sizeof aside, "%s.discarded-%" PRIu64, segpath(p, i), v[k].lsn);
		cr_assert_geq(su_raw_size(aside), (int64_t)SEG, "%s keeps the cut records", aside);
	}
	c.discard_after = 0;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "after the discard the log opens: %s", tp_errmsg());
	scan_all(lg, LOG_SEG_HDR, v, k);
	exp_rec n = {.txid = 5, .pgno = 3, .type = 6, .len = 100, .seed = 1};
	put_exp(lg, &n);
	cr_assert_eq(n.lsn, v[k].lsn, "new records go where the cut was");
	cr_assert_eq(log_close(lg), 0);
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "%s", tp_errmsg());
	log_close(lg);

	/* a second discard at the same LSN keeps the first one's copies */
	snprintf(aside, sizeof aside, "%s.discarded-%" PRIu64, segpath(p, 1), v[k].lsn);
	int64_t first = su_raw_size(aside);
	c.discard_after = v[k].lsn;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "%s", tp_errmsg());
	log_close(lg);
	cr_assert_eq(su_raw_size(aside), first, "the first copy stays");
	snprintf(aside, sizeof aside, "%s.discarded-%" PRIu64 ".2", segpath(p, 1), v[k].lsn);
	cr_assert_geq(su_raw_size(aside), (int64_t)SEG, "the second copy goes beside it: %s", aside);
}

Test(log, open_checks_segment_headers)
{
	char p[SEGP];
	log_mgr *lg = create_open();
	exp_rec v[2];
	make_records(lg, v, 2, 50);
	cr_assert_eq(log_close(lg), 0);

	log_config c = cfg_of(SEG, 0);
	c.uuid[3] ^= 1;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_ECORRUPT, "another store's log");
	cr_assert_not_null(strstr(tp_errmsg(), "uuid"), "%s", tp_errmsg());

	c = cfg_of(SEG * 2, 0);
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_ECORRUPT, "segment size differs");

	/* a newer log format version, with a correct header checksum */
	unsigned char h[LOG_SEG_HDR];
	cr_assert_eq(su_raw_read(segpath(p, 1), 0, h, sizeof h, NULL), 0);
	util_put32(h + 8, 2);
	util_put32(h + 508, util_crc32c(0, h, 508));
	cr_assert_eq(su_raw_write(p, 0, h, sizeof h), 0);
	c = cfg_of(SEG, 0);
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_EVERSION);
	cr_assert_not_null(strstr(tp_errmsg(), p), "names %s: %s", p, tp_errmsg());

	util_put32(h + 8, 1);
	util_put32(h + 508, util_crc32c(0, h, 508));
	cr_assert_eq(su_raw_write(p, 0, h, sizeof h), 0);
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "the repaired header is accepted");
	log_close(lg);

	/* the start segment is missing */
	cr_assert_eq(unlink(segpath(p, 0)), 0);
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), TP_EBADSTORE);
	cr_assert_not_null(strstr(tp_errmsg(), p), "names %s: %s", p, tp_errmsg());
}

/* ---- truncation ---- */

Test(log, truncate_recycles_segments)
{
	enum { N = 200 };
	static exp_rec v[N];
	char p[SEGP], why[512];
	many_segments(v, N);
	uint64_t last = v[N - 1].lsn / SEG;
	cr_assert_geq(last, 6);
	log_mgr *lg = open_log(LOG_SEG_HDR);
	size_t k = first_in_seg(v, N, 5);
	uint64_t keep = v[k].lsn;
	/* the highest file before */
	uint64_t maxbefore = 0;
	for (uint64_t i = 0; i < 64; i++)
		if (su_raw_size(segpath(p, i)) >= 0)
			maxbefore = i;
	cr_assert_eq(log_truncate(lg, keep), 0, "%s", tp_errmsg());
	cr_assert_eq(log_start(lg), keep);
	int renamed = 0, count = 0;
	for (uint64_t i = 0; i < 64; i++) {
		if (su_raw_size(segpath(p, i)) < 0)
			continue;
		count++;
		cr_assert_geq(i, 5, "segment %" PRIu64 " wholly below the start is gone", i);
		cr_assert(hdr_valid(i, why, sizeof why), "L6: %s", why);
		if (i > maxbefore)
			renamed++;
	}
	cr_assert_gt(renamed, 0, "old segments are recycled to future indexes");
	cr_assert_leq(count, (int)(last - 5 + 1 + 2), "at most two spares kept");
	log_rec r;
	void *b = NULL;
	cr_assert_neq(log_read(lg, v[3].lsn, &r, &b), 0, "a record of a recycled segment is gone");
	read_check(lg, &v[k]);

	/* append into the recycled segments (they hold old bytes) */
	static exp_rec w[N];
	memcpy(w, v + k, (N - k) * sizeof *w);
	size_t m = N - k;
	for (size_t i = 0; i < 90; i++, m++) {
		memset(&w[m], 0, sizeof w[m]);
		w[m].txid = 5;
		w[m].pgno = LOG_NOPAGE;
		w[m].type = 6;
		w[m].len = 2000 + (uint32_t)i;
		w[m].seed = 5000 + (uint32_t)i;
		put_exp(lg, &w[m]);
	}
	cr_assert_gt(w[m - 1].lsn / SEG, maxbefore, "the new records reach a recycled file");
	uint64_t end = log_end(lg);
	cr_assert_eq(log_close(lg), 0);
	lg = open_log(keep);
	cr_assert_eq(log_end(lg), end, "stale bytes of recycled segments do not extend or cut the log");
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.cut_bytes, 0);
	scan_all(lg, keep, w, m);
	log_close(lg);
}

/* ---- group commit ---- */

#define GC_THREADS 8
#define GC_COMMITS 200

typedef struct gc_arg {
	log_mgr *lg;
	uint64_t id;
	int commit; /* log_commit_flush, as an open transaction (log_active) */
	uint64_t lsns[GC_COMMITS];
	int bad;
} gc_arg;

static void *gc_thread(void *p)
{
	gc_arg *a = p;
	unsigned char data[40];
	uint64_t prev = 0;
	for (int i = 0; i < GC_COMMITS; i++) {
		memset(data, (int)a->id, sizeof data);
		log_rec r = {.prev_lsn = prev, .txid = a->id, .pgno = LOG_NOPAGE, .type = 1, .len = sizeof data,
			     .data = data};
		if (a->commit)
			log_active(a->lg, 1);
		int rc = log_put(a->lg, &r);
		if (!rc)
			rc = a->commit ? log_commit_flush(a->lg, r.lsn) : log_flush(a->lg, r.lsn);
		if (a->commit)
			log_active(a->lg, -1);
		if (rc != 0 || log_durable(a->lg) <= r.lsn) {
			a->bad = 1;
			return NULL;
		}
		a->lsns[i] = prev = r.lsn;
	}
	return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static void group_commit(int commit)
{
	static gc_arg a[GC_THREADS];
	pthread_t th[GC_THREADS];
	log_mgr *lg = create_open();
	memset(a, 0, sizeof a);
	for (int i = 0; i < GC_THREADS; i++) {
		a[i].lg = lg;
		a[i].id = 1 + (uint64_t)i;
		a[i].commit = commit;
		cr_assert_eq(pthread_create(&th[i], NULL, gc_thread, &a[i]), 0);
	}
	for (int i = 0; i < GC_THREADS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_not(a[i].bad, "thread %d: a commit was not durable when its flush returned", i);
	}
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.records, GC_THREADS * GC_COMMITS);
	cr_assert_lt(st.syncs, GC_THREADS * GC_COMMITS, "group commit: %" PRIu64 " syncs for %d commits", st.syncs,
		     GC_THREADS * GC_COMMITS);
	cr_assert_gt(st.syncs, 0);
	cr_assert_eq(log_close(lg), 0);

	static uint64_t all[GC_THREADS * GC_COMMITS];
	size_t n = 0;
	for (int i = 0; i < GC_THREADS; i++)
		for (int j = 0; j < GC_COMMITS; j++)
			all[n++] = a[i].lsns[j];
	qsort(all, n, sizeof *all, cmp_u64);
	lg = open_log(LOG_SEG_HDR);
	log_scan *s;
	log_rec r;
	size_t k = 0;
	uint64_t last[GC_THREADS + 1] = {0};
	cr_assert_eq(log_scan_open(lg, LOG_SEG_HDR, &s), 0);
	while (log_scan_next(s, &r) == 0) {
		cr_assert_lt(k, n);
		cr_assert_eq(r.lsn, all[k], "record %zu", k);
		cr_assert_eq(r.prev_lsn, last[r.txid], "per-thread back-chain");
		last[r.txid] = r.lsn;
		k++;
	}
	log_scan_close(s);
	cr_assert_eq(k, n, "every commit is in the log after reopen");
	log_close(lg);
}

Test(log, group_commit_shares_syncs, .timeout = 120) { group_commit(0); }

Test(log, group_commit_of_transactions_shares_syncs, .timeout = 120) { group_commit(1); }

Test(log, lone_committer_does_not_wait)
{
	log_mgr *lg = create_open();
	log_active(lg, 1);
	uint64_t t0 = util_now_ns();
	for (int i = 0; i < 50; i++) {
		log_rec r = {.txid = 1, .pgno = LOG_NOPAGE, .type = 1};
		cr_assert_eq(log_put(lg, &r), 0);
		cr_assert_eq(log_commit_flush(lg, r.lsn), 0);
		cr_assert_gt(log_durable(lg), r.lsn);
	}
	uint64_t took = util_now_ns() - t0;
	log_active(lg, -1);
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.gathers, 0, "alone, a commit does not wait for a group");
	cr_assert_eq(st.syncs, 50);
	cr_assert_lt(took, 5000000000ull);
	log_close(lg);
}

/* ---- panic (L7) ---- */

Test(log, failed_sync_panics)
{
	exp_rec v[3];
	iosim_install(1);
	log_mgr *lg = create_open();
	make_records(lg, v, 1, 100);
	cr_assert_eq(log_flush(lg, v[0].lsn), 0);
	uint64_t durable = log_durable(lg);
	make_records(lg, v + 1, 1, 100);
	/* the flush makes one pwrite and one sync: fail the sync */
	iosim_fault_at(iosim_calls() + 2, IOSIM_FAULT_EIO, 0);
	int rc = log_flush(lg, v[1].lsn);
	cr_assert_eq(rc, EIO, "the failed sync is reported (%d)", rc);
	cr_assert_eq(iosim_faults(), 1);
	cr_assert(log_panicked(lg));
	cr_assert_eq(log_durable(lg), durable, "nothing more counts as durable");
	log_rec r = {.txid = 1, .pgno = LOG_NOPAGE, .type = 1};
	cr_assert_eq(log_put(lg, &r), TP_EPANIC, "no append after a failed sync");
	cr_assert_eq(log_flush(lg, log_end(lg)), TP_EPANIC, "no flush either (never retry an fsync)");
	uint64_t syncs = iosim_syncs();
	log_close(lg);
	cr_assert_eq(iosim_syncs(), syncs, "close after a panic does not sync");
	iosim_uninstall();
	lg = open_log(LOG_SEG_HDR); /* reopening recovers */
	read_check(lg, &v[0]);
	log_close(lg);
}

/* L8 on a full disk: once no segment can be made, a reserve record (a
 * rollback's) may still enter the spare segment; after that, ordinary
 * records are refused with ENOSPC until a new spare exists, so the spare
 * stays for rollbacks (ordinary records once filled it, and the next
 * rollback found no room: a panicked log). */
Test(log, ordinary_records_leave_the_spare_segment_to_rollbacks)
{
	static unsigned char big[3000];
	iosim_install(3);
	log_mgr *lg = create_open();
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_ENOSPC, 1); /* no segment can be made */
	log_rec r = {.txid = 1, .pgno = LOG_NOPAGE, .type = 6, .len = sizeof big, .data = big};
	int rc = 0;
	while (log_end(lg) < 2 * SEG && (rc = log_put(lg, &r)) == 0)
		;
	cr_assert_eq(rc, ENOSPC, "entering segment 1 needs the spare 2: rc %d", rc);
	cr_assert_lt(log_end(lg), SEG);
	r.flags = LOG_RESERVE | LOG_CLR;
	cr_assert_eq(log_put(lg, &r), 0, "a rollback's record enters the spare: %s", tp_errmsg());
	cr_assert_geq(r.lsn, SEG);
	r.flags = 0;
	cr_assert_eq(log_put(lg, &r), ENOSPC, "an ordinary record took the room left for rollbacks");
	r.flags = LOG_RESERVE | LOG_CLR;
	for (int i = 0; i < 10; i++)
		cr_assert_eq(log_put(lg, &r), 0, "rollback record %d: %s", i, tp_errmsg());
	cr_assert_not(log_panicked(lg));
	log_close(lg);
	iosim_uninstall();
}

Test(log, failed_write_panics)
{
	exp_rec v[2];
	iosim_install(2);
	log_mgr *lg = create_open();
	make_records(lg, v, 2, 100);
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_ENOSPC, 1);
	cr_assert_eq(log_flush(lg, v[1].lsn), ENOSPC);
	cr_assert(log_panicked(lg));
	log_rec r = {.txid = 1, .pgno = LOG_NOPAGE, .type = 1};
	cr_assert_eq(log_put(lg, &r), TP_EPANIC);
	log_close(lg);
	iosim_uninstall();
}

/* ---- full-page images ---- */

Test(log, put_page_logs_an_image_below_the_horizon)
{
	log_mgr *lg = create_open();
	static unsigned char page[4096];
	payload(page, sizeof page, 77);
	unsigned char arg[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	log_rec r = {.txid = 3, .pgno = 9, .type = 6, .len = 8, .data = arg};
	uint64_t fpi;
	cr_assert_eq(log_put(lg, &r), 0);
	uint64_t h = log_set_horizon(lg);
	cr_assert_eq(h, log_end(lg), "the horizon is the current end");

	r.prev_lsn = r.lsn;
	cr_assert_eq(log_put_page(lg, &r, page, sizeof page, h - 8, 4, &fpi), 0);
	cr_assert_neq(fpi, 0, "a page older than the horizon gets an image");
	cr_assert_eq(fpi, h);
	cr_assert_eq(r.lsn, fpi + rsize(sizeof page), "the change follows its image directly");
	log_rec x;
	void *b;
	cr_assert_eq(log_read(lg, fpi, &x, &b), 0);
	cr_assert_eq(x.type, 4);
	cr_assert_eq(x.pgno, 9);
	cr_assert_eq(x.len, sizeof page);
	cr_assert_arr_eq(x.data, page, sizeof page);
	free(b);

	r.prev_lsn = r.lsn;
	cr_assert_eq(log_put_page(lg, &r, page, sizeof page, r.lsn, 4, &fpi), 0);
	cr_assert_eq(fpi, 0, "a page changed after the horizon needs no image");
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.fpis, 1);
	log_close(lg);
}

/* ---- L3: durable bytes are never written again with other values ---- */

static const io_backend *posix_be;
static io_backend spy_be;
static uint64_t spy_durable; /* set by the test after each flush */
static int spy_bad;
static char spy_msg[256];

typedef struct spy_h {
	void *h;
	uint64_t seg; /* UINT64_MAX: not a segment file */
} spy_h;

static int spy_open(const char *path, int flags, void **h)
{
	spy_h *s = malloc(sizeof *s);
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	s->seg = UINT64_MAX;
	if (strncmp(base, "log.", 4) == 0 && strlen(base) == 20)
		s->seg = strtoull(base + 4, NULL, 16);
	int rc = posix_be->open(path, flags, &s->h);
	if (rc) {
		free(s);
		return rc;
	}
	*h = s;
	return 0;
}

static int spy_close(void *h)
{
	spy_h *s = h;
	int rc = posix_be->close(s->h);
	free(s);
	return rc;
}

static int spy_pread(void *h, void *buf, size_t len, uint64_t off, size_t *done)
{
	return posix_be->pread(((spy_h *)h)->h, buf, len, off, done);
}

static int spy_pwrite(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	spy_h *s = h;
	if (s->seg != UINT64_MAX && off >= LOG_SEG_HDR && s->seg * SEG + off < spy_durable && !spy_bad) {
		spy_bad = 1;
		snprintf(spy_msg, sizeof spy_msg, "write of %zu bytes at LSN %" PRIu64 " below durable %" PRIu64, len,
			 s->seg * SEG + off, spy_durable);
	}
	return posix_be->pwrite(s->h, buf, len, off, done);
}

/* L11: a durable write may cover the durable bytes of its first sector,
 * but only with the values they have. */
static int spy_durables;
static int spy_pwrite_durable(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	spy_h *s = h;
	if (s->seg != UINT64_MAX && s->seg * SEG + off < spy_durable && !spy_bad) {
		size_t below = (size_t)(spy_durable - s->seg * SEG - off), got = 0;
		if (below > len)
			below = len;
		unsigned char *now = malloc(below);
		if (!now || posix_be->pread(s->h, now, below, off, &got) != 0 || got != below ||
		    memcmp(now, buf, below) != 0) {
			spy_bad = 1;
			snprintf(spy_msg, sizeof spy_msg,
				 "durable write of %zu bytes at LSN %" PRIu64 " changes bytes below durable %" PRIu64, len,
				 s->seg * SEG + off, spy_durable);
		}
		free(now);
	}
	int rc = posix_be->pwrite_durable(s->h, buf, len, off, done);
	spy_durables += rc == 0;
	return rc;
}

/* Does the test directory take O_DIRECT (tmpfs may not)? */
static int dir_takes_direct(void)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/direct-probe", tdir);
	int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0;
}

static int spy_sync(void *h) { return posix_be->sync(((spy_h *)h)->h); }
static int spy_size(void *h, uint64_t *out) { return posix_be->size(((spy_h *)h)->h, out); }
static int spy_truncate(void *h, uint64_t size) { return posix_be->truncate(((spy_h *)h)->h, size); }

/* Installs the spy backend over POSIX with these writes. */
static void spy_install(int (*pwrite)(void *, const void *, size_t, uint64_t, size_t *),
			int (*pwrite_durable)(void *, const void *, size_t, uint64_t, size_t *))
{
	posix_be = io_posix_backend();
	spy_be = *posix_be;
	spy_be.open = spy_open;
	spy_be.close = spy_close;
	spy_be.pread = spy_pread;
	spy_be.pwrite = pwrite;
	spy_be.pwrite_durable = pwrite_durable;
	spy_be.sync = spy_sync;
	spy_be.size = spy_size;
	spy_be.truncate = spy_truncate;
	io_set_backend(&spy_be);
}

Test(log, durable_bytes_are_never_rewritten)
{
	spy_install(spy_pwrite, spy_pwrite_durable);
	spy_durables = 0;
	log_mgr *lg = create_open();
	static exp_rec v[151];
	for (int round = 0; round < 150; round++) {
		v[round] = (exp_rec){.txid = 1, .pgno = LOG_NOPAGE, .type = 6, .len = (uint32_t)(round * 53 % 1500), .seed = 3};
		put_exp(lg, &v[round]);
		if (round % 3 == 0) {
			cr_assert_eq(log_flush(lg, v[round].lsn), 0);
			spy_durable = log_durable(lg);
		}
	}
	cr_assert_eq(log_close(lg), 0);
	int durables = spy_durables;
	spy_durable = 0;
	/* reopened: the first durable write reads its first sector back (L11) */
	lg = open_log(LOG_SEG_HDR);
	spy_durable = log_durable(lg);
	v[150] = (exp_rec){.txid = 1, .pgno = LOG_NOPAGE, .type = 6, .len = 10, .seed = 3};
	put_exp(lg, &v[150]);
	cr_assert_eq(log_flush(lg, v[150].lsn), 0);
	log_close(lg);
	io_set_backend(NULL);
	cr_assert_not(spy_bad, "L3: %s", spy_msg);
	if (dir_takes_direct()) { /* the flushes went the direct way, the last one after a read-back */
		cr_assert_geq(durables, 40, "%d of 50 flushes were direct durable writes", durables);
		cr_assert_eq(spy_durables, durables + 1);
	} else {
		cr_log_warn("%s refuses O_DIRECT: every flush was a write and a sync", tdir);
	}
	lg = open_log(LOG_SEG_HDR);
	scan_all(lg, LOG_SEG_HDR, v, 151);
	log_close(lg);
}

/* ---- written, not synced (L14) ---- */

typedef struct wr_arg {
	log_mgr *lg;
	uint64_t id;
	exp_rec v[GC_COMMITS];
	int bad;
} wr_arg;

/* Appends GC_COMMITS records, each followed by log_write; checks each is
 * in its segment file (read around the log) once log_write returns. */
static void *wr_thread(void *p)
{
	wr_arg *a = p;
	unsigned char data[160];
	uint64_t prev = 0;
	for (int i = 0; i < GC_COMMITS; i++) {
		exp_rec *e = &a->v[i];
		*e = (exp_rec){.prev = prev, .txid = a->id, .pgno = LOG_NOPAGE, .type = 1,
			       .len = (uint32_t)(8 + (a->id * 31 + (uint64_t)i * 17) % 150), .seed = (uint32_t)(a->id * 1000 + i)};
		payload(data, e->len, e->seed);
		log_rec r = {.prev_lsn = prev, .txid = a->id, .pgno = LOG_NOPAGE, .type = 1, .len = e->len, .data = data};
		int rc = log_put(a->lg, &r);
		if (!rc)
			rc = log_write(a->lg, r.lsn);
		unsigned char hdr[16];
		char path[SEGP];
		size_t got = 0;
		if (rc || su_raw_read(segpath(path, r.lsn / SEG), r.lsn % SEG, hdr, sizeof hdr, &got) != 0 ||
		    got != sizeof hdr || util_get64(hdr + 8) != r.lsn) {
			a->bad = i + 1;
			return NULL;
		}
		e->lsn = prev = r.lsn;
	}
	return NULL;
}

static int cmp_lsn(const void *x, const void *y)
{
	const exp_rec *a = x, *b = y;
	return a->lsn < b->lsn ? -1 : a->lsn > b->lsn;
}

/* Writes of record bytes take a while, so that appenders pile up behind
 * a write under way and share the next one. */
static int slow_pwrite(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	spy_h *s = h;
	if (s->seg != UINT64_MAX && off >= LOG_SEG_HDR)
		usleep(300);
	return posix_be->pwrite(s->h, buf, len, off, done);
}

/* Concurrent appenders each log_write their record: it is in the files
 * when the call returns, nothing is synced for it, the writes are shared,
 * and a process crash (panic: nothing more is written; close) keeps every
 * record -- where records only appended are lost (close_after_panic_writes_nothing). */
static void written_not_synced(int writer)
{
	static wr_arg a[GC_THREADS];
	pthread_t th[GC_THREADS];
	log_config c = cfg_of(SEG, 0);
	c.writer = writer;
	spy_install(slow_pwrite, NULL);
	cr_assert_eq(log_create(&c), 0, "log_create: %s", tp_errmsg());
	log_mgr *lg;
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "log_open: %s", tp_errmsg());
	uint64_t durable0 = log_durable(lg);
	memset(a, 0, sizeof a);
	for (int i = 0; i < GC_THREADS; i++) {
		a[i].lg = lg;
		a[i].id = 1 + (uint64_t)i;
		cr_assert_eq(pthread_create(&th[i], NULL, wr_thread, &a[i]), 0);
	}
	for (int i = 0; i < GC_THREADS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_not(a[i].bad, "L14: thread %d, record %d: not in its segment file when log_write returned", i,
			      a[i].bad - 1);
	}
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_eq(st.records, GC_THREADS * GC_COMMITS);
	cr_assert_eq(st.syncs, 0, "log_write synced (%" PRIu64 " syncs)", st.syncs);
	cr_assert_eq(log_durable(lg), durable0, "log_write moved the durable point");
	cr_assert_lt(st.flushes, GC_THREADS * GC_COMMITS / 2, "concurrent log_writes share writes: %" PRIu64
		     " writes for %d records", st.flushes, GC_THREADS * GC_COMMITS);
	cr_log_info("L14: %d records, %" PRIu64 " writes, 0 syncs", GC_THREADS * GC_COMMITS, st.flushes);
	/* the process dies: nothing more is written */
	log_panic(lg, TP_EPANIC, NULL);
	log_close(lg);

	static exp_rec all[GC_THREADS * GC_COMMITS];
	size_t n = 0;
	for (int i = 0; i < GC_THREADS; i++)
		for (int j = 0; j < GC_COMMITS; j++)
			all[n++] = a[i].v[j];
	qsort(all, n, sizeof *all, cmp_lsn);
	lg = open_log(LOG_SEG_HDR);
	scan_all(lg, LOG_SEG_HDR, all, n);
	/* a sync flush afterwards syncs them (and writes nothing below written) */
	exp_rec more = {.txid = 99, .pgno = LOG_NOPAGE, .type = 2, .len = 30, .seed = 7};
	put_exp(lg, &more);
	cr_assert_eq(log_write(lg, more.lsn), 0);
	cr_assert_eq(log_flush(lg, more.lsn), 0);
	cr_assert_gt(log_durable(lg), more.lsn);
	log_close(lg);
	io_set_backend(NULL);
}

Test(log, log_write_reaches_the_files_without_a_sync, .timeout = 120) { written_not_synced(0); }

Test(log, log_write_with_the_writer_thread, .timeout = 120) { written_not_synced(1); }

/* ---- the writer thread (L12) ---- */

static pthread_t who_appender;
static int who_mine, who_other; /* writes of record bytes, by thread */

/* Counts writes of record bytes (past a segment's header, not the zeros
 * a new segment is made of) by the thread that makes them. */
static int who_pwrite(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	spy_h *s = h;
	const unsigned char *p = buf;
	size_t nz = 0;
	while (nz < len && !p[nz])
		nz++;
	if (s->seg != UINT64_MAX && off >= LOG_SEG_HDR && nz < len)
		__atomic_add_fetch(pthread_equal(pthread_self(), who_appender) ? &who_mine : &who_other, 1,
				   __ATOMIC_RELAXED);
	return posix_be->pwrite(s->h, buf, len, off, done);
}

/* Appends ~1.2 MiB of records (several buffers of 256 KiB) with no
 * flush asked for, reads some back from memory, closes, and scans them
 * all from the files. */
static void append_alone(int writer)
{
	spy_install(who_pwrite, NULL);
	who_appender = pthread_self();
	who_mine = who_other = 0;
	log_config c = cfg_of(SEG, 0);
	c.writer = writer;
	log_mgr *lg;
	cr_assert_eq(log_create(&c), 0, "log_create: %s", tp_errmsg());
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "log_open: %s", tp_errmsg());
	static exp_rec v[1200];
	make_records(lg, v, 1200, 2000);
	for (size_t i = 0; i < 1200; i += 97)
		read_check(lg, &v[i]);
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_gt(st.flushes, 2, "%" PRIu64 " flushes for 1.2 MiB of records", st.flushes);
	int mine = __atomic_load_n(&who_mine, __ATOMIC_RELAXED);
	cr_assert_eq(log_close(lg), 0);
	io_set_backend(NULL);
	if (writer) {
		cr_assert_eq(mine, 0, "the appending thread wrote %d buffers itself", mine);
		cr_assert_gt(who_other, 2, "the writer thread wrote %d buffers", who_other);
	} else {
		cr_assert_eq(who_other, 0, "without a writer, another thread wrote %d buffers", who_other);
		cr_assert_gt(mine, 2, "the appending thread wrote %d buffers", mine);
	}
	lg = open_log(LOG_SEG_HDR);
	scan_all(lg, LOG_SEG_HDR, v, 1200);
	log_close(lg);
}

/* L12: appends alone (no flush asked for) hand full buffers to the
 * writer thread: the appending thread writes none of its records, and
 * every record reads back, from memory while appended and from the files
 * after a reopen. */
Test(log, appends_leave_writing_to_the_writer_thread) { append_alone(1); }

/* L12: without cfg.writer no other thread writes (the crash simulator's
 * runs repeat exactly). */
Test(log, without_a_writer_the_appender_writes) { append_alone(0); }

/* ---- recycling while appending ---- */

static exp_rec rw_v[6000];
static size_t rw_n;      /* records of rw_v appended (atomic) */
static int rw_done;      /* the appender finished (atomic) */
static uint64_t rw_keep; /* the last start the truncator set */
static int rw_truncs, rw_rc;
static char rw_msg[512]; /* the truncator's tp_errmsg (per thread) */
static pthread_t rw_thread;

/* The truncator's header writes (a recycled segment's new header) take
 * 20 ms, as when a checkpoint thread is descheduled on a busy machine:
 * the appender meanwhile enters the segments it needs. */
static int rw_pwrite(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	spy_h *s = h;
	if (s->seg != UINT64_MAX && off == 0 && len == LOG_SEG_HDR && pthread_equal(pthread_self(), rw_thread))
		usleep(20000);
	return posix_be->pwrite(s->h, buf, len, off, done);
}

/* Moves the start up behind the appender as a checkpoint would: to a
 * record about two segments back, over and over. */
static void *rw_truncator(void *arg)
{
	log_mgr *lg = arg;
	rw_thread = pthread_self();
	while (!__atomic_load_n(&rw_done, __ATOMIC_ACQUIRE)) {
		size_t n = __atomic_load_n(&rw_n, __ATOMIC_ACQUIRE);
		if (n > 150 && rw_v[n - 150].lsn > rw_keep) {
			uint64_t keep = rw_v[n - 150].lsn;
			if ((rw_rc = log_truncate(lg, keep)) != 0) {
				snprintf(rw_msg, sizeof rw_msg, "%s", tp_errmsg());
				break;
			}
			rw_keep = keep;
			rw_truncs++;
		}
		usleep(100 + (unsigned)(rw_truncs * 7919 % 3000)); /* lag at times: appenders then make segments */
	}
	return NULL;
}

/* A segment recycled to a future index while appenders need new ones
 * must not replace the segment an appender just made and writes in: both
 * take the index past the highest present.  Appends of ~1 KiB records,
 * flushed every fourth, race a thread that truncates behind them; every
 * record from the last start on must read back after a reopen. */
Test(log, recycling_never_replaces_a_segment_in_use, .timeout = 120)
{
	spy_install(rw_pwrite, NULL);
	log_config c = cfg_of(SEG, 0);
	c.spares = 2;
	log_mgr *lg;
	cr_assert_eq(log_create(&c), 0, "log_create: %s", tp_errmsg());
	cr_assert_eq(log_open(&c, LOG_SEG_HDR, &lg), 0, "log_open: %s", tp_errmsg());
	rw_n = 0;
	rw_done = rw_truncs = rw_rc = 0;
	rw_keep = 0;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, rw_truncator, lg), 0);
	size_t n = sizeof rw_v / sizeof rw_v[0];
	for (size_t i = 0; i < n; i++) {
		rw_v[i] = (exp_rec){.txid = 1, .pgno = LOG_NOPAGE, .type = 6, .len = 900 + (uint32_t)(i * 37 % 300),
				    .seed = (uint32_t)i};
		put_exp(lg, &rw_v[i]);
		__atomic_store_n(&rw_n, i + 1, __ATOMIC_RELEASE);
		if (i % 4 == 3)
			cr_assert_eq(log_flush(lg, rw_v[i].lsn), 0, "log_flush: %s", tp_errmsg());
	}
	__atomic_store_n(&rw_done, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	cr_assert_eq(rw_rc, 0, "log_truncate: %s", rw_msg);
	cr_assert_gt(rw_truncs, 3, "the truncator ran %d times", rw_truncs);
	log_stats st;
	log_stats_get(lg, &st);
	cr_assert_gt(st.segs_recycled, 3, "%" PRIu64 " segments recycled", st.segs_recycled);
	cr_assert_gt(st.segs_made, 3, "%" PRIu64 " segments made while recycling", st.segs_made);
	cr_assert_eq(log_close(lg), 0);
	io_set_backend(NULL);
	size_t k = 0;
	while (rw_v[k].lsn < rw_keep)
		k++;
	lg = open_log(rw_keep);
	scan_all(lg, rw_keep, rw_v + k, n - k);
	log_close(lg);
}

/* L13 whatever the log believes: a file already at the index a recycled
 * segment would take is never replaced; the truncation fails, naming it,
 * and the log is unharmed. */
Test(log, recycling_refuses_to_replace_a_file)
{
	enum { N = 200 };
	static exp_rec v[N];
	char p[SEGP];
	many_segments(v, N);
	log_mgr *lg = open_log(LOG_SEG_HDR);
	uint64_t top = 0;
	for (uint64_t i = 0; i < 64; i++)
		if (su_raw_size(segpath(p, i)) >= 0)
			top = i;
	FILE *f = fopen(segpath(p, top + 1), "w"); /* appeared after the open */
	cr_assert_not_null(f);
	fputs("not a segment", f);
	fclose(f);
	size_t k = first_in_seg(v, N, 5);
	int rc = log_truncate(lg, v[k].lsn);
	cr_assert_eq(rc, EEXIST, "log_truncate: %d %s", rc, tp_errmsg());
	cr_assert(strstr(tp_errmsg(), p) != NULL, "the message names %s: %s", p, tp_errmsg());
	cr_assert_eq(su_raw_size(p), 13, "the file is as it was");
	cr_assert_eq(su_raw_size(segpath(p, top + 2)), -1, "nothing renamed past it");
	read_check(lg, &v[k]);
	read_check(lg, &v[N - 1]);
	cr_assert_eq(log_close(lg), 0);
}
