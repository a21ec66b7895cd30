/*
 * test_integrity -- data integrity on a real tpfs mount: many files, deep
 * trees, concurrent writers to different files and to one file (disjoint
 * stripes, whole records over each other, O_APPEND), rename storms (with
 * RENAME_NOREPLACE nothing may be lost; replacing ones may not leak),
 * create/mkdir/link races with exactly one winner, write-then-rename seen
 * atomically by readers, directories created, removed and moved under each
 * other at once, hard-link counts, a directory of 10,000 entries read while
 * names move (and deleted while read, as rm -r does), many and large
 * xattrs, names of every byte, sparse files and honest st_blocks,
 * SEEK_DATA/SEEK_HOLE, files of 1 TiB and the 2^44 limit, statfs, and files
 * unlinked (or replaced by rename) while open: readable until the last
 * close and reclaimed then, or at the next mount after kill -9.
 *
 * Every test ends with an unmount (the daemon must exit 0) and a clean
 * `tpfs check`; most also compare their data after a remount, and several
 * compare `tpfs check -v`'s inode and block counts with what must be left.
 * File contents are a deterministic function of (file id, offset), so a
 * check needs no copy of the data.  TP_LONG=1 makes every test larger.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fsutil.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define TIB (1ull << 40)
#define MAXF (1ull << 44)
#define FUSE_SUPER_MAGIC 0x65735546

static void setup(void) { fsu_start(NULL, 0); }

static const char *mp(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *mp(const char *fmt, ...)
{
	static char bufs[8][4096];
	static int k;
	char rel[3000];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rel, sizeof rel, fmt, ap);
	va_end(ap);
	k = (k + 1) % 8;
	snprintf(bufs[k], sizeof bufs[k], "%s/%s", fsu_m.mnt, rel);
	return bufs[k];
}

/* ---- deterministic contents ---- */

static void pat(uint64_t id, uint64_t off, unsigned char *b, size_t len)
{
	size_t i = 0;
	while (i < len) {
		uint64_t pos = off + i, s = id * 0x100000001b3ull ^ (pos >> 3) * 0x9e3779b97f4a7c15ull;
		uint64_t w = fsu_rand(&s);
		b[i] = (unsigned char)(w >> ((pos & 7) * 8));
		i++;
	}
}

static uint64_t file_size_of(uint64_t id, uint64_t max) { uint64_t s = id; return fsu_below(&s, max + 1); }

static void write_pat(const char *path, uint64_t id, uint64_t size)
{
	unsigned char *b = malloc(size + 1);
	pat(id, 0, b, size);
	int rc = fsu_write_file(path, b, size, 0644);
	cr_assert_eq(rc, 0, "write %s: %s", path, strerror(-rc));
	free(b);
}

/* The file holds pattern id over size bytes exactly. */
static void check_pat(const char *path, uint64_t id, uint64_t size)
{
	unsigned char *b = malloc(size + 2), *w = malloc(size + 1);
	ssize_t r = fsu_read_file(path, b, size + 1);
	cr_assert_eq(r, (ssize_t)size, "%s: read %zd bytes (%s), want %" PRIu64, path, r, r < 0 ? strerror((int)-r) : "",
		     size);
	pat(id, 0, w, size);
	if (memcmp(b, w, size)) {
		uint64_t i = 0;
		while (b[i] == w[i])
			i++;
		cr_assert_fail("%s: content differs from offset %" PRIu64 " (file id %" PRIu64 ", size %" PRIu64 ")", path, i,
			       id, size);
	}
	free(b);
	free(w);
}

/* ---- many files, deep trees ---- */

Test(integrity, many_files, .init = setup, .fini = fsu_teardown, .timeout = 600)
{
	int ndirs = fsu_long() ? 100 : 20, per = fsu_long() ? 300 : 100, n = ndirs * per;
	double t0 = fsu_now();
	for (int d = 0; d < ndirs; d++)
		cr_assert_eq(mkdir(mp("d%03d", d), 0755), 0);
	for (int i = 0; i < n; i++)
		write_pat(mp("d%03d/f%05d", i % ndirs, i), (uint64_t)i, file_size_of((uint64_t)i, 12000));
	double t1 = fsu_now();
	for (int i = 0; i < n; i++)
		check_pat(mp("d%03d/f%05d", i % ndirs, i), (uint64_t)i, file_size_of((uint64_t)i, 12000));
	for (int d = 0; d < ndirs; d++) {
		DIR *dp = opendir(mp("d%03d", d));
		int cnt = 0;
		struct dirent *e;
		cr_assert_not_null(dp);
		while ((e = readdir(dp)))
			cnt += e->d_name[0] != '.';
		closedir(dp);
		cr_assert_eq(cnt, per, "d%03d lists %d files, want %d", d, cnt, per);
	}
	fsu_cycle();
	for (int i = 0; i < n; i++) {
		struct stat st;
		const char *p = mp("d%03d/f%05d", i % ndirs, i);
		cr_assert_eq(stat(p, &st), 0, "%s after remount: %s", p, strerror(errno));
		cr_assert_eq((uint64_t)st.st_size, file_size_of((uint64_t)i, 12000));
		cr_assert_eq(st.st_nlink, 1);
		check_pat(p, (uint64_t)i, file_size_of((uint64_t)i, 12000));
	}
	for (int i = 0; i < n; i += 2)
		cr_assert_eq(unlink(mp("d%03d/f%05d", i % ndirs, i)), 0);
	for (int i = 0; i < n; i++) {
		struct stat st;
		int rc = stat(mp("d%03d/f%05d", i % ndirs, i), &st);
		if (i % 2 == 0)
			cr_assert(rc != 0 && errno == ENOENT, "file %d should be gone", i);
		else
			cr_assert_eq(rc, 0, "file %d should be there", i);
	}
	fsu_stop_check();
	uint64_t dirs, others, blocks;
	cr_assert_eq(fsu_check_counts(&dirs, &others, &blocks), 0);
	cr_assert_eq(dirs, (uint64_t)ndirs + 1, "tpfs check counts %" PRIu64 " directories", dirs);
	cr_assert_eq(others, (uint64_t)n / 2, "tpfs check counts %" PRIu64 " other inodes, want %d (the deleted ones leaked?)",
		     others, n / 2);
	fprintf(stderr, "many_files: %d files written in %.1f s, all checked in %.1f s\n", n, t1 - t0, fsu_now() - t1);
}

Test(integrity, deep_tree, .init = setup, .fini = fsu_teardown, .timeout = 600)
{
	int depth = fsu_long() ? 2000 : 400;
	char name[16];
	cr_assert_eq(mkdir(mp("deep"), 0755), 0);
	int fd = open(mp("deep"), O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < depth; i++) {
		snprintf(name, sizeof name, "L%d", i);
		cr_assert_eq(mkdirat(fd, name, 0755), 0, "mkdir at depth %d: %s", i, strerror(errno));
		int f = openat(fd, "file", O_WRONLY | O_CREAT | O_EXCL, 0644);
		cr_assert_geq(f, 0);
		cr_assert_eq(write(f, name, strlen(name)), (ssize_t)strlen(name));
		close(f);
		int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY);
		cr_assert_geq(nfd, 0, "openat depth %d: %s", i, strerror(errno));
		close(fd);
		fd = nfd;
	}
	close(fd);

	/* moving the whole tree, and a directory into its own subtree */
	cr_assert_eq(rename(mp("deep"), mp("moved")), 0);
	fd = open(mp("moved"), O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < depth - 1; i++) {
		snprintf(name, sizeof name, "L%d", i);
		int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY);
		cr_assert_geq(nfd, 0);
		close(fd);
		fd = nfd;
	}
	/* fd: the deepest directory but one; the top may not move under it */
	errno = 0;
	cr_assert_eq(renameat(AT_FDCWD, mp("moved"), fd, "loop"), -1);
	cr_assert_eq(errno, EINVAL, "a directory renamed into its own subtree at depth %d: %s (want EINVAL)", depth,
		     strerror(errno));
	close(fd);

	fsu_cycle();
	fd = open(mp("moved"), O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < depth; i++) {
		char got[32] = {0};
		snprintf(name, sizeof name, "L%d", i);
		int f = openat(fd, "file", O_RDONLY);
		cr_assert_geq(f, 0, "depth %d: file: %s", i, strerror(errno));
		cr_assert_eq(read(f, got, sizeof got - 1), (ssize_t)strlen(name));
		cr_assert_str_eq(got, name);
		close(f);
		struct stat st;
		cr_assert_eq(fstat(fd, &st), 0);
		cr_assert_eq(st.st_nlink, 3, "directory at depth %d has %lu links", i, (unsigned long)st.st_nlink);
		int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY);
		cr_assert_geq(nfd, 0);
		close(fd);
		fd = nfd;
	}
	close(fd);
	/* remove it bottom up, climbing with ".." */
	fd = open(mp("moved"), O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < depth; i++) {
		snprintf(name, sizeof name, "L%d", i);
		int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY);
		cr_assert_geq(nfd, 0);
		close(fd);
		fd = nfd;
	}
	for (int i = depth; i >= 1; i--) {
		/* fd: level i, named L<i-1> in its parent */
		if (i < depth)
			cr_assert_eq(unlinkat(fd, "file", 0), 0, "unlink at depth %d: %s", i, strerror(errno));
		int parent = openat(fd, "..", O_RDONLY | O_DIRECTORY);
		cr_assert_geq(parent, 0, "'..' at depth %d: %s", i, strerror(errno));
		close(fd);
		snprintf(name, sizeof name, "L%d", i - 1);
		cr_assert_eq(unlinkat(parent, name, AT_REMOVEDIR), 0, "rmdir %s: %s", name, strerror(errno));
		fd = parent;
	}
	cr_assert_eq(unlinkat(fd, "file", 0), 0);
	close(fd);
	cr_assert_eq(rmdir(mp("moved")), 0);
	fsu_stop_check();
	uint64_t dirs, others;
	cr_assert_eq(fsu_check_counts(&dirs, &others, NULL), 0);
	cr_assert_eq(dirs, 1);
	cr_assert_eq(others, 0);
}

/* ---- concurrent writers ---- */

/* Worker w's operation stream on its own file: the same from the seed, so
 * the parent can rebuild the expected contents without doing I/O. */
typedef struct wop {
	uint64_t off, len, trunc; /* trunc: 0, or 1 + new size */
} wop;

static wop gen_op(uint64_t *s, uint64_t maxsize)
{
	wop o = {0};
	if (fsu_below(s, 20) == 0) {
		o.trunc = 1 + fsu_below(s, maxsize);
		return o;
	}
	o.off = fsu_below(s, maxsize - 1);
	o.len = 1 + fsu_below(s, 65536);
	if (o.off + o.len > maxsize)
		o.len = maxsize - o.off;
	return o;
}

static uint64_t model_run(uint64_t seed, int nops, uint64_t maxsize, unsigned char *model)
{
	uint64_t s = seed, size = 0;
	memset(model, 0, maxsize);
	for (int i = 0; i < nops; i++) {
		wop o = gen_op(&s, maxsize);
		if (o.trunc) {
			uint64_t ns = o.trunc - 1;
			if (ns < size)
				memset(model + ns, 0, size - ns);
			size = ns;
		} else {
			pat(seed + (uint64_t)i, o.off, model + o.off, o.len);
			if (o.off + o.len > size)
				size = o.off + o.len;
		}
	}
	return size;
}

static int worker_files(int w, int nops, uint64_t maxsize)
{
	char path[600];
	unsigned char *buf = malloc(65536);
	uint64_t s = 1000 + (uint64_t)w;
	snprintf(path, sizeof path, "%s/w%d", fsu_m.mnt, w);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 1;
	for (int i = 0; i < nops; i++) {
		wop o = gen_op(&s, maxsize);
		if (o.trunc) {
			if (ftruncate(fd, (off_t)(o.trunc - 1)) != 0)
				return 2;
			continue;
		}
		pat(1000 + (uint64_t)w + (uint64_t)i, o.off, buf, o.len);
		if (pwrite(fd, buf, o.len, (off_t)o.off) != (ssize_t)o.len)
			return 3;
		if (i % 97 == 0 && fsync(fd) != 0)
			return 4;
	}
	free(buf);
	return close(fd) == 0 ? 0 : 5;
}

static void check_model_file(const char *path, const unsigned char *model, uint64_t size)
{
	unsigned char *b = malloc(size + 2);
	ssize_t r = fsu_read_file(path, b, size + 1);
	cr_assert_eq(r, (ssize_t)size, "%s: %zd bytes, want %" PRIu64, path, r, size);
	if (memcmp(b, model, size)) {
		uint64_t i = 0;
		while (b[i] == model[i])
			i++;
		cr_assert_fail("%s differs from its model from offset %" PRIu64 " (block %" PRIu64 ")", path, i, i / 4068);
	}
	free(b);
}

Test(integrity, concurrent_writers_files, .init = setup, .fini = fsu_teardown, .timeout = 600)
{
	int nw = 6, nops = fsu_long() ? 20000 : 1500;
	uint64_t maxsize = 2 << 20;
	pid_t pids[16];
	double t0 = fsu_now();
	for (int w = 0; w < nw; w++) {
		pids[w] = fsu_fork();
		cr_assert_geq(pids[w], 0);
		if (pids[w] == 0)
			_exit(worker_files(w, nops, maxsize));
	}
	for (int w = 0; w < nw; w++)
		cr_assert_eq(fsu_wait(pids[w]), 0, "writer %d failed", w);
	fprintf(stderr, "concurrent_writers_files: %d writers x %d operations in %.1f s\n", nw, nops, fsu_now() - t0);
	unsigned char *model = malloc(maxsize);
	for (int round = 0; round < 2; round++) {
		for (int w = 0; w < nw; w++) {
			uint64_t size = model_run(1000 + (uint64_t)w, nops, maxsize, model);
			check_model_file(mp("w%d", w), model, size);
		}
		if (round == 0)
			fsu_cycle();
	}
	free(model);
	fsu_stop_check();
}

/* Disjoint stripes of one file, written in random order by every writer. */
#define STRIPE 5000
static int worker_stripes(int w, int nw, int nstripes, int rounds)
{
	char path[600];
	unsigned char buf[STRIPE];
	uint64_t s = 77 + (uint64_t)w;
	snprintf(path, sizeof path, "%s/shared", fsu_m.mnt);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return 1;
	int mine = (nstripes - w + nw - 1) / nw, *order = malloc(sizeof(int) * (size_t)mine);
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < mine; i++)
			order[i] = w + i * nw;
		for (int i = mine - 1; i > 0; i--) {
			int j = (int)fsu_below(&s, (uint64_t)i + 1), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		for (int i = 0; i < mine; i++) {
			pat((uint64_t)order[i] * 1000 + (uint64_t)r, 0, buf, STRIPE);
			if (pwrite(fd, buf, STRIPE, (off_t)order[i] * STRIPE) != STRIPE)
				return 2;
		}
	}
	free(order);
	return close(fd) == 0 ? 0 : 3;
}

/* Whole records over each other: the last write of each record wins whole. */
#define REC 4096
#define NREC 64
static int worker_records(int w, double seconds)
{
	char path[600];
	unsigned char buf[REC];
	uint64_t s = 999 + (uint64_t)w, seq = 0;
	snprintf(path, sizeof path, "%s/records", fsu_m.mnt);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return 1;
	double t0 = fsu_now();
	while (fsu_now() - t0 < seconds) {
		uint64_t r = fsu_below(&s, NREC), tag = ((uint64_t)w << 32) | ++seq;
		memcpy(buf, &tag, 8);
		pat(tag, 8, buf + 8, REC - 8);
		if (pwrite(fd, buf, REC, (off_t)(r * REC)) != REC)
			return 2;
	}
	return close(fd) == 0 ? 0 : 3;
}

static int reader_records(double seconds, uint64_t *torn)
{
	char path[600];
	unsigned char buf[REC], w[REC];
	uint64_t s = 4242;
	snprintf(path, sizeof path, "%s/records", fsu_m.mnt);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 1;
	double t0 = fsu_now();
	while (fsu_now() - t0 < seconds) {
		uint64_t r = fsu_below(&s, NREC), tag;
		if (pread(fd, buf, REC, (off_t)(r * REC)) != REC)
			return 2;
		memcpy(&tag, buf, 8);
		if (!tag)
			continue;
		pat(tag, 8, w + 8, REC - 8);
		if (memcmp(buf + 8, w + 8, REC - 8))
			(*torn)++;
	}
	close(fd);
	return 0;
}

static void check_records(void)
{
	unsigned char buf[REC], w[REC];
	int fd = open(mp("records"), O_RDONLY);
	cr_assert_geq(fd, 0);
	for (int r = 0; r < NREC; r++) {
		uint64_t tag;
		cr_assert_eq(pread(fd, buf, REC, (off_t)r * REC), REC);
		memcpy(&tag, buf, 8);
		if (!tag)
			continue; /* never written */
		pat(tag, 8, w + 8, REC - 8);
		uint64_t i = 8;
		while (i < REC && buf[i] == w[i])
			i++;
		cr_assert_eq(i, REC, "record %d (writer %" PRIu64 " write %" PRIu64 ") is torn from byte %" PRIu64
				     ": two writes mixed, or a lost update of a shared block",
			     r, tag >> 32, tag & 0xffffffff, i);
	}
	close(fd);
}

Test(integrity, concurrent_writers_one_file, .init = setup, .fini = fsu_teardown, .timeout = 600)
{
	int nw = 6, nstripes = fsu_long() ? 6000 : 1200, rounds = 3;
	pid_t pids[16];
	/* 1: disjoint stripes, not block aligned */
	int fd = open(mp("shared"), O_RDWR | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	for (int w = 0; w < nw; w++) {
		pids[w] = fsu_fork();
		if (pids[w] == 0)
			_exit(worker_stripes(w, nw, nstripes, rounds));
	}
	for (int w = 0; w < nw; w++)
		cr_assert_eq(fsu_wait(pids[w]), 0, "stripe writer %d failed", w);
	/* 2: whole records over each other, with readers */
	fd = open(mp("records"), O_RDWR | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, NREC * REC), 0);
	close(fd);
	uint64_t *torn = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	double secs = fsu_long() ? 30 : 4;
	for (int w = 0; w < nw; w++) {
		pids[w] = fsu_fork();
		if (pids[w] == 0)
			_exit(w < 4 ? worker_records(w, secs) : reader_records(secs, &torn[w]));
	}
	for (int w = 0; w < nw; w++)
		cr_assert_eq(fsu_wait(pids[w]), 0, "record worker %d failed", w);
	if (torn[4] + torn[5])
		fprintf(stderr, "concurrent_writers_one_file: readers saw %" PRIu64 " records changing under a read "
				"(Linux does not promise otherwise for buffered reads)\n",
			torn[4] + torn[5]);
	munmap(torn, 4096);
	for (int round = 0; round < 2; round++) {
		unsigned char buf[STRIPE], want[STRIPE];
		struct stat st;
		cr_assert_eq(stat(mp("shared"), &st), 0);
		cr_assert_eq(st.st_size, (off_t)nstripes * STRIPE);
		fd = open(mp("shared"), O_RDONLY);
		for (int i = 0; i < nstripes; i++) {
			cr_assert_eq(pread(fd, buf, STRIPE, (off_t)i * STRIPE), STRIPE);
			pat((uint64_t)i * 1000 + (uint64_t)(rounds - 1), 0, want, STRIPE);
			cr_assert(!memcmp(buf, want, STRIPE), "stripe %d (writer %d) is not its last round's data", i, i % nw);
		}
		close(fd);
		check_records();
		if (round == 0)
			fsu_cycle();
	}
	fsu_stop_check();
}

/* ---- rename storms ---- */

#define SDIRS 8
#define SNAMES 60
#define SFILES 200

static int storm_worker(int w, double seconds, int noreplace)
{
	uint64_t s = 31337 + (uint64_t)w * 7 + (uint64_t)noreplace;
	char a[600], b[600];
	double t0 = fsu_now();
	while (fsu_now() - t0 < seconds) {
		if (w == 0 && fsu_below(&s, 4) == 0) {
			/* directories: move sub-directory k under another directory */
			int k = (int)fsu_below(&s, SDIRS), d = (int)fsu_below(&s, SDIRS);
			/* sub-directories s<k> live somewhere below d<..>; find it */
			for (int i = 0; i < SDIRS; i++) {
				snprintf(a, sizeof a, "%s/d%d/s%d", fsu_m.mnt, i, k);
				snprintf(b, sizeof b, "%s/d%d/s%d", fsu_m.mnt, d, k);
				if (rename(a, b) == 0 || (errno != ENOENT && errno != EINVAL))
					break;
			}
			continue;
		}
		int d1 = (int)fsu_below(&s, SDIRS), d2 = (int)fsu_below(&s, SDIRS);
		int n1 = (int)fsu_below(&s, SNAMES), n2 = (int)fsu_below(&s, SNAMES);
		const char *sub1 = fsu_below(&s, 3) ? "" : "/s0", *sub2 = fsu_below(&s, 3) ? "" : "/s1";
		snprintf(a, sizeof a, "%s/d%d%s/n%d", fsu_m.mnt, d1, sub1, n1);
		snprintf(b, sizeof b, "%s/d%d%s/n%d", fsu_m.mnt, d2, sub2, n2);
		int rc = noreplace ? renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_NOREPLACE) : rename(a, b);
		if (rc != 0 && errno != ENOENT && errno != EEXIST)
			return 10 + errno;
	}
	return 0;
}

/* stat and readdir while names move: lookups of moving names fail with
 * ENOENT at worst */
static int storm_reader(double seconds)
{
	double t0 = fsu_now();
	uint64_t s = 5;
	char a[600];
	while (fsu_now() - t0 < seconds) {
		snprintf(a, sizeof a, "%s/d%d", fsu_m.mnt, (int)fsu_below(&s, SDIRS));
		DIR *d = opendir(a);
		if (!d)
			return 1;
		struct dirent *e;
		while ((e = readdir(d))) {
			char p[900];
			struct stat st;
			snprintf(p, sizeof p, "%s/%s", a, e->d_name);
			if (stat(p, &st) != 0 && errno != ENOENT)
				return 2;
		}
		closedir(d);
	}
	return 0;
}

/* Walks the storm tree: every file's id into seen[] (counts); returns the
 * number of files; counts directories. */
static int storm_walk(const char *dir, int *seen, int *ndirs)
{
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "opendir %s: %s", dir, strerror(errno));
	struct dirent *e;
	int files = 0;
	while ((e = readdir(d))) {
		char p[4096], buf[64];
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		cr_assert_eq(lstat(p, &st), 0, "%s: %s", p, strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			(*ndirs)++;
			files += storm_walk(p, seen, ndirs);
			continue;
		}
		cr_assert_eq(st.st_nlink, 1, "%s has %lu links", p, (unsigned long)st.st_nlink);
		ssize_t r = fsu_read_file(p, buf, sizeof buf - 1);
		cr_assert_gt(r, 0, "%s: empty or unreadable", p);
		buf[r] = 0;
		int id = -1;
		cr_assert_eq(sscanf(buf, "id %d", &id), 1, "%s holds \"%s\"", p, buf);
		cr_assert(id >= 0 && id < SFILES, "%s holds id %d", p, id);
		seen[id]++;
		cr_assert_eq(seen[id], 1, "file id %d appears twice (second at %s)", id, p);
		files++;
	}
	closedir(d);
	return files;
}

static void storm(int noreplace, double seconds)
{
	char p[600], c[64];
	for (int d = 0; d < SDIRS; d++) {
		cr_assert_eq(mkdir(mp("d%d", d), 0755), 0);
		cr_assert_eq(mkdir(mp("d%d/s%d", d, d), 0755), 0);
	}
	/* sub-directories s0 and s1 are used as name spaces: keep them in d0 and d1 */
	for (int i = 0; i < SFILES; i++) {
		snprintf(p, sizeof p, "%s/d%d/n%d", fsu_m.mnt, i % SDIRS, i / SDIRS);
		snprintf(c, sizeof c, "id %d", i);
		cr_assert_eq(fsu_write_file(p, c, strlen(c), 0644), 0);
	}
	pid_t pids[8];
	int nw = 5;
	for (int w = 0; w < nw; w++) {
		pids[w] = fsu_fork();
		if (pids[w] == 0)
			_exit(w == nw - 1 ? storm_reader(seconds) : storm_worker(w, seconds, noreplace));
	}
	for (int w = 0; w < nw; w++) {
		int st = fsu_wait(pids[w]);
		cr_assert_eq(st, 0, "storm worker %d: status %d%s%s", w, st, st > 10 ? ": errno " : "",
			     st > 10 ? strerror(st - 10) : "");
	}
	int seen[SFILES] = {0}, ndirs = 0;
	int files = storm_walk(fsu_m.mnt, seen, &ndirs);
	cr_assert_eq(ndirs, 2 * SDIRS, "%d directories after the storm, want %d", ndirs, 2 * SDIRS);
	if (noreplace)
		cr_assert_eq(files, SFILES, "%d files after a storm of RENAME_NOREPLACE, want %d", files, SFILES);
	fsu_cycle();
	int seen2[SFILES] = {0}, ndirs2 = 0;
	int files2 = storm_walk(fsu_m.mnt, seen2, &ndirs2);
	cr_assert_eq(files2, files);
	cr_assert(!memcmp(seen, seen2, sizeof seen));
	fsu_stop_check();
	uint64_t dirs, others;
	cr_assert_eq(fsu_check_counts(&dirs, &others, NULL), 0);
	cr_assert_eq(dirs, (uint64_t)ndirs + 1);
	cr_assert_eq(others, (uint64_t)files, "tpfs check counts %" PRIu64 " other inodes but %d files are reachable: "
					      "replaced rename targets leaked",
		     others, files);
	fprintf(stderr, "rename storm (%s): %d files left of %d\n", noreplace ? "RENAME_NOREPLACE" : "replacing", files,
		SFILES);
}

Test(integrity, rename_storm_noreplace, .init = setup, .fini = fsu_teardown, .timeout = 600)
{
	storm(1, fsu_long() ? 60 : 4);
}

Test(integrity, rename_storm_replacing, .init = setup, .fini = fsu_teardown, .timeout = 600)
{
	storm(0, fsu_long() ? 60 : 4);
}

/* ---- hard links ---- */

static void expect_nlink(const char *path, nlink_t want, const char *when)
{
	struct stat st;
	cr_assert_eq(lstat(path, &st), 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(st.st_nlink, want, "%s: st_nlink %lu, want %lu (%s)", path, (unsigned long)st.st_nlink,
		     (unsigned long)want, when);
}

Test(integrity, hard_links, .init = setup, .fini = fsu_teardown, .timeout = 600)
{
	int nl = fsu_long() ? 2000 : 300;
	uint64_t s = 3;
	write_pat(mp("a"), 42, 10000);
	for (int d = 0; d < 10; d++)
		cr_assert_eq(mkdir(mp("d%d", d), 0755), 0);
	int fd = open(mp("a"), O_RDONLY);
	for (int i = 0; i < nl; i++) {
		cr_assert_eq(link(mp("a"), mp("d%d/l%d", i % 10, i)), 0, "link %d: %s", i, strerror(errno));
		struct stat st;
		cr_assert_eq(fstat(fd, &st), 0);
		cr_assert_eq(st.st_nlink, (nlink_t)i + 2, "fstat after link %d", i);
		if (i % 37 == 0)
			expect_nlink(mp("d%d/l%d", i % 10, i), (nlink_t)i + 2, "new link");
	}
	check_pat(mp("d3/l3"), 42, 10000);
	/* writing through one name shows through every other */
	int wfd = open(mp("d5/l5"), O_WRONLY);
	cr_assert_eq(pwrite(wfd, "XYZ", 3, 100), 3);
	close(wfd);
	char b[3];
	cr_assert_eq(pread(fd, b, 3, 100), 3);
	cr_assert(!memcmp(b, "XYZ", 3));
	/* rename of one name of a file onto another name of it: nothing happens */
	cr_assert_eq(rename(mp("d1/l1"), mp("d2/l2")), 0);
	expect_nlink(mp("d1/l1"), (nlink_t)nl + 1, "after renaming a link onto another");
	expect_nlink(mp("d2/l2"), (nlink_t)nl + 1, "after renaming a link onto another");
	/* rename of another file over one of the links: one link fewer */
	write_pat(mp("other"), 7, 100);
	cr_assert_eq(rename(mp("other"), mp("d4/l4")), 0);
	expect_nlink(mp("a"), (nlink_t)nl, "after a rename over one link");
	expect_nlink(mp("d4/l4"), 1, "the file renamed over a link");
	check_pat(mp("d4/l4"), 7, 100);
	close(fd);
	fsu_cycle();
	expect_nlink(mp("a"), (nlink_t)nl, "after remount");
	/* remove the links in random order */
	int *alive = calloc((size_t)nl, sizeof *alive), left = nl; /* the link count: a and nl - 1 links (l4 went) */
	for (int i = 0; i < nl; i++)
		alive[i] = i != 4;
	while (left > 1) {
		int i = (int)fsu_below(&s, (uint64_t)nl);
		if (!alive[i])
			continue;
		cr_assert_eq(unlink(mp("d%d/l%d", i % 10, i)), 0);
		alive[i] = 0;
		left--;
		expect_nlink(mp("a"), (nlink_t)left, "after unlinking links");
	}
	free(alive);
	char want_a[10000];
	pat(42, 0, (unsigned char *)want_a, sizeof want_a);
	memcpy(want_a + 100, "XYZ", 3);
	char got_a[10001];
	cr_assert_eq(fsu_read_file(mp("a"), got_a, sizeof got_a), 10000);
	cr_assert(!memcmp(got_a, want_a, 10000));
	/* directories: 2 + subdirectories */
	for (int i = 0; i < 50; i++)
		cr_assert_eq(mkdir(mp("d0/s%d", i), 0755), 0);
	expect_nlink(mp("d0"), 52, "50 subdirectories");
	for (int i = 0; i < 20; i++)
		cr_assert_eq(rename(mp("d0/s%d", i), mp("d1/s%d", i)), 0);
	expect_nlink(mp("d0"), 32, "20 moved away");
	expect_nlink(mp("d1"), 22, "20 moved in");
	for (int i = 20; i < 30; i++)
		cr_assert_eq(rmdir(mp("d0/s%d", i)), 0);
	expect_nlink(mp("d0"), 22, "10 removed");
	cr_assert_eq(rename(mp("d1/s0"), mp("d0/s30")), 0); /* over an empty directory */
	expect_nlink(mp("d0"), 22, "a directory renamed over another");
	expect_nlink(mp("d1"), 21, "a directory renamed over another");
	fsu_stop_check();
	uint64_t dirs, others;
	cr_assert_eq(fsu_check_counts(&dirs, &others, NULL), 0);
	cr_assert_eq(others, 2, "the file a and the one renamed over a link: %" PRIu64 " other inodes", others);
	if (fsu_long()) {
		/* EMLINK: tpfs allows 65000 links, like ext4 */
		fsu_remount();
		int n = 1;
		while (link(mp("a"), mp("d9/m%d", n)) == 0)
			n++;
		cr_assert_eq(errno, EMLINK, "link number %d: %s", n + 1, strerror(errno));
		expect_nlink(mp("a"), (nlink_t)n, "at the limit");
		fsu_stop_check();
	}
}

/* ---- a large directory ---- */

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Reads directory dir with getdents64 and a buffer of bufsize bytes;
 * counts[i] += 1 for name f<i>, moved[i] for f<i>.m; others counted. */
static void read_big_dir(const char *dir, size_t bufsize, int n, int *counts, int *moved, int *unknown)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	char *buf = malloc(bufsize);
	for (;;) {
		long r = syscall(SYS_getdents64, fd, buf, bufsize);
		cr_assert_geq(r, 0, "getdents64: %s", strerror(errno));
		if (r == 0)
			break;
		for (long off = 0; off < r;) {
			struct linux_dirent64 *e = (struct linux_dirent64 *)(buf + off);
			int i;
			char tail[8] = "";
			off += e->d_reclen;
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (sscanf(e->d_name, "f%d%7s", &i, tail) >= 1 && i >= 0 && i < n) {
				if (!tail[0])
					counts[i]++;
				else if (!strcmp(tail, ".m"))
					moved[i]++;
				else
					(*unknown)++;
			} else {
				(*unknown)++;
			}
		}
	}
	free(buf);
	close(fd);
}

Test(integrity, big_directory, .init = setup, .fini = fsu_teardown, .timeout = 600)
{
	int n = fsu_long() ? 100000 : 10000;
	int *counts = calloc((size_t)n, sizeof(int)), *moved = calloc((size_t)n, sizeof(int)), unknown = 0;
	double t0 = fsu_now();
	cr_assert_eq(mkdir(mp("big"), 0755), 0);
	for (int i = 0; i < n; i++) {
		int fd = open(mp("big/f%d", i), O_WRONLY | O_CREAT | O_EXCL, 0644);
		cr_assert_geq(fd, 0, "create %d: %s", i, strerror(errno));
		close(fd);
	}
	double t1 = fsu_now();
	static const size_t sizes[] = {32768, 512, 65536};
	for (int k = 0; k < 3; k++) {
		memset(counts, 0, sizeof(int) * (size_t)n);
		read_big_dir(mp("big"), sizes[k], n, counts, moved, &unknown);
		for (int i = 0; i < n; i++)
			cr_assert_eq(counts[i], 1, "f%d listed %d times (getdents buffer %zu)", i, counts[i], sizes[k]);
		cr_assert_eq(unknown, 0);
	}
	/* readdir while every 10th name moves back and forth: the others must
	 * appear exactly once */
	int *stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid = fsu_fork();
	if (pid == 0) {
		uint64_t s = 9;
		int *where = calloc((size_t)n, sizeof(int)); /* 1: moved */
		while (!*stop) {
			int i = (int)fsu_below(&s, (uint64_t)n / 10) * 10;
			char a[600], b[600];
			snprintf(a, sizeof a, "%s/big/f%d%s", fsu_m.mnt, i, where[i] ? ".m" : "");
			snprintf(b, sizeof b, "%s/big/f%d%s", fsu_m.mnt, i, where[i] ? "" : ".m");
			if (rename(a, b) != 0)
				_exit(1);
			where[i] ^= 1;
		}
		/* put everything back */
		for (int i = 0; i < n; i += 10)
			if (where[i]) {
				char a[600], b[600];
				snprintf(a, sizeof a, "%s/big/f%d.m", fsu_m.mnt, i);
				snprintf(b, sizeof b, "%s/big/f%d", fsu_m.mnt, i);
				if (rename(a, b) != 0)
					_exit(2);
			}
		_exit(0);
	}
	int passes = fsu_long() ? 20 : 5;
	for (int k = 0; k < passes; k++) {
		memset(counts, 0, sizeof(int) * (size_t)n);
		memset(moved, 0, sizeof(int) * (size_t)n);
		read_big_dir(mp("big"), k % 2 ? 1024 : 32768, n, counts, moved, &unknown);
		for (int i = 0; i < n; i++) {
			if (i % 10)
				cr_assert_eq(counts[i], 1, "pass %d: unchanged name f%d listed %d times while others moved", k, i,
					     counts[i]);
			else
				cr_assert(counts[i] + moved[i] <= 2, "pass %d: f%d listed %d + %d times", k, i, counts[i], moved[i]);
		}
		cr_assert_eq(unknown, 0, "pass %d: names that were never created", k);
	}
	*stop = 1;
	cr_assert_eq(fsu_wait(pid), 0, "the renaming child failed");
	munmap(stop, 4096);
	fsu_cycle();
	memset(counts, 0, sizeof(int) * (size_t)n);
	memset(moved, 0, sizeof(int) * (size_t)n);
	read_big_dir(mp("big"), 32768, n, counts, moved, &unknown);
	for (int i = 0; i < n; i++)
		cr_assert(counts[i] == 1 && moved[i] == 0, "after remount: f%d %d, f%d.m %d", i, counts[i], i, moved[i]);
	struct stat st;
	cr_assert_eq(stat(mp("big"), &st), 0);
	cr_assert_eq(st.st_nlink, 2);
	/* telldir/seekdir: a position read twice gives the same entries */
	{
		DIR *dp = opendir(mp("big"));
		cr_assert_not_null(dp);
		for (int i = 0; i < 3000; i++)
			cr_assert_not_null(readdir(dp));
		long pos = telldir(dp);
		char first[3][300];
		for (int i = 0; i < 3; i++)
			snprintf(first[i], sizeof first[i], "%s", readdir(dp)->d_name);
		for (int i = 0; i < 2000; i++)
			cr_assert_not_null(readdir(dp));
		seekdir(dp, pos);
		for (int i = 0; i < 3; i++) {
			struct dirent *e = readdir(dp);
			cr_assert_not_null(e);
			cr_assert_str_eq(e->d_name, first[i], "seekdir(telldir()) does not return to the same entries");
		}
		closedir(dp);
	}
	/* rm -r's way: unlink each entry right after reading it, with a small
	 * buffer; nothing may be skipped */
	{
		int fd = open(mp("big"), O_RDONLY | O_DIRECTORY);
		char buf[1024];
		int removed = 0;
		cr_assert_geq(fd, 0);
		for (;;) {
			long r = syscall(SYS_getdents64, fd, buf, sizeof buf);
			cr_assert_geq(r, 0);
			if (r == 0)
				break;
			for (long off = 0; off < r;) {
				struct linux_dirent64 *e = (struct linux_dirent64 *)(buf + off);
				off += e->d_reclen;
				if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
					continue;
				cr_assert_eq(unlinkat(fd, e->d_name, 0), 0, "unlink %s: %s", e->d_name, strerror(errno));
				removed++;
			}
		}
		close(fd);
		cr_assert_eq(removed, n, "reading while deleting found %d of %d entries", removed, n);
	}
	cr_assert_eq(rmdir(mp("big")), 0, "rmdir of the emptied directory: %s", strerror(errno));
	fprintf(stderr, "big_directory: %d creates in %.1f s, whole test %.1f s\n", n, t1 - t0, fsu_now() - t0);
	free(counts);
	free(moved);
	fsu_stop_check();
	uint64_t dirs, others;
	cr_assert_eq(fsu_check_counts(&dirs, &others, NULL), 0);
	cr_assert_eq(dirs, 1);
	cr_assert_eq(others, 0);
}

/* ---- races that must have exactly one winner, atomic replacement ---- */

Test(integrity, create_races, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	int nw = 6, names = fsu_long() ? 3000 : 400;
	int *wins = mmap(NULL, sizeof(int) * 3 * (size_t)names, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(wins, MAP_FAILED);
	write_pat(mp("src"), 1, 10);
	pid_t pids[8];
	for (int w = 0; w < nw; w++) {
		pids[w] = fsu_fork();
		if (pids[w] == 0) {
			char p[600], q[600];
			for (int i = 0; i < names; i++) {
				int k = (i * 7 + w * 13) % names; /* different orders */
				snprintf(p, sizeof p, "%s/x%d", fsu_m.mnt, k);
				int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
				if (fd >= 0) {
					__atomic_add_fetch(&wins[k], 1, __ATOMIC_SEQ_CST);
					close(fd);
				} else if (errno != EEXIST) {
					_exit(1);
				}
				snprintf(p, sizeof p, "%s/d%d", fsu_m.mnt, k);
				if (mkdir(p, 0755) == 0)
					__atomic_add_fetch(&wins[names + k], 1, __ATOMIC_SEQ_CST);
				else if (errno != EEXIST)
					_exit(2);
				snprintf(p, sizeof p, "%s/src", fsu_m.mnt);
				snprintf(q, sizeof q, "%s/l%d", fsu_m.mnt, k);
				if (link(p, q) == 0)
					__atomic_add_fetch(&wins[2 * names + k], 1, __ATOMIC_SEQ_CST);
				else if (errno != EEXIST)
					_exit(3);
			}
			_exit(0);
		}
	}
	for (int w = 0; w < nw; w++)
		cr_assert_eq(fsu_wait(pids[w]), 0, "racer %d failed", w);
	for (int k = 0; k < names; k++) {
		cr_assert_eq(wins[k], 1, "O_CREAT|O_EXCL of x%d succeeded %d times", k, wins[k]);
		cr_assert_eq(wins[names + k], 1, "mkdir d%d succeeded %d times", k, wins[names + k]);
		cr_assert_eq(wins[2 * names + k], 1, "link l%d succeeded %d times", k, wins[2 * names + k]);
	}
	expect_nlink(mp("src"), (nlink_t)names + 1, "after the link race");
	expect_nlink(fsu_m.mnt, (nlink_t)names + 2, "the root after the mkdir race");
	munmap(wins, sizeof(int) * 3 * (size_t)names);
	fsu_stop_check();
}

/* The write-then-rename idiom: readers never miss the name and never see a
 * partial file. */
Test(integrity, atomic_replace, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	const size_t len = 20000;
	double secs = fsu_long() ? 30 : 4;
	unsigned char *v0 = malloc(len);
	pat(0, 0, v0, len);
	memset(v0, 0, 8); /* version 0 */
	cr_assert_eq(fsu_write_file(mp("target"), v0, len, 0644), 0);
	free(v0);
	pid_t pids[3];
	for (int w = 0; w < 3; w++) {
		pids[w] = fsu_fork();
		if (pids[w] == 0) {
			char p[600], q[600];
			unsigned char *b = malloc(len + 1), *want = malloc(len);
			double t0 = fsu_now();
			uint64_t v = 0, reads = 0;
			snprintf(q, sizeof q, "%s/target", fsu_m.mnt);
			while (fsu_now() - t0 < secs) {
				if (w == 0) { /* the writer */
					snprintf(p, sizeof p, "%s/tmp%" PRIu64, fsu_m.mnt, ++v);
					pat(v, 0, b, len);
					memcpy(b, &v, 8);
					if (fsu_write_file(p, b, len, 0644) != 0 || rename(p, q) != 0)
						_exit(1);
					continue;
				}
				ssize_t r = fsu_read_file(q, b, len + 1);
				if (r < 0) {
					fprintf(stderr, "atomic_replace: reader: open/read of the target: %s\n", strerror((int)-r));
					_exit(2);
				}
				if ((size_t)r != len) {
					fprintf(stderr, "atomic_replace: reader saw %zd bytes, want %zu\n", r, len);
					_exit(3);
				}
				uint64_t ver;
				memcpy(&ver, b, 8);
				pat(ver, 0, want, len);
				memcpy(want, &ver, 8);
				if (memcmp(b, want, len)) {
					fprintf(stderr, "atomic_replace: reader saw a mixed file (version %" PRIu64 ")\n", ver);
					_exit(4);
				}
				reads++;
			}
			if (w)
				fprintf(stderr, "atomic_replace: reader %d checked %" PRIu64 " versions\n", w, reads);
			_exit(0);
		}
	}
	for (int w = 0; w < 3; w++)
		cr_assert_eq(fsu_wait(pids[w]), 0, "atomic_replace worker %d failed (see above)", w);
	fsu_stop_check();
	uint64_t others;
	cr_assert_eq(fsu_check_counts(NULL, &others, NULL), 0);
	cr_assert_eq(others, 1, "%" PRIu64 " inodes left: replaced versions leaked", others);
}

/* Appenders from several processes: every record lands whole, none is
 * overwritten. */
Test(integrity, concurrent_append, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	int nw = 5, per = fsu_long() ? 20000 : 1500;
	enum { RL = 100 };
	int fd = open(mp("log"), O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	pid_t pids[8];
	for (int w = 0; w < nw; w++) {
		pids[w] = fsu_fork();
		if (pids[w] == 0) {
			char p[600];
			unsigned char rec[RL];
			snprintf(p, sizeof p, "%s/log", fsu_m.mnt);
			int f = open(p, O_WRONLY | O_APPEND);
			if (f < 0)
				_exit(1);
			for (int i = 0; i < per; i++) {
				uint64_t tag = ((uint64_t)w << 32) | (uint64_t)i;
				memcpy(rec, &tag, 8);
				pat(tag, 8, rec + 8, RL - 8);
				if (write(f, rec, RL) != RL)
					_exit(2);
			}
			_exit(close(f) == 0 ? 0 : 3);
		}
	}
	for (int w = 0; w < nw; w++)
		cr_assert_eq(fsu_wait(pids[w]), 0, "appender %d failed", w);
	for (int round = 0; round < 2; round++) {
		size_t total = (size_t)nw * (size_t)per * RL;
		unsigned char *b = malloc(total + 1), want[RL];
		cr_assert_eq(fsu_read_file(mp("log"), b, total + 1), (ssize_t)total, "the log has the wrong size");
		int *next = calloc((size_t)nw, sizeof(int));
		for (size_t off = 0; off < total; off += RL) {
			uint64_t tag;
			memcpy(&tag, b + off, 8);
			int w = (int)(tag >> 32), i = (int)(tag & 0xffffffff);
			cr_assert(w >= 0 && w < nw, "record at %zu: bad writer %d (torn or overwritten)", off, w);
			cr_assert_eq(i, next[w], "record at %zu: writer %d's record %d, want %d", off, w, i, next[w]);
			next[w]++;
			pat(tag, 8, want + 8, RL - 8);
			cr_assert(!memcmp(b + off + 8, want + 8, RL - 8), "record at %zu is torn", off);
		}
		free(next);
		free(b);
		if (round == 0)
			fsu_cycle();
	}
	fsu_stop_check();
}

/* ---- directories created, removed and moved under each other at once ---- */

#define NRD 10

/* The path of directory D<i> below root (depth-first), or 0 if not found. */
static int find_dir(const char *root, int i, char *out, size_t size, int depth)
{
	DIR *d = opendir(root);
	struct dirent *e;
	char want[16];
	snprintf(want, sizeof want, "D%d", i);
	if (!d || depth > 64) {
		if (d)
			closedir(d);
		return 0;
	}
	while ((e = readdir(d))) {
		char p[4096];
		if (e->d_name[0] != 'D')
			continue;
		if (snprintf(p, sizeof p, "%s/%s", root, e->d_name) >= (int)sizeof p)
			continue; /* no such path fits (and -O3's truncation warning) */
		if (!strcmp(e->d_name, want)) {
			snprintf(out, size, "%s", p);
			closedir(d);
			return 1;
		}
		if (find_dir(p, i, out, size, depth + 1)) {
			closedir(d);
			return 1;
		}
	}
	closedir(d);
	return 0;
}

static int racer_err(int w, const char *what, const char *path)
{
	fprintf(stderr, "directory racer %d: %s %s: %s\n", w, what, path, strerror(errno));
	return 1;
}

static int dir_racer(int w, double seconds)
{
	uint64_t s = 600 + (uint64_t)w;
	char a[4096], b[4096], c[4200];
	double t0 = fsu_now();
	while (fsu_now() - t0 < seconds) {
		int i = (int)fsu_below(&s, NRD), j = (int)fsu_below(&s, NRD), k = (int)fsu_below(&s, 5);
		if (w < 2) {
			/* move D<i> under D<j> (or back to the top) */
			if (!find_dir(fsu_m.mnt, i, a, sizeof a, 0))
				continue;
			if (j == i || fsu_below(&s, 4) == 0)
				snprintf(c, sizeof c, "%s/D%d", fsu_m.mnt, i);
			else if (find_dir(fsu_m.mnt, j, b, sizeof b, 0))
				snprintf(c, sizeof c, "%s/D%d", b, i);
			else
				continue;
			if (rename(a, c) != 0 && errno != ENOENT && errno != EINVAL && errno != ENOTDIR)
				return racer_err(w, "rename to", c);
		} else if (w == 2) {
			/* sub-directories made and removed inside the moving ones */
			if (!find_dir(fsu_m.mnt, i, a, sizeof a, 0))
				continue;
			snprintf(c, sizeof c, "%s/tmp%d", a, k);
			if (fsu_below(&s, 2)) {
				if (mkdir(c, 0755) != 0 && errno != EEXIST && errno != ENOENT)
					return racer_err(w, "mkdir", c);
			} else if (rmdir(c) != 0 && errno != ENOENT && errno != ENOTEMPTY) {
				return racer_err(w, "rmdir", c);
			}
		} else {
			/* files made in, and removed from, the tmp directories */
			if (!find_dir(fsu_m.mnt, i, a, sizeof a, 0))
				continue;
			snprintf(c, sizeof c, "%s/tmp%d/f%d", a, k, w);
			if (fsu_below(&s, 2)) {
				int fd = open(c, O_WRONLY | O_CREAT, 0644);
				if (fd >= 0)
					close(fd);
				else if (errno != ENOENT)
					return racer_err(w, "create", c);
			} else if (unlink(c) != 0 && errno != ENOENT) {
				return racer_err(w, "unlink", c);
			}
		}
	}
	return 0;
}

static void count_tree(const char *dir, int *dirs, int *files, int *named)
{
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "opendir %s: %s", dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		char p[4096];
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		cr_assert_eq(lstat(p, &st), 0);
		if (S_ISDIR(st.st_mode)) {
			int i;
			(*dirs)++;
			if (sscanf(e->d_name, "D%d", &i) == 1 && i >= 0 && i < NRD)
				named[i]++;
			count_tree(p, dirs, files, named);
		} else {
			(*files)++;
		}
	}
	closedir(d);
}

Test(integrity, directory_races, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	double secs = fsu_long() ? 60 : 5;
	for (int i = 0; i < NRD; i++)
		cr_assert_eq(mkdir(mp("D%d", i), 0755), 0);
	pid_t pids[5];
	for (int w = 0; w < 5; w++) {
		pids[w] = fsu_fork();
		if (pids[w] == 0)
			_exit(dir_racer(w, secs));
	}
	for (int w = 0; w < 5; w++) {
		int st = fsu_wait(pids[w]);
		cr_assert_eq(st, 0, "racer %d: status %d (see above)", w, st);
	}
	int dirs = 0, files = 0, named[NRD] = {0};
	count_tree(fsu_m.mnt, &dirs, &files, named);
	for (int i = 0; i < NRD; i++)
		cr_assert_eq(named[i], 1, "directory D%d is found %d times", i, named[i]);
	fsu_cycle();
	int dirs2 = 0, files2 = 0, named2[NRD] = {0};
	count_tree(fsu_m.mnt, &dirs2, &files2, named2);
	cr_assert(dirs2 == dirs && files2 == files, "after remount: %d directories, %d files; before %d, %d", dirs2, files2,
		  dirs, files);
	fsu_stop_check();
	uint64_t cd, co;
	cr_assert_eq(fsu_check_counts(&cd, &co, NULL), 0);
	cr_assert_eq(cd, (uint64_t)dirs + 1, "tpfs check counts %" PRIu64 " directories, %d are reachable", cd, dirs);
	cr_assert_eq(co, (uint64_t)files, "tpfs check counts %" PRIu64 " files, %d are reachable", co, files);
	fprintf(stderr, "directory_races: %d directories and %d files left\n", dirs, files);
}

/* ---- extended attributes in numbers, names of every byte ---- */

Test(integrity, many_xattrs, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	int n = fsu_long() ? 2000 : 200;
	static unsigned char v[65536], got[65536];
	write_pat(mp("f"), 1, 10);
	cr_assert_eq(mkdir(mp("d"), 0755), 0);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < n; i++) {
			char name[64];
			size_t vl = (size_t)i * 331 % 65537;
			snprintf(name, sizeof name, "user.attr%d", i);
			if (round == 0) {
				pat((uint64_t)i, 0, v, vl);
				cr_assert_eq(setxattr(mp("f"), name, v, vl, XATTR_CREATE), 0, "setxattr %s (%zu bytes): %s", name, vl,
					     strerror(errno));
				cr_assert_eq(setxattr(mp("d"), name, v, vl < 100 ? vl : 100, 0), 0);
			}
			pat((uint64_t)i, 0, v, vl);
			ssize_t r = getxattr(mp("f"), name, got, sizeof got);
			cr_assert_eq(r, (ssize_t)vl, "getxattr %s: %zd, want %zu", name, r, vl);
			cr_assert(!memcmp(got, v, vl), "getxattr %s: wrong value", name);
		}
		static char list[1 << 20];
		ssize_t ll = listxattr(mp("f"), list, sizeof list);
		cr_assert_gt(ll, 0);
		int count = 0;
		for (char *p = list; p < list + ll; p += strlen(p) + 1)
			count += !strncmp(p, "user.attr", 9);
		cr_assert_eq(count, n, "listxattr lists %d of %d", count, n);
		cr_assert_eq(listxattr(mp("f"), list, (size_t)ll - 1), -1);
		cr_assert_eq(errno, ERANGE);
		if (round == 0)
			fsu_cycle();
	}
	for (int i = 0; i < n; i += 2) {
		char name[64];
		snprintf(name, sizeof name, "user.attr%d", i);
		cr_assert_eq(removexattr(mp("f"), name), 0);
		cr_assert_eq(getxattr(mp("f"), name, got, sizeof got), -1);
		cr_assert_eq(errno, ENODATA);
	}
	/* unlinking the file takes its xattrs along */
	cr_assert_eq(unlink(mp("f")), 0);
	fsu_stop_check();
}

Test(integrity, name_bytes, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	char name[300];
	int made = 0;
	cr_assert_eq(mkdir(mp("n"), 0755), 0);
	for (int c = 1; c < 256; c++) {
		if (c == '/')
			continue;
		snprintf(name, sizeof name, "x%cy", c);
		write_pat(mp("n/%s", name), (uint64_t)c, (uint64_t)c);
		made++;
	}
	/* 255 bytes of UTF-8 (a 3-byte character 85 times) */
	name[0] = 0;
	for (int i = 0; i < 85; i++)
		strcat(name, "\xe2\x82\xac");
	write_pat(mp("n/%s", name), 1000, 1000);
	made++;
	for (int round = 0; round < 2; round++) {
		DIR *d = opendir(mp("n"));
		struct dirent *e;
		int seen[256] = {0}, utf = 0, total = 0;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			total++;
			size_t l = strlen(e->d_name);
			if (l == 3 && e->d_name[0] == 'x' && e->d_name[2] == 'y') {
				int c = (unsigned char)e->d_name[1];
				seen[c]++;
				check_pat(mp("n/%s", e->d_name), (uint64_t)c, (uint64_t)c);
			} else if (l == 255 && !strncmp(e->d_name, "\xe2\x82\xac", 3)) {
				utf++;
			}
		}
		closedir(d);
		cr_assert_eq(total, made, "readdir lists %d names, %d were made", total, made);
		for (int c = 1; c < 256; c++)
			if (c != '/')
				cr_assert_eq(seen[c], 1, "the name with byte 0x%02x is listed %d times", c, seen[c]);
		cr_assert_eq(utf, 1);
		if (round == 0)
			fsu_cycle();
	}
	fsu_stop_check();
}

/* ---- sparse files, 1 TiB, the 2^44 limit ---- */

static void expect_zeros(int fd, uint64_t off, size_t len)
{
	unsigned char b[65536];
	cr_assert(len <= sizeof b);
	ssize_t r = pread(fd, b, len, (off_t)off);
	cr_assert_eq(r, (ssize_t)len, "pread %" PRIu64 ": %zd", off, r);
	for (size_t i = 0; i < len; i++)
		cr_assert_eq(b[i], 0, "byte %" PRIu64 " of a hole is %d", off + i, b[i]);
}

Test(integrity, sparse_files, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	const uint64_t G = 1ull << 30;
	int fd = open(mp("sparse"), O_RDWR | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "Z", 1, (off_t)G), 1);
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, G + 1);
	cr_assert_leq(st.st_blocks, 64, "a 1-byte write at 1 GiB gives st_blocks %lld: holes must not be counted",
		      (long long)st.st_blocks);
	cr_assert_gt(st.st_blocks, 0, "a file with data has st_blocks 0");
	expect_zeros(fd, 0, 65536);
	expect_zeros(fd, G / 2, 65536);
	expect_zeros(fd, G - 4096, 4096);
	char c;
	cr_assert_eq(pread(fd, &c, 1, (off_t)G), 1);
	cr_assert_eq(c, 'Z');
	off_t d = lseek(fd, 0, SEEK_DATA);
	cr_assert(d >= (off_t)(G - 65536) && d <= (off_t)G, "SEEK_DATA from 0 gives %lld, want the block holding 1 GiB",
		  (long long)d);
	cr_assert_eq(lseek(fd, 0, SEEK_HOLE), 0);
	off_t h = lseek(fd, (off_t)G, SEEK_HOLE);
	cr_assert_eq(h, (off_t)G + 1, "SEEK_HOLE at the last data gives %lld, want the size", (long long)h);
	cr_assert_eq(lseek(fd, (off_t)G + 1, SEEK_DATA), -1);
	cr_assert_eq(errno, ENXIO);
	cr_assert_eq(lseek(fd, (off_t)G + 1, SEEK_HOLE), -1);
	cr_assert_eq(errno, ENXIO);

	/* data at 1 MiB: SEEK_DATA finds it first; SEEK_HOLE after it */
	unsigned char mb[100000];
	pat(5, 0, mb, sizeof mb);
	cr_assert_eq(pwrite(fd, mb, sizeof mb, 1 << 20), (ssize_t)sizeof mb);
	d = lseek(fd, 0, SEEK_DATA);
	cr_assert(d > (1 << 20) - 8192 && d <= (1 << 20), "SEEK_DATA gives %lld", (long long)d);
	h = lseek(fd, 1 << 20, SEEK_HOLE);
	cr_assert(h >= (1 << 20) + 100000 && h < (1 << 20) + 100000 + 8192, "SEEK_HOLE gives %lld", (long long)h);
	blkcnt_t b0;
	cr_assert_eq(fstat(fd, &st), 0);
	b0 = st.st_blocks;
	cr_assert_geq(b0 * 512, 100000, "st_blocks %lld for 100 kB of data", (long long)b0);
	cr_assert_leq(b0 * 512, 100000 + 64 * 1024, "st_blocks %lld for 100 kB of data", (long long)b0);

	/* fallocate counts, punching frees */
	cr_assert_eq(fallocate(fd, FALLOC_FL_KEEP_SIZE, 8ll << 20, 1 << 20), 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_geq((st.st_blocks - b0) * 512, 1 << 20, "fallocate of 1 MiB added %lld blocks",
		      (long long)(st.st_blocks - b0));
	cr_assert_eq((uint64_t)st.st_size, G + 1, "KEEP_SIZE changed the size");
	expect_zeros(fd, 8ll << 20, 65536);
	cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8ll << 20, 1 << 20), 0);
	cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 << 20, 100000), 0);
	expect_zeros(fd, 1 << 20, 65536);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_leq(st.st_blocks, 64, "after punching everything but 1 byte: st_blocks %lld", (long long)st.st_blocks);
	close(fd);

	/* persistence */
	fsu_cycle();
	fd = open(mp("sparse"), O_RDONLY);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, G + 1);
	cr_assert_leq(st.st_blocks, 64);
	cr_assert_eq(pread(fd, &c, 1, (off_t)G), 1);
	cr_assert_eq(c, 'Z');
	expect_zeros(fd, 1 << 20, 65536);
	close(fd);
	cr_assert_eq(truncate(mp("sparse"), 0), 0);
	cr_assert_eq(stat(mp("sparse"), &st), 0);
	cr_assert_eq(st.st_blocks, 0, "an empty file has st_blocks %lld", (long long)st.st_blocks);
	fsu_stop_check();
	uint64_t blocks;
	cr_assert_eq(fsu_check_counts(NULL, NULL, &blocks), 0);
	cr_assert_eq(blocks, 0, "%" PRIu64 " data blocks left after truncating to 0", blocks);
}

Test(integrity, one_tib_and_limit, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	int fd = open(mp("huge"), O_RDWR | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "T", 1, (off_t)(TIB - 1)), 1, "pwrite at 1 TiB - 1: %s", strerror(errno));
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, TIB);
	cr_assert_leq(st.st_blocks, 64, "st_blocks %lld for a 1 TiB file holding 1 byte", (long long)st.st_blocks);
	char c = 0;
	cr_assert_eq(pread(fd, &c, 1, (off_t)(TIB - 1)), 1);
	cr_assert_eq(c, 'T');
	uint64_t s = 1;
	for (int i = 0; i < 20; i++)
		expect_zeros(fd, fsu_below(&s, TIB - 70000), 4096);
	off_t d = lseek(fd, 0, SEEK_DATA);
	cr_assert(d >= (off_t)(TIB - 8192) && d <= (off_t)(TIB - 1), "SEEK_DATA gives %lld", (long long)d);
	cr_assert_eq(lseek(fd, 12345, SEEK_HOLE), 12345);
	/* a read across the end returns what is there */
	char two[2];
	cr_assert_eq(pread(fd, two, 2, (off_t)(TIB - 1)), 1);

	/* the limit: 2^44 bytes */
	cr_assert_eq(pwrite(fd, "M", 1, (off_t)(MAXF - 1)), 1, "pwrite at 2^44 - 1: %s", strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, MAXF);
	errno = 0;
	cr_assert_eq(pwrite(fd, "X", 1, (off_t)MAXF), -1, "a write at 2^44 must fail");
	cr_assert_eq(errno, EFBIG, "a write at 2^44: %s, want EFBIG", strerror(errno));
	ssize_t w = pwrite(fd, "YY", 2, (off_t)(MAXF - 1));
	cr_assert(w == 1 || (w == -1 && errno == EFBIG),
		  "a write of 2 bytes at 2^44 - 1 returned %zd (%s): want 1 (short) or EFBIG", w, strerror(errno));
	cr_assert_eq(pread(fd, &c, 1, (off_t)(MAXF - 1)), 1);
	cr_assert_eq(c, w == 1 ? 'Y' : 'M', "the byte at 2^44 - 1 after a write across the limit");
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, MAXF, "the size after writes past the limit");
	cr_assert_eq(ftruncate(fd, (off_t)MAXF + 1), -1);
	cr_assert_eq(errno, EFBIG);
	cr_assert_eq(fallocate(fd, 0, (off_t)MAXF - 4096, 8192), -1);
	cr_assert_eq(errno, EFBIG);
	close(fd);

	fsu_cycle();
	fd = open(mp("huge"), O_RDWR);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, MAXF);
	cr_assert_leq(st.st_blocks, 64);
	cr_assert_eq(pread(fd, &c, 1, (off_t)(TIB - 1)), 1);
	cr_assert_eq(c, 'T');
	cr_assert_eq(ftruncate(fd, (off_t)TIB), 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, TIB);
	cr_assert_eq(ftruncate(fd, 1), 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_blocks, 0, "a 1-byte file with no data written below has st_blocks %lld",
		     (long long)st.st_blocks);
	close(fd);
	fsu_stop_check();
	uint64_t blocks;
	cr_assert_eq(fsu_check_counts(NULL, NULL, &blocks), 0);
	cr_assert_eq(blocks, 0);
}

/* ---- statfs ---- */

Test(integrity, statfs, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	struct statvfs sv, sv2, host;
	struct statfs sf;
	cr_assert_eq(statfs(fsu_m.mnt, &sf), 0);
	cr_assert_eq((unsigned long)sf.f_type, (unsigned long)FUSE_SUPER_MAGIC);
	cr_assert_eq(statvfs(fsu_m.mnt, &sv), 0);
	cr_assert_eq(statvfs(fsu_m.store, &host), 0);
	cr_assert_gt(sv.f_bsize, 0);
	cr_assert_gt(sv.f_frsize, 0);
	cr_assert_gt(sv.f_blocks, 0);
	cr_assert_leq(sv.f_bfree, sv.f_blocks);
	cr_assert_leq(sv.f_bavail, sv.f_bfree);
	cr_assert_leq(sv.f_ffree, sv.f_files);
	cr_assert_leq(sv.f_favail, sv.f_files);
	cr_assert_eq(sv.f_namemax, 255);
	double total = (double)sv.f_blocks * sv.f_frsize, htotal = (double)host.f_blocks * host.f_frsize;
	double avail = (double)sv.f_bavail * sv.f_frsize, havail = (double)host.f_bavail * host.f_frsize;
	cr_assert(total > htotal * 0.9 && total < htotal * 1.1, "f_blocks %.0f bytes, the store's file system %.0f", total,
		  htotal);
	cr_assert(avail < havail * 1.1 + (1 << 30) && avail > havail * 0.9 - (1 << 30),
		  "f_bavail %.0f bytes, the store's file system %.0f", avail, havail);
	/* a file's statfs is the mount's */
	write_pat(mp("f"), 1, 100);
	cr_assert_eq(statvfs(mp("f"), &sv2), 0);
	cr_assert_eq(sv2.f_blocks, sv.f_blocks);
	cr_assert_eq(sv2.f_namemax, 255);
	/* creating files uses inodes */
	for (int i = 0; i < 500; i++)
		write_pat(mp("g%d", i), 1, 10);
	cr_assert_eq(statvfs(fsu_m.mnt, &sv2), 0);
	cr_assert_geq((sv2.f_files - sv2.f_ffree) - (sv.f_files - sv.f_ffree), 500,
		      "500 more files, but the used inode count went from %llu to %llu",
		      (unsigned long long)(sv.f_files - sv.f_ffree), (unsigned long long)(sv2.f_files - sv2.f_ffree));
	fsu_stop_check();
}

/* ---- a full file system, a read-only mount ---- */

static char small_dir[280]; /* a tmpfs holding the store (enospc) */

static void enospc_fini(void)
{
	if (fsu_m.pid)
		fsu_kill9();
	if (small_dir[0])
		umount2(small_dir, MNT_DETACH);
	small_dir[0] = 0;
	fsu_teardown();
}

/* A call that must not fail with EIO (a panicked store): 0, or its errno. */
static int no_eio(int rc, const char *what)
{
	int e = rc < 0 ? errno : 0;
	cr_assert_neq(e, EIO, "%s on a full file system: EIO; ENOSPC must fail requests cleanly and leave the store "
			      "usable",
		      what);
	return e;
}

/* The store's file system fills up: requests fail with ENOSPC, nothing
 * fails with EIO, what was acknowledged stays, and once there is room again
 * everything works; the unmount is clean and `tpfs check` too. */
/* A fresh store (1 MiB log segments) on a 32 MiB tmpfs, mounted. */
static void mount_on_small_fs(void)
{
	char cmd[1200];
	fsu_start_mkfs("-s 1M", NULL, 0);
	fsu_stop_check();
	snprintf(small_dir, sizeof small_dir, "%s/small", fsu_m.dir);
	cr_assert_eq(mkdir(small_dir, 0755), 0);
	cr_assert_eq(mount("tmpfs", small_dir, "tmpfs", 0, "size=32m"), 0, "mount tmpfs: %s", strerror(errno));
	snprintf(cmd, sizeof cmd, "cp -a '%s' '%s/store'", fsu_m.store, small_dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_lt(strlen(small_dir) + 7, sizeof fsu_m.store);
	memcpy(fsu_m.store, small_dir, strlen(small_dir));
	memcpy(fsu_m.store + strlen(small_dir), "/store", 7);
	fsu_remount();
}

/* The administrator grows the file system: room again. */
static void grow_small_fs(void)
{
	cr_assert_eq(mount("tmpfs", small_dir, "tmpfs", MS_REMOUNT, "size=256m"), 0, "remount tmpfs: %s", strerror(errno));
}

Test(integrity, enospc, .fini = enospc_fini, .timeout = 300)
{
	const size_t len = 1 << 20;
	unsigned char *b = malloc(len);
	mount_on_small_fs();

	int acked = 0, e = 0;
	for (int i = 0; i < 100 && !e; i++) {
		pat((uint64_t)i, 0, b, len);
		int fd = open(mp("f%d", i), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			e = errno;
			break;
		}
		size_t done = 0;
		while (done < len) {
			ssize_t w = write(fd, b + done, len - done);
			if (w < 0) {
				e = errno;
				break;
			}
			done += (size_t)w;
		}
		if (fsync(fd) != 0 && !e)
			e = errno;
		if (close(fd) != 0 && !e)
			e = errno;
		if (!e)
			acked = i + 1;
	}
	fprintf(stderr, "enospc: %d files of 1 MiB written before: %s\n", acked, strerror(e));
	cr_assert(e == ENOSPC || e == EDQUOT, "the first failure on a full file system is %s, want ENOSPC", strerror(e));
	cr_assert_gt(acked, 0);
	/* still usable: reads, lookups, listings; removals fail cleanly at worst */
	struct stat st;
	for (int i = 0; i < acked; i++) {
		no_eio(stat(mp("f%d", i), &st), "stat");
		unsigned char *r = malloc(len + 1);
		ssize_t got = fsu_read_file(mp("f%d", i), r, len + 1);
		if (got < 0)
			errno = (int)-got;
		no_eio(got < 0 ? -1 : 0, "read");
		pat((uint64_t)i, 0, b, len);
		cr_assert(got == (ssize_t)len && !memcmp(r, b, len), "file %d, acknowledged before the disk filled, is wrong",
			  i);
		free(r);
	}
	DIR *d = opendir(fsu_m.mnt);
	no_eio(d ? 0 : -1, "opendir");
	if (d)
		closedir(d);
	no_eio(mkdir(mp("newdir"), 0755), "mkdir");
	int removed = 0;
	for (int i = 0; i < acked; i += 2)
		removed += no_eio(unlink(mp("f%d", i)), "unlink") == 0;
	fprintf(stderr, "enospc: %d of %d unlinks succeeded on the full file system\n", removed, (acked + 1) / 2);
	grow_small_fs();
	for (int i = 0; i < acked; i += 2)
		if (unlink(mp("f%d", i)) != 0)
			cr_assert_eq(errno, ENOENT, "unlink f%d with room again: %s", i, strerror(errno));
	write_pat(mp("after"), 777, len);
	check_pat(mp("after"), 777, len);
	fsu_cycle();
	for (int i = 1; i < acked; i += 2)
		check_pat(mp("f%d", i), (uint64_t)i, len);
	check_pat(mp("after"), 777, len);
	fsu_stop_check();
	free(b);
}

/* The same with small files, whose blocks are logged (not ordered data):
 * the log and the page file fill up together.  Every failure is ENOSPC,
 * never EIO (a full log once panicked the store: ordinary records used up
 * the segment kept for rollbacks, and page write-backs found no room);
 * after growing the file system everything works and `tpfs check` passes. */
Test(integrity, enospc_small_files, .fini = enospc_fini, .timeout = 300)
{
	mount_on_small_fs();
	int acked = 0, fails = 0;
	for (int i = 0; i < 20000 && fails < 300; i++) {
		int fd = open(mp("s%d", i), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		unsigned char b[4096];
		pat((uint64_t)i, 0, b, sizeof b);
		int e = fd < 0 ? no_eio(-1, "create") : 0;
		if (!e && write(fd, b, sizeof b) != (ssize_t)sizeof b)
			e = no_eio(-1, "write");
		if (fd >= 0 && close(fd) != 0 && !e)
			e = no_eio(-1, "close");
		if (e) {
			cr_assert(e == ENOSPC || e == EDQUOT, "file %d: %s, want ENOSPC", i, strerror(e));
			fails++;
		} else if (!fails)
			acked = i + 1;
	}
	fprintf(stderr, "enospc_small_files: %d files of 4 KiB written before the disk filled\n", acked);
	cr_assert_gt(fails, 0, "the file system never filled");
	cr_assert_gt(acked, 100);
	struct stat st;
	no_eio(stat(mp("s0"), &st), "stat");
	no_eio(unlink(mp("s0")), "unlink");
	grow_small_fs();
	for (int i = 0; i < 400; i++)
		if (unlink(mp("s%d", i)) != 0)
			cr_assert_eq(errno, ENOENT, "unlink s%d with room again: %s", i, strerror(errno));
	write_pat(mp("after"), 778, 4096);
	fsu_cycle();
	for (int i = 400; i < acked; i += 97)
		check_pat(mp("s%d", i), (uint64_t)i, 4096);
	check_pat(mp("after"), 778, 4096);
	fsu_stop_check();
}

/* Log records and bytes so far. */
static uint64_t log_count(int bytes)
{
	static char buf[65536];
	cr_assert_geq(tfs_stats(&fsu_m, buf, sizeof buf), 0, "getxattr tpfs.stats: %s", strerror(errno));
	const char *l = strstr(buf, "\nlog: ");
	unsigned long long v[2];
	cr_assert(l && sscanf(l, "\nlog: %llu records, %llu bytes", &v[0], &v[1]) == 2, "no log line in tpfs.stats");
	return v[bytes != 0];
}
static uint64_t log_bytes(void) { return log_count(1); }

/* Requests of one kind so far ("getxattr", "write", ...); reading them is
 * itself a getxattr request. */
static uint64_t requests(const char *kind)
{
	unsigned long long v = 0;
	cr_assert_eq(tfs_stat_count(&fsu_m, kind, &v), 0, "no \"%s\" count in tpfs.stats", kind);
	return v;
}

/* Once the kernel knows a file has no set-id bits it writes it without
 * asking first for its "security.capability" attribute (fsd_io.c: the
 * daemon takes over clearing those bits): a write(2) is one request, not
 * two, and so is a truncating open. */
Test(integrity, writes_ask_for_no_attribute, .init = setup, .fini = fsu_teardown, .timeout = 60)
{
	char b[4096];
	memset(b, 'w', sizeof b);
	int fd = open(mp("f"), O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, b, sizeof b, 0), (ssize_t)sizeof b); /* the kernel may ask once */
	uint64_t g0 = requests("getxattr"), w0 = requests("write");
	for (int i = 1; i <= 32; i++)
		cr_assert_eq(pwrite(fd, b, sizeof b, (off_t)i * 8192), (ssize_t)sizeof b, "pwrite: %s", strerror(errno));
	cr_assert_eq(close(fd), 0);
	fd = open(mp("f"), O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, b, 100), 100);
	cr_assert_eq(close(fd), 0);
	uint64_t w = requests("write") - w0, g = requests("getxattr") - g0 - 3; /* less 3 reads of the stats */
	cr_assert_eq(w, 33, "%" PRIu64 " write requests for 33 writes", w);
	cr_assert_eq(g, 0, "33 writes and a truncating open of a file without set-id bits sent %" PRIu64 " getxattr requests", g);
	struct stat st;
	cr_assert_eq(stat(mp("f"), &st), 0);
	cr_assert_eq(st.st_size, 100);
	fsu_stop_check();
}

/* Writes id's pattern to path in pieces of `piece` bytes, then fsync. */
static void write_pieces(const char *path, uint64_t id, size_t size, size_t piece)
{
	unsigned char *b = malloc(size);
	pat(id, 0, b, size);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	for (size_t off = 0; off < size; off += piece)
		cr_assert_eq(pwrite(fd, b + off, piece, (off_t)off), (ssize_t)piece, "pwrite: %s", strerror(errno));
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(close(fd), 0);
	free(b);
}

/* Writes of 32 KiB or more store their blocks as ordered data: written
 * once, in place, not in the log as well (fsd/DESIGN.md); smaller writes
 * log them.  Both read back the same, across a remount and after the
 * blocks are overwritten (a block is never changed in place). */
Test(integrity, large_writes_are_not_logged, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	const size_t size = 8u << 20;
	uint64_t b0 = log_bytes();
	write_pieces(mp("big"), 1, size, 1u << 20);
	uint64_t b1 = log_bytes();
	cr_assert_lt(b1 - b0, size / 8, "1 MiB writes of an 8 MiB file logged %" PRIu64 " bytes: the data went to the log",
		     b1 - b0);
	write_pieces(mp("small"), 2, size, 4096);
	uint64_t b2 = log_bytes();
	cr_assert_gt(b2 - b1, size, "4 KiB writes are logged whole (%" PRIu64 " log bytes for 8 MiB)", b2 - b1);
	/* overwrite the middle of the big file with large writes, and a few
	 * bytes of it with a small one */
	unsigned char *b = malloc(size);
	pat(3, 0, b, size);
	int fd = open(mp("big"), O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, b + 1000000, 3000000, 1000000), 3000000);
	cr_assert_eq(pwrite(fd, b + 5000001, 100, 5000001), 100);
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(close(fd), 0);
	fsu_cycle();
	unsigned char *r = malloc(size + 1), *w = malloc(size);
	pat(1, 0, w, size);
	memcpy(w + 1000000, b + 1000000, 3000000);
	memcpy(w + 5000001, b + 5000001, 100);
	cr_assert_eq(fsu_read_file(mp("big"), r, size + 1), (ssize_t)size);
	cr_assert(memcmp(r, w, size) == 0, "the big file after its overwrites and a remount is wrong");
	check_pat(mp("small"), 2, size);
	free(b);
	free(r);
	free(w);
	fsu_stop_check();
}

/* Overwriting a file in place with large writes logs each whole block's
 * replacement (a new page, the leaf's cell, the old page freed) and no
 * more: the write looks first whether the block exists, instead of
 * inserting a new block -- a page allocated, filled and freed again -- and
 * only then replacing it (4.9 records a block, against 3.0; the first
 * write of the file logs 2.1). */
Test(integrity, overwrite_logs_each_block_once, .init = setup, .fini = fsu_teardown, .timeout = 120)
{
	const size_t size = 8u << 20;
	uint64_t r0 = log_count(0);
	write_pieces(mp("f"), 1, size, 1u << 20);
	uint64_t r1 = log_count(0);
	unsigned char *b = malloc(size);
	pat(2, 0, b, size);
	int fd = open(mp("f"), O_WRONLY);
	cr_assert_geq(fd, 0);
	for (size_t off = 0; off < size; off += 1u << 20)
		cr_assert_eq(pwrite(fd, b + off, 1u << 20, (off_t)off), 1 << 20, "pwrite: %s", strerror(errno));
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(close(fd), 0);
	free(b);
	uint64_t r2 = log_count(0);
	double ratio = (double)(r2 - r1) / (double)(r1 - r0);
	cr_assert_lt(ratio, 1.8,
		     "overwriting 8 MiB logged %" PRIu64 " records, %.2fx the %" PRIu64 " of its first write: "
		     "blocks inserted, then replaced",
		     r2 - r1, ratio, r1 - r0);
	fsu_cycle();
	check_pat(mp("f"), 2, size);
	fsu_stop_check();
}

Test(integrity, readonly_mount, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	write_pat(mp("f"), 1, 100000);
	cr_assert_eq(mkdir(mp("d"), 0755), 0);
	fsu_stop_check();
	cr_assert_eq(fsu_try_remount("ro"), 0, "mounting read-only failed");
	check_pat(mp("f"), 1, 100000);
	struct statvfs sv;
	cr_assert_eq(statvfs(fsu_m.mnt, &sv), 0);
	cr_assert(sv.f_flag & ST_RDONLY, "a read-only mount without ST_RDONLY");
	errno = 0;
	cr_assert_eq(open(mp("f"), O_WRONLY), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(open(mp("g"), O_WRONLY | O_CREAT, 0644), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(mkdir(mp("e"), 0755), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(unlink(mp("f")), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(rename(mp("f"), mp("g")), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(chmod(mp("f"), 0600), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(setxattr(mp("f"), "user.a", "1", 1, 0), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(utimensat(AT_FDCWD, mp("f"), NULL, 0), -1);
	cr_assert_eq(errno, EROFS);
	fsu_stop_check();
	/* committed and synced, then killed: a read-only mount either refuses a
	 * store that needs recovery or shows exactly what was committed */
	fsu_remount();
	write_pat(mp("g"), 2, 50000);
	int fd = open(mp("g"), O_RDONLY);
	cr_assert_eq(fsync(fd), 0);
	close(fd);
	fsu_kill9();
	if (fsu_try_remount("ro") == 0) {
		check_pat(mp("f"), 1, 100000);
		check_pat(mp("g"), 2, 50000);
		int st = tfs_stop(&fsu_m);
		cr_assert_eq(st, 0, "a read-only mount of a store needing recovery: the daemon exited %d", st);
	} else {
		fprintf(stderr, "readonly_mount: the read-only mount of a store needing recovery was refused\n");
	}
	fsu_remount();
	check_pat(mp("f"), 1, 100000);
	check_pat(mp("g"), 2, 50000);
	fsu_stop_check();
}

/* ---- unlinked while open ---- */

Test(integrity, orphan_reclaimed_at_close, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	const size_t len = 1 << 20;
	unsigned char *b = malloc(len), *w = malloc(len);
	write_pat(mp("keep"), 9, 5000);
	write_pat(mp("o"), 3, len);
	fsu_cycle();
	uint64_t blocks0;
	{ /* what the store holds with both files */
		fsu_stop_check();
		uint64_t others;
		cr_assert_eq(fsu_check_counts(NULL, &others, &blocks0), 0);
		cr_assert_eq(others, 2);
		fsu_remount();
	}
	int fd = open(mp("o"), O_RDWR);
	cr_assert_geq(fd, 0);
	cr_assert_eq(unlink(mp("o")), 0);
	struct stat st;
	cr_assert_eq(stat(mp("o"), &st), -1);
	cr_assert_eq(errno, ENOENT);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_nlink, 0, "an unlinked open file has st_nlink %lu", (unsigned long)st.st_nlink);
	/* readable and writable until the last close */
	cr_assert_eq(pread(fd, b, len, 0), (ssize_t)len);
	pat(3, 0, w, len);
	cr_assert(!memcmp(b, w, len), "an unlinked open file's data changed");
	pat(4, len, w, 100000);
	cr_assert_eq(pwrite(fd, w, 100000, (off_t)len), 100000);
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(pread(fd, b, 100000, (off_t)len), 100000);
	cr_assert(!memcmp(b, w, 100000));
	void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(m, MAP_FAILED);
	pat(3, 0, w, 4096);
	cr_assert(!memcmp(m, w, 4096));
	munmap(m, 4096);
	/* a second process, still holding it: reads it too */
	pid_t pid = fsu_fork();
	if (pid == 0) {
		unsigned char x[100];
		_exit(pread(fd, x, 100, 0) == 100 ? 0 : 1);
	}
	cr_assert_eq(fsu_wait(pid), 0);
	/* a file replaced by a rename while open: readable until closed too */
	write_pat(mp("r"), 11, 50000);
	int rfd = open(mp("r"), O_RDONLY);
	cr_assert_geq(rfd, 0);
	write_pat(mp("r.new"), 12, 10);
	cr_assert_eq(rename(mp("r.new"), mp("r")), 0);
	cr_assert_eq(fstat(rfd, &st), 0);
	cr_assert_eq(st.st_nlink, 0, "a file replaced by rename has st_nlink %lu", (unsigned long)st.st_nlink);
	cr_assert_eq(pread(rfd, b, 50000, 0), 50000);
	pat(11, 0, w, 50000);
	cr_assert(!memcmp(b, w, 50000), "a file replaced by rename changed under its reader");
	check_pat(mp("r"), 12, 10);
	cr_assert_eq(unlink(mp("r")), 0);
	cr_assert_eq(close(rfd), 0);
	/* reopened through /proc after the unlink: the first close is not the last */
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	int fd2 = open(proc, O_RDONLY);
	cr_assert_geq(fd2, 0, "reopening an unlinked file through %s: %s", proc, strerror(errno));
	cr_assert_eq(close(fd), 0);
	usleep(100000);
	cr_assert_eq(pread(fd2, b, len, 0), (ssize_t)len, "an unlinked file reopened through /proc: %s", strerror(errno));
	pat(3, 0, w, len);
	cr_assert(!memcmp(b, w, len), "an unlinked file's data changed after one of two descriptors closed");
	fd = fd2;
	/* a directory removed while open */
	cr_assert_eq(mkdir(mp("dd"), 0755), 0);
	int dfd = open(mp("dd"), O_RDONLY | O_DIRECTORY);
	cr_assert_geq(dfd, 0);
	cr_assert_eq(rmdir(mp("dd")), 0);
	cr_assert_eq(fstat(dfd, &st), 0);
	cr_assert_eq(close(dfd), 0);
	cr_assert_eq(close(fd), 0);
	usleep(300000); /* the kernel sends RELEASE and FORGET asynchronously */
	fsu_stop_check();
	uint64_t others, blocks;
	cr_assert_eq(fsu_check_counts(NULL, &others, &blocks), 0);
	cr_assert_eq(others, 1, "the unlinked file is still in the store after its last close (%" PRIu64 " inodes)",
		     others);
	cr_assert_lt(blocks, blocks0, "the unlinked file's blocks were not freed (%" PRIu64 ", before %" PRIu64 ")",
		     blocks, blocks0);
	fsu_remount();
	check_pat(mp("keep"), 9, 5000);
	fsu_stop_check();
	free(b);
	free(w);
}

Test(integrity, orphan_reclaimed_after_kill9, .init = setup, .fini = fsu_teardown, .timeout = 300)
{
	write_pat(mp("keep"), 9, 5000);
	write_pat(mp("o1"), 1, 300000);
	write_pat(mp("o2"), 2, 5000);
	int f1 = open(mp("o1"), O_RDONLY), f2 = open(mp("o2"), O_RDWR);
	cr_assert(f1 >= 0 && f2 >= 0);
	cr_assert_eq(unlink(mp("o1")), 0);
	cr_assert_eq(unlink(mp("o2")), 0);
	cr_assert_eq(pwrite(f2, "more", 4, 5000), 4);
	cr_assert_eq(mkdir(mp("dd"), 0755), 0);
	int f3 = open(mp("dd"), O_RDONLY | O_DIRECTORY);
	cr_assert_geq(f3, 0);
	cr_assert_eq(rmdir(mp("dd")), 0);
	cr_assert_eq(fsync(f1), 0); /* every change so far is durable */
	unsigned char b[300000];
	cr_assert_eq(pread(f1, b, sizeof b, 0), (ssize_t)sizeof b);
	fsu_kill9();
	close(f1);
	close(f2);
	close(f3);
	fsu_remount(); /* recovery, then the orphans go */
	struct stat st;
	cr_assert_eq(stat(mp("o1"), &st), -1, "an unlinked file came back after the crash");
	check_pat(mp("keep"), 9, 5000);
	fsu_stop_check();
	uint64_t dirs, others, blocks;
	cr_assert_eq(fsu_check_counts(&dirs, &others, &blocks), 0);
	cr_assert_eq(others, 1, "%" PRIu64 " inodes after the remount reclaimed the orphans, want 1 (keep)", others);
	cr_assert_eq(dirs, 1, "%" PRIu64 " directories: the one removed while open was not reclaimed", dirs);
	cr_assert_leq(blocks, 2, "%" PRIu64 " blocks left: the orphans' blocks were not freed", blocks);
}
