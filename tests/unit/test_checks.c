/*
 * test_checks -- the engine's debug checks (core/DESIGN.md, "Checks") are
 * compiled into every test build and stop a process that breaks a rule: a
 * page claiming a record beyond the log's end (buf.c B9), an update of a
 * page that already holds a later record (W1).  And the same calls used
 * correctly stop nothing.
 *
 * Each rule is broken on purpose in a test of its own (Criterion runs each
 * in its own process) that expects SIGABRT.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "op.h"
#include "store_util.h"
#include "tp.h"
#include "txn.h"
#include "util.h"

#define PS 4096u

static char tdir[64], sdir[128];
static su_engine E;

static void setup(void)
{
	tp_options o;
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "checks"), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
	su_options(&o, PS, 1u << 20, 0);
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(su_engine_open(sdir, 64, &E), 0, "open: %s", tp_errmsg());
}

static void teardown(void)
{
	if (E.st)
		su_engine_crash(&E);
	su_rmtree(tdir);
}

/* A page allocated and committed, for the tests to misuse. */
static uint64_t a_page(void)
{
	txn *t;
	uint64_t pgno;
	cr_assert_eq(txn_begin(E.tm, &t), 0);
	cr_assert_eq(op_page_alloc(t, 1, &pgno), 0, "%s", tp_errmsg());
	cr_assert_eq(txn_commit(t, TXN_SYNC), 0);
	return pgno;
}

Test(checks, on_in_test_builds)
{
#ifndef TP_DEBUG_CHECKS
	cr_assert_fail("a test build without -Ddebug_checks=true: the engine's checks are off");
#endif
}

Test(checks, correct_use_passes, .init = setup, .fini = teardown)
{
	uint64_t pgno = a_page();
	txn *t;
	buf_page *pg;
	unsigned char v[8] = "checked";
	cr_assert_eq(txn_begin(E.tm, &t), 0);
	cr_assert_eq(op_page_set(t, pgno, BUF_HDR, v, sizeof v), 0, "%s", tp_errmsg());
	cr_assert_eq(txn_commit(t, TXN_SYNC), 0);
	cr_assert_eq(buf_get(E.bp, pgno, BUF_S, &pg), 0);
	cr_assert_eq(memcmp(buf_data(pg) + BUF_HDR, v, sizeof v), 0);
	buf_put(E.bp, pg);
	cr_assert_eq(buf_flush_all(E.bp), 0); /* write-backs: B1, B4 */
	cr_assert_eq(su_engine_close(&E), 0);
}

Test(checks, page_lsn_past_log_end_stops, .init = setup, .fini = teardown, .signal = SIGABRT)
{
	uint64_t pgno = a_page();
	buf_page *pg;
	cr_assert_eq(buf_get(E.bp, pgno, BUF_X, &pg), 0);
	buf_set_lsn(pg, log_end(E.lg) + 1000); /* B9: a record the log does not hold */
	buf_put(E.bp, pg);
}

Test(checks, update_below_page_lsn_stops, .init = setup, .fini = teardown, .signal = SIGABRT)
{
	uint64_t pgno = a_page();
	txn *t;
	buf_page *pg;
	unsigned char args[4 + 2] = {0};
	cr_assert_eq(txn_begin(E.tm, &t), 0);
	cr_assert_eq(buf_get(E.bp, pgno, BUF_X, &pg), 0);
	buf_set_lsn(pg, UINT64_MAX - 1); /* W1: as if a later record were on it */
	(void)txn_update(t, pg, OP_PAGE_SET, args, sizeof args);
	buf_put(E.bp, pg);
}
