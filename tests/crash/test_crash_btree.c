/*
 * test_crash_btree -- simulated power cuts under a random workload of
 * B-tree record transactions, and during the recovery that follows, each
 * checked against an oracle of acknowledged commits.
 *
 * Workload (all decided by the seed; wl_rng):
 *   - a store with two trees made at base time, "a" (byte keys of 1..max
 *     key bytes) and "u" (TP_TREE_U64), and a third, "x", that the workload
 *     creates and drops with tp_tree_open / tp_tree_drop (transactions of
 *     their own);
 *   - 30..70 regular transactions, each 1..8 puts (values of 0 bytes to 3
 *     pages: inline and overflow; in one seed of two with TP_ORDERED, so
 *     overflow pages are ordered data, written in place by the log's
 *     barrier and never logged; in one seed of two with TP_PATCH, a key's
 *     values mostly of one length and alike but for a window of 24 bytes,
 *     so puts change overflow pages in place, logged as byte ranges) and
 *     deletes on "a", "u" and "x", then a
 *     commit, or an abort (about one in eight); the last one may be left in
 *     flight;
 *   - sometimes a long transaction L, on keys of its own (so it never
 *     waits for a lock), that takes a step between regular transactions,
 *     lives through checkpoints and other transactions' splits, and then
 *     commits, aborts or stays in flight (its logical undo must find its
 *     keys wherever splits moved them);
 *   - a pool of 16..32 pages (STEAL writes uncommitted pages back),
 *     64 KiB log segments and checkpoints every 16..128 KiB of log, plus
 *     explicit ones.
 *
 * Oracle: an append-only file written with write(2) (outside the io
 * simulator): before tp_commit an INTENT record lists the transaction's
 * changes (tree, key id, value length and seed); after it returns 0 an
 * ACK.  Expected after recovery: the base contents, then every
 * acknowledged transaction; the last INTENT without an ACK (the crash came
 * inside its commit) entirely or not at all; nothing else.  Every record
 * of every tree is compared, tp_verify(env, 0, ...) must pass (B-tree
 * structure, and no allocated page outside a tree), and after one more
 * committed transaction, a crash and a second recovery, the same again.
 *
 * Crash points, per seed: a dry run counts the syncs S (and ends in a power
 * cut itself, or, one seed in four, a clean close), then ARMED runs of the
 * same workload on fresh copies of the base are cut at sync n in 1..S or at
 * the nth pass through a named point (log.flush.written,
 * txn.commit.logged, ...).  After a crash, one time in four (then one in
 * three again, up to three deep) recovery itself is cut: a dry recovery on
 * a scratch copy counts its syncs, and a child recovers the real copy and
 * dies at one of them.  Children never call cr_assert: they report through
 * shared memory; a failure names the seed and the crash point.  The loop
 * over seeds, crash points and recovery crashes is the shared crash harness
 * (tests/lib/crash_harness.h); this file is the workload, its base stores
 * and its check.
 *
 * Environment: TP_CRASH_POINTS (default 500), TP_CRASH_SEED (default 1),
 * TP_CRASH_ONLY=i (rerun seed index i alone), TP_CRASH_JOBS (workers,
 * default: online CPUs, at most 8), TP_CRASH_VERBOSE.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bt_model.h"
#include "crash_harness.h"
#include "io_sim.h"
#include "tp.h"
#include "tp_test.h"
#include "workload.h"

#define NTREES 3
#define POOL 300   /* regular key ids per tree */
#define LPOOL 100  /* key ids of the long transaction */
#define KMAX 512   /* LOCK_KEY_MAX: no key is longer */

static const char *const tree_name[NTREES] = {"a", "u", "x"};

/* ---- configuration ---- */

typedef struct bcfg {
	uint64_t seed, kseed;
	int geo;              /* 0: 1 KiB pages, 1: 4 KiB pages */
	uint32_t psize;
	uint64_t seg;
	size_t cache;
	uint64_t ckpt_bytes;
	unsigned ntx;
	int long_txn;         /* 0 none, else L_COMMIT / L_ABORT / L_INFLIGHT */
	int last_inflight;
	int end_close;
	int ordered;          /* puts pass TP_ORDERED: overflow values as ordered data */
	int patch;            /* puts pass TP_PATCH; a key's values mostly share a length and differ in a window */
} bcfg;

enum { L_COMMIT = 1, L_ABORT, L_INFLIGHT };

static const uint32_t geo_psize[2] = {1024, 4096};
static const uint64_t geo_seg[2] = {65536, 262144};

static void cfg_seed(bcfg *c, uint64_t seed)
{
	wl_rng r = {wl_mix(seed, 0xb7ee)};
	memset(c, 0, sizeof *c);
	c->seed = seed;
	c->kseed = 0x6b657973; /* keys are the same for every seed: the base is shared */
	c->geo = wl_below(&r, 3) == 0;
	c->psize = geo_psize[c->geo];
	c->seg = geo_seg[c->geo];
	c->cache = 16 + wl_below(&r, 17);
	c->ckpt_bytes = (16u << 10) << wl_below(&r, 4);
	c->ntx = 30 + (unsigned)wl_below(&r, 41);
	c->long_txn = wl_below(&r, 2) ? 1 + (int)wl_below(&r, 3) : 0;
	c->last_inflight = wl_below(&r, 2);
	c->end_close = wl_below(&r, 4) == 0;
	c->ordered = wl_below(&r, 2) == 0;
	c->patch = wl_below(&r, 2) == 0;
}

static void cfg_options(const bcfg *c, tp_options *o)
{
	tp_options_init(o);
	o->page_size = c->psize;
	o->seg_size = c->seg;
	o->cache_pages = c->cache;
	o->ckpt_log_bytes = c->ckpt_bytes;
	o->ckpt_ms = 0; /* deterministic: checkpoints by log size only */
	o->quiet = 1;
}

/* ---- keys and values ---- */

/* Key `id` of tree `tree`; the long transaction's keys (L) never equal a
 * regular one: bytes keys start with 'L' only for L, u64 keys have the top
 * bit set only for L. */
static size_t key_of(const bcfg *c, int tree, int L, uint64_t id, size_t maxk, unsigned char *k)
{
	uint64_t h = wl_mix(c->kseed + (uint64_t)tree * 1000 + (uint64_t)L, id);
	if (tree == 1) {
		uint64_t x = L ? h | 1ull << 63 : h & ~(1ull << 63);
		for (int i = 0; i < 8; i++)
			k[i] = (unsigned char)(x >> (8 * i));
		return 8;
	}
	uint64_t r = h % 10;
	size_t kl = r < 3 ? 1 + (h >> 8) % 8 : r < 7 ? 9 + (h >> 8) % 60 : 70 + (h >> 8) % (maxk - 69);
	if (L && kl < 2)
		kl = 2;
	btm_fill(k, kl, h);
	if (L) {
		k[0] = 'L';
	} else if (k[0] == 'L') {
		k[0] = 'M';
	}
	return kl;
}

static uint32_t vlen_of(wl_rng *r, uint32_t psize)
{
	uint64_t x = wl_below(r, 100);
	if (x < 40)
		return (uint32_t)wl_below(r, 21);
	if (x < 70)
		return 20 + (uint32_t)wl_below(r, 181);
	if (x < 85)
		return 200 + (uint32_t)wl_below(r, psize / 2);
	return psize + (uint32_t)wl_below(r, 2u * psize + 1);
}

/* ---- oracle ---- */

enum { OP_PUT = 1, OP_DEL, OP_CREATE, OP_DROP };
enum { REC_INTENT = 1, REC_ACK };
#define OR_MAGIC 0x4f524254u /* "TBRO" */

typedef struct bop {
	uint8_t kind, tree, L, pad;
	uint32_t vlen;
	uint64_t id, vseed;
} bop;

/* Patch mode: the length most puts of a key use -- for a third of the
 * keys a small one, kept in the leaf (same-size replaces: BT_PATCH of the
 * bytes that differ), else overflow, up to 3 pages (TP_PATCH in place). */
static uint32_t id_vlen(const bcfg *c, const bop *o)
{
	uint64_t h = wl_mix(o->id, (uint64_t)o->tree << 8 | o->L);
	if (h % 3 == 0)
		return 8 + (uint32_t)(h >> 8) % 60;
	return c->psize / 3 + (uint32_t)(h % (2u * c->psize));
}

/* A put's value: in patch mode the key's own pattern with a window of up
 * to 24 bytes from vseed (so puts of one key differ in few bytes and
 * TP_PATCH changes them in place); else all from vseed. */
static void value_of(const bcfg *c, const bop *o, unsigned char *v)
{
	if (!c->patch || !o->vlen) {
		btm_fill(v, o->vlen, o->vseed);
		return;
	}
	btm_fill(v, o->vlen, wl_mix(o->id, (uint64_t)o->tree << 8 | o->L));
	uint32_t at = (uint32_t)(o->vseed % o->vlen), n = o->vlen - at < 24 ? o->vlen - at : 24;
	btm_fill(v + at, n, o->vseed);
}

typedef struct orec_hdr {
	uint32_t magic, type, txno, nops;
	uint64_t sum;
} orec_hdr;

static uint64_t ops_sum(const orec_hdr *h, const bop *ops)
{
	uint64_t s = wl_mix(h->type, (uint64_t)h->txno << 32 | h->nops);
	for (uint32_t i = 0; i < h->nops; i++)
		s = wl_mix(s, wl_mix(ops[i].id ^ ops[i].vseed, (uint64_t)ops[i].kind << 40 | (uint64_t)ops[i].tree << 32 |
								       (uint64_t)ops[i].L << 48 | ops[i].vlen));
	return s;
}

static int or_append(int fd, uint32_t type, uint32_t txno, const bop *ops, uint32_t nops)
{
	orec_hdr h = {OR_MAGIC, type, txno, nops, 0};
	h.sum = ops_sum(&h, ops);
	size_t len = sizeof h + nops * sizeof *ops;
	unsigned char buf[sizeof h + 128 * sizeof(bop)];
	memcpy(buf, &h, sizeof h);
	if (nops)
		memcpy(buf + sizeof h, ops, nops * sizeof *ops);
	return wl_write_all(fd, buf, len);
}

/* ---- the workload (in a child, under the simulator) ---- */

typedef struct wtx {
	tp_txn *t;
	bop ops[128];
	uint32_t n;
} wtx;

static int apply_op(tp_tree **tr, tp_txn *t, const bcfg *c, const bop *o, size_t maxk, char *err, size_t n)
{
	static unsigned char k[KMAX], v[3 * 4096 + 16];
	size_t kl = key_of(c, o->tree, o->L, o->id, maxk, k);
	int rc;
	if (o->kind == OP_PUT) {
		value_of(c, o, v);
		rc = tp_put(t, tr[o->tree], k, kl, v, o->vlen, (c->ordered ? TP_ORDERED : 0) | (c->patch ? TP_PATCH : 0));
	} else {
		rc = tp_del(t, tr[o->tree], k, kl);
		if (rc == TP_ENOTFOUND)
			rc = 0;
	}
	if (rc)
		return wl_failf(err, n, "%s of key id %" PRIu64 " in tree %s: %d (%s): %s", o->kind == OP_PUT ? "put" : "del",
			     o->id, tree_name[o->tree], rc, tp_strerror(rc), tp_errmsg());
	return 0;
}

/* Runs the workload of c on env; oracle gets INTENT/ACK records.  0, or
 * -1 with err.  Transactions still open stay open (in flight). */
static int run_workload(tp_env *env, const bcfg *c, const char *oracle, uint64_t *commits, uint64_t *aborts,
			char *err, size_t n)
{
	wl_rng r = {wl_mix(c->seed, 0x3017)};
	tp_tree *tr[NTREES] = {0};
	wtx L = {0};
	int fd, rc, x_exists = 0;
	uint32_t txno = 0;
	unsigned l_begin = 2, l_end = c->ntx * 2 / 3;

	if ((fd = open(oracle, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) < 0)
		return wl_failf(err, n, "oracle %s: %s", oracle, strerror(errno));
	for (int i = 0; i < 2; i++)
		if ((rc = tp_tree_open(env, tree_name[i], 0, &tr[i])) != 0)
			return wl_failf(err, n, "tp_tree_open %s: %d %s", tree_name[i], rc, tp_errmsg());
	size_t maxk = tp_tree_max_key(tr[0]);

	for (unsigned x = 0; x < c->ntx; x++) {
		/* the long transaction: begins, steps, ends */
		if (c->long_txn && x == l_begin && (rc = tp_begin(env, &L.t)) != 0)
			return wl_failf(err, n, "tp_begin L: %d", rc);
		if (L.t && L.n < 64) {
			bop o = {.kind = wl_below(&r, 4) ? OP_PUT : OP_DEL, .tree = (uint8_t)wl_below(&r, 2), .L = 1,
				 .id = wl_below(&r, LPOOL), .vseed = wl_rand(&r)};
			o.vlen = vlen_of(&r, c->psize);
			if (c->patch && wl_below(&r, 3))
				o.vlen = id_vlen(c, &o);
			if (apply_op(tr, L.t, c, &o, maxk, err, n))
				return -1;
			L.ops[L.n++] = o;
		}
		if (L.t && x == l_end && c->long_txn != L_INFLIGHT) {
			if (c->long_txn == L_COMMIT) {
				if (or_append(fd, REC_INTENT, ++txno, L.ops, L.n))
					return wl_failf(err, n, "oracle write");
				if ((rc = tp_commit(L.t, 0)) != 0)
					return wl_failf(err, n, "tp_commit L: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
				if (or_append(fd, REC_ACK, txno, NULL, 0))
					return wl_failf(err, n, "oracle write");
				(*commits)++;
			} else {
				if ((rc = tp_abort(L.t)) != 0)
					return wl_failf(err, n, "tp_abort L: %d %s", rc, tp_errmsg());
				(*aborts)++;
			}
			L.t = NULL;
		}
		if (wl_below(&r, 10) == 0 && (rc = tp_checkpoint(env)) != 0)
			return wl_failf(err, n, "tp_checkpoint: %d %s", rc, tp_errmsg());

		/* tree x: created or dropped in a transaction of its own */
		if (wl_below(&r, 100) < 7) {
			bop o = {.kind = x_exists ? OP_DROP : OP_CREATE, .tree = 2};
			if (or_append(fd, REC_INTENT, ++txno, &o, 1))
				return wl_failf(err, n, "oracle write");
			if (x_exists) {
				tp_tree_close(tr[2]);
				tr[2] = NULL;
				rc = tp_tree_drop(env, "x");
			} else {
				rc = tp_tree_open(env, "x", TP_TREE_CREATE, &tr[2]);
			}
			if (rc)
				return wl_failf(err, n, "%s tree x: %d (%s): %s", x_exists ? "drop" : "create", rc, tp_strerror(rc),
					     tp_errmsg());
			if (or_append(fd, REC_ACK, txno, NULL, 0))
				return wl_failf(err, n, "oracle write");
			x_exists = !x_exists;
			(*commits)++;
			continue;
		}

		/* a regular transaction */
		wtx t = {0};
		if ((rc = tp_begin(env, &t.t)) != 0)
			return wl_failf(err, n, "tp_begin: %d", rc);
		uint32_t nops = 1 + (uint32_t)wl_below(&r, 8);
		for (uint32_t i = 0; i < nops; i++) {
			bop o = {.kind = wl_below(&r, 100) < 65 ? OP_PUT : OP_DEL,
				 .tree = (uint8_t)wl_below(&r, x_exists ? 3 : 2), .id = wl_below(&r, POOL),
				 .vseed = wl_rand(&r)};
			o.vlen = vlen_of(&r, c->psize);
			if (c->patch && wl_below(&r, 3))
				o.vlen = id_vlen(c, &o);
			if (apply_op(tr, t.t, c, &o, maxk, err, n))
				return -1;
			t.ops[t.n++] = o;
		}
		if (x == c->ntx - 1 && c->last_inflight)
			break; /* left in flight */
		if (wl_below(&r, 8) == 0) {
			if ((rc = tp_abort(t.t)) != 0)
				return wl_failf(err, n, "tp_abort: %d %s", rc, tp_errmsg());
			(*aborts)++;
			continue;
		}
		if (or_append(fd, REC_INTENT, ++txno, t.ops, t.n))
			return wl_failf(err, n, "oracle write");
		if ((rc = tp_commit(t.t, 0)) != 0)
			return wl_failf(err, n, "tp_commit: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
		if (or_append(fd, REC_ACK, txno, NULL, 0))
			return wl_failf(err, n, "oracle write");
		(*commits)++;
	}
	for (int i = 0; i < NTREES; i++)
		tp_tree_close(tr[i]);
	close(fd);
	return 0;
}

/* ---- the expected state ---- */

typedef struct bstate {
	int exists[NTREES];
	btm m[NTREES];
} bstate;

static void state_init(bstate *s)
{
	for (int i = 0; i < NTREES; i++) {
		btm_init(&s->m[i], i == 1);
		s->exists[i] = i < 2;
	}
}

static void state_free(bstate *s)
{
	for (int i = 0; i < NTREES; i++)
		btm_free(&s->m[i]);
}

static int state_copy(bstate *d, const bstate *s)
{
	for (int i = 0; i < NTREES; i++) {
		d->exists[i] = s->exists[i];
		if (btm_copy(&d->m[i], &s->m[i]))
			return ENOMEM;
	}
	return 0;
}

static void state_apply(bstate *s, const bcfg *c, const bop *ops, uint32_t nops, size_t maxk)
{
	static unsigned char k[KMAX], v[3 * 4096 + 16];
	for (uint32_t i = 0; i < nops; i++) {
		const bop *o = &ops[i];
		size_t kl;
		switch (o->kind) {
		case OP_PUT:
			kl = key_of(c, o->tree, o->L, o->id, maxk, k);
			value_of(c, o, v);
			btm_put(&s->m[o->tree], k, kl, v, o->vlen);
			break;
		case OP_DEL:
			kl = key_of(c, o->tree, o->L, o->id, maxk, k);
			btm_del(&s->m[o->tree], k, kl);
			break;
		case OP_CREATE:
			s->exists[o->tree] = 1;
			btm_clear(&s->m[o->tree]);
			break;
		case OP_DROP:
			s->exists[o->tree] = 0;
			btm_clear(&s->m[o->tree]);
			break;
		}
	}
}

/* The store's state into s (initialized): each tree present or not, and
 * its records; checks cursor order both ways. */
static int state_read(tp_env *env, bstate *s, char *err, size_t n)
{
	char why[600];
	for (int i = 0; i < NTREES; i++) {
		tp_tree *tr;
		int rc = tp_tree_open(env, tree_name[i], 0, &tr);
		btm_clear(&s->m[i]);
		s->exists[i] = rc == 0;
		if (rc == ENOENT)
			continue;
		if (rc)
			return wl_failf(err, n, "tp_tree_open %s: %d (%s): %s", tree_name[i], rc, tp_strerror(rc), tp_errmsg());
		if ((rc = btm_load(&s->m[i], NULL, tr, why, sizeof why)) == 0)
			rc = btm_check_backward(&s->m[i], NULL, tr, why, sizeof why);
		tp_tree_close(tr);
		if (rc)
			return wl_failf(err, n, "tree %s: %s", tree_name[i], why);
	}
	return 0;
}

static int state_equal(const bstate *want, const bstate *got, char *why, size_t n)
{
	char w[600];
	for (int i = 0; i < NTREES; i++) {
		if (want->exists[i] != got->exists[i]) {
			snprintf(why, n, "tree %s %s", tree_name[i], want->exists[i] ? "is missing" : "should not exist");
			return 0;
		}
		if (!btm_equal(&want->m[i], &got->m[i], w, sizeof w)) {
			snprintf(why, n, "tree %s: %s", tree_name[i], w);
			return 0;
		}
	}
	return 1;
}

/* base + acknowledged transactions into *out; *doubt gets the in-doubt
 * one (if any) applied on top, *has_doubt says whether there is one. */
static int oracle_states(const bcfg *c, const bstate *base, const char *oracle, size_t maxk, bstate *out,
			 bstate *doubt, int *has_doubt, unsigned *acked, char *err, size_t n)
{
	int fd = open(oracle, O_RDONLY | O_CLOEXEC);
	static bop pend[128];
	orec_hdr h, ph = {0};
	int pending = 0;
	*has_doubt = 0;
	*acked = 0;
	if (state_copy(out, base))
		return wl_failf(err, n, "out of memory");
	if (fd < 0)
		return errno == ENOENT ? 0 : wl_failf(err, n, "oracle %s: %s", oracle, strerror(errno));
	for (;;) {
		ssize_t r = read(fd, &h, sizeof h);
		if (r == 0)
			break;
		if (r != (ssize_t)sizeof h || h.magic != OR_MAGIC || h.nops > 128) {
			close(fd);
			return wl_failf(err, n, "oracle: a malformed record");
		}
		static bop ops[128];
		if (h.nops && read(fd, ops, h.nops * sizeof *ops) != (ssize_t)(h.nops * sizeof *ops)) {
			close(fd);
			return wl_failf(err, n, "oracle: a short record");
		}
		if (ops_sum(&h, ops) != h.sum) {
			close(fd);
			return wl_failf(err, n, "oracle: a record fails its checksum");
		}
		if (h.type == REC_INTENT) {
			if (pending) {
				close(fd);
				return wl_failf(err, n, "oracle: transaction %u was never acknowledged but work went on", ph.txno);
			}
			ph = h;
			memcpy(pend, ops, h.nops * sizeof *ops);
			pending = 1;
		} else if (h.type == REC_ACK) {
			if (!pending || h.txno != ph.txno) {
				close(fd);
				return wl_failf(err, n, "oracle: an ACK of transaction %u out of place", h.txno);
			}
			state_apply(out, c, pend, ph.nops, maxk);
			pending = 0;
			(*acked)++;
		}
	}
	close(fd);
	if (pending) {
		if (state_copy(doubt, out))
			return wl_failf(err, n, "out of memory");
		state_apply(doubt, c, pend, ph.nops, maxk);
		*has_doubt = 1;
	}
	return 0;
}

/* ---- the crash harness's hooks ---- */

/* A worker's base stores (each worker is a process of its own) and the
 * seed it runs. */
static bstate base[2];
static bcfg seed_cfg;

/* Makes the base stores (real io): trees a and u with records. */
static int make_base(int geo, const char *dir, char *err, size_t n)
{
	bcfg c;
	tp_options o;
	tp_env *env;
	tp_tree *a, *u;
	tp_txn *t;
	static unsigned char k[KMAX], v[3 * 4096 + 16];
	int rc;
	cfg_seed(&c, 0);
	c.geo = geo;
	c.psize = geo_psize[geo];
	c.seg = geo_seg[geo];
	c.cache = 256;
	cfg_options(&c, &o);
	if ((rc = tp_mkfs(dir, &o)) != 0 || (rc = tp_open(dir, &o, &env)) != 0)
		return wl_failf(err, n, "base: %d %s", rc, tp_errmsg());
	if ((rc = tp_tree_open(env, "a", TP_TREE_CREATE, &a)) != 0 ||
	    (rc = tp_tree_open(env, "u", TP_TREE_CREATE | TP_TREE_U64, &u)) != 0 || (rc = tp_begin(env, &t)) != 0)
		return wl_failf(err, n, "base trees: %d %s", rc, tp_errmsg());
	size_t maxk = tp_tree_max_key(a);
	wl_rng r = {0xba5e + (uint64_t)geo};
	for (int i = 0; i < 150 && !rc; i++) {
		int tree = i % 2;
		bop op = {.kind = OP_PUT, .tree = (uint8_t)tree, .id = wl_below(&r, POOL), .vseed = wl_rand(&r)};
		op.vlen = vlen_of(&r, c.psize);
		size_t kl = key_of(&c, tree, 0, op.id, maxk, k);
		btm_fill(v, op.vlen, op.vseed);
		rc = tp_put(t, tree ? u : a, k, kl, v, op.vlen, 0);
	}
	if (rc || (rc = tp_commit(t, 0)) != 0)
		return wl_failf(err, n, "base records: %d %s", rc, tp_errmsg());
	tp_tree_close(a);
	tp_tree_close(u);
	state_init(&base[geo]);
	if (state_read(env, &base[geo], err, n) != 0)
		return -1;
	if ((rc = tp_close(env)) != 0)
		return wl_failf(err, n, "base close: %d", rc);
	return 0;
}

static void seed(uint64_t s, wl_rng *r, ch_seed *out)
{
	bcfg *c = &seed_cfg;
	cfg_seed(c, s);
	out->cfg = c;
	out->base = &base[c->geo];
	out->geo = c->geo;
	out->end_close = c->end_close;
	snprintf(out->dry, sizeof out->dry,
		 "dry run (%u-byte pages, %u transactions, cache %zu, checkpoint every %" PRIu64
		 " bytes, long transaction %d, last in flight %d), ending in %s",
		 c->psize, c->ntx, c->cache, c->ckpt_bytes, c->long_txn, c->last_inflight,
		 c->end_close ? "a clean close" : "a power cut");
	snprintf(out->workload, sizeof out->workload, "workload (%u-byte pages, %u transactions, cache %zu)", c->psize,
		 c->ntx, c->cache);
	snprintf(out->brief, sizeof out->brief, "%u txns, cache %zu", c->ntx, c->cache);
}

static int verify_main(ch_child *x, char *err, size_t n)
{
	tp_options o;
	tp_env *env;
	tp_tree *a;
	tp_txn *t;
	bstate want, doubt, got;
	char why[700], why2[700];
	int has_doubt, rc, ret = -1;
	unsigned acked;
	state_init(&want);
	state_init(&doubt);
	state_init(&got);
	const bcfg *cfg = x->cfg;
	cfg_options(cfg, &o);
	if ((rc = tp_open(x->store, &o, &env)) != 0) {
		wl_failf(err, n, "recovery: tp_open: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
		goto out;
	}
	tp_stats st;
	tp_stats_get(env, &st);
	x->sh->val[CH_V_REDONE] = st.rec_redone;
	x->sh->val[CH_V_LOSERS] = st.rec_losers;
	if ((rc = tp_verify(env, 0, NULL)) != 0) {
		wl_failf(err, n, "after recovery: tp_verify: %d: %s", rc, tp_errmsg());
		goto close;
	}
	if ((rc = tp_tree_open(env, "a", 0, &a)) != 0) {
		wl_failf(err, n, "tp_tree_open a: %d %s", rc, tp_errmsg());
		goto close;
	}
	size_t maxk = tp_tree_max_key(a);
	if (oracle_states(cfg, x->base, x->oracle, maxk, &want, &doubt, &has_doubt, &acked, err, n) != 0 ||
	    state_read(env, &got, err, n) != 0) {
		tp_tree_close(a);
		goto close;
	}
	int is_want = state_equal(&want, &got, why, sizeof why);
	int is_doubt = has_doubt && state_equal(&doubt, &got, why2, sizeof why2);
	if (!is_want && !is_doubt) {
		if (has_doubt)
			wl_failf(err, n, "after recovery (%u acknowledged commits, one in doubt): neither without it (%s) nor with it (%s)",
			      acked, why, why2);
		else
			wl_failf(err, n, "after recovery (%u acknowledged commits): %s", acked, why);
		tp_tree_close(a);
		goto close;
	}
	x->sh->val[CH_V_DOUBT] = (uint64_t)has_doubt;
	x->sh->val[CH_V_DOUBT_KEPT] = is_doubt && !is_want;
	bstate *cur = is_want ? &want : &doubt;
	if (tp_debug_pinned(env) != 0) {
		wl_failf(err, n, "after recovery: %zu pages pinned", tp_debug_pinned(env));
		tp_tree_close(a);
		goto close;
	}
	/* one more transaction, then a crash and a second recovery */
	static unsigned char k[KMAX], v[5000];
	wl_rng r = {x->sim_seed};
	if ((rc = tp_begin(env, &t)) != 0)
		goto txfail;
	for (int i = 0; i < 4; i++) {
		size_t kl = key_of(cfg, 0, 0, wl_below(&r, POOL), maxk, k), vl = wl_below(&r, 2) ? 10 : 3000;
		btm_fill(v, vl, i);
		if (i == 3) {
			if ((rc = tp_del(t, a, k, kl)) != 0 && rc != TP_ENOTFOUND)
				goto txfail;
			btm_del(&cur->m[0], k, kl);
		} else {
			if ((rc = tp_put(t, a, k, kl, v, vl, 0)) != 0)
				goto txfail;
			btm_put(&cur->m[0], k, kl, v, vl);
		}
	}
	if ((rc = tp_commit(t, 0)) != 0)
		goto txfail;
	tp_tree_close(a);
	tp_crash_close(env);
	if ((rc = tp_open(x->store, &o, &env)) != 0) {
		wl_failf(err, n, "second recovery: tp_open: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
		goto out;
	}
	if ((rc = tp_verify(env, 0, NULL)) != 0) {
		wl_failf(err, n, "after the second recovery: tp_verify: %d: %s", rc, tp_errmsg());
		goto close;
	}
	if (state_read(env, &got, err, n) != 0)
		goto close;
	if (!state_equal(cur, &got, why, sizeof why)) {
		wl_failf(err, n, "after one more transaction and a second recovery: %s", why);
		goto close;
	}
	if ((rc = tp_close(env)) != 0) {
		wl_failf(err, n, "tp_close: %d %s", rc, tp_errmsg());
		goto out;
	}
	ret = 0;
	goto out;
txfail:
	wl_failf(err, n, "the transaction after recovery: %d (%s): %s", rc, tp_strerror(rc), tp_errmsg());
	tp_tree_close(a);
close:
	tp_crash_close(env);
out:
	state_free(&want);
	state_free(&doubt);
	state_free(&got);
	return ret;
}

/* In a child, under the simulator: the workload, a recovery, or the
 * verifier. */
static int child(ch_child *x)
{
	const bcfg *cfg = x->cfg;
	tp_options o;
	tp_env *env;
	char err[sizeof x->sh->msg];
	int rc;
	err[0] = 0;
	if (x->kind == CH_VERIFY) {
		if (verify_main(x, err, sizeof err) != 0)
			return ch_child_fail(x, "%s", err);
		x->sh->finished = 1;
		return 0;
	}
	cfg_options(cfg, &o);
	if ((rc = ch_child_open(x, &o, &env)) != 0)
		return rc;
	uint64_t commits = 0, aborts = 0;
	if (x->kind == CH_WORKLOAD && run_workload(env, cfg, x->oracle, &commits, &aborts, err, sizeof err) != 0)
		return ch_child_fail(x, "workload: %s", err);
	return ch_child_end(x, env, commits, aborts, 0);
}

static void report(const ch_totals *g, double secs)
{
	printf("btree crash: %" PRIu64 " seeds, %" PRIu64 " recoveries verified, %" PRIu64 " runs ended cleanly; dry runs "
	       "committed %" PRIu64 " and aborted %" PRIu64 " transactions, logged %" PRIu64 " bytes, took %" PRIu64
	       " checkpoints, wrote back %" PRIu64 " pages; recoveries redid %" PRIu64 " records, rolled back %" PRIu64
	       " losers; %" PRIu64 " commits in doubt, %" PRIu64 " of them kept; %.1f s\n",
	       g->seeds, g->verified, g->clean_ends, g->commits, g->aborts, g->log_bytes, g->ckpts, g->page_writes,
	       g->redone, g->losers, g->doubt, g->doubt_kept, secs);
}

static const ch_suite suite = {
	.name = "btree crash",
	.tmp_name = "crashbt",
	.default_points = 500,
	.armed_per_seed = 5,
	.salt = 0xc4a5,
	.max_failures = 1, /* stop at the first */
	.make_base = make_base,
	.seed = seed,
	.child = child,
	.report = report,
};

/* The time limit grows with the number of crash points (--long). */
CH_TEST(crash, btree_random_points, suite, 1.0)
