/*
 * bt_model -- see bt_model.h.  A sorted array: inserts and deletes move
 * the tail (fine for the few thousand records a test holds).
 */
#include "bt_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t get64le(const unsigned char *p)
{
	uint64_t x = 0;
	for (int i = 7; i >= 0; i--)
		x = x << 8 | p[i];
	return x;
}

int btm_cmp(int u64, const void *a, size_t al, const void *b, size_t bl)
{
	if (u64 && al == 8 && bl == 8) {
		uint64_t x = get64le(a), y = get64le(b);
		return x < y ? -1 : x > y;
	}
	int c = memcmp(a, b, al < bl ? al : bl);
	if (c)
		return c < 0 ? -1 : 1;
	return al < bl ? -1 : al > bl;
}

void btm_init(btm *m, int u64)
{
	memset(m, 0, sizeof *m);
	m->u64 = u64;
}

void btm_clear(btm *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->r[i].k);
		free(m->r[i].v);
	}
	m->n = 0;
}

void btm_free(btm *m)
{
	btm_clear(m);
	free(m->r);
	m->r = NULL;
	m->cap = 0;
}

static unsigned char *dup(const void *p, size_t n)
{
	unsigned char *q = malloc(n ? n : 1);
	if (q && n)
		memcpy(q, p, n);
	return q;
}

static int reserve(btm *m, size_t n)
{
	if (n <= m->cap)
		return 0;
	size_t nc = m->cap ? m->cap * 2 : 64;
	while (nc < n)
		nc *= 2;
	btm_rec *r = realloc(m->r, nc * sizeof *r);
	if (!r)
		return ENOMEM;
	m->r = r;
	m->cap = nc;
	return 0;
}

int btm_copy(btm *dst, const btm *src)
{
	btm_clear(dst);
	dst->u64 = src->u64;
	if (reserve(dst, src->n))
		return ENOMEM;
	for (size_t i = 0; i < src->n; i++) {
		btm_rec *d = &dst->r[i];
		d->kl = src->r[i].kl;
		d->vl = src->r[i].vl;
		d->k = dup(src->r[i].k, d->kl);
		d->v = dup(src->r[i].v, d->vl);
		if (!d->k || !d->v) {
			free(d->k);
			free(d->v);
			dst->n = i;
			return ENOMEM;
		}
	}
	dst->n = src->n;
	return 0;
}

size_t btm_find(const btm *m, const void *k, size_t kl, int *found)
{
	size_t lo = 0, hi = m->n;
	*found = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = btm_cmp(m->u64, m->r[mid].k, m->r[mid].kl, k, kl);
		if (c < 0) {
			lo = mid + 1;
		} else {
			if (c == 0)
				*found = 1;
			hi = mid;
		}
	}
	return lo;
}

const btm_rec *btm_get(const btm *m, const void *k, size_t kl)
{
	int found;
	size_t i = btm_find(m, k, kl, &found);
	return found ? &m->r[i] : NULL;
}

int btm_put(btm *m, const void *k, size_t kl, const void *v, size_t vl)
{
	int found;
	size_t i = btm_find(m, k, kl, &found);
	unsigned char *nv = dup(v, vl);
	if (!nv)
		return ENOMEM;
	if (found) {
		free(m->r[i].v);
		m->r[i].v = nv;
		m->r[i].vl = vl;
		return 0;
	}
	unsigned char *nk = dup(k, kl);
	if (!nk || reserve(m, m->n + 1)) {
		free(nk);
		free(nv);
		return ENOMEM;
	}
	memmove(&m->r[i + 1], &m->r[i], (m->n - i) * sizeof *m->r);
	m->r[i] = (btm_rec){nk, nv, kl, vl};
	m->n++;
	return 0;
}

int btm_del(btm *m, const void *k, size_t kl)
{
	int found;
	size_t i = btm_find(m, k, kl, &found);
	if (!found)
		return 0;
	free(m->r[i].k);
	free(m->r[i].v);
	memmove(&m->r[i], &m->r[i + 1], (m->n - i - 1) * sizeof *m->r);
	m->n--;
	return 1;
}

long btm_seek(const btm *m, const void *k, size_t kl, int how)
{
	int found;
	size_t i;
	switch (how) {
	case TP_FIRST:
		return m->n ? 0 : -1;
	case TP_LAST:
		return m->n ? (long)m->n - 1 : -1;
	case TP_SEEK_GE:
		i = btm_find(m, k, kl, &found);
		return i < m->n ? (long)i : -1;
	case TP_SEEK_GT:
		i = btm_find(m, k, kl, &found);
		if (found)
			i++;
		return i < m->n ? (long)i : -1;
	case TP_SEEK_LE:
		i = btm_find(m, k, kl, &found);
		if (found)
			return (long)i;
		return (long)i - 1;
	case TP_SEEK_LT:
		i = btm_find(m, k, kl, &found);
		return (long)i - 1;
	default:
		return -1;
	}
}

const char *btm_keystr(const void *k, size_t kl, char *out, size_t n)
{
	const unsigned char *p = k;
	size_t used = (size_t)snprintf(out, n, "k[%zu]=", kl);
	for (size_t i = 0; i < kl && i < 24 && used + 3 < n; i++)
		used += (size_t)snprintf(out + used, n - used, "%02x", p[i]);
	if (kl > 24 && used + 4 < n)
		snprintf(out + used, n - used, "...");
	return out;
}

int btm_equal(const btm *want, const btm *got, char *why, size_t n)
{
	char a[96], b[96];
	size_t i;
	for (i = 0; i < want->n && i < got->n; i++) {
		const btm_rec *x = &want->r[i], *y = &got->r[i];
		if (btm_cmp(want->u64, x->k, x->kl, y->k, y->kl) != 0 || x->kl != y->kl) {
			snprintf(why, n, "record %zu: expected key %s, found key %s", i, btm_keystr(x->k, x->kl, a, sizeof a),
				 btm_keystr(y->k, y->kl, b, sizeof b));
			return 0;
		}
		if (x->vl != y->vl || (x->vl && memcmp(x->v, y->v, x->vl) != 0)) {
			size_t d = 0;
			while (d < x->vl && d < y->vl && x->v[d] == y->v[d])
				d++;
			snprintf(why, n, "record %zu (%s): expected a value of %zu bytes, found %zu bytes (first difference at byte %zu)",
				 i, btm_keystr(x->k, x->kl, a, sizeof a), x->vl, y->vl, d);
			return 0;
		}
	}
	if (i < want->n) {
		snprintf(why, n, "%zu records expected, %zu found; first missing: %s", want->n, got->n,
			 btm_keystr(want->r[i].k, want->r[i].kl, a, sizeof a));
		return 0;
	}
	if (i < got->n) {
		snprintf(why, n, "%zu records expected, %zu found; first extra: %s", want->n, got->n,
			 btm_keystr(got->r[i].k, got->r[i].kl, a, sizeof a));
		return 0;
	}
	return 1;
}

int btm_load(btm *m, tp_txn *t, tp_tree *tr, char *why, size_t n)
{
	tp_cursor *c;
	char a[96], b[96];
	int rc;
	btm_clear(m);
	if ((rc = tp_cursor_open(t, tr, &c)) != 0) {
		snprintf(why, n, "tp_cursor_open: %s", tp_errmsg());
		return rc;
	}
	for (rc = tp_cursor_seek(c, "", 0, TP_FIRST); rc == 0; rc = tp_cursor_next(c)) {
		const void *k, *v;
		size_t kl, vl;
		if ((rc = tp_cursor_get(c, &k, &kl, &v, &vl)) != 0) {
			snprintf(why, n, "tp_cursor_get after a successful step: %d", rc);
			break;
		}
		if (m->n && btm_cmp(m->u64, m->r[m->n - 1].k, m->r[m->n - 1].kl, k, kl) >= 0) {
			snprintf(why, n, "cursor: key %s after %s (record %zu): not increasing", btm_keystr(k, kl, a, sizeof a),
				 btm_keystr(m->r[m->n - 1].k, m->r[m->n - 1].kl, b, sizeof b), m->n);
			rc = TP_ECORRUPT;
			break;
		}
		/* appending in order */
		if ((rc = reserve(m, m->n + 1)) != 0)
			break;
		btm_rec *r = &m->r[m->n];
		r->k = dup(k, kl);
		r->v = dup(v, vl);
		r->kl = kl;
		r->vl = vl;
		if (!r->k || !r->v) {
			free(r->k);
			free(r->v);
			rc = ENOMEM;
			break;
		}
		m->n++;
	}
	if (rc == TP_ENOTFOUND)
		rc = 0;
	else if (rc != TP_ECORRUPT && rc != ENOMEM && rc != 0)
		snprintf(why, n, "cursor step after %zu records: %d (%s): %s", m->n, rc, tp_strerror(rc), tp_errmsg());
	tp_cursor_close(c);
	return rc;
}

int btm_check_backward(const btm *m, tp_txn *t, tp_tree *tr, char *why, size_t n)
{
	tp_cursor *c;
	char a[96], b[96];
	size_t i = m->n;
	int rc;
	if ((rc = tp_cursor_open(t, tr, &c)) != 0) {
		snprintf(why, n, "tp_cursor_open: %s", tp_errmsg());
		return rc;
	}
	for (rc = tp_cursor_seek(c, NULL, 0, TP_LAST); rc == 0; rc = tp_cursor_prev(c)) {
		const void *k, *v;
		size_t kl, vl;
		tp_cursor_get(c, &k, &kl, &v, &vl);
		if (i == 0) {
			snprintf(why, n, "backward scan: extra key %s before the first", btm_keystr(k, kl, a, sizeof a));
			rc = TP_ECORRUPT;
			break;
		}
		const btm_rec *r = &m->r[--i];
		if (r->kl != kl || btm_cmp(m->u64, r->k, r->kl, k, kl) != 0 || r->vl != vl ||
		    (vl && memcmp(r->v, v, vl) != 0)) {
			snprintf(why, n, "backward scan: record %zu is %s (%zu bytes), expected %s (%zu bytes)", i,
				 btm_keystr(k, kl, a, sizeof a), vl, btm_keystr(r->k, r->kl, b, sizeof b), r->vl);
			rc = TP_ECORRUPT;
			break;
		}
	}
	if (rc == TP_ENOTFOUND) {
		rc = 0;
		if (i != 0) {
			snprintf(why, n, "backward scan ended with %zu records not seen (next expected %s)", i,
				 btm_keystr(m->r[i - 1].k, m->r[i - 1].kl, a, sizeof a));
			rc = TP_ECORRUPT;
		}
	} else if (rc != TP_ECORRUPT) {
		snprintf(why, n, "backward cursor step: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
	}
	tp_cursor_close(c);
	return rc;
}

uint64_t btm_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void btm_fill(void *buf, size_t len, uint64_t s)
{
	unsigned char *p = buf;
	size_t i = 0;
	while (i < len) {
		uint64_t x = btm_rand(&s);
		for (int j = 0; j < 8 && i < len; j++, x >>= 8)
			p[i++] = (unsigned char)x;
	}
}
