/*
 * tp -- the engine's public interface (tp.h): opening, creating and closing
 * stores, transactions, page access, checkpoints by log size and time,
 * statistics, and the engine's error strings.
 *
 * Open order: superblock and master (store), log from the master's log
 * start (log), page file and pool (buf), recovery from the master's
 * checkpoint (rec, which makes the transaction table), then a checkpoint if
 * recovery found anything to do, so the next open starts clean.
 *
 * Checkpoints come due by log size (ckpt_log_bytes since the last) or time
 * (ckpt_ms, if the log grew).  With opt.background a thread of the engine
 * takes them: a commit that finds one due only wakes it, and never waits
 * for a checkpoint (one writes back every dirty page and syncs: it would
 * stall that commit for as long, and the commits behind it on ckpt_mu).
 * Without it, the commit that finds one due takes it itself, so that the
 * crash simulator's numbering of I/O calls is the same in every run.
 *
 * A full disk.  Everything a checkpoint, recovery and a clean close write
 * has its disk space before it is needed: pages before they are handed out
 * (buf.c B14, rec.c R6), the checkpoint record in the log's spare segment
 * (log.c L8), the master in place.  What a full disk can stop is the log:
 * ordinary records need a spare segment after the one they end in, and a
 * full disk makes no new one; only a checkpoint frees old segments.  So:
 *
 * E1  The log keeps TP_LOG_SEGS segments from the one its end is in.
 *     log_prepare makes them at a read-write open, and once each time the
 *     end enters a new segment -- one segment before an ordinary append
 *     would need it, L8 -- which is also how a full disk is noticed:
 *     ENOSPC leaves fewer, and the open or the commit that asked goes on.
 *     While the disk is short of space (the page file or the log could not
 *     grow), a checkpoint comes due as soon as the log's end enters a
 *     segment past the one the last checkpoint ended in, while an older
 *     one is still kept: it frees that one for reuse a segment before
 *     ordinary appends run out of room, so the log cycles through the
 *     segments it has without needing a new one.  Aborts look for a due checkpoint as commits do (a full disk
 *     makes many of them).
 *
 * E2  A read-only open writes nothing.
 *     The page file is opened IO_SCRATCH and the log read-only (log.c
 *     L17), so recovery runs as always but its pages and records stay in
 *     memory; no checkpoint is taken and no thread started.  tp_recovered() then tells whether it found work: the
 *     state seen is what a read-write open would make durable.
 *
 * E3  Free pages go back to the file system only from a checkpoint,
 *     after its master is written: those whose freeing commit is older
 *     than the log start it kept (alloc.c A4, op_page_return), as holes.
 *     Every recovery from then on starts at or after that point, so none
 *     redoes or undoes a record of such a page; a crash just after the
 *     punch finds the page as it was or zeros, and needs neither.  Runs of
 *     pages go in one call, by the thread that took the checkpoint (the
 *     background one with opt.background): no commit waits for it.
 *     Not while the file system has less room than the log segments the
 *     engine keeps ahead (E1) and has not made yet: the log would take the
 *     blocks first, and the data that freed them could not get them back
 *     (a full disk stays as full for data as it was).
 */
#include "tp.h"
#include "tp_test.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "buf.h"
#include "io.h"
#include "lock.h"
#include "log.h"
#include "op.h"
#include "rec.h"
#include "store.h"
#include "tp_int.h"
#include "txn.h"
#include "util.h"

#define TP_LOG_SEGS 3 /* log segments a read-write open makes sure of (E1) */

void tp_options_init(tp_options *o)
{
	memset(o, 0, sizeof *o);
	o->cache_pages = 2048;
	o->page_size = 4096;
	o->seg_size = 16u << 20;
	o->ckpt_log_bytes = 64u << 20;
	o->ckpt_ms = 30000;
}

const char *tp_strerror(int rc) { return util_strerror(rc); }

const char *tp_errmsg(void) { return util_errmsg(); }

static void log_dir_of(const char *store_dir, const store_super *sb, char *out, size_t n)
{
	if (sb->logdir[0])
		snprintf(out, n, "%s", sb->logdir);
	else
		store_path(store_dir, "log", out, n);
}

/* A directory mkfs is given that exists already (the store's, or the log
 * directory): a shared one is refused (check), else it becomes private
 * (io.c I8), as one mkfs makes would be. */
static int mkfs_own_dir(const char *path, const char *what, int check, int quiet)
{
	unsigned mode;
	int rc = io_mode(path, 1, &mode, NULL);
	if (rc)
		return util_err(rc, "%s: %s", path, strerror(rc));
	if (check)
		return (mode & 01000) ? util_err(EPERM, "%s: the %s has the sticky bit (mode %04o): a directory "
						       "shared with other users cannot hold a private store; "
						       "give it one of its own", path, what, mode)
				      : 0;
	if (mode == IO_DIR_MODE)
		return 0;
	if ((rc = io_chmod(path, IO_DIR_MODE)) != 0)
		return util_err(rc, "%s: cannot make the %s private (mode %04o): %s", path, what, mode, strerror(rc));
	if (!quiet)
		fprintf(stderr, "tpfs: %s: mode %04o -> %04o (a store is private to its owner)\n", path, mode,
			IO_DIR_MODE);
	return 0;
}

int tp_private(const char *dir, const char *logdir, int tighten, tp_loose_fn *loose, void *arg, unsigned *count)
{
	return store_private(dir, logdir, tighten, loose, arg, count);
}

int tp_mkfs(const char *path, const tp_options *o)
{
	tp_options def;
	store_super sb = {0};
	char logdir[PATH_MAX], data[PATH_MAX], abs[PATH_MAX];
	log_config lc = {0};
	log_mgr *lg = NULL;
	io_file *f = NULL;
	uint64_t ckpt;
	int rc, is_dir;

	if (!o) {
		tp_options_init(&def);
		o = &def;
	}
	if (o->page_size < 1024 || o->page_size > 65536 || (o->page_size & (o->page_size - 1)))
		return util_err(TP_EINVAL, "page size %" PRIu32 " must be a power of two from 1024 to 65536",
				o->page_size);
	if (o->seg_size < 65536 || o->seg_size % 4096 || o->seg_size < 4ull * o->page_size)
		return util_err(TP_EINVAL, "log segment size %" PRIu64 " must be a multiple of 4096, at least 64 KiB and 4 pages",
				o->seg_size);
	int exists = io_exists(path, &is_dir) == 0;
	int log_exists = o->logdir && realpath(o->logdir, abs);
	if (exists) {
		char sp[PATH_MAX];
		store_path(path, "super", sp, sizeof sp);
		if (!is_dir)
			return util_err(EEXIST, "%s: exists and is not a directory", path);
		if (io_exists(sp, NULL) == 0)
			return util_err(EEXIST, "%s: a store already exists here", path);
	}
	/* refused before anything is made or changed */
	if ((exists && (rc = mkfs_own_dir(path, "store directory", 1, o->quiet)) != 0) ||
	    (log_exists && (rc = mkfs_own_dir(o->logdir, "log directory", 1, o->quiet)) != 0))
		return rc;
	if (exists) {
		if ((rc = mkfs_own_dir(path, "store directory", 0, o->quiet)) != 0)
			return rc;
	} else if ((rc = io_mkdir(path)) != 0) {
		return util_err(rc, "%s: cannot create the store directory: %s", path, strerror(rc));
	}
	sb.version = 1;
	sb.page_size = o->page_size;
	sb.seg_size = o->seg_size;
	sb.created = (uint64_t)time(NULL);
	if (getrandom(sb.uuid, sizeof sb.uuid, 0) != (ssize_t)sizeof sb.uuid)
		return util_err(errno, "cannot generate a store uuid: %s", strerror(errno));
	if (o->logdir) {
		if (log_exists && (rc = mkfs_own_dir(o->logdir, "log directory", 0, o->quiet)) != 0)
			return rc;
		if (!log_exists && (rc = io_mkdir(o->logdir)) != 0 && rc != EEXIST)
			return util_err(rc, "%s: cannot create the log directory: %s", o->logdir, strerror(rc));
		if (!realpath(o->logdir, abs) || strlen(abs) > STORE_LOGDIR_MAX)
			return util_err(ENAMETOOLONG, "%s: log directory path unusable or too long", o->logdir);
		snprintf(sb.logdir, sizeof sb.logdir, "%s", abs);
	}
	log_dir_of(path, &sb, logdir, sizeof logdir);
	if ((rc = io_mkdir(logdir)) == EEXIST)
		rc = mkfs_own_dir(logdir, "log directory", 0, o->quiet);
	else if (rc != 0)
		return util_err(rc, "%s: cannot create the log directory: %s", logdir, strerror(rc));
	if (rc)
		return rc;
	lc.dir = logdir;
	lc.seg_size = sb.seg_size;
	memcpy(lc.uuid, sb.uuid, 16);
	lc.quiet = o->quiet;
	if ((rc = log_create(&lc)) != 0)
		return rc;
	if ((rc = log_open(&lc, LOG_SEG_HDR, &lg)) != 0)
		return rc;
	rc = rec_first_checkpoint(lg, &ckpt);
	int rc2 = log_close(lg);
	if (rc || (rc = rc2) != 0)
		return rc;
	store_path(path, "data", data, sizeof data);
	if ((rc = io_open(data, IO_CREATE, &f)) != 0)
		return util_err(rc, "%s: cannot create: %s", data, strerror(rc));
	rc = io_sync(f);
	io_close(f);
	if (rc)
		return util_err(rc, "%s: sync failed: %s", data, strerror(rc));
	store_master m = {.seq = 1, .ckpt_lsn = ckpt, .log_start = LOG_SEG_HDR};
	return store_create(path, &sb, &m); /* last: a store without it is not one */
}

static int bg_start(tp_env *env);
static void bg_stop(tp_env *env);

static void env_free(tp_env *env)
{
	bg_stop(env);
	/* transactions left open (their handles with them): recovery undoes them */
	txn_mgr_close(env->tm);
	buf_close(env->bp);
	if (env->data)
		io_close(env->data);
	if (env->lg)
		log_close(env->lg);
	store_close(env->st);
	pthread_mutex_destroy(&env->ckpt_mu);
	pthread_mutex_destroy(&env->bg_mu);
	pthread_cond_destroy(&env->bg_cv);
	free(env->path);
	free(env);
}

/* E3: whether the file system has room for the log segments the engine
 * still keeps ahead; if not, blocks given back would go to the log first,
 * not to data (the page file keeps them: they are reused as they are). */
static int space_may_return(tp_env *env)
{
	uint64_t free;
	return io_fs_free(env->data, &free) != 0 || free >= log_space_ahead(env->lg);
}

/* bg: taken by the background thread (counted as such) */
static int checkpoint(tp_env *env, int bg)
{
	uint64_t lsn, start;
	op_space sp = {0, 0};
	int rc;
	if (env->opt.readonly)
		return 0;
	pthread_mutex_lock(&env->ckpt_mu);
	rc = rec_checkpoint(env->lg, env->bp, env->tm, env->st, &lsn, &start);
	/* E3: the master names the checkpoint; no recovery reads before start */
	if (!rc && space_may_return(env) && (rc = op_page_return(env->tm, start, &sp)) != 0) {
		/* a hole not made loses only space: the checkpoint stands */
		util_err(rc, "%s: giving free pages back to the file system: %s", env->path, util_strerror(rc));
		rc = 0;
	}
	if (!rc && (buf_space_short(env->bp) || log_space_short(env->lg)))
		(void)log_prepare(env->lg, TP_LOG_SEGS); /* E1: room may have come back */
	if (!rc) {
		__atomic_store_n(&env->ckpt_end, log_end(env->lg), __ATOMIC_RELAXED);
		__atomic_store_n(&env->ckpt_ns, util_now_ns(), __ATOMIC_RELAXED);
		pthread_mutex_lock(&env->bg_mu);
		env->ckpts++;
		env->ckpts_bg += bg != 0;
		env->space_pages += sp.pages;
		env->space_calls += sp.calls;
		pthread_mutex_unlock(&env->bg_mu);
	}
	pthread_mutex_unlock(&env->ckpt_mu);
	return rc;
}

int tp_checkpoint(tp_env *env) { return checkpoint(env, 0); }

/* Spare segments to keep: as many as a checkpoint interval's log fills,
 * one for the part-filled segment the next checkpoint comes due in, and the
 * one after it that entering a segment requires (L8), so that the segments
 * a checkpoint frees are all reused and appends never make a new one in a
 * steady state (making one writes a segment of zeros and syncs twice while
 * every appender waits).  At most 64 (a 1 GiB interval of 16 MiB segments).
 * tp_open adds one with opt.background: appends go on while the thread
 * checkpoints, so the log grows past the interval before it is cut. */
static uint32_t spares_for(uint64_t ckpt_log_bytes, uint64_t seg_size)
{
	uint64_t n = ckpt_log_bytes / seg_size + 2;
	return n < 2 ? 2 : n > 64 ? 64 : (uint32_t)n;
}

/* Opens the store; recover: run recovery (read-only: in memory, E2). */
static int env_open(const char *path, const tp_options *o, int recover, tp_env **out)
{
	tp_env *env = calloc(1, sizeof *env);
	char logdir[PATH_MAX], data[PATH_MAX];
	log_config lc = {0};
	int rc;

	if (!env)
		return ENOMEM;
	pthread_mutex_init(&env->ckpt_mu, NULL);
	pthread_mutex_init(&env->bg_mu, NULL);
	util_cond_init_mono(&env->bg_cv);
	if (o)
		env->opt = *o;
	else
		tp_options_init(&env->opt);
	if (!env->opt.cache_pages)
		env->opt.cache_pages = 2048;
	if (!(env->path = strdup(path))) {
		rc = ENOMEM;
		goto err;
	}
	if ((rc = store_open(path, env->opt.readonly, &env->st)) != 0)
		goto err;
	const store_super *sb = store_sb(env->st);
	const store_master *m = store_master_get(env->st);
	env->psize = sb->page_size;
	if (env->opt.logdir) /* the log moved since mkfs: the segments' uuid still checks it is ours */
		snprintf(logdir, sizeof logdir, "%s", env->opt.logdir);
	else
		log_dir_of(path, sb, logdir, sizeof logdir);
	lc.dir = logdir;
	lc.seg_size = sb->seg_size;
	memcpy(lc.uuid, sb->uuid, 16);
	lc.readonly = env->opt.readonly;
	lc.quiet = env->opt.quiet;
	lc.spares = spares_for(env->opt.ckpt_log_bytes, sb->seg_size) + (env->opt.background ? 1 : 0);
	lc.writer = env->opt.background;
	lc.durable_floor = m->ckpt_lsn + 1; /* the checkpoint record was durable */
	lc.discard_after = env->opt.discard_after;
	lc.inspect = !recover; /* tp_logdump: the records up to damage, then the damage */
	if ((rc = log_open(&lc, m->log_start, &env->lg)) != 0)
		goto err;
	if (!env->opt.readonly)
		(void)log_prepare(env->lg, TP_LOG_SEGS); /* E1: as many as the disk gives */
	store_path(path, "data", data, sizeof data);
	if ((rc = io_open(data, env->opt.readonly ? (recover ? IO_SCRATCH : IO_RDONLY) : 0, &env->data)) != 0) {
		rc = util_err(rc == ENOENT ? TP_EBADSTORE : rc, "%s: %s", data,
			      rc == ENOENT ? "the page file is missing" : strerror(rc));
		goto err;
	}
	if ((rc = buf_open(env->data, env->lg, env->psize, env->opt.cache_pages, env->opt.readonly && !recover,
			   &env->bp)) != 0)
		goto err;
	uint64_t pages;
	if ((rc = buf_file_pages(env->bp, &pages)) != 0)
		goto err;
	if (pages < m->data_pages) { /* every page the last checkpoint wrote back must be there */
		rc = util_err(TP_ECORRUPT, "%s: truncated: %" PRIu64 " pages, but the last checkpoint wrote %" PRIu64,
			      data, pages, m->data_pages);
		goto err;
	}
	if (!recover) {
		if ((rc = txn_mgr_open(env->lg, env->bp, 1, &env->tm)) != 0)
			goto err;
		*out = env;
		return 0;
	}
	if ((rc = rec_recover(env->lg, env->bp, m->ckpt_lsn, env->opt.progress, &env->tm, &env->rec)) != 0)
		goto err;
	/* the checkpoint record itself is the one record of a clean store */
	env->recovered = env->rec.records > 1 || env->rec.redone || env->rec.losers;
	if (env->recovered) {
		if (!env->opt.quiet)
			fprintf(stderr,
				"tpfs: %s: recovered%s: %" PRIu64 " log records scanned (LSN %" PRIu64 "..%" PRIu64
				"), %" PRIu64 " redone, %" PRIu64 " transactions rolled back (%" PRIu64
				" records undone), %" PRIu64 " ms\n",
				path, env->opt.readonly ? " in memory (read-only: nothing written)" : "",
				env->rec.records, env->rec.from_lsn, env->rec.to_lsn, env->rec.redone,
				env->rec.losers, env->rec.undone, env->rec.ms);
		if (!env->opt.readonly && (rc = tp_checkpoint(env)) != 0)
			goto err;
	}
	if (env->opt.readonly) { /* E2: no checkpoints, no threads */
		*out = env;
		return 0;
	}
	env->ckpt_end = log_end(env->lg);
	env->seg_seen = env->ckpt_end / sb->seg_size; /* E1: prepared above */
	env->ckpt_ns = util_now_ns();
	if (env->opt.background && (rc = bg_start(env)) != 0)
		goto err;
	*out = env;
	return 0;
err:
	env_free(env);
	return rc;
}

int tp_open(const char *path, const tp_options *o, tp_env **out) { return env_open(path, o, 1, out); }

int tp_close(tp_env *env)
{
	int rc = 0;
	if (!env)
		return 0;
	bg_stop(env);
	if (!env->opt.readonly && !log_panicked(env->lg))
		rc = tp_checkpoint(env);
	env_free(env);
	return rc;
}

void tp_crash_close(tp_env *env)
{
	if (!env)
		return;
	log_panic(env->lg, TP_EPANIC, NULL); /* nothing more is written (a
						 background checkpoint fails) */
	env_free(env);
}

int tp_recovered(tp_env *env) { return env->recovered; }

int tp_clean(tp_env *env)
{
	const store_master *m = store_master_get(env->st);
	log_scan *s;
	log_rec r;
	int clean = 1;
	/* nothing after the checkpoint, and nothing before it to redo or undo */
	if (!rec_ckpt_quiet(env->lg, m->ckpt_lsn) || log_scan_open(env->lg, m->ckpt_lsn, &s) != 0)
		return 0;
	while (log_scan_next(s, &r) == 0)
		if (r.lsn != m->ckpt_lsn) {
			clean = 0;
			break;
		}
	log_scan_close(s);
	return clean;
}

int tp_sync(tp_env *env) { return log_flush(env->lg, log_end(env->lg)); }

/* ---- transactions ---- */

_Static_assert(sizeof(tp_txn) <= TXN_USER_BYTES, "a tp_txn fits the transaction's user bytes");

/* A handle lives in its transaction object (txn_user): no allocation, no
 * list; it ends with the transaction (commit, abort, or tp_close, which
 * frees the transactions left open). */
int tp_begin(tp_env *env, tp_txn **out)
{
	int rc;
	if (env->opt.readonly)
		return util_err(EROFS, "%s: the store is open read-only", env->path);
	txn *tx;
	if ((rc = txn_begin(env->tm, &tx)) != 0)
		return rc;
	tp_txn *t = txn_user(tx);
	t->t = tx;
	t->env = env;
	*out = t;
	return 0;
}

/* E1: whether the disk is short of space; the first time the log's end is
 * seen in segment idx, the log is first asked to keep its segments ahead. */
static int space_short(tp_env *env, uint64_t idx)
{
	uint64_t seen = __atomic_load_n(&env->seg_seen, __ATOMIC_RELAXED);
	if (idx > seen && __atomic_compare_exchange_n(&env->seg_seen, &seen, idx, 0, __ATOMIC_RELAXED,
						      __ATOMIC_RELAXED))
		(void)log_prepare(env->lg, TP_LOG_SEGS);
	return buf_space_short(env->bp) || log_space_short(env->lg);
}

/* Whether a checkpoint is due: enough log, or (unless bytes_only) enough
 * time and some log, since the last (read without ckpt_mu, which a
 * checkpoint holds long). */
static int ckpt_due(tp_env *env, int bytes_only)
{
	uint64_t end = log_end(env->lg), last = __atomic_load_n(&env->ckpt_end, __ATOMIC_RELAXED);
	if (end - last >= env->opt.ckpt_log_bytes)
		return 1;
	uint64_t seg = store_sb(env->st)->seg_size;
	if (end / seg > last / seg && space_short(env, end / seg) && log_start(env->lg) / seg < end / seg) /* E1 */
		return 1;
	uint64_t at = __atomic_load_n(&env->ckpt_ns, __ATOMIC_RELAXED);
	return !bytes_only && env->opt.ckpt_ms && end != last &&
	       util_now_ns() - at >= (uint64_t)env->opt.ckpt_ms * 1000000u;
}

/* After a commit: a checkpoint if one is due, taken here or by the
 * background thread, which is only woken. */
static void maybe_checkpoint(tp_env *env)
{
	/* with the thread, its own clock covers ckpt_ms: a commit looks at
	 * the log's growth only (no clock read per commit) */
	if (!ckpt_due(env, env->bg_running))
		return;
	if (!env->bg_running) {
		(void)tp_checkpoint(env); /* a failure panics the log; commits report it */
		return;
	}
	if (__atomic_exchange_n(&env->bg_kicked, 1, __ATOMIC_ACQ_REL))
		return; /* woken already */
	pthread_mutex_lock(&env->bg_mu);
	env->bg_kick = 1;
	pthread_cond_signal(&env->bg_cv);
	pthread_mutex_unlock(&env->bg_mu);
}

/* The checkpoint thread: woken by a commit that found one due, or by the
 * clock when ckpt_ms have passed (an idle store's last changes get written
 * back too). */
static void *bg_main(void *arg)
{
	tp_env *env = arg;
	pthread_mutex_lock(&env->bg_mu);
	while (!env->bg_stop) {
		if (!env->bg_kick) {
			if (env->opt.ckpt_ms) {
				struct timespec until = util_deadline_ns((uint64_t)env->opt.ckpt_ms * 1000000u);
				if (pthread_cond_timedwait(&env->bg_cv, &env->bg_mu, &until) != ETIMEDOUT)
					continue; /* woken: stop and kick are looked at again */
			} else {
				pthread_cond_wait(&env->bg_cv, &env->bg_mu);
				continue;
			}
		}
		env->bg_kick = 0;
		__atomic_store_n(&env->bg_kicked, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&env->bg_mu);
		if (ckpt_due(env, 0) && !log_panicked(env->lg))
			(void)checkpoint(env, 1); /* a failure panics the log; commits report it */
		pthread_mutex_lock(&env->bg_mu);
	}
	pthread_mutex_unlock(&env->bg_mu);
	return NULL;
}

static int bg_start(tp_env *env)
{
	if (env->opt.readonly)
		return 0;
	env->bg_running = 1;
	int rc = pthread_create(&env->bg, NULL, bg_main, env);
	if (rc) {
		env->bg_running = 0;
		return util_err(rc, "%s: cannot start the checkpoint thread: %s", env->path, strerror(rc));
	}
	return 0;
}

/* Stops the checkpoint thread, after the checkpoint it may be taking. */
static void bg_stop(tp_env *env)
{
	if (!env->bg_running)
		return;
	pthread_mutex_lock(&env->bg_mu);
	env->bg_stop = 1;
	pthread_cond_signal(&env->bg_cv);
	pthread_mutex_unlock(&env->bg_mu);
	pthread_join(env->bg, NULL);
	env->bg_running = 0;
}

int tp_commit(tp_txn *t, int flags)
{
	tp_env *env = t->env;
	int mode = flags & TP_COMMIT_WRITE ? TXN_WRITE : flags & TP_COMMIT_NOSYNC ? TXN_NOSYNC : TXN_SYNC;
	int rc = txn_commit(t->t, mode);
	if (!rc)
		maybe_checkpoint(env);
	return rc;
}

int tp_commit_held(tp_txn *t, const void *keep, size_t kplen, void (*held)(void *arg), void *arg)
{
	tp_env *env = t->env;
	int rc = txn_commit_held(t->t, keep, kplen, held, arg);
	if (!rc)
		maybe_checkpoint(env);
	return rc;
}

int tp_abort(tp_txn *t)
{
	tp_env *env = t->env;
	int rc = txn_abort(t->t);
	if (!rc)
		maybe_checkpoint(env); /* E1 */
	return rc;
}

uint64_t tp_txn_id(const tp_txn *t) { return txn_id(t->t); }

int tp_lock(tp_txn *t, const void *name, size_t len, int mode) { return txn_lock(t->t, name, len, mode); }

int tp_unlock(tp_txn *t, const void *name, size_t len) { return txn_unlock(t->t, name, len); }

void tp_lock_timeout(tp_txn *t, uint32_t ms) { txn_lock_timeout(t->t, ms); }

size_t tp_lock_count(tp_txn *t) { return lock_count(txn_locker(t->t)); }

uint64_t tp_lock_waits_for(tp_txn *t) { return lock_waits_for(txn_locker(t->t)); }

int tp_lock_held(tp_txn *t, const void *name, size_t len) { return (int)lock_held_mode(txn_locker(t->t), name, len); }

int tp_lock_cancel(tp_txn *t) { return lock_cancel(txn_locker(t->t)); }

/* ---- pages ---- */

uint32_t tp_page_body(const tp_env *env) { return env->psize - BUF_HDR; }

int tp_page_alloc(tp_txn *t, uint16_t type, uint64_t *pgno) { return op_page_alloc(t->t, type, pgno); }

int tp_page_free(tp_txn *t, uint64_t pgno) { return op_page_free(t->t, pgno); }

int tp_page_write(tp_txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len)
{
	if (off > t->env->psize - BUF_HDR)
		return util_err(TP_EINVAL, "write to page %" PRIu64 ": offset %" PRIu32 " is past the body", pgno, off);
	return op_page_set(t->t, pgno, off + BUF_HDR, data, len);
}

int tp_page_read(tp_env *env, uint64_t pgno, uint32_t off, void *buf, uint32_t len)
{
	buf_page *pg;
	int rc;
	if (off > env->psize - BUF_HDR || len > env->psize - BUF_HDR - off)
		return util_err(TP_EINVAL, "read of page %" PRIu64 ": range %" PRIu32 "+%" PRIu32 " is outside the body",
				pgno, off, len);
	if ((rc = buf_get(env->bp, pgno, BUF_S, &pg)) != 0)
		return rc;
	memcpy(buf, buf_data(pg) + BUF_HDR + off, len);
	buf_put(env->bp, pg);
	return 0;
}

int tp_page_allocated(tp_env *env, uint64_t pgno, int *allocated)
{
	return op_page_allocated(env->bp, pgno, allocated);
}

/* ---- statistics ---- */

int tp_space_reserve(tp_env *env, uint64_t *reserve)
{
	*reserve = env->opt.readonly ? 0 : log_space_ahead(env->lg);
	return 0;
}

void tp_stats_get(tp_env *env, tp_stats *s)
{
	log_stats ls;
	buf_stats bs;
	memset(s, 0, sizeof *s);
	txn_counts(env->tm, &s->commits, &s->aborts, &s->aborts_empty);
	log_stats_get(env->lg, &ls);
	buf_stats_get(env->bp, &bs);
	s->log_records = ls.records;
	s->log_bytes = ls.bytes;
	s->log_flushes = ls.syncs;
	s->log_fpis = ls.fpis;
	s->log_segs_made = ls.segs_made;
	s->log_segs_recycled = ls.segs_recycled;
	s->rec_cut_bytes = ls.cut_bytes;
	s->page_reads = bs.reads;
	s->page_writes = bs.writes;
	s->cache_hits = bs.hits;
	s->cache_misses = bs.misses;
	lock_stats ks;
	lock_stats_get(txn_mgr_locks(env->tm), &ks);
	s->lock_requests = ks.requests;
	s->lock_waits = ks.waits;
	s->lock_deadlocks = ks.deadlocks;
	s->lock_timeouts = ks.timeouts;
	/* under bg_mu, not ckpt_mu, which a checkpoint holds throughout:
	 * statistics (tpfs stat) do not wait for one */
	pthread_mutex_lock(&env->bg_mu);
	s->checkpoints = env->ckpts;
	s->checkpoints_bg = env->ckpts_bg;
	s->pages_returned = env->space_pages;
	s->punch_calls = env->space_calls;
	pthread_mutex_unlock(&env->bg_mu);
	s->rec_records = env->rec.records;
	s->rec_redone = env->rec.redone;
	s->rec_losers = env->rec.losers;
	s->rec_undone = env->rec.undone;
	s->rec_ms = env->rec.ms;
}

size_t tp_debug_pinned(tp_env *env) { return buf_pinned(env->bp); }

/* ---- inspection ---- */

int tp_logdump(const char *path, FILE *out, uint64_t from)
{
	tp_options o;
	tp_env *env;
	log_scan *s;
	log_rec r;
	int rc;
	uint64_t n = 0;

	tp_options_init(&o);
	o.readonly = 1;
	o.quiet = 1;
	if ((rc = env_open(path, &o, 0, &env)) != 0) /* the log as it is on disk */
		return rc;
	const store_super *sb = store_sb(env->st);
	const store_master *m = store_master_get(env->st);
	fprintf(out, "# store %s: format %" PRIu32 ", page size %" PRIu32 ", segment size %" PRIu64 "\n", path,
		sb->version, sb->page_size, sb->seg_size);
	fprintf(out, "# checkpoint at LSN %" PRIu64 ", log kept from LSN %" PRIu64 ", end at LSN %" PRIu64 "\n",
		m->ckpt_lsn, m->log_start, log_end(env->lg));
	if (from == TP_LOGDUMP_ALL) {
		from = log_oldest(env->lg);
		if (from < m->log_start)
			fprintf(out, "# from LSN %" PRIu64 ": records below the log start are no longer needed by "
				     "recovery\n",
				from);
	} else if (from < m->log_start)
		from = m->log_start;
	if ((rc = log_scan_open(env->lg, from, &s)) == 0) {
		while ((rc = log_scan_next(s, &r)) == 0) {
			op_print(out, &r);
			n++;
		}
		log_scan_close(s);
		if (rc == TP_ENOTFOUND)
			rc = 0;
	}
	fprintf(out, "# %" PRIu64 " records\n", n);
	if (!rc && log_damage(env->lg)) { /* the log stops there: say why */
		fprintf(out, "# DAMAGED: %s\n", log_damage(env->lg));
		rc = util_err(TP_ECORRUPT, "%s", log_damage(env->lg));
	}
	env_free(env);
	return rc;
}
