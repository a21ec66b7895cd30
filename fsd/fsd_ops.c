/*
 * fsd_ops -- tpfsd's FUSE low-level handlers: decode the request, call the
 * fs layer (fs.h), map the error, reply.  Grouped by kind: names (entries
 * and directories), data (open files), attributes, control (init, statfs,
 * the statistics attribute).
 *
 * Rules every handler keeps:
 * H1  One fs_* call per request (open with O_TRUNC and create make two),
 *     and exactly one reply (fuse_reply_none for forgets).
 * H2  A reply that hands the kernel a lookup reference (lookup, mknod,
 *     mkdir, symlink, link, create, every readdirplus entry but "." and
 *     "..") is preceded by fs_ref, so that a forget racing right behind the
 *     reply finds the reference; when the reply cannot be delivered (the
 *     request was interrupted) the reference is taken back with fs_forget.
 * H3  open and create count an open file (fs_opened) that release ends
 *     (fs_released); a reply that cannot be delivered ends it at once.
 * H4  What a reply lets the kernel cache, and for how long, is decided in
 *     one place: entry_timeout, attr_timeout, open_flags, opendir_flags.
 *     These are safe for plain POSIX use, where every change passes through
 *     this kernel: the kernel updates or drops its own caches as it sends
 *     each change.  The transaction issue (DESIGN.md 3) will make them zero
 *     / off for objects an active transaction changed, and invalidate at
 *     commit and abort.
 * H5  An fs result reaches the kernel as an errno through reply_err only.
 *
 * Round trips saved (each ~24 us): readdirplus always (no lookup per entry
 * after a listing), entry / attribute / negative-entry caching (H4), the
 * kernel's readdir cache for directories, cached symlink targets, O_TRUNC
 * inside open, no flush request at close (noflush), 1 MiB reads and writes,
 * default_permissions (no access requests).  Counts per kind: fsd_ops.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <time.h>

#include "fsd_ops.h"

const char *const fsd_op_names[FSD_OP_COUNT] = {
#define FSD_OP_NAME(id, name) [FSD_OP_##id] = name,
	FSD_OPS(FSD_OP_NAME)
#undef FSD_OP_NAME
};

/* ---------------------------------------------------------------------- */
/* Decoding and replying                                                  */

/* Every handler starts here: the request is counted by kind. */
static fsd *begin(fuse_req_t req, int op)
{
	fsd *d = fuse_req_userdata(req);
	fs_count(d->fs, FSD_OP_REQUESTS);
	fs_count(d->fs, op);
	return d;
}

static fs_caller caller(fuse_req_t req)
{
	const struct fuse_ctx *x = fuse_req_ctx(req);
	fs_caller c = {.uid = x->uid, .gid = x->gid, .pid = x->pid, .umask = x->umask};
	return c;
}

/* The kernel lets names of up to 1024 bytes through; POSIX wants 255. */
static int name_ok(const char *name)
{
	return strlen(name) <= FS_NAME_MAX;
}

/* H5: the one place where an fs result becomes the errno the kernel gets.
 * fs_* return 0 or a negative errno; anything else is a bug reported as EIO. */
static void reply_err(fuse_req_t req, fsd *d, int rc)
{
	int e = rc < 0 ? -rc : rc;
	if (e >= 4096) {
		fsd_log(LOG_ERR, "fs layer returned %d, not an errno: answering EIO", rc);
		e = EIO;
	}
	if (e)
		fs_count(d->fs, FSD_OP_ERRORS);
	fuse_reply_err(req, e);
}

static void to_stat(const fs_attr *a, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_rdev = a->rdev;
	st->st_blksize = FSD_IO_SIZE;
	st->st_atim = a->atime;
	st->st_mtim = a->mtime;
	st->st_ctim = a->ctime;
}

/* H4: how long the kernel may keep a name and attributes. */
static double entry_timeout(const fsd *d, const fs_attr *a)
{
	(void)a; /* the transaction issue: 0 for objects a transaction changed */
	return d->entry_timeout;
}

static double attr_timeout(const fsd *d, const fs_attr *a)
{
	(void)a; /* the transaction issue: 0 for objects a transaction changed */
	return d->attr_timeout;
}

/* H4: what the kernel may cache of an open file.  keep_cache: the page cache
 * survives the open (every write went through it: op_init); noflush: no
 * FLUSH request at each close(), since flush has nothing to do (writes are
 * not buffered). */
static void open_flags(const fsd *d, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)d, (void)ino; /* the transaction issue: direct_io for members */
	fi->keep_cache = 1;
	fi->noflush = 1;
	fi->direct_io = 0;
}

/* H4: the kernel's readdir cache, kept across opens; the kernel drops it
 * when it changes the directory itself or sees its mtime move. */
static void opendir_flags(const fsd *d, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)d, (void)ino; /* the transaction issue: off for changed directories */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
}

static void to_entry(const fsd *d, const fs_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = a->ino;
	e->generation = 0; /* inode numbers are never reused (fs.h) */
	to_stat(a, &e->attr);
	e->entry_timeout = entry_timeout(d, a);
	e->attr_timeout = attr_timeout(d, a);
}

/* H2: a reply with a new lookup reference. */
static void reply_entry(fuse_req_t req, fsd *d, int rc, const fs_attr *a)
{
	struct fuse_entry_param e;
	if (rc) {
		reply_err(req, d, rc);
		return;
	}
	to_entry(d, a, &e);
	fs_ref(d->fs, a->ino, 1);
	if (fuse_reply_entry(req, &e) != 0)
		fs_forget(d->fs, a->ino, 1);
}

static void reply_attr(fuse_req_t req, fsd *d, int rc, const fs_attr *a)
{
	struct stat st;
	if (rc) {
		reply_err(req, d, rc);
		return;
	}
	to_stat(a, &st);
	fuse_reply_attr(req, &st, attr_timeout(d, a));
}

/* ---------------------------------------------------------------------- */
/* Names                                                                  */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fsd *d = begin(req, FSD_OP_LOOKUP);
	fs_caller c = caller(req);
	fs_attr a;
	int rc = name_ok(name) ? fs_lookup(d->fs, &c, parent, name, &a) : -ENAMETOOLONG;
	if (rc == -ENOENT) {
		fs_count(d->fs, FSD_OP_NEGATIVE);
		if (d->negative_timeout > 0) {
			/* A negative entry: the kernel keeps the absence of the name
			 * (H4), so a search path or a build probing for missing files
			 * asks once.  A create through this kernel replaces it. */
			struct fuse_entry_param e;
			memset(&e, 0, sizeof e);
			e.entry_timeout = d->negative_timeout;
			fuse_reply_entry(req, &e);
			return;
		}
	}
	reply_entry(req, d, rc, &a);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fsd *d = begin(req, FSD_OP_FORGET);
	fs_forget(d->fs, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	fsd *d = begin(req, FSD_OP_FORGET);
	for (size_t i = 0; i < count; i++)
		fs_forget(d->fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	fsd *d = begin(req, FSD_OP_MKNOD);
	fs_caller c = caller(req);
	fs_attr a;
	/* Device nodes: the kernel already required CAP_MKNOD of the caller. */
	int rc = name_ok(name) ? fs_mknod(d->fs, &c, parent, name, mode, rdev, &a) : -ENAMETOOLONG;
	reply_entry(req, d, rc, &a);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fsd *d = begin(req, FSD_OP_MKDIR);
	fs_caller c = caller(req);
	fs_attr a;
	int rc = name_ok(name) ? fs_mkdir(d->fs, &c, parent, name, mode, &a) : -ENAMETOOLONG;
	reply_entry(req, d, rc, &a);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	fsd *d = begin(req, FSD_OP_SYMLINK);
	fs_caller c = caller(req);
	fs_attr a;
	int rc = name_ok(name) ? fs_symlink(d->fs, &c, parent, name, target, &a) : -ENAMETOOLONG;
	reply_entry(req, d, rc, &a);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fsd *d = begin(req, FSD_OP_LINK);
	fs_caller c = caller(req);
	fs_attr a;
	int rc = name_ok(newname) ? fs_link(d->fs, &c, ino, newparent, newname, &a) : -ENAMETOOLONG;
	reply_entry(req, d, rc, &a);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fsd *d = begin(req, FSD_OP_UNLINK);
	fs_caller c = caller(req);
	reply_err(req, d, name_ok(name) ? fs_unlink(d->fs, &c, parent, name) : -ENAMETOOLONG);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fsd *d = begin(req, FSD_OP_RMDIR);
	fs_caller c = caller(req);
	reply_err(req, d, name_ok(name) ? fs_rmdir(d->fs, &c, parent, name) : -ENAMETOOLONG);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	fsd *d = begin(req, FSD_OP_RENAME);
	fs_caller c = caller(req);
	int rc;
	if (!name_ok(name) || !name_ok(newname))
		rc = -ENAMETOOLONG;
	else /* RENAME_NOREPLACE, RENAME_EXCHANGE; the fs layer refuses others */
		rc = fs_rename(d->fs, &c, parent, name, newparent, newname, flags);
	reply_err(req, d, rc);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	fsd *d = begin(req, FSD_OP_READLINK);
	char buf[PATH_MAX + 1];
	size_t len = 0;
	int rc = fs_readlink(d->fs, ino, buf, PATH_MAX, &len);
	if (rc) {
		reply_err(req, d, rc);
		return;
	}
	buf[len < PATH_MAX ? len : PATH_MAX] = 0;
	fuse_reply_readlink(req, buf);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_OPENDIR);
	fi->fh = 0;
	opendir_flags(d, ino, fi);
	fuse_reply_open(req, fi);
}

/* A reply being filled by fs_readdir. */
typedef struct dirbuf {
	fuse_req_t req;
	fsd *d;
	int plus;
	char *buf;
	size_t size, used;
	uint64_t *refs; /* plus: inodes this reply gives a reference to (H2) */
	size_t nrefs;
} dirbuf;

/* The smallest readdirplus entry: fuse_entry_out (128 bytes) and a
 * fuse_dirent (24 bytes) with a name of 1 to 8 bytes. */
#define DIRENTPLUS_MIN 160

static int is_dot(const char *name)
{
	return name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
}

static int fill_dir(void *ctx, const char *name, const fs_attr *a, uint64_t next_off)
{
	dirbuf *b = ctx;
	size_t room = b->size - b->used, need;
	if (b->plus) {
		struct fuse_entry_param e;
		int dot = is_dot(name);
		if (a && !dot)
			to_entry(b->d, a, &e);
		else { /* the kernel takes no reference for . and .. */
			memset(&e, 0, sizeof e);
			e.attr.st_ino = a ? a->ino : 0;
			e.attr.st_mode = a ? a->mode : S_IFDIR;
		}
		need = fuse_add_direntry_plus(b->req, b->buf + b->used, room, name, &e, (off_t)next_off);
		if (need > room)
			return 1;
		if (e.ino) { /* H2: refs has room for every entry that fits */
			fs_ref(b->d->fs, e.ino, 1);
			b->refs[b->nrefs++] = e.ino;
		}
	} else {
		struct stat st;
		memset(&st, 0, sizeof st);
		st.st_ino = a ? a->ino : 0;
		st.st_mode = a ? a->mode : 0;
		need = fuse_add_direntry(b->req, b->buf + b->used, room, name, &st, (off_t)next_off);
		if (need > room)
			return 1;
	}
	b->used += need;
	return 0;
}

static void readdir_common(fuse_req_t req, fsd *d, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	dirbuf b = {.req = req, .d = d, .plus = plus, .size = size};
	int rc;
	b.buf = malloc(size ? size : 1);
	if (plus)
		b.refs = malloc((size / DIRENTPLUS_MIN + 1) * sizeof *b.refs);
	if (!b.buf || (plus && !b.refs)) {
		reply_err(req, d, -ENOMEM);
		goto out;
	}
	rc = fs_readdir(d->fs, ino, (uint64_t)off, plus, fill_dir, &b);
	if (rc && b.used == 0) { /* a partial listing goes out; the error recurs on the next call */
		reply_err(req, d, rc);
		goto out;
	}
	if (fuse_reply_buf(req, b.buf, b.used) != 0)
		for (size_t i = 0; i < b.nrefs; i++)
			fs_forget(d->fs, b.refs[i], 1);
out:
	free(b.buf);
	free(b.refs);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, begin(req, FSD_OP_READDIR), ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, begin(req, FSD_OP_READDIRPLUS), ino, size, off, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_RELEASEDIR);
	reply_err(req, d, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_FSYNCDIR);
	reply_err(req, d, fs_sync(d->fs));
}

/* ---------------------------------------------------------------------- */
/* Data                                                                   */

/* O_TRUNC arrives inside open (FUSE_CAP_ATOMIC_O_TRUNC): the same change a
 * truncating open makes on Linux, size 0 and mtime (and ctime) now. */
static int truncate_at_open(fsd *d, fuse_req_t req, fuse_ino_t ino)
{
	fs_caller c = caller(req);
	fs_attr in, out;
	memset(&in, 0, sizeof in);
	clock_gettime(CLOCK_REALTIME, &in.mtime);
	return fs_setattr(d->fs, &c, ino, &in, FS_SET_SIZE | FS_SET_MTIME | FS_SET_MTIME_NOW, &out);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_OPEN);
	int rc;
	if ((fi->flags & O_TRUNC) && (rc = truncate_at_open(d, req, ino)) != 0) {
		reply_err(req, d, rc);
		return;
	}
	if ((rc = fs_opened(d->fs, ino)) != 0) {
		reply_err(req, d, rc);
		return;
	}
	fi->fh = 0;
	open_flags(d, ino, fi);
	if (fuse_reply_open(req, fi) != 0) /* H3 */
		fs_released(d->fs, ino);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_CREATE);
	fs_caller c = caller(req);
	struct fuse_entry_param e;
	fs_attr a;
	int rc = name_ok(name) ? fs_mknod(d->fs, &c, parent, name, (mode & ~S_IFMT) | S_IFREG, 0, &a) : -ENAMETOOLONG;
	if (rc == 0)
		rc = fs_opened(d->fs, a.ino);
	if (rc) {
		reply_err(req, d, rc);
		return;
	}
	fi->fh = 0;
	open_flags(d, a.ino, fi);
	to_entry(d, &a, &e);
	fs_ref(d->fs, a.ino, 1); /* H2 */
	if (fuse_reply_create(req, &e, fi) != 0) {
		fs_released(d->fs, a.ino); /* H3 */
		fs_forget(d->fs, a.ino, 1);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_READ);
	char *buf = malloc(size ? size : 1);
	size_t got = 0;
	int rc;
	if (!buf) {
		reply_err(req, d, -ENOMEM);
		return;
	}
	if ((rc = fs_read(d->fs, ino, (uint64_t)off, size, buf, &got)) != 0)
		reply_err(req, d, rc);
	else
		fuse_reply_buf(req, buf, got < size ? got : size);
	free(buf);
}

/* Writes arrive in memory (one buffer: written in place) or, when the
 * kernel spliced the request into a pipe (-o splice_read), in a pipe that is
 * copied out first. */
static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_WRITE);
	fs_caller c = caller(req);
	size_t size = fuse_buf_size(in), done = 0;
	const char *data;
	char *copy = NULL;
	int rc;
	if (in->count == 1 && in->idx == 0 && !(in->buf[0].flags & FUSE_BUF_IS_FD)) {
		data = (const char *)in->buf[0].mem + in->off;
		size -= in->off;
	} else {
		struct fuse_bufvec out = FUSE_BUFVEC_INIT(size);
		ssize_t n;
		if (!(copy = malloc(size ? size : 1))) {
			reply_err(req, d, -ENOMEM);
			return;
		}
		out.buf[0].mem = copy;
		if ((n = fuse_buf_copy(&out, in, 0)) < 0) {
			reply_err(req, d, (int)n);
			goto out;
		}
		data = copy;
		size = (size_t)n;
	}
	if ((rc = fs_write(d->fs, &c, ino, (uint64_t)off, data, size, &done)) != 0)
		reply_err(req, d, rc);
	else
		fuse_reply_write(req, done);
out:
	free(copy);
}

/* Nothing to do: writes are not buffered here, and noflush (open_flags)
 * keeps the kernel from asking. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_FLUSH);
	reply_err(req, d, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_RELEASE);
	fs_released(d->fs, ino); /* H3 */
	reply_err(req, d, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_FSYNC);
	reply_err(req, d, fs_sync(d->fs));
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_FALLOCATE);
	if (off < 0 || len <= 0) {
		reply_err(req, d, -EINVAL);
		return;
	}
	reply_err(req, d, fs_fallocate(d->fs, ino, mode, (uint64_t)off, (uint64_t)len));
}

/* SEEK_DATA and SEEK_HOLE only: the kernel answers the others itself. */
static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_LSEEK);
	uint64_t pos = 0;
	int rc = off < 0 ? -ENXIO : fs_lseek(d->fs, ino, (uint64_t)off, whence, &pos);
	if (rc)
		reply_err(req, d, rc);
	else
		fuse_reply_lseek(req, (off_t)pos);
}

/* copy_file_range: without it the kernel falls back to splicing through a
 * pipe, 64 KiB a write request (cp of 64 MiB: ~2,000 round trips).  Here
 * one request copies up to COPY_MAX in FSD_IO_SIZE pieces, one fs_write
 * (one transaction) each, and may copy less, like write: the caller loops. */
#define COPY_MAX (16 * (size_t)FSD_IO_SIZE)

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
			       fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags)
{
	fsd *d = begin(req, FSD_OP_COPY_FILE_RANGE);
	fs_caller c = caller(req);
	size_t total = 0;
	char *buf;
	int rc = 0;
	if (flags != 0 || off_in < 0 || off_out < 0) {
		reply_err(req, d, -EINVAL);
		return;
	}
	if (len > COPY_MAX)
		len = COPY_MAX;
	if (!(buf = malloc(len < FSD_IO_SIZE ? (len ? len : 1) : FSD_IO_SIZE))) {
		reply_err(req, d, -ENOMEM);
		return;
	}
	while (total < len) {
		size_t n = len - total < FSD_IO_SIZE ? len - total : FSD_IO_SIZE, got = 0, done = 0;
		if ((rc = fs_read(d->fs, ino_in, (uint64_t)off_in + total, n, buf, &got)) != 0 || got == 0)
			break;
		if ((rc = fs_write(d->fs, &c, ino_out, (uint64_t)off_out + total, buf, got, &done)) != 0)
			break;
		total += done;
		if (done < got || got < n)
			break;
	}
	if (total == 0 && rc != 0)
		reply_err(req, d, rc);
	else
		fuse_reply_write(req, total);
	free(buf);
}

/* ---------------------------------------------------------------------- */
/* Attributes                                                             */

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_GETATTR);
	fs_attr a;
	int rc = fs_getattr(d->fs, ino, &a);
	reply_attr(req, d, rc, &a);
}

/* FUSE_SET_ATTR_* -> FS_SET_*, values from the struct stat. */
static unsigned setattr_bits(const struct stat *st, int to_set, fs_attr *in)
{
	unsigned set = 0;
	memset(in, 0, sizeof *in);
	if (to_set & FUSE_SET_ATTR_MODE)
		set |= FS_SET_MODE, in->mode = st->st_mode;
	if (to_set & FUSE_SET_ATTR_UID)
		set |= FS_SET_UID, in->uid = st->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		set |= FS_SET_GID, in->gid = st->st_gid;
	if (to_set & FUSE_SET_ATTR_SIZE)
		set |= FS_SET_SIZE, in->size = (uint64_t)st->st_size;
	if (to_set & FUSE_SET_ATTR_ATIME)
		set |= FS_SET_ATIME, in->atime = st->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME)
		set |= FS_SET_MTIME, in->mtime = st->st_mtim;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		set |= FS_SET_ATIME_NOW;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		set |= FS_SET_MTIME_NOW;
#ifdef FUSE_SET_ATTR_CTIME
	if (to_set & FUSE_SET_ATTR_CTIME)
		set |= FS_SET_CTIME, in->ctime = st->st_ctim;
#endif
#if defined(FUSE_SET_ATTR_KILL_SUID) && defined(FUSE_SET_ATTR_KILL_SGID)
	if (to_set & (FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID))
		set |= FS_SET_KILL_SUID;
#endif
	return set;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *st, int to_set, struct fuse_file_info *fi)
{
	fsd *d = begin(req, FSD_OP_SETATTR);
	fs_caller c = caller(req);
	fs_attr in, out;
	unsigned set = setattr_bits(st, to_set, &in);
	int rc;
	if ((to_set & FUSE_SET_ATTR_SIZE) && st->st_size < 0)
		rc = -EINVAL;
	else
		rc = fs_setattr(d->fs, &c, ino, &in, set, &out);
	reply_attr(req, d, rc, &out);
}

/* The kernel already checked permissions (default_permissions is always on,
 * so it never sends access requests); counted in case it does. */
static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	fsd *d = begin(req, FSD_OP_ACCESS);
	reply_err(req, d, 0);
}

static int is_stats(fuse_ino_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID && !strcmp(name, FSD_STATS_XATTR);
}

/* Names of features tpfs does not have, answered EOPNOTSUPP without asking
 * the fs layer: POSIX ACLs (FUSE_CAP_POSIX_ACL is off, so the kernel would
 * store them as plain attributes and enforce nothing) and SELinux labels.
 * EOPNOTSUPP, unlike ENODATA, is remembered per file system by ls -l and
 * friends: they stop asking, which saves two or three round trips a file. */
static int unsupported(const char *name)
{
	return !strcmp(name, "system.posix_acl_access") || !strcmp(name, "system.posix_acl_default") ||
	       !strcmp(name, "security.selinux");
}

static void reply_stats(fuse_req_t req, fsd *d, size_t size);

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags)
{
	fsd *d = begin(req, FSD_OP_SETXATTR);
	int rc = is_stats(ino, name)   ? -EPERM
		 : unsupported(name) ? -EOPNOTSUPP
				     : fs_setxattr(d->fs, ino, name, value, size, flags);
	reply_err(req, d, rc);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	fsd *d = begin(req, FSD_OP_GETXATTR);
	size_t len = 0;
	char *buf;
	int rc;
	if (is_stats(ino, name)) {
		reply_stats(req, d, size);
		return;
	}
	if (unsupported(name)) {
		reply_err(req, d, -EOPNOTSUPP);
		return;
	}
	if (size == 0) {
		if ((rc = fs_getxattr(d->fs, ino, name, NULL, 0, &len)) != 0)
			reply_err(req, d, rc);
		else
			fuse_reply_xattr(req, len);
		return;
	}
	if (!(buf = malloc(size))) {
		reply_err(req, d, -ENOMEM);
		return;
	}
	if ((rc = fs_getxattr(d->fs, ino, name, buf, size, &len)) != 0)
		reply_err(req, d, rc);
	else
		fuse_reply_buf(req, buf, len < size ? len : size);
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	fsd *d = begin(req, FSD_OP_LISTXATTR);
	size_t len = 0;
	char *buf;
	int rc;
	if (size == 0) {
		if ((rc = fs_listxattr(d->fs, ino, NULL, 0, &len)) != 0)
			reply_err(req, d, rc);
		else
			fuse_reply_xattr(req, len);
		return;
	}
	if (!(buf = malloc(size))) {
		reply_err(req, d, -ENOMEM);
		return;
	}
	if ((rc = fs_listxattr(d->fs, ino, buf, size, &len)) != 0)
		reply_err(req, d, rc);
	else
		fuse_reply_buf(req, buf, len < size ? len : size);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fsd *d = begin(req, FSD_OP_REMOVEXATTR);
	int rc = is_stats(ino, name) ? -EPERM : unsupported(name) ? -EOPNOTSUPP : fs_removexattr(d->fs, ino, name);
	reply_err(req, d, rc);
}

/* ---------------------------------------------------------------------- */
/* Control                                                                */

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	fsd *d = begin(req, FSD_OP_STATFS);
	struct statvfs sv;
	fs_statfs s;
	int rc = fs_stat_fs(d->fs, &s);
	if (rc) {
		reply_err(req, d, rc);
		return;
	}
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = sv.f_frsize = (unsigned long)s.bsize;
	sv.f_blocks = s.blocks;
	sv.f_bfree = sv.f_bavail = s.bfree;
	sv.f_files = s.files;
	sv.f_ffree = sv.f_favail = s.ffree;
	sv.f_namemax = (unsigned long)s.namemax;
	fuse_reply_statfs(req, &sv);
}

/* The size a caller probing with size 0 is told: the text grows between the
 * probe and the read (the probe itself is counted), so leave room. */
#define STATS_SLACK 1024
#define STATS_MAX (64 * 1024)

/* The value of FSD_STATS_XATTR: fs_report's text, then the requests by
 * kind (the FUSE round trips, forgets aside) since the mount. */
static void reply_stats(fuse_req_t req, fsd *d, size_t size)
{
	char *buf = malloc(STATS_MAX);
	fs_counters cn;
	size_t len = 0;
	int rc;
	if (!buf) {
		reply_err(req, d, -ENOMEM);
		return;
	}
	buf[0] = 0;
	if ((rc = fs_report(d->fs, buf, STATS_MAX - 4096)) < 0)
		snprintf(buf, STATS_MAX, "fs_report: %s\n", strerror(-rc));
	len = strnlen(buf, STATS_MAX - 4096);
	fs_counters_get(d->fs, &cn);
	len += (size_t)snprintf(buf + len, STATS_MAX - len, "requests by kind:\n");
	for (int i = 0; i < FSD_OP_COUNT && len < STATS_MAX; i++)
		len += (size_t)snprintf(buf + len, STATS_MAX - len, "  %-16s %llu\n", fsd_op_names[i],
					(unsigned long long)cn.ops[i]);
	if (len > STATS_MAX - 1)
		len = STATS_MAX - 1;
	if (size == 0)
		fuse_reply_xattr(req, len + STATS_SLACK);
	else if (size < len)
		reply_err(req, d, -ERANGE);
	else
		fuse_reply_buf(req, buf, len);
	free(buf);
}

/*
 * What the daemon asks of the kernel.  On: readdirplus for every readdir
 * (READDIRPLUS_AUTO off), O_TRUNC inside open, asynchronous reads, cached
 * symlink targets, parallel lookups and readdirs in one directory.  Off:
 * the writeback cache (writes would sit in the shared page cache, out of
 * any transaction's reach: DESIGN.md 3), NFS export, remote locks (the
 * kernel keeps POSIX and flock locks locally), ACLs.  HANDLE_KILLPRIV off:
 * the kernel itself clears set-user-ID and set-group-ID bits, with an
 * explicit setattr, when a file is written, truncated or chowned.  Splice
 * for writes only on request (-o splice_read): the data is copied into the
 * engine's pages anyway, and splicing costs every request a second system
 * call; replies come from memory, where splicing saves nothing.
 * AUTO_INVAL_DATA off: it drops a file's page cache whenever the kernel sees
 * its mtime move, which after our own writes (write-through, so the cache
 * already holds what was written) means reading back everything just
 * written: 64 read requests after a 64 MiB write.  Every change of file data
 * passes through this kernel (writes, truncates, fallocate and
 * copy_file_range, whose ranges the kernel drops itself); the transaction
 * issue must invalidate explicitly at commit and abort anyway (DESIGN.md 3).
 * Then the user's -o max_write=, splice_read, auto_inval_data, ...
 * (fuse_parse_conn_info_opts).
 */
static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	fsd *d = userdata;
	unsigned on = FUSE_CAP_ASYNC_READ | FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_READDIRPLUS | FUSE_CAP_CACHE_SYMLINKS |
		      FUSE_CAP_PARALLEL_DIROPS;
	unsigned off = FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_EXPORT_SUPPORT |
		       FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_POSIX_ACL | FUSE_CAP_HANDLE_KILLPRIV |
		       FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE | FUSE_CAP_AUTO_INVAL_DATA;
	conn->want = (conn->want | (on & conn->capable)) & ~off;
	conn->max_write = FSD_IO_SIZE;
	conn->max_readahead = FSD_IO_SIZE; /* the kernel keeps the smaller of this and its own */
	conn->time_gran = 1;
	if (d->conn_opts)
		fuse_apply_conn_info_opts(d->conn_opts, conn);
	conn->want &= conn->capable;
	fsd_log(LOG_DEBUG, "FUSE protocol 7.%u, capabilities 0x%x, asked 0x%x, max_write %u, max_readahead %u",
		conn->proto_minor, conn->capable, conn->want, conn->max_write, conn->max_readahead);
}

const struct fuse_lowlevel_ops fsd_ops = {
	.init = op_init,
	/* names */
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.link = op_link,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.readlink = op_readlink,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	/* data */
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write_buf = op_write_buf,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.copy_file_range = op_copy_file_range,
	/* attributes */
	.getattr = op_getattr,
	.setattr = op_setattr,
	.access = op_access,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	/* control */
	.statfs = op_statfs,
};
