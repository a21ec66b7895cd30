/*
 * io_scratch -- a store file opened with IO_SCRATCH: read from the file,
 * written only in memory.
 *
 * Design
 *
 * A read-only open of a store that needs recovery recovers it in memory:
 * redo and undo write pages and log records as always, and nothing of it
 * may reach the store (inspecting a damaged or crashed store never writes
 * to it).  io_open with IO_SCRATCH opens the file read-only with the
 * current backend and wraps the handle in this backend: every write lands
 * in an overlay of 4 KiB chunks kept in memory, and reads see the file's
 * bytes with the overlay laid over them.  The overlay lives as long as the
 * handle; closing it forgets every write, as a crash would.
 *
 * Invariants
 *
 * I9  No call of this backend writes, syncs, truncates or reserves the
 *     file underneath: it is open read-only, and only pread and size reach
 *     it.
 * I10  A chunk is copied from the file (zeros past its end) when it is
 *     first written, so a partial write keeps the file's other bytes.
 * I11  The size seen is the file's at open, raised by writes and reserve,
 *     set by truncate; bytes at or past it read as end of file, and a
 *     truncate zeroes the overlay's bytes past it so that growing again
 *     shows zeros (as a file system does).
 * I12  One mutex per file makes each call atomic against the others.
 */
#include "io.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 4096u

typedef struct chunk {
	uint64_t idx;     /* chunk number: bytes [idx * CHUNK, (idx+1) * CHUNK) */
	unsigned char *b; /* NULL: slot free */
} chunk;

typedef struct scr {
	const io_backend *be; /* the file underneath, read-only (I9) */
	void *h;
	pthread_mutex_t mu;   /* everything below (I12) */
	uint64_t size;        /* I11 */
	uint64_t real;        /* the file's own size at open */
	chunk *tab;           /* open addressing, cap a power of two */
	size_t n, cap;
} scr;

static size_t slot_of(const scr *s, uint64_t idx)
{
	uint64_t x = idx * 0x9e3779b97f4a7c15ull;
	return (size_t)(x >> 17) & (s->cap - 1);
}

static unsigned char *chunk_find(const scr *s, uint64_t idx)
{
	if (!s->cap)
		return NULL;
	for (size_t i = slot_of(s, idx);; i = (i + 1) & (s->cap - 1)) {
		if (!s->tab[i].b)
			return NULL;
		if (s->tab[i].idx == idx)
			return s->tab[i].b;
	}
}

static int grow(scr *s)
{
	size_t ncap = s->cap ? 2 * s->cap : 64;
	chunk *nt = calloc(ncap, sizeof *nt), *old = s->tab;
	if (!nt)
		return ENOMEM;
	size_t ocap = s->cap;
	s->tab = nt;
	s->cap = ncap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].b) {
			size_t j = slot_of(s, old[i].idx);
			while (nt[j].b)
				j = (j + 1) & (ncap - 1);
			nt[j] = old[i];
		}
	free(old);
	return 0;
}

/* The chunk idx, copied from the file on first use (I10). */
static int chunk_get(scr *s, uint64_t idx, unsigned char **out)
{
	int rc;
	if ((*out = chunk_find(s, idx)) != NULL)
		return 0;
	if (2 * (s->n + 1) > s->cap && (rc = grow(s)) != 0)
		return rc;
	unsigned char *b = calloc(1, CHUNK);
	if (!b)
		return ENOMEM;
	uint64_t off = idx * CHUNK;
	size_t have = 0;
	while (off + have < s->real && have < CHUNK) { /* I10; past real: zeros */
		size_t done = 0;
		if ((rc = s->be->pread(s->h, b + have, CHUNK - have, off + have, &done)) != 0) {
			free(b);
			return rc;
		}
		if (!done)
			break;
		have += done;
	}
	if (off + CHUNK > s->size) { /* I11: bytes past the size read as zeros */
		uint64_t keep = s->size > off ? s->size - off : 0;
		memset(b + keep, 0, CHUNK - keep);
	}
	size_t i = slot_of(s, idx);
	while (s->tab[i].b)
		i = (i + 1) & (s->cap - 1);
	s->tab[i] = (chunk){idx, b};
	s->n++;
	*out = b;
	return 0;
}

static int scr_pread(void *h, void *buf, size_t len, uint64_t off, size_t *done)
{
	scr *s = h;
	int rc = 0;
	*done = 0;
	pthread_mutex_lock(&s->mu);
	if (off < s->size) {
		uint64_t idx = off / CHUNK, in = off % CHUNK;
		size_t n = CHUNK - in < len ? CHUNK - in : len;
		if (n > s->size - off)
			n = s->size - off;
		const unsigned char *b = chunk_find(s, idx);
		if (b) {
			memcpy(buf, b + in, n);
			*done = n;
		} else if (off < s->real) { /* the file's own bytes, up to its end */
			if (n > s->real - off)
				n = s->real - off;
			rc = s->be->pread(s->h, buf, n, off, done);
		} else { /* grown past the file by a reserve or a truncate: zeros */
			memset(buf, 0, n);
			*done = n;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int scr_pwrite(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	scr *s = h;
	int rc = 0;
	size_t at = 0;
	pthread_mutex_lock(&s->mu);
	while (at < len) {
		unsigned char *b;
		uint64_t o = off + at, in = o % CHUNK;
		size_t n = CHUNK - in < len - at ? CHUNK - in : len - at;
		if ((rc = chunk_get(s, o / CHUNK, &b)) != 0)
			break;
		memcpy(b + in, (const unsigned char *)buf + at, n);
		at += n;
		if (o + n > s->size)
			s->size = o + n;
	}
	pthread_mutex_unlock(&s->mu);
	*done = at;
	return at ? 0 : rc;
}

static int scr_sync(void *h)
{
	(void)h;
	return 0;
}

static int scr_size(void *h, uint64_t *out)
{
	scr *s = h;
	pthread_mutex_lock(&s->mu);
	*out = s->size;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int scr_truncate(void *h, uint64_t size)
{
	scr *s = h;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->cap; i++) { /* I11 */
		chunk *c = &s->tab[i];
		uint64_t lo = c->idx * CHUNK;
		if (c->b && lo + CHUNK > size)
			memset(c->b + (size > lo ? size - lo : 0), 0, CHUNK - (size > lo ? size - lo : 0));
	}
	if (size < s->real)
		s->real = size; /* the file's bytes past it are gone from view */
	s->size = size;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int scr_reserve(void *h, uint64_t size)
{
	scr *s = h;
	pthread_mutex_lock(&s->mu);
	if (size > s->size)
		s->size = size;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int scr_close(void *h)
{
	scr *s = h;
	int rc = s->be->close(s->h);
	for (size_t i = 0; i < s->cap; i++)
		free(s->tab[i].b);
	free(s->tab);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return rc;
}

/* Names never reach a file's backend (io.c sends them to the current one);
 * these are here so that the table is whole. */
static int scr_no_name(const char *path)
{
	(void)path;
	return EROFS;
}
static int scr_no_rename(const char *from, const char *to)
{
	(void)from;
	(void)to;
	return EROFS;
}

static const io_backend scratch_backend = {
	.close = scr_close,
	.pread = scr_pread,
	.pwrite = scr_pwrite,
	.sync = scr_sync,
	.size = scr_size,
	.truncate = scr_truncate,
	.reserve = scr_reserve,
	.mkdir = scr_no_name,
	.rename = scr_no_rename,
	.unlink = scr_no_name,
	.sync_dir = scr_no_name,
};

int io_scratch_wrap(const io_backend *be, void *h, const io_backend **out_be, void **out_h)
{
	scr *s = calloc(1, sizeof *s);
	int rc;
	if (!s)
		return ENOMEM;
	s->be = be;
	s->h = h;
	if ((rc = be->size(h, &s->real)) != 0) {
		free(s);
		return rc;
	}
	s->size = s->real;
	pthread_mutex_init(&s->mu, NULL);
	*out_be = &scratch_backend;
	*out_h = s;
	return 0;
}
