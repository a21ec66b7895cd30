/*
 * tp.h -- the public interface of the tpfs engine: the only engine header
 * that fsd/, tools/ and programs linking the library include.
 *
 * A store is a directory: `super` (superblock and two checkpoint master
 * slots), `data` (the page file) and `log/` (preallocated log segments, or
 * a directory elsewhere named at creation).  Opening a store that was not
 * closed cleanly recovers it (ARIES analysis, redo, undo) and says what it
 * did on stderr unless quiet.
 *
 * Errors: 0 on success, a positive errno for OS and resource failures, a
 * negative TP_E* code for the engine's own outcomes.  tp_errmsg() gives the
 * calling thread's last message, naming the file, page or record and cause.
 */
#ifndef TP_H
#define TP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tp_env tp_env;
typedef struct tp_txn tp_txn;

/* Engine outcomes (negative; errno values are positive). */
enum {
	TP_ENOTFOUND = -1, /* no such record / end of scan */
	TP_EDEADLOCK = -2, /* chosen as deadlock victim: abort the transaction */
	TP_ECORRUPT = -3,  /* a checksum or structure check failed; see tp_errmsg */
	TP_EPANIC = -4,    /* an earlier write or sync failed: reopen to recover */
	TP_EVERSION = -5,  /* the store's format is newer than this engine */
	TP_EBADSTORE = -6, /* not a tpfs store, or a file of it is missing */
	TP_EINVAL = -7,    /* bad argument (page out of range, offset past page) */
	TP_EROLLBACK = -8, /* the transaction can only be aborted now */
	TP_ETIMEOUT = -9,  /* a lock wait timed out */
};

typedef struct tp_options {
	size_t cache_pages;      /* buffer pool frames (default 2048) */
	uint32_t page_size;      /* at creation: 4096 by default, 1024..65536 */
	uint64_t seg_size;       /* at creation: log segment bytes (16 MiB) */
	uint64_t ckpt_log_bytes; /* checkpoint after this much log (64 MiB) */
	uint32_t ckpt_ms;        /* ...or this long since the last (30000) */
	const char *logdir;      /* at creation: keep the log there; at open: the
				    log is there now (moved since creation) */
	int readonly;            /* inspect: no writes at all (recovery, if the
				    store needs it, runs in memory) */
	uint64_t discard_after;  /* 0; else accept losing the log from this LSN
				    on (where damage was reported): the records
				    from there are cut (kept aside as
				    log.<index>.discarded-<LSN>; read-only: in memory
				    only), then recovery runs as after a crash */
	int quiet;               /* no progress or recovery messages */
	int progress;            /* a recovery longer than half a second shows
				    how far it is on stderr, if that is a
				    terminal (even when quiet) */
	int background;          /* a thread of the engine takes the checkpoints
				    when they come due (also on an idle store),
				    and one writes the log's full buffers (log.c
				    L12); 0: the commit that finds one due takes
				    it, and the appender that fills a buffer
				    writes it, deterministically, as the crash
				    simulator needs */
} tp_options;

void tp_options_init(tp_options *o);

/* Stores */
/* Makes a store.  The store directory and the log directory (made, or
 * given and empty or not) become mode 0700 and every file in them 0600,
 * whatever the umask: a store is private to its owner.  A directory with
 * the sticky bit (shared, like /tmp) is refused. */
int tp_mkfs(const char *store, const tp_options *o);
/* Privacy: finds every path of the store -- the store directory, the log
 * directory (logdir, or the superblock's when NULL) and everything in
 * them -- that group or others may access, and calls loose(arg, path,
 * mode, want) for each, want being mode without those bits; with tighten
 * after chmod'ing it to want.  *count (may be NULL): how many.  0, or an
 * error with the path in tp_errmsg (one that cannot be read or changed,
 * or a superblock that cannot be read: then nothing is looked at). */
typedef void tp_loose_fn(void *arg, const char *path, unsigned mode, unsigned want);
int tp_private(const char *store, const char *logdir, int tighten, tp_loose_fn *loose, void *arg, unsigned *count);
int tp_open(const char *store, const tp_options *o, tp_env **out);
/* Checkpoints and closes.  Transactions still open are not committed: the
 * next open rolls them back.  Their handles must not be used afterwards. */
int tp_close(tp_env *env);
/* Closes without flushing or checkpointing, as if the process died (tests,
 * and `tpfs demo`, which is why it is here and not in tp_test.h):
 * what was written to the store's files stays, as the operating system
 * keeps it -- commits made durable or with TP_COMMIT_WRITE survive, those
 * made with TP_COMMIT_NOSYNC and not flushed since are lost. */
void tp_crash_close(tp_env *env);
int tp_checkpoint(tp_env *env);
/* 1 if nothing was logged after the last checkpoint (closed cleanly, or
 * recovered). */
int tp_clean(tp_env *env);
/* 1 if this open found the store not closed cleanly and recovered it.  A
 * read-only open recovers in memory and writes nothing: it sees the
 * committed state a read-write open would make durable. */
int tp_recovered(tp_env *env);
/* Makes every committed transaction durable (commits already are; this is
 * for transactions committed with TP_COMMIT_NOSYNC or TP_COMMIT_WRITE). */
int tp_sync(tp_env *env);

/* Transactions */
/* tp_commit flags.  0: durable at return.  TP_COMMIT_NOSYNC: durable at the
 * next log flush; until then the commit is in this process's memory only,
 * and a crash of the process loses it.  TP_COMMIT_WRITE: durable at the
 * next log flush too, but its log records are written to the log files
 * (not synced) before tp_commit returns, so that a crash of the process
 * alone (kill -9, a segfault, an abort) loses nothing that returned; a
 * crash of the machine or a power cut may (Berkeley DB's
 * DB_TXN_WRITE_NOSYNC).  A read-only transaction committed with it returns
 * once what it read is written too.  With both flags, TP_COMMIT_WRITE. */
enum { TP_COMMIT_NOSYNC = 1, TP_COMMIT_WRITE = 2 };
int tp_begin(tp_env *env, tp_txn **out);
int tp_commit(tp_txn *t, int flags);
/* A durable commit that keeps the transaction's locks whose names start
 * with keep (kplen bytes; 0: all of them) until its commit record is
 * durable (no early release), then calls held(arg) while they are still
 * held -- not if the commit failed -- and releases them; the other locks
 * go as soon as the commit record is logged, as with tp_commit.  For a
 * caller that shows a commit outside the engine (a cache, a reply that
 * logs nothing) and must not show anything a crash could still take back:
 * what guards those readers is kept, what only other transactions wait
 * for is not. */
int tp_commit_held(tp_txn *t, const void *keep, size_t kplen, void (*held)(void *arg), void *arg);
int tp_abort(tp_txn *t);
uint64_t tp_txn_id(const tp_txn *t);

/* Locks: strict two-phase, released at commit or abort.  Names are byte
 * strings (1..512 bytes) chosen by the caller: a record, an inode, a name.
 * A deadlock is detected when it forms; the victim's call returns
 * TP_EDEADLOCK and the transaction may then only be aborted (its updates
 * and commit fail with TP_EROLLBACK), as after a TP_ETIMEOUT. */
enum { TP_LOCK_IS = 1, TP_LOCK_IX, TP_LOCK_S, TP_LOCK_SIX, TP_LOCK_X };
int tp_lock(tp_txn *t, const void *name, size_t len, int mode);
int tp_unlock(tp_txn *t, const void *name, size_t len);
/* Lock waits longer than ms fail with TP_ETIMEOUT (0: wait for ever). */
void tp_lock_timeout(tp_txn *t, uint32_t ms);
/* Introspection, from any thread while t is open: the locks t holds, and
 * the id of a transaction t waits for (0: t is not waiting). */
size_t tp_lock_count(tp_txn *t);
uint64_t tp_lock_waits_for(tp_txn *t);
/* The mode t holds name in (TP_LOCK_IS..TP_LOCK_X), 0 if none. */
int tp_lock_held(tp_txn *t, const void *name, size_t len);
/* Ends t's current lock wait from another thread (tp_lock then returns
 * TP_ETIMEOUT): for deadlocks through waits outside the lock manager.
 * 1 if t was waiting. */
int tp_lock_cancel(tp_txn *t);

/* Pages: fixed-size, tp_page_body() usable bytes each.  Page 0 is the
 * store's root page, allocated at creation, for the caller's own roots. */
uint32_t tp_page_body(const tp_env *env);
int tp_page_alloc(tp_txn *t, uint16_t type, uint64_t *pgno);
int tp_page_free(tp_txn *t, uint64_t pgno);
int tp_page_read(tp_env *env, uint64_t pgno, uint32_t off, void *buf, uint32_t len);
int tp_page_write(tp_txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len);
int tp_page_allocated(tp_env *env, uint64_t pgno, int *allocated);

/* Records: named B-trees in the store (variable-length keys up to
 * tp_tree_max_key() bytes, values of any size up to 4 GiB; large values go
 * to overflow pages).  In a transaction, records are locked (S to read, X to
 * write) until it ends and every change is logged.  A tree opened with
 * TP_TREE_NOTXN is unprotected, as db(3) trees without LIBTP were: pass
 * t == NULL, nothing is locked or logged, and a crash may leave the tree
 * damaged.  A protected tree may be read with t == NULL: no locks, latest
 * data, committed or not. */
typedef struct tp_tree tp_tree;
typedef struct tp_cursor tp_cursor;
enum {
	TP_TREE_CREATE = 1 << 0, /* create it if missing */
	TP_TREE_U64 = 1 << 1,    /* keys are 8-byte little-endian integers */
	TP_TREE_NOTXN = 1 << 2,  /* unprotected */
	TP_TREE_NOLOCK = 1 << 3, /* logged, but records are not locked: the caller
				    locks names that cover them (tp_lock) */
};
/* tp_put flags.  TP_ORDERED: a value that goes to overflow pages has its
 * bytes written in place instead of logged (only the record pointing to
 * them is logged), and made durable before any later log write, so a
 * commit that survives a crash has them (ext4's data=ordered).  Saves
 * writing large values twice; costs a sync of the page file before the
 * next log write.  Ignored in unprotected trees. */
/* TP_PATCH: when the key holds a value of the same length in overflow
 * pages, only the bytes that differ are changed, in place, and logged
 * (before and after images of those bytes), instead of a new chain of
 * pages logged whole: for small changes to large values.  Otherwise, or
 * when the pages still hold ordered bytes not yet written, a plain put. */
enum { TP_NOOVERWRITE = 1 << 0, TP_APPEND = 1 << 1, TP_ORDERED = 1 << 2, TP_PATCH = 1 << 3 };
int tp_tree_open(tp_env *env, const char *name, int flags, tp_tree **out);
void tp_tree_close(tp_tree *tr);
int tp_tree_drop(tp_env *env, const char *name);
size_t tp_tree_max_key(const tp_tree *tr);
/* The largest value that takes exactly one overflow page (a file block). */
size_t tp_tree_value_page(const tp_tree *tr);
/* *vlen is the whole value's length; at most cap bytes are copied (cap 0:
 * whether the key exists, and the length, without reading a long value). */
int tp_get(tp_txn *t, tp_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
/* tp_get before an update of the same record (Berkeley DB's DB_RMW): the
 * record is X-locked at once, so that two transactions that read it and
 * then write it queue on the read instead of deadlocking on the upgrade.
 * Without t (or in a TP_TREE_NOLOCK tree) the same as tp_get. */
int tp_get_rmw(tp_txn *t, tp_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
/* A hint that the keys from lo to hi will be read soon: the pages that
 * hold them are read in the background.  No lock, no transaction, no
 * result. */
void tp_prefetch(tp_tree *tr, const void *lo, size_t lolen, const void *hi, size_t hilen);
int tp_put(tp_txn *t, tp_tree *tr, const void *key, size_t klen, const void *val, size_t vlen, int flags);
int tp_del(tp_txn *t, tp_tree *tr, const void *key, size_t klen);

/* Cursors: seek, then step; positioned by key, so concurrent changes never
 * make them lose their place.  Pointers from tp_cursor_get stay valid until
 * the next call on the cursor. */
enum { TP_SEEK_GE = 0, TP_SEEK_GT, TP_SEEK_LE, TP_SEEK_LT, TP_FIRST, TP_LAST };
int tp_cursor_open(tp_txn *t, tp_tree *tr, tp_cursor **out);
int tp_cursor_seek(tp_cursor *c, const void *key, size_t klen, int how);
int tp_cursor_next(tp_cursor *c);
int tp_cursor_prev(tp_cursor *c);
int tp_cursor_get(tp_cursor *c, const void **key, size_t *klen, const void **val, size_t *vlen);
void tp_cursor_close(tp_cursor *c);

/* Checks every tree of the store and that every allocated page belongs to
 * exactly one of them (or was allocated with tp_page_alloc by the caller,
 * when pages_ok); prints a summary to out (may be NULL).  TP_ECORRUPT with
 * the first problem in tp_errmsg. */
int tp_verify(tp_env *env, int pages_ok, FILE *out);

/* Errors */
const char *tp_strerror(int rc);
const char *tp_errmsg(void);

/* Space: *reserve is the bytes of the host file system the engine will
 * still take for itself, not for data -- the log segments it keeps ahead
 * of the log's end (tp.c E1) that are not made yet.  What can still be
 * written is the host's free space less this (df on a mount). */
int tp_space_reserve(tp_env *env, uint64_t *reserve);

/* Statistics since open, and what recovery did at open. */
typedef struct tp_stats {
	uint64_t commits, aborts;
	uint64_t aborts_empty; /* of aborts, those that had changed nothing (a call refused by a check) */
	uint64_t log_records, log_bytes, log_flushes, log_fpis;
	uint64_t page_reads, page_writes, cache_hits, cache_misses;
	uint64_t checkpoints;
	uint64_t checkpoints_bg; /* of them, taken by the background thread */
	uint64_t pages_returned; /* free pages given back to the file system (holes) */
	uint64_t punch_calls;    /* in so many calls */
	uint64_t log_segs_made, log_segs_recycled; /* segment files made new / reused */
	uint64_t rec_records;   /* records scanned by recovery */
	uint64_t rec_redone;    /* records redone */
	uint64_t rec_losers;    /* transactions rolled back */
	uint64_t rec_undone;    /* records undone */
	uint64_t rec_ms;        /* recovery time */
	uint64_t rec_cut_bytes; /* torn log tail discarded */
	uint64_t lock_requests; /* requests that reached the lock manager */
	uint64_t lock_waits;    /* of them, ones that had to wait */
	uint64_t lock_deadlocks; /* deadlocks found (a victim each) */
	uint64_t lock_timeouts; /* waits that timed out or were cancelled */
} tp_stats;
void tp_stats_get(tp_env *env, tp_stats *s);

/* Inspection: prints every log record from LSN from (0: the log start;
 * TP_LOGDUMP_ALL: as far back as the segment files still hold records,
 * before the log start too) in readable form, without recovering or
 * changing anything. */
#define TP_LOGDUMP_ALL UINT64_MAX
int tp_logdump(const char *store, FILE *out, uint64_t from);

#endif
