/*
 * passthrough_ll -- the benchmark's ceiling for a FUSE file system: every
 * request is forwarded to a directory of the host file system, with the same
 * FUSE settings as tpfsd, so that tpfs/passthrough measures the work tpfs
 * does underneath and not a difference in FUSE tuning:
 *   - low-level API, multi-threaded loop with a cloned /dev/fuse fd per
 *     thread, at most 64 threads, 10 idle (tpfsd's defaults);
 *   - entry, attribute and negative-entry timeouts of 1 s;
 *   - readdirplus for every readdir (READDIRPLUS_AUTO off), asynchronous
 *     reads, O_TRUNC inside open, cached symlink targets, parallel
 *     directory operations; no writeback cache, no AUTO_INVAL_DATA;
 *     HANDLE_KILLPRIV_V2 asked for in the INIT reply with tpfsd's own code
 *     (fsd/fuse/fsd_io.c), so the kernel asks getxattr("security.capability")
 *     once per inode, not before each write (clearing set-id bits, which
 *     that leaves to the file system, is not done: the benchmark's files
 *     have none);
 *   - 1 MiB writes, max_readahead 1 MiB, and the mount's read-ahead
 *     (/sys/class/bdi/MAJ:MIN/read_ahead_kb) raised to 1 MiB when root;
 *   - keep_cache and noflush on every open file, cache_readdir on every
 *     open directory (tpfsd's open_flags and opendir_flags);
 *   - st_blksize 1 MiB, so that stdio (cc, as, ld, tar) reads and writes in
 *     buffers that fill a request, as on tpfs;
 *   - default_permissions and allow_other.
 * One difference, in the ceiling's favour: splice, for reads and writes
 * (the data moves between /dev/fuse and the host file without a copy),
 * which tpfsd leaves off since it copies data into its own pages anyway.
 *
 *   passthrough_ll SOURCE_DIR MOUNTPOINT [-f] [-o opts]
 *
 * Inodes are the host's (st_dev, st_ino), each held open as an O_PATH file
 * descriptor while the kernel references it; operations use the *at() calls
 * relative to those descriptors.
 *
 * Requests are counted by kind, with tpfsd's names, and readable as the
 * virtual extended attribute "passthrough.stats" of the root directory
 * ("kind count" lines), so the benchmark can put the passthrough's round
 * trips per operation next to tpfs's:
 *
 *     getfattr --only-values -n passthrough.stats MOUNTPOINT
 *
 * Built only for scripts/bench_fs.
 */
#define FUSE_USE_VERSION 314
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fsd_io.h"

#define TIMEOUT 1.0      /* as tpfsd */
#define IO_SIZE (1u << 20) /* as tpfsd's FSD_IO_SIZE */
#define STATS_XATTR "passthrough.stats"

/* Request kinds, named as tpfsd names them (fsd/fuse/fsd_ops.h).  "requests"
 * counts every request (forgets too, which have no reply); "lookup-negative"
 * counts the lookups of missing names among the lookups. */
#define PT_OPS(X)                                                                                                      \
	X(REQUESTS, "requests")                                                                                        \
	X(ERRORS, "errors")                                                                                            \
	X(LOOKUP, "lookup")                                                                                            \
	X(FORGET, "forget")                                                                                            \
	X(GETATTR, "getattr")                                                                                          \
	X(SETATTR, "setattr")                                                                                          \
	X(READLINK, "readlink")                                                                                        \
	X(MKNOD, "mknod")                                                                                              \
	X(MKDIR, "mkdir")                                                                                              \
	X(UNLINK, "unlink")                                                                                            \
	X(RMDIR, "rmdir")                                                                                              \
	X(SYMLINK, "symlink")                                                                                          \
	X(RENAME, "rename")                                                                                            \
	X(LINK, "link")                                                                                                \
	X(OPEN, "open")                                                                                                \
	X(READ, "read")                                                                                                \
	X(WRITE, "write")                                                                                              \
	X(FLUSH, "flush")                                                                                              \
	X(RELEASE, "release")                                                                                          \
	X(FSYNC, "fsync")                                                                                              \
	X(OPENDIR, "opendir")                                                                                          \
	X(READDIR, "readdir")                                                                                          \
	X(READDIRPLUS, "readdirplus")                                                                                  \
	X(RELEASEDIR, "releasedir")                                                                                    \
	X(STATFS, "statfs")                                                                                            \
	X(GETXATTR, "getxattr")                                                                                        \
	X(CREATE, "create")                                                                                            \
	X(NEGATIVE, "lookup-negative")

enum pt_op {
#define PT_OP_ENUM(id, name) OP_##id,
	PT_OPS(PT_OP_ENUM)
#undef PT_OP_ENUM
	OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
#define PT_OP_NAME(id, name) [OP_##id] = name,
	PT_OPS(PT_OP_NAME)
#undef PT_OP_NAME
};

static _Atomic uint64_t op_counts[OP_COUNT];

static void count(int op)
{
	atomic_fetch_add_explicit(&op_counts[OP_REQUESTS], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&op_counts[op], 1, memory_order_relaxed);
}

static void reply_err(fuse_req_t req, int err)
{
	if (err)
		atomic_fetch_add_explicit(&op_counts[OP_ERRORS], 1, memory_order_relaxed);
	fuse_reply_err(req, err);
}

typedef struct pt_inode {
	int fd; /* O_PATH */
	dev_t dev;
	ino_t ino;
	uint64_t nlookup; /* under mu */
	struct pt_inode *next;
} pt_inode;

static pt_inode root;
static pt_inode *table[65536];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static pt_inode *ino_of(fuse_ino_t i) { return i == FUSE_ROOT_ID ? &root : (pt_inode *)(uintptr_t)i; }
static int fd_of(fuse_ino_t i) { return ino_of(i)->fd; }

static void proc_path(char *buf, size_t size, int fd)
{
	snprintf(buf, size, "/proc/self/fd/%d", fd);
}

static pt_inode *find_or_add(int fd, const struct stat *st)
{
	size_t h = (st->st_ino * 31 + st->st_dev) % 65536;
	pthread_mutex_lock(&mu);
	for (pt_inode *p = table[h]; p; p = p->next)
		if (p->ino == st->st_ino && p->dev == st->st_dev) {
			p->nlookup++;
			pthread_mutex_unlock(&mu);
			close(fd);
			return p;
		}
	pt_inode *p = calloc(1, sizeof *p);
	if (p) {
		p->fd = fd;
		p->dev = st->st_dev;
		p->ino = st->st_ino;
		p->nlookup = 1;
		p->next = table[h];
		table[h] = p;
	} else {
		close(fd);
	}
	pthread_mutex_unlock(&mu);
	return p;
}

static void unref(pt_inode *p, uint64_t n)
{
	if (p == &root)
		return;
	pthread_mutex_lock(&mu);
	p->nlookup -= n;
	if (!p->nlookup) {
		size_t h = (p->ino * 31 + p->dev) % 65536;
		pt_inode **pp = &table[h];
		while (*pp != p)
			pp = &(*pp)->next;
		*pp = p->next;
		close(p->fd);
		free(p);
	}
	pthread_mutex_unlock(&mu);
}

/* Looks name up in parent and takes a lookup reference on it. */
static int entry(fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	int fd = openat(fd_of(parent), name, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		close(fd);
		return err;
	}
	pt_inode *p = find_or_add(fd, &e->attr);
	if (!p)
		return ENOMEM;
	e->attr.st_blksize = IO_SIZE; /* as tpfsd: stdio buffers that fill a request */
	e->ino = (uintptr_t)p;
	e->attr_timeout = e->entry_timeout = TIMEOUT;
	return 0;
}

static void reply_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int err)
{
	struct fuse_entry_param e;
	if (err || (err = entry(parent, name, &e)) != 0)
		reply_err(req, err);
	else if (fuse_reply_entry(req, &e) != 0)
		unref(ino_of(e.ino), 1);
}

/* What tpfsd asks of the kernel (fsd/fuse/fsd_ops.c, fsd_init), and splice. */
static void pt_init(void *ud, struct fuse_conn_info *c)
{
	(void)ud;
	unsigned on = FUSE_CAP_ASYNC_READ | FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_READDIRPLUS | FUSE_CAP_CACHE_SYMLINKS |
		      FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	unsigned off = FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_EXPORT_SUPPORT |
		       FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_POSIX_ACL | FUSE_CAP_HANDLE_KILLPRIV |
		       FUSE_CAP_AUTO_INVAL_DATA;
	c->want = ((c->want | on) & ~off) & c->capable;
	c->max_write = IO_SIZE;
	c->max_readahead = IO_SIZE;
	c->time_gran = 1;
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	count(OP_LOOKUP);
	int err = entry(parent, name, &e);
	if (err == ENOENT) { /* a negative entry, kept as long as tpfsd's */
		atomic_fetch_add_explicit(&op_counts[OP_NEGATIVE], 1, memory_order_relaxed);
		memset(&e, 0, sizeof e);
		e.entry_timeout = TIMEOUT;
		fuse_reply_entry(req, &e);
	} else if (err) {
		reply_err(req, err);
	} else if (fuse_reply_entry(req, &e) != 0) {
		unref(ino_of(e.ino), 1);
	}
}

static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	count(OP_FORGET);
	unref(ino_of(ino), n);
	fuse_reply_none(req);
}

static void pt_forget_multi(fuse_req_t req, size_t n, struct fuse_forget_data *f)
{
	count(OP_FORGET);
	for (size_t i = 0; i < n; i++)
		unref(ino_of(f[i].ino), f[i].nlookup);
	fuse_reply_none(req);
}

static void do_getattr(fuse_req_t req, fuse_ino_t ino)
{
	struct stat st;
	if (fstatat(fd_of(ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		reply_err(req, errno);
	} else {
		st.st_blksize = IO_SIZE;
		fuse_reply_attr(req, &st, TIMEOUT);
	}
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	count(OP_GETATTR);
	do_getattr(req, ino);
}

static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int valid, struct fuse_file_info *fi)
{
	char path[64];
	int fd = fd_of(ino), rc = 0;
	count(OP_SETATTR);
	proc_path(path, sizeof path, fd);
	if (valid & FUSE_SET_ATTR_MODE)
		rc = fi ? fchmod((int)fi->fh, a->st_mode) : chmod(path, a->st_mode);
	if (!rc && (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		rc = fchownat(fd, "", (valid & FUSE_SET_ATTR_UID) ? a->st_uid : (uid_t)-1,
			      (valid & FUSE_SET_ATTR_GID) ? a->st_gid : (gid_t)-1, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	if (!rc && (valid & FUSE_SET_ATTR_SIZE))
		rc = fi ? ftruncate((int)fi->fh, a->st_size) : truncate(path, a->st_size);
	if (!rc && (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = a->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = a->st_mtim;
		rc = fi ? futimens((int)fi->fh, tv) : utimensat(AT_FDCWD, path, tv, 0);
	}
	if (rc)
		reply_err(req, errno);
	else
		do_getattr(req, ino);
}

static void pt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	count(OP_MKNOD);
	int rc = mknodat(fd_of(parent), name, mode, rdev);
	reply_entry(req, parent, name, rc ? errno : 0);
}

static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	count(OP_MKDIR);
	int rc = mkdirat(fd_of(parent), name, mode);
	reply_entry(req, parent, name, rc ? errno : 0);
}

static void pt_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	count(OP_SYMLINK);
	int rc = symlinkat(link, fd_of(parent), name);
	reply_entry(req, parent, name, rc ? errno : 0);
}

static void pt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	char path[64];
	count(OP_LINK);
	proc_path(path, sizeof path, fd_of(ino));
	int rc = linkat(AT_FDCWD, path, fd_of(parent), name, AT_SYMLINK_FOLLOW);
	reply_entry(req, parent, name, rc ? errno : 0);
}

static void pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	count(OP_UNLINK);
	reply_err(req, unlinkat(fd_of(parent), name, 0) ? errno : 0);
}

static void pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	count(OP_RMDIR);
	reply_err(req, unlinkat(fd_of(parent), name, AT_REMOVEDIR) ? errno : 0);
}

static void pt_rename(fuse_req_t req, fuse_ino_t p, const char *name, fuse_ino_t np, const char *nn, unsigned flags)
{
	count(OP_RENAME);
	reply_err(req, renameat2(fd_of(p), name, fd_of(np), nn, flags) ? errno : 0);
}

static void pt_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	count(OP_READLINK);
	ssize_t n = readlinkat(fd_of(ino), "", buf, sizeof buf - 1);
	if (n < 0) {
		reply_err(req, errno);
		return;
	}
	buf[n] = 0;
	fuse_reply_readlink(req, buf);
}

/* tpfsd's open_flags: the page cache survives the open; no FLUSH at close. */
static void open_flags(struct fuse_file_info *fi, int fd)
{
	fi->fh = (uint64_t)fd;
	fi->keep_cache = 1;
	fi->noflush = 1;
	fi->direct_io = 0;
}

static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];
	count(OP_OPEN);
	proc_path(path, sizeof path, fd_of(ino));
	int fd = open(path, fi->flags & ~O_NOFOLLOW);
	if (fd < 0) {
		reply_err(req, errno);
		return;
	}
	open_flags(fi, fd);
	if (fuse_reply_open(req, fi) != 0)
		close(fd);
}

static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	count(OP_CREATE);
	int fd = openat(fd_of(parent), name, (fi->flags | O_CREAT) & ~O_NOFOLLOW, mode), err;
	if (fd < 0) {
		reply_err(req, errno);
		return;
	}
	if ((err = entry(parent, name, &e)) != 0) {
		close(fd);
		reply_err(req, err);
		return;
	}
	open_flags(fi, fd);
	if (fuse_reply_create(req, &e, fi) != 0) {
		close(fd);
		unref(ino_of(e.ino), 1);
	}
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	(void)ino;
	count(OP_READ);
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = (int)fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void pt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	(void)ino;
	count(OP_WRITE);
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	ssize_t n = fuse_buf_copy(&out, in, 0);
	if (n < 0)
		reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void pt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	count(OP_FLUSH);
	reply_err(req, 0); /* as tpfsd: no work in flush (and noflush: never sent) */
}

static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	count(OP_RELEASE);
	close((int)fi->fh);
	reply_err(req, 0);
}

static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	count(OP_FSYNC);
	int rc = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
	reply_err(req, rc ? errno : 0);
}

typedef struct pt_dir {
	DIR *dp;
	struct dirent *ent;
	off_t off;
} pt_dir;

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	count(OP_OPENDIR);
	pt_dir *d = calloc(1, sizeof *d);
	int fd = openat(fd_of(ino), ".", O_RDONLY | O_DIRECTORY);
	if (!d || fd < 0 || !(d->dp = fdopendir(fd))) {
		int err = errno ? errno : ENOMEM;
		if (fd >= 0)
			close(fd);
		free(d);
		reply_err(req, err);
		return;
	}
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 1; /* tpfsd's opendir_flags */
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) != 0) {
		closedir(d->dp);
		free(d);
	}
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi, int plus)
{
	pt_dir *d = (pt_dir *)(uintptr_t)fi->fh;
	char *buf = malloc(size), *p = buf;
	size_t rem = size;
	if (!buf) {
		reply_err(req, ENOMEM);
		return;
	}
	if (off != d->off) {
		seekdir(d->dp, off);
		d->ent = NULL;
		d->off = off;
	}
	for (;;) {
		if (!d->ent) {
			errno = 0;
			if (!(d->ent = readdir(d->dp)))
				break;
		}
		off_t next = d->ent->d_off;
		size_t n;
		if (plus) {
			struct fuse_entry_param e = {0};
			int isdot = !strcmp(d->ent->d_name, ".") || !strcmp(d->ent->d_name, "..");
			if (isdot) {
				e.attr.st_ino = d->ent->d_ino;
				e.attr.st_mode = (mode_t)d->ent->d_type << 12;
			} else if (entry(ino, d->ent->d_name, &e) != 0) {
				d->ent = NULL;
				continue;
			}
			n = fuse_add_direntry_plus(req, p, rem, d->ent->d_name, &e, next);
			if (n > rem) {
				if (!isdot)
					unref(ino_of(e.ino), 1);
				break;
			}
		} else {
			struct stat st = {.st_ino = d->ent->d_ino, .st_mode = (mode_t)d->ent->d_type << 12};
			n = fuse_add_direntry(req, p, rem, d->ent->d_name, &st, next);
			if (n > rem)
				break;
		}
		p += n;
		rem -= n;
		d->ent = NULL;
		d->off = next;
	}
	fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	count(OP_READDIR);
	do_readdir(req, ino, size, off, fi, 0);
}

static void pt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	count(OP_READDIRPLUS);
	do_readdir(req, ino, size, off, fi, 1);
}

static void pt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	count(OP_RELEASEDIR);
	pt_dir *d = (pt_dir *)(uintptr_t)fi->fh;
	closedir(d->dp);
	free(d);
	reply_err(req, 0);
}

static void pt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	count(OP_STATFS);
	if (fstatvfs(fd_of(ino), &sv) < 0)
		reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* The counters as "kind count" lines, for getxattr(STATS_XATTR) on the root. */
static void reply_stats(fuse_req_t req, size_t size)
{
	char text[OP_COUNT * 48];
	size_t len = 0;
	for (int i = 0; i < OP_COUNT; i++)
		len += (size_t)snprintf(text + len, sizeof text - len, "%s %" PRIu64 "\n", op_names[i],
					atomic_load_explicit(&op_counts[i], memory_order_relaxed));
	if (!size)
		fuse_reply_xattr(req, len);
	else if (size < len)
		reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, text, len);
}

static void pt_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char path[64], *buf = NULL;
	count(OP_GETXATTR);
	if (ino == FUSE_ROOT_ID && !strcmp(name, STATS_XATTR)) {
		reply_stats(req, size);
		return;
	}
	if (size && !(buf = malloc(size))) {
		reply_err(req, ENOMEM);
		return;
	}
	/* getxattr, not lgetxattr: the /proc link of an O_PATH descriptor
	 * leads to the file it names (a symlink itself for a symlink). */
	proc_path(path, sizeof path, fd_of(ino));
	ssize_t n = getxattr(path, name, buf, size);
	if (n < 0)
		reply_err(req, errno);
	else if (size)
		fuse_reply_buf(req, buf, (size_t)n);
	else
		fuse_reply_xattr(req, (size_t)n);
	free(buf);
}

static const struct fuse_lowlevel_ops ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.forget_multi = pt_forget_multi,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.readlink = pt_readlink,
	.mknod = pt_mknod,
	.mkdir = pt_mkdir,
	.symlink = pt_symlink,
	.link = pt_link,
	.unlink = pt_unlink,
	.rmdir = pt_rmdir,
	.rename = pt_rename,
	.open = pt_open,
	.create = pt_create,
	.read = pt_read,
	.write_buf = pt_write_buf,
	.flush = pt_flush,
	.release = pt_release,
	.fsync = pt_fsync,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.readdirplus = pt_readdirplus,
	.releasedir = pt_releasedir,
	.statfs = pt_statfs,
	.getxattr = pt_getxattr,
};

/* tpfsd's tune_readahead (fsd/fuse/tpfsd.c): the kernel reads ahead at most the
 * mount's read_ahead_kb (128 by default) whatever max_readahead says; raise
 * it to 1 MiB.  The mount is found in mountinfo (a stat of the mount point
 * would wait for the session loop).  Root only; best effort, said on
 * stderr when it fails. */
static void tune_readahead(const char *mnt)
{
	char real[PATH_MAX], line[8192], dev[64] = "", path[128];
	FILE *mi;
	if (!realpath(mnt, real) || !(mi = fopen("/proc/self/mountinfo", "r")))
		return;
	while (fgets(line, sizeof line, mi)) {
		char d[64], m[PATH_MAX], un[PATH_MAX], *o = un, *sep = strstr(line, " - ");
		/* id parent major:minor root mountpoint ... - fstype source opts */
		if (!sep || sscanf(line, "%*s %*s %63s %*s %4095s", d, m) != 2 || strncmp(sep, " - fuse", 7) != 0)
			continue;
		for (const char *q = m; *q && o < un + sizeof un - 1; q++) { /* \ooo escapes */
			if (q[0] == '\\' && q[1] >= '0' && q[1] <= '3' && q[2] && q[3]) {
				*o++ = (char)((q[1] - '0') * 64 + (q[2] - '0') * 8 + (q[3] - '0'));
				q += 3;
			} else {
				*o++ = *q;
			}
		}
		*o = 0;
		if (!strcmp(un, real))
			snprintf(dev, sizeof dev, "%s", d); /* the last one is the newest */
	}
	fclose(mi);
	if (!dev[0])
		return;
	snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
	FILE *ra = fopen(path, "w");
	int ok = ra && fprintf(ra, "%u\n", IO_SIZE / 1024) > 0;
	if (ra && fclose(ra) != 0)
		ok = 0;
	if (!ok)
		fprintf(stderr, "passthrough_ll: %s: cannot raise the read-ahead: %s\n", path, strerror(errno));
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;
	struct fuse_loop_config *cfg;
	int foreground = 0, rc = 1;
	const char *src = NULL, *mnt = NULL, *opts = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-f"))
			foreground = 1;
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			opts = argv[++i];
		else if (!src)
			src = argv[i];
		else if (!mnt)
			mnt = argv[i];
		else
			src = NULL; /* too many: usage */
	}
	if (!src || !mnt) {
		fprintf(stderr, "usage: passthrough_ll SOURCE_DIR MOUNTPOINT [-f] [-o opts]\n");
		return 2;
	}
	if ((root.fd = open(src, O_PATH | O_DIRECTORY)) < 0) {
		perror(src);
		return 1;
	}
	fuse_opt_add_arg(&args, argv[0]);
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, opts ? opts
				     : geteuid() == 0 ? "default_permissions,allow_other,fsname=passthrough,subtype=passthrough"
						      : "default_permissions,fsname=passthrough,subtype=passthrough");
	if (!(se = fuse_session_new(&args, &ops, sizeof ops, NULL)))
		return 1;
	if (fuse_set_signal_handlers(se) == 0 && fuse_session_mount(se, mnt) == 0 && fsd_io_install(se) == 0) {
		if (geteuid() == 0)
			tune_readahead(mnt);
		fuse_daemonize(foreground);
		if ((cfg = fuse_loop_cfg_create())) {
			fuse_loop_cfg_set_clone_fd(cfg, 1);
			fuse_loop_cfg_set_idle_threads(cfg, 10); /* tpfsd's defaults */
			fuse_loop_cfg_set_max_threads(cfg, 64);
			rc = fuse_session_loop_mt(se, cfg) ? 1 : 0;
			fuse_loop_cfg_destroy(cfg);
		}
		fuse_session_unmount(se);
	}
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc;
}
