/*
 * mount_util -- see mount_util.h.
 */
#include "mount_util.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define FUSE_SUPER_MAGIC 0x65735546

static const char *bin(const char *var)
{
	const char *p = getenv(var);
	if (!p || access(p, X_OK) != 0) {
		fprintf(stderr, "mount_util: %s is not set to an executable (got %s)\n", var, p ? p : "nothing");
		return NULL;
	}
	return p;
}

static int is_mounted(const char *mnt)
{
	struct statfs sf;
	return statfs(mnt, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC;
}

static int run(const char *const argv[])
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int start_daemon(tfs_mount *m, const char *opts)
{
	const char *tpfsd = bin("TPFSD");
	if (!tpfsd)
		return -1;
	if (access("/dev/fuse", R_OK | W_OK) != 0) {
		fprintf(stderr, "mount_util: /dev/fuse is not usable: %s\n", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (opts && *opts)
			execl(tpfsd, tpfsd, m->store, m->mnt, "-f", "-o", opts, (char *)NULL);
		else
			execl(tpfsd, tpfsd, m->store, m->mnt, "-f", (char *)NULL);
		_exit(127);
	}
	m->pid = pid;
	for (int i = 0; i < 3000; i++) { /* up to 30 s: recovery may run first */
		int st;
		if (is_mounted(m->mnt))
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr, "mount_util: tpfsd exited (%d) before mounting %s\n",
				WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), m->mnt);
			m->pid = 0;
			return -1;
		}
		usleep(10000);
	}
	fprintf(stderr, "mount_util: %s not mounted after 30 s\n", m->mnt);
	tfs_kill9(m);
	return -1;
}

int tfs_start(tfs_mount *m, const char *mkfs_args, const char *opts)
{
	const char *tpfs = bin("TPFS_BIN");
	char cmd[1024];
	memset(m, 0, sizeof *m);
	snprintf(m->dir, sizeof m->dir, "/var/tmp/tpfs-test-XXXXXX");
	if (!tpfs || !mkdtemp(m->dir)) {
		fprintf(stderr, "mount_util: cannot make a temporary directory\n");
		return -1;
	}
	/* TPFS_TEST_STORE_URI (etcd://HOSTS of a cluster): the store is a
	 * cluster file system named after the directory; the embedded store's
	 * mkfs arguments do not apply to it. */
	const char *uri = getenv("TPFS_TEST_STORE_URI");
	if (uri && *uri) {
		snprintf(m->store, sizeof m->store, "%s/%s", uri, strrchr(m->dir, '/') + 1);
		mkfs_args = NULL;
	} else {
		snprintf(m->store, sizeof m->store, "%s/store", m->dir);
	}
	snprintf(m->mnt, sizeof m->mnt, "%s/mnt", m->dir);
	if (mkdir(m->mnt, 0755) != 0)
		return -1;
	snprintf(cmd, sizeof cmd, "'%s' mkfs %s '%s' >/dev/null", tpfs, mkfs_args ? mkfs_args : "", m->store);
	if (system(cmd) != 0) {
		fprintf(stderr, "mount_util: %s failed\n", cmd);
		return -1;
	}
	return start_daemon(m, opts);
}

int tfs_remount(tfs_mount *m, const char *opts) { return start_daemon(m, opts); }

int tfs_stop(tfs_mount *m)
{
	const char *argv[] = {"/bin/fusermount3", "-u", m->mnt, NULL};
	int st = -1;
	if (!m->pid)
		return -1;
	for (int i = 0; i < 100; i++) { /* busy right after a close: retry briefly */
		if (run(argv) == 0)
			break;
		usleep(50000);
	}
	for (int i = 0; i < 6000; i++) {
		pid_t r = waitpid(m->pid, &st, WNOHANG);
		if (r == m->pid) {
			m->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		usleep(10000);
	}
	fprintf(stderr, "mount_util: tpfsd did not exit after unmount\n");
	tfs_kill9(m);
	return -1;
}

/* The FUSE connection number of the mount at mnt (the minor of its
 * device), read from mountinfo: a stat of a hung mount would hang too.
 * -1 if it is not mounted. */
static long connection_of(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[8192];
	long conn = -1;
	if (!f)
		return -1;
	while (conn < 0 && fgets(line, sizeof line, f)) {
		unsigned maj, min;
		char point[4096];
		if (sscanf(line, "%*d %*d %u:%u %*s %4095s", &maj, &min, point) == 3 && !strcmp(point, mnt) &&
		    strstr(line, " fuse"))
			conn = (long)min;
	}
	fclose(f);
	return conn;
}

/* Waits for a daemon just sent SIGKILL.  A thread of it can stay stuck in
 * the kernel for ever: one sending an entry invalidation waits for the
 * directory's lock, held by a lookup that waits for an answer the dying
 * daemon will never give, and the connection is not torn down while that
 * thread holds /dev/fuse.  After a second, abort the connection as an
 * administrator would (fusectl), which ends the lookup and frees it. */
static void reap_killed(pid_t pid, const char *mnt)
{
	for (int i = 0; i < 100; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		usleep(10000);
	}
	long conn = connection_of(mnt);
	if (conn >= 0) {
		char path[128];
		snprintf(path, sizeof path, "/sys/fs/fuse/connections/%ld/abort", conn);
		if (access("/sys/fs/fuse/connections", F_OK) != 0 || access(path, F_OK) != 0)
			(void)mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, NULL);
		FILE *f = fopen(path, "w");
		if (f) {
			fputs("1", f);
			fclose(f);
			fprintf(stderr, "mount_util: tpfsd %d was stuck in the kernel after SIGKILL: aborted FUSE connection %ld\n",
				(int)pid, conn);
		}
	}
	waitpid(pid, NULL, 0);
}

void tfs_kill9(tfs_mount *m)
{
	const char *argv[] = {"/bin/fusermount3", "-u", "-z", m->mnt, NULL};
	if (m->pid) {
		kill(m->pid, SIGKILL);
		reap_killed(m->pid, m->mnt);
		m->pid = 0;
	}
	(void)run(argv);
	for (int i = 0; i < 500 && is_mounted(m->mnt); i++)
		usleep(10000);
}

int tfs_check(tfs_mount *m)
{
	const char *tpfs = bin("TPFS_BIN");
	if (!tpfs)
		return -1;
	const char *argv[] = {tpfs, "check", m->store, NULL};
	return run(argv);
}

void tfs_cleanup(tfs_mount *m)
{
	char cmd[512];
	if (m->pid)
		tfs_kill9(m);
	if (!m->dir[0])
		return;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", m->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "mount_util: could not remove %s\n", m->dir);
}

int tfs_sh(tfs_mount *m, const char *fmt, ...)
{
	char line[8192], cmd[8600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof cmd, "cd '%s' && %s", m->mnt, line);
	int st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

long tfs_stats(const tfs_mount *m, char *buf, size_t size)
{
	ssize_t n = size ? getxattr(m->mnt, "tpfs.stats", buf, size - 1) : -1;
	if (n < 0)
		return -1;
	buf[n] = 0;
	return (long)n;
}

int tfs_stat_count(const tfs_mount *m, const char *name, unsigned long long *out)
{
	static __thread char buf[65536];
	if (tfs_stats(m, buf, sizeof buf) < 0)
		return -1;
	for (char *l = buf; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char k[64];
		unsigned long long v;
		if (sscanf(l, " %63s %llu", k, &v) == 2 && !strcmp(k, name)) {
			*out = v;
			return 0;
		}
	}
	return -1;
}
