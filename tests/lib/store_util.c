/*
 * store_util -- test helpers (see store_util.h).
 */
#include "store_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

/* ---- directories and paths ---- */

int su_tmpdir(char *out, size_t n, const char *tag)
{
	if ((size_t)snprintf(out, n, "/tmp/tpfs-%s-XXXXXX", tag) >= n)
		return ENAMETOOLONG;
	return mkdtemp(out) ? 0 : errno;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	(void)remove(path);
	return 0;
}

void su_rmtree(const char *path)
{
	if (path && path[0])
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *su_path(char *out, size_t n, const char *dir, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
	return out;
}

int su_logdir(const char *store_dir, char *out, size_t n)
{
	store *st;
	int rc = store_open(store_dir, 1, &st);
	if (rc)
		return rc;
	const store_super *sb = store_sb(st);
	if (sb->logdir[0])
		snprintf(out, n, "%s", sb->logdir);
	else
		snprintf(out, n, "%s/log", store_dir);
	store_close(st);
	return 0;
}

int su_segpath(const char *store_dir, uint64_t idx, char *out, size_t n)
{
	char d[PATH_MAX];
	int rc = su_logdir(store_dir, d, sizeof d);
	if (rc)
		return rc;
	snprintf(out, n, "%s/log.%016" PRIx64, d, idx);
	return 0;
}

/* ---- raw files ---- */

int su_raw_mark(const char *logdir, uint64_t lsn)
{
	char p[PATH_MAX];
	unsigned char h[512];
	size_t got;
	int rc;
	su_path(p, sizeof p, logdir, "durable");
	if ((rc = su_raw_read(p, 0, h, sizeof h, &got)) != 0)
		return rc;
	if (got != sizeof h)
		return EINVAL;
	util_put64(h + 16, lsn);
	util_put32(h + 508, util_crc32c(0, h, 508));
	return su_raw_write(p, 0, h, sizeof h);
}

int su_raw_read(const char *path, uint64_t off, void *buf, size_t len, size_t *got)
{
	int fd = open(path, O_RDONLY);
	size_t done = 0;
	if (fd < 0)
		return errno;
	while (done < len) {
		ssize_t k = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (k < 0) {
			int e = errno;
			close(fd);
			return e;
		}
		if (k == 0)
			break;
		done += (size_t)k;
	}
	close(fd);
	memset((char *)buf + done, 0, len - done);
	if (got)
		*got = done;
	return 0;
}

int su_raw_write(const char *path, uint64_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);
	size_t done = 0;
	if (fd < 0)
		return errno;
	while (done < len) {
		ssize_t k = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
		if (k <= 0) {
			int e = k < 0 ? errno : EIO;
			close(fd);
			return e;
		}
		done += (size_t)k;
	}
	close(fd);
	return 0;
}

int su_raw_truncate(const char *path, uint64_t size) { return truncate(path, (off_t)size) ? errno : 0; }

int64_t su_raw_size(const char *path)
{
	struct stat st;
	return stat(path, &st) ? -1 : (int64_t)st.st_size;
}

int su_raw_flip(const char *path, uint64_t off, unsigned char x)
{
	unsigned char b;
	int rc = su_raw_read(path, off, &b, 1, NULL);
	if (rc)
		return rc;
	b ^= x;
	return su_raw_write(path, off, &b, 1);
}

/* ---- fingerprints ---- */

typedef struct su_entry {
	char *path; /* relative to the root */
	int is_dir;
	int64_t size;
	uint64_t fnv;
	uint32_t crc;
} su_entry;

struct su_tree {
	su_entry *e;
	size_t n, cap;
	int err;
};

/* nftw has no context argument: one walk at a time */
static su_tree *walk_tree;
static size_t walk_root_len;

static int fp_file(const char *path, su_entry *e)
{
	int fd = open(path, O_RDONLY);
	unsigned char buf[65536];
	uint64_t h = 0xcbf29ce484222325ull;
	uint32_t c = 0;
	ssize_t k;
	if (fd < 0)
		return errno;
	while ((k = read(fd, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < k; i++)
			h = (h ^ buf[i]) * 0x100000001b3ull;
		c = util_crc32c(c, buf, (size_t)k);
	}
	int e2 = k < 0 ? errno : 0;
	close(fd);
	e->fnv = h;
	e->crc = c;
	return e2;
}

static int fp_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	su_tree *t = walk_tree;
	(void)ftw;
	if (t->n == t->cap) {
		size_t nc = t->cap ? 2 * t->cap : 32;
		su_entry *ne = realloc(t->e, nc * sizeof *ne);
		if (!ne) {
			t->err = ENOMEM;
			return 1;
		}
		t->e = ne;
		t->cap = nc;
	}
	su_entry *e = &t->e[t->n];
	memset(e, 0, sizeof *e);
	e->path = strdup(path + walk_root_len);
	if (!e->path) {
		t->err = ENOMEM;
		return 1;
	}
	t->n++;
	if (flag == FTW_D || flag == FTW_DP) {
		e->is_dir = 1;
		return 0;
	}
	e->size = (int64_t)st->st_size;
	if (S_ISREG(st->st_mode) && (t->err = fp_file(path, e)) != 0)
		return 1;
	return 0;
}

static int entry_cmp(const void *x, const void *y)
{
	return strcmp(((const su_entry *)x)->path, ((const su_entry *)y)->path);
}

su_tree *su_tree_take(const char *dir)
{
	su_tree *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	walk_tree = t;
	walk_root_len = strlen(dir);
	if (nftw(dir, fp_one, 16, FTW_PHYS) != 0 && !t->err)
		t->err = errno ? errno : EIO;
	walk_tree = NULL;
	if (t->err) {
		su_tree_free(t);
		return NULL;
	}
	qsort(t->e, t->n, sizeof *t->e, entry_cmp);
	return t;
}

int su_tree_equal(const su_tree *a, const su_tree *b, char *why, size_t n)
{
	size_t i = 0, j = 0;
	while (i < a->n || j < b->n) {
		int c = i == a->n ? 1 : j == b->n ? -1 : strcmp(a->e[i].path, b->e[j].path);
		if (c < 0) {
			snprintf(why, n, "'%s' disappeared", a->e[i].path);
			return 0;
		}
		if (c > 0) {
			snprintf(why, n, "'%s' appeared", b->e[j].path);
			return 0;
		}
		const su_entry *x = &a->e[i], *y = &b->e[j];
		if (x->is_dir != y->is_dir || x->size != y->size) {
			snprintf(why, n, "'%s' changed size (%" PRId64 " -> %" PRId64 ")", x->path, x->size, y->size);
			return 0;
		}
		if (x->fnv != y->fnv || x->crc != y->crc) {
			snprintf(why, n, "'%s' changed content", x->path);
			return 0;
		}
		i++;
		j++;
	}
	if (n)
		why[0] = 0;
	return 1;
}

void su_tree_free(su_tree *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->e[i].path);
	free(t->e);
	free(t);
}

/* ---- stores through tp.h ---- */

void su_options(tp_options *o, uint32_t page_size, uint64_t seg_size, size_t cache_pages)
{
	tp_options_init(o);
	o->quiet = 1;
	if (page_size)
		o->page_size = page_size;
	if (seg_size)
		o->seg_size = seg_size;
	if (cache_pages)
		o->cache_pages = cache_pages;
}

int su_snap_take(tp_env *env, uint64_t npages, su_snap *s)
{
	int rc;
	memset(s, 0, sizeof *s);
	s->npages = npages;
	s->body = tp_page_body(env);
	s->alloc = calloc(npages, 1);
	s->data = calloc(npages, s->body);
	if (!s->alloc || !s->data) {
		su_snap_free(s);
		return ENOMEM;
	}
	for (uint64_t p = 0; p < npages; p++) {
		int a;
		if ((rc = tp_page_allocated(env, p, &a)) != 0)
			goto err;
		s->alloc[p] = (unsigned char)a;
		if (a && (rc = tp_page_read(env, p, 0, s->data + p * s->body, s->body)) != 0)
			goto err;
	}
	return 0;
err:
	su_snap_free(s);
	return rc;
}

int su_snap_equal(const su_snap *a, const su_snap *b, char *why, size_t n)
{
	if (a->npages != b->npages || a->body != b->body) {
		snprintf(why, n, "snapshots of different shapes");
		return 0;
	}
	for (uint64_t p = 0; p < a->npages; p++) {
		if (a->alloc[p] != b->alloc[p]) {
			snprintf(why, n, "page %" PRIu64 ": allocated %d, expected %d", p, b->alloc[p], a->alloc[p]);
			return 0;
		}
		if (!a->alloc[p])
			continue;
		const unsigned char *x = a->data + p * a->body, *y = b->data + p * b->body;
		for (uint32_t i = 0; i < a->body; i++)
			if (x[i] != y[i]) {
				snprintf(why, n, "page %" PRIu64 " body byte %" PRIu32 ": 0x%02x, expected 0x%02x", p, i,
					 y[i], x[i]);
				return 0;
			}
	}
	if (n)
		why[0] = 0;
	return 1;
}

void su_snap_free(su_snap *s)
{
	free(s->alloc);
	free(s->data);
	s->alloc = s->data = NULL;
}

/* ---- the engine by hand ---- */

int su_engine_open(const char *store_dir, size_t frames, su_engine *e)
{
	char logdir[PATH_MAX], data[PATH_MAX];
	log_config lc = {0};
	int rc;

	memset(e, 0, sizeof *e);
	if ((rc = store_open(store_dir, 0, &e->st)) != 0)
		return rc;
	const store_super *sb = store_sb(e->st);
	const store_master *m = store_master_get(e->st);
	if (sb->logdir[0])
		snprintf(logdir, sizeof logdir, "%s", sb->logdir);
	else
		snprintf(logdir, sizeof logdir, "%s/log", store_dir);
	lc.dir = logdir;
	lc.seg_size = sb->seg_size;
	memcpy(lc.uuid, sb->uuid, 16);
	lc.quiet = 1;
	if ((rc = log_open(&lc, m->log_start, &e->lg)) != 0)
		goto err;
	su_path(data, sizeof data, store_dir, "data");
	if ((rc = io_open(data, 0, &e->data)) != 0)
		goto err;
	if ((rc = buf_open(e->data, e->lg, sb->page_size, frames, 0, &e->bp)) != 0)
		goto err;
	if ((rc = rec_recover(e->lg, e->bp, m->ckpt_lsn, 0, &e->tm, &e->rec)) != 0)
		goto err;
	return 0;
err:
	su_engine_crash(e);
	return rc;
}

int su_engine_checkpoint(su_engine *e)
{
	uint64_t lsn, start;
	return rec_checkpoint(e->lg, e->bp, e->tm, e->st, &lsn, &start);
}

static void engine_free(su_engine *e)
{
	txn_mgr_close(e->tm);
	buf_close(e->bp);
	if (e->data)
		io_close(e->data);
	log_close(e->lg);
	store_close(e->st);
	memset(e, 0, sizeof *e);
}

int su_engine_close(su_engine *e)
{
	int rc = su_engine_checkpoint(e);
	engine_free(e);
	return rc;
}

void su_engine_crash(su_engine *e)
{
	if (e->lg)
		log_panic(e->lg, TP_EPANIC, NULL);
	engine_free(e);
}

int su_log_open_ro(const char *store_dir, store **stp, log_mgr **lgp)
{
	char logdir[PATH_MAX];
	log_config lc = {0};
	store *st;
	int rc;

	if ((rc = store_open(store_dir, 1, &st)) != 0)
		return rc;
	const store_super *sb = store_sb(st);
	if (sb->logdir[0])
		snprintf(logdir, sizeof logdir, "%s", sb->logdir);
	else
		snprintf(logdir, sizeof logdir, "%s/log", store_dir);
	lc.dir = logdir;
	lc.seg_size = sb->seg_size;
	memcpy(lc.uuid, sb->uuid, 16);
	lc.readonly = 1;
	lc.quiet = 1;
	if ((rc = log_open(&lc, store_master_get(st)->log_start, lgp)) != 0) {
		store_close(st);
		return rc;
	}
	*stp = st;
	return 0;
}

int su_log_count(const char *store_dir, uint64_t *n)
{
	store *st;
	log_mgr *lg;
	log_scan *s;
	log_rec r;
	int rc;

	*n = 0;
	if ((rc = su_log_open_ro(store_dir, &st, &lg)) != 0)
		return rc;
	if ((rc = log_scan_open(lg, log_start(lg), &s)) == 0) {
		while ((rc = log_scan_next(s, &r)) == 0)
			(*n)++;
		log_scan_close(s);
		if (rc == TP_ENOTFOUND)
			rc = 0;
	}
	log_close(lg);
	store_close(st);
	return rc;
}

/* ---- children ---- */

_Noreturn void su_child_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "child check failed %s:%d: %s (%s)\n", file, line, what, util_errmsg());
	_exit(SU_CHILD_FAIL);
}

int su_run_child(void (*fn)(void *arg), void *arg)
{
	int st;
	pid_t pid, r;

	fflush(NULL);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	do
		r = waitpid(pid, &st, 0);
	while (r < 0 && errno == EINTR);
	if (r != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
