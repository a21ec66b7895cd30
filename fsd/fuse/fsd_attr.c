/*
 * fsd_attr -- tpfsd's handlers of attributes: getattr, setattr, access,
 * and extended attributes (with the read-only statistics attribute of the
 * root, FSD_STATS_XATTR).  Rules H1-H5: fsd_ops.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsd_io.h"
#include "fsd_int.h"

void fsd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const uint64_t tag = fsd_alias_tag(ino); /* C5 */
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_GETATTR);
	fs_caller c = fsd_caller(req);
	fs_attr a;
	int rc;
	/* the kernel's own refresh in a write, or fstat, through a writable
	 * handle: read for update (X), as reads through it are (fs_data.c) */
	c.update = fi && (fi->fh & O_ACCMODE) != O_RDONLY;
	/* C5: a file's size in a shared inode bounds what non-members read
	 * from the page cache: a member gets the committed attributes of a
	 * shared file, read as a plain call (locking nothing in its
	 * transaction: fstat of a descriptor opened outside it, as stdio does
	 * of its standard output, does not make the file the transaction's) */
	if (c.tx && tag == 0 && !fi) {
		/* C9: a directory's shared inode answers the member's view,
		 * read first: a path walk asks for every directory's */
		fs_caller v = fsd_cache_view(&c, tag);
		fs_attr b;
		if ((rc = fs_getattr(d->fs, &c, ino, &a)) != 0 || S_ISREG(a.mode)) {
			int rc2 = fs_getattr(d->fs, &v, ino, &b);
			if (rc2 == 0 && S_ISREG(b.mode)) /* (else the member's answer) */
				rc = rc2, a = b;
		}
	} else if (c.tx && tag == 0) {
		fs_caller v = fsd_cache_view(&c, tag);
		if ((rc = fs_getattr(d->fs, &v, ino, &a)) != 0 || !S_ISREG(a.mode))
			rc = fs_getattr(d->fs, &c, ino, &a);
	} else {
		rc = fs_getattr(d->fs, &c, ino, &a);
	}
	fsd_caller_end(&c);
	fsd_reply_attr(req, d, rc, &a);
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
	/* Under FUSE_HANDLE_KILLPRIV_V2 (fsd_io.c) the kernel turns its own
	 * clearing of set-id bits -- a chown to the same owner, a write or
	 * fallocate by a caller without CAP_FSETID -- into a setattr of
	 * nothing: the daemon clears them (of a non-directory) instead. */
	if (set == 0 && fsd_io_killpriv_v2())
		set |= FS_SET_KILL_SUID;
	return set;
}

void fsd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *st, int to_set, struct fuse_file_info *fi)
{
	const uint64_t tag = fsd_alias_tag(ino); /* C5 */
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_SETATTR);
	fs_caller c = fsd_caller(req);
	fs_attr in, out;
	unsigned set = setattr_bits(st, to_set, &in);
	int rc;
	int shared = c.tx && tag == 0;
	if (shared && fi) { /* C5: through a handle opened outside every transaction: outside it */
		if ((rc = fsd_outside_change(&c, ino, fi->fh)) != 0) {
			fsd_caller_end(&c);
			fsd_reply_err(req, d, rc);
			return;
		}
		shared = c.tx != NULL;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && st->st_size < 0)
		rc = -EINVAL;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && shared)
		rc = -EBADF; /* C5: the kernel would cut the shared page cache */
	else
		rc = fs_setattr(d->fs, &c, ino, &in, set, &out);
	if (rc == 0 && shared && S_ISREG(out.mode)) { /* C5, as in getattr */
		fs_caller v = fsd_cache_view(&c, tag);
		rc = fs_getattr(d->fs, &v, ino, &out);
	}
	fsd_reply_attr(req, d, rc, &out);
	if (!rc)
		fsd_changed(d, &c, ino, 0, NULL);
	fsd_caller_end(&c);
}

/* The kernel already checked permissions (default_permissions is always on,
 * so it never sends access requests); counted in case it does. */
void fsd_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_ACCESS);
	fsd_reply_err(req, d, 0);
}

static int is_stats(fuse_ino_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID && !strcmp(name, FSD_STATS_XATTR);
}

/* The kernel passes any attribute name to FUSE; a local file system knows
 * the namespaces user., trusted. and security. (and system. for what it
 * implements).  Like one, answer EINVAL for an empty name within a
 * namespace and EOPNOTSUPP for the rest: other namespaces, system.* (POSIX
 * ACLs among them: FUSE_CAP_POSIX_ACL is off, so the kernel would store
 * them as plain attributes and enforce nothing) and security.selinux (no
 * SELinux labels).  Without asking the fs layer: EOPNOTSUPP, unlike
 * ENODATA, is remembered per file system by ls -l and friends, which then
 * stop asking: two or three round trips a file saved. */
static int xattr_name_check(const char *name)
{
	static const char *const ns[] = {"user.", "trusted.", "security.", NULL};
	for (int i = 0; ns[i]; i++) {
		size_t n = strlen(ns[i]);
		if (!strncmp(name, ns[i], n))
			return !name[n] ? -EINVAL : !strcmp(name, "security.selinux") ? -EOPNOTSUPP : 0;
	}
	return -EOPNOTSUPP;
}

void fsd_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_SETXATTR);
	int rc = is_stats(ino, name) || fsd_is_tx_control(ino, name) ? -EPERM : xattr_name_check(name);
	fs_caller c = fsd_caller(req);
	if (rc == 0)
		rc = fs_setxattr(d->fs, &c, ino, name, value, size, flags);
	fsd_reply_err(req, d, rc);
	if (!rc)
		fsd_changed(d, &c, ino, 0, NULL);
	fsd_caller_end(&c);
}

void fsd_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_GETXATTR);
	size_t len = 0;
	char *buf;
	int rc;
	if (is_stats(ino, name)) {
		fsd_reply_stats(req, d, size);
		return;
	}
	if (fsd_is_tx_control(ino, name)) {
		fsd_tx_control(req, d, name, size);
		return;
	}
	if ((rc = xattr_name_check(name)) != 0) {
		fsd_reply_err(req, d, rc);
		return;
	}
	if (!strcmp(name, "security.capability")) { /* before every write: no caller to resolve (fs.h) */
		fsd_reply_err(req, d, -ENODATA);
		return;
	}
	fs_caller c = fsd_caller(req);
	if (size == 0) {
		if ((rc = fs_getxattr(d->fs, &c, ino, name, NULL, 0, &len)) != 0)
			fsd_reply_err(req, d, rc);
		else
			fuse_reply_xattr(req, len);
	} else if (!(buf = malloc(size))) {
		fsd_reply_err(req, d, -ENOMEM);
	} else {
		if ((rc = fs_getxattr(d->fs, &c, ino, name, buf, size, &len)) != 0)
			fsd_reply_err(req, d, rc);
		else
			fuse_reply_buf(req, buf, len < size ? len : size);
		free(buf);
	}
	fsd_caller_end(&c);
}

void fsd_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_LISTXATTR);
	size_t len = 0;
	char *buf;
	int rc;
	fs_caller c = fsd_caller(req);
	if (size == 0) {
		if ((rc = fs_listxattr(d->fs, &c, ino, NULL, 0, &len)) != 0)
			fsd_reply_err(req, d, rc);
		else
			fuse_reply_xattr(req, len);
	} else if (!(buf = malloc(size))) {
		fsd_reply_err(req, d, -ENOMEM);
	} else {
		if ((rc = fs_listxattr(d->fs, &c, ino, buf, size, &len)) != 0)
			fsd_reply_err(req, d, rc);
		else
			fuse_reply_buf(req, buf, len < size ? len : size);
		free(buf);
	}
	fsd_caller_end(&c);
}

void fsd_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_REMOVEXATTR);
	int rc = is_stats(ino, name) || fsd_is_tx_control(ino, name) ? -EPERM : xattr_name_check(name);
	fs_caller c = fsd_caller(req);
	if (rc == 0)
		rc = fs_removexattr(d->fs, &c, ino, name);
	fsd_reply_err(req, d, rc);
	if (!rc)
		fsd_changed(d, &c, ino, 0, NULL);
	fsd_caller_end(&c);
}
