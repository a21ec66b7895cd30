/*
 * test_tx_bystanders -- transactions that cannot hurt processes outside
 * them (issue 24, the gaps left after its first round):
 *
 *   member_path_walk_keeps_cwd   a member reaching a bystander's directory
 *                                by its full path (lookup, listing) leaves
 *                                the bystander's working directory whole
 *                                (fsd_txbind.c C9: directories keep their shared
 *                                node id)
 *   full_paths_keep_cwd          8 shells, 100 rounds each of txbegin;
 *                                echo >> $MNT/d/fN; txcommit, with
 *                                bystanders in d and d/sub calling getcwd()
 *                                every 10 ms: no failure
 *   member_rmdir_keeps_cwd_alive a member's uncommitted rmdir of the
 *                                directory a bystander is in: the bystander
 *                                still creates files there (the kernel's
 *                                inode is not dead), never sees it gone
 *   abort_cuts_off_running_members
 *                                txabort while a background job of the
 *                                transaction still runs: the job's later
 *                                writes fail with ECANCELED -- neither plain
 *                                calls committed one by one, nor joined to
 *                                the shell's next transaction -- and its
 *                                reads see the committed state (C12)
 *   setgid_program_does_not_join a set-group-ID program run by a member
 *                                writes outside the transaction (C10: fsuid
 *                                and fsgid must be the owner's)
 *   commit_clearing_caches_holds_nobody
 *                                with a slow invalidation thread (3 s), a
 *                                non-member reading, and then writing, a
 *                                file a commit changes is served at once
 *                                (fs_tx.c X9), not after the commit's cache
 *                                clearing
 *
 * The test process is the non-member; members are /bin/sh run by it after
 * txbegin.  Environment (meson): TPFSD, TPFS_BIN (mount_util), TX_BIN.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount_util.h"
#include "txproc.h"
#include "txtest.h"

static tfs_mount g_m;
static char g_self[PATH_MAX];

static const char *mp(const char *rel)
{
	static char b[16][700];
	static int i;
	char *p = b[i++ % 16];
	snprintf(p, sizeof b[0], "%s/%s", g_m.mnt, rel);
	return p;
}

static void fini(void)
{
	if (g_m.pid)
		tfs_kill9(&g_m);
	if (g_m.dir[0] && !getenv("TX_KEEP"))
		tfs_cleanup(&g_m);
}

TestSuite(tx_bystanders, .fini = fini);

static void start(const char *opts)
{
	static char path[8192];
	const char *bin = getenv("TX_BIN");
	need_tools();
	if (!g_self[0]) { /* Criterion's workers may not pass through main */
		ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
		g_self[n > 0 ? n : 0] = 0;
	}
	cr_assert(tfs_start(&g_m, NULL, opts) == 0, "cannot make and mount a store (TPFSD, TPFS_BIN, /dev/fuse?)");
	cr_assert(chmod(g_m.dir, 0711) == 0); /* other users reach the mount point */
	snprintf(path, sizeof path, "%s:%s", bin, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	setenv("PATH", path, 1);
	setenv("MNT", g_m.mnt, 1);
	setenv("TPFS_MOUNT", g_m.mnt, 1);
	setenv("LC_ALL", "C", 1);
}

static void finish(void)
{
	int st = tfs_stop(&g_m);
	cr_assert(st == 0, "tpfsd did not exit cleanly at unmount (status %d)", st);
	st = tfs_check(&g_m);
	cr_assert(st == 0, "tpfs check after the test: status %d", st);
	tfs_cleanup(&g_m);
	g_m.dir[0] = 0;
}

/* Runs script with /bin/sh in directory dir (NULL: the test's); its exit
 * status, or -1 if it did not exit. */
static int sh_in(const char *dir, const char *script)
{
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		if (dir && chdir(dir) != 0)
			_exit(120);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(121);
	}
	int wst;
	cr_assert(waitpid(c, &wst, 0) == c);
	return WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
}

/* Forks a member: /bin/sh runs script in "/", with up[1] as its fd 3 (to
 * say where it is) and down[0] as its fd 4 (to wait on), which the parent
 * then closes.  The member's pid. */
static pid_t member_sh(const char *script, const int up[2], const int down[2])
{
	pid_t m = fork();
	cr_assert(m >= 0);
	if (m == 0) {
		if (dup2(up[1], 3) != 3 || dup2(down[0], 4) != 4 || chdir("/") != 0)
			_exit(120);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(121);
	}
	close(up[1]);
	close(down[0]);
	return m;
}

static ssize_t read_file(const char *rel, char *buf, size_t size)
{
	int fd = open(mp(rel), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

/* ---------------------------------------------------------------------- */
/* Bystanders: plain processes in a directory calling getcwd()            */

typedef struct bys {
	pid_t pid[8];
	int n, stop, out;
} bys;

static void bys_start(bys *b, const char *const *dirs, int n)
{
	int stop[2], out[2];
	cr_assert(pipe(stop) == 0 && pipe(out) == 0);
	b->n = n;
	for (int i = 0; i < n; i++)
		b->pid[i] = txbystander(mp(dirs[i]), stop[0], stop[1], out[1]);
	close(stop[0]);
	close(out[1]);
	b->stop = stop[1];
	b->out = out[0];
	msleep(100); /* they are in their directories */
}

/* Stops the bystanders and checks none of them failed. */
static void bys_check(bys *b)
{
	txbystanders_check(b->pid, b->n, b->stop, b->out, 5);
}

/* ---------------------------------------------------------------------- */
/* C9: directories keep their shared node id                              */

/* A member that walks to a bystander's directory by its full path -- a
 * lookup of it, a listing of its parent and of it -- leaves the
 * bystander's working directory whole.  (Before C9 the member's lookup
 * answered an alias node id, and the kernel dropped the shared dentry
 * the bystander's cwd is: getcwd failed with ENOENT.) */
Test(tx_bystanders, member_path_walk_keeps_cwd, .timeout = 60)
{
	static const char *const dirs[] = {"d", "d/sub"};
	bys b;
	start(NULL);
	cr_assert(mkdir(mp("d"), 0755) == 0 && mkdir(mp("d/sub"), 0755) == 0);
	cr_assert(sh_in(NULL, "echo x > \"$MNT/d/f\"") == 0);
	bys_start(&b, dirs, 2);
	int st = sh_in("/", "txbegin >/dev/null || exit 1; "
			    "cat \"$MNT/d/f\" >/dev/null && ls -la \"$MNT\" \"$MNT/d\" \"$MNT/d/sub\" >/dev/null && "
			    "echo y >> \"$MNT/d/f\" && stat \"$MNT/d/sub\" >/dev/null || exit 2; sleep 0.3; "
			    "txcommit >/dev/null || exit 3");
	cr_expect(st == 0, "the member's script failed (%d; 1 txbegin, 2 its calls, 3 txcommit)", st);
	msleep(100);
	bys_check(&b);
	char buf[64];
	cr_expect(read_file("d/f", buf, sizeof buf) == 4 && !strcmp(buf, "x\ny\n"), "d/f reads \"%s\" after the commit",
		  buf);
	finish();
}

/* Issue 24, Required, with full paths: SHELLS shells begin, append to
 * their file by its full path and commit, ROUNDS rounds each, with
 * bystanders in d and d/sub calling getcwd() every 10 ms: no failure of
 * any kind, and every round committed. */
Test(tx_bystanders, full_paths_keep_cwd, .timeout = 400)
{
	enum { SHELLS = 8, ROUNDS = 100 };
	static const char *const dirs[] = {"d", "d/sub"};
	pid_t sh[SHELLS];
	bys b;
	start(NULL);
	cr_assert(mkdir(mp("d"), 0755) == 0 && mkdir(mp("d/sub"), 0755) == 0);
	bys_start(&b, dirs, 2);
	double t0 = now_s();
	for (int i = 0; i < SHELLS; i++)
		sh[i] = txshell_rounds(i, ROUNDS, mp("d"), "$MNT/d/", -1, -1, 0);
	txshells_wait(sh, SHELLS);
	cr_log_info("%d shells x %d rounds with full paths: %.1f s", SHELLS, ROUNDS, now_s() - t0);
	bys_check(&b);
	for (int i = 0; i < SHELLS; i++) {
		char rel[32], buf[4096];
		snprintf(rel, sizeof rel, "d/f%d", i);
		cr_assert(read_file(rel, buf, sizeof buf) > 0);
		int lines = txlines(buf);
		cr_expect(lines == ROUNDS, "d/f%d has %d lines after %d committed rounds", i, lines, ROUNDS);
	}
	finish();
}

/* C9: a member removes (uncommitted) the empty directory a bystander is
 * in.  The kernel marks the inode rmdir removed dead for everyone holding
 * it, so the member's rmdir must act on an inode of its own: the
 * bystander still creates a file in its working directory, a non-member
 * still finds the directory by name, and after txabort all is as before. */
Test(tx_bystanders, member_rmdir_keeps_cwd_alive, .timeout = 60)
{
	int go[2], res[2], up[2], down[2];
	char ch, buf[64];
	start(NULL);
	cr_assert(mkdir(mp("e"), 0755) == 0);
	cr_assert(pipe(go) == 0 && pipe(res) == 0 && pipe(up) == 0 && pipe(down) == 0);
	pid_t by = fork();
	cr_assert(by >= 0);
	if (by == 0) { /* the bystander: in e; acts when told */
		close(go[1]);
		close(res[0]);
		if (chdir(mp("e")) != 0 || read(go[0], &ch, 1) != 1)
			_exit(3);
		int fd = open("made-by-bystander", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		int e = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		dprintf(res[1], "%d\n", e);
		_exit(0);
	}
	close(go[0]);
	close(res[1]);
	/* the member: removes e by its full path, says so on fd 3, waits on
	 * fd 4, aborts */
	pid_t m = member_sh("txbegin >/dev/null || exit 1; rmdir \"$MNT/e\" || exit 2; test -e \"$MNT/e\" && exit 4; "
			    "echo r >&3; read x <&4; txabort >/dev/null || exit 3",
			    up, down);
	ssize_t n = read(up[0], &ch, 1);
	cr_assert(n == 1, "the member did not remove e");
	/* a non-member still finds e by name, and the bystander creates in it */
	struct stat st;
	cr_expect(stat(mp("e"), &st) == 0 && S_ISDIR(st.st_mode),
		  "non-member: stat(e) after a member's uncommitted rmdir: %s", strerror(errno));
	cr_assert(write(go[1], "g", 1) == 1);
	cr_assert(read(res[0], buf, sizeof buf - 1) > 0);
	int e = atoi(buf);
	cr_expect(e == 0,
		  "the bystander in e could not create a file there after a member's uncommitted rmdir of e: %s (the "
		  "kernel's shared inode of e was killed by the member's rmdir)",
		  strerror(e));
	cr_expect(access(mp("e/made-by-bystander"), F_OK) == 0, "non-member: e/made-by-bystander: %s",
		  strerror(errno));
	cr_assert(write(down[1], "x\n", 2) == 2);
	int wst;
	cr_assert(waitpid(m, &wst, 0) == m && waitpid(by, NULL, 0) == by);
	/* the member's rmdir of a directory that is no longer empty for
	 * it... it aborted anyway: (status 3 would be a failed txabort) */
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
		  "the member's script failed (status 0x%x; 1 txbegin, 2 rmdir, 3 txabort, 4 e still there for it)", wst);
	cr_expect(stat(mp("e"), &st) == 0 && S_ISDIR(st.st_mode), "after txabort: stat(e): %s", strerror(errno));
	int fd = open(mp("e/after"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_expect(fd >= 0, "after txabort: creating e/after: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	close(go[1]);
	close(res[0]);
	close(up[0]);
	close(down[1]);
	finish();
}

/* ---------------------------------------------------------------------- */
/* C12: txabort while other members run                                   */

/* C12 (fsd_txbind.c, issue 24 gap e), the abort's side of C11: a shell's
 * txabort while a background job of its transaction still runs ends the
 * transaction at once and cuts the job off: its later writes fail with
 * ECANCELED, whether the shell is then outside any transaction (before
 * C12 each write was a plain call, committed on its own) or in its next
 * one (which the job joined: its output committed there); its reads see
 * the committed state.  The answer of txabort -v names the job. */
Test(tx_bystanders, abort_cuts_off_running_members, .timeout = 60)
{
	char buf[512];
	start(NULL);
	cr_assert(sh_in(NULL, "echo pub > \"$MNT/pub\"") == 0);
	int st = sh_in("/", "txbegin >/dev/null || exit 1; "
			    "echo in-tx > \"$MNT/first\" || exit 2; "
			    "( sleep 0.6; cat \"$MNT/pub\" > \"$MNT.bgread\" 2>&1; "
			    "  echo late > \"$MNT/bg1\" 2>/dev/null; "
			    "  sleep 0.6; echo later > \"$MNT/bg2\" 2>/dev/null ) </dev/null & "
			    "txabort -v > \"$MNT.abort-msg\" 2>&1 || exit 3; "
			    "sleep 0.2; txbegin >/dev/null || exit 4; sleep 0.5; "
			    "echo own > \"$MNT/own\" || exit 5; wait; "
			    "txcommit >/dev/null || exit 6");
	cr_expect(st == 0, "the member's script failed (%d; 1 txbegin, 2 write, 3 txabort, 4 second txbegin, 5 "
			   "its write, 6 txcommit)",
		  st);
	ssize_t n = -1;
	int fd = open(strcat(strcpy(buf, g_m.mnt), ".abort-msg"), O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = 0;
	cr_log_info("txabort -v said: %s", buf);
	cr_expect(strstr(buf, "cut off") && strstr(buf, "ECANCELED"),
		  "txabort -v with a job of the transaction still running said \"%s\": expected it to name the "
		  "members it cut off",
		  buf);
	cr_expect(access(mp("first"), F_OK) != 0, "first exists after txabort");
	n = -1;
	fd = open(strcat(strcpy(buf, g_m.mnt), ".bgread"), O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = 0;
	cr_expect(!strcmp(buf, "pub\n"),
		  "the job of the aborted transaction read pub as \"%s\" after txabort: expected the committed "
		  "\"pub\\n\" (its reads go on)",
		  buf);
	cr_expect(access(mp("bg1"), F_OK) != 0,
		  "bg1 exists: the write of a member still running after txabort was committed on its own "
		  "(expected ECANCELED)");
	cr_expect(access(mp("bg2"), F_OK) != 0,
		  "bg2 exists: the write of a member of the aborted transaction, still running, joined the shell's "
		  "next transaction (expected ECANCELED)");
	cr_expect(read_file("own", buf, sizeof buf) == 4 && !strcmp(buf, "own\n"),
		  "the shell's own write in its next transaction reads \"%s\" after txcommit", buf);
	finish();
}

/* ---------------------------------------------------------------------- */
/* C10: set-group-ID programs                                              */

/* The calling child becomes uid (and gid) uid, keeping CAP_SETGID across
 * exec (an ambient capability): its commands can do what a set-group-ID
 * program does (helper "asg").  0 on success. */
static int become_with_setgid(uid_t uid)
{
	return txproc_become_with_cap(uid, CAP_SETGID);
}

/* C10 (fsd_txbind.c, issue 24 gap d): a request joins a transaction only with
 * its owner's user and group (fsuid and fsgid), or when the owner is root.
 * A user's shell in a transaction runs what a set-group-ID program does:
 * switch the effective group to one the user is not in and append to a
 * file only that group may write.  The append is a plain call: non-members
 * see it at once and the user's txabort cannot take it back; the user's
 * own write in the same shell is the transaction's and rolled back. */
Test(tx_bystanders, setgid_program_does_not_join, .timeout = 60)
{
	const uid_t user = 65534;
	const gid_t group = 4242;
	int up[2], down[2];
	char ch, buf[256];
	start(NULL);
	cr_assert(sh_in(NULL, "echo boot > \"$MNT/glog\" && echo v1 > \"$MNT/own\"") == 0);
	cr_assert(chown(mp("glog"), 0, group) == 0 && chmod(mp("glog"), 0664) == 0);
	cr_assert(chown(mp("own"), user, user) == 0);
	cr_assert(pipe(up) == 0 && pipe(down) == 0);
	pid_t m = fork();
	cr_assert(m >= 0);
	if (m == 0) {
		char cmd[PATH_MAX + 512];
		if (dup2(up[1], 3) != 3 || dup2(down[0], 4) != 4 || chdir("/") != 0 || become_with_setgid(user) != 0)
			_exit(120);
		unsetenv("BXFI_MAP"); /* Criterion's, not the helper's */
		snprintf(cmd, sizeof cmd,
			 "txbegin >/dev/null || exit 1; echo member >> \"$MNT/own\" || exit 2; "
			 "\"%s\" --helper asg %u \"$MNT/glog\" privileged || exit 3; "
			 "echo r >&3; read x <&4; txabort >/dev/null || exit 4",
			 g_self, (unsigned)group);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(121);
	}
	close(up[1]);
	close(down[0]);
	cr_assert(read(up[0], &ch, 1) == 1, "the member's shell failed before its writes were done");
	cr_expect(read_file("glog", buf, sizeof buf) > 0 && !strcmp(buf, "boot\nprivileged\n"),
		  "a non-member reads glog as \"%s\" while the member's transaction is open: the append of the "
		  "set-group-ID program (fsgid %u) must be a plain call, seen at once",
		  buf, (unsigned)group);
	cr_expect(read_file("own", buf, sizeof buf) > 0 && !strcmp(buf, "v1\n"),
		  "a non-member reads own as \"%s\": the member's own write leaked", buf);
	cr_assert(write(down[1], "x\n", 2) == 2);
	int wst;
	cr_assert(waitpid(m, &wst, 0) == m);
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
		  "the member's shell failed (status 0x%x; 1 txbegin, 2 its write, 3 the set-group-ID append, 4 "
		  "txabort)",
		  wst);
	cr_expect(read_file("glog", buf, sizeof buf) > 0 && !strcmp(buf, "boot\nprivileged\n"),
		  "after the user's txabort glog reads \"%s\": an unprivileged user rolled back a set-group-ID "
		  "program's append",
		  buf);
	cr_expect(read_file("own", buf, sizeof buf) > 0 && !strcmp(buf, "v1\n"),
		  "after txabort own reads \"%s\": the member's own write was not rolled back", buf);
	close(up[0]);
	close(down[1]);
	finish();
}

/* ---------------------------------------------------------------------- */
/* X9: a commit's cache clearing holds no plain call                      */

/* The time a plain call takes, in seconds: fn run in a child (so that a
 * hang is a failure, not a hung test); -1 if it failed or hung. */
static double timed_call(int (*fn)(void), double limit)
{
	int p[2];
	cr_assert(pipe(p) == 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		close(p[0]);
		double t0 = now_s();
		int ok = fn() == 0;
		double t = now_s() - t0;
		dprintf(p[1], "%d %f\n", ok, t);
		_exit(0);
	}
	close(p[1]);
	char buf[64] = "";
	double end = now_s() + limit;
	ssize_t n = 0;
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while (now_s() < end && (n = read(p[0], buf, sizeof buf - 1)) < 0 && errno == EAGAIN)
		msleep(5);
	close(p[0]);
	if (n <= 0) {
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
		return -1;
	}
	waitpid(c, NULL, 0);
	buf[n] = 0;
	int ok = 0;
	double t = -1;
	return sscanf(buf, "%d %lf", &ok, &t) == 2 && ok ? t : -1;
}

static char g_seen[64];

static int read_w(void)
{
	return read_file("w", g_seen, sizeof g_seen) > 0 && !strcmp(g_seen, "new\n") ? 0 : -1;
}

static int append_w(void)
{
	int fd = open(mp("w"), O_WRONLY | O_APPEND | O_CLOEXEC);
	int ok = fd >= 0 && write(fd, "plain\n", 6) == 6;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* tpfs stat: commits whose cache invalidations outlasted their locks
 * (fs_tx.c X6, X9), or -1. */
static long long inval_late(void)
{
	static char st[65536];
	const char *key = "user transactions: ";
	if (tfs_stats(&g_m, st, sizeof st) < 0)
		return -1;
	const char *l = strstr(st, key);
	long long n;
	return l && sscanf(l + strlen(key), "%lld commits invalidated", &n) == 1 ? n : -1;
}

/* X9 (fs_tx.c, issue 24 gap b): a commit holds the call-level locks of
 * what it changes until the kernel's caches of it are cleared (X6); with
 * the invalidating thread slow (TPFSD_TEST_INVAL_DELAY_MS: 3 s before
 * each job), a non-member's read of a file the commit changed waited the
 * whole 3 s, and an outside writer as long (up to 10 s).  Now the commit
 * stops waiting for its invalidations as soon as a plain call waits for
 * its locks: the read is served the committed state at once, and the
 * writer goes on within tx_wait. */
Test(tx_bystanders, commit_clearing_caches_holds_nobody, .timeout = 90)
{
	int up[2], down[2];
	char ch, buf[256];
	setenv("TPFSD_TEST_INVAL_DELAY_MS", "3000", 1);
	start(NULL);
	unsetenv("TPFSD_TEST_INVAL_DELAY_MS");
	cr_assert(sh_in(NULL, "echo old > \"$MNT/w\"") == 0);
	long long late0 = inval_late();
	cr_assert(late0 >= 0, "tpfs stat names no count of commits that invalidated after their locks");
	for (int round = 0; round < 2; round++) {
		int (*fn)(void) = round ? append_w : read_w;
		const char *what = round ? "an outside append to w" : "a non-member's read of w";
		cr_assert(pipe(up) == 0 && pipe(down) == 0);
		pid_t m = member_sh("txbegin >/dev/null || exit 1; echo new > \"$MNT/w\" || exit 2; echo r >&3; "
				    "read x <&4; txcommit >/dev/null || exit 3",
				    up, down);
		cr_assert(read(up[0], &ch, 1) == 1, "the member did not write w");
		double t0 = now_s();
		cr_assert(write(down[1], "x\n", 2) == 2); /* txcommit starts */
		msleep(400); /* its record durable, its invalidations held up (3 s) */
		double t = timed_call(fn, 20);
		int wst;
		cr_assert(waitpid(m, &wst, 0) == m);
		double tc = now_s() - t0;
		cr_log_info("%s during the commit's cache clearing: %.3f s (the commit took %.3f s)", what, t, tc);
		cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the member's script failed (status 0x%x)", wst);
		cr_expect(t >= 0 && t < 0.5,
			  "%s while a commit of w cleared the kernel's caches (its invalidating thread slowed to 3 s) took "
			  "%.3f s (-1: failed, or hung, or a read of other than \"new\\n\"): expected it served at once",
			  what, t);
		close(up[0]);
		close(down[1]);
		if (!round) /* w is new for the next round's member */
			cr_assert(sh_in(NULL, "echo old > \"$MNT/w\"") == 0);
	}
	/* the hook really slowed the thread: else the commits cleared the
	 * caches at once and the rounds above prove nothing */
	long long late = inval_late() - late0;
	cr_assert(late >= 1,
		  "no commit outlasted its locks with its invalidations (%lld): was tpfsd built without the test "
		  "hook TPFSD_TEST_INVAL_DELAY_MS (-Ddebug_checks=false)?",
		  late);
	cr_expect(read_file("w", buf, sizeof buf) > 0 && !strcmp(buf, "new\nplain\n"),
		  "w reads \"%s\" after the commit and the outside append, expected \"new\\nplain\\n\"", buf);
	finish();
}

/* test_tx_bystanders --helper OP ...: what the shells run.
 *   asg GID FILE TEXT   what a set-group-ID program does: switch the
 *                       effective (and so file-system) group to GID, then
 *                       append TEXT and a newline to FILE */
static int helper(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[0], "asg")) {
		gid_t g = (gid_t)strtoul(argv[1], NULL, 10);
		if (setresgid((gid_t)-1, g, (gid_t)-1) != 0) {
			printf("setresgid(-1, %u, -1): %s\n", (unsigned)g, strerror(errno));
			return 1;
		}
		char line[512];
		int len = snprintf(line, sizeof line, "%s\n", argv[3]);
		int fd = open(argv[2], O_WRONLY | O_APPEND | O_CLOEXEC);
		int ok = fd >= 0 && write(fd, line, (size_t)len) == len && close(fd) == 0;
		if (!ok)
			printf("append to %s as gid %u: %s\n", argv[2], (unsigned)g, strerror(errno));
		fflush(stdout);
		_exit(ok ? 0 : 1); /* (not dumpable after the switch: LeakSanitizer could not check it) */
	}
	fprintf(stderr, "test_tx_bystanders --helper: unknown request\n");
	return 2;
}

int main(int argc, char *argv[]) { return txtest_main(argc, argv, g_self, sizeof g_self, helper); }
