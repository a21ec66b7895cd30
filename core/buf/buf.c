/*
 * buf -- buffer pool over the page file.
 *
 * Design
 *   A fixed array of frames, found by page number through a chained hash
 *   table.  Replacement is CLOCK: a hit only counts up the frame's
 *   references (to REF_MAX, as GCLOCK: a page used again survives one turn
 *   of the hand more), with no list to relink under the pool mutex, and the
 *   hand approximates LRU at O(1) amortized per miss.  A pinned frame is
 *   never a victim.  Pool metadata (hash, pins, dirty, the hand) is under
 *   bp->mu, a mutex that uncontended stays in user space; page contents are
 *   under each frame's rwlock latch, taken after the pin, never while
 *   holding bp->mu (so latch holders may call back into the pool).
 *
 *   STEAL: a dirty victim is written back, even with uncommitted changes.
 *   NO-FORCE: commit writes no page.  A miss reads outside bp->mu (B11),
 *   and every write-back (a victim's, buf_flush_all's, buf_write_unlogged's)
 *   happens on a pinned, S-latched frame outside it (B7).
 *
 * Invariants (W1-W6 are the write-ahead rules of core/DESIGN.md; each
 * rule is its first sentence, the lines under it say why)
 *   B1 (W2)  A page is written only after log_flush(page LSN) succeeded.
 *       A crash then never leaves a change on disk whose record is lost.
 *   B2  Every page written carries the CRC-32C of its bytes 4..end, and a
 *       page whose CRC fails on read is never returned as data.
 *       A torn or damaged page is found, not used (unless the caller
 *       rebuilds the whole page: BUF_REBUILD).
 *   B3  A frame with pins > 0 is neither evicted nor reused.
 *       A pinned page's bytes belong to its caller.
 *   B4  A dirty frame has rec_lsn != 0 and, for a logged page, rec_lsn <=
 *       page LSN.
 *       The checkpoint's dirty-page table then sends redo back far enough.
 *   B5  A failed page write panics the log (L7).
 *       The disk state is unknown: only recovery can tell what is there.
 *   B6  A page is marked dirty, with a recovery LSN at or before the
 *       record, before the record that changes it is logged.
 *       A checkpoint that logs its dirty-page table after the record then
 *       always includes the page.
 *   B7  No page is written with bp->mu held.
 *       A write may first flush the log (B1), whose barrier (log.c L10,
 *       ord.c N1) writes pages of this pool.
 *   B8  Read-ahead fills only frames that are clean and unpinned, with
 *       pages the pool does not hold, whose checksum and LSN (B9) hold.
 *       Read-ahead then never causes a write-back, and never hands out a
 *       page a read would refuse.
 *   B9  A page read carries an LSN below the log's end.
 *       B1 and the rule for ordered pages (op.h, O1) keep every page LSN
 *       on disk below the durable end, which no crash cuts.  A higher one
 *       means the page claims records the log lost, and redo would skip
 *       their successors: it is reported as damage, never used.
 *   B10 A miss with BUF_ONCE takes its frame from a ring of at most
 *       ONCE_RING frames, reused once clean.
 *       An ordered page is written once, by the log's barrier: a large
 *       write does not flood the pool.
 *   B11 No page is read on a miss with bp->mu held.
 *       The frame is pinned, X-latched, named in the hash and marked
 *       loading first, so a second reader of the page waits on the latch,
 *       and a read that fails takes the frame out of the hash before
 *       letting go of the latch.
 *   B12 A frame says whether every byte of its page can be rebuilt from
 *       the log (logged) and whether it holds ordered bytes not yet
 *       written (unwritten).
 *       logged is unknown -- no -- for a page read from disk, until an
 *       operation that sets the whole page or a full-page image is logged
 *       for it (txn.c), and no for ordered bytes (op.h); unwritten lasts
 *       until the page is written, whoever writes it.  op_page_patch logs
 *       an image first where logged is no.
 *   B13 A frame's saved checksum (ocrc_ok) is the one of its bytes.
 *       buf_mark_ordered takes it while the bytes are in the CPU's cache;
 *       buf_dirty, which every change of a frame calls, forgets it, and
 *       write_run uses it only for a frame still carrying the LSN it was
 *       registered with, so a page is never written with another's sum.
 *   B14 A page is handed out by the allocator (op_page.c) only after
 *       buf_reserve gave it disk space in the page file.
 *       The file's size covers every page an allocation record names, and
 *       its blocks are reserved (fallocate).  So writing back an allocated
 *       page -- at a steal, a checkpoint, a clean close, or after redo in
 *       recovery -- never needs new disk space, and a full disk fails the
 *       allocation, before anything is logged, never a write-back (B5).
 *       The last BUF_ROLLBACK_BYTES of the file's space go only to
 *       allocations of rollbacks and recovery.  Pages given back to the
 *       file system (holes, buf_punch) lose their blocks: the allocator
 *       reserves them again (buf_refill) before it hands one out
 *       (alloc.c A5), so the rule holds for them too.
 */
#include "buf.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tp.h"
#include "util.h"

#define RA_MAX 32             /* pages read ahead at most */
#define RA_ASYNC 512          /* a stream's pages the kernel reads ahead of it (B8) */
#define RA_STREAMS 8          /* sequential readers followed at once (B8) */
#define RA_RING (8 * RA_MAX)  /* frames sequential streams' read-ahead cycles through */
#define REF_MAX 2             /* a page used again: a turn of the hand more */
#define ONCE_RING 4096        /* frames BUF_ONCE pages cycle through, at most */

struct buf_page {
	uint64_t pgno;        /* under bp->mu; valid when in the hash */
	uint32_t pins;        /* under bp->mu; > 0: not evictable (B3) */
	uint8_t ref;          /* under bp->mu; CLOCK references, up to REF_MAX */
	uint8_t valid;        /* under bp->mu; holds pgno's contents */
	uint8_t dirty;        /* under bp->mu; changed only under the latch or unpinned */
	uint8_t loading;      /* under bp->mu; its page is being read in (B11) */
	uint8_t logged;       /* under bp->mu; every byte can be rebuilt from the log (B12) */
	uint8_t unwritten;    /* under bp->mu; dirty with ordered bytes not yet written (B12) */
	uint8_t ocrc_ok;      /* as dirty; ocrc is the checksum of its bytes (B13) */
	uint32_t ocrc;
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
	size_t mem_bytes;     /* the frames' memory (mmap) */
	struct ra_stream {    /* under mu: a sequential reader (B8) */
		uint64_t last;    /* the last page it read or had read ahead */
		uint64_t win;     /* its read-ahead window */
		uint64_t advised; /* its pages below this were handed to the kernel (RA_ASYNC) */
		uint64_t used;    /* ra_tick when it last read: the oldest makes room */
	} ra[RA_STREAMS];
	uint64_t ra_tick;
	struct ring {                 /* under mu: frames pages used once cycle through */
		struct ring_slot {
			size_t frame; /* index + 1; 0: empty */
			uint64_t pgno; /* the page put into it */
		} *s;
		size_t n, pos;
	} ra_ring, once_ring;         /* a long scan's read-ahead (B8); BUF_ONCE (B10) */
	buf_page **hash;
	size_t hmask;
	size_t hand;          /* under mu */
	size_t writing;       /* under mu: frames pinned only to be written back */
	pthread_mutex_t resv_mu; /* buf_reserve */
	uint64_t reserved;    /* under resv_mu: pages with disk space in the file */
	int short_space;      /* atomic: the file could not grow the last time (ENOSPC) */
	pthread_cond_t written; /* one of them was */
	buf_stats st;         /* under mu */
};

static size_t hslot(const buf_pool *bp, uint64_t pgno)
{
	return (size_t)((pgno * 0x9e3779b97f4a7c15ull) >> 17) & bp->hmask;
}

/* The frame that holds page pgno, or NULL (mu held). */
static buf_page *hash_find(const buf_pool *bp, uint64_t pgno)
{
	buf_page *pg;
	for (pg = bp->hash[hslot(bp, pgno)]; pg; pg = pg->next)
		if (pg->pgno == pgno)
			break;
	return pg;
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
	/* Not in transparent huge pages: a pool is touched a frame at a time
	 * as it fills, and a huge page zeroes 2 MiB for the first 4 KiB frame
	 * touched in it (measured: 40% of a sequential read's CPU) */
	size_t bytes = frames * (size_t)page_size;
	unsigned char *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		mem = NULL;
	bp->mem_bytes = bytes;
	int rings_ok = 1;
	if (frames >= 8 * RA_MAX) { /* a small pool would evict what it reads ahead */
		bp->ra_ring.n = RA_RING;
		bp->once_ring.n = frames / 4 < ONCE_RING ? frames / 4 : ONCE_RING;
		bp->ra_ring.s = calloc(bp->ra_ring.n, sizeof *bp->ra_ring.s);
		bp->once_ring.s = calloc(bp->once_ring.n, sizeof *bp->once_ring.s);
		rings_ok = bp->ra_ring.s && bp->once_ring.s;
	}
	if (!bp->frames || !bp->hash || !mem || !rings_ok) {
		free(bp->ra_ring.s);
		free(bp->once_ring.s);
		free(bp->frames);
		free(bp->hash);
		if (mem)
			munmap(mem, bytes);
		free(bp);
		return ENOMEM;
	}
	for (size_t i = 0; i < frames; i++) {
		bp->frames[i].data = mem + i * (size_t)page_size;
		pthread_rwlock_init(&bp->frames[i].latch, NULL);
	}
	util_mutex_init_hot(&bp->mu);
	pthread_cond_init(&bp->written, NULL);
	pthread_mutex_init(&bp->resv_mu, NULL);
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
	pthread_cond_destroy(&bp->written);
	pthread_mutex_destroy(&bp->resv_mu);
	munmap(bp->frames[0].data, bp->mem_bytes);
	free(bp->ra_ring.s);
	free(bp->once_ring.s);
	free(bp->frames);
	free(bp->hash);
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
	TP_CHECK(lsn < log_durable(bp->lg)); /* B1 (W2): its record is durable */
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

/* Whether a page image read from disk may be used (B2, B9): its checksum
 * holds and its LSN is below the log's end, or it was never written. */
static int page_sound(const buf_pool *bp, const unsigned char *img, uint64_t end)
{
	return (util_get32(img) == util_crc32c(0, img + 4, bp->psize - 4) && util_get64(img + 8) < end) ||
	       all_zero(img, bp->psize);
}

/* Reads page pgno into pg->data (B2, B9); mu is not held. */
static int page_read(buf_pool *bp, buf_page *pg, uint64_t pgno, int flags)
{
	size_t got;
	int rc;
	if ((rc = io_pread(bp->f, pg->data, bp->psize, pgno * bp->psize, &got)) != 0)
		return util_err(rc, "%s: page %" PRIu64 ": read failed: %s", io_path(bp->f), pgno, strerror(rc));
	uint64_t end = log_end(bp->lg);
	if (page_sound(bp, pg->data, end))
		return 0;
	uint32_t stored = util_get32(pg->data), calc = util_crc32c(0, pg->data + 4, bp->psize - 4);
	uint64_t lsn = util_get64(pg->data + 8);
	if (flags & BUF_REBUILD) {
		memset(pg->data, 0, bp->psize);
		return 0;
	}
	if (stored == calc) /* B9 */
		return util_err(TP_ECORRUPT, "%s: page %" PRIu64 " carries LSN %" PRIu64 ", beyond the end of the log (%" PRIu64
					     "): it was written for log records the log does not hold",
				io_path(bp->f), pgno, lsn, end);
	return util_err(TP_ECORRUPT, "%s: page %" PRIu64 ": checksum mismatch (stored 0x%08" PRIx32
				     ", computed 0x%08" PRIx32 ")",
			io_path(bp->f), pgno, stored, calc);
}

/* Writes the dirty frame pg back (mu held on entry, released): pinned and
 * S-latched while written, outside mu (B7), through tmp (a page-sized
 * buffer of the caller's, or NULL: one is allocated).  It may have been
 * written meanwhile (a log barrier): then nothing is done. */
static int write_back(buf_pool *bp, buf_page *pg, unsigned char *tmp)
{
	unsigned char *own = NULL;
	int rc = 0;
	pg->pins++;
	bp->writing++;
	pthread_mutex_unlock(&bp->mu);
	pthread_rwlock_rdlock(&pg->latch);
	pthread_mutex_lock(&bp->mu);
	int dirty = pg->dirty;
	TP_CHECK(!dirty || (pg->rec_lsn != 0 && pg->valid)); /* B4 */
	pthread_mutex_unlock(&bp->mu);
	if (dirty && !tmp && !(tmp = own = malloc(bp->psize)))
		rc = ENOMEM;
	else if (dirty)
		rc = page_write(bp, pg->pgno, pg->data, tmp);
	free(own);
	pthread_mutex_lock(&bp->mu);
	if (dirty && !rc) { /* still S-latched: no change since the write */
		bp->st.writes++;
		pg->dirty = 0;
		pg->unwritten = 0;
		pg->rec_lsn = 0;
	}
	pg->pins--;
	bp->writing--;
	pthread_cond_broadcast(&bp->written);
	pthread_mutex_unlock(&bp->mu);
	pthread_rwlock_unlock(&pg->latch);
	return rc;
}

/* CLOCK: a frame with no pins and no references left (mu held). */
static buf_page *victim(buf_pool *bp)
{
	for (size_t i = 0; i < (REF_MAX + 1) * bp->n + 1; i++) {
		buf_page *pg = &bp->frames[bp->hand];
		bp->hand = (bp->hand + 1) % bp->n;
		if (pg->pins)
			continue;
		if (pg->ref && pg->valid) {
			pg->ref--;
			continue;
		}
		return pg;
	}
	return NULL;
}

/* A frame for page pgno of a stream (mu held): the ring's next frame
 * when it still holds the page put there, unpinned, clean and used at most
 * once since (ref <= 1: a page used twice is kept); else the CLOCK victim,
 * which the slot then names.  A stream -- a long scan, a large write --
 * then recycles the ring's frames instead of flooding the pool (and
 * touching new memory), and the pages others use stay. */
static buf_page *ring_victim(buf_pool *bp, struct ring *r, uint64_t pgno)
{
	if (!r->n)
		return victim(bp);
	struct ring_slot *slot = &r->s[r->pos];
	r->pos = (r->pos + 1) % r->n;
	buf_page *f = slot->frame ? &bp->frames[slot->frame - 1] : NULL;
	if (!f || !f->valid || f->pgno != slot->pgno || f->pins || f->dirty || f->ref > 1)
		f = victim(bp);
	if (f) {
		slot->frame = (size_t)(f - bp->frames) + 1;
		slot->pgno = pgno;
	}
	return f;
}

/* B11: names the X-latched, unpinned frame f as page pgno's in the hash,
 * pinned once, loading if it is to be read (mu held). */
static void frame_name(buf_pool *bp, buf_page *f, uint64_t pgno, int loading, uint8_t ref)
{
	if (f->valid)
		hash_remove(bp, f);
	f->pgno = pgno;
	f->valid = 1;
	f->logged = 0;
	f->ocrc_ok = 0;
	f->loading = (uint8_t)loading;
	f->pins = 1;
	f->ref = ref;
	f->next = bp->hash[hslot(bp, pgno)];
	bp->hash[hslot(bp, pgno)] = f;
}

/* B11: the read into a named frame is over (mu held); one that failed
 * takes the frame out of the hash, so whoever waits on its latch looks
 * again.  The caller lets go of the pin and the latch. */
static void frame_loaded(buf_pool *bp, buf_page *f, int ok)
{
	f->loading = 0;
	if (ok) {
		bp->st.reads++;
	} else {
		hash_remove(bp, f);
		f->valid = 0;
	}
}

/* Sequential read-ahead (B8; mu held on entry and exit, let go during the
 * read: B11; pgno just read into a pinned frame): when pgno follows the
 * last page one of RA_STREAMS readers read, the next pages up to a window
 * that doubles from 4 to RA_MAX are read with one preadv straight into
 * clean, unpinned frames of the read-ahead ring (from a stream's first
 * window: the kernel's read-ahead of a FUSE file starts a stream with each
 * request, and frames taken from the CLOCK hand would flood the pool and,
 * in a fresh pool, fault in new memory page by page; no copy through a
 * staging buffer), skipping
 * pages the pool holds and stopping at a dirty or latched victim (no write
 * under mu, B7).  A page whose checksum fails is not kept: reading it for
 * real reports the damage.  Once the window is whole (a stream), the
 * kernel is asked to read the RA_ASYNC pages beyond it in the background,
 * in steps of half that: *adv (pages from adv[0], adv[1] of them) for the
 * caller to hand over once mu is released.  So the disk works while the
 * stream is served, as the kernel's own read-ahead does for a file read in
 * order; the preads then copy from memory. */
static void read_ahead(buf_pool *bp, uint64_t pgno, uint64_t adv[2])
{
	/* the stream this page continues (the next page, or one of its window
	 * that read-ahead had to leave out); else the oldest starts again here
	 * (the kernel's read-ahead of a FUSE file sends two or three requests
	 * at once, each a stream of its own) */
	struct ra_stream *s = NULL, *old = &bp->ra[0];
	uint64_t advised = 0; /* what the stream restarted here keeps */
	for (int i = 0; i < RA_STREAMS; i++) {
		struct ra_stream *r = &bp->ra[i];
		if (r->used && pgno <= r->last + 1 && pgno + r->win > r->last) { /* next, or in its window */
			s = r;
			break;
		}
		if (r->used && pgno > r->last && pgno < r->advised) { /* it skipped a few: again from here */
			old = r;
			advised = r->advised;
			break;
		}
		if (r->used < old->used)
			old = r;
	}
	bp->ra_tick++;
	if (!s || !bp->ra_ring.s) {
		*old = (struct ra_stream){.last = pgno, .advised = advised, .used = bp->ra_tick};
		return;
	}
	s->used = bp->ra_tick;
	s->win = s->win ? (2 * s->win < RA_MAX ? 2 * s->win : RA_MAX) : 4;
	uint64_t first = pgno + 1, n = s->win, end = log_end(bp->lg);
	size_t got;
	s->last = pgno + n;
	if (n == RA_MAX && s->advised < first + n + RA_ASYNC / 2) {
		adv[0] = s->advised > first + n ? s->advised : first + n;
		adv[1] = first + n + RA_ASYNC - adv[0];
		s->advised = adv[0] + adv[1];
	}
	if (first + n > BUF_MAX_PAGES)
		return;
	/* B11 for a run: each page's frame is X-latched, named in the hash and
	 * marked loading before mu is let go, and the run is read with one
	 * preadv straight into the frames; pages the pool holds already are
	 * read into a scratch page and dropped */
	struct iovec iov[RA_MAX];
	buf_page *fr[RA_MAX];
	unsigned char *scratch = NULL;
	uint64_t k = 0, used = 0; /* entries; entries up to the last frame */
	for (; k < n; k++) {
		uint64_t q = first + k;
		buf_page *f;
		fr[k] = NULL;
		if (hash_find(bp, q)) {
			if (!scratch && !(scratch = malloc(bp->psize)))
				break;
			iov[k] = (struct iovec){scratch, bp->psize};
			continue;
		}
		f = ring_victim(bp, &bp->ra_ring, q); /* a stream's from its first window */
		if (!f || (f->valid && f->dirty) || pthread_rwlock_trywrlock(&f->latch) != 0)
			break;
		frame_name(bp, f, q, 1, 0); /* ref 0: the hand comes back only after a whole turn */
		fr[k] = f;
		iov[k] = (struct iovec){f->data, bp->psize};
		used = k + 1;
	}
	if (used) {
		pthread_mutex_unlock(&bp->mu); /* B11: no read under mu */
		int rc = io_preadv(bp->f, iov, (int)used, first * bp->psize, &got);
		uint8_t bad[RA_MAX];
		for (uint64_t i = 0; i < used; i++) { /* B8, B9: checked before anyone sees it */
			unsigned char *img = fr[i] ? fr[i]->data : NULL;
			/* not kept: reading it for real reports the damage */
			bad[i] = img && (rc || i * bp->psize >= got || !page_sound(bp, img, end));
		}
		pthread_mutex_lock(&bp->mu);
		for (uint64_t i = 0; i < used; i++) {
			buf_page *f = fr[i];
			if (!f)
				continue;
			frame_loaded(bp, f, !bad[i]);
			f->pins--;
			pthread_rwlock_unlock(&f->latch);
		}
	}
	free(scratch);
}

int buf_get(buf_pool *bp, uint64_t pgno, int flags, buf_page **out)
{
	buf_page *pg;
	int rc;

	if (pgno > BUF_MAX_PAGES)
		return util_err(TP_EINVAL, "%s: page %" PRIu64 " is out of range", io_path(bp->f), pgno);
retry:
	pthread_mutex_lock(&bp->mu);
	if ((pg = hash_find(bp, pgno)) != NULL) {
		pg->pins++;
		pg->ref = pg->ref < REF_MAX ? pg->ref + 1 : REF_MAX;
		bp->st.hits++;
		int loading = pg->loading;
		pthread_mutex_unlock(&bp->mu);
		if (!loading)
			goto latch;
		/* B11: the latch is had once the read is over; if it failed, the
		 * frame left the hash: look again (and read it again) */
		pthread_rwlock_rdlock(&pg->latch);
		pthread_rwlock_unlock(&pg->latch);
		pthread_mutex_lock(&bp->mu);
		int ok = pg->valid && pg->pgno == pgno;
		if (!ok)
			pg->pins--;
		pthread_mutex_unlock(&bp->mu);
		if (!ok)
			goto retry;
		goto latch;
	}
	if (!(pg = flags & BUF_ONCE   ? ring_victim(bp, &bp->once_ring, pgno)
		   : flags & BUF_DATA ? ring_victim(bp, &bp->ra_ring, pgno)
				      : victim(bp))) {
		if (bp->writing) { /* pinned only while written back: wait for one */
			pthread_cond_wait(&bp->written, &bp->mu);
			pthread_mutex_unlock(&bp->mu);
			goto retry;
		}
		pthread_mutex_unlock(&bp->mu);
		return util_err(ENOBUFS, "buffer pool: all %zu frames are pinned", bp->n);
	}
	if (pg->valid && pg->dirty) { /* STEAL, outside mu (B7); then look again */
		if ((rc = write_back(bp, pg, NULL)) != 0)
			return rc;
		goto retry;
	}
	int read = !(flags & BUF_NOREAD);
	/* B11: a frame to read into is X-latched before it is named in the
	 * hash; unpinned, only a write-back still letting go of it can hold
	 * its latch: then take another */
	if (read && pthread_rwlock_trywrlock(&pg->latch) != 0) {
		pthread_mutex_unlock(&bp->mu);
		goto retry;
	}
	bp->st.misses++;
	if (!read)
		memset(pg->data, 0, bp->psize);
	frame_name(bp, pg, pgno, read, 1);
	if (read) { /* outside mu: a disk read holds up no one else (B11) */
		pthread_mutex_unlock(&bp->mu);
		rc = page_read(bp, pg, pgno, flags);
		pthread_mutex_lock(&bp->mu);
		frame_loaded(bp, pg, rc == 0);
		if (rc) {
			pg->pins--;
			pthread_mutex_unlock(&bp->mu);
			pthread_rwlock_unlock(&pg->latch);
			return rc;
		}
		uint64_t adv[2] = {0, 0};
		if (!(flags & BUF_REBUILD))
			read_ahead(bp, pgno, adv);
		pthread_mutex_unlock(&bp->mu);
		if (adv[1] && adv[0] + adv[1] <= BUF_MAX_PAGES)
			io_willneed(bp->f, adv[0] * bp->psize, adv[1] * bp->psize);
		if (flags & BUF_X)
			goto done;
		pthread_rwlock_unlock(&pg->latch);
		goto latch;
	}
	pthread_mutex_unlock(&bp->mu);
latch:
	if (flags & BUF_X)
		pthread_rwlock_wrlock(&pg->latch);
	else
		pthread_rwlock_rdlock(&pg->latch);
done:
	*out = pg;
	return 0;
}

void buf_prefetch(buf_pool *bp, uint64_t pgno)
{
	if (pgno > BUF_MAX_PAGES)
		return;
	pthread_mutex_lock(&bp->mu);
	int held = hash_find(bp, pgno) != NULL;
	pthread_mutex_unlock(&bp->mu);
	if (!held)
		io_willneed(bp->f, pgno * bp->psize, bp->psize);
}

void buf_put(buf_pool *bp, buf_page *pg)
{
	/* B9 in memory: whatever the caller did, the page claims no record
	 * beyond the log's end */
	TP_CHECK(buf_page_lsn(pg) < log_end(bp->lg) || buf_page_lsn(pg) == 0);
	pthread_rwlock_unlock(&pg->latch);
	pthread_mutex_lock(&bp->mu);
	TP_CHECK(pg->pins > 0); /* B3: a put matches a get */
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
	pg->ocrc_ok = 0; /* B13 */
	if (!pg->dirty) {
		pg->dirty = 1;
		pg->rec_lsn = lsn ? lsn : 1; /* B4 */
	}
	pthread_mutex_unlock(&bp->mu);
}

int buf_dirty_already(const buf_page *pg) { return pg->dirty && !pg->ocrc_ok; }

void buf_set_lsn(buf_page *pg, uint64_t lsn) { util_put64(pg->data + 8, lsn); }

void buf_mark_ordered(buf_pool *bp, buf_page *pg)
{
	uint32_t crc = util_crc32c(0, pg->data + 4, bp->psize - 4); /* B13: X-latched, bytes final */
	pthread_mutex_lock(&bp->mu);
	pg->ocrc = crc;
	pg->ocrc_ok = 1;
	pg->logged = 0;
	pg->unwritten = pg->dirty;
	pthread_mutex_unlock(&bp->mu);
}

int buf_unwritten(buf_pool *bp, buf_page *pg)
{
	pthread_mutex_lock(&bp->mu);
	int u = pg->unwritten;
	pthread_mutex_unlock(&bp->mu);
	return u;
}

void buf_set_logged(buf_pool *bp, buf_page *pg, int logged)
{
	pthread_mutex_lock(&bp->mu);
	pg->logged = (uint8_t)(logged != 0);
	pthread_mutex_unlock(&bp->mu);
}

int buf_logged(buf_pool *bp, buf_page *pg)
{
	pthread_mutex_lock(&bp->mu);
	int l = pg->logged;
	pthread_mutex_unlock(&bp->mu);
	return l;
}

int buf_sync(buf_pool *bp)
{
	int rc;
	if (bp->readonly)
		return 0;
	if ((rc = io_sync(bp->f)) != 0) {
		log_panic(bp->lg, rc, "page file sync");
		return util_err(rc, "%s: sync failed: %s", io_path(bp->f), strerror(rc));
	}
	return 0;
}

int buf_reserve(buf_pool *bp, uint64_t pages, int rollback)
{
	uint64_t have, pgno = pages - 1;
	int rc = 0;
	if (!rollback) /* B14: the last pages are the rollbacks' */
		pages += (BUF_ROLLBACK_BYTES + bp->psize - 1) / bp->psize;
	pthread_mutex_lock(&bp->resv_mu);
	if (pages > bp->reserved && (rc = buf_file_pages(bp, &have)) == 0) {
		/* an eighth more than the file has, between 1 and 128 MiB of 4 KiB pages */
		uint64_t margin = have / 8 < 256 ? 256 : have / 8 > 32768 ? 32768 : have / 8;
		uint64_t want = pages + margin;
		if (have >= pages)
			want = have;
		else if ((rc = io_reserve_range(bp->f, have * bp->psize, (want - have) * bp->psize)) ==
			 ENOSPC) /* then without the margin */
			rc = io_reserve_range(bp->f, have * bp->psize, ((want = pages) - have) * bp->psize);
		if (!rc)
			bp->reserved = want;
		if (have < pages)
			__atomic_store_n(&bp->short_space, rc == ENOSPC, __ATOMIC_RELAXED);
		if (rc == ENOSPC)
			rc = util_err(ENOSPC, "%s: no disk space for page %" PRIu64 "%s", io_path(bp->f), pgno,
				      rollback ? "" : " and the pages kept for rollbacks");
	}
	pthread_mutex_unlock(&bp->resv_mu);
	return rc;
}

/* B14: only the growth is reserved here -- below the file's end, holes
 * the page file was given back stay holes, and the allocator reserves a
 * page's blocks again before it takes one (op_page.c, alloc.c A5). */
int buf_refill(buf_pool *bp, uint64_t first, uint64_t n)
{
	uint64_t have;
	int rc;
	if (bp->readonly) /* nothing is written back */
		return 0;
	if ((rc = buf_file_pages(bp, &have)) != 0)
		return rc;
	if (first >= have)
		return 0; /* past the end: buf_reserve's */
	if (n > have - first)
		n = have - first;
	return io_reserve_range(bp->f, first * bp->psize, n * bp->psize);
}

int buf_punch(buf_pool *bp, uint64_t first, uint64_t n)
{
	if (bp->readonly)
		return 0;
	io_point("buf.punch");
	int rc = io_punch(bp->f, first * bp->psize, n * bp->psize);
	io_point("buf.punched");
	return rc;
}

int buf_held_dirty(buf_pool *bp, uint64_t pgno)
{
	pthread_mutex_lock(&bp->mu);
	buf_page *pg = hash_find(bp, pgno);
	int dirty = pg && (pg->dirty || pg->pins || pg->loading);
	pthread_mutex_unlock(&bp->mu);
	return dirty;
}

int buf_space_short(buf_pool *bp) { return __atomic_load_n(&bp->short_space, __ATOMIC_RELAXED); }

int buf_flush_all(buf_pool *bp)
{
	unsigned char *tmp = malloc(bp->psize); /* one copy buffer for every page */
	int rc = tmp ? 0 : ENOMEM;
	for (size_t i = 0; i < bp->n && !rc; i++) {
		buf_page *pg = &bp->frames[i];
		pthread_mutex_lock(&bp->mu);
		if (!pg->valid || !pg->dirty) {
			pthread_mutex_unlock(&bp->mu);
			continue;
		}
		rc = write_back(bp, pg, tmp);
	}
	free(tmp);
	return rc ? rc : buf_sync(bp);
}

static int cmp_unlogged(const void *a, const void *b)
{
	const buf_unlogged *x = a, *y = b;
	if (x->pgno != y->pgno)
		return x->pgno < y->pgno ? -1 : 1;
	return x->lsn < y->lsn ? -1 : x->lsn > y->lsn;
}

/* Lets go of a frame take_unlogged pinned (and S-latched, if latched)
 * without writing it. */
static void release_taken(buf_pool *bp, buf_page *pg, int latched)
{
	if (latched)
		pthread_rwlock_unlock(&pg->latch);
	pthread_mutex_lock(&bp->mu);
	pg->pins--;
	bp->writing--;
	pthread_cond_broadcast(&bp->written);
	pthread_mutex_unlock(&bp->mu);
}

/* Pins and S-latches the frame of u if it is to be written unlogged: in
 * the pool, dirty, its LSN still u->lsn.  An X latch means the page was
 * freed and reused as a logged page (an ordered page is never changed),
 * whose holder may wait for the log's flusher, which may be this thread:
 * never wait for it.  A page logged since is left to the WAL rule. */
static buf_page *take_unlogged(buf_pool *bp, const buf_unlogged *u)
{
	pthread_mutex_lock(&bp->mu);
	buf_page *pg = hash_find(bp, u->pgno);
	if (!pg || !pg->dirty) { /* written already (a STEAL or a checkpoint) */
		pthread_mutex_unlock(&bp->mu);
		return NULL;
	}
	pg->pins++;
	bp->writing++;
	pthread_mutex_unlock(&bp->mu);
	int latched = pthread_rwlock_tryrdlock(&pg->latch) == 0;
	if (latched && buf_page_lsn(pg) == u->lsn)
		return pg;
	release_taken(bp, pg, latched);
	return NULL;
}

#define RUN_MAX 64 /* pages per write of buf_write_unlogged */

/* Writes the run of frames fr[0..n) (consecutive pages, pinned and
 * S-latched) with one pwritev, marks them clean, releases them. */
static int write_run(buf_pool *bp, buf_page **fr, size_t n)
{
	/* each page from its frame, behind its checksum: the frame's own first
	 * bytes are not written to under an S latch, and nothing is copied */
	struct iovec iov[2 * RUN_MAX];
	unsigned char crc[RUN_MAX][4];
	uint32_t saved[RUN_MAX];
	uint8_t have[RUN_MAX];
	int rc = 0;
	if (bp->readonly)
		rc = util_err(EROFS, "%s: the store is open read-only", io_path(bp->f));
	pthread_mutex_lock(&bp->mu); /* B13: S-latched, so no change clears them meanwhile */
	for (size_t i = 0; i < n; i++) {
		have[i] = fr[i]->ocrc_ok;
		saved[i] = fr[i]->ocrc;
	}
	pthread_mutex_unlock(&bp->mu);
	for (size_t i = 0; i < n && !rc; i++) {
		/* B13: a saved checksum is the one of the bytes written; and
		 * B1 (W2) for ordered pages too (op.h O1: below the durable end) */
		TP_CHECK(!have[i] || saved[i] == util_crc32c(0, fr[i]->data + 4, bp->psize - 4));
		TP_CHECK(buf_page_lsn(fr[i]) < log_durable(bp->lg));
		util_put32(crc[i], have[i] ? saved[i] : util_crc32c(0, fr[i]->data + 4, bp->psize - 4));
		iov[2 * i] = (struct iovec){crc[i], 4};
		iov[2 * i + 1] = (struct iovec){fr[i]->data + 4, bp->psize - 4};
	}
	if (!rc && (rc = io_pwritev(bp->f, iov, (int)(2 * n), fr[0]->pgno * bp->psize)) == 0)
		io_writeback(bp->f, fr[0]->pgno * bp->psize, n * bp->psize); /* buf_sync waits less */
	else if (!rc) {
		log_panic(bp->lg, rc, "page write"); /* B5 */
		rc = util_err(rc, "%s: pages %" PRIu64 "-%" PRIu64 ": write failed: %s", io_path(bp->f), fr[0]->pgno,
			      fr[0]->pgno + n - 1, strerror(rc));
	}
	pthread_mutex_lock(&bp->mu);
	for (size_t i = 0; i < n; i++) {
		fr[i]->ocrc_ok = 0;
		if (!rc) { /* still S-latched: no change since the write */
			bp->st.writes++;
			fr[i]->dirty = 0;
			fr[i]->unwritten = 0;
			fr[i]->rec_lsn = 0;
		}
		fr[i]->pins--;
		bp->writing--;
	}
	pthread_cond_broadcast(&bp->written);
	pthread_mutex_unlock(&bp->mu);
	for (size_t i = 0; i < n; i++)
		pthread_rwlock_unlock(&fr[i]->latch);
	return rc;
}

int buf_write_unlogged(buf_pool *bp, buf_unlogged *pages, size_t n)
{
	buf_page *fr[RUN_MAX];
	size_t k = 0;
	int rc = 0;
	qsort(pages, n, sizeof *pages, cmp_unlogged);
	for (size_t i = 0; i < n && !rc; i++) {
		if (i + 1 < n && pages[i + 1].pgno == pages[i].pgno)
			continue; /* registered again since: only the latest LSN can match */
		buf_page *pg = take_unlogged(bp, &pages[i]);
		if (k && (!pg || k == RUN_MAX || fr[k - 1]->pgno + 1 != pages[i].pgno)) {
			rc = write_run(bp, fr, k);
			k = 0;
		}
		if (pg && rc) /* the run before it failed: release it unwritten */
			release_taken(bp, pg, 1);
		else if (pg)
			fr[k++] = pg;
	}
	if (k && !rc)
		rc = write_run(bp, fr, k);
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
