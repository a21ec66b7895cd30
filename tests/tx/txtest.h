/*
 * txtest.h -- what the tx suites (test_tx.c, test_tx_clients.c) share:
 * time, paths, the check that the tx tools are built, and main.
 */
#ifndef TPFS_TXTEST_H
#define TPFS_TXTEST_H

#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* base/rel, in one of 16 rotating buffers (so that one call may use a few
 * such paths at once). */
static inline const char *txtest_path(const char *base, const char *rel)
{
	static char b[16][700];
	static int i;
	char *p = b[i++ % 16];
	snprintf(p, sizeof b[0], "%s/%s", base, rel);
	return p;
}

/* The tx tools must be built (tools/, TX_BIN): a test of them fails loudly
 * otherwise. */
static inline void need_tools(void)
{
	static const char *const tools[] = {"txbegin", "txcommit", "txabort", "txrun", "txstatus"};
	const char *bin = getenv("TX_BIN");
	for (size_t i = 0; i < sizeof tools / sizeof *tools; i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s/%s", bin ? bin : "(TX_BIN unset)", tools[i]);
		cr_assert(access(p, X_OK) == 0, "%s is not an executable: the tx tools (tools/) must be built first", p);
	}
}

/* A suite's main: with "--helper" first, the suite's own program that its
 * shells run (helper(argc, argv) of the arguments after it); else the
 * Criterion tests.  self receives the program's path (/proc/self/exe). */
static inline int txtest_main(int argc, char *argv[], char *self, size_t size, int (*helper)(int, char **))
{
	ssize_t n = readlink("/proc/self/exe", self, size - 1);
	self[n > 0 ? n : 0] = 0;
	if (argc > 1 && !strcmp(argv[1], "--helper"))
		return helper(argc - 2, argv + 2);
	struct criterion_test_set *tests = criterion_initialize();
	int result = 0;
	if (criterion_handle_args(argc, argv, true))
		result = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	return result;
}

#endif
