/*
 * test_io -- unit tests of the io seam, its POSIX backend, and the crash
 * simulator / fault injector of the testing library.
 *
 * Every test gets a fresh directory under /tmp (removed afterwards).  Crash
 * tests fork a child that installs the simulator, runs a workload and
 * crashes; the parent checks the exit status (IOSIM_CRASH_EXIT) and then
 * reads the file with plain POSIX calls, outside the simulator: that is the
 * disk after the power cut.  Children never call cr_assert: a failed check
 * exits with CHILD_FAIL and the parent reports it with the seed.
 */
#include <criterion/criterion.h>

#include "io.h"
#include "io_sim.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_FAIL 3
#define CK(c)                                                                    \
	do {                                                                     \
		if (!(c)) {                                                      \
			fprintf(stderr, "child check failed %s:%d: %s\n",        \
			        __FILE__, __LINE__, #c);                         \
			_exit(CHILD_FAIL);                                       \
		}                                                                \
	} while (0)

static char tdir[64]; /* short: paths built from it fit in PATH_MAX */

static void setup(void)
{
	snprintf(tdir, sizeof tdir, "/tmp/tpfs-io-XXXXXX");
	cr_assert_not_null(mkdtemp(tdir), "mkdtemp: %s", strerror(errno));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void teardown(void)
{
	io_set_backend(NULL);
	if (tdir[0] != 0)
		nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* path of name inside the test's directory */
static char *tp(char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", tdir, name);
	return buf;
}

/* --- raw POSIX access: the "disk", bypassing io and the simulator --- */

static uint64_t raw_size(const char *path)
{
	struct stat st;
	cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
	return (uint64_t)st.st_size;
}

/* Reads len bytes at off; zeros past the end.  Returns the bytes read. */
static size_t raw_read(const char *path, void *buf, size_t len, uint64_t off)
{
	int fd = open(path, O_RDONLY);
	size_t done = 0;

	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		cr_assert_geq(n, 0, "pread: %s", strerror(errno));
		if (n == 0)
			break;
		done += (size_t)n;
	}
	memset((char *)buf + done, 0, len - done);
	close(fd);
	return done;
}

static void fill(unsigned char *buf, size_t len, unsigned seed)
{
	/* bit 7 always set: never equal to the "old" pattern OLD below */
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(0x80 | ((i * 7 + seed * 13 + i / 251) & 0x7f));
}

#define OLD 0x11

static int all_eq(const unsigned char *p, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

/* Forks a child that runs fn; returns its exit code (128+signal if killed). */
typedef void (*child_fn)(uint64_t seed, void *arg);

static int run_child(child_fn fn, uint64_t seed, void *arg)
{
	int st;
	pid_t pid, r;

	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		fn(seed, arg);
		_exit(0); /* the workload returned: no crash happened */
	}
	do
		r = waitpid(pid, &st, 0);
	while (r < 0 && errno == EINTR);
	cr_assert_eq(r, pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ================================================================== */
/* POSIX backend                                                       */

TestSuite(posix, .init = setup, .fini = teardown, .timeout = 60);

Test(posix, round_trip)
{
	char p[PATH_MAX];
	unsigned char w[10000], r[10000];
	io_file *f;
	uint64_t size;
	size_t got;

	fill(w, sizeof w, 1);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_str_eq(io_path(f), p);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 12345), 0);
	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, 12345 + sizeof w);
	cr_assert_eq(io_pread(f, r, sizeof r, 12345, &got), 0);
	cr_assert_eq(got, sizeof r);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_close(f), 0);

	/* reopen read-only: the data is on disk */
	cr_assert_eq(io_open(p, IO_RDONLY, &f), 0);
	memset(r, 0, sizeof r);
	cr_assert_eq(io_pread(f, r, sizeof r, 12345, &got), 0);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_pwrite(f, w, 1, 0), EBADF);
	cr_assert_eq(io_close(f), 0);
	raw_read(p, r, sizeof r, 12345);
	cr_assert_arr_eq(r, w, sizeof w);
}

/* I7: a durable write of aligned sectors goes through O_DIRECT and
 * RWF_DSYNC; anything unaligned is refused with ENOTSUP, nothing written. */
Test(posix, durable_write_of_aligned_sectors)
{
	char p[PATH_MAX];
	unsigned char *w, r[4096], before[4096];
	io_file *f;
	size_t got;
	cr_assert_eq(posix_memalign((void **)&w, IO_DIRECT_MEM, 8192), 0);
	fill(w, 8192, 3);
	cr_assert_eq(io_open(tp(p, "d"), IO_CREATE, &f), 0);
	cr_assert_eq(io_preallocate(f, 16384), 0);
	cr_assert_eq(io_sync(f), 0);
	/* refused, untouched: buffer, length or offset off the alignment */
	cr_assert_eq(io_pwrite_durable(f, w + 8, 512, 512), ENOTSUP);
	cr_assert_eq(io_pwrite_durable(f, w, 500, 512), ENOTSUP);
	cr_assert_eq(io_pwrite_durable(f, w, 512, 100), ENOTSUP);
	cr_assert_eq(io_pread(f, before, sizeof before, 0, &got), 0);
	for (size_t i = 0; i < sizeof before; i++)
		cr_assert_eq(before[i], 0, "byte %zu written by a refused durable write", i);
	/* aligned: written (directly if the file system takes O_DIRECT) */
	int rc = io_pwrite_durable(f, w, 1536, 1024);
	char probe[PATH_MAX];
	int fd = open(tp(probe, "probe"), O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd >= 0) {
		close(fd);
		cr_assert_eq(rc, 0, "durable write on a file system that takes O_DIRECT: %d", rc);
	} else {
		cr_assert_eq(rc, ENOTSUP);
		cr_log_warn("%s refuses O_DIRECT: io_pwrite_durable answers ENOTSUP", tdir);
		cr_assert_eq(io_pwrite(f, w, 1536, 1024), 0);
	}
	/* every reader sees it at once: the page cache and the raw file */
	cr_assert_eq(io_pread(f, r, 1536, 1024, &got), 0);
	cr_assert_arr_eq(r, w, 1536);
	raw_read(p, r, 1536, 1024);
	cr_assert_arr_eq(r, w, 1536);
	cr_assert_eq(io_pread(f, r, 1024, 0, &got), 0);
	for (size_t i = 0; i < 1024; i++)
		cr_assert_eq(r[i], 0, "byte %zu before the durable write changed", i);
	cr_assert_eq(io_close(f), 0);
	free(w);
}

Test(posix, path_is_a_copy)
{
	char p[PATH_MAX];
	io_file *f;

	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	p[0] = 'X';
	cr_assert_eq(io_path(f)[0], '/');
	cr_assert_eq(io_close(f), 0);
}

Test(posix, open_flags)
{
	char p[PATH_MAX];
	io_file *f;

	cr_assert_eq(io_open(tp(p, "missing"), 0, &f), ENOENT);
	cr_assert_eq(io_open(p, IO_RDONLY, &f), ENOENT);
	cr_assert(strstr(util_errmsg(), "missing") != NULL, "message names the file: %s",
	          util_errmsg());
	cr_assert_eq(io_open(p, IO_CREATE | IO_EXCL, &f), 0);
	cr_assert_eq(io_close(f), 0);
	cr_assert_eq(io_open(p, IO_CREATE | IO_EXCL, &f), EEXIST);
	cr_assert_eq(io_open(p, IO_CREATE, &f), 0);
	cr_assert_eq(io_close(f), 0);
	cr_assert_eq(io_open(p, 1 << 20, &f), EINVAL);
	cr_assert_eq(io_close(NULL), 0);

	/* mode 0644 (under the usual umask) and close-on-exec */
	struct stat st;
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0600, 0600);
	cr_assert_eq(io_open(p, 0, &f), 0);
	int found = 0;
	for (int fd = 3; fd < 256; fd++) {
		char lp[64], target[PATH_MAX];
		snprintf(lp, sizeof lp, "/proc/self/fd/%d", fd);
		ssize_t n = readlink(lp, target, sizeof target - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (strcmp(target, p) == 0) {
			cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC, "fd %d without O_CLOEXEC", fd);
			found = 1;
		}
	}
	cr_assert(found);
	cr_assert_eq(io_close(f), 0);
}

Test(posix, zero_fill_past_eof)
{
	char p[PATH_MAX];
	unsigned char w[100], r[4096];
	io_file *f;
	size_t got = 99;

	fill(w, sizeof w, 2);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);

	memset(r, 0xaa, sizeof r);
	cr_assert_eq(io_pread(f, r, sizeof r, 0, &got), 0);
	cr_assert_eq(got, 100);
	cr_assert_arr_eq(r, w, 100);
	cr_assert(all_eq(r + 100, sizeof r - 100, 0), "bytes past EOF are zero");

	/* straddling the end */
	memset(r, 0xaa, sizeof r);
	cr_assert_eq(io_pread(f, r, 200, 50, &got), 0);
	cr_assert_eq(got, 50);
	cr_assert_arr_eq(r, w + 50, 50);
	cr_assert(all_eq(r + 50, 150, 0));

	/* wholly past the end */
	memset(r, 0xaa, sizeof r);
	cr_assert_eq(io_pread(f, r, sizeof r, 1 << 20, &got), 0);
	cr_assert_eq(got, 0);
	cr_assert(all_eq(r, sizeof r, 0));

	/* got may be NULL */
	cr_assert_eq(io_pread(f, r, 10, 0, NULL), 0);
	cr_assert_eq(io_close(f), 0);
}

Test(posix, preallocate_writes_real_blocks)
{
	char p[PATH_MAX];
	unsigned char w[777], r[4096];
	const uint64_t want = 3 * (1u << 20) + 5;
	io_file *f;
	uint64_t size;
	struct stat st;

	fill(w, sizeof w, 3);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);
	cr_assert_eq(io_preallocate(f, want), 0);
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, want);
	cr_assert_eq(raw_size(p), want);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_geq((uint64_t)st.st_blocks * 512, want, "not sparse: %llu blocks",
	              (unsigned long long)st.st_blocks);

	/* existing data kept, the rest zeros */
	raw_read(p, r, sizeof w, 0);
	cr_assert_arr_eq(r, w, sizeof w);
	for (uint64_t off = sizeof w; off < want; off += sizeof r) {
		size_t n = want - off < sizeof r ? (size_t)(want - off) : sizeof r;
		raw_read(p, r, n, off);
		cr_assert(all_eq(r, n, 0), "zeros at %llu", (unsigned long long)off);
	}

	/* never shrinks */
	cr_assert_eq(io_preallocate(f, 10), 0);
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, want);
	cr_assert_eq(io_close(f), 0);
}

Test(posix, truncate)
{
	char p[PATH_MAX];
	unsigned char w[8192], r[8192];
	io_file *f;
	uint64_t size;

	fill(w, sizeof w, 4);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);
	cr_assert_eq(io_truncate(f, 4096), 0);
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, 4096);
	cr_assert_eq(io_truncate(f, 8192), 0);
	cr_assert_eq(io_pread(f, r, sizeof r, 0, NULL), 0);
	cr_assert_arr_eq(r, w, 4096);
	cr_assert(all_eq(r + 4096, 4096, 0));
	cr_assert_eq(io_close(f), 0);
}

Test(posix, names)
{
	char d[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
	io_file *f;
	int is_dir = -1;

	tp(d, "dir");
	tp(a, "dir/a");
	tp(b, "dir/b");

	cr_assert_eq(io_exists(d, &is_dir), ENOENT);
	cr_assert_eq(io_mkdir(d), 0);
	cr_assert_eq(io_mkdir(d), EEXIST);
	cr_assert_eq(io_exists(d, &is_dir), 0);
	cr_assert_eq(is_dir, 1);
	cr_assert_eq(io_exists(d, NULL), 0);

	cr_assert_eq(io_open(a, IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, "hello", 5, 0), 0);
	cr_assert_eq(io_close(f), 0);
	cr_assert_eq(io_exists(a, &is_dir), 0);
	cr_assert_eq(is_dir, 0);
	cr_assert_eq(io_sync_dir(d), 0);

	cr_assert_eq(io_rename(a, b), 0);
	cr_assert_eq(io_exists(a, NULL), ENOENT);
	cr_assert_eq(io_exists(b, NULL), 0);
	cr_assert_eq(io_rename(a, b), ENOENT);
	cr_assert_eq(io_sync_dir(d), 0);

	char r[5];
	raw_read(b, r, 5, 0);
	cr_assert_arr_eq(r, "hello", 5);

	cr_assert_eq(io_unlink(b), 0);
	cr_assert_eq(io_exists(b, NULL), ENOENT);
	cr_assert_eq(io_unlink(b), ENOENT);
	cr_assert_eq(io_sync_dir(b), ENOENT);
	cr_assert_eq(io_sync_dir(d), 0);
	io_point("nothing.happens"); /* a no-op with POSIX */
}

/* ================================================================== */
/* The dispatch layer, with toy backends                               */

static size_t toy_max;  /* bytes per pread/pwrite attempt */
static int toy_calls;   /* backend pread/pwrite calls */
static char toy_point[64];

static int toy_pread(void *h, void *buf, size_t len, uint64_t off, size_t *done)
{
	toy_calls++;
	return io_posix_backend()->pread(h, buf, len < toy_max ? len : toy_max, off, done);
}

static int toy_pwrite(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	toy_calls++;
	if (toy_max == 0) { /* no progress, no error */
		*done = 0;
		return 0;
	}
	return io_posix_backend()->pwrite(h, buf, len < toy_max ? len : toy_max, off, done);
}

/* iov cut to its first toy_max bytes, into v (16 entries at most). */
static int toy_clip(const struct iovec *iov, int cnt, struct iovec *v)
{
	size_t left = toy_max;
	int k = 0;
	for (int i = 0; i < cnt && k < 16 && left; i++, k++) {
		v[k] = iov[i];
		if (v[k].iov_len > left)
			v[k].iov_len = left;
		left -= v[k].iov_len;
	}
	return k;
}

static int toy_preadv(void *h, const struct iovec *iov, int cnt, uint64_t off, size_t *done)
{
	struct iovec v[16];
	toy_calls++;
	return io_posix_backend()->preadv(h, v, toy_clip(iov, cnt, v), off, done);
}

static int toy_pwritev(void *h, const struct iovec *iov, int cnt, uint64_t off, size_t *done)
{
	struct iovec v[16];
	toy_calls++;
	return io_posix_backend()->pwritev(h, v, toy_clip(iov, cnt, v), off, done);
}

static void toy_point_fn(const char *name)
{
	snprintf(toy_point, sizeof toy_point, "%s", name);
}

static io_backend toy_backend(void)
{
	io_backend b = *io_posix_backend();
	b.pread = toy_pread;
	b.pwrite = toy_pwrite;
	b.point = toy_point_fn;
	return b;
}

TestSuite(dispatch, .init = setup, .fini = teardown, .timeout = 60);

Test(dispatch, loops_over_partial_transfers)
{
	char p[PATH_MAX];
	unsigned char w[1000], r[1200];
	io_backend b = toy_backend();
	io_file *f;
	size_t got;

	fill(w, sizeof w, 5);
	toy_max = 3;
	io_set_backend(&b);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);
	cr_assert_eq(toy_calls, 334);
	cr_assert_eq(io_pread(f, r, sizeof r, 0, &got), 0);
	cr_assert_eq(got, sizeof w);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert(all_eq(r + sizeof w, 200, 0));
	io_point("toy.point");
	cr_assert_str_eq(toy_point, "toy.point");
	cr_assert_eq(io_close(f), 0);

	raw_read(p, r, sizeof w, 0);
	cr_assert_arr_eq(r, w, sizeof w);

	/* NULL restores POSIX: no more toy calls */
	io_set_backend(NULL);
	cr_assert_eq(io_posix_backend()->point, NULL);
	toy_calls = 0;
	cr_assert_eq(io_open(p, 0, &f), 0);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);
	cr_assert_eq(toy_calls, 0);
	cr_assert_eq(io_close(f), 0);
}

/* io_preadv: the buffers filled in order from the offset, across partial
 * transfers that end inside a buffer, zeros past the end of the file; a
 * backend without preadv reads through a bounce buffer, the same bytes */
Test(dispatch, preadv_fills_each_buffer_in_order)
{
	char p[PATH_MAX];
	unsigned char w[1000], r[1300];
	static const size_t part[] = {7, 300, 1, 500, 392};
	io_backend b = toy_backend();
	io_file *f;
	fill(w, sizeof w, 9);
	toy_max = 13;
	for (int variant = 0; variant < 2; variant++) {
		b.preadv = variant ? NULL : toy_preadv;
		io_set_backend(&b);
		cr_assert_eq(io_open(tp(p, "v"), IO_CREATE, &f), 0);
		cr_assert_eq(io_pwrite(f, w, sizeof w, 50), 0);
		struct iovec iov[5];
		size_t at = 0, got = 0;
		memset(r, 0xaa, sizeof r);
		for (int i = 0; i < 5; i++) { /* in reverse order in memory */
			at += part[i];
			iov[i] = (struct iovec){r + sizeof r - at, part[i]};
		}
		toy_calls = 0;
		cr_assert_eq(io_preadv(f, iov, 5, 50, &got), 0, "%s", util_errmsg());
		cr_assert_eq(got, 1000);
		if (!variant)
			cr_assert_eq(toy_calls, (1000 + 12) / 13 + 1, "%d attempts", toy_calls);
		size_t pos = 0;
		for (int i = 0; i < 5; i++)
			for (size_t j = 0; j < part[i]; j++, pos++) {
				unsigned char want = pos < sizeof w ? w[pos] : 0;
				cr_assert_eq(((unsigned char *)iov[i].iov_base)[j], want,
					     "variant %d: byte %zu (buffer %d, at %zu)", variant, pos, i, j);
			}
		cr_assert(all_eq(r, sizeof r - at, 0xaa), "nothing written outside the buffers");
		cr_assert_eq(io_close(f), 0);
		io_set_backend(NULL);
	}
}

/* io_pwritev: the buffers written in order from the offset, across partial
 * transfers that end inside a buffer; through a bounce buffer (one pwrite)
 * for a backend without pwritev */
Test(dispatch, pwritev_writes_each_buffer_in_order)
{
	char p[PATH_MAX];
	unsigned char w[1200], r[1300];
	static const size_t part[] = {4, 300, 1, 500, 395};
	io_backend b = toy_backend();
	io_file *f;
	for (int variant = 0; variant < 2; variant++) {
		b.pwritev = variant ? NULL : toy_pwritev;
		toy_max = variant ? 5000 : 13;
		io_set_backend(&b);
		cr_assert_eq(io_open(tp(p, variant ? "y" : "x"), IO_CREATE, &f), 0);
		fill(w, sizeof w, 11 + (unsigned)variant);
		struct iovec iov[5];
		size_t at = 0;
		for (int i = 0; i < 5; i++) { /* in reverse order in memory */
			at += part[i];
			iov[i] = (struct iovec){w + sizeof w - at, part[i]};
		}
		toy_calls = 0;
		cr_assert_eq(io_pwritev(f, iov, 5, 100), 0, "%s", util_errmsg());
		cr_assert_eq(toy_calls, variant ? 1 : (1200 + 12) / 13, "variant %d: %d attempts", variant, toy_calls);
		cr_assert_eq(io_close(f), 0);
		io_set_backend(NULL);
		cr_assert_eq(raw_size(p), 1300);
		raw_read(p, r, sizeof r, 0);
		cr_assert(all_eq(r, 100, 0));
		size_t pos = 100;
		for (int i = 0; i < 5; i++)
			for (size_t j = 0; j < part[i]; j++, pos++)
				cr_assert_eq(r[pos], ((unsigned char *)iov[i].iov_base)[j], "variant %d: byte %zu", variant,
					     pos);
	}
}

Test(dispatch, no_progress_is_eio)
{
	char p[PATH_MAX];
	io_backend b = toy_backend();
	io_file *f;

	toy_max = 0;
	io_set_backend(&b);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, "abc", 3, 0), EIO);
	cr_assert_eq(toy_calls, 1);
	cr_assert_eq(io_close(f), 0);
}

Test(dispatch, file_keeps_its_backend)
{
	char p[PATH_MAX];
	io_backend b = toy_backend();
	io_file *f;

	toy_max = 1 << 20;
	io_set_backend(&b);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	io_set_backend(NULL);
	cr_assert_eq(io_pwrite(f, "abc", 3, 0), 0);
	cr_assert_eq(toy_calls, 1, "a file is served by the backend that opened it");
	cr_assert_eq(io_close(f), 0);
}

/* ================================================================== */
/* Simulator: the page cache                                           */

TestSuite(sim, .init = setup, .fini = teardown, .timeout = 60);

/* I7: the simulator has no durable write: the caller writes and syncs
 * with the calls it numbers and cuts. */
Test(sim, durable_write_is_left_to_write_and_sync)
{
	char p[PATH_MAX];
	unsigned char *w;
	io_file *f;
	uint64_t size;
	cr_assert_eq(posix_memalign((void **)&w, IO_DIRECT_MEM, 4096), 0);
	fill(w, 4096, 4);
	iosim_install(1);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite_durable(f, w, 4096, 0), ENOTSUP);
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, 0, "nothing written");
	cr_assert_eq(io_close(f), 0);
	free(w);
}

Test(sim, reads_see_pending_writes)
{
	char p[PATH_MAX];
	unsigned char w[6000], w2[1000], r[8192], want[8192];
	io_file *f;
	uint64_t size;
	size_t got;

	fill(w, sizeof w, 6);
	fill(w2, sizeof w2, 7);
	iosim_install(1);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 1000), 0);
	cr_assert_eq(io_pwrite(f, w2, sizeof w2, 500), 0); /* overlaps w's head */
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, 7000);
	cr_assert_eq(raw_size(p), 0, "nothing reaches the disk before sync");

	memset(want, 0, sizeof want);
	memcpy(want + 1000, w, sizeof w);
	memcpy(want + 500, w2, sizeof w2); /* newest wins */
	cr_assert_eq(io_pread(f, r, sizeof r, 0, &got), 0);
	cr_assert_eq(got, 7000);
	cr_assert_arr_eq(r, want, sizeof r);
	/* a read inside one write */
	cr_assert_eq(io_pread(f, r, 100, 3000, &got), 0);
	cr_assert_eq(got, 100);
	cr_assert_arr_eq(r, want + 3000, 100);

	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(iosim_syncs(), 1);
	cr_assert_eq(raw_size(p), 7000);
	raw_read(p, r, sizeof r, 0);
	cr_assert_arr_eq(r, want, sizeof r);

	/* pending writes over real data */
	cr_assert_eq(io_pwrite(f, w2, 10, 6995), 0);
	memcpy(want + 6995, w2, 10);
	cr_assert_eq(io_pread(f, r, sizeof r, 0, &got), 0);
	cr_assert_eq(got, 7005);
	cr_assert_arr_eq(r, want, sizeof r);
	raw_read(p, r, sizeof r, 0);
	cr_assert_eq(r[6999], w[5999], "disk unchanged until sync");
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

Test(sim, same_file_opened_twice_shares_pending_writes)
{
	char p[PATH_MAX], p2[PATH_MAX], q[PATH_MAX];
	unsigned char w[3000], r[3000];
	io_file *f1, *f2, *f3;

	fill(w, sizeof w, 8);
	iosim_install(2);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f1), 0);
	cr_assert_eq(io_open(tp(p2, "./a"), 0, &f2), 0); /* another spelling */
	cr_assert_eq(io_pwrite(f1, w, sizeof w, 0), 0);
	cr_assert_eq(io_pread(f2, r, sizeof r, 0, NULL), 0);
	cr_assert_arr_eq(r, w, sizeof w);

	/* close both without sync, reopen: still pending, still visible */
	cr_assert_eq(io_close(f1), 0);
	cr_assert_eq(io_close(f2), 0);
	cr_assert_eq(raw_size(p), 0, "close does not write to disk");
	cr_assert_eq(io_open(p, IO_RDONLY, &f3), 0);
	cr_assert_eq(io_pread(f3, r, sizeof r, 0, NULL), 0);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_close(f3), 0);

	/* rename keeps the file: its pending writes follow it */
	cr_assert_eq(io_rename(p, tp(q, "b")), 0);
	cr_assert_eq(io_open(q, 0, &f3), 0);
	cr_assert_eq(io_pread(f3, r, sizeof r, 0, NULL), 0);
	cr_assert_arr_eq(r, w, sizeof w);
	/* a sync through any handle makes the file's writes durable */
	cr_assert_eq(io_sync(f3), 0);
	raw_read(q, r, sizeof r, 0);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_close(f3), 0);

	/* a new file at the old path is a new file */
	cr_assert_eq(io_open(p, IO_CREATE | IO_EXCL, &f1), 0);
	uint64_t size;
	cr_assert_eq(io_size(f1, &size), 0);
	cr_assert_eq(size, 0);
	cr_assert_eq(io_close(f1), 0);
	iosim_uninstall();
}

Test(sim, readonly_then_writable_open)
{
	char p[PATH_MAX];
	unsigned char w[100], r[100];
	io_file *ro, *rw;

	fill(w, sizeof w, 9);
	close(open(tp(p, "a"), O_CREAT | O_WRONLY, 0644));
	iosim_install(3);
	cr_assert_eq(io_open(p, IO_RDONLY, &ro), 0);
	cr_assert_eq(io_pwrite(ro, w, sizeof w, 0), EBADF);
	cr_assert_eq(io_truncate(ro, 0), EINVAL);
	cr_assert_eq(io_open(p, 0, &rw), 0);
	cr_assert_eq(io_pwrite(rw, w, sizeof w, 0), 0);
	cr_assert_eq(io_close(rw), 0);
	cr_assert_eq(io_pread(ro, r, sizeof r, 0, NULL), 0);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_sync(ro), 0);
	raw_read(p, r, sizeof r, 0);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_close(ro), 0);
	iosim_uninstall();
}

Test(sim, truncate_trims_pending_writes)
{
	char p[PATH_MAX];
	unsigned char w[8192], r[12288];
	io_file *f;
	uint64_t size;
	size_t got;

	fill(w, sizeof w, 10);
	iosim_install(4);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);
	cr_assert_eq(io_pwrite(f, w, 100, 10000), 0);
	cr_assert_eq(io_truncate(f, 4096), 0);
	cr_assert_eq(raw_size(p), 4096, "truncate reaches the disk at once");
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, 4096);
	cr_assert_eq(io_pread(f, r, sizeof r, 0, &got), 0);
	cr_assert_eq(got, 4096);
	cr_assert_arr_eq(r, w, 4096);

	/* growing again must not bring the trimmed bytes back */
	cr_assert_eq(io_truncate(f, sizeof r), 0);
	cr_assert_eq(io_pread(f, r, sizeof r, 0, &got), 0);
	cr_assert_eq(got, sizeof r);
	cr_assert_arr_eq(r, w, 4096);
	cr_assert(all_eq(r + 4096, sizeof r - 4096, 0), "trimmed writes are gone");

	/* and a sync must not write them either */
	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(raw_size(p), sizeof r);
	raw_read(p, r, sizeof r, 0);
	cr_assert_arr_eq(r, w, 4096);
	cr_assert(all_eq(r + 4096, sizeof r - 4096, 0));

	/* a write after the truncate stays pending after it */
	cr_assert_eq(io_truncate(f, 0), 0);
	cr_assert_eq(io_pwrite(f, w, 10, 0), 0);
	cr_assert_eq(io_pwrite(f, w, 10, 20), 0);
	cr_assert_eq(io_truncate(f, 25), 0);
	cr_assert_eq(io_pwrite(f, w + 100, 10, 40), 0); /* tail after trimming */
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, 50);
	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(raw_size(p), 50);
	raw_read(p, r, 50, 0);
	cr_assert_arr_eq(r, w, 10);
	cr_assert_arr_eq(r + 20, w, 5);
	cr_assert(all_eq(r + 25, 15, 0));
	cr_assert_arr_eq(r + 40, w + 100, 10);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

Test(sim, preallocate_goes_through_the_sim)
{
	char p[PATH_MAX];
	const uint64_t want = 3 * (1u << 20) + 1;
	io_file *f;
	uint64_t size;

	iosim_install(5);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_preallocate(f, want), 0);
	cr_assert_eq(iosim_calls(), 4, "three 1 MiB chunks and one byte");
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, want);
	cr_assert_eq(raw_size(p), 0, "pending until sync");
	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(raw_size(p), want);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

Test(sim, flush_all_and_uninstall_apply_pending_writes)
{
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];
	unsigned char w[500], r[500];
	io_file *fa, *fb, *fc;

	fill(w, sizeof w, 11);
	iosim_install(6);
	cr_assert_eq(io_open(tp(a, "a"), IO_CREATE, &fa), 0);
	cr_assert_eq(io_open(tp(b, "b"), IO_CREATE, &fb), 0);
	cr_assert_eq(io_pwrite(fa, w, sizeof w, 0), 0);
	cr_assert_eq(io_pwrite(fb, w, sizeof w, 0), 0);
	cr_assert_eq(io_close(fb), 0); /* closed, still pending */
	cr_assert_eq(raw_size(a), 0);
	cr_assert_eq(raw_size(b), 0);
	iosim_flush_all();
	raw_read(a, r, sizeof r, 0);
	cr_assert_arr_eq(r, w, sizeof w);
	raw_read(b, r, sizeof r, 0);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_close(fa), 0);

	cr_assert_eq(io_open(tp(c, "c"), IO_CREATE, &fc), 0);
	cr_assert_eq(io_pwrite(fc, w, sizeof w, 0), 0);
	cr_assert_eq(io_close(fc), 0);
	iosim_uninstall(); /* a clean shutdown: the page cache reaches the disk */
	raw_read(c, r, sizeof r, 0);
	cr_assert_arr_eq(r, w, sizeof w);
}

Test(sim, point_hits_and_counters)
{
	char p[PATH_MAX];
	io_file *f;

	iosim_install(7);
	io_point("p");
	io_point("p");
	io_point("q");
	io_point("p");
	cr_assert_eq(iosim_point_hits("p"), 3);
	cr_assert_eq(iosim_point_hits("q"), 1);
	cr_assert_eq(iosim_point_hits("never"), 0);

	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &f), 0);
	cr_assert_eq(io_pwrite(f, "x", 1, 0), 0);
	cr_assert_eq(io_pread(f, (char[1]){0}, 1, 0, NULL), 0);
	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(io_truncate(f, 1), 0);
	uint64_t size;
	cr_assert_eq(io_size(f, &size), 0); /* not a data call */
	cr_assert_eq(io_sync_dir(tdir), 0); /* not a data call */
	cr_assert_eq(iosim_calls(), 4);
	cr_assert_eq(iosim_syncs(), 1);

	iosim_install(8); /* resets every counter */
	cr_assert_eq(iosim_calls(), 0);
	cr_assert_eq(iosim_syncs(), 0);
	cr_assert_eq(iosim_point_hits("p"), 0);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

/* Several threads write, read and sync one file through the simulator. */
#define MT_THREADS 4
#define MT_ROUNDS 200
#define MT_CHUNK 512

static io_file *mt_file;

static void *mt_worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	unsigned char w[MT_CHUNK], r[MT_CHUNK];
	uintptr_t bad = 0;

	for (unsigned i = 0; i < MT_ROUNDS; i++) {
		uint64_t off = ((uint64_t)i * MT_THREADS + t) * MT_CHUNK;
		fill(w, sizeof w, t * 1000 + i);
		if (io_pwrite(mt_file, w, sizeof w, off) != 0)
			bad++;
		if (io_pread(mt_file, r, sizeof r, off, NULL) != 0 || memcmp(r, w, sizeof w) != 0)
			bad++;
		if (i % 17 == 0 && io_sync(mt_file) != 0)
			bad++;
		if (i % 5 == 0)
			io_point("mt");
	}
	return (void *)bad;
}

Test(sim, threads)
{
	char p[PATH_MAX];
	pthread_t th[MT_THREADS];
	unsigned char w[MT_CHUNK], r[MT_CHUNK];

	iosim_install(9);
	cr_assert_eq(io_open(tp(p, "a"), IO_CREATE, &mt_file), 0);
	for (uintptr_t t = 0; t < MT_THREADS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, mt_worker, (void *)t), 0);
	for (unsigned t = 0; t < MT_THREADS; t++) {
		void *bad;
		cr_assert_eq(pthread_join(th[t], &bad), 0);
		cr_assert_eq((uintptr_t)bad, 0, "thread %u saw %lu errors", t,
		             (unsigned long)(uintptr_t)bad);
	}
	cr_assert_eq(iosim_point_hits("mt"), MT_THREADS * (MT_ROUNDS / 5));
	cr_assert_eq(io_sync(mt_file), 0);
	for (unsigned t = 0; t < MT_THREADS; t++)
		for (unsigned i = 0; i < MT_ROUNDS; i++) {
			fill(w, sizeof w, t * 1000 + i);
			raw_read(p, r, sizeof r, ((uint64_t)i * MT_THREADS + t) * MT_CHUNK);
			cr_assert_arr_eq(r, w, sizeof w, "thread %u round %u", t, i);
		}
	cr_assert_eq(io_close(mt_file), 0);
	iosim_uninstall();
}

/* ================================================================== */
/* Simulator: crashes                                                  */

TestSuite(crash, .init = setup, .fini = teardown, .timeout = 120);

#define CR_FILE_SIZE 65536
/* the unsynced writes of the crash workload: offsets and lengths chosen to
 * start and end inside sectors, on sector boundaries, and to be one byte */
static const struct {
	uint64_t off;
	size_t len;
} cr_w[] = {
	{ 100, 3000 },
	{ 8192, 4096 },
	{ 20000, 1 },
	{ 30000, 9000 },
	{ 51711, 2 }, /* its only cut would end on a sector boundary */
};
#define CR_NW (sizeof cr_w / sizeof cr_w[0])

/* Old content everywhere, synced (sync 1); then the writes of cr_w, pending;
 * then the crash at sync 2, before it takes effect. */
static void cr_workload(uint64_t seed, void *arg)
{
	const char *path = arg;
	static unsigned char buf[CR_FILE_SIZE];
	io_file *f;

	iosim_install(seed);
	CK(io_open(path, IO_CREATE, &f) == 0);
	memset(buf, OLD, sizeof buf);
	CK(io_pwrite(f, buf, sizeof buf, 0) == 0);
	CK(io_sync(f) == 0);
	for (unsigned j = 0; j < CR_NW; j++) {
		fill(buf, cr_w[j].len, j);
		CK(io_pwrite(f, buf, cr_w[j].len, cr_w[j].off) == 0);
	}
	iosim_crash_at_sync(2);
	io_sync(f);
	_exit(CHILD_FAIL); /* not reached */
}

enum { OUT_ABSENT, OUT_TORN, OUT_WHOLE };

/* How write (off, len, data) survived on disk: its first p bytes and the old
 * content after them, p == 0 absent, p == len whole.  Returns -1 for any
 * other state. */
static int outcome(const unsigned char *disk, uint64_t off, const unsigned char *data,
                   size_t len, unsigned char old, size_t *prefix)
{
	size_t p = 0;

	while (p < len && disk[off + p] == data[p])
		p++;
	*prefix = p;
	if (!all_eq(disk + off + p, len - p, old))
		return -1;
	if (p == 0)
		return OUT_ABSENT;
	if (p == len)
		return OUT_WHOLE;
	if ((off + p) % 512 == 0)
		return -1; /* a tear must end inside a sector */
	return OUT_TORN;
}

/* Checks the disk after cr_workload; counts outcomes per write. */
static void cr_check(const char *path, uint64_t seed, int out[CR_NW])
{
	static unsigned char disk[CR_FILE_SIZE], data[CR_FILE_SIZE], covered[CR_FILE_SIZE];
	size_t prefix;

	cr_assert_eq(raw_size(path), CR_FILE_SIZE, "seed %llu", (unsigned long long)seed);
	raw_read(path, disk, sizeof disk, 0);
	memset(covered, 0, sizeof covered);
	for (unsigned j = 0; j < CR_NW; j++) {
		fill(data, cr_w[j].len, j);
		out[j] = outcome(disk, cr_w[j].off, data, cr_w[j].len, OLD, &prefix);
		cr_assert_neq(out[j], -1, "seed %llu write %u: not whole, absent or torn (prefix %zu)",
		              (unsigned long long)seed, j, prefix);
		memset(covered + cr_w[j].off, 1, cr_w[j].len);
	}
	/* synced data outside the pending writes is intact */
	for (size_t i = 0; i < sizeof disk; i++)
		if (!covered[i])
			cr_assert_eq(disk[i], OLD, "seed %llu: synced byte %zu changed",
			             (unsigned long long)seed, i);
}

Test(crash, at_sync_every_write_whole_absent_or_torn)
{
	char p[PATH_MAX];
	int n[3] = { 0, 0, 0 }, n1[3] = { 0, 0, 0 }, reordered = 0;

	tp(p, "a");
	for (uint64_t seed = 1; seed <= 200; seed++) {
		int out[CR_NW];
		unlink(p);
		int rc = run_child(cr_workload, seed, p);
		cr_assert_eq(rc, IOSIM_CRASH_EXIT, "seed %llu: child exit %d",
		             (unsigned long long)seed, rc);
		cr_check(p, seed, out);
		for (unsigned j = 0; j < CR_NW; j++) {
			if (cr_w[j].len > 2)
				n[out[j]]++;
			else /* 1 byte, or 2 bytes across a sector boundary */
				cr_assert_neq(out[j], OUT_TORN, "seed %llu: %zu-byte write torn",
				              (unsigned long long)seed, cr_w[j].len);
			if (cr_w[j].len == 1)
				n1[out[j]]++;
		}
		if (out[0] == OUT_ABSENT && out[3] == OUT_WHOLE)
			reordered++;
	}
	cr_assert_gt(n[OUT_WHOLE], 0, "some writes survive whole");
	cr_assert_gt(n[OUT_ABSENT], 0, "some writes are lost (crash before the sync applies)");
	cr_assert_gt(n[OUT_TORN], 0, "some writes are torn");
	cr_assert_gt(n1[OUT_WHOLE], 0);
	cr_assert_gt(n1[OUT_ABSENT], 0);
	cr_assert_gt(reordered, 0, "a later write survives an earlier lost one");
}

Test(crash, same_seed_same_disk)
{
	char p[PATH_MAX];
	static unsigned char d1[CR_FILE_SIZE], d2[CR_FILE_SIZE];

	tp(p, "a");
	cr_assert_eq(run_child(cr_workload, 77, p), IOSIM_CRASH_EXIT);
	raw_read(p, d1, sizeof d1, 0);
	unlink(p);
	cr_assert_eq(run_child(cr_workload, 77, p), IOSIM_CRASH_EXIT);
	raw_read(p, d2, sizeof d2, 0);
	cr_assert_arr_eq(d1, d2, sizeof d1);
}

/* Crash at the 2nd hit of a named point; a marker written (outside the
 * sim) between the hits shows it was not the first. */
static void point_workload(uint64_t seed, void *arg)
{
	const char *dir = arg;
	char path[PATH_MAX];
	unsigned char w[1000];
	io_file *f;

	iosim_install(seed);
	iosim_crash_at_point("log.commit.written", 2);
	snprintf(path, sizeof path, "%s/a", dir);
	CK(io_open(path, IO_CREATE, &f) == 0);
	fill(w, sizeof w, 1);
	CK(io_pwrite(f, w, sizeof w, 0) == 0);
	CK(io_sync(f) == 0);
	io_point("other.point");
	io_point("log.commit.written");
	snprintf(path, sizeof path, "%s/marker", dir);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	fill(w, sizeof w, 2);
	CK(io_pwrite(f, w, sizeof w, 0) == 0);
	io_point("log.commit.written");
	_exit(CHILD_FAIL); /* not reached */
}

Test(crash, at_named_point)
{
	char a[PATH_MAX], m[PATH_MAX];
	unsigned char w1[1000], w2[1000], disk[1000];
	int seen[3] = { 0, 0, 0 };

	fill(w1, sizeof w1, 1);
	fill(w2, sizeof w2, 2);
	tp(a, "a");
	tp(m, "marker");
	for (uint64_t seed = 1; seed <= 40; seed++) {
		unlink(a);
		unlink(m);
		int rc = run_child(point_workload, seed, tdir);
		cr_assert_eq(rc, IOSIM_CRASH_EXIT, "seed %llu: exit %d", (unsigned long long)seed, rc);
		cr_assert_eq(io_exists(m, NULL), 0, "crashed at the first hit");
		raw_read(a, disk, sizeof disk, 0);
		size_t prefix;
		int o = outcome(disk, 0, w2, sizeof w2, 0, &prefix);
		/* the old content is w1 (synced), not zeros: check by hand */
		cr_assert(o == OUT_WHOLE || memcmp(disk + prefix, w1 + prefix, sizeof w1 - prefix) == 0,
		          "seed %llu: synced data damaged", (unsigned long long)seed);
		seen[prefix == 0 ? OUT_ABSENT : prefix == sizeof w2 ? OUT_WHOLE : OUT_TORN]++;
	}
	cr_assert_gt(seen[OUT_WHOLE], 0);
	cr_assert_gt(seen[OUT_ABSENT], 0);
}

/* A file closed with pending writes, then a crash from another file. */
static void closed_workload(uint64_t seed, void *arg)
{
	const char *dir = arg;
	char a[PATH_MAX], b[PATH_MAX];
	unsigned char w[4096];
	io_file *fa, *fb;

	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	iosim_install(seed);
	CK(io_open(a, IO_CREATE, &fa) == 0);
	memset(w, OLD, sizeof w);
	CK(io_pwrite(fa, w, sizeof w, 0) == 0);
	CK(io_pwrite(fa, w, sizeof w, 4096) == 0);
	CK(io_sync(fa) == 0);
	fill(w, sizeof w, 3);
	CK(io_pwrite(fa, w, sizeof w, 0) == 0);
	CK(io_close(fa) == 0);
	/* reopened: the second open shares the pending list */
	CK(io_open(a, 0, &fa) == 0);
	fill(w, sizeof w, 4);
	CK(io_pwrite(fa, w, sizeof w, 4096) == 0);
	CK(io_close(fa) == 0);
	CK(io_open(b, IO_CREATE, &fb) == 0);
	CK(io_pwrite(fb, w, 10, 0) == 0);
	iosim_crash_at_sync(2);
	io_sync(fb);
	_exit(CHILD_FAIL);
}

Test(crash, closed_files_pending_writes_are_subject_to_the_crash)
{
	char a[PATH_MAX];
	unsigned char disk[8192], w[4096];
	int seen[2][3] = { { 0 } };

	tp(a, "a");
	for (uint64_t seed = 1; seed <= 60; seed++) {
		unlink(a);
		int rc = run_child(closed_workload, seed, tdir);
		cr_assert_eq(rc, IOSIM_CRASH_EXIT, "seed %llu: exit %d", (unsigned long long)seed, rc);
		cr_assert_eq(raw_size(a), sizeof disk);
		raw_read(a, disk, sizeof disk, 0);
		for (int j = 0; j < 2; j++) {
			size_t prefix;
			fill(w, sizeof w, 3 + (unsigned)j);
			int o = outcome(disk, (uint64_t)j * 4096, w, sizeof w, OLD, &prefix);
			cr_assert_neq(o, -1, "seed %llu write %d prefix %zu", (unsigned long long)seed, j,
			              prefix);
			seen[j][o]++;
		}
	}
	for (int j = 0; j < 2; j++) {
		cr_assert_gt(seen[j][OUT_WHOLE], 0, "write %d: retained after close", j);
		cr_assert_gt(seen[j][OUT_ABSENT], 0, "write %d: close did not flush", j);
		cr_assert_gt(seen[j][OUT_TORN], 0, "write %d: torn sometimes", j);
	}
}

/* Truncate is durable at once; the trimmed writes never reach the disk. */
static void trunc_workload(uint64_t seed, void *arg)
{
	const char *path = arg;
	unsigned char w[8192];
	io_file *f;

	iosim_install(seed);
	CK(io_open(path, IO_CREATE, &f) == 0);
	memset(w, OLD, sizeof w);
	CK(io_pwrite(f, w, sizeof w, 0) == 0);
	CK(io_sync(f) == 0);
	fill(w, sizeof w, 5);
	CK(io_pwrite(f, w, sizeof w, 0) == 0);
	CK(io_pwrite(f, w, 100, 9000) == 0);
	CK(io_truncate(f, 4096) == 0);
	iosim_crash_now();
}

Test(crash, truncate_trims_pending_writes)
{
	char p[PATH_MAX];
	unsigned char disk[4096], w[4096];
	int seen[3] = { 0, 0, 0 };

	tp(p, "a");
	fill(w, sizeof w, 5);
	for (uint64_t seed = 1; seed <= 60; seed++) {
		unlink(p);
		int rc = run_child(trunc_workload, seed, p);
		cr_assert_eq(rc, IOSIM_CRASH_EXIT, "seed %llu: exit %d", (unsigned long long)seed, rc);
		cr_assert_eq(raw_size(p), 4096, "seed %llu: a trimmed write reached the disk",
		             (unsigned long long)seed);
		raw_read(p, disk, sizeof disk, 0);
		size_t prefix;
		int o = outcome(disk, 0, w, sizeof w, OLD, &prefix);
		cr_assert_neq(o, -1, "seed %llu", (unsigned long long)seed);
		seen[o]++;
	}
	cr_assert_gt(seen[OUT_WHOLE], 0);
	cr_assert_gt(seen[OUT_ABSENT], 0);
}

/* A punch: zeros at once for readers, the size kept, a hole after the sync
 * (st_blocks drops); unsynced, a crash leaves each 4 KiB block of it
 * either as it was or zeros, and a write made after it wins over it. */
static void punch_workload(uint64_t seed, void *arg)
{
	const char *path = arg;
	unsigned char w[16384], r[16384];
	io_file *f;

	iosim_install(seed);
	CK(io_open(path, IO_CREATE, &f) == 0);
	memset(w, OLD, sizeof w);
	CK(io_pwrite(f, w, sizeof w, 0) == 0);
	CK(io_sync(f) == 0);
	CK(io_punch(f, 4096, 12288) == 0); /* blocks 1..3 */
	uint64_t size;
	CK(io_size(f, &size) == 0 && size == sizeof w);
	CK(io_pread(f, r, sizeof r, 0, NULL) == 0);
	CK(all_eq(r, 4096, OLD) && all_eq(r + 4096, 12288, 0));
	fill(w, 4096, 9);
	CK(io_pwrite(f, w, 4096, 8192) == 0); /* block 2 written again */
	CK(iosim_punches() == 1);
	iosim_crash_now();
}

static void punch_sync_workload(uint64_t seed, void *arg)
{
	const char *path = arg;
	unsigned char w[1 << 20];
	io_file *f;

	iosim_install(seed);
	CK(io_open(path, IO_CREATE, &f) == 0);
	fill(w, sizeof w, 3);
	CK(io_pwrite(f, w, sizeof w, 0) == 0);
	CK(io_sync(f) == 0);
	CK(io_punch(f, 0, sizeof w - 4096) == 0);
	CK(io_sync(f) == 0);
	iosim_crash_now();
}

Test(crash, punch_is_zeros_whole_none_or_whole_blocks)
{
	char p[PATH_MAX];
	unsigned char disk[16384], w[4096];
	int seen[3] = {0, 0, 0}; /* punch gone, whole, a prefix of blocks */

	tp(p, "a");
	fill(w, sizeof w, 9);
	for (uint64_t seed = 1; seed <= 60; seed++) {
		unlink(p);
		int rc = run_child(punch_workload, seed, p);
		cr_assert_eq(rc, IOSIM_CRASH_EXIT, "seed %llu: exit %d", (unsigned long long)seed, rc);
		cr_assert_eq(raw_size(p), sizeof disk, "seed %llu: a punch keeps the size", (unsigned long long)seed);
		raw_read(p, disk, sizeof disk, 0);
		cr_assert(all_eq(disk, 4096, OLD), "seed %llu: block 0 was never punched", (unsigned long long)seed);
		int z1 = all_eq(disk + 4096, 4096, 0), z3 = all_eq(disk + 12288, 4096, 0);
		cr_assert(z1 || all_eq(disk + 4096, 4096, OLD), "seed %llu: block 1 neither old nor zeros",
			  (unsigned long long)seed);
		cr_assert(z3 || all_eq(disk + 12288, 4096, OLD), "seed %llu: block 3 neither old nor zeros",
			  (unsigned long long)seed);
		cr_assert(z1 || !z3, "seed %llu: a crash cuts a punch to a prefix, never a later part alone",
			  (unsigned long long)seed);
		/* block 2: a prefix of the later write (whole, torn or none),
		 * over old bytes or zeros */
		size_t pre = 0;
		while (pre < 4096 && disk[8192 + pre] == w[pre])
			pre++;
		cr_assert(all_eq(disk + 8192 + pre, 4096 - pre, OLD) || all_eq(disk + 8192 + pre, 4096 - pre, 0),
			  "seed %llu: block 2 is none of its versions", (unsigned long long)seed);
		seen[z1 && z3 ? 1 : !z1 ? 0 : 2]++;
	}
	cr_assert_gt(seen[0], 0, "some punches are lost");
	cr_assert_gt(seen[1], 0, "some punches reach the disk whole");
	cr_assert_gt(seen[2], 0, "some are cut at a block");

	/* synced: a hole of the real file */
	unlink(p);
	cr_assert_eq(run_child(punch_sync_workload, 1, p), IOSIM_CRASH_EXIT);
	struct stat st;
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, 1u << 20);
	cr_assert_leq((uint64_t)st.st_blocks * 512, 64 * 1024, "after the sync the range is a hole: %llu bytes allocated",
		      (unsigned long long)st.st_blocks * 512);
	unsigned char *r = malloc(1 << 20), *w2 = malloc(1 << 20);
	raw_read(p, r, 1 << 20, 0);
	fill(w2, 1 << 20, 3);
	cr_assert(all_eq(r, (1 << 20) - 4096, 0) && memcmp(r + (1 << 20) - 4096, w2 + (1 << 20) - 4096, 4096) == 0);
	free(r);
	free(w2);
}

/* crash_at_sync counts syncs of every file; crash_now works unarmed. */
static void now_workload(uint64_t seed, void *arg)
{
	const char *path = arg;
	io_file *f;

	iosim_install(seed);
	CK(io_open(path, IO_CREATE, &f) == 0);
	CK(io_pwrite(f, "synced", 6, 0) == 0);
	CK(io_sync(f) == 0);
	CK(iosim_syncs() == 1);
	CK(io_pwrite(f, "XXXXXX", 6, 0) == 0);
	iosim_crash_now();
}

Test(crash, crash_now)
{
	char p[PATH_MAX], r[6];
	int changed = 0;

	tp(p, "a");
	for (uint64_t seed = 1; seed <= 20; seed++) {
		unlink(p);
		cr_assert_eq(run_child(now_workload, seed, p), IOSIM_CRASH_EXIT);
		raw_read(p, r, sizeof r, 0);
		size_t k = 0;
		while (k < 6 && r[k] == 'X')
			k++;
		cr_assert(memcmp(r + k, "synced" + k, 6 - k) == 0, "seed %llu: %.6s",
		          (unsigned long long)seed, r);
		changed += k > 0;
	}
	cr_assert_gt(changed, 0);
}

/* Disarmed (0) means no crash: the workload runs to its end. */
static void disarmed_workload(uint64_t seed, void *arg)
{
	const char *path = arg;
	io_file *f;

	iosim_install(seed);
	iosim_crash_at_sync(1);
	iosim_crash_at_sync(0);
	iosim_crash_at_point("x", 1);
	iosim_crash_at_point("x", 0);
	CK(io_open(path, IO_CREATE, &f) == 0);
	CK(io_pwrite(f, "abc", 3, 0) == 0);
	CK(io_sync(f) == 0);
	io_point("x");
	CK(io_close(f) == 0);
	iosim_uninstall();
}

Test(crash, disarmed)
{
	char p[PATH_MAX];

	cr_assert_eq(run_child(disarmed_workload, 1, tp(p, "a")), 0);
}

/* ================================================================== */
/* Fault injection                                                     */

TestSuite(fault, .init = setup, .fini = teardown, .timeout = 60);

static io_file *fault_open(const char *name, uint64_t seed)
{
	char p[PATH_MAX];
	io_file *f;

	iosim_install(seed);
	cr_assert_eq(io_open(tp(p, name), IO_CREATE, &f), 0);
	return f;
}

Test(fault, eio_exactly_at_call_k)
{
	unsigned char r[4];
	io_file *f = fault_open("a", 1);

	iosim_fault_at(3, IOSIM_FAULT_EIO, 0);
	cr_assert_eq(io_pwrite(f, "1111", 4, 0), 0);  /* call 1 */
	cr_assert_eq(io_pwrite(f, "2222", 4, 4), 0);  /* call 2 */
	cr_assert_eq(io_pwrite(f, "3333", 4, 8), EIO); /* call 3 */
	cr_assert_eq(iosim_faults(), 1);
	cr_assert_eq(io_pwrite(f, "4444", 4, 12), 0); /* call 4 */
	cr_assert_eq(iosim_calls(), 4);
	cr_assert_eq(io_pread(f, r, 4, 8, NULL), 0);
	cr_assert(all_eq(r, 4, 0), "the failed write changed nothing");
	cr_assert_eq(io_pread(f, r, 4, 12, NULL), 0);
	cr_assert_arr_eq(r, "4444", 4);
	cr_assert_eq(iosim_faults(), 1);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

Test(fault, eio_on_each_kind_of_call)
{
	unsigned char r[4];
	io_file *f = fault_open("a", 2);
	char p[PATH_MAX];

	tp(p, "a");
	/* sync */
	iosim_fault_at(2, IOSIM_FAULT_EIO, 0);
	cr_assert_eq(io_pwrite(f, "abcd", 4, 0), 0);
	cr_assert_eq(io_sync(f), EIO);
	cr_assert_eq(raw_size(p), 0, "a failed sync applied nothing");
	cr_assert_eq(io_pread(f, r, 4, 0, NULL), 0);
	cr_assert_arr_eq(r, "abcd", 4);
	/* pread */
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_EIO, 0);
	cr_assert_eq(io_pread(f, r, 4, 0, NULL), EIO);
	/* truncate */
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_EIO, 0);
	cr_assert_eq(io_truncate(f, 0), EIO);
	uint64_t size;
	cr_assert_eq(io_size(f, &size), 0);
	cr_assert_eq(size, 4, "a failed truncate changed nothing");
	cr_assert_eq(iosim_faults(), 3);
	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(raw_size(p), 4);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

Test(fault, enospc)
{
	unsigned char r[4];
	io_file *f = fault_open("a", 3);

	iosim_fault_at(1, IOSIM_FAULT_ENOSPC, 0);
	cr_assert_eq(io_pwrite(f, "abcd", 4, 0), ENOSPC);
	cr_assert_eq(io_pwrite(f, "abcd", 4, 0), 0);
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_ENOSPC, 0);
	cr_assert_eq(io_truncate(f, 1 << 20), ENOSPC);
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_ENOSPC, 0);
	cr_assert_eq(io_pread(f, r, 4, 0, NULL), EIO, "ENOSPC is EIO on a read");
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_ENOSPC, 0);
	cr_assert_eq(io_sync(f), EIO, "ENOSPC is EIO on a sync");
	cr_assert_eq(iosim_faults(), 4);
	/* preallocate reports the full disk */
	iosim_fault_at(iosim_calls() + 2, IOSIM_FAULT_ENOSPC, 0);
	cr_assert_eq(io_preallocate(f, 3u << 20), ENOSPC);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

Test(fault, short_writes_completed_by_the_loop)
{
	char p[PATH_MAX];
	unsigned char w[10000], r[10000];
	io_file *f = fault_open("a", 4);

	tp(p, "a");
	fill(w, sizeof w, 12);
	iosim_fault_at(1, IOSIM_FAULT_SHORT, 0);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);
	cr_assert_eq(iosim_calls(), 2, "one short write, one for the rest");
	cr_assert_eq(iosim_faults(), 1);
	cr_assert_eq(io_pread(f, r, sizeof r, 0, NULL), 0);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_sync(f), 0);
	raw_read(p, r, sizeof r, 0);
	cr_assert_arr_eq(r, w, sizeof w);

	/* sticky: every later write is short, and still completes */
	fill(w, sizeof w, 13);
	iosim_install(4);
	iosim_fault_at(1, IOSIM_FAULT_SHORT, 1);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);
	uint64_t calls = iosim_calls();
	cr_assert_geq(calls, 10, "halving 10000 bytes takes many calls: %llu",
	              (unsigned long long)calls);
	cr_assert_eq(iosim_faults(), calls - 1, "all but the last 1-byte write are short");
	cr_assert_eq(io_pwrite(f, w, 2, 20000), 0);
	cr_assert_eq(iosim_calls(), calls + 2);
	/* reads are another kind of call: not short */
	cr_assert_eq(io_pread(f, r, sizeof r, 0, NULL), 0);
	cr_assert_eq(iosim_calls(), calls + 3);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

Test(fault, short_reads_completed_by_the_loop)
{
	unsigned char w[10000], r[12000];
	io_file *f = fault_open("a", 5);
	size_t got;

	fill(w, sizeof w, 14);
	cr_assert_eq(io_pwrite(f, w, sizeof w, 0), 0);
	cr_assert_eq(io_sync(f), 0);
	iosim_fault_at(3, IOSIM_FAULT_SHORT, 1);
	memset(r, 0xaa, sizeof r);
	cr_assert_eq(io_pread(f, r, sizeof r, 0, &got), 0);
	cr_assert_eq(got, sizeof w);
	cr_assert_arr_eq(r, w, sizeof w);
	cr_assert(all_eq(r + sizeof w, sizeof r - sizeof w, 0));
	cr_assert_geq(iosim_faults(), 5);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}

Test(fault, sticky_faults_persist)
{
	unsigned char r[4];
	io_file *f = fault_open("a", 6);

	/* a full disk stays full */
	iosim_fault_at(2, IOSIM_FAULT_ENOSPC, 1);
	cr_assert_eq(io_pwrite(f, "abcd", 4, 0), 0);
	cr_assert_eq(io_pwrite(f, "efgh", 4, 4), ENOSPC);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(io_pwrite(f, "ijkl", 4, 8), ENOSPC);
	cr_assert_eq(iosim_faults(), 6);
	/* other kinds of calls still work */
	cr_assert_eq(io_pread(f, r, 4, 0, NULL), 0);
	cr_assert_arr_eq(r, "abcd", 4);
	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(iosim_faults(), 6);
	cr_assert_eq(io_pwrite(f, "ijkl", 4, 8), ENOSPC);

	/* sticky EIO on sync */
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_EIO, 1);
	cr_assert_eq(io_sync(f), EIO);
	cr_assert_eq(io_pwrite(f, "mnop", 4, 0), 0);
	cr_assert_eq(io_sync(f), EIO);
	cr_assert_eq(io_sync(f), EIO);

	/* non-sticky: only call K */
	iosim_fault_at(iosim_calls() + 1, IOSIM_FAULT_EIO, 0);
	cr_assert_eq(io_pread(f, r, 4, 0, NULL), EIO);
	cr_assert_eq(io_pread(f, r, 4, 0, NULL), 0);

	/* disarmed */
	iosim_fault_at(0, IOSIM_FAULT_EIO, 1);
	uint64_t faults = iosim_faults();
	cr_assert_eq(io_pwrite(f, "qrst", 4, 0), 0);
	cr_assert_eq(io_sync(f), 0);
	cr_assert_eq(iosim_faults(), faults);
	cr_assert_eq(io_close(f), 0);
	iosim_uninstall();
}
