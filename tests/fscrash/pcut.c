/*
 * pcut -- the test's half of the power-cut emulation: see pcut.h.
 */
#include "pcut.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsc_model.h"

int pcut_reset(const char *journal)
{
	int fd = open(journal, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

typedef struct jrec {
	pcut_rec r;
	const uint8_t *data; /* W: new bytes */
	const uint8_t *old;  /* W, T: old bytes */
} jrec;

/* The files under the store, by device and inode (nftw has no context). */
static struct {
	uint64_t dev, ino;
	char path[4096];
} *files;
static size_t nfiles, capfiles;

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	if (nfiles == capfiles) {
		capfiles = capfiles ? 2 * capfiles : 64;
		files = realloc(files, capfiles * sizeof *files);
		if (!files)
			return -1;
	}
	files[nfiles].dev = st->st_dev;
	files[nfiles].ino = st->st_ino;
	snprintf(files[nfiles].path, sizeof files[nfiles].path, "%s", path);
	nfiles++;
	return 0;
}

static const char *path_of(uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < nfiles; i++)
		if (files[i].dev == dev && files[i].ino == ino)
			return files[i].path;
	return NULL;
}

static int full_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n <= 0)
			return -1;
		p += n, len -= (size_t)n, off += (uint64_t)n;
	}
	return 0;
}

/* One file: undo its records from first on (in reverse), then replay them
 * as the power cut decides. */
static int cut_file(const char *path, jrec **v, size_t n, size_t first, fsc_rng *rng, enum pcut_mode mode,
		    pcut_stats *st)
{
	int fd = open(path, O_RDWR | O_CLOEXEC), rc = 0;
	if (fd < 0) {
		fprintf(stderr, "pcut: open %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (size_t i = n; i-- > first && rc == 0;) { /* back to the last sync */
		const pcut_rec *r = &v[i]->r;
		if (r->kind == 'W')
			rc = full_pwrite(fd, v[i]->old, r->old_len, r->off) || ftruncate(fd, (off_t)r->old_size);
		else if (r->kind == 'T')
			rc = ftruncate(fd, (off_t)r->old_size) || full_pwrite(fd, v[i]->old, r->old_len, r->off);
	}
	for (size_t i = first; i < n && rc == 0; i++) { /* what reached the disk */
		const pcut_rec *r = &v[i]->r;
		if (r->kind == 'T') {
			rc = ftruncate(fd, (off_t)r->off);
			continue;
		}
		if (r->kind != 'W')
			continue;
		st->pending++;
		uint64_t x = mode == PCUT_DROP_ALL ? 0 : fsc_below(rng, 5);
		if (x < 2) {
			st->dropped++;
		} else if (x < 4 || r->len < 2) {
			st->kept++;
			rc = full_pwrite(fd, v[i]->data, r->len, r->off);
		} else {
			st->torn++;
			rc = full_pwrite(fd, v[i]->data, 1 + fsc_below(rng, r->len - 1), r->off);
		}
	}
	if (rc)
		fprintf(stderr, "pcut: cutting %s: %s\n", path, strerror(errno));
	close(fd);
	return rc ? -1 : 0;
}

int pcut_apply(const char *journal, const char *store, uint64_t seed, enum pcut_mode mode, pcut_stats *st)
{
	FILE *f = fopen(journal, "rb");
	uint8_t *buf = NULL;
	size_t size = 0, cap = 0, nrec = 0, caprec = 0;
	jrec *recs = NULL;
	jrec **fv = NULL;
	fsc_rng rng = {seed};
	int rc = -1;

	memset(st, 0, sizeof *st);
	if (!f) {
		if (errno == ENOENT)
			return 0; /* the daemon wrote nothing */
		fprintf(stderr, "pcut: %s: %s\n", journal, strerror(errno));
		return -1;
	}
	for (;;) { /* the whole journal */
		if (size == cap) {
			cap = cap ? 2 * cap : 1 << 20;
			uint8_t *nb = realloc(buf, cap);
			if (!nb)
				goto out;
			buf = nb;
		}
		size_t got = fread(buf + size, 1, cap - size, f);
		if (!got)
			break;
		size += got;
	}
	for (size_t p = 0; p + sizeof(pcut_rec) <= size;) { /* a torn last record is ignored: its write never ran */
		pcut_rec r;
		memcpy(&r, buf + p, sizeof r);
		size_t body = r.kind == 'W' ? r.len + r.old_len : r.old_len;
		if (r.magic != PCUT_MAGIC) {
			fprintf(stderr, "pcut: %s: bad record at %zu\n", journal, p);
			goto out;
		}
		if (p + sizeof r + body > size)
			break;
		if (r.kind == 'C')
			st->at_sync = 1;
		if (r.kind == '!') {
			fprintf(stderr, "pcut: tpfsd wrote its store in a way the emulation does not model (%s)\n",
				(const char *)(buf + p + sizeof r));
			goto out;
		}
		if (nrec == caprec) {
			caprec = caprec ? 2 * caprec : 1024;
			jrec *nr = realloc(recs, caprec * sizeof *recs);
			if (!nr)
				goto out;
			recs = nr;
		}
		recs[nrec].r = r;
		recs[nrec].data = buf + p + sizeof r;
		recs[nrec].old = r.kind == 'W' ? buf + p + sizeof r + r.len : buf + p + sizeof r;
		nrec++;
		p += sizeof r + body;
	}
	nfiles = 0;
	if (nftw(store, visit, 16, FTW_PHYS) != 0) {
		fprintf(stderr, "pcut: cannot list %s\n", store);
		goto out;
	}
	fv = malloc((nrec ? nrec : 1) * sizeof *fv);
	if (!fv)
		goto out;
	for (size_t i = 0; i < nrec; i++) { /* each file once */
		const pcut_rec *r = &recs[i].r;
		size_t n = 0, first = 0;
		uint64_t upto = 0;
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = recs[j].r.dev == r->dev && recs[j].r.ino == r->ino;
		if (seen)
			continue;
		for (size_t j = i; j < nrec; j++)
			if (recs[j].r.dev == r->dev && recs[j].r.ino == r->ino) {
				if (recs[j].r.kind == 'S' && recs[j].r.off > upto)
					upto = recs[j].r.off;
				fv[n++] = &recs[j];
			}
		while (first < n && fv[first]->r.seq < upto)
			first++;
		const char *path = path_of(r->dev, r->ino);
		if (!path) /* unlinked since: nothing left to cut */
			continue;
		st->files++;
		if (cut_file(path, fv, n, first, &rng, mode, st) != 0)
			goto out;
	}
	rc = 0;
out:
	free(fv);
	free(recs);
	free(buf);
	fclose(f);
	return rc;
}
