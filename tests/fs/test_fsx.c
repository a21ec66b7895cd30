/*
 * test_fsx -- an fsx-like exerciser: random operations on one file of a
 * real tpfs mount, mirrored on a model of the file in memory, every result
 * checked against the model.
 *
 * Operations: pwrite, pread (compared), ftruncate up and down, fallocate
 * (allocate, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE), mmap reads (compared) and
 * mmap writes (msync), copy_file_range inside the file, O_APPEND writes on a
 * second descriptor, close and reopen (sometimes with O_TRUNC), fsync and
 * fdatasync, SEEK_DATA/SEEK_HOLE (every hole reported must read as zeros,
 * every byte skipped by SEEK_DATA too), and a few unmount, `tpfs check`,
 * remount cycles.  st_size is compared after every operation and the whole
 * file every 500 operations and at the end (after a last remount).
 *
 * Parameters: a seed and a profile (block-crossing small I/O, mixed sizes,
 * sparse far offsets, mmap-heavy).  A default run takes ~20-30 s; TP_LONG=1
 * runs each profile for minutes and with more seeds.  On a mismatch the
 * test prints the seed, the operation number and the tail of the operation
 * log.  To rerun: TP_FSX_SEED=<seed> (every parameter takes that seed),
 * TP_FSX_OPS=<n> (stop after n operations instead of a time budget),
 * TP_FSX_PROFILE=<small|mixed|sparse|mmap> (that profile only), TP_FSX_TRACE=1
 * (print every operation as it runs).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"

enum profile { P_SMALL, P_MIXED, P_SPARSE, P_MMAP };
static const char *const profile_names[] = {"small", "mixed", "sparse", "mmap"};

typedef struct fsx_param {
	uint64_t seed;
	int profile;
	double seconds;
	char opts[96]; /* tpfsd -o */
} fsx_param;

enum fop {
	F_WRITE, F_READ, F_TRUNC, F_FALLOC, F_KEEP, F_PUNCH, F_MAPREAD, F_MAPWRITE, F_COPY, F_APPEND,
	F_REOPEN, F_REOPEN_TRUNC, F_FSYNC, F_FDATASYNC, F_SEEK, F_REMOUNT, F_NOPS
};
static const char *const fop_names[] = {
	"write", "read", "truncate", "fallocate", "fallocate(KEEP_SIZE)", "punch", "mapread", "mapwrite",
	"copy_file_range", "append", "reopen", "reopen(O_TRUNC)", "fsync", "fdatasync", "seek", "remount",
};

/* weights per profile */
static const int weights[4][F_NOPS] = {
	/*            wr  rd  tr  fa  ke  pu  mr  mw  cp  ap  re  rt  fs  fd  sk  rm */
	[P_SMALL] = {30, 30, 6, 3, 3, 4, 3, 3, 3, 4, 2, 1, 1, 1, 4, 1},
	[P_MIXED] = {25, 25, 8, 4, 3, 5, 4, 4, 4, 3, 2, 1, 1, 1, 4, 1},
	[P_SPARSE] = {25, 20, 10, 4, 4, 8, 2, 2, 3, 2, 2, 1, 1, 1, 8, 1},
	[P_MMAP] = {15, 15, 6, 2, 2, 3, 20, 20, 3, 2, 2, 1, 1, 1, 3, 1},
};

typedef struct logent {
	uint64_t n;
	int op;
	uint64_t off, len, size_after;
	int64_t result;
} logent;

#define LOGN 64
#define MAX_REMOUNTS 3

typedef struct fsx {
	const fsx_param *p;
	uint64_t rng, n;
	unsigned char *model, *buf, *buf2;
	uint64_t size, maxsize, maxlen;
	int fd;
	char path[600];
	logent log[LOGN];
	int remounts;
	uint64_t counts[F_NOPS];
} fsx;

static int trace = -1; /* TP_FSX_TRACE=1: print every operation */

static void log_op(fsx *x, int op, uint64_t off, uint64_t len, int64_t result)
{
	logent *e = &x->log[x->n % LOGN];
	*e = (logent){x->n, op, off, len, x->size, result};
	x->counts[op]++;
	if (trace < 0)
		trace = getenv("TP_FSX_TRACE") && atoi(getenv("TP_FSX_TRACE")) > 0;
	if (trace)
		fprintf(stderr, "  %8" PRIu64 " %-20s off %12" PRIu64 " len %8" PRIu64 " -> %" PRId64 "\n", x->n, fop_names[op],
			off, len, result);
}

static void dump_log(fsx *x)
{
	fprintf(stderr, "fsx: seed %" PRIu64 " profile %s: operation log (last %d):\n", x->p->seed,
		profile_names[x->p->profile], LOGN);
	uint64_t first = x->n >= LOGN ? x->n - LOGN + 1 : 0;
	for (uint64_t i = first; i <= x->n; i++) {
		logent *e = &x->log[i % LOGN];
		if (e->n != i)
			continue;
		fprintf(stderr, "  %8" PRIu64 " %-20s off %12" PRIu64 " (0x%" PRIx64 ") len %8" PRIu64 " -> %" PRId64
				" size %" PRIu64 "\n",
			e->n, fop_names[e->op], e->off, e->off, e->len, e->result, e->size_after);
	}
	fprintf(stderr, "fsx: rerun with TP_FSX_SEED=%" PRIu64 " TP_FSX_OPS=%" PRIu64 " TP_FSX_PROFILE=%s\n", x->p->seed,
		x->n + 1, profile_names[x->p->profile]);
}

#define FAIL(x, ...)                                                                                                   \
	do {                                                                                                           \
		dump_log(x);                                                                                           \
		cr_assert_fail(__VA_ARGS__);                                                                           \
	} while (0)

static void fill_random(fsx *x, unsigned char *b, size_t len)
{
	uint64_t s = x->rng ^ (x->n * 0x9e3779b97f4a7c15ull);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = fsu_rand(&s);
		memcpy(b + i, &v, len - i < 8 ? len - i : 8);
	}
	if (len)
		b[0] = (unsigned char)(x->n | 1); /* never an all-zero buffer */
}

static void compare(fsx *x, const unsigned char *got, uint64_t off, uint64_t len, const char *how)
{
	if (memcmp(got, x->model + off, len) == 0)
		return;
	uint64_t i = 0;
	while (i < len && got[i] == x->model[off + i])
		i++;
	uint64_t bad = off + i, j = i;
	while (j < len && got[j] != x->model[off + j])
		j++;
	fprintf(stderr, "fsx: %s: %" PRIu64 " bytes at %" PRIu64 " differ from the model from offset %" PRIu64
			" (0x%" PRIx64 ", block %" PRIu64 " of 4068) for %" PRIu64 " bytes; size %" PRIu64 "\n",
		how, len, off, bad, bad, bad / 4068, j - i, x->size);
	fprintf(stderr, "  file :");
	for (uint64_t k = i; k < i + 16 && k < len; k++)
		fprintf(stderr, " %02x", got[k]);
	fprintf(stderr, "\n  model:");
	for (uint64_t k = i; k < i + 16 && k < len; k++)
		fprintf(stderr, " %02x", x->model[off + k]);
	fprintf(stderr, "\n");
	FAIL(x, "fsx: seed %" PRIu64 ": data mismatch at offset %" PRIu64 " after operation %" PRIu64, x->p->seed, bad,
	     x->n);
}

static void check_size(fsx *x)
{
	struct stat st;
	if (fstat(x->fd, &st) != 0)
		FAIL(x, "fstat: %s", strerror(errno));
	if ((uint64_t)st.st_size != x->size)
		FAIL(x, "fsx: seed %" PRIu64 ": st_size %lld after operation %" PRIu64 ", the model says %" PRIu64, x->p->seed,
		     (long long)st.st_size, x->n, x->size);
}

static void read_check(fsx *x, uint64_t off, uint64_t len, const char *how)
{
	uint64_t done = 0;
	while (done < len) {
		ssize_t r = pread(x->fd, x->buf + done, len - done, (off_t)(off + done));
		if (r < 0)
			FAIL(x, "pread(%" PRIu64 ", %" PRIu64 "): %s", off + done, len - done, strerror(errno));
		if (r == 0)
			break;
		done += (uint64_t)r;
	}
	uint64_t want = off >= x->size ? 0 : off + len > x->size ? x->size - off : len;
	if (done != want)
		FAIL(x, "fsx: seed %" PRIu64 ": %s at %" PRIu64 " of %" PRIu64 " bytes read %" PRIu64 ", want %" PRIu64
			" (size %" PRIu64 ")",
		     x->p->seed, how, off, len, done, want, x->size);
	compare(x, x->buf, off, done, how);
}

static void verify_all(fsx *x, const char *how)
{
	for (uint64_t off = 0; off < x->size; off += x->maxlen) {
		uint64_t len = x->size - off < x->maxlen ? x->size - off : x->maxlen;
		read_check(x, off, len, how);
	}
	/* reading at the end gives nothing */
	if (pread(x->fd, x->buf, 16, (off_t)x->size) != 0)
		FAIL(x, "fsx: a read at the size (%" PRIu64 ") returned data or failed", x->size);
}

static void open_file(fsx *x, int flags)
{
	x->fd = open(x->path, O_RDWR | O_CREAT | flags, 0644);
	if (x->fd < 0)
		FAIL(x, "open %s: %s", x->path, strerror(errno));
}

/* model: zero [from, to) */
static void mzero(fsx *x, uint64_t from, uint64_t to)
{
	if (to > from)
		memset(x->model + from, 0, to - from);
}

static void set_size(fsx *x, uint64_t size)
{
	if (size < x->size)
		mzero(x, size, x->size); /* bytes past the size read as zeros once it grows again */
	x->size = size;
}

/* An offset: near a block boundary often (tpfs blocks are 4068 bytes,
 * pages 4096), else anywhere below lim. */
static uint64_t pick_off(fsx *x, uint64_t lim)
{
	if (lim == 0)
		return 0;
	uint64_t r = fsu_below(&x->rng, 4);
	if (r == 0) {
		uint64_t bs = fsu_below(&x->rng, 2) ? 4068 : 4096;
		uint64_t b = fsu_below(&x->rng, lim / bs + 1) * bs;
		uint64_t d = fsu_below(&x->rng, 16);
		uint64_t o = b >= 8 ? b + d - 8 : b + d;
		return o < lim ? o : lim - 1;
	}
	return fsu_below(&x->rng, lim);
}

static uint64_t pick_len(fsx *x)
{
	uint64_t r = fsu_below(&x->rng, 8);
	if (r == 0)
		return 1 + fsu_below(&x->rng, 16);
	if (r == 1)
		return 4068 * (1 + fsu_below(&x->rng, 4));
	return 1 + fsu_below(&x->rng, x->maxlen);
}

/* keeps [*off, *off + *len) inside the model */
static void clamp(fsx *x, uint64_t *off, uint64_t *len)
{
	if (*off >= x->maxsize)
		*off = x->maxsize - 1;
	if (*off + *len > x->maxsize)
		*len = x->maxsize - *off;
}

static void op_seek(fsx *x)
{
	if (x->size == 0)
		return;
	uint64_t off = fsu_below(&x->rng, x->size);
	off_t d = lseek(x->fd, (off_t)off, SEEK_DATA);
	int e = errno;
	log_op(x, F_SEEK, off, 0, d);
	if (d < 0) {
		if (e != ENXIO)
			FAIL(x, "SEEK_DATA %" PRIu64 ": %s", off, strerror(e));
		d = (off_t)x->size; /* no data after off: all zeros */
	}
	if ((uint64_t)d < off || (uint64_t)d > x->size)
		FAIL(x, "SEEK_DATA %" PRIu64 " gave %lld (size %" PRIu64 ")", off, (long long)d, x->size);
	for (uint64_t i = off; i < (uint64_t)d; i++)
		if (x->model[i])
			FAIL(x, "fsx: seed %" PRIu64 ": SEEK_DATA from %" PRIu64 " skipped to %lld over data at %" PRIu64,
			     x->p->seed, off, (long long)d, i);
	off_t h = lseek(x->fd, (off_t)off, SEEK_HOLE);
	if (h < 0 || (uint64_t)h < off || (uint64_t)h > x->size)
		FAIL(x, "SEEK_HOLE %" PRIu64 " gave %lld (%s; size %" PRIu64 ")", off, (long long)h, h < 0 ? strerror(errno) : "",
		     x->size);
	if ((uint64_t)h < x->size) {
		/* a hole: zeros up to the next data */
		off_t nd = lseek(x->fd, h, SEEK_DATA);
		uint64_t end = nd < 0 ? x->size : (uint64_t)nd;
		if (nd < 0 && errno != ENXIO)
			FAIL(x, "SEEK_DATA %lld: %s", (long long)h, strerror(errno));
		if (end <= (uint64_t)h)
			FAIL(x, "SEEK_DATA at the hole %lld gave %lld", (long long)h, (long long)nd);
		for (uint64_t i = (uint64_t)h; i < end; i++)
			if (x->model[i])
				FAIL(x, "fsx: seed %" PRIu64 ": SEEK_HOLE says [%lld, %" PRIu64 ") is a hole, but byte %" PRIu64
					" is data",
				     x->p->seed, (long long)h, end, i);
	}
	if (lseek(x->fd, (off_t)x->size, SEEK_DATA) >= 0 || errno != ENXIO)
		FAIL(x, "SEEK_DATA at the size must fail with ENXIO");
}

static void step(fsx *x)
{
	const int *w = weights[x->p->profile];
	int total = 0, op = 0;
	for (int i = 0; i < F_NOPS; i++)
		total += w[i];
	int r = (int)fsu_below(&x->rng, (uint64_t)total);
	while (r >= w[op])
		r -= w[op++];
	uint64_t off, len;
	ssize_t k;
	switch (op) {
	case F_WRITE:
	case F_APPEND: {
		if (op == F_APPEND && x->size >= x->maxsize)
			break;
		len = pick_len(x);
		if (op == F_APPEND) {
			off = x->size;
		} else if (x->p->profile == P_SPARSE && fsu_below(&x->rng, 2)) {
			off = fsu_below(&x->rng, x->maxsize);
		} else {
			off = pick_off(x, x->size + x->size / 4 + 4096);
		}
		clamp(x, &off, &len);
		fill_random(x, x->buf, len);
		if (op == F_APPEND) {
			int fd = open(x->path, O_WRONLY | O_APPEND);
			if (fd < 0)
				FAIL(x, "open O_APPEND: %s", strerror(errno));
			k = write(fd, x->buf, len);
			if (close(fd) != 0)
				FAIL(x, "close: %s", strerror(errno));
		} else {
			k = pwrite(x->fd, x->buf, len, (off_t)off);
		}
		log_op(x, op, off, len, k);
		if (k != (ssize_t)len)
			FAIL(x, "%s(%" PRIu64 ", %" PRIu64 ") returned %zd: %s", fop_names[op], off, len, k,
			     k < 0 ? strerror(errno) : "short");
		memcpy(x->model + off, x->buf, len);
		if (off + len > x->size)
			x->size = off + len;
		x->log[x->n % LOGN].size_after = x->size;
		break;
	}
	case F_READ:
		off = pick_off(x, x->size + 100);
		len = pick_len(x);
		clamp(x, &off, &len);
		log_op(x, op, off, len, 0);
		read_check(x, off, len, "pread");
		break;
	case F_TRUNC:
		if (x->p->profile == P_SPARSE)
			len = fsu_below(&x->rng, 3) ? pick_off(x, x->maxsize) : pick_off(x, x->size + 1);
		else
			len = fsu_below(&x->rng, 3) ? pick_off(x, x->size + 1) : pick_off(x, x->maxsize);
		if (ftruncate(x->fd, (off_t)len) != 0)
			FAIL(x, "ftruncate(%" PRIu64 "): %s", len, strerror(errno));
		set_size(x, len);
		log_op(x, op, len, 0, 0);
		break;
	case F_FALLOC:
	case F_KEEP:
	case F_PUNCH: {
		int mode = op == F_FALLOC ? 0 : op == F_KEEP ? FALLOC_FL_KEEP_SIZE : FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		off = pick_off(x, op == F_PUNCH ? x->size + 1 : x->size + x->size / 4 + 4096);
		len = 1 + fsu_below(&x->rng, x->maxlen);
		clamp(x, &off, &len);
		int rc = fallocate(x->fd, mode, (off_t)off, (off_t)len);
		log_op(x, op, off, len, rc);
		if (rc != 0)
			FAIL(x, "%s(%" PRIu64 ", %" PRIu64 "): %s", fop_names[op], off, len, strerror(errno));
		if (op == F_PUNCH)
			mzero(x, off, off + len < x->size ? off + len : x->size);
		else if (op == F_FALLOC && off + len > x->size)
			x->size = off + len; /* the model is zero past the size already */
		x->log[x->n % LOGN].size_after = x->size;
		break;
	}
	case F_MAPREAD:
	case F_MAPWRITE: {
		if (op == F_MAPREAD && x->size == 0)
			break;
		off = pick_off(x, op == F_MAPREAD ? x->size : x->size + 8192);
		len = 1 + fsu_below(&x->rng, x->maxlen < 65536 ? x->maxlen : 65536);
		clamp(x, &off, &len);
		if (op == F_MAPREAD && off + len > x->size)
			len = x->size - off;
		if (op == F_MAPWRITE && off + len > x->size) { /* as fsx: grow first */
			if (ftruncate(x->fd, (off_t)(off + len)) != 0)
				FAIL(x, "ftruncate for mapwrite: %s", strerror(errno));
			x->size = off + len;
		}
		uint64_t pg = off & ~(uint64_t)4095, mlen = off + len - pg;
		unsigned char *m = mmap(NULL, mlen, op == F_MAPREAD ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
					x->fd, (off_t)pg);
		log_op(x, op, off, len, m == MAP_FAILED ? -1 : 0);
		if (m == MAP_FAILED)
			FAIL(x, "mmap(%" PRIu64 ", %" PRIu64 "): %s", pg, mlen, strerror(errno));
		if (op == F_MAPREAD) {
			compare(x, m + (off - pg), off, len, "mmap read");
		} else {
			fill_random(x, x->buf, len);
			memcpy(m + (off - pg), x->buf, len);
			memcpy(x->model + off, x->buf, len);
			if (msync(m, mlen, MS_SYNC) != 0)
				FAIL(x, "msync: %s", strerror(errno));
		}
		munmap(m, mlen);
		break;
	}
	case F_COPY: {
		if (x->size < 2)
			break;
		uint64_t src = fsu_below(&x->rng, x->size), dst;
		len = 1 + fsu_below(&x->rng, x->size - src < x->maxlen ? x->size - src : x->maxlen);
		/* a destination that does not overlap [src, src + len) */
		if (fsu_below(&x->rng, 2) && src >= len + 1)
			dst = fsu_below(&x->rng, src - len + 1);
		else
			dst = src + len + fsu_below(&x->rng, 8192);
		if (dst + len > x->maxsize)
			break;
		loff_t is = (loff_t)src, os = (loff_t)dst;
		uint64_t done = 0;
		while (done < len) {
			k = copy_file_range(x->fd, &is, x->fd, &os, len - done, 0);
			if (k <= 0)
				break;
			done += (uint64_t)k;
		}
		log_op(x, op, src, len, (int64_t)dst);
		if (done != len)
			FAIL(x, "copy_file_range(%" PRIu64 " -> %" PRIu64 ", %" PRIu64 ") copied %" PRIu64 ": %s", src, dst, len,
			     done, strerror(errno));
		memmove(x->model + dst, x->model + src, len);
		if (dst + len > x->size)
			x->size = dst + len;
		x->log[x->n % LOGN].size_after = x->size;
		break;
	}
	case F_REOPEN:
	case F_REOPEN_TRUNC:
		if (close(x->fd) != 0)
			FAIL(x, "close: %s", strerror(errno));
		open_file(x, op == F_REOPEN_TRUNC ? O_TRUNC : 0);
		if (op == F_REOPEN_TRUNC)
			set_size(x, 0);
		log_op(x, op, 0, 0, 0);
		break;
	case F_FSYNC:
	case F_FDATASYNC:
		k = op == F_FSYNC ? fsync(x->fd) : fdatasync(x->fd);
		log_op(x, op, 0, 0, k);
		if (k != 0)
			FAIL(x, "%s: %s", fop_names[op], strerror(errno));
		break;
	case F_SEEK: op_seek(x); break;
	case F_REMOUNT:
		if (x->remounts >= MAX_REMOUNTS)
			break;
		x->remounts++;
		log_op(x, op, 0, 0, 0);
		if (close(x->fd) != 0)
			FAIL(x, "close: %s", strerror(errno));
		fsu_cycle();
		open_file(x, 0);
		check_size(x);
		verify_all(x, "read after remount");
		break;
	}
	check_size(x);
}

static void run_fsx(const fsx_param *p)
{
	fsx *x = calloc(1, sizeof *x);
	uint64_t max_ops = fsu_env_seed("TP_FSX_OPS", 0);
	cr_assert_not_null(x);
	x->p = p;
	x->rng = p->seed;
	x->fd = -1;
	switch (p->profile) {
	case P_SMALL: x->maxsize = 64 << 10; x->maxlen = 8200; break;
	case P_MIXED: x->maxsize = 4 << 20; x->maxlen = 256 << 10; break;
	case P_SPARSE: x->maxsize = 64 << 20; x->maxlen = 128 << 10; break;
	default: x->maxsize = 1 << 20; x->maxlen = 64 << 10; break;
	}
	x->model = calloc(1, x->maxsize + 8);
	x->buf = malloc(x->maxsize + 8);
	cr_assert(x->model && x->buf);
	fprintf(stderr, "fsx: seed %" PRIu64 " profile %s, %.0f s%s%s%s\n", p->seed, profile_names[p->profile], p->seconds,
		max_ops ? " (TP_FSX_OPS set: bounded by operations)" : "", p->opts[0] ? ", -o " : "", p->opts);
	fsu_start(p->opts[0] ? p->opts : NULL, 0);
	fsu_path(x->path, sizeof x->path, "%s/fsx.%s", fsu_m.mnt, profile_names[p->profile]);
	open_file(x, O_TRUNC);
	double t0 = fsu_now();
	for (x->n = 0;; x->n++) {
		if (max_ops ? x->n >= max_ops : fsu_now() - t0 >= p->seconds)
			break;
		step(x);
		if (x->n % 500 == 499)
			verify_all(x, "periodic read of the whole file");
	}
	verify_all(x, "final read");
	if (close(x->fd) != 0)
		FAIL(x, "close: %s", strerror(errno));
	/* the last state survives an unmount */
	fsu_cycle();
	open_file(x, 0);
	check_size(x);
	verify_all(x, "read after the final remount");
	close(x->fd);
	fprintf(stderr, "fsx: seed %" PRIu64 " profile %s: %" PRIu64 " operations in %.1f s, size %" PRIu64 ", %d remounts;",
		p->seed, profile_names[p->profile], x->n, fsu_now() - t0, x->size, x->remounts + 1);
	for (int i = 0; i < F_NOPS; i++)
		fprintf(stderr, " %s %" PRIu64, fop_names[i], x->counts[i]);
	fprintf(stderr, "\n");
	fsu_stop_check();
	free(x->model);
	free(x->buf);
	free(x);
}

ParameterizedTestParameters(fsx, run)
{
	static fsx_param v[24];
	size_t n = 0;
	int lng = fsu_long();
	uint64_t seed = fsu_env_seed("TP_FSX_SEED", 0);
	const char *only = getenv("TP_FSX_PROFILE");
	/* the default mount; no kernel caching of names and attributes; a
	 * buffer pool of 256 pages (eviction all the time) with every call
	 * durable */
	static const char *const optsets[] = {"", "attr_timeout=0,entry_timeout=0,negative_timeout=0", "sync,cache_size=1M"};
	int rounds = lng ? 3 : 1;
	for (int r = 0; r < rounds; r++)
		for (int p = 0; p < 6; p++) {
			int prof = p < 4 ? p : p == 4 ? P_MIXED : P_SPARSE;
			if (only && *only && strcmp(only, profile_names[prof]))
				continue;
			v[n].seed = seed ? seed : 0x5eed0000ull + (uint64_t)(r * 6 + p) * 7919;
			v[n].profile = prof;
			v[n].seconds = lng ? 100 : 7;
			snprintf(v[n].opts, sizeof v[n].opts, "%s", optsets[p < 4 ? 0 : p - 3]);
			n++;
		}
	return cr_make_param_array(fsx_param, v, n);
}

ParameterizedTest(fsx_param *p, fsx, run, .fini = fsu_teardown, .timeout = 900) { run_fsx(p); }
