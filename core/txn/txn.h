/*
 * txn -- transactions: begin, commit, abort with CLRs, nested top actions,
 * the transaction table, and Tupdate (txn_update), the one path by which
 * a transaction changes a page.
 */
#ifndef TP_TXN_H
#define TP_TXN_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "buf.h"
#include "log.h"
#include "ord.h"

typedef struct txn_mgr txn_mgr;
typedef struct txn txn;

/* Set-up */
int txn_mgr_open(log_mgr *lg, buf_pool *bp, uint64_t next_txid, txn_mgr **out);
/* Frees the table; transactions still open are dropped (not aborted). */
void txn_mgr_close(txn_mgr *tm);
uint64_t txn_next_id(txn_mgr *tm);
size_t txn_active(txn_mgr *tm);

/* Transactions */
int txn_begin(txn_mgr *tm, txn **out);
/* TXN_USER_BYTES bytes (8-aligned) for the caller, part of t's object:
 * valid until t ends (commit, abort, txn_mgr_close). */
#define TXN_USER_BYTES 32
void *txn_user(txn *t);
/* How far txn_commit takes the commit record (and, for a read-only
 * transaction, every record logged before it committed) before it returns:
 * durable (W3); written to the log files, not synced, so that a crash of
 * the process alone cannot lose it (log.c L14); or only appended. */
enum { TXN_SYNC = 0, TXN_NOSYNC = 1, TXN_WRITE = 2 };
/* Logs the commit record and returns once it is as far as mode says.  The
 * transaction is gone afterwards, whatever the result; if the commit
 * record could not be logged, the transaction was rolled back. */
int txn_commit(txn *t, int mode);
/* A durable commit without T7's early release for the locks whose names
 * start with keep (kplen bytes; 0: every lock): they are held until the
 * commit record is durable; then held(arg) runs, still under them (not if
 * the commit failed), and they are released.  The others go early. */
int txn_commit_held(txn *t, const void *keep, size_t kplen, void (*held)(void *), void *arg);
/* Rolls back through the back-chain writing CLRs (W5); frees t. */
int txn_abort(txn *t);
uint64_t txn_id(const txn *t);
txn_mgr *txn_mgr_of(const txn *t);
buf_pool *txn_pool(const txn *t);
buf_pool *txn_mgr_pool(const txn_mgr *tm);
log_mgr *txn_mgr_log(const txn_mgr *tm);
struct lock_mgr *txn_mgr_locks(const txn_mgr *tm);

/* Locks (strict 2PL: held until commit or abort).  mode is a lock_mode.
 * A deadlock victim (TP_EDEADLOCK) or timed-out waiter (TP_ETIMEOUT) is
 * doomed: its later updates and commit fail with TP_EROLLBACK. */
int txn_lock(txn *t, const void *key, size_t len, int mode);
/* (Asking again for a mode already held costs no call of the lock manager:
 * each transaction remembers the names it locked, T11.) */
/* Locks name (S or X) as a child of parent (a name of at most 16 bytes,
 * for example a tree): under an IS or IX lock on parent, and escalated to
 * a lock on parent itself once the transaction holds many children (T10). */
int txn_lock_child(txn *t, const void *parent, size_t plen, const void *name, size_t len, int mode);
/* Early release, where a protocol allows it. */
int txn_unlock(txn *t, const void *key, size_t len);
void txn_lock_timeout(txn *t, uint32_t ms);
struct lock_owner *txn_locker(txn *t);

/* Updates */
/* Tupdate: logs op(args) for the X-latched page pg as a record of t (with
 * a full-page image first if the checkpoint horizon asks for one), then
 * applies it through the operation's redo and sets the page LSN. */
int txn_update(txn *t, buf_page *pg, uint16_t op, const void *args, uint32_t len);
/* txn_update that logs a full-page image of pg first, whatever the
 * checkpoint horizon (buf.h, B12). */
int txn_update_imaged(txn *t, buf_page *pg, uint16_t op, const void *args, uint32_t len);
/* For undo functions: logs op(args) on page pgno as a CLR of t, whose
 * undo_next skips the record being undone, and applies it through redo. */
int txn_compensate(txn *t, uint64_t pgno, uint16_t op, const void *args, uint32_t len);
/* Logs op(args) on the X-latched page pg as a redo-only record of t (a
 * CLR): undo skips it and goes on at undo_next.  For structure changes
 * that must survive a rollback, and for compensations of logical undo. */
int txn_update_clr(txn *t, buf_page *pg, uint16_t op, const void *args, uint32_t len, uint64_t undo_next);
/* The record rollback would undo next (the start of a nested top action):
 * during the undo of a record, that record itself (T4). */
uint64_t txn_undo_next(txn *t);
/* For undo functions: where rollback goes on once the record being undone
 * is compensated (its prev_lsn): the undo_next of its compensation CLR. */
uint64_t txn_undo_after(txn *t);
/* Applies op(args) to the X-latched page pg without logging: for trees
 * opened without transaction protection, which a crash may leave torn. */
int txn_apply_unlogged(txn_mgr *tm, buf_page *pg, uint16_t op, const void *args, uint32_t len);
/* Nested top action: records logged between begin and end are never
 * undone once end has logged its dummy CLR. */
uint64_t txn_nta_begin(txn *t);
int txn_nta_end(txn *t, uint64_t saved);

/* Whether t is rolling back (its allocations may take the pages kept for
 * rollbacks: buf.h, B14). */
int txn_rolling_back(const txn *t);
/* The page allocator's record of the pages t freed (alloc.h): the
 * allocator fills it (alloc_note_free); t hands it to the allocator when it
 * commits (alloc_committed) and ends (alloc_release). */
alloc_freed **txn_freed(txn *t);
/* The allocator's state and the ordered-data module that go with tm (both
 * made by txn_mgr_open, freed by txn_mgr_close). */
alloc_mgr *txn_mgr_alloc(const txn_mgr *tm);
ord *txn_mgr_ord(const txn_mgr *tm);

/* Recovery and checkpoints */
/* Re-creates a loser found by analysis, ready for txn_abort. */
int txn_adopt(txn_mgr *tm, uint64_t txid, uint64_t first_lsn, uint64_t last_lsn, uint64_t undo_next, txn **out);
void txn_foreach(txn_mgr *tm, void (*fn)(void *ctx, const txn *t), void *ctx);
/* Its LSNs, read consistently (T6); returns 1 if it has ended (its COMMIT
 * or ABORT record is logged) and needs no recovery. */
int txn_lsns(const txn *t, uint64_t *first, uint64_t *last, uint64_t *undo_next);
/* Oldest first LSN of an open transaction, or UINT64_MAX. */
uint64_t txn_oldest_lsn(txn_mgr *tm);

/* Statistics */
/* aborts counts every abort; aborts_empty those of transactions that had
 * logged nothing (nothing to roll back). */
void txn_counts(txn_mgr *tm, uint64_t *commits, uint64_t *aborts, uint64_t *aborts_empty);
/* Transaction objects allocated so far; an ended one is reused (T12). */
uint64_t txn_allocs(txn_mgr *tm);

#endif
