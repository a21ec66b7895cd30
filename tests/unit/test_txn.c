/*
 * test_txn -- transactions: Tupdate (the page LSN is the record's LSN, a
 * full-page image first after a checkpoint), commit (T1: durable when it
 * returns), abort with CLRs (T2, T4: the undo_next chain, the ABORT
 * record, before-images restored), nested top actions (kept by an abort),
 * the transaction table, panics, the lock counts in tp_stats, and T13
 * (commits written, not synced, survive a crash of the process).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "lock.h"
#include "log.h"
#include "op.h"
#include "store_util.h"
#include "tp.h"
#include "txn.h"
#include "util.h"

#define PS 4096u
#define BODY (PS - BUF_HDR)

static char tdir[64], sdir[128];
static su_engine E;

static void setup(void)
{
	tp_options o;
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "txn"), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
	su_options(&o, PS, 1u << 20, 0);
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(su_engine_open(sdir, 64, &E), 0, "%s", tp_errmsg());
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

static void body_of(uint64_t pgno, unsigned char *out)
{
	buf_page *pg;
	cr_assert_eq(buf_get(E.bp, pgno, BUF_S, &pg), 0);
	memcpy(out, buf_data(pg) + BUF_HDR, BODY);
	buf_put(E.bp, pg);
}

static uint64_t page_lsn(uint64_t pgno)
{
	buf_page *pg;
	cr_assert_eq(buf_get(E.bp, pgno, BUF_S, &pg), 0);
	uint64_t l = buf_page_lsn(pg);
	buf_put(E.bp, pg);
	return l;
}

/* Allocates n pages filled with a pattern, committed. */
static void make_pages(uint64_t *p, int n)
{
	unsigned char fill[BODY];
	txn *t = begin();
	for (int i = 0; i < n; i++) {
		cr_assert_eq(op_page_alloc(t, 1, &p[i]), 0);
		for (uint32_t k = 0; k < BODY; k++)
			fill[k] = (unsigned char)(k + (uint32_t)i * 11);
		cr_assert_eq(op_page_set(t, p[i], BUF_HDR, fill, BODY), 0);
	}
	cr_assert_eq(txn_commit(t, 0), 0);
}

/* The records of transaction txid from LSN from on, in log order. */
typedef struct trec {
	log_rec r;
	unsigned char data[2 * PS + 8];
} trec;

static size_t records_of(uint64_t txid, uint64_t from, trec *out, size_t max)
{
	log_scan *s;
	log_rec r;
	size_t n = 0;
	int rc;
	cr_assert_eq(log_scan_open(E.lg, from, &s), 0);
	while ((rc = log_scan_next(s, &r)) == 0) {
		if (r.txid != txid)
			continue;
		cr_assert_lt(n, max);
		out[n].r = r;
		cr_assert_leq(r.len, sizeof out[n].data);
		memcpy(out[n].data, r.data, r.len);
		out[n].r.data = out[n].data;
		n++;
	}
	cr_assert_eq(rc, TP_ENOTFOUND, "%s", tp_errmsg());
	log_scan_close(s);
	return n;
}

/* ================================================================== */

TestSuite(txn, .init = setup, .fini = teardown, .timeout = 60);

Test(txn, update_sets_the_page_lsn_to_its_record)
{
	uint64_t p;
	make_pages(&p, 1);
	txn *t = begin();
	uint64_t start = log_end(E.lg);
	unsigned char a[4 + 2 * 3];
	buf_page *pg;
	cr_assert_eq(buf_get(E.bp, p, BUF_X, &pg), 0);
	util_put16(a, BUF_HDR + 5);
	util_put16(a + 2, 3);
	memcpy(a + 4, buf_data(pg) + BUF_HDR + 5, 3);
	memcpy(a + 7, "xyz", 3);
	cr_assert_eq(txn_update(t, pg, OP_PAGE_SET, a, sizeof a), 0);
	uint64_t lsn = buf_page_lsn(pg);
	cr_assert_arr_eq(buf_data(pg) + BUF_HDR + 5, "xyz", 3, "applied through redo");
	buf_put(E.bp, pg);
	cr_assert_geq(lsn, start);
	log_rec r;
	void *b;
	cr_assert_eq(log_read(E.lg, lsn, &r, &b), 0, "the page LSN is a record's LSN");
	cr_assert_eq(r.type, OP_PAGE_SET);
	cr_assert_eq(r.txid, txn_id(t));
	cr_assert_eq(r.pgno, p);
	cr_assert_eq(r.prev_lsn, 0, "the first record of the transaction");
	cr_assert_eq(r.flags, 0);
	cr_assert_eq(r.len, sizeof a);
	cr_assert_arr_eq(r.data, a, sizeof a);
	free(b);
	uint64_t first, last, un;
	cr_assert_eq(txn_lsns(t, &first, &last, &un), 0);
	cr_assert_eq(first, lsn);
	cr_assert_eq(last, lsn);
	cr_assert_eq(un, lsn, "T4: undo_next is the last update");

	cr_assert_eq(op_page_set(t, p, BUF_HDR + 100, "second", 6), 0);
	uint64_t lsn2 = page_lsn(p);
	cr_assert_gt(lsn2, lsn);
	cr_assert_eq(log_read(E.lg, lsn2, &r, &b), 0);
	cr_assert_eq(r.prev_lsn, lsn, "the back-chain");
	free(b);
	cr_assert_eq(txn_commit(t, 0), 0);
}

Test(txn, first_change_after_a_checkpoint_logs_an_image)
{
	uint64_t p;
	unsigned char before[BODY];
	make_pages(&p, 1);
	cr_assert_eq(su_engine_checkpoint(&E), 0);
	body_of(p, before);
	uint64_t old = page_lsn(p);
	txn *t = begin();
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "AB", 2), 0);
	uint64_t lsn = page_lsn(p);
	trec *v = malloc(8 * sizeof *v);
	/* the image has no transaction: find it by page */
	log_scan *s;
	log_rec r;
	int fpis = 0;
	cr_assert_eq(log_scan_open(E.lg, old, &s), 0);
	while (log_scan_next(s, &r) == 0) {
		if (r.type != OP_FPI || r.pgno != p)
			continue;
		fpis++;
		cr_assert_lt(r.lsn, lsn, "the image comes before the change");
		cr_assert_eq(r.len, PS);
		cr_assert_arr_eq((const unsigned char *)r.data + BUF_HDR, before, BODY, "the image is the page before");
		cr_assert_eq(util_get64((const unsigned char *)r.data + 8), old);
	}
	log_scan_close(s);
	cr_assert_eq(fpis, 1);
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "CD", 2), 0);
	cr_assert_eq(records_of(0, lsn, v, 8), 0, "a second change needs no image");
	free(v);
	cr_assert_eq(txn_commit(t, 0), 0);
}

Test(txn, commit_is_durable_on_return)
{
	uint64_t p, c0, a0, e0;
	make_pages(&p, 1);
	txn_counts(E.tm, &c0, &a0, &e0);
	txn *t = begin();
	uint64_t id = txn_id(t);
	cr_assert_eq(txn_active(E.tm), 1);
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "c", 1), 0);
	uint64_t end = log_end(E.lg);
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(txn_active(E.tm), 0);
	trec *v = malloc(4 * sizeof *v);
	size_t n = records_of(id, end, v, 4);
	cr_assert_eq(n, 1);
	cr_assert_eq(v[0].r.type, OP_COMMIT);
	cr_assert_eq(v[0].r.pgno, LOG_NOPAGE);
	cr_assert_gt(log_durable(E.lg), v[0].r.lsn, "T1: the commit record is durable");
	free(v);
	uint64_t c1, a1, e1;
	txn_counts(E.tm, &c1, &a1, &e1);
	cr_assert_eq(c1, c0 + 1);
	cr_assert_eq(a1, a0);

	/* lazy commit: logged, not forced */
	t = begin();
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "d", 1), 0);
	cr_assert_eq(txn_commit(t, 1), 0);
	cr_assert_leq(log_durable(E.lg), log_end(E.lg));

	/* a transaction that changed nothing logs nothing */
	end = log_end(E.lg);
	t = begin();
	cr_assert_eq(txn_commit(t, 0), 0);
	t = begin();
	cr_assert_eq(txn_abort(t), 0);
	cr_assert_eq(log_end(E.lg), end);
}

/* txn_commit_held's callback: what it sees while the commit holds its locks. */
struct held_seen {
	uint64_t end;     /* the log's end before the commit */
	uint64_t durable; /* log_durable() in the callback */
	int lock_rc;      /* another transaction's S lock on "K" */
	int lock_j;       /* ...and on "J" */
	int calls;
};

static void held_probe(void *arg)
{
	struct held_seen *h = arg;
	h->calls++;
	h->durable = log_durable(E.lg);
	txn *b = begin();
	txn_lock_timeout(b, 30);
	h->lock_j = txn_lock(b, "J", 1, LOCK_S); /* first: a timeout dooms b */
	cr_assert_eq(txn_abort(b), 0);
	b = begin();
	txn_lock_timeout(b, 30);
	h->lock_rc = txn_lock(b, "K", 1, LOCK_S);
	cr_assert_eq(txn_abort(b), 0);
}

/* A held commit (no early release, T7, for the locks it keeps): its
 * callback runs once the commit record is durable and while the kept locks
 * still stand; they go after it.  The others went early. */
Test(txn, held_commit_keeps_its_locks_until_durable)
{
	uint64_t p;
	make_pages(&p, 1);
	txn *a = begin();
	cr_assert_eq(txn_lock(a, "K", 1, LOCK_X), 0);
	cr_assert_eq(txn_lock(a, "J", 1, LOCK_X), 0);
	cr_assert_eq(op_page_set(a, p, BUF_HDR, "h", 1), 0);
	struct held_seen h = {.end = log_end(E.lg)};
	cr_assert_eq(txn_commit_held(a, "K", 1, held_probe, &h), 0, "%s", tp_errmsg());
	cr_assert_eq(h.calls, 1, "the callback ran %d times", h.calls);
	cr_assert_gt(h.durable, h.end, "the callback ran before the commit record (after %" PRIu64 ") was durable (%" PRIu64 ")",
		     h.end, h.durable);
	cr_assert_eq(h.lock_rc, TP_ETIMEOUT, "another transaction got an S lock on what the committing one held X: %d",
		     h.lock_rc);
	cr_assert_eq(h.lock_j, 0, "a lock the held commit does not keep was not released early: %d", h.lock_j);
	txn *c = begin();
	txn_lock_timeout(c, 30);
	cr_assert_eq(txn_lock(c, "K", 1, LOCK_X), 0, "the held commit kept its lock after it returned");
	cr_assert_eq(txn_commit(c, 0), 0);

	/* read-only: the same order */
	a = begin();
	cr_assert_eq(txn_lock(a, "K", 1, LOCK_X), 0);
	cr_assert_eq(txn_lock(a, "J", 1, LOCK_X), 0);
	h = (struct held_seen){.end = log_end(E.lg)};
	cr_assert_eq(txn_commit_held(a, NULL, 0, held_probe, &h), 0);
	cr_assert_eq(h.calls, 1);
	cr_assert_eq(h.lock_rc, TP_ETIMEOUT, "a read-only held commit released its lock before its callback");
	cr_assert_eq(h.lock_j, TP_ETIMEOUT, "a held commit keeping every lock released one early");
}

static uint64_t lock_requests(void)
{
	lock_stats st;
	lock_stats_get(txn_mgr_locks(E.tm), &st);
	return st.requests;
}

/* T11: a mode a transaction already holds costs no request of the lock
 * manager; an upgrade does, and a name it unlocked is locked again for
 * real (another transaction may have taken it meanwhile). */
Test(txn, a_lock_held_is_not_asked_for_again)
{
	txn *a = begin(), *b = begin();
	cr_assert_eq(txn_lock(a, "K", 1, LOCK_IX), 0);
	cr_assert_eq(txn_lock(a, "K", 1, LOCK_S), 0);
	cr_assert_eq(lock_held_mode(txn_locker(a), "K", 1), LOCK_SIX);
	uint64_t r0 = lock_requests();
	for (int i = 0; i < 10; i++) {
		cr_assert_eq(txn_lock(a, "K", 1, LOCK_IS), 0);
		cr_assert_eq(txn_lock(a, "K", 1, LOCK_IX), 0);
		cr_assert_eq(txn_lock(a, "K", 1, LOCK_S), 0);
		cr_assert_eq(txn_lock(a, "K", 1, LOCK_SIX), 0);
	}
	cr_assert_eq(lock_requests(), r0, "%" PRIu64 " requests for modes SIX covers", lock_requests() - r0);
	cr_assert_eq(txn_lock(a, "K", 1, LOCK_X), 0);
	cr_assert_eq(lock_requests(), r0 + 1, "the upgrade to X did not reach the manager");
	cr_assert_eq(lock_held_mode(txn_locker(a), "K", 1), LOCK_X);
	/* a long name is not remembered: still correct */
	char lname[100];
	memset(lname, 'n', sizeof lname);
	cr_assert_eq(txn_lock(a, lname, sizeof lname, LOCK_S), 0);
	cr_assert_eq(txn_lock(a, lname, sizeof lname, LOCK_S), 0);
	cr_assert_eq(lock_held_mode(txn_locker(a), lname, sizeof lname), LOCK_S);

	/* unlocked, taken by b, asked for again by a: a waits for b */
	cr_assert_eq(txn_unlock(a, "K", 1), 0);
	txn_lock_timeout(b, 30);
	cr_assert_eq(txn_lock(b, "K", 1, LOCK_X), 0, "the unlock did not release K");
	txn_lock_timeout(a, 30);
	r0 = lock_requests();
	cr_assert_eq(txn_lock(a, "K", 1, LOCK_S), TP_ETIMEOUT, "a relocked K without asking, while b holds X");
	cr_assert_eq(lock_requests(), r0 + 1);
	cr_assert_eq(txn_abort(a), 0);
	cr_assert_eq(txn_commit(b, 0), 0);
}

static void *commit_later(void *arg)
{
	usleep(200000);
	cr_assert_eq(txn_commit(arg, 1), 0);
	return NULL;
}

/* T12: an ended transaction's object is reused, and comes back as new:
 * no locks held, none remembered (T11), no timeout, a new id. */
Test(txn, an_ended_transaction_is_reused_as_new)
{
	uint64_t p[1];
	make_pages(p, 1);
	txn *a = begin();
	txn_lock_timeout(a, 30);
	cr_assert_eq(txn_lock(a, "R", 1, LOCK_X), 0);
	cr_assert_eq(op_page_set(a, p[0], BUF_HDR, "a", 1), 0);
	uint64_t id = txn_id(a);
	cr_assert_eq(txn_commit(a, 1), 0);
	uint64_t n0 = txn_allocs(E.tm);
	for (int i = 0; i < 200; i++) {
		txn *t = begin();
		cr_assert_gt(txn_id(t), id, "ids still increase");
		id = txn_id(t);
		cr_assert_eq(lock_count(txn_locker(t)), 0, "a reused transaction holds %zu locks", lock_count(txn_locker(t)));
		uint64_t r0 = lock_requests();
		cr_assert_eq(txn_lock(t, "R", 1, LOCK_X), 0, "R is still held by an ended transaction");
		cr_assert_eq(lock_requests(), r0 + 1, "a reused transaction remembered a lock of the one before");
		cr_assert_eq(op_page_set(t, p[0], BUF_HDR, "t", 1), 0);
		cr_assert_eq(i % 2 ? txn_abort(t) : txn_commit(t, 1), 0, "%s", tp_errmsg());
	}
	cr_assert_eq(txn_allocs(E.tm), n0, "%" PRIu64 " transaction objects allocated in 200 rounds",
		     txn_allocs(E.tm) - n0);
	/* no timeout carried over: w, reusing the object of one that waited
	 * at most 30 ms, waits until h ends 200 ms later */
	txn *h = begin(), *t0 = begin();
	txn_lock_timeout(t0, 30);
	cr_assert_eq(txn_commit(t0, 1), 0);
	txn *w = begin();
	cr_assert_eq(w, t0, "the object just ended was not the one reused");
	cr_assert_eq(txn_lock(h, "Q", 1, LOCK_X), 0);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, commit_later, h), 0);
	cr_assert_eq(txn_lock(w, "Q", 1, LOCK_X), 0, "the reused transaction kept a 30 ms lock timeout");
	pthread_join(th, NULL);
	cr_assert_eq(txn_commit(w, 1), 0);
}

Test(txn, ids_increase_and_the_table_tracks_open_transactions)
{
	uint64_t p[3];
	make_pages(p, 3);
	txn *a = begin(), *b = begin(), *c = begin();
	cr_assert_lt(txn_id(a), txn_id(b));
	cr_assert_lt(txn_id(b), txn_id(c));
	cr_assert_gt(txn_next_id(E.tm), txn_id(c));
	cr_assert_eq(txn_active(E.tm), 3);
	cr_assert_eq(txn_oldest_lsn(E.tm), UINT64_MAX, "none has logged anything");
	cr_assert_eq(op_page_set(b, p[0], BUF_HDR, "b", 1), 0);
	uint64_t lb = page_lsn(p[0]);
	cr_assert_eq(op_page_set(a, p[1], BUF_HDR, "a", 1), 0);
	cr_assert_eq(txn_oldest_lsn(E.tm), lb, "the oldest first record");
	cr_assert_eq(txn_commit(b, 0), 0);
	cr_assert_eq(txn_oldest_lsn(E.tm), page_lsn(p[1]));
	cr_assert_eq(txn_active(E.tm), 2);
	cr_assert_eq(txn_abort(a), 0);
	cr_assert_eq(txn_abort(c), 0);
	cr_assert_eq(txn_active(E.tm), 0);
	cr_assert_eq(txn_oldest_lsn(E.tm), UINT64_MAX);
}

Test(txn, abort_writes_clrs_and_restores_before_images)
{
	uint64_t p[2];
	static unsigned char b0[BODY], b1[BODY], x[BODY];
	make_pages(p, 2);
	body_of(p[0], b0);
	body_of(p[1], b1);
	txn *t = begin();
	uint64_t id = txn_id(t), from = log_end(E.lg);
	unsigned char big[BODY];
	memset(big, 0xee, sizeof big);
	cr_assert_eq(op_page_set(t, p[0], BUF_HDR + 10, "first", 5), 0);
	cr_assert_eq(op_page_set(t, p[1], BUF_HDR, big, BODY), 0);
	cr_assert_eq(op_page_set(t, p[0], BUF_HDR + 12, "OVERLAP", 7), 0); /* over the first */
	cr_assert_eq(op_page_set(t, p[0], PS - 1, "z", 1), 0);
	cr_assert_eq(txn_abort(t), 0);
	body_of(p[0], x);
	cr_assert_arr_eq(x, b0, BODY, "page %" PRIu64 " restored", p[0]);
	body_of(p[1], x);
	cr_assert_arr_eq(x, b1, BODY, "page %" PRIu64 " restored", p[1]);

	trec *v = malloc(16 * sizeof *v);
	size_t n = records_of(id, from, v, 16);
	cr_assert_eq(n, 9, "4 updates, 4 CLRs, ABORT: %zu records", n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(v[i].r.prev_lsn, i ? v[i - 1].r.lsn : 0, "record %zu: the back-chain is unbroken", i);
	for (size_t i = 0; i < 4; i++) {
		const log_rec *u = &v[3 - i].r, *c = &v[4 + i].r;
		cr_assert_eq(u->flags, 0);
		cr_assert(c->flags & LOG_CLR, "record %zu is a CLR", 4 + i);
		cr_assert_eq(c->type, OP_PAGE_SET);
		cr_assert_eq(c->pgno, u->pgno, "the CLR changes the undone record's page");
		cr_assert_eq(c->undo_next, u->prev_lsn, "T4: undo continues before the undone record");
		/* the CLR sets the undone record's before-image */
		const unsigned char *ud = u->data, *cd = c->data;
		uint32_t len = util_get16(ud + 2);
		cr_assert_eq(util_get16(cd), util_get16(ud));
		cr_assert_eq(util_get16(cd + 2), len);
		cr_assert_arr_eq(cd + 4 + len, ud + 4, len, "CLR after-image = before-image");
	}
	cr_assert_eq(v[8].r.type, OP_ABORT);
	cr_assert_eq(v[8].r.flags, 0);
	free(v);
	uint64_t c, a, e;
	txn_counts(E.tm, &c, &a, &e);
	cr_assert_geq(a, 1);
	cr_assert_eq(buf_pinned(E.bp), 0);
}

/* An abort with nothing to roll back (a call refused by a check before
 * it changed anything: tpfs stat must not call it "rolled back") is
 * counted apart from one that undid changes. */
Test(txn, abort_counts_tell_empty_from_rolled_back)
{
	uint64_t p, c0, a0, e0, c1, a1, e1;
	make_pages(&p, 1);
	txn_counts(E.tm, &c0, &a0, &e0);
	txn *t = begin();
	cr_assert_eq(txn_abort(t), 0);
	txn_counts(E.tm, &c1, &a1, &e1);
	cr_assert_eq(a1, a0 + 1, "an abort is counted");
	cr_assert_eq(e1, e0 + 1, "an abort of a transaction that logged nothing is counted as empty");
	t = begin();
	cr_assert_eq(op_page_set(t, p, BUF_HDR, "x", 1), 0);
	cr_assert_eq(txn_abort(t), 0);
	txn_counts(E.tm, &c0, &a0, &e0);
	cr_assert_eq(a0, a1 + 1, "an abort is counted");
	cr_assert_eq(e0, e1, "an abort that rolled a change back is not counted as empty");
}

Test(txn, nested_top_action_survives_abort)
{
	uint64_t p[2], q;
	static unsigned char b0[BODY], b1[BODY], x[BODY];
	make_pages(p, 2);
	body_of(p[0], b0);
	body_of(p[1], b1);
	txn *t = begin();
	uint64_t id = txn_id(t), from = log_end(E.lg);
	cr_assert_eq(op_page_set(t, p[0], BUF_HDR, "before NTA", 10), 0);
	uint64_t u1 = page_lsn(p[0]);
	uint64_t saved = txn_nta_begin(t);
	cr_assert_eq(saved, u1);
	cr_assert_eq(op_page_alloc(t, 9, &q), 0);
	cr_assert_eq(op_page_set(t, q, BUF_HDR, "structure", 9), 0);
	cr_assert_eq(op_page_set(t, p[1], BUF_HDR + 50, "inside", 6), 0);
	cr_assert_eq(txn_nta_end(t, saved), 0);
	cr_assert_eq(op_page_set(t, p[0], BUF_HDR + 20, "after NTA", 9), 0);
	cr_assert_eq(txn_abort(t), 0);

	body_of(p[0], x);
	cr_assert_arr_eq(x, b0, BODY, "updates outside the NTA are undone");
	int a;
	cr_assert_eq(op_page_allocated(E.bp, q, &a), 0);
	cr_assert(a, "the page allocated inside the NTA stays allocated");
	body_of(q, x);
	cr_assert_arr_eq(x, "structure", 9, "and keeps its contents");
	body_of(p[1], x);
	cr_assert_arr_eq(x + 50, "inside", 6, "every change inside the NTA is kept");

	trec *v = malloc(16 * sizeof *v);
	size_t n = records_of(id, from, v, 16);
	size_t nta = 0, clrs = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].r.type == OP_NTA) {
			nta++;
			cr_assert(v[i].r.flags & LOG_CLR, "the NTA record is a dummy CLR");
			cr_assert_eq(v[i].r.undo_next, u1, "it skips back over the action");
			cr_assert_eq(v[i].r.pgno, LOG_NOPAGE);
		} else if (v[i].r.flags & LOG_CLR) {
			clrs++;
		}
	}
	cr_assert_eq(nta, 1);
	cr_assert_eq(clrs, 2, "only the two updates outside the NTA were compensated");
	cr_assert_eq(v[n - 1].r.type, OP_ABORT);
	free(v);
}

Test(txn, nta_first_then_abort)
{
	uint64_t q;
	txn *t = begin();
	uint64_t id = txn_id(t), from = log_end(E.lg);
	uint64_t saved = txn_nta_begin(t);
	cr_assert_eq(saved, 0);
	cr_assert_eq(op_page_alloc(t, 3, &q), 0);
	cr_assert_eq(txn_nta_end(t, saved), 0);
	cr_assert_eq(txn_abort(t), 0);
	int a;
	cr_assert_eq(op_page_allocated(E.bp, q, &a), 0);
	cr_assert(a);
	trec *v = malloc(8 * sizeof *v);
	size_t n = records_of(id, from, v, 8);
	cr_assert_eq(n, 4, "ALLOC, INIT, NTA, ABORT");
	cr_assert_eq(v[3].r.type, OP_ABORT);
	free(v);
}

Test(txn, non_page_operation_refused)
{
	uint64_t p;
	make_pages(&p, 1);
	txn *t = begin();
	buf_page *pg;
	uint64_t end = log_end(E.lg);
	cr_assert_eq(buf_get(E.bp, p, BUF_X, &pg), 0);
	cr_assert_eq(txn_update(t, pg, OP_COMMIT, NULL, 0), TP_EINVAL);
	cr_assert_eq(txn_update(t, pg, 999, NULL, 0), TP_EINVAL);
	buf_put(E.bp, pg);
	cr_assert_eq(log_end(E.lg), end);
	cr_assert_eq(txn_compensate(t, p, 999, NULL, 0), TP_EINVAL);
	cr_assert_eq(txn_abort(t), 0);
}

/* Many updates on a tiny pool: rollback re-reads evicted pages. */
Test(txn, long_rollback_through_eviction)
{
	enum { NP = 30 };
	uint64_t p[NP];
	static unsigned char before[NP][BODY], x[BODY];
	su_engine_crash(&E);
	cr_assert_eq(su_engine_open(sdir, 8, &E), 0);
	make_pages(p, NP);
	for (int i = 0; i < NP; i++)
		body_of(p[i], before[i]);
	txn *t = begin();
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < NP; i++) {
			unsigned char v[64];
			memset(v, round * 50 + i, sizeof v);
			cr_assert_eq(op_page_set(t, p[i], BUF_HDR + (uint32_t)(round * 100 + i), v, sizeof v), 0);
		}
	cr_assert_eq(txn_abort(t), 0);
	for (int i = 0; i < NP; i++) {
		body_of(p[i], x);
		cr_assert_arr_eq(x, before[i], BODY, "page %" PRIu64, p[i]);
	}
	cr_assert_eq(buf_pinned(E.bp), 0);
}

/* ---- hierarchical locks and escalation (T10) ---- */

static void child_name(unsigned char *name, uint32_t i)
{
	memcpy(name, "Pparent", 7);
	util_put32(name + 7, i);
}

/* Locks children 0..n-1 of "Pparent" in mode. */
static void lock_children(txn *t, uint32_t from, uint32_t n, int mode)
{
	unsigned char name[11];
	for (uint32_t i = from; i < from + n; i++) {
		child_name(name, i);
		cr_assert_eq(txn_lock_child(t, "Pparent", 7, name, 11, mode), 0, "child %u: %s", i, tp_errmsg());
	}
}

Test(txn, many_child_locks_escalate_to_the_parent)
{
	txn *a = begin();
	lock_children(a, 0, 5000, LOCK_X);
	enum lock_mode m = lock_held_mode(txn_locker(a), "Pparent", 7);
	cr_assert(m == LOCK_X, "after 5000 X children the parent is held %s, want X", lock_mode_name(m));
	size_t n = lock_count(txn_locker(a));
	cr_assert_lt(n, 1100, "%zu locks held: the children after escalation were locked one by one", n);
	/* another transaction cannot take a child under it now */
	txn *b = begin();
	txn_lock_timeout(b, 50);
	unsigned char name[11];
	child_name(name, 99999);
	cr_assert_eq(txn_lock_child(b, "Pparent", 7, name, 11, LOCK_S), TP_ETIMEOUT,
		     "a child lock under a parent another transaction escalated to X was granted");
	cr_assert_eq(txn_abort(b), 0);
	cr_assert_eq(txn_commit(a, 1), 0);
}

Test(txn, escalation_never_waits_for_others_under_the_parent)
{
	txn *b = begin();
	lock_children(b, 100000, 1, LOCK_S); /* IS on the parent */
	txn *a = begin();
	lock_children(a, 0, 3000, LOCK_X); /* escalation would need X: not now */
	cr_assert_eq(lock_held_mode(txn_locker(a), "Pparent", 7), LOCK_IX, "escalated over another's IS");
	cr_assert_geq(lock_count(txn_locker(a)), 3001, "children are still locked one by one");
	lock_children(b, 100001, 1, LOCK_S); /* b is not blocked */
	cr_assert_eq(txn_commit(b, 1), 0);
	lock_children(a, 3000, 3000, LOCK_X); /* tried again later, alone now */
	cr_assert_eq(lock_held_mode(txn_locker(a), "Pparent", 7), LOCK_X);
	cr_assert_eq(txn_commit(a, 1), 0);
}

Test(txn, readers_escalate_to_shared_and_do_not_block_readers)
{
	txn *a = begin();
	lock_children(a, 0, 2000, LOCK_S);
	cr_assert_eq(lock_held_mode(txn_locker(a), "Pparent", 7), LOCK_S);
	txn *b = begin();
	lock_children(b, 0, 10, LOCK_S); /* IS is compatible with S */
	txn_lock_timeout(b, 50);
	unsigned char name[11];
	child_name(name, 5);
	cr_assert_eq(txn_lock_child(b, "Pparent", 7, name, 11, LOCK_X), TP_ETIMEOUT, "a writer under a shared parent");
	cr_assert_eq(txn_abort(b), 0);
	cr_assert_eq(txn_commit(a, 1), 0);
}

/* ---- T6: a checkpoint's view of a transaction ---- */

static struct {
	txn *t;
	uint64_t rec;   /* size of each of its records */
	int stop;       /* atomic */
	uint64_t looks, missed, first_missed_end, first_missed_last;
} t6;

/* As a checkpoint: the log's end, then the transaction's LSNs.  It is the
 * only appender, of records rec bytes apart (but where a segment ends): a
 * record of it below the end that its LSNs do not show is one found at
 * last + rec < end. */
static void *t6_reader(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&t6.stop, __ATOMIC_ACQUIRE)) {
		uint64_t end = log_end(E.lg), first, last, un;
		(void)txn_lsns(t6.t, &first, &last, &un);
		t6.looks++;
		if (!last || last + t6.rec >= end)
			continue;
		/* (a segment's padding is no record: look at what is there) */
		log_rec r;
		void *b = NULL;
		int real = log_read(E.lg, last + t6.rec, &r, &b) == 0 && r.txid == txn_id(t6.t);
		free(b);
		if (real && !t6.missed++) {
			t6.first_missed_end = end;
			t6.first_missed_last = last;
		}
	}
	return NULL;
}

Test(txn, a_checkpoint_sees_every_record_below_the_end_it_read)
{
	uint64_t p[1];
	make_pages(p, 1);
	unsigned char v[8] = "abcdefgh";
	t6.t = begin();
	cr_assert_eq(op_page_set(t6.t, p[0], BUF_HDR, v, 8), 0); /* (a page image, if any, comes first) */
	uint64_t a = page_lsn(p[0]);
	cr_assert_eq(op_page_set(t6.t, p[0], BUF_HDR, v, 8), 0);
	t6.rec = page_lsn(p[0]) - a;
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, t6_reader, NULL), 0);
	for (int i = 0; i < 100000; i++) {
		v[0] = (unsigned char)i;
		cr_assert_eq(op_page_set(t6.t, p[0], BUF_HDR, v, 8), 0);
	}
	__atomic_store_n(&t6.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	cr_assert_gt(t6.looks, 100, "the reader looked only %" PRIu64 " times", t6.looks);
	cr_assert_eq(t6.missed, 0,
		     "T6: %" PRIu64 " of %" PRIu64 " looks missed a record below the end read; the first: end %" PRIu64
		     ", last %" PRIu64 " (records %" PRIu64 " bytes apart)",
		     t6.missed, t6.looks, t6.first_missed_end, t6.first_missed_last, t6.rec);
	cr_assert_eq(txn_commit(t6.t, 1), 0);
}

/* A tp_lock call made by another thread, for the statistics test; a
 * deadlock victim aborts there, so the other transaction can go on. */
typedef struct lock_call {
	tp_txn *t;
	const char *name;
	int rc;
} lock_call;

static void *lock_call_run(void *arg)
{
	lock_call *c = arg;
	c->rc = tp_lock(c->t, c->name, strlen(c->name), TP_LOCK_X);
	if (c->rc == TP_EDEADLOCK)
		(void)tp_abort(c->t);
	return NULL;
}

/* Waits until t waits for a lock (at most 5 s). */
static void until_waiting(tp_txn *t)
{
	for (int i = 0; i < 5000 && !tp_lock_waits_for(t); i++)
		usleep(1000);
	cr_assert_neq(tp_lock_waits_for(t), 0, "the second transaction never waited for the lock");
}

Test(txn, stats_count_lock_requests_waits_and_deadlocks)
{
	char path[160];
	tp_options o;
	tp_env *env;
	tp_txn *a, *b;
	tp_stats s0, s1;
	snprintf(path, sizeof path, "%s/stats", tdir);
	su_options(&o, PS, 1u << 20, 64);
	cr_assert_eq(tp_mkfs(path, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(path, &o, &env), 0, "%s", tp_errmsg());
	tp_stats_get(env, &s0);

	/* a waits for b's lock on "n1" until b commits */
	cr_assert_eq(tp_begin(env, &a), 0);
	cr_assert_eq(tp_begin(env, &b), 0);
	cr_assert_eq(tp_lock(b, "n1", 2, TP_LOCK_X), 0);
	lock_call c = {a, "n1", -1};
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, lock_call_run, &c), 0);
	until_waiting(a);
	cr_assert_eq(tp_commit(b, TP_COMMIT_NOSYNC), 0);
	pthread_join(th, NULL);
	cr_assert_eq(c.rc, 0, "the waiting lock request failed: %s", tp_strerror(c.rc));
	tp_stats_get(env, &s1);
	cr_assert_eq(s1.lock_requests - s0.lock_requests, 2, "%" PRIu64 " lock requests counted, 2 made",
		     s1.lock_requests - s0.lock_requests);
	cr_assert_eq(s1.lock_waits - s0.lock_waits, 1, "%" PRIu64 " waits counted, 1 happened",
		     s1.lock_waits - s0.lock_waits);
	cr_assert_eq(s1.lock_deadlocks - s0.lock_deadlocks, 0);

	/* a holds n1 and b n2; b asks for n1 (waits), a for n2: a deadlock,
	 * one victim, whose request fails with TP_EDEADLOCK (b, the younger
	 * of two holding as many locks, as lock.c chooses; either is counted) */
	cr_assert_eq(tp_begin(env, &b), 0);
	cr_assert_eq(tp_lock(b, "n2", 2, TP_LOCK_X), 0);
	c = (lock_call){b, "n1", -1};
	cr_assert_eq(pthread_create(&th, NULL, lock_call_run, &c), 0);
	until_waiting(b);
	int rc = tp_lock(a, "n2", 2, TP_LOCK_X);
	if (rc == TP_EDEADLOCK) { /* a is the victim: b goes on once a ends */
		cr_assert_eq(tp_abort(a), 0);
		pthread_join(th, NULL);
		cr_assert_eq(c.rc, 0);
		cr_assert_eq(tp_commit(b, TP_COMMIT_NOSYNC), 0);
	} else {
		cr_assert_eq(rc, 0, "the deadlock ended with %s, not a victim", tp_strerror(rc));
		pthread_join(th, NULL);
		cr_assert_eq(c.rc, TP_EDEADLOCK, "b's request ended with %d, not TP_EDEADLOCK", c.rc);
		cr_assert_eq(tp_commit(a, TP_COMMIT_NOSYNC), 0);
	}
	tp_stats_get(env, &s0);
	cr_assert_eq(s0.lock_deadlocks - s1.lock_deadlocks, 1, "%" PRIu64 " deadlocks counted, 1 happened",
		     s0.lock_deadlocks - s1.lock_deadlocks);
	cr_assert_geq(s0.lock_waits - s1.lock_waits, 1);
	cr_assert_eq(s0.lock_timeouts - s1.lock_timeouts, 0);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
}

/* ---- T13: commits written, not synced, survive a crash of the process ---- */

#define PC_THREADS 4
#define PC_COMMITS 150
#define PC_BIG 20000 /* an overflow value: ordered when asked (the barrier, L10) */

typedef struct pc_arg {
	tp_env *env;
	tp_tree *tr;
	int id, flags;
	int acked; /* commits that returned 0: keys id*PC_COMMITS + [0, acked) */
	int rc;
} pc_arg;

static void pc_key(int id, int i, char *k) { snprintf(k, 16, "k%02d-%05d", id, i); }

static size_t pc_val(int id, int i, unsigned char *v)
{
	size_t n = id == 0 && i % 5 == 0 ? PC_BIG : 16 + (size_t)(i * 7 % 200);
	for (size_t j = 0; j < n; j++)
		v[j] = (unsigned char)(id * 37 + i * 11 + j * 3);
	return n;
}

static void *pc_thread(void *p)
{
	pc_arg *a = p;
	static _Thread_local unsigned char v[PC_BIG];
	for (int i = 0; i < PC_COMMITS; i++) {
		tp_txn *t;
		char k[16];
		size_t n = pc_val(a->id, i, v);
		pc_key(a->id, i, k);
		if ((a->rc = tp_begin(a->env, &t)) != 0)
			return NULL;
		/* thread 0 stores its big values as ordered data */
		if ((a->rc = tp_put(t, a->tr, k, strlen(k), v, n, a->id == 0 ? TP_ORDERED : 0)) != 0) {
			(void)tp_abort(t);
			return NULL;
		}
		if ((a->rc = tp_commit(t, a->flags)) != 0)
			return NULL;
		a->acked = i + 1;
	}
	return NULL;
}

/* PC_THREADS threads commit PC_COMMITS puts each with flags, then the
 * process "dies" (tp_crash_close: nothing more is written, what is in the
 * files stays); after recovery, returns how many acknowledged commits are
 * missing or wrong. */
static int commits_lost_at_process_crash(int flags, int background)
{
	char path[160];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	static pc_arg a[PC_THREADS];
	pthread_t th[PC_THREADS];
	snprintf(path, sizeof path, "%s/pcrash%d%d", tdir, flags, background);
	su_options(&o, PS, 1u << 20, 256);
	o.background = background;
	cr_assert_eq(tp_mkfs(path, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(path, &o, &env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "t", TP_TREE_CREATE, &tr), 0, "%s", tp_errmsg());
	for (int i = 0; i < PC_THREADS; i++) {
		a[i] = (pc_arg){.env = env, .tr = tr, .id = i, .flags = flags};
		cr_assert_eq(pthread_create(&th[i], NULL, pc_thread, &a[i]), 0);
	}
	for (int i = 0; i < PC_THREADS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(a[i].rc, 0, "thread %d: %s (%s)", i, tp_strerror(a[i].rc), tp_errmsg());
		cr_assert_eq(a[i].acked, PC_COMMITS);
	}
	tp_tree_close(tr);
	tp_crash_close(env);

	cr_assert_eq(tp_open(path, &o, &env), 0, "recovery: %s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "t", 0, &tr), 0, "%s", tp_errmsg());
	static unsigned char want[PC_BIG], got[PC_BIG];
	int lost = 0;
	for (int id = 0; id < PC_THREADS; id++)
		for (int i = 0; i < a[id].acked; i++) {
			char k[16];
			size_t n = pc_val(id, i, want), gl = 0;
			pc_key(id, i, k);
			int rc = tp_get(NULL, tr, k, strlen(k), got, sizeof got, &gl);
			if (rc != 0 || gl != n || memcmp(got, want, n) != 0) {
				if (!lost)
					cr_log_info("flags %d: first lost commit: %s (%s)", flags, k,
						    rc ? tp_strerror(rc) : "wrong value");
				lost++;
			}
		}
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
	return lost;
}

/* T13: with TP_COMMIT_WRITE every commit that returned is in the log
 * files, so a crash of the process alone loses none. */
Test(txn, written_commits_survive_a_process_crash, .timeout = 120)
{
	int lost = commits_lost_at_process_crash(TP_COMMIT_WRITE, 0);
	cr_assert_eq(lost, 0, "T13: %d of %d commits made with TP_COMMIT_WRITE are gone after a process crash", lost,
		     PC_THREADS * PC_COMMITS);
}

/* The same with the log's writer thread and the background checkpoints
 * (tpfsd's configuration, L12). */
Test(txn, written_commits_survive_a_process_crash_background, .timeout = 120)
{
	int lost = commits_lost_at_process_crash(TP_COMMIT_WRITE, 1);
	cr_assert_eq(lost, 0, "T13: %d of %d commits made with TP_COMMIT_WRITE are gone after a process crash", lost,
		     PC_THREADS * PC_COMMITS);
}

/* The other side: TP_COMMIT_NOSYNC commits stay in memory, and the same
 * crash loses them -- which is what the two tests above would see if
 * TP_COMMIT_WRITE did no more than TP_COMMIT_NOSYNC. */
Test(txn, nosync_commits_are_lost_by_a_process_crash, .timeout = 120)
{
	int lost = commits_lost_at_process_crash(TP_COMMIT_NOSYNC, 0);
	cr_assert_gt(lost, 0, "no TP_COMMIT_NOSYNC commit was lost: the test cannot tell the modes apart");
}

/* T13 for a read-only transaction: it returns once what it read -- here
 * a TP_COMMIT_NOSYNC commit still in memory -- is written too. */
Test(txn, written_read_only_commit_writes_what_it_read)
{
	char path[160];
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	tp_txn *t;
	char v[8];
	size_t vl;
	snprintf(path, sizeof path, "%s/readonly", tdir);
	su_options(&o, PS, 1u << 20, 64);
	cr_assert_eq(tp_mkfs(path, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(path, &o, &env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "t", TP_TREE_CREATE, &tr), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_put(t, tr, "a", 1, "one", 3, 0), 0);
	cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_get(t, tr, "a", 1, v, sizeof v, &vl), 0);
	cr_assert_eq(tp_commit(t, TP_COMMIT_WRITE), 0);
	tp_tree_close(tr);
	tp_crash_close(env);
	cr_assert_eq(tp_open(path, &o, &env), 0, "recovery: %s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "t", 0, &tr), 0, "%s", tp_errmsg());
	int rc = tp_get(NULL, tr, "a", 1, v, sizeof v, &vl);
	cr_assert_eq(rc, 0, "T13: a read-only commit returned, then a process crash lost what it read (%s)",
		     tp_strerror(rc));
	cr_assert(vl == 3 && !memcmp(v, "one", 3));
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
}
