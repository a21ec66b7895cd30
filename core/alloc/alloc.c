/*
 * alloc -- the page allocator's state (alloc.h).
 *
 * Design
 *   Free pages are bits in bitmap pages (op_page.c).  A clear bit is not
 *   always a page that can be taken: a page freed by a transaction that
 *   may still roll back, or (for ordered data) by a commit a crash may
 *   still lose, must wait.  This module keeps those pages in sets of
 *   pgno + 1 (open addressing, 0: an empty slot), one per open transaction
 *   that freed pages and two generations of committed ones (the limbo),
 *   and the two starting points of a search.  It also keeps the pages that
 *   commits freed, with the commit's LSN, until they can be given back to
 *   the host file system (A4), and which chunks of the page file are known
 *   to have their disk blocks (A5).
 *
 * Invariants
 *   A1  A page freed by an open transaction is not reallocated until that
 *       transaction ends.
 *       Its rollback would mark the page allocated again, under a new
 *       owner.  The losers recovery rolls back get their sets from the log
 *       before any is rolled back (rec.c R7).
 *   A2  A page freed by a committed transaction is not reallocated as an
 *       ordered page until that commit is durable (the limbo).
 *       An ordered page is rewritten unlogged (ord.c N1), and a crash that
 *       lost the commit would give the page back to its old owner with
 *       someone else's bytes.  (A logged reuse is safe: its records follow
 *       the free's.)
 *   A3  The hint only grows past a group found full, and goes back to 0
 *       whenever pages may have become free.
 *       So a search that starts at the hint never skips a free page for
 *       long: at worst it searches full groups again.
 *
 *   A4  A page is returned to the file system (a hole, op_page.c) only
 *       once it is free, no open transaction freed it, and the commit
 *       that last freed it is older than the redo start of a completed
 *       checkpoint; allocating the page takes it out of the candidates.
 *       Then no redo touches the page (every record that changed it is
 *       older than where redo starts), no undo can give it back (its free
 *       committed), and no commit a crash may lose freed it: nothing can
 *       ever need its old bytes.  A page freed by a rollback (an
 *       allocation undone) is not a candidate until a commit frees it.
 *   A5  A chunk of a group is known to have its disk blocks only after a
 *       reserve of the whole chunk succeeded, and stops being known
 *       before any page of it is punched; both under the group's bitmap
 *       latch.
 *       An allocation in a chunk not known reserves the page's blocks
 *       before it is logged (buf.c B14): a write-back never meets a hole
 *       on a full disk.  After an open every chunk is unknown, since a
 *       hole made before may be anywhere.
 *
 * Lock order: am->mu is a leaf (only log_durable is called under it).
 */
#include "alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct alloc_freed {
	uint64_t *set;       /* A1: under am->mu; pgno + 1 (0: empty slot) */
	size_t n, cap;       /* cap: a power of two, at least twice n */
	alloc_freed *next, **pprev; /* am->open, under am->mu */
};

struct alloc_mgr {
	log_mgr *lg;
	pthread_mutex_t mu;  /* the sets below */
	uint64_t hint;       /* atomic: A3, alloc_hint */
	uint64_t rover;      /* atomic: alloc_rover */
	alloc_freed *open;   /* A1: sets of open transactions */
	/* A2: two generations of pages freed by commits, each a set of pgno + 1
	 * with the LSN of its last commit; old is dropped once the log is
	 * durable past its LSN, then the young one ages */
	struct limbo {
		uint64_t *set;
		size_t n, cap;
		uint64_t lsn;
	} limbo[2];
	/* A4: pages freed by commits, key pgno + 1 (0: empty), value the
	 * LSN of the commit; linear probing, deletion by backward shift */
	struct {
		uint64_t *key, *lsn;
		size_t cap;  /* a power of two, at least twice n */
		size_t n;    /* atomic reads outside mu: 0 skips alloc_taken */
	} ret;
	uint64_t *chunks;    /* A5: under am->mu; bit c: chunk c known reserved */
	size_t nchunks;      /* bits in chunks */
};

int alloc_open(log_mgr *lg, alloc_mgr **out)
{
	alloc_mgr *am = calloc(1, sizeof *am);
	if (!am)
		return ENOMEM;
	am->lg = lg;
	pthread_mutex_init(&am->mu, NULL);
	*out = am;
	return 0;
}

void alloc_close(alloc_mgr *am)
{
	if (!am)
		return;
	while (am->open) {
		alloc_freed *f = am->open;
		alloc_release(am, &f);
	}
	pthread_mutex_destroy(&am->mu);
	free(am->limbo[0].set);
	free(am->limbo[1].set);
	free(am->ret.key);
	free(am->ret.lsn);
	free(am->chunks);
	free(am);
}

uint64_t alloc_hint(alloc_mgr *am) { return __atomic_load_n(&am->hint, __ATOMIC_RELAXED); }

void alloc_full(alloc_mgr *am, uint64_t group)
{
	uint64_t want = group;
	/* only from the group the hint names: a reset to 0 meanwhile wins */
	__atomic_compare_exchange_n(&am->hint, &want, group + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

void alloc_reset(alloc_mgr *am) { __atomic_store_n(&am->hint, 0, __ATOMIC_RELAXED); }

uint64_t alloc_rover(alloc_mgr *am) { return __atomic_load_n(&am->rover, __ATOMIC_RELAXED); }
void alloc_set_rover(alloc_mgr *am, uint64_t pgno) { __atomic_store_n(&am->rover, pgno, __ATOMIC_RELAXED); }

static size_t slot(const uint64_t *set, size_t cap, uint64_t key)
{
	size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull) & (cap - 1);
	while (set[i] && set[i] != key)
		i = (i + 1) & (cap - 1);
	return i;
}

/* Makes the page set *set (open addressing, cap a power of two) big
 * enough for n entries at most half full, rehashing what it holds. */
static int pgset_room(uint64_t **set, size_t *cap, size_t n)
{
	if (2 * n <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 16;
	while (2 * n > nc)
		nc *= 2;
	uint64_t *ns = calloc(nc, sizeof *ns);
	if (!ns)
		return ENOMEM;
	for (size_t i = 0; i < *cap; i++)
		if ((*set)[i])
			ns[slot(ns, nc, (*set)[i])] = (*set)[i];
	free(*set);
	*set = ns;
	*cap = nc;
	return 0;
}

int alloc_note_free(alloc_mgr *am, alloc_freed **fp, uint64_t pgno)
{
	pthread_mutex_lock(&am->mu);
	alloc_freed *f = *fp;
	if (!f) {
		if (!(f = calloc(1, sizeof *f))) {
			pthread_mutex_unlock(&am->mu);
			return ENOMEM;
		}
		f->next = am->open;
		if (f->next)
			f->next->pprev = &f->next;
		f->pprev = &am->open;
		am->open = f;
		*fp = f;
	}
	if (pgset_room(&f->set, &f->cap, f->n + 1) != 0) {
		pthread_mutex_unlock(&am->mu);
		return ENOMEM;
	}
	size_t i = slot(f->set, f->cap, pgno + 1);
	if (!f->set[i]) {
		f->set[i] = pgno + 1;
		f->n++;
	}
	pthread_mutex_unlock(&am->mu);
	return 0;
}

/* ---- pages that can go back to the file system (A4) ---- */

static size_t ret_slot(alloc_mgr *am, uint64_t key)
{
	size_t m = am->ret.cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ull) & m;
	while (am->ret.key[i] && am->ret.key[i] != key)
		i = (i + 1) & m;
	return i;
}

static int ret_room(alloc_mgr *am, size_t n)
{
	if (2 * n <= am->ret.cap)
		return 0;
	size_t nc = am->ret.cap ? am->ret.cap : 64, oc = am->ret.cap;
	while (2 * n > nc)
		nc *= 2;
	uint64_t *k = calloc(nc, sizeof *k), *v = calloc(nc, sizeof *v), *ok = am->ret.key, *ov = am->ret.lsn;
	if (!k || !v) {
		free(k);
		free(v);
		return ENOMEM;
	}
	am->ret.key = k;
	am->ret.lsn = v;
	am->ret.cap = nc;
	for (size_t i = 0; i < oc; i++)
		if (ok[i]) {
			size_t j = ret_slot(am, ok[i]);
			k[j] = ok[i];
			v[j] = ov[i];
		}
	free(ok);
	free(ov);
	return 0;
}

/* Takes pgno out of the candidates (am->mu held): backward-shift deletion
 * keeps every key reachable from its home slot. */
static void ret_del(alloc_mgr *am, uint64_t pgno)
{
	if (!am->ret.n)
		return;
	size_t m = am->ret.cap - 1, i = ret_slot(am, pgno + 1);
	if (!am->ret.key[i])
		return;
	for (size_t j = (i + 1) & m;; j = (j + 1) & m) {
		uint64_t k = am->ret.key[j];
		if (!k)
			break;
		size_t home = (size_t)(k * 0x9e3779b97f4a7c15ull) & m;
		/* k may move to i if i lies cyclically in [home, j) */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			am->ret.key[i] = k;
			am->ret.lsn[i] = am->ret.lsn[j];
			i = j;
		}
	}
	am->ret.key[i] = 0;
	am->ret.lsn[i] = 0;
	__atomic_store_n(&am->ret.n, am->ret.n - 1, __ATOMIC_RELAXED);
}

void alloc_taken(alloc_mgr *am, uint64_t pgno)
{
	if (!__atomic_load_n(&am->ret.n, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&am->mu);
	ret_del(am, pgno);
	pthread_mutex_unlock(&am->mu);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int alloc_returnable(alloc_mgr *am, uint64_t before, uint64_t **out, size_t *n)
{
	uint64_t *v = NULL;
	size_t k = 0;
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&am->mu);
	if (am->ret.n && !(v = malloc(am->ret.n * sizeof *v))) {
		pthread_mutex_unlock(&am->mu);
		return ENOMEM;
	}
	for (size_t i = 0; i < am->ret.cap && k < am->ret.n; i++)
		if (am->ret.key[i] && am->ret.lsn[i] < before)
			v[k++] = am->ret.key[i] - 1;
	pthread_mutex_unlock(&am->mu);
	if (!k) {
		free(v);
		return 0;
	}
	qsort(v, k, sizeof *v, cmp_u64);
	*out = v;
	*n = k;
	return 0;
}

void alloc_forget(alloc_mgr *am, const uint64_t *pgnos, size_t n)
{
	pthread_mutex_lock(&am->mu);
	for (size_t i = 0; i < n; i++)
		ret_del(am, pgnos[i]);
	pthread_mutex_unlock(&am->mu);
}

size_t alloc_returnable_count(alloc_mgr *am) { return __atomic_load_n(&am->ret.n, __ATOMIC_RELAXED); }

int alloc_chunk_known(alloc_mgr *am, uint64_t chunk)
{
	pthread_mutex_lock(&am->mu);
	int known = chunk < am->nchunks && (am->chunks[chunk / 64] >> (chunk % 64)) & 1;
	pthread_mutex_unlock(&am->mu);
	return known;
}

void alloc_chunk_mark(alloc_mgr *am, uint64_t chunk, int known)
{
	pthread_mutex_lock(&am->mu);
	if (chunk >= am->nchunks && known) {
		size_t nw = (size_t)(chunk / 64 + 1), ow = am->nchunks / 64;
		nw = nw < 2 * ow ? 2 * ow : nw;
		uint64_t *c = realloc(am->chunks, nw * sizeof *c);
		if (c) { /* else it stays unknown: reserved again next time */
			memset(c + ow, 0, (nw - ow) * sizeof *c);
			am->chunks = c;
			am->nchunks = nw * 64;
		}
	}
	if (chunk < am->nchunks) {
		if (known)
			am->chunks[chunk / 64] |= 1ull << (chunk % 64);
		else
			am->chunks[chunk / 64] &= ~(1ull << (chunk % 64));
	}
	pthread_mutex_unlock(&am->mu);
}

/* Puts the pages of f into the young limbo (A2), and among the pages that
 * may go back to the file system once a checkpoint passes lsn (A4). */
int alloc_committed(alloc_mgr *am, const alloc_freed *f, uint64_t lsn)
{
	if (!f || !f->n)
		return 0;
	struct limbo *l = &am->limbo[1];
	pthread_mutex_lock(&am->mu);
	if (ret_room(am, am->ret.n + f->n) == 0) /* else not returned: only space is lost */
		for (size_t i = 0; i < f->cap; i++) {
			if (!f->set[i])
				continue;
			size_t j = ret_slot(am, f->set[i]);
			if (!am->ret.key[j]) {
				am->ret.key[j] = f->set[i];
				__atomic_store_n(&am->ret.n, am->ret.n + 1, __ATOMIC_RELAXED);
			}
			if (am->ret.lsn[j] < lsn)
				am->ret.lsn[j] = lsn;
		}
	if (pgset_room(&l->set, &l->cap, l->n + f->n) != 0) {
		pthread_mutex_unlock(&am->mu);
		return ENOMEM;
	}
	for (size_t i = 0; i < f->cap; i++) {
		if (!f->set[i])
			continue;
		size_t j = slot(l->set, l->cap, f->set[i]);
		if (!l->set[j]) {
			l->set[j] = f->set[i];
			l->n++;
		}
	}
	if (lsn > l->lsn)
		l->lsn = lsn;
	pthread_mutex_unlock(&am->mu);
	return 0;
}

void alloc_release(alloc_mgr *am, alloc_freed **fp)
{
	alloc_freed *f = *fp;
	if (!f)
		return;
	*fp = NULL;
	pthread_mutex_lock(&am->mu);
	*f->pprev = f->next;
	if (f->next)
		f->next->pprev = f->pprev;
	pthread_mutex_unlock(&am->mu);
	free(f->set);
	free(f);
}

/* Drops the old limbo once the log is durable past it, and ages the young
 * one (am->mu held).  1 if a limbo still holds pages. */
static int limbo_age(alloc_mgr *am)
{
	struct limbo *old = &am->limbo[0], *young = &am->limbo[1];
	if (!old->n && !young->n)
		return 0;
	uint64_t durable = log_durable(am->lg);
	if (old->n && durable > old->lsn) {
		memset(old->set, 0, old->cap * sizeof *old->set);
		old->n = 0;
		alloc_reset(am); /* A3: its pages are free now */
	}
	if (!old->n && young->n) {
		struct limbo tmp = *old;
		*old = *young;
		*young = tmp;
		young->lsn = 0;
		if (durable > old->lsn) {
			memset(old->set, 0, old->cap * sizeof *old->set);
			old->n = 0;
			alloc_reset(am);
		}
	}
	return old->n || young->n;
}

int alloc_held(alloc_mgr *am, uint64_t pgno, int ordered)
{
	int held = 0;
	pthread_mutex_lock(&am->mu);
	if (ordered && limbo_age(am))
		for (int g = 0; g < 2 && !held; g++)
			if (am->limbo[g].n && am->limbo[g].set[slot(am->limbo[g].set, am->limbo[g].cap, pgno + 1)])
				held = 1;
	for (alloc_freed *f = am->open; f && !held; f = f->next)
		if (f->n && f->set[slot(f->set, f->cap, pgno + 1)])
			held = 1;
	pthread_mutex_unlock(&am->mu);
	return held;
}

int alloc_limbo_flush(alloc_mgr *am, int *flushed)
{
	uint64_t lsn = 0;
	pthread_mutex_lock(&am->mu);
	for (int g = 0; g < 2; g++)
		if (am->limbo[g].n && am->limbo[g].lsn > lsn)
			lsn = am->limbo[g].lsn;
	pthread_mutex_unlock(&am->mu);
	*flushed = lsn != 0;
	/* A2: once durable past lsn, limbo_age (alloc_held) frees both */
	return lsn ? log_flush(am->lg, lsn) : 0;
}
