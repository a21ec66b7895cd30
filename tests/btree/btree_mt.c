/*
 * btree_mt -- many threads on one B-tree: inserts, updates, deletes, point
 * reads and cursor scans, with and without transactions, with deliberate
 * aborts and deadlock victims retried; checked exactly.
 *
 * A plain program (no Criterion), so it also runs under ThreadSanitizer:
 * tests/btree/meson.build runs it in suite 'concurrency'; for TSan build
 * build-tsan/ and run build-tsan/tests/btree/btree_mt the same way, with
 * TSAN_OPTIONS=detect_deadlocks=0: a descent holds two page latches at once
 * (coupling) and buffer frames are reused for other pages, so TSan's
 * lock-order graph over frame latches reports inversions that are not
 * (frame M held as the root, later as an overflow page).
 *
 * Data: one tree "mt" (bytes keys) holding two kinds of records, interleaved
 * in key order by a leading bucket byte so that every leaf is shared:
 *   own keys  [bucket]'o'[thread][id, 4 bytes BE][filler 0..47 bytes]: each
 *             thread owns ids 0..--keys-1 and is their only writer; values of
 *             0 bytes to 3 pages (overflow chains);
 *   hot keys  [bucket]'h'[idx, 2 bytes]: --hot records shared by all; never
 *             deleted; value = count (int64) + total (int64) + padding.
 *
 * Transactions (per thread, --txns of them, each retried after TP_EDEADLOCK
 * / TP_EROLLBACK / TP_ETIMEOUT: abort, back off, run it again):
 *   own     1..6 puts (TP_NOOVERWRITE when the key is absent), deletes,
 *           delete-then-reinsert of own keys, point reads checked against
 *           the transaction's own view, sometimes a hot transfer too;
 *   hot     a transfer: two hot keys in random order, each read (S) then
 *           written (X upgrade: deadlocks), count + 1 each, total + d on
 *           one and - d on the other;
 *   audit   reads every hot key under S locks: the totals sum to 0, the
 *           counts to an even number (serializability);
 *   scan    a cursor in a transaction from a random key, up to 30 steps;
 * --abort-pct of the writing transactions are aborted on purpose.  Between
 * transactions, scans without a transaction (no locks) from a random key in
 * every seek mode, forward or backward.
 *
 * Checked while running: every scan returns strictly increasing (forward)
 * or decreasing (backward) keys, well-formed; every own key of the scanning
 * thread and every hot key that lies between two consecutive results is
 * among them (nothing skipped while others split and merge pages), and the
 * thread's own values are exact; after each commit the thread reads its
 * changed keys back.  At the end (and after a clean reopen, and after a
 * crash and recovery): each thread's keys equal its committed model, each
 * hot key's count and total equal the sums of the committed transfers,
 * tp_verify passes and no page is pinned.
 *
 * --checkpointer adds a thread taking fuzzy checkpoints back to back (page
 * write-backs racing with changes to the same pages; with a small pool the
 * pages are evicted right after).
 *
 * --rounds R runs R rounds on fresh stores, seeds S, S+1, ..., and stops at
 * the first that fails (rare interleavings need many tries).
 *
 * Exit: 0 passed, 1 a check failed, 2 usage.  Each round ends with a line
 * "btree_mt: seed S, threads N, commits C, aborts A (V on purpose),
 * deadlock retries D, scans S (R records, ...), K extra checkpoints, T s".
 */
#include "bt_model.h"
#include "tp.h"
#include "tp_test.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXT 64
#define MAXH 1024
#define MAXV (3 * 16384 + 64)
#define MAX_RETRIES 100000

static struct {
	int threads, txns, keys, hot, abort_pct;
	uint64_t seed;
	uint32_t page_size;
	size_t cache;
	uint64_t seg_size, ckpt_bytes;
	const char *dir;
	int keep, verbose, checkpointer;
	unsigned timeout;
} opt = {
	.threads = 8,
	.txns = 150,
	.keys = 150,
	.hot = 24,
	.abort_pct = 10,
	.seed = 1,
	.page_size = 1024,
	.cache = 128,
	.seg_size = 256 << 10,
	.ckpt_bytes = 256 << 10,
	.timeout = 600,
};

static tp_env *env;
static tp_tree *tree;
static btm hotset; /* every hot key (values unused): for completeness checks */
static atomic_int failed;
static atomic_uint_fast64_t progress;
static atomic_int workers_done;
static uint64_t ckpts;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	char m[2048];
	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	if (atomic_fetch_add(&failed, 1) < 10)
		fprintf(stderr, "btree_mt: FAIL (seed %" PRIu64 "): %s\n", opt.seed, m);
}

static void die(const char *what, int rc) __attribute__((noreturn));
static void die(const char *what, int rc)
{
	fprintf(stderr, "btree_mt: FAIL (seed %" PRIu64 "): %s: %s (%d): %s\n", opt.seed, what, tp_strerror(rc), rc,
		tp_errmsg());
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t s = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
	return btm_rand(&s);
}

static uint64_t below(uint64_t *s, uint64_t n) { return btm_rand(s) % n; }

/* ---- keys and values ---- */

static size_t own_key(int t, uint32_t id, unsigned char *k)
{
	uint64_t h = mix(opt.seed * 1000 + (uint64_t)t, id);
	k[0] = (unsigned char)(h >> 56);
	k[1] = 'o';
	k[2] = (unsigned char)t;
	k[3] = (unsigned char)(id >> 24);
	k[4] = (unsigned char)(id >> 16);
	k[5] = (unsigned char)(id >> 8);
	k[6] = (unsigned char)id;
	size_t fl = (h >> 8) % 48;
	btm_fill(k + 7, fl, h);
	return 7 + fl;
}

static size_t hot_key(int idx, unsigned char *k)
{
	k[0] = (unsigned char)(idx * 256 / opt.hot);
	k[1] = 'h';
	k[2] = (unsigned char)(idx >> 8);
	k[3] = (unsigned char)idx;
	return 4;
}

/* What a key is: 1 own (*t, *id), 2 hot (*id), 0 neither (an error). */
static int classify(const unsigned char *k, size_t kl, int *t, uint32_t *id)
{
	unsigned char b[64];
	if (kl >= 7 && k[1] == 'o') {
		*t = k[2];
		*id = (uint32_t)k[3] << 24 | (uint32_t)k[4] << 16 | (uint32_t)k[5] << 8 | k[6];
		if (*t >= opt.threads || *id >= (uint32_t)opt.keys)
			return 0;
		return own_key(*t, *id, b) == kl && memcmp(b, k, kl) == 0;
	}
	if (kl == 4 && k[1] == 'h') {
		*id = (uint32_t)k[2] << 8 | k[3];
		if (*id >= (uint32_t)opt.hot)
			return 0;
		return hot_key((int)*id, b) == kl && memcmp(b, k, kl) == 0 ? 2 : 0;
	}
	return 0;
}

static size_t own_vlen(uint64_t *s)
{
	uint64_t r = below(s, 100);
	if (r < 50)
		return below(s, 41);
	if (r < 85)
		return 40 + below(s, 260);
	return opt.page_size + below(s, 2 * (uint64_t)opt.page_size);
}

static const char *ks(const void *k, size_t kl, char *b, size_t n) { return btm_keystr(k, kl, b, n); }

/* ---- threads ---- */

enum { OP_PUT = 1, OP_DEL };

typedef struct pend {
	int kind;
	uint32_t id;
	size_t vlen;
	uint64_t vseed;
} pend;

typedef struct thr {
	int id;
	pthread_t th;
	uint64_t rng;
	btm own;                                 /* committed own records */
	int64_t hot_cnt[MAXH], hot_sum[MAXH];    /* committed transfers */
	struct hist {                            /* each committed transfer's reads, for diagnosis */
		uint16_t idx;
		int64_t before;                  /* the count it read */
		uint64_t attempt;                /* thread-local transaction number */
	} *hist;
	size_t nhist, hist_cap;
	int64_t rd_before[2];                    /* the counts the current attempt read */
	uint64_t commits, aborts, vol_aborts, retries, scans, scan_recs, gave_up;
	unsigned char *v, *g;                    /* value buffers */
} thr;

static thr ths[MAXT];

static int retryable(int rc) { return rc == TP_EDEADLOCK || rc == TP_EROLLBACK || rc == TP_ETIMEOUT; }

static void backoff(thr *me, unsigned attempt)
{
	unsigned us = (unsigned)below(&me->rng, 50u << (attempt < 8 ? attempt : 8)) + 1;
	if (attempt < 2) {
		sched_yield();
		return;
	}
	struct timespec ts = {0, (long)us * 1000};
	nanosleep(&ts, NULL);
}

/* Checks a scan step from prev (none at the start: from the seek key s)
 * to cur (NULL at the end) for a model m: every key of m strictly between
 * them must have been returned. */
static void check_gap(const btm *m, const char *what, int fwd, const void *prev, size_t prevl, int have_prev,
		      const void *cur, size_t curl, int incl_start)
{
	long i;
	char a[96], b[96];
	if (fwd)
		i = btm_seek(m, prev, prevl, have_prev || !incl_start ? TP_SEEK_GT : TP_SEEK_GE);
	else
		i = btm_seek(m, prev, prevl, have_prev || !incl_start ? TP_SEEK_LT : TP_SEEK_LE);
	if (i < 0)
		return;
	const btm_rec *r = &m->r[i];
	int c = cur ? btm_cmp(0, r->k, r->kl, cur, curl) : (fwd ? -1 : 1);
	if (fwd ? c < 0 : c > 0)
		fail("%s: key %s was skipped (%s %s, then %s)", what, ks(r->k, r->kl, a, sizeof a),
		     have_prev ? "after" : "seeking from", ks(prev, prevl, b, sizeof b),
		     cur ? ks(cur, curl, (char[96]){0}, 96) : "the end");
}

/* A scan: t may be NULL; how is a seek mode; up to max steps. */
static void scan(thr *me, tp_txn *t, int max, int *rc_out)
{
	static const char *names[] = {"GE", "GT", "LE", "LT", "FIRST", "LAST"};
	unsigned char sk[64], prev[512];
	size_t skl = 0, prevl = 0;
	tp_cursor *c;
	int how = (int)below(&me->rng, 6), rc, have_prev = 0;
	int fwd = how == TP_SEEK_GE || how == TP_SEEK_GT || how == TP_FIRST;
	char what[160];
	*rc_out = 0;
	if (how != TP_FIRST && how != TP_LAST) {
		if (below(&me->rng, 2))
			skl = own_key((int)below(&me->rng, (uint64_t)opt.threads), (uint32_t)below(&me->rng, (uint64_t)opt.keys),
				      sk);
		else
			skl = hot_key((int)below(&me->rng, (uint64_t)opt.hot), sk);
	}
	snprintf(what, sizeof what, "thread %d: %s scan %s %s", me->id, t ? "transaction" : "unlocked", names[how],
		 how == TP_FIRST || how == TP_LAST ? "" : ks(sk, skl, (char[96]){0}, 96));
	if ((rc = tp_cursor_open(t, tree, &c)) != 0)
		die("tp_cursor_open", rc);
	me->scans++;
	/* the seek key as "prev" for the first gap (inclusive for GE/LE) */
	int incl = how == TP_SEEK_GE || how == TP_SEEK_LE;
	const void *from = sk;
	size_t froml = skl;
	static const unsigned char lo[1] = {0};
	unsigned char hi[8];
	memset(hi, 0xff, sizeof hi);
	if (how == TP_FIRST) {
		from = lo;
		froml = 0;
		incl = 1;
	} else if (how == TP_LAST) {
		from = hi;
		froml = sizeof hi; /* above every key: buckets are one byte, then 'h' or 'o' */
		incl = 1;
	}
	rc = tp_cursor_seek(c, sk, skl, how);
	for (int step = 0;; step++) {
		const void *k = NULL, *v = NULL;
		size_t kl = 0, vl = 0;
		if (rc == TP_ENOTFOUND) {
			k = NULL;
		} else if (rc) {
			*rc_out = rc;
			break;
		} else {
			tp_cursor_get(c, &k, &kl, &v, &vl);
			me->scan_recs++;
		}
		/* order */
		if (k && have_prev) {
			int cmp = btm_cmp(0, prev, prevl, k, kl);
			if (fwd ? cmp >= 0 : cmp <= 0)
				fail("%s: step %d: key %s after %s: %s", what, step, ks(k, kl, (char[96]){0}, 96),
				     ks(prev, prevl, (char[96]){0}, 96), cmp == 0 ? "a duplicate" : "out of order");
		}
		/* nothing of ours or hot skipped */
		check_gap(&me->own, what, fwd, have_prev ? prev : from, have_prev ? prevl : froml, have_prev, k, kl, incl);
		check_gap(&hotset, what, fwd, have_prev ? prev : from, have_prev ? prevl : froml, have_prev, k, kl, incl);
		if (!k)
			break;
		int ot;
		uint32_t id;
		int kind = classify(k, kl, &ot, &id);
		if (!kind)
			fail("%s: a key that no one wrote: %s", what, ks(k, kl, (char[96]){0}, 96));
		if (kind == 1 && ot == me->id) { /* ours: exact (no change of ours is pending while scanning) */
			const btm_rec *r = btm_get(&me->own, k, kl);
			if (!r)
				fail("%s: own key %s is there but was deleted or never committed", what,
				     ks(k, kl, (char[96]){0}, 96));
			else if (r->vl != vl || (vl && memcmp(r->v, v, vl) != 0))
				fail("%s: own key %s: value of %zu bytes, committed %zu", what, ks(k, kl, (char[96]){0}, 96),
				     vl, r->vl);
		}
		if (kind == 2 && vl < 16)
			fail("%s: hot key %u has a value of %zu bytes", what, id, vl);
		memcpy(prev, k, kl);
		prevl = kl;
		have_prev = 1;
		if (step >= max)
			break;
		rc = fwd ? tp_cursor_next(c) : tp_cursor_prev(c);
	}
	tp_cursor_close(c);
}

/* A hot transfer in t: returns 0 or an engine code. */
static int transfer(thr *me, tp_txn *t, int *a, int *b, int64_t *d)
{
	unsigned char k[8];
	int rc;
	*a = (int)below(&me->rng, (uint64_t)opt.hot);
	do
		*b = (int)below(&me->rng, (uint64_t)opt.hot);
	while (*b == *a);
	*d = (int64_t)below(&me->rng, 1000) + 1;
	for (int i = 0; i < 2; i++) {
		int idx = i ? *b : *a;
		int64_t delta = i ? -*d : *d;
		size_t kl = hot_key(idx, k), vl;
		if ((rc = tp_get(t, tree, k, kl, me->g, 16, &vl)) != 0)
			return rc;
		if (vl < 16) {
			fail("thread %d: hot key %d has %zu bytes", me->id, idx, vl);
			return 0;
		}
		int64_t cnt, tot;
		memcpy(&cnt, me->g, 8);
		memcpy(&tot, me->g + 8, 8);
		me->rd_before[i] = cnt;
		cnt++;
		tot += delta;
		size_t nl = below(&me->rng, 20) == 0 ? opt.page_size + below(&me->rng, opt.page_size) : 16 + below(&me->rng, 48);
		btm_fill(me->v, nl, btm_rand(&me->rng));
		memcpy(me->v, &cnt, 8);
		memcpy(me->v + 8, &tot, 8);
		if ((rc = tp_put(t, tree, k, kl, me->v, nl, 0)) != 0)
			return rc;
	}
	return 0;
}

/* An own-key transaction; pending changes in p[*np].  0 or an engine code. */
static int own_ops(thr *me, tp_txn *t, btm *view, pend *p, int *np)
{
	unsigned char k[64];
	int n = 1 + (int)below(&me->rng, 6), rc;
	*np = 0;
	for (int i = 0; i < n; i++) {
		uint32_t id = (uint32_t)below(&me->rng, (uint64_t)opt.keys);
		size_t kl = own_key(me->id, id, k), vl;
		const btm_rec *r = btm_get(view, k, kl);
		uint64_t x = below(&me->rng, 100);
		if (x < 55) { /* put */
			pend q = {OP_PUT, id, own_vlen(&me->rng), btm_rand(&me->rng)};
			btm_fill(me->v, q.vlen, q.vseed);
			int flags = !r || below(&me->rng, 8) == 0 ? TP_NOOVERWRITE : 0;
			if (r && flags && q.vlen > 100)
				flags = 0; /* EEXIST with an overflow value: tested by the unit tests */
			rc = tp_put(t, tree, k, kl, me->v, q.vlen, flags);
			if (r && flags) {
				if (rc != EEXIST && !retryable(rc))
					fail("thread %d: NOOVERWRITE put of a present key: %d, expected EEXIST", me->id, rc);
				if (retryable(rc))
					return rc;
				continue;
			}
			if (rc)
				return rc;
			btm_put(view, k, kl, me->v, q.vlen);
			p[(*np)++] = q;
		} else if (x < 80) { /* delete */
			rc = tp_del(t, tree, k, kl);
			if (rc && !retryable(rc) && !(rc == TP_ENOTFOUND && !r))
				fail("thread %d: del of own key %s (%s): %d %s", me->id, ks(k, kl, (char[96]){0}, 96),
				     r ? "present" : "absent", rc, tp_errmsg());
			if (retryable(rc))
				return rc;
			if (rc == 0 && !r)
				fail("thread %d: deleted own key %s that was not there", me->id, ks(k, kl, (char[96]){0}, 96));
			btm_del(view, k, kl);
			p[(*np)++] = (pend){OP_DEL, id, 0, 0};
		} else if (x < 90) { /* delete and insert again */
			if (!r)
				continue;
			if ((rc = tp_del(t, tree, k, kl)) != 0)
				return retryable(rc) ? rc : (fail("thread %d: del: %d", me->id, rc), 0);
			pend q = {OP_PUT, id, own_vlen(&me->rng), btm_rand(&me->rng)};
			btm_fill(me->v, q.vlen, q.vseed);
			if ((rc = tp_put(t, tree, k, kl, me->v, q.vlen, TP_NOOVERWRITE)) != 0)
				return retryable(rc) ? rc : (fail("thread %d: reinsert: %d %s", me->id, rc, tp_errmsg()), 0);
			btm_put(view, k, kl, me->v, q.vlen);
			p[(*np)++] = q;
		} else { /* read our own view */
			rc = tp_get(t, tree, k, kl, me->g, MAXV, &vl);
			if (retryable(rc))
				return rc;
			if (r ? rc != 0 || vl != r->vl || (vl && memcmp(me->g, r->v, vl) != 0) : rc != TP_ENOTFOUND)
				fail("thread %d: read of own key %s in its transaction: rc %d, %zu bytes; expected %s (%zu bytes)",
				     me->id, ks(k, kl, (char[96]){0}, 96), rc, rc ? 0 : vl, r ? "present" : "absent",
				     r ? r->vl : 0);
		}
	}
	return 0;
}

static void *thread_main(void *arg)
{
	thr *me = arg;
	btm view;
	pend p[16];
	btm_init(&view, 0);
	for (int x = 0; x < opt.txns && !atomic_load(&failed); x++) {
		uint64_t kind = below(&me->rng, 100);
		int done = 0;
		for (unsigned attempt = 0; !done; attempt++) {
			tp_txn *t;
			int rc, np = 0, ha = -1, hb = -1, scan_rc = 0;
			int64_t hd = 0;
			if (attempt > MAX_RETRIES) {
				fail("thread %d: transaction %d retried %u times", me->id, x, attempt);
				return NULL;
			}
			if (attempt > 30 && kind >= 70) { /* a read-only scan or audit starved: let it go */
				me->gave_up++;
				break;
			}
			if ((rc = tp_begin(env, &t)) != 0)
				die("tp_begin", rc);
			if (kind < 45) {
				btm_copy(&view, &me->own);
				rc = own_ops(me, t, &view, p, &np);
				if (!rc && below(&me->rng, 4) == 0)
					rc = transfer(me, t, &ha, &hb, &hd);
			} else if (kind < 70) {
				rc = transfer(me, t, &ha, &hb, &hd);
			} else if (kind < 85) { /* audit */
				int64_t cnt = 0, tot = 0;
				unsigned char k[8];
				int start = (int)below(&me->rng, (uint64_t)opt.hot);
				for (int i = 0; i < opt.hot && !rc; i++) {
					size_t vl, kl = hot_key((start + i) % opt.hot, k);
					if ((rc = tp_get(t, tree, k, kl, me->g, 16, &vl)) == 0) {
						int64_t c, s;
						memcpy(&c, me->g, 8);
						memcpy(&s, me->g + 8, 8);
						cnt += c;
						tot += s;
					}
				}
				if (!rc && (tot != 0 || cnt % 2 != 0))
					fail("thread %d: audit under S locks: hot totals sum to %" PRId64 ", counts to %" PRId64
					     " (not serializable)",
					     me->id, tot, cnt);
			} else {
				scan(me, t, 30, &scan_rc);
				rc = scan_rc;
			}
			if (retryable(rc)) {
				tp_abort(t);
				me->retries++;
				backoff(me, attempt);
				continue;
			}
			if (rc)
				die("an operation", rc);
			int writes = kind < 70;
			if (writes && (int)below(&me->rng, 100) < opt.abort_pct) {
				if ((rc = tp_abort(t)) != 0)
					die("tp_abort", rc);
				me->vol_aborts++;
				done = 1;
				break;
			}
			rc = tp_commit(t, 0);
			if (retryable(rc)) {
				me->retries++;
				backoff(me, attempt);
				continue;
			}
			if (rc)
				die("tp_commit", rc);
			me->commits++;
			done = 1;
			if (kind < 45) {
				btm_copy(&me->own, &view);
				/* read the changed keys back, no transaction */
				for (int i = 0; i < np; i++) {
					unsigned char k[64];
					size_t kl = own_key(me->id, p[i].id, k), vl;
					const btm_rec *r = btm_get(&me->own, k, kl);
					rc = tp_get(NULL, tree, k, kl, me->g, MAXV, &vl);
					if (r ? rc != 0 || vl != r->vl || memcmp(me->g, r->v, vl) != 0 : rc != TP_ENOTFOUND)
						fail("thread %d: own key %s after commit: rc %d, expected %s", me->id,
						     ks(k, kl, (char[96]){0}, 96), rc, r ? "its new value" : "absent");
				}
			}
			if (ha >= 0) {
				if (me->nhist + 2 > me->hist_cap) {
					me->hist_cap = me->hist_cap ? 2 * me->hist_cap : 256;
					me->hist = realloc(me->hist, me->hist_cap * sizeof *me->hist);
					if (!me->hist)
						die("realloc", ENOMEM);
				}
				me->hist[me->nhist++] = (struct hist){(uint16_t)ha, me->rd_before[0], (uint64_t)x};
				me->hist[me->nhist++] = (struct hist){(uint16_t)hb, me->rd_before[1], (uint64_t)x};
				me->hot_cnt[ha]++;
				me->hot_cnt[hb]++;
				me->hot_sum[ha] += hd;
				me->hot_sum[hb] -= hd;
			}
		}
		/* an unlocked scan between transactions */
		if (below(&me->rng, 3) == 0) {
			int rc;
			scan(me, NULL, 200, &rc);
			if (rc)
				die("unlocked scan", rc);
		}
		atomic_fetch_add(&progress, 1);
	}
	btm_free(&view);
	return NULL;
}

/* --checkpointer: fuzzy checkpoints back to back while the workers run,
 * so that write-backs of pages being changed (and evictions right after)
 * happen all the time. */
static void *checkpointer_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&workers_done) && !atomic_load(&failed)) {
		int rc = tp_checkpoint(env);
		if (rc)
			die("tp_checkpoint", rc);
		ckpts++;
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- the final check ---- */

/* After a hot key came out wrong: the counts its committed transfers read.
 * Under strict 2PL they are 0, 1, 2, ... each exactly once; a count read
 * twice is a lost update (a stale read), a missing one an update undone. */
static void hot_history(uint32_t id)
{
	int64_t max = 0;
	for (int t = 0; t < opt.threads; t++)
		for (size_t i = 0; i < ths[t].nhist; i++)
			if (ths[t].hist[i].idx == id && ths[t].hist[i].before + 1 > max)
				max = ths[t].hist[i].before + 1;
	int shown = 0;
	for (int64_t c = 0; c < max && shown < 8; c++) {
		int n = 0;
		char who[256] = "";
		for (int t = 0; t < opt.threads; t++)
			for (size_t i = 0; i < ths[t].nhist; i++)
				if (ths[t].hist[i].idx == id && ths[t].hist[i].before == c) {
					n++;
					size_t l = strlen(who);
					snprintf(who + l, sizeof who - l, " thread %d txn %" PRIu64 ";", t, ths[t].hist[i].attempt);
				}
		if (n != 1) {
			fprintf(stderr, "btree_mt:   hot key %u: count %" PRId64 " was read by %d committed transfers:%s\n", id,
				c, n, who);
			shown++;
		}
	}
}

static void check_all(const char *when)
{
	btm all, want;
	char why[600];
	int rc;
	btm_init(&all, 0);
	btm_init(&want, 0);
	if ((rc = btm_load(&all, NULL, tree, why, sizeof why)) != 0) {
		fail("%s: scan: %s", when, why);
		return;
	}
	if ((rc = btm_check_backward(&all, NULL, tree, why, sizeof why)) != 0)
		fail("%s: backward scan: %s", when, why);
	for (int t = 0; t < opt.threads; t++)
		for (size_t i = 0; i < ths[t].own.n; i++)
			btm_put(&want, ths[t].own.r[i].k, ths[t].own.r[i].kl, ths[t].own.r[i].v, ths[t].own.r[i].vl);
	btm own_found;
	btm_init(&own_found, 0);
	int hot_seen = 0;
	for (size_t i = 0; i < all.n; i++) {
		int ot;
		uint32_t id;
		int kind = classify(all.r[i].k, all.r[i].kl, &ot, &id);
		if (kind == 1) {
			btm_put(&own_found, all.r[i].k, all.r[i].kl, all.r[i].v, all.r[i].vl);
		} else if (kind == 2) {
			int64_t cnt = 0, tot = 0, c, s;
			for (int t = 0; t < opt.threads; t++) {
				cnt += ths[t].hot_cnt[id];
				tot += ths[t].hot_sum[id];
			}
			if (all.r[i].vl < 16) {
				fail("%s: hot key %u: %zu bytes", when, id, all.r[i].vl);
				continue;
			}
			memcpy(&c, all.r[i].v, 8);
			memcpy(&s, all.r[i].v + 8, 8);
			if (c != cnt || s != tot) {
				fail("%s: hot key %u: count %" PRId64 " total %" PRId64 ", committed transfers give %" PRId64
				     " and %" PRId64,
				     when, id, c, s, cnt, tot);
				hot_history(id);
			}
			hot_seen++;
		} else {
			fail("%s: a key no one wrote: %s", when, ks(all.r[i].k, all.r[i].kl, why, sizeof why));
		}
	}
	if (hot_seen != opt.hot)
		fail("%s: %d hot keys, expected %d", when, hot_seen, opt.hot);
	if (!btm_equal(&want, &own_found, why, sizeof why))
		fail("%s: the threads' own keys differ from their committed changes: %s", when, why);
	if ((rc = tp_verify(env, 0, NULL)) != 0)
		fail("%s: tp_verify: %d %s", when, rc, tp_errmsg());
	if (tp_debug_pinned(env) != 0)
		fail("%s: %zu pages pinned", when, tp_debug_pinned(env));
	btm_free(&all);
	btm_free(&want);
	btm_free(&own_found);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "btree_mt: FAIL: timed out (a hang?)\n";
	if (write(2, m, sizeof m - 1) < 0) {
	}
	_exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: btree_mt [--threads N] [--txns N] [--keys N] [--hot N] [--abort-pct P] [--seed S] [--rounds R]\n"
			"                [--page-size B] [--cache PAGES] [--seg-size B] [--ckpt-bytes B]\n"
			"                [--timeout S] [--checkpointer] [--dir DIR] [--keep] [--verbose]\n");
}

static int open_env(int create)
{
	tp_options o;
	tp_options_init(&o);
	o.quiet = !opt.verbose; /* --verbose: the engine's own messages too */
	o.page_size = opt.page_size;
	o.cache_pages = opt.cache;
	o.seg_size = opt.seg_size;
	o.ckpt_log_bytes = opt.ckpt_bytes;
	int rc;
	if (create && (rc = tp_mkfs(opt.dir, &o)) != 0)
		die("tp_mkfs", rc);
	if ((rc = tp_open(opt.dir, &o, &env)) != 0)
		die("tp_open", rc);
	if ((rc = tp_tree_open(env, "mt", create ? TP_TREE_CREATE : 0, &tree)) != 0)
		die("tp_tree_open", rc);
	return 0;
}

/* One round: a fresh store in opt.dir, the threads, the checks.  0 or 1. */
static int run_round(void)
{
	double t0 = now_s();
	tp_txn *t;
	int rc;
	unsigned char k[8], v[16] = {0};

	memset(ths, 0, sizeof ths);
	atomic_store(&workers_done, 0);
	ckpts = 0;
	open_env(1);

	/* the hot records, committed before the threads start */
	btm_init(&hotset, 0);
	if ((rc = tp_begin(env, &t)) != 0)
		die("tp_begin", rc);
	for (int i = 0; i < opt.hot; i++) {
		size_t kl = hot_key(i, k);
		if ((rc = tp_put(t, tree, k, kl, v, sizeof v, 0)) != 0)
			die("tp_put hot", rc);
		btm_put(&hotset, k, kl, "", 0);
	}
	if ((rc = tp_commit(t, 0)) != 0)
		die("tp_commit", rc);

	for (int i = 0; i < opt.threads; i++) {
		thr *me = &ths[i];
		me->id = i;
		me->rng = mix(opt.seed, (uint64_t)i + 1);
		btm_init(&me->own, 0);
		me->v = malloc(MAXV);
		me->g = malloc(MAXV + 1);
		if (!me->v || !me->g || pthread_create(&me->th, NULL, thread_main, me) != 0) {
			fprintf(stderr, "btree_mt: cannot start thread %d\n", i);
			exit(1);
		}
	}
	pthread_t ck;
	if (opt.checkpointer && pthread_create(&ck, NULL, checkpointer_main, NULL) != 0) {
		fprintf(stderr, "btree_mt: cannot start the checkpointer\n");
		exit(1);
	}
	for (int i = 0; i < opt.threads; i++)
		pthread_join(ths[i].th, NULL);
	atomic_store(&workers_done, 1);
	if (opt.checkpointer)
		pthread_join(ck, NULL);

	uint64_t commits = 0, aborts = 0, vol = 0, retries = 0, scans = 0, recs = 0, gave_up = 0;
	for (int i = 0; i < opt.threads; i++) {
		commits += ths[i].commits;
		vol += ths[i].vol_aborts;
		retries += ths[i].retries;
		scans += ths[i].scans;
		recs += ths[i].scan_recs;
		gave_up += ths[i].gave_up;
	}
	aborts = vol + retries;
	check_all("after the run"); /* even after a failure: tells a passing glitch from damage */
	if (!atomic_load(&failed)) { /* a clean close and open */
		tp_tree_close(tree);
		if ((rc = tp_close(env)) != 0)
			die("tp_close", rc);
		open_env(0);
		check_all("after a clean reopen");
	}
	if (!atomic_load(&failed)) { /* a crash (nothing written back) and recovery */
		tp_tree_close(tree);
		tp_crash_close(env);
		open_env(0);
		check_all("after a crash and recovery");
	}
	tp_tree_close(tree);
	if ((rc = tp_close(env)) != 0)
		die("tp_close", rc);
	for (int i = 0; i < opt.threads; i++) {
		btm_free(&ths[i].own);
		free(ths[i].hist);
		free(ths[i].v);
		free(ths[i].g);
	}
	btm_free(&hotset);
	printf("btree_mt: seed %" PRIu64 ", threads %d, commits %" PRIu64 ", aborts %" PRIu64 " (%" PRIu64
	       " on purpose), deadlock retries %" PRIu64 ", scans %" PRIu64 " (%" PRIu64 " records, %" PRIu64
	       " starved scans given up), %" PRIu64 " extra checkpoints, %.1f s%s\n",
	       opt.seed, opt.threads, commits, aborts, vol, retries, scans, recs, gave_up, ckpts, now_s() - t0,
	       atomic_load(&failed) ? ", FAILED" : "");
	fflush(stdout);
	return atomic_load(&failed) ? 1 : 0;
}

int main(int argc, char **argv)
{
	char dirbuf[256] = "", top[256] = "";
	int rounds = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(s) (strcmp(a, s) == 0 && v && (i++, 1))
		if (ARG("--threads"))
			opt.threads = atoi(v);
		else if (ARG("--txns"))
			opt.txns = atoi(v);
		else if (ARG("--keys"))
			opt.keys = atoi(v);
		else if (ARG("--hot"))
			opt.hot = atoi(v);
		else if (ARG("--abort-pct"))
			opt.abort_pct = atoi(v);
		else if (ARG("--seed"))
			opt.seed = strtoull(v, NULL, 0);
		else if (ARG("--rounds"))
			rounds = atoi(v);
		else if (ARG("--page-size"))
			opt.page_size = (uint32_t)strtoul(v, NULL, 0);
		else if (ARG("--cache"))
			opt.cache = strtoul(v, NULL, 0);
		else if (ARG("--seg-size"))
			opt.seg_size = strtoull(v, NULL, 0);
		else if (ARG("--ckpt-bytes"))
			opt.ckpt_bytes = strtoull(v, NULL, 0);
		else if (ARG("--timeout"))
			opt.timeout = (unsigned)atoi(v);
		else if (ARG("--dir"))
			opt.dir = v;
		else if (strcmp(a, "--keep") == 0)
			opt.keep = 1;
		else if (strcmp(a, "--checkpointer") == 0)
			opt.checkpointer = 1;
		else if (strcmp(a, "--verbose") == 0)
			opt.verbose = 1;
		else {
			usage();
			return strcmp(a, "--help") == 0 ? 0 : 2;
		}
	}
	if (opt.threads < 1 || opt.threads > MAXT || opt.txns < 1 || opt.keys < 1 || opt.hot < 2 || opt.hot > MAXH ||
	    opt.page_size > 16384 || rounds < 1) {
		usage();
		return 2;
	}
	if (!opt.dir) {
		const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		snprintf(top, sizeof top, "%s/tpfs-btmt-XXXXXX", tmp);
		if (!mkdtemp(top)) {
			perror("btree_mt: mkdtemp");
			return 1;
		}
		snprintf(dirbuf, sizeof dirbuf, "%s/s", top);
		opt.dir = dirbuf;
	}
	signal(SIGALRM, on_alarm);
	alarm(opt.timeout);
	int bad = 0;
	uint64_t seed0 = opt.seed;
	for (int r = 0; r < rounds && !bad; r++) {
		char cmd[600];
		opt.seed = seed0 + (uint64_t)r;
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", opt.dir);
		if (r > 0 && system(cmd) != 0)
			fprintf(stderr, "btree_mt: could not remove %s\n", opt.dir);
		bad = run_round();
	}
	if (!opt.keep && top[0]) {
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
		if (system(cmd) != 0)
			fprintf(stderr, "btree_mt: could not remove %s\n", top);
	}
	if (bad)
		fprintf(stderr, "btree_mt: FAILED in the round with seed %" PRIu64 " (rerun with --seed %" PRIu64
				" --rounds 1 and the same options)\n",
			opt.seed, opt.seed);
	return bad;
}
