/*
 * fs_data -- file contents and attributes: read, write, truncate,
 * fallocate, lseek, setattr.
 *
 * A file is a sequence of blocks of f->bsize bytes (one engine page less its
 * overflow header: 4068 bytes with 4 KiB pages), each a record of the data
 * tree keyed (ino, block).  Whole blocks rather than inline data, because a
 * block is then exactly one page on disk, so a sequential write costs one
 * small B-tree insert per 4 KiB and nothing more, and inode records stay
 * small and dense for stat and readdir.  A write of FS_ORDERED_MIN bytes or
 * more stores its blocks as ordered data (not logged, written once); a
 * smaller one logs them (one PAGE_FILL each).  A block's
 * record may be shorter than bsize (the bytes after it read as zeros), and
 * a missing block is a hole, so sparse files cost nothing and st_blocks
 * counts the blocks that exist.
 *
 * Invariants
 *   D1  No block lies wholly at or past the size, and no block holds bytes
 *       at or past the size, except blocks fallocate made with KEEP_SIZE
 *       (their bytes are zeros).
 *   D2  in->blocks is the number of block records of the inode.
 *   D6  A write or fallocate by a caller without CAP_FSETID -- taken to be
 *       every uid but 0, as for a truncating open (fsd_data.c) -- clears
 *       set-user-ID, and set-group-ID when group-executable, as Linux does;
 *       the kernel leaves that to the daemon once it agreed to
 *       FUSE_HANDLE_KILLPRIV_V2 (fsd_io.c), and for direct I/O always.
 *
 * D5 (speed): a large read asks for the data tree's leaves of the next
 * PREFETCH_AHEAD blocks after the ones it read to be read in the
 * background.  A file written in order has its blocks side by side on the
 * disk (the pool's read-ahead covers them, buf.c B8), but the leaves that
 * name them lie elsewhere, and a cold sequential read otherwise waited for
 * each of them (one per 100-odd blocks).
 */
#include "fs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREFETCH_MIN 65536  /* D5: reads at least this large */
#define PREFETCH_AHEAD 512  /* D5: blocks (2 MiB) */

static void bkey(unsigned char *k, uint64_t ino, uint64_t b)
{
	fs_be64(k, ino);
	fs_be64(k + 8, b);
}

/* Block b of in into buf (bsize bytes, zero-filled past its record). */
static int block_read(fs_op *op, uint64_t ino, uint64_t b, unsigned char *buf, size_t *len, int *exists)
{
	unsigned char k[16];
	size_t vl = 0;
	bkey(k, ino, b);
	int rc = fs_rget(op, WS_DATA, k, 16, buf, op->f->bsize, &vl);
	if (rc == BE_ENOTFOUND) {
		*exists = 0;
		vl = 0;
	} else if (rc) {
		return rc;
	} else {
		*exists = 1;
	}
	if (vl > op->f->bsize)
		return BE_ECORRUPT;
	memset(buf + vl, 0, op->f->bsize - vl);
	*len = vl;
	return 0;
}

/* Whether block b exists, without reading it. */
static int block_exists(fs_op *op, uint64_t ino, uint64_t b, int *exists)
{
	unsigned char k[16];
	bkey(k, ino, b);
	int rc = fs_rget(op, WS_DATA, k, 16, NULL, 0, NULL);
	*exists = rc == 0;
	return rc == BE_ENOTFOUND ? 0 : rc;
}

/* Stores block b (len bytes); counts it if new (D2).  Not known to exist:
 * an insert, which for a block that does exist after all (below the size,
 * or fallocated past it) has written and freed a whole new block before
 * failing: a whole-block write below the size asks block_exists first. */
static int block_write(fs_op *op, fs_inode *in, uint64_t b, const void *buf, size_t len, int known_exists)
{
	unsigned char k[16];
	int rc;
	bkey(k, in->ino, b);
	if (!known_exists) {
		rc = fs_rins(op, WS_DATA, k, 16, buf, len);
		if (rc == 0) {
			in->blocks++;
			return 0;
		}
		if (rc != EEXIST)
			return rc;
	}
	return fs_rput(op, WS_DATA, k, 16, buf, len);
}

static int block_delete(fs_op *op, fs_inode *in, uint64_t b)
{
	unsigned char k[16];
	bkey(k, in->ino, b);
	int rc = fs_rdel(op, WS_DATA, k, 16);
	if (rc == 0 && in->blocks)
		in->blocks--;
	return rc == BE_ENOTFOUND ? 0 : rc;
}

int fs_data_get(fs_op *op, const fs_inode *in, uint64_t off, size_t size, void *out, size_t *got)
{
	size_t bs = op->f->bsize, done = 0;
	unsigned char *buf = NULL;
	int rc = 0;
	*got = 0;
	if (off >= in->size)
		return 0;
	if (size > in->size - off)
		size = (size_t)(in->size - off);
	if (!(buf = malloc(bs)))
		return ENOMEM;
	while (done < size) {
		uint64_t pos = off + done, b = pos / bs;
		size_t o = (size_t)(pos % bs), n = bs - o < size - done ? bs - o : size - done, len;
		int exists;
		/* a whole block straight into out; a part through buf */
		unsigned char *dst = o == 0 && n == bs ? (unsigned char *)out + done : buf;
		if ((rc = block_read(op, in->ino, b, dst, &len, &exists)) != 0)
			break;
		if (dst == buf)
			memcpy((unsigned char *)out + done, buf + o, n);
		done += n;
	}
	free(buf);
	*got = done;
	if (rc == 0 && size >= PREFETCH_MIN && off + size < in->size) { /* D5 */
		uint64_t b = (off + size) / bs + PREFETCH_AHEAD, last = (in->size - 1) / bs;
		unsigned char lo[16], hi[16];
		if (b <= last) {
			bkey(lo, in->ino, b);
			bkey(hi, in->ino, b + PREFETCH_AHEAD < last ? b + PREFETCH_AHEAD : last);
			be_prefetch(op->f->data, lo, 16, hi, 16);
		}
	}
	return rc;
}

int fs_data_put(fs_op *op, fs_inode *in, uint64_t off, const void *src, size_t size)
{
	size_t bs = op->f->bsize, done = 0;
	unsigned char *buf = NULL;
	int rc = 0, ordered = op->ordered;
	if (size >= FS_ORDERED_MIN)
		op->ordered = 1;
	while (done < size) {
		uint64_t pos = off + done, b = pos / bs;
		size_t o = (size_t)(pos % bs), n = bs - o < size - done ? bs - o : size - done;
		if (o == 0 && n == bs) { /* a whole block: no read needed */
			int exists = 0;
			if (pos < in->size && (rc = block_exists(op, in->ino, b, &exists)) != 0)
				break;
			if ((rc = block_write(op, in, b, (const unsigned char *)src + done, bs, exists)) != 0)
				break;
		} else {
			size_t len;
			int exists;
			if (!buf && !(buf = malloc(bs))) {
				rc = ENOMEM;
				break;
			}
			if ((rc = block_read(op, in->ino, b, buf, &len, &exists)) != 0)
				break;
			memcpy(buf + o, (const unsigned char *)src + done, n);
			if ((rc = block_write(op, in, b, buf, o + n > len ? o + n : len, exists)) != 0)
				break;
		}
		done += n;
	}
	free(buf);
	op->ordered = ordered;
	if (!rc && off + size > in->size)
		in->size = off + size;
	return rc;
}

/* Deletes the blocks of in from block `from` on: at most max of them (0:
 * all); *more (if not NULL) says whether some are left. */
static int drop_from(fs_op *op, fs_inode *in, uint64_t from, uint64_t max, int *more)
{
	unsigned char k[16];
	uint64_t n = 0;
	fs_cur *c;
	int rc;
	if (more)
		*more = 0;
	bkey(k, in->ino, from);
	if ((rc = fs_cur_open(op, WS_DATA, &c)) != 0)
		return rc;
	for (rc = fs_cur_seek(c, k, 16); rc == 0; rc = fs_cur_next(c)) {
		const unsigned char *key;
		size_t kl;
		fs_cur_get(c, (const void **)&key, &kl, NULL, NULL);
		if (kl != 16 || memcmp(key, k, 8) != 0)
			break;
		if (max && n == max) {
			if (more)
				*more = 1;
			break;
		}
		if ((rc = block_delete(op, in, fs_getbe64(key + 8))) != 0)
			break;
		n++;
	}
	fs_cur_close(c);
	return rc == BE_ENOTFOUND ? 0 : rc;
}

int fs_data_drop_all(fs_op *op, fs_inode *in) { return drop_from(op, in, 0, 0, NULL); }

int fs_data_drop_some(fs_op *op, fs_inode *in, uint64_t max, int *more) { return drop_from(op, in, 0, max, more); }

int fs_truncate_blocks(fs_op *op, fs_inode *in, uint64_t size)
{
	size_t bs = op->f->bsize;
	int rc;
	if (size < in->size) {
		uint64_t keep = (size + bs - 1) / bs; /* blocks wholly or partly below the size */
		if ((rc = drop_from(op, in, keep, 0, NULL)) != 0)
			return rc;
		if (size % bs) { /* D1: cut the last block at the size */
			unsigned char *buf = malloc(bs);
			size_t len;
			int exists;
			if (!buf)
				return ENOMEM;
			rc = block_read(op, in->ino, size / bs, buf, &len, &exists);
			if (!rc && exists && len > size % bs)
				rc = block_write(op, in, size / bs, buf, size % bs, 1);
			free(buf);
			if (rc)
				return rc;
		}
	}
	in->size = size;
	return 0;
}

/* ---- read and write ---- */

/* Clears set-user-ID, and set-group-ID when group-executable (D6, and a
 * setattr's FS_SET_KILL_SUID). */
static void clear_setid(fs_inode *in)
{
	in->mode &= ~(mode_t)S_ISUID;
	if (in->mode & S_IXGRP)
		in->mode &= ~(mode_t)S_ISGID;
}

/* D6 */
static void kill_setid(const fs_caller *c, fs_inode *in)
{
	if (c && c->uid != 0)
		clear_setid(in);
}

typedef struct io_arg {
	const fs_caller *c;
	uint64_t ino, off;
	size_t size, done;
	const void *in;
	void *out;
	int append; /* off is found under the lock: the size */
} io_arg;

static int read_fn(fs_op *op, void *arg)
{
	io_arg *a = arg;
	fs_inode in;
	int rc, mode = op->tx && a->c && a->c->update ? BE_LOCK_X : BE_LOCK_S;
	if ((rc = fs_lock(op, a->ino, mode)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	if (S_ISDIR(in.mode))
		return EISDIR;
	return fs_data_get(op, &in, a->off, a->size, a->out, &a->done);
}

int fs_read(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, size_t size, void *buf, size_t *got)
{
	io_arg a = {.c = c, .ino = ino, .off = off, .size = size, .out = buf};
	int rc = fs_errno(fs_run(f, c, FS_RD, read_fn, &a));
	*got = rc ? 0 : a.done;
	return rc;
}

static int write_fn(fs_op *op, void *arg)
{
	io_arg *a = arg;
	fs_inode in;
	int rc;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_X)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	if (S_ISDIR(in.mode))
		return EISDIR;
	if (!S_ISREG(in.mode))
		return EINVAL;
	if (a->append)
		a->off = in.size;
	if (a->off >= FS_MAX_FILE || a->size > FS_MAX_FILE - a->off)
		return EFBIG;
	if ((rc = fs_data_put(op, &in, a->off, a->in, a->size)) != 0)
		return rc;
	kill_setid(a->c, &in);
	fs_now(&in.mtime);
	in.ctime = in.mtime;
	if ((rc = fs_iput(op, &in)) != 0)
		return rc;
	a->done = a->size;
	return 0;
}

int fs_write(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, const void *buf, size_t size, size_t *done,
	     uint64_t *at)
{
	io_arg a = {.c = c, .ino = ino, .off = off, .size = size, .in = buf, .append = off == FS_APPEND};
	*done = 0;
	if (f->opt.readonly)
		return -EROFS;
	int rc = fs_errno(fs_run(f, c, FS_KLOCK, write_fn, &a));
	if (!rc)
		*done = a.done;
	if (!rc && at)
		*at = a.off;
	return rc;
}

/* ---- setattr ---- */

typedef struct setattr_arg {
	const fs_caller *c;
	uint64_t ino;
	const fs_attr *in;
	unsigned set;
	fs_attr *out;
} setattr_arg;

static int setattr_fn(fs_op *op, void *arg)
{
	setattr_arg *a = arg;
	fs_inode in;
	struct timespec now;
	int rc;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_X)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	fs_now(&now);
	if (a->set & FS_SET_SIZE) {
		if (S_ISDIR(in.mode))
			return EISDIR;
		if (!S_ISREG(in.mode))
			return EINVAL;
		if (a->in->size > FS_MAX_FILE)
			return EFBIG;
		if ((rc = fs_truncate_blocks(op, &in, a->in->size)) != 0)
			return rc;
		in.mtime = now;
	}
	if (a->set & FS_SET_MODE)
		in.mode = (in.mode & S_IFMT) | (a->in->mode & 07777);
	if (a->set & (FS_SET_UID | FS_SET_GID)) {
		if (a->set & FS_SET_UID)
			in.uid = a->in->uid;
		if (a->set & FS_SET_GID)
			in.gid = a->in->gid;
		/* chown clears set-user-ID, and set-group-ID when group-executable */
		if (!S_ISDIR(in.mode) && !(a->set & FS_SET_MODE))
			clear_setid(&in);
	}
	if ((a->set & FS_SET_KILL_SUID) && !S_ISDIR(in.mode))
		clear_setid(&in);
	if (a->set & FS_SET_ATIME_NOW)
		in.atime = now;
	else if (a->set & FS_SET_ATIME)
		in.atime = a->in->atime;
	if (a->set & FS_SET_MTIME_NOW)
		in.mtime = now;
	else if (a->set & FS_SET_MTIME)
		in.mtime = a->in->mtime;
	in.ctime = (a->set & FS_SET_CTIME) ? a->in->ctime : now;
	if ((rc = fs_iput(op, &in)) != 0)
		return rc;
	fs_iattr(op->f, &in, a->out);
	return 0;
}

int fs_setattr(fs *f, const fs_caller *c, uint64_t ino, const fs_attr *in, unsigned to_set, fs_attr *out)
{
	setattr_arg a = {.c = c, .ino = ino, .in = in, .set = to_set, .out = out};
	return f->opt.readonly ? -EROFS : fs_errno(fs_run(f, c, FS_WR, setattr_fn, &a));
}

/* ---- fallocate and lseek ---- */

typedef struct range_arg {
	const fs_caller *c;
	uint64_t ino, off, len, result;
	int mode;
} range_arg;

static int fallocate_fn(fs_op *op, void *arg)
{
	range_arg *a = arg;
	size_t bs = op->f->bsize;
	fs_inode in;
	unsigned char *buf;
	int rc;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_X)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	if (S_ISDIR(in.mode))
		return EISDIR;
	if (!S_ISREG(in.mode))
		return ENODEV;
	if (a->off >= FS_MAX_FILE || a->len > FS_MAX_FILE - a->off)
		return EFBIG;
	if (!(buf = malloc(bs)))
		return ENOMEM;
	uint64_t end = a->off + a->len;
	for (uint64_t b = a->off / bs; b * bs < end && !rc; b++) {
		uint64_t bstart = b * bs;
		size_t len;
		int exists;
		if ((rc = block_read(op, in.ino, b, buf, &len, &exists)) != 0)
			break;
		if (a->mode & FALLOC_FL_PUNCH_HOLE) {
			if (!exists)
				continue;
			if (bstart >= a->off && bstart + bs <= end) {
				rc = block_delete(op, &in, b);
			} else { /* zero the part of the block inside the range */
				size_t lo = a->off > bstart ? (size_t)(a->off - bstart) : 0;
				size_t hi = end < bstart + bs ? (size_t)(end - bstart) : bs;
				if (lo < len) {
					memset(buf + lo, 0, (hi < len ? hi : len) - lo);
					rc = block_write(op, &in, b, buf, len, 1);
				}
			}
		} else if (!exists) {
			/* a zero block, holding no byte at or past the size (D1)
			 * unless it lies past the size (KEEP_SIZE) */
			uint64_t newsize = (a->mode & FALLOC_FL_KEEP_SIZE) || end <= in.size ? in.size : end;
			size_t n = bstart + bs <= newsize ? bs : newsize > bstart ? (size_t)(newsize - bstart) : bs;
			rc = block_write(op, &in, b, buf, n, 0);
		}
	}
	free(buf);
	if (rc)
		return rc;
	if (!(a->mode & (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) && end > in.size)
		in.size = end;
	kill_setid(a->c, &in);
	fs_now(&in.ctime);
	if (a->mode & FALLOC_FL_PUNCH_HOLE)
		in.mtime = in.ctime;
	return fs_iput(op, &in);
}

int fs_fallocate(fs *f, const fs_caller *c, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	range_arg a = {.c = c, .ino = ino, .off = off, .len = len, .mode = mode};
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (len == 0)
		return -EINVAL;
	return f->opt.readonly ? -EROFS : fs_errno(fs_run(f, c, FS_WR, fallocate_fn, &a));
}

static int lseek_fn(fs_op *op, void *arg)
{
	range_arg *a = arg;
	size_t bs = op->f->bsize;
	fs_inode in;
	fs_cur *c;
	unsigned char k[16];
	int rc;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_S)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0)
		return rc;
	if (a->off >= in.size)
		return ENXIO;
	if ((rc = fs_cur_open(op, WS_DATA, &c)) != 0)
		return rc;
	uint64_t b = a->off / bs;
	bkey(k, a->ino, b);
	rc = fs_cur_seek(c, k, 16);
	if (a->mode == SEEK_DATA) {
		uint64_t found = UINT64_MAX;
		if (rc == 0) {
			const unsigned char *key;
			size_t kl;
			fs_cur_get(c, (const void **)&key, &kl, NULL, NULL);
			if (kl == 16 && memcmp(key, k, 8) == 0)
				found = fs_getbe64(key + 8) * bs;
		}
		fs_cur_close(c);
		if (rc && rc != BE_ENOTFOUND)
			return rc;
		if (found == UINT64_MAX || found >= in.size)
			return ENXIO;
		a->result = found > a->off ? found : a->off;
		return 0;
	}
	/* SEEK_HOLE: the first block missing from b on, or the size */
	uint64_t expect = b;
	while (rc == 0) {
		const unsigned char *key;
		size_t kl;
		fs_cur_get(c, (const void **)&key, &kl, NULL, NULL);
		if (kl != 16 || memcmp(key, k, 8) != 0 || fs_getbe64(key + 8) != expect)
			break;
		expect++;
		if (expect * bs >= in.size)
			break;
		rc = fs_cur_next(c);
	}
	fs_cur_close(c);
	if (rc && rc != BE_ENOTFOUND)
		return rc;
	uint64_t hole = expect * bs;
	if (hole > in.size)
		hole = in.size;
	a->result = hole > a->off ? hole : a->off;
	return 0;
}

int fs_lseek(fs *f, const fs_caller *c, uint64_t ino, uint64_t off, int whence, uint64_t *out)
{
	range_arg a = {.ino = ino, .off = off, .mode = whence};
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	int rc = fs_errno(fs_run(f, c, FS_RD, lseek_fn, &a));
	if (!rc)
		*out = a.result;
	return rc;
}
