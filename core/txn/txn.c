/*
 * txn -- transaction manager: the transaction table, Tupdate, commit,
 * rollback with CLRs, nested top actions.
 *
 * Design
 *   A transaction is a back-chain of log records (prev_lsn).  txn_update is
 *   LLADD's Tupdate: the caller holds the page X-latched, the record is
 *   appended, and the page is changed only by calling the operation's redo
 *   on that record -- exactly what recovery does.  Rollback walks the chain
 *   from undo_next: an update is undone by its operation's undo, which logs
 *   CLRs through txn_compensate; a CLR sends the walk to its undo_next, so
 *   nothing is undone twice even if rollback itself is interrupted by a
 *   crash and resumed by recovery.
 *
 * Invariants (W1-W6 are the write-ahead rules of core/DESIGN.md; each
 * rule is its first sentence, the lines under it say why)
 *   T1 (W3)  txn_commit returns 0 only after its commit record is durable,
 *       unless the caller asked for a lazy commit (T13).
 *       A commit the caller was told of survives any crash.
 *   T2 (W5)  Undo writes CLRs; CLRs are never undone.
 *       A rollback that a crash interrupted resumes where it stopped.
 *   T3 (W6)  Every check that can fail happens before the page changes.
 *       A failed append then leaves the page as it was.
 *   T4  undo_next is the next record rollback must undo.
 *       It is last_lsn during forward processing; during rollback, the
 *       record being undone until a CLR compensates it, whose undo_next is
 *       the record's prev_lsn (undo_after).  A nested top action inside an
 *       undo -- a split to make room for a logical undo's insertion -- ends
 *       with a CLR whose undo_next is undo_next: so a crash between that
 *       CLR and the compensation sends recovery back to the record, not
 *       past it.  (It was the record's prev_lsn: a crash there left the
 *       record undone by nobody -- an overflow page allocated in no tree.)
 *   (T5, T8, T9 are the page allocator's and ordered data's now: alloc.c
 *   A1, ord.c N1, alloc.c A2.)
 *   T6  A record of t is appended and t's LSN fields and state updated
 *       inside one odd span of t->seq.
 *       A sequence lock: odd while t appends; lsns_read retries until it
 *       reads an even value twice around the fields.  The odd value is
 *       stored before the append stores the log's end (a release), so a
 *       checkpoint that read the end (an acquire) and then t's fields finds
 *       every record below that end in them: a record appended before the
 *       snapshot's start LSN is always reflected in the snapshot (rec.c
 *       relies on it).  (A mutex per transaction did this, two lock/unlock
 *       pairs per update.)
 *   T7  A committing transaction releases its locks as soon as its commit
 *       record is appended, before the flush, unless txn_commit_held names
 *       them.
 *       LIBTP's group commit with Soisalon-Soininen's early release.
 *       Commits are still acknowledged in log order: a flush covering a
 *       commit covers every commit logged before it, and a read-only
 *       transaction waits until the log is durable up to where it was when
 *       it committed.  txn_commit_held's locks last until the record is
 *       durable, for callers that show the commit where no later commit
 *       record guards it (the file system's kernel caches, a reply to a
 *       plain read that logs nothing).
 *   T10 A child lock (txn_lock_child) is taken only under an intention lock
 *       (IS, IX) on its parent, and after ESC_AFTER of them the parent
 *       itself is tried.
 *       The try does not wait (S, or X once it wrote); once it succeeds no
 *       more child locks the parent's lock covers are taken (Gray's lock
 *       escalation: a bulk load holds one lock, not a million).
 *   T11 A transaction's table of the locks it took never claims more than
 *       the lock manager grants.
 *       The table (name, and a mode held at least; an intention lock taken
 *       with a child lock is in the parent's T10 slot instead, looked at
 *       first) answers a repeated request at once, without the manager.
 *       Only a transaction's end and txn_unlock take a lock away from it,
 *       and txn_unlock forgets the name first.
 *   T12 An ended transaction's object is kept for the next begin (up to
 *       TXN_SPARES) with its lock owner, every other field zeroed.
 *       The owner released everything at the end and takes the new id
 *       (lock_owner_renew): a begin then allocates nothing.
 *   T13 A commit in mode TXN_WRITE returns 0 only after its commit record
 *       is in the log files (log_write, log.c L19).
 *       A crash of the process alone -- not of the machine -- keeps it.  A
 *       read-only one waits, as under T7, until every record logged before
 *       it committed is written: what it read survives such a crash too.
 *
 * A transaction is used by one thread at a time; its sequence lock only
 * orders it against checkpoints.  Lock order: tm->mu, then the log's.
 */
#include "txn.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "io.h"
#include "lock.h"
#include "op.h"
#include "ord.h"
#include "tp.h"
#include "util.h"

#define ESC_SLOTS 4     /* parents remembered per transaction (T10) */
#define ESC_NAME 16     /* longest parent name remembered */
#define ESC_AFTER 1024  /* child locks under one parent before escalation is tried */
#define HELD_SLOTS 16   /* locks remembered per transaction (T11) */
#define HELD_NAME 32    /* longest name remembered */
#define TXN_SPARES 64       /* ended transactions kept for reuse (T12) */

struct txn {
	txn_mgr *tm;
	uint64_t id;
	lock_owner *locks;   /* its locks, released at commit or abort */
	_Alignas(8) unsigned char user[TXN_USER_BYTES]; /* txn_user */
	/* (a reused transaction keeps the fields above: T12) */
	/* T6: written by its thread inside an odd span of seq (atomic stores),
	 * read by others through lsns_read */
	unsigned seq;
	uint64_t first_lsn;  /* first record, 0 if none yet */
	uint64_t last_lsn;   /* last record: the next record's prev_lsn */
	uint64_t undo_next;  /* T4 (its thread's only) */
	uint64_t undo_after; /* T4: in the undo of a record, its prev_lsn (its compensation's undo_next) */
	uint64_t pub_undo_next; /* undo_next as of the last record appended (checkpoints) */
	int ended;           /* its COMMIT or ABORT record is in the log */
	int doomed;          /* a deadlock victim or timed out: may only abort */
	int rolling_back;    /* in rollback: compensations go on even if doomed */
	struct esc {         /* T10: parents it locked children under */
		unsigned char name[ESC_NAME];
		uint8_t len;     /* 0: slot free */
		uint8_t intent;  /* IS or IX held on the parent */
		uint8_t held;    /* S or X held on the parent after escalation, else 0 */
		uint8_t wrote;   /* an X child lock was taken */
		uint32_t n, next_try; /* child locks taken; escalation is tried at next_try */
	} esc[ESC_SLOTS];
	unsigned esc_next;   /* the slot reused next */
	struct held {        /* T11: direct-mapped by the name's hash */
		uint32_t hash;
		uint8_t len;     /* 0: slot free */
		uint8_t mode;    /* held at least this */
		unsigned char name[HELD_NAME];
	} held[HELD_SLOTS];
	alloc_freed *freed;  /* the pages it freed (alloc.c A1), the allocator's */
	txn *next, **pprev;  /* table links, under tm->mu */
};

struct txn_mgr {
	log_mgr *lg;
	buf_pool *bp;
	lock_mgr *lm;
	pthread_mutex_t mu;  /* the table and the counters */
	uint64_t next_id;
	txn *head;
	size_t n;
	txn *spare;          /* T12: ended transactions, linked by next, with their lock owner */
	size_t nspare;
	uint64_t allocs;     /* transaction objects allocated (not reused) */
	int closing;         /* txn_mgr_close: ended transactions are freed */
	uint64_t commits;    /* atomic */
	uint64_t aborts;     /* under mu */
	uint64_t aborts_empty; /* under mu: of aborts, those with nothing to roll back */
	alloc_mgr *am;       /* the page allocator's state */
	ord *od;             /* ordered data, registered with the log */
};

/* The transaction table is whole (tm->mu held; for TP_CHECK): n counts
 * its entries, every link points back where it is linked from, and every
 * id was handed out.  (Only fields under tm->mu or fixed at begin.) */
static int table_ok(const txn_mgr *tm)
{
	size_t n = 0;
	txn *const *pp = &tm->head;
	for (const txn *t = tm->head; t; pp = &t->next, t = t->next, n++)
		if (t->pprev != pp || t->tm != tm || t->id >= tm->next_id || n >= tm->n)
			return 0;
	return n == tm->n;
}

static void lock_waits(void *lg, int delta) { log_active(lg, delta); }

int txn_mgr_open(log_mgr *lg, buf_pool *bp, uint64_t next_txid, txn_mgr **out)
{
	txn_mgr *tm = calloc(1, sizeof *tm);
	if (!tm)
		return ENOMEM;
	tm->lg = lg;
	tm->bp = bp;
	tm->next_id = next_txid ? next_txid : 1;
	int rc = lock_mgr_open(&tm->lm);
	if (rc) {
		free(tm);
		return rc;
	}
	/* a transaction waiting for a lock will not commit soon: group commit
	 * leaders should not wait for it */
	lock_mgr_on_wait(tm->lm, lock_waits, lg);
	util_mutex_init_hot(&tm->mu);
	if ((rc = alloc_open(lg, &tm->am)) != 0 || (rc = ord_open(lg, bp, &tm->od)) != 0) {
		alloc_close(tm->am);
		lock_mgr_close(tm->lm);
		pthread_mutex_destroy(&tm->mu);
		free(tm);
		return rc;
	}
	*out = tm;
	return 0;
}

/* Frees an ended transaction's object and its lock owner. */
static void txn_destroy(txn *t)
{
	lock_owner_free(t->locks);
	free(t);
}

static void txn_free(txn *t)
{
	txn_mgr *tm = t->tm;
	if (t->freed || t->rolling_back) /* its pages may be free now (alloc.c A3) */
		alloc_reset(tm->am);
	log_active(tm->lg, -1);
	if (!tm->closing)
		lock_release_all(t->locks); /* strict 2PL: everything at the end */
	pthread_mutex_lock(&tm->mu);
	TP_CHECK(tm->n > 0 && !(t->seq & 1)); /* T6: no append under way */
	*t->pprev = t->next;
	if (t->next)
		t->next->pprev = t->pprev;
	tm->n--;
	TP_CHECK(table_ok(tm));
	alloc_freed *freed = t->freed;
	t->freed = NULL;
	int keep = !tm->closing && tm->nspare < TXN_SPARES; /* T12 */
	if (keep) {
		t->next = tm->spare;
		tm->spare = t;
		tm->nspare++;
	}
	pthread_mutex_unlock(&tm->mu);
	alloc_release(tm->am, &freed); /* alloc.c A1: its pages are free */
	if (!keep)
		txn_destroy(t);
}

void txn_mgr_close(txn_mgr *tm)
{
	if (!tm)
		return;
	tm->closing = 1;
	while (tm->head)
		txn_free(tm->head);
	TP_CHECK(tm->n == 0);
	while (tm->spare) {
		txn *t = tm->spare;
		tm->spare = t->next;
		txn_destroy(t);
	}
	ord_close(tm->od); /* a last barrier, for the log's last flush */
	alloc_close(tm->am);
	lock_mgr_close(tm->lm);
	pthread_mutex_destroy(&tm->mu);
	free(tm);
}

uint64_t txn_next_id(txn_mgr *tm)
{
	pthread_mutex_lock(&tm->mu);
	uint64_t id = tm->next_id;
	pthread_mutex_unlock(&tm->mu);
	return id;
}

size_t txn_active(txn_mgr *tm)
{
	pthread_mutex_lock(&tm->mu);
	size_t n = tm->n;
	pthread_mutex_unlock(&tm->mu);
	return n;
}

static int txn_new(txn_mgr *tm, uint64_t id, txn **out)
{
	pthread_mutex_lock(&tm->mu);
	txn *t = tm->spare;
	if (t) { /* T12: its lock owner kept, the rest as new */
		tm->spare = t->next;
		tm->nspare--;
		memset((char *)t + offsetof(txn, seq), 0, sizeof *t - offsetof(txn, seq));
	} else {
		pthread_mutex_unlock(&tm->mu);
		if (!(t = calloc(1, sizeof *t)))
			return ENOMEM;
		pthread_mutex_lock(&tm->mu);
		tm->allocs++;
	}
	t->tm = tm;
	t->id = id ? id : tm->next_id++;
	if (t->id >= tm->next_id)
		tm->next_id = t->id + 1;
	int reused = t->locks != NULL, rc = reused ? 0 : lock_owner_new(tm->lm, t->id, &t->locks);
	if (rc) {
		pthread_mutex_unlock(&tm->mu);
		free(t);
		return rc;
	}
	log_active(tm->lg, 1);
	t->next = tm->head;
	if (tm->head)
		tm->head->pprev = &t->next;
	t->pprev = &tm->head;
	tm->head = t;
	tm->n++;
	TP_CHECK(table_ok(tm));
	pthread_mutex_unlock(&tm->mu);
	if (reused) /* (it holds nothing: no other thread looks at its id) */
		lock_owner_renew(t->locks, t->id);
	*out = t;
	return 0;
}

int txn_begin(txn_mgr *tm, txn **out)
{
	if (log_panicked(tm->lg))
		return util_err(TP_EPANIC, "the store had a write failure; reopen it to recover");
	return txn_new(tm, 0, out);
}

uint64_t txn_id(const txn *t) { return t->id; }
void *txn_user(txn *t) { return t->user; }
txn_mgr *txn_mgr_of(const txn *t) { return t->tm; }
buf_pool *txn_pool(const txn *t) { return t->tm->bp; }
buf_pool *txn_mgr_pool(const txn_mgr *tm) { return tm->bp; }
log_mgr *txn_mgr_log(const txn_mgr *tm) { return tm->lg; }
lock_mgr *txn_mgr_locks(const txn_mgr *tm) { return tm->lm; }

/* T6: t's thread opens (odd) and closes (even) the span of an append. */
static void seq_open(txn *t)
{
	/* odd before the fields (their stores are releases) and before the
	 * log's end (a release too); no fences: TSan takes none */
	__atomic_store_n(&t->seq, t->seq + 1, __ATOMIC_RELAXED);
}

static void seq_close(txn *t) { __atomic_store_n(&t->seq, t->seq + 1, __ATOMIC_RELEASE); }

/* Records that r (just appended) belongs to t (in an odd span; T4, T6). */
static void note(txn *t, const log_rec *r)
{
	TP_CHECK((t->seq & 1) && r->lsn > t->last_lsn); /* T6; the back-chain descends (L1) */
	if (!t->first_lsn)
		__atomic_store_n(&t->first_lsn, r->lsn, __ATOMIC_RELEASE);
	__atomic_store_n(&t->last_lsn, r->lsn, __ATOMIC_RELEASE);
	if (r->type == OP_COMMIT || r->type == OP_ABORT)
		__atomic_store_n(&t->ended, 1, __ATOMIC_RELEASE);
	else if (r->flags & LOG_CLR)
		t->undo_next = r->undo_next;
	else
		t->undo_next = r->lsn;
	__atomic_store_n(&t->pub_undo_next, t->undo_next, __ATOMIC_RELEASE);
}

/* T6: t's fields as of a moment no append of t was under way, read by
 * another thread (under tm->mu: t stays in the table). */
static int lsns_read(const txn *t, uint64_t *first, uint64_t *last, uint64_t *undo_next)
{
	for (unsigned spins = 0;; spins++) {
		unsigned s = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
		if (s & 1) { /* an append under way: it ends in a few instructions,
			      * unless it waits (for room in the log, a new segment) */
			if (spins < 100) {
				sched_yield();
			} else {
				struct timespec ts = {0, 20000};
				nanosleep(&ts, NULL);
			}
			continue;
		}
		/* acquires: a value of the next append's (a release after its
		 * odd store) makes the second look at seq see it changed */
		*first = __atomic_load_n(&t->first_lsn, __ATOMIC_ACQUIRE);
		*last = __atomic_load_n(&t->last_lsn, __ATOMIC_ACQUIRE);
		*undo_next = __atomic_load_n(&t->pub_undo_next, __ATOMIC_ACQUIRE);
		int ended = __atomic_load_n(&t->ended, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&t->seq, __ATOMIC_ACQUIRE) == s)
			return ended;
	}
}

/* Appends a record of t that changes no page (T6). */
static int txn_log(txn *t, log_rec *r)
{
	seq_open(t);
	r->prev_lsn = t->last_lsn;
	r->txid = t->id;
	int rc = log_put(t->tm->lg, r);
	if (!rc)
		note(t, r);
	seq_close(t);
	return rc;
}

/* Logs r for page pg and applies it through redo (T3: nothing changes
 * before the append succeeded; T6). */
static int apply(txn *t, buf_page *pg, log_rec *r, int image)
{
	const op_def *op = op_get(r->type);
	buf_pool *bp = t->tm->bp;
	uint32_t psize = buf_page_size(bp);
	uint64_t fpi = 0; /* LSN of a full-page image logged first, if any */
	int rc;

	if (!op || !(op->flags & OPF_PAGE) || !op->redo)
		return util_err(TP_EINVAL, "operation %u is not a page operation", r->type);
	if (!buf_dirty_already(pg)) /* (most changes hit a dirty page: no mutex) */
		buf_dirty(bp, pg, log_end(t->tm->lg)); /* B6 */
	seq_open(t);
	r->prev_lsn = t->last_lsn;
	r->txid = t->id;
	if (t->rolling_back)
		r->flags |= LOG_RESERVE;
	if (op->flags & OPF_FULLPAGE)
		rc = log_put(t->tm->lg, r);
	else
		rc = log_put_page(t->tm->lg, r, buf_data(pg), psize, image ? 0 : buf_page_lsn(pg), OP_FPI, &fpi);
	if (!rc)
		note(t, r);
	seq_close(t);
	if (rc)
		return rc;
	if ((op->flags & OPF_FULLPAGE) || fpi) /* B12 */
		buf_set_logged(bp, pg, 1);
	/* W1: the page holds no record at or after this one (a page LSN only
	 * grows, so redo, W4, would apply this record to it) */
	TP_CHECK(buf_page_lsn(pg) < r->lsn || (op->flags & OPF_FULLPAGE));
	if ((rc = op->redo(buf_data(pg), psize, r)) != 0) {
		/* logged but not applicable: the caller broke the operation's
		 * contract; recovery would fail the same way */
		log_panic(t->tm->lg, rc, "applying a logged update");
		return rc;
	}
	buf_set_lsn(pg, r->lsn); /* the recovery LSN was set before the append (B6) */
	return 0;
}

static int update(txn *t, buf_page *pg, uint16_t op, const void *args, uint32_t len, int image)
{
	if (t->doomed && !t->rolling_back)
		return util_err(TP_EROLLBACK, "transaction %" PRIu64 " lost a deadlock or lock wait: abort it", t->id);
	log_rec r = {.pgno = buf_pgno(pg), .type = op, .len = len, .data = args};
	return apply(t, pg, &r, image);
}

int txn_update(txn *t, buf_page *pg, uint16_t op, const void *args, uint32_t len)
{
	return update(t, pg, op, args, len, 0);
}

int txn_update_imaged(txn *t, buf_page *pg, uint16_t op, const void *args, uint32_t len)
{
	return update(t, pg, op, args, len, 1);
}

int txn_compensate(txn *t, uint64_t pgno, uint16_t op, const void *args, uint32_t len)
{
	const op_def *d = op_get(op);
	buf_page *pg;
	int rc;
	log_rec r = {.pgno = pgno, .undo_next = t->undo_after, .type = op, .flags = LOG_CLR | LOG_RESERVE, .len = len,
		     .data = args};
	if (!d)
		return util_err(TP_EINVAL, "unknown operation %u", op);
	if ((rc = buf_get(t->tm->bp, pgno, BUF_X | ((d->flags & OPF_FULLPAGE) ? BUF_NOREAD : 0), &pg)) != 0)
		return rc;
	rc = apply(t, pg, &r, 0);
	buf_put(t->tm->bp, pg);
	return rc;
}

int txn_update_clr(txn *t, buf_page *pg, uint16_t op, const void *args, uint32_t len, uint64_t undo_next)
{
	log_rec r = {.pgno = buf_pgno(pg), .undo_next = undo_next, .type = op,
		     .flags = LOG_CLR | (t->rolling_back ? LOG_RESERVE : 0), .len = len, .data = args};
	return apply(t, pg, &r, 0);
}

uint64_t txn_undo_next(txn *t) { return t->undo_next; }
uint64_t txn_undo_after(txn *t) { return t->undo_after; }

int txn_apply_unlogged(txn_mgr *tm, buf_page *pg, uint16_t op, const void *args, uint32_t len)
{
	buf_pool *bp = tm->bp;
	const op_def *d = op_get(op);
	log_rec r = {.pgno = buf_pgno(pg), .type = op, .len = len, .data = args};
	if (!d || !d->redo)
		return util_err(TP_EINVAL, "operation %u is not a page operation", op);
	buf_dirty(bp, pg, log_end(tm->lg)); /* checkpoints write it back */
	return d->redo(buf_data(pg), buf_page_size(bp), &r);
}

uint64_t txn_nta_begin(txn *t) { return t->last_lsn; }

int txn_nta_end(txn *t, uint64_t saved)
{
	log_rec r = {.pgno = LOG_NOPAGE, .undo_next = saved, .type = OP_NTA, .flags = LOG_CLR};
	return txn_log(t, &r);
}

/* Undoes t back to its beginning (T2, T4). */
static int rollback(txn *t)
{
	uint64_t lsn = t->undo_next;
	int rc = 0;

	t->rolling_back = 1;
	while (lsn) {
		log_rec r;
		void *buf;
		uint64_t next;
		if ((rc = log_read(t->tm->lg, lsn, &r, &buf)) != 0)
			return rc;
		if (r.txid != t->id) {
			free(buf);
			return util_err(TP_ECORRUPT, "log: record at LSN %" PRIu64 " belongs to transaction %" PRIu64
						     ", not %" PRIu64 " whose chain leads there",
					lsn, r.txid, t->id);
		}
		if (r.flags & LOG_CLR) {
			next = r.undo_next;
		} else {
			const op_def *op = op_get(r.type);
			next = r.prev_lsn;
			t->undo_after = next; /* undo_next stays lsn until a CLR compensates it (T4) */
			if (op && op->undo)
				rc = op->undo(t, &r);
			else if (!op)
				rc = util_err(TP_ECORRUPT, "log: record at LSN %" PRIu64 " has unknown type %u", lsn,
					      r.type);
		}
		free(buf);
		if (rc)
			return rc;
		t->undo_next = lsn = next;
	}
	return 0;
}

int txn_abort(txn *t)
{
	txn_mgr *tm = t->tm;
	int rc = 0;
	if (t->last_lsn && log_panicked(tm->lg)) {
		/* the log may have lost records rollback needs; the next open rolls it back */
		rc = util_err(TP_EPANIC, "transaction %" PRIu64 ": the store had a write failure; "
					 "the next open rolls it back", t->id);
	} else if (t->last_lsn) {
		if ((rc = rollback(t)) == 0) {
			log_rec r = {.pgno = LOG_NOPAGE, .type = OP_ABORT, .flags = LOG_RESERVE};
			rc = txn_log(t, &r);
		}
		if (rc)
			log_panic(tm->lg, rc, "transaction rollback");
	}
	pthread_mutex_lock(&tm->mu);
	tm->aborts++;
	if (!t->last_lsn)
		tm->aborts_empty++;
	pthread_mutex_unlock(&tm->mu);
	txn_free(t);
	return rc;
}

/* T11: the slot of a name. */
static struct held *held_slot(txn *t, const void *key, size_t len, uint32_t *hash)
{
	const unsigned char *p = key;
	uint64_t h = len * 0x9e3779b97f4a7c15ull, w;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) { /* a word at a time: names are short */
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	/* the tail, 0-7 bytes, read as whole loads (a byte-wise copy into w
	 * and a load of w stalls on store forwarding: 40% of txn_lock) */
	size_t r = len - i;
	if (len >= 8 && r) { /* the last 8 bytes, the ones already hashed shifted out */
		memcpy(&w, p + len - 8, 8);
		w >>= 8 * (8 - r);
	} else {
		uint32_t a = 0, b = 0;
		if (r >= 4) {
			memcpy(&a, p + i, 4);
			memcpy(&b, p + i + r - 4, 4); /* overlapping: r - 4 bytes of it are new */
			w = a | (uint64_t)b << (8 * (r - 4));
		} else {
			w = r ? (uint64_t)p[i] | (uint64_t)p[i + r / 2] << 8 | (uint64_t)p[i + r - 1] << 16 : 0;
		}
	}
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	*hash = (uint32_t)h;
	return &t->held[(h ^ h >> 16) % HELD_SLOTS];
}

static int held_match(const struct held *e, uint32_t hash, const void *key, size_t len)
{
	return e->len == len && e->hash == hash && !memcmp(e->name, key, len);
}

/* T11: whether a lock t took covers mode on key; *e is key's slot (NULL:
 * the name does not fit the table), *hash its hash. */
static int held_covers(txn *t, const void *key, size_t len, int mode, struct held **e, uint32_t *hash)
{
	*e = NULL;
	*hash = 0;
	if (len == 0 || len > HELD_NAME || mode <= LOCK_NL || mode >= LOCK_NMODES)
		return 0;
	*e = held_slot(t, key, len, hash);
	return held_match(*e, *hash, key, len) && lock_join((enum lock_mode)(*e)->mode, (enum lock_mode)mode) == (*e)->mode;
}

/* T11: the manager granted mode on key (at least joined with what the
 * slot e held of it). */
static void held_granted(struct held *e, uint32_t hash, const void *key, size_t len, int mode)
{
	if (!e)
		return;
	enum lock_mode m = (enum lock_mode)mode;
	if (held_match(e, hash, key, len))
		m = lock_join((enum lock_mode)e->mode, m);
	e->hash = hash;
	e->len = (uint8_t)len;
	e->mode = (uint8_t)m;
	memcpy(e->name, key, len);
}

static int lock_result(txn *t, int rc)
{
	if (rc == TP_EDEADLOCK || rc == TP_ETIMEOUT)
		t->doomed = 1;
	return rc;
}

int txn_lock(txn *t, const void *key, size_t len, int mode)
{
	if (t->doomed)
		return util_err(TP_EROLLBACK, "transaction %" PRIu64 " lost a deadlock or lock wait: abort it", t->id);
	uint32_t hash;
	struct held *e;
	if (held_covers(t, key, len, mode, &e, &hash))
		return 0; /* a mode held covers it */
	int rc = lock_result(t, lock_get(t->locks, key, len, (enum lock_mode)mode, 0));
	if (rc == 0)
		held_granted(e, hash, key, len, mode);
	return rc;
}

/* A child lock and its parent's intention lock, asked of the manager
 * together (T10).  The intention lock is remembered in the parent's esc
 * slot, not in the table of held locks (T11): the caller asks only when
 * that slot does not cover it. */
static int lock_with_intent(txn *t, const void *parent, size_t plen, int intent, const void *name, size_t len,
			    int mode)
{
	uint32_t ch;
	struct held *ce;
	if (t->doomed)
		return util_err(TP_EROLLBACK, "transaction %" PRIu64 " lost a deadlock or lock wait: abort it", t->id);
	if (held_covers(t, name, len, mode, &ce, &ch))
		return txn_lock(t, parent, plen, intent); /* (a parent forgotten: the manager finds it held) */
	int first;
	int rc = lock_result(t, lock_get_two(t->locks, parent, plen, (enum lock_mode)intent, name, len,
					     (enum lock_mode)mode, &first));
	if (rc == 0)
		held_granted(ce, ch, name, len, mode);
	return rc;
}

int txn_lock_child(txn *t, const void *parent, size_t plen, const void *name, size_t len, int mode)
{
	struct esc *e = NULL;
	int rc;
	if (plen > ESC_NAME || (mode != LOCK_S && mode != LOCK_X))
		return util_err(TP_EINVAL, "lock: bad child lock request (parent of %zu bytes, mode %d)", plen, mode);
	for (unsigned i = 0; i < ESC_SLOTS && !e; i++)
		if (t->esc[i].len == plen && !memcmp(t->esc[i].name, parent, plen))
			e = &t->esc[i];
	if (!e) { /* a parent forgotten is locked again: the manager finds it held */
		e = &t->esc[t->esc_next++ % ESC_SLOTS];
		memset(e, 0, sizeof *e);
		memcpy(e->name, parent, plen);
		e->len = (uint8_t)plen;
		e->next_try = ESC_AFTER;
	}
	if (t->doomed)
		return util_err(TP_EROLLBACK, "transaction %" PRIu64 " lost a deadlock or lock wait: abort it", t->id);
	if (e->held == LOCK_X || (e->held == LOCK_S && mode == LOCK_S))
		return 0; /* the parent's lock covers every child */
	int intent = mode == LOCK_S ? LOCK_IS : LOCK_IX;
	if (e->intent < intent) {
		/* (after a failure the intention lock is asked for again:
		 * the manager finds it held if it was granted) */
		if ((rc = lock_with_intent(t, parent, plen, intent, name, len, mode)) != 0)
			return rc;
		e->intent = (uint8_t)intent;
	} else if ((rc = txn_lock(t, name, len, mode)) != 0) {
		return rc;
	}
	e->wrote |= mode == LOCK_X;
	if (++e->n >= e->next_try) {
		int want = e->wrote ? LOCK_X : LOCK_S;
		if (lock_get(t->locks, parent, plen, (enum lock_mode)want, LOCK_NOWAIT) == 0)
			e->held = (uint8_t)want;
		else /* others work under it now: try again after as many more */
			e->next_try = 2 * e->n;
	}
	return 0;
}

int txn_unlock(txn *t, const void *key, size_t len)
{
	if (len > 0 && len <= HELD_NAME) { /* T11: forgotten first */
		uint32_t hash;
		struct held *e = held_slot(t, key, len, &hash);
		if (held_match(e, hash, key, len))
			e->len = 0;
	}
	return lock_release(t->locks, key, len);
}

void txn_lock_timeout(txn *t, uint32_t ms) { lock_set_timeout(t->locks, ms); }

lock_owner *txn_locker(txn *t) { return t->locks; }

/* held: NULL for T7's early release; else the commit holds its locks
 * named keep... (all with kplen 0) until the commit record is durable,
 * calls held(arg), then releases them; the others go early (T7). */
static int commit(txn *t, int mode, const void *keep, size_t kplen, void (*held)(void *), void *arg)
{
	txn_mgr *tm = t->tm;
	int rc = 0;
	if (t->doomed) {
		(void)txn_abort(t);
		return util_err(TP_EROLLBACK, "commit refused: the transaction lost a deadlock or lock wait and was rolled back");
	}
	memset(t->held, 0, sizeof t->held); /* T11: its locks go below */
	if (!t->last_lsn) {
		/* read-only: nothing to log, but what it read may come from
		 * commits whose locks were released early and which are not
		 * durable yet (T7) */
		uint64_t seen = log_end(tm->lg);
		if (!held)
			lock_release_all(t->locks);
		else if (kplen)
			lock_release_except(t->locks, keep, kplen);
		if (mode == TXN_SYNC && seen > log_durable(tm->lg))
			rc = log_commit_flush(tm->lg, seen - 1);
		else if (mode == TXN_WRITE && seen > 0)
			rc = log_write(tm->lg, seen - 1); /* T13 */
		if (held) {
			if (rc == 0)
				held(arg);
			lock_release_all(t->locks);
		}
		txn_free(t);
		return rc;
	}
	log_rec r = {.pgno = LOG_NOPAGE, .type = OP_COMMIT};
	if ((rc = txn_log(t, &r)) != 0) {
		/* nothing is committed: undo what was done */
		int rc2 = txn_abort(t);
		(void)rc2;
		return rc;
	}
	if (t->freed && (rc = alloc_committed(tm->am, t->freed, r.lsn)) != 0) /* alloc.c A2 */
		util_err(rc, "commit of transaction %" PRIu64 ": out of memory", t->id);
	io_point("txn.commit.logged");
	/* T7: early lock release -- the commit record is in the log buffer, so
	 * any transaction that now reads our changes logs its own commit after
	 * ours and is acknowledged only once ours is durable too */
	if (!held)
		lock_release_all(t->locks);
	else if (kplen)
		lock_release_except(t->locks, keep, kplen);
	if (mode == TXN_SYNC && (rc = log_commit_flush(tm->lg, r.lsn)) != 0)
		util_err(rc, "commit of transaction %" PRIu64 ": the log could not be made durable (%s); "
			     "its outcome is decided by recovery at the next open",
			 t->id, util_strerror(rc));
	else if (mode == TXN_WRITE && (rc = log_write(tm->lg, r.lsn)) != 0) /* T13 */
		util_err(rc, "commit of transaction %" PRIu64 ": the log could not be written (%s); "
			     "its outcome is decided by recovery at the next open",
			 t->id, util_strerror(rc));
	else
		io_point("txn.commit.durable");
	if (held) {
		if (rc == 0)
			held(arg);
		lock_release_all(t->locks);
	}
	__atomic_add_fetch(&tm->commits, 1, __ATOMIC_RELAXED);
	txn_free(t);
	return rc;
}

int txn_commit(txn *t, int mode) { return commit(t, mode, NULL, 0, NULL, NULL); }

int txn_commit_held(txn *t, const void *keep, size_t kplen, void (*held)(void *), void *arg)
{
	return commit(t, TXN_SYNC, keep, kplen, held, arg);
}

int txn_rolling_back(const txn *t) { return t->rolling_back; }

alloc_freed **txn_freed(txn *t) { return &t->freed; }
alloc_mgr *txn_mgr_alloc(const txn_mgr *tm) { return tm->am; }
ord *txn_mgr_ord(const txn_mgr *tm) { return tm->od; }

int txn_adopt(txn_mgr *tm, uint64_t txid, uint64_t first_lsn, uint64_t last_lsn, uint64_t undo_next, txn **out)
{
	txn *t;
	int rc = txn_new(tm, txid, &t);
	if (rc)
		return rc;
	t->first_lsn = first_lsn;
	t->last_lsn = last_lsn;
	t->undo_next = t->pub_undo_next = undo_next;
	*out = t;
	return 0;
}

void txn_foreach(txn_mgr *tm, void (*fn)(void *ctx, const txn *t), void *ctx)
{
	pthread_mutex_lock(&tm->mu);
	for (txn *t = tm->head; t; t = t->next)
		fn(ctx, t);
	pthread_mutex_unlock(&tm->mu);
}

int txn_lsns(const txn *t, uint64_t *first, uint64_t *last, uint64_t *undo_next)
{
	return lsns_read(t, first, last, undo_next);
}

uint64_t txn_oldest_lsn(txn_mgr *tm)
{
	uint64_t m = UINT64_MAX;
	pthread_mutex_lock(&tm->mu);
	for (txn *t = tm->head; t; t = t->next) {
		uint64_t first, last, un;
		(void)lsns_read(t, &first, &last, &un);
		if (first && first < m)
			m = first;
	}
	pthread_mutex_unlock(&tm->mu);
	return m;
}

uint64_t txn_allocs(txn_mgr *tm)
{
	pthread_mutex_lock(&tm->mu);
	uint64_t n = tm->allocs;
	pthread_mutex_unlock(&tm->mu);
	return n;
}

void txn_counts(txn_mgr *tm, uint64_t *commits, uint64_t *aborts, uint64_t *aborts_empty)
{
	pthread_mutex_lock(&tm->mu);
	*commits = __atomic_load_n(&tm->commits, __ATOMIC_RELAXED);
	*aborts = tm->aborts;
	*aborts_empty = tm->aborts_empty;
	pthread_mutex_unlock(&tm->mu);
}
