/*
 * txproc.c -- processes the tx test programs fork (txproc.h).
 */
#include "txproc.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "txtest.h"

pid_t txbystander(const char *dir, int stop, int stop_w, int out)
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

void txbystanders_check(const pid_t *pid, int n, int stop, int out, long min_calls)
{
	char buf[8192];
	cr_assert(close(stop) == 0);
	for (int i = 0; i < n; i++) {
		int wst;
		cr_assert(waitpid(pid[i], &wst, 0) == pid[i] && WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
			  "bystander %d could not start (status 0x%x)", i, wst);
	}
	ssize_t len = read(out, buf, sizeof buf - 1);
	cr_assert(len > 0);
	buf[len] = 0;
	close(out);
	cr_log_info("bystanders (calls, failures, first failure):\n%s", buf);
	char *line = buf;
	for (int i = 0; i < n; i++) {
		long calls = 0, fails = 0;
		char *nl = strchr(line, '\n');
		cr_assert(nl && sscanf(line, "%ld %ld", &calls, &fails) == 2, "bystanders said \"%s\"", buf);
		*nl = 0;
		cr_expect(calls > min_calls && fails == 0, "a bystander's working directory broke: %s", line);
		line = nl + 1;
	}
}

pid_t txshell_rounds(int i, int rounds, const char *dir, const char *prefix, int close_a, int close_b,
		     int unset_mount)
{
	char script[1024];
	snprintf(script, sizeof script,
		 "i=0; while [ $i -lt %d ]; do "
		 "txbegin >/dev/null || { echo \"shell %d round $i: txbegin failed\" >&2; exit 1; }; "
		 "echo $i >> \"%sf%d\" || { echo \"shell %d round $i: write failed\" >&2; exit 2; }; "
		 "txcommit >/dev/null || { echo \"shell %d round $i: txcommit failed\" >&2; exit 3; }; "
		 "i=$((i+1)); done",
		 rounds, i, prefix, i, i, i);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		if (close_a >= 0)
			close(close_a);
		if (close_b >= 0)
			close(close_b);
		if (unset_mount)
			unsetenv("TPFS_MOUNT");
		if (chdir(dir) != 0)
			_exit(9);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(8);
	}
	return c;
}

void txshells_wait(const pid_t *sh, int n)
{
	for (int i = 0; i < n; i++) {
		int wst;
		cr_assert(waitpid(sh[i], &wst, 0) == sh[i]);
		cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
			  "shell %d failed (status 0x%x; 1: txbegin, 2: the write, 3: txcommit)", i, wst);
	}
}

int txlines(const char *buf)
{
	int lines = 0;
	for (const char *p = buf; *p; p++)
		lines += *p == '\n';
	return lines;
}

int txproc_become_with_cap(uid_t uid, int cap)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct c[2];
	memset(c, 0, sizeof c);
	c[0].effective = c[0].permitted = c[0].inheritable = 1u << cap;
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 || setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
	    setresuid(uid, uid, uid) != 0 || syscall(SYS_capset, &h, c) != 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0)
		return -1;
	return 0;
}
