/*
 * test_concurrency -- runs tpcb_mt (the TPC-B-like concurrent workload,
 * built as a plain program so it can also run under ThreadSanitizer) with
 * several argument sets and requires exit 0 from each.  meson passes its
 * path in TPCB_MT.
 *
 * What tpcb_mt checks is written at the top of tpcb_mt.c: after every run,
 * and after every simulated crash and its recovery, each record equals its
 * value under exactly the committed transactions (acknowledged commits
 * durable, aborted and in-flight work gone), the TPC-B sums agree, and a
 * second recovery changes nothing.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs tpcb_mt with the NULL-terminated extra arguments. */
static void run(const char *first, ...)
{
	const char *exe = getenv("TPCB_MT");
	char *argv[48];
	char cmd[1024];
	int n = 0;
	va_list ap;

	cr_assert_not_null(exe, "TPCB_MT is not set (meson sets it to the path of tpcb_mt)");
	argv[n++] = (char *)exe;
	snprintf(cmd, sizeof cmd, "%s", exe);
	va_start(ap, first);
	for (const char *a = first; a && n < 46; a = va_arg(ap, const char *)) {
		argv[n++] = (char *)a;
		strncat(cmd, " ", sizeof cmd - strlen(cmd) - 1);
		strncat(cmd, a, sizeof cmd - strlen(cmd) - 1);
	}
	va_end(ap);
	argv[n] = NULL;

	pid_t pid;
	double t0 = now_s();
	int rc = posix_spawn(&pid, exe, NULL, NULL, argv, environ);
	cr_assert_eq(rc, 0, "posix_spawn %s: %s", exe, strerror(rc));
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	double secs = now_s() - t0;
	cr_log_info("%s: %.1f s", cmd, secs);
	cr_assert(WIFEXITED(status), "%s: killed by signal %d", cmd, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(WEXITSTATUS(status), 0, "%s: exit %d (its messages are above)", cmd, WEXITSTATUS(status));
}

/* Hot spot: one branch, 4 tellers, 16 accounts, 2 records a page on 1 KiB
 * pages, 8 cache frames: most transactions conflict and many deadlock,
 * STEAL writes back all the time, and checkpoints (every 4 KiB of log) run
 * while transactions change the pages they flush. */
#define HOT "--branches", "1", "--tellers", "4", "--accounts", "16", "--per-page", "2", "--page-size", "1024", \
	    "--cache", "8", "--seg-size", "65536", "--ckpt-bytes", "4096"

/* Plain runs: real io, group commit, checkpoints every 256 KiB of log. */
Test(tpcb, threads_2, .timeout = 120)
{
	run("--threads", "2", "--txns", "2000", "--ckpt-bytes", "262144", "--seed", "2", NULL);
}
Test(tpcb, threads_4, .timeout = 120)
{
	run("--threads", "4", "--txns", "1000", "--ckpt-bytes", "262144", "--seed", "4", NULL);
}
Test(tpcb, threads_8, .timeout = 120)
{
	run("--threads", "8", "--txns", "600", "--ckpt-bytes", "262144", "--seed", "8", NULL);
}
Test(tpcb, threads_32, .timeout = 120)
{
	run("--threads", "32", "--txns", "150", "--ckpt-bytes", "262144", "--seed", "32", NULL);
}
/* As tpfsd opens a store: the log's writer thread and the checkpoint
 * thread, with 64 KiB segments and a checkpoint every 32 KiB of log, so
 * that the thread recycles segments while the appenders make new ones
 * (log.c L13); the run ends with a kill and a recovery. */
Test(tpcb, background_8, .timeout = 120)
{
	run("--threads", "8", "--txns", "1500", "--seg-size", "65536", "--ckpt-bytes", "32768", "--background",
	    "--seed", "18", NULL);
}
Test(tpcb, hot_spot_8, .timeout = 120) { run("--threads", "8", "--txns", "1500", HOT, "--seed", "88", NULL); }
Test(tpcb, hot_spot_32, .timeout = 120) { run("--threads", "32", "--txns", "300", HOT, "--seed", "3232", NULL); }

/* Crash points: each a child under the io simulator that dies at a random
 * sync, just after a random commit record or checkpoint record is logged,
 * then recovery, the exact check, and a second recovery. */
Test(tpcb, crash_2, .timeout = 120)
{
	run("--threads", "2", "--txns", "300", "--crash", "60", "--ckpt-bytes", "32768", "--seed", "21", NULL);
}
Test(tpcb, crash_8, .timeout = 120)
{
	run("--threads", "8", "--txns", "100", "--crash", "60", "--ckpt-bytes", "32768", "--seed", "81", NULL);
}
Test(tpcb, crash_32, .timeout = 120)
{
	run("--threads", "32", "--txns", "30", "--crash", "40", "--ckpt-bytes", "32768", "--seed", "321", NULL);
}
Test(tpcb, crash_background_8, .timeout = 120)
{
	run("--threads", "8", "--txns", "100", "--crash", "40", "--seg-size", "65536", "--ckpt-bytes", "32768",
	    "--background", "--seed", "82", NULL);
}
Test(tpcb, crash_hot_spot_8, .timeout = 120)
{
	run("--threads", "8", "--txns", "100", "--crash", "60", HOT, "--seed", "89", NULL);
}
