/*
 * fs -- the file-system layer of tpfsd: POSIX objects on the engine's
 * trees, one engine transaction per call.  The FUSE handlers (fsd_ops.c)
 * decode a request, call one fs_* function, and reply; they know nothing of
 * the schema.
 *
 * Schema (trees of the store, fsd/backend/backend.h):
 *   inode   u64 ino -> fs_inode record (FS_INODE_BYTES, little-endian)
 *   dirent  u64 parent (big-endian) + u64 name hash (big-endian) + name
 *           -> u64 child ino + u8 type; readdir goes in hash order, so a
 *           directory offset is the hash of the last name returned and stays
 *           valid however the directory changes
 *   data    u64 ino (big-endian) + u64 block (big-endian) -> the block's
 *           bytes (FS_BLOCK bytes at most: one overflow page each); absent
 *           blocks are holes; a symlink's target is its blocks 0.. (as
 *           many as it needs: up to 4,095 bytes whatever the page size),
 *           written with the symlink in one transaction
 *   xattr   u64 ino (big-endian) + name -> value
 *   orphan  u64 ino -> nothing: unlinked while open, reclaimed at the last
 *           close and at mount
 * Inode numbers are never reused (64 bits), so generations are constant.
 *
 * Errors: 0, or a negative errno (the FUSE convention).  Engine outcomes are
 * mapped to errno in one place (fs_errno).
 *
 * Locking: a call X-locks every inode it changes and S-locks every inode it
 * reads, as inode names in the engine's lock manager, all before touching a
 * record and in ascending inode order, so calls never deadlock with each
 * other; the records of an inode (its dirents, blocks, xattrs) are covered
 * by its lock.  A rename also locks the ancestry it checks.  (fsd/DESIGN.md)
 */
#ifndef TPFS_FS_H
#define TPFS_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

typedef struct fs fs;
typedef struct fs_tx fs_tx; /* a user transaction (fs_tx.c) */

#define FS_ROOT_INO 1
/* Inode numbers are never reused; tpfsd's node ids hold them in 44 bits
 * (fsd_int.h, C5): 1.7e13 creations per store. */
#define FS_NAME_MAX 255

typedef struct fs_options {
	size_t cache_pages;     /* engine buffer pool (default: 1/8 of RAM, at most 4 GiB) */
	uint32_t commit_ms;     /* lazy durability: a sync at least this often (1000) */
	int sync;               /* every call durable on return */
	int readonly;
	int quiet;
	int progress; /* a long recovery shows how far it is on a terminal (backend.h) */
	const char *logdir;     /* the store's log is here now, not where mkfs put it */
	uint32_t tx_wait_ms;      /* fs_tx.c X8: the longest a plain write waits in all for
				     transactions' locks before they yield (500) */
	uint32_t tx_short_wait_ms; /* the same for a change of names or a write(2), which
				     the kernel makes holding a lock readers need (10) */
} fs_options;

/* The caller of a request (fuse_req_ctx). */
typedef struct fs_caller {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	mode_t umask;
	fs_tx *tx;      /* the caller's user transaction, or NULL */
	int update;     /* reads through a handle open for writing: a member
			   locks X at once, so read-then-write never
			   deadlocks on the upgrade */
	int refuse;     /* an errno every call of this caller fails with
			   (an orphaned member, fsd_txbind.c C13), or 0 */
	int refuse_changes; /* an errno every change (not a read) of this
			   caller fails with (fsd_txbind.c C12), or 0 */
} fs_caller;

typedef struct fs_attr {
	uint64_t ino;
	uint32_t mode, nlink, uid, gid;
	uint64_t size, blocks, rdev; /* blocks: 512-byte units actually allocated */
	struct timespec atime, mtime, ctime;
} fs_attr;

/* fs_setattr's "to_set" bits */
enum {
	FS_SET_MODE = 1 << 0,
	FS_SET_UID = 1 << 1,
	FS_SET_GID = 1 << 2,
	FS_SET_SIZE = 1 << 3,
	FS_SET_ATIME = 1 << 4,
	FS_SET_MTIME = 1 << 5,
	FS_SET_ATIME_NOW = 1 << 6,
	FS_SET_MTIME_NOW = 1 << 7,
	FS_SET_CTIME = 1 << 8,
	FS_SET_KILL_SUID = 1 << 9, /* clear set-user-ID (and set-group-ID if group-executable) of a non-directory */
};

/* Mount and unmount */
/* Opens (and recovers) the store, makes the root directory if the store is
 * new, reclaims orphans left by a crash; says what it did unless quiet. */
int fs_mount(const char *store, const fs_options *o, fs **out);
/* Flushes, checkpoints and closes (the next mount needs no redo). */
int fs_unmount(fs *f);
/* Makes every change so far durable (fsync, fdatasync, syncfs, fsyncdir). */
int fs_sync(fs *f);
/* Called every commit_ms by the daemon: the lazy-durability flush. */
int fs_tick(fs *f);

/* Names.  lookup, mknod, mkdir, symlink and link return with a kernel
 * reference taken (as fs_ref(ino, 1)) inside their transaction, so no unlink
 * can free the inode before the reply reaches the kernel; if the reply cannot
 * be delivered, the caller gives it back with fs_forget(ino, 1). */
int fs_lookup(fs *f, const fs_caller *c, uint64_t parent, const char *name, fs_attr *out);
int fs_mknod(fs *f, const fs_caller *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev, fs_attr *out);
int fs_mkdir(fs *f, const fs_caller *c, uint64_t parent, const char *name, mode_t mode, fs_attr *out);
int fs_symlink(fs *f, const fs_caller *c, uint64_t parent, const char *name, const char *target, fs_attr *out);
int fs_link(fs *f, const fs_caller *c, uint64_t ino, uint64_t newparent, const char *newname, fs_attr *out);
int fs_unlink(fs *f, const fs_caller *c, uint64_t parent, const char *name);
int fs_rmdir(fs *f, const fs_caller *c, uint64_t parent, const char *name);
/* flags: RENAME_NOREPLACE, RENAME_EXCHANGE (linux/fs.h values) */
int fs_rename(fs *f, const fs_caller *c, uint64_t parent, const char *name, uint64_t newparent, const char *newname,
	      unsigned flags);
int fs_readlink(fs *f, const fs_caller *c, uint64_t ino, char *buf, size_t size, size_t *len);

/* Directories: calls fill for each entry after offset off, in order, until it
 * returns nonzero (buffer full).  next_off resumes after that entry.
 * Offsets 1 and 2 are "." and "..".  If the call's transaction is retried
 * (it lost a deadlock), fill is called again from off: the caller must be
 * able to start its reply over. */
typedef int (*fs_fill_fn)(void *ctx, const char *name, const fs_attr *attr, uint64_t next_off);
int fs_readdir(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, int plus, fs_fill_fn fill, void *ctx);

/* Attributes */
int fs_getattr(fs *f, const fs_caller *c, uint64_t ino, fs_attr *out);
int fs_setattr(fs *f, const fs_caller *c, uint64_t ino, const fs_attr *in, unsigned to_set, fs_attr *out);

/* Data */
int fs_read(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, size_t size, void *buf, size_t *got);
/* off FS_APPEND: at the end of the file as the caller sees it (O_APPEND:
 * the kernel's idea of the size may be another view's); *at, if not NULL,
 * gets the offset written at. */
#define FS_APPEND UINT64_MAX
int fs_write(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, const void *buf, size_t size, size_t *done,
	     uint64_t *at);
/* mode: 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE */
int fs_fallocate(fs *f, const fs_caller *c, uint64_t ino, int mode, uint64_t off, uint64_t len);
/* SEEK_DATA / SEEK_HOLE */
int fs_lseek(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, int whence, uint64_t *out);

/* Extended attributes: XATTR_CREATE / XATTR_REPLACE flags.
 * security.capability is not supported (file capabilities would have to be
 * dropped on write, truncate and chown with the set-id bits): it is never
 * present, answered without a transaction, since the kernel asks for it
 * before the first write of each inode it holds (fsd_io.c). */
int fs_setxattr(fs *f, const fs_caller *c, uint64_t ino, const char *name, const void *val, size_t size, int flags);
/* size 0: *len gets the size only. -ERANGE if size is too small. */
int fs_getxattr(fs *f, const fs_caller *c, uint64_t ino, const char *name, void *val, size_t size, size_t *len);
int fs_listxattr(fs *f, const fs_caller *c, uint64_t ino, char *list, size_t size, size_t *len);
int fs_removexattr(fs *f, const fs_caller *c, uint64_t ino, const char *name);

/* Lifetime: the kernel's references (lookup counts) and open files decide
 * when an unlinked inode is reclaimed. */
void fs_ref(fs *f, uint64_t ino, uint64_t nlookup);   /* a reply that gave the kernel a reference */
void fs_forget(fs *f, uint64_t ino, uint64_t nlookup);
/* plain: opened outside every transaction (a commit waits for such files
 * to close if they were opened recently: fs_tx.c X7); fs_opened gives it a
 * stamp (FS_STAMP_MASK bits) that fs_released names it by. */
#define FS_STAMP_MASK 0x1ffu
int fs_opened(fs *f, uint64_t ino, int plain, uint32_t *stamp);
void fs_released(fs *f, uint64_t ino, int plain, uint32_t stamp);

/* The file system */
typedef struct fs_statfs {
	uint64_t bsize, blocks, bfree, files, ffree, namemax;
} fs_statfs;
int fs_stat_fs(fs *f, fs_statfs *out);

/* User transactions (fs_tx.c): a transaction's members see its changes,
 * kept in a private write set until commit applies them as one engine
 * transaction; everyone else sees the committed store.  The daemon binds
 * processes (fsd_txbind.c); the fs layer knows a transaction by its bound pid
 * and that process's start time (pid reuse), and every fs_* call of a
 * member carries the transaction in its caller (fs_caller.tx).
 *
 * A transaction ends in commit, abort, or doom (deadlock victim, killed):
 * a doomed one has released everything, and its members' calls fail with
 * EDEADLK (or ECONNABORTED) until fs_tx_end.  Handles are counted: every
 * fs_tx_* that returns one took a reference for fs_tx_put. */
enum { FS_TX_ACTIVE, FS_TX_DOOMED, FS_TX_ENDED };
/* Who keeps copies of the file system's objects (the daemon: the
 * kernel's caches) is told what a transaction's end changes (fs_tx.c X6),
 * from a thread of the layer's own, while the commit's locks still keep
 * every other call from reading it.
 *   changed: these objects changed: an inode (its attributes and data), or
 *            the entry name in directory ino (name != NULL); view is the
 *            transaction's (fs_tx_view), or 0 if its own objects were
 *            never shown (fs_tx_mark_aliased).
 *   content: regular file ino, about to be committed, holds exactly these
 *            size bytes (may be NULL).
 *   blocked: 1 (or -1: cannot tell) if thread tid, inside changed or
 *            content, waits for something that a call waiting for the
 *            commit's locks may hold: the commit then stops waiting for it
 *            and releases its locks. */
typedef struct fs_observer {
	void (*changed)(void *ctx, uint64_t view, uint64_t ino, const char *name, size_t len);
	void (*content)(void *ctx, uint64_t ino, const void *data, size_t size);
	int (*blocked)(void *ctx, pid_t tid);
	void *ctx;
} fs_observer;
/* o NULL: none (stops the thread after its last job). */
void fs_set_observer(fs *f, const fs_observer *o);
/* Begins a transaction bound to process pid (start: its start time; ppid:
 * its parent); view: fs_tx_view's (not 0); aliased: the kernel may hold
 * inodes of this view already (fs_tx_mark_aliased). */
int fs_tx_begin(fs *f, pid_t pid, uint64_t start, pid_t ppid, uid_t uid, const char *comm, uint64_t view,
		int aliased, fs_tx **out);
/* The open transaction bound to (pid, start), or by id; NULL if none. */
fs_tx *fs_tx_of(fs *f, pid_t pid, uint64_t start);
fs_tx *fs_tx_by_id(fs *f, uint64_t id);
void fs_tx_put(fs_tx *tx);
/* Open transactions right now (a hint, without a lock: 0 costs nothing). */
int fs_tx_count(const fs *f);
/* The same, sequentially consistent with fs_tx_begin's count (a Dekker
 * handshake with a flag: fsd_txbind.c need_wake). */
int fs_tx_count_sc(const fs *f);
uint64_t fs_tx_gen(fs *f);
/* Open transactions whose write set changed the root directory's inode
 * (its attributes, links or times): while there are none, every view of
 * the root's attributes is the committed one (a hint, without a lock). */
int fs_root_private(const fs *f);
/* The kernel was given a node id private to tx (fuse/fsd_int.h: aliases, fsd_txbind.c C5); until
 * then, nothing of tx's own can be in the kernel's caches. */
void fs_tx_mark_aliased(fs_tx *tx);
int fs_tx_aliased(const fs_tx *tx);
/* What names the transaction's own inodes in the kernel (fsd: its alias
 * tag), given at begin; never 0. */
uint64_t fs_tx_view(const fs_tx *tx);
uint64_t fs_tx_id(const fs_tx *tx);
uid_t fs_tx_uid(const fs_tx *tx);
/* The owner's group (fsd_txbind.c C10), set once after begin; (gid_t)-1 until then: any. */
void fs_tx_set_gid(fs_tx *tx, gid_t gid);
gid_t fs_tx_gid(const fs_tx *tx);
pid_t fs_tx_pid(const fs_tx *tx);
int fs_tx_state(fs_tx *tx);
/* Commits: 0 when every change is applied and durable; else a negative
 * errno (EDEADLK: it was a deadlock victim; ECONNABORTED: it was aborted;
 * ENOSPC, EIO) and nothing was applied.  msg says what happened.  Either
 * way the transaction is over. */
int fs_tx_commit(fs_tx *tx, char *msg, size_t size);
/* Aborts (why: an errno that its members' calls get from now on, and
 * reason) and, if end, forgets it.  Without end the transaction stays
 * doomed, bound, until its owner commits or aborts it. */
void fs_tx_abort(fs_tx *tx, int why, const char *reason, int end);
/* A member process seen in a request (for txstatus). */
void fs_tx_member(fs_tx *tx, pid_t pid);
/* Does the transaction hold a lock on the inode (it read or changed it)? */
int fs_tx_holds(fs_tx *tx, uint64_t ino);
/* Reports: one transaction (only != NULL) or every one uid may see
 * (uid 0: all), as text or JSON.  And how the caller's last one ended
 * (chain: the caller's process and its ancestors, n of them): 1 when one
 * of the recent ones was bound to one of them or to a child of chain[1]
 * (as txrun is); else 2 with the latest of uid's whose bound process has
 * exited (a shell killed or closed, asked about from a new one); else 0
 * and "": a live shell's transaction is never named to another. */
int fs_tx_report(fs *f, fs_tx *only, uid_t uid, int json, char *buf, size_t size);
int fs_tx_history(fs *f, uid_t uid, const pid_t *chain, int n, char *buf, size_t size);
/* One page of the report of every transaction uid may see: those whose
 * id is below before (0: from the newest), newest first, as many as fit
 * in size bytes with room to spare; the pages' texts one after the other
 * are one report (JSON: one document).  Its length, or -ERANGE; *next:
 * the before of the next page, 0 after the last. */
int fs_tx_report_page(fs *f, uid_t uid, int json, uint64_t before, char *buf, size_t size, uint64_t *next);
/* X5: breaks deadlocks that pass through the kernel.  A request that waits
 * here for a transaction's lock may hold a kernel lock (a file's i_rwsem
 * during a write, a directory's during a create) that the transaction's
 * own next request needs; that request then sleeps in the kernel, never
 * reaching the daemon, and no lock manager sees the cycle.  Called a few
 * times a second while transactions are open: a call that has waited
 * 100 ms for a transaction one of whose members blocked(pid) reports
 * asleep in the kernel (not waiting for this daemon) on three consecutive
 * watches has its wait cancelled: it fails with EDEADLK (a member's
 * transaction is doomed, X2).  Returns how many were cancelled. */
/* The kernel interrupted the request thread tid is serving (a signal, kill
 * -9 of a process waiting for a transaction's lock): its lock wait ends
 * with EINTR, now or when it starts; fs_interrupt_done when the request
 * ends.  A member's transaction stays open. */
void fs_interrupt(fs *f, pid_t tid);
void fs_interrupt_done(fs *f, pid_t tid);
/* The calling thread's id (gettid), remembered per thread: a request
 * inside a transaction asked for it three times. */
pid_t fs_thread_id(void);
int fs_tx_watch(fs *f, int (*blocked)(pid_t pid, void *ctx), void *ctx);
/* Aborts every open transaction (unmount). */
void fs_tx_abort_all(fs *f, const char *reason);

/* Counters for `tpfs stat`: operations served, engine statistics. */
typedef struct fs_counters {
	uint64_t ops[64];
	uint64_t retries; /* calls retried after losing a deadlock */
	uint64_t inval_late; /* commits whose invalidation outlasted their locks (fs_tx.c X6) */
	uint64_t readers_late; /* commits that stopped waiting for plain readers to close (X7) */
	uint64_t tx_yields; /* transactions doomed because a plain writer waited its bound (X8) */
} fs_counters;
void fs_count(fs *f, int op);
void fs_counters_get(fs *f, fs_counters *out);
/* A text report (engine statistics, recovery of this mount, operations). */
int fs_report(fs *f, char *buf, size_t size);

/* Checks every tree and the file-system invariants (link counts, reachable
 * inodes, block ownership, sizes) of a store that is not mounted; prints
 * problems to err; 0 when clean, -EUCLEAN when not. */
int fs_check(const char *store, void *err /* FILE * */, int verbose);

#endif
