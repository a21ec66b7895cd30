/*
 * fsd_data -- tpfsd's handlers of open files: open and create, read and
 * write, flush, release, fsync, fallocate, lseek, copy_file_range.  Rules
 * H1-H5: fsd_ops.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fsd_int.h"

/* An open file's fh: its open flags, whether it is direct I/O, the alias
 * tag of the node id it was opened on (C5), and whether it was opened
 * outside every transaction, with the stamp fs_opened gave it (fs_tx.c X7). */
static uint64_t fh_of(const struct fuse_file_info *fi, uint64_t tag, int plain, uint32_t stamp)
{
	return (uint64_t)(unsigned)fi->flags | (fi->direct_io ? FH_DIRECT : 0) | (plain ? FH_PLAIN : 0) |
	       (tag & FH_TAG_MASK) << FH_TAG_SHIFT | (uint64_t)(stamp & FS_STAMP_MASK) << FH_STAMP_SHIFT;
}

static void fh_released(fs *f, uint64_t ino, uint64_t fh)
{
	fs_released(f, ino, (fh & FH_PLAIN) != 0, (uint32_t)(fh >> FH_STAMP_SHIFT) & FS_STAMP_MASK);
}

static uint64_t fh_tag(uint64_t fh) { return fh >> FH_TAG_SHIFT & FH_TAG_MASK; }

/* C5: a member's change through a handle on a shared inode that is not
 * direct I/O -- one opened before the process joined, outside every
 * transaction (txrun -- make > log) -- is a plain call: the
 * descriptor was opened outside the transaction and stays outside it, its
 * writes committed at once, like output to a terminal.  (Through the
 * transaction they could not be kept private: the kernel puts them in the
 * shared page cache first.)  Unless the transaction itself has the file
 * locked: one file is not changed both ways (EBADF). */
int fsd_outside_change(fs_caller *c, uint64_t ino, uint64_t fh)
{
	/* (a direct handle -- opened by a member, of this transaction or an
	 * earlier one -- never passes through the page cache: it is the
	 * transaction's) */
	if (!c->tx || (fh & FH_DIRECT) || fh_tag(fh) == fsd_tx_tag(c->tx))
		return 0;
	if (fs_tx_holds(c->tx, ino))
		return -EBADF;
	fs_tx_put(c->tx);
	c->tx = NULL;
	return 0;
}

/* O_TRUNC arrives inside open (FUSE_CAP_ATOMIC_O_TRUNC): the same change a
 * truncating open makes on Linux, size 0 and mtime (and ctime) now, and
 * set-user-ID and set-group-ID cleared unless the caller is root (the
 * kernel's CAP_FSETID test).  The kernel skips its own clearing of those
 * bits for a truncation done by open, so it falls to us here. */
static int truncate_at_open(fsd *d, fuse_req_t req, fuse_ino_t ino, uint64_t tag)
{
	fs_caller c = fsd_caller(req);
	fs_attr in, out;
	if (c.tx && tag != fsd_tx_tag(c.tx)) { /* C5: a shared inode's size */
		fsd_caller_end(&c);
		return -EBADF;
	}
	unsigned set = FS_SET_SIZE | FS_SET_MTIME | FS_SET_MTIME_NOW;
	memset(&in, 0, sizeof in);
	clock_gettime(CLOCK_REALTIME, &in.mtime);
	if (c.uid != 0)
		set |= FS_SET_KILL_SUID;
	int rc = fs_setattr(d->fs, &c, ino, &in, set, &out);
	fsd_changed(d, &c, rc ? 0 : ino, 0, NULL);
	fsd_caller_end(&c);
	return rc;
}

void fsd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const uint64_t tag = fsd_alias_tag(ino); /* C5 */
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_OPEN);
	int rc;
	if ((fi->flags & O_TRUNC) && (rc = truncate_at_open(d, req, ino, tag)) != 0) {
		fsd_reply_err(req, d, rc);
		return;
	}
	fs_caller c = fsd_caller(req);
	uint32_t stamp = 0;
	if ((rc = fs_opened(d->fs, ino, !c.tx, &stamp)) != 0) {
		fsd_caller_end(&c);
		fsd_reply_err(req, d, rc);
		return;
	}
	fsd_open_flags(d, &c, ino, fi);
	fi->fh = fh_of(fi, tag, !c.tx, stamp); /* O_APPEND, the access mode, direct I/O, C5, X7 */
	fsd_caller_end(&c);
	if (fuse_reply_open(req, fi) != 0) /* H3 */
		fh_released(d->fs, ino, fi->fh);
}

void fsd_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	parent = fsd_ino(parent); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_CREATE);
	fs_caller c = fsd_caller(req);
	struct fuse_entry_param e;
	fs_attr a;
	int rc = -ENAMETOOLONG;
	if (fsd_name_ok(name))
		rc = fs_mknod(d->fs, &c, parent, name, (mode & ~S_IFMT) | S_IFREG, 0, &a);
	uint32_t stamp = 0;
	if (rc == 0 && (rc = fs_opened(d->fs, a.ino, !c.tx, &stamp)) != 0)
		fs_forget(d->fs, a.ino, 1); /* the reference fs_mknod took */
	if (rc) {
		fsd_caller_end(&c);
		fsd_reply_err(req, d, rc);
		return;
	}
	fsd_open_flags(d, &c, a.ino, fi);
	fi->fh = fh_of(fi, fsd_alias_tag(fsd_nodeid(d, &c, a.ino, a.mode)), !c.tx, stamp);
	fsd_to_entry(d, &c, parent, name, &a, &e);
	/* H2: fs_mknod took the lookup reference */
	if (fuse_reply_create(req, &e, fi) != 0) {
		fh_released(d->fs, a.ino, fi->fh); /* H3 */
		fs_forget(d->fs, a.ino, 1);
	} else {
		fsd_changed(d, &c, 0, parent, NULL);
	}
	fsd_caller_end(&c);
}

/* Each worker thread's read buffer, kept across requests: a fresh 1 MiB
 * malloc per read is an mmap whose pages the kernel zeroes on every
 * request (15% of a sequential read's CPU).  Freed when the thread ends. */
static pthread_key_t read_buf_key;
static pthread_once_t read_buf_once = PTHREAD_ONCE_INIT;
struct read_buf {
	size_t cap;
	char data[];
};

static void read_buf_init(void) { (void)pthread_key_create(&read_buf_key, free); }

static char *read_buf(size_t size)
{
	pthread_once(&read_buf_once, read_buf_init);
	struct read_buf *b = pthread_getspecific(read_buf_key);
	if (!b || b->cap < size) {
		struct read_buf *n = malloc(sizeof *n + (size ? size : 1));
		if (!n)
			return NULL;
		n->cap = size;
		free(b);
		b = n;
		(void)pthread_setspecific(read_buf_key, b);
	}
	return b->data;
}

void fsd_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_READ);
	char *buf = read_buf(size);
	size_t got = 0;
	int rc;
	if (!buf) {
		fsd_reply_err(req, d, -ENOMEM);
		return;
	}
	fs_caller c = fsd_caller(req);
	/* C5: what fills the page cache (no lock owner: read-ahead, mmap
	 * faults, handles that are not direct I/O) is the view of the node id
	 * the handle was opened on; a direct read is the caller's */
	fs_caller v = fi->lock_owner ? c : fsd_cache_view(&c, fh_tag(fi->fh));
	v.update = v.tx && (fi->fh & O_ACCMODE) != O_RDONLY;
	if ((rc = fs_read(d->fs, &v, ino, (uint64_t)off, size, buf, &got)) != 0)
		fsd_reply_err(req, d, rc);
	else
		fuse_reply_buf(req, buf, got < size ? got : size);
	fsd_caller_end(&c);
}

/* Writes arrive in memory (one buffer: written in place) or, when the
 * kernel spliced the request into a pipe (-o splice_read), in a pipe that is
 * copied out first. */
void fsd_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_WRITE);
	fs_caller c = fsd_caller(req);
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
			fsd_reply_err(req, d, -ENOMEM);
			goto out;
		}
		out.buf[0].mem = copy;
		if ((n = fuse_buf_copy(&out, in, 0)) < 0) {
			fsd_reply_err(req, d, (int)n);
			goto out;
		}
		data = copy;
		size = (size_t)n;
	}
	/* O_APPEND: the offset the kernel chose comes from its idea of the
	 * size, which may be another transaction's view (C1); the daemon
	 * appends at the end of the caller's view instead, and has the kernel
	 * drop what it cached at the wrong place. */
	int append = (fi->fh & O_APPEND) != 0;
	uint64_t at = 0;
	if ((rc = fsd_outside_change(&c, ino, fi->fh)) != 0)
		fsd_reply_err(req, d, rc);
	else if ((rc = fs_write(d->fs, &c, ino, append ? FS_APPEND : (uint64_t)off, data, size, &done, &at)) != 0) {
		fsd_reply_err(req, d, rc);
	} else {
		fuse_reply_write(req, done);
		fsd_changed(d, &c, ino, 0, NULL);
		if (append && at != (uint64_t)off && !c.tx)
			fsd_drop_cache(d, ino);
	}
out:
	fsd_caller_end(&c);
	free(copy);
}

/* Nothing to do: writes are not buffered here, and noflush (open_flags)
 * keeps the kernel from asking. */
void fsd_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_FLUSH);
	fsd_reply_err(req, d, 0);
}

void fsd_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_RELEASE);
	fh_released(d->fs, ino, fi->fh); /* H3 */
	fsd_reply_err(req, d, 0);
}

void fsd_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_FSYNC);
	fsd_reply_err(req, d, fs_sync(d->fs));
}

void fsd_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_FALLOCATE);
	if (off < 0 || len <= 0) {
		fsd_reply_err(req, d, -EINVAL);
		return;
	}
	fs_caller c = fsd_caller(req);
	int rc = fsd_outside_change(&c, ino, fi->fh);
	if (!rc)
		rc = fs_fallocate(d->fs, &c, ino, mode, (uint64_t)off, (uint64_t)len);
	fsd_reply_err(req, d, rc);
	if (!rc)
		fsd_changed(d, &c, ino, 0, NULL);
	fsd_caller_end(&c);
}

/* SEEK_DATA and SEEK_HOLE only: the kernel answers the others itself. */
void fsd_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	ino = fsd_ino(ino); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_LSEEK);
	uint64_t pos = 0;
	fs_caller c = fsd_caller(req);
	int rc = off < 0 ? -ENXIO : fs_lseek(d->fs, &c, ino, (uint64_t)off, whence, &pos);
	fsd_caller_end(&c);
	if (rc)
		fsd_reply_err(req, d, rc);
	else
		fuse_reply_lseek(req, (off_t)pos);
}

/* copy_file_range: without it the kernel falls back to splicing through a
 * pipe, 64 KiB a write request (cp of 64 MiB: ~2,000 round trips).  Here
 * one request copies up to COPY_MAX in FSD_IO_SIZE pieces, one fs_write
 * (one transaction) each, and may copy less, like write: the caller loops. */
#define COPY_MAX (16 * (size_t)FSD_IO_SIZE)

void fsd_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
			 fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags)
{
	ino_in = fsd_ino(ino_in); /* C5 */
	ino_out = fsd_ino(ino_out); /* C5 */
	fsd *d = fsd_begin(req, FSD_OP_COPY_FILE_RANGE);
	fs_caller c = fsd_caller(req);
	size_t total = 0;
	char *buf;
	int rc = 0;
	if (flags != 0 || off_in < 0 || off_out < 0 || (rc = fsd_outside_change(&c, ino_out, fi_out->fh)) != 0) {
		fsd_reply_err(req, d, rc ? rc : -EINVAL);
		fsd_caller_end(&c);
		return;
	}
	if (len > COPY_MAX)
		len = COPY_MAX;
	if (!(buf = malloc(len < FSD_IO_SIZE ? (len ? len : 1) : FSD_IO_SIZE))) {
		fsd_reply_err(req, d, -ENOMEM);
		fsd_caller_end(&c);
		return;
	}
	while (total < len) {
		size_t n = len - total < FSD_IO_SIZE ? len - total : FSD_IO_SIZE, got = 0, done = 0;
		if ((rc = fs_read(d->fs, &c, ino_in, (uint64_t)off_in + total, n, buf, &got)) != 0 || got == 0)
			break;
		if ((rc = fs_write(d->fs, &c, ino_out, (uint64_t)off_out + total, buf, got, &done, NULL)) != 0)
			break;
		total += done;
		if (done < got || got < n)
			break;
	}
	if (total == 0 && rc != 0)
		fsd_reply_err(req, d, rc);
	else
		fuse_reply_write(req, total);
	if (total)
		fsd_changed(d, &c, ino_out, 0, NULL);
	fsd_caller_end(&c);
	free(buf);
}
