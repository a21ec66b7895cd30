/*
 * fs_ws -- a user transaction's write set (fs_ws.h): a skip list of
 * (tree, key) -> value | deletion mark; values in memory while those over
 * WS_INLINE bytes take WS_MEM at most, the rest in an unnamed temporary
 * file (opened when first needed).
 *
 * Undo per call: the first change a call makes to a node saves the node's
 * old state (value storage included: the new value gets new storage) in the
 * call's undo list; later changes by the same call reuse the new storage.
 * Keeping the call frees the old storage (spill slots go to a free list by
 * size class); undoing frees the new and puts the old back.
 */
#include "fs_ws.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WS_LEVELS 24
#define WS_INLINE 256
#define WS_MEM (1u << 20)     /* larger values stay in memory up to this much; then the file */
#define WS_SLOT 4096          /* spill slots are multiples of this */
#define WS_CLASSES 17         /* free lists for 1..16 slots (64 KiB); larger ones leak until the end */

enum { ST_ABSENT, ST_VAL, ST_DEL };

typedef struct store_ref {
	unsigned char *mem; /* value in memory, or NULL */
	uint32_t mlen;      /* bytes of it counted in ws->memb (0: inline) */
	uint64_t foff;      /* spilled value: offset in the file */
	uint32_t cap;       /* spilled: slot bytes (0: not spilled) */
} store_ref;

struct ws_node {
	uint8_t tree, state, level;
	uint32_t klen, vlen;
	uint64_t call;          /* the call that last changed it */
	store_ref v;
	ws_node *next[WS_LEVELS]; /* only level entries are allocated... see node_new */
};

typedef struct undo_rec {
	ws_node *n;
	uint8_t state;
	uint32_t vlen;
	store_ref v;
} undo_rec;

typedef struct slot {
	uint64_t foff;
	struct slot *next;
} slot;

struct fs_ws {
	ws_node *head;
	int fd;                /* the spill file, or -1 until needed */
	char dir[4096];
	uint64_t fend;         /* end of the spill file */
	size_t memb;           /* bytes of values over WS_INLINE in memory (WS_MEM at most) */
	slot *freel[WS_CLASSES];
	uint64_t call;         /* current call number */
	undo_rec *undo;
	size_t nundo, capundo;
	uint64_t records, bytes;
	uint32_t rnd;
};

/* The key bytes follow the node's tower. */
static unsigned char *nkey(const ws_node *n) { return (unsigned char *)&n->next[n->level]; }

static ws_node *node_new(int level, int tree, const void *key, size_t klen)
{
	size_t sz = offsetof(ws_node, next) + (size_t)level * sizeof(ws_node *) + klen;
	ws_node *n = calloc(1, sz);
	if (!n)
		return NULL;
	n->level = (uint8_t)level;
	n->tree = (uint8_t)tree;
	n->klen = (uint32_t)klen;
	memcpy(nkey(n), key, klen);
	return n;
}

int ws_create(const char *spill_dir, fs_ws **out)
{
	fs_ws *ws = calloc(1, sizeof *ws);
	if (!ws)
		return ENOMEM;
	if (!(ws->head = node_new(WS_LEVELS, -1, "", 0))) {
		free(ws);
		return ENOMEM;
	}
	ws->fd = -1;
	snprintf(ws->dir, sizeof ws->dir, "%s", spill_dir);
	ws->call = 1;
	ws->rnd = 0x9e3779b9u;
	*out = ws;
	return 0;
}

void ws_destroy(fs_ws *ws)
{
	if (!ws)
		return;
	for (ws_node *n = ws->head, *nx; n; n = nx) {
		nx = n->next[0];
		free(n->v.mem);
		free(n);
	}
	for (size_t i = 0; i < ws->nundo; i++)
		free(ws->undo[i].v.mem);
	for (int c = 0; c < WS_CLASSES; c++)
		for (slot *s = ws->freel[c], *nx; s; s = nx) {
			nx = s->next;
			free(s);
		}
	free(ws->undo);
	if (ws->fd >= 0)
		close(ws->fd);
	free(ws);
}

/* ---- ordering ---- */

static int cmp(int tree, const void *key, size_t klen, const ws_node *n)
{
	if (tree != n->tree)
		return tree < n->tree ? -1 : 1;
	size_t m = klen < n->klen ? klen : n->klen;
	int c = memcmp(key, nkey(n), m);
	if (c)
		return c;
	return klen < n->klen ? -1 : klen > n->klen;
}

/* The last node before (tree, key) at every level (gt: before-or-equal). */
static void find_prev(fs_ws *ws, int tree, const void *key, size_t klen, int gt, ws_node **prev)
{
	ws_node *x = ws->head;
	for (int l = WS_LEVELS - 1; l >= 0; l--) {
		while (x->next[l]) {
			int c = cmp(tree, key, klen, x->next[l]);
			if (c < 0 || (c == 0 && !gt))
				break;
			x = x->next[l];
		}
		prev[l] = x;
	}
}

static ws_node *find(fs_ws *ws, int tree, const void *key, size_t klen)
{
	ws_node *prev[WS_LEVELS];
	find_prev(ws, tree, key, klen, 0, prev);
	ws_node *n = prev[0]->next[0];
	return n && cmp(tree, key, klen, n) == 0 ? n : NULL;
}

static ws_node *insert(fs_ws *ws, int tree, const void *key, size_t klen)
{
	ws_node *prev[WS_LEVELS];
	find_prev(ws, tree, key, klen, 0, prev);
	ws_node *n = prev[0]->next[0];
	if (n && cmp(tree, key, klen, n) == 0)
		return n;
	int level = 1;
	for (;;) { /* p = 1/4 */
		ws->rnd ^= ws->rnd << 13;
		ws->rnd ^= ws->rnd >> 17;
		ws->rnd ^= ws->rnd << 5;
		if ((ws->rnd & 3) || level == WS_LEVELS)
			break;
		level++;
	}
	if (!(n = node_new(level, tree, key, klen)))
		return NULL;
	for (int l = 0; l < level; l++) {
		n->next[l] = prev[l]->next[l];
		prev[l]->next[l] = n;
	}
	ws->records++;
	return n;
}

/* ---- value storage ---- */

static int spill_open(fs_ws *ws)
{
	if (ws->fd >= 0)
		return 0;
	ws->fd = open(ws->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (ws->fd < 0) { /* a file system without O_TMPFILE */
		char path[4200];
		snprintf(path, sizeof path, "%s/.tpfs-tx-XXXXXX", ws->dir);
		ws->fd = mkostemp(path, O_CLOEXEC);
		if (ws->fd < 0)
			return errno;
		unlink(path);
	}
	return 0;
}

static int slot_class(uint32_t cap) { return (int)(cap / WS_SLOT); }

static void slot_free(fs_ws *ws, const store_ref *r)
{
	int c = slot_class(r->cap);
	if (c >= WS_CLASSES)
		return;
	slot *s = malloc(sizeof *s);
	if (!s)
		return;
	s->foff = r->foff;
	s->next = ws->freel[c];
	ws->freel[c] = s;
}

static void ref_free(fs_ws *ws, store_ref *r)
{
	if (r->cap)
		slot_free(ws, r);
	ws->memb -= r->mlen;
	free(r->mem);
	memset(r, 0, sizeof *r);
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;
	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += w, len -= (size_t)w, off += (uint64_t)w;
	}
	return 0;
}

/* Stores val in r, which holds no value (fresh) or may be overwritten. */
static int ref_store(fs_ws *ws, store_ref *r, const void *val, size_t vlen)
{
	int rc;
	if (vlen <= WS_INLINE || ws->memb + vlen <= WS_MEM) {
		unsigned char *m = malloc(vlen ? vlen : 1);
		if (!m)
			return ENOMEM;
		memcpy(m, val, vlen);
		ref_free(ws, r);
		r->mem = m;
		if (vlen > WS_INLINE) {
			r->mlen = (uint32_t)vlen;
			ws->memb += vlen;
		}
		return 0;
	}
	uint32_t cap = (uint32_t)((vlen + WS_SLOT - 1) / WS_SLOT * WS_SLOT);
	if (r->cap < cap || r->mem) {
		ref_free(ws, r);
		if ((rc = spill_open(ws)) != 0)
			return rc;
		int c = slot_class(cap);
		if (c < WS_CLASSES && ws->freel[c]) {
			slot *s = ws->freel[c];
			ws->freel[c] = s->next;
			r->foff = s->foff;
			free(s);
		} else {
			r->foff = ws->fend;
			ws->fend += cap;
		}
		r->cap = cap;
	}
	return pwrite_all(ws->fd, val, vlen, r->foff);
}

static int ref_load(fs_ws *ws, const store_ref *r, uint32_t vlen, void *buf, size_t cap)
{
	size_t n = vlen < cap ? vlen : cap;
	if (!n)
		return 0;
	if (r->mem) {
		memcpy(buf, r->mem, n);
		return 0;
	}
	char *p = buf;
	uint64_t off = r->foff;
	while (n) {
		ssize_t got = pread(ws->fd, p, n, (off_t)off);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (got == 0)
			return EIO;
		p += got, n -= (size_t)got, off += (uint64_t)got;
	}
	return 0;
}

/* ---- the interface ---- */

int ws_get(fs_ws *ws, int tree, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	ws_node *n = find(ws, tree, key, klen);
	if (!n || n->state == ST_ABSENT)
		return -1;
	if (n->state == ST_DEL)
		return 0;
	if (vlen)
		*vlen = n->vlen;
	int rc = val ? ref_load(ws, &n->v, n->vlen, val, cap) : 0;
	return rc ? rc : 1;
}

int ws_put(fs_ws *ws, int tree, const void *key, size_t klen, const void *val, size_t vlen)
{
	ws_node *n = insert(ws, tree, key, klen);
	int rc;
	if (!n)
		return ENOMEM;
	if (n->call != ws->call) { /* first change by this call: keep the old state for undo */
		if (ws->nundo == ws->capundo) {
			size_t c = ws->capundo ? ws->capundo * 2 : 64;
			undo_rec *u = realloc(ws->undo, c * sizeof *u);
			if (!u)
				return ENOMEM;
			ws->undo = u;
			ws->capundo = c;
		}
		ws->undo[ws->nundo++] = (undo_rec){.n = n, .state = n->state, .vlen = n->vlen, .v = n->v};
		memset(&n->v, 0, sizeof n->v);
		n->call = ws->call;
	}
	if (val) {
		if ((rc = ref_store(ws, &n->v, val, vlen)) != 0)
			return rc; /* the node's state is unchanged; the call is undone */
		n->state = ST_VAL;
		n->vlen = (uint32_t)vlen;
		ws->bytes += vlen;
	} else {
		ref_free(ws, &n->v);
		n->state = ST_DEL;
		n->vlen = 0;
	}
	return 0;
}

void ws_call_begin(fs_ws *ws)
{
	ws->call++;
	ws->nundo = 0;
}

void ws_call_end(fs_ws *ws, int undo)
{
	for (size_t i = ws->nundo; i-- > 0;) {
		undo_rec *u = &ws->undo[i];
		if (undo) {
			ref_free(ws, &u->n->v);
			u->n->v = u->v;
			u->n->state = u->state;
			u->n->vlen = u->vlen;
			u->n->call = 0;
		} else {
			ref_free(ws, &u->v);
		}
	}
	ws->nundo = 0;
	ws->call++;
}

static ws_node *skip_absent(ws_node *n, int tree)
{
	while (n && n->tree == tree && n->state == ST_ABSENT)
		n = n->next[0];
	return n && n->tree == tree ? n : NULL;
}

ws_node *ws_seek(fs_ws *ws, int tree, const void *key, size_t klen, int gt)
{
	ws_node *prev[WS_LEVELS];
	find_prev(ws, tree, key, klen, gt, prev);
	return skip_absent(prev[0]->next[0], tree);
}

ws_node *ws_next(fs_ws *ws, ws_node *n)
{
	(void)ws;
	return skip_absent(n->next[0], n->tree);
}

int ws_node_tree(const ws_node *n) { return n->tree; }

const unsigned char *ws_node_key(const ws_node *n, size_t *klen)
{
	*klen = n->klen;
	return nkey(n);
}

int ws_node_is_del(const ws_node *n) { return n->state == ST_DEL; }

int ws_node_value(fs_ws *ws, const ws_node *n, void *buf, size_t cap, size_t *vlen)
{
	*vlen = n->vlen;
	return ref_load(ws, &n->v, n->vlen, buf, cap);
}

uint64_t ws_records(const fs_ws *ws) { return ws->records; }
uint64_t ws_bytes(const fs_ws *ws) { return ws->bytes; }
