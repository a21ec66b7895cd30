/*
 * test_lifecycle -- unmount, check, remount and crash in the order a script
 * or a user runs them (issue 25: 3, 4, 5, 8), on real mounts.
 *
 *   unmount_then_check_and_remount  (3) a detached tpfsd, 50 MiB written,
 *       then three rounds of `fusermount3 -u M && tpfs check S` (the last
 *       with `umount M`) and `... && tpfsd S M`: each command exits 0 at
 *       once, the check says "clean" and never "not closed cleanly".
 *   lock_wait_bounded  (3) a process (the test's child) holds the store's
 *       lock and mounts nothing: with TPFS_LOCK_WAIT=1, `tpfs check S` and
 *       `tpfsd S M` say they wait for it (naming its pid), then exit 1
 *       saying it still holds the store; without the bound, a check started
 *       while it holds the lock waits, and passes once it lets go.
 *   check_mounted_refused  (4) `tpfs check S` and `tpfs recover S` of a
 *       mounted store exit 1 saying it is in use, naming the daemon's pid
 *       and the mount point; the mount still works.
 *   remount_after_kill9, remount_after_kill9_shell_inside  (5) kill -9 of
 *       the daemon (with, in the second, a process whose working directory
 *       is the mount's root), then `tpfsd S M` alone: it mounts, says it
 *       detached the dead mount, exactly one mount is on M (never stacked),
 *       the fsynced file is there, and the process left inside gets
 *       ENOTCONN opening its working directory.
 *   second_store_refused  (8) `tpfsd S2 M` where S is mounted exits 1
 *       naming S; still one mount on M, S's file still seen.
 *   mkfs_nonempty_refused  (8) `tpfs mkfs D` of a directory holding a file
 *       exits 1 and adds nothing; --force makes the store beside the file;
 *       an empty existing directory needs no flag.
 *
 * Every failure is loud; a test's directory (/var/tmp/tpfs-test-*) is
 * removed only when it passes.  TPFSD, TPFS_BIN: set by meson.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount_util.h"

#define FUSE_SUPER_MAGIC 0x65735546
#define OUT_MAX 16384

static tfs_mount g_m;
static pid_t g_extra; /* a second daemon or a process inside the mount */

static void fini(void)
{
	char cmd[700];
	if (g_extra > 0) {
		kill(g_extra, SIGKILL);
		waitpid(g_extra, NULL, 0);
	}
	if (g_m.pid)
		tfs_kill9(&g_m);
	if (g_m.mnt[0]) { /* a detached daemon, or a dead mount: lazily away */
		snprintf(cmd, sizeof cmd, "fusermount3 -u -z '%s' 2>/dev/null; fusermount3 -u -z '%s' 2>/dev/null",
			 g_m.mnt, g_m.mnt);
		(void)system(cmd);
	}
}

TestSuite(lifecycle, .fini = fini);

static const char *env(const char *v)
{
	const char *p = getenv(v);
	cr_assert(p && access(p, X_OK) == 0, "%s is not set to an executable", v);
	return p;
}

/* Runs a shell command; its stdout and stderr into out.  Exit status. */
static int sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t cap, const char *fmt, ...)
{
	char cmd[4096], full[4400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof full, "( %s ) 2>&1", cmd);
	FILE *p = popen(full, "r");
	cr_assert(p, "popen: %s", strerror(errno));
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* How many mounts mountinfo shows on mnt. */
static int mounts_on(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[8192], point[4096];
	int n = 0;
	cr_assert(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 && !strcmp(point, mnt))
			n++;
	fclose(f);
	return n;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
	cr_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write %s: %s", path, strerror(errno));
	cr_assert(fsync(fd) == 0, "fsync %s: %s", path, strerror(errno));
	cr_assert(close(fd) == 0);
}

static void expect_file(const char *path, const char *text)
{
	char buf[256] = "";
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	cr_assert(n == (ssize_t)strlen(text) && !memcmp(buf, text, (size_t)n), "%s: got '%.*s', want '%s'", path,
		  (int)(n > 0 ? n : 0), buf, text);
}

/* ---------------------------------------------------------------------- */

Test(lifecycle, unmount_then_check_and_remount, .timeout = 300)
{
	const char *tpfsd = env("TPFSD"), *tpfs = env("TPFS_BIN");
	char out[OUT_MAX];
	int rc;
	cr_assert(tfs_start(&g_m, NULL, NULL) == 0);
	cr_assert(tfs_stop(&g_m) == 0);
	/* detached, as a user runs it */
	rc = sh(out, sizeof out, "'%s' '%s' '%s'", tpfsd, g_m.store, g_m.mnt);
	cr_assert(rc == 0, "tpfsd exited %d:\n%s", rc, out);
	for (int round = 0; round < 3; round++) {
		const char *umount = round == 2 ? "umount" : "fusermount3 -u";
		rc = sh(out, sizeof out,
			"cd '%s' && for i in $(seq 100); do echo $i > f%d_$i; done && "
			"dd if=/dev/urandom of=big%d bs=1M count=%d status=none",
			g_m.mnt, round, round, round == 0 ? 50 : 20);
		cr_assert(rc == 0, "writes of round %d: %s", round, out);
		rc = sh(out, sizeof out, "%s '%s' && '%s' check '%s'", umount, g_m.mnt, tpfs, g_m.store);
		cr_assert(rc == 0, "round %d: `%s M && tpfs check S` exited %d:\n%s", round, umount, rc, out);
		cr_assert(strstr(out, ": clean"), "round %d: the check did not say clean:\n%s", round, out);
		cr_assert(!strstr(out, "not closed cleanly"), "round %d: the check saw a store still open:\n%s",
			  round, out);
		rc = sh(out, sizeof out, "'%s' '%s' '%s'", tpfsd, g_m.store, g_m.mnt);
		cr_assert(rc == 0, "round %d: tpfsd after check exited %d:\n%s", round, rc, out);
		rc = sh(out, sizeof out, "cd '%s' && dd if=/dev/urandom of=more%d bs=1M count=20 status=none", g_m.mnt,
			round);
		cr_assert(rc == 0, "round %d: %s", round, out);
		rc = sh(out, sizeof out, "%s '%s' && '%s' '%s' '%s'", umount, g_m.mnt, tpfsd, g_m.store, g_m.mnt);
		cr_assert(rc == 0, "round %d: `%s M && tpfsd S M` exited %d:\n%s", round, umount, rc, out);
		cr_assert(mounts_on(g_m.mnt) == 1, "round %d: %d mounts on %s", round, mounts_on(g_m.mnt), g_m.mnt);
		char f[512];
		snprintf(f, sizeof f, "%s/f%d_7", g_m.mnt, round);
		expect_file(f, "7\n");
	}
	rc = sh(out, sizeof out, "fusermount3 -u '%s' && '%s' check '%s'", g_m.mnt, tpfs, g_m.store);
	cr_assert(rc == 0 && strstr(out, ": clean"), "last check exited %d:\n%s", rc, out);
	tfs_cleanup(&g_m);
	memset(&g_m, 0, sizeof g_m);
}

Test(lifecycle, check_mounted_refused, .timeout = 120)
{
	const char *tpfs = env("TPFS_BIN");
	char out[OUT_MAX], pid[32], f[512];
	cr_assert(tfs_start(&g_m, NULL, NULL) == 0);
	snprintf(f, sizeof f, "%s/a", g_m.mnt);
	write_file(f, "kept\n");
	snprintf(pid, sizeof pid, "pid %d", (int)g_m.pid);
	const char *cmds[] = {"check", "recover"};
	for (int i = 0; i < 2; i++) {
		int rc = sh(out, sizeof out, "'%s' %s '%s'", tpfs, cmds[i], g_m.store);
		cr_assert(rc == 1, "tpfs %s of a mounted store exited %d:\n%s", cmds[i], rc, out);
		cr_assert(strstr(out, "in use") && strstr(out, pid) && strstr(out, g_m.mnt),
			  "tpfs %s: no 'in use', '%s' and the mount point %s in:\n%s", cmds[i], pid, g_m.mnt, out);
		cr_assert(!strstr(out, "clean"), "tpfs %s checked a mounted store:\n%s", cmds[i], out);
	}
	expect_file(f, "kept\n");
	cr_assert(tfs_stop(&g_m) == 0);
	cr_assert(tfs_check(&g_m) == 0);
	tfs_cleanup(&g_m);
	memset(&g_m, 0, sizeof g_m);
}

/* tpfsd S M -f as a child, its stderr into the file err; returns once the
 * mount serves `name` or the daemon exited (its status then in *status). */
static pid_t start_capture(const char *store, const char *mnt, const char *err, const char *name, int *status)
{
	const char *tpfsd = env("TPFSD");
	char path[600];
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int fd = open(err, O_CREAT | O_TRUNC | O_WRONLY, 0644);
		if (fd >= 0)
			dup2(fd, 2);
		execl(tpfsd, tpfsd, store, mnt, "-f", (char *)NULL);
		_exit(127);
	}
	*status = -1;
	snprintf(path, sizeof path, "%s/%s", mnt, name);
	for (int i = 0; i < 3000; i++) {
		struct statfs sf;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			return 0;
		}
		if (statfs(mnt, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC && access(path, F_OK) == 0)
			return pid;
		usleep(10000);
	}
	return pid;
}

static void slurp(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(out, 1, cap - 1, f) : 0;
	out[n] = 0;
	if (f)
		fclose(f);
}

static void remount_after_kill9(int shell_inside)
{
	char out[OUT_MAX], f[512], err[512], cwd[512];
	int status, st;
	cr_assert(tfs_start(&g_m, NULL, NULL) == 0);
	snprintf(f, sizeof f, "%s/a", g_m.mnt);
	write_file(f, "before the crash\n");
	if (shell_inside) {
		if ((g_extra = fork()) == 0) {
			if (chdir(g_m.mnt) != 0)
				_exit(1);
			pause();
			_exit(0);
		}
		cr_assert(g_extra > 0);
		usleep(200000);
	}
	kill(g_m.pid, SIGKILL);
	cr_assert(waitpid(g_m.pid, &st, 0) == g_m.pid);
	g_m.pid = 0;
	cr_assert(mounts_on(g_m.mnt) == 1, "the dead mount is not there: %d mounts", mounts_on(g_m.mnt));
	snprintf(err, sizeof err, "%s/tpfsd.err", g_m.dir);
	pid_t pid = start_capture(g_m.store, g_m.mnt, err, "a", &status);
	slurp(err, out, sizeof out);
	cr_assert(pid > 0, "tpfsd S M after kill -9 exited %d:\n%s", status, out);
	g_m.pid = pid;
	cr_assert(mounts_on(g_m.mnt) == 1, "%d mounts on %s after the remount (stacked):\n%s", mounts_on(g_m.mnt),
		  g_m.mnt, out);
	cr_assert(strstr(out, "dead mount"), "no message about the dead mount:\n%s", out);
	expect_file(f, "before the crash\n");
	if (shell_inside) {
		snprintf(cwd, sizeof cwd, "/proc/%d/cwd/.", (int)g_extra);
		errno = 0;
		int fd = open(cwd, O_RDONLY | O_DIRECTORY);
		int e = errno;
		cr_assert(fd < 0 && e == ENOTCONN,
			  "the process left inside the dead mount: opening its working directory gave %s, not ENOTCONN",
			  fd >= 0 ? "success" : strerror(e));
		kill(g_extra, SIGKILL);
		waitpid(g_extra, NULL, 0);
		g_extra = 0;
	}
	cr_assert(tfs_stop(&g_m) == 0);
	cr_assert(tfs_check(&g_m) == 0);
	tfs_cleanup(&g_m);
	memset(&g_m, 0, sizeof g_m);
}

Test(lifecycle, remount_after_kill9, .timeout = 120) { remount_after_kill9(0); }

Test(lifecycle, remount_after_kill9_shell_inside, .timeout = 120) { remount_after_kill9(1); }

Test(lifecycle, second_store_refused, .timeout = 120)
{
	const char *tpfs = env("TPFS_BIN");
	char out[OUT_MAX], f[512], err[512], s2[512];
	int status;
	cr_assert(tfs_start(&g_m, NULL, NULL) == 0);
	snprintf(f, sizeof f, "%s/a", g_m.mnt);
	write_file(f, "first store\n");
	snprintf(s2, sizeof s2, "%s/store2", g_m.dir);
	int rc = sh(out, sizeof out, "'%s' mkfs '%s'", tpfs, s2);
	cr_assert(rc == 0, "mkfs %s: %s", s2, out);
	snprintf(err, sizeof err, "%s/tpfsd2.err", g_m.dir);
	/* waits for a name that the second store does not have */
	g_extra = start_capture(s2, g_m.mnt, err, "no-such-name", &status);
	slurp(err, out, sizeof out);
	cr_assert(g_extra == 0, "tpfsd of a second store still runs over %s (%d mounts there):\n%s", g_m.mnt,
		  mounts_on(g_m.mnt), out);
	cr_assert(status == 1, "tpfsd of a second store exited %d:\n%s", status, out);
	cr_assert(strstr(out, g_m.store) && strstr(out, "mounted there"), "the message does not name %s:\n%s",
		  g_m.store, out);
	cr_assert(mounts_on(g_m.mnt) == 1, "%d mounts on %s", mounts_on(g_m.mnt), g_m.mnt);
	expect_file(f, "first store\n");
	cr_assert(tfs_stop(&g_m) == 0);
	tfs_cleanup(&g_m);
	memset(&g_m, 0, sizeof g_m);
}

Test(lifecycle, mkfs_nonempty_refused, .timeout = 60)
{
	const char *tpfs = env("TPFS_BIN");
	char dir[256] = "/var/tmp/tpfs-test-XXXXXX", d[300], out[OUT_MAX], p[400];
	cr_assert(mkdtemp(dir));
	snprintf(d, sizeof d, "%s/d", dir);
	cr_assert(mkdir(d, 0755) == 0);
	snprintf(p, sizeof p, "%s/mine.txt", d);
	write_file(p, "the user's\n");
	int rc = sh(out, sizeof out, "'%s' mkfs '%s'", tpfs, d);
	cr_assert(rc == 1, "mkfs into a non-empty directory exited %d:\n%s", rc, out);
	cr_assert(strstr(out, "not empty") && strstr(out, "--force"), "no reason given:\n%s", out);
	snprintf(p, sizeof p, "%s/super", d);
	cr_assert(access(p, F_OK) != 0, "a store was made anyway");
	rc = sh(out, sizeof out, "ls -A '%s' | wc -l", d);
	cr_assert(atoi(out) == 1, "the directory now holds %s entries", out);
	rc = sh(out, sizeof out, "'%s' mkfs --force '%s'", tpfs, d);
	cr_assert(rc == 0, "mkfs --force exited %d:\n%s", rc, out);
	cr_assert(access(p, F_OK) == 0, "mkfs --force made no store");
	snprintf(p, sizeof p, "%s/mine.txt", d);
	expect_file(p, "the user's\n");
	snprintf(d, sizeof d, "%s/empty", dir);
	cr_assert(mkdir(d, 0755) == 0);
	rc = sh(out, sizeof out, "'%s' mkfs '%s'", tpfs, d);
	cr_assert(rc == 0, "mkfs into an empty directory exited %d:\n%s", rc, out);
	rc = sh(out, sizeof out, "rm -rf '%s'", dir);
}

Test(lifecycle, lock_wait_bounded, .timeout = 120)
{
	const char *tpfs = env("TPFS_BIN"), *tpfsd = env("TPFSD");
	char out[OUT_MAX], pid[32];
	int rc, p[2];
	cr_assert(tfs_start(&g_m, NULL, NULL) == 0);
	cr_assert(tfs_stop(&g_m) == 0);
	cr_assert(pipe(p) == 0);
	if ((g_extra = fork()) == 0) {
		int fd = open(g_m.store, O_RDONLY | O_DIRECTORY);
		if (fd < 0 || flock(fd, LOCK_EX) != 0)
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	cr_assert(g_extra > 0 && read(p[0], out, 1) == 1, "the lock holder did not start");
	snprintf(pid, sizeof pid, "pid %d", (int)g_extra);
	rc = sh(out, sizeof out, "TPFS_LOCK_WAIT=1 '%s' check '%s'", tpfs, g_m.store);
	cr_assert(rc == 1, "tpfs check of a store held by %s exited %d:\n%s", pid, rc, out);
	cr_assert(strstr(out, "waiting for") && strstr(out, "still in use") && strstr(out, pid),
		  "tpfs check did not say whom it waited for:\n%s", out);
	rc = sh(out, sizeof out, "TPFS_LOCK_WAIT=1 '%s' '%s' '%s' -f", tpfsd, g_m.store, g_m.mnt);
	cr_assert(rc == 1, "tpfsd of a store held by %s exited %d:\n%s", pid, rc, out);
	cr_assert(strstr(out, "waiting for") && strstr(out, "still in use") && strstr(out, pid),
		  "tpfsd did not say whom it waited for:\n%s", out);
	cr_assert(mounts_on(g_m.mnt) == 0, "tpfsd mounted %s anyway", g_m.mnt);
	/* the holder lets go after a second: a check waiting for it passes */
	pid_t holder = g_extra;
	if (fork() == 0) {
		usleep(1000000);
		kill(holder, SIGKILL);
		_exit(0);
	}
	rc = sh(out, sizeof out, "'%s' check '%s'", tpfs, g_m.store);
	waitpid(holder, NULL, 0);
	g_extra = 0;
	while (wait(NULL) > 0)
		;
	cr_assert(rc == 0 && strstr(out, "waiting for") && strstr(out, ": clean"),
		  "tpfs check waiting for the lock exited %d:\n%s", rc, out);
	tfs_cleanup(&g_m);
	memset(&g_m, 0, sizeof g_m);
}
