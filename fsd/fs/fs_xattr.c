/*
 * fs_xattr -- extended attributes: records of the xattr tree keyed
 * (ino, name), values up to 64 KiB (larger values go to overflow pages in
 * the engine).  The kernel checks namespaces and permissions
 * (default_permissions); this layer enforces the sizes and the
 * create/replace semantics.
 */
#include "fs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/xattr.h>

#define XKEY_MAX (8 + 256)

static int xkey(unsigned char *k, uint64_t ino, const char *name, size_t *len)
{
	size_t n = strlen(name);
	if (n == 0 || n > 255)
		return n ? ERANGE : EINVAL;
	fs_be64(k, ino);
	memcpy(k + 8, name, n);
	*len = 8 + n;
	return 0;
}

typedef struct xattr_arg {
	uint64_t ino;
	const char *name;
	const void *val;
	void *out;
	size_t size, len;
	int flags;
} xattr_arg;

static int locked_inode(fs_op *op, uint64_t ino, int mode)
{
	fs_inode in;
	int rc = fs_lock(op, ino, mode);
	return rc ? rc : fs_iget(op, ino, &in);
}

static int set_fn(fs_op *op, void *arg)
{
	xattr_arg *a = arg;
	unsigned char k[XKEY_MAX];
	size_t kl, vl;
	fs_inode in;
	int rc;
	if ((rc = xkey(k, a->ino, a->name, &kl)) != 0)
		return rc;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_X)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	rc = fs_rget(op, WS_XATTR, k, kl, NULL, 0, &vl);
	if (rc == 0 && (a->flags & XATTR_CREATE))
		return EEXIST;
	if (rc == BE_ENOTFOUND && (a->flags & XATTR_REPLACE))
		return ENODATA;
	if (rc && rc != BE_ENOTFOUND)
		return rc;
	if ((rc = fs_rput(op, WS_XATTR, k, kl, a->val, a->size)) != 0)
		return rc;
	fs_now(&in.ctime);
	return fs_iput(op, &in);
}

static const char fcaps[] = "security.capability";

int fs_setxattr(fs *f, const fs_caller *c, uint64_t ino, const char *name, const void *val, size_t size, int flags)
{
	xattr_arg a = {.ino = ino, .name = name, .val = val, .size = size, .flags = flags};
	if (!strcmp(name, fcaps))
		return -EOPNOTSUPP;
	if (size > FS_XATTR_MAX)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	return f->opt.readonly ? -EROFS : fs_errno(fs_run(f, c, FS_WR, set_fn, &a));
}

static int get_fn(fs_op *op, void *arg)
{
	xattr_arg *a = arg;
	unsigned char k[XKEY_MAX];
	size_t kl;
	int rc;
	if ((rc = xkey(k, a->ino, a->name, &kl)) != 0 || (rc = locked_inode(op, a->ino, BE_LOCK_S)) != 0)
		return rc;
	rc = fs_rget(op, WS_XATTR, k, kl, a->out, a->size, &a->len);
	if (rc == BE_ENOTFOUND)
		return ENODATA;
	if (rc)
		return rc;
	return a->size && a->len > a->size ? ERANGE : 0;
}

int fs_getxattr(fs *f, const fs_caller *c, uint64_t ino, const char *name, void *val, size_t size, size_t *len)
{
	xattr_arg a = {.ino = ino, .name = name, .out = val, .size = size};
	if (!strcmp(name, fcaps))
		return -ENODATA; /* asked before every write: no transaction */
	int rc = fs_errno(fs_run(f, c, FS_RD, get_fn, &a));
	if (!rc)
		*len = a.len;
	return rc;
}

/* Calls fn for every xattr key of ino (the cursor is positioned on it). */
static int each(fs_op *op, uint64_t ino, int (*fn)(fs_op *op, const unsigned char *key, size_t kl, void *ctx),
		void *ctx)
{
	unsigned char k[8];
	fs_cur *c;
	int rc;
	fs_be64(k, ino);
	if ((rc = fs_cur_open(op, WS_XATTR, &c)) != 0)
		return rc;
	for (rc = fs_cur_seek(c, k, 8); rc == 0; rc = fs_cur_next(c)) {
		const unsigned char *key;
		size_t kl;
		fs_cur_get(c, (const void **)&key, &kl, NULL, NULL);
		if (kl <= 8 || memcmp(key, k, 8) != 0)
			break;
		if ((rc = fn(op, key, kl, ctx)) != 0)
			break;
	}
	fs_cur_close(c);
	return rc == BE_ENOTFOUND ? 0 : rc;
}

static int list_one(fs_op *op, const unsigned char *key, size_t kl, void *ctx)
{
	xattr_arg *a = ctx;
	size_t n = kl - 8;
	(void)op;
	if (a->size && a->len + n + 1 <= a->size) {
		memcpy((char *)a->out + a->len, key + 8, n);
		((char *)a->out)[a->len + n] = 0;
	}
	a->len += n + 1;
	return 0;
}

static int list_fn(fs_op *op, void *arg)
{
	xattr_arg *a = arg;
	int rc;
	a->len = 0;
	if ((rc = locked_inode(op, a->ino, BE_LOCK_S)) != 0 || (rc = each(op, a->ino, list_one, a)) != 0)
		return rc;
	return a->size && a->len > a->size ? ERANGE : 0;
}

int fs_listxattr(fs *f, const fs_caller *c, uint64_t ino, char *list, size_t size, size_t *len)
{
	xattr_arg a = {.ino = ino, .out = list, .size = size};
	int rc = fs_errno(fs_run(f, c, FS_RD, list_fn, &a));
	if (!rc)
		*len = a.len;
	return rc;
}

static int remove_fn(fs_op *op, void *arg)
{
	xattr_arg *a = arg;
	unsigned char k[XKEY_MAX];
	size_t kl;
	fs_inode in;
	int rc;
	if ((rc = xkey(k, a->ino, a->name, &kl)) != 0)
		return rc;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_X)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	rc = fs_rdel(op, WS_XATTR, k, kl);
	if (rc == BE_ENOTFOUND)
		return ENODATA;
	if (rc)
		return rc;
	fs_now(&in.ctime);
	return fs_iput(op, &in);
}

int fs_removexattr(fs *f, const fs_caller *c, uint64_t ino, const char *name)
{
	xattr_arg a = {.ino = ino, .name = name};
	return f->opt.readonly ? -EROFS : fs_errno(fs_run(f, c, FS_WR, remove_fn, &a));
}

static int drop_one(fs_op *op, const unsigned char *key, size_t kl, void *ctx)
{
	(void)ctx;
	return fs_rdel(op, WS_XATTR, key, kl);
}

int fs_xattr_drop_all(fs_op *op, uint64_t ino) { return each(op, ino, drop_one, NULL); }
