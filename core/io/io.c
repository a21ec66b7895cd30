/*
 * io -- the seam between the engine and the store's files, and its POSIX
 * backend.
 *
 * Design
 *
 * Every engine module reaches store files through io_*.  An io_file holds
 * the handle of the backend that opened it and a copy of the path (for
 * io_path and error messages).  The io_* functions do the work every backend
 * would otherwise repeat: io_pwrite and io_pread loop over partial transfers,
 * io_pread zero-fills past the end of the file, io_preallocate writes real
 * zero blocks.  A backend call is one attempt (one pread(2), one pwrite(2)).
 *
 * The POSIX backend is the product's.  The testing library installs another
 * one (io_sim.c: crash simulator and fault injector) with io_set_backend;
 * the code paths above the backend stay the same.
 *
 * Invariants (each rule is its first sentence; the lines under it say why)
 *
 * I1  A file is always served by the backend that opened it.
 *     io_file keeps its own backend pointer, so io_set_backend never sends
 *     a handle to a backend that does not know it.
 * I2  io_pwrite (io_pwritev) returns 0 only when all len bytes were
 *     accepted by the backend.
 *     A backend that makes no progress and reports no error yields EIO,
 *     never an endless loop.
 * I3  io_pread (io_preadv) fills all len bytes of buf (of the buffers, in
 *     order): bytes from the file first (*got of them), zeros after.
 *     Callers never see a short read; a zero-byte transfer means end of
 *     file.
 * I4  io_preallocate writes zero blocks through the backend's pwrite, never
 *     fallocate or a sparse ftruncate.
 *     The simulator then sees them, and later writes inside the range
 *     never change the file's size.
 * I5  Every function returns 0 or a positive errno, saved right after the
 *     system call that set it.
 *     Failures also set util_err's message naming the operation and the
 *     path, so the error reaches the user with its cause.
 * I6  Only this file calls pread(v)/pwrite(v)/fdatasync/ftruncate/fallocate/
 *     rename/unlink/chmod on store files.
 *     One place to simulate crashes and inject faults (the simulator
 *     reaches them through the POSIX backend or on its own fds).
 * I7  io_pwrite_durable either writes nothing and answers ENOTSUP, or is a
 *     write followed by a sync of the same bytes.
 *     On ENOTSUP the caller uses io_pwrite and io_sync: the crash
 *     simulator, which has no such call, sees exactly those.  The POSIX
 *     backend's is pwritev2(RWF_DSYNC) on an O_DIRECT descriptor of the
 *     file, opened once through /proc and given up for good when the file
 *     system or the device refuses it.
 * I8  What io creates is private to its owner whatever the umask: a file
 *     is made with mode 0600 and a directory 0700 exactly.
 *     An fchmod/chmod right after creation puts back what the umask took;
 *     no moment finds either looser than that.  io_open never changes the
 *     mode of a file it did not create.  A store's files hold every user's
 *     data in clear (the page file and the log): group and others must not
 *     read them.
 */
#include "io.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#define IO_PREALLOC_CHUNK ((size_t)1 << 20) /* zero buffer of io_preallocate */

struct io_file {
	const io_backend *io_be; /* backend that opened the file; fixed (I1) */
	void *io_h;              /* the backend's handle */
	char *io_path;           /* copy of the path given to io_open */
};

/* ------------------------------------------------------------------ */
/* Error messages                                                      */

static int io_fail(int rc, const char *what, const char *path)
{
	char buf[128];
	const char *msg = strerror_r(rc, buf, sizeof buf); /* GNU variant */
	return util_err(rc, "io: %s %s: %s", what, path ? path : "(null)", msg);
}

static int io_fail_at(int rc, const char *what, const char *path, uint64_t off, size_t len)
{
	char buf[128];
	const char *msg = strerror_r(rc, buf, sizeof buf);
	return util_err(rc, "io: %s %s at offset %llu length %zu: %s", what, path,
	                (unsigned long long)off, len, msg);
}

/* ------------------------------------------------------------------ */
/* The POSIX backend                                                   */

typedef struct posix_file {
	int pf_fd;  /* open file; closed by posix_close */
	int pf_dfd; /* O_DIRECT descriptor of it for posix_pwrite_durable:
		       -1 not opened yet, -2 refused (atomic: set once) */
} posix_file;

int io_posix_open_fd(const char *path, int flags, int *out)
{
	int oflags = O_CLOEXEC | ((flags & IO_RDONLY) ? O_RDONLY : O_RDWR);
	int create = (flags & IO_CREATE) != 0, fd, rc;

	for (;;) {
		/* Creating: O_EXCL first, so that only a file made here is
		 * chmod'ed (I8); if it exists (and IO_EXCL was not asked), open
		 * it as it is, and create again if it went away meanwhile. */
		int excl = create ? O_CREAT | O_EXCL : 0;
		do {
			fd = open(path, oflags | excl, IO_FILE_MODE);
			rc = fd < 0 ? errno : 0;
		} while (rc == EINTR);
		if (rc == EEXIST && create && !(flags & IO_EXCL)) {
			create = 0;
			continue;
		}
		if (rc == ENOENT && !create && (flags & IO_CREATE)) {
			create = 1;
			continue;
		}
		break;
	}
	if (rc != 0)
		return rc;
	if (create && fchmod(fd, IO_FILE_MODE) < 0) { /* I8: the umask took bits */
		rc = errno;
		(void)close(fd);
		(void)unlink(path);
		return rc;
	}
	*out = fd;
	return 0;
}

static int posix_open(const char *path, int flags, void **h)
{
	posix_file *pf = NULL;
	int fd, rc;

	if ((pf = malloc(sizeof *pf)) == NULL)
		return ENOMEM;
	if ((rc = io_posix_open_fd(path, flags, &fd)) != 0)
		goto err;
	pf->pf_fd = fd;
	pf->pf_dfd = -1;
	*h = pf;
	return 0;
err:
	free(pf);
	return rc;
}

static int posix_close(void *h)
{
	posix_file *pf = h;
	int rc = close(pf->pf_fd) < 0 ? errno : 0;
	if (pf->pf_dfd >= 0)
		(void)close(pf->pf_dfd);
	free(pf);
	/* EINTR from close: the fd is released anyway on Linux; not an error. */
	return rc == EINTR ? 0 : rc;
}

/* One attempt's outcome: 0 and *done, or errno (EINTR: attempt again). */
static int posix_done(ssize_t n, size_t *done)
{
	*done = n < 0 ? 0 : (size_t)n;
	return n < 0 ? errno : 0;
}

static int posix_pread(void *h, void *buf, size_t len, uint64_t off, size_t *done)
{
	posix_file *pf = h;
	int rc;
	if (off > (uint64_t)INT64_MAX)
		return EINVAL;
	do
		rc = posix_done(pread(pf->pf_fd, buf, len, (off_t)off), done);
	while (rc == EINTR);
	return rc;
}

static int posix_preadv(void *h, const struct iovec *iov, int cnt, uint64_t off, size_t *done)
{
	posix_file *pf = h;
	int rc;
	if (off > (uint64_t)INT64_MAX)
		return EINVAL;
	do
		rc = posix_done(preadv(pf->pf_fd, iov, cnt, (off_t)off), done);
	while (rc == EINTR);
	return rc;
}

static int posix_pwrite(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	posix_file *pf = h;
	int rc;
	if (off > (uint64_t)INT64_MAX)
		return EFBIG;
	do
		rc = posix_done(pwrite(pf->pf_fd, buf, len, (off_t)off), done);
	while (rc == EINTR);
	return rc;
}

static int posix_pwritev(void *h, const struct iovec *iov, int cnt, uint64_t off, size_t *done)
{
	posix_file *pf = h;
	int rc;
	if (off > (uint64_t)INT64_MAX)
		return EFBIG;
	do
		rc = posix_done(pwritev(pf->pf_fd, iov, cnt, (off_t)off), done);
	while (rc == EINTR);
	return rc;
}

static int posix_sync(void *h)
{
	posix_file *pf = h;
	/* Never retried after a failure: the caller decides (STYLE: panic). */
	return fdatasync(pf->pf_fd) < 0 ? errno : 0;
}

/* The file's O_DIRECT descriptor, opened on first use through
 * /proc/self/fd (the same file, whatever its path now); -1 if refused. */
static int posix_direct_fd(posix_file *pf)
{
	int dfd = __atomic_load_n(&pf->pf_dfd, __ATOMIC_ACQUIRE);
	if (dfd != -1)
		return dfd < 0 ? -1 : dfd;
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", pf->pf_fd);
	int fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	int want = fd >= 0 ? fd : -2, expect = -1;
	if (!__atomic_compare_exchange_n(&pf->pf_dfd, &expect, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (fd >= 0)
			(void)close(fd); /* another thread's won */
		return expect < 0 ? -1 : expect;
	}
	return fd;
}

static int posix_pwrite_durable(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	posix_file *pf = h;
	int fd = posix_direct_fd(pf), rc;
	*done = 0;
	if (fd < 0)
		return ENOTSUP;
	if (off > (uint64_t)INT64_MAX)
		return EFBIG;
	struct iovec v = {(void *)buf, len};
	do
		rc = posix_done(pwritev2(fd, &v, 1, (off_t)off, RWF_DSYNC), done);
	while (rc == EINTR);
	if (rc == EINVAL && *done == 0) { /* the device's direct-I/O alignment is coarser */
		__atomic_store_n(&pf->pf_dfd, -2, __ATOMIC_RELEASE);
		(void)close(fd);
		return ENOTSUP;
	}
	return rc;
}

static int posix_size(void *h, uint64_t *out)
{
	posix_file *pf = h;
	struct stat st;

	if (fstat(pf->pf_fd, &st) < 0)
		return errno;
	*out = (uint64_t)st.st_size;
	return 0;
}

static int posix_truncate(void *h, uint64_t size)
{
	posix_file *pf = h;
	int rc;

	if (size > (uint64_t)INT64_MAX)
		return EFBIG;
	do
		rc = ftruncate(pf->pf_fd, (off_t)size) < 0 ? errno : 0;
	while (rc == EINTR);
	return rc;
}

static int posix_reserve(void *h, uint64_t size)
{
	posix_file *pf = h;
	if (size > (uint64_t)INT64_MAX)
		return EFBIG;
	return posix_fallocate(pf->pf_fd, 0, (off_t)size); /* an errno, never -1 */
}

static int posix_reserve_range(void *h, uint64_t off, uint64_t len)
{
	posix_file *pf = h;
	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return EFBIG;
	return posix_fallocate(pf->pf_fd, (off_t)off, (off_t)len); /* an errno, never -1 */
}

static int posix_punch(void *h, uint64_t off, uint64_t len)
{
	posix_file *pf = h;
	int rc;
	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return EFBIG;
	do
		rc = fallocate(pf->pf_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0 ? errno
														  : 0;
	while (rc == EINTR);
	return rc == EOPNOTSUPP ? ENOTSUP : rc;
}

static int posix_fs_free(void *h, uint64_t *bytes)
{
	posix_file *pf = h;
	struct statvfs sv;
	if (fstatvfs(pf->pf_fd, &sv) < 0)
		return errno;
	*bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

static void posix_writeback(void *h, uint64_t off, uint64_t len)
{
	posix_file *pf = h;
	(void)sync_file_range(pf->pf_fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
}

static void posix_willneed(void *h, uint64_t off, uint64_t len)
{
	posix_file *pf = h;
	(void)posix_fadvise(pf->pf_fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

static int posix_mkdir(const char *path)
{
	if (mkdir(path, IO_DIR_MODE) < 0)
		return errno;
	if (chmod(path, IO_DIR_MODE) < 0) { /* I8: the umask took bits */
		int rc = errno;
		(void)rmdir(path);
		return rc;
	}
	return 0;
}

static int posix_rename(const char *from, const char *to)
{
	return rename(from, to) < 0 ? errno : 0;
}

static int posix_unlink(const char *path)
{
	return unlink(path) < 0 ? errno : 0;
}

static int posix_sync_dir(const char *path)
{
	int fd, rc;

	do {
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = fd < 0 ? errno : 0;
	} while (rc == EINTR);
	if (rc != 0)
		return rc;
	rc = fsync(fd) < 0 ? errno : 0;
	close(fd);
	return rc;
}

static const io_backend io_posix = {
	.open = posix_open,
	.close = posix_close,
	.pread = posix_pread,
	.preadv = posix_preadv,
	.pwrite = posix_pwrite,
	.pwritev = posix_pwritev,
	.sync = posix_sync,
	.pwrite_durable = posix_pwrite_durable,
	.size = posix_size,
	.truncate = posix_truncate,
	.reserve = posix_reserve,
	.reserve_range = posix_reserve_range,
	.punch = posix_punch,
	.fs_free = posix_fs_free,
	.writeback = posix_writeback,
	.willneed = posix_willneed,
	.mkdir = posix_mkdir,
	.rename = posix_rename,
	.unlink = posix_unlink,
	.sync_dir = posix_sync_dir,
	.point = NULL, /* a named crash point is a no-op in the product */
};

/* The installed backend; plain pointer: io_set_backend is called only by
 * tests, before any file is opened (see io.h). */
static const io_backend *io_cur = &io_posix;

const io_backend *io_posix_backend(void) { return &io_posix; }

void io_set_backend(const io_backend *b) { io_cur = b ? b : &io_posix; }

/* ------------------------------------------------------------------ */
/* Files                                                               */

int io_open(const char *path, int flags, io_file **out)
{
	io_file *f = NULL;
	int rc;

	if (path == NULL || out == NULL || (flags & ~(IO_RDONLY | IO_CREATE | IO_EXCL | IO_SCRATCH)) != 0 ||
	    ((flags & IO_SCRATCH) && (flags & IO_CREATE)))
		return io_fail(EINVAL, "open", path);
	if ((f = calloc(1, sizeof *f)) == NULL || (f->io_path = strdup(path)) == NULL) {
		rc = ENOMEM;
		goto err;
	}
	f->io_be = io_cur; /* I1 */
	if ((rc = f->io_be->open(path, (flags & IO_SCRATCH) ? IO_RDONLY : flags, &f->io_h)) != 0)
		goto err;
	if ((flags & IO_SCRATCH) && (rc = io_scratch_wrap(io_cur, f->io_h, &f->io_be, &f->io_h)) != 0) {
		io_cur->close(f->io_h);
		goto err;
	}
	*out = f;
	return 0;
err:
	if (f != NULL)
		free(f->io_path);
	free(f);
	return io_fail(rc, "open", path);
}

int io_close(io_file *f)
{
	int rc;

	if (f == NULL)
		return 0;
	rc = f->io_be->close(f->io_h);
	if (rc != 0)
		io_fail(rc, "close", f->io_path);
	free(f->io_path);
	free(f);
	return rc;
}

const char *io_path(const io_file *f) { return f->io_path; }

/* ------------------------------------------------------------------ */
/* Data                                                                */

int io_pread(io_file *f, void *buf, size_t len, uint64_t off, size_t *got)
{
	unsigned char *p = buf;
	size_t done = 0, n;
	int rc;

	while (done < len) {
		n = 0;
		if ((rc = f->io_be->pread(f->io_h, p + done, len - done, off + done, &n)) != 0)
			goto err;
		if (n == 0)
			break; /* end of file (I3) */
		if (n > len - done) {
			rc = EIO; /* a backend that claims more than asked */
			goto err;
		}
		done += n;
	}
	memset(p + done, 0, len - done); /* I3 */
	if (got != NULL)
		*got = done;
	return 0;
err:
	if (got != NULL)
		*got = 0;
	return io_fail_at(rc, "pread", f->io_path, off, len);
}

/* The part of iov from byte skip on, into v (at most IOV_RUN entries). */
#define IOV_RUN 256
static int iov_from(const struct iovec *iov, int cnt, size_t skip, struct iovec *v)
{
	int k = 0;
	for (int i = 0; i < cnt && k < IOV_RUN; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		v[k].iov_base = (unsigned char *)iov[i].iov_base + skip;
		v[k].iov_len = iov[i].iov_len - skip;
		skip = 0;
		k++;
	}
	return k;
}

int io_preadv(io_file *f, const struct iovec *iov, int cnt, uint64_t off, size_t *got)
{
	size_t len = 0, done = 0, n;
	int rc = 0;
	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	if (!f->io_be->preadv) { /* one pread into a bounce buffer, then scattered */
		unsigned char *b = malloc(len ? len : 1);
		if (!b)
			return io_fail_at(ENOMEM, "pread", f->io_path, off, len);
		if ((rc = io_pread(f, b, len, off, got)) == 0)
			for (int i = 0; i < cnt; i++) {
				memcpy(iov[i].iov_base, b + done, iov[i].iov_len);
				done += iov[i].iov_len;
			}
		free(b);
		return rc;
	}
	while (done < len) {
		struct iovec v[IOV_RUN];
		int k = iov_from(iov, cnt, done, v);
		n = 0;
		if ((rc = f->io_be->preadv(f->io_h, v, k, off + done, &n)) != 0)
			goto err;
		if (n == 0)
			break; /* end of file (I3) */
		if (n > len - done) {
			rc = EIO;
			goto err;
		}
		done += n;
	}
	for (size_t skip = done; skip < len;) { /* I3: zeros past the end */
		struct iovec v[IOV_RUN];
		int k = iov_from(iov, cnt, skip, v);
		for (int i = 0; i < k; i++) {
			memset(v[i].iov_base, 0, v[i].iov_len);
			skip += v[i].iov_len;
		}
	}
	if (got != NULL)
		*got = done;
	return 0;
err:
	if (got != NULL)
		*got = 0;
	return io_fail_at(rc, "pread", f->io_path, off, len);
}

int io_pwrite(io_file *f, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;
	size_t done = 0, n;
	int rc;

	while (done < len) {
		n = 0;
		if ((rc = f->io_be->pwrite(f->io_h, p + done, len - done, off + done, &n)) != 0)
			goto err;
		if (n == 0 || n > len - done) {
			rc = EIO; /* I2: no progress and no error */
			goto err;
		}
		done += n;
	}
	return 0;
err:
	return io_fail_at(rc, "pwrite", f->io_path, off, len);
}

int io_pwritev(io_file *f, const struct iovec *iov, int cnt, uint64_t off)
{
	size_t len = 0, done = 0, n;
	int rc;
	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	if (!f->io_be->pwritev) { /* gathered into a bounce buffer: one pwrite */
		unsigned char *b = malloc(len ? len : 1);
		if (!b)
			return io_fail_at(ENOMEM, "pwrite", f->io_path, off, len);
		for (int i = 0; i < cnt; i++) {
			memcpy(b + done, iov[i].iov_base, iov[i].iov_len);
			done += iov[i].iov_len;
		}
		rc = io_pwrite(f, b, len, off);
		free(b);
		return rc;
	}
	while (done < len) {
		struct iovec v[IOV_RUN];
		int k = iov_from(iov, cnt, done, v);
		n = 0;
		if ((rc = f->io_be->pwritev(f->io_h, v, k, off + done, &n)) != 0)
			goto err;
		if (n == 0 || n > len - done) {
			rc = EIO; /* I2: no progress and no error */
			goto err;
		}
		done += n;
	}
	return 0;
err:
	return io_fail_at(rc, "pwrite", f->io_path, off, len);
}

int io_sync(io_file *f)
{
	int rc;

	if ((rc = f->io_be->sync(f->io_h)) != 0)
		return io_fail(rc, "fdatasync", f->io_path);
	return 0;
}

int io_has_durable_write(const io_file *f) { return f->io_be->pwrite_durable != NULL; }

int io_pwrite_durable(io_file *f, const void *buf, size_t len, uint64_t off)
{
	size_t n = 0;
	int rc;
	if (!f->io_be->pwrite_durable || !len || (uintptr_t)buf % IO_DIRECT_MEM || len % IO_DIRECT_ALIGN ||
	    off % IO_DIRECT_ALIGN)
		return ENOTSUP;
	if ((rc = f->io_be->pwrite_durable(f->io_h, buf, len, off, &n)) == ENOTSUP)
		return ENOTSUP;
	if (rc == 0 && n < len) { /* a short direct write: the rest the usual way */
		if ((rc = io_pwrite(f, (const unsigned char *)buf + n, len - n, off + n)) != 0)
			return rc;
		return io_sync(f);
	}
	return rc ? io_fail_at(rc, "pwritev2 (O_DIRECT, RWF_DSYNC)", f->io_path, off, len) : 0;
}

int io_size(io_file *f, uint64_t *out)
{
	int rc;

	if ((rc = f->io_be->size(f->io_h, out)) != 0)
		return io_fail(rc, "fstat", f->io_path);
	return 0;
}

int io_truncate(io_file *f, uint64_t size)
{
	int rc;

	if ((rc = f->io_be->truncate(f->io_h, size)) != 0)
		return io_fail_at(rc, "ftruncate", f->io_path, size, 0);
	return 0;
}

int io_reserve_range(io_file *f, uint64_t off, uint64_t len)
{
	uint64_t size;
	int rc;

	if (len == 0)
		return 0;
	if (f->io_be->reserve_range)
		rc = f->io_be->reserve_range(f->io_h, off, len);
	else if ((rc = f->io_be->size(f->io_h, &size)) == 0 && size < off + len)
		rc = f->io_be->truncate(f->io_h, off + len);
	if (rc != 0)
		return io_fail_at(rc, "fallocate", f->io_path, off, (size_t)len);
	return 0;
}

int io_punch(io_file *f, uint64_t off, uint64_t len)
{
	int rc;

	if (len == 0)
		return 0;
	if (!f->io_be->punch)
		return ENOTSUP;
	if ((rc = f->io_be->punch(f->io_h, off, len)) == ENOTSUP)
		return ENOTSUP;
	return rc ? io_fail_at(rc, "fallocate (punch hole)", f->io_path, off, (size_t)len) : 0;
}

int io_fs_free(io_file *f, uint64_t *bytes)
{
	return f->io_be->fs_free ? f->io_be->fs_free(f->io_h, bytes) : ENOTSUP;
}

void io_writeback(io_file *f, uint64_t off, uint64_t len)
{
	if (f->io_be->writeback)
		f->io_be->writeback(f->io_h, off, len);
}

void io_willneed(io_file *f, uint64_t off, uint64_t len)
{
	if (f->io_be->willneed)
		f->io_be->willneed(f->io_h, off, len);
}

int io_reserve(io_file *f, uint64_t size)
{
	uint64_t cur;
	int rc;
	if ((rc = io_size(f, &cur)) != 0 || cur >= size)
		return rc;
	rc = f->io_be->reserve ? f->io_be->reserve(f->io_h, size) : f->io_be->truncate(f->io_h, size);
	if (rc != 0)
		return io_fail_at(rc, "fallocate", f->io_path, size, 0);
	return 0;
}

int io_preallocate(io_file *f, uint64_t size)
{
	unsigned char *zero = NULL;
	uint64_t cur;
	size_t chunk;
	int rc;

	if ((rc = io_size(f, &cur)) != 0)
		return rc;
	if (cur >= size)
		return 0;
	chunk = size - cur < IO_PREALLOC_CHUNK ? (size_t)(size - cur) : IO_PREALLOC_CHUNK;
	if ((zero = calloc(1, chunk)) == NULL) {
		rc = io_fail(ENOMEM, "preallocate", f->io_path);
		goto err;
	}
	while (cur < size) { /* I4 */
		size_t n = size - cur < chunk ? (size_t)(size - cur) : chunk;
		if ((rc = io_pwrite(f, zero, n, cur)) != 0)
			goto err;
		cur += n;
	}
	free(zero);
	return 0;
err:
	free(zero);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Names                                                               */

int io_mkdir(const char *path)
{
	int rc = io_cur->mkdir(path);
	return rc != 0 ? io_fail(rc, "mkdir", path) : 0;
}

int io_rename(const char *from, const char *to)
{
	char buf[128];
	int rc = io_cur->rename(from, to);

	if (rc != 0)
		return util_err(rc, "io: rename %s to %s: %s", from, to,
		                strerror_r(rc, buf, sizeof buf));
	return 0;
}

int io_unlink(const char *path)
{
	int rc = io_cur->unlink(path);
	return rc != 0 ? io_fail(rc, "unlink", path) : 0;
}

int io_sync_dir(const char *path)
{
	int rc = io_cur->sync_dir(path);
	return rc != 0 ? io_fail(rc, "fsync directory", path) : 0;
}

int io_exists(const char *path, int *is_dir)
{
	struct stat st;
	int rc;

	/* Not a change to the store: stat directly, whatever the backend. */
	if (stat(path, &st) < 0) {
		rc = errno;
		return rc == ENOENT ? rc : io_fail(rc, "stat", path);
	}
	if (is_dir != NULL)
		*is_dir = S_ISDIR(st.st_mode) ? 1 : 0;
	return 0;
}

int io_mode(const char *path, int follow, unsigned *mode, int *is_dir)
{
	struct stat st;

	/* Not a change to the store: stat directly, whatever the backend. */
	if ((follow ? stat(path, &st) : lstat(path, &st)) < 0) {
		int rc = errno;
		return rc == ENOENT ? rc : io_fail(rc, "stat", path);
	}
	*mode = (unsigned)st.st_mode & 07777;
	if (is_dir != NULL)
		*is_dir = S_ISDIR(st.st_mode) ? 1 : S_ISLNK(st.st_mode) ? -1 : 0;
	return 0;
}

int io_chmod(const char *path, unsigned mode)
{
	/* A mode is no data the crash simulator models: chmod directly. */
	return chmod(path, (mode_t)mode) < 0 ? io_fail(errno, "chmod", path) : 0;
}

void io_point(const char *name)
{
	const io_backend *b = io_cur;

	if (b->point != NULL)
		b->point(name);
}
