/*
 * log -- the write-ahead log: LSNs, checksummed records with per-transaction
 * back-chains, preallocated segment files, group commit, scans.
 *
 * An LSN is a byte offset into the log stream; segment i of size S holds
 * LSNs [i*S, (i+1)*S) in file `log.<i as 16 hex digits>`, whose first
 * LOG_SEG_HDR bytes are a header.  LSN 0 means "none".  The layouts of
 * segment headers, records and the durable mark are at the top of log.c.
 */
#ifndef TP_LOG_H
#define TP_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef struct log_mgr log_mgr;
typedef struct log_scan log_scan;

#define LOG_SEG_HDR 512u
#define LOG_REC_HDR 64u
#define LOG_NOPAGE UINT64_MAX

/* Record flags */
enum {
	LOG_CLR = 1 << 0, /* compensation: redo-only, undo continues at undo_next */
	LOG_RESERVE = 1 << 1, /* may use the spare segment when no new one can be made
				 (rollbacks, checkpoints: so that a full disk never
				 stops an abort); not stored */
};

/* A record as callers see it. */
typedef struct log_rec {
	uint64_t lsn;       /* its own LSN (set by log_put) */
	uint64_t prev_lsn;  /* previous record of the same transaction, or 0 */
	uint64_t txid;      /* 0 for records of no transaction */
	uint64_t pgno;      /* page changed, or LOG_NOPAGE */
	uint64_t undo_next; /* CLRs: next record to undo; else 0 */
	uint16_t type;      /* operation id (op/ops.def); 0 is the log's padding */
	uint16_t flags;     /* LOG_CLR */
	uint32_t len;       /* payload bytes */
	const void *data;   /* payload */
} log_rec;

typedef struct log_config {
	const char *dir;     /* directory of the segment files */
	uint64_t seg_size;   /* bytes per segment, multiple of 4096 */
	uint8_t uuid[16];    /* the store's: every segment header carries it */
	int readonly;        /* never write: no tail repair, no segment creation */
	int quiet;           /* no messages on stderr */
	uint32_t spares;     /* recycled segments kept ahead of the end (0: 2) */
	int writer;          /* a thread of the log writes buffers past half full
				(log.c L12); 0: the appender that fills one does */
	uint64_t durable_floor; /* every record below this LSN is known to have
				   been durable (the last checkpoint's): damage
				   below it is never taken for a torn tail (L15) */
	int inspect;         /* with readonly: damage (L15) ends the log where
				it is found instead of failing the open;
				log_damage() says what it was */
	uint64_t discard_after; /* 0; else the administrator accepts losing the
				   log from this LSN (a record's start) on: it is
				   cut there and the cut records are kept aside
				   (read-only: in memory only) */
} log_config;

/* Set-up */
/* Makes the first segment (and one spare) in an empty directory. */
int log_create(const log_config *cfg);
/* Opens the log whose oldest needed record is at start, finds its end, and
 * cuts a torn tail at the last whole record (saying how much was cut);
 * damage that a crash cannot explain fails with TP_ECORRUPT, changing
 * nothing (log.c L15). */
int log_open(const log_config *cfg, uint64_t start, log_mgr **out);
int log_close(log_mgr *lg);

/* Appending */
/* Appends r (r->lsn is set); not durable until log_flush covers it. */
int log_put(log_mgr *lg, log_rec *r);
/* Appends r, a change to page image pg (page_size bytes) whose current LSN
 * is page_lsn.  If page_lsn is older than the full-page horizon (set by a
 * checkpoint), a full image of the page (type fpi_type) is appended first,
 * atomically with r: redo can then rebuild a torn page.  *fpi_lsn is its
 * LSN, or 0 when none was needed. */
int log_put_page(log_mgr *lg, log_rec *r, const void *pg, uint32_t page_size,
		 uint64_t page_lsn, uint16_t fpi_type, uint64_t *fpi_lsn);
/* Sets the full-page horizon to the current end and returns it. */
uint64_t log_set_horizon(log_mgr *lg);

/* Durability */
/* Returns once every record with LSN <= lsn is durable.  Concurrent callers
 * share one write+sync (group commit). */
int log_flush(log_mgr *lg, uint64_t lsn);
/* The same for a commit: a group-commit leader may first wait, at most
 * half a recent flush time, for other open transactions to join. */
int log_commit_flush(log_mgr *lg, uint64_t lsn);
/* Returns once every record with LSN <= lsn has been written to the
 * segment files, not synced (log.c L19): a crash of the process alone then
 * loses none of them; a crash of the machine may, until log_flush covers
 * them.  Concurrent callers share one write. */
int log_write(log_mgr *lg, uint64_t lsn);
/* Sets the write barrier: fn(ctx) is called before any log bytes are
 * written to a file (a flush or a spill of a full buffer), without the log's
 * mutex, by the thread that writes them; the write waits for it, and a
 * failure panics the log (L7).  The transaction manager makes ordered data
 * pages durable there (L10).  fn must not append or flush. */
void log_set_barrier(log_mgr *lg, int (*fn)(void *ctx), void *ctx);
/* Counts open transactions (+1 at begin, -1 at end) for group commit. */
void log_active(log_mgr *lg, int delta);
uint64_t log_end(log_mgr *lg);      /* LSN the next record gets */
uint64_t log_durable(log_mgr *lg);  /* every byte below this is durable */
/* cfg->inspect: the damage log_open found (the message it would have
 * failed with), or NULL. */
const char *log_damage(const log_mgr *lg);
uint64_t log_start(log_mgr *lg);    /* oldest LSN kept */
/* Bytes of segment files the log may still make before it only reuses
 * recycled ones: up to cfg->spares segments ahead of the one its end is
 * in, less those already there. */
uint64_t log_space_ahead(log_mgr *lg);
/* The oldest LSN whose segment files are all still present: below
 * log_start, records recovery no longer needs (inspection only). */
uint64_t log_oldest(log_mgr *lg);
/* Recycles the segments wholly below keep (they must be unneeded). */
int log_truncate(log_mgr *lg, uint64_t keep);
/* A full disk: makes the segment the end is in and the n - 1 after it
 * where they are missing (ENOSPC: those made stay).  With three, a
 * checkpoint taken once the end enters the second frees the first for
 * reuse before ordinary appends run out of room (L8). */
int log_prepare(log_mgr *lg, uint32_t n);
/* Whether the last segment the log tried to make could not be made for
 * lack of disk space (cleared when one is made). */
int log_space_short(log_mgr *lg);

/* Panic: the first failed write or sync of the log or of a page makes the
 * state on disk unknown; every later append, flush or page write fails with
 * TP_EPANIC until the store is reopened (and recovered).  what names the
 * failed action in the message on stderr (NULL: no message). */
void log_panic(log_mgr *lg, int rc, const char *what);
int log_panicked(log_mgr *lg);

/* Reading */
/* Reads the record at lsn; *buf is malloc'ed and holds r->data. */
int log_read(log_mgr *lg, uint64_t lsn, log_rec *r, void **buf);
/* Forward scan from from (a record's LSN); next returns TP_ENOTFOUND at the
 * end.  r->data stays valid until the next call. */
int log_scan_open(log_mgr *lg, uint64_t from, log_scan **out);
int log_scan_next(log_scan *s, log_rec *r);
/* Backward scan: the record before the last one returned (or before the end
 * of the log when none was returned yet). */
int log_scan_prev(log_scan *s, log_rec *r);
void log_scan_close(log_scan *s);

/* Statistics */
typedef struct log_stats {
	uint64_t records, bytes, flushes, syncs, fpis, cut_bytes, gathers;
	uint64_t segs_made;     /* new zero-filled segment files (seg_make) */
	uint64_t segs_recycled; /* old segments renamed to a future index */
} log_stats;
void log_stats_get(log_mgr *lg, log_stats *s);

#endif
