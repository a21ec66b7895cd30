/*
 * test_symlink -- long symbolic links on real mounts (issue 23, section 4):
 * a target may be anything up to PATH_MAX - 1 = 4,095 bytes, whatever the
 * store's page size (so whatever its file block: a page less its overflow
 * header, 996 bytes with 1 KiB pages, 4,068 with 4 KiB, 65,508 with 64 KiB),
 * and 4,096 bytes or more is ENAMETOOLONG (pjdfstest symlink/03.t).
 *
 * For each page size (mkfs -p 1024, 4096, 65536): symlinks of 1, 996, 997,
 * 1,993, 4,068, 4,069 and 4,095 bytes, each target a pattern of its own
 * (a block stored at the wrong place, or cut, shows), checked by lstat's
 * size and readlink (exact, and cut to a short buffer); one link followed
 * through a 4,095-byte target to a file; 4,096 and 4,097 bytes refused with
 * nothing created; one long link renamed and one removed (its blocks must
 * go: `tpfs check`); then a clean unmount, `tpfs check` clean, a remount,
 * every target read again exactly, and a last unmount and check.
 *
 * And `tpfs check` must see a long target that lost a block (V6, which
 * nothing else catches: the target would read with zeros at its end).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "tp.h"

#define TARGET_MAX 4095 /* PATH_MAX - 1 */

static const size_t lens[] = {1, 996, 997, 1993, 4068, 4069, 4095};
#define NLENS (sizeof lens / sizeof *lens)

TestSuite(symlink, .fini = fsu_teardown);

/* The target of the link of length len: printable bytes, a pattern that
 * differs with the length and along the target. */
static void target(char *buf, size_t len)
{
	uint64_t s = 0x5eed0000u + len;
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)('!' + fsu_below(&s, 94));
	buf[len] = 0;
}

/* readlink of the link of length len: exactly its target, also into a
 * buffer shorter than the target (cut, not an error). */
static void check_link(const char *when, size_t len)
{
	char p[512], want[TARGET_MAX + 1], got[8192];
	struct stat st;
	target(want, len);
	fsu_path(p, sizeof p, "%s/l%zu", fsu_m.mnt, len);
	cr_assert_eq(lstat(p, &st), 0, "%s: lstat of the %zu-byte symlink: %s", when, len, strerror(errno));
	cr_expect(S_ISLNK(st.st_mode), "%s: the %zu-byte symlink has mode 0%o, not a symlink", when, len,
		  (unsigned)st.st_mode);
	cr_expect_eq(st.st_size, (off_t)len, "%s: the %zu-byte symlink has st_size %lld", when, len,
		     (long long)st.st_size);
	ssize_t n = readlink(p, got, sizeof got);
	cr_assert_eq(n, (ssize_t)len, "%s: readlink of the %zu-byte symlink returned %zd (%s)", when, len, n,
		     n < 0 ? strerror(errno) : "short or long");
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i])
			cr_assert_fail("%s: the %zu-byte symlink's target differs from byte %zu on ('%c', expected '%c')",
				       when, len, i, got[i], want[i]);
	if (len > 10) {
		size_t cut = len - 7;
		memset(got, 0, sizeof got);
		n = readlink(p, got, cut);
		cr_expect(n == (ssize_t)cut && memcmp(got, want, cut) == 0,
			  "%s: readlink of the %zu-byte symlink into %zu bytes returned %zd, expected its first %zu bytes",
			  when, len, cut, n, cut);
	}
}

static void long_links(int page)
{
	char mkfs[32], p[512], q[512], t[TARGET_MAX + 3];
	snprintf(mkfs, sizeof mkfs, "-p %d", page);
	/* cache_size: tpfsd's default pool is counted in 4 KiB pages (1/8 of
	 * the memory), which with 64 KiB pages asks for twice the memory */
	fsu_start_mkfs(mkfs, page > 4096 ? "cache_size=4M" : NULL, 0);

	for (size_t i = 0; i < NLENS; i++) {
		target(t, lens[i]);
		fsu_path(p, sizeof p, "%s/l%zu", fsu_m.mnt, lens[i]);
		cr_assert_eq(symlink(t, p), 0, "page size %d: symlink with a %zu-byte target: %s", page, lens[i],
			     strerror(errno));
	}
	for (size_t i = 0; i < NLENS; i++)
		check_link("after symlink", lens[i]);

	/* too long: refused, nothing made */
	for (size_t len = TARGET_MAX + 1; len <= TARGET_MAX + 2; len++) {
		memset(t, 'x', len);
		t[len] = 0;
		fsu_path(p, sizeof p, "%s/bad%zu", fsu_m.mnt, len);
		errno = 0;
		int r = symlink(t, p);
		cr_expect(r == -1 && errno == ENAMETOOLONG, "page size %d: symlink with a %zu-byte target: %d (%s), "
							    "expected ENAMETOOLONG",
			  page, len, r, strerror(errno));
		struct stat st;
		cr_expect(lstat(p, &st) == -1 && errno == ENOENT, "page size %d: a refused symlink left %s behind", page, p);
	}

	/* followed: a 4,095-byte target that names a file */
	fsu_path(p, sizeof p, "%s/f", fsu_m.mnt);
	cr_assert_eq(fsu_write_file(p, "through\n", 8, 0644), 0);
	for (size_t i = 0; i < (TARGET_MAX - 1) / 2; i++)
		memcpy(t + 2 * i, "./", 2);
	strcpy(t + TARGET_MAX - 1, "f");
	cr_assert_eq(strlen(t), (size_t)TARGET_MAX);
	fsu_path(p, sizeof p, "%s/via", fsu_m.mnt);
	cr_assert_eq(symlink(t, p), 0, "page size %d: symlink via: %s", page, strerror(errno));
	char buf[64] = "";
	ssize_t n = fsu_read_file(p, buf, sizeof buf - 1);
	cr_expect(n == 8 && !memcmp(buf, "through\n", 8), "page size %d: reading f through a 4,095-byte symlink: %zd",
		  page, n);

	/* renamed and removed: blocks follow the inode, and go with it */
	target(t, 4069);
	fsu_path(p, sizeof p, "%s/gone", fsu_m.mnt);
	cr_assert_eq(symlink(t, p), 0, "page size %d: symlink gone: %s", page, strerror(errno));
	fsu_path(q, sizeof q, "%s/gone2", fsu_m.mnt);
	cr_assert_eq(rename(p, q), 0, "rename: %s", strerror(errno));
	n = readlink(q, t, sizeof t);
	cr_expect_eq(n, 4069, "page size %d: readlink of the renamed 4,069-byte symlink: %zd", page, n);
	cr_assert_eq(unlink(q), 0, "unlink: %s", strerror(errno));

	fsu_cycle(); /* clean unmount, `tpfs check` clean, mount again */
	for (size_t i = 0; i < NLENS; i++)
		check_link("after a remount", lens[i]);
	fsu_path(p, sizeof p, "%s/via", fsu_m.mnt);
	n = fsu_read_file(p, buf, sizeof buf - 1);
	cr_expect(n == 8 && !memcmp(buf, "through\n", 8),
		  "page size %d: reading f through a 4,095-byte symlink after a remount: %zd", page, n);
	uint64_t blocks = 0;
	fsu_stop_check();
	cr_assert_eq(fsu_check_counts(NULL, NULL, &blocks), 0, "tpfs check -v");
	printf("symlink: page size %d: %zu long links and one followed, stored in %llu blocks, clean\n", page,
	       NLENS, (unsigned long long)blocks);
}

Test(symlink, long_targets_page_1024, .timeout = 120) { long_links(1024); }
Test(symlink, long_targets_page_4096, .timeout = 120) { long_links(4096); }
Test(symlink, long_targets_page_65536, .timeout = 120) { long_links(65536); }

/* The store's last block of the 4,095-byte link removed, and its inode's
 * block count lowered to match (fs_int.h: the inode record holds it at
 * byte 24), straight through the engine: every other invariant holds, and
 * `tpfs check` must still fail (V6). */
Test(symlink, check_finds_a_missing_target_block, .timeout = 120)
{
	char p[512], t[TARGET_MAX + 1];
	struct stat st;
	fsu_start_mkfs("-p 1024", NULL, 0);
	target(t, TARGET_MAX);
	fsu_path(p, sizeof p, "%s/l%d", fsu_m.mnt, TARGET_MAX);
	cr_assert_eq(symlink(t, p), 0, "symlink: %s", strerror(errno));
	cr_assert_eq(lstat(p, &st), 0);
	fsu_stop_check();

	tp_options o;
	tp_env *env;
	tp_tree *inodes, *data;
	tp_txn *tx;
	unsigned char rec[96], key[16];
	uint64_t ino = (uint64_t)st.st_ino, blocks, nb = 0;
	size_t vl = 0;
	tp_options_init(&o);
	o.cache_pages = 256;
	o.quiet = 1;
	cr_assert_eq(tp_open(fsu_m.store, &o, &env), 0, "tp_open: %s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "inode", TP_TREE_U64 | TP_TREE_NOLOCK, &inodes), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "data", TP_TREE_NOLOCK, &data), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_begin(env, &tx), 0);
	cr_assert_eq(tp_get(tx, inodes, &ino, 8, rec, sizeof rec, &vl), 0, "inode %llu of the link: %s",
		     (unsigned long long)ino, tp_errmsg());
	cr_assert_eq(vl, sizeof rec);
	memcpy(&blocks, rec + 24, 8);
	cr_assert_geq(blocks, 2, "a 4,095-byte target with 1 KiB pages is in %llu blocks", (unsigned long long)blocks);
	for (int i = 0; i < 8; i++) {
		key[i] = (unsigned char)(ino >> (56 - 8 * i));
		key[8 + i] = (unsigned char)((blocks - 1) >> (56 - 8 * i));
	}
	cr_assert_eq(tp_del(tx, data, key, 16), 0, "block %llu: %s", (unsigned long long)(blocks - 1), tp_errmsg());
	nb = blocks - 1;
	memcpy(rec + 24, &nb, 8);
	cr_assert_eq(tp_put(tx, inodes, &ino, 8, rec, sizeof rec, 0), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_commit(tx, 0), 0, "%s", tp_errmsg());
	tp_tree_close(inodes);
	tp_tree_close(data);
	cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());

	int rc = tfs_check(&fsu_m);
	cr_expect_neq(rc, 0, "tpfs check says clean of a symlink whose %llu-byte target lost its last block",
		      (unsigned long long)TARGET_MAX);
}
