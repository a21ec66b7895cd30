/*
 * fs -- the file-system layer: mounting, the transaction of each call,
 * inode records and locks, the kernel's references and orphans, statfs,
 * counters.  Names are in fs_dir.c, data in fs_data.c, xattrs in
 * fs_xattr.c, the offline checker in fs_check.c.
 *
 * Invariants
 *   F1  Every call is one engine transaction: a crash leaves it whole or
 *       absent (DESIGN: "every call is atomic").
 *   F2  A call locks every inode it reads (S) or changes (X) before it
 *       touches one of its records, in ascending inode order (fs_lock_all),
 *       or releases all its locks and starts over when it learns of an inode
 *       below one it holds; so calls never deadlock among themselves.  A
 *       transaction that loses a deadlock anyway (an engine lock taken in
 *       another order) is rolled back and the call retried.
 *   F3  An inode with no links is freed only when the kernel holds no
 *       reference and no file is open on it; until then it is in the orphan
 *       tree, which the next mount empties after a crash.  (Not sooner: a
 *       process whose open had found the name before an unlink or rename
 *       took it still opens the inode -- its data must be there.)  A
 *       file of at most FS_TRIM_BLOCKS blocks goes in one transaction with
 *       its data; a larger one's data goes first, in transactions of
 *       FS_TRIM_BLOCKS blocks, so that freeing a large file never needs
 *       much log at a time (a step
 *       that finds the log full on a full disk takes a checkpoint, which
 *       frees old segments, and goes on).  The kernel's last reference
 *       goes right after the unlink, but the daemon frees the inode while
 *       the next calls run: a plain call that fails with ENOSPC while an
 *       orphan is being freed waits for it and is tried again, so the
 *       space a removal frees is writable at once.
 *   F4  Durability is lazy: calls commit without waiting for a log sync,
 *       and fs_tick (every commit_interval) or fs_sync makes them durable;
 *       with -o sync every call commits durably.  But a call's log records
 *       are written to the log files before it returns (BE_COMMIT_LAZY):
 *       a crash of tpfsd alone loses no call that returned, only a crash
 *       of the machine may (as on ext4, where a process's crash loses
 *       nothing it wrote).  A read waits the same way for the commits it
 *       read from.
 *   F5  Two levels of locks.  "I" locks (above) keep calls atomic against
 *       each other for their duration.  Transaction-level locks -- "U"+ino
 *       on inodes (S to read, X to change; IS/IX on a directory whose
 *       entries are read or changed, S on one that is listed) and
 *       "N"+parent+name on entries -- are held by user transactions to
 *       their end (strict 2PL, fs_tx.c) and taken by plain calls that
 *       change something for the call only, so a plain writer waits for
 *       a transaction it conflicts with; plain readers take none and never
 *       wait for a transaction (they read the committed store).  A
 *       member's getattr and lookup lock a directory in IS only: its link
 *       count and times change by deltas (fs_dir_touch), not as reads
 *       that other transactions' creates would conflict with; and a file
 *       not at all, but X through a writable handle (getattr_fn).  Deadlocks
 *       between the two levels are possible and detected: a plain call is
 *       retried, a transaction doomed (fs_tx.c X2).
 */
#include "fs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int fs_errno(int rc)
{
	switch (rc) {
	case 0: return 0;
	case BE_ENOTFOUND: return -ENOENT;
	case BE_EDEADLOCK:
	case BE_EROLLBACK: return -EDEADLK;
	case BE_ETIMEOUT: return -ETIMEDOUT;
	case BE_EINVAL: return -EINVAL;
	case BE_ECORRUPT:
	case BE_EPANIC:
	case BE_EVERSION:
	case BE_EBADSTORE: return -EIO;
	default: return rc > 0 ? -rc : -EIO;
	}
}

static _Thread_local int in_reclaim; /* F3: this thread frees an orphan: it waits for none */

/* F3: how many orphans' last references went, whose freeing is over. */
static uint64_t reclaims_seen(fs *f)
{
	pthread_mutex_lock(&f->mu);
	uint64_t n = f->reclaimed;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* F3: after a call failed with ENOSPC, waits (a bounded time) until no
 * orphan is being freed; 1 if one was, or one finished since the call
 * began (seen): then space may have come back and the call is tried
 * again. */
static int reclaim_wait(fs *f, uint64_t seen)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	pthread_mutex_lock(&f->mu);
	int any = f->reclaiming > 0 || f->reclaimed != seen;
	while (f->reclaiming > 0)
		if (pthread_cond_timedwait(&f->reclaim_cv, &f->mu, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->mu);
	return any;
}

int fs_run(fs *f, const fs_caller *c, int wr, int (*fn)(fs_op *op, void *arg), void *arg)
{
	int rc = 0;
	if (c && c->refuse)
		return c->refuse;
	if (c && c->refuse_changes && wr != FS_RD && wr != FS_ATTR)
		return c->refuse_changes;
	if (c && c->tx)
		return fs_tx_run(f, c->tx, wr, fn, arg);
	if (f->opt.readonly) { /* nothing changes: read without a transaction or locks */
		fs_op op = {.f = f};
		return fn(&op, arg);
	}
	int waited = 0;
	uint64_t deadline = 0; /* X8: over all attempts of the call */
	for (int attempt = 0; attempt < 1000; attempt++) {
		fs_op op = {.f = f, .wr = wr == FS_WR || wr == FS_KLOCK, .klock = wr == FS_KLOCK, .pid = c ? c->pid : 0,
			    .deadline = &deadline};
		uint64_t seen = reclaims_seen(f);
		if ((rc = be_begin(f->be, &op.t)) != 0)
			return rc;
		rc = fn(&op, arg);
		if (rc == 0)
			rc = be_commit(op.t, f->opt.sync ? 0 : BE_COMMIT_LAZY); /* F4 */
		else
			(void)be_abort(op.t);
		if (rc == BE_ETIMEOUT) /* X5: a wait cancelled to break a cycle through the kernel */
			return EDEADLK;
		if (rc == ENOSPC && (wr == FS_WR || wr == FS_KLOCK) && !in_reclaim && !waited++ && reclaim_wait(f, seen))
			continue; /* F3: space a removal frees is writable at once */
		if (rc != BE_EDEADLOCK && rc != BE_EROLLBACK)
			return rc;
		__atomic_add_fetch(&f->ctr.retries, 1, __ATOMIC_RELAXED);
	}
	return rc;
}

/* ---- locks (F2, F5) ---- */

pid_t fs_thread_id(void)
{
	static _Thread_local pid_t tid;
	if (!tid)
		tid = gettid();
	return tid;
}

int fs_be_lock(fs_op *op, const void *name, size_t len, int mode)
{
	fs *f = op->f;
	if (!fs_tx_count(f)) /* only transactions hold locks across requests (X5) */
		return be_lock(op->t, name, len, mode);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* fs_tx.c X8: a plain writer waits for transactions a bounded time in
	 * all ("I" locks: only calls and commits hold them, never for long) */
	int bounded = !op->tx && op->deadline && ((const unsigned char *)name)[0] != 'I';
	if (bounded) {
		if (!*op->deadline)
			*op->deadline = now + (uint64_t)(op->klock ? f->opt.tx_short_wait_ms : f->opt.tx_wait_ms) * 1000000ull;
		uint64_t left = *op->deadline > now ? *op->deadline - now : 0;
		be_lock_timeout(op->t, left > 1000000 ? (uint32_t)((left + 999999) / 1000000) : 1);
	} else if (!op->tx && op->deadline && *op->deadline) {
		be_lock_timeout(op->t, 0); /* (set by an earlier wait of the call) */
	}
	fs_waiter w = {.t = op->t, .tx = op->tx, .since_ns = now, .tid = fs_thread_id()};
	pthread_mutex_lock(&f->wmu);
	for (int i = 0; i < f->nintr; i++)
		if (f->intr[i] == w.tid) { /* interrupted before it waited */
			pthread_mutex_unlock(&f->wmu);
			return EINTR;
		}
	w.next = f->waiters;
	f->waiters = &w;
	pthread_mutex_unlock(&f->wmu);
	int rc = be_lock(op->t, name, len, mode);
	pthread_mutex_lock(&f->wmu);
	for (fs_waiter **pp = &f->waiters; *pp; pp = &(*pp)->next)
		if (*pp == &w) {
			*pp = w.next;
			break;
		}
	pthread_mutex_unlock(&f->wmu);
	if (w.interrupted && rc == BE_ETIMEOUT)
		rc = EINTR;
	else if (bounded && rc == BE_ETIMEOUT && !w.cancelled)
		rc = fs_tx_yield(op, name, len, mode); /* X8: the holders yield, the call is tried again */
	return rc;
}

void fs_interrupt(fs *f, pid_t tid)
{
	int found = 0;
	pthread_mutex_lock(&f->wmu);
	for (fs_waiter *w = f->waiters; w; w = w->next)
		if (w->tid == tid) {
			w->interrupted = found = 1;
			(void)be_lock_cancel(w->t);
		}
	if (!found && f->nintr < (int)(sizeof f->intr / sizeof f->intr[0]))
		f->intr[f->nintr++] = tid;
	pthread_mutex_unlock(&f->wmu);
}

void fs_interrupt_done(fs *f, pid_t tid)
{
	pthread_mutex_lock(&f->wmu);
	for (int i = 0; i < f->nintr; i++)
		if (f->intr[i] == tid)
			f->intr[i--] = f->intr[--f->nintr];
	pthread_mutex_unlock(&f->wmu);
}

static int lock_named(fs_op *op, char kind, uint64_t ino, int mode)
{
	unsigned char name[9] = {(unsigned char)kind};
	fs_be64(name + 1, ino);
	return fs_be_lock(op, name, sizeof name, mode);
}

int fs_lock(fs_op *op, uint64_t ino, int mode)
{
	int rc;
	if (!op->t)
		return 0; /* read-only mount */
	if (op->tx)
		return lock_named(op, 'U', ino, mode);
	if (op->wr && (rc = lock_named(op, 'U', ino, mode)) != 0)
		return rc;
	return lock_named(op, 'I', ino, mode);
}

int fs_iunlock(fs_op *op, uint64_t ino)
{
	unsigned char name[9] = {'I'};
	if (!op->t || op->tx)
		return 0; /* members hold everything to the end */
	fs_be64(name + 1, ino);
	return be_unlock(op->t, name, sizeof name);
}

int fs_lock_name(fs_op *op, uint64_t parent, const char *name, size_t len, int mode)
{
	unsigned char k[1 + 8 + FS_NAME_MAX] = {'N'};
	int rc;
	if (!op->t || (!op->tx && !op->wr))
		return 0;
	op->lname = name; /* X8: what a transaction that yields is told */
	op->lnamelen = len;
	op->lparent = parent;
	if ((rc = lock_named(op, 'U', parent, mode == BE_LOCK_X ? BE_LOCK_IX : BE_LOCK_IS)) != 0)
		return rc;
	fs_be64(k + 1, parent);
	memcpy(k + 9, name, len);
	return fs_be_lock(op, k, 9 + len, mode);
}

static int sort_inos(const uint64_t *v, int n, uint64_t *s)
{
	int m = 0;
	for (int i = 0; i < n && m < 8; i++)
		if (v[i])
			s[m++] = v[i];
	for (int i = 1; i < m; i++) /* insertion sort: a handful */
		for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
			uint64_t x = s[j];
			s[j] = s[j - 1];
			s[j - 1] = x;
		}
	return m;
}

int fs_lock_all(fs_op *op, const uint64_t *v, int n, int mode)
{
	uint64_t s[8];
	int m = sort_inos(v, n, s), rc;
	for (int i = 0; i < m; i++)
		if ((i == 0 || s[i] != s[i - 1]) && (rc = fs_lock(op, s[i], mode)) != 0)
			return rc;
	return 0;
}

int fs_ilock_all(fs_op *op, const uint64_t *v, int n, int mode)
{
	uint64_t s[8];
	int m = sort_inos(v, n, s), rc;
	if (!op->t || op->tx)
		return 0;
	for (int i = 0; i < m; i++)
		if ((i == 0 || s[i] != s[i - 1]) && (rc = lock_named(op, 'I', s[i], mode)) != 0)
			return rc;
	return 0;
}

/* ---- inode records ---- */

void fs_now(struct timespec *ts) { clock_gettime(CLOCK_REALTIME, ts); }

int fs_iget(fs_op *op, uint64_t ino, fs_inode *in)
{
	unsigned char k[8], v[FS_INODE_BYTES];
	size_t vl;
	int rc;
	fs_le64(k, ino);
	if ((rc = fs_rget(op, WS_INODE, k, 8, v, sizeof v, &vl)) != 0)
		return rc == BE_ENOTFOUND ? ENOENT : rc;
	if (vl != FS_INODE_BYTES)
		return BE_ECORRUPT;
	in->ino = ino;
	memcpy(&in->mode, v, 4);
	memcpy(&in->nlink, v + 4, 4);
	memcpy(&in->uid, v + 8, 4);
	memcpy(&in->gid, v + 12, 4);
	memcpy(&in->size, v + 16, 8);
	memcpy(&in->blocks, v + 24, 8);
	memcpy(&in->rdev, v + 32, 8);
	int64_t s;
	uint32_t ns;
	memcpy(&s, v + 40, 8);
	memcpy(&ns, v + 48, 4);
	in->atime = (struct timespec){.tv_sec = s, .tv_nsec = ns};
	memcpy(&ns, v + 52, 4);
	memcpy(&s, v + 56, 8);
	in->mtime = (struct timespec){.tv_sec = s, .tv_nsec = ns};
	memcpy(&s, v + 64, 8);
	memcpy(&ns, v + 72, 4);
	in->ctime = (struct timespec){.tv_sec = s, .tv_nsec = ns};
	memcpy(&in->parent, v + 80, 8);
	if (op->ws) { /* a directory's pending delta (fs_dir_touch) */
		ws_delta d;
		if (ws_get(op->ws, WS_DELTA, k, 8, &d, sizeof d, &vl) == 1 && vl == sizeof d) {
			in->nlink = (uint32_t)((int64_t)in->nlink + d.nlink);
			if (d.touched)
				in->mtime = in->ctime = (struct timespec){.tv_sec = d.sec, .tv_nsec = d.nsec};
		}
	}
	return 0;
}

int fs_iput(fs_op *op, const fs_inode *in)
{
	unsigned char k[8], v[FS_INODE_BYTES] = {0};
	int64_t s;
	uint32_t ns;
	fs_le64(k, in->ino);
	memcpy(v, &in->mode, 4);
	memcpy(v + 4, &in->nlink, 4);
	memcpy(v + 8, &in->uid, 4);
	memcpy(v + 12, &in->gid, 4);
	memcpy(v + 16, &in->size, 8);
	memcpy(v + 24, &in->blocks, 8);
	memcpy(v + 32, &in->rdev, 8);
	s = in->atime.tv_sec;
	ns = (uint32_t)in->atime.tv_nsec;
	memcpy(v + 40, &s, 8);
	memcpy(v + 48, &ns, 4);
	s = in->mtime.tv_sec;
	ns = (uint32_t)in->mtime.tv_nsec;
	memcpy(v + 52, &ns, 4);
	memcpy(v + 56, &s, 8);
	s = in->ctime.tv_sec;
	ns = (uint32_t)in->ctime.tv_nsec;
	memcpy(v + 64, &s, 8);
	memcpy(v + 72, &ns, 4);
	memcpy(v + 80, &in->parent, 8);
	if (op->ws && in->ino == FS_ROOT_INO && op->tx)
		fs_tx_root_changed(op->tx);
	if (op->ws) { /* the record now includes any pending delta */
		ws_delta d;
		size_t vl;
		int rc = ws_get(op->ws, WS_DELTA, k, 8, &d, sizeof d, &vl);
		if (rc == 1 && (d.nlink || d.touched)) {
			memset(&d, 0, sizeof d);
			if ((rc = ws_put(op->ws, WS_DELTA, k, 8, &d, sizeof d)) != 0)
				return rc;
		} else if (rc > 1) { /* (1: found, already zero) */
			return rc;
		}
	}
	return fs_rput(op, WS_INODE, k, 8, v, sizeof v);
}

int fs_dir_touch(fs_op *op, fs_inode *dir, int dnlink, const struct timespec *now)
{
	dir->nlink = (uint32_t)((int64_t)dir->nlink + dnlink);
	dir->mtime = dir->ctime = *now;
	if (!op->ws)
		return fs_iput(op, dir);
	if (dir->ino == FS_ROOT_INO && op->tx)
		fs_tx_root_changed(op->tx);
	unsigned char k[8];
	ws_delta d = {0};
	size_t vl;
	fs_le64(k, dir->ino);
	int rc = ws_get(op->ws, WS_DELTA, k, 8, &d, sizeof d, &vl);
	if (rc > 1 || (rc == 1 && vl != sizeof d))
		return rc > 1 ? rc : BE_ECORRUPT;
	if (rc != 1)
		memset(&d, 0, sizeof d);
	d.nlink += dnlink;
	d.sec = now->tv_sec;
	d.nsec = (uint32_t)now->tv_nsec;
	d.touched = 1;
	return ws_put(op->ws, WS_DELTA, k, 8, &d, sizeof d);
}

void fs_iattr(const fs *f, const fs_inode *in, fs_attr *a)
{
	(void)f;
	a->ino = in->ino;
	a->mode = in->mode;
	a->nlink = in->nlink;
	a->uid = in->uid;
	a->gid = in->gid;
	a->size = in->size;
	a->blocks = in->blocks * ((f->bsize + 28) / 512); /* each block is one page on disk */
	a->rdev = in->rdev;
	a->atime = in->atime;
	a->mtime = in->mtime;
	a->ctime = in->ctime;
}

void fs_ino_committed(fs *f, uint64_t ino)
{
	pthread_mutex_lock(&f->mu);
	if (ino + 1 > f->committed_ino)
		f->committed_ino = ino + 1;
	pthread_mutex_unlock(&f->mu);
}

uint64_t fs_new_ino(fs *f)
{
	pthread_mutex_lock(&f->mu);
	uint64_t ino = f->next_ino++;
	pthread_mutex_unlock(&f->mu);
	return ino;
}

int fs_ifree(fs_op *op, uint64_t ino)
{
	fs_inode in;
	unsigned char k[8];
	int rc;
	if ((rc = fs_iget(op, ino, &in)) != 0)
		return rc == ENOENT ? 0 : rc;
	if ((rc = fs_data_drop_all(op, &in)) != 0 || (rc = fs_xattr_drop_all(op, ino)) != 0)
		return rc;
	fs_le64(k, ino);
	if ((rc = fs_rdel(op, WS_INODE, k, 8)) != 0)
		return rc;
	rc = fs_rdel(op, WS_ORPHAN, k, 8);
	return rc == BE_ENOTFOUND ? 0 : rc;
}

/* ---- the kernel's references and open files (F3) ---- */

static fs_refent *ref_find(fs *f, uint64_t ino, int create)
{
	fs_refent **pp = &f->refs[ino % FS_REF_BUCKETS];
	for (fs_refent *r = *pp; r; r = r->next)
		if (r->ino == ino)
			return r;
	if (!create)
		return NULL;
	fs_refent *r = calloc(1, sizeof *r);
	if (r) {
		r->ino = ino;
		r->next = *pp;
		*pp = r;
	}
	return r;
}

static void ref_drop(fs *f, fs_refent *r)
{
	fs_refent **pp = &f->refs[r->ino % FS_REF_BUCKETS];
	while (*pp != r)
		pp = &(*pp)->next;
	*pp = r->next;
	free(r->plain);
	free(r);
}

int fs_is_referenced(fs *f, uint64_t ino)
{
	pthread_mutex_lock(&f->mu);
	fs_refent *r = ref_find(f, ino, 0);
	int yes = r && (r->nlookup || r->nopen);
	pthread_mutex_unlock(&f->mu);
	return yes;
}

#define FS_TRIM_BLOCKS 512 /* F3: blocks an orphan loses per transaction (about 150 KiB of log) */

typedef struct reclaim_arg {
	uint64_t ino;
	int big;     /* it has more than FS_TRIM_BLOCKS blocks: trim it first */
	int trimmed; /* fs_trim_orphan ran: free it whatever is left */
} reclaim_arg;

/* F3: frees an orphan the kernel let go of, with its data when that is at
 * most FS_TRIM_BLOCKS blocks (one transaction, as most files need);
 * a larger one is left for fs_trim_orphan's steps (a->big). */
static int reclaim_fn(fs_op *op, void *arg)
{
	reclaim_arg *a = arg;
	fs_inode in;
	int rc;
	a->big = 0;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_X)) != 0)
		return rc;
	if ((rc = fs_iget(op, a->ino, &in)) != 0)
		return rc == ENOENT ? 0 : rc;
	if (in.nlink > 0 || fs_is_referenced(op->f, a->ino))
		return 0; /* linked again, or looked up again meanwhile */
	if (!a->trimmed && S_ISREG(in.mode) && in.blocks > FS_TRIM_BLOCKS) {
		a->big = 1;
		return 0;
	}
	return fs_ifree(op, a->ino);
}

typedef struct trim_arg {
	uint64_t ino;
	int more; /* blocks are left */
} trim_arg;

/* F3: drops up to FS_TRIM_BLOCKS blocks of an orphan the kernel let go of. */
static int trim_fn(fs_op *op, void *arg)
{
	trim_arg *a = arg;
	fs_inode in;
	int rc;
	a->more = 0;
	if ((rc = fs_lock(op, a->ino, BE_LOCK_X)) != 0)
		return rc;
	if ((rc = fs_iget(op, a->ino, &in)) != 0)
		return rc == ENOENT ? 0 : rc;
	if (in.nlink > 0 || !S_ISREG(in.mode) || fs_is_referenced(op->f, a->ino) || (!in.size && !in.blocks))
		return 0; /* linked or looked up again meanwhile, or nothing to drop */
	if ((rc = fs_data_drop_some(op, &in, FS_TRIM_BLOCKS, &a->more)) != 0)
		return rc;
	if (!a->more)
		in.size = 0;
	return fs_iput(op, &in);
}

void fs_trim_orphan(fs *f, uint64_t ino)
{
	unsigned char k[8];
	size_t vl;
	trim_arg a = {.ino = ino};
	fs_le64(k, ino);
	if (ino == FS_ROOT_INO || f->opt.readonly || be_get(NULL, f->orphans, k, 8, NULL, 0, &vl) != 0)
		return;
	/* in steps: a removal's log stays bounded, and on a full disk the
	 * checkpoints between them recycle the log's segments (tp.c E1) */
	int rc, tries = 0;
	do {
		rc = fs_run(f, NULL, FS_WR, trim_fn, &a);
		/* the log ran out of room before a checkpoint freed some:
		 * one now, and again (a full disk) */
		if (rc == ENOSPC && tries++ < 3 && be_checkpoint(f->be) == 0)
			rc = 0, a.more = 1;
	} while (!rc && a.more);
	if (rc && !f->opt.quiet)
		fprintf(stderr, "tpfsd: dropping the data of unlinked inode %" PRIu64 " failed: %s (%s); it goes "
				"when the inode is freed\n",
			ino, be_strerror(rc), be_errmsg(f->be));
}

/* The last reference went: free the inode if it is an orphan. */
static void maybe_reclaim(fs *f, uint64_t ino)
{
	unsigned char k[8];
	size_t vl;
	fs_le64(k, ino);
	if (ino == FS_ROOT_INO || f->opt.readonly || be_get(NULL, f->orphans, k, 8, NULL, 0, &vl) != 0)
		return;
	reclaim_arg a = {.ino = ino};
	int rc = fs_run(f, NULL, FS_WR, reclaim_fn, &a);
	if (a.big || rc == ENOSPC) {
		/* F3: a large one's data first, in steps (which also take a
		 * checkpoint when the log is out of room), then the inode */
		fs_trim_orphan(f, ino);
		a.trimmed = 1;
		rc = fs_run(f, NULL, FS_WR, reclaim_fn, &a);
	}
	if (rc && !f->opt.quiet)
		fprintf(stderr, "tpfsd: reclaiming unlinked inode %" PRIu64 " failed: %s (%s); the next mount will\n",
			ino, be_strerror(rc), be_errmsg(f->be));
}

void fs_ref(fs *f, uint64_t ino, uint64_t nlookup)
{
	pthread_mutex_lock(&f->mu);
	fs_refent *r = ref_find(f, ino, 1);
	if (r)
		r->nlookup += nlookup;
	pthread_mutex_unlock(&f->mu);
}

static void unref(fs *f, uint64_t ino, uint64_t nlookup, uint64_t nopen, int plain, uint32_t stamp)
{
	int last = 0;
	pthread_mutex_lock(&f->mu);
	fs_refent *r = ref_find(f, ino, 0);
	if (r) {
		r->nlookup -= nlookup < r->nlookup ? nlookup : r->nlookup;
		r->nopen -= nopen < r->nopen ? nopen : r->nopen;
		for (uint32_t i = 0; plain && i < r->nplain; i++)
			if (r->plain[i].stamp == stamp) {
				r->plain[i] = r->plain[--r->nplain];
				break;
			}
		if (!r->nlookup && !r->nopen) {
			ref_drop(f, r);
			last = 1;
			f->reclaiming++; /* F3: under mu, before the call that saw it goes on */
		}
	}
	pthread_mutex_unlock(&f->mu);
	if (last) {
		in_reclaim = 1;
		maybe_reclaim(f, ino);
		in_reclaim = 0;
		pthread_mutex_lock(&f->mu);
		f->reclaiming--;
		f->reclaimed++;
		pthread_cond_broadcast(&f->reclaim_cv);
		pthread_mutex_unlock(&f->mu);
	}
}

void fs_forget(fs *f, uint64_t ino, uint64_t nlookup) { unref(f, ino, nlookup, 0, 0, 0); }
void fs_released(fs *f, uint64_t ino, int plain, uint32_t stamp) { unref(f, ino, 0, 1, plain, stamp); }

int fs_opened(fs *f, uint64_t ino, int plain, uint32_t *stamp)
{
	pthread_mutex_lock(&f->mu);
	fs_refent *r = ref_find(f, ino, 1);
	if (r && plain && r->nplain == r->cplain) {
		uint32_t nc = r->cplain ? 2 * r->cplain : 2;
		fs_plain_open *v = realloc(r->plain, nc * sizeof *v);
		if (!v) {
			pthread_mutex_unlock(&f->mu);
			return -ENOMEM;
		}
		r->plain = v, r->cplain = nc;
	}
	if (r) {
		r->nopen++;
		if (plain) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			*stamp = ++r->pseq & FS_STAMP_MASK;
			r->plain[r->nplain++] = (fs_plain_open){
				.ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, .stamp = *stamp};
		}
	}
	pthread_mutex_unlock(&f->mu);
	return r ? 0 : -ENOMEM;
}

uint64_t fs_open_plain(fs *f, uint64_t ino, uint64_t within_ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	pthread_mutex_lock(&f->mu);
	fs_refent *r = ref_find(f, ino, 0);
	uint64_t n = 0;
	for (uint32_t i = 0; r && i < r->nplain; i++)
		n += now - r->plain[i].ns < within_ns;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* ---- mount ---- */

static int open_tree(fs *f, const char *name, int flags, be_tree **out)
{
	int rc = be_tree_open(f->be, name, flags | BE_TREE_NOLOCK | (f->opt.readonly ? 0 : BE_TREE_CREATE), out);
	if (rc)
		fprintf(stderr, "tpfsd: %s: tree '%s': %s\n", f->store, name, be_errmsg(f->be));
	return rc;
}

static int mkroot_fn(fs_op *op, void *arg)
{
	fs_inode root = {.ino = FS_ROOT_INO, .mode = S_IFDIR | 0755, .nlink = 2, .parent = FS_ROOT_INO};
	(void)arg;
	fs_now(&root.ctime);
	root.atime = root.mtime = root.ctime;
	return fs_iput(op, &root);
}

static int orphan_fn(fs_op *op, void *arg)
{
	uint64_t ino = *(uint64_t *)arg;
	int rc = fs_lock(op, ino, BE_LOCK_X);
	return rc ? rc : fs_ifree(op, ino);
}

int fs_mount(const char *store, const fs_options *o, fs **out)
{
	fs *f = calloc(1, sizeof *f);
	be_options to = {0};
	be_cursor *c = NULL;
	int rc;

	if (!f)
		return -ENOMEM;
	if (o)
		f->opt = *o;
	if (!f->opt.commit_ms)
		f->opt.commit_ms = 1000;
	if (!f->opt.tx_wait_ms) /* fs_tx.c X8 */
		f->opt.tx_wait_ms = 500;
	if (!f->opt.tx_short_wait_ms)
		f->opt.tx_short_wait_ms = 10;
	if (f->opt.tx_short_wait_ms > f->opt.tx_wait_ms)
		f->opt.tx_short_wait_ms = f->opt.tx_wait_ms;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->reclaim_cv, NULL);
	pthread_mutex_init(&f->txmu, NULL);
	pthread_mutex_init(&f->wmu, NULL);
	pthread_mutex_init(&f->imu, NULL);
	pthread_cond_init(&f->icv, NULL);
	pthread_cond_init(&f->idone, NULL);
	f->next_txid = 1;
	f->store = strdup(store);
	if (f->opt.cache_pages) {
		to.cache_pages = f->opt.cache_pages;
	} else {
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (1ull << 30);
		uint64_t want = ram / 8 > (4ull << 30) ? (4ull << 30) : ram / 8;
		to.cache_pages = (size_t)(want / 4096);
	}
	to.readonly = f->opt.readonly;
	to.quiet = f->opt.quiet;
	to.progress = f->opt.progress || !f->opt.quiet;
	to.logdir = f->opt.logdir;
	to.background = 1; /* no file-system call waits for a checkpoint */
	if ((rc = be_open(store, &to, &f->be)) != 0) {
		if (!f->opt.quiet) /* (quiet callers, tpfs check, say it themselves) */
			fprintf(stderr, "tpfsd: %s: %s\n", store, be_errmsg(NULL));
		goto err;
	}
	if (f->opt.readonly && be_recovered(f->be) && !f->opt.quiet) /* (backend.h: recovered in memory) */
		fprintf(stderr, "tpfsd: %s: the store was not closed cleanly: recovered in memory for this "
				"read-only mount (nothing written); the next read-write mount recovers it on disk\n",
			store);
	if ((rc = open_tree(f, "inode", BE_TREE_U64, &f->inodes)) != 0 ||
	    (rc = open_tree(f, "dirent", 0, &f->dirents)) != 0 || (rc = open_tree(f, "data", 0, &f->data)) != 0 ||
	    (rc = open_tree(f, "xattr", 0, &f->xattrs)) != 0 ||
	    (rc = open_tree(f, "orphan", BE_TREE_U64, &f->orphans)) != 0)
		goto err;
	f->bsize = be_caps_of(f->be)->block_size;
	/* inode numbers are never reused: continue after the largest */
	if ((rc = be_cursor_open(NULL, f->inodes, &c)) != 0)
		goto err;
	rc = be_cursor_seek(c, NULL, 0, BE_LAST);
	if (rc == 0) {
		const void *k;
		be_cursor_get(c, &k, NULL, NULL, NULL);
		uint64_t last;
		memcpy(&last, k, 8);
		f->next_ino = last + 1;
	} else if (rc == BE_ENOTFOUND) {
		f->next_ino = FS_ROOT_INO + 1;
		if (f->opt.readonly) {
			fprintf(stderr, "tpfsd: %s: the store has no file system yet and is mounted read-only\n", store);
			rc = BE_EBADSTORE;
			goto err;
		}
		if ((rc = fs_run(f, NULL, FS_WR, mkroot_fn, NULL)) != 0 || (rc = be_sync(f->be)) != 0)
			goto err;
	} else {
		goto err;
	}
	be_cursor_close(c);
	c = NULL;
	f->committed_ino = f->next_ino;
	/* F3: orphans of the previous mount */
	if (!f->opt.readonly) {
		for (;;) {
			uint64_t ino;
			if ((rc = be_cursor_open(NULL, f->orphans, &c)) != 0)
				goto err;
			rc = be_cursor_seek(c, NULL, 0, BE_FIRST);
			if (rc == 0) {
				const void *k;
				be_cursor_get(c, &k, NULL, NULL, NULL);
				memcpy(&ino, k, 8);
			}
			be_cursor_close(c);
			c = NULL;
			if (rc == BE_ENOTFOUND)
				break;
			if (!rc)
				fs_trim_orphan(f, ino); /* F3: a large one in steps first */
			if (rc || (rc = fs_run(f, NULL, FS_WR, orphan_fn, &ino)) != 0)
				goto err;
			f->orphans_reclaimed++;
		}
		if (f->orphans_reclaimed && (rc = be_sync(f->be)) != 0)
			goto err;
	}
	if (!f->opt.quiet) {
		be_stats st;
		be_stats_get(f->be, &st);
		fprintf(stderr, "tpfsd: %s: mounted (%s); %" PRIu64 " unlinked files reclaimed\n", store,
			st.rec_redone || st.rec_losers ? "recovered from the log" : "clean", f->orphans_reclaimed);
	}
	*out = f;
	return 0;
err:
	be_cursor_close(c);
	if (f->be) {
		be_tree_close(f->inodes);
		be_tree_close(f->dirents);
		be_tree_close(f->data);
		be_tree_close(f->xattrs);
		be_tree_close(f->orphans);
		be_close(f->be);
	}
	free(f->store);
	free(f);
	return fs_errno(rc);
}

int fs_unmount(fs *f)
{
	fs_tx_abort_all(f, "the file system was unmounted");
	be_tree_close(f->inodes);
	be_tree_close(f->dirents);
	be_tree_close(f->data);
	be_tree_close(f->xattrs);
	be_tree_close(f->orphans);
	int rc = be_close(f->be);
	if (rc)
		fprintf(stderr, "tpfsd: %s: unmount: %s\n", f->store, be_errmsg(f->be));
	for (int i = 0; i < FS_REF_BUCKETS; i++)
		while (f->refs[i]) {
			fs_refent *r = f->refs[i];
			f->refs[i] = r->next;
			free(r->plain);
			free(r);
		}
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->reclaim_cv);
	pthread_mutex_destroy(&f->txmu);
	pthread_mutex_destroy(&f->wmu);
	pthread_mutex_destroy(&f->imu);
	pthread_cond_destroy(&f->icv);
	pthread_cond_destroy(&f->idone);
	free(f->store);
	free(f);
	return fs_errno(rc);
}

int fs_sync(fs *f) { return f->opt.readonly ? 0 : fs_errno(be_sync(f->be)); }
int fs_tick(fs *f) { return fs_sync(f); }

/* ---- attributes of inodes ---- */

typedef struct getattr_arg {
	uint64_t ino;
	fs_attr *out;
	const fs_caller *c;
} getattr_arg;

static int getattr_fn(fs_op *op, void *arg)
{
	getattr_arg *a = arg;
	fs_inode in;
	int rc;
	if (op->tx) {
		/* F5: a member reads a directory's attributes under IS, and a
		 * file's -- an open's permission check, a path walk, stat --
		 * unlocked, but under X through a writable handle (fstat, the
		 * kernel's refresh in a write: for update, as reads through it
		 * are, fs_data.c).  Not under S nor IS, held to the end: every
		 * open-then-write of a file two transactions update would
		 * deadlock (the zero attribute timeouts, C1, make the kernel ask
		 * at each open).  So a member's stat of a file is not repeatable;
		 * what it reads and writes of the file is. */
		if ((rc = fs_iget(op, a->ino, &in)) != 0)
			return rc;
		int mode = S_ISDIR(in.mode) ? BE_LOCK_IS : a->c && a->c->update ? BE_LOCK_X : 0;
		if (mode && ((rc = fs_lock(op, a->ino, mode)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0))
			return rc;
	} else if ((rc = fs_lock(op, a->ino, BE_LOCK_S)) != 0 || (rc = fs_iget(op, a->ino, &in)) != 0) {
		return rc;
	}
	fs_iattr(op->f, &in, a->out);
	return 0;
}

int fs_getattr(fs *f, const fs_caller *c, uint64_t ino, fs_attr *out)
{
	getattr_arg a = {ino, out, c};
	return fs_errno(fs_run(f, c, FS_ATTR, getattr_fn, &a));
}

/* ---- the file system ---- */

int fs_stat_fs(fs *f, fs_statfs *out)
{
	uint64_t total, avail;
	memset(out, 0, sizeof *out);
	int rc = be_space(f->be, &total, &avail);
	if (rc)
		return -rc;
	out->bsize = 4096;
	avail /= 4096;
	pthread_mutex_lock(&f->mu);
	uint64_t files = f->committed_ino;
	pthread_mutex_unlock(&f->mu);
	out->bfree = avail;
	out->blocks = total / 4096;
	out->files = files + (1ull << 32);
	out->ffree = 1ull << 32;
	out->namemax = FS_NAME_MAX;
	return 0;
}

void fs_count(fs *f, int op)
{
	if (op >= 0 && op < 64)
		__atomic_add_fetch(&f->ctr.ops[op], 1, __ATOMIC_RELAXED);
}

void fs_counters_get(fs *f, fs_counters *out)
{
	for (int i = 0; i < 64; i++)
		out->ops[i] = __atomic_load_n(&f->ctr.ops[i], __ATOMIC_RELAXED);
	out->retries = __atomic_load_n(&f->ctr.retries, __ATOMIC_RELAXED);
	out->inval_late = __atomic_load_n(&f->ctr.inval_late, __ATOMIC_RELAXED);
	out->readers_late = __atomic_load_n(&f->ctr.readers_late, __ATOMIC_RELAXED);
	out->tx_yields = __atomic_load_n(&f->ctr.tx_yields, __ATOMIC_RELAXED);
}

int fs_report(fs *f, char *buf, size_t size)
{
	be_stats s;
	be_stats_get(f->be, &s);
	uint64_t hit = s.cache_hits + s.cache_misses ? 100 * s.cache_hits / (s.cache_hits + s.cache_misses) : 100;
	int n = snprintf(buf, size,
			 "store %s\n"
			 "transactions: %" PRIu64 " committed, %" PRIu64 " rolled back, %" PRIu64
			 " retried after a deadlock; %" PRIu64 " ended with nothing to roll back (calls that"
			 " failed a check: a missing name, an absent attribute...)\n"
			 "user transactions: %" PRIu64 " commits invalidated the kernel's caches after their locks, %" PRIu64
			 " stopped waiting for readers, %" PRIu64 " yielded to a plain writer\n"
			 "log: %" PRIu64 " records, %" PRIu64 " bytes, %" PRIu64 " flushes, %" PRIu64
			 " page images; segments: %" PRIu64 " made, %" PRIu64 " reused\n"
			 "cache: %" PRIu64 "%% hits (%" PRIu64 " hits, %" PRIu64 " misses), %" PRIu64 " page reads, %" PRIu64
			 " page writes, %" PRIu64 " checkpoints (%" PRIu64 " by the background thread)\n"
			 "locks: %" PRIu64 " requests to the lock manager, %" PRIu64 " waited, %" PRIu64 " deadlocks, %" PRIu64
			 " waits timed out or cancelled\n"
			 "last mount: recovery scanned %" PRIu64 " records, redid %" PRIu64 ", rolled back %" PRIu64
			 " transactions in %" PRIu64 " ms; %" PRIu64 " unlinked files reclaimed\n",
			 f->store, s.commits, s.aborts - s.aborts_empty, f->ctr.retries, s.aborts_empty, f->ctr.inval_late, f->ctr.readers_late, f->ctr.tx_yields, s.log_records, s.log_bytes, s.log_flushes, s.log_fpis,
			 s.log_segs_made, s.log_segs_recycled, hit, s.cache_hits, s.cache_misses, s.page_reads, s.page_writes,
			 s.checkpoints, s.checkpoints_bg, s.lock_requests, s.lock_waits, s.lock_deadlocks, s.lock_timeouts,
			 s.rec_records,
			 s.rec_redone, s.rec_losers, s.rec_ms, f->orphans_reclaimed);
	return n < 0 ? -EIO : n;
}
