/*
 * fsc_model -- see fsc_model.h.
 *
 * The check (fsc_verify) replays the oracle's operations on a copy of the
 * model the round started from and keeps, for every object, the list of
 * states it went through: (t, signature), t being the number of operations
 * applied.  After a crash the recovered tree must show:
 *   FM1 every object in a state it had at some t in [s, n], where s is the
 *       last state a sync acknowledged and n counts every operation begun
 *       (the last may have been in flight when the daemon died): what was
 *       fsync'd is there exactly unless changed later, a rename is done or
 *       not (the file under exactly one of its two names), a create is
 *       there with its name or not at all, and so on;
 *   FM2 one t in [s, n] explaining every object at once: each call is one
 *       engine transaction, committed in call order into one log that is
 *       durable as a prefix, so the recovered tree is the state after some
 *       prefix of the calls;
 *   FM3 nothing else: no name the workload did not make, no file that is
 *       not one of its objects, link counts that match the names.
 */
#include "fsc_model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define FUSE_SUPER_MAGIC 0x65735546
#define MAX_DEPTH 4

/* ---------------------------------------------------------------------- */
/* Random numbers and hashes                                              */

uint64_t fsc_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t fsc_rand(fsc_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ULL;
	return fsc_mix(r->s);
}

uint64_t fsc_below(fsc_rng *r, uint64_t n) { return n ? fsc_rand(r) % n : 0; }

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}
#define FNV0 0xcbf29ce484222325ULL

/* File contents: a word at a time (the check hashes every version). */
static uint64_t data_hash(const uint8_t *p, size_t n)
{
	uint64_t h = FNV0 ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	return fnv(h, p + i, n - i);
}

uint8_t fsc_byte(uint64_t seed, uint64_t x) { return (uint8_t)(fsc_mix(seed ^ ((x >> 3) * 0x9e3779b97f4a7c15ULL)) >> ((x & 7) * 8)); }

void fsc_header(uint32_t id, char out[FSC_HDR + 1]) { snprintf(out, FSC_HDR + 1, "TPFSOBJ %07u\n", (unsigned)(id % 10000000u)); }

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q) {
		fprintf(stderr, "fsc: out of memory\n");
		abort();
	}
	return q;
}

/* out = a + b + c, cut to FSC_PATH - 1 bytes (paths stay far shorter). */
static void pcat(char *out, const char *a, const char *b, const char *c)
{
	const char *parts[3] = {a, b, c};
	size_t n = 0;
	for (int i = 0; i < 3; i++)
		for (const char *p = parts[i]; *p && n < FSC_PATH - 1; p++)
			out[n++] = *p;
	out[n] = 0;
}

/* ---------------------------------------------------------------------- */
/* The model                                                              */

void fsc_model_init(fsc_model *m) { memset(m, 0, sizeof *m); }

void fsc_model_free(fsc_model *m)
{
	for (uint32_t i = 0; i < m->no; i++)
		free(m->o[i].data);
	free(m->o);
	free(m->e);
	memset(m, 0, sizeof *m);
}

void fsc_model_copy(fsc_model *dst, const fsc_model *src)
{
	fsc_model_init(dst);
	dst->no = src->no;
	dst->o = xrealloc(NULL, src->no * sizeof *dst->o);
	for (uint32_t i = 0; i < src->no; i++) {
		dst->o[i] = src->o[i];
		dst->o[i].data = NULL;
		dst->o[i].cap = src->o[i].size;
		if (src->o[i].size) {
			dst->o[i].data = xrealloc(NULL, src->o[i].size);
			memcpy(dst->o[i].data, src->o[i].data, src->o[i].size);
		}
	}
	dst->ne = dst->ce = src->ne;
	dst->e = xrealloc(NULL, src->ne * sizeof *dst->e);
	if (src->ne)
		memcpy(dst->e, src->e, src->ne * sizeof *dst->e);
}

fsc_obj *fsc_obj_get(fsc_model *m, uint32_t id)
{
	if (id >= m->no) {
		uint32_t nn = m->no ? m->no : 64;
		while (nn <= id)
			nn *= 2;
		m->o = xrealloc(m->o, nn * sizeof *m->o);
		memset(m->o + m->no, 0, (nn - m->no) * sizeof *m->o);
		m->no = nn;
	}
	return &m->o[id];
}

long fsc_find(const fsc_model *m, const char *path)
{
	for (size_t i = 0; i < m->ne; i++)
		if (!strcmp(m->e[i].path, path))
			return (long)i;
	return -1;
}

static void obj_resize(fsc_obj *o, size_t size)
{
	if (size > o->cap) {
		size_t nc = o->cap ? o->cap : 4096;
		while (nc < size)
			nc *= 2;
		o->data = xrealloc(o->data, nc);
		o->cap = nc;
	}
	if (size > o->size)
		memset(o->data + o->size, 0, size - o->size);
	o->size = size;
	o->chash_ok = 0;
}

void fsc_model_add(fsc_model *m, const char *path, uint32_t id, char type, const void *data, size_t size)
{
	fsc_obj *o = fsc_obj_get(m, id);
	o->type = type;
	if (data && !o->data && size) {
		obj_resize(o, size);
		memcpy(o->data, data, size);
	}
	if (m->ne == m->ce) {
		m->ce = m->ce ? 2 * m->ce : 64;
		m->e = xrealloc(m->e, m->ce * sizeof *m->e);
	}
	pcat(m->e[m->ne].path, path, "", "");
	m->e[m->ne].id = id;
	m->ne++;
}

static int names_of(const fsc_model *m, uint32_t id)
{
	int n = 0;
	for (size_t i = 0; i < m->ne; i++)
		n += m->e[i].id == id;
	return n;
}

static void remove_ent(fsc_model *m, size_t i)
{
	uint32_t id = m->e[i].id;
	m->e[i] = m->e[--m->ne];
	if (!names_of(m, id)) { /* gone for good: ids are never reused */
		fsc_obj *o = &m->o[id];
		free(o->data);
		o->data = NULL;
		o->size = o->cap = 0;
		o->chash_ok = 0;
	}
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static uint64_t content_hash(fsc_obj *o)
{
	if (!o->chash_ok) {
		o->chash = data_hash(o->data, o->size);
		o->chash_ok = 1;
	}
	return o->chash;
}

/* The object's names, sorted; returns how many (at most cap). */
static size_t sorted_names(const fsc_model *m, uint32_t id, const char **v, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < m->ne && n < cap; i++)
		if (m->e[i].id == id)
			v[n++] = m->e[i].path;
	qsort(v, n, sizeof *v, cmp_str);
	return n;
}

uint64_t fsc_sig(fsc_model *m, uint32_t id)
{
	const char *v[64];
	size_t n = sorted_names(m, id, v, 64);
	if (!n || id >= m->no)
		return 0;
	fsc_obj *o = &m->o[id];
	uint64_t h = fnv(FNV0, &o->type, 1);
	for (size_t i = 0; i < n; i++)
		h = fnv(h, v[i], strlen(v[i]) + 1);
	if (o->type == 'f') {
		uint64_t sz = o->size, ch = content_hash(o);
		h = fnv(h, &sz, sizeof sz);
		h = fnv(h, &ch, sizeof ch);
	}
	return h | 1; /* never 0, which means "no name" */
}

void fsc_describe(fsc_model *m, uint32_t id, char *buf, size_t size)
{
	const char *v[64];
	size_t n = sorted_names(m, id, v, 64), len = 0;
	if (!n || id >= m->no) {
		snprintf(buf, size, "absent");
		return;
	}
	fsc_obj *o = &m->o[id];
	len += (size_t)snprintf(buf + len, size - len, "%s [", o->type == 'd' ? "dir" : "file");
	for (size_t i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "", v[i]);
	if (len < size && o->type == 'f')
		len += (size_t)snprintf(buf + len, size - len, "] size %zu hash %016" PRIx64, o->size, content_hash(o));
	else if (len < size)
		snprintf(buf + len, size - len, "]");
}

/* ---------------------------------------------------------------------- */
/* Operations                                                             */

static const char *const kind_names[] = {"create", "hdr", "write", "trunc", "rename", "unlink", "link", "mkdir", "rmdir"};

void fsc_op_format(const fsc_op *op, char *buf, size_t size)
{
	const char *k = kind_names[op->kind];
	switch (op->kind) {
	case FSC_CREATE:
	case FSC_HDRW:
	case FSC_MKDIR:
		snprintf(buf, size, "%s %s %u", k, op->p, (unsigned)op->id);
		break;
	case FSC_WRITE:
		snprintf(buf, size, "%s %s %" PRIu64 " %" PRIu64 " %" PRIu64, k, op->p, op->off, op->len, op->seed);
		break;
	case FSC_TRUNC:
		snprintf(buf, size, "%s %s %" PRIu64, k, op->p, op->off);
		break;
	case FSC_RENAME:
	case FSC_LINK:
		snprintf(buf, size, "%s %s %s", k, op->p, op->q);
		break;
	default:
		snprintf(buf, size, "%s %s", k, op->p);
		break;
	}
}

int fsc_op_parse(const char *text, fsc_op *op)
{
	char k[16];
	unsigned id;
	memset(op, 0, sizeof *op);
	if (sscanf(text, "%15s", k) != 1)
		return -1;
	for (op->kind = 0; op->kind <= FSC_RMDIR; op->kind++)
		if (!strcmp(k, kind_names[op->kind]))
			break;
	switch (op->kind) {
	case FSC_CREATE:
	case FSC_HDRW:
	case FSC_MKDIR:
		if (sscanf(text, "%*s %191s %u", op->p, &id) != 2)
			return -1;
		op->id = id;
		return 0;
	case FSC_WRITE:
		return sscanf(text, "%*s %191s %" SCNu64 " %" SCNu64 " %" SCNu64, op->p, &op->off, &op->len, &op->seed) == 4
			       ? 0
			       : -1;
	case FSC_TRUNC:
		return sscanf(text, "%*s %191s %" SCNu64, op->p, &op->off) == 2 ? 0 : -1;
	case FSC_RENAME:
	case FSC_LINK:
		return sscanf(text, "%*s %191s %191s", op->p, op->q) == 2 ? 0 : -1;
	case FSC_UNLINK:
	case FSC_RMDIR:
		return sscanf(text, "%*s %191s", op->p) == 1 ? 0 : -1;
	default:
		return -1;
	}
}

static int under(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	return !strncmp(path, dir, l) && (path[l] == 0 || path[l] == '/');
}

static size_t collect(const fsc_model *m, const char *x, uint32_t *ids, size_t k, size_t cap)
{
	if (!*x)
		return k;
	for (size_t i = 0; i < m->ne; i++) {
		if (!under(m->e[i].path, x))
			continue;
		size_t j;
		for (j = 0; j < k && ids[j] != m->e[i].id; j++)
			;
		if (j == k && k < cap)
			ids[k++] = m->e[i].id;
	}
	return k;
}

size_t fsc_apply(fsc_model *m, const fsc_op *op, uint32_t *ids, size_t cap)
{
	size_t k = collect(m, op->p, ids, 0, cap);
	k = collect(m, op->q, ids, k, cap);
	long i = fsc_find(m, op->p);
	fsc_obj *o = i >= 0 ? &m->o[m->e[i].id] : NULL;
	switch (op->kind) {
	case FSC_CREATE:
		fsc_model_add(m, op->p, op->id, 'f', NULL, 0);
		break;
	case FSC_MKDIR:
		fsc_model_add(m, op->p, op->id, 'd', NULL, 0);
		break;
	case FSC_HDRW:
		if (o) {
			char h[FSC_HDR + 1];
			fsc_header(op->id, h);
			if (o->size < FSC_HDR)
				obj_resize(o, FSC_HDR);
			memcpy(o->data, h, FSC_HDR);
			o->chash_ok = 0;
		}
		break;
	case FSC_WRITE:
		if (o) {
			if (o->size < op->off + op->len)
				obj_resize(o, op->off + op->len);
			for (uint64_t x = op->off; x < op->off + op->len; x++)
				o->data[x] = fsc_byte(op->seed, x);
			o->chash_ok = 0;
		}
		break;
	case FSC_TRUNC:
		if (o)
			obj_resize(o, op->off);
		break;
	case FSC_RENAME: {
		long v = fsc_find(m, op->q);
		if (v >= 0 && i >= 0 && m->e[v].id != m->e[i].id)
			remove_ent(m, (size_t)v);
		size_t lp = strlen(op->p);
		for (size_t j = 0; j < m->ne; j++) {
			if (!under(m->e[j].path, op->p))
				continue;
			char np[FSC_PATH];
			pcat(np, op->q, m->e[j].path + lp, "");
			memcpy(m->e[j].path, np, FSC_PATH);
		}
		break;
	}
	case FSC_UNLINK:
	case FSC_RMDIR:
		if (i >= 0)
			remove_ent(m, (size_t)i);
		break;
	case FSC_LINK:
		if (i >= 0)
			fsc_model_add(m, op->q, m->e[i].id, 'f', NULL, 0);
		break;
	}
	k = collect(m, op->p, ids, k, cap);
	k = collect(m, op->q, ids, k, cap);
	if ((op->kind == FSC_CREATE || op->kind == FSC_MKDIR) && k < cap) {
		size_t j;
		for (j = 0; j < k && ids[j] != op->id; j++)
			;
		if (j == k)
			ids[k++] = op->id;
	}
	return k;
}

/* ---------------------------------------------------------------------- */
/* The workload                                                           */

static int depth(const char *p)
{
	if (!*p)
		return 0;
	int d = 1;
	for (; *p; p++)
		d += *p == '/';
	return d;
}

static void join(char *out, const char *dir, const char *name) { pcat(out, dir, *dir ? "/" : "", name); }

static const char *base(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static void parent_of(const char *p, char *out)
{
	const char *s = strrchr(p, '/');
	size_t n = s ? (size_t)(s - p) : 0;
	memcpy(out, p, n);
	out[n] = 0;
}

static int oprintf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int oprintf(int fd, const char *fmt, ...)
{
	char line[FSC_PATH * 2 + 128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof line)
		return -1;
	return write(fd, line, (size_t)n) == n ? 0 : -1;
}

static int is_dead(int rootfd, int err)
{
	struct statfs sf;
	if (err == ENOTCONN || err == ECONNABORTED)
		return 1;
	if (fstatfs(rootfd, &sf) < 0)
		return errno == ENOTCONN || errno == ECONNABORTED;
	return 0;
}

static uint8_t wbuf[FSC_MAX_FILE];

/* The calls of one operation; a write leaves its file open in *fdp. */
static int perform(int rootfd, const fsc_op *op, int *fdp)
{
	int fd, rc = 0;
	*fdp = -1;
	switch (op->kind) {
	case FSC_CREATE:
		if ((fd = openat(rootfd, op->p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644)) < 0)
			return errno;
		close(fd);
		return 0;
	case FSC_HDRW:
	case FSC_WRITE: {
		const void *buf = wbuf;
		size_t len = op->len;
		uint64_t off = op->off;
		char h[FSC_HDR + 1];
		if (op->kind == FSC_HDRW) {
			fsc_header(op->id, h);
			buf = h, len = FSC_HDR, off = 0;
		} else {
			for (uint64_t x = 0; x < op->len; x++)
				wbuf[x] = fsc_byte(op->seed, op->off + x);
		}
		if ((fd = openat(rootfd, op->p, O_WRONLY | O_CLOEXEC)) < 0)
			return errno;
		ssize_t n = pwrite(fd, buf, len, (off_t)off);
		if (n != (ssize_t)len) {
			rc = n < 0 ? errno : EIO; /* a short write: wrong */
			close(fd);
			return rc;
		}
		*fdp = fd;
		return 0;
	}
	case FSC_TRUNC:
		if ((fd = openat(rootfd, op->p, O_WRONLY | O_CLOEXEC)) < 0)
			return errno;
		if (ftruncate(fd, (off_t)op->off) < 0)
			rc = errno;
		close(fd);
		return rc;
	case FSC_RENAME:
		return renameat(rootfd, op->p, rootfd, op->q) < 0 ? errno : 0;
	case FSC_UNLINK:
		return unlinkat(rootfd, op->p, 0) < 0 ? errno : 0;
	case FSC_RMDIR:
		return unlinkat(rootfd, op->p, AT_REMOVEDIR) < 0 ? errno : 0;
	case FSC_LINK:
		return linkat(rootfd, op->p, rootfd, op->q, 0) < 0 ? errno : 0;
	case FSC_MKDIR:
		return mkdirat(rootfd, op->p, 0755) < 0 ? errno : 0;
	}
	return EINVAL;
}

/* A sync: 'f' fsync of a file, 'd' fdatasync of a file, 'D' fsync of a
 * directory, 's' syncfs. */
static int do_sync(int rootfd, int kind, const char *path)
{
	int fd, rc = 0;
	if (kind == 's')
		return syncfs(rootfd) < 0 ? errno : 0;
	fd = openat(rootfd, *path ? path : ".", (kind == 'D' ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if ((kind == 'd' ? fdatasync(fd) : fsync(fd)) < 0)
		rc = errno;
	close(fd);
	return rc;
}

typedef struct wl_lists {
	size_t files[512], nfiles;   /* entry indexes of files */
	char dirs[64][FSC_PATH];     /* "" (the root) and every directory */
	uint32_t dir_ids[64];
	size_t ndirs;
} wl_lists;

static void make_lists(const fsc_model *m, wl_lists *l)
{
	l->nfiles = 0;
	l->ndirs = 1;
	l->dirs[0][0] = 0;
	l->dir_ids[0] = 0;
	for (size_t i = 0; i < m->ne; i++) {
		char t = m->o[m->e[i].id].type;
		if (t == 'f' && l->nfiles < 512)
			l->files[l->nfiles++] = i;
		else if (t == 'd' && l->ndirs < 64) {
			memcpy(l->dirs[l->ndirs], m->e[i].path, FSC_PATH);
			l->dir_ids[l->ndirs++] = m->e[i].id;
		}
	}
}

static int has_children(const fsc_model *m, const char *dir)
{
	for (size_t i = 0; i < m->ne; i++)
		if (under(m->e[i].path, dir) && strcmp(m->e[i].path, dir))
			return 1;
	return 0;
}

static int height(const fsc_model *m, const char *dir)
{
	int d0 = depth(dir), h = 0;
	for (size_t i = 0; i < m->ne; i++)
		if (under(m->e[i].path, dir) && depth(m->e[i].path) - d0 > h)
			h = depth(m->e[i].path) - d0;
	return h;
}

static uint64_t write_len(fsc_rng *r)
{
	uint64_t c = fsc_below(r, 10);
	if (c < 6)
		return 1 + fsc_below(r, 4096);
	if (c < 9)
		return 1 + fsc_below(r, 65536);
	return 1 + fsc_below(r, 262144);
}

/* Chooses the next step: an operation (returns 1, *post set to the sync to
 * do on its open file, or 0), a sync (returns 2, *sync_kind and sync_path
 * set), or nothing possible this time (0). */
static int choose(fsc_model *m, fsc_rng *r, const fsc_wl_cfg *c, uint64_t i, uint32_t *next_id, fsc_op *op, int *post,
		  int *sync_kind, char *sync_path)
{
	wl_lists l;
	char name[64];
	make_lists(m, &l);
	memset(op, 0, sizeof *op);
	*post = 0;
	uint64_t x = fsc_below(r, 1000);
	const char *dir = l.dirs[fsc_below(r, l.ndirs)];
	const fsc_ent *fe = l.nfiles ? &m->e[l.files[fsc_below(r, l.nfiles)]] : NULL;
	fsc_obj *fo = fe ? &m->o[fe->id] : NULL;

	if (x < 120 || !fe) { /* create */
		if (l.nfiles >= c->max_files || depth(dir) > MAX_DEPTH)
			return 0;
		op->kind = FSC_CREATE;
		op->id = (*next_id)++;
		snprintf(name, sizeof name, "f%u", (unsigned)op->id);
		join(op->p, dir, name);
		return 1;
	}
	if (x < 400 || x >= 970) { /* write, with an fsync or fdatasync now and then */
		uint64_t span = fo->size + 8192 > FSC_MAX_FILE ? FSC_MAX_FILE : fo->size + 8192;
		op->kind = FSC_WRITE;
		memcpy(op->p, fe->path, FSC_PATH);
		op->off = FSC_HDR + fsc_below(r, span - FSC_HDR);
		op->len = write_len(r);
		if (op->off + op->len > FSC_MAX_FILE)
			op->len = FSC_MAX_FILE - op->off;
		if (!op->len)
			op->len = 1, op->off = FSC_MAX_FILE - 1;
		op->seed = fsc_rand(r) | 1;
		uint64_t y = fsc_below(r, 100);
		if (x >= 970 || y < 12)
			*post = 'f';
		else if (y < 20)
			*post = 'd';
		return 1;
	}
	if (x < 470) { /* truncate: shrink or grow, never into the header */
		op->kind = FSC_TRUNC;
		memcpy(op->p, fe->path, FSC_PATH);
		uint64_t y = fsc_below(r, 10);
		op->off = y == 0 ? FSC_HDR : FSC_HDR + fsc_below(r, fo->size * 2 + 4096);
		if (op->off > FSC_MAX_FILE)
			op->off = FSC_MAX_FILE;
		return 1;
	}
	if (x < 590) { /* rename a file: same directory, across, or over another file */
		uint64_t v = fsc_below(r, 4);
		char pd[FSC_PATH];
		op->kind = FSC_RENAME;
		memcpy(op->p, fe->path, FSC_PATH);
		parent_of(fe->path, pd);
		if (v >= 2 && l.nfiles > 1) {
			for (int tries = 0; tries < 8; tries++) {
				const fsc_ent *te = &m->e[l.files[fsc_below(r, l.nfiles)]];
				char td[FSC_PATH];
				parent_of(te->path, td);
				if (te->id == fe->id || (v == 2 && strcmp(td, pd)))
					continue;
				memcpy(op->q, te->path, FSC_PATH);
				return 1;
			}
		}
		snprintf(name, sizeof name, "r%u_%" PRIu64, c->round, i);
		join(op->q, v == 0 ? pd : dir, name);
		return depth(op->q) > MAX_DEPTH + 1 ? 0 : 1;
	}
	if (x < 650) {
		op->kind = FSC_UNLINK;
		memcpy(op->p, fe->path, FSC_PATH);
		return 1;
	}
	if (x < 690) {
		if (l.nfiles >= c->max_files || depth(dir) > MAX_DEPTH)
			return 0;
		op->kind = FSC_LINK;
		memcpy(op->p, fe->path, FSC_PATH);
		snprintf(name, sizeof name, "l%u_%" PRIu64, c->round, i);
		join(op->q, dir, name);
		return 1;
	}
	if (x < 740) {
		if (l.ndirs - 1 >= c->max_dirs || depth(dir) >= MAX_DEPTH)
			return 0;
		op->kind = FSC_MKDIR;
		op->id = (*next_id)++;
		snprintf(name, sizeof name, "d%u", (unsigned)op->id);
		join(op->p, dir, name);
		return 1;
	}
	if (x < 770) {
		if (l.ndirs < 2)
			return 0;
		const char *d = l.dirs[1 + fsc_below(r, l.ndirs - 1)];
		if (has_children(m, d))
			return 0;
		op->kind = FSC_RMDIR;
		memcpy(op->p, d, FSC_PATH);
		return 1;
	}
	if (x < 800) { /* move a directory (keeps its name) to another parent */
		if (l.ndirs < 2)
			return 0;
		const char *d = l.dirs[1 + fsc_below(r, l.ndirs - 1)];
		char pd[FSC_PATH];
		parent_of(d, pd);
		if (under(dir, d) || !strcmp(dir, pd) || depth(dir) + 1 + height(m, d) > MAX_DEPTH + 1)
			return 0;
		op->kind = FSC_RENAME;
		memcpy(op->p, d, FSC_PATH);
		join(op->q, dir, base(d));
		return 1;
	}
	if (x < 880) {
		*sync_kind = fsc_below(r, 2) ? 'f' : 'd';
		memcpy(sync_path, fe->path, FSC_PATH);
		return 2;
	}
	if (x < 940) {
		*sync_kind = 'D';
		memcpy(sync_path, dir, FSC_PATH);
		return 2;
	}
	*sync_kind = 's';
	sync_path[0] = 0;
	return 2;
}

/* Orphans: files the workload still holds open after their last name went
 * (an unlink, or a rename over them).  Writing to one and fsync'ing it
 * changes nothing anyone can see; the daemon frees it at the last close,
 * or at the next mount after a crash. */
#define MAX_HELD 4

/* Something done to a held orphan: a write (and maybe an fsync), or the
 * close.  0, or an errno. */
static int orphan_step(fsc_rng *r, int *held, int *nheld, int *synced)
{
	int k = (int)fsc_below(r, (uint64_t)*nheld), fd = held[k], rc = 0;
	*synced = 0;
	if (fsc_below(r, 3) == 0) {
		held[k] = held[--*nheld];
		return close(fd) < 0 ? errno : 0;
	}
	size_t len = 1 + fsc_below(r, 8192);
	for (size_t x = 0; x < len; x++)
		wbuf[x] = (uint8_t)fsc_rand(r);
	if (pwrite(fd, wbuf, len, (off_t)fsc_below(r, FSC_MAX_FILE)) != (ssize_t)len)
		return errno ? errno : EIO;
	if (fsc_below(r, 3) == 0) {
		if (fsync(fd) < 0)
			return errno;
		*synced = 1;
	}
	return rc;
}

int fsc_workload(fsc_model *m, const fsc_wl_cfg *c)
{
	fsc_rng r = {c->seed};
	uint32_t next_id = c->next_id, pending = 0;
	char pending_path[FSC_PATH] = "";
	uint64_t i = 0;
	struct statfs sf;
	int held[MAX_HELD], nheld = 0;

	if (fstatfs(c->rootfd, &sf) < 0 || sf.f_type != FUSE_SUPER_MAGIC) {
		oprintf(c->oracle, "X\n"); /* dead before it started */
		return 0;
	}
	for (;;) {
		fsc_op op;
		char text[FSC_PATH * 2 + 64], sync_path[FSC_PATH];
		int post = 0, sync_kind = 0, fd, rc, what, hfd = -1;
		uint32_t ids[256], victim = 0;

		if (c->max_ops && i >= c->max_ops)
			return 0;
		if (nheld && fsc_below(&r, 30) == 0) {
			int synced;
			if ((rc = orphan_step(&r, held, &nheld, &synced)) == 0) {
				if (synced)
					oprintf(c->oracle, "S %" PRIu64 " f\n", i);
				oprintf(c->oracle, "H %d\n", nheld);
				continue;
			}
			if (is_dead(c->rootfd, rc)) {
				oprintf(c->oracle, "X\n");
				return 0;
			}
			oprintf(c->oracle, "F %d orphan\n", rc);
			return 1;
		}
		if (pending) { /* a new file's header is always the next call */
			memset(&op, 0, sizeof op);
			op.kind = FSC_HDRW;
			op.id = pending;
			memcpy(op.p, pending_path, FSC_PATH);
			what = 1;
			pending = 0;
		} else if ((what = choose(m, &r, c, i, &next_id, &op, &post, &sync_kind, sync_path)) == 0)
			continue;
		if (what == 2) {
			if ((rc = do_sync(c->rootfd, sync_kind, sync_path)) == 0) {
				oprintf(c->oracle, "S %" PRIu64 " %c\n", i, sync_kind);
				continue;
			}
			if (is_dead(c->rootfd, rc)) {
				oprintf(c->oracle, "X\n");
				return 0;
			}
			oprintf(c->oracle, "F %d sync %c %s\n", rc, sync_kind, sync_path);
			return 1;
		}
		/* One call, one or two operations (fsc_model.h: split writes). */
		fsc_op part[2];
		int parts = 1;
		part[0] = op;
		if (op.kind == FSC_WRITE && op.off % FSC_PAGE && op.off / FSC_PAGE != (op.off + op.len - 1) / FSC_PAGE) {
			part[1] = op;
			part[0].len = FSC_PAGE - op.off % FSC_PAGE;
			part[1].off = op.off + part[0].len;
			part[1].len = op.len - part[0].len;
			parts = 2;
		}
		/* now and then, hold the file whose last name goes open */
		const char *gone = op.kind == FSC_UNLINK ? op.p : op.kind == FSC_RENAME ? op.q : NULL;
		long gi = gone ? fsc_find(m, gone) : -1;
		if (gi >= 0 && m->o[m->e[gi].id].type == 'f' && nheld < MAX_HELD && fsc_below(&r, 3) == 0 &&
		    (op.kind == FSC_UNLINK || m->e[gi].id != m->e[fsc_find(m, op.p)].id)) {
			victim = m->e[gi].id;
			if ((hfd = openat(c->rootfd, gone, O_RDWR | O_CLOEXEC)) < 0) {
				rc = errno;
				if (is_dead(c->rootfd, rc)) {
					oprintf(c->oracle, "X\n");
					return 0;
				}
				oprintf(c->oracle, "F %d open %s\n", rc, gone);
				return 1;
			}
		}
		for (int k = 0; k < parts; k++) {
			fsc_op_format(&part[k], text, sizeof text);
			oprintf(c->oracle, "B %" PRIu64 " %s\n", i + (uint64_t)k, text);
		}
		if ((rc = perform(c->rootfd, &op, &fd)) != 0) {
			oprintf(c->oracle, "E %" PRIu64 " %d\n", i + (uint64_t)parts - 1, rc);
			if (is_dead(c->rootfd, rc)) {
				oprintf(c->oracle, "X\n");
				return 0;
			}
			return 1;
		}
		for (int k = 0; k < parts; k++) {
			oprintf(c->oracle, "A %" PRIu64 "\n", i);
			fsc_apply(m, &part[k], ids, 256);
			i++;
		}
		if (hfd >= 0) { /* an orphan only if no name is left */
			if (!names_of(m, victim)) {
				held[nheld++] = hfd;
				oprintf(c->oracle, "H %d\n", nheld);
			} else
				close(hfd);
		}
		if (op.kind == FSC_CREATE) {
			pending = op.id;
			memcpy(pending_path, op.p, FSC_PATH);
		}
		if (fd >= 0) {
			if (post) {
				if ((post == 'd' ? fdatasync(fd) : fsync(fd)) == 0)
					oprintf(c->oracle, "S %" PRIu64 " %c\n", i, post);
				else {
					rc = errno;
					close(fd);
					if (is_dead(c->rootfd, rc)) {
						oprintf(c->oracle, "X\n");
						return 0;
					}
					oprintf(c->oracle, "F %d sync %c %s\n", rc, post, op.p);
					return 1;
				}
			}
			close(fd);
		}
	}
}

/* ---------------------------------------------------------------------- */
/* The oracle                                                             */

int fsc_oracle_read(const char *path, fsc_oracle *o, char *msg, size_t msz)
{
	FILE *f = fopen(path, "r");
	char line[FSC_PATH * 2 + 256];
	memset(o, 0, sizeof *o);
	o->err_op = -1;
	if (!f) {
		snprintf(msg, msz, "cannot read the oracle %s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		uint64_t i, k;
		int e;
		char kind;
		if (line[0] == 'B' && sscanf(line, "B %" SCNu64, &i) == 1) {
			const char *t = strchr(line + 2, ' ');
			if (i != o->n || !t) {
				snprintf(msg, msz, "oracle: operation %" PRIu64 " out of order", i);
				goto bad;
			}
			if (o->n == o->cap) {
				o->cap = o->cap ? 2 * o->cap : 256;
				o->ops = xrealloc(o->ops, o->cap * sizeof *o->ops);
			}
			if (fsc_op_parse(t + 1, &o->ops[o->n]) != 0) {
				snprintf(msg, msz, "oracle: cannot parse: %s", line);
				goto bad;
			}
			o->n++;
		} else if (line[0] == 'A' && sscanf(line, "A %" SCNu64, &i) == 1) {
			o->acked = i + 1;
		} else if (line[0] == 'S' && sscanf(line, "S %" SCNu64 " %c", &k, &kind) == 2) {
			o->s_all = k;
			if (kind != 's')
				o->s_nosyncfs = k;
			o->syncs[kind == 'f' ? 0 : kind == 'd' ? 1 : kind == 'D' ? 2 : 3]++;
		} else if (line[0] == 'E' && sscanf(line, "E %" SCNu64 " %d", &i, &e) == 2) {
			o->err_op = (int)i;
			o->err_no = e;
		} else if (line[0] == 'F' && sscanf(line, "F %d", &e) == 1) {
			o->err_op = (int)o->n;
			o->err_no = e;
			snprintf(msg, msz, "%s", line);
		} else if (line[0] == 'H' && sscanf(line, "H %d", &e) == 1) {
			o->held = e;
		} else if (line[0] == 'X') {
			o->dead = 1;
			if (o->err_op >= 0 && o->err_op < (int)o->n)
				o->err_op = -1; /* the error was the mount dying */
		} else {
			snprintf(msg, msz, "oracle: bad line: %s", line);
			goto bad;
		}
	}
	fclose(f);
	return 0;
bad:
	fclose(f);
	return -1;
}

void fsc_oracle_free(fsc_oracle *o)
{
	free(o->ops);
	memset(o, 0, sizeof *o);
}

/* ---------------------------------------------------------------------- */
/* Scanning                                                               */

static int parse_name(const char *name, char c, uint32_t *id)
{
	char buf[32];
	unsigned v;
	int n = 0;
	if (name[0] != c || sscanf(name + 1, "%u%n", &v, &n) != 1 || name[1 + n] != 0)
		return -1;
	snprintf(buf, sizeof buf, "%c%u", c, v);
	if (strcmp(buf, name))
		return -1;
	*id = v;
	return 0;
}

static int parse_header(const uint8_t *d, size_t size, uint32_t *id)
{
	char h[FSC_HDR + 1];
	unsigned v;
	if (size < FSC_HDR || memcmp(d, "TPFSOBJ ", 8) || sscanf((const char *)d + 8, "%7u", &v) != 1)
		return -1;
	fsc_header(v, h);
	if (memcmp(h, d, FSC_HDR))
		return -1;
	*id = v;
	return 0;
}

static fsc_scan_ent *scan_add(fsc_scan *s)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 128;
		s->e = xrealloc(s->e, s->cap * sizeof *s->e);
	}
	memset(&s->e[s->n], 0, sizeof s->e[0]);
	return &s->e[s->n++];
}

static int read_all(const char *path, size_t size, uint8_t **out, char *msg, size_t msz)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint8_t *b = xrealloc(NULL, size + 1);
	size_t got = 0;
	if (fd < 0) {
		snprintf(msg, msz, "open %s: %s", path, strerror(errno));
		free(b);
		return -1;
	}
	for (;;) {
		ssize_t n = read(fd, b + got, size + 1 - got);
		if (n < 0) {
			snprintf(msg, msz, "read %s: %s", path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > size)
			break;
	}
	close(fd);
	if (got != size) {
		if (!msg[0])
			snprintf(msg, msz, "%s: read %zu bytes, stat says %zu", path, got, size);
		free(b);
		return -1;
	}
	*out = b;
	return 0;
}

static int scan_dir(fsc_scan *s, const char *root, const char *rel, uint64_t *subdirs, char *msg, size_t msz)
{
	char full[FSC_PATH + 512];
	snprintf(full, sizeof full, "%s%s%s", root, *rel ? "/" : "", rel);
	DIR *d = opendir(full);
	struct dirent *de;
	int rc = 0;
	if (!d) {
		snprintf(msg, msz, "opendir %s: %s", full, strerror(errno));
		return -1;
	}
	*subdirs = 0;
	while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
		char p[FSC_PATH], fp[FSC_PATH + 512];
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (strlen(rel) + strlen(de->d_name) + 2 > FSC_PATH) {
			snprintf(msg, msz, "a path too long under %s", full);
			rc = -1;
			break;
		}
		join(p, rel, de->d_name);
		snprintf(fp, sizeof fp, "%s/%s", root, p);
		if (lstat(fp, &st) < 0) {
			snprintf(msg, msz, "lstat %s (listed by readdir): %s", p, strerror(errno));
			rc = -1;
			break;
		}
		fsc_scan_ent *e = scan_add(s);
		memcpy(e->path, p, FSC_PATH);
		e->ino = st.st_ino;
		e->nlink = st.st_nlink;
		e->size = (uint64_t)st.st_size;
		if (S_ISDIR(st.st_mode)) {
			uint64_t sub;
			size_t me = s->n - 1;
			e->type = 'd';
			if (parse_name(de->d_name, 'd', &e->id) != 0) {
				snprintf(msg, msz, "stray directory %s (not made by the workload)", p);
				rc = -1;
				break;
			}
			(*subdirs)++;
			if ((rc = scan_dir(s, root, p, &sub, msg, msz)) != 0)
				break;
			if (s->e[me].nlink != 2 + sub) {
				snprintf(msg, msz, "directory %s: st_nlink %" PRIu64 ", but it has %" PRIu64 " subdirectories", p,
					 s->e[me].nlink, sub);
				rc = -1;
			}
		} else if (S_ISREG(st.st_mode)) {
			e->type = 'f';
			for (size_t j = 0; j + 1 < s->n; j++)
				if (s->e[j].type == 'f' && s->e[j].ino == e->ino) { /* another name of a file seen */
					e->id = s->e[j].id;
					e->data = s->e[j].data;
					if (s->e[j].size != e->size) {
						snprintf(msg, msz, "%s and %s: one inode, sizes %" PRIu64 " and %" PRIu64, s->e[j].path,
							 p, s->e[j].size, e->size);
						rc = -1;
					}
					goto next;
				}
			if (e->size > FSC_MAX_FILE) {
				snprintf(msg, msz, "file %s: size %" PRIu64 ", larger than the workload makes", p, e->size);
				rc = -1;
				break;
			}
			if (read_all(fp, e->size, &e->data, msg, msz) != 0) {
				rc = -1;
				break;
			}
			e->owner = 1;
			if (e->size == 0 ? parse_name(de->d_name, 'f', &e->id) != 0 : parse_header(e->data, e->size, &e->id) != 0) {
				snprintf(msg, msz, "file %s (size %" PRIu64 ") is not one of the workload's: %s", p, e->size,
					 e->size ? "no header" : "empty under another name than f<id>");
				rc = -1;
			}
		} else {
			snprintf(msg, msz, "stray %s of mode %o", p, (unsigned)st.st_mode);
			rc = -1;
		}
	next:;
	}
	if (rc == 0 && errno != 0) {
		snprintf(msg, msz, "readdir %s: %s", full, strerror(errno));
		rc = -1;
	}
	closedir(d);
	return rc;
}

int fsc_scan_tree(const char *root, fsc_scan *s, char *msg, size_t msz)
{
	struct stat st;
	uint64_t sub;
	memset(s, 0, sizeof *s);
	msg[0] = 0;
	if (stat(root, &st) < 0) {
		snprintf(msg, msz, "stat %s: %s", root, strerror(errno));
		return -1;
	}
	s->root_nlink = st.st_nlink;
	if (scan_dir(s, root, "", &sub, msg, msz) != 0)
		return -1;
	if (s->root_nlink != 2 + sub) {
		snprintf(msg, msz, "root: st_nlink %" PRIu64 ", but it has %" PRIu64 " subdirectories", s->root_nlink, sub);
		return -1;
	}
	/* names of one id: one inode, and its link count is their number */
	for (size_t i = 0; i < s->n; i++) {
		uint64_t names = 0;
		for (size_t j = 0; j < s->n; j++) {
			if (s->e[j].id != s->e[i].id)
				continue;
			if (s->e[j].ino != s->e[i].ino || s->e[j].type != s->e[i].type) {
				snprintf(msg, msz, "%s and %s are two objects claiming id %u", s->e[i].path, s->e[j].path,
					 (unsigned)s->e[i].id);
				return -1;
			}
			names++;
		}
		if (s->e[i].type == 'f' && s->e[i].nlink != names) {
			snprintf(msg, msz, "file %s: st_nlink %" PRIu64 " but %" PRIu64 " names found", s->e[i].path,
				 s->e[i].nlink, names);
			return -1;
		}
	}
	return 0;
}

void fsc_scan_free(fsc_scan *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->e[i].owner)
			free(s->e[i].data);
	free(s->e);
	memset(s, 0, sizeof *s);
}

void fsc_scan_model(const fsc_scan *s, fsc_model *m)
{
	fsc_model_init(m);
	for (size_t i = 0; i < s->n; i++)
		fsc_model_add(m, s->e[i].path, s->e[i].id, s->e[i].type, s->e[i].data, s->e[i].size);
}

/* ---------------------------------------------------------------------- */
/* The check                                                              */

typedef struct ver {
	size_t t;
	uint64_t sig;
	char *desc;
} ver;

typedef struct vlist {
	ver *v;
	size_t n, cap;
} vlist;

static void push(vlist *l, size_t t, uint64_t sig, fsc_model *m, uint32_t id)
{
	char d[1024];
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4;
		l->v = xrealloc(l->v, l->cap * sizeof *l->v);
	}
	fsc_describe(m, id, d, sizeof d);
	l->v[l->n].t = t;
	l->v[l->n].sig = sig;
	l->v[l->n].desc = strdup(d);
	l->n++;
}

static void vappend(fsc_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vappend(fsc_verdict *v, const char *fmt, ...)
{
	size_t len = strlen(v->msg);
	va_list ap;
	if (len + 1 >= sizeof v->msg)
		return;
	va_start(ap, fmt);
	vsnprintf(v->msg + len, sizeof v->msg - len, fmt, ap);
	va_end(ap);
}

void fsc_verify(const fsc_model *m0, const fsc_oracle *o, size_t s, const fsc_scan *sc, fsc_verdict *v)
{
	fsc_model m, rm;
	uint32_t maxid = m0->no, ids[256];
	size_t n = o->n, w = n - s + 1, bad = 0;

	memset(v, 0, sizeof *v);
	fsc_model_copy(&m, m0);
	fsc_scan_model(sc, &rm);
	for (size_t i = 0; i < n; i++)
		if (o->ops[i].id + 1 > maxid)
			maxid = o->ops[i].id + 1;
	if (rm.no > maxid)
		maxid = rm.no;
	vlist *vl = calloc(maxid, sizeof *vl);
	uint8_t *ok = malloc(w), *hit = malloc(w);
	memset(ok, 1, w);

	for (uint32_t id = 1; id < m0->no; id++) {
		uint64_t g = fsc_sig(&m, id);
		if (g)
			push(&vl[id], 0, g, &m, id);
	}
	for (size_t i = 0; i < n; i++) {
		size_t k = fsc_apply(&m, &o->ops[i], ids, 256);
		for (size_t j = 0; j < k; j++) {
			uint32_t id = ids[j];
			uint64_t g = fsc_sig(&m, id);
			vlist *l = &vl[id];
			if (l->n == 0) {
				if (!g)
					continue;
				push(l, 0, 0, &m, 0); /* absent before (id 0 has no name) */
			}
			if (l->v[l->n - 1].sig != g)
				push(l, i + 1, g, &m, id);
		}
	}

	for (uint32_t id = 1; id < maxid; id++) {
		vlist *l = &vl[id];
		uint64_t r = id < rm.no ? fsc_sig(&rm, id) : 0;
		int matched = 0;
		if (!l->n && !r)
			continue;
		v->objects++;
		memset(hit, 0, w);
		for (size_t j = 0; j < l->n; j++) {
			size_t a = l->v[j].t, b = j + 1 < l->n ? l->v[j + 1].t - 1 : n;
			if (b < s || l->v[j].sig != r)
				continue;
			if (a < s)
				a = s;
			matched = 1;
			memset(hit + (a - s), 1, b - a + 1);
		}
		if (!l->n && r == 0)
			matched = 1;
		if (!matched) {
			char d[1024];
			if (bad++ < 6) {
				fsc_describe(&rm, id, d, sizeof d);
				vappend(v, "object %u: recovered as %s; its states since the last acknowledged sync (state %zu of %zu):\n",
					(unsigned)id, d, s, n);
				if (!l->n)
					vappend(v, "    (never made by the workload)\n");
				for (size_t j = 0; j < l->n; j++) {
					size_t b = j + 1 < l->n ? l->v[j + 1].t - 1 : n;
					if (b < s)
						continue;
					vappend(v, "    from state %zu: %s\n", l->v[j].t, l->v[j].desc);
				}
			}
			continue;
		}
		for (size_t t = 0; t < w; t++)
			ok[t] &= hit[t];
	}
	v->ok = bad == 0;
	if (v->ok) {
		for (size_t t = 0; t < w; t++)
			if (ok[t]) {
				if (!v->prefix)
					v->t_lo = s + t;
				v->prefix = 1;
				v->t_hi = s + t;
			}
		if (!v->prefix)
			vappend(v, "every object shows one of its states, but no single state %zu..%zu explains all of them "
				   "(a later call survived an earlier one)\n",
				s, n);
	}
	for (uint32_t id = 0; id < maxid; id++) {
		for (size_t j = 0; j < vl[id].n; j++)
			free(vl[id].v[j].desc);
		free(vl[id].v);
	}
	free(vl);
	free(ok);
	free(hit);
	fsc_model_free(&m);
	fsc_model_free(&rm);
}
