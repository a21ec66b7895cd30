/*
 * passthrough_ll -- the benchmark's ceiling for a FUSE file system: every
 * request is forwarded to a directory of the host file system, with the same
 * FUSE settings as tpfsd (low-level API, multi-threaded loop, the same entry
 * and attribute timeouts, readdirplus, splice, 1 MiB writes, no writeback
 * cache).  It does no work of its own, so tpfs at 1.0x of it means tpfs's
 * transactions cost nothing a user can see.  Built only for scripts/bench.
 *
 *   passthrough_ll SOURCE_DIR MOUNTPOINT [-f] [-o opts]
 *
 * Inodes are the host's (st_dev, st_ino), each held open as an O_PATH file
 * descriptor while the kernel references it; operations use the *at() calls
 * relative to those descriptors.
 */
#define FUSE_USE_VERSION 314
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define TIMEOUT 1.0 /* as tpfsd */

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
	e->ino = (uintptr_t)p;
	e->attr_timeout = e->entry_timeout = TIMEOUT;
	return 0;
}

static void reply_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int err)
{
	struct fuse_entry_param e;
	if (err || (err = entry(parent, name, &e)) != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

static void pt_init(void *ud, struct fuse_conn_info *c)
{
	(void)ud;
	if (c->capable & FUSE_CAP_SPLICE_WRITE)
		c->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	if (c->capable & FUSE_CAP_SPLICE_READ)
		c->want |= FUSE_CAP_SPLICE_READ;
	if (c->capable & FUSE_CAP_READDIRPLUS)
		c->want |= FUSE_CAP_READDIRPLUS;
	c->want &= ~(unsigned)(FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_WRITEBACK_CACHE);
	c->max_write = 1 << 20;
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err = entry(parent, name, &e);
	if (err == ENOENT) {
		e.ino = 0;
		e.entry_timeout = TIMEOUT;
		fuse_reply_entry(req, &e);
	} else if (err) {
		fuse_reply_err(req, err);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	unref(ino_of(ino), n);
	fuse_reply_none(req);
}

static void pt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		unref(ino_of(f[i].ino), f[i].nlookup);
	fuse_reply_none(req);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	(void)fi;
	if (fstatat(fd_of(ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int valid, struct fuse_file_info *fi)
{
	char path[64];
	int fd = fd_of(ino), rc = 0;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
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
		fuse_reply_err(req, errno);
	else
		pt_getattr(req, ino, fi);
}

static void pt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	int rc = mknodat(fd_of(parent), name, mode, rdev);
	reply_entry(req, parent, name, rc ? errno : 0);
}

static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	int rc = mkdirat(fd_of(parent), name, mode);
	reply_entry(req, parent, name, rc ? errno : 0);
}

static void pt_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	int rc = symlinkat(link, fd_of(parent), name);
	reply_entry(req, parent, name, rc ? errno : 0);
}

static void pt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd_of(ino));
	int rc = linkat(AT_FDCWD, path, fd_of(parent), name, AT_SYMLINK_FOLLOW);
	reply_entry(req, parent, name, rc ? errno : 0);
}

static void pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(fd_of(parent), name, 0) ? errno : 0);
}

static void pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(fd_of(parent), name, AT_REMOVEDIR) ? errno : 0);
}

static void pt_rename(fuse_req_t req, fuse_ino_t p, const char *name, fuse_ino_t np, const char *nn, unsigned flags)
{
	fuse_reply_err(req, renameat2(fd_of(p), name, fd_of(np), nn, flags) ? errno : 0);
}

static void pt_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n = readlinkat(fd_of(ino), "", buf, sizeof buf - 1);
	if (n < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	buf[n] = 0;
	fuse_reply_readlink(req, buf);
}

static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd_of(ino));
	int fd = open(path, fi->flags & ~O_NOFOLLOW);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	fuse_reply_open(req, fi);
}

static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int fd = openat(fd_of(parent), name, (fi->flags | O_CREAT) & ~O_NOFOLLOW, mode), err;
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	if ((err = entry(parent, name, &e)) != 0) {
		close(fd);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	fuse_reply_create(req, &e, fi);
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	(void)ino;
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = (int)fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void pt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	(void)ino;
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	ssize_t n = fuse_buf_copy(&out, in, 0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void pt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0); /* as tpfsd: no work in flush */
}

static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	int rc = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
	fuse_reply_err(req, rc ? errno : 0);
}

typedef struct pt_dir {
	DIR *dp;
	struct dirent *ent;
	off_t off;
} pt_dir;

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	pt_dir *d = calloc(1, sizeof *d);
	int fd = openat(fd_of(ino), ".", O_RDONLY | O_DIRECTORY);
	if (!d || fd < 0 || !(d->dp = fdopendir(fd))) {
		int err = errno ? errno : ENOMEM;
		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uintptr_t)d;
	fuse_reply_open(req, fi);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi, int plus)
{
	pt_dir *d = (pt_dir *)(uintptr_t)fi->fh;
	char *buf = malloc(size), *p = buf;
	size_t rem = size;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
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
	do_readdir(req, ino, size, off, fi, 0);
}

static void pt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

static void pt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	pt_dir *d = (pt_dir *)(uintptr_t)fi->fh;
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void pt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	if (fstatvfs(fd_of(ino), &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void pt_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char path[64], *buf = size ? malloc(size) : NULL;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd_of(ino));
	ssize_t n = lgetxattr(path, name, buf, size);
	if (n < 0)
		fuse_reply_err(req, errno);
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
	}
	if (!src || !mnt) {
		fprintf(stderr, "usage: passthrough_ll SOURCE_DIR MOUNTPOINT [-f] [-o opts]\n");
		return 2;
	}
	if ((root.fd = open(src, O_PATH)) < 0) {
		perror(src);
		return 1;
	}
	fuse_opt_add_arg(&args, argv[0]);
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, opts ? opts : "default_permissions,allow_other,fsname=passthrough");
	if (!(se = fuse_session_new(&args, &ops, sizeof ops, NULL)))
		return 1;
	if (fuse_set_signal_handlers(se) == 0 && fuse_session_mount(se, mnt) == 0) {
		fuse_daemonize(foreground);
		cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(cfg, 1);
		fuse_loop_cfg_set_max_threads(cfg, 10);
		rc = fuse_session_loop_mt(se, cfg) ? 1 : 0;
		fuse_loop_cfg_destroy(cfg);
		fuse_session_unmount(se);
	}
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc;
}
