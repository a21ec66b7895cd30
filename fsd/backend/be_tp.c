/*
 * be_tp.c -- the embedded engine (core/, tp.h) as a store behind
 * backend.h: the only file of fsd/ that includes tp.h.  Each call is the
 * engine's, its outcome mapped to backend.h's (Z4); the engine has a lock
 * manager (BE_CAP_LOCKS) and a file block is one overflow page (Z5).
 *
 * Z4. Outcomes: TP_E* become the BE_E* of the same meaning; a positive
 *     errno passes unchanged.  Flags, lock modes and seek modes have the
 *     engine's values (checked below), so they pass unchanged too.
 * Z5. Capabilities: BE_CAP_LOCKS (strict two-phase, deadlock detection,
 *     tp.h "Locks"); block_size = tp_tree_value_page of the data tree, one
 *     page less its overflow header (4,068 bytes with 4 KiB pages), so a
 *     file block is one page on disk.
 * Z6. Handles wrap the engine's (one small allocation per transaction and
 *     per cursor, beside the engine's own).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "be_tp.h"
#include "tp.h"

#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(BE_LOCK_IS, TP_LOCK_IS) && SAME(BE_LOCK_IX, TP_LOCK_IX) && SAME(BE_LOCK_S, TP_LOCK_S) &&
		       SAME(BE_LOCK_SIX, TP_LOCK_SIX) && SAME(BE_LOCK_X, TP_LOCK_X),
	       "lock modes");
_Static_assert(SAME(BE_NOOVERWRITE, TP_NOOVERWRITE) && SAME(BE_ORDERED, TP_ORDERED) && SAME(BE_PATCH, TP_PATCH), "put flags");
_Static_assert(SAME(BE_SEEK_GE, TP_SEEK_GE) && SAME(BE_SEEK_GT, TP_SEEK_GT) && SAME(BE_FIRST, TP_FIRST) && SAME(BE_LAST, TP_LAST),
	       "seek modes");
_Static_assert(SAME(BE_TREE_CREATE, TP_TREE_CREATE) && SAME(BE_TREE_U64, TP_TREE_U64) && SAME(BE_TREE_NOLOCK, TP_TREE_NOLOCK),
	       "tree flags");
_Static_assert(SAME(BE_COMMIT_LAZY, TP_COMMIT_WRITE), "commit flags");

typedef struct tps {
	be_store pub;
	tp_env *env;
	be_caps caps;
	char *path; /* be_space */
} tps;
typedef struct tpt {
	be_tree pub;
	tp_tree *tr;
} tpt;
typedef struct tpx {
	be_txn pub;
	tp_txn *t;
} tpx;
typedef struct tpc {
	be_cursor pub;
	tp_cursor *c;
} tpc;

#define ENV(s) (((tps *)(s))->env)
#define TREE(tr) (((tpt *)(tr))->tr)
#define TXN(t) ((t) ? ((const tpx *)(t))->t : NULL)
#define CUR(c) (((tpc *)(c))->c)

/* Z4 */
static int out(int rc)
{
	static const int map[] = {0, BE_ENOTFOUND, BE_EDEADLOCK, BE_ECORRUPT, BE_EPANIC, BE_EVERSION, BE_EBADSTORE,
				  BE_EINVAL, BE_EROLLBACK, BE_ETIMEOUT};
	if (rc >= 0)
		return rc;
	return -rc < (int)(sizeof map / sizeof map[0]) ? map[-rc] : BE_EPANIC;
}

static int tp_open_(const char *name, const be_options *o, be_store **res)
{
	tp_options to;
	tps *s = calloc(1, sizeof *s);
	if (!s)
		return ENOMEM;
	s->pub.ops = &be_tp_ops;
	tp_options_init(&to);
	if (o) {
		if (o->cache_pages)
			to.cache_pages = o->cache_pages;
		to.readonly = o->readonly;
		to.quiet = o->quiet;
		to.progress = o->progress;
		to.logdir = o->logdir;
		to.background = o->background;
	}
	if (!(s->path = strdup(name))) {
		free(s);
		return ENOMEM;
	}
	int rc = tp_open(name, &to, &s->env);
	if (rc) {
		free(s->path);
		free(s);
		return out(rc);
	}
	s->caps.flags = BE_CAP_LOCKS;
	*res = &s->pub;
	return 0;
}

static int tp_private_(const char *name, const char *logdir, int tighten, be_loose_fn *loose, void *arg,
		       unsigned *count)
{
	return out(tp_private(name, logdir, tighten, loose, arg, count));
}

static int tp_close_(be_store *s)
{
	int rc = tp_close(ENV(s));
	free(((tps *)s)->path);
	free(s);
	return out(rc);
}

static const be_caps *tp_caps(const be_store *s) { return &((const tps *)s)->caps; }
static int tp_recovered_(be_store *s) { return tp_recovered(ENV(s)); }
static int tp_sync_(be_store *s) { return out(tp_sync(ENV(s))); }
static int tp_checkpoint_(be_store *s) { return out(tp_checkpoint(ENV(s))); }
static int tp_verify_(be_store *s, FILE *o) { return out(tp_verify(ENV(s), 0, o)); }

static void tp_stats_(be_store *s, be_stats *o)
{
	tp_stats st;
	tp_stats_get(ENV(s), &st);
	*o = (be_stats){
		.commits = st.commits, .aborts = st.aborts, .aborts_empty = st.aborts_empty,
		.log_records = st.log_records, .log_bytes = st.log_bytes, .log_flushes = st.log_flushes,
		.log_fpis = st.log_fpis, .page_reads = st.page_reads, .page_writes = st.page_writes,
		.cache_hits = st.cache_hits, .cache_misses = st.cache_misses, .checkpoints = st.checkpoints,
		.checkpoints_bg = st.checkpoints_bg, .log_segs_made = st.log_segs_made,
		.log_segs_recycled = st.log_segs_recycled, .rec_records = st.rec_records, .rec_redone = st.rec_redone,
		.rec_losers = st.rec_losers, .rec_undone = st.rec_undone, .rec_ms = st.rec_ms,
		.rec_cut_bytes = st.rec_cut_bytes, .lock_requests = st.lock_requests, .lock_waits = st.lock_waits,
		.lock_deadlocks = st.lock_deadlocks, .lock_timeouts = st.lock_timeouts,
	};
}

static int tp_space(be_store *s, uint64_t *total, uint64_t *avail)
{
	struct statvfs sv;
	if (statvfs(((tps *)s)->path, &sv) != 0)
		return errno;
	uint64_t reserve;
	int rc = tp_space_reserve(ENV(s), &reserve);
	if (rc)
		return out(rc);
	*total = (uint64_t)sv.f_blocks * sv.f_frsize;
	*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	/* what data can still take: the log segments the engine keeps ahead
	 * (tp.c E1) come out of the same free space first; free pages go back
	 * to the file system at checkpoints (E3), so they are in f_bavail */
	*avail = *avail > reserve ? *avail - reserve : 0;
	return 0;
}

static int tp_tree_open_(be_store *s, const char *name, int flags, be_tree **res)
{
	tpt *t = calloc(1, sizeof *t);
	if (!t)
		return ENOMEM;
	t->pub.ops = &be_tp_ops;
	int rc = tp_tree_open(ENV(s), name, flags, &t->tr);
	if (rc) {
		free(t);
		return out(rc);
	}
	tps *ts = (tps *)s;
	if (!ts->caps.block_size || !ts->caps.max_key) { /* Z5: the same for every tree of a store */
		ts->caps.block_size = tp_tree_value_page(t->tr);
		ts->caps.max_key = tp_tree_max_key(t->tr);
	}
	*res = &t->pub;
	return 0;
}

static void tp_tree_close_(be_tree *tr)
{
	tp_tree_close(TREE(tr));
	free(tr);
}

static int tp_begin_(be_store *s, be_txn **res)
{
	tpx *x = malloc(sizeof *x);
	if (!x)
		return ENOMEM;
	x->pub.ops = &be_tp_ops;
	int rc = tp_begin(ENV(s), &x->t);
	if (rc) {
		free(x);
		return out(rc);
	}
	*res = &x->pub;
	return 0;
}

static int tp_commit_(be_txn *t, int flags)
{
	int rc = tp_commit(TXN(t), flags);
	free(t);
	return out(rc);
}

static int tp_commit_held_(be_txn *t, const void *keep, size_t kplen, void (*held)(void *arg), void *arg)
{
	int rc = tp_commit_held(TXN(t), keep, kplen, held, arg);
	free(t);
	return out(rc);
}

static int tp_abort_(be_txn *t)
{
	int rc = tp_abort(TXN(t));
	free(t);
	return out(rc);
}

static uint64_t tp_txn_id_(const be_txn *t) { return tp_txn_id(TXN(t)); }
static int tp_lock_(be_txn *t, const void *name, size_t len, int mode) { return out(tp_lock(TXN(t), name, len, mode)); }
static int tp_unlock_(be_txn *t, const void *name, size_t len) { return out(tp_unlock(TXN(t), name, len)); }
static void tp_lock_timeout_(be_txn *t, uint32_t ms) { tp_lock_timeout(TXN(t), ms); }
static size_t tp_lock_count_(be_txn *t) { return tp_lock_count(TXN(t)); }
static uint64_t tp_lock_waits_for_(be_txn *t) { return tp_lock_waits_for(TXN(t)); }
static int tp_lock_held_(be_txn *t, const void *name, size_t len) { return tp_lock_held(TXN(t), name, len); }
static int tp_lock_cancel_(be_txn *t) { return tp_lock_cancel(TXN(t)); }

static int tp_get_(be_txn *t, be_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	return out(tp_get(TXN(t), TREE(tr), key, klen, val, cap, vlen));
}

static int tp_put_(be_txn *t, be_tree *tr, const void *key, size_t klen, const void *val, size_t vlen, int flags)
{
	return out(tp_put(TXN(t), TREE(tr), key, klen, val, vlen, flags));
}

static int tp_del_(be_txn *t, be_tree *tr, const void *key, size_t klen)
{
	return out(tp_del(TXN(t), TREE(tr), key, klen));
}

static void tp_prefetch_(be_tree *tr, const void *lo, size_t lolen, const void *hi, size_t hilen)
{
	tp_prefetch(TREE(tr), lo, lolen, hi, hilen);
}

static int tp_cursor_open_(be_txn *t, be_tree *tr, be_cursor **res)
{
	tpc *c = malloc(sizeof *c);
	if (!c)
		return ENOMEM;
	c->pub.ops = &be_tp_ops;
	int rc = tp_cursor_open(TXN(t), TREE(tr), &c->c);
	if (rc) {
		free(c);
		return out(rc);
	}
	*res = &c->pub;
	return 0;
}

static int tp_cursor_seek_(be_cursor *c, const void *key, size_t klen, int how)
{
	return out(tp_cursor_seek(CUR(c), key, klen, how));
}

static int tp_cursor_next_(be_cursor *c) { return out(tp_cursor_next(CUR(c))); }

static int tp_cursor_get_(be_cursor *c, const void **key, size_t *klen, const void **val, size_t *vlen)
{
	return out(tp_cursor_get(CUR(c), key, klen, val, vlen));
}

static void tp_cursor_close_(be_cursor *c)
{
	tp_cursor_close(CUR(c));
	free(c);
}

const be_ops be_tp_ops = {
	.scheme = NULL,
	.open = tp_open_,
	.private_ = tp_private_,
	.errmsg = tp_errmsg,
	.close = tp_close_,
	.caps = tp_caps,
	.recovered = tp_recovered_,
	.sync = tp_sync_,
	.checkpoint = tp_checkpoint_,
	.verify = tp_verify_,
	.stats = tp_stats_,
	.space = tp_space,
	.tree_open = tp_tree_open_,
	.tree_close = tp_tree_close_,
	.begin = tp_begin_,
	.commit = tp_commit_,
	.commit_held = tp_commit_held_,
	.abort = tp_abort_,
	.txn_id = tp_txn_id_,
	.lock = tp_lock_,
	.unlock = tp_unlock_,
	.lock_timeout = tp_lock_timeout_,
	.lock_count = tp_lock_count_,
	.lock_waits_for = tp_lock_waits_for_,
	.lock_held = tp_lock_held_,
	.lock_cancel = tp_lock_cancel_,
	.get = tp_get_,
	.put = tp_put_,
	.del = tp_del_,
	.prefetch = tp_prefetch_,
	.cursor_open = tp_cursor_open_,
	.cursor_seek = tp_cursor_seek_,
	.cursor_next = tp_cursor_next_,
	.cursor_get = tp_cursor_get_,
	.cursor_close = tp_cursor_close_,
};
