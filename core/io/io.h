/*
 * io -- every read, write, sync, truncate, hole punch, rename and unlink of
 * a store file.
 *
 * No other module of the engine calls pread/pwrite/fsync/ftruncate/rename on
 * store files: they call io_*.  That single seam is what lets the testing
 * library (io_sim.h, linked only into tests) replace the POSIX backend with a
 * crash simulator and a fault injector while the product's code paths stay
 * unchanged.
 *
 * Contract of the calls:
 *   - io_pwrite writes all of len or fails; short writes of the backend are
 *     retried here (the fault injector produces them on purpose).
 *   - io_pread reads len bytes; bytes past the end of the file read as zeros
 *     and *got says how many came from the file.
 *   - io_sync makes every completed io_pwrite/io_truncate of the file durable
 *     (fdatasync).  Writes not followed by a successful io_sync may be lost,
 *     reordered or torn at a power cut: that is what the simulator models.
 *   - io_sync_dir makes creations, renames and unlinks in a directory durable.
 *   - What io creates is private to its owner, whatever the umask: files
 *     IO_FILE_MODE, directories IO_DIR_MODE, exactly.
 *   - Every function returns 0 or a positive errno.
 */
#ifndef TP_IO_H
#define TP_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

typedef struct io_file io_file;

#define IO_FILE_MODE 0600u /* a file io creates */
#define IO_DIR_MODE 0700u  /* a directory io creates */

/* io_open flags */
enum {
	IO_RDONLY = 1 << 0, /* open for reading only */
	IO_CREATE = 1 << 1, /* create if missing (IO_FILE_MODE) */
	IO_EXCL = 1 << 2,   /* with IO_CREATE: fail with EEXIST if present */
	IO_SCRATCH = 1 << 3, /* read the file, keep every write in memory only
				(io_scratch.c): for recovering a store in memory */
};

/* Files */
int io_open(const char *path, int flags, io_file **out);
int io_close(io_file *f);
const char *io_path(const io_file *f);

/* Data */
int io_pread(io_file *f, void *buf, size_t len, uint64_t off, size_t *got);
/* io_pread into cnt buffers, filled in order from off (one system call,
 * preadv, where the backend has it: a run of pages read straight into the
 * frames that hold them). */
int io_preadv(io_file *f, const struct iovec *iov, int cnt, uint64_t off, size_t *got);
int io_pwrite(io_file *f, const void *buf, size_t len, uint64_t off);
/* io_pwrite of cnt buffers, written in order from off (one pwritev where
 * the backend has it: pages written from the frames that hold them). */
int io_pwritev(io_file *f, const struct iovec *iov, int cnt, uint64_t off);
int io_sync(io_file *f);
/* Writes len bytes at off and makes them durable in one call, where the
 * backend can: the POSIX backend writes them with one pwritev2(RWF_DSYNC)
 * through an O_DIRECT descriptor of the file (no copy into the page cache,
 * no separate flush of it), which needs buf aligned to IO_DIRECT_MEM and
 * off and len to IO_DIRECT_ALIGN.  0: written and durable.  ENOTSUP:
 * nothing was written -- the backend has no such call (the crash
 * simulator), the file system or device refuses direct I/O, or the
 * arguments are not aligned -- so the caller writes with io_pwrite and
 * io_sync.  Another errno: the write failed and its bytes are in doubt, as
 * after a failed io_pwrite or io_sync. */
#define IO_DIRECT_MEM 4096
#define IO_DIRECT_ALIGN 512
int io_pwrite_durable(io_file *f, const void *buf, size_t len, uint64_t off);
/* Whether f's backend has io_pwrite_durable at all (the crash simulator
 * does not): a caller can skip preparing for it. */
int io_has_durable_write(const io_file *f);
int io_size(io_file *f, uint64_t *out);
int io_truncate(io_file *f, uint64_t size);
/* Makes f at least size bytes long with its blocks reserved on the disk
 * (fallocate), so that writes below size never fail for lack of space;
 * never shrinks it.  ENOSPC when the disk cannot hold it. */
int io_reserve(io_file *f, uint64_t size);
/* Reserves blocks for [off, off+len) of f (fallocate), making f at least
 * off+len long: the range io_reserve would cover, without touching what
 * lies below off -- so holes io_punch made there stay holes.  ENOSPC when
 * the disk cannot hold it. */
int io_reserve_range(io_file *f, uint64_t off, uint64_t len);
/* Gives [off, off+len) of f back to the file system (a hole: fallocate
 * PUNCH_HOLE | KEEP_SIZE); the file's size does not change and the range
 * reads as zeros.  Like a write, it is durable only after io_sync: a crash
 * before may leave any part of the range as it was.  ENOTSUP: the backend
 * or the file system has no holes, and nothing changed. */
int io_punch(io_file *f, uint64_t off, uint64_t len);
/* Bytes the file system holding f can still give (statvfs f_bavail).
 * ENOTSUP: the backend cannot tell (the crash simulator: plenty). */
int io_fs_free(io_file *f, uint64_t *bytes);
/* Starts writing [off, off+len) of f to the disk without waiting (a hint,
 * sync_file_range): a later io_sync then has less left to wait for.  It
 * makes nothing durable. */
void io_writeback(io_file *f, uint64_t off, uint64_t len);
/* Starts reading [off, off+len) of f into the kernel's cache without
 * waiting (a hint, posix_fadvise WILLNEED): later preads of it then find
 * it there.  It reads nothing into the caller's memory. */
void io_willneed(io_file *f, uint64_t off, uint64_t len);
/* Extends f to at least size bytes of real, zero-filled blocks (written, not
 * sparse) so that later writes inside it never change the file's size. */
int io_preallocate(io_file *f, uint64_t size);

/* Names */
int io_mkdir(const char *path);            /* EEXIST if it exists */
int io_rename(const char *from, const char *to);
int io_unlink(const char *path);
int io_sync_dir(const char *path);
int io_exists(const char *path, int *is_dir); /* 0, ENOENT or errno */
/* The permission bits of path (07777) and whether it is a directory (1), a
 * symbolic link (-1, only when not following) or not (0); 0, ENOENT or
 * errno.  io_chmod sets them (no backend models a mode: no crash point). */
int io_mode(const char *path, int follow, unsigned *mode, int *is_dir);
int io_chmod(const char *path, unsigned mode);

/* A named crash point: a no-op in the product; the simulator may stop the
 * process here (for example "log.commit.written"). */
void io_point(const char *name);

/* The backend: the POSIX one by default.  Only the testing library installs
 * another one; the product never does. */
typedef struct io_backend {
	int (*open)(const char *path, int flags, void **h);
	int (*close)(void *h);
	/* one attempt: may transfer fewer bytes than asked (*done) */
	int (*pread)(void *h, void *buf, size_t len, uint64_t off, size_t *done);
	/* NULL: io_preadv reads into a bounce buffer with pread */
	int (*preadv)(void *h, const struct iovec *iov, int cnt, uint64_t off, size_t *done);
	int (*pwrite)(void *h, const void *buf, size_t len, uint64_t off, size_t *done);
	/* NULL: io_pwritev gathers into a bounce buffer and uses pwrite */
	int (*pwritev)(void *h, const struct iovec *iov, int cnt, uint64_t off, size_t *done);
	int (*sync)(void *h);
	/* NULL: io_pwrite_durable answers ENOTSUP.  One attempt, aligned
	 * (io_pwrite_durable checks); ENOTSUP: cannot, nothing written. */
	int (*pwrite_durable)(void *h, const void *buf, size_t len, uint64_t off, size_t *done);
	int (*size)(void *h, uint64_t *out);
	int (*truncate)(void *h, uint64_t size);
	int (*reserve)(void *h, uint64_t size); /* NULL: truncate to a larger size */
	/* NULL: truncate to a larger size if off+len is past the end */
	int (*reserve_range)(void *h, uint64_t off, uint64_t len);
	int (*punch)(void *h, uint64_t off, uint64_t len); /* NULL: ENOTSUP */
	int (*fs_free)(void *h, uint64_t *bytes);          /* NULL: ENOTSUP */
	void (*writeback)(void *h, uint64_t off, uint64_t len); /* NULL: nothing */
	void (*willneed)(void *h, uint64_t off, uint64_t len);  /* NULL: nothing */
	int (*mkdir)(const char *path);
	int (*rename)(const char *from, const char *to);
	int (*unlink)(const char *path);
	int (*sync_dir)(const char *path);
	void (*point)(const char *name);
} io_backend;

const io_backend *io_posix_backend(void);
/* Wraps handle h of backend be (a file open for reading) in the scratch
 * backend of IO_SCRATCH (io_scratch.c); io_open calls it. */
int io_scratch_wrap(const io_backend *be, void *h, const io_backend **out_be, void **out_h);
/* The POSIX backend's open(2) of a store file, for a backend that keeps
 * descriptors of its own: the io_open flags, a created file made with
 * IO_FILE_MODE whatever the umask.  0 and *fd, or an errno. */
int io_posix_open_fd(const char *path, int flags, int *fd);
/* Installs b (NULL restores POSIX).  Not thread-safe; call before opening. */
void io_set_backend(const io_backend *b);

#endif
