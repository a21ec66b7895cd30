/*
 * test_tx_bystanders -- transactions that cannot hurt processes outside
 * them (issue 24, the gaps left after its first round):
 *
 *   member_path_walk_keeps_cwd   a member reaching a bystander's directory
 *                                by its full path (lookup, listing) leaves
 *                                the bystander's working directory whole
 *                                (fsd_tx.c C9: directories keep their shared
 *                                node id)
 *   full_paths_keep_cwd          8 shells, 100 rounds each of txbegin;
 *                                echo >> $MNT/d/fN; txcommit, with
 *                                bystanders in d and d/sub calling getcwd()
 *                                every 10 ms: no failure
 *   member_rmdir_keeps_cwd_alive a member's uncommitted rmdir of the
 *                                directory a bystander is in: the bystander
 *                                still creates files there (the kernel's
 *                                inode is not dead), never sees it gone
 *
 * The test process is the non-member; members are /bin/sh run by it after
 * txbegin.  Environment (meson): TPFSD, TPFS_BIN (mount_util), TX_BIN.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount_util.h"
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

/* A bystander: a plain process (no transaction) in directory dir that
 * calls getcwd() every 10 ms, and reads /proc/self/cwd, until a byte or
 * EOF arrives on stop; writes "calls failures first-error" to out. */
static pid_t bystander(const char *dir, int stop, int stop_w, int out)
{
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c != 0)
		return c;
	close(stop_w);
	char want[PATH_MAX], buf[PATH_MAX], first[2 * PATH_MAX + 128] = "-";
	long calls = 0, fails = 0;
	if (chdir(dir) != 0 || !realpath(".", want))
		_exit(2);
	fcntl(stop, F_SETFL, O_NONBLOCK);
	for (;;) {
		char ch;
		ssize_t n = read(stop, &ch, 1);
		if (n >= 0 || errno != EAGAIN)
			break;
		calls++;
		const char *bad = NULL;
		int e = 0;
		ssize_t l;
		if (!getcwd(buf, sizeof buf))
			bad = "getcwd", e = errno;
		else if (strcmp(buf, want) != 0)
			bad = "getcwd names another directory";
		else if ((l = readlink("/proc/self/cwd", buf, sizeof buf - 1)) < 0)
			bad = "readlink /proc/self/cwd", e = errno;
		else if (buf[l] = 0, strcmp(buf, want) != 0)
			bad = "/proc/self/cwd reads otherwise";
		if (bad && !fails++)
			snprintf(first, sizeof first, "%s: %s (%s) at call %ld", bad, e ? strerror(e) : buf, want, calls);
		msleep(10);
	}
	dprintf(out, "%ld %ld %s\n", calls, fails, first);
	_exit(0);
}

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
		b->pid[i] = bystander(mp(dirs[i]), stop[0], stop[1], out[1]);
	close(stop[0]);
	close(out[1]);
	b->stop = stop[1];
	b->out = out[0];
	msleep(100); /* they are in their directories */
}

/* Stops the bystanders and checks none of them failed. */
static void bys_check(bys *b)
{
	char buf[8192];
	cr_assert(close(b->stop) == 0);
	for (int i = 0; i < b->n; i++) {
		int wst;
		cr_assert(waitpid(b->pid[i], &wst, 0) == b->pid[i] && WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
			  "bystander %d could not start (status 0x%x)", i, wst);
	}
	ssize_t len = read(b->out, buf, sizeof buf - 1);
	cr_assert(len > 0);
	buf[len] = 0;
	close(b->out);
	cr_log_info("bystanders (calls, failures, first failure):\n%s", buf);
	char *line = buf;
	for (int i = 0; i < b->n; i++) {
		long calls = 0, fails = 0;
		char *nl = strchr(line, '\n');
		cr_assert(nl && sscanf(line, "%ld %ld", &calls, &fails) == 2, "bystanders said \"%s\"", buf);
		*nl = 0;
		cr_expect(calls > 5 && fails == 0, "a bystander's working directory broke: %s", line);
		line = nl + 1;
	}
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
	for (int i = 0; i < SHELLS; i++) {
		char script[512];
		snprintf(script, sizeof script,
			 "i=0; while [ $i -lt %d ]; do "
			 "txbegin >/dev/null || { echo \"shell %d round $i: txbegin failed\" >&2; exit 1; }; "
			 "echo $i >> \"$MNT/d/f%d\" || { echo \"shell %d round $i: write failed\" >&2; exit 2; }; "
			 "txcommit >/dev/null || { echo \"shell %d round $i: txcommit failed\" >&2; exit 3; }; "
			 "i=$((i+1)); done",
			 ROUNDS, i, i, i, i);
		sh[i] = fork();
		cr_assert(sh[i] >= 0);
		if (sh[i] == 0) {
			if (chdir(mp("d")) != 0)
				_exit(9);
			execl("/bin/sh", "sh", "-c", script, (char *)NULL);
			_exit(8);
		}
	}
	for (int i = 0; i < SHELLS; i++) {
		int wst;
		cr_assert(waitpid(sh[i], &wst, 0) == sh[i]);
		cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
			  "shell %d failed (status 0x%x; 1: txbegin, 2: the write, 3: txcommit)", i, wst);
	}
	cr_log_info("%d shells x %d rounds with full paths: %.1f s", SHELLS, ROUNDS, now_s() - t0);
	bys_check(&b);
	for (int i = 0; i < SHELLS; i++) {
		char rel[32], buf[4096];
		snprintf(rel, sizeof rel, "d/f%d", i);
		cr_assert(read_file(rel, buf, sizeof buf) > 0);
		int lines = 0;
		for (char *p = buf; *p; p++)
			lines += *p == '\n';
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
	pid_t m = fork();
	cr_assert(m >= 0);
	if (m == 0) {
		if (dup2(up[1], 3) != 3 || dup2(down[0], 4) != 4 || chdir("/") != 0)
			_exit(120);
		execl("/bin/sh", "sh", "-c",
		      "txbegin >/dev/null || exit 1; rmdir \"$MNT/e\" || exit 2; test -e \"$MNT/e\" && exit 4; "
		      "echo r >&3; read x <&4; txabort >/dev/null || exit 3",
		      (char *)NULL);
		_exit(121);
	}
	close(up[1]);
	close(down[0]);
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

static int helper(int argc, char **argv)
{
	(void)argc, (void)argv;
	return 2;
}

int main(int argc, char *argv[]) { return txtest_main(argc, argv, g_self, sizeof g_self, helper); }
