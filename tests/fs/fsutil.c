/*
 * fsutil -- see fsutil.h.
 *
 * The watchdog: a Criterion timeout or a crash kills the test process, and
 * the daemon it started would go on serving a mount nobody removes.  So
 * fsu_start forks a watchdog in its own session that holds the read end of
 * a pipe; the test process writes the daemon's pid into it whenever it
 * changes.  When the pipe closes (the test process is gone) and the last pid
 * is not 0, the watchdog kills that daemon, unmounts lazily and removes the
 * temporary directories.  Workers forked with fsu_fork close their copy of
 * the pipe, so that a worker stuck on a hung mount does not keep it open.
 */
#include "fsutil.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

tfs_mount fsu_m;
char fsu_host[256];
static int wd_fd = -1; /* write end of the watchdog's pipe */

static void wd_tell(pid_t pid)
{
	int32_t v = (int32_t)pid;
	if (wd_fd >= 0 && write(wd_fd, &v, sizeof v) != (ssize_t)sizeof v)
		fprintf(stderr, "fsutil: watchdog pipe: %s\n", strerror(errno));
}

static void wd_start(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		cr_assert_fail("pipe2: %s", strerror(errno));
	pid_t pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int32_t v, last = 0;
		close(p[1]);
		if (setsid() < 0 || chdir("/") != 0)
			_exit(1);
		/* the test's own stdin/stdout stay open: nothing to do with them */
		while (read(p[0], &v, sizeof v) == (ssize_t)sizeof v)
			last = v;
		if (last > 0) {
			char cmd[1200];
			kill(last, SIGKILL);
			snprintf(cmd, sizeof cmd, "/bin/fusermount3 -u -z '%s' >/dev/null 2>&1; rm -rf '%s' '%s'", fsu_m.mnt,
				 fsu_m.dir, fsu_host);
			fprintf(stderr, "fsutil watchdog: the test process died with tpfsd %d running: killed it\n",
				(int)last);
			if (system(cmd) != 0)
				_exit(1);
		}
		_exit(0);
	}
	close(p[0]);
	wd_fd = p[1];
}

void fsu_start(const char *opts, int with_host)
{
	memset(&fsu_m, 0, sizeof fsu_m);
	fsu_host[0] = 0;
	umask(022);
	if (with_host) {
		snprintf(fsu_host, sizeof fsu_host, "/var/tmp/tpfs-host-XXXXXX");
		cr_assert_not_null(mkdtemp(fsu_host), "mkdtemp: %s", strerror(errno));
		cr_assert_eq(chmod(fsu_host, 0755), 0);
	}
	cr_assert_eq(access("/dev/fuse", R_OK | W_OK), 0, "/dev/fuse is not usable: %s", strerror(errno));
	int rc = tfs_start(&fsu_m, NULL, opts);
	cr_assert_eq(rc, 0, "tfs_start failed (TPFSD=%s TPFS_BIN=%s): is the daemon built?",
		     getenv("TPFSD") ? getenv("TPFSD") : "(unset)", getenv("TPFS_BIN") ? getenv("TPFS_BIN") : "(unset)");
	/* other users must reach the mount point (mkdtemp makes it 0700) */
	cr_assert_eq(chmod(fsu_m.dir, 0755), 0);
	wd_start();
	wd_tell(fsu_m.pid);
}

void fsu_stop_check(void)
{
	int rc = tfs_stop(&fsu_m);
	wd_tell(0);
	cr_assert_eq(rc, 0, "tpfsd exited with status %d after fusermount3 -u (want 0)", rc);
	rc = tfs_check(&fsu_m);
	cr_assert_eq(rc, 0, "tpfs check %s: exit status %d (want 0: clean)", fsu_m.store, rc);
}

void fsu_remount(void)
{
	int rc = tfs_remount(&fsu_m, NULL);
	wd_tell(fsu_m.pid);
	cr_assert_eq(rc, 0, "remounting %s failed", fsu_m.store);
}

void fsu_cycle(void)
{
	fsu_stop_check();
	fsu_remount();
}

void fsu_kill9(void)
{
	tfs_kill9(&fsu_m);
	wd_tell(0);
}

void fsu_teardown(void)
{
	if (fsu_m.pid)
		tfs_kill9(&fsu_m);
	wd_tell(0);
	tfs_cleanup(&fsu_m);
	if (fsu_host[0])
		fsu_rm_rf(fsu_host);
	fsu_host[0] = 0;
	if (wd_fd >= 0)
		close(wd_fd);
	wd_fd = -1;
}

int fsu_check_counts(uint64_t *dirs, uint64_t *others, uint64_t *blocks)
{
	const char *tpfs = getenv("TPFS_BIN");
	int p[2];
	char out[8192];
	size_t n = 0;
	cr_assert_not_null(tpfs, "TPFS_BIN is not set");
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fsu_fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		execl(tpfs, tpfs, "check", "-v", fsu_m.store, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		ssize_t r = read(p[0], out + n, sizeof out - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == sizeof out - 1)
			break;
	}
	out[n] = 0;
	close(p[0]);
	int st = fsu_wait(pid);
	uint64_t d = 0, o = 0, b = 0;
	const char *s = strstr(out, " directories, ");
	int found = 0;
	if (s) {
		while (s > out && s[-1] >= '0' && s[-1] <= '9')
			s--;
		found = sscanf(s, "%" SCNu64 " directories, %" SCNu64 " other inodes, %" SCNu64 " blocks", &d, &o, &b) == 3;
	}
	if (st != 0 || !found)
		fprintf(stderr, "tpfs check -v %s (status %d):\n%s", fsu_m.store, st, out);
	cr_assert(found, "tpfs check -v printed no counts");
	if (dirs)
		*dirs = d;
	if (others)
		*others = o;
	if (blocks)
		*blocks = b;
	return st;
}

pid_t fsu_fork(void)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0 && wd_fd >= 0) {
		close(wd_fd);
		wd_fd = -1;
	}
	return pid;
}

int fsu_wait(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void fsu_become(const fsu_user *u)
{
	if (u->uid == 0 && u->gid == 0 && u->ngroups == 0)
		return;
	if (setgroups((size_t)u->ngroups, u->groups) != 0 || setresgid(u->gid, u->gid, u->gid) != 0 ||
	    setresuid(u->uid, u->uid, u->uid) != 0) {
		fprintf(stderr, "fsutil: cannot become uid %u gid %u: %s\n", (unsigned)u->uid, (unsigned)u->gid,
			strerror(errno));
		_exit(99);
	}
}

const char *fsu_path(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return buf;
}

double fsu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int fsu_long(void)
{
	const char *s = getenv("TP_LONG");
	return s && *s && strcmp(s, "0") != 0;
}

uint64_t fsu_env_seed(const char *var, uint64_t dflt)
{
	const char *s = getenv(var);
	return s && *s ? strtoull(s, NULL, 0) : dflt;
}

int fsu_write_file(const char *path, const void *buf, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, (const char *)buf + done, len - done);
		if (w < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		done += (size_t)w;
	}
	return close(fd) == 0 ? 0 : -errno;
}

ssize_t fsu_read_file(const char *path, void *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < cap) {
		ssize_t r = read(fd, (char *)buf + done, cap - done);
		if (r < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	close(fd);
	return (ssize_t)done;
}

int fsu_rm_rf(const char *path)
{
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	return system(cmd) == 0 ? 0 : -1;
}
