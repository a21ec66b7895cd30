/*
 * test_fslayer -- the file-system layer without the daemon: fs_* calls
 * on a store reached through the seam (backend.h), as tpfsd makes them
 * for the kernel: names, data, directories, and user transactions (a
 * member sees its write set, no one else does until the commit; an
 * abort leaves nothing).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"

static char dir[64] = "/tmp/fslayer.XXXXXX";
static char store[256];

/* A new store: `tpfs mkfs`, under TPFS_FSLAYER_STORE if set. */
static void make_store(void)
{
	const char *bin = getenv("TPFS_BIN"), *prefix = getenv("TPFS_FSLAYER_STORE");
	char cmd[1024];
	cr_assert(bin, "TPFS_BIN: the tpfs command");
	cr_assert(mkdtemp(dir));
	if (prefix)
		snprintf(store, sizeof store, "%s/%s", prefix, strrchr(dir, '/') + 1);
	else
		snprintf(store, sizeof store, "%s/store", dir);
	snprintf(cmd, sizeof cmd, "'%s' mkfs '%s' >/dev/null", bin, store);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void remove_store(void)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	(void)system(cmd);
}

static fs *mount_it(void)
{
	fs_options o = {.cache_pages = 512, .quiet = 1};
	fs *f = NULL;
	cr_assert_eq(fs_mount(store, &o, &f), 0, "mount %s", store);
	return f;
}

static fs_caller plain(void) { return (fs_caller){.uid = 0, .gid = 0, .pid = getpid(), .umask = 022}; }

static uint64_t mkfile(fs *f, const fs_caller *c, uint64_t parent, const char *name)
{
	fs_attr a;
	cr_assert_eq(fs_mknod(f, c, parent, name, S_IFREG | 0644, 0, &a), 0, "create %s", name);
	cr_assert(S_ISREG(a.mode));
	return a.ino;
}

static void put(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, const void *buf, size_t n)
{
	size_t done = 0;
	cr_assert_eq(fs_write(f, c, ino, off, buf, n, &done, NULL), 0);
	cr_assert_eq(done, n);
}

/* The file's bytes off..off+n equal want. */
static void expect(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, const void *want, size_t n)
{
	char *got = malloc(n);
	size_t len = 0;
	cr_assert(got);
	cr_assert_eq(fs_read(f, c, ino, off, n, got, &len), 0);
	cr_assert_eq(len, n, "read %zu bytes, want %zu", len, n);
	cr_assert(memcmp(got, want, n) == 0, "bytes differ");
	free(got);
}

typedef struct names {
	char v[16][FS_NAME_MAX + 1];
	int n;
} names;

static int fill(void *ctx, const char *name, const fs_attr *attr, uint64_t next_off)
{
	names *k = ctx;
	(void)attr, (void)next_off;
	if (k->n == 16)
		return 1;
	snprintf(k->v[k->n++], sizeof k->v[0], "%s", name);
	return 0;
}

static int listed(const names *k, const char *name)
{
	for (int i = 0; i < k->n; i++)
		if (!strcmp(k->v[i], name))
			return 1;
	return 0;
}

TestSuite(fslayer, .init = make_store, .fini = remove_store, .timeout = 120);

Test(fslayer, names_data_directories)
{
	fs *f = mount_it();
	fs_caller c = plain();
	fs_attr d, a;
	cr_assert_eq(fs_mkdir(f, &c, FS_ROOT_INO, "d", 0755, &d), 0);
	uint64_t ino = mkfile(f, &c, d.ino, "f");
	cr_assert_eq(fs_lookup(f, &c, d.ino, "f", &a), 0);
	cr_assert_eq(a.ino, ino);
	cr_assert_eq(fs_lookup(f, &c, d.ino, "nothing", &a), -ENOENT);
	cr_assert_eq(fs_mknod(f, &c, d.ino, "f", S_IFREG | 0644, 0, &a), -EEXIST);

	/* bytes across block boundaries (a block is the store's block_size) */
	size_t n = 3 * 4096 + 123;
	unsigned char *buf = malloc(n);
	cr_assert(buf);
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	put(f, &c, ino, 1000, buf, n);
	cr_assert_eq(fs_getattr(f, &c, ino, &a), 0);
	cr_assert_eq(a.size, 1000 + n);
	expect(f, &c, ino, 1000, buf, n);
	size_t got = 0;
	cr_assert_eq(fs_read(f, &c, ino, 1000 + n, 100, buf, &got), 0);
	cr_assert_eq(got, 0, "nothing past the end");
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	unsigned char zero[1000] = {0};
	expect(f, &c, ino, 0, zero, sizeof zero); /* a hole reads as zeros */
	put(f, &c, ino, 5000, "patch", 5);
	memcpy(buf + 4000, "patch", 5);
	expect(f, &c, ino, 1000, buf, n);

	/* rename, readdir, unlink, rmdir */
	cr_assert_eq(fs_rename(f, &c, d.ino, "f", FS_ROOT_INO, "g", 0), 0);
	cr_assert_eq(fs_lookup(f, &c, d.ino, "f", &a), -ENOENT);
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "g", &a), 0);
	cr_assert_eq(a.ino, ino);
	names k = {0};
	cr_assert_eq(fs_readdir(f, &c, FS_ROOT_INO, 0, 0, fill, &k), 0);
	cr_assert(listed(&k, "d") && listed(&k, "g") && listed(&k, ".") && listed(&k, ".."));
	cr_assert_eq(k.n, 4);
	cr_assert_eq(fs_rmdir(f, &c, FS_ROOT_INO, "d"), 0);
	cr_assert_eq(fs_unlink(f, &c, FS_ROOT_INO, "g"), 0);
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "g", &a), -ENOENT);
	k.n = 0;
	cr_assert_eq(fs_readdir(f, &c, FS_ROOT_INO, 0, 0, fill, &k), 0);
	cr_assert_eq(k.n, 2, "only . and .. left");
	free(buf);
	fs_statfs st;
	cr_assert_eq(fs_stat_fs(f, &st), 0);
	cr_assert(st.bsize > 0 && st.blocks > 0 && st.bfree <= st.blocks, "statfs: %" PRIu64 " of %" PRIu64, st.bfree,
		  st.blocks);
	cr_assert_eq(st.namemax, FS_NAME_MAX);
	cr_assert_eq(fs_unmount(f), 0);
}

Test(fslayer, survives_remount)
{
	fs *f = mount_it();
	fs_caller c = plain();
	uint64_t ino = mkfile(f, &c, FS_ROOT_INO, "kept");
	put(f, &c, ino, 0, "durable", 7);
	cr_assert_eq(fs_sync(f), 0);
	cr_assert_eq(fs_unmount(f), 0);
	f = mount_it();
	fs_attr a;
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "kept", &a), 0);
	cr_assert_eq(a.ino, ino);
	cr_assert_eq(a.size, 7);
	expect(f, &c, ino, 0, "durable", 7);
	cr_assert_eq(fs_unmount(f), 0);
}

static fs_tx *begin(fs *f)
{
	fs_tx *tx = NULL;
	cr_assert_eq(fs_tx_begin(f, getpid(), 1, getppid(), 0, "fslayer", 1, 0, &tx), 0);
	cr_assert_eq(fs_tx_state(tx), FS_TX_ACTIVE);
	return tx;
}

Test(fslayer, transaction_commit)
{
	fs *f = mount_it();
	fs_caller c = plain();
	uint64_t old = mkfile(f, &c, FS_ROOT_INO, "old");
	put(f, &c, old, 0, "before", 6);

	fs_tx *tx = begin(f);
	fs_caller m = plain();
	m.tx = tx;
	uint64_t ino = mkfile(f, &m, FS_ROOT_INO, "new");
	put(f, &m, ino, 0, "member", 6);
	put(f, &m, old, 0, "AFTER!", 6);

	/* the member sees its write set ... */
	fs_attr a;
	cr_assert_eq(fs_lookup(f, &m, FS_ROOT_INO, "new", &a), 0);
	expect(f, &m, ino, 0, "member", 6);
	expect(f, &m, old, 0, "AFTER!", 6);
	names k = {0};
	cr_assert_eq(fs_readdir(f, &m, FS_ROOT_INO, 0, 0, fill, &k), 0);
	cr_assert(listed(&k, "new"));
	/* ... no one else does */
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "new", &a), -ENOENT);
	expect(f, &c, old, 0, "before", 6);
	k.n = 0;
	cr_assert_eq(fs_readdir(f, &c, FS_ROOT_INO, 0, 0, fill, &k), 0);
	cr_assert(!listed(&k, "new"));

	char msg[256];
	cr_assert_eq(fs_tx_commit(tx, msg, sizeof msg), 0, "%s", msg);
	fs_tx_put(tx);
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "new", &a), 0);
	cr_assert_eq(a.ino, ino);
	expect(f, &c, ino, 0, "member", 6);
	expect(f, &c, old, 0, "AFTER!", 6);
	cr_assert_eq(fs_unmount(f), 0);
}

Test(fslayer, transaction_abort)
{
	fs *f = mount_it();
	fs_caller c = plain();
	uint64_t old = mkfile(f, &c, FS_ROOT_INO, "old");
	put(f, &c, old, 0, "before", 6);

	fs_tx *tx = begin(f);
	fs_caller m = plain();
	m.tx = tx;
	uint64_t ino = mkfile(f, &m, FS_ROOT_INO, "gone");
	put(f, &m, ino, 0, "member", 6);
	put(f, &m, old, 0, "AFTER!", 6);
	cr_assert_eq(fs_unlink(f, &m, FS_ROOT_INO, "old"), 0);
	fs_attr a;
	cr_assert_eq(fs_lookup(f, &m, FS_ROOT_INO, "old", &a), -ENOENT);
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "old", &a), 0);

	fs_tx_abort(tx, ECONNABORTED, "aborted by the test", 1);
	fs_tx_put(tx);
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "gone", &a), -ENOENT);
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "old", &a), 0);
	cr_assert_eq(a.ino, old);
	cr_assert_eq(a.size, 6);
	expect(f, &c, old, 0, "before", 6);
	cr_assert_eq(fs_unmount(f), 0);
	/* and the store is whole */
	cr_assert_eq(fs_check(store, NULL, 0), 0);
}
