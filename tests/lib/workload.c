/*
 * workload -- seeded transaction workload, model, oracle file and checker
 * shared by the crash and fault suites (see workload.h for what they do).
 *
 * Oracle file format (native endianness: written and read on one machine)
 *   record   u32 magic 'WLOR'   u32 kind   u32 seq   u32 len   len bytes
 *            u32 CRC-32C of the 16 header bytes and the payload
 *   INTENT   payload: u32 steps, then per step
 *              u8 kind (1 write, 2 alloc, 3 free), u8 pad[3], u32 pgno,
 *              u16 off, u16 len, len bytes (writes only)
 *   ACK      no payload: tp_commit of seq returned 0
 *   LAZY     no payload: tp_commit(TP_COMMIT_NOSYNC) of seq returned 0
 *   FAIL     payload: i32 rc: tp_commit of seq failed
 *   SYNC     no payload, seq 0: tp_sync returned 0
 * A reader stops at the first record that is short or fails its CRC.
 *
 * Invariants the runner keeps
 *   WL1 Only one regular transaction is open at a time; L (the long one)
 *       touches only the pages it owns, regular ones only theirs, so
 *       committing in either order gives the same state.
 *   WL2 cur is what reads return now (committed state plus the changes of
 *       the open transactions); com is committed state.  They differ only
 *       on pages an open transaction touched.
 *   WL3 The INTENT of a transaction is on the oracle (write(2) returned)
 *       before tp_commit is called; its ACK only after tp_commit returned 0.
 */
#include "workload.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "io_sim.h"
#include "tp_test.h"
#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
#define WL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WL_ASAN 1
#endif
#endif
#ifdef WL_ASAN
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

const char *const wl_points[WL_NPOINTS] = {
	"log.flush.written", "txn.commit.logged", "txn.commit.durable", "rec.ckpt.logged", "rec.ckpt.master",
	"buf.punch", "buf.punched", /* before and after a hole is punched (space return, E3) */
};

#define WL_MAGIC 0x524f4c57u /* "WLOR" */
enum { OR_INTENT = 1, OR_ACK, OR_FAIL, OR_LAZY, OR_SYNC };
enum { ST_WRITE = 1, ST_ALLOC, ST_FREE };
enum { OWN_NONE = 0, OWN_REG, OWN_L };
#define PAGE_TYPE 7u

/* ---- random numbers ---- */

uint64_t wl_rand(wl_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t wl_below(wl_rng *r, uint64_t n) { return n ? wl_rand(r) % n : 0; }

uint64_t wl_mix(uint64_t a, uint64_t b)
{
	wl_rng r = {a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull)};
	wl_rand(&r);
	return wl_rand(&r);
}

static void fill(wl_rng *r, unsigned char *p, size_t n)
{
	while (n >= 8) {
		uint64_t v = wl_rand(r);
		memcpy(p, &v, 8);
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t v = wl_rand(r);
		memcpy(p, &v, n);
	}
}

/* ---- messages ---- */

int wl_failf(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
	return -1;
}

static const char *rcname(int rc, char *buf, size_t n)
{
	snprintf(buf, n, "%d (%s)", rc, tp_strerror(rc));
	return buf;
}

/* ---- model ---- */

int wl_model_init(wl_model *m, uint32_t body)
{
	memset(m, 0, sizeof *m);
	m->body = body;
	m->data = calloc(WL_MAXPG, body);
	return m->data ? 0 : -1;
}

void wl_model_free(wl_model *m)
{
	free(m->data);
	m->data = NULL;
}

void wl_model_copy(wl_model *dst, const wl_model *src)
{
	dst->body = src->body;
	memcpy(dst->alloc, src->alloc, sizeof dst->alloc);
	memcpy(dst->data, src->data, (size_t)WL_MAXPG * src->body);
}

unsigned char *wl_page(const wl_model *m, uint64_t pgno) { return m->data + pgno * m->body; }

int wl_is_bitmap(uint32_t body, uint64_t pgno)
{
	uint64_t g = 8ull * body; /* pages per allocation group (op_page.c) */
	return pgno >= 1 && (pgno - 1) % g == 0;
}

static void page_copy(wl_model *dst, const wl_model *src, uint64_t p)
{
	dst->alloc[p] = src->alloc[p];
	memcpy(wl_page(dst, p), wl_page(src, p), dst->body);
}

/* ---- configuration ---- */

void wl_config_base(wl_config *c, unsigned setup_pages, unsigned l_pages)
{
	memset(c, 0, sizeof *c);
	c->page_size = 1024;
	c->seg_size = 64 * 1024;
	c->cache_pages = 12;
	c->ckpt_log_bytes = 128 * 1024;
	c->setup_pages = setup_pages;
	c->l_pages = l_pages;
	c->ntx = 20;
	c->ckpt_pct = 6;
	c->nosync_pct = 10;
}

void wl_config_seed(wl_config *c, uint64_t seed, unsigned ntx_min, unsigned ntx_max)
{
	wl_rng r = {wl_mix(seed, 0xc0f1)};
	static const uint64_t ckpt[] = {24 * 1024, 48 * 1024, 96 * 1024, 160 * 1024};
	c->seed = seed;
	c->cache_pages = 8 + (size_t)wl_below(&r, 9); /* 8..16 frames: STEAL */
	c->ckpt_log_bytes = ckpt[wl_below(&r, 4)];
	c->ntx = ntx_min + (unsigned)wl_below(&r, ntx_max - ntx_min + 1);
	c->long_txn = c->l_pages && wl_below(&r, 4) ? 1 + (int)wl_below(&r, 3) : 0;
	c->last_inflight = (int)wl_below(&r, 2);
	c->ckpt_pct = (int)wl_below(&r, 12);
	c->nosync_pct = (int)wl_below(&r, 4) * 7; /* 0, 7, 14 or 21 % */
}

void wl_options(const wl_config *c, tp_options *o)
{
	tp_options_init(o);
	o->cache_pages = c->cache_pages;
	o->page_size = c->page_size;
	o->seg_size = c->seg_size;
	o->ckpt_log_bytes = c->ckpt_log_bytes;
	o->ckpt_ms = 0; /* deterministic: checkpoints by log size only */
	o->quiet = getenv("TP_WL_LOUD") == NULL; /* TP_WL_LOUD=1: the engine's messages */
}

/* ---- oracle file ---- */

int wl_write_all(int fd, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

typedef struct step {
	uint8_t kind;
	uint64_t pgno;
	uint16_t off, len;
	unsigned char *data; /* writes: len bytes, owned */
} step;

typedef struct otx {
	unsigned seq;
	int status; /* 0 no outcome, OR_ACK, OR_FAIL, OR_LAZY; OR_SYNC: a tp_sync marker */
	int rc;
	step *steps;
	size_t n, cap;
} otx;

static void otx_clear(otx *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->steps[i].data);
	free(t->steps);
	memset(t, 0, sizeof *t);
}

static int otx_add(otx *t, uint8_t kind, uint64_t pgno, uint16_t off, uint16_t len, const unsigned char *data)
{
	if (t->n == t->cap) {
		size_t nc = t->cap ? 2 * t->cap : 16;
		step *ns = realloc(t->steps, nc * sizeof *ns);
		if (!ns)
			return -1;
		t->steps = ns;
		t->cap = nc;
	}
	step *s = &t->steps[t->n];
	memset(s, 0, sizeof *s);
	s->kind = kind;
	s->pgno = pgno;
	s->off = off;
	s->len = len;
	if (kind == ST_WRITE) {
		if (!(s->data = malloc(len ? len : 1)))
			return -1;
		memcpy(s->data, data, len);
	}
	t->n++;
	return 0;
}

static int oracle_put(int fd, uint32_t kind, uint32_t seq, const unsigned char *payload, uint32_t len)
{
	size_t n = 16 + (size_t)len + 4;
	unsigned char *b = malloc(n);
	int rc;
	if (!b)
		return -1;
	uint32_t h[4] = {WL_MAGIC, kind, seq, len};
	memcpy(b, h, 16);
	if (len)
		memcpy(b + 16, payload, len);
	uint32_t crc = util_crc32c(0, b, 16 + (size_t)len);
	memcpy(b + 16 + len, &crc, 4);
	rc = wl_write_all(fd, b, n);
	free(b);
	return rc;
}

static int oracle_intent(int fd, const otx *t)
{
	size_t len = 4;
	for (size_t i = 0; i < t->n; i++)
		len += 12 + (t->steps[i].kind == ST_WRITE ? t->steps[i].len : 0);
	unsigned char *p = malloc(len), *q = p;
	int rc;
	if (!p)
		return -1;
	uint32_t n = (uint32_t)t->n;
	memcpy(q, &n, 4);
	q += 4;
	for (size_t i = 0; i < t->n; i++) {
		const step *s = &t->steps[i];
		uint32_t pg = (uint32_t)s->pgno;
		memset(q, 0, 4);
		q[0] = s->kind;
		memcpy(q + 4, &pg, 4);
		memcpy(q + 8, &s->off, 2);
		memcpy(q + 10, &s->len, 2);
		q += 12;
		if (s->kind == ST_WRITE) {
			memcpy(q, s->data, s->len);
			q += s->len;
		}
	}
	rc = oracle_put(fd, OR_INTENT, t->seq, p, (uint32_t)len);
	free(p);
	return rc;
}

/* Reads the oracle: every INTENT with its outcome, in order. */
static int oracle_read(const char *path, otx **out, size_t *nout, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	unsigned char *buf = NULL;
	otx *v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	*nout = 0;
	if (fd < 0) {
		if (errno == ENOENT)
			return 0; /* the child crashed before writing anything */
		return wl_failf(err, errlen, "oracle %s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return wl_failf(err, errlen, "oracle %s: cannot read", path);
	}
	size_t size = (size_t)st.st_size, got = 0;
	while (got < size) {
		ssize_t r = read(fd, buf + got, size - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	size = got;
	for (size_t o = 0; o + 20 <= size;) {
		uint32_t h[4], crc;
		memcpy(h, buf + o, 16);
		if (h[0] != WL_MAGIC || o + 20 + h[3] > size)
			break;
		memcpy(&crc, buf + o + 16 + h[3], 4);
		if (crc != util_crc32c(0, buf + o, 16 + (size_t)h[3]))
			break;
		const unsigned char *p = buf + o + 16;
		if (h[1] == OR_INTENT) {
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 64;
				otx *nv = realloc(v, nc * sizeof *nv);
				if (!nv)
					goto nomem;
				v = nv;
				cap = nc;
			}
			otx *t = &v[n++];
			memset(t, 0, sizeof *t);
			t->seq = h[2];
			uint32_t ns;
			memcpy(&ns, p, 4);
			p += 4;
			for (uint32_t i = 0; i < ns; i++) {
				uint32_t pg;
				uint16_t off, len;
				memcpy(&pg, p + 4, 4);
				memcpy(&off, p + 8, 2);
				memcpy(&len, p + 10, 2);
				if (otx_add(t, p[0], pg, off, len, p + 12) != 0)
					goto nomem;
				p += 12 + (p[0] == ST_WRITE ? len : 0);
			}
		} else if (h[1] == OR_SYNC) {
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 64;
				otx *nv = realloc(v, nc * sizeof *nv);
				if (!nv)
					goto nomem;
				v = nv;
				cap = nc;
			}
			memset(&v[n], 0, sizeof v[n]);
			v[n++].status = OR_SYNC;
		} else if (h[1] == OR_ACK || h[1] == OR_FAIL || h[1] == OR_LAZY) {
			size_t i = n;
			while (i > 0 && v[i - 1].seq != h[2])
				i--;
			if (i == 0) {
				free(buf);
				for (size_t k = 0; k < n; k++)
					otx_clear(&v[k]);
				free(v);
				return wl_failf(err, errlen, "oracle %s: outcome of unknown transaction %u", path, h[2]);
			}
			v[i - 1].status = (int)h[1];
			if (h[1] == OR_FAIL)
				memcpy(&v[i - 1].rc, p, 4);
		}
		o += 20 + h[3];
	}
	free(buf);
	*out = v;
	*nout = n;
	return 0;
nomem:
	free(buf);
	for (size_t k = 0; k < n; k++)
		otx_clear(&v[k]);
	free(v);
	return wl_failf(err, errlen, "oracle %s: out of memory", path);
}

static void apply_otx(wl_model *m, const otx *t)
{
	for (size_t i = 0; i < t->n; i++) {
		const step *s = &t->steps[i];
		if (s->pgno >= WL_MAXPG)
			continue;
		switch (s->kind) {
		case ST_WRITE:
			memcpy(wl_page(m, s->pgno) + s->off, s->data, s->len);
			break;
		case ST_ALLOC:
			m->alloc[s->pgno] = 1;
			memset(wl_page(m, s->pgno), 0, m->body);
			break;
		case ST_FREE:
			m->alloc[s->pgno] = 0;
			break;
		}
	}
}

/*
 * What recovery must show, from the oracle's entries in order:
 *   - durable: ACK, and LAZY (a TP_COMMIT_NOSYNC commit) followed by an ACK
 *     or a SYNC marker (that flush covered its commit record);
 *   - absent: FAIL or no outcome followed by any success (ACK, LAZY, SYNC):
 *     the engine went on, so the transaction was rolled back;
 *   - in doubt, in log order: LAZY after the last ACK/SYNC, FAIL or no
 *     outcome after the last success.  The log is durable as a prefix, so
 *     recovery keeps a prefix of them: the first j for some j.
 * kind[i] gets 1 durable, 0 absent, 2 in doubt.
 */
static void plan(const otx *v, size_t n, unsigned char *kind)
{
	size_t durable_upto = 0, ok_upto = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].status == OR_ACK || v[i].status == OR_SYNC)
			durable_upto = i + 1;
		if (v[i].status == OR_ACK || v[i].status == OR_SYNC || v[i].status == OR_LAZY)
			ok_upto = i + 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i].status == OR_SYNC)
			kind[i] = 0;
		else if (v[i].status == OR_ACK || (v[i].status == OR_LAZY && i < durable_upto))
			kind[i] = 1;
		else if (v[i].status == OR_LAZY || i >= ok_upto)
			kind[i] = 2;
		else
			kind[i] = 0;
	}
}

int wl_oracle_apply(const wl_model *base, const char *oracle, wl_model *out, char *err, size_t errlen)
{
	otx *v;
	size_t n;
	int rc = 0;
	if (oracle_read(oracle, &v, &n, err, errlen) != 0)
		return -1;
	unsigned char *kind = malloc(n + 1);
	if (!kind)
		rc = wl_failf(err, errlen, "out of memory");
	else
		plan(v, n, kind);
	wl_model_copy(out, base);
	for (size_t i = 0; i < n && !rc; i++) {
		if (kind[i] == 1)
			apply_otx(out, &v[i]);
		else if (kind[i] == 2)
			rc = wl_failf(err, errlen, "oracle %s: transaction %u is in doubt", oracle, v[i].seq);
	}
	free(kind);
	for (size_t i = 0; i < n; i++)
		otx_clear(&v[i]);
	free(v);
	return rc;
}

/* ---- the base store ---- */

int wl_make_base(const char *store, const wl_config *c, wl_model *m, char *err, size_t errlen)
{
	tp_options o;
	tp_env *env;
	tp_txn *t;
	wl_rng r = {0x5eed0000u + c->setup_pages};
	char b1[64];
	int rc;

	wl_options(c, &o);
	o.cache_pages = 64;
	if ((rc = tp_mkfs(store, &o)) != 0)
		return wl_failf(err, errlen, "tp_mkfs %s: %s: %s", store, rcname(rc, b1, sizeof b1), tp_errmsg());
	if ((rc = tp_open(store, &o, &env)) != 0)
		return wl_failf(err, errlen, "tp_open %s: %s: %s", store, rcname(rc, b1, sizeof b1), tp_errmsg());
	uint32_t body = tp_page_body(env);
	if (m->body != body) {
		tp_close(env);
		return wl_failf(err, errlen, "model body %u != store body %u", m->body, body);
	}
	memset(m->alloc, 0, sizeof m->alloc);
	memset(m->data, 0, (size_t)WL_MAXPG * body);
	m->alloc[0] = 1;
	m->alloc[1] = 1; /* the bitmap page: never compared */
	unsigned done = 0;
	int first = 1;
	while (done < c->setup_pages || first) {
		if ((rc = tp_begin(env, &t)) != 0)
			goto fail;
		if (first) { /* the root page gets content too */
			fill(&r, wl_page(m, 0), body);
			if ((rc = tp_page_write(t, 0, 0, wl_page(m, 0), body)) != 0)
				goto fail;
			first = 0;
		}
		for (unsigned k = 0; k < 8 && done < c->setup_pages; k++, done++) {
			uint64_t pg;
			if ((rc = tp_page_alloc(t, PAGE_TYPE, &pg)) != 0)
				goto fail;
			if (pg != 2 + done || pg >= WL_MAXPG) {
				tp_close(env);
				return wl_failf(err, errlen, "setup: allocation %u returned page %" PRIu64 ", expected %u",
					     done, pg, 2 + done);
			}
			m->alloc[pg] = 1;
			fill(&r, wl_page(m, pg), body);
			if ((rc = tp_page_write(t, pg, 0, wl_page(m, pg), body)) != 0)
				goto fail;
		}
		if ((rc = tp_commit(t, 0)) != 0)
			goto fail;
	}
	if ((rc = tp_close(env)) != 0)
		return wl_failf(err, errlen, "setup: tp_close: %s: %s", rcname(rc, b1, sizeof b1), tp_errmsg());
	return 0;
fail:
	wl_failf(err, errlen, "setup of %s: %s: %s", store, rcname(rc, b1, sizeof b1), tp_errmsg());
	tp_crash_close(env);
	return -1;
}

/* ---- running ---- */

typedef struct wtx {
	tp_txn *t;   /* NULL: not open */
	int who;     /* OWN_REG or OWN_L */
	otx o;       /* steps so far, in order */
	uint64_t freed[64];
	size_t nfreed;
} wtx;

typedef struct run {
	tp_env *env;
	const wl_config *c;
	int strict;
	wl_rng rng;
	wl_model com, cur;              /* WL2 */
	unsigned char owner[WL_MAXPG];  /* of pages allocated in cur */
	int ofd;
	unsigned seq;
	wl_stats *st;
	char *err;
	size_t errlen;
	int live;      /* live checks still meaningful (no panic, no unknown outcome) */
	char first[512]; /* the first engine error seen, for messages */
	wtx reg, L;
} run;

/* Every call: sane code, nothing pinned; a failure is fatal when strict.
 * Returns 0 to go on, -1 on a test failure (message set). */
static int called(run *x, const char *what, int rc)
{
	char b1[64];
	size_t pinned = tp_debug_pinned(x->env);
	if (pinned)
		return wl_failf(x->err, x->errlen, "seed %" PRIu64 ": %s returned %s and left %zu page(s) pinned",
			     x->c->seed, what, rcname(rc, b1, sizeof b1), pinned);
	if (rc == 0)
		return 0;
	if (x->strict)
		return wl_failf(x->err, x->errlen, "seed %" PRIu64 ": %s failed: %s: %s", x->c->seed, what,
			     rcname(rc, b1, sizeof b1), tp_errmsg());
	if (rc != EIO && rc != ENOSPC && rc != TP_EPANIC)
		return wl_failf(x->err, x->errlen,
			     "seed %" PRIu64 ": %s failed with an unexpected code under an I/O fault: %s: %s "
			     "(the first error was: %s)",
			     x->c->seed, what, rcname(rc, b1, sizeof b1), tp_errmsg(), x->first[0] ? x->first : "this one");
	if (!x->first[0])
		snprintf(x->first, sizeof x->first, "%s: %s: %.400s", what, rcname(rc, b1, sizeof b1), tp_errmsg());
	x->st->errors++;
	if (rc == TP_EPANIC)
		x->st->panicked = 1;
	return 0;
}

/* Reads page p through the engine and compares it with the model. */
static int live_page(run *x, const wl_model *m, uint64_t p, const char *when)
{
	unsigned char *buf;
	int a, rc;
	if (!x->live || wl_is_bitmap(m->body, p))
		return 0;
	rc = tp_page_allocated(x->env, p, &a);
	if (called(x, "tp_page_allocated", rc) != 0)
		return -1;
	if (rc) {
		x->live = 0;
		return 0;
	}
	if (a != m->alloc[p])
		return wl_failf(x->err, x->errlen, "seed %" PRIu64 ": %s: page %" PRIu64 " reads as %s, the model says %s",
			     x->c->seed, when, p, a ? "allocated" : "free", m->alloc[p] ? "allocated" : "free");
	if (!a)
		return 0;
	if (!(buf = malloc(m->body)))
		return wl_failf(x->err, x->errlen, "out of memory");
	rc = tp_page_read(x->env, p, 0, buf, m->body);
	if (called(x, "tp_page_read", rc) != 0) {
		free(buf);
		return -1;
	}
	if (rc) {
		free(buf);
		x->live = 0;
		return 0;
	}
	const unsigned char *e = wl_page(m, p);
	for (uint32_t i = 0; i < m->body; i++)
		if (buf[i] != e[i]) {
			unsigned char gotc = buf[i];
			free(buf);
			return wl_failf(x->err, x->errlen,
				     "seed %" PRIu64 ": %s: page %" PRIu64 " byte %u reads 0x%02x, the model says 0x%02x",
				     x->c->seed, when, p, i, gotc, e[i]);
		}
	free(buf);
	return 0;
}

static int live_touched(run *x, const otx *o, const wl_model *m, const char *when)
{
	for (size_t i = 0; i < o->n; i++)
		if (live_page(x, m, o->steps[i].pgno, when) != 0)
			return -1;
	return 0;
}

/* Pages the open transactions freed (alloc.c A1: not reallocated until they end). */
static int held(const run *x, uint64_t p)
{
	for (size_t i = 0; i < x->reg.nfreed; i++)
		if (x->reg.freed[i] == p)
			return 1;
	for (size_t i = 0; i < x->L.nfreed; i++)
		if (x->L.freed[i] == p)
			return 1;
	return 0;
}

/* Pages of owner w allocated in cur; out[] gets up to WL_MAXPG of them. */
static size_t pages_of(const run *x, int w, uint64_t *out)
{
	size_t n = 0;
	for (uint64_t p = 0; p < WL_MAXPG; p++)
		if (x->cur.alloc[p] && x->owner[p] == w && !wl_is_bitmap(x->cur.body, p))
			out[n++] = p;
	return n;
}

static int tx_begin(run *x, wtx *w, int who)
{
	int rc = tp_begin(x->env, &w->t);
	if (called(x, "tp_begin", rc) != 0)
		return -1;
	if (rc) {
		w->t = NULL;
		return 1;
	}
	if (x->st->panicked) {
		tp_abort(w->t);
		w->t = NULL;
		return wl_failf(x->err, x->errlen, "seed %" PRIu64 ": tp_begin succeeded after TP_EPANIC (panic not sticky)",
			     x->c->seed);
	}
	w->who = who;
	otx_clear(&w->o);
	w->o.seq = ++x->seq;
	w->nfreed = 0;
	return 0;
}

/* Reverts cur to com on the pages w touched (its end: abort or failure). */
static void tx_revert(run *x, wtx *w)
{
	for (size_t i = 0; i < w->o.n; i++)
		if (w->o.steps[i].pgno < WL_MAXPG)
			page_copy(&x->cur, &x->com, w->o.steps[i].pgno);
	w->t = NULL;
	w->nfreed = 0;
}

static int tx_abort(run *x, wtx *w, int after_error)
{
	int rc = tp_abort(w->t);
	w->t = NULL;
	if (called(x, "tp_abort", rc) != 0)
		return -1;
	tx_revert(x, w);
	if (rc)
		x->live = 0; /* rolled back by recovery at the next open */
	if (!after_error)
		x->st->aborts++;
	return live_touched(x, &w->o, &x->com, "after abort");
}

/* The call failed (fault runs): abort the transaction; it must be absent. */
static int tx_failed(run *x, wtx *w)
{
	return tx_abort(x, w, 1);
}

static int tx_commit(run *x, wtx *w)
{
	if (oracle_intent(x->ofd, &w->o) != 0) /* WL3 */
		return wl_failf(x->err, x->errlen, "oracle write: %s", strerror(errno));
	int lazy = (int)wl_below(&x->rng, 100) < x->c->nosync_pct;
	int rc = tp_commit(w->t, lazy ? TP_COMMIT_NOSYNC : 0);
	int was_panicked = x->st->panicked;
	w->t = NULL;
	if (called(x, "tp_commit", rc) != 0)
		return -1;
	if (rc == 0 && was_panicked && w->o.n)
		return wl_failf(x->err, x->errlen,
			     "seed %" PRIu64 ": tp_commit of transaction %u succeeded after TP_EPANIC (panic not sticky)",
			     x->c->seed, w->o.seq);
	if (rc) {
		int32_t v = rc;
		if (oracle_put(x->ofd, OR_FAIL, w->o.seq, (const unsigned char *)&v, 4) != 0)
			return wl_failf(x->err, x->errlen, "oracle write: %s", strerror(errno));
		x->st->failed_commits++;
		x->live = 0; /* its outcome is decided by recovery */
		tx_revert(x, w);
		return 0;
	}
	if (oracle_put(x->ofd, lazy ? OR_LAZY : OR_ACK, w->o.seq, NULL, 0) != 0)
		return wl_failf(x->err, x->errlen, "oracle write: %s", strerror(errno));
	x->st->commits++;
	x->st->lazy += lazy;
	if (lazy && x->st->nmarks < WL_MARKS)
		x->st->marks[x->st->nmarks++] = iosim_syncs();
	for (size_t i = 0; i < w->o.n; i++)
		if (w->o.steps[i].pgno < WL_MAXPG)
			page_copy(&x->com, &x->cur, w->o.steps[i].pgno);
	w->nfreed = 0;
	return live_touched(x, &w->o, &x->com, "after commit");
}

/* One step of w: write (mostly), allocate or free.  0 done, 1 the engine
 * call failed and w was aborted, -1 test failure. */
static int tx_step(run *x, wtx *w)
{
	uint64_t pages[WL_MAXPG];
	uint32_t body = x->cur.body;
	size_t n = pages_of(x, w->who, pages);
	uint64_t r = wl_below(&x->rng, 100);
	int rc;

	/* highest page in use: allocation stays inside the tracked range */
	uint64_t top = 0;
	for (uint64_t p = 0; p < WL_MAXPG; p++)
		if (x->cur.alloc[p] || held(x, p))
			top = p;
	unsigned minp = w->who == OWN_L ? 2 : 6;
	if (r < 8 && top + 16 < WL_MAXPG && w->nfreed < 64) { /* allocate (and write it below) */
		uint64_t pg, want = 0;
		for (uint64_t p = 2; p < WL_MAXPG; p++)
			if (!wl_is_bitmap(body, p) && !x->cur.alloc[p] && !held(x, p)) {
				want = p;
				break;
			}
		rc = tp_page_alloc(w->t, PAGE_TYPE, &pg);
		if (called(x, "tp_page_alloc", rc) != 0)
			return -1;
		if (rc)
			return tx_failed(x, w) ? -1 : 1;
		if (pg != want)
			return wl_failf(x->err, x->errlen,
				     "seed %" PRIu64 ": tp_page_alloc returned page %" PRIu64 ", first fit is %" PRIu64
				     " (%s)",
				     x->c->seed, pg, want,
				     pg < WL_MAXPG && x->cur.alloc[pg] ? "it is allocated"
				     : pg < WL_MAXPG && held(x, pg)    ? "an open transaction freed it"
									: "a lower page is free");
		if (otx_add(&w->o, ST_ALLOC, pg, 0, 0, NULL) != 0)
			return wl_failf(x->err, x->errlen, "out of memory");
		x->cur.alloc[pg] = 1;
		memset(wl_page(&x->cur, pg), 0, body);
		x->owner[pg] = (unsigned char)w->who;
		pages[0] = pg;
		n = 1;
	} else if (r < 16 && n > minp && w->nfreed < 64) { /* free */
		uint64_t pg;
		do
			pg = pages[wl_below(&x->rng, n)];
		while (pg == 0);
		rc = tp_page_free(w->t, pg);
		if (called(x, "tp_page_free", rc) != 0)
			return -1;
		if (rc)
			return tx_failed(x, w) ? -1 : 1;
		if (otx_add(&w->o, ST_FREE, pg, 0, 0, NULL) != 0)
			return wl_failf(x->err, x->errlen, "out of memory");
		x->cur.alloc[pg] = 0;
		w->freed[w->nfreed++] = pg;
		return 0;
	}
	if (!n)
		return 0;
	/* write a byte range */
	uint64_t pg = pages[wl_below(&x->rng, n)];
	uint32_t len, off;
	if (wl_below(&x->rng, 16) == 0) {
		off = 0;
		len = body;
	} else {
		len = 1 + (uint32_t)wl_below(&x->rng, 200);
		off = wl_below(&x->rng, 4) == 0 ? body - len : (uint32_t)wl_below(&x->rng, body - len + 1);
	}
	unsigned char data[65536];
	fill(&x->rng, data, len);
	rc = tp_page_write(w->t, pg, off, data, len);
	if (called(x, "tp_page_write", rc) != 0)
		return -1;
	if (rc)
		return tx_failed(x, w) ? -1 : 1;
	if (otx_add(&w->o, ST_WRITE, pg, (uint16_t)off, (uint16_t)len, data) != 0)
		return wl_failf(x->err, x->errlen, "out of memory");
	memcpy(wl_page(&x->cur, pg) + off, data, len);
	return 0;
}

/* tp_sync: every lazy commit so far becomes durable. */
static int sync_all(run *x)
{
	int rc = tp_sync(x->env);
	if (called(x, "tp_sync", rc) != 0)
		return -1;
	if (!rc && oracle_put(x->ofd, OR_SYNC, 0, NULL, 0) != 0)
		return wl_failf(x->err, x->errlen, "oracle write: %s", strerror(errno));
	if (!rc && x->st->nmarks < WL_MARKS)
		x->st->marks[x->st->nmarks++] = iosim_syncs();
	return 0;
}

static int checkpoint(run *x)
{
	int rc = tp_checkpoint(x->env);
	if (called(x, "tp_checkpoint", rc) != 0)
		return -1;
	if (!rc)
		x->st->checkpoints++;
	return 0;
}

/* L takes a step now and then (it may have been ended by a failure). */
static int l_maybe_step(run *x)
{
	if (!x->L.t || wl_below(&x->rng, 3) != 0)
		return 0;
	int rc = tx_step(x, &x->L);
	return rc < 0 ? -1 : 0;
}

int wl_run(tp_env *env, const wl_config *c, const wl_model *base, const char *oracle, int flags,
	   wl_stats *st, char *err, size_t errlen)
{
	run x;
	int rc = -1;

	memset(&x, 0, sizeof x);
	memset(st, 0, sizeof *st);
	x.env = env;
	x.c = c;
	x.strict = (flags & WL_STRICT) != 0;
	x.rng.s = wl_mix(c->seed, 0x3011);
	x.st = st;
	x.err = err;
	x.errlen = errlen;
	x.live = 1;
	x.ofd = -1;
	err[0] = 0;
	if (wl_model_init(&x.com, base->body) || wl_model_init(&x.cur, base->body)) {
		wl_failf(err, errlen, "out of memory");
		goto out;
	}
	wl_model_copy(&x.com, base);
	wl_model_copy(&x.cur, base);
	for (uint64_t p = 0; p < WL_MAXPG; p++)
		if (base->alloc[p])
			x.owner[p] = p >= 2 + c->setup_pages - c->l_pages && p < 2 + c->setup_pages ? OWN_L : OWN_REG;
	if ((x.ofd = open(oracle, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		wl_failf(err, errlen, "oracle %s: %s", oracle, strerror(errno));
		goto out;
	}
	unsigned l_start = c->long_txn ? (unsigned)wl_below(&x.rng, c->ntx / 3 + 1) : c->ntx + 1;
	for (unsigned i = 0; i < c->ntx; i++) {
		if (i == l_start) {
			int b = tx_begin(&x, &x.L, OWN_L);
			if (b < 0)
				goto out;
			if (b == 0 && tx_step(&x, &x.L) < 0)
				goto out;
		}
		if ((int)wl_below(&x.rng, 100) < c->ckpt_pct && checkpoint(&x) != 0)
			goto out;
		if (c->nosync_pct && wl_below(&x.rng, 25) == 0 && sync_all(&x) != 0)
			goto out;
		if (l_maybe_step(&x) != 0)
			goto out;
		int b = tx_begin(&x, &x.reg, OWN_REG);
		if (b < 0)
			goto out;
		if (b > 0)
			continue;
		unsigned steps = 1 + (unsigned)wl_below(&x.rng, 8);
		int ended = 0;
		for (unsigned s = 0; s < steps && !ended; s++) {
			int r = tx_step(&x, &x.reg);
			if (r < 0)
				goto out;
			ended = r > 0;
			if (!ended && (int)wl_below(&x.rng, 200) < c->ckpt_pct && checkpoint(&x) != 0)
				goto out;
			if (!ended && wl_below(&x.rng, 6) == 0 && l_maybe_step(&x) != 0)
				goto out;
		}
		if (ended)
			continue;
		if (i == c->ntx - 1 && c->last_inflight) {
			st->inflight++;
			break; /* stays open */
		}
		if (wl_below(&x.rng, 5) == 0) {
			if (tx_abort(&x, &x.reg, 0) != 0)
				goto out;
		} else if (tx_commit(&x, &x.reg) != 0) {
			goto out;
		}
	}
	if (x.L.t) {
		if (l_maybe_step(&x) != 0)
			goto out;
		if (c->long_txn == WL_END_COMMIT && x.L.t) {
			if (tx_commit(&x, &x.L) != 0)
				goto out;
		} else if (c->long_txn == WL_END_ABORT && x.L.t) {
			if (tx_abort(&x, &x.L, 0) != 0)
				goto out;
		} else if (x.L.t) {
			st->inflight++;
		}
	}
	if (c->ckpt_pct && wl_below(&x.rng, 4) == 0 && checkpoint(&x) != 0) /* with transactions in flight */
		goto out;
	rc = 0;
out:
	if (x.first[0] && getenv("TP_WL_LOUD"))
		fprintf(stderr, "workload: first error: %s\n", x.first);
	if (x.ofd >= 0)
		close(x.ofd);
	otx_clear(&x.reg.o);
	otx_clear(&x.L.o);
	wl_model_free(&x.com);
	wl_model_free(&x.cur);
	return rc;
}

/* ---- checking ---- */

/* Reads every tracked page's allocation bit and body. */
static int snapshot(tp_env *env, wl_model *s, char *err, size_t errlen)
{
	char b1[64];
	int rc, a;
	memset(s->alloc, 0, sizeof s->alloc);
	for (uint64_t p = 0; p < WL_MAXPG; p++) {
		if (wl_is_bitmap(s->body, p)) {
			s->alloc[p] = 1;
			continue;
		}
		if ((rc = tp_page_allocated(env, p, &a)) != 0)
			return wl_failf(err, errlen, "tp_page_allocated(%" PRIu64 "): %s: %s", p, rcname(rc, b1, sizeof b1),
				     tp_errmsg());
		s->alloc[p] = (unsigned char)a;
		if (!a)
			continue;
		if ((rc = tp_page_read(env, p, 0, wl_page(s, p), s->body)) != 0)
			return wl_failf(err, errlen, "tp_page_read(%" PRIu64 "): %s: %s", p, rcname(rc, b1, sizeof b1),
				     tp_errmsg());
	}
	return 0;
}

/* First difference between expected e and store s, described in out; 0 if
 * they match. */
static int diff(const wl_model *e, const wl_model *s, char *out, size_t n)
{
	for (uint64_t p = 0; p < WL_MAXPG; p++) {
		if (wl_is_bitmap(e->body, p))
			continue;
		if (e->alloc[p] != s->alloc[p]) {
			snprintf(out, n, "page %" PRIu64 " is %s, expected %s", p, s->alloc[p] ? "allocated" : "free",
				 e->alloc[p] ? "allocated" : "free");
			return 1;
		}
		if (!e->alloc[p])
			continue;
		const unsigned char *a = wl_page(e, p), *b = wl_page(s, p);
		if (memcmp(a, b, e->body) != 0) {
			uint32_t i = 0, j;
			while (a[i] == b[i])
				i++;
			for (j = e->body; j > i && a[j - 1] == b[j - 1]; j--)
				;
			snprintf(out, n, "page %" PRIu64 " bytes %u..%u differ (byte %u is 0x%02x, expected 0x%02x)", p, i,
				 j - 1, i, b[i], a[i]);
			return 1;
		}
	}
	return 0;
}

/* One more transaction after recovery: the store stays usable.  A write
 * and an allocation, committed; then an aborted write that leaves no trace. */
static int extra_txn(tp_env *env, wl_model *m, uint64_t seed, char *err, size_t errlen)
{
	wl_rng r = {wl_mix(seed, 0xe7a)};
	tp_txn *t;
	char b1[64];
	uint64_t pages[WL_MAXPG], pg, want = 0;
	size_t n = 0;
	int rc;
	unsigned char data[256];

	for (uint64_t p = 0; p < WL_MAXPG; p++)
		if (m->alloc[p] && !wl_is_bitmap(m->body, p))
			pages[n++] = p;
	for (uint64_t p = 2; p < WL_MAXPG && !want; p++)
		if (!m->alloc[p] && !wl_is_bitmap(m->body, p))
			want = p;
	if ((rc = tp_begin(env, &t)) != 0)
		goto fail;
	pg = pages[wl_below(&r, n)];
	uint32_t len = 1 + (uint32_t)wl_below(&r, 200), off = (uint32_t)wl_below(&r, m->body - len + 1);
	fill(&r, data, len);
	if ((rc = tp_page_write(t, pg, off, data, len)) != 0)
		goto fail_t;
	memcpy(wl_page(m, pg) + off, data, len);
	uint64_t np = 0;
	if (want && (rc = tp_page_alloc(t, PAGE_TYPE, &np)) != 0)
		goto fail_t;
	if (want && np != want) {
		tp_abort(t);
		return wl_failf(err, errlen, "after recovery: tp_page_alloc returned page %" PRIu64 ", first fit is %" PRIu64,
			     np, want);
	}
	if (want) {
		m->alloc[np] = 1;
		memset(wl_page(m, np), 0, m->body);
		fill(&r, data, 64);
		if ((rc = tp_page_write(t, np, 10, data, 64)) != 0)
			goto fail_t;
		memcpy(wl_page(m, np) + 10, data, 64);
	}
	if ((rc = tp_commit(t, 0)) != 0)
		goto fail;
	/* aborted: no trace */
	if ((rc = tp_begin(env, &t)) != 0)
		goto fail;
	fill(&r, data, 100);
	if ((rc = tp_page_write(t, pages[wl_below(&r, n)], 0, data, 100)) != 0)
		goto fail_t;
	if ((rc = tp_abort(t)) != 0)
		goto fail;
	return 0;
fail_t:
	tp_abort(t);
fail:
	return wl_failf(err, errlen, "after recovery, a new transaction failed: %s: %s", rcname(rc, b1, sizeof b1),
		     tp_errmsg());
}

int wl_check(const char *store, const wl_config *c, const wl_model *base, const char *oracle,
	     const wl_check_opts *co, wl_check_result *res, char *err, size_t errlen)
{
	otx *v = NULL;
	size_t nv = 0;
	wl_model exp = {0}, alt = {0}, got = {0};
	tp_options o;
	tp_env *env = NULL;
	tp_stats s;
	char b1[64], d0[256] = "", d1[256] = "";
	int rc, ret = -1;
	size_t doubt[64], nd = 0;
	unsigned char *kind = NULL;

	memset(res, 0, sizeof *res);
	err[0] = 0;
	if (oracle_read(oracle, &v, &nv, err, errlen) != 0)
		return -1;
	if (wl_model_init(&exp, base->body) || wl_model_init(&alt, base->body) || wl_model_init(&got, base->body)) {
		wl_failf(err, errlen, "out of memory");
		goto out;
	}
	if (!(kind = malloc(nv + 1))) {
		wl_failf(err, errlen, "out of memory");
		goto out;
	}
	plan(v, nv, kind);
	wl_model_copy(&exp, base);
	for (size_t i = 0; i < nv; i++) {
		if (kind[i] == 1) {
			apply_otx(&exp, &v[i]);
			res->acked++;
		} else if (kind[i] == 2) {
			if (nd == sizeof doubt / sizeof doubt[0]) {
				wl_failf(err, errlen, "more than %zu transactions in doubt", nd);
				goto out;
			}
			doubt[nd++] = i;
		}
	}
	res->in_doubt = (unsigned)nd;

	wl_options(c, &o);
	if ((rc = tp_open(store, &o, &env)) != 0) {
		wl_failf(err, errlen, "recovery failed: tp_open: %s: %s", rcname(rc, b1, sizeof b1), tp_errmsg());
		env = NULL;
		goto out;
	}
	tp_stats_get(env, &s);
	res->rec_redone = s.rec_redone;
	res->rec_losers = s.rec_losers;
	res->rec_cut_bytes = s.rec_cut_bytes;
	if (snapshot(env, &got, err, errlen) != 0)
		goto out;
	/* the first j of the transactions in doubt, for some j (log order) */
	int matched = -1;
	wl_model_copy(&alt, &exp);
	for (size_t j = 0; j <= nd && matched < 0; j++) {
		if (j)
			apply_otx(&alt, &v[doubt[j - 1]]);
		if (!diff(&alt, &got, j ? d1 : d0, j ? sizeof d1 : sizeof d0))
			matched = (int)j;
	}
	if (matched < 0) {
		if (nd)
			wl_failf(err, errlen,
			      "after recovery the store matches no prefix of the %zu transaction(s) in doubt "
			      "(transactions %u..%u): without them: %s; with all of them: %s (%u durable commits)",
			      nd, v[doubt[0]].seq, v[doubt[nd - 1]].seq, d0, d1, res->acked);
		else
			wl_failf(err, errlen, "after recovery: %s (%u durable commits, none in doubt)", d0, res->acked);
		goto out;
	}
	res->doubt_applied = matched;
	wl_model_copy(&exp, &alt);
	if (tp_debug_pinned(env)) {
		wl_failf(err, errlen, "after recovery and reads, %zu page(s) stay pinned", tp_debug_pinned(env));
		goto out;
	}
	if (co->extra_txn && extra_txn(env, &exp, co->seed, err, errlen) != 0)
		goto out;
	int clean = (co->seed >> 7) % 2 == 0;
	if (clean) {
		rc = tp_close(env);
		env = NULL;
		if (rc) {
			wl_failf(err, errlen, "tp_close after recovery: %s: %s", rcname(rc, b1, sizeof b1), tp_errmsg());
			goto out;
		}
	} else {
		tp_crash_close(env);
		env = NULL;
	}
	/* recovery again: the same state */
	if ((rc = tp_open(store, &o, &env)) != 0) {
		wl_failf(err, errlen, "second open after recovery (%s close): tp_open: %s: %s", clean ? "clean" : "crash",
		      rcname(rc, b1, sizeof b1), tp_errmsg());
		env = NULL;
		goto out;
	}
	tp_stats_get(env, &s);
	if (clean && (s.rec_redone || s.rec_losers)) {
		wl_failf(err, errlen,
		      "reopening after a clean close recovered again: %" PRIu64 " records redone, %" PRIu64 " losers",
		      s.rec_redone, s.rec_losers);
		goto out;
	}
	if (snapshot(env, &got, err, errlen) != 0)
		goto out;
	if (diff(&exp, &got, d0, sizeof d0)) {
		wl_failf(err, errlen, "second recovery (%s close) changed the state: %s", clean ? "clean" : "crash", d0);
		goto out;
	}
	if (tp_debug_pinned(env)) {
		wl_failf(err, errlen, "after the second open, %zu page(s) stay pinned", tp_debug_pinned(env));
		goto out;
	}
	rc = tp_close(env);
	env = NULL;
	if (rc) {
		wl_failf(err, errlen, "final tp_close: %s: %s", rcname(rc, b1, sizeof b1), tp_errmsg());
		goto out;
	}
	ret = 0;
out:
	if (env)
		tp_crash_close(env);
	for (size_t i = 0; i < nv; i++)
		otx_clear(&v[i]);
	free(v);
	free(kind);
	wl_model_free(&exp);
	wl_model_free(&alt);
	wl_model_free(&got);
	return ret;
}

/* ---- files ---- */

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int wl_tmpdir(const char *tag, char *out, size_t n)
{
	const char *t = getenv("TMPDIR");
	struct stat st;
	if (!t || !*t)
		t = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	if ((size_t)snprintf(out, n, "%s/tpfs-%s-XXXXXX", t, tag) >= n)
		return -1;
	return mkdtemp(out) ? 0 : -1;
}

int wl_rmtree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out, rc = 0;
	char buf[65536];
	if (in < 0)
		return -1;
	if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		close(in);
		return -1;
	}
	for (;;) {
		ssize_t r = read(in, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -1;
			break;
		}
		if (r == 0)
			break;
		if (wl_write_all(out, buf, (size_t)r) != 0) {
			rc = -1;
			break;
		}
	}
	close(in);
	close(out);
	return rc;
}

static int copy_dir(const char *src, const char *dst)
{
	DIR *d = opendir(src);
	struct dirent *e;
	int rc = 0;
	if (!d)
		return -1;
	if (mkdir(dst, 0755) < 0 && errno != EEXIST) {
		closedir(d);
		return -1;
	}
	while (rc == 0 && (e = readdir(d)) != NULL) {
		char a[PATH_MAX], b[PATH_MAX];
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(a, sizeof a, "%s/%s", src, e->d_name);
		snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
		if (lstat(a, &st) < 0)
			rc = -1;
		else if (S_ISDIR(st.st_mode))
			rc = copy_dir(a, b);
		else if (S_ISREG(st.st_mode))
			rc = copy_file(a, b);
	}
	closedir(d);
	return rc;
}

int wl_copy_store(const char *src, const char *dst)
{
	if (wl_rmtree(dst) != 0)
		return -1;
	return copy_dir(src, dst);
}

/* ---- children ---- */

wl_shared *wl_shared_new(void)
{
	void *p = mmap(NULL, sizeof(wl_shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, sizeof(wl_shared));
	return p;
}

void wl_shared_free(wl_shared *s)
{
	if (s)
		munmap(s, sizeof *s);
}

void wl_shared_reset(wl_shared *s) { memset(s, 0, sizeof *s); }

void wl_shared_counters(wl_shared *s)
{
	s->syncs = iosim_syncs();
	s->calls = iosim_calls();
	s->faults = iosim_faults();
	for (int i = 0; i < WL_NPOINTS; i++)
		s->hits[i] = iosim_point_hits(wl_points[i]);
}

int wl_fork(int (*fn)(void *arg), void *arg, unsigned timeout_s)
{
	int status;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (timeout_s) { /* a hung child dies of SIGALRM: reported, not waited on forever */
			signal(SIGALRM, SIG_DFL);
			alarm(timeout_s);
		}
		_exit(fn(arg));
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

const char *wl_status_str(int status, char *buf, size_t n)
{
	if (status == -1)
		snprintf(buf, n, "fork/wait failed: %s", strerror(errno));
	else if (WIFEXITED(status))
		snprintf(buf, n, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, n, "status 0x%x", status);
	return buf;
}

size_t wl_heap_bytes(void)
{
#ifdef WL_ASAN
	return __sanitizer_get_current_allocated_bytes();
#else
	return 0; /* glibc's counts include its caches of freed chunks: not exact */
#endif
}

int wl_heap_counted(void)
{
#ifdef WL_ASAN
	return 1;
#else
	return 0;
#endif
}
