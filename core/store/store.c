/*
 * store -- superblock and master slots of a store directory (layout in
 * store.h).
 *
 * Invariants (each rule is its first sentence; the lines under it say why)
 *   S1  The superblock is never rewritten after mkfs.
 *       A torn rewrite could lose the one sector that says what the store
 *       is; what changes lives in the master slots instead.
 *   S2  A master slot is written only after the checkpoint it names is
 *       durable in the log, and synced before the log segments it makes
 *       unneeded are recycled.
 *       A crash then always finds a master naming a checkpoint the log
 *       still holds.
 *   S3  Opening never writes.
 *       A bad or newer superblock is reported with the file and the cause,
 *       and the store is left as it was for a newer engine or an expert.
 *   S4  A store's directory, its log directory and everything in them give
 *       group and others no access.
 *       A store's files hold every user's file data in clear, whatever the
 *       modes inside the tree: only the owner reads them, through tpfsd,
 *       which enforces those modes.  io.c I8 makes them so; store_private
 *       finds and, asked to, tightens any that lost it.
 */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "tp.h"
#include "util.h"

#define SB_MAGIC "TPFSSUPR"
#define MS_MAGIC "TPFSMSTR"
#define SECTOR 512

struct store {
	char *dir;
	io_file *f;
	int slot;          /* slot of the current master */
	store_super sb;
	store_master m;
};

void store_path(const char *dir, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static void sb_encode(const store_super *sb, unsigned char *p)
{
	size_t l = strlen(sb->logdir);
	memset(p, 0, SECTOR);
	memcpy(p, SB_MAGIC, 8);
	util_put32(p + 8, sb->version);
	util_put32(p + 12, sb->page_size);
	util_put64(p + 16, sb->seg_size);
	memcpy(p + 24, sb->uuid, 16);
	util_put64(p + 40, sb->created);
	util_put16(p + 48, (uint16_t)l);
	memcpy(p + 50, sb->logdir, l);
	util_put32(p + 508, util_crc32c(0, p, 508));
}

static void ms_encode(const store_master *m, unsigned char *p)
{
	memset(p, 0, SECTOR);
	memcpy(p, MS_MAGIC, 8);
	util_put64(p + 8, m->seq);
	util_put64(p + 16, m->ckpt_lsn);
	util_put64(p + 24, m->log_start);
	util_put64(p + 32, m->data_pages);
	util_put32(p + 508, util_crc32c(0, p, 508));
}

static int ms_decode(const unsigned char *p, store_master *m)
{
	if (memcmp(p, MS_MAGIC, 8) != 0 || util_get32(p + 508) != util_crc32c(0, p, 508))
		return 0;
	m->seq = util_get64(p + 8);
	m->ckpt_lsn = util_get64(p + 16);
	m->log_start = util_get64(p + 24);
	m->data_pages = util_get64(p + 32);
	return 1;
}

int store_create(const char *dir, const store_super *sb, const store_master *m)
{
	char tmp[4096], path[4096];
	unsigned char buf[3 * SECTOR];
	io_file *f;
	int rc;

	store_path(dir, "super.tmp", tmp, sizeof tmp);
	store_path(dir, "super", path, sizeof path);
	sb_encode(sb, buf);
	ms_encode(m, buf + SECTOR);
	memset(buf + 2 * SECTOR, 0, SECTOR);
	if ((rc = io_open(tmp, IO_CREATE, &f)) != 0)
		return util_err(rc, "%s: cannot create: %s", tmp, strerror(rc));
	if ((rc = io_pwrite(f, buf, sizeof buf, 0)) == 0)
		rc = io_sync(f);
	io_close(f);
	if (rc == 0 && (rc = io_rename(tmp, path)) == 0)
		rc = io_sync_dir(dir);
	if (rc)
		return util_err(rc, "%s: cannot write the superblock: %s", path, strerror(rc));
	return 0;
}

int store_open(const char *dir, int readonly, store **out)
{
	char path[4096];
	unsigned char buf[3 * SECTOR];
	size_t got;
	store *st;
	int rc, is_dir;

	if ((rc = io_exists(dir, &is_dir)) != 0)
		return util_err(rc == ENOENT ? TP_EBADSTORE : rc, "%s: %s", dir,
				rc == ENOENT ? "no such store" : strerror(rc));
	if (!is_dir)
		return util_err(TP_EBADSTORE, "%s: not a tpfs store (not a directory)", dir);
	store_path(dir, "super", path, sizeof path);
	if (!(st = calloc(1, sizeof *st)) || !(st->dir = strdup(dir))) {
		free(st);
		return ENOMEM;
	}
	if ((rc = io_open(path, readonly ? IO_RDONLY : 0, &st->f)) != 0) {
		rc = util_err(rc == ENOENT ? TP_EBADSTORE : rc, "%s: %s", path,
			      rc == ENOENT ? "missing: not a tpfs store, or mkfs did not finish" : strerror(rc));
		goto err;
	}
	if ((rc = io_pread(st->f, buf, sizeof buf, 0, &got)) != 0) {
		rc = util_err(rc, "%s: cannot read: %s", path, strerror(rc));
		goto err;
	}
	if (got < sizeof buf) {
		rc = util_err(TP_ECORRUPT, "%s: truncated (%zu of %d bytes)", path, got, 3 * SECTOR);
		goto err;
	}
	if (memcmp(buf, SB_MAGIC, 8) != 0) {
		rc = util_err(TP_EBADSTORE, "%s: not a tpfs superblock (bad magic)", path);
		goto err;
	}
	if (util_get32(buf + 508) != util_crc32c(0, buf, 508)) {
		rc = util_err(TP_ECORRUPT, "%s: superblock checksum mismatch", path);
		goto err;
	}
	st->sb.version = util_get32(buf + 8);
	if (st->sb.version > STORE_VERSION) {
		rc = util_err(TP_EVERSION, "%s: format version %" PRIu32 " is newer than this tpfs supports (%u)", path,
			      st->sb.version, STORE_VERSION);
		goto err;
	}
	st->sb.page_size = util_get32(buf + 12);
	st->sb.seg_size = util_get64(buf + 16);
	memcpy(st->sb.uuid, buf + 24, 16);
	st->sb.created = util_get64(buf + 40);
	size_t l = util_get16(buf + 48);
	if (l > STORE_LOGDIR_MAX || st->sb.page_size < 1024 || st->sb.page_size > 65536 ||
	    (st->sb.page_size & (st->sb.page_size - 1)) || st->sb.seg_size < 65536) {
		rc = util_err(TP_ECORRUPT, "%s: superblock fields out of range", path);
		goto err;
	}
	memcpy(st->sb.logdir, buf + 50, l);
	st->sb.logdir[l] = 0;
	store_master a, b;
	int va = ms_decode(buf + SECTOR, &a), vb = ms_decode(buf + 2 * SECTOR, &b);
	if (!va && !vb) {
		rc = util_err(TP_ECORRUPT, "%s: both checkpoint master slots are damaged", path);
		goto err;
	}
	if (va && (!vb || a.seq >= b.seq)) {
		st->m = a;
		st->slot = 0;
	} else {
		st->m = b;
		st->slot = 1;
	}
	*out = st;
	return 0;
err:
	if (st->f)
		io_close(st->f);
	free(st->dir);
	free(st);
	return rc;
}

void store_close(store *st)
{
	if (!st)
		return;
	io_close(st->f);
	free(st->dir);
	free(st);
}

const store_super *store_sb(const store *st) { return &st->sb; }
const store_master *store_master_get(const store *st) { return &st->m; }

int store_master_put(store *st, uint64_t ckpt_lsn, uint64_t log_start, uint64_t data_pages)
{
	unsigned char buf[SECTOR];
	store_master m = {.seq = st->m.seq + 1, .ckpt_lsn = ckpt_lsn, .log_start = log_start, .data_pages = data_pages};
	int slot = 1 - st->slot, rc;
	ms_encode(&m, buf);
	if ((rc = io_pwrite(st->f, buf, SECTOR, (uint64_t)(1 + slot) * SECTOR)) == 0)
		rc = io_sync(st->f);
	if (rc)
		return util_err(rc, "%s/super: cannot write the checkpoint master: %s", st->dir, strerror(rc));
	st->m = m;
	st->slot = slot;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Privacy (S4)                                                        */

#define STORE_OPEN_BITS 077u /* group and others */

typedef struct priv_walk {
	int tighten;
	store_loose_fn *fn;
	void *arg;
	unsigned count;
} priv_walk;

/* One path: reported (and tightened) if group or others may access it. */
static int priv_one(priv_walk *w, const char *path, unsigned mode)
{
	unsigned want = mode & ~STORE_OPEN_BITS;
	int rc;
	if (!(mode & STORE_OPEN_BITS))
		return 0;
	if (w->tighten && (rc = io_chmod(path, want)) != 0)
		return util_err(rc, "%s: mode %04o: cannot make it private to its owner: %s", path, mode, strerror(rc));
	w->count++;
	if (w->fn)
		w->fn(w->arg, path, mode, want);
	return 0;
}

/* path (a directory, mode given) and everything under it; symbolic links
 * inside are neither followed nor reported (their own mode means nothing). */
static int priv_tree(priv_walk *w, const char *path, unsigned mode, int depth)
{
	DIR *d;
	struct dirent *e;
	char sub[PATH_MAX];
	int rc;
	if ((rc = priv_one(w, path, mode)) != 0)
		return rc;
	if (depth > 16) /* a store is two levels deep; more is not ours to walk */
		return 0;
	if (!(d = opendir(path))) {
		rc = errno;
		return util_err(rc, "%s: cannot list the directory: %s", path, strerror(rc));
	}
	while ((e = readdir(d)) != NULL) {
		unsigned m;
		int is_dir;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= sizeof sub) {
			rc = util_err(ENAMETOOLONG, "%s/%s: path too long", path, e->d_name);
			break;
		}
		if ((rc = io_mode(sub, 0, &m, &is_dir)) == ENOENT) { /* gone meanwhile */
			rc = 0;
			continue;
		}
		if (rc != 0)
			break;
		if (is_dir > 0)
			rc = priv_tree(w, sub, m, depth + 1);
		else if (is_dir == 0)
			rc = priv_one(w, sub, m);
		if (rc != 0)
			break;
	}
	closedir(d);
	return rc;
}

/* A directory at path, its mode (the path followed). */
static int priv_dir(const char *path, const char *what, unsigned *mode)
{
	int is_dir, rc = io_mode(path, 1, mode, &is_dir);
	if (rc == ENOENT)
		return util_err(TP_EBADSTORE, "%s: no such %s", path, what);
	if (rc != 0)
		return rc;
	if (!is_dir)
		return util_err(TP_EBADSTORE, "%s: the %s is not a directory", path, what);
	return 0;
}

int store_private(const char *dir, const char *logdir, int tighten, store_loose_fn *fn, void *arg, unsigned *count)
{
	priv_walk w = {.tighten = tighten, .fn = fn, .arg = arg};
	char log[PATH_MAX], rdir[PATH_MAX], rlog[PATH_MAX];
	store *st = NULL;
	unsigned mode;
	int rc;

	if ((rc = priv_dir(dir, "store", &mode)) != 0)
		goto out;
	/* nothing is touched in a directory that is not a store */
	if ((rc = store_open(dir, 1, &st)) != 0)
		goto out;
	if (!logdir) {
		if (store_sb(st)->logdir[0])
			snprintf(log, sizeof log, "%s", store_sb(st)->logdir);
		else
			store_path(dir, "log", log, sizeof log);
		logdir = log;
	}
	store_close(st);
	if ((rc = priv_tree(&w, dir, mode, 0)) != 0)
		goto out;
	/* The log directory, unless the walk of the store went through it
	 * already: anything whose real path is inside the store's is. */
	if (!realpath(dir, rdir) || !realpath(logdir, rlog)) {
		if (errno == ENOENT) /* no log: the open that follows says so */
			goto out;
		rc = util_err(errno, "%s: %s", logdir, strerror(errno));
		goto out;
	}
	size_t n = strlen(rdir);
	if (strncmp(rlog, rdir, n) == 0 && (rlog[n] == '/' || rlog[n] == 0))
		goto out;
	if ((rc = priv_dir(logdir, "log directory", &mode)) == 0)
		rc = priv_tree(&w, logdir, mode, 0);
out:
	if (count)
		*count = w.count;
	return rc;
}
