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
	const char *logdir;      /* at creation: keep the log there */
	int readonly;            /* inspect: no recovery, no writes at all */
	int quiet;               /* no progress or recovery messages */
} tp_options;

void tp_options_init(tp_options *o);

/* Stores */
int tp_mkfs(const char *store, const tp_options *o);
int tp_open(const char *store, const tp_options *o, tp_env **out);
/* Checkpoints and closes.  Transactions still open are not committed: the
 * next open rolls them back.  Their handles must not be used afterwards. */
int tp_close(tp_env *env);
/* Closes without flushing or checkpointing, as if the process died (tests). */
void tp_crash_close(tp_env *env);
int tp_checkpoint(tp_env *env);
/* Makes every committed transaction durable (commits already are; this is
 * for transactions committed with TP_COMMIT_NOSYNC). */
int tp_sync(tp_env *env);

/* Transactions */
enum { TP_COMMIT_NOSYNC = 1 }; /* durable at the next log flush, not at return */
int tp_begin(tp_env *env, tp_txn **out);
int tp_commit(tp_txn *t, int flags);
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

/* Pages: fixed-size, tp_page_body() usable bytes each.  Page 0 is the
 * store's root page, allocated at creation, for the caller's own roots. */
uint32_t tp_page_body(const tp_env *env);
int tp_page_alloc(tp_txn *t, uint16_t type, uint64_t *pgno);
int tp_page_free(tp_txn *t, uint64_t pgno);
int tp_page_read(tp_env *env, uint64_t pgno, uint32_t off, void *buf, uint32_t len);
int tp_page_write(tp_txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len);
int tp_page_allocated(tp_env *env, uint64_t pgno, int *allocated);

/* Errors */
const char *tp_strerror(int rc);
const char *tp_errmsg(void);

/* Statistics since open, and what recovery did at open. */
typedef struct tp_stats {
	uint64_t commits, aborts;
	uint64_t log_records, log_bytes, log_flushes, log_fpis;
	uint64_t page_reads, page_writes, cache_hits, cache_misses;
	uint64_t checkpoints;
	uint64_t rec_records;   /* records scanned by recovery */
	uint64_t rec_redone;    /* records redone */
	uint64_t rec_losers;    /* transactions rolled back */
	uint64_t rec_undone;    /* records undone */
	uint64_t rec_ms;        /* recovery time */
	uint64_t rec_cut_bytes; /* torn log tail discarded */
} tp_stats;
void tp_stats_get(tp_env *env, tp_stats *s);

/* Inspection: prints every log record from LSN from (0: the log start) in
 * readable form, without recovering or changing anything. */
#include <stdio.h>
int tp_logdump(const char *store, FILE *out, uint64_t from);

/* For tests: pages pinned right now (0 between calls). */
size_t tp_debug_pinned(tp_env *env);

#endif
