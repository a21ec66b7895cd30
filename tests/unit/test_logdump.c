/*
 * test_logdump -- the log dumper (tp_logdump, and `tpfs logdump` when the
 * build passes its path in TPFS_BIN) parses the logs the tests produce:
 * every record type appears by name, every line parses, the LSNs are those
 * a log scan finds, the record count line matches the scan, nothing is
 * UNKNOWN, and dumping changes nothing in the store (not even a torn tail).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "log.h"
#include "op.h"
#include "store_util.h"
#include "tp.h"
#include "txn.h"
#include "util.h"

static char tdir[64], sdir[128];

static void setup(void)
{
	tp_options o;
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "dump"), 0);
	snprintf(sdir, sizeof sdir, "%s/s", tdir);
	su_options(&o, 4096, 65536, 0);
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
}

static void teardown(void) { su_rmtree(tdir); }

/* A workload whose log, from the log start on, holds every record type. */
static void every_type_workload(void)
{
	su_engine e;
	txn *t;
	uint64_t a, b, c;
	cr_assert_eq(su_engine_open(sdir, 64, &e), 0, "%s", tp_errmsg());
	cr_assert_eq(txn_begin(e.tm, &t), 0);
	cr_assert_eq(op_page_alloc(t, 1, &a), 0);
	cr_assert_eq(op_page_set(t, a, 16, "old page", 8), 0);
	cr_assert_eq(op_page_alloc(t, 1, &b), 0);
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(su_engine_checkpoint(&e), 0); /* CKPT; the horizon moves */

	cr_assert_eq(txn_begin(e.tm, &t), 0);
	cr_assert_eq(op_page_set(t, a, 40, "changed", 7), 0); /* FPI, PAGE_SET */
	cr_assert_eq(txn_commit(t, 0), 0);                     /* COMMIT */
	cr_assert_eq(txn_begin(e.tm, &t), 0);
	cr_assert_eq(op_page_alloc(t, 2, &c), 0); /* PAGE_ALLOC, PAGE_INIT */
	cr_assert_eq(op_page_free(t, b), 0);      /* PAGE_FREE */
	cr_assert_eq(txn_commit(t, 0), 0);
	cr_assert_eq(txn_begin(e.tm, &t), 0);
	uint64_t saved = txn_nta_begin(t);
	uint64_t d;
	cr_assert_eq(op_page_alloc(t, 3, &d), 0);
	cr_assert_eq(txn_nta_end(t, saved), 0); /* NTA */
	cr_assert_eq(op_page_set(t, c, 16, "undone", 6), 0);
	cr_assert_eq(op_page_free(t, a), 0);
	cr_assert_eq(txn_abort(t), 0); /* CLRs, ABORT */
	cr_assert_eq(txn_begin(e.tm, &t), 0);
	cr_assert_eq(op_page_set(t, c, 16, "in flight", 9), 0); /* a loser */
	cr_assert_eq(log_flush(e.lg, log_end(e.lg)), 0);
	su_engine_crash(&e); /* no checkpoint at close: the records stay */
}

typedef struct dump {
	char *text;
	size_t len;
	uint64_t lsn[4096];
	char type[4096][32];
	size_t n;
	uint64_t count_line; /* from "# N records" */
	int has_count, clr_lines, unknown;
} dump;

static void parse(dump *d)
{
	char *save = NULL;
	d->n = 0;
	d->has_count = d->clr_lines = d->unknown = 0;
	char *copy = strdup(d->text);
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#') {
			unsigned long long n;
			if (sscanf(line, "# %llu records", &n) == 1) {
				d->count_line = n;
				d->has_count++;
			}
			continue;
		}
		unsigned long long lsn, txid, prev;
		char name[32];
		int k = sscanf(line, "%llu txn %llu prev %llu %31s", &lsn, &txid, &prev, name);
		cr_assert_eq(k, 4, "an unparsable line: '%s'", line);
		cr_assert_lt(d->n, 4096);
		d->lsn[d->n] = lsn;
		snprintf(d->type[d->n], sizeof d->type[d->n], "%s", name);
		d->n++;
		if (strstr(line, " CLR undo_next "))
			d->clr_lines++;
		if (strstr(line, "UNKNOWN"))
			d->unknown++;
	}
	free(copy);
}

static void dump_api(dump *d, uint64_t from)
{
	FILE *f = open_memstream(&d->text, &d->len);
	cr_assert_not_null(f);
	int rc = tp_logdump(sdir, f, from);
	fclose(f);
	cr_assert_eq(rc, 0, "tp_logdump: %d %s", rc, tp_errmsg());
	parse(d);
}

/* The LSNs and type names a log scan finds from the log start. */
static size_t scan(uint64_t *lsn, char (*type)[32], size_t max)
{
	store *st;
	log_mgr *lg;
	log_scan *s;
	log_rec r;
	size_t n = 0;
	cr_assert_eq(su_log_open_ro(sdir, &st, &lg), 0, "%s", tp_errmsg());
	cr_assert_eq(log_scan_open(lg, log_start(lg), &s), 0);
	while (log_scan_next(s, &r) == 0) {
		cr_assert_lt(n, max);
		lsn[n] = r.lsn;
		const op_def *op = op_get(r.type);
		snprintf(type[n], 32, "%s", op ? op->name : "UNKNOWN");
		n++;
	}
	log_scan_close(s);
	log_close(lg);
	store_close(st);
	return n;
}

static void check_against_scan(const dump *d)
{
	static uint64_t lsn[4096];
	static char type[4096][32];
	size_t n = scan(lsn, type, 4096);
	uint64_t counted;
	cr_assert_eq(su_log_count(sdir, &counted), 0);
	cr_assert_eq(counted, n);
	cr_assert_eq(d->has_count, 1, "one record count line");
	cr_assert_eq(d->count_line, n, "the count line says %" PRIu64 ", a scan finds %zu", d->count_line, n);
	cr_assert_eq(d->n, n, "%zu record lines, %zu records", d->n, n);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(d->lsn[i], lsn[i], "line %zu", i);
		cr_assert_str_eq(d->type[i], type[i], "line %zu (LSN %" PRIu64 ")", i, lsn[i]);
	}
	cr_assert_eq(d->unknown, 0, "no UNKNOWN record");
}

TestSuite(logdump, .init = setup, .fini = teardown, .timeout = 60);

Test(logdump, prints_every_record_type)
{
	static dump d;
	every_type_workload();
	su_tree *before = su_tree_take(sdir);
	dump_api(&d, 0);
	check_against_scan(&d);
	/* the transaction and page operations (ids 1..9); later ones belong to
	 * other modules' workloads */
	static const char *names[] = {"COMMIT", "ABORT", "CKPT", "FPI", "NTA", "PAGE_SET", "PAGE_INIT",
				      "PAGE_ALLOC", "PAGE_FREE"};
	for (size_t id = 0; id < sizeof names / sizeof names[0]; id++) {
		const char *name = names[id];
		cr_assert_str_eq(op_get((uint16_t)(id + 1))->name, name);
		int found = 0;
		for (size_t i = 0; i < d.n && !found; i++)
			found = strcmp(d.type[i], name) == 0;
		cr_assert(found, "no %s record in the dump:\n%s", name, d.text);
	}
	cr_assert_geq(d.clr_lines, 3, "the CLRs are shown as CLRs (%d):\n%s", d.clr_lines, d.text);
	cr_assert_not_null(strstr(d.text, "# store "), "the header line");
	cr_assert_not_null(strstr(d.text, "# checkpoint at LSN "));
	su_tree *after = su_tree_take(sdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "logdump changed the store: %s", why);
	su_tree_free(before);
	su_tree_free(after);
	free(d.text);
}

Test(logdump, from_an_lsn)
{
	static dump all, part;
	every_type_workload();
	dump_api(&all, 0);
	cr_assert_gt(all.n, 6);
	uint64_t mid = all.lsn[all.n / 2];
	dump_api(&part, mid);
	cr_assert_eq(part.n, all.n - all.n / 2);
	cr_assert_eq(part.lsn[0], mid);
	cr_assert_eq(part.count_line, part.n);
	free(all.text);
	free(part.text);
}

/* TP_LOGDUMP_ALL (`tpfs logdump -a`): records a checkpoint left behind in
 * the segment files are shown too, from the first segment's first record,
 * followed by exactly what the plain dump shows. */
Test(logdump, all_reaches_before_the_log_start)
{
	static dump from_start, all;
	every_type_workload(); /* its checkpoint moves the log start past its first transaction */
	dump_api(&from_start, 0);
	dump_api(&all, TP_LOGDUMP_ALL);
	cr_assert_gt(all.n, from_start.n, "no record before the log start was shown");
	cr_assert_eq(all.lsn[0], LOG_SEG_HDR, "the dump starts at the first record of the oldest segment");
	cr_assert_not_null(strstr(all.text, "below the log start"), "the dump says it reaches below the log start");
	size_t skip = all.n - from_start.n;
	for (size_t i = 0; i < from_start.n; i++)
		cr_assert_eq(all.lsn[skip + i], from_start.lsn[i], "record %zu", i);
	cr_assert_eq(all.count_line, all.n);
	cr_assert_eq(all.unknown, 0);
	free(from_start.text);
	free(all.text);
}

/* every_type_workload, then a byte at offset at of one record flipped:
 * the last one as torn by a power cut (which, SIZE_MAX, leaves the mark,
 * L14, at its start), else (0) the middle one, below the mark: damage.
 * The records' LSNs go to lsn; their count is returned; seg is the
 * damaged segment file. */
static size_t workload_with_damage(uint64_t *lsn, size_t max, size_t which, uint32_t at, char *seg, size_t segn,
				   char *logdir, size_t logn)
{
	static char type[4096][32];
	every_type_workload();
	size_t n = scan(lsn, type, max < 4096 ? max : 4096);
	cr_assert_gt(n, 10);
	size_t k = which == SIZE_MAX ? n - 1 : n / 2;
	cr_assert_eq(su_logdir(sdir, logdir, logn), 0);
	snprintf(seg, segn, "%s/log.%016" PRIx64, logdir, lsn[k] / 65536);
	if (which == SIZE_MAX)
		cr_assert_eq(su_raw_mark(logdir, lsn[k]), 0);
	cr_assert_eq(su_raw_flip(seg, lsn[k] % 65536 + at, 0xff), 0);
	return n;
}

/* A torn tail is shown as cut, but not cut on disk: dumping is reading. */
Test(logdump, torn_tail_is_left_alone)
{
	static dump d;
	static uint64_t lsn[4096];
	char seg[256], logdir[200];
	size_t n = workload_with_damage(lsn, 4096, SIZE_MAX, 70, seg, sizeof seg, logdir, sizeof logdir);
	su_tree *before = su_tree_take(sdir);
	dump_api(&d, 0);
	cr_assert_eq(d.n, n - 1, "the torn record is not printed");
	cr_assert_eq(d.count_line, n - 1);
	su_tree *after = su_tree_take(sdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "logdump repaired the tail: %s", why);
	su_tree_free(before);
	su_tree_free(after);
	free(d.text);
}

/* Damage below the durable mark (log.c L15): the dump prints every record
 * before it, then the damage, fails, and changes nothing -- the way to look
 * at a log the mount refuses. */
Test(logdump, damage_is_dumped_up_to_it_and_reported)
{
	static dump d;
	static uint64_t lsn[4096];
	char seg[256], logdir[200];
	size_t n = workload_with_damage(lsn, 4096, 0, 12, seg, sizeof seg, logdir, sizeof logdir); /* its LSN field */
	size_t k = n / 2;
	su_tree *before = su_tree_take(sdir);
	FILE *f = open_memstream(&d.text, &d.len);
	int rc = tp_logdump(sdir, f, 0);
	fclose(f);
	cr_assert_eq(rc, TP_ECORRUPT, "rc %d", rc);
	cr_assert_not_null(strstr(tp_errmsg(), seg), "%s", tp_errmsg());
	parse(&d);
	cr_assert_eq(d.n, k, "the %zu records before the damage are printed (%zu)", k, d.n);
	char want[300];
	snprintf(want, sizeof want, "# DAMAGED: %s", seg);
	cr_assert_not_null(strstr(d.text, want), "the dump ends naming the damage:\n%s", d.text + d.len / 2);
	su_tree *after = su_tree_take(sdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "logdump changed the store: %s", why);
	su_tree_free(before);
	su_tree_free(after);
	free(d.text);
}

/* The logs of a longer random workload through tp.h, crashed. */
Test(logdump, parses_a_random_workload)
{
	static dump d;
	tp_options o;
	tp_env *env;
	su_options(&o, 0, 0, 16);
	o.ckpt_log_bytes = 200000; /* a few checkpoints on the way */
	cr_assert_eq(tp_open(sdir, &o, &env), 0);
	uint64_t s = 12345, pages[64];
	size_t np = 0;
	for (int i = 0; i < 300; i++) {
		tp_txn *t;
		cr_assert_eq(tp_begin(env, &t), 0);
		for (int k = 0; k < 4; k++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			unsigned r = (unsigned)(s >> 33);
			if (np < 4 || (r % 10 == 0 && np < 64)) {
				cr_assert_eq(tp_page_alloc(t, 1, &pages[np]), 0);
				np++;
			} else if (r % 10 == 1 && np > 8) {
				uint64_t pg = pages[r % np];
				int a;
				cr_assert_eq(tp_page_allocated(env, pg, &a), 0);
				if (a && tp_page_free(t, pg) == 0) {
					pages[r % np] = pages[np - 1];
					np--;
				}
			} else {
				char b[100];
				memset(b, (int)r, sizeof b);
				uint64_t pg = pages[r % np];
				int a;
				cr_assert_eq(tp_page_allocated(env, pg, &a), 0);
				if (a)
					cr_assert_eq(tp_page_write(t, pg, r % 3900, b, 1 + r % 100), 0, "%s", tp_errmsg());
			}
		}
		if (i % 4 == 3)
			cr_assert_eq(tp_abort(t), 0);
		else
			cr_assert_eq(tp_commit(t, TP_COMMIT_NOSYNC), 0);
	}
	tp_stats st;
	tp_stats_get(env, &st);
	cr_assert_gt(st.checkpoints, 0);
	cr_assert_eq(tp_sync(env), 0);
	tp_crash_close(env);
	dump_api(&d, 0);
	check_against_scan(&d);
	cr_assert_gt(d.n, 100);
	free(d.text);
}

/* The built command prints what the library prints. */
Test(logdump, tpfs_command)
{
	static dump d;
	const char *bin = getenv("TPFS_BIN");
	if (!bin || !*bin)
		cr_skip_test("TPFS_BIN is not set (meson sets it to the built tpfs)");
	every_type_workload();
	dump_api(&d, 0);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "'%s' logdump '%s'", bin, sdir);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	char *out = NULL;
	size_t cap = 0, len = 0;
	char buf[4096];
	size_t k;
	while ((k = fread(buf, 1, sizeof buf, p)) > 0) {
		if (len + k + 1 > cap) {
			cap = 2 * (len + k + 1);
			out = realloc(out, cap);
			cr_assert_not_null(out);
		}
		memcpy(out + len, buf, k);
		len += k;
	}
	int st = pclose(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d", cmd, st);
	cr_assert_not_null(out);
	out[len] = 0;
	cr_assert_str_eq(out, d.text, "`tpfs logdump` and tp_logdump differ");
	free(out);

	/* -f LSN, and a failure's exit status and message */
	snprintf(cmd, sizeof cmd, "'%s' logdump -f %" PRIu64 " '%s' | grep -c -v '^#'", bin, d.lsn[d.n - 2], sdir);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	unsigned n = 0;
	cr_assert_eq(fscanf(p, "%u", &n), 1);
	pclose(p);
	cr_assert_eq(n, 2, "-f starts at the given LSN");
	snprintf(cmd, sizeof cmd, "'%s' logdump '%s/none' 2>&1", bin, tdir);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	k = fread(buf, 1, sizeof buf - 1, p);
	buf[k] = 0;
	st = pclose(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "a missing store fails with status 1 (%d)", st);
	cr_assert_not_null(strstr(buf, "/none"), "the message names the store: %s", buf);
	free(d.text);
}
