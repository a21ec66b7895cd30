/*
 * test_store -- the superblock and the two checkpoint master slots: field
 * round trip, slots written alternately with the higher valid sequence
 * winning, a torn newest slot falling back to the older one, and every
 * refusal (version, magic, checksum, truncation, ranges, missing files)
 * leaving the files as they were (S3).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store_util.h"
#include "tp.h"
#include "util.h"

static char tdir[64], super_path[128];

static void setup(void)
{
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "store"), 0);
	snprintf(super_path, sizeof super_path, "%s/super", tdir);
}

static void teardown(void) { su_rmtree(tdir); }

static store_super mk_super(void)
{
	store_super sb = {.version = STORE_VERSION, .page_size = 8192, .seg_size = 1u << 20, .created = 1700000000};
	for (int i = 0; i < 16; i++)
		sb.uuid[i] = (uint8_t)(i * 17 + 3);
	snprintf(sb.logdir, sizeof sb.logdir, "/var/tmp/some-log-dir");
	return sb;
}

static void create_default(void)
{
	store_super sb = mk_super();
	store_master m = {.seq = 1, .ckpt_lsn = 1000, .log_start = 512};
	cr_assert_eq(store_create(tdir, &sb, &m), 0, "%s", tp_errmsg());
}

static store *open_ok(void)
{
	store *st;
	int rc = store_open(tdir, 0, &st);
	cr_assert_eq(rc, 0, "store_open: %d %s", rc, tp_errmsg());
	return st;
}

/* Reads master slot s (0 or 1) from disk: 1 if valid. */
static int raw_slot(int s, store_master *m)
{
	unsigned char b[512];
	cr_assert_eq(su_raw_read(super_path, 512u * (1 + (unsigned)s), b, sizeof b, NULL), 0);
	if (memcmp(b, "TPFSMSTR", 8) != 0 || util_get32(b + 508) != util_crc32c(0, b, 508))
		return 0;
	m->seq = util_get64(b + 8);
	m->ckpt_lsn = util_get64(b + 16);
	m->log_start = util_get64(b + 24);
	m->data_pages = util_get64(b + 32);
	return 1;
}

static void write_slot(int s, uint64_t seq, uint64_t ckpt, uint64_t start)
{
	unsigned char b[512];
	memset(b, 0, sizeof b);
	memcpy(b, "TPFSMSTR", 8);
	util_put64(b + 8, seq);
	util_put64(b + 16, ckpt);
	util_put64(b + 24, start);
	util_put32(b + 508, util_crc32c(0, b, 508));
	cr_assert_eq(su_raw_write(super_path, 512u * (1 + (unsigned)s), b, sizeof b), 0);
}

/* Patches the superblock: the u32 at off, with a correct checksum. */
static void patch_super32(size_t off, uint32_t v)
{
	unsigned char b[512];
	cr_assert_eq(su_raw_read(super_path, 0, b, sizeof b, NULL), 0);
	util_put32(b + off, v);
	util_put32(b + 508, util_crc32c(0, b, 508));
	cr_assert_eq(su_raw_write(super_path, 0, b, sizeof b), 0);
}

/* store_open must fail with want, name the super file, and write nothing. */
static void refused(int want, const char *what)
{
	su_tree *before = su_tree_take(tdir);
	store *st = NULL;
	util_err_clear();
	int rc = store_open(tdir, 0, &st);
	cr_assert_eq(rc, want, "%s: rc %d (%s), expected %d", what, rc, tp_errmsg(), want);
	cr_assert_not_null(strstr(tp_errmsg(), tdir), "%s: the message names the store: %s", what, tp_errmsg());
	su_tree *after = su_tree_take(tdir);
	char why[512];
	cr_assert(su_tree_equal(before, after, why, sizeof why), "%s: S3 broken: %s", what, why);
	su_tree_free(before);
	su_tree_free(after);
}

TestSuite(store, .init = setup, .fini = teardown, .timeout = 30);

Test(store, superblock_round_trip)
{
	create_default();
	cr_assert_eq(su_raw_size(super_path), 3 * 512);
	char tmp[160];
	snprintf(tmp, sizeof tmp, "%s/super.tmp", tdir);
	cr_assert_eq(access(tmp, F_OK), -1, "no temporary file is left behind");
	store *st = open_ok();
	store_super want = mk_super();
	const store_super *sb = store_sb(st);
	cr_assert_eq(sb->version, STORE_VERSION);
	cr_assert_eq(sb->page_size, want.page_size);
	cr_assert_eq(sb->seg_size, want.seg_size);
	cr_assert_eq(sb->created, want.created);
	cr_assert_arr_eq(sb->uuid, want.uuid, 16);
	cr_assert_str_eq(sb->logdir, want.logdir);
	const store_master *m = store_master_get(st);
	cr_assert_eq(m->seq, 1);
	cr_assert_eq(m->ckpt_lsn, 1000);
	cr_assert_eq(m->log_start, 512);
	store_close(st);
}

Test(store, master_slots_alternate)
{
	create_default();
	store_master m;
	cr_assert(raw_slot(0, &m));
	cr_assert_eq(m.seq, 1);
	cr_assert_not(raw_slot(1, &m), "slot 1 is empty after mkfs");
	store *st = open_ok();
	for (uint64_t i = 2; i <= 7; i++) {
		cr_assert_eq(store_master_put(st, 1000 * i, 100 * i, 10 * i), 0);
		const store_master *cur = store_master_get(st);
		cr_assert_eq(cur->seq, i);
		cr_assert_eq(cur->ckpt_lsn, 1000 * i);
		cr_assert_eq(cur->data_pages, 10 * i);
		int s = (int)(i % 2 == 0 ? 1 : 0); /* seq 2 goes to slot 1, 3 to slot 0, ... */
		cr_assert(raw_slot(s, &m), "seq %" PRIu64 " written to slot %d", i, s);
		cr_assert_eq(m.seq, i);
		cr_assert_eq(m.ckpt_lsn, 1000 * i);
		cr_assert_eq(m.log_start, 100 * i);
		cr_assert_eq(m.data_pages, 10 * i);
		cr_assert(raw_slot(1 - s, &m), "the other slot keeps the previous master");
		cr_assert_eq(m.seq, i - 1);
		store *st2 = open_ok();
		cr_assert_eq(store_master_get(st2)->seq, i, "a reopen finds the newest master");
		cr_assert_eq(store_master_get(st2)->ckpt_lsn, 1000 * i);
		cr_assert_eq(store_master_get(st2)->data_pages, 10 * i);
		cr_assert_eq(store_master_get(st2)->log_start, 100 * i);
		store_close(st2);
	}
	store_close(st);
}

Test(store, highest_valid_sequence_wins)
{
	create_default();
	write_slot(0, 10, 111, 11);
	write_slot(1, 5, 222, 22);
	store *st = open_ok();
	cr_assert_eq(store_master_get(st)->seq, 10);
	cr_assert_eq(store_master_get(st)->ckpt_lsn, 111);
	/* the next master must not overwrite the current one */
	cr_assert_eq(store_master_put(st, 333, 33, 0), 0);
	store_master m;
	cr_assert(raw_slot(0, &m));
	cr_assert_eq(m.seq, 10, "the slot of the master in force is kept");
	cr_assert(raw_slot(1, &m));
	cr_assert_eq(m.seq, 11);
	cr_assert_eq(m.ckpt_lsn, 333);
	store_close(st);

	write_slot(0, 4, 1, 1);
	write_slot(1, 9, 999, 99);
	st = open_ok();
	cr_assert_eq(store_master_get(st)->seq, 9);
	cr_assert_eq(store_master_get(st)->ckpt_lsn, 999);
	store_close(st);
}

Test(store, torn_newest_slot_falls_back)
{
	create_default();
	store *st = open_ok();
	cr_assert_eq(store_master_put(st, 2000, 200, 0), 0); /* seq 2, slot 1 */
	cr_assert_eq(store_master_put(st, 3000, 300, 0), 0); /* seq 3, slot 0 */
	store_close(st);

	/* a torn write: the first half of the sector new, the rest garbage */
	unsigned char junk[300];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (unsigned char)(i * 13 + 7);
	cr_assert_eq(su_raw_write(super_path, 512 + 200, junk, sizeof junk), 0);
	st = open_ok();
	cr_assert_eq(store_master_get(st)->seq, 2, "the older valid slot is in force");
	cr_assert_eq(store_master_get(st)->ckpt_lsn, 2000);
	cr_assert_eq(store_master_get(st)->log_start, 200);
	/* the next master replaces the torn slot, not the good one */
	cr_assert_eq(store_master_put(st, 4000, 400, 0), 0);
	store_close(st);
	store_master m;
	cr_assert(raw_slot(1, &m));
	cr_assert_eq(m.seq, 2);
	st = open_ok();
	cr_assert_eq(store_master_get(st)->seq, 3);
	cr_assert_eq(store_master_get(st)->ckpt_lsn, 4000);
	store_close(st);

	/* a single flipped bit is enough */
	cr_assert_eq(su_raw_flip(super_path, 512 + 17, 0x10), 0);
	st = open_ok();
	cr_assert_eq(store_master_get(st)->seq, 2);
	store_close(st);
}

Test(store, both_slots_damaged)
{
	create_default();
	store *st = open_ok();
	cr_assert_eq(store_master_put(st, 2000, 200, 0), 0);
	store_close(st);
	cr_assert_eq(su_raw_flip(super_path, 512 + 20, 1), 0);
	cr_assert_eq(su_raw_flip(super_path, 1024 + 20, 1), 0);
	refused(TP_ECORRUPT, "both slots bad");
	cr_assert_not_null(strstr(tp_errmsg(), "master"), "%s", tp_errmsg());
}

Test(store, newer_version_refused)
{
	create_default();
	patch_super32(8, STORE_VERSION + 1);
	refused(TP_EVERSION, "newer version");
	cr_assert_not_null(strstr(tp_errmsg(), super_path), "%s", tp_errmsg());
	cr_assert_not_null(strstr(tp_errmsg(), "version"), "%s", tp_errmsg());
}

Test(store, bad_superblocks_refused)
{
	create_default();
	cr_assert_eq(su_raw_flip(super_path, 100, 0x01), 0);
	refused(TP_ECORRUPT, "checksum");
	cr_assert_not_null(strstr(tp_errmsg(), "checksum"), "%s", tp_errmsg());
	cr_assert_eq(su_raw_flip(super_path, 100, 0x01), 0);
	store_close(open_ok());

	cr_assert_eq(su_raw_flip(super_path, 0, 0x20), 0);
	refused(TP_EBADSTORE, "magic");
	cr_assert_eq(su_raw_flip(super_path, 0, 0x20), 0);

	patch_super32(12, 1000); /* page size not a power of two */
	refused(TP_ECORRUPT, "page size");
	patch_super32(12, 8192);
	store *st = open_ok();
	store_close(st);

	cr_assert_eq(su_raw_truncate(super_path, 1000), 0);
	refused(TP_ECORRUPT, "truncated");
	cr_assert_not_null(strstr(tp_errmsg(), "truncated"), "%s", tp_errmsg());
	cr_assert_eq(su_raw_truncate(super_path, 0), 0);
	refused(TP_ECORRUPT, "empty");
}

Test(store, missing_files_refused)
{
	char sub[160], file[160];
	store *st;
	refused(TP_EBADSTORE, "no super");
	cr_assert_not_null(strstr(tp_errmsg(), super_path), "%s", tp_errmsg());
	snprintf(sub, sizeof sub, "%s/nope", tdir);
	cr_assert_eq(store_open(sub, 0, &st), TP_EBADSTORE, "missing directory");
	cr_assert_not_null(strstr(tp_errmsg(), sub), "%s", tp_errmsg());
	snprintf(file, sizeof file, "%s/plain", tdir);
	FILE *f = fopen(file, "w");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(store_open(file, 0, &st), TP_EBADSTORE, "not a directory");
	cr_assert_not_null(strstr(tp_errmsg(), "not a directory"), "%s", tp_errmsg());
}

Test(store, readonly_open_reads_the_same)
{
	create_default();
	store *st;
	cr_assert_eq(chmod(super_path, 0444), 0);
	if (geteuid() != 0) {
		cr_assert_neq(store_open(tdir, 0, &st), 0, "read-write needs a writable super");
	}
	cr_assert_eq(store_open(tdir, 1, &st), 0, "%s", tp_errmsg());
	cr_assert_eq(store_master_get(st)->ckpt_lsn, 1000);
	store_close(st);
}

Test(store, store_path_joins)
{
	char out[64];
	store_path("/a/b", "super", out, sizeof out);
	cr_assert_str_eq(out, "/a/b/super");
}
