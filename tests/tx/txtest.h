/*
 * txtest.h -- what the tx suites (test_tx.c, test_tx_clients.c) share:
 * time, and the check that the tx tools are built.
 */
#ifndef TPFS_TXTEST_H
#define TPFS_TXTEST_H

#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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

#endif
