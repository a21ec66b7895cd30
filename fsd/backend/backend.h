/*
 * backend.h -- the store under the file-system layer: the whole contract
 * between fsd/fs/ and a store (fsd/backend/DESIGN.md).  The file-system
 * layer reaches its store only through this header; nothing above
 * fsd/backend/ includes an engine's header (the build gives tp_dep to the
 * backend library alone).
 *
 * A store is named by a string: a plain path is the embedded engine
 * (be_tp.c, core/include/tp.h); NAME://... a store of that scheme
 * (etcd://HOSTS/NAME: the cluster store, backend/cluster/be_cluster.c).  be_open picks
 * the implementation by the name and every later call dispatches through
 * its ops table (struct be_ops), so a new store is one more file here and
 * one line in backend.c's registry, and the fs layer does not change.
 *
 * The model.  A store holds named trees of records: byte-string keys in
 * byte order (memcmp, the shorter first), byte-string values.  All reads
 * and writes are done in a transaction (be_txn), except reads passed
 * t == NULL (below).  A transaction is atomic (all its puts and deletes or
 * none, also across a crash), isolated as the store's conflict mechanism
 * provides (BE_CAP_LOCKS: strict two-phase locks the CALLER takes by name,
 * BE_CAP_VALIDATE: reads validated at commit), and durable as its commit's
 * flags say.
 *
 * Results.  Every call returns 0 on success, or:
 *   - one of the BE_E* outcomes below: a NEGATIVE errno value;
 *   - a POSITIVE errno for a failure of the medium or of resources
 *     (ENOSPC, EIO, ENOMEM, EEXIST for BE_NOOVERWRITE, ...) -- the same
 *     convention as the fs layer's own checks, which fs_errno maps.
 * After a failed call (other than BE_ENOTFOUND) be_errmsg says more.
 *
 * Threads.  A store, its trees and be_begin are safe from any thread; one
 * transaction and its cursors are used by one thread at a time, except
 * be_lock_count, be_lock_waits_for, be_lock_held and be_lock_cancel, which
 * any thread may call while the transaction is open.
 */
#ifndef TPFS_BACKEND_H
#define TPFS_BACKEND_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Outcomes (negative errno values; a positive errno is a system failure). */
enum {
	BE_ENOTFOUND = -ENOENT,          /* no such record / end of a scan */
	BE_EDEADLOCK = -EDEADLK,         /* a deadlock (or conflict) victim: abort the transaction */
	BE_ECORRUPT = -EUCLEAN,          /* a checksum or structure check failed: be_errmsg */
	BE_EPANIC = -EIO,                /* an earlier write or sync failed: reopen to recover */
	BE_EVERSION = -EPROTONOSUPPORT,  /* the store's format is newer than this program */
	BE_EBADSTORE = -EMEDIUMTYPE,     /* not a store, or a part of it is missing */
	BE_EINVAL = -EINVAL,             /* bad argument */
	BE_EROLLBACK = -ECANCELED,       /* the transaction can only be aborted now */
	BE_ETIMEOUT = -ETIMEDOUT,        /* a lock wait timed out or was cancelled */
};

typedef struct be_ops be_ops;
/* Handles.  Each implementation's own structs begin with one of these:
 * the ops table every call on the handle dispatches through. */
typedef struct be_store {
	const be_ops *ops;
} be_store;
typedef struct be_tree {
	const be_ops *ops;
} be_tree;
typedef struct be_txn {
	const be_ops *ops;
} be_txn;
typedef struct be_cursor {
	const be_ops *ops;
} be_cursor;

/* ---- capabilities: what the fs layer may rely on, per store ---- */

/* BE_CAP_LOCKS: the store has a lock manager (be_lock...): a transaction
 * is isolated by the locks its caller takes -- names covering what it
 * reads (S) and changes (X) -- held to its end; conflicting requests
 * wait; a deadlock is detected when it forms and one waiter gets
 * BE_EDEADLOCK.  Records of a tree opened BE_TREE_NOLOCK are not locked
 * by the store: only the caller's names protect them.
 * BE_CAP_VALIDATE: no locks (be_lock returns 0 at once and nothing is
 * held): the store remembers what the transaction read (keys and their
 * versions, absences, the ranges its cursors covered) and its commit
 * fails with BE_EDEADLOCK, applying nothing, if any of it changed since
 * -- the caller retries the call as after a deadlock.  A cursor's range
 * is from where it was sought (BE_FIRST: the tree's start) to the last
 * key it gave, or to the tree's end once it returned BE_ENOTFOUND: a key
 * put into that range, changed or deleted there by another commit since
 * is a conflict (phantoms included), with no help from the caller.
 * Reads of t's own writes are not validated.  A store declares exactly
 * one of the two. */
enum { BE_CAP_LOCKS = 1 << 0, BE_CAP_VALIDATE = 1 << 1 };

typedef struct be_caps {
	unsigned flags;         /* BE_CAP_* */
	/* A file block: the largest value the store keeps as one unit
	 * (the embedded engine: one overflow page, 4,068 bytes with 4 KiB
	 * pages); the fs layer cuts files into blocks of this size.  Fixed
	 * for the life of a store (it is in every file's key layout). */
	size_t block_size;
	size_t max_key;         /* longest key of a tree */
} be_caps;

/* ---- lifecycle ---- */

typedef struct be_options {
	size_t cache_pages;     /* memory cache in 4 KiB units (0: the store's default) */
	int readonly;           /* nothing is written, recovery (if any) in memory */
	int quiet;              /* no progress or recovery messages */
	int progress;           /* a long recovery shows how far it is on a terminal */
	int background;         /* housekeeping (checkpoints) in a thread of the store */
	const char *logdir;     /* the embedded store's log is here now */
} be_options;

/* Opens (and recovers) the store named name.  BE_EBADSTORE: not a store,
 * or no implementation claims the name. */
int be_open(const char *name, const be_options *o, be_store **out);
/* Makes a new, empty store named name: EEXIST if there is one (nothing
 * changed).  BE_EINVAL from a store made otherwise: the embedded engine's
 * is made by `tpfs mkfs PATH` through tp.h (be_tp.c has no mkfs). */
int be_mkfs(const char *name, const be_options *o);
/* Makes every committed transaction durable, then closes.  Transactions
 * still open are not committed (the next open rolls them back); their
 * handles must not be used afterwards, nor the trees'. */
static inline int be_close(be_store *s);
static inline const be_caps *be_caps_of(const be_store *s);
/* 1 if this open found the store not closed cleanly and recovered it. */
static inline int be_recovered(be_store *s);
/* Makes every committed transaction durable (BE_COMMIT_LAZY ones). */
static inline int be_sync(be_store *s);
/* Housekeeping now (the embedded engine: a checkpoint, which recycles its
 * log: tried when a call failed with ENOSPC); 0 when there is none. */
static inline int be_checkpoint(be_store *s);
/* Checks the store's own structures (not the file system's); prints a
 * summary to out (may be NULL).  BE_ECORRUPT with the first problem in
 * be_errmsg. */
static inline int be_verify(be_store *s, FILE *out);

/* Privacy: finds every path of the store named name that group or others
 * may access (a store with no local files has none) and calls
 * loose(arg, path, mode, want) for each, want being mode without those
 * bits; with tighten after chmod'ing it to want.  *count: how many.  0;
 * a negative outcome if name is not a store; else a positive errno with
 * the path in be_errmsg(NULL). */
typedef void be_loose_fn(void *arg, const char *path, unsigned mode, unsigned want);
int be_private(const char *name, const char *logdir, int tighten, be_loose_fn *loose, void *arg, unsigned *count);

/* Space: bytes the store may hold in all, and may still take (the
 * embedded store: its file system's, as statvfs says).  0 or an errno. */
static inline int be_space(be_store *s, uint64_t *total, uint64_t *avail);

/* Statistics since open (a store fills what it has; the rest stay 0). */
typedef struct be_stats {
	uint64_t commits, aborts;
	uint64_t aborts_empty; /* of aborts, those that had changed nothing */
	uint64_t log_records, log_bytes, log_flushes, log_fpis;
	uint64_t page_reads, page_writes, cache_hits, cache_misses;
	uint64_t checkpoints, checkpoints_bg;
	uint64_t log_segs_made, log_segs_recycled;
	uint64_t rec_records, rec_redone, rec_losers, rec_undone, rec_ms, rec_cut_bytes;
	uint64_t lock_requests, lock_waits, lock_deadlocks, lock_timeouts;
} be_stats;
static inline void be_stats_get(be_store *s, be_stats *out);

/* The calling thread's message about its last failed call on s (NULL: on
 * its last be_open or be_private). */
const char *be_errmsg(const be_store *s);
/* What an outcome or errno means, in a few words. */
const char *be_strerror(int rc);

/* ---- trees ---- */

enum {
	BE_TREE_CREATE = 1 << 0, /* create it if missing */
	BE_TREE_U64 = 1 << 1,    /* keys are 8-byte little-endian integers (ordered as numbers) */
	BE_TREE_NOLOCK = 1 << 3, /* records are not locked by the store: the caller's lock names cover them */
};
static inline int be_tree_open(be_store *s, const char *name, int flags, be_tree **out);
static inline void be_tree_close(be_tree *tr); /* NULL: nothing */

/* ---- transactions ---- */

/* be_commit flags.  0: durable when it returns.  BE_COMMIT_LAZY: durable
 * at the next be_sync or within the store's interval, but a crash of this
 * process alone (not of the machine) loses nothing that returned: the
 * embedded engine writes its log records (unsynced) before returning.
 * A store whose every commit is durable ignores the flag. */
enum { BE_COMMIT_LAZY = 2 };
static inline int be_begin(be_store *s, be_txn **out);
/* Applies the transaction atomically, then frees it (whatever the
 * result).  Fails -- applying nothing -- with BE_EROLLBACK after a
 * BE_EDEADLOCK or BE_ETIMEOUT in it, with BE_EDEADLOCK when a validating
 * store finds what it read changed, or a positive errno (ENOSPC, EIO). */
static inline int be_commit(be_txn *t, int flags);
/* A durable commit (flags 0) that keeps the transaction's locks whose
 * names start with keep (kplen bytes; 0: all) until it is durable, then
 * calls held(arg) while they are still held (not if the commit failed),
 * then releases them: for a caller that shows the commit outside the
 * store (a cache) and must show nothing a crash could take back.  A
 * validating store calls held after the commit is durable. */
static inline int be_commit_held(be_txn *t, const void *keep, size_t kplen, void (*held)(void *arg), void *arg);
/* Discards every change of t, releases its locks, frees it. */
static inline int be_abort(be_txn *t);
/* An id, unique among the store's transactions of this open. */
static inline uint64_t be_txn_id(const be_txn *t);

/* ---- locks (BE_CAP_LOCKS; with BE_CAP_VALIDATE all succeed at once and
 * report nothing held) ----
 * Names are byte strings (1..512 bytes) chosen by the caller.  Strict
 * two-phase: held until commit or abort (be_unlock: an S or X of a name
 * the transaction changed nothing under).  Modes, weakest first; a
 * request of a mode held or covered returns at once. */
enum { BE_LOCK_IS = 1, BE_LOCK_IX, BE_LOCK_S, BE_LOCK_SIX, BE_LOCK_X };
/* 0 when granted; BE_EDEADLOCK (a victim: only abort is left),
 * BE_ETIMEOUT (be_lock_timeout's bound passed, or be_lock_cancel). */
static inline int be_lock(be_txn *t, const void *name, size_t len, int mode);
static inline int be_unlock(be_txn *t, const void *name, size_t len);
/* t's later lock waits end with BE_ETIMEOUT after ms (0: never). */
static inline void be_lock_timeout(be_txn *t, uint32_t ms);
/* How many locks t holds; the id of a transaction t waits for (0: none). */
static inline size_t be_lock_count(be_txn *t);
static inline uint64_t be_lock_waits_for(be_txn *t);
/* The mode t holds name in, 0 if none. */
static inline int be_lock_held(be_txn *t, const void *name, size_t len);
/* Ends t's current lock wait (be_lock returns BE_ETIMEOUT); 1 if t was
 * waiting. */
static inline int be_lock_cancel(be_txn *t);

/* ---- records ----
 * t == NULL: a read outside every transaction: no lock, no validation,
 * the latest committed state (or newer: with locks, the engine shows
 * changes of open transactions the caller's names do not guard). */
/* *vlen gets the whole value's length; at most cap bytes are copied (cap
 * 0: whether the key exists, and its length).  BE_ENOTFOUND. */
static inline int be_get(be_txn *t, be_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
/* be_put flags.  BE_NOOVERWRITE: EEXIST if the key exists.  BE_ORDERED:
 * a value of whole blocks may be written out of place, before the
 * commit, instead of logged (the engine's ordered data; a cluster store's
 * objects): a commit that survives a crash has it, one that does not
 * leaves no trace.  BE_PATCH: a hint that the value is an old one of the
 * same length changed in a few bytes.  The flags are hints except
 * BE_NOOVERWRITE: the record afterwards is the same. */
enum { BE_NOOVERWRITE = 1 << 0, BE_ORDERED = 1 << 2, BE_PATCH = 1 << 3 };
static inline int be_put(be_txn *t, be_tree *tr, const void *key, size_t klen, const void *val, size_t vlen, int flags);
/* BE_ENOTFOUND if there is no such key. */
static inline int be_del(be_txn *t, be_tree *tr, const void *key, size_t klen);
/* A hint that the keys lo..hi will be read soon.  No lock, no result. */
static inline void be_prefetch(be_tree *tr, const void *lo, size_t lolen, const void *hi, size_t hilen);

/* ---- cursors: positioned by key, so concurrent changes never lose
 * their place; what be_cursor_get gives stays valid until the next call
 * on the cursor.  A cursor of t == NULL reads as be_get(NULL) does. ---- */
enum { BE_SEEK_GE = 0, BE_SEEK_GT, BE_FIRST = 4, BE_LAST };
static inline int be_cursor_open(be_txn *t, be_tree *tr, be_cursor **out);
/* BE_ENOTFOUND: no such record (the cursor is then unpositioned). */
static inline int be_cursor_seek(be_cursor *c, const void *key, size_t klen, int how);
static inline int be_cursor_next(be_cursor *c);
static inline int be_cursor_get(be_cursor *c, const void **key, size_t *klen, const void **val, size_t *vlen);
static inline void be_cursor_close(be_cursor *c); /* NULL: nothing */

/* ---- for implementations: the table each store fills (be_tp.c) ---- */
struct be_ops {
	const char *scheme; /* "NAME" of NAME://...; NULL: plain paths (the default store) */
	int (*open)(const char *name, const be_options *o, be_store **out);
	int (*mkfs)(const char *name, const be_options *o); /* NULL: made otherwise */
	int (*private_)(const char *name, const char *logdir, int tighten, be_loose_fn *loose, void *arg,
			unsigned *count);
	const char *(*errmsg)(void);
	int (*close)(be_store *s);
	const be_caps *(*caps)(const be_store *s);
	int (*recovered)(be_store *s);
	int (*sync)(be_store *s);
	int (*checkpoint)(be_store *s);
	int (*verify)(be_store *s, FILE *out);
	void (*stats)(be_store *s, be_stats *out);
	int (*space)(be_store *s, uint64_t *total, uint64_t *avail);
	int (*tree_open)(be_store *s, const char *name, int flags, be_tree **out);
	void (*tree_close)(be_tree *tr);
	int (*begin)(be_store *s, be_txn **out);
	int (*commit)(be_txn *t, int flags);
	int (*commit_held)(be_txn *t, const void *keep, size_t kplen, void (*held)(void *arg), void *arg);
	int (*abort)(be_txn *t);
	uint64_t (*txn_id)(const be_txn *t);
	int (*lock)(be_txn *t, const void *name, size_t len, int mode);
	int (*unlock)(be_txn *t, const void *name, size_t len);
	void (*lock_timeout)(be_txn *t, uint32_t ms);
	size_t (*lock_count)(be_txn *t);
	uint64_t (*lock_waits_for)(be_txn *t);
	int (*lock_held)(be_txn *t, const void *name, size_t len);
	int (*lock_cancel)(be_txn *t);
	int (*get)(be_txn *t, be_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
	int (*put)(be_txn *t, be_tree *tr, const void *key, size_t klen, const void *val, size_t vlen, int flags);
	int (*del)(be_txn *t, be_tree *tr, const void *key, size_t klen);
	void (*prefetch)(be_tree *tr, const void *lo, size_t lolen, const void *hi, size_t hilen);
	int (*cursor_open)(be_txn *t, be_tree *tr, be_cursor **out);
	int (*cursor_seek)(be_cursor *c, const void *key, size_t klen, int how);
	int (*cursor_next)(be_cursor *c);
	int (*cursor_get)(be_cursor *c, const void **key, size_t *klen, const void **val, size_t *vlen);
	void (*cursor_close)(be_cursor *c);
};

/* The dispatch: one indirect call each (inline, so the fs layer's calls
 * cost what they did plus that). */
static inline int be_close(be_store *s) { return s->ops->close(s); }
static inline const be_caps *be_caps_of(const be_store *s) { return s->ops->caps(s); }
static inline int be_recovered(be_store *s) { return s->ops->recovered(s); }
static inline int be_sync(be_store *s) { return s->ops->sync(s); }
static inline int be_checkpoint(be_store *s) { return s->ops->checkpoint(s); }
static inline int be_verify(be_store *s, FILE *out) { return s->ops->verify(s, out); }
static inline void be_stats_get(be_store *s, be_stats *out) { s->ops->stats(s, out); }
static inline int be_space(be_store *s, uint64_t *total, uint64_t *avail) { return s->ops->space(s, total, avail); }
static inline int be_tree_open(be_store *s, const char *name, int flags, be_tree **out)
{
	return s->ops->tree_open(s, name, flags, out);
}
static inline void be_tree_close(be_tree *tr)
{
	if (tr)
		tr->ops->tree_close(tr);
}
static inline int be_begin(be_store *s, be_txn **out) { return s->ops->begin(s, out); }
static inline int be_commit(be_txn *t, int flags) { return t->ops->commit(t, flags); }
static inline int be_commit_held(be_txn *t, const void *keep, size_t kplen, void (*held)(void *arg), void *arg)
{
	return t->ops->commit_held(t, keep, kplen, held, arg);
}
static inline int be_abort(be_txn *t) { return t->ops->abort(t); }
static inline uint64_t be_txn_id(const be_txn *t) { return t->ops->txn_id(t); }
static inline int be_lock(be_txn *t, const void *name, size_t len, int mode)
{
	return t->ops->lock(t, name, len, mode);
}
static inline int be_unlock(be_txn *t, const void *name, size_t len) { return t->ops->unlock(t, name, len); }
static inline void be_lock_timeout(be_txn *t, uint32_t ms) { t->ops->lock_timeout(t, ms); }
static inline size_t be_lock_count(be_txn *t) { return t->ops->lock_count(t); }
static inline uint64_t be_lock_waits_for(be_txn *t) { return t->ops->lock_waits_for(t); }
static inline int be_lock_held(be_txn *t, const void *name, size_t len) { return t->ops->lock_held(t, name, len); }
static inline int be_lock_cancel(be_txn *t) { return t->ops->lock_cancel(t); }
static inline int be_get(be_txn *t, be_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	return tr->ops->get(t, tr, key, klen, val, cap, vlen);
}
static inline int be_put(be_txn *t, be_tree *tr, const void *key, size_t klen, const void *val, size_t vlen,
			 int flags)
{
	return tr->ops->put(t, tr, key, klen, val, vlen, flags);
}
static inline int be_del(be_txn *t, be_tree *tr, const void *key, size_t klen)
{
	return tr->ops->del(t, tr, key, klen);
}
static inline void be_prefetch(be_tree *tr, const void *lo, size_t lolen, const void *hi, size_t hilen)
{
	tr->ops->prefetch(tr, lo, lolen, hi, hilen);
}
static inline int be_cursor_open(be_txn *t, be_tree *tr, be_cursor **out) { return tr->ops->cursor_open(t, tr, out); }
static inline int be_cursor_seek(be_cursor *c, const void *key, size_t klen, int how)
{
	return c->ops->cursor_seek(c, key, klen, how);
}
static inline int be_cursor_next(be_cursor *c) { return c->ops->cursor_next(c); }
static inline int be_cursor_get(be_cursor *c, const void **key, size_t *klen, const void **val, size_t *vlen)
{
	return c->ops->cursor_get(c, key, klen, val, vlen);
}
static inline void be_cursor_close(be_cursor *c)
{
	if (c)
		c->ops->cursor_close(c);
}

#endif
