/*
 * log -- write-ahead log: append, group commit, segments, scans, tail repair.
 *
 * Design
 *   The log is one stream of bytes addressed by LSN.  Segment i of size S
 *   covers LSNs [i*S, (i+1)*S) and lives in file dir/log.<i in 16 hex
 *   digits>, preallocated to S bytes of real zero blocks when it is made, so
 *   that a commit's write+fdatasync never changes a file's size (on the
 *   machines measured that costs 119 us instead of 219 us).  Records never
 *   span segments: the tail of a segment too short for the next record is
 *   padding (a record of type 0 when at least a header fits, else implicit).
 *
 *   Appends go to an in-memory buffer under lg->mu.  log_flush makes a
 *   prefix durable; one thread at a time writes and syncs (the flusher) while
 *   the others wait on lg->cv for a flush that covers their LSN (group
 *   commit).  The flusher swaps the buffer for the spare one, so appends go
 *   on while it writes.  Only bytes past the durable point are ever written:
 *   durable records are never rewritten, so a torn write cannot reach them.
 *
 *   Unneeded segments are recycled (header rewritten under the old name,
 *   then renamed to a future index), or removed when cfg->spares exist
 *   (tp_open asks for as many as a checkpoint interval fills, so that in a
 *   steady state appends make no new segment: making one writes a whole
 *   segment of zeros and syncs while lg->mu is held).
 *
 * Segment header (LOG_SEG_HDR = 512 bytes, at offset 0 of each file)
 *     0  8  magic "TPFSLOG1"
 *     8  4  format version (1)
 *    12  4  reserved (0)
 *    16  8  segment index i
 *    24  8  segment size S
 *    32 16  store uuid
 *    48 ..  zero
 *   508  4  CRC-32C of bytes 0..507
 *
 * Record (8-byte aligned; LOG_REC_HDR = 64 bytes of header, then payload)
 *     0  4  CRC-32C of bytes 4..63 and the payload
 *     4  4  size: header + payload + padding to 8, in bytes
 *     8  8  lsn: the record's own LSN (a stale record from a recycled
 *           segment or an abandoned tail never matches its position)
 *    16  8  back: LSN of the record before it in the stream (backward scan)
 *    24  8  prev: previous record of the same transaction, or 0
 *    32  8  txid, or 0
 *    40  8  pgno, or LOG_NOPAGE
 *    48  8  undo_next (CLRs)
 *    56  2  type (0: padding to the end of the segment)
 *    58  2  flags
 *    60  4  payload length
 *
 * Durable mark (LOG_SEG_HDR bytes, file dir/durable, rewritten in place)
 *     0  8  magic "TPFSDURA"
 *     8  4  version (1)
 *    12  4  reserved (0)
 *    16  8  LSN: every byte of the log below it was durable when written
 *    24 16  store uuid
 *    40 ..  zero
 *   508  4  CRC-32C of bytes 0..507
 *
 * Invariants (each rule is its first sentence; the lines under it say why)
 *   L1  Records are appended in LSN order, and a record's LSN is its
 *       position in the log stream.
 *       A reader finds a record by its LSN without an index.
 *   L2  durable <= written <= end, and every byte below durable has been
 *       synced.
 *       What a commit is told is durable is on disk.
 *   L3  Bytes below durable are never written with other values.
 *       W2 of the pages relies on them; a torn rewrite could otherwise
 *       destroy a commit.  The bytes of a partly filled last sector are
 *       written again with the same values by the next durable write (L11),
 *       as the page cache's write-back of a 4 KiB page always did: a sector
 *       is written whole, and old or new it holds them.
 *   L4  A record is valid iff its CRC matches, its lsn equals its position
 *       and it fits in its segment, and the log ends at the first invalid
 *       one.
 *       A torn tail is found without a length written anywhere else.
 *   L5  After a tail is cut, the cut bytes are zeroed before anything new
 *       is appended.
 *       No stale valid-looking record can then follow a new one.
 *   L6  Every segment file at or above the start segment carries a valid
 *       header for its own index and this store's uuid.
 *       A segment of another store or a misnamed one is never read as ours.
 *   L7  The first failed write or sync panics the log: nothing more is
 *       appended or flushed until the store is reopened.
 *       After a failed sync the disk's state is unknown; retrying the sync
 *       could report success for lost bytes.
 *   L8  An ordinary record is appended only while a spare segment exists
 *       after the one it ends in.
 *       (A reserve record may have entered the spare when no new one could
 *       be made.)  So when the disk fills, an append fails cleanly (ENOSPC,
 *       nothing changed) and the spare is left for rollbacks and
 *       checkpoints (LOG_RESERVE).
 *   L9  An unsynced segment is synced before any later segment is written.
 *       A full buffer is written without a sync (a commit or the WAL rule
 *       syncs it later); syncing in segment order keeps L4's "valid after
 *       invalid means corruption".
 *   L10 Before any bytes are written to a segment file, the barrier set by
 *       log_set_barrier has returned 0, after the flusher took those bytes.
 *       Whatever was registered with it (ord.c N1) before a record was
 *       appended is durable before that record can reach the disk.
 *   L11 A flush that must be durable, inside one segment with no spilled
 *       unsynced bytes in it (L9), is one io_pwrite_durable of whole
 *       sectors from the aligned copy dx.
 *       Direct I/O with RWF_DSYNC is one request to the disk instead of a
 *       page write-back and a flush.  The first sector's bytes below the
 *       range are the ones written before it (kept in dx from the last such
 *       write, or read back), the last one's past it zeros -- bytes past
 *       the end are never valid records (L4).  Where the backend cannot
 *       (the crash simulator; a file system or device that refuses direct
 *       I/O), the range is written and synced as before.  Any other write
 *       of segment bytes forgets dx_tail.
 *   L12 With cfg->writer (tp_open's opt.background), a buffer past half
 *       full is handed to the log's writer thread (when no flush is under
 *       way) and the appender goes on in the spare.
 *       Appends do not wait for the buffer's copy into the page cache,
 *       which at a high commit rate without sync took 10-25% of a
 *       transaction's time on one thread.  The writer writes it as a
 *       spilled buffer (L9), as the flusher; the barrier (L10) runs there
 *       too, and log_set_barrier waits until no flush is under way before
 *       it changes it.  Without cfg->writer the log starts no thread: a
 *       single-threaded program keeps glibc's single-thread fast paths (a
 *       second thread, even an idle one, made the bulk load 10% slower),
 *       and the crash simulator sees the same writes in the same order
 *       every time.
 *   L13 A segment file is made or renamed into place only under lg->mu,
 *       and only at an index where no file is.
 *       Appenders make the segments they enter (seg_make, under mu) while
 *       a checkpoint recycles old ones (log_truncate), and both take the
 *       index past the highest one present.  A recycled segment renamed
 *       over one an appender had just made and written in cut those
 *       records out of the log (the next open found a hole and refused, or
 *       lost the last commits when the hole was the end).
 *   L14 The durable mark (file dir/durable, below) never names an LSN
 *       beyond what is durable.
 *       It is written, without a sync, only after the sync that made its
 *       LSN durable returned, and before the committers of that sync are
 *       told.  A power cut may leave an older mark or a torn one (its CRC
 *       then fails and it is ignored): both claim less, never more.
 *   L15 Only bytes a crash can tear are cut as a torn tail.
 *       At open, the first invalid record at pos ends the log only if
 *       nothing shows that pos was durable: pos must be at or above the
 *       mark (L14) and above the durable floor the caller knows (the last
 *       checkpoint record), no valid record may start a later segment
 *       (L9), and the segment pos lies in must exist (a segment is made,
 *       named and its directory synced before any record enters it, L18).
 *       Anything else is damage: the open fails with TP_ECORRUPT naming
 *       the file, the offset, the LSN, what was found there and what shows
 *       it was durable, and writes nothing -- unless the caller accepts the
 *       loss (cfg->discard_after), which cuts the log there, keeps a copy
 *       of what it cut beside the segments (log.<index>.discarded-<LSN>,
 *       never replacing an earlier one), and lowers the mark.
 *   L16 A read-write open syncs the segments from the mark to the end, then
 *       writes the mark, before it appends.
 *       The bytes found past the mark may have been in the page cache only,
 *       after a crash of the process alone; the log's durable point is its
 *       end from then on.
 *   L17 A read-only log never writes a file.
 *       Records appended to it (the CLRs of a recovery done in memory, tp.c
 *       E2) stay in the buffer, which grows instead of being written, and a
 *       flush only moves the durable point in memory.
 *   L18 No record enters a segment before the segment's name is durable.
 *       seg_make syncs the directory before it returns; a segment that
 *       log_truncate recycled (renamed ahead) is entered only after a sync
 *       of the directory covers its rename (lg->named), done by the
 *       appender itself when the checkpoint's own sync has not come yet.
 *       Otherwise a power cut could lose the rename of a segment holding
 *       durable records (and L15 then reports the segment missing).
 *   L19 log_write returns once every record <= lsn is in the segment files
 *       (written, not synced).
 *       A crash of the process alone -- kill -9, a segfault, the OOM killer
 *       -- then loses none of them, since the operating system holds them;
 *       a crash of the machine may.  It is a flush without the sync, shared
 *       by concurrent callers as group commit is (a sync flush under way
 *       covers its waiters too).  Its bytes are written as a spilled
 *       buffer's are: after the barrier (L10), the segment before synced
 *       first (L9), only bytes past `written` (L3); the next sync flush
 *       syncs them (without L11 in that segment).  They lie past the
 *       durable mark (L14), so damage to them may be cut as a torn tail
 *       (L15).
 */
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io.h"
#include "tp.h"
#include "util.h"

#define SEG_MAGIC "TPFSLOG1"
#define MARK_MAGIC "TPFSDURA"
#define MARK_NAME "durable"
#define SEG_VERSION 1u
#define NSEGF 16     /* open segment files kept */
#define SPARES 2     /* recycled segments kept ahead, unless configured */
#define BUF_MIN (1u << 20)

typedef struct segf {
	uint64_t idx;
	io_file *f; /* NULL: slot free */
} segf;

struct log_mgr {
	char *dir;
	uint64_t seg;         /* segment size S */
	uint8_t uuid[16];
	int readonly, quiet;

	pthread_mutex_t mu;   /* everything below */
	pthread_cond_t cv;    /* flush finished */
	uint64_t end;         /* next LSN (stored atomically: log_end reads it without mu) */
	uint64_t last;        /* LSN of the last record, 0 if none */
	uint64_t horizon;     /* full-page-image horizon */
	unsigned char *buf;   /* bytes [buf_lsn, end) */
	size_t cap;
	uint64_t buf_lsn;
	unsigned char *fbuf;  /* the flusher's buffer: [f_lsn, f_end) */
	size_t fcap;
	uint64_t f_lsn, f_end;
	int flushing;         /* a flusher is writing fbuf */
	int wjob;             /* L12: fbuf was handed to the writer thread */
	int wstop;            /* L12: the writer thread is to exit */
	int wrunning;         /* L12: the writer thread exists */
	pthread_t writer;     /* L12 */
	pthread_cond_t wcv;   /* L12: a job for the writer, or its stop */
	int gathering;        /* a flusher waits for its group to form */
	int nwait;            /* committers waiting for a flush */
	int active;           /* open transactions (atomic; log_active) */
	pthread_cond_t gcv;   /* a committer joined the group */
	uint64_t flush_ns;    /* moving average of write+sync time */
	int last_group;       /* committers covered by the last flush */
	uint64_t unsynced;    /* 1 + a segment holding written, unsynced bytes (the flusher's; set under mu) */
	unsigned char *dx;    /* L11: the flusher's aligned copy for durable writes (DX_CAP bytes) */
	uint64_t dx_tail;     /* L11: LSN of the sector dx[0..512) holds, as last written; UINT64_MAX: none */
	int dx_off;           /* L11: the backend or the file system cannot: never again */
	uint64_t written;     /* bytes below are in the files */
	uint64_t durable;     /* bytes below are synced (L2) */
	uint64_t start;       /* oldest LSN kept */
	uint64_t max_seg;     /* highest segment file present */
	uint64_t named;       /* L18: segments up to this index have durable names */
	uint64_t spares;      /* recycled segments kept ahead (cfg->spares) */
	int panic;            /* L7: sticky */
	io_file *mark;        /* L14: the durable mark file; NULL: none (read-only, absent) */
	uint64_t mark_lsn;    /* L14: the LSN it was last written with (the flusher's) */
	int mark_failed;      /* L14: a write of it failed (said once; it then only lags) */
	char *damage;         /* L15: cfg->inspect: the damage the open found, or NULL */
	int short_space;      /* atomic: the last seg_make failed with ENOSPC */
	int (*barrier)(void *); /* L10; set before use, then read only */
	void *barrier_ctx;
	segf files[NSEGF];
	log_stats st;
};

struct log_scan {
	log_mgr *lg;
	uint64_t pos;       /* next LSN to read forward */
	uint64_t cur;       /* LSN of the last record returned, 0 if none */
	int started;
	unsigned char *rec; /* the last record read */
	size_t rcap;
};

static inline uint64_t align8(uint64_t x) { return (x + 7) & ~(uint64_t)7; }

/* The first record position at or after pos (skips segment headers and
 * tails too short for a header). */
static uint64_t norm(const log_mgr *lg, uint64_t pos)
{
	uint64_t off = pos % lg->seg;
	if (off < LOG_SEG_HDR)
		return pos - off + LOG_SEG_HDR;
	if (lg->seg - off < LOG_REC_HDR)
		return pos - off + lg->seg + LOG_SEG_HDR;
	return pos;
}

static void seg_name(const log_mgr *lg, uint64_t idx, char *out, size_t n)
{
	snprintf(out, n, "%s/log.%016" PRIx64, lg->dir, idx);
}

/* ---- segment headers ---- */

static void seg_hdr_make(const log_mgr *lg, uint64_t idx, unsigned char *h)
{
	memset(h, 0, LOG_SEG_HDR);
	memcpy(h, SEG_MAGIC, 8);
	util_put32(h + 8, SEG_VERSION);
	util_put64(h + 16, idx);
	util_put64(h + 24, lg->seg);
	memcpy(h + 32, lg->uuid, 16);
	util_put32(h + 508, util_crc32c(0, h, 508));
}

/* 0, or TP_ECORRUPT/TP_EVERSION with a message naming the file. */
static int seg_hdr_check(const log_mgr *lg, uint64_t idx, const unsigned char *h, const char *path)
{
	if (memcmp(h, SEG_MAGIC, 8) != 0)
		return util_err(TP_ECORRUPT, "%s: not a tpfs log segment (bad magic)", path);
	if (util_get32(h + 508) != util_crc32c(0, h, 508))
		return util_err(TP_ECORRUPT, "%s: segment header checksum mismatch", path);
	if (util_get32(h + 8) > SEG_VERSION)
		return util_err(TP_EVERSION, "%s: log format version %" PRIu32 " is newer than this tpfs supports (%u)",
				path, util_get32(h + 8), SEG_VERSION);
	if (util_get64(h + 16) != idx)
		return util_err(TP_ECORRUPT, "%s: header names segment %" PRIu64 ", not %" PRIu64, path,
				util_get64(h + 16), idx);
	if (util_get64(h + 24) != lg->seg)
		return util_err(TP_ECORRUPT, "%s: segment size %" PRIu64 " differs from the store's %" PRIu64, path,
				util_get64(h + 24), lg->seg);
	if (memcmp(h + 32, lg->uuid, 16) != 0)
		return util_err(TP_ECORRUPT, "%s: segment belongs to another store (uuid mismatch)", path);
	return 0;
}

/* ---- the durable mark (L14) ---- */

static void mark_path(const log_mgr *lg, char *out, size_t n) { snprintf(out, n, "%s/" MARK_NAME, lg->dir); }

/* Writes lsn into the mark file f (no sync: L14 needs none). */
static int mark_put(const log_mgr *lg, io_file *f, uint64_t lsn)
{
	unsigned char h[LOG_SEG_HDR];
	memset(h, 0, sizeof h);
	memcpy(h, MARK_MAGIC, 8);
	util_put32(h + 8, 1);
	util_put64(h + 16, lsn);
	memcpy(h + 24, lg->uuid, 16);
	util_put32(h + 508, util_crc32c(0, h, 508));
	return io_pwrite(f, h, sizeof h, 0);
}

/* The LSN the mark file f names, or 0 when it names none (never written,
 * torn, another store's): a mark that cannot be trusted claims nothing. */
static uint64_t mark_get(const log_mgr *lg, io_file *f)
{
	unsigned char h[LOG_SEG_HDR];
	size_t got;
	if (!f || io_pread(f, h, sizeof h, 0, &got) != 0 || got != sizeof h)
		return 0;
	if (memcmp(h, MARK_MAGIC, 8) != 0 || util_get32(h + 508) != util_crc32c(0, h, 508) ||
	    memcmp(h + 24, lg->uuid, 16) != 0)
		return 0;
	return util_get64(h + 16);
}

/* L14: the flusher records that everything below lsn is durable (after
 * the sync that made it so).  A failure is said once and otherwise
 * ignored: the mark then lags, which claims less, never more. */
static void mark_durable(log_mgr *lg, uint64_t lsn)
{
	if (!lg->mark || lsn <= lg->mark_lsn)
		return;
	int rc = mark_put(lg, lg->mark, lsn);
	if (rc && !lg->mark_failed) {
		lg->mark_failed = 1;
		if (!lg->quiet)
			fprintf(stderr, "tpfs: %s: cannot write the log's durable mark (%s): damage at the end of the "
					"log may be taken for a torn tail after a crash\n",
				io_path(lg->mark), strerror(rc));
	}
	if (!rc)
		lg->mark_lsn = lsn;
}

/* ---- segment files ---- */

static io_file *segf_find(log_mgr *lg, uint64_t idx)
{
	for (int i = 0; i < NSEGF; i++)
		if (lg->files[i].f && lg->files[i].idx == idx)
			return lg->files[i].f;
	return NULL;
}

static void segf_forget(log_mgr *lg, uint64_t idx)
{
	for (int i = 0; i < NSEGF; i++)
		if (lg->files[i].f && lg->files[i].idx == idx) {
			io_close(lg->files[i].f);
			lg->files[i].f = NULL;
		}
}

/* Opens segment idx (cached).  ENOENT if it does not exist. */
static int segf_get(log_mgr *lg, uint64_t idx, io_file **out)
{
	char path[4096];
	io_file *f;
	int rc, victim = -1;

	if ((*out = segf_find(lg, idx)) != NULL)
		return 0;
	seg_name(lg, idx, path, sizeof path);
	if ((rc = io_open(path, lg->readonly ? IO_RDONLY : 0, &f)) != 0)
		return rc;
	for (int i = 0; i < NSEGF; i++) {
		if (!lg->files[i].f) {
			victim = i;
			break;
		}
		/* evict the oldest segment: the least likely to be read, and never
		 * one the flusher may be writing or has left unsynced (L9).  (Not
		 * "below the durable point": spills write and sync segments
		 * without moving it, and a writer that logs faster than it
		 * commits then found every cached segment above it: EMFILE, a
		 * panicked log, EIO on a disk far from full.) */
		uint64_t k = lg->files[i].idx;
		int busy = (lg->flushing && k >= lg->f_lsn / lg->seg && k <= lg->f_end / lg->seg) ||
			   (lg->unsynced && k == lg->unsynced - 1);
		if (!busy && (victim < 0 || k < lg->files[victim].idx))
			victim = i;
	}
	if (victim < 0) {
		io_close(f);
		return util_err(EMFILE, "%s: too many log segments open", path);
	}
	if (lg->files[victim].f)
		io_close(lg->files[victim].f);
	lg->files[victim].idx = idx;
	lg->files[victim].f = f;
	*out = f;
	return 0;
}

/* Makes segment idx: zero-filled, with its header, durable, then named. */
static int seg_make(log_mgr *lg, uint64_t idx)
{
	char tmp[4096], path[4096];
	unsigned char h[LOG_SEG_HDR];
	io_file *f = NULL;
	int rc;

	snprintf(tmp, sizeof tmp, "%s/log.tmp", lg->dir);
	seg_name(lg, idx, path, sizeof path);
	(void)io_unlink(tmp);
	if ((rc = io_open(tmp, IO_CREATE | IO_EXCL, &f)) != 0)
		goto err;
	if ((rc = io_preallocate(f, lg->seg)) != 0)
		goto err;
	seg_hdr_make(lg, idx, h);
	if ((rc = io_pwrite(f, h, sizeof h, 0)) != 0 || (rc = io_sync(f)) != 0)
		goto err;
	io_close(f);
	f = NULL;
	if ((rc = io_rename(tmp, path)) != 0 || (rc = io_sync_dir(lg->dir)) != 0)
		goto err;
	if (idx > lg->max_seg)
		lg->max_seg = idx;
	if (idx > lg->named)
		lg->named = idx; /* L18: its directory was just synced */
	lg->st.segs_made++;
	__atomic_store_n(&lg->short_space, 0, __ATOMIC_RELAXED);
	return 0;
err:
	if (f)
		io_close(f);
	if (rc == ENOSPC)
		__atomic_store_n(&lg->short_space, 1, __ATOMIC_RELAXED);
	return util_err(rc, "%s: cannot create log segment: %s", path, strerror(rc));
}

/* Ensures segment idx exists and that one more is ready after it. */
static int seg_ensure(log_mgr *lg, uint64_t idx)
{
	int rc;
	for (uint64_t i = idx; i <= idx + 1; i++) {
		char path[4096];
		seg_name(lg, i, path, sizeof path);
		if (io_exists(path, NULL) == ENOENT && (rc = seg_make(lg, i)) != 0)
			return rc;
	}
	return 0;
}

/* Segment idx is about to be entered: it and a spare after it must exist
 * (L8).  A reserve record may enter idx even when the spare cannot be made:
 * the spare it then uses was made earlier, so rollbacks and checkpoints go
 * on when the disk is full. */
static int seg_ready(log_mgr *lg, uint64_t idx, int reserve)
{
	int rc = seg_ensure(lg, idx);
	if (!rc && idx > lg->named) { /* L18: recycled, its rename not yet synced */
		if ((rc = io_sync_dir(lg->dir)) != 0)
			return util_err(rc, "%s: cannot sync the log directory: %s", lg->dir, strerror(rc));
		lg->named = lg->max_seg;
	}
	if (rc && reserve) {
		char path[4096];
		seg_name(lg, idx, path, sizeof path);
		if (io_exists(path, NULL) == 0)
			return 0;
	}
	return rc;
}

/* ---- record encoding ---- */

static void rec_encode(unsigned char *p, uint64_t size, uint64_t back, const log_rec *r)
{
	util_put32(p + 4, (uint32_t)size);
	util_put64(p + 8, r->lsn);
	util_put64(p + 16, back);
	util_put64(p + 24, r->prev_lsn);
	util_put64(p + 32, r->txid);
	util_put64(p + 40, r->pgno);
	util_put64(p + 48, r->undo_next);
	util_put16(p + 56, r->type);
	util_put16(p + 58, r->flags & ~LOG_RESERVE);
	util_put32(p + 60, r->len);
	if (r->len)
		memcpy(p + LOG_REC_HDR, r->data, r->len);
	if (size > LOG_REC_HDR + (uint64_t)r->len)
		memset(p + LOG_REC_HDR + r->len, 0, size - LOG_REC_HDR - r->len);
	util_put32(p, util_crc32c(0, p + 4, LOG_REC_HDR - 4 + r->len));
}

/* L4: is the record at pos (avail bytes readable at p) whole and valid?
 * Returns its size, or 0.  The header alone is checked when hdr_only. */
static uint64_t rec_valid(const log_mgr *lg, const unsigned char *p, uint64_t pos, size_t avail, int hdr_only)
{
	if (avail < LOG_REC_HDR)
		return 0;
	uint64_t size = util_get32(p + 4), len = util_get32(p + 60);
	if (util_get64(p + 8) != pos || size < LOG_REC_HDR || size % 8 || size > lg->seg - pos % lg->seg ||
	    LOG_REC_HDR + len > size)
		return 0;
	if (hdr_only)
		return size;
	if (avail < LOG_REC_HDR + len)
		return 0;
	if (util_get32(p) != util_crc32c(0, p + 4, LOG_REC_HDR - 4 + len))
		return 0;
	return size;
}

static void rec_decode(const unsigned char *p, log_rec *r, uint64_t *back)
{
	r->lsn = util_get64(p + 8);
	if (back)
		*back = util_get64(p + 16);
	r->prev_lsn = util_get64(p + 24);
	r->txid = util_get64(p + 32);
	r->pgno = util_get64(p + 40);
	r->undo_next = util_get64(p + 48);
	r->type = util_get16(p + 56);
	r->flags = util_get16(p + 58);
	r->len = util_get32(p + 60);
	r->data = p + LOG_REC_HDR;
}

/* ---- appending ---- */

static int flush_locked(log_mgr *lg, uint64_t lsn, int gather, int sync);
static int hand_off(log_mgr *lg, uint64_t fill);

/* Appends r at the end (mu held; a full buffer is flushed, which lets
 * other appenders in, so the position is computed after room is made). */
static int put_locked(log_mgr *lg, log_rec *r)
{
	uint64_t size = align8(LOG_REC_HDR + (uint64_t)r->len);
	uint64_t pos, pad;
	int rc;

	if (size > lg->seg - LOG_SEG_HDR)
		return util_err(TP_EINVAL, "log record of %" PRIu64 " bytes exceeds the segment size", size);
	for (;;) {
		if (lg->panic)
			return util_err(TP_EPANIC, "log %s: an earlier write failed; reopen the store to recover",
					lg->dir);
		pos = lg->end;
		pad = lg->seg - pos % lg->seg < size ? lg->seg - pos % lg->seg : 0;
		/* pad, next header, record, and the gap norm() may add after it */
		uint64_t need = pad + (pad ? LOG_SEG_HDR : 0) + size + LOG_SEG_HDR + LOG_REC_HDR;
		if (lg->end - lg->buf_lsn + need <= lg->cap)
			break;
		if (lg->end == lg->buf_lsn || lg->readonly) { /* a record larger than the buffer; or L17 */
			size_t ncap = lg->cap;
			while (ncap < lg->end - lg->buf_lsn + need)
				ncap *= 2;
			unsigned char *nb = realloc(lg->buf, ncap);
			if (!nb)
				return ENOMEM;
			lg->buf = nb;
			lg->cap = ncap;
			break;
		}
		if (hand_off(lg, 1)) /* L12 */
			continue;
		if ((rc = flush_locked(lg, lg->last, 0, 0)) != 0) /* spill: no sync */
			return rc;
	}
	/* every check that can fail comes before the buffer changes (W6) */
	uint64_t start = pad ? norm(lg, pos + pad) : pos, end = norm(lg, start + size);
	if (!lg->readonly && pad && (rc = seg_ready(lg, start / lg->seg, r->flags & LOG_RESERVE)) != 0)
		return rc;
	if (!lg->readonly && end / lg->seg != start / lg->seg &&
	    (rc = seg_ready(lg, end / lg->seg, r->flags & LOG_RESERVE)) != 0)
		return rc;
	/* L8: a reserve record may have entered the spare segment when the
	 * next could not be made; ordinary records then need that next one,
	 * or they would use up the room rollbacks are promised */
	if (!lg->readonly && !(r->flags & LOG_RESERVE) && lg->max_seg <= end / lg->seg &&
	    (rc = seg_ensure(lg, end / lg->seg)) != 0)
		return util_err(rc, "%s: cannot create log segment: %s", lg->dir, strerror(rc));
	if (pad) { /* pad to the end of the segment */
		unsigned char *b = lg->buf + (pos - lg->buf_lsn);
		memset(b, 0, pad + LOG_SEG_HDR);
		if (pad >= LOG_REC_HDR) {
			log_rec skip = {.lsn = pos, .pgno = LOG_NOPAGE};
			rec_encode(b, pad, lg->last, &skip);
		}
		pos = start;
		__atomic_store_n(&lg->end, start, __ATOMIC_RELEASE);
	}
	TP_CHECK(pos > lg->last || !lg->last); /* L1: LSNs only grow */
	TP_CHECK(pos >= lg->durable && pos - lg->buf_lsn + size <= lg->cap); /* L3: never below durable */
	r->lsn = pos;
	rec_encode(lg->buf + (pos - lg->buf_lsn), size, lg->last, r);
	lg->last = pos;
	__atomic_store_n(&lg->end, end, __ATOMIC_RELEASE); /* log_end reads it without mu (txn T6) */
	if (lg->end > pos + size) /* tail too short for a header, and the next segment's header */
		memset(lg->buf + (pos + size - lg->buf_lsn), 0, lg->end - pos - size);
	lg->st.records++;
	lg->st.bytes += size;
	(void)hand_off(lg, lg->cap / 2);
	return 0;
}

int log_put(log_mgr *lg, log_rec *r)
{
	pthread_mutex_lock(&lg->mu);
	int rc = put_locked(lg, r);
	pthread_mutex_unlock(&lg->mu);
	return rc;
}

int log_put_page(log_mgr *lg, log_rec *r, const void *pg, uint32_t page_size, uint64_t page_lsn,
		 uint16_t fpi_type, uint64_t *fpi_lsn)
{
	int rc = 0;
	pthread_mutex_lock(&lg->mu);
	*fpi_lsn = 0;
	if (page_lsn < lg->horizon) {
		log_rec img = {.pgno = r->pgno, .type = fpi_type, .flags = r->flags & LOG_RESERVE, .len = page_size,
			       .data = pg};
		if ((rc = put_locked(lg, &img)) != 0)
			goto out;
		lg->st.fpis++;
		*fpi_lsn = img.lsn;
	}
	rc = put_locked(lg, r);
out:
	pthread_mutex_unlock(&lg->mu);
	return rc;
}

uint64_t log_set_horizon(log_mgr *lg)
{
	pthread_mutex_lock(&lg->mu);
	uint64_t h = lg->horizon = lg->end;
	pthread_mutex_unlock(&lg->mu);
	return h;
}

/* ---- flushing ---- */

/* Writes [a, b) from p to the segment files and syncs them (mu not held).
 * Each segment is synced before the next one is written, so a later
 * segment never holds records while an earlier one lost some: a valid
 * record after a bad one then always means corruption (see log_open). */
static int seg_sync(log_mgr *lg, uint64_t k)
{
	io_file *f;
	pthread_mutex_lock(&lg->mu);
	int rc = segf_get(lg, k, &f);
	pthread_mutex_unlock(&lg->mu);
	if (rc)
		return util_err(rc, "log segment %" PRIu64 ": cannot open: %s", k, strerror(rc));
	if ((rc = io_sync(f)) != 0)
		return util_err(rc, "%s: log sync failed: %s", io_path(f), strerror(rc));
	return 0;
}

/* The flusher's unsynced segment (L9): changed under mu, which segf_get
 * reads it under; the flusher alone changes it, so it reads it freely. */
static void set_unsynced(log_mgr *lg, uint64_t v)
{
	pthread_mutex_lock(&lg->mu);
	lg->unsynced = v;
	pthread_mutex_unlock(&lg->mu);
}

/* L11: [lo, hi) of segment k (LSNs), from p, written and made durable in
 * one call; ENOTSUP: not done, write it the usual way. */
#define DX_CAP (1u << 20)
static int write_durable(log_mgr *lg, io_file *f, uint64_t k, const unsigned char *p, uint64_t lo, uint64_t hi)
{
	const uint64_t A = IO_DIRECT_ALIGN, base = k * lg->seg;
	uint64_t s0 = lo & ~(A - 1), s1 = (hi + A - 1) & ~(A - 1);
	if (lg->dx_off || !io_has_durable_write(f)) {
		lg->dx_off = 1;
		return ENOTSUP;
	}
	if (s1 - s0 > DX_CAP || s1 > base + lg->seg)
		return ENOTSUP;
	if (!lg->dx && posix_memalign((void **)&lg->dx, IO_DIRECT_MEM, DX_CAP) != 0) {
		lg->dx = NULL;
		return ENOTSUP;
	}
	if (s0 < lo && lg->dx_tail != s0) { /* the sector's earlier bytes: read back */
		size_t got;
		if (io_pread(f, lg->dx, lo - s0, s0 - base, &got) != 0 || got != lo - s0)
			return ENOTSUP;
	}
	memcpy(lg->dx + (lo - s0), p, hi - lo);
	memset(lg->dx + (hi - s0), 0, s1 - hi);
	int rc = io_pwrite_durable(f, lg->dx, s1 - s0, s0 - base);
	lg->dx_tail = UINT64_MAX;
	if (rc == ENOTSUP) /* (direct I/O refused: the same for every segment) */
		lg->dx_off = 1;
	if (rc)
		return rc;
	uint64_t last = hi & ~(A - 1); /* the sector the next write starts in */
	if (last < s1)
		memmove(lg->dx, lg->dx + (last - s0), A);
	lg->dx_tail = last;
	return 0;
}

static int write_range(log_mgr *lg, const unsigned char *p, uint64_t a, uint64_t b, int sync)
{
	int rc = 0;
	uint64_t last = b > a ? (b - 1) / lg->seg : 0;

	/* bytes an earlier unsynced write left in a segment before this range
	 * (or all of them, when nothing new is written) are synced first (L9) */
	if (lg->unsynced && (a >= b || lg->unsynced - 1 < a / lg->seg)) {
		if ((rc = seg_sync(lg, lg->unsynced - 1)) != 0)
			return rc;
		set_unsynced(lg, 0);
	}
	for (uint64_t k = a / lg->seg; a < b && k <= last; k++) {
		uint64_t lo = a > k * lg->seg + LOG_SEG_HDR ? a : k * lg->seg + LOG_SEG_HDR;
		uint64_t hi = b < (k + 1) * lg->seg ? b : (k + 1) * lg->seg;
		io_file *f;
		if (lo >= hi)
			continue;
		pthread_mutex_lock(&lg->mu);
		rc = segf_get(lg, k, &f);
		pthread_mutex_unlock(&lg->mu);
		if (rc)
			return util_err(rc, "log segment %" PRIu64 ": cannot open: %s", k, strerror(rc));
		if (sync && lg->unsynced != k + 1) { /* L11 */
			if ((rc = write_durable(lg, f, k, p + (lo - a), lo, hi)) == 0)
				continue;
			if (rc != ENOTSUP)
				return util_err(rc, "%s: log write failed: %s", io_path(f), strerror(rc));
		}
		lg->dx_tail = UINT64_MAX;
		if ((rc = io_pwrite(f, p + (lo - a), hi - lo, lo - k * lg->seg)) != 0)
			return util_err(rc, "%s: log write failed: %s", io_path(f), strerror(rc));
		io_point("log.flush.written");
		if (!sync && k == last) { /* a buffer spilled: synced by the next flush */
			set_unsynced(lg, k + 1);
			break;
		}
		if ((rc = io_sync(f)) != 0)
			return util_err(rc, "%s: log sync failed: %s", io_path(f), strerror(rc));
		if (lg->unsynced == k + 1)
			set_unsynced(lg, 0);
	}
	return 0;
}

/* The leader of a group commit waits, briefly, for the other open
 * transactions to join (mu held): while fewer committers wait than there
 * are open transactions, up to half the recent flush time.  Alone it does
 * not wait at all.  This replaces LIBTP's fixed group and wait thresholds:
 * the group is the set of transactions open now, the delay follows the
 * disk. */
static void gather_group(log_mgr *lg)
{
	int active = __atomic_load_n(&lg->active, __ATOMIC_RELAXED);
	/* only when the last group was a group: a lone committer beside idle
	 * transactions (a long one, a shell's) never waits */
	if (active <= 1 || lg->nwait + 1 >= active || lg->last_group <= 1)
		return;
	uint64_t delay = lg->flush_ns / 2;
	if (delay > 2000000)
		delay = 2000000;
	struct timespec until = util_deadline_ns(delay);
	lg->gathering = 1;
	while (lg->nwait + 1 < __atomic_load_n(&lg->active, __ATOMIC_RELAXED) &&
	       pthread_cond_timedwait(&lg->gcv, &lg->mu, &until) == 0)
		;
	lg->gathering = 0;
	lg->st.gathers++;
}

void log_set_barrier(log_mgr *lg, int (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&lg->mu);
	while (lg->flushing) /* L12: a flusher may be calling the old one */
		pthread_cond_wait(&lg->cv, &lg->mu);
	lg->barrier = fn;
	lg->barrier_ctx = ctx;
	pthread_mutex_unlock(&lg->mu);
}

void log_active(log_mgr *lg, int delta) { __atomic_add_fetch(&lg->active, delta, __ATOMIC_RELAXED); }

/* Becomes the flusher (mu held, no flush under way): the buffer's bytes
 * [buf_lsn, end) become fbuf, and appends go on in the spare. */
static void take_buffer(log_mgr *lg)
{
	unsigned char *b = lg->buf;
	size_t bc = lg->cap;
	lg->buf = lg->fbuf;
	lg->cap = lg->fcap;
	lg->fbuf = b;
	lg->fcap = bc;
	lg->f_lsn = lg->buf_lsn;
	lg->f_end = lg->end;
	lg->buf_lsn = lg->end;
	lg->flushing = 1;
}

/* The flusher writes fbuf (and syncs it, when sync) and ends the flush
 * (mu held on entry and exit, not during the write). */
static int write_taken(log_mgr *lg, int sync)
{
	const unsigned char *b = lg->fbuf;
	uint64_t a = lg->f_lsn, e = lg->f_end;
	int (*barrier)(void *) = lg->barrier;
	void *bctx = lg->barrier_ctx;
	pthread_mutex_unlock(&lg->mu);
	uint64_t t0 = util_now_ns();
	int rc = 0;
	if (e > a && barrier && (rc = barrier(bctx)) != 0) /* L10 */
		util_err(rc, "log %s: ordered data could not be made durable before the log write: %s", lg->dir,
			 util_strerror(rc));
	if (!rc)
		rc = write_range(lg, b, a, e, sync);
	if (!rc && sync)
		mark_durable(lg, e); /* L14: before the committers are told */
	uint64_t took = util_now_ns() - t0;
	pthread_mutex_lock(&lg->mu);
	if (sync)
		lg->flush_ns = lg->flush_ns ? (7 * lg->flush_ns + took) / 8 : took;
	lg->flushing = 0;
	lg->st.flushes++;
	if (rc) {
		lg->panic = 1;
		pthread_cond_broadcast(&lg->cv);
		return rc;
	}
	TP_CHECK(e >= lg->written && e <= lg->end); /* L2 */
	lg->written = e;
	if (sync) {
		TP_CHECK(e >= lg->durable); /* L2: the durable point only moves forward */
		lg->durable = e;
		lg->st.syncs++;
	}
	pthread_cond_broadcast(&lg->cv);
	return 0;
}

/* flush_locked's sync: make room (a spill), or cover lsn in the files
 * (L19), or make it durable. */
enum { FL_SPILL = 0, FL_SYNC = 1, FL_WRITE = 2 };

/* Group commit (mu held on entry and exit).  gather: a commit, which may
 * wait for others to join its flush. */
static int flush_locked(log_mgr *lg, uint64_t lsn, int gather, int sync)
{
	if (lg->readonly) { /* L17: nothing is written; the buffer holds it all */
		lg->durable = lg->end;
		return 0;
	}
	for (;;) {
		if (lg->panic)
			return util_err(TP_EPANIC, "log %s: an earlier write failed; reopen the store to recover",
					lg->dir);
		if (sync == FL_SYNC && (lg->durable > lsn || lg->durable >= lg->end))
			return 0;
		if (sync == FL_WRITE && (lg->written > lsn || lg->written >= lg->end))
			return 0; /* L19 */
		if (sync == FL_SPILL && lg->buf_lsn == lg->end)
			return 0; /* the buffer is empty: room was made */
		if (lg->flushing || lg->gathering) {
			if (sync == FL_SPILL) { /* another flusher takes the buffer: wait for it once */
				pthread_cond_wait(&lg->cv, &lg->mu);
				return 0;
			}
			/* (a writer waits as a committer: a gathering leader's
			 * sync covers it, so it need not wait for it to join) */
			lg->nwait++;
			if (lg->gathering)
				pthread_cond_signal(&lg->gcv);
			pthread_cond_wait(&lg->cv, &lg->mu);
			lg->nwait--;
			continue;
		}
		if (gather)
			gather_group(lg);
		if (sync == FL_SYNC)
			lg->last_group = lg->nwait + 1;
		take_buffer(lg);
		int rc = write_taken(lg, sync == FL_SYNC); /* L19: FL_WRITE writes as a spill (L9, L10) */
		if (rc || sync == FL_SPILL)
			return rc;
	}
}

/* L12: the writer thread writes the buffers handed to it, unsynced. */
static void *writer_main(void *arg)
{
	log_mgr *lg = arg;
	pthread_mutex_lock(&lg->mu);
	for (;;) {
		if (lg->wjob) {
			lg->wjob = 0;
			(void)write_taken(lg, 0); /* a failure panics the log (L7) */
			continue;
		}
		if (lg->wstop)
			break;
		pthread_cond_wait(&lg->wcv, &lg->mu);
	}
	pthread_mutex_unlock(&lg->mu);
	return NULL;
}

/* L12: hands the buffer to the writer if it holds at least fill bytes and
 * no flush is under way (mu held).  Returns whether it did. */
static int hand_off(log_mgr *lg, uint64_t fill)
{
	if (!lg->wrunning || lg->flushing || lg->gathering || lg->panic || lg->end - lg->buf_lsn < fill)
		return 0;
	take_buffer(lg);
	lg->wjob = 1;
	pthread_cond_signal(&lg->wcv);
	return 1;
}

int log_flush(log_mgr *lg, uint64_t lsn)
{
	pthread_mutex_lock(&lg->mu);
	int rc = flush_locked(lg, lsn, 0, 1);
	pthread_mutex_unlock(&lg->mu);
	return rc;
}

int log_commit_flush(log_mgr *lg, uint64_t lsn)
{
	pthread_mutex_lock(&lg->mu);
	int rc = flush_locked(lg, lsn, 1, 1);
	pthread_mutex_unlock(&lg->mu);
	return rc;
}

/* L19 */
int log_write(log_mgr *lg, uint64_t lsn)
{
	pthread_mutex_lock(&lg->mu);
	int rc = flush_locked(lg, lsn, 0, FL_WRITE);
	pthread_mutex_unlock(&lg->mu);
	return rc;
}

uint64_t log_end(log_mgr *lg)
{
	/* every store of it is atomic (under mu), a release: what an appender
	 * did before its append is seen by a thread that read the end it made
	 * (txn T6) */
	return __atomic_load_n(&lg->end, __ATOMIC_ACQUIRE);
}

const char *log_damage(const log_mgr *lg) { return lg->damage; }

uint64_t log_durable(log_mgr *lg)
{
	pthread_mutex_lock(&lg->mu);
	uint64_t d = lg->durable;
	pthread_mutex_unlock(&lg->mu);
	return d;
}

uint64_t log_start(log_mgr *lg)
{
	pthread_mutex_lock(&lg->mu);
	uint64_t s = lg->start;
	pthread_mutex_unlock(&lg->mu);
	return s;
}

uint64_t log_space_ahead(log_mgr *lg)
{
	pthread_mutex_lock(&lg->mu);
	uint64_t want = lg->end / lg->seg + lg->spares, n = want > lg->max_seg ? want - lg->max_seg : 0;
	if (lg->readonly)
		n = 0;
	pthread_mutex_unlock(&lg->mu);
	return n * lg->seg;
}

uint64_t log_oldest(log_mgr *lg)
{
	uint64_t start = log_start(lg), k = start / lg->seg;
	char path[4096];
	for (; k > 0; k--) { /* back while the segment before is still a file */
		seg_name(lg, k - 1, path, sizeof path);
		if (io_exists(path, NULL) != 0)
			break;
	}
	uint64_t first = k * lg->seg + LOG_SEG_HDR; /* the start's own segment holds older records too */
	return first < start ? first : start;
}

void log_panic(log_mgr *lg, int rc, const char *what)
{
	pthread_mutex_lock(&lg->mu);
	if (!lg->panic && !lg->quiet && what)
		fprintf(stderr, "tpfs: %s failed (%s); the store needs recovery: reopen it\n", what,
			util_strerror(rc));
	lg->panic = 1;
	pthread_cond_broadcast(&lg->cv);
	pthread_mutex_unlock(&lg->mu);
}

int log_panicked(log_mgr *lg)
{
	pthread_mutex_lock(&lg->mu);
	int p = lg->panic;
	pthread_mutex_unlock(&lg->mu);
	return p;
}

void log_stats_get(log_mgr *lg, log_stats *s)
{
	pthread_mutex_lock(&lg->mu);
	*s = lg->st;
	pthread_mutex_unlock(&lg->mu);
}

/* ---- reading ---- */

/* Copies [pos, pos+len) of the stream into out, from memory or the files.
 * *got is how many bytes exist (short at the end of the log or a segment). */
static int read_bytes(log_mgr *lg, uint64_t pos, void *out, size_t len, size_t *got)
{
	uint64_t seg_end = (pos / lg->seg + 1) * lg->seg;
	io_file *f;
	int rc;

	if (pos + len > seg_end)
		len = seg_end - pos;
	pthread_mutex_lock(&lg->mu);
	if (pos >= lg->buf_lsn && pos < lg->end) {
		size_t n = lg->end - pos < len ? lg->end - pos : len;
		memcpy(out, lg->buf + (pos - lg->buf_lsn), n);
		*got = n;
		pthread_mutex_unlock(&lg->mu);
		return 0;
	}
	if (lg->flushing && pos >= lg->f_lsn && pos < lg->f_end) {
		size_t n = lg->f_end - pos < len ? lg->f_end - pos : len;
		memcpy(out, lg->fbuf + (pos - lg->f_lsn), n);
		*got = n;
		pthread_mutex_unlock(&lg->mu);
		return 0;
	}
	rc = segf_get(lg, pos / lg->seg, &f);
	if (rc == ENOENT) {
		pthread_mutex_unlock(&lg->mu);
		*got = 0;
		return 0;
	}
	if (rc) {
		pthread_mutex_unlock(&lg->mu);
		return rc;
	}
	size_t g;
	rc = io_pread(f, out, len, pos % lg->seg, &g);
	pthread_mutex_unlock(&lg->mu);
	if (rc)
		return util_err(rc, "%s: log read failed: %s", io_path(f), strerror(rc));
	*got = g;
	return 0;
}

/* Reads the record at pos into *p (grown as needed).  Returns its size, 0
 * if no valid record is there (L4), or -errno style via *rc. */
static uint64_t read_rec(log_mgr *lg, uint64_t pos, unsigned char **p, size_t *cap, int *rc)
{
	size_t got;
	uint64_t size;

	*rc = 0;
	if (*cap < LOG_REC_HDR) {
		unsigned char *n = realloc(*p, 4096);
		if (!n) {
			*rc = ENOMEM;
			return 0;
		}
		*p = n;
		*cap = 4096;
	}
	if ((*rc = read_bytes(lg, pos, *p, LOG_REC_HDR, &got)) != 0)
		return 0;
	if (!(size = rec_valid(lg, *p, pos, got, 1)))
		return 0;
	if (size > *cap) {
		unsigned char *n = realloc(*p, size);
		if (!n) {
			*rc = ENOMEM;
			return 0;
		}
		*p = n;
		*cap = size;
	}
	if ((*rc = read_bytes(lg, pos, *p, size, &got)) != 0)
		return 0;
	return rec_valid(lg, *p, pos, got, 0);
}

int log_read(log_mgr *lg, uint64_t lsn, log_rec *r, void **buf)
{
	unsigned char *p = NULL;
	size_t cap = 0;
	int rc;
	if (!read_rec(lg, lsn, &p, &cap, &rc)) {
		free(p);
		return rc ? rc : util_err(TP_ECORRUPT, "log %s: no valid record at LSN %" PRIu64, lg->dir, lsn);
	}
	rec_decode(p, r, NULL);
	*buf = p;
	return 0;
}

int log_scan_open(log_mgr *lg, uint64_t from, log_scan **out)
{
	log_scan *s = calloc(1, sizeof *s);
	if (!s)
		return ENOMEM;
	s->lg = lg;
	s->pos = norm(lg, from);
	*out = s;
	return 0;
}

int log_scan_next(log_scan *s, log_rec *r)
{
	log_mgr *lg = s->lg;
	int rc;
	for (;;) {
		uint64_t end = log_end(lg);
		if (s->pos >= end)
			return TP_ENOTFOUND;
		uint64_t size = read_rec(lg, s->pos, &s->rec, &s->rcap, &rc);
		if (!size)
			return rc ? rc
				  : util_err(TP_ECORRUPT, "log %s: bad record at LSN %" PRIu64 " inside the log",
					     lg->dir, s->pos);
		uint64_t at = s->pos;
		s->pos = norm(lg, at + size);
		rec_decode(s->rec, r, NULL);
		if (r->type == 0) /* padding */
			continue;
		s->cur = at;
		s->started = 1;
		return 0;
	}
}

int log_scan_prev(log_scan *s, log_rec *r)
{
	log_mgr *lg = s->lg;
	uint64_t target, back;
	int rc;

	for (;;) {
		if (!s->started) {
			pthread_mutex_lock(&lg->mu);
			target = lg->last;
			pthread_mutex_unlock(&lg->mu);
			s->started = 1;
		} else {
			if (!s->cur)
				return TP_ENOTFOUND;
			if (!read_rec(lg, s->cur, &s->rec, &s->rcap, &rc))
				return rc ? rc : TP_ECORRUPT;
			rec_decode(s->rec, r, &back);
			target = back;
		}
		if (!target || target < log_start(lg)) {
			s->cur = 0;
			return TP_ENOTFOUND;
		}
		if (!read_rec(lg, target, &s->rec, &s->rcap, &rc))
			return rc ? rc
				  : util_err(TP_ECORRUPT, "log %s: bad record at LSN %" PRIu64 " (backward scan)",
					     lg->dir, target);
		rec_decode(s->rec, r, NULL);
		s->cur = target;
		s->pos = norm(lg, target + util_get32(s->rec + 4));
		if (r->type != 0)
			return 0;
	}
}

void log_scan_close(log_scan *s)
{
	if (!s)
		return;
	free(s->rec);
	free(s);
}

/* ---- create, open, close, truncate ---- */

static int log_alloc(const log_config *cfg, log_mgr **out)
{
	log_mgr *lg = calloc(1, sizeof *lg);
	if (!lg)
		return ENOMEM;
	lg->dx_tail = UINT64_MAX;
	lg->dir = strdup(cfg->dir);
	lg->seg = cfg->seg_size;
	memcpy(lg->uuid, cfg->uuid, 16);
	lg->readonly = cfg->readonly;
	lg->quiet = cfg->quiet;
	lg->spares = cfg->spares ? cfg->spares : SPARES;
	lg->cap = lg->fcap = BUF_MIN > 2 * cfg->seg_size ? 2 * cfg->seg_size : BUF_MIN;
	if (lg->cap < 4 * 65536)
		lg->cap = lg->fcap = 4 * 65536;
	lg->buf = malloc(lg->cap);
	lg->fbuf = malloc(lg->fcap);
	if (!lg->dir || !lg->buf || !lg->fbuf) {
		free(lg->dir);
		free(lg->buf);
		free(lg->fbuf);
		free(lg);
		return ENOMEM;
	}
	util_mutex_init_hot(&lg->mu);
	pthread_cond_init(&lg->cv, NULL);
	util_cond_init_mono(&lg->gcv);
	pthread_cond_init(&lg->wcv, NULL);
	*out = lg;
	return 0;
}

static void log_free(log_mgr *lg)
{
	if (lg->wrunning) { /* L12: after the job it may have */
		pthread_mutex_lock(&lg->mu);
		lg->wstop = 1;
		pthread_cond_signal(&lg->wcv);
		pthread_mutex_unlock(&lg->mu);
		pthread_join(lg->writer, NULL);
	}
	for (int i = 0; i < NSEGF; i++)
		if (lg->files[i].f)
			io_close(lg->files[i].f);
	if (lg->mark)
		io_close(lg->mark);
	pthread_mutex_destroy(&lg->mu);
	pthread_cond_destroy(&lg->cv);
	pthread_cond_destroy(&lg->gcv);
	pthread_cond_destroy(&lg->wcv);
	free(lg->buf);
	free(lg->fbuf);
	free(lg->dx);
	free(lg->dir);
	free(lg->damage);
	free(lg);
}

static int mark_settle(log_mgr *lg, uint64_t mark, uint64_t end);

int log_create(const log_config *cfg)
{
	log_mgr *lg;
	int rc;
	if (cfg->seg_size < 65536 || cfg->seg_size % 4096)
		return util_err(TP_EINVAL, "log segment size %" PRIu64 " must be a multiple of 4096, at least 65536",
				cfg->seg_size);
	if ((rc = log_alloc(cfg, &lg)) != 0)
		return rc;
	lg->start = LOG_SEG_HDR;
	if ((rc = seg_ensure(lg, 0)) == 0)
		rc = mark_settle(lg, 0, LOG_SEG_HDR);
	log_free(lg);
	return rc;
}

/* Lists the segment indexes present in the directory (ascending). */
static int seg_list(const log_mgr *lg, uint64_t **out, size_t *n)
{
	DIR *d = opendir(lg->dir);
	struct dirent *e;
	uint64_t *v = NULL;
	size_t cnt = 0, cap = 0;
	if (!d) {
		int rc = errno;
		return util_err(rc == ENOENT ? TP_EBADSTORE : rc, "%s: cannot open the log directory: %s", lg->dir,
				strerror(rc));
	}
	while ((e = readdir(d)) != NULL) {
		char *endp;
		if (strncmp(e->d_name, "log.", 4) != 0 || strlen(e->d_name) != 20)
			continue;
		uint64_t idx = strtoull(e->d_name + 4, &endp, 16);
		if (*endp)
			continue;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 16;
			uint64_t *nv = realloc(v, cap * sizeof *v);
			if (!nv) {
				free(v);
				closedir(d);
				return ENOMEM;
			}
			v = nv;
		}
		v[cnt++] = idx;
	}
	closedir(d);
	for (size_t i = 1; i < cnt; i++) /* insertion sort: a handful of files */
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			uint64_t t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	*out = v;
	*n = cnt;
	return 0;
}

/* After the log's end at pos: how far do stale or torn bytes reach in its
 * segment (so they can be reported and zeroed, L5), and does the log go on
 * in a later segment (corruption inside the log, not a torn tail)? */
static int tail_examine(log_mgr *lg, uint64_t pos, uint64_t *cut_end, int *continues)
{
	uint64_t base = pos - pos % lg->seg, segend = base + lg->seg;
	size_t len = segend - pos, got;
	unsigned char *p = malloc(len), *q = NULL;
	size_t qcap = 0;
	int rc = 0;

	*cut_end = pos;
	*continues = 0;
	if (!p)
		return ENOMEM;
	if ((rc = read_bytes(lg, pos, p, len, &got)) != 0)
		goto out;
	/* the torn record itself, if its header survived */
	uint64_t sz = rec_valid(lg, p, pos, got, 1);
	if (sz)
		*cut_end = pos + sz;
	/* any later record that still looks whole, and belongs here */
	for (uint64_t o = 8; o + LOG_REC_HDR <= got; o += 8)
		if (util_get64(p + o + 8) == pos + o && (sz = rec_valid(lg, p + o, pos + o, got - o, 0)))
			*cut_end = pos + o + sz;
	/* a valid first record in the next segment means the log went on */
	uint64_t nxt = segend + LOG_SEG_HDR;
	if (read_rec(lg, nxt, &q, &qcap, &rc) && rc == 0)
		*continues = 1;
	if (rc == ENOENT)
		rc = 0;
out:
	free(p);
	free(q);
	return rc;
}

/* What the bytes at pos, where the log stops, hold instead of a record:
 * a phrase for the messages of L15. */
static void bad_rec_why(log_mgr *lg, uint64_t pos, char *why, size_t n)
{
	unsigned char h[LOG_REC_HDR];
	size_t got;
	if (read_bytes(lg, pos, h, sizeof h, &got) != 0 || got < sizeof h) {
		snprintf(why, n, "the file ends before a record header");
		return;
	}
	int zero = 1;
	for (size_t i = 0; i < sizeof h; i++)
		zero &= h[i] == 0;
	uint64_t size = util_get32(h + 4), len = util_get32(h + 60), lsn = util_get64(h + 8);
	if (zero)
		snprintf(why, n, "zeros where the record at LSN %" PRIu64 " was expected", pos);
	else if (lsn != pos)
		snprintf(why, n, "a header naming LSN %" PRIu64 " where the record at LSN %" PRIu64 " was expected", lsn,
			 pos);
	else if (size < LOG_REC_HDR || size % 8 || size > lg->seg - pos % lg->seg || LOG_REC_HDR + len > size)
		snprintf(why, n, "a record of impossible size %" PRIu64 " (payload %" PRIu64 ")", size, len);
	else {
		unsigned char *p = malloc(size);
		if (!p || read_bytes(lg, pos, p, size, &got) != 0 || got < LOG_REC_HDR + len) {
			snprintf(why, n, "a record of %" PRIu64 " bytes that cannot be read whole", size);
		} else
			snprintf(why, n, "a checksum mismatch (stored 0x%08" PRIx32 ", computed 0x%08" PRIx32
					 " over the record's %" PRIu64 " bytes)",
				 util_get32(p), util_crc32c(0, p + 4, LOG_REC_HDR - 4 + len), LOG_REC_HDR + len);
		free(p);
	}
}

/* L15: may the log be cut at pos, where its first invalid record is?  0
 * if so; else TP_ECORRUPT, with a message that names the damage and what
 * shows it was durable.  mark: the durable mark's LSN (L14). */
static int tail_judge(log_mgr *lg, const log_config *cfg, uint64_t pos, uint64_t mark, int continues)
{
	char path[4096], why[256], proof[256];
	uint64_t k = pos / lg->seg;
	seg_name(lg, k, path, sizeof path);
	if (io_exists(path, NULL) == ENOENT) {
		snprintf(why, sizeof why, "the segment file is missing");
		snprintf(proof, sizeof proof, "the log reaches it (a segment exists before any record enters it)");
	} else {
		bad_rec_why(lg, pos, why, sizeof why);
		if (continues)
			snprintf(proof, sizeof proof, "the log goes on in the next segment, which is written only after "
						      "this one was synced");
		else if (pos < cfg->durable_floor)
			snprintf(proof, sizeof proof, "the last checkpoint's record at LSN %" PRIu64
						      " was durable",
				 cfg->durable_floor - 1);
		else if (pos < mark)
			snprintf(proof, sizeof proof, "the log's durable mark says everything below LSN %" PRIu64
						      " was durable",
				 mark);
		else
			return 0;
	}
	return util_err(TP_ECORRUPT,
			"%s, offset %" PRIu64 " (LSN %" PRIu64 "): the log is damaged: found %s, but %s -- not a "
			"torn tail.  Nothing was changed.  To accept losing every change from LSN %" PRIu64
			" on: tpfs recover --discard-after %" PRIu64 " STORE",
			path, pos % lg->seg, pos, why, proof, pos, pos);
}

/* Copies segment file from to file to (the evidence a discard keeps). */
static int seg_copy(log_mgr *lg, const char *from, const char *to)
{
	io_file *a = NULL, *b = NULL;
	unsigned char *buf = malloc(1u << 20);
	int rc;
	if (!buf)
		return ENOMEM;
	if ((rc = io_open(from, IO_RDONLY, &a)) == 0 && (rc = io_open(to, IO_CREATE | IO_EXCL, &b)) == 0) {
		for (uint64_t off = 0; off < lg->seg && !rc; off += 1u << 20) {
			size_t got, len = lg->seg - off < (1u << 20) ? lg->seg - off : (1u << 20);
			if ((rc = io_pread(a, buf, len, off, &got)) == 0)
				rc = io_pwrite(b, buf, len, off);
		}
		if (!rc)
			rc = io_sync(b);
	}
	if (a)
		io_close(a);
	if (b)
		io_close(b);
	free(buf);
	return rc;
}

/* The name segment file path is kept under when a discard from lsn sets
 * it aside: path.discarded-<lsn>, with .2, .3 ... after it should that be
 * taken (evidence is never replaced). */
static void aside_name(const char *path, uint64_t lsn, char *out, size_t n)
{
	snprintf(out, n, "%s.discarded-%" PRIu64, path, lsn);
	for (int i = 2; io_exists(out, NULL) != ENOENT; i++)
		snprintf(out, n, "%s.discarded-%" PRIu64 ".%d", path, lsn, i);
}

/* L15: the administrator accepts losing the log from lsn on (mu not
 * needed: no other thread yet).  The segment holding lsn is copied to
 * log.<index>.discarded-<lsn> and zeroed from lsn on; every later segment
 * is renamed to log.<index>.discarded-<lsn>; the mark is lowered to lsn. */
static int discard_from(log_mgr *lg, uint64_t lsn, const uint64_t *segs, size_t nsegs)
{
	char path[4096], aside[4200];
	uint64_t k = lsn / lg->seg;
	io_file *f;
	int rc;
	seg_name(lg, k, path, sizeof path);
	aside_name(path, lsn, aside, sizeof aside);
	if ((rc = seg_copy(lg, path, aside)) != 0)
		return util_err(rc, "%s: cannot keep a copy of the discarded records: %s", aside, strerror(rc));
	uint64_t off = lsn % lg->seg, len = lg->seg - off;
	unsigned char *z = calloc(1, len);
	if (!z)
		return ENOMEM;
	lg->dx_tail = UINT64_MAX; /* L11 */
	if ((rc = segf_get(lg, k, &f)) == 0 && (rc = io_pwrite(f, z, len, off)) == 0)
		rc = io_sync(f);
	free(z);
	if (rc)
		return util_err(rc, "%s: cannot zero the discarded records: %s", path, strerror(rc));
	for (size_t i = 0; i < nsegs; i++) {
		if (segs[i] <= k)
			continue;
		segf_forget(lg, segs[i]);
		seg_name(lg, segs[i], path, sizeof path);
		aside_name(path, lsn, aside, sizeof aside);
		if ((rc = io_rename(path, aside)) != 0)
			return util_err(rc, "%s: cannot set the segment aside: %s", path, strerror(rc));
	}
	lg->max_seg = k;
	if ((rc = io_sync_dir(lg->dir)) != 0)
		return util_err(rc, "%s: cannot sync the log directory: %s", lg->dir, strerror(rc));
	return 0;
}

/* L16: makes the log durable up to end (segments from the mark's on are
 * synced) and writes the mark, creating it where it is missing. */
static int mark_settle(log_mgr *lg, uint64_t mark, uint64_t end)
{
	char path[4096];
	int rc;
	uint64_t from = mark > lg->start ? mark : lg->start;
	for (uint64_t k = from / lg->seg; from < end && k <= (end - 1) / lg->seg; k++)
		if ((rc = seg_sync(lg, k)) != 0)
			return rc;
	mark_path(lg, path, sizeof path);
	/* the mark is advisory (a missing or older one claims less, L14): a
	 * store on a full disk opens without one rather than not at all */
	if ((!lg->mark && (rc = io_open(path, IO_CREATE, &lg->mark)) != 0) ||
	    (rc = mark_put(lg, lg->mark, end)) != 0 || (rc = io_sync(lg->mark)) != 0) {
		if (!lg->quiet)
			fprintf(stderr, "tpfs: %s: cannot write the log's durable mark (%s): damage at the end of the "
					"log may be taken for a torn tail after a crash\n",
				path, strerror(rc));
		lg->mark_failed = 1;
		return 0;
	}
	lg->mark_lsn = end;
	return 0;
}

int log_open(const log_config *cfg, uint64_t start, log_mgr **out)
{
	log_mgr *lg;
	uint64_t *segs = NULL, pos, size, last = 0;
	size_t nsegs = 0;
	unsigned char *p = NULL, h[LOG_SEG_HDR];
	size_t cap = 0, got;
	char path[4096];
	int rc;

	if ((rc = log_alloc(cfg, &lg)) != 0)
		return rc;
	lg->start = start;
	if ((rc = seg_list(lg, &segs, &nsegs)) != 0)
		goto err;
	/* L6: every segment from the start one on is well formed (those a
	 * discard sets aside need not be) */
	uint64_t sseg = start / lg->seg, dseg = cfg->discard_after ? cfg->discard_after / lg->seg : UINT64_MAX;
	int have_start = 0;
	for (size_t i = 0; i < nsegs; i++) {
		io_file *f;
		if (segs[i] < sseg || segs[i] > dseg)
			continue;
		seg_name(lg, segs[i], path, sizeof path);
		if (segs[i] == sseg)
			have_start = 1;
		if ((rc = segf_get(lg, segs[i], &f)) != 0) {
			rc = util_err(rc, "%s: cannot open: %s", path, strerror(rc));
			goto err;
		}
		if ((rc = io_pread(f, h, sizeof h, 0, &got)) != 0) {
			rc = util_err(rc, "%s: cannot read: %s", path, strerror(rc));
			goto err;
		}
		if (got < sizeof h) {
			rc = util_err(TP_ECORRUPT, "%s: truncated segment (%zu bytes)", path, got);
			goto err;
		}
		if ((rc = seg_hdr_check(lg, segs[i], h, path)) != 0)
			goto err;
		uint64_t fsz;
		if ((rc = io_size(f, &fsz)) != 0)
			goto err;
		if (fsz < lg->seg) {
			rc = util_err(TP_ECORRUPT, "%s: truncated segment (%" PRIu64 " of %" PRIu64 " bytes)", path,
				      fsz, lg->seg);
			goto err;
		}
		lg->max_seg = segs[i];
	}
	lg->named = lg->max_seg; /* L18: what a crash left named is durable now */
	/* L6: no hole between the start segment and the last one present (no
	 * create, recycle or truncation ever leaves one) */
	for (size_t i = 1; i < nsegs; i++)
		if (segs[i] > sseg && segs[i] <= dseg && segs[i - 1] >= sseg && segs[i] != segs[i - 1] + 1) {
			seg_name(lg, segs[i - 1] + 1, path, sizeof path);
			rc = util_err(TP_ECORRUPT, "%s: missing log segment (segments before and after it exist)", path);
			goto err;
		}
	if (!have_start) {
		seg_name(lg, sseg, path, sizeof path);
		rc = util_err(TP_EBADSTORE, "%s: missing log segment (the log is needed from LSN %" PRIu64 ")", path,
			      start);
		goto err;
	}
	/* L14: the mark, read only: a refusal writes nothing */
	mark_path(lg, path, sizeof path);
	if ((rc = io_open(path, IO_RDONLY, &lg->mark)) != 0 && rc != ENOENT) {
		rc = util_err(rc, "%s: cannot open: %s", path, strerror(rc));
		goto err;
	}
	uint64_t mark = mark_get(lg, lg->mark);
	if (lg->mark && !lg->readonly) { /* written by the flusher from here on */
		io_close(lg->mark);
		lg->mark = NULL;
		if ((rc = io_open(path, 0, &lg->mark)) != 0) {
			rc = util_err(rc, "%s: cannot open: %s", path, strerror(rc));
			goto err;
		}
	}
	/* L4: find the end (or the record the administrator discards from) */
	pos = norm(lg, start);
	for (;;) {
		if (cfg->discard_after && pos >= cfg->discard_after)
			break;
		if (!(size = read_rec(lg, pos, &p, &cap, &rc))) {
			if (rc && rc != ENOENT)
				goto err;
			rc = 0;
			break;
		}
		if (util_get16(p + 56) != 0)
			last = pos;
		pos = norm(lg, pos + size);
	}
	uint64_t cut_end;
	int continues;
	if (cfg->discard_after) {
		if (pos != cfg->discard_after || pos < cfg->durable_floor) {
			rc = util_err(TP_EINVAL,
				      "log %s: cannot discard from LSN %" PRIu64 ": %s", lg->dir, cfg->discard_after,
				      pos < cfg->durable_floor ? "the last checkpoint is after it"
				      : pos < cfg->discard_after ? "the log ends before it"
								 : "no record starts there");
			goto err;
		}
		/* what is given up: every byte from pos to the last valid-looking
		 * record, in this segment and the ones after it */
		if ((rc = tail_examine(lg, pos, &cut_end, &continues)) != 0)
			goto err;
		for (size_t i = 0; i < nsegs; i++)
			if (segs[i] > pos / lg->seg && read_rec(lg, segs[i] * lg->seg + LOG_SEG_HDR, &p, &cap, &rc))
				cut_end = (segs[i] + 1) * lg->seg;
		lg->st.cut_bytes = cut_end - pos;
		if (!lg->readonly && (rc = discard_from(lg, pos, segs, nsegs)) != 0)
			goto err;
		mark = pos;
	} else {
		/* a torn tail, or damage (L15)? */
		if ((rc = tail_examine(lg, pos, &cut_end, &continues)) != 0)
			goto err;
		if ((rc = tail_judge(lg, cfg, pos, mark, continues)) != 0) {
			if (!(cfg->inspect && lg->readonly) || rc != TP_ECORRUPT)
				goto err;
			if (!(lg->damage = strdup(util_errmsg()))) { /* the log ends there, for reading */
				rc = ENOMEM;
				goto err;
			}
			rc = 0;
			cut_end = pos;
		}
		lg->st.cut_bytes = cut_end - pos;
		if (cut_end > pos) {
			seg_name(lg, pos / lg->seg, path, sizeof path);
			if (!lg->quiet)
				fprintf(stderr,
					"tpfs: log: torn tail cut at LSN %" PRIu64 " in %s: %" PRIu64
					" bytes discarded (written after LSN %" PRIu64 ", the last known durable point)\n",
					pos, path, cut_end - pos, mark > cfg->durable_floor ? mark : cfg->durable_floor);
			if (!lg->readonly) { /* L5 */
				io_file *f;
				unsigned char *z = calloc(1, cut_end - pos);
				if (!z) {
					rc = ENOMEM;
					goto err;
				}
				lg->dx_tail = UINT64_MAX; /* L11 */
				if ((rc = segf_get(lg, pos / lg->seg, &f)) == 0 &&
				    (rc = io_pwrite(f, z, cut_end - pos, pos % lg->seg)) == 0)
					rc = io_sync(f);
				free(z);
				if (rc) {
					rc = util_err(rc, "%s: cannot zero the torn tail: %s", path, strerror(rc));
					goto err;
				}
			}
		}
	}
	lg->end = lg->buf_lsn = lg->written = lg->durable = pos;
	/* every page on disk now is whole (a clean close or a finished
	 * recovery); from here on, a page's first change logs its image */
	lg->horizon = pos;
	lg->last = last;
	if (!lg->readonly && (rc = seg_ensure(lg, pos / lg->seg)) != 0)
		goto err;
	if (!lg->readonly && (rc = mark_settle(lg, mark, pos)) != 0) /* L16 */
		goto err;
	/* L12: without the thread (not asked for, or none could be made)
	 * appenders write a full buffer themselves, as they always may */
	if (!lg->readonly && cfg->writer)
		lg->wrunning = pthread_create(&lg->writer, NULL, writer_main, lg) == 0;
	free(p);
	free(segs);
	*out = lg;
	return 0;
err:
	free(p);
	free(segs);
	log_free(lg);
	return rc;
}

int log_close(log_mgr *lg)
{
	int rc = 0;
	if (!lg)
		return 0;
	if (!lg->readonly && !lg->panic)
		rc = log_flush(lg, lg->last);
	log_free(lg);
	return rc;
}

/* Writes and syncs, in the unneeded segment file path, the header of
 * segment idx (log_truncate's recycling). */
static int seg_hdr_rewrite(const log_mgr *lg, const char *path, uint64_t idx)
{
	unsigned char h[LOG_SEG_HDR];
	io_file *f;
	int rc;
	seg_hdr_make(lg, idx, h);
	if ((rc = io_open(path, 0, &f)) != 0)
		return rc;
	if ((rc = io_pwrite(f, h, sizeof h, 0)) == 0)
		rc = io_sync(f);
	io_close(f);
	return rc;
}

int log_truncate(log_mgr *lg, uint64_t keep)
{
	uint64_t *segs = NULL;
	size_t n = 0;
	int rc;

	if (lg->readonly)
		return 0;
	pthread_mutex_lock(&lg->mu);
	if (keep > lg->start)
		lg->start = keep;
	uint64_t kseg = lg->start / lg->seg;
	pthread_mutex_unlock(&lg->mu);
	if ((rc = seg_list(lg, &segs, &n)) != 0)
		return rc;
	for (size_t i = 0; i < n && segs[i] < kseg; i++) {
		char from[4096], to[4096];
		seg_name(lg, segs[i], from, sizeof from);
		/* recycle: new header under the old name (unneeded), then rename
		 * (L6) to the index past the highest segment.  The header is
		 * written without mu, so appenders go on; the rename is done under
		 * mu, where no file is (L13).  If an appender took the index
		 * meanwhile, the header is written again for the next one with mu
		 * held, as seg_make does. */
		pthread_mutex_lock(&lg->mu);
		segf_forget(lg, segs[i]);
		uint64_t spares = lg->max_seg - lg->end / lg->seg, nidx = lg->max_seg + 1;
		pthread_mutex_unlock(&lg->mu);
		if (spares >= lg->spares) {
			if ((rc = io_unlink(from)) != 0)
				goto out;
			continue;
		}
		if ((rc = seg_hdr_rewrite(lg, from, nidx)) != 0)
			goto out;
		pthread_mutex_lock(&lg->mu);
		if (lg->max_seg + 1 != nidx) /* taken meanwhile */
			rc = seg_hdr_rewrite(lg, from, nidx = lg->max_seg + 1);
		if (!rc) {
			seg_name(lg, nidx, to, sizeof to);
			if ((rc = io_exists(to, NULL)) == 0) /* L13, whatever max_seg says */
				rc = util_err(EEXIST, "%s: a log segment is already there: not replaced by a recycled one",
					      to);
			else if (rc == ENOENT && (rc = io_rename(from, to)) == 0) {
				lg->max_seg = nidx;
				lg->st.segs_recycled++;
			}
		}
		pthread_mutex_unlock(&lg->mu);
		if (rc)
			goto out;
	}
	pthread_mutex_lock(&lg->mu);
	uint64_t renamed = lg->max_seg; /* L18: every rename so far is covered by this sync */
	pthread_mutex_unlock(&lg->mu);
	if ((rc = io_sync_dir(lg->dir)) == 0) {
		pthread_mutex_lock(&lg->mu);
		if (renamed > lg->named)
			lg->named = renamed;
		pthread_mutex_unlock(&lg->mu);
	}
out:
	free(segs);
	if (rc > 0)
		util_err(rc, "log %s: recycling old segments failed: %s", lg->dir, util_errmsg()); /* its cause */
	return rc;
}

/* ---- a full disk ---- */

int log_prepare(log_mgr *lg, uint32_t n)
{
	int rc = 0;
	pthread_mutex_lock(&lg->mu);
	if (lg->readonly || lg->panic) {
		pthread_mutex_unlock(&lg->mu);
		return 0;
	}
	for (uint64_t i = lg->end / lg->seg; i < lg->end / lg->seg + n && !rc; i++) {
		char path[4096];
		seg_name(lg, i, path, sizeof path);
		if ((rc = io_exists(path, NULL)) == ENOENT) /* L13: under mu, where no file is */
			rc = seg_make(lg, i);
	}
	pthread_mutex_unlock(&lg->mu);
	return rc;
}

int log_space_short(log_mgr *lg) { return __atomic_load_n(&lg->short_space, __ATOMIC_RELAXED); }
