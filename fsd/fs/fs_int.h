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
#include "fs_ws.h"
#include "backend.h"

/* Largest file: 2^44 bytes (16 TiB) -- EFBIG beyond. */
#define FS_MAX_FILE (1ull << 44)
#define FS_XATTR_MAX 65536
#define FS_LINK_MAX 65000
/* Longest symlink target: PATH_MAX - 1, as Linux allows (ENAMETOOLONG
 * beyond).  Stored as the link's file blocks 0.., as many as it needs
 * (fs.h: five with 1 KiB pages, two with 4 KiB, one with 64 KiB). */
#define FS_SYMLINK_MAX 4095

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
/* Files open on ino outside every transaction, if one of them was opened
 * less than within_ns ago; else 0. */
uint64_t fs_open_plain(fs *f, uint64_t ino, uint64_t within_ns);

typedef struct fs_plain_open {
	uint64_t ns;
	uint32_t stamp;
} fs_plain_open;

typedef struct fs_refent {
	uint64_t ino, nlookup, nopen;
	/* of the open files, those opened outside every transaction (fs_tx.c
	 * X7): when each was opened, and the stamp fs_opened gave it */
	struct fs_plain_open *plain;
	uint32_t nplain, cplain, pseq;
	struct fs_refent *next;
} fs_refent;

#define FS_REF_BUCKETS 4096
#define FS_TX_PID_BUCKETS 1024 /* fs_tx_of, fs_tx_by_id: a table of thousands is looked up per request */

struct fs {
	be_store *be;
	be_tree *inodes, *dirents, *data, *xattrs, *orphans;
	char *store;
	fs_options opt;
	size_t bsize;               /* file block: one overflow page */
	pthread_mutex_t mu;         /* next_ino, refs, counters */
	uint64_t next_ino;
	uint64_t committed_ino;     /* above every committed inode: statfs shows no uncommitted create */
	fs_refent *refs[FS_REF_BUCKETS];
	fs_counters ctr;
	uint64_t orphans_reclaimed; /* at mount */
	int reclaiming;             /* under mu: orphans whose last reference went, being freed (F3) */
	uint64_t reclaimed;         /* under mu: such frees over */
	pthread_cond_t reclaim_cv;  /* one is over */

	/* user transactions (fs_tx.c) */
	pthread_mutex_t txmu;       /* txs, history, next_txid */
	fs_tx *txs;                 /* open ones (active or doomed), newest first */
	fs_tx *bypid[FS_TX_PID_BUCKETS]; /* the same, chained by their bound pid (fs_tx_of) */
	fs_tx *byid[FS_TX_PID_BUCKETS];  /* ... and by id (fs_tx_by_id) */
	int ntx;                    /* how many: read without txmu as a hint */
	int root_private;           /* how many of them changed the root inode (fs_tx_root_changed) */
	uint64_t next_txid, txgen;  /* txgen: bumped whenever txs changes */
	char history[16][400];      /* how the last transactions ended */
	unsigned nhistory;
	fs_observer obs;            /* told what commits change (fs_tx.c X6); obs.changed NULL: no one */
	/* the invalidation thread of commits (fs_tx.c X6), under imu */
	pthread_mutex_t imu;
	pthread_cond_t icv, idone;
	pthread_t ithr;
	int irunning, istop;
	struct inval_job *ijobs;
	pid_t itid;         /* the thread's id, for its state in /proc (atomic) */
	unsigned idelay_ms; /* tests: the thread sleeps this long before each job */
	int debug_waits;    /* TPFSD_DEBUG_WAITS: fs_tx_watch logs plain calls' long lock waits */
	pthread_mutex_t wmu;        /* waiters */
	struct fs_waiter *waiters;  /* calls waiting for a lock while transactions are open (fs_tx_watch) */
	pid_t intr[16];             /* threads whose request was interrupted before they waited (fs_interrupt) */
	int nintr;
};

/* A call waiting for a transaction-level lock (fs_tx.c X5). */
typedef struct fs_waiter {
	be_txn *t;
	fs_tx *tx;                /* a member's call, else NULL */
	uint64_t since_ns;
	int strikes;              /* consecutive watches that saw its holder blocked in the kernel */
	pid_t tid;                /* the waiting thread */
	int interrupted;          /* its request was interrupted: the wait ends with EINTR */
	int cancelled;            /* X5 cancelled it (not X8's bound) */
	int logged;               /* debug_waits: reported once */
	struct fs_waiter *next;
} fs_waiter;


/* One call: its engine transaction, and for a member of a user
 * transaction, that transaction and its write set (fs_rec.c J1). */
typedef struct fs_op {
	fs *f;
	be_txn *t;   /* the call's own; a member's: the user transaction's lock owner */
	fs_tx *tx;   /* a member's call, else NULL */
	fs_ws *ws;   /* tx's write set, else NULL */
	int wr;      /* a plain call that changes something (takes transaction-level locks) */
	int ordered; /* file blocks go to the store as ordered data (FS_ORDERED_MIN) */
	int klock;   /* a plain FS_KLOCK call: the kernel holds a lock readers need */
	pid_t pid;   /* the caller (0: the daemon itself), named by a transaction that yields (X8) */
	uint64_t *deadline; /* X8: a plain call's: when its waits for transactions end (0: none began) */
	const char *lname; /* X8: the name fs_lock_name locks (its parent's lock first), for messages */
	size_t lnamelen;
	uint64_t lparent;
} fs_op;

/* fs_tx.c X8: a plain call's wait for name (mode) timed out: every user
 * transaction holding it in a conflicting mode yields (is doomed, naming
 * op->pid and what it waited for).  BE_EDEADLOCK: fs_run tries the call
 * again. */
int fs_tx_yield(fs_op *op, const void *name, size_t len, int mode);

/* A plain write request of at least this many bytes stores its file
 * blocks as ordered data (backend.h, BE_ORDERED): written once in place and
 * synced before the log moves on, instead of logged and written again.
 * Smaller ones are logged: their commit then costs one log sync, not a
 * page-file sync before it (ZFS draws the same line, zfs_immediate_write_sz,
 * at 32 KiB).  A user transaction's commit logs its blocks: ordered data
 * there widened the window between its locks' release (T7) and its
 * durability, in which a non-member can read what a crash then loses
 * (tx_clients random_crash caught it once). */
#define FS_ORDERED_MIN 32768

/* FS_ATTR: getattr, a read that a doomed transaction's members still get
 * (as the committed state, which is all their view holds now): path walks
 * and the kernel's permission checks need it, txcommit and txabort
 * among them.  FS_KLOCK: a change the kernel makes holding a lock that
 * readers need -- a change of names (create, mkdir, mknod, symlink, link,
 * unlink, rmdir, rename) the directory's, which every lookup in it takes;
 * a write(2) the page it fills, which a read of that page waits for: a
 * plain one waits for transactions' locks only briefly (fs_tx.c X8). */
enum { FS_RD = 0, FS_WR = 1, FS_ATTR = 2, FS_KLOCK = 3 };

/* Runs fn as one call of caller c (NULL: an internal call): a member's in
 * its transaction (fs_tx.c), any other in an engine transaction of its own:
 * begin, fn, commit (durable on return with -o sync, else lazily), retried
 * when it loses a deadlock.  wr: the call may change something.  fn returns
 * 0, a positive errno (rolled back) or an engine code. */
int fs_run(fs *f, const fs_caller *c, int wr, int (*fn)(fs_op *op, void *arg), void *arg);
int fs_errno(int rc);
/* A member's call (fs_tx.c). */
int fs_tx_run(fs *f, fs_tx *tx, int wr, int (*fn)(fs_op *op, void *arg), void *arg);
/* A member's call changed the root inode in tx's write set: the root's
 * attributes are no longer the same for every view (fs_root_private). */
void fs_tx_root_changed(fs_tx *tx);

/* Locks (fs.c F2, F5).  Names: "I"+ino, the call's short lock that plain
 * readers take; "U"+ino, the transaction-level lock that user transactions
 * hold to their end and plain writers take for the call; "N"+parent+name,
 * a directory entry's transaction-level lock.
 *   fs_lock: the inode, for reading (S) or changing (X): a plain reader
 *            takes I, a plain writer U then I, a member U.
 *   fs_ilock_all: only the call's I locks of v (plain calls; nothing for
 *            a member), n <= 8, in ascending order.
 *   fs_lock_name: the entry (parent, name) for reading (S) or changing (X):
 *            U+parent in IS/IX and N in S/X, for members and plain
 *            writers; nothing for plain readers. */
int fs_lock(fs_op *op, uint64_t ino, int mode);
/* fs_lock of the distinct inodes of v (n <= 8) in ascending order; 0 entries skipped. */
int fs_lock_all(fs_op *op, const uint64_t *v, int n, int mode);
int fs_ilock_all(fs_op *op, const uint64_t *v, int n, int mode);
int fs_iunlock(fs_op *op, uint64_t ino);
/* be_lock, registered as a waiter while transactions are open (X5). */
int fs_be_lock(fs_op *op, const void *name, size_t len, int mode);
int fs_lock_name(fs_op *op, uint64_t parent, const char *name, size_t len, int mode);

/* Records as the call sees them (fs_rec.c): trees are WS_INODE..WS_ORPHAN.
 * Results as be_get/be_put/be_del; fs_rins fails with EEXIST. */
be_tree *fs_tree(const fs *f, int tree);
int fs_rget(fs_op *op, int tree, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
int fs_rput(fs_op *op, int tree, const void *key, size_t klen, const void *val, size_t vlen);
int fs_rins(fs_op *op, int tree, const void *key, size_t klen, const void *val, size_t vlen);
int fs_rdel(fs_op *op, int tree, const void *key, size_t klen);
/* Forward cursors merging the write set over the store (J2). */
typedef struct fs_cur fs_cur;
int fs_cur_open(fs_op *op, int tree, fs_cur **out);
int fs_cur_seek(fs_cur *k, const void *key, size_t klen); /* the first key >= key */
int fs_cur_next(fs_cur *k);
void fs_cur_get(fs_cur *k, const void **key, size_t *klen, const void **val, size_t *vlen);
void fs_cur_close(fs_cur *k);

/* Inode records */
int fs_iget(fs_op *op, uint64_t ino, fs_inode *in);
int fs_iput(fs_op *op, const fs_inode *in);
void fs_now(struct timespec *ts);
void fs_iattr(const fs *f, const fs_inode *in, fs_attr *a);
uint64_t fs_new_ino(fs *f);
/* Inode ino now exists in the committed store (plain creates, commits). */
void fs_ino_committed(fs *f, uint64_t ino);
/* A directory gained or lost entries: nlink += dnlink, mtime = ctime =
 * now.  A plain call writes the record; a member, which holds only an
 * intention lock on the directory, records a delta that commit applies to
 * the committed record (fs_tx.c X3), so transactions creating names in
 * one directory do not conflict. */
int fs_dir_touch(fs_op *op, fs_inode *dir, int dnlink, const struct timespec *now);
/* Frees an inode with no links and no references: its blocks, xattrs,
 * record and orphan entry. */
int fs_ifree(fs_op *op, uint64_t ino);

/* Data (fs_data.c) */
int fs_truncate_blocks(fs_op *op, fs_inode *in, uint64_t size);
int fs_data_drop_all(fs_op *op, fs_inode *in);
/* Drops at most max blocks of in, the lowest first; *more: some are left. */
int fs_data_drop_some(fs_op *op, fs_inode *in, uint64_t max, int *more);
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
/* F3: drops the data of ino if it is an orphan the kernel let go of, in
 * transactions of at most FS_TRIM_BLOCKS blocks each. */
void fs_trim_orphan(fs *f, uint64_t ino);

#endif
