/*
 * fsd_int.h -- private to tpfsd's FUSE handlers: the decoding and replying
 * helpers and the caching policy (H4) of fsd_ops.c, and the handlers that
 * fsd_names.c, fsd_data.c and fsd_attr.c give the operation table.  The
 * rules they all keep (H1-H5) open fsd_ops.c.
 */
#ifndef TPFS_FSD_INT_H
#define TPFS_FSD_INT_H

#include <stddef.h>
#include <sys/stat.h>

#include "fsd_ops.h"

/* C5 (fsd_txbind.c): a member's kernel inodes are its transaction's own.  Its
 * entry replies carry a node id naming the inode and the transaction (an
 * alias); every handler turns node ids back into inode numbers with
 * fsd_ino first.  Inode numbers stay below 2^FSD_ALIAS_SHIFT (fs.c). */
#define FSD_ALIAS_SHIFT 44
#define FSD_INO_MASK ((1ull << FSD_ALIAS_SHIFT) - 1)
static inline uint64_t fsd_ino(uint64_t nodeid) { return nodeid & FSD_INO_MASK; }
/* The alias tag of a node id; 0: the shared inode. */
static inline uint64_t fsd_alias_tag(uint64_t nodeid) { return nodeid >> FSD_ALIAS_SHIFT; }
uint64_t fsd_tx_tag(const fs_tx *tx); /* never 0 */
/* The node id the caller's kernel should know ino (of type mode) by: a
 * directory's is shared unless C9 made it the transaction's own. */
uint64_t fsd_nodeid(fsd *d, const fs_caller *c, uint64_t ino, uint32_t mode);
/* C9: -ESTALE if a member's rmdir or rename must be asked again (the
 * directories named became its transaction's own), else 0. */
int fsd_dirs_private(fsd *d, const fs_caller *c, uint64_t parent, const char *name, uint64_t newparent,
		     const char *newname);
/* The view the kernel caches for a node id of this tag: the caller's if
 * the tag is its transaction's, else the committed state (tx NULL). */
fs_caller fsd_cache_view(const fs_caller *c, uint64_t tag);

/* Decoding and replying (fsd_ops.c) */
fsd *fsd_begin(fuse_req_t req, int op); /* counts the request; every handler starts here */
/* The caller, and its user transaction (a reference: fsd_caller_end). */
fs_caller fsd_caller(fuse_req_t req);
void fsd_caller_end(fs_caller *c);
/* C3: after a member's change was answered (fsd_txbind.c); 0 / NULL: none. */
void fsd_changed(fsd *d, const fs_caller *c, uint64_t ino, uint64_t parent, const char *name);
void fsd_drop_cache(fsd *d, uint64_t ino); /* the inode's attributes and pages */
/* The control channel of transactions (fsd_txbind.c, tpfs_tx_proto.h). */
int fsd_is_tx_control(fuse_ino_t ino, const char *name);
void fsd_tx_control(fuse_req_t req, fsd *d, const char *name, size_t size);
int fsd_name_ok(const char *name);
void fsd_reply_err(fuse_req_t req, fsd *d, int rc); /* H5 */
void fsd_to_stat(const fs_attr *a, struct stat *st);
/* The entry of name in parent (C6 remembers names the kernel may keep). */
void fsd_to_entry(fsd *d, const fs_caller *c, uint64_t parent, const char *name, const fs_attr *a,
		  struct fuse_entry_param *e);
double fsd_negative_timeout(const fsd *d); /* C1 */
void fsd_reply_entry(fuse_req_t req, fsd *d, const fs_caller *c, uint64_t parent, const char *name, int rc,
		     const fs_attr *a); /* H2 */
/* C6: the kernel may keep name in parent without asking until the entry
 * timeout has passed (fsd_txbind.c). */
void fsd_name_cached(fsd *d, uint64_t parent, const char *name);
void fsd_reply_attr(fuse_req_t req, fsd *d, int rc, const fs_attr *a);

/* An open file's fh (fsd_data.c): its open flags in the low 32 bits, and */
#define FH_DIRECT (1ull << 62) /* direct I/O */
#define FH_PLAIN (1ull << 61)  /* opened outside every transaction (fs_tx.c X7) */
#define FH_TAG_SHIFT 32        /* the alias tag of the node id it was opened on (C5) */
#define FH_TAG_MASK 0xfffffull
#define FH_STAMP_SHIFT 52      /* fs_opened's stamp */

/* C5: a member's change through handle fh of a shared inode opened
 * outside every transaction: c becomes a plain caller (its tx dropped), or
 * -EBADF when the transaction has the file locked; 0 otherwise too
 * (fsd_data.c). */
int fsd_outside_change(fs_caller *c, uint64_t ino, uint64_t fh);

/* What the kernel may cache, H4 (fsd_ops.c) */
void fsd_open_flags(const fsd *d, const fs_caller *c, fuse_ino_t ino, struct fuse_file_info *fi);
void fsd_opendir_flags(const fsd *d, fuse_ino_t ino, struct fuse_file_info *fi);

/* The statistics attribute, FSD_STATS_XATTR (fsd_ops.c) */
void fsd_reply_stats(fuse_req_t req, fsd *d, size_t size);

/* Names (fsd_names.c) */
void fsd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fsd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fsd_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void fsd_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void fsd_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fsd_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void fsd_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void fsd_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fsd_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fsd_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
		unsigned int flags);
void fsd_readlink(fuse_req_t req, fuse_ino_t ino);
void fsd_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fsd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fsd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fsd_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fsd_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

/* Data (fsd_data.c) */
void fsd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fsd_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi);
void fsd_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fsd_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off, struct fuse_file_info *fi);
void fsd_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fsd_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fsd_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fsd_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi);
void fsd_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void fsd_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
			 fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags);

/* Attributes (fsd_attr.c) */
void fsd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fsd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *st, int to_set, struct fuse_file_info *fi);
void fsd_access(fuse_req_t req, fuse_ino_t ino, int mask);
void fsd_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags);
void fsd_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void fsd_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fsd_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif
