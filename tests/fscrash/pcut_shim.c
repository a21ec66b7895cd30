/*
 * pcut_shim -- LD_PRELOAD into tpfsd: journals the daemon's writes to its
 * store so that the test can cut the power afterwards (pcut.h).
 *
 * Invariants:
 *   PC1 A write's record (with the bytes it replaces) reaches the journal
 *       before the write itself, under one mutex with it, so records are in
 *       the order the writes happened and an undo restores what was there.
 *   PC2 A sync's record names the journal position taken before the sync
 *       began: only what was journaled before is known to be covered.
 *   PC3 A call the emulation cannot model, on a store file, marks the
 *       journal unusable ('!').
 * Files outside the store (the journal, /dev/fuse, ...) pass untouched.
 */
#undef _FILE_OFFSET_BITS /* pwrite and pwrite64 (ftruncate, ftruncate64) are both defined here */
#include "pcut.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int jfd = -1;       /* under mu */
static uint64_t seq;       /* under mu */
static char dir[PATH_MAX]; /* the store, resolved; "" when not set */
static size_t dirlen;

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwritev64v2)(int, const struct iovec *, int, off_t, int);
static int (*real_fallocate)(int, int, off_t, off_t);

__attribute__((constructor)) static void init(void)
{
	const char *d = getenv(PCUT_ENV_DIR);
	SHIM_RESOLVE(pwrite);
	SHIM_RESOLVE(pwrite64);
	SHIM_RESOLVE(ftruncate);
	SHIM_RESOLVE(ftruncate64);
	SHIM_RESOLVE(fdatasync);
	SHIM_RESOLVE(fsync);
	SHIM_RESOLVE(write);
	SHIM_RESOLVE(writev);
	SHIM_RESOLVE(pwritev);
	SHIM_RESOLVE(pwritev2);
	SHIM_RESOLVE(pwritev64v2);
	SHIM_RESOLVE(fallocate);
	if (d && realpath(d, dir)) {
		dirlen = strlen(dir);
	} else
		dir[0] = 0;
}

/* Is fd a regular file under the store?  Fills st. */
static int tracked(int fd, struct stat *st)
{
	char link[64], path[PATH_MAX];
	ssize_t n;
	if (!dirlen || fstat(fd, st) < 0 || !S_ISREG(st->st_mode))
		return 0;
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((n = readlink(link, path, sizeof path - 1)) < 0)
		return 0;
	path[n] = 0;
	return !strncmp(path, dir, dirlen) && path[dirlen] == '/';
}

/* Under mu. */
static int jopen(void)
{
	const char *j;
	if (jfd >= 0)
		return 0;
	if (!(j = getenv(PCUT_ENV_JOURNAL)))
		return -1;
	jfd = open(j, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	return jfd < 0 ? -1 : 0;
}

/* Under mu: one record, in one writev. */
static void jput(pcut_rec *r, const void *a, size_t alen, const void *b, size_t blen)
{
	struct iovec v[3] = {{r, sizeof *r}, {(void *)a, alen}, {(void *)b, blen}};
	size_t want = sizeof *r + alen + blen;
	if (jopen() != 0)
		return;
	r->magic = PCUT_MAGIC;
	r->seq = seq++;
	if (real_writev(jfd, v, 3) != (ssize_t)want)
		abort(); /* a journal we cannot trust: better no daemon */
}

static void unusable(const struct stat *st, const char *call)
{
	pcut_rec r;
	memset(&r, 0, sizeof r);
	r.kind = '!';
	r.dev = st->st_dev;
	r.ino = st->st_ino;
	pthread_mutex_lock(&mu);
	jput(&r, call, strlen(call) + 1, NULL, 0);
	pthread_mutex_unlock(&mu);
}

static ssize_t do_pwrite(ssize_t (*fn)(int, const void *, size_t, off_t), int fd, const void *buf, size_t len, off_t off)
{
	struct stat st;
	pcut_rec r;
	uint8_t *old = NULL;
	ssize_t n;
	if (!fn)
		fn = real_pwrite;
	if (off < 0 || !tracked(fd, &st))
		return fn(fd, buf, len, off);
	memset(&r, 0, sizeof r);
	r.kind = 'W';
	r.dev = st.st_dev;
	r.ino = st.st_ino;
	r.off = (uint64_t)off;
	r.len = len;
	pthread_mutex_lock(&mu);
	if (fstat(fd, &st) == 0) { /* the size under mu: no other write moves it now */
		r.old_size = (uint64_t)st.st_size;
		if ((uint64_t)off < r.old_size) {
			r.old_len = r.old_size - (uint64_t)off < len ? r.old_size - (uint64_t)off : len;
			old = malloc(r.old_len ? r.old_len : 1);
			/* an O_DIRECT descriptor reads only aligned buffers: through another */
			int rfd = fd, fl = fcntl(fd, F_GETFL);
			if (fl >= 0 && (fl & O_DIRECT)) {
				char link[64];
				snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
				rfd = open(link, O_RDONLY | O_CLOEXEC);
			}
			ssize_t got = old && rfd >= 0 ? pread(rfd, old, r.old_len, off) : -1;
			if (rfd != fd && rfd >= 0)
				close(rfd);
			if (got != (ssize_t)r.old_len) { /* cannot say what to restore */
				r.kind = '!';
				r.len = r.old_len = 0;
			}
		}
		jput(&r, buf, r.len, old, r.old_len);
	}
	n = fn(fd, buf, len, off);
	pthread_mutex_unlock(&mu);
	free(old);
	return n;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off) { return do_pwrite(real_pwrite, fd, buf, len, off); }
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) { return do_pwrite(real_pwrite64, fd, buf, len, off); }

static int do_ftruncate(int (*fn)(int, off_t), int fd, off_t size)
{
	struct stat st;
	pcut_rec r;
	uint8_t *old = NULL;
	int rc;
	if (!fn)
		fn = real_ftruncate;
	if (size < 0 || !tracked(fd, &st))
		return fn(fd, size);
	memset(&r, 0, sizeof r);
	r.kind = 'T';
	r.dev = st.st_dev;
	r.ino = st.st_ino;
	r.off = (uint64_t)size;
	pthread_mutex_lock(&mu);
	if (fstat(fd, &st) == 0) {
		r.old_size = (uint64_t)st.st_size;
		if (r.old_size > (uint64_t)size) {
			r.old_len = r.old_size - (uint64_t)size;
			old = malloc(r.old_len);
			if (!old || pread(fd, old, r.old_len, size) != (ssize_t)r.old_len) {
				r.kind = '!';
				r.old_len = 0;
			}
		}
		jput(&r, old, r.old_len, NULL, 0);
	}
	rc = fn(fd, size);
	pthread_mutex_unlock(&mu);
	free(old);
	return rc;
}

int ftruncate(int fd, off_t size) { return do_ftruncate(real_ftruncate, fd, size); }
int ftruncate64(int fd, off_t size) { return do_ftruncate(real_ftruncate64, fd, size); }

/* Under mu: the N of PCUT_ENV_ARM while its file exists (0: disarmed),
 * and the syncs counted since it appeared. */
static uint64_t arm_at, syncs;
static void read_arm(void)
{
	const char *p = getenv(PCUT_ENV_ARM);
	char buf[32];
	ssize_t n;
	int fd;
	if (!p || (fd = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
		arm_at = syncs = 0;
		return;
	}
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n > 0 && !arm_at) {
		buf[n] = 0;
		arm_at = strtoull(buf, NULL, 10);
		syncs = 0;
	}
}

static int do_sync(int (*fn)(int), int fd)
{
	struct stat st;
	uint64_t upto;
	pcut_rec r;
	int rc;
	if (!tracked(fd, &st))
		return fn(fd);
	pthread_mutex_lock(&mu); /* PC2 */
	read_arm();
	if (arm_at && ++syncs == arm_at) { /* the power fails before this sync */
		memset(&r, 0, sizeof r);
		r.kind = 'C';
		r.dev = st.st_dev;
		r.ino = st.st_ino;
		jput(&r, NULL, 0, NULL, 0);
		raise(SIGKILL);
	}
	upto = seq;
	pthread_mutex_unlock(&mu);
	if ((rc = fn(fd)) != 0)
		return rc;
	memset(&r, 0, sizeof r);
	r.kind = 'S';
	r.dev = st.st_dev;
	r.ino = st.st_ino;
	r.off = upto;
	pthread_mutex_lock(&mu);
	jput(&r, NULL, 0, NULL, 0);
	pthread_mutex_unlock(&mu);
	return 0;
}

int fdatasync(int fd) { return do_sync(real_fdatasync, fd); }
int fsync(int fd) { return do_sync(real_fsync, fd); }

/* PC3: ways of writing a store file the emulation does not model. */
ssize_t write(int fd, const void *buf, size_t len)
{
	struct stat st;
	if (tracked(fd, &st))
		unusable(&st, "write");
	return real_write(fd, buf, len);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct stat st;
	if (tracked(fd, &st))
		unusable(&st, "writev");
	return real_writev(fd, iov, n);
}

/* pwritev (the page file's runs of ordered pages: core/io io_pwritev) is
 * journaled as the one pwrite of the same bytes it is. */
static ssize_t do_pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	struct stat st;
	size_t len = 0, at = 0;
	if (n < 0 || !tracked(fd, &st))
		return real_pwritev(fd, iov, n, off);
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	uint8_t *b = malloc(len ? len : 1);
	if (!b) {
		unusable(&st, "pwritev (out of memory)");
		return real_pwritev(fd, iov, n, off);
	}
	for (int i = 0; i < n; i++) {
		memcpy(b + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	ssize_t r = do_pwrite(real_pwrite64, fd, b, len, off);
	free(b);
	return r;
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off) { return do_pwritev(fd, iov, n, off); }

/* pwritev2 with RWF_DSYNC (the log's durable writes: core/io
 * io_pwrite_durable, on an O_DIRECT descriptor) is journaled as the write
 * and the sync it is, so the power can fail between the two (PC2); other
 * flags are not modeled (PC3). */
static ssize_t do_pwritev2(ssize_t (*fn)(int, const struct iovec *, int, off_t, int), int fd, const struct iovec *iov,
			   int n, off_t off, int flags)
{
	struct stat st;
	size_t len = 0, at = 0;
	if (!fn)
		fn = real_pwritev2;
	if (n < 0 || !tracked(fd, &st))
		return fn(fd, iov, n, off, flags);
	if ((flags & ~RWF_DSYNC) || off < 0) {
		unusable(&st, "pwritev2");
		return fn(fd, iov, n, off, flags);
	}
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	void *b = NULL; /* aligned: the descriptor may be O_DIRECT */
	if (posix_memalign(&b, 4096, len ? len : 1) != 0) {
		unusable(&st, "pwritev2 (out of memory)");
		return fn(fd, iov, n, off, flags);
	}
	for (int i = 0; i < n; i++) {
		memcpy((uint8_t *)b + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	ssize_t r = do_pwrite(real_pwrite64, fd, b, len, off);
	free(b);
	if (r >= 0 && (flags & RWF_DSYNC) && do_sync(real_fdatasync, fd) != 0)
		return -1;
	return r;
}

ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return do_pwritev2(real_pwritev2, fd, iov, n, off, flags);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return do_pwritev2(real_pwritev64v2, fd, iov, n, off, flags);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off) { return do_pwritev(fd, iov, n, off); }

int fallocate(int fd, int mode, off_t off, off_t len)
{
	struct stat st;
	if (tracked(fd, &st))
		unusable(&st, "fallocate");
	return real_fallocate(fd, mode, off, len);
}
