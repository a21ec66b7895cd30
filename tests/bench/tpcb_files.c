/*
 * tpcb_files -- TPC-B on plain files: what a program without a database
 * does.
 *
 * Directory dir/files: "account", "teller", "branch" hold the 100-byte
 * records at id * 100; "history" holds 50-byte records at sequence * 50.
 * Each thread opens the four files itself and locks records with
 * open-file-description fcntl locks (F_OFD_SETLKW, per record byte range,
 * so threads of one process exclude each other as processes would), taken
 * in the order account, teller, branch and released after the writes
 * (and syncs) -- no deadlock is possible.  A transaction preads and pwrites
 * each record and pwrites its history record.
 *
 * Modes
 *   fdatasync  then fdatasync each of the 4 touched files, locks held until
 *              they return: each commit is on disk at return, but a crash
 *              between the writes leaves a partial transaction (not atomic)
 *   nosync     no sync: neither durable nor atomic
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchutil.h"
#include "tpcb.h"

enum { F_ACC, F_TEL, F_BR, F_HIST, NFILE };
static const char *const file_name[NFILE] = {"account", "teller", "branch", "history"};

static const tpcb_mode modes[] = {
	{"fdatasync", TPCB_DURABLE, "4 fdatasyncs per commit: durable at return, NOT atomic (a crash may leave part of one)", 0},
	{"nosync", TPCB_NONE, "no sync: neither durable nor atomic", 0},
};

typedef struct fdb {
	char dir[4096];
	int sync;
} fdb;

typedef struct fworker {
	fdb *d;
	int fd[NFILE];
} fworker;

static int fail(const char *what, int err)
{
	fprintf(stderr, "tpcb: files: %s: %s\n", what, strerror(err));
	return err ? err : -1;
}

static int open_file(const char *dir, int k, int flags, int *fd)
{
	char path[4096];
	tpcb_path(path, sizeof path, dir, file_name[k]);
	if ((*fd = open(path, flags, 0644)) < 0)
		return fail(path, errno);
	return 0;
}

static int f_open(const tpcb_cfg *cfg, void **out)
{
	fdb *d = calloc(1, sizeof *d);
	int rc;
	if (!d)
		return ENOMEM;
	tpcb_path(d->dir, sizeof d->dir, cfg->dir, "files");
	tpcb_rmtree(d->dir);
	if (mkdir(d->dir, 0755) != 0) {
		rc = fail(d->dir, errno);
		free(d);
		return rc;
	}
	uint32_t n[3] = {cfg->accounts, cfg->tellers, cfg->branches};
	uint32_t per[3] = {cfg->accounts / cfg->branches, cfg->tellers / cfg->branches, 1};
	static const char *const what[3] = {"accounts", "tellers", "branches"};
	enum { CHUNK = 1000 };
	static unsigned char buf[CHUNK * TPCB_REC];
	for (int k = 0; k < NFILE; k++) {
		int fd;
		if ((rc = open_file(d->dir, k, O_CREAT | O_RDWR | O_TRUNC, &fd)) != 0) {
			free(d);
			return rc;
		}
		for (uint32_t i = 0; k < F_HIST && i < n[k]; i += CHUNK) {
			uint32_t m = n[k] - i < CHUNK ? n[k] - i : CHUNK;
			if (i % 10000 == 0)
				tpcb_progress("files", what[k], i, n[k]);
			for (uint32_t j = 0; j < m; j++) {
				tpcb_rec r;
				tpcb_rec_init(&r, i + j, (i + j) / per[k]);
				memcpy(buf + (size_t)j * TPCB_REC, &r, TPCB_REC);
			}
			if (pwrite(fd, buf, (size_t)m * TPCB_REC, (off_t)i * TPCB_REC) != (ssize_t)m * TPCB_REC) {
				rc = fail("load", errno);
				close(fd);
				free(d);
				return rc;
			}
		}
		if (k < F_HIST)
			tpcb_progress("files", what[k], n[k], n[k]);
		if (fsync(fd) != 0) {
			rc = fail("fsync", errno);
			close(fd);
			free(d);
			return rc;
		}
		close(fd);
	}
	*out = d;
	return 0;
}

static int f_set_mode(void *h, int mode)
{
	((fdb *)h)->sync = mode == 0;
	return 0;
}

static void f_worker_close(void *h)
{
	fworker *w = h;
	for (int k = 0; k < NFILE; k++)
		if (w->fd[k] >= 0)
			close(w->fd[k]);
	free(w);
}

static int f_worker_open(void *h, void **out)
{
	fworker *w = calloc(1, sizeof *w);
	int rc;
	if (!w)
		return ENOMEM;
	w->d = h;
	for (int k = 0; k < NFILE; k++)
		w->fd[k] = -1;
	for (int k = 0; k < NFILE; k++)
		if ((rc = open_file(w->d->dir, k, O_RDWR, &w->fd[k])) != 0) {
			f_worker_close(w);
			return rc;
		}
	*out = w;
	return 0;
}

static int lock(int fd, uint64_t id, short type)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)(id * TPCB_REC), .l_len = TPCB_REC};
	while (fcntl(fd, F_OFD_SETLKW, &fl) != 0)
		if (errno != EINTR)
			return fail("fcntl lock", errno);
	return 0;
}

static int update(int fd, uint64_t id, int64_t delta)
{
	tpcb_rec r;
	int rc;
	if ((rc = lock(fd, id, F_WRLCK)) != 0)
		return rc;
	if (pread(fd, &r, TPCB_REC, (off_t)(id * TPCB_REC)) != TPCB_REC)
		return fail("pread", errno ? errno : EIO);
	r.balance += delta;
	if (pwrite(fd, &r, TPCB_REC, (off_t)(id * TPCB_REC)) != TPCB_REC)
		return fail("pwrite", errno ? errno : EIO);
	return 0;
}

static int f_txn(void *h, const tpcb_args *a, uint64_t *retries)
{
	fworker *w = h;
	tpcb_hist hist;
	int rc;
	(void)retries;
	if ((rc = update(w->fd[F_ACC], a->account, a->delta)) != 0 || (rc = update(w->fd[F_TEL], a->teller, a->delta)) != 0 ||
	    (rc = update(w->fd[F_BR], a->branch, a->delta)) != 0)
		return rc;
	tpcb_hist_init(&hist, a);
	if (pwrite(w->fd[F_HIST], hist.b, TPCB_HIST, (off_t)(a->hseq * TPCB_HIST)) != TPCB_HIST)
		return fail("pwrite", errno ? errno : EIO);
	if (w->d->sync)
		for (int k = 0; k < NFILE; k++)
			if (fdatasync(w->fd[k]) != 0)
				return fail("fdatasync", errno);
	if ((rc = lock(w->fd[F_ACC], a->account, F_UNLCK)) != 0 || (rc = lock(w->fd[F_TEL], a->teller, F_UNLCK)) != 0 ||
	    (rc = lock(w->fd[F_BR], a->branch, F_UNLCK)) != 0)
		return rc;
	return 0;
}

static int sum_file(const char *dir, int k, int64_t *sum, uint64_t *n)
{
	size_t rl = k == F_HIST ? TPCB_HIST : TPCB_REC;
	unsigned char buf[TPCB_REC * 100];
	ssize_t got;
	off_t off = 0;
	int fd, rc;
	*sum = 0;
	*n = 0;
	if ((rc = open_file(dir, k, O_RDONLY, &fd)) != 0)
		return rc;
	while ((got = pread(fd, buf, rl * 100, off)) > 0) {
		for (size_t i = 0; i + rl <= (size_t)got; i += rl) {
			if (k == F_HIST) {
				int64_t dl = tpcb_hist_delta(buf + i);
				*sum += dl;
				*n += buf[i + 40] == 'h'; /* written slots (slot 0 is never used) */
			} else {
				tpcb_rec r;
				memcpy(&r, buf + i, TPCB_REC);
				*sum += r.balance;
				(*n)++;
			}
		}
		off += got;
	}
	rc = got < 0 ? fail("read", errno) : 0;
	close(fd);
	return rc;
}

static int f_sums(void *h, tpcb_sums *s)
{
	fdb *d = h;
	uint64_t n;
	int rc;
	if ((rc = sum_file(d->dir, F_ACC, &s->accounts, &n)) != 0 || (rc = sum_file(d->dir, F_TEL, &s->tellers, &n)) != 0 ||
	    (rc = sum_file(d->dir, F_BR, &s->branches, &n)) != 0 ||
	    (rc = sum_file(d->dir, F_HIST, &s->history, &s->history_n)) != 0)
		return rc;
	return 0;
}

static void f_close(void *h) { free(h); }

const tpcb_system tpcb_files = {
	.name = "files",
	.modes = modes,
	.nmodes = 2,
	.notes = "pread/pwrite of 100-byte records, per-record OFD fcntl locks, history appended",
	.open = f_open,
	.set_mode = f_set_mode,
	.worker_open = f_worker_open,
	.txn = f_txn,
	.worker_close = f_worker_close,
	.sums = f_sums,
	.close = f_close,
	.bulk = NULL,
};
