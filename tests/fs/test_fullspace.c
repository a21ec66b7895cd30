/*
 * test_fullspace -- a store on a small file system that fills up (a 64 MiB
 * tmpfs under the store), through a real mount:
 *
 *   fill it: one large file until ENOSPC, then 3,000-byte files until
 *   ENOSPC (every write must fail with ENOSPC, cleanly); remove the large
 *   file and write 1 MiB at once (the space a removal frees is writable
 *   at once); fsync; then unmount (must exit 0) -- or kill -9 the daemon
 *   -- and mount again with the disk still full (must succeed: recovery
 *   and the checkpoints need no new space); every small file is there;
 *   unmount, `tpfs check` clean; mount, delete everything, fill again:
 *   about as much fits as the first time.  Three rounds of each; and with
 *   1 MiB log segments, where removing the large file needs more log than
 *   the segments hold.
 *
 * Needs root (mount -t tmpfs) and /dev/fuse; everything missing fails.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount_util.h"

#define DISK_OPTS "size=64m,mode=0700"
#define SMALL 3000
#define SMALL_MAX 20000
#define CHUNK (1u << 20)

static tfs_mount m;
static char disk[264]; /* the small tmpfs; the store is in it */

static void setup(void)
{
	memset(&m, 0, sizeof m);
	snprintf(m.dir, sizeof m.dir, "/var/tmp/tpfs-full-XXXXXX");
	cr_assert_not_null(mkdtemp(m.dir), "mkdtemp: %s", strerror(errno));
	snprintf(disk, sizeof disk, "%s/disk", m.dir);
	snprintf(m.store, sizeof m.store, "%s/store", disk);
	snprintf(m.mnt, sizeof m.mnt, "%s/mnt", m.dir);
	cr_assert_eq(mkdir(disk, 0700), 0);
	cr_assert_eq(mkdir(m.mnt, 0755), 0);
	cr_assert_eq(mount("tmpfs", disk, "tmpfs", 0, DISK_OPTS), 0, "mount -t tmpfs -o %s %s: %s", DISK_OPTS, disk,
		     strerror(errno));
}

static void mkfs(const char *args)
{
	const char *tpfs = getenv("TPFS_BIN");
	cr_assert(tpfs && access(tpfs, X_OK) == 0, "TPFS_BIN is not set to an executable");
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "'%s' mkfs %s '%s' >/dev/null", tpfs, args, m.store);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

static void teardown(void)
{
	if (m.pid)
		tfs_kill9(&m);
	if (disk[0])
		(void)umount2(disk, MNT_DETACH);
	tfs_cleanup(&m);
}

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", m.mnt, name);
}

/* Writes CHUNK-byte pieces to name until a write fails or max bytes are
 * written; returns the bytes written, *err the errno of the failure (0 if
 * none).  The file is closed; a failing close counts as the failure. */
static size_t write_until(const char *name, size_t max, int *err)
{
	static unsigned char buf[CHUNK];
	char p[400];
	size_t done = 0;
	path_of(p, sizeof p, name);
	memset(buf, 0x5a, sizeof buf);
	*err = 0;
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		*err = errno;
		return 0;
	}
	while (done < max) {
		size_t n = max - done < CHUNK ? max - done : CHUNK;
		ssize_t w = write(fd, buf, n);
		if (w < 0) {
			*err = errno;
			break;
		}
		done += (size_t)w;
		if ((size_t)w < n) { /* a short write: the next one says why */
			continue;
		}
	}
	if (close(fd) != 0 && !*err)
		*err = errno;
	return done;
}

/* The content of small file i: its number, then a pattern. */
static void small_bytes(unsigned i, unsigned char *b)
{
	for (unsigned k = 0; k < SMALL; k++)
		b[k] = (unsigned char)(i * 131 + k);
}

/* Creates small files s0, s1, ... until one fails (ENOSPC expected);
 * returns how many were made whole.  A file whose write failed is
 * removed. */
static unsigned fill_small(unsigned round)
{
	unsigned char b[SMALL];
	char p[400];
	unsigned i = 0;
	for (; i < SMALL_MAX; i++) {
		snprintf(p, sizeof p, "%s/s%u", m.mnt, i);
		small_bytes(i, b);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int err = fd < 0 ? errno : 0;
		if (fd >= 0) {
			ssize_t w = write(fd, b, SMALL);
			err = w < 0 ? errno : w != SMALL ? EIO : 0;
			if (close(fd) != 0 && !err)
				err = errno;
		}
		if (err) {
			cr_assert_eq(err, ENOSPC, "round %u: small file %u failed with %s, not ENOSPC", round, i,
				     strerror(err));
			(void)unlink(p);
			return i;
		}
	}
	cr_assert_fail("round %u: %u small files and no ENOSPC: the disk did not fill", round, i);
	return i;
}

static void check_small(unsigned n, unsigned round)
{
	unsigned char b[SMALL], r[SMALL + 1];
	char p[400];
	for (unsigned i = 0; i < n; i++) {
		snprintf(p, sizeof p, "%s/s%u", m.mnt, i);
		int fd = open(p, O_RDONLY);
		cr_assert_geq(fd, 0, "round %u: small file %u of %u is gone: %s", round, i, n, strerror(errno));
		ssize_t got = read(fd, r, sizeof r);
		close(fd);
		small_bytes(i, b);
		cr_assert(got == SMALL && memcmp(b, r, SMALL) == 0, "round %u: small file %u of %u has the wrong bytes",
			  round, i, n);
	}
}

static void remove_small(unsigned n, unsigned round)
{
	char p[400];
	for (unsigned i = 0; i < n; i++) {
		snprintf(p, sizeof p, "%s/s%u", m.mnt, i);
		cr_assert_eq(unlink(p), 0, "round %u: unlink of small file %u on a full disk: %s", round, i,
			     strerror(errno));
	}
}

static void sync_mount(void)
{
	int fd = open(m.mnt, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fsync(fd), 0, "fsync of the mount: %s", strerror(errno));
	close(fd);
}

static void rounds(int kill9, const char *mkfs_args)
{
	size_t first = 0;
	int err;
	mkfs(mkfs_args);
	cr_assert_eq(tfs_remount(&m, NULL), 0, "the first mount failed");
	for (unsigned round = 1; round <= 3; round++) {
		/* fill: a large file, then small ones */
		size_t big = write_until("big", (size_t)300 << 20, &err);
		cr_assert_eq(err, ENOSPC, "round %u: the large file stopped at %zu bytes with %s, not ENOSPC", round,
			     big, strerror(err));
		cr_assert_gt(big, (size_t)4 << 20, "round %u: only %zu bytes of the large file fit", round, big);
		if (round == 1)
			first = big;
		cr_assert_geq(big + ((size_t)2 << 20), first,
			      "round %u: %zu bytes fit, %zu in round 1: the space of deleted files was lost", round,
			      big, first);
		unsigned n = fill_small(round);
		/* space freed by rm is writable at once */
		char p[400];
		path_of(p, sizeof p, "big");
		cr_assert_eq(unlink(p), 0, "round %u: rm of the large file on a full disk: %s", round, strerror(errno));
		size_t after = write_until("after", CHUNK, &err);
		cr_assert(err == 0 && after == CHUNK,
			  "round %u: a 1 MiB write right after removing %zu bytes failed: %s (%zu written)", round, big,
			  strerror(err), after);
		sync_mount();
		if (kill9) {
			tfs_kill9(&m);
		} else {
			cr_assert_eq(tfs_stop(&m), 0, "round %u: unmount on a full disk did not exit 0", round);
			cr_assert_eq(tfs_check(&m), 0, "round %u: tpfs check after a clean unmount on a full disk",
				     round);
		}
		/* the disk is still full: the mount must still work */
		cr_assert_eq(tfs_remount(&m, NULL), 0, "round %u: mount after %s on a full disk failed", round,
			     kill9 ? "kill -9" : "a clean unmount");
		check_small(n, round);
		cr_assert_eq(tfs_stop(&m), 0, "round %u: unmount after the remount did not exit 0", round);
		cr_assert_eq(tfs_check(&m), 0, "round %u: tpfs check after the remount", round);
		cr_assert_eq(tfs_remount(&m, NULL), 0, "round %u: mount to empty it failed", round);
		/* empty it */
		remove_small(n, round);
		path_of(p, sizeof p, "after");
		cr_assert_eq(unlink(p), 0, "round %u: %s", round, strerror(errno));
		printf("fullspace (%s%s%s): round %u: %zu bytes of one file, then %u files of %u bytes filled the "
		       "disk\n",
		       kill9 ? "kill -9" : "unmount", *mkfs_args ? ", mkfs " : "", mkfs_args, round, big, n, SMALL);
		fflush(stdout);
	}
	cr_assert_eq(tfs_stop(&m), 0);
	cr_assert_eq(tfs_check(&m), 0, "tpfs check at the end");
}

Test(fullspace, fill_unmount_remount_check_delete_refill, .init = setup, .fini = teardown, .timeout = 300)
{
	rounds(0, "");
}

Test(fullspace, fill_kill9_remount_check_delete_refill, .init = setup, .fini = teardown, .timeout = 300)
{
	rounds(1, "");
}

/* 1 MiB log segments: the large file's removal needs more log than the
 * three segments hold, so it goes in steps that checkpoints keep room for
 * (the data almost fills the disk here, not the log) */
Test(fullspace, small_log_segments, .init = setup, .fini = teardown, .timeout = 300)
{
	rounds(0, "-s 1M");
}
