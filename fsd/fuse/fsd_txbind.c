/*
 * fsd_txbind -- tpfsd's side of user transactions: which process belongs
 * to which transaction, the control channel (tpfs_tx_proto.h), the end
 * of a transaction whose process exited, and the kernel-cache coherence
 * the transactions need (C1-C9 below; ../DESIGN.md, "Kernel caches").
 * The transactions themselves -- write sets, locks, commit -- are the
 * file-system layer's (fs/fs_tx.c).
 *
 * Caches (C1-C9; what each reply lets the kernel keep is decided in
 * fsd_ops.c, H4):
 *   C1  While any transaction is open, and for 5 s after the last one
 *       ended, every entry, negative entry and attribute reply carries a
 *       zero timeout, so nothing cached can outlive a change of view.
 *   C2  A member's open is direct I/O: its reads and writes never pass
 *       through, nor fill, the shared page cache.  (So a shared mmap of a
 *       file opened in a transaction fails with ENODEV; a private one
 *       reads the transaction's view, and its pages are dropped with the
 *       rest at the end: C4.)
 *   C3  After a member's change is answered, the daemon invalidates what
 *       the kernel may have updated in place from that reply (sizes after
 *       writes, attributes, moved names): fsd_changed.
 *   C4  At commit and abort every inode and name the write set touched is
 *       invalidated before txcommit/txabort returns (fs_tx.c X4), the
 *       shared inode and the transaction's own (C5) both.
 *   C5  A member's kernel inodes are its transaction's own: every entry
 *       of a file (not a directory: C9) it gets names the inode by an
 *       alias node id (the inode number with the transaction's tag in
 *       bits 44-63), so the kernel keeps a separate inode -- sizes,
 *       attributes, page cache, a removed directory's deadness (C9) --
 *       for the transaction, and
 *       the shared inode of non-members never holds a member's view.
 *       Members and non-members resolving the same name replace each
 *       other's dentries (zero timeouts, C1: the kernel asks every time).
 *       What the kernel caches of a node id is one view: the committed
 *       state for a shared inode, the transaction's for its alias
 *       (fsd_cache_view); so a read through the page cache (mmap faults,
 *       read-ahead, handles that are not direct I/O: FUSE sends them with
 *       no lock owner) answers that view whoever asks; and a member's
 *       writes, truncations and fallocates through a shared inode (a
 *       handle opened before it joined) are plain calls, committed at once
 *       (the kernel puts their bytes in the shared page cache before it
 *       asks), or fail with EBADF if the transaction has the file locked
 *       (fsd_data.c outside_change).  Tags wrap
 *       after 2^20 - 1 (C8: new tags, not transactions).
 *   C6  Names the kernel was allowed to keep before the first transaction
 *       opened would resolve to shared inodes without asking: a begin
 *       expires those replied within the entry timeout (a ring of the
 *       last NAME_RING), or, if the ring lost some, the kernel is slow to
 *       take them or cannot expire (protocol before 7.38), waits until
 *       they expired (entry_timeout, 1 s by default).  Expired, never
 *       dropped (FUSE_EXPIRE_ONLY, fsd_io.c U3): the dentry stays and its
 *       next use asks the daemon, which answers a member with its alias
 *       (C5).  A dropped dentry that is someone's working directory is
 *       unhashed: another user's begin made that process's getcwd() fail
 *       with ENOENT, /proc/PID/cwd read "(deleted)", and txbegin started
 *       there found no mount (issue 24, 4).
 *       Names a begin invalidated are not invalidated again by the next
 *       (ring_done): a program that looked its files up just before its
 *       first transaction paid a thread and a notification per name at
 *       every begin for a second.
 *   C7  The root's attributes are the exception to C1: every view reaches
 *       the root by the same node id (C5), and while no open transaction
 *       has changed the root's inode (fs_root_private) every view of its
 *       attributes is the committed one, so they are replied with the
 *       usual timeout -- a path walk checks the root's permissions on
 *       every call, two round trips per open otherwise.  A member's change
 *       of the root counts its transaction before the reply (fs.c, so
 *       replies from then on carry zero timeouts) and invalidates the
 *       root's attributes after it (C3: a reply read before the change
 *       and delivered after is then dropped by the kernel, whose
 *       invalidation bumps the inode's attribute version); the commit or
 *       abort invalidates them again (C4) once the transaction's view is
 *       gone, so a reply read from that view is dropped or invalidated
 *       whenever it arrives.
 *   C8  A process's next transaction keeps the tag of its last one if
 *       that one committed (tag_take): the names that transaction resolved
 *       still name the inodes the kernel holds for it, so a path walk
 *       looks each up once, where a new tag made the kernel find its old
 *       dentry, ask, get another node id, drop it and ask again.  What the
 *       kernel keeps of such an inode is no one else's: attributes with
 *       zero timeouts, pages only of private mappings, which a direct I/O
 *       file drops at every mmap; and the committed state it came from
 *       is every later view's too.  After an abort the tag is new, so
 *       nothing of the aborted view can be met again (tag_ended).
 *   C9  Directories keep their shared node id for members, as the root
 *       always did: a name resolved to another node id makes the kernel
 *       drop its dentry, and a dropped dentry that is a process's working
 *       directory is unhashed (getcwd fails with ENOENT) -- every member
 *       walking to a bystander's directory by its full path broke the
 *       bystander.  What the kernel keeps of a directory is per caller
 *       anyway (zero timeouts, C1; no cached listings, H4), except what
 *       it does to the inode at an rmdir (marks it dead for everyone) and
 *       a rename (moves its dentry).  So a member's rmdir or rename naming
 *       a directory the kernel knows by its shared id makes it the
 *       transaction's own first (dir_take: a list of alias node ids,
 *       dropped when it ends) and answers ESTALE without doing
 *       anything; the kernel looks the names up again (LOOKUP_REVAL),
 *       gets the alias (fsd_nodeid) and repeats the call once, on the
 *       transaction's own inode (fsd_dirs_private).
 *
 * Binding.  A transaction is bound to one process (the shell of txbegin,
 * txrun itself, a program using the client library).  A request belongs to
 * the transaction of the nearest process, among the requesting thread's
 * process and its ancestors, that is bound -- if the request's credentials
 * are the transaction's user's and group's (C10).  Processes are known by
 * pid and start time (field 22 of /proc/PID/stat), so a reused pid never
 * inherits a transaction.  With no transaction open on the mount, a request costs one
 * atomic load (fs_tx_count); otherwise the answer is cached per thread id
 * and generation of the transaction table, and checked against the
 * thread's start time when the entry is older than CACHE_TRUST_NS (a pid
 * cannot be reused within that time: it would take pid_max, 4 million,
 * process creations).  The ancestry read from /proc is cached with it: a
 * new generation (every begin and commit makes one) is decided again from
 * it while it is younger than CACHE_TRUST_NS, and begin, commit and abort
 * find their caller's chain there too.  (A chain goes stale only when an
 * ancestor dies; what C13 does then is late by at most that long.)
 *
 *   C10 A request joins a transaction only if its user and group (the
 *       fsuid and fsgid the kernel sends with it) are the transaction's
 *       owner's -- the bound process's at begin (fs_tx_set_gid; any group
 *       until it is set) -- or the owner is root.  A set-user-ID-root
 *       program (or su, sudo, a daemon that switches users) run by a
 *       member writes as root, or as its user, with rights the owner does
 *       not have: such writes are plain calls, committed at once and seen
 *       by everyone, and txabort cannot take them back -- an unprivileged
 *       user must not roll back privileged writes (issue 24, 5).  So with
 *       the group: a set-group-ID program (or newgrp, sg) run by a member
 *       writes with the rights of a group the owner may not have, and its
 *       writes are plain calls too.  Root's transactions take every
 *       descendant (root could undo those writes anyway, and `txrun --
 *       make install` stays whole when a tool drops its privileges).  C11
 *       counts as members only processes acting as the owner in both
 *       (acts_as).
 *
 *   C11 A commit is refused (EBUSY, nothing changed, the transaction
 *       still open) while other members run: live processes, not
 *       zombies, that descend from the bound process (read through
 *       /proc/PID/task/TID/children) or were seen as members (C13's
 *       list), acting as the owner (C10), other than the committing
 *       process and its ancestors.  Its answer names them (pid and
 *       command; SHOW_OTHERS of them).  Committing then would apply half
 *       of a job's output and let the rest go on as plain calls, each
 *       committed on its own.  `tpfs.tx.commit.force` commits all the
 *       same and cuts them off: each of them, and whatever it starts,
 *       fails every later call with ECANCELED until it exits (MAX_OTHERS
 *       of them at most), as C13's
 *       orphans do -- also under a later transaction of the shell.
 *       (txcommit --wait asks again until none is left: tools/tpfs_tx.c.)
 *
 *   C12 An abort by a member (txabort; txrun after its command failed)
 *       is never refused: it ends the transaction at once and cuts off
 *       the other members still running (C11's list), and its answer
 *       names them: their changes, and those of what they start, fail
 *       with ECANCELED until they exit -- also under the shell's next
 *       transaction -- while their reads see the committed state (as
 *       after any abort: a mapping still open reads the committed bytes).
 *       Otherwise a background job would go on writing as plain calls,
 *       each committed on its own, or join the shell's next transaction
 *       (issue 24, gap e).  An abort by id (txabort --id) of another
 *       shell's transaction only dooms it: its members' calls fail until
 *       that shell ends it.
 *
 * Lifetime.  A reaper thread polls a pidfd of every bound process; when one
 * exits, its transaction is aborted and ended (txstatus of the next shell
 * says so: fs_tx_history).
 *   C13 A member that outlives its bound process (kill -9 of the shell
 *       while a command of it runs) is reparented away from it and would
 *       otherwise go on as a plain caller, its later writes committed one
 *       call at a time.  Every process seen as a member, and its ancestors
 *       below the bound process, are remembered (pid and start time); a
 *       process with such an ancestor -- itself
 *       included -- whose transaction was aborted for the exit, or is
 *       still open without the bound process among its ancestors, fails
 *       every call with ECANCELED until it exits.  So does a process that
 *       made no call before the bound one died: one of the dead process's
 *       session (if it led one) or else process group, started between
 *       the begin and the exit (group_rule: put in place by the reaper, or
 *       by the first call under no bound process that finds the bound one
 *       dead, whichever comes first).
 *
 * The table (C14-C16): every open transaction has a binding (its bound
 * process's pidfd, a reference to it, its user).
 *   C14 At most table_max are open: TABLE_MAX, or fewer when the daemon
 *       may open fewer files (one pidfd each, TABLE_FDS kept for the rest;
 *       the soft limit is raised to the hard one first).
 *   C15 One user cannot deny others: a begin asked by a user other than
 *       root fails with EAGAIN, before anything is begun, when that user
 *       has max_user_tx open (tpfsd -o max_user_tx=), or when the users
 *       together have 7/8 of table_max; the last eighth is root's, so root
 *       can always begin, list (status.all, in pages: C20) and abort
 *       (abort.ID).  Doomed transactions count until they end: each holds a
 *       pidfd.  The check and the place it keeps are one step under x->mu
 *       (table_keep): parallel begins cannot overshoot.
 *   C16 Nothing is quadratic in the table: the reaper drops a binding when
 *       its reference shows the transaction ended (no look-up by id); a
 *       transaction is found by pid or id through hashes (fs_tx.c); and
 *       the bound processes that exited are found through an epoll set of
 *       the pidfds, not one poll each (group_rules_now).
 *
 * The control channel (tpfs_tx_proto.h, version 2), at fsd_tx_control:
 *   C17 A name the protocol does not have fails with ENODATA, as any
 *       attribute the root does not have.
 *       So it is never taken for another request.
 *   C18 begin, commit and abort are carried out only when their answer
 *       can be delivered: a size probe (size 0, as getfattr(1) sends
 *       first) is answered TPFS_TX_ANSWER_MAX, which every answer of
 *       theirs fits, and a buffer under that fails with ERANGE, both
 *       changing nothing.
 *       They change state: an answer that could not be delivered would be
 *       a change its caller cannot learn of.  status changes nothing, so
 *       its probe gets the answer's length (the client asks again larger).
 *   C19 A whole status.all fits in an xattr (STATUS_WHOLE_MAX) or is
 *       refused with EOVERFLOW.
 *       The kernel limits an attribute to XATTR_SIZE_MAX; a report cut
 *       there would read as a complete one.
 *   C20 status.all is also read in pages ("page NEXT" first,
 *       fs_tx_report_page), each of which fits an xattr.
 *       So a table of any length can be listed (root can always list and
 *       abort: C15).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include "fsd_int.h"
#include "fsd_io.h"
#include "tpfs_tx_proto.h"

#define CACHE_SLOTS 1024
#define MAX_DEPTH 128
#define TABLE_MAX 16384 /* C14: open transactions on a mount, at most */
#define TABLE_FDS 1024   /* C14: descriptors kept for everything but the bindings' pidfds */
#define PILEUP 256       /* ended bindings that make a begin wake the reaper to drop them */

#define CACHE_TRUST_NS 500000000ull
#define POLL_OPEN_MS 50 /* the reaper's round while transactions are open */
#define TAG_SLOTS 256   /* C8: processes whose tag is kept for their next transaction */

typedef struct proc {
	pid_t pid, ppid, pgid, sid;
	uint64_t start;
	char state; /* R, S, D, T, Z (a zombie: it has exited), ... */
	char comm[32];
} proc;

/* A thread's cached answer (valid for generation gen of the table) and
 * its process's ancestry, read from /proc at checked_ns: a new generation
 * is answered from the ancestry while it is younger than CACHE_TRUST_NS,
 * without reading /proc again (begin and commit change the generation). */
#define CHAIN_CACHE 12
typedef struct cache_ent {
	pid_t tid;
	uid_t uid;
	gid_t gid;
	uint64_t start, gen, txid; /* txid 0: no transaction */
	int refuse;                /* an orphaned member (C13): its calls fail */
	int answered;              /* uid, gen, txid and refuse are an answer */
	uint64_t checked_ns;       /* when start was last read from /proc */
	int n;                     /* chain[0..n-1] from /proc (0: not kept: deeper) */
	proc chain[CHAIN_CACHE];
} cache_ent;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct bound {
	int fd; /* pidfd */
	uint64_t txid;   /* 0 while its begin runs (tx NULL: a place kept, C15) */
	fs_tx *tx;       /* a reference, dropped with the binding */
	uid_t uid;       /* whose (C15) */
	pid_t pgid, sid; /* of the bound process, and whether it leads its session */
	int leader;
	uint64_t since;  /* when the transaction began, in clock ticks since boot */
	int ruled;       /* its group rule is in place (group_rule_add) */
} bound;

/* C13: the processes a bound process that exited may have left behind:
 * those of its session (if it led one) or process group, started while its
 * transaction was open. */
typedef struct group_rule {
	pid_t id;
	int session;
	uint64_t since, until;
} group_rule;
#define MAX_RULES 64

/* Now, in clock ticks since boot (the unit of /proc/PID/stat's start time). */
static uint64_t boot_ticks(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	long hz = sysconf(_SC_CLK_TCK);
	return (uint64_t)ts.tv_sec * (uint64_t)hz + (uint64_t)ts.tv_nsec / (1000000000ull / (uint64_t)hz);
}

/* A process seen as a member (C13): pid and start time, its transaction,
 * and whether that transaction was aborted because its bound process
 * exited. */
typedef struct seen_ent {
	pid_t pid;
	uint64_t start, txid;
	int doomed; /* 1: every call fails (C13, C11); CUT_CHANGES: changes fail (C12) */
} seen_ent;
#define CUT_CHANGES 2
#define MAX_SEEN 4096

/* C6: a name replied with a positive entry timeout, and when. */
typedef struct cached_name {
	uint64_t parent, ns;
	uint8_t len;
	char name[FS_NAME_MAX + 1]; /* NUL-terminated: libfuse sends the terminator with a name */
} cached_name;
#define NAME_RING 4096
#define RING_RECENT_NS 10000000ull /* names put this shortly before a begin's invalidation are invalidated again */

struct fsd_txs {
	fsd *d;
	pthread_mutex_t rmu;     /* the ring of cached names */
	cached_name *ring;       /* NAME_RING; NULL: none (begin waits instead) */
	uint64_t nring;          /* names ever put in it */
	uint64_t ring_done;      /* the names before this one were invalidated since they were put */
	int nexpire;             /* expire threads running (atomic) */
	seen_ent seen[MAX_SEEN]; /* under mu */
	group_rule rules[MAX_RULES];
	int nseen, nrules;
	int ndoomed; /* doomed entries and rules: changed under mu by doomed_add, read without it */
	struct fuse_session *se;
	pthread_mutex_t mu;     /* cache, bound */
	cache_ent cache[CACHE_SLOTS];
	bound *b;               /* nb of cap; the bindings, open or not yet dropped (C15) */
	int nb, cap;
	int table_max;          /* C14: open transactions at most; root's reserve is table_max / 8 */
	struct tag_ent {        /* C8, under mu */
		pid_t pid;
		uint64_t start, tag, used;
		int aliased;
	} tags[TAG_SLOTS];
	uint64_t next_tag, tag_tick;
	pthread_mutex_t dmu;    /* C9: dirs */
	uint64_t *dirs;         /* C9: alias node ids of directories a transaction moves or removes */
	int ndirs, capdirs;     /* ndirs: under dmu, read without it (relaxed atomic) */
	int evfd;               /* wakes the reaper */
	int epfd;               /* C16: the bindings' pidfds, or -1 */
	int long_poll;          /* the reaper sleeps up to a second: a begin must wake it (seq_cst) */
	int stop;
	pthread_t reaper;
	int running;
};

/* ---- processes ---- */

/* /proc/PID/stat: "pid (comm) state ppid ... starttime(22) ..." */
static int proc_read(pid_t pid, proc *p)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return errno ? errno : ESRCH;
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = 0;
	char *l = strchr(buf, '('), *r = strrchr(buf, ')');
	if (!l || !r || r < l)
		return ESRCH;
	size_t cl = (size_t)(r - l - 1);
	if (cl >= sizeof p->comm)
		cl = sizeof p->comm - 1;
	memcpy(p->comm, l + 1, cl);
	p->comm[cl] = 0;
	p->pid = pid;
	char *s = r + 2, *save = NULL;
	int field = 3;
	for (char *tok = strtok_r(s, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
		if (field == 3)
			p->state = tok[0];
		if (field == 4)
			p->ppid = (pid_t)strtol(tok, NULL, 10);
		if (field == 5)
			p->pgid = (pid_t)strtol(tok, NULL, 10);
		if (field == 6)
			p->sid = (pid_t)strtol(tok, NULL, 10);
		if (field == 22) {
			p->start = strtoull(tok, NULL, 10);
			return 0;
		}
	}
	return ESRCH;
}

/* A line "Key:\t<number>..." of /proc/PID/status. */
static int proc_status_num(pid_t pid, const char *key, long *out)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return ESRCH;
	int rc = ESRCH;
	while (fgets(line, sizeof line, fp))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			*out = strtol(line + kl + 1, NULL, 10);
			rc = 0;
			break;
		}
	fclose(fp);
	return rc;
}

/* The process (thread group) of thread tid, and its ancestors: chain[0] is
 * the process itself. */
static int ancestry(pid_t tid, proc *chain, int *n)
{
	long tgid;
	int rc;
	*n = 0;
	if (tid <= 0)
		return ESRCH;
	if ((rc = proc_status_num(tid, "Tgid", &tgid)) != 0)
		return rc;
	pid_t pid = (pid_t)tgid;
	while (pid > 0 && *n < MAX_DEPTH) {
		if ((rc = proc_read(pid, &chain[*n])) != 0)
			return *n ? 0 : rc;
		pid = chain[*n].ppid;
		(*n)++;
	}
	return 0;
}

/* The transaction of the nearest bound process of the chain (a reference),
 * its index in *at; NULL if none. */
static fs_tx *chain_tx(fsd *d, const proc *chain, int n, int *at)
{
	for (int i = 0; i < n; i++) {
		fs_tx *tx = fs_tx_of(d->fs, chain[i].pid, chain[i].start);
		if (tx) {
			if (at)
				*at = i;
			return tx;
		}
	}
	return NULL;
}

/* C13: the process of chain[0], or an ancestor, was a member of a
 * transaction it is no longer under -- one aborted because its bound
 * process exited (doomed), or one still open whose bound process is not
 * among the ancestors any more (the process was orphaned: the bound one
 * died, or it escaped by a double fork).  Under x->mu. */
static int orphaned(fsd *d, const proc *chain, int n)
{
	struct fsd_txs *x = d->txs;
	int cut = 0;
	for (int r = 0; r < x->nrules; r++) {
		const group_rule *g = &x->rules[r];
		if ((g->session ? chain[0].sid : chain[0].pgid) == g->id && chain[0].start >= g->since &&
		    chain[0].start <= g->until)
			return 1;
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < x->nseen; j++) {
			seen_ent *s = &x->seen[j];
			if (s->pid != chain[i].pid || s->start != chain[i].start)
				continue;
			if (s->doomed == CUT_CHANGES) {
				cut = CUT_CHANGES;
				continue;
			}
			if (s->doomed)
				return 1;
			fs_tx *tx = fs_tx_by_id(d->fs, s->txid);
			fs_tx_put(tx);
			if (tx)
				return 1;
		}
	return cut;
}

/* C11, C12: a process of chain[0..n) was cut off from its transaction (a
 * doomed entry): 1, every call fails; CUT_CHANGES, only its changes; 0.
 * Under x->mu. */
static int cut_off(struct fsd_txs *x, const proc *chain, int n)
{
	int cut = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < x->nseen; j++)
			if (x->seen[j].doomed && x->seen[j].pid == chain[i].pid && x->seen[j].start == chain[i].start) {
				if (x->seen[j].doomed != CUT_CHANGES)
					return 1;
				cut = CUT_CHANGES;
			}
	return cut;
}

/* Counts a doomed entry or rule in (+1) or out (-1), under x->mu; an
 * atomic store because fsd_caller reads the count without the mutex. */
static void doomed_add(struct fsd_txs *x, int delta)
{
	__atomic_store_n(&x->ndoomed, x->ndoomed + delta, __ATOMIC_RELAXED);
}

/* C13: the rule for bound process b, which exited (under x->mu; once). */
static void group_rule_add(struct fsd_txs *x, bound *b)
{
	if (b->ruled || x->nrules >= MAX_RULES)
		return;
	x->rules[x->nrules++] = (group_rule){.id = b->leader ? b->sid : b->pgid,
					     .session = b->leader,
					     .since = b->since,
					     .until = boot_ticks() + 1};
	doomed_add(x, 1);
	b->ruled = 1;
}

/* C13: the rules of bound processes that exited but that the reaper has
 * not handled yet (under x->mu).  A process of a killed group making its
 * first call right after would otherwise run as a plain caller until the
 * reaper's round: its write committed at once (random_crash under a slow,
 * ThreadSanitizer build of the daemon saw another transaction read it). */
static void group_rule_now(fsd *d, bound *b)
{
	struct fsd_txs *x = d->txs;
	if (b->ruled || !b->tx)
		return;
	struct pollfd p = {.fd = b->fd, .events = POLLIN};
	if (poll(&p, 1, 0) != 1 || !(p.revents & (POLLIN | POLLHUP)))
		return;
	fs_tx *tx = fs_tx_by_id(d->fs, b->txid); /* open still: the reaper will abort it */
	if (tx)
		group_rule_add(x, b);
	fs_tx_put(tx);
}

static void group_rules_now(fsd *d)
{
	struct fsd_txs *x = d->txs;
	struct epoll_event ev[256];
	/* C16: the bound processes that exited are those whose pidfds the
	 * epoll set has ready (level-triggered: until the reaper drops them) */
	int n = x->epfd >= 0 ? epoll_wait(x->epfd, ev, 256, 0) : -1;
	if (n < 0 || n == 256) { /* (no set, or more exited than one look shows) */
		for (int k = 0; k < x->nb; k++)
			group_rule_now(d, &x->b[k]);
		return;
	}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < x->nb; k++)
			if (x->b[k].fd == ev[i].data.fd) {
				group_rule_now(d, &x->b[k]);
				break;
			}
}

/* Under x->mu. */
static void seen_add(struct fsd_txs *x, const proc *p, uint64_t txid)
{
	for (int j = 0; j < x->nseen; j++)
		if (x->seen[j].pid == p->pid && x->seen[j].start == p->start) {
			x->seen[j].txid = txid;
			return;
		}
	if (x->nseen < MAX_SEEN)
		x->seen[x->nseen++] = (seen_ent){.pid = p->pid, .start = p->start, .txid = txid};
}

/* Under x->mu: keeps tid's chain (n entries, read from /proc now) and the
 * thread's start time. */
static void chain_keep(cache_ent *e, pid_t tid, uint64_t start, const proc *chain, int n, uint64_t now)
{
	if (e->tid != tid) {
		e->tid = tid;
		e->answered = 0;
	}
	e->start = start; /* the thread's (0: unknown) */
	e->checked_ns = now;
	e->n = n <= CHAIN_CACHE ? n : 0;
	memcpy(e->chain, chain, (size_t)e->n * sizeof *chain);
}

/* The ancestry of thread tid (ancestry()), from the cache while it is
 * younger than CACHE_TRUST_NS: a process's parents change only when one
 * dies, and C13 bounds what a stale chain can do. */
static int chain_of(fsd *d, pid_t tid, proc *chain, int *n)
{
	struct fsd_txs *x = d->txs;
	uint64_t now = mono_ns();
	cache_ent *e = &x->cache[(unsigned)tid % CACHE_SLOTS];
	pthread_mutex_lock(&x->mu);
	if (tid > 0 && e->tid == tid && e->n && now - e->checked_ns < CACHE_TRUST_NS) {
		*n = e->n;
		memcpy(chain, e->chain, (size_t)e->n * sizeof *chain);
		pthread_mutex_unlock(&x->mu);
		return 0;
	}
	pthread_mutex_unlock(&x->mu);
	int rc = ancestry(tid, chain, n);
	if (rc == 0 && *n) {
		pthread_mutex_lock(&x->mu);
		chain_keep(e, tid, 0, chain, *n, now);
		pthread_mutex_unlock(&x->mu);
	}
	return rc;
}

/* C10: a request with fsuid uid and fsgid gid acts as tx's owner. */
static int owner_acts(const fs_tx *tx, uid_t uid, gid_t gid)
{
	gid_t g = fs_tx_gid(tx);
	return fs_tx_uid(tx) == 0 || (uid == fs_tx_uid(tx) && (g == (gid_t)-1 || gid == g));
}

static fs_tx *resolve(fsd *d, pid_t tid, uid_t uid, gid_t gid, int *refuse)
{
	struct fsd_txs *x = d->txs;
	proc self, chain[MAX_DEPTH];
	int n = 0;
	uint64_t gen = fs_tx_gen(d->fs), now = mono_ns();
	*refuse = 0;
	if (tid <= 0)
		return NULL;
	cache_ent *e = &x->cache[(unsigned)tid % CACHE_SLOTS];
	pthread_mutex_lock(&x->mu);
	int fresh = e->tid == tid && now - e->checked_ns < CACHE_TRUST_NS;
	if (fresh && e->answered && e->uid == uid && e->gid == gid && e->gen == gen) {
		uint64_t id = e->txid;
		*refuse = e->refuse;
		pthread_mutex_unlock(&x->mu);
		return id ? fs_tx_by_id(d->fs, id) : NULL;
	}
	int have = fresh && e->n; /* a new generation: decided again from the kept chain */
	if (have) {
		n = e->n;
		memcpy(chain, e->chain, (size_t)n * sizeof *chain);
	}
	pthread_mutex_unlock(&x->mu);
	if (!have) {
		if (proc_read(tid, &self) != 0)
			return NULL;
		pthread_mutex_lock(&x->mu);
		if (e->tid == tid && e->answered && e->uid == uid && e->gid == gid && e->start == self.start &&
		    e->gen == gen) {
			e->checked_ns = now;
			uint64_t id = e->txid;
			*refuse = e->refuse;
			pthread_mutex_unlock(&x->mu);
			return id ? fs_tx_by_id(d->fs, id) : NULL;
		}
		pthread_mutex_unlock(&x->mu);
		if (ancestry(tid, chain, &n) != 0)
			n = 0;
	}
	int at = 0;
	fs_tx *tx = n ? chain_tx(d, chain, n, &at) : NULL;
	int under_bound = tx != NULL;
	if (tx && __atomic_load_n(&x->ndoomed, __ATOMIC_RELAXED) > 0) {
		pthread_mutex_lock(&x->mu);
		int cut = cut_off(x, chain, at);
		pthread_mutex_unlock(&x->mu);
		if (cut) { /* C11, C12: cut off by a forced commit or an abort, under a later transaction */
			fs_tx_put(tx);
			tx = NULL;
			*refuse = cut;
		}
	}
	if (tx && !owner_acts(tx, uid, gid)) { /* C10: another user's or group's: not a member */
		fs_tx_put(tx);
		tx = NULL;
	}
	pthread_mutex_lock(&x->mu);
	if (tx) /* the caller and its ancestors below the bound process */
		for (int i = 0; i < at; i++)
			seen_add(x, &chain[i], fs_tx_id(tx));
	else if (!under_bound && !*refuse && n && (x->nseen || x->nrules || x->nb)) {
		group_rules_now(d);
		*refuse = orphaned(d, chain, n);
	}
	if (!have)
		chain_keep(e, tid, self.start, chain, n, now);
	if (e->tid == tid) {
		e->uid = uid, e->gid = gid, e->gen = gen, e->txid = tx ? fs_tx_id(tx) : 0, e->refuse = *refuse;
		e->answered = 1;
	}
	pthread_mutex_unlock(&x->mu);
	if (tx)
		fs_tx_member(tx, n ? chain[0].pid : tid);
	return tx;
}

/* C13, in the reaper: members of a transaction aborted because its bound
 * process exited are doomed; entries of processes gone, or of ended
 * transactions, are dropped. */
static void seen_sweep(struct fsd_txs *x, uint64_t doom_txid)
{
	pthread_mutex_lock(&x->mu);
	for (int j = 0; j < x->nseen;) {
		seen_ent *s = &x->seen[j];
		proc p;
		if (doom_txid && s->txid == doom_txid && !s->doomed) {
			s->doomed = 1;
			doomed_add(x, 1);
		}
		int gone = proc_read(s->pid, &p) != 0 || p.start != s->start;
		fs_tx *tx = s->doomed ? NULL : fs_tx_by_id(x->d->fs, s->txid);
		fs_tx_put(tx);
		if (gone || (!s->doomed && !tx)) {
			if (s->doomed)
				doomed_add(x, -1);
			x->seen[j] = x->seen[--x->nseen];
			continue;
		}
		j++;
	}
	int nr = x->nrules;
	group_rule rules[MAX_RULES];
	memcpy(rules, x->rules, (size_t)nr * sizeof *rules);
	pthread_mutex_unlock(&x->mu);
	if (doom_txid || !nr)
		return;
	/* a rule lasts while a process it covers lives (a scan of /proc,
	 * at most once a second, only while rules exist) */
	int alive[MAX_RULES] = {0};
	DIR *dir = opendir("/proc");
	struct dirent *de;
	while (dir && (de = readdir(dir)) != NULL) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		proc p;
		if (*end || pid <= 0 || proc_read((pid_t)pid, &p) != 0)
			continue;
		for (int r = 0; r < nr; r++)
			if ((rules[r].session ? p.sid : p.pgid) == rules[r].id && p.start >= rules[r].since &&
			    p.start <= rules[r].until)
				alive[r] = 1;
	}
	if (dir)
		closedir(dir);
	pthread_mutex_lock(&x->mu);
	for (int r = 0; r < nr; r++) {
		if (alive[r] || !dir)
			continue;
		for (int k = 0; k < x->nrules; k++)
			if (!memcmp(&x->rules[k], &rules[r], sizeof rules[r])) {
				x->rules[k] = x->rules[--x->nrules];
				doomed_add(x, -1);
				break;
			}
	}
	pthread_mutex_unlock(&x->mu);
}

/* The fs of a request that may be interrupted, for fsd_caller_end. */
static __thread fs *tl_fs;

static void interrupted(fuse_req_t req, void *tid)
{
	fsd *d = fuse_req_userdata(req);
	fs_interrupt(d->fs, (pid_t)(intptr_t)tid);
}

fs_caller fsd_caller(fuse_req_t req)
{
	const struct fuse_ctx *x = fuse_req_ctx(req);
	fsd *d = fuse_req_userdata(req);
	fs_caller c = {.uid = x->uid, .gid = x->gid, .pid = x->pid, .umask = x->umask};
	if (d->txs && (fs_tx_count(d->fs) > 0 || __atomic_load_n(&d->txs->ndoomed, __ATOMIC_RELAXED) > 0)) {
		/* nothing measurable when no transaction is open */
		int refuse;
		c.tx = resolve(d, x->pid, x->uid, x->gid, &refuse);
		if (refuse == CUT_CHANGES)
			c.refuse_changes = ECANCELED; /* C12 */
		else if (refuse)
			c.refuse = ECANCELED; /* C13, C11 */
		/* a lock wait of this request ends when the kernel interrupts it */
		tl_fs = d->fs;
		pid_t tid = fs_thread_id();
		fs_interrupt_done(d->fs, tid); /* (one left by this thread's last request) */
		fuse_req_interrupt_func(req, interrupted, (void *)(intptr_t)tid);
	}
	return c;
}

void fsd_caller_end(fs_caller *c)
{
	fs_tx_put(c->tx);
	c->tx = NULL;
	if (tl_fs) {
		fs_interrupt_done(tl_fs, fs_thread_id());
		tl_fs = NULL;
	}
}

/* ---- cache coherence (C3, C4) ---- */

static void inval(struct fsd_txs *x, uint64_t nodeid, const char *name, size_t len)
{
	if (!x->se || x->stop)
		return;
	if (name)
		(void)fuse_lowlevel_notify_inval_entry(x->se, nodeid, name, len);
	else
		(void)fuse_lowlevel_notify_inval_inode(x->se, nodeid, 0, 0);
}

/* X6 (fs_tx.c): a small file's new content into the page cache of its
 * shared inode, before its pages are dropped: the kernel takes the size
 * (which a store can only grow) before it waits for any page. */
static void grow(void *ctx, uint64_t ino, const void *data, size_t size)
{
	struct fsd_txs *x = ctx;
	if (!x->se || x->stop || !size)
		return;
	struct fuse_bufvec b = FUSE_BUFVEC_INIT(size);
	b.buf[0].mem = (void *)data;
	(void)fuse_lowlevel_notify_store(x->se, ino, 0, &b, 0);
}

/* C4: the fs layer's callback at the end of a transaction (fs_observer.changed) */
static void notify(void *ctx, uint64_t view, uint64_t ino, const char *name, size_t len)
{
	inval(ctx, ino, name, len);
	if (view && ino != FS_ROOT_INO)
		inval(ctx, ino | view << FSD_ALIAS_SHIFT, name, len);
}

/* C4: the invalidating thread sleeps in the kernel, most likely behind a
 * lock that a request waiting for the commit holds (fs_tx.c X6). */
static int observer_blocked(void *ctx, pid_t tid)
{
	(void)ctx;
	return fsd_io_sleeps_in_kernel(tid);
}

void fsd_changed(fsd *d, const fs_caller *c, uint64_t ino, uint64_t parent, const char *name)
{
	if (!c->tx || !d->txs)
		return;
	/* the member's own inodes (C5) took the reply -- if the kernel has
	 * any; the shared ones may hold its names (a create in a directory it
	 * opened before joining) */
	int own = fs_tx_aliased(c->tx);
	uint64_t node = ino ? fsd_nodeid(d, c, ino, S_IFREG) : 0;
	if (ino && (own || node == ino)) /* (the root is everyone's) */
		inval(d->txs, node, NULL, 0);
	uint64_t pnode = parent ? fsd_nodeid(d, c, parent, S_IFDIR) : 0; /* C9 */
	int own_parent = parent && own && pnode != parent;
	if (parent) {
		if (own_parent)
			inval(d->txs, pnode, NULL, 0);
		inval(d->txs, parent, NULL, 0);
	}
	if (parent && name) {
		if (own_parent)
			inval(d->txs, pnode, name, strlen(name));
		inval(d->txs, parent, name, strlen(name));
	}
}

/* ---- private inodes (C5) ---- */

#define TAG_MAX ((1ull << (64 - FSD_ALIAS_SHIFT)) - 1)

static void dirs_drop(struct fsd_txs *x, uint64_t tag); /* C9 */

uint64_t fsd_tx_tag(const fs_tx *tx) { return fs_tx_view(tx); }

/* C8: the tag of a new transaction bound to (pid, start): its last
 * transaction's if that one committed (*aliased: the kernel may hold
 * inodes of it), else a tag no remembered process has. */
static uint64_t tag_take(struct fsd_txs *x, pid_t pid, uint64_t start, int *aliased)
{
	struct tag_ent *e = NULL, *old = &x->tags[0];
	uint64_t tag;
	pthread_mutex_lock(&x->mu);
	for (int i = 0; i < TAG_SLOTS && !e; i++) {
		if (x->tags[i].pid == pid && x->tags[i].start == start)
			e = &x->tags[i];
		else if (x->tags[i].used < old->used)
			old = &x->tags[i];
	}
	x->tag_tick++;
	if (e && e->tag) {
		e->used = x->tag_tick;
		*aliased = e->aliased;
		tag = e->tag;
		pthread_mutex_unlock(&x->mu);
		return tag;
	}
	for (int busy = 1; busy;) {
		tag = x->next_tag++ % TAG_MAX + 1; /* 1 .. TAG_MAX */
		busy = 0;
		for (int i = 0; i < TAG_SLOTS && !busy; i++)
			busy = x->tags[i].tag == tag;
	}
	if (!e)
		e = old;
	uint64_t gone = e->tag; /* C9: a tag no process keeps any more */
	*e = (struct tag_ent){.pid = pid, .start = start, .tag = tag, .used = x->tag_tick};
	*aliased = 0;
	pthread_mutex_unlock(&x->mu);
	if (gone)
		dirs_drop(x, gone);
	return tag;
}

/* C8: tx ended; its tag stays its process's only if it committed. */
static void tag_ended(struct fsd_txs *x, fs_tx *tx, int committed)
{
	uint64_t tag = fs_tx_view(tx);
	pthread_mutex_lock(&x->mu);
	for (int i = 0; i < TAG_SLOTS; i++)
		if (x->tags[i].tag == tag) {
			if (committed)
				x->tags[i].aliased = fs_tx_aliased(tx);
			else
				x->tags[i].tag = 0;
		}
	pthread_mutex_unlock(&x->mu);
	dirs_drop(x, tag); /* C9: its directories are shared again */
}

/* ---- directories of a transaction's own (C9) ---- */

#define DIRS_MAX 65536 /* C9: directories kept private at once, at most */

static int dir_listed(struct fsd_txs *x, uint64_t alias)
{
	int found = 0;
	if (!x || !__atomic_load_n(&x->ndirs, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&x->dmu);
	for (int i = 0; i < x->ndirs && !found; i++)
		found = x->dirs[i] == alias;
	pthread_mutex_unlock(&x->dmu);
	return found;
}

/* C9: the directories of tag are no transaction's own any more. */
static void dirs_drop(struct fsd_txs *x, uint64_t tag)
{
	if (!__atomic_load_n(&x->ndirs, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&x->dmu);
	int n = 0;
	for (int i = 0; i < x->ndirs; i++)
		if (fsd_alias_tag(x->dirs[i]) != tag)
			x->dirs[n++] = x->dirs[i];
	__atomic_store_n(&x->ndirs, n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&x->dmu);
}

/* C9: makes directory ino the caller's transaction's own; 1 if it was not
 * yet (the kernel holds the shared inode), 0 if it was or cannot be. */
static int dir_take(struct fsd_txs *x, const fs_caller *c, uint64_t ino)
{
	uint64_t alias = ino | fsd_tx_tag(c->tx) << FSD_ALIAS_SHIFT;
	int added = 0;
	if (ino == FS_ROOT_INO || dir_listed(x, alias))
		return 0;
	pthread_mutex_lock(&x->dmu);
	if (x->ndirs == x->capdirs && x->capdirs < DIRS_MAX) {
		int cap = x->capdirs ? 2 * x->capdirs : 64;
		uint64_t *v = realloc(x->dirs, (size_t)cap * sizeof *v);
		if (v)
			x->dirs = v, x->capdirs = cap;
	}
	if (x->ndirs < x->capdirs) {
		x->dirs[x->ndirs] = alias;
		__atomic_store_n(&x->ndirs, x->ndirs + 1, __ATOMIC_RELAXED);
		added = 1;
	}
	pthread_mutex_unlock(&x->dmu);
	return added;
}

/* C9: before a member removes, renames or replaces the directories named
 * (name in parent, and newname in newparent if not NULL) that its kernel
 * holds by their shared node ids: they become its own, and the caller
 * answers ESTALE, on which the kernel looks the names up again (now
 * giving it aliases) and repeats the call once. */
int fsd_dirs_private(fsd *d, const fs_caller *c, uint64_t parent, const char *name, uint64_t newparent,
		     const char *newname)
{
	if (!c->tx || !d->txs)
		return 0;
	int taken = 0;
	for (int i = 0; i < 2; i++) {
		const char *n = i ? newname : name;
		fs_attr a;
		if (!n || !fsd_name_ok(n) || fs_lookup(d->fs, c, i ? newparent : parent, n, &a) != 0)
			continue;
		if (S_ISDIR(a.mode))
			taken |= dir_take(d->txs, c, a.ino);
		fs_forget(d->fs, a.ino, 1); /* the reference fs_lookup took */
	}
	return taken ? -ESTALE : 0;
}

uint64_t fsd_nodeid(fsd *d, const fs_caller *c, uint64_t ino, uint32_t mode)
{
	if (!c->tx || ino == FS_ROOT_INO) /* the root is the mount's: never an alias */
		return ino;
	uint64_t alias = ino | fsd_tx_tag(c->tx) << FSD_ALIAS_SHIFT;
	if (S_ISDIR(mode) && !dir_listed(d->txs, alias)) /* C9: a directory is shared */
		return ino;
	return alias;
}

fs_caller fsd_cache_view(const fs_caller *c, uint64_t tag)
{
	fs_caller v = *c;
	if (!c->tx || tag != fsd_tx_tag(c->tx))
		v.tx = NULL;
	return v;
}

void fsd_drop_cache(fsd *d, uint64_t ino)
{
	if (d->txs)
		inval(d->txs, ino, NULL, 0);
}

/* ---- the reaper ---- */

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* A new binding must reach the reaper's poll set: by its next round, at
 * most POLL_OPEN_MS away while transactions are open, or at once if it
 * sleeps longer; ended bindings are dropped in that round too, or at once
 * when more than PILEUP are (table_keep).  (Each wake costs the begin a
 * thread switch.) */
static int need_wake(struct fsd_txs *x)
{
	/* Dekker with the reaper, all four accesses seq_cst: this begin's
	 * count (fs_tx_begin), then the flag; the reaper's flag, then the
	 * count (fs_tx_count_sc).  One of the two sees the other. */
	return __atomic_load_n(&x->long_poll, __ATOMIC_SEQ_CST);
}

static void wake(struct fsd_txs *x)
{
	uint64_t one = 1;
	if (write(x->evfd, &one, sizeof one) < 0) {
		/* a full counter wakes the reaper anyway */
	}
}

/* Asleep in the kernel, uninterruptibly, but not waiting for a FUSE
 * answer: most likely behind a lock a waiting request holds (X5). */
static int blocked_in_kernel(pid_t pid, void *ctx)
{
	char path[64], buf[512];
	(void)ctx;
	if (fsd_io_sleeps_in_kernel(pid) != 1)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/wchan", (int)pid);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = 0;
	return strstr(buf, "request_wait_answer") == NULL && strstr(buf, "fuse_wait") == NULL;
}

static void *reaper(void *arg)
{
	struct fsd_txs *x = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	uint64_t last_sweep = 0;
	struct pollfd *p = NULL;
	uint64_t *ids = NULL;
	int cap = 0;
	for (;;) {
		int n = 0;
		pthread_mutex_lock(&x->mu);
		if (x->stop) {
			pthread_mutex_unlock(&x->mu);
			free(p);
			free(ids);
			return NULL;
		}
		/* forget the bindings of transactions that ended (C15: no table
		 * look-up each, a round stays linear in the bindings) */
		for (int i = 0; i < x->nb;) {
			if (x->b[i].tx && fs_tx_state(x->b[i].tx) == FS_TX_ENDED) {
				close(x->b[i].fd);
				fs_tx_put(x->b[i].tx);
				x->b[i] = x->b[--x->nb];
				continue;
			}
			i++;
		}
		if (x->nb + 1 > cap) {
			int want = x->nb + 1 + 64;
			struct pollfd *np = realloc(p, (size_t)want * sizeof *p);
			if (np)
				p = np;
			uint64_t *ni = np ? realloc(ids, (size_t)want * sizeof *ids) : NULL;
			if (ni)
				ids = ni;
			if (np && ni)
				cap = want;
		}
		for (int i = 0; i < x->nb && n + 1 < cap; i++) {
			if (!x->b[i].tx)
				continue; /* its begin is running */
			p[n] = (struct pollfd){.fd = x->b[i].fd, .events = POLLIN};
			ids[n++] = x->b[i].txid;
		}
		pthread_mutex_unlock(&x->mu);
		if (!cap) { /* no memory for even the eventfd: try again later */
			usleep(POLL_OPEN_MS * 1000);
			continue;
		}
		p[n] = (struct pollfd){.fd = x->evfd, .events = POLLIN};
		/* flag first, then the count: a begin counts first, then reads
		 * the flag (need_wake), so one of the two sees the other */
		__atomic_store_n(&x->long_poll, 1, __ATOMIC_SEQ_CST);
		int open_now = fs_tx_count_sc(x->d->fs) > 0;
		if (open_now)
			__atomic_store_n(&x->long_poll, 0, __ATOMIC_SEQ_CST);
		if (open_now) {
			int k = fs_tx_watch(x->d->fs, blocked_in_kernel, NULL);
			if (k)
				fsd_log(LOG_INFO, "%d lock wait(s) cancelled: a deadlock through the kernel's file locks", k);
		}
		if (poll(p, (nfds_t)n + 1, open_now ? POLL_OPEN_MS : 1000) < 0)
			continue;
		if (p[n].revents) {
			uint64_t v;
			if (read(x->evfd, &v, sizeof v) < 0) {
				/* nothing to read: woken anyway */
			}
		}
		for (int i = 0; i < n; i++) {
			if (!p[i].revents)
				continue;
			fs_tx *tx = fs_tx_by_id(x->d->fs, ids[i]);
			if (!tx)
				continue;
			char why[160];
			snprintf(why, sizeof why, "its process %d exited before txcommit", (int)fs_tx_pid(tx));
			fsd_log(LOG_INFO, "transaction %" PRIu64 " aborted: %s", ids[i], why);
			pthread_mutex_lock(&x->mu); /* C13: before the abort, so no orphan runs as a plain caller */
			for (int k = 0; k < x->nb; k++)
				if (x->b[k].txid == ids[i])
					group_rule_add(x, &x->b[k]);
			pthread_mutex_unlock(&x->mu);
			seen_sweep(x, ids[i]);
			fs_tx_abort(tx, ECONNABORTED, why, 1);
			tag_ended(x, tx, 0);
			fs_tx_put(tx);
		}
		pthread_mutex_lock(&x->mu);
		int sweep = x->nseen || x->nrules;
		pthread_mutex_unlock(&x->mu);
		if (sweep && mono_ns() - last_sweep > 1000000000ull) {
			seen_sweep(x, 0);
			last_sweep = mono_ns();
		}
	}
}

/* C14: as many open transactions as the daemon may open pidfds, keeping
 * TABLE_FDS descriptors for the rest, at most TABLE_MAX (the soft limit
 * of open files is raised to the hard one first). */
static int table_max(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 64;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t cur = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			rl.rlim_cur = cur;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)TABLE_MAX + TABLE_FDS)
		return TABLE_MAX;
	return rl.rlim_cur > (rlim_t)TABLE_FDS + 64 ? (int)(rl.rlim_cur - TABLE_FDS) : 64;
}

int fsd_tx_start(fsd *d, struct fuse_session *se)
{
	struct fsd_txs *x = calloc(1, sizeof *x);
	int rc;
	if (!x)
		return ENOMEM;
	x->d = d;
	x->se = se;
	x->table_max = table_max();
	x->epfd = epoll_create1(EPOLL_CLOEXEC); /* -1: group_rules_now looks at every binding */
	pthread_mutex_init(&x->mu, NULL);
	pthread_mutex_init(&x->rmu, NULL);
	pthread_mutex_init(&x->dmu, NULL);
	x->ring = malloc(NAME_RING * sizeof *x->ring); /* NULL: begins wait instead (C6) */
	if ((x->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rc = errno;
		if (x->epfd >= 0)
			close(x->epfd);
		free(x->ring);
		free(x);
		return rc;
	}
	if ((rc = pthread_create(&x->reaper, NULL, reaper, x)) != 0) {
		close(x->evfd);
		if (x->epfd >= 0)
			close(x->epfd);
		free(x->ring);
		free(x);
		return rc;
	}
	x->running = 1;
	d->txs = x;
	fs_set_observer(d->fs, &(fs_observer){.changed = notify, .content = grow, .blocked = observer_blocked, .ctx = x});
	return 0;
}

void fsd_tx_stop(fsd *d)
{
	struct fsd_txs *x = d->txs;
	if (!x)
		return;
	pthread_mutex_lock(&x->mu);
	x->stop = 1; /* no more invalidations: the session is gone */
	pthread_mutex_unlock(&x->mu);
	fs_tx_abort_all(d->fs, "the file system was unmounted");
	wake(x);
	if (x->running)
		pthread_join(x->reaper, NULL);
	fs_set_observer(d->fs, NULL);
	for (int i = 0; i < x->nb; i++) {
		close(x->b[i].fd);
		fs_tx_put(x->b[i].tx);
	}
	free(x->b);
	close(x->evfd);
	if (x->epfd >= 0)
		close(x->epfd);
	/* expire threads stuck in the kernel end with the session */
	for (int i = 0; i < 200 && __atomic_load_n(&x->nexpire, __ATOMIC_ACQUIRE); i++)
		usleep(5000);
	if (__atomic_load_n(&x->nexpire, __ATOMIC_ACQUIRE))
		return; /* leaked rather than freed under a running thread */
	pthread_mutex_destroy(&x->mu);
	pthread_mutex_destroy(&x->rmu);
	pthread_mutex_destroy(&x->dmu);
	d->txs = NULL;
	free(x->dirs);
	free(x->ring);
	free(x);
}

/* ---- the control channel (tpfs_tx_proto.h) ---- */

#define ANSWER_MAX (256 * 1024)
#define STATUS_WHOLE_MAX (65536 - 16) /* C19: a whole report fits in an xattr (XATTR_SIZE_MAX) */

static void answer(fuse_req_t req, fsd *d, size_t size, int err, const char *text)
{
	char *buf = malloc(ANSWER_MAX);
	if (!buf) {
		fsd_reply_err(req, d, -ENOMEM);
		return;
	}
	int n = snprintf(buf, ANSWER_MAX, "%d %s", err, text);
	size_t len = n < 0 ? 0 : (size_t)n < ANSWER_MAX ? (size_t)n : ANSWER_MAX - 1;
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fsd_reply_err(req, d, -ERANGE);
	else
		fuse_reply_buf(req, buf, len);
	free(buf);
}

/* ---- names the kernel may keep (C6) ---- */

void fsd_name_cached(fsd *d, uint64_t parent, const char *name)
{
	struct fsd_txs *x = d->txs;
	size_t len = strlen(name);
	struct timespec ts;
	if (!x || !x->ring || len > FS_NAME_MAX)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&x->rmu);
	cached_name *e = &x->ring[x->nring++ % NAME_RING];
	e->parent = parent;
	e->ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	e->len = (uint8_t)len;
	memcpy(e->name, name, len);
	e->name[len] = 0;
	pthread_mutex_unlock(&x->rmu);
}

typedef struct expire_job {
	struct fsd_txs *x;
	cached_name *v;
	size_t n;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, finished, refs; /* done: finished, every name expired */
} expire_job;

static void expire_put(expire_job *j)
{
	pthread_mutex_lock(&j->mu);
	int last = --j->refs == 0;
	pthread_mutex_unlock(&j->mu);
	if (last) {
		pthread_mutex_destroy(&j->mu);
		pthread_cond_destroy(&j->cv);
		free(j->v);
		free(j);
	}
}

static void *expire_thread(void *arg)
{
	expire_job *j = arg;
	int ok = 1;
	for (size_t i = 0; ok && i < j->n; i++) {
		/* C6: expired, not dropped -- a dentry in use (a working
		 * directory) stays, and its next lookup asks */
		if (!j->x->se || j->x->stop || fsd_io_expire_entry(j->v[i].parent, j->v[i].name, j->v[i].len) == ENOSYS)
			ok = 0;
		else
			fs_count(j->x->d->fs, FSD_OP_BEGIN_DROPPED);
	}
	struct fsd_txs *x = j->x;
	pthread_mutex_lock(&j->mu);
	j->done = ok;
	j->finished = 1;
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
	expire_put(j);
	__atomic_sub_fetch(&x->nexpire, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Invalidates the names in v[0..n) within a bounded time: 1 if done. */
static int expire_names(struct fsd_txs *x, cached_name *v, size_t n)
{
	expire_job *j = calloc(1, sizeof *j);
	pthread_t t;
	if (!j) {
		free(v);
		return 0;
	}
	*j = (expire_job){.x = x, .v = v, .n = n, .refs = 2};
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->cv, NULL);
	__atomic_add_fetch(&x->nexpire, 1, __ATOMIC_ACQ_REL);
	if (pthread_create(&t, NULL, expire_thread, j) != 0) {
		__atomic_sub_fetch(&x->nexpire, 1, __ATOMIC_RELEASE);
		j->refs = 1;
		expire_put(j);
		return 0;
	}
	pthread_detach(t);
	/* an invalidation waits for the kernel's lock of the directory, which
	 * a request blocked in the daemon may hold */
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_nsec += 100000000l;
	if (dl.tv_nsec >= 1000000000l)
		dl.tv_sec++, dl.tv_nsec -= 1000000000l;
	pthread_mutex_lock(&j->mu);
	while (!j->finished && pthread_cond_timedwait(&j->cv, &j->mu, &dl) == 0)
		;
	int done = j->done;
	pthread_mutex_unlock(&j->mu);
	expire_put(j);
	return done;
}

/* C6: names the kernel was allowed to keep must not resolve to shared
 * inodes for a member: the names replied since the longest timeout still
 * running began are invalidated, or, when the ring lost some of them (or
 * the invalidations take too long), the begin waits until they expired. */
static void expire_cached_names(fsd *d)
{
	struct fsd_txs *x = d->txs;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* (plus the kernel's rounding up to jiffies and the reply's trip) */
	uint64_t until = __atomic_load_n(&d->cached_until, __ATOMIC_RELAXED) + 50000000ull;
	if (until <= now)
		return;
	uint64_t from = now - (uint64_t)(d->entry_timeout * 1e9) - 100000000ull; /* replies since then may live */
	int whole = 0;
	if (x->ring) {
		/* the names put since the last begin that invalidated them all
		 * (a program that looked its files up before its first
		 * transaction must not pay for them at every begin) */
		pthread_mutex_lock(&x->rmu);
		uint64_t lost = x->nring > NAME_RING ? x->nring - NAME_RING : 0, end = x->nring;
		uint64_t first = x->ring_done > lost ? x->ring_done : lost;
		whole = first == x->ring_done || x->ring[first % NAME_RING].ns < from;
		if (whole && first == end) {
			pthread_mutex_unlock(&x->rmu);
			return;
		}
		size_t n = 0;
		cached_name *v = whole ? malloc((size_t)(end - first) * sizeof *v + 1) : NULL;
		for (uint64_t i = first; v && i < end; i++)
			if (x->ring[i % NAME_RING].ns >= from)
				v[n++] = x->ring[i % NAME_RING];
		pthread_mutex_unlock(&x->rmu);
		whole = v && expire_names(x, v, n);
		if (whole) { /* (a reply put just before may reach the kernel after: again next time) */
			pthread_mutex_lock(&x->rmu);
			uint64_t done = end;
			while (done > first && done > x->ring_done && done + NAME_RING > x->nring &&
			       x->ring[(done - 1) % NAME_RING].ns + RING_RECENT_NS >= now)
				done--;
			if (done > x->ring_done)
				x->ring_done = done;
			pthread_mutex_unlock(&x->rmu);
			return;
		}
	}
	uint64_t w = until - now;
	struct timespec dt = {.tv_sec = (time_t)(w / 1000000000ull), .tv_nsec = (long)(w % 1000000000ull)};
	while (nanosleep(&dt, &dt) != 0 && errno == EINTR)
		;
}

/* C15: keeps a place in the table for a begin of a transaction of uid
 * owner asked by uid asker, bound to pidfd fd; 0, or an errno and msg. */
static int table_keep(fsd *d, int fd, uid_t asker, uid_t owner, int *pileup, char *msg, size_t msgsize)
{
	struct fsd_txs *x = d->txs;
	int all = 0, users = 0, mine = 0, rc = 0;
	int share = x->table_max - x->table_max / 8;
	pthread_mutex_lock(&x->mu);
	for (int i = 0; i < x->nb; i++) {
		const bound *b = &x->b[i];
		if (b->tx && fs_tx_state(b->tx) == FS_TX_ENDED)
			continue; /* ended: its binding goes in the reaper's next round */
		all++;
		users += b->uid != 0;
		mine += b->uid == owner;
	}
	if (all >= x->table_max) {
		snprintf(msg, msgsize, "too many open transactions on this mount (%d, the most it can hold)", all);
		rc = EAGAIN;
	} else if (asker != 0 && mine >= (int)d->max_user_tx) {
		snprintf(msg, msgsize,
			 "uid %u has %d open transactions on this mount, the most a user may have (tpfsd -o "
			 "max_user_tx=%u): end one first (txstatus --all lists them)",
			 (unsigned)owner, mine, d->max_user_tx);
		rc = EAGAIN;
	} else if (asker != 0 && users >= share) {
		snprintf(msg, msgsize,
			 "the users' transactions fill their share of this mount's table (%d open; the rest is kept "
			 "for root)",
			 users);
		rc = EAGAIN;
	} else if (x->nb == x->cap) {
		int want = x->cap ? 2 * x->cap : 64;
		bound *nb = realloc(x->b, (size_t)want * sizeof *nb);
		if (nb) {
			x->b = nb;
			x->cap = want;
		} else {
			snprintf(msg, msgsize, "cannot begin a transaction: %s", strerror(ENOMEM));
			rc = ENOMEM;
		}
	}
	if (rc == 0)
		x->b[x->nb++] = (bound){.fd = fd, .uid = owner};
	*pileup = x->nb - all > PILEUP; /* ended bindings hold pidfds until the reaper's round */
	pthread_mutex_unlock(&x->mu);
	return rc;
}

/* C15: the place kept for pidfd fd gets its transaction (which keeps the
 * caller's reference), or is given up (tx NULL). */
static void table_fill(struct fsd_txs *x, int fd, fs_tx *tx, const proc *p)
{
	pthread_mutex_lock(&x->mu);
	for (int i = 0; i < x->nb; i++) {
		bound *b = &x->b[i];
		if (b->fd != fd || b->tx)
			continue;
		if (tx) {
			struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
			if (x->epfd >= 0 && epoll_ctl(x->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
				close(x->epfd); /* C16: look at every binding from now on */
				x->epfd = -1;
			}
			b->tx = tx;
			b->txid = fs_tx_id(tx);
			b->pgid = p->pgid;
			b->sid = p->sid;
			b->leader = p->sid == p->pid;
			b->since = boot_ticks();
		} else {
			x->b[i] = x->b[--x->nb];
		}
		break;
	}
	pthread_mutex_unlock(&x->mu);
}

static void ctl_begin(fuse_req_t req, fsd *d, size_t size, const char *arg)
{
	const struct fuse_ctx *cx = fuse_req_ctx(req);
	struct fsd_txs *x = d->txs;
	proc chain[MAX_DEPTH], tchain[MAX_DEPTH];
	int n, tn, at;
	char msg[512];
	char *end;
	long target = strtol(arg, &end, 10);
	if (!*arg || *end || target <= 0) {
		answer(req, d, size, EINVAL, "begin: no process id given");
		return;
	}
	if (d->readonly) {
		answer(req, d, size, EROFS, "the file system is mounted read-only");
		return;
	}
	if (chain_of(d, cx->pid, chain, &n) != 0) {
		answer(req, d, size, ESRCH, "cannot identify the calling process");
		return;
	}
	int i;
	for (i = 0; i < n && chain[i].pid != (pid_t)target; i++)
		;
	if (i == n) {
		snprintf(msg, sizeof msg, "process %ld is neither the caller (%d) nor one of its ancestors", target,
			 (int)chain[0].pid);
		answer(req, d, size, EPERM, msg);
		return;
	}
	long tuid = (long)cx->uid, tgid = (long)cx->gid; /* a process binding itself: the request's user and group */
	if (i > 0 && (proc_status_num((pid_t)target, "Uid", &tuid) != 0 ||
		      proc_status_num((pid_t)target, "Gid", &tgid) != 0)) {
		snprintf(msg, sizeof msg, "process %ld has exited", target);
		answer(req, d, size, ESRCH, msg);
		return;
	}
	if (cx->uid != 0 && (uid_t)tuid != cx->uid) {
		snprintf(msg, sizeof msg, "process %ld (%s) belongs to uid %ld, not to you (uid %u)", target,
			 chain[i].comm, tuid, (unsigned)cx->uid);
		answer(req, d, size, EPERM, msg);
		return;
	}
	/* the target, or an ancestor of it, must not be bound already */
	tn = n - i;
	if (i < 0 || tn <= 0 || n > MAX_DEPTH) { /* (never: i < n <= MAX_DEPTH; for the compiler) */
		answer(req, d, size, ESRCH, "cannot identify the calling process");
		return;
	}
	memcpy(tchain, chain + i, (size_t)tn * sizeof *tchain);
	fs_tx *tx = chain_tx(d, tchain, tn, &at);
	if (tx) {
		if (at == 0)
			snprintf(msg, sizeof msg, "process %ld (%s) is already in transaction %" PRIu64, target,
				 tchain[0].comm, fs_tx_id(tx));
		else
			snprintf(msg, sizeof msg,
				 "process %ld (%s) is already in transaction %" PRIu64 " of its ancestor %d (%s)", target,
				 tchain[0].comm, fs_tx_id(tx), (int)tchain[at].pid, tchain[at].comm);
		fs_tx_put(tx);
		answer(req, d, size, EBUSY, msg);
		return;
	}
	int fd = pidfd_open_((pid_t)target);
	if (fd < 0) {
		snprintf(msg, sizeof msg, "process %ld: %s", target, strerror(errno));
		answer(req, d, size, errno == ESRCH ? ESRCH : EIO, msg);
		return;
	}
	int pileup;
	int rc = table_keep(d, fd, cx->uid, (uid_t)tuid, &pileup, msg, sizeof msg); /* C15 */
	if (rc) {
		close(fd);
		answer(req, d, size, rc, msg);
		return;
	}
	int aliased;
	uint64_t tag = tag_take(x, (pid_t)target, tchain[0].start, &aliased);
	rc = fs_tx_begin(d->fs, (pid_t)target, tchain[0].start, tchain[0].ppid, (uid_t)tuid, tchain[0].comm, tag,
			 aliased, &tx);
	if (rc) {
		table_fill(x, fd, NULL, NULL);
		close(fd);
		snprintf(msg, sizeof msg, "cannot begin a transaction: %s", strerror(-rc));
		answer(req, d, size, -rc, msg);
		return;
	}
	fs_tx_set_gid(tx, (gid_t)tgid); /* C10 */
	expire_cached_names(d); /* C6 */
	table_fill(x, fd, tx, tchain);
	if (pileup || need_wake(x))
		wake(x);
	fs_tx_member(tx, (pid_t)target);
	snprintf(msg, sizeof msg, "%" PRIu64, fs_tx_id(tx));
	answer(req, d, size, 0, msg); /* (the binding keeps the reference) */
}

/* The caller's transaction, or an ESRCH answer. */
static fs_tx *callers_tx(fuse_req_t req, fsd *d, size_t size)
{
	const struct fuse_ctx *cx = fuse_req_ctx(req);
	proc chain[MAX_DEPTH];
	pid_t pids[MAX_DEPTH];
	int n = 0;
	fs_tx *tx = NULL;
	if (chain_of(d, cx->pid, chain, &n) == 0)
		tx = chain_tx(d, chain, n, NULL);
	else
		n = 0;
	if (!tx) {
		char msg[600], hist[300];
		for (int k = 0; k < n; k++)
			pids[k] = chain[k].pid;
		int kind = fs_tx_history(d->fs, cx->uid, pids, n, hist, sizeof hist);
		snprintf(msg, sizeof msg, "process %d is in no transaction on this mount%s%s", n ? (int)chain[0].pid : 0,
			 kind == 1   ? "; its last one: "
			 : kind == 2 ? "; the last one of a process of yours that has exited: "
				     : "",
			 hist);
		answer(req, d, size, ESRCH, msg);
	}
	return tx;
}

/* ---- other members at commit (C11) ---- */

#define MAX_OTHERS 64 /* other members cut off by a forced commit, at most */
#define SHOW_OTHERS 8 /* named in an answer */
#define MAX_WALK 4096 /* descendants looked at, at most */

static int in_chain(const proc *chain, int n, pid_t pid, uint64_t start)
{
	for (int i = 0; i < n; i++)
		if (chain[i].pid == pid && chain[i].start == start)
			return 1;
	return 0;
}

/* Adds the children of pid (every thread's) to q[*nq..max). */
static void children_of(pid_t pid, pid_t *q, int *nq, int max)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	struct dirent *de;
	while (dir && (de = readdir(dir)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%.20s/children", (int)pid, de->d_name);
		FILE *fp = fopen(path, "re");
		long c;
		while (fp && *nq < max && fscanf(fp, "%ld", &c) == 1)
			q[(*nq)++] = (pid_t)c;
		if (fp)
			fclose(fp);
	}
	if (dir)
		closedir(dir);
}

/* Whether process p acts as tx's owner (C10: its fsuid and fsgid; any
 * when the owner is root). */
static int acts_as(const proc *p, const fs_tx *tx)
{
	char path[64], line[256];
	uid_t uid = fs_tx_uid(tx);
	gid_t gid = fs_tx_gid(tx);
	int ok = uid == 0, uid_ok = 0, gid_ok = gid == (gid_t)-1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)p->pid);
	FILE *fp = ok ? NULL : fopen(path, "re");
	unsigned long r, e, sv, f;
	while (fp && fgets(line, sizeof line, fp))
		if (sscanf(line, "Uid: %lu %lu %lu %lu", &r, &e, &sv, &f) == 4)
			uid_ok = f == uid;
		else if (sscanf(line, "Gid: %lu %lu %lu %lu", &r, &e, &sv, &f) == 4)
			gid_ok = gid_ok || f == gid;
	if (fp)
		fclose(fp);
	return ok || (uid_ok && gid_ok);
}

static void other_add(proc *out, int *nout, const proc *p)
{
	for (int k = 0; k < *nout; k++)
		if (out[k].pid == p->pid && out[k].start == p->start)
			return;
	if (*nout < MAX_OTHERS)
		out[(*nout)++] = *p;
}

/* C11: the members of tx alive besides the committer's chain[0..at] (the
 * bound process is chain[at]): into out, at most MAX_OTHERS; their number
 * (capped: more than MAX_OTHERS are counted as MAX_OTHERS + 1). */
static int other_members(fsd *d, fs_tx *tx, const proc *chain, int at, proc *out)
{
	struct fsd_txs *x = d->txs;
	int nout = 0, more = 0, nq = 0;
	pid_t *q = malloc(MAX_WALK * sizeof *q);
	if (q)
		children_of(chain[at].pid, q, &nq, MAX_WALK);
	for (int i = 0; q && i < nq; i++) {
		proc p;
		if (proc_read(q[i], &p) != 0 || p.state == 'Z' || p.state == 'X')
			continue;
		children_of(p.pid, q, &nq, MAX_WALK); /* (a member's children are members) */
		if (in_chain(chain, at + 1, p.pid, p.start) || !acts_as(&p, tx))
			continue;
		if (nout == MAX_OTHERS)
			more = 1;
		other_add(out, &nout, &p);
	}
	free(q);
	/* members seen before that left the bound process's tree (C13) */
	seen_ent seen[MAX_OTHERS * 4];
	int ns = 0;
	pthread_mutex_lock(&x->mu);
	for (int j = 0; j < x->nseen && ns < (int)(sizeof seen / sizeof *seen); j++)
		if (x->seen[j].txid == fs_tx_id(tx) && !x->seen[j].doomed)
			seen[ns++] = x->seen[j];
	pthread_mutex_unlock(&x->mu);
	for (int j = 0; j < ns; j++) {
		proc p;
		if (in_chain(chain, at + 1, seen[j].pid, seen[j].start) || proc_read(seen[j].pid, &p) != 0 ||
		    p.start != seen[j].start || p.state == 'Z' || p.state == 'X' || !acts_as(&p, tx))
			continue;
		if (nout == MAX_OTHERS)
			more = 1;
		other_add(out, &nout, &p);
	}
	return nout + more;
}

/* "1234 (writer), 1240 (sleep)" */
static void name_procs(char *buf, size_t size, const proc *v, int n, int more)
{
	size_t len = 0;
	buf[0] = 0;
	for (int k = 0; k < n && k < SHOW_OTHERS && len < size; k++) {
		int w = snprintf(buf + len, size - len, "%s%d (%s)", k ? ", " : "", (int)v[k].pid, v[k].comm);
		len += w > 0 ? (size_t)w : 0;
	}
	if ((more || n > SHOW_OTHERS) && len < size)
		snprintf(buf + len, size - len, "%s", more ? " and still more" : " and more");
}

/* C11: p is cut off from its transaction: its calls (how: 1, all; C12's
 * CUT_CHANGES, its changes), and those of what it starts, fail with
 * ECANCELED until it exits. */
static void cut_off_add(struct fsd_txs *x, const proc *p, uint64_t txid, int how)
{
	pthread_mutex_lock(&x->mu);
	int j;
	for (j = 0; j < x->nseen && (x->seen[j].pid != p->pid || x->seen[j].start != p->start); j++)
		;
	if (j == x->nseen && x->nseen < MAX_SEEN)
		x->seen[x->nseen++] = (seen_ent){.pid = p->pid, .start = p->start, .txid = txid};
	if (j < x->nseen && !x->seen[j].doomed)
		doomed_add(x, 1);
	if (j < x->nseen && x->seen[j].doomed != 1)
		x->seen[j].doomed = how;
	pthread_mutex_unlock(&x->mu);
}

static void ctl_commit(fuse_req_t req, fsd *d, size_t size, const char *arg)
{
	const struct fuse_ctx *cx = fuse_req_ctx(req);
	char msg[600], names[400];
	proc chain[MAX_DEPTH], others[MAX_OTHERS];
	int n = 0, at = 0, force = !strcmp(arg, ".force");
	if (*arg && !force) {
		answer(req, d, size, EINVAL, "unknown commit request (tpfs.tx.commit or tpfs.tx.commit.force)");
		return;
	}
	fs_tx *tx = callers_tx(req, d, size);
	if (!tx)
		return;
	int nothers = 0;
	fs_tx *at_tx = chain_of(d, cx->pid, chain, &n) == 0 ? chain_tx(d, chain, n, &at) : NULL;
	if (at_tx == tx)
		nothers = other_members(d, tx, chain, at, others);
	fs_tx_put(at_tx);
	int shown = nothers < MAX_OTHERS ? nothers : MAX_OTHERS;
	if (nothers)
		name_procs(names, sizeof names, others, shown, nothers > MAX_OTHERS);
	if (nothers && !force) {
		snprintf(msg, sizeof msg,
			 "transaction %" PRIu64 " not committed, still open: other members still run: %s "
			 "(txcommit --wait waits for them; --force commits without them, and their later calls "
			 "fail with ECANCELED)",
			 fs_tx_id(tx), names);
		fs_tx_put(tx);
		answer(req, d, size, EBUSY, msg);
		return;
	}
	for (int k = 0; k < shown; k++) /* C11: before the commit makes a new generation */
		cut_off_add(d->txs, &others[k], fs_tx_id(tx), 1);
	int rc = fs_tx_commit(tx, msg, sizeof msg);
	if (nothers) {
		size_t len = strlen(msg);
		snprintf(msg + len, sizeof msg - len, "; cut off, their later calls fail with ECANCELED: %s", names);
		fsd_log(LOG_INFO, "transaction %" PRIu64 " committed by force: other members cut off: %s", fs_tx_id(tx),
			names);
	}
	tag_ended(d->txs, tx, rc == 0);
	fs_tx_put(tx);
	answer(req, d, size, -rc, msg); /* the reaper drops the binding in its next round */
}

static void ctl_abort(fuse_req_t req, fsd *d, size_t size, const char *arg)
{
	const struct fuse_ctx *cx = fuse_req_ctx(req);
	char msg[900];
	fs_tx *tx;
	int by_id = *arg != 0;
	if (by_id) {
		char *end;
		unsigned long long id = strtoull(arg + 1, &end, 10);
		if (*arg != '.' || *end || !id || !(tx = fs_tx_by_id(d->fs, id))) {
			snprintf(msg, sizeof msg, "no open transaction %s", arg + (*arg == '.'));
			answer(req, d, size, ESRCH, msg);
			return;
		}
		if (cx->uid != 0 && fs_tx_uid(tx) != cx->uid) {
			snprintf(msg, sizeof msg, "transaction %llu belongs to uid %u, not to you (uid %u)", id,
				 (unsigned)fs_tx_uid(tx), (unsigned)cx->uid);
			fs_tx_put(tx);
			answer(req, d, size, EPERM, msg);
			return;
		}
	} else if (!(tx = callers_tx(req, d, size))) {
		return;
	}
	/* the owner's own abort ends it; someone else's leaves it doomed, bound,
	 * so that the owner's txcommit says what happened */
	int own = !by_id;
	if (by_id) {
		proc chain[MAX_DEPTH];
		int n;
		fs_tx *mine = chain_of(d, cx->pid, chain, &n) == 0 ? chain_tx(d, chain, n, NULL) : NULL;
		own = mine == tx;
		fs_tx_put(mine);
	}
	char why[160];
	if (by_id) {
		snprintf(why, sizeof why, "transaction %" PRIu64 " was aborted by uid %u (txabort --id)", fs_tx_id(tx),
			 (unsigned)cx->uid);
	} else { /* its own member asked: txabort, or txrun after its command failed */
		proc me[MAX_DEPTH];
		int nme = 0;
		if (chain_of(d, cx->pid, me, &nme) != 0)
			nme = 0;
		if (nme)
			snprintf(why, sizeof why, "by its member process %d (%s)", (int)me[0].pid, me[0].comm);
		else
			snprintf(why, sizeof why, "by a member");
	}
	/* C12: the other members still running are cut off, as a forced
	 * commit's are, before the abort makes a new generation */
	proc chain[MAX_DEPTH], others[MAX_OTHERS];
	char names[400] = "";
	int nothers = 0, n = 0, at = 0;
	if (own) {
		fs_tx *at_tx = chain_of(d, cx->pid, chain, &n) == 0 ? chain_tx(d, chain, n, &at) : NULL;
		if (at_tx == tx)
			nothers = other_members(d, tx, chain, at, others);
		fs_tx_put(at_tx);
	}
	int shown = nothers < MAX_OTHERS ? nothers : MAX_OTHERS;
	if (nothers)
		name_procs(names, sizeof names, others, shown, nothers > MAX_OTHERS);
	for (int k = 0; k < shown; k++)
		cut_off_add(d->txs, &others[k], fs_tx_id(tx), CUT_CHANGES);
	int was = fs_tx_state(tx);
	fs_tx_abort(tx, ECONNABORTED, why, own);
	tag_ended(d->txs, tx, 0);
	snprintf(msg, sizeof msg, "transaction %" PRIu64 " aborted%s", fs_tx_id(tx),
		 was == FS_TX_DOOMED ? " (it had been doomed already)" : "");
	if (nothers) {
		size_t len = strlen(msg);
		snprintf(msg + len, sizeof msg - len, "; other members still ran, cut off: they read the committed "
						      "state, their later changes fail with ECANCELED: %s",
			 names);
		fsd_log(LOG_INFO, "transaction %" PRIu64 " aborted: other members cut off: %s", fs_tx_id(tx), names);
	}
	fs_tx_put(tx);
	answer(req, d, size, 0, msg);
}

/* arg: "", ".all", ".json", ".all.json" (C19: the whole report, if it
 * fits in an xattr; else EOVERFLOW, which reaches a client of version 1
 * where the kernel's E2BIG would not say why), or ".all[.json].page.BEFORE"
 * (C20: one page, "page NEXT\n" first: fs_tx_report_page). */
static void ctl_status(fuse_req_t req, fsd *d, size_t size, const char *arg)
{
	const struct fuse_ctx *cx = fuse_req_ctx(req);
	int all = !strncmp(arg, ".all", 4), json = strstr(arg, ".json") != NULL;
	const char *page = strstr(arg, ".page.");
	size_t max = STATUS_WHOLE_MAX;
	fs_tx *tx = NULL;
	char *buf;
	int rc;
	if (!all && !(tx = callers_tx(req, d, size)))
		return;
	if (!(buf = malloc(max))) {
		fs_tx_put(tx);
		fsd_reply_err(req, d, -ENOMEM);
		return;
	}
	if (page) { /* C20 */
		uint64_t next;
		int head = snprintf(buf, max, "page %-20" PRIu64 "\n", (uint64_t)0);
		rc = fs_tx_report_page(d->fs, cx->uid, json, strtoull(page + 6, NULL, 10), buf + head,
				       TPFS_TX_PAGE_MAX, &next);
		if (rc >= 0) {
			char nb[24];
			snprintf(nb, sizeof nb, "%-20" PRIu64, next); /* (the same width: the body stays put) */
			memcpy(buf + 5, nb, 20);
		}
	} else {
		rc = fs_tx_report(d->fs, tx, cx->uid, json, buf, max);
	}
	fs_tx_put(tx);
	if (rc < 0)
		answer(req, d, size, EOVERFLOW,
		       "too many transactions to list in one answer: this client predates listings in pages "
		       "(tpfs_tx_proto.h, version 2)");
	else
		answer(req, d, size, 0, buf);
	free(buf);
}

/* version: the protocol's (tpfs_tx_proto.h). */
static void ctl_version(fuse_req_t req, fsd *d, size_t size)
{
	char v[16];
	snprintf(v, sizeof v, "%d", TPFS_TX_PROTO_VERSION);
	answer(req, d, size, 0, v);
}

int fsd_is_tx_control(fuse_ino_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID && !strncmp(name, TPFS_TX_PREFIX, strlen(TPFS_TX_PREFIX));
}

/* The requests of the channel (tpfs_tx_proto.h): the verb of name, its
 * argument in *arg; VERB_NONE for a name the protocol does not have. */
enum verb { VERB_NONE, VERB_BEGIN, VERB_COMMIT, VERB_ABORT, VERB_STATUS, VERB_VERSION };

/* ".page.N", N decimal without a sign or leading zeros */
static int is_page(const char *s)
{
	if (strncmp(s, ".page.", 6) || !s[6] || (s[6] == '0' && s[7]) || strlen(s + 6) > 20)
		return 0;
	for (s += 6; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static enum verb verb_of(const char *name, const char **arg)
{
	static const char *const status_args[] = {"", ".all", ".json", ".all.json"};
	size_t nb = strlen(TPFS_TX_BEGIN) - 1, na = strlen(TPFS_TX_ABORT), ns = strlen(TPFS_TX_STATUS);
	if (!strncmp(name, TPFS_TX_BEGIN, nb) && (name[nb] == 0 || name[nb] == '.')) {
		*arg = name[nb] ? name + nb + 1 : name + nb; /* "tpfs.tx.begin": a begin without its pid */
		return VERB_BEGIN;
	}
	if (!strcmp(name, TPFS_TX_COMMIT) || !strcmp(name, TPFS_TX_COMMIT ".force")) {
		*arg = name + strlen(TPFS_TX_COMMIT); /* "" or ".force" (C11) */
		return VERB_COMMIT;
	}
	if (!strncmp(name, TPFS_TX_ABORT, na) && (name[na] == 0 || name[na] == '.')) {
		*arg = name + na;
		return VERB_ABORT;
	}
	if (!strcmp(name, TPFS_TX_VERSION)) {
		*arg = "";
		return VERB_VERSION;
	}
	if (!strncmp(name, TPFS_TX_STATUS, ns))
		for (size_t i = 0; i < sizeof status_args / sizeof *status_args; i++) {
			size_t la = strlen(status_args[i]);
			if (!strncmp(name + ns, status_args[i], la) &&
			    (!name[ns + la] || (i == 1 || i == 3 ? is_page(name + ns + la) : 0)) &&
			    !(i == 1 && !strncmp(name + ns + la, ".json", 5))) {
				*arg = name + ns;
				return VERB_STATUS;
			}
		}
	return VERB_NONE;
}

/* The control channel's request name (C17) and size (C18): see the top. */
void fsd_tx_control(fuse_req_t req, fsd *d, const char *name, size_t size)
{
	const char *arg;
	enum verb v = verb_of(name, &arg);
	if (v == VERB_NONE) { /* C17 */
		fsd_reply_err(req, d, -ENODATA);
		return;
	}
	if (v != VERB_STATUS && v != VERB_VERSION && size < TPFS_TX_ANSWER_MAX) { /* C18 */
		if (size == 0)
			fuse_reply_xattr(req, TPFS_TX_ANSWER_MAX);
		else
			fsd_reply_err(req, d, -ERANGE);
		return;
	}
	if (v == VERB_VERSION) {
		ctl_version(req, d, size);
		return;
	}
	if (!d->txs && d->readonly) {
		answer(req, d, size, EROFS, "the mount is read-only (-o ro): no transaction can change it");
		return;
	}
	if (!d->txs) {
		answer(req, d, size, ENOTSUP, "transactions are not available on this mount");
		return;
	}
	switch (v) {
	case VERB_BEGIN: ctl_begin(req, d, size, arg); break;
	case VERB_COMMIT: ctl_commit(req, d, size, arg); break;
	case VERB_ABORT: ctl_abort(req, d, size, arg); break;
	default: ctl_status(req, d, size, arg); break;
	}
}
