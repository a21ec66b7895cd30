/*
 * fsd_ops -- the FUSE low-level handlers of tpfsd and the state they share
 * with the daemon (tpfsd.c).
 *
 * Each handler decodes one request, calls one fs_* function (fs.h), maps
 * its result to an errno in one place (fsd_reply_err) and replies.  Handlers
 * know nothing of the schema or of the engine.
 *
 * Round trips: every request the kernel sends costs a round trip (~24 us
 * here), so the handlers count each one by kind (fs_count with the indexes
 * below) and the daemon asks the kernel for the capabilities and caches
 * that save them (fsd_ops.c: fsd_init, fsd_entry_timeout).  The counts are
 * readable on a mount as the virtual extended attribute FSD_STATS_XATTR of
 * the root directory:
 *
 *     getfattr --only-values -n tpfs.stats MOUNTPOINT
 */
#ifndef TPFS_FSD_OPS_H
#define TPFS_FSD_OPS_H

#include <stdint.h>

#include <fuse_lowlevel.h>

#include "fs.h"

/* Read-only, on the root inode only; not listed by listxattr. */
#define FSD_STATS_XATTR "tpfs.stats"

/* The largest write (and read) request: 1 MiB, the kernel's limit of 256
 * pages per request.  Also st_blksize, so that cp, cat and friends use
 * buffers that fill a request. */
#define FSD_IO_SIZE (1u << 20)

/*
 * Request kinds, counted with fs_count(fs, FSD_OP_x).  Append only: the
 * index is what fs_counters.ops[] holds.  "requests" counts every request
 * the kernel sent (every round trip, plus forgets, which have no reply);
 * "errors" every error reply but the ordinary "no such name" (ENOENT) and
 * "no such attribute" (ENODATA), which "not-found" counts.
 */
#define FSD_OPS(X)                                                                                                     \
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
	X(FSYNCDIR, "fsyncdir")                                                                                        \
	X(STATFS, "statfs")                                                                                            \
	X(SETXATTR, "setxattr")                                                                                        \
	X(GETXATTR, "getxattr")                                                                                        \
	X(LISTXATTR, "listxattr")                                                                                      \
	X(REMOVEXATTR, "removexattr")                                                                                  \
	X(ACCESS, "access")                                                                                            \
	X(CREATE, "create")                                                                                            \
	X(FALLOCATE, "fallocate")                                                                                      \
	X(LSEEK, "lseek")                                                                                              \
	X(NEGATIVE, "lookup-negative") /* lookups answered "no such name" (cached negative_timeout) */               \
	X(COPY_FILE_RANGE, "copy_file_range")                                                                          \
	X(BEGIN_DROPPED, "begin-dropped") /* names a begin had the kernel drop (fsd_txbind.c C6) */                      \
	X(NOT_FOUND, "not-found") /* ENOENT and ENODATA replies: answers, not errors */

enum fsd_op {
#define FSD_OP_ENUM(id, name) FSD_OP_##id,
	FSD_OPS(FSD_OP_ENUM)
#undef FSD_OP_ENUM
	FSD_OP_COUNT
};

extern const char *const fsd_op_names[FSD_OP_COUNT];

/* What the handlers share with the daemon (the session's userdata).  Set
 * before the session starts and read-only afterwards. */
typedef struct fsd {
	fs *fs;
	double entry_timeout;    /* seconds the kernel may keep a name (1.0) */
	double attr_timeout;     /* ...attributes (1.0) */
	double negative_timeout; /* ...the absence of a name (1.0; 0: not cached) */
	int readonly;
	unsigned max_user_tx;    /* open transactions a user other than root may have (fsd_txbind.c C15) */
	struct fuse_conn_info_opts *conn_opts; /* -o max_write=, splice_read, ... given by the user; may be NULL */
	struct fsd_txs *txs;     /* user transactions (fsd_txbind.c), set before the session loop */
	uint64_t cached_until;   /* C6: CLOCK_MONOTONIC ns until which a name the kernel was allowed to keep may live */
	uint64_t tx_seen;        /* C1: CLOCK_MONOTONIC_COARSE ns when a transaction was last seen open */
} fsd;

/* User transactions (fsd_txbind.c): started after the mount, stopped (every
 * open transaction aborted) before the fs layer unmounts. */
int fsd_tx_start(fsd *d, struct fuse_session *se);
void fsd_tx_stop(fsd *d);

extern const struct fuse_lowlevel_ops fsd_ops;

/* The daemon's log (fsd_log.h). */
#include "fsd_log.h"

#endif
