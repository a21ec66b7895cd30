/*
 * fsd_names -- tpfsd's handlers of names and directories: lookup and
 * forget, the calls that make and remove names, rename, readlink, and
 * directory listings (readdir, readdirplus).  Rules H1-H5: fsd_ops.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsd_int.h"

void fsd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	parent = fsd_ino(parent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_LOOKUP);
	fs_caller c = fsd_caller(req);
	fs_attr a;
	int rc = fsd_name_ok(name) ? fs_lookup(d->fs, &c, parent, name, &a) : -ENAMETOOLONG;
	if (rc == -ENOENT) {
		fs_count(d->fs, FSD_OP_NEGATIVE);
		if (fsd_negative_timeout(d) > 0) {
			/* A negative entry: the kernel keeps the absence of the name
			 * (H4), so a search path or a build probing for missing files
			 * asks once.  A create through this kernel replaces it. */
			struct fuse_entry_param e;
			memset(&e, 0, sizeof e);
			e.entry_timeout = fsd_negative_timeout(d);
			fuse_reply_entry(req, &e);
			fsd_caller_end(&c);
			return;
		}
	}
	fsd_reply_entry(req, d, &c, parent, name, rc, &a);
	fsd_caller_end(&c);
}

void fsd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_FORGET);
	fs_forget(d->fs, ino, nlookup);
	fuse_reply_none(req);
}

void fsd_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	fsd *d = fsd_begin(req, FSD_OP_FORGET);
	for (size_t i = 0; i < count; i++)
		fs_forget(d->fs, fsd_ino(forgets[i].ino), forgets[i].nlookup); /* C5 */
	fuse_reply_none(req);
}

void fsd_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	parent = fsd_ino(parent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_MKNOD);
	fs_caller c = fsd_caller(req);
	fs_attr a;
	/* Device nodes: the kernel already required CAP_MKNOD of the caller. */
	int rc = fsd_name_ok(name) ? fs_mknod(d->fs, &c, parent, name, mode, rdev, &a) : -ENAMETOOLONG;
	fsd_reply_entry(req, d, &c, parent, name, rc, &a);
	if (!rc)
		fsd_changed(d, &c, 0, parent, NULL);
	fsd_caller_end(&c);
}

void fsd_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	parent = fsd_ino(parent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_MKDIR);
	fs_caller c = fsd_caller(req);
	fs_attr a;
	int rc = fsd_name_ok(name) ? fs_mkdir(d->fs, &c, parent, name, mode, &a) : -ENAMETOOLONG;
	fsd_reply_entry(req, d, &c, parent, name, rc, &a);
	if (!rc)
		fsd_changed(d, &c, 0, parent, NULL);
	fsd_caller_end(&c);
}

void fsd_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	parent = fsd_ino(parent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_SYMLINK);
	fs_caller c = fsd_caller(req);
	fs_attr a;
	int rc = fsd_name_ok(name) ? fs_symlink(d->fs, &c, parent, name, target, &a) : -ENAMETOOLONG;
	fsd_reply_entry(req, d, &c, parent, name, rc, &a);
	if (!rc)
		fsd_changed(d, &c, 0, parent, NULL);
	fsd_caller_end(&c);
}

void fsd_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	ino = fsd_ino(ino); /* C5 */
	newparent = fsd_ino(newparent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_LINK);
	fs_caller c = fsd_caller(req);
	fs_attr a;
	int rc = fsd_name_ok(newname) ? fs_link(d->fs, &c, ino, newparent, newname, &a) : -ENAMETOOLONG;
	fsd_reply_entry(req, d, &c, newparent, newname, rc, &a);
	if (!rc)
		fsd_changed(d, &c, ino, newparent, NULL);
	fsd_caller_end(&c);
}

void fsd_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	parent = fsd_ino(parent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_UNLINK);
	fs_caller c = fsd_caller(req);
	int rc = fsd_name_ok(name) ? fs_unlink(d->fs, &c, parent, name) : -ENAMETOOLONG;
	fsd_reply_err(req, d, rc);
	if (!rc)
		fsd_changed(d, &c, 0, parent, NULL);
	fsd_caller_end(&c);
}

void fsd_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	parent = fsd_ino(parent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_RMDIR);
	fs_caller c = fsd_caller(req);
	int rc = fsd_dirs_private(d, &c, parent, name, 0, NULL); /* C9 */
	if (rc == 0)
		rc = fsd_name_ok(name) ? fs_rmdir(d->fs, &c, parent, name) : -ENAMETOOLONG;
	fsd_reply_err(req, d, rc);
	if (!rc)
		fsd_changed(d, &c, 0, parent, NULL);
	fsd_caller_end(&c);
}

void fsd_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
		unsigned int flags)
{
	parent = fsd_ino(parent); /* C5 */
	newparent = fsd_ino(newparent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_RENAME);
	fs_caller c = fsd_caller(req);
	int rc;
	if (!fsd_name_ok(name) || !fsd_name_ok(newname))
		rc = -ENAMETOOLONG;
	else if ((rc = fsd_dirs_private(d, &c, parent, name, newparent, newname)) == 0) /* C9 */
		rc = fs_rename(d->fs, &c, parent, name, newparent, newname, flags);
	/* (RENAME_NOREPLACE, RENAME_EXCHANGE; the fs layer refuses others) */
	fsd_reply_err(req, d, rc);
	if (!rc) {
		fsd_changed(d, &c, 0, parent, name);
		fsd_changed(d, &c, 0, newparent, newname);
	}
	fsd_caller_end(&c);
}

void fsd_readlink(fuse_req_t req, fuse_ino_t ino)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_READLINK);
	fs_caller c = fsd_caller(req);
	char buf[PATH_MAX + 1];
	size_t len = 0;
	int rc = fs_readlink(d->fs, &c, ino, buf, PATH_MAX, &len);
	fsd_caller_end(&c);
	if (rc) {
		fsd_reply_err(req, d, rc);
		return;
	}
	buf[len < PATH_MAX ? len : PATH_MAX] = 0;
	fuse_reply_readlink(req, buf);
}

void fsd_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_OPENDIR);
	fi->fh = 0;
	fsd_opendir_flags(d, ino, fi);
	fuse_reply_open(req, fi);
}

/* A reply being filled by fs_readdir. */
typedef struct dirbuf {
	fuse_req_t req;
	fsd *d;
	const fs_caller *c;
	uint64_t dir;
	int plus;
	char *buf;
	size_t size, used;
	/* plus: inodes given a reference (H2); refs[live..n) by this reply,
	 * refs[0..live) by runs that fs_run rolled back (to be undone) */
	uint64_t *refs;
	size_t live, n, cap;
	uint64_t last_off; /* of the last entry added; 0: none yet */
	int err;
} dirbuf;

static int is_dot(const char *name)
{
	return name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
}

static void forget_refs(fsd *d, const uint64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fs_forget(d->fs, v[i], 1);
}

/*
 * fs_run may roll a listing back and run it again (a lost deadlock): the
 * new run fills from the same offset, which is how it shows (offsets only
 * grow within a run).  The reply starts over; the references the first run
 * gave stay counted until fs_readdir returns and are undone then, since
 * fs_forget may free an inode, which must not happen inside the listing's
 * transaction.  The references are taken inside it, while the directory is
 * locked: no unlink can free an entry's inode before the kernel has it.
 */
static int fill_dir(void *ctx, const char *name, const fs_attr *a, uint64_t next_off)
{
	dirbuf *b = ctx;
	size_t room, need;
	if (b->last_off && next_off <= b->last_off) {
		b->live = b->n;
		b->used = 0;
	}
	room = b->size - b->used;
	if (b->plus) {
		struct fuse_entry_param e;
		if (a && !is_dot(name)) {
			fsd_to_entry(b->d, b->c, b->dir, name, a, &e);
		} else { /* the kernel takes no reference for . and .. */
			memset(&e, 0, sizeof e);
			e.attr.st_ino = a ? a->ino : 0;
			e.attr.st_mode = a ? a->mode : S_IFDIR;
		}
		if (e.ino && b->n == b->cap) {
			size_t cap = b->cap ? 2 * b->cap : 64;
			uint64_t *v = realloc(b->refs, cap * sizeof *v);
			if (!v) {
				b->err = -ENOMEM;
				return 1;
			}
			b->refs = v, b->cap = cap;
		}
		need = fuse_add_direntry_plus(b->req, b->buf + b->used, room, name, &e, (off_t)next_off);
		if (need > room)
			return 1;
		if (e.ino) {
			fs_ref(b->d->fs, a->ino, 1);
			b->refs[b->n++] = a->ino;
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
	b->last_off = next_off;
	return 0;
}

static void readdir_common(fuse_req_t req, fsd *d, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	dirbuf b = {.req = req, .d = d, .plus = plus, .size = size};
	int rc;
	if (!(b.buf = malloc(size ? size : 1))) {
		fsd_reply_err(req, d, -ENOMEM);
		return;
	}
	fs_caller c = fsd_caller(req);
	b.c = &c;
	b.dir = ino;
	rc = fs_readdir(d->fs, &c, ino, (uint64_t)off, plus, fill_dir, &b);
	fsd_caller_end(&c);
	if (rc == 0)
		rc = b.err;
	forget_refs(d, b.refs, b.live);
	/* After an error, what was listed goes out; the error recurs next call. */
	if (rc && b.used == 0)
		fsd_reply_err(req, d, rc);
	else if (fuse_reply_buf(req, b.buf, b.used) != 0)
		forget_refs(d, b.refs + b.live, b.n - b.live);
	free(b.buf);
	free(b.refs);
}

void fsd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	readdir_common(req, fsd_begin(req, FSD_OP_READDIR), ino, size, off, 0);
}

void fsd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	readdir_common(req, fsd_begin(req, FSD_OP_READDIRPLUS), ino, size, off, 1);
}

void fsd_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_RELEASEDIR);
	fsd_reply_err(req, d, 0);
}

void fsd_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_FSYNCDIR);
	fsd_reply_err(req, d, fs_sync(d->fs));
}
