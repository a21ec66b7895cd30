/*
 * slowlog_shim -- LD_PRELOAD into tpfsd for test_tx: while the file named
 * by TPFS_SLOWLOG_ARM exists, every pwrite(2) or pwritev2(2) (the durable
 * writes) to a log segment of a store
 * (a path with "/log/log." in it) first sleeps TPFS_SLOWLOG_MS ms (default
 * 3000).  That holds a commit record in the log buffer, in no file yet,
 * long enough for the test to look at the mount and then kill -9 the
 * daemon: what a non-member saw meanwhile must survive the crash.
 * Everything else passes untouched; disarmed, the shim only costs a stat.
 */
#undef _FILE_OFFSET_BITS /* pwrite and pwrite64 are both defined here */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwritev64v2)(int, const struct iovec *, int, off_t, int);

__attribute__((constructor)) static void init(void)
{
	SHIM_RESOLVE(pwrite);
	SHIM_RESOLVE(pwrite64);
	SHIM_RESOLVE(pwritev2);
	SHIM_RESOLVE(pwritev64v2);
}

static void maybe_stall(int fd)
{
	const char *arm = getenv("TPFS_SLOWLOG_ARM");
	if (!arm || access(arm, F_OK) != 0)
		return;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof path - 1);
	if (n <= 0)
		return;
	path[n] = 0;
	if (!strstr(path, "/log/log."))
		return;
	const char *ms = getenv("TPFS_SLOWLOG_MS");
	long v = ms ? atol(ms) : 3000;
	struct timespec ts = {v / 1000, (v % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	maybe_stall(fd);
	return real_pwrite(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	maybe_stall(fd);
	return real_pwrite64(fd, buf, len, off);
}

/* the log's durable writes (core/io io_pwrite_durable) */
ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	maybe_stall(fd);
	return real_pwritev2(fd, iov, n, off, flags);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	maybe_stall(fd);
	return real_pwritev64v2(fd, iov, n, off, flags);
}
