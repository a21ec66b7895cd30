/*
 * mount_util -- real tpfs mounts for the fs and clients suites: a fresh
 * store, tpfsd running in the foreground as a child, clean or brutal stops.
 *
 * The binaries come from the environment, set by meson for every test that
 * uses this: TPFSD (the daemon) and TPFS_BIN (the tpfs tool).  Every failure
 * is loud: a missing binary, /dev/fuse or fusermount3 fails the test.
 * TPFS_TEST_STORE_URI=etcd://HOST:PORT,... puts every store made here on
 * that cluster (NAME: the temporary directory's name) instead of in dir.
 */
#ifndef TPFS_MOUNT_UTIL_H
#define TPFS_MOUNT_UTIL_H

#include <sys/types.h>

typedef struct tfs_mount {
	char dir[256];   /* a temporary directory holding both */
	char store[300]; /* dir/store, or TPFS_TEST_STORE_URI/NAME */
	char mnt[300];   /* dir/mnt */
	pid_t pid;       /* the daemon, or 0 */
} tfs_mount;

/* A fresh store (tpfs mkfs, extra mkfs arguments in mkfs_args or NULL),
 * mounted with `tpfsd STORE MNT -f -o opts` (opts may be NULL); returns
 * once the mount is live.  0, or -1 with a message on stderr. */
int tfs_start(tfs_mount *m, const char *mkfs_args, const char *opts);
/* Mounts m->store again (after a stop or a kill). */
int tfs_remount(tfs_mount *m, const char *opts);
/* fusermount3 -u, then waits for the daemon; returns its exit status
 * (0 when it unmounted cleanly), or -1. */
int tfs_stop(tfs_mount *m);
/* kill -9 of the daemon, then a lazy unmount of the dead mount point. */
void tfs_kill9(tfs_mount *m);
/* Runs `tpfs check STORE`; returns its exit status (0: clean). */
int tfs_check(tfs_mount *m);
/* Removes the temporary directory (the mount must be stopped). */
void tfs_cleanup(tfs_mount *m);
/* The daemon's statistics (the tpfs.stats attribute of the mount's root,
 * the text `tpfs stat` prints) into buf, NUL-terminated: its length, or -1
 * with errno.  Reading them is itself a getxattr request. */
long tfs_stats(const tfs_mount *m, char *buf, size_t size);
/* The count on the statistics' line "  NAME  N" (a request kind): 0, or -1
 * if there is no such line or the statistics cannot be read. */
int tfs_stat_count(const tfs_mount *m, const char *name, unsigned long long *out);
/* Runs a shell command line with the mount point as the working directory;
 * returns its exit status. */
int tfs_sh(tfs_mount *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
