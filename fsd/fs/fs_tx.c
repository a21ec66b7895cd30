/*
 * fs_tx -- user transactions of the file-system layer (fs.h): a member's
 * calls run against a private write set (fs_ws.h) merged over the
 * committed store (fs_rec.c), holding transaction-level locks to the end;
 * commit applies the write set as one durable engine transaction.
 *
 * Why a write set rather than a long engine transaction writing the store:
 * the store then only ever holds committed data, so a process outside every
 * transaction reads it without waiting for any transaction (DESIGN.md 1,
 * Isolation), abort is a discard, and the kernel's shared caches can be
 * kept from uncommitted state by the daemon alone (DESIGN.md 3).
 *
 * Each transaction owns one engine transaction, tx->t, from begin to end.
 * Until commit it only holds locks (strict two-phase, fs.c F5: "U"+inode,
 * "N"+parent+name, the rename lock), so it logs nothing and holds back no
 * log truncation; at commit it also takes the call-level "I" locks of
 * every inode it changes, writes the records, and commits durably -- one
 * atomic unit for recovery.
 *
 * Invariants
 *   X1  One member call at a time per transaction (tx->mu); a call that
 *       fails leaves the write set as it was (ws_call_end undo).
 *   X2  A deadlock victim (or a lock timeout) is doomed at once: its engine
 *       transaction is aborted (locks released, so the others go on) and
 *       its write set dropped; every later call of a member fails with
 *       tx->why until the owner commits (told why) or aborts -- but
 *       getattr, which path walks and permission checks need (txcommit's
 *       own among them), which answers from the committed state.
 *   X3  Commit applies, in one engine transaction under "I" X-locks of
 *       every inode concerned taken in ascending order: every record of
 *       the write set (values put, deletion marks deleted), then each
 *       directory's delta (link count, mtime/ctime) to the directory's
 *       committed record, which other transactions may have changed
 *       meanwhile (they held IX too), then frees orphans no longer
 *       referenced.  It commits durably (be_commit_held, X6); any
 *       failure aborts the engine transaction: nothing applied.
 *   X4  After commit or abort the transaction leaves the table before its
 *       cache invalidations are sent, so a member call waiting for tx->mu
 *       finds it ended and runs as a plain call.
 *   X5  A wait for a transaction's lock never lasts while that transaction
 *       is itself stuck in the kernel behind the waiting request
 *       (fs_tx_watch, fs.h): such waits are cancelled.
 *   X6  A commit's invalidations are sent once its commit record is
 *       durable and before its engine commit releases the "I" locks
 *       (be_commit_held: no early release for them; the transaction-level
 *       locks, which only other transactions wait for, go early, and those
 *       commit after this one in the log), so no plain call can read (and
 *       the kernel cache) the new state of one file while another still
 *       shows the old one from a warm cache, and nothing a non-member sees
 *       can be lost by a crash (random_crash saw a commit that a kill -9
 *       before the flush took back, when the push came first).  The wait
 *       for them ends early only when the invalidating thread sleeps in
 *       the kernel (notify_before_release): X4's exception.  A small file
 *       that grew first gets its new content stored in the kernel's page
 *       cache, which sets the kernel's size: a read
 *       that had checked the old size and then waited for these locks to
 *       fill a page would otherwise cut the new bytes to the old size
 *       (random_crash saw 'T30' of 'T3000030\n' after 'T0\n').
 *   X7  A commit first waits (bounded) for the files it changes that are
 *       open outside every transaction to be closed (wait_plain_readers).
 *   X8  A plain call waits for transactions' locks ("U", "N", the rename
 *       lock) at most a bound in all, counted from its first wait: -o
 *       tx_short_wait (10 ms) for a write(2) or a change of names, which
 *       the kernel makes holding a lock readers need (the page's, the
 *       directory's: a longer wait would make a non-member's read wait
 *       with it, issue 24), -o tx_wait (500 ms) for the rest.  At the
 *       bound every transaction holding that lock in a conflicting mode
 *       yields (fs_tx_yield): it is doomed as a deadlock victim is (X2;
 *       EDEADLK, so txrun --retry runs it again), its reason names the
 *       writer's pid and command and the inode or name, and the call is
 *       tried again.  A transaction committing is waited for instead (its
 *       locks go as its record is durable), at most tx_wait more, and is
 *       told to hurry (X9).  Transactions still wait for each other
 *       without a bound (serializable, strict 2PL), and plain readers
 *       never wait for a transaction's locks at all.
 *   X9  A commit waits for nothing a plain call waits for: once a plain
 *       call waits for one of its locks (a registered wait whose holder
 *       it is -- a read or write of what it changes, which X6's "I"
 *       locks hold back), or a writer past its bound waits for its end
 *       (hurry), it stops waiting for plain readers to close files (X7)
 *       and for its cache invalidations (X6), and releases its locks as
 *       soon as its record is durable; the invalidations finish on their
 *       own (counted as late).  It looks every HURRY_POLL_NS.  A reader
 *       is then served the committed state at once instead of after the
 *       clearing (up to INVAL_CAP_NS with a slow invalidating thread:
 *       issue 24, gap b); the price is X6's atomicity for that moment: a
 *       process with another file of the commit still in its page cache
 *       may see it old until its invalidation lands.  When nobody waits,
 *       the commit waits for its invalidations as before.
 */
#include "fs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TX_MEMBERS 16
/* fs_tx.committing: the phase of a commit (debug_waits names it) */
enum { COMMIT_READERS = 1, COMMIT_APPLY, COMMIT_CLEAR };

struct fs_tx {
	fs *f;
	uint64_t id;
	pid_t pid;               /* bound process, and its start time */
	uint64_t start;
	pid_t ppid;              /* the bound process's parent at begin (fs_tx_history) */
	uid_t uid;
	gid_t gid;               /* fs_tx_set_gid (relaxed atomic); (gid_t)-1: not yet */
	char comm[32];
	struct timespec born;
	int refs;                /* under f->txmu */
	fs_tx *next;             /* f->txs, under f->txmu */
	fs_tx **prevp;           /* what points to it in f->txs, under f->txmu */
	fs_tx *pidnext, *idnext; /* f->bypid[pid_bucket(pid)], f->byid[id % FS_TX_PID_BUCKETS], under f->txmu */
	int listed;              /* in f->txs, under f->txmu */

	pthread_mutex_t mu;      /* X1: member calls, commit and abort */
	int state;               /* FS_TX_*; written under mu (and txmu), read by status without mu (atomic) */
	int why;                 /* doomed: the errno calls get (written under mu and tmu) */
	char reason[256];        /* the same; status reads both under tmu */
	be_txn *t;               /* under mu, and changed under tmu too; NULL once ended or doomed */
	pthread_mutex_t tmu;     /* t stays valid while held (status reads its locks) */
	uint64_t engine_id;      /* be_txn_id(t) */
	fs_ws *ws;               /* under mu */
	fs_ws *dropped;          /* under mu: a doomed call's write set, invalidated when the transaction ends */
	uint64_t calls;            /* under mu; status reads it (relaxed atomic) */
	uint64_t nrecords, nbytes; /* the write set's, after the last call (relaxed atomics) */
	uint64_t nfiles;           /* inodes the write set concerns, as of the last status (relaxed atomic) */
	int root_changed;          /* counted in f->root_private (set under mu, read by unlist) */
	int aliased;               /* fs_tx_mark_aliased (relaxed atomic) */
	uint64_t view;             /* fs_tx_view: what its notifications carry */
	pid_t members[TX_MEMBERS]; /* under txmu */
	int nmembers;
	/* a member call waiting for a lock (status), relaxed atomics */
	uint64_t wait_since_ns;
	int committing;            /* X8: fs_tx_commit runs: COMMIT_* its phase (relaxed atomic) */
	int hurry;                 /* X9: a plain writer at its bound waits for the commit (relaxed atomic) */
	char yield[256];           /* X8: why a cancelled wait dooms it, under tmu ("": none) */
};

static void *inval_thread(void *arg);

void fs_set_observer(fs *f, const fs_observer *o)
{
	if (!o && f->irunning) { /* stop the thread of X6 after its last job */
		pthread_mutex_lock(&f->imu);
		f->istop = 1;
		pthread_cond_signal(&f->icv);
		pthread_mutex_unlock(&f->imu);
		pthread_join(f->ithr, NULL);
		f->irunning = 0;
	}
	f->obs = o ? *o : (fs_observer){0};
	if (f->obs.changed && !f->irunning) {
#ifdef TP_DEBUG_CHECKS
		/* test hook, in test builds only (../DESIGN.md, "Test hooks") */
		const char *d = getenv("TPFSD_TEST_INVAL_DELAY_MS");
		f->idelay_ms = d ? (unsigned)strtoul(d, NULL, 10) : 0;
#endif
		f->debug_waits = getenv("TPFSD_DEBUG_WAITS") != NULL; /* what a plain call waits for */
		f->istop = 0;
		f->irunning = pthread_create(&f->ithr, NULL, inval_thread, f) == 0;
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int fs_tx_count(const fs *f) { return __atomic_load_n(&f->ntx, __ATOMIC_ACQUIRE); }

int fs_tx_count_sc(const fs *f) { return __atomic_load_n(&f->ntx, __ATOMIC_SEQ_CST); }

void fs_tx_mark_aliased(fs_tx *tx)
{
	if (!__atomic_load_n(&tx->aliased, __ATOMIC_RELAXED))
		__atomic_store_n(&tx->aliased, 1, __ATOMIC_RELAXED);
}

int fs_tx_aliased(const fs_tx *tx) { return __atomic_load_n(&tx->aliased, __ATOMIC_RELAXED); }

uint64_t fs_tx_view(const fs_tx *tx) { return tx->view; }

/* The view the notifications of tx's end carry (fs_observer). */
static uint64_t notify_id(const fs_tx *tx) { return fs_tx_aliased(tx) ? tx->view : 0; }

int fs_root_private(const fs *f) { return __atomic_load_n(&f->root_private, __ATOMIC_ACQUIRE); }

void fs_tx_root_changed(fs_tx *tx) /* under tx->mu (a member's call) */
{
	if (!tx->root_changed) {
		tx->root_changed = 1;
		__atomic_add_fetch(&tx->f->root_private, 1, __ATOMIC_ACQ_REL);
	}
}
uint64_t fs_tx_gen(fs *f) { return __atomic_load_n(&f->txgen, __ATOMIC_ACQUIRE); }
uint64_t fs_tx_id(const fs_tx *tx) { return tx->id; }
uid_t fs_tx_uid(const fs_tx *tx) { return tx->uid; }

void fs_tx_set_gid(fs_tx *tx, gid_t gid) { __atomic_store_n(&tx->gid, gid, __ATOMIC_RELAXED); }

gid_t fs_tx_gid(const fs_tx *tx) { return __atomic_load_n(&tx->gid, __ATOMIC_RELAXED); }
pid_t fs_tx_pid(const fs_tx *tx) { return tx->pid; }
int fs_tx_state(fs_tx *tx) { return __atomic_load_n(&tx->state, __ATOMIC_ACQUIRE); }

/* ---- the table ---- */

static void history_add(fs *f, const fs_tx *tx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void history_add(fs *f, const fs_tx *tx, const char *fmt, ...)
{
	char what[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&f->txmu);
	char *h = f->history[f->nhistory++ % 16];
	/* uid, time, bound process and its parent first, so fs_tx_history can
	 * filter */
	snprintf(h, sizeof f->history[0], "%u %lld %d %d transaction %" PRIu64 " (process %d, %s) %s",
		 (unsigned)tx->uid, (long long)time(NULL), (int)tx->pid, (int)tx->ppid, tx->id, (int)tx->pid, tx->comm,
		 what);
	pthread_mutex_unlock(&f->txmu);
}

static unsigned pid_bucket(pid_t pid) { return (unsigned)pid % FS_TX_PID_BUCKETS; }

static void unlist(fs_tx *tx)
{
	fs *f = tx->f;
	pthread_mutex_lock(&f->txmu);
	if (tx->listed) {
		*tx->prevp = tx->next;
		if (tx->next)
			tx->next->prevp = tx->prevp;
		for (fs_tx **pp = &f->bypid[pid_bucket(tx->pid)]; *pp; pp = &(*pp)->pidnext)
			if (*pp == tx) {
				*pp = tx->pidnext;
				break;
			}
		for (fs_tx **pp = &f->byid[tx->id % FS_TX_PID_BUCKETS]; *pp; pp = &(*pp)->idnext)
			if (*pp == tx) {
				*pp = tx->idnext;
				break;
			}
		tx->listed = 0;
		tx->refs--;
		if (tx->root_changed)
			__atomic_sub_fetch(&f->root_private, 1, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&f->ntx, 1, __ATOMIC_RELEASE);
		__atomic_add_fetch(&f->txgen, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&f->txmu);
}

int fs_tx_begin(fs *f, pid_t pid, uint64_t start, pid_t ppid, uid_t uid, const char *comm, uint64_t view,
		int aliased, fs_tx **out)
{
	fs_tx *tx;
	int rc;
	if (f->opt.readonly)
		return -EROFS;
	if (!(tx = calloc(1, sizeof *tx)))
		return -ENOMEM;
	tx->f = f;
	tx->pid = pid;
	tx->start = start;
	tx->ppid = ppid;
	tx->uid = uid;
	tx->gid = (gid_t)-1;
	tx->view = view;
	tx->aliased = aliased;
	snprintf(tx->comm, sizeof tx->comm, "%s", comm ? comm : "?");
	clock_gettime(CLOCK_REALTIME, &tx->born);
	pthread_mutex_init(&tx->mu, NULL);
	pthread_mutex_init(&tx->tmu, NULL);
	if ((rc = be_begin(f->be, &tx->t)) != 0)
		goto err;
	tx->engine_id = be_txn_id(tx->t);
	/* the write set spills into the store's directory; a store named by a
	 * URI (etcd://...) has none: a private directory of this user instead */
	char spill[64];
	const char *dir = f->store;
	if (strstr(f->store, "://")) {
		snprintf(spill, sizeof spill, "/var/tmp/tpfs-ws-%u", (unsigned)getuid());
		struct stat st;
		if ((mkdir(spill, 0700) != 0 && errno != EEXIST) || lstat(spill, &st) != 0)
			rc = errno;
		else if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077))
			rc = EACCES; /* not a private directory of ours: not used */
		if (rc) {
			(void)be_abort(tx->t);
			goto err;
		}
		dir = spill;
	}
	if ((rc = ws_create(dir, &tx->ws)) != 0) {
		(void)be_abort(tx->t);
		goto err;
	}
	tx->state = FS_TX_ACTIVE;
	pthread_mutex_lock(&f->txmu);
	tx->id = f->next_txid++;
	tx->refs = 2; /* the table's and the caller's */
	tx->listed = 1;
	tx->next = f->txs;
	tx->prevp = &f->txs;
	if (f->txs)
		f->txs->prevp = &tx->next;
	f->txs = tx;
	tx->idnext = f->byid[tx->id % FS_TX_PID_BUCKETS];
	f->byid[tx->id % FS_TX_PID_BUCKETS] = tx;
	tx->pidnext = f->bypid[pid_bucket(pid)];
	f->bypid[pid_bucket(pid)] = tx;
	__atomic_add_fetch(&f->ntx, 1, __ATOMIC_SEQ_CST); /* (fsd_txbind.c need_wake) */
	__atomic_add_fetch(&f->txgen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&f->txmu);
	*out = tx;
	return 0;
err:
	pthread_mutex_destroy(&tx->mu);
	pthread_mutex_destroy(&tx->tmu);
	free(tx);
	return fs_errno(rc);
}

fs_tx *fs_tx_of(fs *f, pid_t pid, uint64_t start)
{
	fs_tx *found = NULL;
	if (!fs_tx_count(f))
		return NULL;
	pthread_mutex_lock(&f->txmu);
	for (fs_tx *tx = f->bypid[pid_bucket(pid)]; tx; tx = tx->pidnext)
		if (tx->pid == pid && tx->start == start) {
			tx->refs++;
			found = tx;
			break;
		}
	pthread_mutex_unlock(&f->txmu);
	return found;
}

fs_tx *fs_tx_by_id(fs *f, uint64_t id)
{
	fs_tx *found = NULL;
	pthread_mutex_lock(&f->txmu);
	for (fs_tx *tx = f->byid[id % FS_TX_PID_BUCKETS]; tx; tx = tx->idnext)
		if (tx->id == id) {
			tx->refs++;
			found = tx;
			break;
		}
	pthread_mutex_unlock(&f->txmu);
	return found;
}

void fs_tx_put(fs_tx *tx)
{
	if (!tx)
		return;
	fs *f = tx->f;
	pthread_mutex_lock(&f->txmu);
	int last = --tx->refs == 0;
	pthread_mutex_unlock(&f->txmu);
	if (!last)
		return;
	ws_destroy(tx->ws);
	ws_destroy(tx->dropped);
	pthread_mutex_destroy(&tx->mu);
	pthread_mutex_destroy(&tx->tmu);
	free(tx);
}

void fs_tx_member(fs_tx *tx, pid_t pid)
{
	pthread_mutex_lock(&tx->f->txmu);
	int i;
	for (i = 0; i < tx->nmembers && tx->members[i] != pid; i++)
		;
	if (i == tx->nmembers) {
		if (tx->nmembers < TX_MEMBERS)
			tx->members[tx->nmembers++] = pid;
		else /* keep the latest: shift out the oldest but the bound one */
			memmove(tx->members + 1, tx->members + 2, (TX_MEMBERS - 2) * sizeof(pid_t)),
				tx->members[TX_MEMBERS - 1] = pid;
	}
	pthread_mutex_unlock(&tx->f->txmu);
}

/* ---- cache invalidation of everything a write set names (X4, X6) ---- */

typedef struct inval_item {
	uint64_t ino;
	char *name; /* NULL: the inode */
	size_t len;
	unsigned char *data; /* X6: a small regular file's new content (NULL: none) */
	size_t size;         /* its size: before the commit (job_sizes), then after it (job_contents) */
} inval_item;

typedef struct inval_job {
	struct inval_job *next;
	uint64_t view; /* fs_observer's */
	inval_item *v;
	size_t n;
	int done, refs; /* under f->imu */
} inval_job;

static void job_free(inval_job *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++) {
		free(j->v[i].name);
		free(j->v[i].data);
	}
	free(j->v);
	free(j);
}

static int job_add(inval_job *j, size_t *cap, uint64_t ino, const void *name, size_t len)
{
	if (j->n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		inval_item *v = realloc(j->v, nc * sizeof *v);
		if (!v)
			return -1;
		j->v = v, *cap = nc;
	}
	inval_item *it = &j->v[j->n];
	*it = (inval_item){.ino = ino, .len = len};
	/* NUL-terminated: libfuse sends a name's terminator with it */
	if (name && !(it->name = malloc(len + 1)))
		return -1;
	if (name) {
		memcpy(it->name, name, len);
		it->name[len] = 0;
	}
	j->n++;
	return 0;
}

static int item_cmp(const void *a, const void *b)
{
	const inval_item *x = a, *y = b;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (!x->name || !y->name)
		return (x->name != NULL) - (y->name != NULL);
	int c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Each inode and name once, though the write set names an inode in
 * several trees (its record, its blocks, its xattrs). */
static void job_unique(inval_job *j)
{
	size_t n = 0;
	if (j->n > 1)
		qsort(j->v, j->n, sizeof *j->v, item_cmp);
	for (size_t i = 0; i < j->n; i++) {
		if (n && item_cmp(&j->v[n - 1], &j->v[i]) == 0) {
			free(j->v[i].name);
			continue;
		}
		j->v[n++] = j->v[i];
	}
	j->n = n;
}

/* The inode a write-set record of tree belongs to (key k, kl bytes): the
 * inode, orphan and delta trees key by it little-endian, the others begin
 * with it big-endian.  0 for a key too short to name one. */
static int key_ino(int tree, const unsigned char *k, size_t kl, uint64_t *ino)
{
	if (kl < 8)
		return 0;
	if (tree == WS_INODE || tree == WS_ORPHAN || tree == WS_DELTA)
		memcpy(ino, k, 8);
	else
		*ino = fs_getbe64(k);
	return 1;
}

/* Every inode and name ws changed; NULL without memory. */
static inval_job *job_of(uint64_t view, fs_ws *ws)
{
	inval_job *j = calloc(1, sizeof *j);
	size_t cap = 0;
	if (!j)
		return NULL;
	j->view = view;
	for (int tree = WS_INODE; tree < WS_NTREES; tree++) {
		uint64_t last = 0;
		for (ws_node *n = ws_seek(ws, tree, "", 0, 0); n; n = ws_next(ws, n)) {
			size_t kl;
			const unsigned char *k = ws_node_key(n, &kl);
			uint64_t ino;
			if (!key_ino(tree, k, kl, &ino))
				continue;
			if ((tree == WS_DIRENT && kl > 16 && job_add(j, &cap, ino, k + 16, kl - 16)) ||
			    (ino != last && job_add(j, &cap, ino, NULL, 0))) {
				job_free(j);
				return NULL;
			}
			last = ino;
		}
	}
	job_unique(j);
	return j;
}

static void job_run(fs *f, const inval_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		if (j->v[i].data && f->obs.content)
			f->obs.content(f->obs.ctx, j->v[i].ino, j->v[i].data, j->v[i].size);
		f->obs.changed(f->obs.ctx, j->view, j->v[i].ino, j->v[i].name, j->v[i].len);
	}
}

/* X6: the new content of every small regular file a committing
 * transaction changed, read from its applied records (tx->t sees them).
 * The kernel clips a read to the size it knows: a reader whose read had
 * passed that check with the old size and then waited for the commit's
 * locks to fill a page would get the new bytes cut to the old size.  So
 * the daemon stores the new content in the kernel's page cache first
 * (which sets the size before it waits for any page), then drops the rest.
 * Files larger than GROW_MAX are only dropped (fsd/DESIGN.md, limits). */
#define GROW_MAX 65536

/* Before the commit applies: the size of each regular file of j (in
 * v[i].size; the others' stay 0). */
static void job_sizes(fs_tx *tx, inval_job *j)
{
	fs_op op = {.f = tx->f, .t = tx->t};
	for (size_t i = 0; i < j->n; i++) {
		fs_inode in;
		if (!j->v[i].name && fs_iget(&op, j->v[i].ino, &in) == 0 && S_ISREG(in.mode))
			j->v[i].size = in.size;
	}
}

/* After it applied: the new content of each small regular file of j that
 * grew (a store cannot shrink the kernel's size: its new content would
 * show with an old tail; and a file whose size stays needs none, since no
 * read can be cut short); v[i].size becomes the new size. */
static void job_contents(fs_tx *tx, inval_job *j)
{
	fs_op op = {.f = tx->f, .t = tx->t};
	for (size_t i = 0; i < j->n; i++) {
		fs_inode in;
		size_t got = 0;
		if (j->v[i].name || fs_iget(&op, j->v[i].ino, &in) != 0 || !S_ISREG(in.mode) || in.size == 0 ||
		    in.size > GROW_MAX || in.size <= j->v[i].size || !(j->v[i].data = malloc(in.size)))
			continue;
		if (fs_data_get(&op, &in, 0, in.size, j->v[i].data, &got) == 0 && got == in.size) {
			j->v[i].size = in.size;
		} else {
			free(j->v[i].data);
			j->v[i].data = NULL;
		}
	}
}

static void notify_all(fs *f, uint64_t view, fs_ws *ws)
{
	if (!f->obs.changed || !ws)
		return;
	inval_job *j = job_of(view, ws);
	if (j)
		job_run(f, j);
	job_free(j);
}

static void job_put(fs *f, inval_job *j) /* under imu */
{
	(void)f;
	if (--j->refs == 0)
		job_free(j);
}

static void *inval_thread(void *arg)
{
	fs *f = arg;
	__atomic_store_n(&f->itid, fs_thread_id(), __ATOMIC_RELAXED);
	pthread_mutex_lock(&f->imu);
	for (;;) {
		while (!f->ijobs && !f->istop)
			pthread_cond_wait(&f->icv, &f->imu);
		inval_job *j = f->ijobs;
		if (!j)
			break;
		f->ijobs = j->next;
		pthread_mutex_unlock(&f->imu);
#ifdef TP_DEBUG_CHECKS
		if (f->idelay_ms) { /* test hook: a slow thread (asleep, not in D) */
			struct timespec d = {f->idelay_ms / 1000, (long)(f->idelay_ms % 1000) * 1000000l};
			nanosleep(&d, NULL);
		}
#endif
		job_run(f, j);
		pthread_mutex_lock(&f->imu);
		j->done = 1;
		pthread_cond_broadcast(&f->idone);
		job_put(f, j);
	}
	pthread_mutex_unlock(&f->imu);
	return NULL;
}

/* X6: invalidate what a committing transaction changed while its locks
 * still keep every plain call from reading it, so that a non-member with
 * warm caches sees the whole commit or none of it.  The kernel may wait
 * inside an invalidation for a page or directory lock that a request
 * blocked on those very locks holds (a read filling that page): so the
 * wait here ends when the thread, past INVAL_WAIT_NS, is found asleep in
 * the kernel (state D: such a lock) at one of its looks, every
 * INVAL_WAIT_NS; the commit then goes on and releases its locks, the
 * thread finishing the invalidations after (atomic then only for what was
 * invalidated before).  A thread that is merely slow -- runnable but not
 * running on a loaded machine -- is waited for, up to INVAL_CAP_NS (it
 * was given up on after 20 ms, and a non-member saw one file of a commit
 * new and another old: random_crash under a parallel build). */
#define INVAL_WAIT_NS 20000000ll
#define INVAL_CAP_NS 5000000000ll
#define HURRY_POLL_NS 1000000ll /* X9: how often a commit looks for plain calls waiting for it */

/* Whether the observer's thread is blocked (unknown counts as blocked). */
static int observer_blocked(fs *f)
{
	return !f->obs.blocked || f->obs.blocked(f->obs.ctx, __atomic_load_n(&f->itid, __ATOMIC_RELAXED)) != 0;
}

/* X9: a plain call waits for a lock of committing transaction tx (a
 * registered wait whose holder it is: a reader or writer of what it
 * changes), or a plain writer past its bound waits for its end. */
static int plain_waits_for(fs_tx *tx)
{
	fs *f = tx->f;
	int found = __atomic_load_n(&tx->hurry, __ATOMIC_RELAXED);
	pthread_mutex_lock(&f->wmu);
	for (fs_waiter *w = f->waiters; w && !found; w = w->next)
		found = !w->tx && be_lock_waits_for(w->t) == tx->engine_id;
	pthread_mutex_unlock(&f->wmu);
	return found;
}

static void notify_before_release(fs_tx *tx, inval_job *j) /* j: job_sizes, then job_contents; taken */
{
	fs *f = tx->f;
	struct timespec dl;
	long long waited = 0;
	clock_gettime(CLOCK_REALTIME, &dl);
	pthread_mutex_lock(&f->imu);
	j->refs = 2;
	inval_job **pp = &f->ijobs;
	while (*pp)
		pp = &(*pp)->next;
	*pp = j;
	pthread_cond_signal(&f->icv);
	while (!j->done) {
		dl.tv_nsec += HURRY_POLL_NS;
		if (dl.tv_nsec >= 1000000000l)
			dl.tv_sec++, dl.tv_nsec -= 1000000000l;
		while (!j->done && pthread_cond_timedwait(&f->idone, &f->imu, &dl) == 0)
			;
		waited += HURRY_POLL_NS;
		if (j->done || waited >= INVAL_CAP_NS)
			break;
		pthread_mutex_unlock(&f->imu);
		int go = plain_waits_for(tx); /* X9 */
		/* (unknown counts as asleep: not waited on, as before) */
		if (!go && waited % INVAL_WAIT_NS == 0)
			go = observer_blocked(f);
		pthread_mutex_lock(&f->imu);
		if (go)
			break;
	}
	if (!j->done)
		__atomic_add_fetch(&f->ctr.inval_late, 1, __ATOMIC_RELAXED);
	job_put(f, j);
	pthread_mutex_unlock(&f->imu);
}

/* be_commit_held's callback: the commit is durable, its locks still held. */
struct held_push {
	fs_tx *tx;
	inval_job *j;
	int done;
};

static void push_held(void *arg)
{
	struct held_push *h = arg;
	if (!h->j)
		return;
	__atomic_store_n(&h->tx->committing, COMMIT_CLEAR, __ATOMIC_RELAXED);
	notify_before_release(h->tx, h->j);
	h->j = NULL;
	h->done = 1;
}

/* ---- member calls (X1, X2) ---- */

/* X2: under tx->mu.  Releases the engine transaction and the write set. */
static void doom(fs_tx *tx, int why, const char *reason)
{
	if (tx->state != FS_TX_ACTIVE)
		return;
	pthread_mutex_lock(&tx->tmu);
	if (tx->t)
		(void)be_abort(tx->t);
	tx->t = NULL;
	tx->why = why; /* (under tmu too: txstatus reads them, fs_tx_report) */
	snprintf(tx->reason, sizeof tx->reason, "%s", reason);
	__atomic_store_n(&tx->state, FS_TX_DOOMED, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&tx->tmu);
}

int fs_tx_run(fs *f, fs_tx *tx, int wr, int (*fn)(fs_op *op, void *arg), void *arg)
{
	int rc;
	pthread_mutex_lock(&tx->mu);
	if (tx->state == FS_TX_ENDED || (tx->state == FS_TX_DOOMED && wr == FS_ATTR)) {
		/* X4: ended while we waited, or doomed (X2): a plain call now */
		pthread_mutex_unlock(&tx->mu);
		fs_caller plain = {0};
		return fs_run(f, &plain, wr, fn, arg);
	}
	if (tx->state == FS_TX_DOOMED) {
		rc = tx->why;
		pthread_mutex_unlock(&tx->mu);
		return rc;
	}
	__atomic_store_n(&tx->calls, tx->calls + 1, __ATOMIC_RELAXED);
	ws_call_begin(tx->ws);
	fs_op op = {.f = f, .t = tx->t, .tx = tx, .ws = tx->ws, .wr = wr == FS_WR || wr == FS_KLOCK};
	__atomic_store_n(&tx->wait_since_ns, now_ns(), __ATOMIC_RELAXED);
	rc = fn(&op, arg);
	__atomic_store_n(&tx->wait_since_ns, 0, __ATOMIC_RELAXED);
	ws_call_end(tx->ws, rc != 0);
	__atomic_store_n(&tx->nrecords, ws_records(tx->ws), __ATOMIC_RELAXED);
	__atomic_store_n(&tx->nbytes, ws_bytes(tx->ws), __ATOMIC_RELAXED);
	if (rc == BE_EDEADLOCK || rc == BE_EROLLBACK || rc == BE_ETIMEOUT) {
		char why[sizeof tx->reason];
		snprintf(why, sizeof why, "transaction %" PRIu64 " was chosen as a deadlock victim: nothing was applied",
			 tx->id);
		if (rc == BE_ETIMEOUT)
			snprintf(why, sizeof why,
				 "transaction %" PRIu64 " was chosen as a deadlock victim (a cycle through the kernel's "
				 "file locks): nothing was applied",
				 tx->id);
		pthread_mutex_lock(&tx->tmu);
		if (rc == BE_ETIMEOUT && tx->yield[0]) /* X8: cancelled by a writer it yields to */
			memcpy(why, tx->yield, sizeof why);
		pthread_mutex_unlock(&tx->tmu);
		doom(tx, EDEADLK, why);
		/* not invalidated here: the kernel may hold a directory lock
		 * for this very request, which an invalidation of a name in it
		 * would wait for (X4 does it when the transaction ends) */
		tx->dropped = tx->ws;
		tx->ws = NULL;
		rc = EDEADLK;
	}
	pthread_mutex_unlock(&tx->mu);
	return rc;
}

int fs_tx_holds(fs_tx *tx, uint64_t ino)
{
	unsigned char name[9] = {'U'};
	fs_be64(name + 1, ino);
	pthread_mutex_lock(&tx->tmu);
	int held = tx->t ? be_lock_held(tx->t, name, sizeof name) != 0 : 0;
	pthread_mutex_unlock(&tx->tmu);
	return held;
}

/* ---- commit (X3) ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Every inode the write set concerns, sorted, distinct. */
static int touched_inodes(fs_ws *ws, uint64_t **out, size_t *n)
{
	size_t cap = 64, m = 0;
	uint64_t *v = malloc(cap * sizeof *v);
	if (!v)
		return ENOMEM;
	for (int tree = WS_INODE; tree < WS_NTREES; tree++)
		for (ws_node *nd = ws_seek(ws, tree, "", 0, 0); nd; nd = ws_next(ws, nd)) {
			size_t kl;
			const unsigned char *k = ws_node_key(nd, &kl);
			uint64_t ino;
			if (!key_ino(tree, k, kl, &ino))
				continue;
			if (m && v[m - 1] == ino)
				continue;
			if (m == cap) {
				uint64_t *w = realloc(v, 2 * cap * sizeof *v);
				if (!w) {
					free(v);
					return ENOMEM;
				}
				v = w;
				cap *= 2;
			}
			v[m++] = ino;
		}
	qsort(v, m, sizeof *v, cmp_u64);
	size_t d = 0;
	for (size_t i = 0; i < m; i++)
		if (d == 0 || v[d - 1] != v[i])
			v[d++] = v[i];
	*out = v;
	*n = d;
	return 0;
}

/* X7: a reader outside every transaction reads a file in several calls
 * (nm maps an object file, ld reads one in pieces) and would see the
 * first half of the old file and the second half of the new one if a
 * commit fell in between.  A commit waits, before it takes any lock, for
 * the files it changes that were opened outside every transaction less
 * than READERS_RECENT_NS ago to be closed -- at most READERS_WAIT_NS
 * (nm of a 1 MB object takes 20-40 ms here; a reader that has just
 * opened a file it will keep open costs a commit until the file has been
 * open READERS_RECENT_NS), past which it goes on (counted).  A reader that keeps a file open for
 * long (tail -f, a database) does not hold commits back at all; one that
 * opens, reads and closes (nm, cc, cat) is waited for.  Readers never
 * wait for it. */
#define READERS_WAIT_NS 200000000ull
#define READERS_RECENT_NS 250000000ull

static void wait_plain_readers(fs_tx *tx)
{
	fs *f = tx->f;
	uint64_t *inos = NULL;
	size_t n = 0;
	if (touched_inodes(tx->ws, &inos, &n) != 0)
		return;
	uint64_t deadline = now_ns() + READERS_WAIT_NS;
	for (size_t i = 0; i < n;) {
		if (!fs_open_plain(f, inos[i], READERS_RECENT_NS)) {
			i++;
			continue;
		}
		if (now_ns() > deadline || plain_waits_for(tx)) { /* X9: writers wait for its locks meanwhile */
			__atomic_add_fetch(&f->ctr.readers_late, 1, __ATOMIC_RELAXED);
			break;
		}
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	free(inos);
}

static int apply(fs_tx *tx)
{
	fs *f = tx->f;
	fs_ws *ws = tx->ws;
	uint64_t *inos = NULL;
	size_t n = 0, cap = 0;
	unsigned char *buf = NULL;
	int rc;
	fs_op op = {.f = f, .t = tx->t, .wr = 1}; /* a plain writer's view: the store */

	if ((rc = touched_inodes(ws, &inos, &n)) != 0)
		return rc;
	for (size_t i = 0; i < n; i++) { /* X3: ascending, like every plain call */
		unsigned char name[9] = {'I'};
		fs_be64(name + 1, inos[i]);
		if ((rc = be_lock(tx->t, name, sizeof name, BE_LOCK_X)) != 0)
			goto out;
	}
	/* the records */
	for (int tree = WS_INODE; tree <= WS_ORPHAN; tree++)
		for (ws_node *nd = ws_seek(ws, tree, "", 0, 0); nd; nd = ws_next(ws, nd)) {
			size_t kl, vl;
			const unsigned char *k = ws_node_key(nd, &kl);
			if (ws_node_is_del(nd)) {
				rc = be_del(tx->t, fs_tree(f, tree), k, kl);
				if (rc == BE_ENOTFOUND) /* put and deleted again: never in the store */
					rc = 0;
				if (rc)
					goto out;
				continue;
			}
			ws_node_value(ws, nd, NULL, 0, &vl);
			if (vl > cap) {
				unsigned char *b = realloc(buf, vl);
				if (!b) {
					rc = ENOMEM;
					goto out;
				}
				buf = b;
				cap = vl;
			}
			if ((rc = ws_node_value(ws, nd, buf, cap, &vl)) != 0 ||
			    (rc = be_put(tx->t, fs_tree(f, tree), k, kl, buf, vl, BE_PATCH)) != 0)
				goto out;
		}
	/* directories' deltas, on their committed records */
	for (ws_node *nd = ws_seek(ws, WS_DELTA, "", 0, 0); nd; nd = ws_next(ws, nd)) {
		ws_delta d;
		size_t kl, vl;
		const unsigned char *k = ws_node_key(nd, &kl);
		uint64_t ino;
		fs_inode dir;
		if (ws_node_is_del(nd) || kl != 8 || (rc = ws_node_value(ws, nd, &d, sizeof d, &vl)) != 0)
			continue;
		if (vl != sizeof d || (!d.nlink && !d.touched))
			continue;
		memcpy(&ino, k, 8);
		if ((rc = fs_iget(&op, ino, &dir)) == ENOENT) {
			rc = 0; /* removed by this transaction */
			continue;
		}
		if (rc)
			goto out;
		dir.nlink = (uint32_t)((int64_t)dir.nlink + d.nlink);
		if (d.touched) {
			struct timespec ts = {.tv_sec = d.sec, .tv_nsec = d.nsec};
			if (ts.tv_sec > dir.mtime.tv_sec || (ts.tv_sec == dir.mtime.tv_sec && ts.tv_nsec > dir.mtime.tv_nsec))
				dir.mtime = ts;
			if (ts.tv_sec > dir.ctime.tv_sec || (ts.tv_sec == dir.ctime.tv_sec && ts.tv_nsec > dir.ctime.tv_nsec))
				dir.ctime = ts;
		}
		if ((rc = fs_iput(&op, &dir)) != 0)
			goto out;
	}
	/* orphans whose last reference went before commit (F3) */
	for (ws_node *nd = ws_seek(ws, WS_ORPHAN, "", 0, 0); nd; nd = ws_next(ws, nd)) {
		size_t kl;
		const unsigned char *k = ws_node_key(nd, &kl);
		uint64_t ino;
		if (ws_node_is_del(nd) || kl != 8)
			continue;
		memcpy(&ino, k, 8);
		if (!fs_is_referenced(f, ino) && (rc = fs_ifree(&op, ino)) != 0)
			goto out;
	}
out:
	free(buf);
	free(inos);
	return rc;
}

static const char *commit_failure(int e)
{
	switch (e) {
	case ENOSPC: return "no space left on the store";
	case EDEADLK: return "it lost a deadlock (or a conflict) while committing";
	case EIO: return "an I/O error on the store";
	case ENOMEM: return "out of memory";
	default: return strerror(e);
	}
}

int fs_tx_commit(fs_tx *tx, char *msg, size_t size)
{
	fs *f = tx->f;
	fs_ws *ws;
	int rc;
	pthread_mutex_lock(&tx->mu);
	if (tx->state == FS_TX_ENDED) {
		pthread_mutex_unlock(&tx->mu);
		snprintf(msg, size, "transaction %" PRIu64 " has ended already", tx->id);
		return -ESRCH;
	}
	if (tx->state == FS_TX_DOOMED) {
		rc = tx->why;
		snprintf(msg, size, "%s", tx->reason);
		__atomic_store_n(&tx->state, FS_TX_ENDED, __ATOMIC_RELEASE);
		ws = tx->dropped;
		tx->dropped = NULL;
		pthread_mutex_unlock(&tx->mu);
		unlist(tx);
		history_add(f, tx, "failed to commit: %s", tx->reason);
		notify_all(f, notify_id(tx), ws);
		ws_destroy(ws);
		return -rc;
	}
	__atomic_store_n(&tx->committing, COMMIT_READERS, __ATOMIC_RELAXED); /* X8: writers wait for its end */
	wait_plain_readers(tx); /* X7 */
	__atomic_store_n(&tx->committing, COMMIT_APPLY, __ATOMIC_RELAXED);
	inval_job *inv = f->obs.changed && f->irunning ? job_of(notify_id(tx), tx->ws) : NULL; /* X6 */
	if (inv)
		job_sizes(tx, inv);
	rc = apply(tx);
	struct held_push push = {tx, inv, 0};
	if (rc == 0 && inv)
		job_contents(tx, inv);
	pthread_mutex_lock(&tx->tmu);
	if (rc == 0) /* durable on return; X6 between durable and the release */
		rc = be_commit_held(tx->t, "I", 1, push_held, &push);
	else
		(void)be_abort(tx->t);
	tx->t = NULL;
	pthread_mutex_unlock(&tx->tmu);
	job_free(push.j); /* not pushed: the apply or the commit failed */
	int invalidated = push.done;
	ws = tx->ws;
	tx->ws = NULL;
	__atomic_store_n(&tx->state, FS_TX_ENDED, __ATOMIC_RELEASE);
	uint64_t calls = tx->calls;
	pthread_mutex_unlock(&tx->mu);
	unlist(tx); /* X4 */
	int e = -fs_errno(rc);
	if (rc == 0) {
		for (ws_node *nd = ws_seek(ws, WS_INODE, "", 0, 0); nd; nd = ws_next(ws, nd)) {
			size_t kl;
			uint64_t ino;
			const unsigned char *k = ws_node_key(nd, &kl);
			if (kl == 8 && !ws_node_is_del(nd)) {
				memcpy(&ino, k, 8);
				fs_ino_committed(f, ino);
			}
		}
		snprintf(msg, size, "transaction %" PRIu64 " committed (%" PRIu64 " calls, %" PRIu64 " records, %" PRIu64
				    " bytes)",
			 tx->id, calls, ws_records(ws), ws_bytes(ws));
		history_add(f, tx, "committed");
	} else {
		if (rc == BE_EDEADLOCK || rc == BE_EROLLBACK)
			e = EDEADLK;
		snprintf(msg, size, "transaction %" PRIu64 " failed to commit: %s (%s); nothing was applied", tx->id,
			 commit_failure(e), be_errmsg(f->be));
		history_add(f, tx, "failed to commit: %s", commit_failure(e));
	}
	if (!invalidated || rc != 0) /* (X6 pushed sizes a failed commit did not make) */
		notify_all(f, notify_id(tx), ws);
	ws_destroy(ws);
	return -e;
}

void fs_tx_abort(fs_tx *tx, int why, const char *reason, int end)
{
	fs *f = tx->f;
	fs_ws *ws = NULL;
	pthread_mutex_lock(&tx->mu);
	int was = tx->state;
	if (was == FS_TX_ACTIVE) {
		doom(tx, why, reason);
		ws = tx->ws;
		tx->ws = NULL;
	}
	fs_ws *dropped = NULL;
	if (end && was != FS_TX_ENDED) {
		__atomic_store_n(&tx->state, FS_TX_ENDED, __ATOMIC_RELEASE);
		dropped = tx->dropped;
		tx->dropped = NULL;
	}
	pthread_mutex_unlock(&tx->mu);
	notify_all(f, notify_id(tx), dropped);
	ws_destroy(dropped);
	if (end && was != FS_TX_ENDED) {
		unlist(tx);
		history_add(f, tx, "aborted: %s", was == FS_TX_DOOMED ? tx->reason : reason);
	}
	notify_all(f, notify_id(tx), ws);
	ws_destroy(ws);
}

void fs_tx_abort_all(fs *f, const char *reason)
{
	/* member calls waiting for locks hold their transaction's mutex:
	 * end their waits first, or the aborts below would wait for them */
	pthread_mutex_lock(&f->wmu);
	for (fs_waiter *w = f->waiters; w; w = w->next)
		(void)be_lock_cancel(w->t);
	pthread_mutex_unlock(&f->wmu);
	for (;;) {
		pthread_mutex_lock(&f->txmu);
		fs_tx *tx = f->txs;
		if (tx)
			tx->refs++;
		pthread_mutex_unlock(&f->txmu);
		if (!tx)
			return;
		fs_tx_abort(tx, ECONNABORTED, reason, 1);
		fs_tx_put(tx);
	}
}

/* ---- deadlocks through the kernel (X5) ---- */

/* debug_waits: a plain call has waited 50 ms or more for a lock (under
 * wmu): say what holds it -- a transaction and what it is doing, or a
 * plain call -- on standard error. */
static void debug_wait(fs *f, fs_waiter *w, uint64_t now)
{
	static const char *const phase[] = {"open", "committing: waiting for plain readers to close (X7)",
					    "committing: applying and logging, its record not yet durable",
					    "committing: durable, waiting for its cache invalidations (X6)"};
	uint64_t holder = be_lock_waits_for(w->t);
	char what[160];
	snprintf(what, sizeof what, "a plain call (engine transaction %" PRIu64 ")", holder);
	pthread_mutex_lock(&f->txmu);
	for (fs_tx *a = f->txs; a && holder; a = a->next)
		if (a->engine_id == holder) {
			int p = __atomic_load_n(&a->committing, __ATOMIC_RELAXED);
			snprintf(what, sizeof what, "transaction %" PRIu64 " (%s)", a->id,
				 phase[p >= 0 && p <= COMMIT_CLEAR ? p : 0]);
		}
	pthread_mutex_unlock(&f->txmu);
	fprintf(stderr, "tpfsd: debug: thread %d has waited %" PRIu64 " ms for a lock held by %s\n", (int)w->tid,
		(now - w->since_ns) / 1000000, holder ? what : "nothing (granted meanwhile)");
	w->logged = 1;
}

int fs_tx_watch(fs *f, int (*blocked)(pid_t pid, void *ctx), void *ctx)
{
	uint64_t now = now_ns();
	int cancelled = 0;
	pthread_mutex_lock(&f->wmu);
	for (fs_waiter *w = f->waiters; w; w = w->next) {
		if (f->debug_waits && !w->tx && !w->logged && now - w->since_ns >= 50000000ull)
			debug_wait(f, w, now);
		if (now - w->since_ns < 100000000ull)
			continue;
		uint64_t holder = be_lock_waits_for(w->t);
		int stuck = 0;
		pthread_mutex_lock(&f->txmu);
		for (fs_tx *a = f->txs; a && holder; a = a->next) {
			if (a->engine_id != holder || a == w->tx)
				continue;
			for (int i = 0; i < a->nmembers && !stuck; i++)
				stuck = blocked(a->members[i], ctx);
		}
		pthread_mutex_unlock(&f->txmu);
		w->strikes = stuck ? w->strikes + 1 : 0;
		if (w->strikes >= 3 && be_lock_cancel(w->t)) {
			w->cancelled = 1; /* (under wmu: the waiter reads it after it left the list) */
			w->strikes = 0;
			cancelled++;
		}
	}
	pthread_mutex_unlock(&f->wmu);
	return cancelled;
}

/* ---- plain writers wait a bounded time (X8) ---- */

/* Whether a lock held in mode held keeps one in mode want from being granted. */
static int conflicts(int held, int want)
{
	static const unsigned char ok[6] = {
		/* bits: the modes compatible with the index's (1 << mode) */
		0,
		1 << BE_LOCK_IS | 1 << BE_LOCK_IX | 1 << BE_LOCK_S | 1 << BE_LOCK_SIX, /* IS */
		1 << BE_LOCK_IS | 1 << BE_LOCK_IX,                                     /* IX */
		1 << BE_LOCK_IS | 1 << BE_LOCK_S,                                      /* S */
		1 << BE_LOCK_IS,                                                       /* SIX */
		0,                                                                     /* X */
	};
	return held > 0 && held <= BE_LOCK_X && !(ok[held] & (1 << want));
}

/* What a transaction-level lock name covers, for a message (fs.c F5);
 * a directory's, with the name op changes in it. */
static void lock_what(const fs_op *op, const unsigned char *name, size_t len, char *buf, size_t size)
{
	uint64_t ino = 0;
	for (size_t i = 1; i < 9 && i < len; i++)
		ino = ino << 8 | name[i];
	if (len == 9 && name[0] == 'U' && op->lname && op->lparent == ino)
		snprintf(buf, size, "the name '%.*s' in directory inode %" PRIu64,
			 (int)(op->lnamelen > 64 ? 64 : op->lnamelen), op->lname, ino);
	else if (len == 9 && name[0] == 'U')
		snprintf(buf, size, "inode %" PRIu64, ino);
	else if (len > 9 && name[0] == 'N')
		snprintf(buf, size, "the name '%.*s' in directory inode %" PRIu64, (int)(len - 9 > 64 ? 64 : len - 9),
			 (const char *)name + 9, ino);
	else
		snprintf(buf, size, "the store's rename lock");
}

/* Dooms a (a reference held) for a plain writer: at once if no member
 * call runs; else the call's lock wait is cancelled (fs_tx_run dooms it
 * with the reason), or a call that does not wait for a lock is waited
 * for, briefly.  A commit under way is not disturbed but waited for: it
 * releases the lock soon (its transaction-level locks go as its record is
 * logged). */
static void yield_one(fs_tx *a, const char *reason)
{
	for (int i = 0; i < 100; i++) {
		if (pthread_mutex_trylock(&a->mu) == 0) {
			if (a->state == FS_TX_ACTIVE) {
				doom(a, EDEADLK, reason);
				/* invalidated when it ends (X4): the kernel may hold
				 * the lock of a directory it names for this very request */
				a->dropped = a->ws;
				a->ws = NULL;
			}
			pthread_mutex_unlock(&a->mu);
			return;
		}
		if (__atomic_load_n(&a->committing, __ATOMIC_RELAXED)) {
			/* its locks go as its commit record is durable: wait for that,
			 * at most tx_wait, rather than try again and again meanwhile;
			 * it waits for nothing else now (X9) */
			__atomic_store_n(&a->hurry, 1, __ATOMIC_RELAXED);
			for (unsigned k = 0; k < a->f->opt.tx_wait_ms && fs_tx_state(a) != FS_TX_ENDED; k++)
				nanosleep(&(struct timespec){0, 1000000}, NULL);
			return;
		}
		pthread_mutex_lock(&a->tmu);
		snprintf(a->yield, sizeof a->yield, "%s", reason);
		if (a->t)
			(void)be_lock_cancel(a->t);
		pthread_mutex_unlock(&a->tmu);
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
}

int fs_tx_yield(fs_op *op, const void *name, size_t len, int mode)
{
	fs *f = op->f;
	fs_tx *v[16];
	int n = 0;
	pthread_mutex_lock(&f->txmu);
	for (fs_tx *a = f->txs; a && n < (int)(sizeof v / sizeof v[0]); a = a->next) {
		pthread_mutex_lock(&a->tmu);
		int held = a->t ? be_lock_held(a->t, name, len) : 0;
		pthread_mutex_unlock(&a->tmu);
		if (conflicts(held, mode)) {
			a->refs++;
			v[n++] = a;
		}
	}
	pthread_mutex_unlock(&f->txmu);
	if (n) {
		char what[120], comm[32] = "?", reason[sizeof v[0]->reason];
		lock_what(op, name, len, what, sizeof what);
		if (op->pid > 0) {
			char path[48];
			snprintf(path, sizeof path, "/proc/%d/comm", (int)op->pid);
			FILE *fp = fopen(path, "re");
			if (fp) {
				if (fgets(comm, sizeof comm, fp))
					comm[strcspn(comm, "\n")] = 0;
				fclose(fp);
			}
		}
		for (int i = 0; i < n; i++) {
			snprintf(reason, sizeof reason,
				 "transaction %" PRIu64 " yielded to process %d (%s) writing %s: nothing was applied",
				 v[i]->id, (int)op->pid, op->pid > 0 ? comm : "tpfsd", what);
			yield_one(v[i], reason);
			__atomic_add_fetch(&f->ctr.tx_yields, 1, __ATOMIC_RELAXED);
			fs_tx_put(v[i]);
		}
	}
	return BE_EDEADLOCK;
}

/* ---- reports ---- */

typedef struct outbuf {
	char *p;
	size_t size, len;
} outbuf;

static void out(outbuf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(outbuf *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->p + (o->len < o->size ? o->len : o->size), o->len < o->size ? o->size - o->len : 0, fmt,
			  ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

static void json_str(outbuf *o, const char *s)
{
	out(o, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			out(o, "\\%c", ch);
		else if (ch < 0x20)
			out(o, "\\u%04x", ch);
		else
			out(o, "%c", ch);
	}
	out(o, "\"");
}

static const char *state_name(int s) { return s == FS_TX_ACTIVE ? "active" : s == FS_TX_DOOMED ? "doomed" : "ended"; }

static const char *reason_code(int state, int why)
{
	if (state != FS_TX_DOOMED)
		return "";
	return why == EDEADLK ? "deadlock" : why == ECONNABORTED ? "killed" : "error";
}

/* The transaction (user or a plain call's) with engine id eid, as text. */
static void describe_engine_txn(fs *f, uint64_t eid, char *buf, size_t size)
{
	for (fs_tx *t = f->txs; t; t = t->next)
		if (t->engine_id == eid) {
			snprintf(buf, size, "transaction %" PRIu64 " (process %d, %s)", t->id, (int)t->pid, t->comm);
			return;
		}
	snprintf(buf, size, "a call outside transactions (engine transaction %" PRIu64 ")", eid);
}

/* Under f->txmu: what tx's status shows.  The write-set figures are read
 * without tx->mu: counters kept after each call. */
static void report_one(outbuf *o, fs_tx *tx, int json, int first)
{
	size_t nlocks = 0;
	uint64_t blocker = 0;
	char reason[sizeof tx->reason];
	pthread_mutex_lock(&tx->tmu);
	if (tx->t) {
		nlocks = be_lock_count(tx->t);
		blocker = be_lock_waits_for(tx->t);
	}
	int state = __atomic_load_n(&tx->state, __ATOMIC_ACQUIRE), why = tx->why; /* (doom writes them under tmu) */
	memcpy(reason, tx->reason, sizeof reason);
	pthread_mutex_unlock(&tx->tmu);
	if (state != FS_TX_DOOMED)
		reason[0] = 0;
	/* files touched: counted when no call is running (never waits for one) */
	if (pthread_mutex_trylock(&tx->mu) == 0) {
		uint64_t *v;
		size_t nf;
		if (tx->ws && touched_inodes(tx->ws, &v, &nf) == 0) {
			__atomic_store_n(&tx->nfiles, nf, __ATOMIC_RELAXED);
			free(v);
		}
		pthread_mutex_unlock(&tx->mu);
	}
	uint64_t nfiles = __atomic_load_n(&tx->nfiles, __ATOMIC_RELAXED);
	uint64_t calls = __atomic_load_n(&tx->calls, __ATOMIC_RELAXED);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t age_ms = (uint64_t)((now.tv_sec - tx->born.tv_sec) * 1000 + (now.tv_nsec - tx->born.tv_nsec) / 1000000);
	uint64_t records = __atomic_load_n(&tx->nrecords, __ATOMIC_RELAXED);
	uint64_t bytes = __atomic_load_n(&tx->nbytes, __ATOMIC_RELAXED);
	uint64_t since = __atomic_load_n(&tx->wait_since_ns, __ATOMIC_RELAXED);
	uint64_t waited_ms = since ? (now_ns() - since) / 1000000 : 0;
	char waiting[240] = "", holder[120];
	if (blocker) {
		describe_engine_txn(tx->f, blocker, holder, sizeof holder);
		snprintf(waiting, sizeof waiting, "for a lock held by %s, %" PRIu64 " ms", holder, waited_ms);
	}
	if (json) {
		out(o, "%s{\"id\":%" PRIu64 ",\"state\":\"%s\",\"reason\":\"%s\",\"message\":", first ? "" : ",", tx->id,
		    state_name(state), reason_code(state, why));
		json_str(o, reason);
		out(o, ",\"pid\":%d,\"comm\":", (int)tx->pid);
		json_str(o, tx->comm);
		out(o, ",\"uid\":%u,\"age_ms\":%" PRIu64 ",\"members\":[", (unsigned)tx->uid, age_ms);
		for (int i = 0; i < tx->nmembers; i++)
			out(o, "%s%d", i ? "," : "", (int)tx->members[i]);
		out(o, "],\"files\":%" PRIu64 ",\"calls\":%" PRIu64 ",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"locks\":%zu,\"waiting\":",
		    nfiles, calls, records, bytes, nlocks);
		if (waiting[0])
			json_str(o, waiting);
		else
			out(o, "null");
		out(o, "}");
		return;
	}
	out(o, "transaction %" PRIu64 " (%s)\n", tx->id, state_name(state));
	if (state == FS_TX_DOOMED)
		out(o, "  doomed       %s\n", reason);
	out(o, "  bound to     process %d (%s), uid %u\n", (int)tx->pid, tx->comm, (unsigned)tx->uid);
	out(o, "  age          %" PRIu64 ".%03" PRIu64 " s\n", age_ms / 1000, age_ms % 1000);
	out(o, "  members      ");
	for (int i = 0; i < tx->nmembers; i++)
		out(o, "%s%d", i ? " " : "", (int)tx->members[i]);
	out(o, "%s\n", tx->nmembers ? "" : "(none seen yet)");
	out(o, "  calls        %" PRIu64 "\n", calls);
	out(o, "  files        %" PRIu64 " touched (inodes changed, directories included)\n", nfiles);
	out(o, "  write set    %" PRIu64 " records, %" PRIu64 " bytes written\n", records, bytes);
	out(o, "  locks        %zu held\n", nlocks);
	out(o, "  waiting      %s\n", waiting[0] ? waiting : "no");
}

int fs_tx_report(fs *f, fs_tx *only, uid_t uid, int json, char *buf, size_t size)
{
	outbuf o = {buf, size, 0};
	int n = 0;
	if (size)
		buf[0] = 0;
	if (json)
		out(&o, "{\"transactions\":[");
	pthread_mutex_lock(&f->txmu);
	for (fs_tx *tx = f->txs; tx; tx = tx->next) {
		if (only ? tx != only : (uid != 0 && tx->uid != uid))
			continue;
		report_one(&o, tx, json, n == 0);
		n++;
	}
	if (only && !only->listed) {
		report_one(&o, only, json, n == 0);
		n++;
	}
	pthread_mutex_unlock(&f->txmu);
	if (json)
		out(&o, "]}\n");
	else if (!n)
		out(&o, "no open transactions\n");
	return o.len < size ? (int)o.len : -ERANGE;
}

int fs_tx_report_page(fs *f, uid_t uid, int json, uint64_t before, char *buf, size_t size, uint64_t *next)
{
	outbuf o = {buf, size, 0};
	const size_t tail = 32; /* room for the end: "]}\n", "no open transactions\n" */
	uint64_t last = 0;      /* the id of the last transaction listed */
	int n = 0, full = 0;
	*next = 0;
	if (size <= tail)
		return -ERANGE;
	buf[0] = 0;
	if (json && !before)
		out(&o, "{\"transactions\":[");
	pthread_mutex_lock(&f->txmu);
	for (fs_tx *tx = f->txs; tx; tx = tx->next) { /* newest first: ids descend */
		if ((before && tx->id >= before) || (uid != 0 && tx->uid != uid))
			continue;
		size_t was = o.len;
		report_one(&o, tx, json, !before && n == 0);
		if (o.len + tail >= size) {
			o.len = was;
			full = 1;
			break;
		}
		last = tx->id;
		n++;
	}
	pthread_mutex_unlock(&f->txmu);
	buf[o.len] = 0;
	if (full && n == 0)
		return -ERANGE; /* (never: one report is far shorter than a page) */
	if (full) {
		*next = last;
		return (int)o.len;
	}
	if (json)
		out(&o, "]}\n");
	else if (!before && !n)
		out(&o, "no open transactions\n");
	return (int)o.len;
}

int fs_tx_history(fs *f, uid_t uid, const pid_t *chain, int n, char *buf, size_t size)
{
	outbuf o = {buf, size, 0};
	time_t now = time(NULL);
	int kind = 0;
	if (size)
		buf[0] = 0;
	pthread_mutex_lock(&f->txmu);
	unsigned from = f->nhistory > 16 ? f->nhistory - 16 : 0;
	const char *orphan = NULL; /* the latest of a bound process that has exited */
	long long orphan_when = 0;
	for (unsigned i = f->nhistory; i-- > from && !kind;) {
		const char *h = f->history[i % 16];
		unsigned hu;
		long long when;
		int hpid, hppid, skip, mine = 0;
		if (sscanf(h, "%u %lld %d %d %n", &hu, &when, &hpid, &hppid, &skip) != 4 || (uid != 0 && hu != uid))
			continue;
		/* the caller's own: bound to it or an ancestor, or to a sibling
		 * (txrun, started by the caller's shell) -- never another shell's */
		for (int k = 0; k < n && !mine; k++)
			mine = hpid == (int)chain[k];
		if (mine || (n > 1 && hppid == (int)chain[1])) {
			out(&o, "%s (%lld s ago)", h + skip, (long long)(now - when));
			kind = 1;
		} else if (!orphan && kill(hpid, 0) != 0 && errno == ESRCH) {
			orphan = h + skip; /* a shell that was killed or closed: the user asks from a new one */
			orphan_when = when;
		}
	}
	if (!kind && orphan) {
		out(&o, "%s (%lld s ago)", orphan, (long long)(now - orphan_when));
		kind = 2;
	}
	pthread_mutex_unlock(&f->txmu);
	return kind;
}
