/*
 * fs_dir -- names: lookup, create (mknod, mkdir, symlink), link, unlink,
 * rmdir, rename, readlink, readdir.
 *
 * A directory entry's key is (parent, hash of the name, name), so the
 * entries of a directory are contiguous and in hash order: the readdir
 * offset is the hash of the last name returned, which stays valid whatever
 * is added or removed meanwhile (names hashing alike would be returned
 * together, never split across calls, unless a single buffer cannot hold
 * them -- with 63-bit hashes, in practice never).
 *
 * Locks follow fs.c F2: a child learned from a directory entry is locked
 * after its directory only if its number is larger; otherwise the call
 * drops its locks, takes both in order and reads the entry again.  Renames
 * across directories also take a store-wide rename lock first, as the
 * kernel does, so the ancestry they check cannot change under them.
 */
#include "fs_int.h"

#include <dirent.h>
#include <errno.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <sys/stat.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

#define DKEY_MAX (16 + FS_NAME_MAX)

static uint64_t name_hash(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
	h &= 0x7fffffffffffffffull; /* a positive off_t */
	return h < 3 ? h + 3 : h;   /* 1 and 2 are "." and ".." */
}

static size_t dkey(unsigned char *k, uint64_t parent, const char *name, size_t len)
{
	fs_be64(k, parent);
	fs_be64(k + 8, name_hash(name, len));
	memcpy(k + 16, name, len);
	return 16 + len;
}

static int check_name(const char *name, size_t *len)
{
	*len = strlen(name);
	if (*len == 0)
		return ENOENT;
	if (*len > FS_NAME_MAX)
		return ENAMETOOLONG;
	return 0;
}

static unsigned dtype(uint32_t mode) { return (mode & S_IFMT) >> 12; }

/* The entry (parent, name): *ino and *type, or ENOENT. */
static int dir_get(fs_op *op, uint64_t parent, const char *name, size_t len, uint64_t *ino, unsigned *type)
{
	unsigned char k[DKEY_MAX], v[9];
	size_t vl;
	int rc = fs_rget(op, WS_DIRENT, k, dkey(k, parent, name, len), v, sizeof v, &vl);
	if (rc)
		return rc == BE_ENOTFOUND ? ENOENT : rc;
	if (vl != 9)
		return BE_ECORRUPT;
	memcpy(ino, v, 8);
	if (type)
		*type = v[8];
	return 0;
}

static int dir_put(fs_op *op, uint64_t parent, const char *name, size_t len, uint64_t ino, uint32_t mode)
{
	unsigned char k[DKEY_MAX], v[9];
	memcpy(v, &ino, 8);
	v[8] = (unsigned char)dtype(mode);
	return fs_rput(op, WS_DIRENT, k, dkey(k, parent, name, len), v, 9);
}

static int dir_del(fs_op *op, uint64_t parent, const char *name, size_t len)
{
	unsigned char k[DKEY_MAX];
	return fs_rdel(op, WS_DIRENT, k, dkey(k, parent, name, len));
}

/* Does directory ino have any entry? */
static int dir_empty(fs_op *op, uint64_t ino, int *empty)
{
	unsigned char k[8];
	fs_cur *c;
	int rc;
	fs_be64(k, ino);
	if ((rc = fs_cur_open(op, WS_DIRENT, &c)) != 0)
		return rc;
	rc = fs_cur_seek(c, k, 8);
	*empty = 1;
	if (rc == 0) {
		const void *key;
		size_t kl;
		fs_cur_get(c, &key, &kl, NULL, NULL);
		*empty = !(kl >= 8 && memcmp(key, k, 8) == 0);
	} else if (rc == BE_ENOTFOUND) {
		rc = 0;
	}
	fs_cur_close(c);
	return rc;
}

/* Locks the entry (parent, name) and directory parent (X) and the inode the
 * entry names (X, in ascending order, F2); *child is 0 if there is no such
 * entry. */
static int lock_entry(fs_op *op, uint64_t parent, const char *name, size_t len, uint64_t *child)
{
	int rc;
	if ((rc = fs_lock_name(op, parent, name, len, BE_LOCK_X)) != 0 ||
	    (rc = fs_ilock_all(op, &parent, 1, BE_LOCK_X)) != 0)
		return rc;
	for (int tries = 0; tries < 100; tries++) {
		uint64_t c;
		rc = dir_get(op, parent, name, len, &c, NULL);
		if (rc == ENOENT) {
			*child = 0;
			return 0;
		}
		if (rc)
			return rc;
		if (c == *child || c > parent || op->tx) {
			*child = c;
			return fs_lock(op, c, BE_LOCK_X); /* held already when c == *child */
		}
		/* below the parent: take both in order, then look again */
		(void)fs_iunlock(op, parent);
		uint64_t both[2] = {c, parent};
		if ((rc = fs_ilock_all(op, both, 2, BE_LOCK_X)) != 0)
			return rc;
		*child = c;
	}
	return EAGAIN;
}

/* ---- lookup ---- */

typedef struct name_arg {
	const fs_caller *c;
	uint64_t parent;
	const char *name;
	size_t len;
	mode_t mode;
	dev_t rdev;
	const char *target;
	uint64_t ino; /* new or named inode */
	fs_attr *out;
} name_arg;

static int lookup_fn(fs_op *op, void *arg)
{
	name_arg *a = arg;
	fs_inode p, in;
	uint64_t ino;
	unsigned type;
	int rc;
	if ((rc = fs_lock_name(op, a->parent, a->name, a->len, BE_LOCK_S)) != 0 ||
	    (rc = fs_ilock_all(op, &a->parent, 1, BE_LOCK_S)) != 0 || (rc = fs_iget(op, a->parent, &p)) != 0)
		return rc;
	if (!S_ISDIR(p.mode))
		return ENOTDIR;
	if ((rc = dir_get(op, a->parent, a->name, a->len, &ino, &type)) != 0)
		return rc;
	/* a consistent read of the child: locked after its directory only when
	 * that keeps the order; otherwise the entry's inode is read unlocked,
	 * which the engine's latches keep physically consistent.  A member
	 * locks a directory IS and nothing else: the name is what it read (N,
	 * above); a file it goes on to read or write is locked then (S or X)
	 * -- an S lock here would turn every open-then-write of a file that
	 * two transactions update into an upgrade deadlock (TPC-B's branch). */
	if (op->tx ? type == DT_DIR && (rc = fs_lock(op, ino, BE_LOCK_IS)) != 0
		   : ino > a->parent && (rc = fs_lock(op, ino, BE_LOCK_S)) != 0)
		return rc;
	if ((rc = fs_iget(op, ino, &in)) != 0)
		return rc == ENOENT ? BE_ECORRUPT : rc;
	fs_iattr(op->f, &in, a->out);
	fs_ref(op->f, ino, 1); /* under the lock: no unlink can free it first */
	return 0;
}

int fs_lookup(fs *f, const fs_caller *c, uint64_t parent, const char *name, fs_attr *out)
{
	name_arg a = {.c = c, .parent = parent, .name = name, .out = out};
	int rc = check_name(name, &a.len);
	return rc ? -rc : fs_errno(fs_run(f, c, FS_RD, lookup_fn, &a));
}

/* ---- create ---- */

static int create_fn(fs_op *op, void *arg)
{
	name_arg *a = arg;
	fs_inode p, in = {0};
	uint64_t dummy;
	int rc;
	if ((rc = fs_lock_name(op, a->parent, a->name, a->len, BE_LOCK_X)) != 0 ||
	    (rc = fs_ilock_all(op, &a->parent, 1, BE_LOCK_X)) != 0 || (rc = fs_iget(op, a->parent, &p)) != 0)
		return rc;
	if (!S_ISDIR(p.mode))
		return ENOTDIR;
	if (p.nlink == 0)
		return ENOENT; /* removed while we waited */
	if ((rc = dir_get(op, a->parent, a->name, a->len, &dummy, NULL)) == 0)
		return EEXIST;
	if (rc != ENOENT)
		return rc;
	if (S_ISDIR(a->mode) && p.nlink >= FS_LINK_MAX)
		return EMLINK;
	in.ino = a->ino; /* larger than every inode that exists: locks stay ordered */
	if ((rc = fs_lock(op, in.ino, BE_LOCK_X)) != 0)
		return rc;
	in.mode = a->mode;
	in.uid = a->c->uid;
	in.gid = a->c->gid;
	if (p.mode & S_ISGID) { /* BSD group semantics below a set-group-ID directory */
		in.gid = p.gid;
		if (S_ISDIR(a->mode))
			in.mode |= S_ISGID;
	}
	in.nlink = S_ISDIR(a->mode) ? 2 : 1;
	in.rdev = (S_ISCHR(a->mode) || S_ISBLK(a->mode)) ? a->rdev : 0;
	in.parent = S_ISDIR(a->mode) ? a->parent : 0;
	fs_now(&in.ctime);
	in.atime = in.mtime = in.ctime;
	if (a->target) {
		size_t tl = strlen(a->target);
		if ((rc = fs_data_put(op, &in, 0, a->target, tl)) != 0)
			return rc;
	}
	if ((rc = fs_iput(op, &in)) != 0 || (rc = dir_put(op, a->parent, a->name, a->len, in.ino, in.mode)) != 0)
		return rc;
	if ((rc = fs_dir_touch(op, &p, S_ISDIR(a->mode) ? 1 : 0, &in.ctime)) != 0)
		return rc;
	if (!op->tx)
		fs_ino_committed(op->f, in.ino);
	fs_iattr(op->f, &in, a->out);
	fs_ref(op->f, in.ino, 1);
	return 0;
}

static int create(fs *f, const fs_caller *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
		  const char *target, fs_attr *out)
{
	name_arg a = {.c = c, .parent = parent, .name = name, .mode = mode, .rdev = rdev, .target = target, .out = out};
	int rc = check_name(name, &a.len);
	if (rc)
		return -rc;
	if (f->opt.readonly)
		return -EROFS;
	a.ino = fs_new_ino(f);
	return fs_errno(fs_run(f, c, FS_KLOCK, create_fn, &a));
}

int fs_mknod(fs *f, const fs_caller *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev, fs_attr *out)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK: break;
	case 0: mode |= S_IFREG; break;
	default: return -EINVAL;
	}
	return create(f, c, parent, name, mode, rdev, NULL, out);
}

int fs_mkdir(fs *f, const fs_caller *c, uint64_t parent, const char *name, mode_t mode, fs_attr *out)
{
	return create(f, c, parent, name, S_IFDIR | (mode & 07777), 0, NULL, out);
}

/* The target goes to the link's blocks (fs_data_put: as many as it needs)
 * in create_fn's transaction, with the inode and its entry. */
int fs_symlink(fs *f, const fs_caller *c, uint64_t parent, const char *name, const char *target, fs_attr *out)
{
	size_t tl = strlen(target);
	if (tl == 0)
		return -ENOENT;
	if (tl > FS_SYMLINK_MAX)
		return -ENAMETOOLONG;
	return create(f, c, parent, name, S_IFLNK | 0777, 0, target, out);
}

/* ---- link ---- */

static int link_fn(fs_op *op, void *arg)
{
	name_arg *a = arg;
	fs_inode p, in;
	uint64_t both[2] = {a->ino, a->parent}, dummy;
	int rc;
	if ((rc = fs_lock_name(op, a->parent, a->name, a->len, BE_LOCK_X)) != 0 ||
	    (rc = fs_ilock_all(op, both, 2, BE_LOCK_X)) != 0 || (rc = fs_lock(op, a->ino, BE_LOCK_X)) != 0)
		return rc;
	if ((rc = fs_iget(op, a->parent, &p)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	if (!S_ISDIR(p.mode))
		return ENOTDIR;
	if (p.nlink == 0)
		return ENOENT;
	if (S_ISDIR(in.mode))
		return EPERM;
	if (in.nlink == 0)
		return ENOENT;
	if (in.nlink >= FS_LINK_MAX)
		return EMLINK;
	if ((rc = dir_get(op, a->parent, a->name, a->len, &dummy, NULL)) == 0)
		return EEXIST;
	if (rc != ENOENT)
		return rc;
	if ((rc = dir_put(op, a->parent, a->name, a->len, in.ino, in.mode)) != 0)
		return rc;
	in.nlink++;
	fs_now(&in.ctime);
	if ((rc = fs_iput(op, &in)) != 0 || (rc = fs_dir_touch(op, &p, 0, &in.ctime)) != 0)
		return rc;
	fs_iattr(op->f, &in, a->out);
	fs_ref(op->f, in.ino, 1);
	return 0;
}

int fs_link(fs *f, const fs_caller *c, uint64_t ino, uint64_t newparent, const char *newname, fs_attr *out)
{
	name_arg a = {.c = c, .parent = newparent, .name = newname, .ino = ino, .out = out};
	int rc = check_name(newname, &a.len);
	if (rc)
		return -rc;
	return f->opt.readonly ? -EROFS : fs_errno(fs_run(f, c, FS_KLOCK, link_fn, &a));
}

/* ---- unlink, rmdir ---- */

/* in lost a link (its entry is gone): keep it, orphan it, or free it (F3). */
static int drop_link(fs_op *op, fs_inode *in, const struct timespec *now)
{
	unsigned char k[8];
	if (S_ISDIR(in->mode))
		in->nlink = 0;
	else
		in->nlink--;
	in->ctime = *now;
	if (in->nlink > 0)
		return fs_iput(op, in);
	if (!fs_is_referenced(op->f, in->ino))
		return fs_ifree(op, in->ino);
	fs_le64(k, in->ino);
	int rc = fs_rput(op, WS_ORPHAN, k, 8, "", 0);
	return rc ? rc : fs_iput(op, in);
}

static int remove_fn(fs_op *op, void *arg)
{
	name_arg *a = arg;
	int dir = a->mode != 0;
	fs_inode p, in;
	uint64_t ino = 0;
	struct timespec now;
	int rc;
	if ((rc = lock_entry(op, a->parent, a->name, a->len, &ino)) != 0)
		return rc;
	if ((rc = fs_iget(op, a->parent, &p)) != 0)
		return rc;
	if (!S_ISDIR(p.mode))
		return ENOTDIR;
	if (!ino)
		return ENOENT;
	if ((rc = fs_iget(op, ino, &in)) != 0)
		return rc;
	if (dir && !S_ISDIR(in.mode))
		return ENOTDIR;
	if (!dir && S_ISDIR(in.mode))
		return EISDIR;
	if (dir) {
		int empty;
		if ((rc = dir_empty(op, ino, &empty)) != 0)
			return rc;
		if (!empty)
			return ENOTEMPTY;
	}
	if ((rc = dir_del(op, a->parent, a->name, a->len)) != 0)
		return rc;
	fs_now(&now);
	if ((rc = fs_dir_touch(op, &p, dir ? -1 : 0, &now)) != 0)
		return rc;
	return drop_link(op, &in, &now);
}

int fs_unlink(fs *f, const fs_caller *c, uint64_t parent, const char *name)
{
	name_arg a = {.c = c, .parent = parent, .name = name};
	int rc = check_name(name, &a.len);
	if (rc)
		return -rc;
	return f->opt.readonly ? -EROFS : fs_errno(fs_run(f, c, FS_KLOCK, remove_fn, &a));
}

int fs_rmdir(fs *f, const fs_caller *c, uint64_t parent, const char *name)
{
	name_arg a = {.c = c, .parent = parent, .name = name, .mode = S_IFDIR};
	int rc = check_name(name, &a.len);
	if (rc)
		return -rc;
	if (!strcmp(name, "."))
		return -EINVAL;
	if (!strcmp(name, ".."))
		return -ENOTEMPTY;
	return f->opt.readonly ? -EROFS : fs_errno(fs_run(f, c, FS_KLOCK, remove_fn, &a));
}

/* ---- rename ---- */

typedef struct rename_arg {
	uint64_t p1, p2;
	const char *n1, *n2;
	size_t l1, l2;
	unsigned flags;
} rename_arg;

/* Is dir an ancestor of (or equal to) ino?  Walks parent links to the root. */
static int is_ancestor(fs_op *op, uint64_t dir, uint64_t ino, int *yes)
{
	*yes = 0;
	for (int depth = 0; depth < 100000; depth++) {
		fs_inode in;
		int rc;
		if (ino == dir) {
			*yes = 1;
			return 0;
		}
		if (ino == FS_ROOT_INO)
			return 0;
		if ((rc = fs_iget(op, ino, &in)) != 0)
			return rc;
		ino = in.parent;
	}
	return BE_ECORRUPT;
}

static int rename_fn(fs_op *op, void *arg)
{
	rename_arg *a = arg;
	static const unsigned char rlock[] = "rename";
	fs_inode p1, p2, c1, c2;
	uint64_t i1 = 0, i2 = 0;
	struct timespec now;
	int rc, exch = a->flags & RENAME_EXCHANGE;

	if (a->p1 != a->p2 && (rc = fs_be_lock(op, rlock, sizeof rlock - 1, BE_LOCK_X)) != 0)
		return rc;
	if ((rc = fs_lock_name(op, a->p1, a->n1, a->l1, BE_LOCK_X)) != 0 ||
	    (rc = fs_lock_name(op, a->p2, a->n2, a->l2, BE_LOCK_X)) != 0)
		return rc;
	/* lock the parents, learn the children, lock all four in order (F2) */
	for (int tries = 0;; tries++) {
		uint64_t v[4] = {a->p1, a->p2, i1, i2}, kids[2] = {i1, i2};
		uint64_t n1 = 0, n2 = 0;
		if (tries > 100)
			return EAGAIN;
		if ((rc = fs_ilock_all(op, v, 4, BE_LOCK_X)) != 0 || (rc = fs_lock_all(op, kids, 2, BE_LOCK_X)) != 0)
			return rc;
		rc = dir_get(op, a->p1, a->n1, a->l1, &n1, NULL);
		if (rc)
			return rc;
		rc = dir_get(op, a->p2, a->n2, a->l2, &n2, NULL);
		if (rc && rc != ENOENT)
			return rc;
		if (n1 == i1 && n2 == i2)
			break;
		i1 = n1;
		i2 = n2;
	}
	if ((rc = fs_iget(op, a->p1, &p1)) != 0 || (rc = fs_iget(op, a->p2, &p2)) != 0)
		return rc;
	uint32_t o1 = p1.nlink, o2 = p2.nlink;
	if (!S_ISDIR(p1.mode) || !S_ISDIR(p2.mode))
		return ENOTDIR;
	if (p2.nlink == 0)
		return ENOENT;
	if ((rc = fs_iget(op, i1, &c1)) != 0)
		return rc;
	if (i2 && (rc = fs_iget(op, i2, &c2)) != 0)
		return rc;
	if (exch && !i2)
		return ENOENT;
	if (i2 && (a->flags & RENAME_NOREPLACE))
		return EEXIST;
	if (i1 == i2)
		return 0; /* two names of one file: nothing to do */
	if (!exch && i2) {
		if (S_ISDIR(c1.mode) && !S_ISDIR(c2.mode))
			return ENOTDIR;
		if (!S_ISDIR(c1.mode) && S_ISDIR(c2.mode))
			return EISDIR;
		if (S_ISDIR(c2.mode)) {
			int empty;
			if ((rc = dir_empty(op, i2, &empty)) != 0)
				return rc;
			if (!empty)
				return ENOTEMPTY;
		}
	}
	/* a directory may not move into its own subtree */
	if (a->p1 != a->p2) {
		int yes;
		if (S_ISDIR(c1.mode)) {
			if ((rc = is_ancestor(op, i1, a->p2, &yes)) != 0)
				return rc;
			if (yes)
				return EINVAL;
		}
		if (exch && S_ISDIR(c2.mode)) {
			if ((rc = is_ancestor(op, i2, a->p1, &yes)) != 0)
				return rc;
			if (yes)
				return EINVAL;
		}
		if (!exch && S_ISDIR(c1.mode) && p2.nlink >= FS_LINK_MAX)
			return EMLINK;
	}
	fs_now(&now);
	if (exch) {
		if ((rc = dir_put(op, a->p1, a->n1, a->l1, i2, c2.mode)) != 0 ||
		    (rc = dir_put(op, a->p2, a->n2, a->l2, i1, c1.mode)) != 0)
			return rc;
		if (a->p1 != a->p2) {
			if (S_ISDIR(c1.mode)) {
				c1.parent = a->p2;
				p1.nlink--;
				p2.nlink++;
			}
			if (S_ISDIR(c2.mode)) {
				c2.parent = a->p1;
				p2.nlink--;
				p1.nlink++;
			}
		}
		c2.ctime = now;
		if ((rc = fs_iput(op, &c2)) != 0)
			return rc;
	} else {
		if ((rc = dir_del(op, a->p1, a->n1, a->l1)) != 0 ||
		    (rc = dir_put(op, a->p2, a->n2, a->l2, i1, c1.mode)) != 0)
			return rc;
		if (S_ISDIR(c1.mode) && a->p1 != a->p2) {
			c1.parent = a->p2;
			p1.nlink--;
			p2.nlink++;
		}
		if (i2) {
			if (S_ISDIR(c2.mode))
				p2.nlink--;
			if ((rc = drop_link(op, &c2, &now)) != 0)
				return rc;
		}
	}
	c1.ctime = now;
	if ((rc = fs_iput(op, &c1)) != 0)
		return rc;
	/* the parents' link counts change by deltas (fs_dir_touch) */
	int d1 = (int)((int64_t)p1.nlink - o1), d2 = (int)((int64_t)p2.nlink - o2);
	p1.nlink = o1;
	p2.nlink = o2;
	if (a->p1 == a->p2)
		return fs_dir_touch(op, &p2, d2, &now);
	if ((rc = fs_dir_touch(op, &p1, d1, &now)) != 0)
		return rc;
	return fs_dir_touch(op, &p2, d2, &now);
}

int fs_rename(fs *f, const fs_caller *c, uint64_t parent, const char *name, uint64_t newparent, const char *newname,
	      unsigned flags)
{
	rename_arg a = {.p1 = parent, .p2 = newparent, .n1 = name, .n2 = newname, .flags = flags};
	int rc;
	if ((flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) ||
	    ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)))
		return -EINVAL;
	if ((rc = check_name(name, &a.l1)) != 0 || (rc = check_name(newname, &a.l2)) != 0)
		return -rc;
	if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(newname, ".") || !strcmp(newname, ".."))
		return -EBUSY;
	return f->opt.readonly ? -EROFS : fs_errno(fs_run(f, c, FS_KLOCK, rename_fn, &a));
}

/* ---- readlink ---- */

typedef struct readlink_arg {
	uint64_t ino;
	char *buf;
	size_t size, len;
} readlink_arg;

static int readlink_fn(fs_op *op, void *arg)
{
	readlink_arg *a = arg;
	fs_inode in;
	size_t got;
	int rc;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_S)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	if (!S_ISLNK(in.mode))
		return EINVAL;
	size_t want = in.size < a->size ? in.size : a->size;
	if ((rc = fs_data_get(op, &in, 0, want, a->buf, &got)) != 0)
		return rc;
	a->len = got;
	return 0;
}

int fs_readlink(fs *f, const fs_caller *c, uint64_t ino, char *buf, size_t size, size_t *len)
{
	readlink_arg a = {.ino = ino, .buf = buf, .size = size};
	int rc = fs_errno(fs_run(f, c, FS_RD, readlink_fn, &a));
	if (!rc)
		*len = a.len;
	return rc;
}

/* ---- readdir ---- */

typedef struct readdir_arg {
	uint64_t ino, off;
	int plus;
	fs_fill_fn fill;
	void *ctx;
} readdir_arg;

/* Attributes of an entry's inode, read without its lock (fs.c F2 keeps the
 * directory locked; the record read is physically consistent). */
static int entry_attr(fs_op *op, uint64_t ino, unsigned type, int plus, fs_attr *a)
{
	memset(a, 0, sizeof *a);
	a->ino = ino;
	a->mode = type << 12;
	if (!plus)
		return 0;
	fs_inode in;
	int rc = fs_iget(op, ino, &in);
	if (rc)
		return rc == ENOENT ? BE_ECORRUPT : rc;
	fs_iattr(op->f, &in, a);
	return 0;
}

static int readdir_fn(fs_op *op, void *arg)
{
	readdir_arg *a = arg;
	fs_inode d;
	fs_attr at;
	fs_cur *c = NULL;
	int rc;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_S)) != 0 || (rc = fs_iget(op, a->ino, &d)) != 0)
		return rc;
	if (!S_ISDIR(d.mode))
		return ENOTDIR;
	if (a->off < 1) {
		fs_iattr(op->f, &d, &at);
		if (a->fill(a->ctx, ".", &at, 1))
			return 0;
	}
	if (a->off < 2) {
		if ((rc = entry_attr(op, d.parent ? d.parent : FS_ROOT_INO, DT_DIR, a->plus, &at)) != 0)
			return rc;
		if (a->fill(a->ctx, "..", &at, 2))
			return 0;
	}
	unsigned char k[16];
	fs_be64(k, a->ino);
	fs_be64(k + 8, (a->off < 2 ? 2 : a->off) + 1);
	if ((rc = fs_cur_open(op, WS_DIRENT, &c)) != 0)
		return rc;
	for (rc = fs_cur_seek(c, k, 16); rc == 0; rc = fs_cur_next(c)) {
		const unsigned char *key, *val;
		size_t kl, vl;
		char name[FS_NAME_MAX + 1];
		uint64_t ino;
		fs_cur_get(c, (const void **)&key, &kl, (const void **)&val, &vl);
		if (kl < 16 || memcmp(key, k, 8) != 0)
			break; /* past this directory */
		if (vl != 9 || kl - 16 > FS_NAME_MAX) {
			rc = BE_ECORRUPT;
			break;
		}
		memcpy(name, key + 16, kl - 16);
		name[kl - 16] = 0;
		memcpy(&ino, val, 8);
		if ((rc = entry_attr(op, ino, val[8], a->plus, &at)) != 0)
			break;
		if (a->fill(a->ctx, name, &at, fs_getbe64(key + 8)))
			break;
	}
	fs_cur_close(c);
	return rc == BE_ENOTFOUND ? 0 : rc;
}

int fs_readdir(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, int plus, fs_fill_fn fill, void *ctx)
{
	readdir_arg a = {.ino = ino, .off = off, .plus = plus, .fill = fill, .ctx = ctx};
	return fs_errno(fs_run(f, c, FS_RD, readdir_fn, &a));
}
