/*
 * fs_int.h -- private to the file-system layer (fsd/fs*.c): the mount, the
 * per-call transaction, the inode record, key encodings.
 */
#ifndef TPFS_FS_INT_H
#define TPFS_FS_INT_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "fs.h"
#include "tp.h"

/* Largest file: 2^44 bytes (16 TiB) -- EFBIG beyond. */
#define FS_MAX_FILE (1ull << 44)
#define FS_XATTR_MAX 65536
#define FS_LINK_MAX 65000

/* Inode record (little-endian):
 *    0 4 mode     4 4 nlink    8 4 uid     12 4 gid
 *   16 8 size    24 8 blocks (data blocks held)    32 8 rdev
 *   40 8 atime s 48 4 atime ns 52 4 mtime ns  56 8 mtime s
 *   64 8 ctime s 72 4 ctime ns 76 4 0
 *   80 8 parent directory (directories; the root names itself)
 *   88 8 0 */
#define FS_INODE_BYTES 96

typedef struct fs_inode {
	uint64_t ino;
	uint32_t mode, nlink, uid, gid;
	uint64_t size, blocks, rdev, parent;
	struct timespec atime, mtime, ctime;
} fs_inode;

/* The kernel's references and the open files of one inode. */
typedef struct fs_refent {
	uint64_t ino, nlookup, nopen;
	struct fs_refent *next;
} fs_refent;

#define FS_REF_BUCKETS 4096

struct fs {
	tp_env *env;
	tp_tree *inodes, *dirents, *data, *xattrs, *orphans;
	char *store;
	fs_options opt;
	size_t bsize;               /* file block: one overflow page */
	pthread_mutex_t mu;         /* next_ino, refs, counters */
	uint64_t next_ino;
	fs_refent *refs[FS_REF_BUCKETS];
	fs_counters ctr;
	uint64_t orphans_reclaimed; /* at mount */
};

/* One call's engine transaction. */
typedef struct fs_op {
	fs *f;
	tp_txn *t;
} fs_op;

/* Runs fn in a transaction: begin, fn, commit (durable on return with -o
 * sync, else lazily), retried when it loses a deadlock.  fn returns 0, a
 * negative errno (rolled back) or an engine code. */
int fs_run(fs *f, int (*fn)(fs_op *op, void *arg), void *arg);
int fs_errno(int rc);

/* Locks, in ascending inode order (fs.h: Locking). */
int fs_lock(fs_op *op, uint64_t ino, int mode);
/* Locks the distinct inodes of v (n <= 8) in ascending order; 0 entries skipped. */
int fs_lock_all(fs_op *op, const uint64_t *v, int n, int mode);

/* Inode records */
int fs_iget(fs_op *op, uint64_t ino, fs_inode *in);
int fs_iput(fs_op *op, const fs_inode *in);
void fs_now(struct timespec *ts);
void fs_iattr(const fs *f, const fs_inode *in, fs_attr *a);
uint64_t fs_new_ino(fs *f);
/* Frees an inode with no links and no references: its blocks, xattrs,
 * record and orphan entry. */
int fs_ifree(fs_op *op, uint64_t ino);

/* Data (fs_data.c) */
int fs_truncate_blocks(fs_op *op, fs_inode *in, uint64_t size);
int fs_data_drop_all(fs_op *op, fs_inode *in);
int fs_data_put(fs_op *op, fs_inode *in, uint64_t off, const void *buf, size_t size);
int fs_data_get(fs_op *op, const fs_inode *in, uint64_t off, size_t size, void *buf, size_t *got);

/* Xattrs (fs_xattr.c) */
int fs_xattr_drop_all(fs_op *op, uint64_t ino);

/* Keys */
static inline void fs_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}
static inline uint64_t fs_getbe64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}
static inline void fs_le64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* The lifetime table (fs.c) */
int fs_is_referenced(fs *f, uint64_t ino);

#endif
