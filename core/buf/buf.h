/*
 * buf -- the buffer pool: fixed-size pages of the page file cached in
 * frames, pin/unpin with S/X latches, CLOCK replacement, STEAL and
 * NO-FORCE, the WAL rule on every page write, page LSN and checksum.
 *
 * Every page starts with a BUF_HDR-byte header owned by this module:
 *     0  4  CRC-32C of bytes 4..page_size-1 (written by buf, checked on read)
 *     4  2  page type (set by the page's owner, through operations)
 *     6  2  reserved
 *     8  8  page LSN: the last log record applied to the page
 * An all-zero page (never written) is valid: type 0, LSN 0.
 */
#ifndef TP_BUF_H
#define TP_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "log.h"

typedef struct buf_pool buf_pool;
typedef struct buf_page buf_page;

#define BUF_HDR 16u
/* Page numbers above this are rejected (2^40 pages: 4 PiB of 4 KiB pages;
 * well below where page * page_size overflows). */
#define BUF_MAX_PAGES (1ull << 40)

/* buf_get flags */
enum {
	BUF_S = 0,           /* shared latch */
	BUF_X = 1 << 0,      /* exclusive latch: needed to change the page */
	BUF_NOREAD = 1 << 1, /* the caller rewrites the whole page: do not read it */
	BUF_REBUILD = 1 << 2, /* a page failing its checksum reads as zeros (LSN 0):
				for redo of records that rebuild whole pages */
	BUF_ONCE = 1 << 3,    /* on a miss: a page of a stream, used once (ordered
				data): its frame comes from a ring of frames such
				pages cycle through (B10), not from the whole pool */
	BUF_DATA = 1 << 4     /* on a miss: a page of bulk data, copied out by its
				reader (an overflow page): its frame comes from
				the read-ahead ring (B8), which keeps a page that
				is used again, not from the whole pool */
};

/* Set-up */
int buf_open(io_file *f, log_mgr *lg, uint32_t page_size, size_t frames, int readonly, buf_pool **out);
/* Frees the pool without writing anything (tp_close flushes first). */
void buf_close(buf_pool *bp);

/* Pages */
/* Pins and latches page pgno.  A checksum failure is TP_ECORRUPT with a
 * message naming the file and page; the data is never returned. */
int buf_get(buf_pool *bp, uint64_t pgno, int flags, buf_page **out);
void buf_put(buf_pool *bp, buf_page *pg);
/* Asks for page pgno to be read into the kernel's cache in the background
 * if the pool does not hold it (io_willneed): a later buf_get of it then
 * copies from memory instead of waiting for the disk.  A hint: it pins,
 * reads and returns nothing. */
void buf_prefetch(buf_pool *bp, uint64_t pgno);
unsigned char *buf_data(buf_page *pg);
uint64_t buf_pgno(const buf_page *pg);
uint64_t buf_page_lsn(const buf_page *pg);
/* Marks the X-latched page dirty before a change is logged for it; lsn
 * (the log's end now, at or before the record to come) becomes its recovery
 * LSN if it was clean.  Marking first means a checkpoint can never miss a
 * page whose record it precedes (B6). */
void buf_dirty(buf_pool *bp, buf_page *pg, uint64_t lsn);
/* Whether buf_dirty of the X-latched page would change nothing (dirty
 * already, no saved checksum to forget): then it need not be called, and
 * the pool's mutex is not taken.  (A frame's flags change only under its
 * latch -- write-back holds S -- so the caller's X latch keeps them still.) */
int buf_dirty_already(const buf_page *pg);
/* The X-latched page now reflects the record at lsn. */
void buf_set_lsn(buf_page *pg, uint64_t lsn);
/* B12: whether every byte of the latched page can be rebuilt from the log
 * (from a full-page image or an operation that set the whole page, and the
 * records after it).  Not known, so 0, for a page read from disk.  A change
 * logged as a byte range to a page that holds bytes no record has (ordered
 * data) must log a full-page image first (txn_update_imaged): a torn write
 * of the page, or a barrier that skips it, would otherwise lose them. */
void buf_set_logged(buf_pool *bp, buf_page *pg, int logged);
int buf_logged(buf_pool *bp, buf_page *pg);
/* The dirty, X-latched page now holds ordered bytes (not logged, and not
 * rebuildable) that are not written yet; buf_unwritten tells until it is
 * written.  Such a page must not be X-latched again before that: the log's
 * barrier skips a page it finds X-latched (buf_write_unlogged), and would
 * let a commit become durable without its bytes. */
void buf_mark_ordered(buf_pool *bp, buf_page *pg);
int buf_unwritten(buf_pool *bp, buf_page *pg);

/* Writing back */
/* Writes every dirty page (each after the log is durable up to its LSN)
 * and syncs the page file. */
int buf_flush_all(buf_pool *bp);
/* Writes now, without the WAL rule (B1), each listed page that is in the
 * pool, dirty, and still has the LSN given: pages no log record describes
 * (ordered data, op.h).  Runs of consecutive pages go in one write; the list
 * is sorted in place.  Then buf_sync makes the writes durable. */
typedef struct buf_unlogged {
	uint64_t pgno, lsn;
} buf_unlogged;
int buf_write_unlogged(buf_pool *bp, buf_unlogged *pages, size_t n);
int buf_sync(buf_pool *bp);
/* Makes sure the page file has disk space for pages [0, pages), growing it
 * ahead by a margin (io_reserve): ENOSPC here, where the caller can still
 * roll back, rather than at a write-back, where it panics the log (B5,
 * B14).  Unless rollback, BUF_ROLLBACK_BYTES more must have space too: the
 * last pages of a full page file are left for rollbacks (whose undo may
 * split a B-tree page), so a full disk never stops an abort. */
#define BUF_ROLLBACK_BYTES (1u << 20)
int buf_reserve(buf_pool *bp, uint64_t pages, int rollback);
/* Reserves the disk blocks of pages [first, first+n) below the file's end
 * again (they may be holes, buf_punch): before a page there is handed out
 * (B14).  ENOSPC when the disk cannot give them. */
int buf_refill(buf_pool *bp, uint64_t first, uint64_t n);
/* Gives the blocks of pages [first, first+n) back to the file system (a
 * hole: they read as zeros; durable at the next buf_sync, io_punch).  The
 * caller makes sure nothing can need their bytes (alloc.c A4).  ENOTSUP:
 * the file system has no holes. */
int buf_punch(buf_pool *bp, uint64_t first, uint64_t n);
/* 1 if the pool holds pgno dirty, pinned or being read: not to be punched. */
int buf_held_dirty(buf_pool *bp, uint64_t pgno);
/* Whether the page file could not grow the last time it had to (ENOSPC):
 * the disk is full.  Cleared when it grows again. */
int buf_space_short(buf_pool *bp);
/* Calls fn for every dirty page with its recovery LSN (checkpoints). */
int buf_dirty_pages(buf_pool *bp, void (*fn)(void *ctx, uint64_t pgno, uint64_t rec_lsn), void *ctx);

/* Statistics and checks */
typedef struct buf_stats {
	uint64_t reads, writes, hits, misses;
} buf_stats;
void buf_stats_get(buf_pool *bp, buf_stats *s);
size_t buf_pinned(buf_pool *bp);
uint32_t buf_page_size(const buf_pool *bp);
/* Whole pages in the page file now. */
int buf_file_pages(buf_pool *bp, uint64_t *pages);

#endif
