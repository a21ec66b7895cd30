/*
 * fsd_ops -- tpfsd's FUSE low-level handlers: decode the request, call the
 * fs layer (fs.h), map the error, reply.  Grouped by kind: names (entries
 * and directories, fsd_names.c), data (open files, fsd_data.c), attributes
 * (fsd_attr.c), and here control (init, statfs, the statistics attribute),
 * the helpers they all use (fsd_int.h), what the kernel may cache, and the
 * operation table.
 *
 * Rules every handler keeps:
 * H1  One fs_* call per request (open with O_TRUNC, create and
 *     copy_file_range make more), and exactly one reply (fuse_reply_none for
 *     forgets).
 * H2  A reply that hands the kernel a lookup reference (lookup, mknod,
 *     mkdir, symlink, link, create, every readdirplus entry but "." and
 *     "..") has its reference taken before it is sent -- by the fs call
 *     itself, inside its transaction, for all but readdirplus entries (fs.h),
 *     and with fs_ref for those -- so that a forget racing right behind the
 *     reply finds it; when the reply cannot be delivered (the request was
 *     interrupted) the reference is taken back with fs_forget.
 * H3  open and create count an open file (fs_opened) that release ends
 *     (fs_released); a reply that cannot be delivered ends it at once.
 * H4  What a reply lets the kernel cache, and for how long, is decided in
 *     one place: entry_timeout, attr_timeout, open_flags, opendir_flags
 *     (and fsd_init for the connection).  These are safe for plain POSIX
 *     use, where every change passes through this kernel, which updates or
 *     drops its own caches as it sends each change (and one daemon serves a
 *     store: tpfsd.c, lock_store).  While user transactions are open they
 *     are zero / off (fsd_txbind.c C1, C2), and commit and abort
 *     invalidate what changed (C4).
 * H5  An fs result reaches the kernel as an errno through fsd_reply_err only.
 *
 * Round trips saved (each ~24 us), counted per kind (fsd_ops.h):
 * readdirplus always (no lookup per entry after a listing); entry,
 * attribute and negative-entry caching (H4); cached symlink targets; O_TRUNC inside open; no flush request at close
 * (noflush); 1 MiB writes, and 1 MiB reads with the read-ahead raised
 * (tpfsd.c); the page cache kept across opens and after writes (no
 * AUTO_INVAL_DATA); copy_file_range in 16 MiB requests instead of 64 KiB
 * spliced writes; EOPNOTSUPP for ACL and SELinux attribute names, which ls
 * and friends remember; default_permissions (no access requests).
 * Measured (ls -l of 100 files: 8 requests, was 204; reading 64 MiB: 69,
 * was 517; cp of 64 MiB: 21, was 2,063).  What remains per call is the
 * kernel's: a create is lookup, create, getxattr, write, getattr of the
 * directory, release.  The getxattr("security.capability") comes once per
 * inode: the INIT reply asks for HANDLE_KILLPRIV_V2 behind libfuse's back
 * (fsd_io.c), after which the kernel stops asking before every write(2)
 * (33 writes to one file: 66 requests, now 34).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <time.h>

#include "fsd_int.h"

const char *const fsd_op_names[FSD_OP_COUNT] = {
#define FSD_OP_NAME(id, name) [FSD_OP_##id] = name,
	FSD_OPS(FSD_OP_NAME)
#undef FSD_OP_NAME
};

/* ---------------------------------------------------------------------- */
/* Decoding and replying                                                  */

/* Every handler starts here: the request is counted by kind. */
fsd *fsd_begin(fuse_req_t req, int op)
{
	fsd *d = fuse_req_userdata(req);
	fs_count(d->fs, FSD_OP_REQUESTS);
	fs_count(d->fs, op);
	return d;
}

/* The kernel lets names of up to 1024 bytes through; POSIX wants 255. */
int fsd_name_ok(const char *name)
{
	return strlen(name) <= FS_NAME_MAX;
}

/* H5: the one place where an fs result becomes the errno the kernel gets.
 * fs_* return 0 or a negative errno; anything else is a bug reported as EIO. */
void fsd_reply_err(fuse_req_t req, fsd *d, int rc)
{
	int e = rc < 0 ? -rc : rc;
	if (e >= 4096) {
		fsd_log(LOG_ERR, "fs layer returned %d, not an errno: answering EIO", rc);
		e = EIO;
	}
	if (e)
		fs_count(d->fs, e == ENOENT || e == ENODATA ? FSD_OP_NOT_FOUND : FSD_OP_ERRORS);
	fuse_reply_err(req, e);
}

void fsd_to_stat(const fs_attr *a, struct stat *st)
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

/* C1 (fsd_txbind.c): a transaction is open, or was less than TX_LINGER_NS
 * ago (so that a begin right after a commit need not wait out names cached
 * in between: C6). */
#define TX_LINGER_NS 5000000000ull

static int tx_mode(const fsd *d)
{
	uint64_t *seen = (uint64_t *)&d->tx_seen; /* a relaxed atomic */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (fs_tx_count(d->fs)) {
		if (now > __atomic_load_n(seen, __ATOMIC_RELAXED))
			__atomic_store_n(seen, now, __ATOMIC_RELAXED);
		return 1;
	}
	uint64_t last = __atomic_load_n(seen, __ATOMIC_RELAXED);
	return last && now < last + TX_LINGER_NS;
}

/* H4: how long the kernel may keep a name and attributes. */
static double entry_timeout(const fsd *d, const fs_attr *a)
{
	(void)a; /* C1: nothing cached while transactions are about */
	return tx_mode(d) ? 0 : d->entry_timeout;
}

static double attr_timeout(const fsd *d, const fs_attr *a)
{
	if (a->ino == FS_ROOT_INO && !fs_root_private(d->fs)) /* C7 */
		return d->attr_timeout;
	return tx_mode(d) ? 0 : d->attr_timeout; /* C1 */
}

double fsd_negative_timeout(const fsd *d) { return tx_mode(d) ? 0 : d->negative_timeout; }

/* H4: what the kernel may cache of an open file.  keep_cache: the page cache
 * survives the open (every write went through it: fsd_init); noflush: no
 * FLUSH request at each close(), since flush has nothing to do (writes are
 * not buffered). */
void fsd_open_flags(const fsd *d, const fs_caller *c, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)d, (void)ino;
	fi->keep_cache = !c->tx;
	fi->noflush = 1;
	fi->direct_io = c->tx != NULL; /* C2 */
}

/* H4: no readdir cache.  The kernel drops a directory's cached listing when
 * it changes the directory's entries or sees its mtime move, but not when
 * the directory itself is moved: its cached ".." would keep naming the old
 * parent (tests/fs: sequence dotdot_after_rename).  Keeping it would need
 * an invalidation (fuse_lowlevel_notify_inval_inode) of every directory a
 * rename moves, before the reply; it would save the one or two readdirplus
 * requests of a repeated listing. */
void fsd_opendir_flags(const fsd *d, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)d, (void)ino;
	fi->cache_readdir = 0;
	fi->keep_cache = 0;
}

void fsd_to_entry(fsd *d, const fs_caller *c, uint64_t parent, const char *name, const fs_attr *a,
		  struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = fsd_nodeid(d, c, a->ino, a->mode); /* C5, C9 */
	if (e->ino != a->ino)
		fs_tx_mark_aliased(c->tx);
	e->generation = 0; /* inode numbers are never reused (fs.h) */
	fsd_to_stat(a, &e->attr);
	e->entry_timeout = entry_timeout(d, a);
	e->attr_timeout = attr_timeout(d, a);
	if (e->entry_timeout > 0) { /* C6: how long the kernel may resolve this name without asking */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t until = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
				 (uint64_t)(e->entry_timeout * 1e9);
		if (until > __atomic_load_n(&d->cached_until, __ATOMIC_RELAXED))
			__atomic_store_n(&d->cached_until, until, __ATOMIC_RELAXED);
		fsd_name_cached(d, parent, name);
	}
}

/* H2: a reply with a new lookup reference. */
void fsd_reply_entry(fuse_req_t req, fsd *d, const fs_caller *c, uint64_t parent, const char *name, int rc,
		     const fs_attr *a)
{
	struct fuse_entry_param e;
	if (rc) {
		fsd_reply_err(req, d, rc);
		return;
	}
	fsd_to_entry(d, c, parent, name, a, &e);
	/* the fs call took the reference (fs.h, Names) */
	if (fuse_reply_entry(req, &e) != 0)
		fs_forget(d->fs, a->ino, 1);
}

void fsd_reply_attr(fuse_req_t req, fsd *d, int rc, const fs_attr *a)
{
	struct stat st;
	if (rc) {
		fsd_reply_err(req, d, rc);
		return;
	}
	fsd_to_stat(a, &st);
	fuse_reply_attr(req, &st, attr_timeout(d, a));
}

/* ---------------------------------------------------------------------- */
/* Control                                                                */

static void fsd_statfs(fuse_req_t req, fuse_ino_t ino)
{
	fsd *d = fsd_begin(req, FSD_OP_STATFS);
	struct statvfs sv;
	fs_statfs s;
	int rc = fs_stat_fs(d->fs, &s);
	if (rc) {
		fsd_reply_err(req, d, rc);
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
void fsd_reply_stats(fuse_req_t req, fsd *d, size_t size)
{
	char *buf = malloc(STATS_MAX);
	fs_counters cn;
	size_t len = 0;
	int rc;
	if (!buf) {
		fsd_reply_err(req, d, -ENOMEM);
		return;
	}
	buf[0] = 0;
	if ((rc = fs_report(d->fs, buf, STATS_MAX - 4096)) < 0)
		snprintf(buf, STATS_MAX, "fs_report: %s\n", strerror(-rc));
	len = strnlen(buf, STATS_MAX - 4096);
	len += (size_t)snprintf(buf + len, STATS_MAX - len, "daemon messages: %s%s\n",
				fsd_log_file() ? fsd_log_file() : "standard error or syslog only",
				fsd_log_file() ? " (the last 1-2 MiB; and standard error or syslog)" : "");
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
		fsd_reply_err(req, d, -ERANGE);
	else
		fuse_reply_buf(req, buf, len);
	free(buf);
}

/*
 * What the daemon asks of the kernel.  On: readdirplus for every readdir
 * (READDIRPLUS_AUTO off), O_TRUNC inside open, asynchronous reads, cached
 * symlink targets, parallel lookups and readdirs in one directory.  Off:
 * the writeback cache (writes would sit in the shared page cache, out of
 * any transaction's reach: fsd_txbind.c C2), NFS export, remote locks (the
 * kernel keeps POSIX and flock locks locally), ACLs.  HANDLE_KILLPRIV (v1)
 * off; its v2, which libfuse 3.14 cannot name, is asked for by fsd_io.c:
 * then the daemon clears set-user-ID and set-group-ID bits when a file is
 * written, truncated or chowned (fs_data.c D6, fsd_attr.c).  Splice
 * for writes only on request (-o splice_read): the data is copied into the
 * engine's pages anyway, and splicing costs every request a second system
 * call; replies come from memory, where splicing saves nothing.
 * AUTO_INVAL_DATA off: it drops a file's page cache whenever the kernel sees
 * its mtime move, which after our own writes (write-through, so the cache
 * already holds what was written) means reading back everything just
 * written: 64 read requests after a 64 MiB write.  Every change of file data
 * passes through this kernel (writes, truncates, fallocate and
 * copy_file_range, whose ranges the kernel drops itself); commit and abort
 * of a user transaction invalidate explicitly (fsd_txbind.c C4).
 * Then the user's -o max_write=, splice_read, auto_inval_data, ...
 * (fuse_parse_conn_info_opts).
 */
static void fsd_init(void *userdata, struct fuse_conn_info *conn)
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
	.init = fsd_init,
	/* names */
	.lookup = fsd_lookup,
	.forget = fsd_forget,
	.forget_multi = fsd_forget_multi,
	.mknod = fsd_mknod,
	.mkdir = fsd_mkdir,
	.symlink = fsd_symlink,
	.link = fsd_link,
	.unlink = fsd_unlink,
	.rmdir = fsd_rmdir,
	.rename = fsd_rename,
	.readlink = fsd_readlink,
	.opendir = fsd_opendir,
	.readdir = fsd_readdir,
	.readdirplus = fsd_readdirplus,
	.releasedir = fsd_releasedir,
	.fsyncdir = fsd_fsyncdir,
	/* data */
	.open = fsd_open,
	.create = fsd_create,
	.read = fsd_read,
	.write_buf = fsd_write_buf,
	.flush = fsd_flush,
	.release = fsd_release,
	.fsync = fsd_fsync,
	.fallocate = fsd_fallocate,
	.lseek = fsd_lseek,
	.copy_file_range = fsd_copy_file_range,
	/* attributes */
	.getattr = fsd_getattr,
	.setattr = fsd_setattr,
	.access = fsd_access,
	.setxattr = fsd_setxattr,
	.getxattr = fsd_getxattr,
	.listxattr = fsd_listxattr,
	.removexattr = fsd_removexattr,
	/* control */
	.statfs = fsd_statfs,
};
