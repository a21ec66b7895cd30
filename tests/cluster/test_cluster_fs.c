/*
 * test_cluster_fs -- the file-system layer on a cluster file system
 * (etcd://, be_cluster.c), where isolation is validation at commit
 * (BE_CAP_VALIDATE) instead of locks:
 *   - concurrent plain calls on one directory conflict, are retried by
 *     fs_run, and every one of them is applied exactly once;
 *   - a user transaction whose read a plain call changed before its
 *     commit fails at txcommit, nothing of it applied (fs_rec.c J3);
 *   - one that nobody disturbed commits.
 * Needs the cluster of `scripts/cluster up` (TPFS_CLUSTER) and TPFS_BIN.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"

static char store[512];

static void make_store(void)
{
	const char *bin = getenv("TPFS_BIN"), *cl = getenv("TPFS_CLUSTER");
	char cmd[1024];
	cr_assert(bin, "TPFS_BIN: the tpfs command");
	cr_assert(cl, "TPFS_CLUSTER unset: eval \"$(scripts/cluster up)\" first");
	snprintf(store, sizeof store, "%s/clfs-%d-%ld", cl, (int)getpid(), (long)time(NULL));
	snprintf(cmd, sizeof cmd, "'%s' mkfs '%s' >/dev/null", bin, store);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

TestSuite(cluster_fs, .init = make_store, .timeout = 300);

static fs *mount_it(void)
{
	fs_options o = {.quiet = 1};
	fs *f = NULL;
	cr_assert_eq(fs_mount(store, &o, &f), 0, "mount %s", store);
	return f;
}

static fs_caller plain(void) { return (fs_caller){.uid = 0, .gid = 0, .pid = getpid(), .umask = 022}; }

static int count_fill(void *ctx, const char *name, const fs_attr *attr, uint64_t next_off)
{
	(void)name, (void)attr, (void)next_off;
	++*(int *)ctx;
	return 0;
}

#define THREADS 4
#define FILES 25

struct worker {
	fs *f;
	uint64_t dir;
	int id;
	int failed;
};

static void *creator(void *arg)
{
	struct worker *w = arg;
	fs_caller c = plain();
	for (int i = 0; i < FILES; i++) {
		char name[32];
		fs_attr a;
		size_t done;
		snprintf(name, sizeof name, "t%d-%d", w->id, i);
		if (fs_mknod(w->f, &c, w->dir, name, S_IFREG | 0644, 0, &a) != 0 ||
		    fs_write(w->f, &c, a.ino, 0, name, strlen(name), &done, NULL) != 0)
			w->failed++;
	}
	return NULL;
}

Test(cluster_fs, concurrent_creates_in_one_directory)
{
	fs *f = mount_it();
	fs_caller c = plain();
	fs_attr d, a;
	cr_assert_eq(fs_mkdir(f, &c, FS_ROOT_INO, "d", 0755, &d), 0);
	pthread_t th[THREADS];
	struct worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){.f = f, .dir = d.ino, .id = i};
		cr_assert_eq(pthread_create(&th[i], NULL, creator, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(w[i].failed, 0, "thread %d: %d calls failed", i, w[i].failed);
	}
	fs_counters k;
	fs_counters_get(f, &k);
	int n = 0;
	cr_assert_eq(fs_readdir(f, &c, d.ino, 0, 0, count_fill, &n), 0);
	cr_assert_eq(n, THREADS * FILES + 2, "%d entries (with . and ..)", n);
	for (int t = 0; t < THREADS; t++)
		for (int i = 0; i < FILES; i++) {
			char name[32], got[32];
			size_t len = 0;
			snprintf(name, sizeof name, "t%d-%d", t, i);
			cr_assert_eq(fs_lookup(f, &c, d.ino, name, &a), 0, "%s", name);
			cr_assert_eq(fs_read(f, &c, a.ino, 0, sizeof got, got, &len), 0);
			cr_assert(len == strlen(name) && !memcmp(got, name, len), "%s's bytes", name);
		}
	cr_assert_eq(fs_getattr(f, &c, d.ino, &a), 0);
	fprintf(stderr, "cluster_fs: %d creates+writes by %d threads, %" PRIu64 " calls retried after a conflict\n",
		THREADS * FILES, THREADS, k.retries);
	cr_assert_eq(fs_unmount(f), 0);
	cr_assert_eq(fs_check(store, stderr, 0), 0);
}

static fs_tx *begin(fs *f)
{
	fs_tx *tx = NULL;
	cr_assert_eq(fs_tx_begin(f, getpid(), 1, getppid(), 0, "cluster_fs", 1, 0, &tx), 0);
	cr_assert_eq(fs_tx_state(tx), FS_TX_ACTIVE);
	return tx;
}

static uint64_t mkfile(fs *f, const fs_caller *c, const char *name, const char *text)
{
	fs_attr a;
	size_t done;
	cr_assert_eq(fs_mknod(f, c, FS_ROOT_INO, name, S_IFREG | 0644, 0, &a), 0, "create %s", name);
	cr_assert_eq(fs_write(f, c, a.ino, 0, text, strlen(text), &done, NULL), 0);
	return a.ino;
}

static void expect(fs *f, const fs_caller *c, uint64_t ino, const char *text)
{
	char got[64];
	size_t len = 0;
	cr_assert_eq(fs_read(f, c, ino, 0, sizeof got, got, &len), 0);
	cr_assert(len == strlen(text) && !memcmp(got, text, len), "want '%s', got '%.*s'", text, (int)len, got);
}

/* The transaction reads "src" and writes "copy"; a plain write changes
 * "src" before the commit: the transaction read a state that is gone. */
Test(cluster_fs, transaction_conflict_fails_at_commit)
{
	fs *f = mount_it();
	fs_caller c = plain();
	uint64_t src = mkfile(f, &c, "src", "version 1");

	fs_tx *tx = begin(f);
	fs_caller m = plain();
	m.tx = tx;
	expect(f, &m, src, "version 1");
	mkfile(f, &m, "copy", "version 1");

	size_t done;
	cr_assert_eq(fs_write(f, &c, src, 0, "version 2", 9, &done, NULL), 0, "the plain write (no locks to wait for)");

	char msg[1024];
	int rc = fs_tx_commit(tx, msg, sizeof msg);
	fs_tx_put(tx);
	cr_assert_neq(rc, 0, "the commit must fail: what it read changed (%s)", msg);
	cr_assert(strstr(msg, "nothing was applied"), "%s", msg);
	fprintf(stderr, "cluster_fs: txcommit: %s\n", msg);
	fs_attr a;
	cr_assert_eq(fs_lookup(f, &c, FS_ROOT_INO, "copy", &a), -ENOENT, "nothing of it applied");
	expect(f, &c, src, "version 2");

	/* undisturbed, the same transaction commits */
	tx = begin(f);
	m.tx = tx;
	expect(f, &m, src, "version 2");
	uint64_t copy = mkfile(f, &m, "copy", "version 2");
	cr_assert_eq(fs_tx_commit(tx, msg, sizeof msg), 0, "%s", msg);
	fs_tx_put(tx);
	expect(f, &c, copy, "version 2");
	cr_assert_eq(fs_unmount(f), 0);
	cr_assert_eq(fs_check(store, stderr, 0), 0);
}
