/*
 * test_tx_cwd -- bystanders' working directories (issue 24 item 4, C6;
 * test_tx.c has the actors and the helpers): begin keeps them, also with
 * shells in parallel, and expires kept names; the mount found from a
 * directory without a path.
 */
#include "txproc.h"
#include "txsh.h"

/* ---------------------------------------------------------------------- */
/* Bystanders' working directories (issue 24 item 4, fsd_txbind.c C6)          */

/* Issue 24 item 4: after the mount sat without transactions, a begin
 * (C6: names the kernel kept) must not break the working directory of a
 * process that is in no transaction -- its getcwd() and /proc/PID/cwd
 * keep working -- and begins started in parallel in a fresh directory,
 * which find their mount from the current directory, all succeed. */
Test(tx, begin_keeps_bystanders_cwd, .timeout = 60)
{
	enum { BEGINS = 4 };
	int stop[2], out[2], go[2];
	pid_t by[1], b[BEGINS];
	start();
	cr_assert(mkdir(mp("d"), 0755) == 0); /* fresh: its name is one the kernel may keep */
	cr_assert(pipe(stop) == 0 && pipe(out) == 0);
	by[0] = txbystander(mp("d"), stop[0], stop[1], out[1]);
	close(stop[0]);
	close(out[1]);
	cr_assert(pipe(go) == 0);
	for (int i = 0; i < BEGINS; i++) {
		b[i] = fork();
		cr_assert(b[i] >= 0);
		if (b[i] == 0) { /* a program of its own in d, its mount found from there */
			char msg[TPFS_TX_MSG_MAX], ch;
			close(go[1]);
			close(stop[1]);
			close(out[0]);
			unsetenv("TPFS_MOUNT");
			if (chdir(mp("d")) != 0 || read(go[0], &ch, 1) != 0)
				_exit(3);
			char m[PATH_MAX];
			if (tpfs_tx_find_mount(NULL, m, sizeof m, msg, sizeof msg) != 0 ||
			    tpfs_tx_begin(m, 0, NULL, msg, sizeof msg) != 0) {
				fprintf(stderr, "begin %d: %s\n", i, msg);
				_exit(1);
			}
			if (tpfs_tx_find_mount(NULL, m, sizeof m, msg, sizeof msg) != 0 ||
			    tpfs_tx_abort(m, msg, sizeof msg) != 0) {
				fprintf(stderr, "abort %d: %s\n", i, msg);
				_exit(2);
			}
			_exit(0);
		}
	}
	close(go[0]);
	msleep(300);
	close(go[1]); /* all begin at once */
	for (int i = 0; i < BEGINS; i++) {
		int wst;
		cr_assert(waitpid(b[i], &wst, 0) == b[i]);
		cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
			  "begin %d of %d, started in parallel in a fresh directory, failed (status 0x%x; 1: begin, 2: "
			  "abort)",
			  i + 1, BEGINS, wst);
	}
	msleep(500);
	txbystanders_check(by, 1, stop[1], out[0], 10);
	finish();
}

/* Issue 24, Required: shells beginning, writing and committing in
 * parallel -- SHELLS of them, in one freshly made directory, ROUNDS rounds
 * each -- with bystanders in that directory and two below it calling
 * getcwd() every 10 ms: no failure of any kind. */
Test(tx, parallel_shells_keep_bystanders_cwd, .timeout = 300)
{
	enum { SHELLS = 8, ROUNDS = 100, BY = 3 };
	static const char *const dirs[BY] = {"d", "d/s1", "d/s1/s2"};
	int stop[2], out[2];
	pid_t by[BY], sh[SHELLS];
	need_tools();
	start();
	for (int i = 0; i < BY; i++)
		cr_assert(mkdir(mp(dirs[i]), 0755) == 0);
	cr_assert(pipe(stop) == 0 && pipe(out) == 0);
	for (int i = 0; i < BY; i++)
		by[i] = txbystander(mp(dirs[i]), stop[0], stop[1], out[1]);
	close(stop[0]);
	close(out[1]);
	double t0 = now_s();
	for (int i = 0; i < SHELLS; i++) /* the mount found from the current directory */
		sh[i] = txshell_rounds(i, ROUNDS, mp("d"), "", stop[1], out[0], 1);
	txshells_wait(sh, SHELLS);
	cr_log_info("%d shells x %d rounds: %.1f s", SHELLS, ROUNDS, now_s() - t0);
	txbystanders_check(by, BY, stop[1], out[0], 10);
	for (int i = 0; i < SHELLS; i++) { /* every round committed */
		char rel[32], buf[VIEW_MAX];
		snprintf(rel, sizeof rel, "d/f%d", i);
		cr_assert(nm_read(rel, buf, sizeof buf) > 0);
		int lines = txlines(buf);
		cr_expect(lines == ROUNDS, "d/f%d has %d lines after %d committed rounds", i, lines, ROUNDS);
	}
	finish();
}

/* C6 with names only expired (the kernel keeps the dentry, marked to be
 * asked about): a name a non-member looked up just before the first
 * transaction still leads a member to its own view -- its write is the
 * transaction's, not a plain call through the shared inode. */
Test(tx, begin_expires_kept_names, .timeout = 60)
{
	char buf[256];
	struct stat st;
	start();
	cr_assert(mkdir(mp("d"), 0755) == 0);
	put("d/k", "old\n");
	cr_assert(stat(mp("d/k"), &st) == 0); /* kept by the kernel for the entry timeout */
	tsh *s = tsh_open("T", 1);
	SH_OK(s, "echo new > d/k");
	mcheck(s, "new", "cat d/k");
	cr_expect(nm_read("d/k", buf, sizeof buf) > 0 && !strcmp(buf, "old\n"),
		  "a non-member reads d/k as \"%s\" while the member's write is uncommitted: the member reached the "
		  "shared inode through a name the kernel kept from before the begin (C6)",
		  buf);
	tsh_abort(s);
	finish();
}

/* tools/tpfs_tx_mount.c M5: a process whose working directory has no path
 * (removed; or, before C6 only expired names, dropped by another user's
 * begin) still finds the mount it is on, from the directory's device --
 * not $TPFS_MOUNT, not "no tpfs mount contains the current directory". */
Test(tx, mount_found_from_a_directory_without_a_path, .timeout = 60)
{
	start();
	cr_assert(mkdir(mp("gone"), 0755) == 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		char m[PATH_MAX], msg[TPFS_TX_MSG_MAX], cwd[PATH_MAX];
		setenv("TPFS_MOUNT", "/nonexistent-tpfs", 1);
		if (chdir(mp("gone")) != 0 || rmdir(mp("gone")) != 0)
			_exit(3);
		if (getcwd(cwd, sizeof cwd)) {
			fprintf(stderr, "getcwd still works in a removed directory: %s\n", cwd);
			_exit(4);
		}
		if (tpfs_tx_find_mount(NULL, m, sizeof m, msg, sizeof msg) != 0) {
			fprintf(stderr, "tpfs_tx_find_mount: %s\n", msg);
			_exit(1);
		}
		if (strcmp(m, g_m.mnt) != 0) {
			fprintf(stderr, "tpfs_tx_find_mount chose %s, not %s\n", m, g_m.mnt);
			_exit(2);
		}
		_exit(0);
	}
	int wst;
	cr_assert(waitpid(c, &wst, 0) == c);
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
		  "in a removed directory of the mount, the mount was not found from the current directory "
		  "(status 0x%x: 1 failed, 2 another mount, 3/4 setup)",
		  wst);
	finish();
}
