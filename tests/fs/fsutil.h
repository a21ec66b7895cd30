/*
 * fsutil -- what the fs suite's tests share: one real tpfs mount per test
 * (tests/lib/mount_util), a directory of the host file system to compare
 * with, a watchdog that tears the mount down if the test process dies
 * (a Criterion timeout, a crash), children running as other users,
 * random numbers, and `tpfs check -v` counts.
 *
 * Every helper that sets something up asserts: a missing daemon, tool or
 * /dev/fuse fails the test loudly.
 */
#ifndef TPFS_FSUTIL_H
#define TPFS_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "mount_util.h"

/* The mount of the running test and its host directory (both 0755,
 * reachable by every user). */
extern tfs_mount fsu_m;
extern char fsu_host[256]; /* /var/tmp/tpfs-host-XXXXXX, or "" */

/* Fresh store and mount (opts for -o, or NULL); with_host also makes the
 * host directory.  Starts the watchdog. */
void fsu_start(const char *opts, int with_host);
/* The same, with arguments for `tpfs mkfs` (NULL: none). */
void fsu_start_mkfs(const char *mkfs_args, const char *opts, int with_host);
/* tfs_stop must return 0 and `tpfs check` must be clean. */
void fsu_stop_check(void);
/* fsu_stop_check, then mount the same store again. */
void fsu_cycle(void);
/* Mount the stopped (or killed) store again, with fsu_start's options. */
void fsu_remount(void);
/* Mounts the store again with other options; tfs_remount's result (no
 * assertion: the mount may be meant to fail). */
int fsu_try_remount(const char *opts);
/* kill -9 of the daemon, lazy unmount. */
void fsu_kill9(void);
/* Criterion .fini: kill what is left, remove the temporary directories. */
void fsu_teardown(void);

/* `tpfs check -v STORE` (the store must be stopped): its exit status, and
 * the counts it prints (any pointer may be NULL). */
int fsu_check_counts(uint64_t *dirs, uint64_t *others, uint64_t *blocks);

/* fork() for workers of a test: the child drops the watchdog's pipe, so
 * that the watchdog sees the test process itself die. */
pid_t fsu_fork(void);
/* Runs argv (argv[0] a path) with stdout and stderr into out (cap bytes,
 * NUL-terminated); its exit status.  A command still running after 20 s
 * (a tpfsd that mounted when it should have refused) gets SIGTERM, which
 * unmounts it, and fails the test. */
int fsu_run_capture(const char *const argv[], char *out, size_t cap);
/* Waits for pid; its exit status, or 128 + signal. */
int fsu_wait(pid_t pid);

/* Users: uid, gid and supplementary groups of a child (uid 0: root). */
typedef struct fsu_user {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[4];
} fsu_user;
/* Drops to u in the calling (child) process: setgroups, setresgid,
 * setresuid; _exit(99) if it cannot. */
void fsu_become(const fsu_user *u);

/* Path under the mount (or under the host directory). */
const char *fsu_path(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* splitmix64 */
static inline uint64_t fsu_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static inline uint64_t fsu_below(uint64_t *s, uint64_t n) { return n ? fsu_rand(s) % n : 0; }

/* Monotonic seconds. */
double fsu_now(void);
/* TP_LONG=1 in the environment: long runs. */
int fsu_long(void);
/* A seed from the environment variable var (decimal or 0x hex), else dflt. */
uint64_t fsu_env_seed(const char *var, uint64_t dflt);

/* Whole-file helpers; 0 or -errno. */
int fsu_write_file(const char *path, const void *buf, size_t len, mode_t mode);
/* Reads at most cap bytes; the count or -errno. */
ssize_t fsu_read_file(const char *path, void *buf, size_t cap);
/* Recursively removes path (as rm -rf); 0 or -1. */
int fsu_rm_rf(const char *path);

/* Users of the permission tests: root, then
 * U1 = 1000:1000 {1000}, U2 = 1001:1001 {1001, 1000}, U3 = 1002:1002 {1002}. */
extern const fsu_user fsu_users[4];

/* "EACCES" for EACCES, "success" for 0 (one of 4 rotating buffers). */
const char *fsu_errname(int e);
int fsu_ts_eq(const struct timespec *a, const struct timespec *b);

/* A growing string. */
typedef struct fsu_sbuf {
	char *p;
	size_t n, cap;
} fsu_sbuf;
void fsu_sb_printf(fsu_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A snapshot of the tree below root, one line per object, depth first in
 * name order: type, mode, link count, owner, group, size (not of
 * directories), a hash of a regular file's content (up to 1 MiB), a
 * symlink's target, device numbers, hard-link identity, extended
 * attributes (not security.* or system.*), readdir's d_type and d_ino when
 * they disagree with lstat, and with times, mtime and ctime.  malloc'ed. */
char *fsu_tree(const char *root, int times);
/* Prints (to stderr) the lines that differ between two snapshots. */
void fsu_print_diff(const char *what, const char *xl, const char *yl, const char *x, const char *y);

#endif
