/*
 * buf -- buffer pool over the page file.
 *
 * Design
 *   A fixed array of frames, found by page number through a chained hash
 *   table.  Replacement is CLOCK (second chance): a hit only sets the
 *   frame's reference bit, with no list to relink under the pool mutex, and
 *   the hand approximates LRU at O(1) amortized per miss.  A pinned frame is
 *   never a victim.  Pool metadata (hash, pins, dirty, the hand) is under
 *   bp->mu, a mutex that uncontended stays in user space; page contents are
 *   under each frame's rwlock latch, taken after the pin, never while
 *   holding bp->mu (so latch holders may call back into the pool).
 *
 *   STEAL: a dirty victim is written back, even with uncommitted changes.
 *   NO-FORCE: commit writes no page.  Reads and write-backs of a miss happen
 *   under bp->mu; buf_flush_all writes pinned-and-S-latched pages outside it.
 *
 * Invariants
 *   B1 (W2)  A page is written only after log_flush(page LSN) succeeded.
 *   B2  Every page written carries the CRC-32C of its bytes 4..end; a page
 *       whose CRC fails on read is never returned as data (unless the
 *       caller rebuilds the whole page: BUF_REBUILD).
 *   B3  A frame with pins > 0 is neither evicted nor reused.
 *   B4  dirty implies rec_lsn != 0 and rec_lsn <= page LSN.
 *   B5  A failed page write panics the log (L7): the disk state is unknown.
 *   B6  A page is marked dirty before the record that changes it is logged,
 *       with a recovery LSN at or before that record: a checkpoint that
 *       logs its dirty-page table after the record always includes it.
 */
#include "buf.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp.h"
#include "util.h"

struct buf_page {
	uint64_t pgno;        /* under bp->mu; valid when in the hash */
	uint32_t pins;        /* under bp->mu; > 0: not evictable (B3) */
	uint8_t ref;          /* under bp->mu; CLOCK reference bit */
	uint8_t valid;        /* under bp->mu; holds pgno's contents */
	uint8_t dirty;        /* under bp->mu */
	uint64_t rec_lsn;     /* under bp->mu; first LSN that dirtied it (B4) */
	buf_page *next;       /* under bp->mu; hash chain */
	pthread_rwlock_t latch; /* the page bytes */
	unsigned char *data;
};

struct buf_pool {
	io_file *f;
	log_mgr *lg;
	uint32_t psize;
	int readonly;
	pthread_mutex_t mu;
	size_t n;
	buf_page *frames;
	buf_page **hash;
	size_t hmask;
	size_t hand;          /* under mu */
	unsigned char *wbuf;  /* under mu: write-back copy */
	buf_stats st;         /* under mu */
};

static size_t hslot(const buf_pool *bp, uint64_t pgno)
{
	return (size_t)((pgno * 0x9e3779b97f4a7c15ull) >> 17) & bp->hmask;
}

int buf_open(io_file *f, log_mgr *lg, uint32_t page_size, size_t frames, int readonly, buf_pool **out)
{
	buf_pool *bp = calloc(1, sizeof *bp);
	size_t hs = 16;
	if (!bp)
		return ENOMEM;
	if (frames < 8)
		frames = 8;
	while (hs < 2 * frames)
		hs *= 2;
	bp->f = f;
	bp->lg = lg;
	bp->psize = page_size;
	bp->readonly = readonly;
	bp->n = frames;
	bp->hmask = hs - 1;
	bp->frames = calloc(frames, sizeof *bp->frames);
	bp->hash = calloc(hs, sizeof *bp->hash);
	bp->wbuf = malloc(page_size);
	unsigned char *mem = malloc(frames * (size_t)page_size);
	if (!bp->frames || !bp->hash || !bp->wbuf || !mem) {
		free(bp->frames);
		free(bp->hash);
		free(bp->wbuf);
		free(mem);
		free(bp);
		return ENOMEM;
	}
	for (size_t i = 0; i < frames; i++) {
		bp->frames[i].data = mem + i * (size_t)page_size;
		pthread_rwlock_init(&bp->frames[i].latch, NULL);
	}
	pthread_mutex_init(&bp->mu, NULL);
	*out = bp;
	return 0;
}

void buf_close(buf_pool *bp)
{
	if (!bp)
		return;
	for (size_t i = 0; i < bp->n; i++)
		pthread_rwlock_destroy(&bp->frames[i].latch);
	pthread_mutex_destroy(&bp->mu);
	free(bp->frames[0].data);
	free(bp->frames);
	free(bp->hash);
	free(bp->wbuf);
	free(bp);
}

static void hash_remove(buf_pool *bp, buf_page *pg)
{
	buf_page **pp = &bp->hash[hslot(bp, pg->pgno)];
	while (*pp && *pp != pg)
		pp = &(*pp)->next;
	if (*pp)
		*pp = pg->next;
	pg->next = NULL;
}

/* Writes src (the image of page pgno) with its checksum (B1, B2, B5). */
static int page_write(buf_pool *bp, uint64_t pgno, const unsigned char *src, unsigned char *tmp)
{
	int rc;
	uint64_t lsn = util_get64(src + 8);
	if (bp->readonly)
		return util_err(EROFS, "%s: page %" PRIu64 ": the store is open read-only", io_path(bp->f), pgno);
	if ((rc = log_flush(bp->lg, lsn)) != 0) /* B1 */
		return rc;
	memcpy(tmp, src, bp->psize);
	util_put32(tmp, util_crc32c(0, tmp + 4, bp->psize - 4));
	if ((rc = io_pwrite(bp->f, tmp, bp->psize, pgno * bp->psize)) != 0) {
		log_panic(bp->lg, rc, "page write"); /* B5 */
		return util_err(rc, "%s: page %" PRIu64 ": write failed: %s", io_path(bp->f), pgno, strerror(rc));
	}
	return 0;
}

static int all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Reads page pgno into pg->data (B2). */
static int page_read(buf_pool *bp, buf_page *pg, uint64_t pgno, int flags)
{
	size_t got;
	int rc;
	if ((rc = io_pread(bp->f, pg->data, bp->psize, pgno * bp->psize, &got)) != 0)
		return util_err(rc, "%s: page %" PRIu64 ": read failed: %s", io_path(bp->f), pgno, strerror(rc));
	bp->st.reads++;
	uint32_t stored = util_get32(pg->data), calc = util_crc32c(0, pg->data + 4, bp->psize - 4);
	if (stored == calc || all_zero(pg->data, bp->psize))
		return 0;
	if (flags & BUF_REBUILD) {
		memset(pg->data, 0, bp->psize);
		return 0;
	}
	return util_err(TP_ECORRUPT, "%s: page %" PRIu64 ": checksum mismatch (stored 0x%08" PRIx32
				     ", computed 0x%08" PRIx32 ")",
			io_path(bp->f), pgno, stored, calc);
}

/* CLOCK: a frame with no pins and no reference bit (mu held). */
static buf_page *victim(buf_pool *bp)
{
	for (size_t i = 0; i < 2 * bp->n + 1; i++) {
		buf_page *pg = &bp->frames[bp->hand];
		bp->hand = (bp->hand + 1) % bp->n;
		if (pg->pins)
			continue;
		if (pg->ref && pg->valid) {
			pg->ref = 0;
			continue;
		}
		return pg;
	}
	return NULL;
}

int buf_get(buf_pool *bp, uint64_t pgno, int flags, buf_page **out)
{
	buf_page *pg;
	int rc;

	if (pgno > BUF_MAX_PAGES)
		return util_err(TP_EINVAL, "%s: page %" PRIu64 " is out of range", io_path(bp->f), pgno);
	pthread_mutex_lock(&bp->mu);
	for (pg = bp->hash[hslot(bp, pgno)]; pg; pg = pg->next)
		if (pg->pgno == pgno)
			break;
	if (pg) {
		pg->pins++;
		pg->ref = 1;
		bp->st.hits++;
		pthread_mutex_unlock(&bp->mu);
		goto latch;
	}
	bp->st.misses++;
	if (!(pg = victim(bp))) {
		pthread_mutex_unlock(&bp->mu);
		return util_err(ENOBUFS, "buffer pool: all %zu frames are pinned", bp->n);
	}
	if (pg->valid && pg->dirty) { /* STEAL */
		if ((rc = page_write(bp, pg->pgno, pg->data, bp->wbuf)) != 0) {
			pthread_mutex_unlock(&bp->mu);
			return rc;
		}
		bp->st.writes++;
		pg->dirty = 0;
		pg->rec_lsn = 0;
	}
	if (pg->valid)
		hash_remove(bp, pg);
	pg->valid = 0;
	if (flags & BUF_NOREAD)
		memset(pg->data, 0, bp->psize);
	else if ((rc = page_read(bp, pg, pgno, flags)) != 0) {
		pthread_mutex_unlock(&bp->mu);
		return rc;
	}
	pg->pgno = pgno;
	pg->valid = 1;
	pg->pins = 1;
	pg->ref = 1;
	pg->next = bp->hash[hslot(bp, pgno)];
	bp->hash[hslot(bp, pgno)] = pg;
	pthread_mutex_unlock(&bp->mu);
latch:
	if (flags & BUF_X)
		pthread_rwlock_wrlock(&pg->latch);
	else
		pthread_rwlock_rdlock(&pg->latch);
	*out = pg;
	return 0;
}

void buf_put(buf_pool *bp, buf_page *pg)
{
	pthread_rwlock_unlock(&pg->latch);
	pthread_mutex_lock(&bp->mu);
	pg->pins--;
	pthread_mutex_unlock(&bp->mu);
}

unsigned char *buf_data(buf_page *pg) { return pg->data; }
uint64_t buf_pgno(const buf_page *pg) { return pg->pgno; }
uint64_t buf_page_lsn(const buf_page *pg) { return util_get64(pg->data + 8); }
uint32_t buf_page_size(const buf_pool *bp) { return bp->psize; }

int buf_file_pages(buf_pool *bp, uint64_t *pages)
{
	uint64_t sz;
	int rc = io_size(bp->f, &sz);
	if (!rc)
		*pages = sz / bp->psize;
	return rc;
}

void buf_dirty(buf_pool *bp, buf_page *pg, uint64_t lsn)
{
	pthread_mutex_lock(&bp->mu);
	if (!pg->dirty) {
		pg->dirty = 1;
		pg->rec_lsn = lsn ? lsn : 1; /* B4 */
	}
	pthread_mutex_unlock(&bp->mu);
}

void buf_set_lsn(buf_page *pg, uint64_t lsn) { util_put64(pg->data + 8, lsn); }

int buf_flush_all(buf_pool *bp)
{
	unsigned char *tmp = malloc(bp->psize);
	int rc = 0;
	if (!tmp)
		return ENOMEM;
	for (size_t i = 0; i < bp->n && !rc; i++) {
		buf_page *pg = &bp->frames[i];
		pthread_mutex_lock(&bp->mu);
		if (!pg->valid || !pg->dirty) {
			pthread_mutex_unlock(&bp->mu);
			continue;
		}
		pg->pins++;
		pthread_mutex_unlock(&bp->mu);
		pthread_rwlock_rdlock(&pg->latch);
		rc = page_write(bp, pg->pgno, pg->data, tmp);
		pthread_mutex_lock(&bp->mu);
		if (!rc) { /* still S-latched: no change since the write */
			bp->st.writes++;
			pg->dirty = 0;
			pg->rec_lsn = 0;
		}
		pg->pins--;
		pthread_mutex_unlock(&bp->mu);
		pthread_rwlock_unlock(&pg->latch);
	}
	free(tmp);
	if (!rc && !bp->readonly && (rc = io_sync(bp->f)) != 0) {
		log_panic(bp->lg, rc, "page file sync");
		return util_err(rc, "%s: sync failed: %s", io_path(bp->f), strerror(rc));
	}
	return rc;
}

int buf_dirty_pages(buf_pool *bp, void (*fn)(void *ctx, uint64_t pgno, uint64_t rec_lsn), void *ctx)
{
	pthread_mutex_lock(&bp->mu);
	for (size_t i = 0; i < bp->n; i++)
		if (bp->frames[i].valid && bp->frames[i].dirty)
			fn(ctx, bp->frames[i].pgno, bp->frames[i].rec_lsn);
	pthread_mutex_unlock(&bp->mu);
	return 0;
}

void buf_stats_get(buf_pool *bp, buf_stats *s)
{
	pthread_mutex_lock(&bp->mu);
	*s = bp->st;
	pthread_mutex_unlock(&bp->mu);
}

size_t buf_pinned(buf_pool *bp)
{
	size_t n = 0;
	pthread_mutex_lock(&bp->mu);
	for (size_t i = 0; i < bp->n; i++)
		n += bp->frames[i].pins;
	pthread_mutex_unlock(&bp->mu);
	return n;
}
