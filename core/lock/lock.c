/*
 * lock -- lock manager: hierarchical modes, FIFO queues, upgrades,
 * waits-for deadlock detection at the moment a request must wait.
 *
 * Design
 *   One mutex (lm->mu) guards the table, as LIBTP's lock region did; an
 *   uncontended pthread mutex stays in user space, and every critical
 *   section is a few pointer updates.  Each waiter sleeps on its own
 *   condition variable.  Lock objects live in a chained hash table keyed by
 *   name and are freed when nobody holds or waits for them.
 *
 *   Every object has a granted list and a FIFO wait queue.  A new request is
 *   granted at once only if the queue is empty and its mode is compatible
 *   with every granted mode, so a stream of S requests cannot starve an X
 *   waiter.  An upgrade (conversion) of a granted lock waits at the front of
 *   the queue, behind earlier conversions, keeping its old mode meanwhile.
 *   On every release the queue is granted in order until the first request
 *   that still conflicts.
 *
 *   Requests and objects with keys of up to OBJ_SMALL bytes are kept on
 *   free lists when released (up to FREE_MAX each) and reused: a
 *   transaction's locks then cost no malloc or free (lock_get allocated
 *   both for every new lock, and released both at commit -- about a tenth
 *   of a small transaction's CPU time).
 *
 *   Deadlock detection runs when a request is about to wait: a depth-first
 *   search of the waits-for graph from the requester (an owner waits for
 *   every conflicting holder of the object and every request ahead of it in
 *   the queue).  Only a new wait can close a cycle, so every cycle is found
 *   when it forms.  The victim is the owner in the cycle holding the fewest
 *   locks (the least work lost), the youngest on a tie; it is woken with
 *   TP_EDEADLOCK and its request withdrawn, and the search repeats until the
 *   requester is in no cycle.
 *
 *   A request that must wait does not go to sleep at once: it yields its
 *   CPU, up to LOCK_YIELDS times, until it is granted (K6).  Grants go to
 *   the head of the queue (FIFO, no barging), so a waiter that slept
 *   holds up the lock until it is woken, and a wakeup here takes 10-20 us
 *   against a TPC-B transaction's 2 us: at 8 threads on 2 CPUs the
 *   queue became a convoy, the CPUs half idle (TPC-B without sync,
 *   8 threads: 190,000-217,000 -> 294,000-319,000 tps; 32 threads: 141,000 ->
 *   240,000).  A yield lets the holder, or other work, run on this CPU.
 *   Spinning without yielding made it worse: the holder was often waiting
 *   for this very CPU.
 *
 *   A hook (lock_mgr_on_wait) hears when a request starts and stops
 *   waiting: the transaction manager uses it to tell group commit that a
 *   transaction waiting for a lock will not commit soon.  An owner is kept
 *   for reuse (lock_owner_renew) once it holds and waits for nothing.
 *
 * Invariants (each rule is its first sentence; the lines under it say why)
 *   K1  Granted modes on an object are pairwise compatible.
 *   K2  A request waits only if it conflicts with a granted mode or another
 *       request is queued ahead of it.
 *   K3  Each owner waits for at most one request at a time.
 *   K4  An object with no granted and no waiting request is freed.
 *   K5  Every granted request is on its owner's chain exactly once.
 *   K6  A waiting owner's request stays queued, and the grant, deadlock and
 *       timeout rules apply, while it yields before sleeping.
 *       Yielding lets the holder finish instead of a convoy forming behind
 *       a sleeping waiter; o->waiting is stored atomically (under mu)
 *       because the yielding owner reads it without mu.
 */
#include "lock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tp.h"
#include "util.h"

typedef struct lock_obj lock_obj;
typedef struct lock_req lock_req;

struct lock_req {
	lock_obj *obj;
	lock_owner *owner;
	uint8_t mode;      /* granted mode (LOCK_NL while a new request waits) */
	uint8_t want;      /* mode waited for; == mode when not waiting */
	uint8_t granted;   /* on obj->granted (and the owner's chain) */
	uint8_t waiting;   /* on obj's wait queue */
	lock_req *gnext;   /* obj->granted list */
	lock_req *wnext;   /* obj wait queue */
	lock_req *onext, **oprev; /* owner's chain (K5) */
};

struct lock_obj {
	uint32_t hash;
	uint16_t len;
	uint8_t small;     /* room for OBJ_SMALL key bytes: goes back to the free list */
	lock_obj *hnext;
	lock_req *granted;
	lock_req *whead, *wtail;
	unsigned char key[];
};

struct lock_owner {
	lock_mgr *lm;
	uint64_t id;
	lock_req *chain;     /* granted requests (K5) */
	size_t nheld;
	lock_req *waiting;   /* K3 */
	pthread_cond_t cv;
	int victim;          /* chosen as a deadlock victim while waiting */
	int cancelled;       /* its wait was cancelled (lock_cancel) */
	uint32_t timeout_ms;
	uint32_t mark;       /* deadlock search generation */
};

#define OBJ_SMALL 64
#define LOCK_YIELDS 200 /* K6 */
#define FREE_MAX 4096

struct lock_mgr {
	pthread_mutex_t mu;
	void (*on_wait)(void *ctx, int delta); /* lock_mgr_on_wait */
	void *on_wait_ctx;
	lock_obj **hash;
	size_t hcap, nobj;
	lock_obj *free_objs;  /* small objects, linked by hnext */
	lock_req *free_reqs;  /* linked by gnext */
	size_t nfree_objs, nfree_reqs;
	uint32_t gen;
	lock_stats st;
};

/* compat[a][b]: may a be granted while b is held by another owner? */
static const uint8_t compat[LOCK_NMODES][LOCK_NMODES] = {
	/*         NL IS IX S  SIX X */
	/* NL  */ {1, 1, 1, 1, 1, 1},
	/* IS  */ {1, 1, 1, 1, 1, 0},
	/* IX  */ {1, 1, 1, 0, 0, 0},
	/* S   */ {1, 1, 0, 1, 0, 0},
	/* SIX */ {1, 1, 0, 0, 0, 0},
	/* X   */ {1, 0, 0, 0, 0, 0},
};

/* join[a][b]: the weakest mode at least as strong as both. */
static const uint8_t join[LOCK_NMODES][LOCK_NMODES] = {
	/*         NL        IS        IX        S         SIX       X */
	/* NL  */ {LOCK_NL, LOCK_IS, LOCK_IX, LOCK_S, LOCK_SIX, LOCK_X},
	/* IS  */ {LOCK_IS, LOCK_IS, LOCK_IX, LOCK_S, LOCK_SIX, LOCK_X},
	/* IX  */ {LOCK_IX, LOCK_IX, LOCK_IX, LOCK_SIX, LOCK_SIX, LOCK_X},
	/* S   */ {LOCK_S, LOCK_S, LOCK_SIX, LOCK_S, LOCK_SIX, LOCK_X},
	/* SIX */ {LOCK_SIX, LOCK_SIX, LOCK_SIX, LOCK_SIX, LOCK_SIX, LOCK_X},
	/* X   */ {LOCK_X, LOCK_X, LOCK_X, LOCK_X, LOCK_X, LOCK_X},
};

enum lock_mode lock_join(enum lock_mode a, enum lock_mode b) { return (enum lock_mode)join[a][b]; }

const char *lock_mode_name(enum lock_mode m)
{
	static const char *names[] = {"NL", "IS", "IX", "S", "SIX", "X"};
	return (unsigned)m < LOCK_NMODES ? names[m] : "?";
}

int lock_mgr_open(lock_mgr **out)
{
	lock_mgr *lm = calloc(1, sizeof *lm);
	if (!lm)
		return ENOMEM;
	lm->hcap = 1024;
	if (!(lm->hash = calloc(lm->hcap, sizeof *lm->hash))) {
		free(lm);
		return ENOMEM;
	}
	util_mutex_init_hot(&lm->mu);
	*out = lm;
	return 0;
}

void lock_mgr_close(lock_mgr *lm)
{
	if (!lm)
		return;
	for (size_t i = 0; i < lm->hcap; i++)
		while (lm->hash[i]) {
			lock_obj *ob = lm->hash[i];
			lm->hash[i] = ob->hnext;
			free(ob);
		}
	while (lm->free_objs) {
		lock_obj *ob = lm->free_objs;
		lm->free_objs = ob->hnext;
		free(ob);
	}
	while (lm->free_reqs) {
		lock_req *r = lm->free_reqs;
		lm->free_reqs = r->gnext;
		free(r);
	}
	pthread_mutex_destroy(&lm->mu);
	free(lm->hash);
	free(lm);
}

int lock_owner_new(lock_mgr *lm, uint64_t id, lock_owner **out)
{
	lock_owner *o = calloc(1, sizeof *o);
	if (!o)
		return ENOMEM;
	o->lm = lm;
	o->id = id;
	util_cond_init_mono(&o->cv);
	*out = o;
	return 0;
}

void lock_set_timeout(lock_owner *o, uint32_t ms)
{
	pthread_mutex_lock(&o->lm->mu);
	o->timeout_ms = ms;
	pthread_mutex_unlock(&o->lm->mu);
}

/* ---- objects and requests (mu held) ---- */

static lock_req *req_new(lock_mgr *lm)
{
	lock_req *r = lm->free_reqs;
	if (!r) {
		lm->st.allocs++;
		return calloc(1, sizeof *r);
	}
	lm->free_reqs = r->gnext;
	lm->nfree_reqs--;
	memset(r, 0, sizeof *r);
	return r;
}

static void req_free(lock_mgr *lm, lock_req *r)
{
	if (lm->nfree_reqs >= FREE_MAX) {
		free(r);
		return;
	}
	r->gnext = lm->free_reqs;
	lm->free_reqs = r;
	lm->nfree_reqs++;
}

static lock_obj *obj_new(lock_mgr *lm, size_t len)
{
	lock_obj *ob;
	if (len <= OBJ_SMALL && (ob = lm->free_objs) != NULL) {
		lm->free_objs = ob->hnext;
		lm->nfree_objs--;
	} else {
		lm->st.allocs++;
		if (!(ob = malloc(sizeof *ob + (len <= OBJ_SMALL ? OBJ_SMALL : len))))
			return NULL;
	}
	memset(ob, 0, sizeof *ob);
	ob->small = len <= OBJ_SMALL;
	return ob;
}

static void obj_free(lock_mgr *lm, lock_obj *ob)
{
	if (!ob->small || lm->nfree_objs >= FREE_MAX) {
		free(ob);
		return;
	}
	ob->hnext = lm->free_objs;
	lm->free_objs = ob;
	lm->nfree_objs++;
}

static uint32_t key_hash(const void *key, size_t len) { return util_crc32c((uint32_t)len, key, len); }

static void table_grow(lock_mgr *lm)
{
	size_t ncap = lm->hcap * 2;
	lock_obj **nh = calloc(ncap, sizeof *nh);
	if (!nh)
		return; /* keep the longer chains */
	for (size_t i = 0; i < lm->hcap; i++)
		while (lm->hash[i]) {
			lock_obj *ob = lm->hash[i];
			lm->hash[i] = ob->hnext;
			ob->hnext = nh[ob->hash & (ncap - 1)];
			nh[ob->hash & (ncap - 1)] = ob;
		}
	free(lm->hash);
	lm->hash = nh;
	lm->hcap = ncap;
}

static lock_obj *obj_find(lock_mgr *lm, const void *key, size_t len, int create)
{
	uint32_t h = key_hash(key, len);
	lock_obj *ob;
	for (ob = lm->hash[h & (lm->hcap - 1)]; ob; ob = ob->hnext)
		if (ob->hash == h && ob->len == len && memcmp(ob->key, key, len) == 0)
			return ob;
	if (!create || !(ob = obj_new(lm, len)))
		return NULL;
	ob->hash = h;
	ob->len = (uint16_t)len;
	memcpy(ob->key, key, len);
	if (lm->nobj + 1 > lm->hcap)
		table_grow(lm);
	ob->hnext = lm->hash[h & (lm->hcap - 1)];
	lm->hash[h & (lm->hcap - 1)] = ob;
	lm->nobj++;
	lm->st.objects = lm->nobj;
	return ob;
}

static void obj_maybe_free(lock_mgr *lm, lock_obj *ob) /* K4 */
{
	if (ob->granted || ob->whead)
		return;
	lock_obj **pp = &lm->hash[ob->hash & (lm->hcap - 1)];
	while (*pp != ob)
		pp = &(*pp)->hnext;
	*pp = ob->hnext;
	lm->nobj--;
	lm->st.objects = lm->nobj;
	obj_free(lm, ob);
}

static lock_req *granted_of(lock_obj *ob, const lock_owner *o)
{
	for (lock_req *r = ob->granted; r; r = r->gnext)
		if (r->owner == o)
			return r;
	return NULL;
}

/* May mode be granted to o, given the others' granted modes? (K1) */
static int grantable(const lock_obj *ob, const lock_owner *o, int mode)
{
	for (const lock_req *r = ob->granted; r; r = r->gnext)
		if (r->owner != o && !compat[mode][r->mode])
			return 0;
	return 1;
}

/* Sets the request o waits for (mu held): an atomic store, as
 * yield_for_grant reads it without mu. */
static void set_waiting(lock_owner *o, lock_req *r) { __atomic_store_n(&o->waiting, r, __ATOMIC_RELEASE); }

static void wait_remove(lock_obj *ob, lock_req *r)
{
	lock_req **pp = &ob->whead, *prev = NULL;
	while (*pp != r) {
		prev = *pp;
		pp = &(*pp)->wnext;
	}
	*pp = r->wnext;
	if (ob->wtail == r)
		ob->wtail = prev;
	r->wnext = NULL;
	r->waiting = 0;
}

static void chain_add(lock_owner *o, lock_req *r)
{
	r->onext = o->chain;
	if (o->chain)
		o->chain->oprev = &r->onext;
	r->oprev = &o->chain;
	o->chain = r;
	o->nheld++;
}

static void chain_remove(lock_owner *o, lock_req *r)
{
	*r->oprev = r->onext;
	if (r->onext)
		r->onext->oprev = r->oprev;
	o->nheld--;
}

/* Grants queued requests in order up to the first conflict. */
static void wake(lock_obj *ob)
{
	while (ob->whead) {
		lock_req *r = ob->whead;
		if (!grantable(ob, r->owner, r->want))
			break;
		wait_remove(ob, r);
		r->mode = r->want;
		if (!r->granted) {
			r->granted = 1;
			r->gnext = ob->granted;
			ob->granted = r;
			chain_add(r->owner, r);
		}
		set_waiting(r->owner, NULL);
		pthread_cond_signal(&r->owner->cv);
	}
}

/* ---- deadlock detection (mu held) ---- */

/* Calls fn for every owner that o's waiting request waits for; stops and
 * returns 1 when fn does. */
static int for_blockers(lock_owner *o, int (*fn)(lock_owner *, void *), void *ctx)
{
	lock_req *w = o->waiting;
	if (!w)
		return 0;
	lock_obj *ob = w->obj;
	for (lock_req *g = ob->granted; g; g = g->gnext)
		if (g->owner != o && !compat[w->want][g->mode] && fn(g->owner, ctx))
			return 1;
	for (lock_req *q = ob->whead; q && q != w; q = q->wnext)
		if (q->owner != o && fn(q->owner, ctx))
			return 1;
	return 0;
}

typedef struct dl_search {
	lock_owner *target;
	lock_owner *path[256];
	int depth;
	uint32_t gen;
	int found;
} dl_search;

static int dl_visit(lock_owner *o, void *ctx)
{
	dl_search *s = ctx;
	if (o == s->target) {
		s->found = 1;
		return 1;
	}
	if (o->mark == s->gen || !o->waiting || s->depth >= 256)
		return 0;
	o->mark = s->gen;
	s->path[s->depth++] = o;
	if (for_blockers(o, dl_visit, s))
		return 1;
	s->depth--;
	return 0;
}

/* A cycle through o, as a path starting at o; 0 if none. */
static int dl_find(lock_mgr *lm, lock_owner *o, dl_search *s)
{
	s->target = o;
	s->gen = ++lm->gen;
	s->depth = 1;
	s->path[0] = o;
	s->found = 0;
	o->mark = s->gen;
	for_blockers(o, dl_visit, s);
	return s->found;
}

/* Withdraws o's waiting request, leaving any granted mode in place. */
static void withdraw(lock_mgr *lm, lock_owner *o)
{
	lock_req *r = o->waiting;
	if (!r)
		return;
	lock_obj *ob = r->obj;
	wait_remove(ob, r);
	set_waiting(o, NULL);
	if (r->granted)
		r->want = r->mode;
	else
		req_free(lm, r);
	wake(ob); /* requests behind it may go now */
	obj_maybe_free(lm, ob);
}

/* ---- locking ---- */

static int bad_request(size_t len, enum lock_mode mode)
{
	if (len == 0 || len > LOCK_KEY_MAX || mode <= LOCK_NL || mode >= LOCK_NMODES)
		return util_err(TP_EINVAL, "lock: bad request (key of %zu bytes, mode %d)", len, (int)mode);
	return 0;
}

/* K6: before o sleeps on its wait, it gives its CPU to other threads up
 * to LOCK_YIELDS times, letting go of mu, while its request stays queued
 * (lm->mu held on entry and return). */
static void yield_for_grant(lock_mgr *lm, lock_owner *o)
{
	pthread_mutex_unlock(&lm->mu);
	for (int i = 0; i < LOCK_YIELDS && __atomic_load_n(&o->waiting, __ATOMIC_ACQUIRE); i++)
		sched_yield();
	pthread_mutex_lock(&lm->mu);
}

/* lock_get's work, lm->mu held (and held again on return; a wait lets
 * go of it meanwhile). */
static int get_locked(lock_mgr *lm, lock_owner *o, const void *key, size_t len, enum lock_mode mode, int flags)
{
	lock_obj *ob;
	lock_req *r;
	int rc = 0;

	lm->st.requests++;
	if (!(ob = obj_find(lm, key, len, 1)))
		return ENOMEM;
	if ((r = granted_of(ob, o)) != NULL) {
		int nm = join[r->mode][mode];
		if (nm == r->mode)
			goto out;
		if (grantable(ob, o, nm)) { /* upgrade in place */
			r->mode = r->want = (uint8_t)nm;
			goto out;
		}
		r->want = (uint8_t)nm;
		/* conversions queue ahead of new requests, FIFO among themselves */
		lock_req **pp = &ob->whead, *prev = NULL;
		while (*pp && (*pp)->granted) {
			prev = *pp;
			pp = &(*pp)->wnext;
		}
		r->wnext = *pp;
		*pp = r;
		if (!r->wnext)
			ob->wtail = r;
		(void)prev;
	} else {
		if (!ob->whead && grantable(ob, o, mode)) {
			if (!(r = req_new(lm))) {
				obj_maybe_free(lm, ob);
				rc = ENOMEM;
				goto out;
			}
			r->obj = ob;
			r->owner = o;
			r->mode = r->want = (uint8_t)mode;
			r->granted = 1;
			r->gnext = ob->granted;
			ob->granted = r;
			chain_add(o, r);
			goto out;
		}
		if (!(r = req_new(lm))) {
			obj_maybe_free(lm, ob);
			rc = ENOMEM;
			goto out;
		}
		r->obj = ob;
		r->owner = o;
		r->mode = LOCK_NL;
		r->want = (uint8_t)mode;
		if (ob->wtail)
			ob->wtail->wnext = r;
		else
			ob->whead = r;
		ob->wtail = r;
	}
	r->waiting = 1;
	set_waiting(o, r);
	if (flags & LOCK_NOWAIT) {
		withdraw(lm, o);
		rc = EAGAIN;
		goto out;
	}
	/* deadlock detection, now that the new edges exist */
	dl_search s;
	while (dl_find(lm, o, &s)) {
		lock_owner *v = s.path[0];
		for (int i = 1; i < s.depth; i++)
			if (s.path[i]->nheld < v->nheld || (s.path[i]->nheld == v->nheld && s.path[i]->id > v->id))
				v = s.path[i];
		lm->st.deadlocks++;
		if (v == o) {
			withdraw(lm, o);
			rc = util_err(TP_EDEADLOCK, "lock: transaction %llu chosen as deadlock victim",
				      (unsigned long long)o->id);
			goto out;
		}
		v->victim = 1;
		withdraw(lm, v);
		pthread_cond_signal(&v->cv);
		if (!o->waiting) /* the victim's withdrawal granted ours */
			goto out;
	}
	lm->st.waits++;
	yield_for_grant(lm, o);
	if (lm->on_wait)
		lm->on_wait(lm->on_wait_ctx, -1);
	struct timespec until = util_deadline_ns((uint64_t)o->timeout_ms * 1000000u);
	while (o->waiting && !o->victim && !o->cancelled) {
		if (!o->timeout_ms) {
			pthread_cond_wait(&o->cv, &lm->mu);
		} else if (pthread_cond_timedwait(&o->cv, &lm->mu, &until) == ETIMEDOUT && o->waiting) {
			withdraw(lm, o);
			lm->st.timeouts++;
			rc = util_err(TP_ETIMEOUT, "lock: transaction %llu waited more than %u ms",
				      (unsigned long long)o->id, o->timeout_ms);
			break;
		}
	}
	if (lm->on_wait)
		lm->on_wait(lm->on_wait_ctx, 1);
	if (rc) /* timed out */
		goto out;
	if (o->victim) {
		o->victim = 0;
		rc = util_err(TP_EDEADLOCK, "lock: transaction %llu chosen as deadlock victim",
			      (unsigned long long)o->id);
	} else if (o->waiting) { /* cancelled before it was granted */
		withdraw(lm, o);
		lm->st.timeouts++;
		rc = util_err(TP_ETIMEOUT, "lock: the wait of transaction %llu was cancelled (a deadlock outside the "
					   "lock manager)",
			      (unsigned long long)o->id);
	}
	o->cancelled = 0;
out:
	return rc;
}

int lock_get(lock_owner *o, const void *key, size_t len, enum lock_mode mode, int flags)
{
	lock_mgr *lm = o->lm;
	int rc = bad_request(len, mode);
	if (rc)
		return rc;
	pthread_mutex_lock(&lm->mu);
	rc = get_locked(lm, o, key, len, mode, flags);
	pthread_mutex_unlock(&lm->mu);
	return rc;
}

int lock_get_two(lock_owner *o, const void *k1, size_t l1, enum lock_mode m1, const void *k2, size_t l2,
		 enum lock_mode m2, int *first)
{
	lock_mgr *lm = o->lm;
	int rc = bad_request(l1, m1);
	*first = 0;
	if (rc || (rc = bad_request(l2, m2)) != 0)
		return rc;
	pthread_mutex_lock(&lm->mu);
	if ((rc = get_locked(lm, o, k1, l1, m1, 0)) == 0) {
		*first = 1;
		rc = get_locked(lm, o, k2, l2, m2, 0);
	}
	pthread_mutex_unlock(&lm->mu);
	return rc;
}

void lock_mgr_on_wait(lock_mgr *lm, void (*fn)(void *ctx, int delta), void *ctx)
{
	pthread_mutex_lock(&lm->mu);
	lm->on_wait = fn;
	lm->on_wait_ctx = ctx;
	pthread_mutex_unlock(&lm->mu);
}

int lock_page(lock_owner *o, uint32_t file, uint64_t pgno, enum lock_mode mode, int flags)
{
	unsigned char k[13] = {'P'};
	util_put32(k + 1, file);
	util_put64(k + 5, pgno);
	return lock_get(o, k, sizeof k, mode, flags);
}

/* Drops granted request r (mu held). */
static void drop(lock_mgr *lm, lock_req *r)
{
	lock_obj *ob = r->obj;
	lock_req **pp = &ob->granted;
	while (*pp != r)
		pp = &(*pp)->gnext;
	*pp = r->gnext;
	chain_remove(r->owner, r);
	if (r->waiting) { /* a conversion still queued */
		wait_remove(ob, r);
		set_waiting(r->owner, NULL);
	}
	req_free(lm, r);
	wake(ob);
	obj_maybe_free(lm, ob);
}

int lock_release(lock_owner *o, const void *key, size_t len)
{
	lock_mgr *lm = o->lm;
	int rc = ENOENT;
	pthread_mutex_lock(&lm->mu);
	lock_obj *ob = obj_find(lm, key, len, 0);
	lock_req *r = ob ? granted_of(ob, o) : NULL;
	if (r) {
		drop(lm, r);
		rc = 0;
	}
	pthread_mutex_unlock(&lm->mu);
	return rc;
}

int lock_downgrade(lock_owner *o, const void *key, size_t len, enum lock_mode mode)
{
	lock_mgr *lm = o->lm;
	int rc = ENOENT;
	pthread_mutex_lock(&lm->mu);
	lock_obj *ob = obj_find(lm, key, len, 0);
	lock_req *r = ob ? granted_of(ob, o) : NULL;
	if (r) {
		if (mode <= LOCK_NL || mode >= LOCK_NMODES || join[mode][r->mode] != r->mode) {
			rc = EINVAL;
		} else {
			r->mode = (uint8_t)mode;
			if (!r->waiting)
				r->want = (uint8_t)mode;
			wake(ob);
			rc = 0;
		}
	}
	pthread_mutex_unlock(&lm->mu);
	return rc;
}

void lock_release_all(lock_owner *o)
{
	lock_mgr *lm = o->lm;
	/* an owner's thread, not waiting, is the only one that changes its
	 * chain (a grant to it needs a request of it waiting): nothing held
	 * and nothing asked for needs no lm->mu (a commit's second release,
	 * after its early one) */
	if (!o->chain && !o->waiting)
		return;
	pthread_mutex_lock(&lm->mu);
	withdraw(lm, o);
	while (o->chain)
		drop(lm, o->chain);
	pthread_mutex_unlock(&lm->mu);
}

void lock_release_except(lock_owner *o, const void *prefix, size_t plen)
{
	lock_mgr *lm = o->lm;
	pthread_mutex_lock(&lm->mu);
	withdraw(lm, o);
	for (lock_req *r = o->chain, *next; r; r = next) {
		next = r->onext;
		if (r->obj->len < plen || memcmp(r->obj->key, prefix, plen) != 0)
			drop(lm, r);
	}
	pthread_mutex_unlock(&lm->mu);
}

void lock_owner_renew(lock_owner *o, uint64_t id)
{
	/* no request of it is queued or granted, so no other thread reaches it
	 * through the table; its next lock_get publishes these under lm->mu */
	o->id = id;
	o->victim = o->cancelled = 0;
	o->timeout_ms = 0;
	o->mark = 0;
}

void lock_owner_free(lock_owner *o)
{
	if (!o)
		return;
	lock_release_all(o);
	pthread_cond_destroy(&o->cv);
	free(o);
}

enum lock_mode lock_held_mode(lock_owner *o, const void *key, size_t len)
{
	enum lock_mode m = LOCK_NL;
	pthread_mutex_lock(&o->lm->mu);
	lock_obj *ob = obj_find(o->lm, key, len, 0);
	lock_req *r = ob ? granted_of(ob, o) : NULL;
	if (r)
		m = (enum lock_mode)r->mode;
	pthread_mutex_unlock(&o->lm->mu);
	return m;
}

int lock_cancel(lock_owner *o)
{
	pthread_mutex_lock(&o->lm->mu);
	int was = o->waiting != NULL;
	if (was) {
		o->cancelled = 1;
		pthread_cond_signal(&o->cv);
	}
	pthread_mutex_unlock(&o->lm->mu);
	return was;
}

size_t lock_count(lock_owner *o)
{
	pthread_mutex_lock(&o->lm->mu);
	size_t n = o->nheld;
	pthread_mutex_unlock(&o->lm->mu);
	return n;
}

static int first_blocker(lock_owner *b, void *ctx)
{
	*(uint64_t *)ctx = b->id;
	return 1;
}

uint64_t lock_waits_for(lock_owner *o)
{
	uint64_t id = 0;
	pthread_mutex_lock(&o->lm->mu);
	for_blockers(o, first_blocker, &id);
	pthread_mutex_unlock(&o->lm->mu);
	return id;
}

void lock_stats_get(lock_mgr *lm, lock_stats *s)
{
	pthread_mutex_lock(&lm->mu);
	*s = lm->st;
	pthread_mutex_unlock(&lm->mu);
}
