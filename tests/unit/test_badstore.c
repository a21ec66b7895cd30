/*
 * test_badstore -- bad input: a store from a newer format version, missing
 * or truncated files, garbage log segments, a page with a bad checksum, bad
 * STORE paths, mkfs over a store.  Each must give the right error code, a
 * message (tp_errmsg) naming the file and what is wrong, and leave every
 * file of the store byte for byte as it was (hashed before and after).
 *
 * The base store has 64 KiB log segments, some committed pages, and was
 * closed cleanly (so no recovery is due when it is opened).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_util.h"
#include "tp.h"
#include "tp_test.h"
#include "util.h"

#define SEG 65536u

static char tdir[64], sdir[128], super_p[160], data_p[160], log_p[160];
static uint64_t pages[6];

static tp_options opts(void)
{
	tp_options o;
	su_options(&o, 4096, SEG, 0);
	return o;
}

static void seg_p(uint64_t idx, char *out, size_t n) { snprintf(out, n, "%s/log.%016" PRIx64, log_p, idx); }

static void setup(void)
{
	tp_options o = opts();
	tp_env *env;
	tp_txn *t;
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "bad"), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
	snprintf(super_p, sizeof super_p, "%s/super", sdir);
	snprintf(data_p, sizeof data_p, "%s/data", sdir);
	snprintf(log_p, sizeof log_p, "%s/log", sdir);
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_begin(env, &t), 0);
	for (int i = 0; i < 6; i++) {
		char s[32];
		cr_assert_eq(tp_page_alloc(t, 1, &pages[i]), 0);
		snprintf(s, sizeof s, "page %d data", i);
		cr_assert_eq(tp_page_write(t, pages[i], 100, s, (uint32_t)strlen(s)), 0);
	}
	cr_assert_eq(tp_commit(t, 0), 0);
	cr_assert_eq(tp_close(env), 0);
}

static void teardown(void) { su_rmtree(tdir); }

static int mentions(const char *what) { return strstr(tp_errmsg(), what) != NULL; }

/* tp_open must fail with want, naming file (if not NULL) and cause (if not
 * NULL), and change no file under the test directory; so must a read-only
 * open, unless the damage is one only recovery finds (ro_ok). */
static void refused_ro(int want, const char *file, const char *cause, const char *what, int ro_ok)
{
	su_tree *before = su_tree_take(tdir);
	cr_assert_not_null(before);
	tp_options o = opts();
	tp_env *env = NULL;
	util_err_clear();
	int rc = tp_open(sdir, &o, &env);
	if (rc == 0) {
		tp_crash_close(env);
		cr_assert_fail("%s: the store was opened", what);
	}
	cr_assert_eq(rc, want, "%s: rc %d (%s), expected %d (%s); message: %s", what, rc, tp_strerror(rc), want,
		     tp_strerror(want), tp_errmsg());
	if (file)
		cr_assert(mentions(file), "%s: the message does not name %s: '%s'", what, file, tp_errmsg());
	if (cause)
		cr_assert(mentions(cause), "%s: the message does not say '%s': '%s'", what, cause, tp_errmsg());
	su_tree *after = su_tree_take(tdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "%s: the store was modified: %s", what, why);
	su_tree_free(before);
	su_tree_free(after);
	/* the read-only open used by inspection refuses the same way */
	o.readonly = 1;
	rc = tp_open(sdir, &o, &env);
	if (rc == 0)
		tp_close(env);
	if (!ro_ok || rc != 0)
		cr_assert_eq(rc, want, "%s, read-only: rc %d: %s", what, rc, tp_errmsg());
}

static void refused(int want, const char *file, const char *cause, const char *what)
{
	refused_ro(want, file, cause, what, 0);
}

TestSuite(bad, .init = setup, .fini = teardown, .timeout = 60);

Test(bad, the_base_store_is_fine)
{
	tp_options o = opts();
	tp_env *env;
	char b[16];
	cr_assert_eq(tp_open(sdir, &o, &env), 0);
	cr_assert_eq(tp_page_read(env, pages[5], 100, b, 11), 0);
	cr_assert_arr_eq(b, "page 5 data", 11);
	tp_crash_close(env);
}

Test(bad, newer_format_version)
{
	unsigned char b[512];
	cr_assert_eq(su_raw_read(super_p, 0, b, sizeof b, NULL), 0);
	util_put32(b + 8, util_get32(b + 8) + 1);
	util_put32(b + 508, util_crc32c(0, b, 508));
	cr_assert_eq(su_raw_write(super_p, 0, b, sizeof b), 0);
	refused(TP_EVERSION, super_p, "version", "newer version");
}

Test(bad, superblock_checksum)
{
	cr_assert_eq(su_raw_flip(super_p, 60, 0x40), 0);
	refused(TP_ECORRUPT, super_p, "checksum", "superblock checksum");
}

Test(bad, missing_super)
{
	cr_assert_eq(unlink(super_p), 0);
	refused(TP_EBADSTORE, super_p, "missing", "no super");
}

Test(bad, truncated_super)
{
	cr_assert_eq(su_raw_truncate(super_p, 700), 0);
	refused(TP_ECORRUPT, super_p, "truncated", "super cut to 700 bytes");
	cr_assert_eq(su_raw_truncate(super_p, 0), 0);
	refused(TP_ECORRUPT, super_p, "truncated", "empty super");
}

Test(bad, missing_data)
{
	cr_assert_eq(unlink(data_p), 0);
	refused(TP_EBADSTORE, data_p, "missing", "no data");
}

/* The page file lost its tail: allocated, written pages are gone.  They
 * must not read back as empty pages without a word. */
Test(bad, truncated_data)
{
	tp_options o = opts();
	tp_env *env;
	int64_t size = su_raw_size(data_p);
	cr_assert_gt(size, (int64_t)((pages[5] + 1) * 4096 - 1), "the pages were written back at close");
	cr_assert_eq(su_raw_truncate(data_p, pages[2] * 4096), 0);
	su_tree *before = su_tree_take(tdir);
	int rc = tp_open(sdir, &o, &env);
	if (rc == 0) {
		char b[16];
		util_err_clear();
		int rc2 = tp_page_read(env, pages[5], 100, b, 11);
		tp_crash_close(env);
		cr_assert_neq(rc2, 0,
			      "page %" PRIu64 " is allocated and was written, but the page file now ends before it: "
			      "it reads back as zeros without an error",
			      pages[5]);
		cr_assert(mentions(data_p), "%s", tp_errmsg());
	} else {
		cr_assert(mentions(data_p), "rc %d: %s", rc, tp_errmsg());
	}
	su_tree *after = su_tree_take(tdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "%s", why);
	su_tree_free(before);
	su_tree_free(after);
}

Test(bad, missing_start_log_segment)
{
	char p[256];
	seg_p(0, p, sizeof p);
	cr_assert_eq(unlink(p), 0);
	refused(TP_EBADSTORE, p, "missing", "no log.0");
}

Test(bad, truncated_log_segment)
{
	char p[256];
	seg_p(0, p, sizeof p);
	cr_assert_eq(su_raw_truncate(p, SEG / 2), 0);
	refused(TP_ECORRUPT, p, "truncated", "log.0 cut in half");
	cr_assert_eq(su_raw_truncate(p, 100), 0);
	refused(TP_ECORRUPT, p, "truncated", "log.0 cut inside its header");
}

Test(bad, truncated_spare_log_segment)
{
	char p[256];
	seg_p(1, p, sizeof p);
	cr_assert_eq(su_raw_size(p), SEG, "the spare segment exists");
	cr_assert_eq(su_raw_truncate(p, 4096), 0);
	refused(TP_ECORRUPT, p, "truncated", "spare cut");
}

static void garbage(const char *path, uint64_t off, size_t len, uint64_t seed)
{
	unsigned char b[4096];
	cr_assert_leq(len, sizeof b);
	for (size_t i = 0; i < len; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (unsigned char)(seed >> 56);
	}
	cr_assert_eq(su_raw_write(path, off, b, len), 0);
}

Test(bad, garbage_log_segment_header)
{
	char p[256];
	seg_p(0, p, sizeof p);
	garbage(p, 0, 512, 1);
	refused(TP_ECORRUPT, p, "log segment", "garbage over log.0's header");
}

Test(bad, garbage_spare_segment_header)
{
	char p[256];
	seg_p(1, p, sizeof p);
	garbage(p, 0, 512, 2);
	refused(TP_ECORRUPT, p, NULL, "garbage over the spare's header");
}

Test(bad, garbage_over_the_checkpoint_record)
{
	store *st;
	log_mgr *lg;
	char p[256];
	cr_assert_eq(su_log_open_ro(sdir, &st, &lg), 0);
	uint64_t ck = store_master_get(st)->ckpt_lsn;
	log_close(lg);
	store_close(st);
	seg_p(ck / SEG, p, sizeof p);
	garbage(p, ck % SEG, 200, 3);
	char lsn[40];
	snprintf(lsn, sizeof lsn, "LSN %" PRIu64, ck);
	/* (a read-only open does not recover, so it need not read the checkpoint) */
	refused_ro(TP_ECORRUPT, lsn, "checkpoint", "the checkpoint named by the master is garbage", 1);
	/* the message says what is wrong there, readably, once */
	cr_assert(mentions(log_p), "names the log: '%s'", tp_errmsg());
	const char *m = tp_errmsg(), *first = strstr(m, "checkpoint");
	cr_assert(first && !strstr(first + 1, "checkpoint record at"), "a garbled message: '%s'", m);
}

Test(bad, log_segment_of_another_store)
{
	char other[160], p[256], q[256], cmd[700];
	tp_options o = opts();
	snprintf(other, sizeof other, "%s/other", tdir);
	cr_assert_eq(tp_mkfs(other, &o), 0);
	seg_p(1, p, sizeof p);
	snprintf(q, sizeof q, "%s/log/log.%016x", other, 1);
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", q, p);
	cr_assert_eq(system(cmd), 0);
	refused(TP_ECORRUPT, p, "another store", "a segment from another store");
}

/* A segment that holds committed records is gone while later segments
 * exist: the log must not silently end before it. */
Test(bad, missing_log_segment_with_records)
{
	tp_options o = opts();
	tp_env *env;
	tp_txn *t;
	unsigned char b[4080];
	memset(b, 0x77, sizeof b);
	cr_assert_eq(tp_open(sdir, &o, &env), 0);
	for (int i = 0; i < 40; i++) { /* ~5 segments of committed changes */
		cr_assert_eq(tp_begin(env, &t), 0);
		b[0] = (unsigned char)i;
		cr_assert_eq(tp_page_write(t, pages[i % 6], 0, b, sizeof b), 0);
		cr_assert_eq(tp_commit(t, 0), 0);
	}
	tp_crash_close(env); /* recovery will need all of it */
	char p[256], last[256];
	uint64_t k = 0;
	for (uint64_t i = 0; i < 64; i++) {
		seg_p(i, p, sizeof p);
		if (su_raw_size(p) >= 0)
			k = i;
	}
	cr_assert_geq(k, 4, "several segments");
	/* the newest segment that holds records: the one before the spares */
	seg_p(k - 1, last, sizeof last);
	cr_assert_eq(unlink(last), 0);
	refused(TP_ECORRUPT, last, NULL, "the newest segment with records is missing");
}

Test(bad, missing_middle_log_segment)
{
	tp_options o = opts();
	tp_env *env;
	tp_txn *t;
	unsigned char b[4080];
	memset(b, 0x66, sizeof b);
	cr_assert_eq(tp_open(sdir, &o, &env), 0);
	for (int i = 0; i < 40; i++) {
		cr_assert_eq(tp_begin(env, &t), 0);
		cr_assert_eq(tp_page_write(t, pages[i % 6], 0, b, sizeof b), 0);
		cr_assert_eq(tp_commit(t, 0), 0);
	}
	tp_crash_close(env);
	char p[256];
	seg_p(1, p, sizeof p);
	cr_assert_eq(unlink(p), 0);
	su_tree *before = su_tree_take(tdir);
	tp_env *e2 = NULL;
	int rc = tp_open(sdir, &o, &e2);
	if (rc == 0)
		tp_crash_close(e2);
	cr_assert(rc == TP_ECORRUPT || rc == TP_EBADSTORE, "rc %d: %s", rc, tp_errmsg());
	su_tree *after = su_tree_take(tdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "%s", why);
	su_tree_free(before);
	su_tree_free(after);
}

/* A bad page checksum is found when the page is read (after a clean close
 * recovery does not read it): TP_ECORRUPT naming the file and page. */
Test(bad, page_with_a_bad_checksum)
{
	tp_options o = opts();
	tp_env *env;
	char b[16], word[40];
	cr_assert_eq(su_raw_flip(data_p, pages[4] * 4096 + 2000, 0x08), 0);
	su_tree *before = su_tree_take(tdir);
	for (int ro = 0; ro < 2; ro++) {
		o.readonly = ro;
		cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_page_read(env, pages[3], 100, b, 11), 0, "other pages are fine");
		util_err_clear();
		int rc = tp_page_read(env, pages[4], 100, b, 11);
		cr_assert_eq(rc, TP_ECORRUPT, "rc %d", rc);
		cr_assert(mentions(data_p), "names the file: %s", tp_errmsg());
		snprintf(word, sizeof word, "page %" PRIu64 ":", pages[4]);
		cr_assert(mentions(word), "names the page (%s): %s", word, tp_errmsg());
		cr_assert(mentions("checksum"), "%s", tp_errmsg());
		cr_assert_eq(tp_debug_pinned(env), 0);
		tp_crash_close(env);
	}
	su_tree *after = su_tree_take(tdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "%s", why);
	su_tree_free(before);
	su_tree_free(after);
}

/* Where the log holds the page's image (a change after the last
 * checkpoint), recovery rebuilds a page whose checksum fails. */
Test(bad, bad_page_rebuilt_from_the_log)
{
	tp_options o = opts();
	tp_env *env;
	tp_txn *t;
	char b[16];
	cr_assert_eq(tp_open(sdir, &o, &env), 0);
	cr_assert_eq(tp_begin(env, &t), 0);
	cr_assert_eq(tp_page_write(t, pages[2], 300, "rebuilt!", 8), 0);
	cr_assert_eq(tp_commit(t, 0), 0);
	tp_crash_close(env);
	cr_assert_eq(su_raw_flip(data_p, pages[2] * 4096 + 50, 0x01), 0);
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "recovery rebuilds the page: %s", tp_errmsg());
	cr_assert_eq(tp_page_read(env, pages[2], 300, b, 8), 0, "%s", tp_errmsg());
	cr_assert_arr_eq(b, "rebuilt!", 8);
	cr_assert_eq(tp_page_read(env, pages[2], 100, b, 11), 0);
	cr_assert_arr_eq(b, "page 2 data", 11);
	cr_assert_eq(tp_close(env), 0);
}

Test(bad, store_path_not_a_directory_or_missing)
{
	tp_options o = opts();
	tp_env *env;
	char f[160], none[160];
	snprintf(f, sizeof f, "%s/plain", tdir);
	FILE *fp = fopen(f, "w");
	cr_assert_not_null(fp);
	fclose(fp);
	cr_assert_eq(tp_open(f, &o, &env), TP_EBADSTORE);
	cr_assert(mentions(f), "%s", tp_errmsg());
	cr_assert(mentions("not a directory"), "%s", tp_errmsg());
	snprintf(none, sizeof none, "%s/none", tdir);
	cr_assert_eq(tp_open(none, &o, &env), TP_EBADSTORE);
	cr_assert(mentions(none), "%s", tp_errmsg());
	cr_assert_eq(su_raw_size(none), -1, "open does not create a store");
	/* a directory that is not a store */
	cr_assert_eq(tp_open(tdir, &o, &env), TP_EBADSTORE);
	cr_assert(mentions("super"), "%s", tp_errmsg());
}

Test(bad, mkfs_over_an_existing_store)
{
	tp_options o = opts();
	su_tree *before = su_tree_take(tdir);
	cr_assert_eq(tp_mkfs(sdir, &o), EEXIST);
	cr_assert(mentions(sdir), "%s", tp_errmsg());
	char f[160];
	snprintf(f, sizeof f, "%s/plain", tdir);
	FILE *fp = fopen(f, "w");
	cr_assert_not_null(fp);
	fclose(fp);
	cr_assert_eq(tp_mkfs(f, &o), EEXIST, "a regular file");
	cr_assert_eq(su_raw_size(f), 0);
	unlink(f);
	su_tree *after = su_tree_take(tdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "mkfs changed the existing store: %s", why);
	su_tree_free(before);
	su_tree_free(after);
	/* bad options are refused before anything is made */
	char n[160];
	snprintf(n, sizeof n, "%s/new", tdir);
	o.page_size = 3000;
	cr_assert_eq(tp_mkfs(n, &o), TP_EINVAL);
	o = opts();
	o.seg_size = 4096;
	cr_assert_eq(tp_mkfs(n, &o), TP_EINVAL);
	cr_assert_eq(su_raw_size(n), -1, "nothing was made");
}
