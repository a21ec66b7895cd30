/*
 * store -- superblock and master slots of a store directory (layout in
 * store.h).
 *
 * Invariants
 *   S1  The superblock is never rewritten after mkfs.
 *   S2  A master slot is written only after the checkpoint it names is
 *       durable in the log; the slot is synced before log segments that it
 *       makes unneeded are recycled.
 *   S3  Opening never writes: a bad or newer superblock is reported with
 *       the file and the cause, and the store is left as it was.
 */
#include "store.h"

#include <errno.h>
#include <inttypes.h>
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
