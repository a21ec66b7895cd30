/*
 * test_tx_random_crash -- random transactions of many shells, the daemon
 * killed at random moments, the tree compared with a SQLite oracle of
 * acknowledged commits after each crash (test_tx_clients.c has the actors,
 * the helpers and the tests' description; the oracle's design is below).
 */
#include "txclients.h"

/* ---------------------------------------------------------------------- */
/* Random transactions, crashes and a SQLite oracle                       */

/*
 * The tree.  w0..w{N-1}: each worker's own namespace (files f0..f4,
 * directories d0..d2, each with files f0..f2), which only that worker
 * changes, one transaction after the other: so its state is the replay
 * of its committed transactions.  g/a, g/b, g/c: the group, which every
 * transaction that writes it writes with the same token "T<id>"; p/0..p/3:
 * pair files.  These are shared, and written read-then-write: the
 * transaction reads the file's token (S lock), records it as "prev", then
 * writes its own (upgrade to X): concurrent writers deadlock and one is
 * the victim.  The committed writers of a file form one chain T0 -> T.. ->
 * T.. (each one's prev is the one before: serializability), whose tail
 * must be the file's content.
 *
 * A transaction: 1-8 operations among write, append, touch (create),
 * unlink, rename of a file (over another or not), rename of a directory,
 * mkdir, rm -r, truncate, the group, a pair file, txstatus; run as a
 * script bound by txbegin (then txcommit, or txabort), or under txrun
 * (CMD exit 0: commit, 3: abort), or txrun --retry 2; or killed: the
 * script writes "killme" and starts a slow write of w<N>/kill.tmp, and the
 * worker kills its process group (the bound shell or txrun, and the
 * writer) a random moment later.  Every line the script logs goes to a
 * status file outside the mount; the worker decides the fate:
 *   committed  txcommit (txrun) returned 0: recorded in the oracle with
 *              its operations and prevs, after it returned;
 *   aborted    txabort, or CMD exit 3 under txrun;
 *   killed     its bound process was killed;
 *   failed     txcommit refused it (a deadlock victim; no crash);
 *   crashed    open when the daemon died, commit not begun;
 *   maybe      its commit was under way when the daemon died: resolved at
 *              the recovery as applied or lost, all or nothing.
 *
 * Readers (non-members, forked by the test): read g/a, g/b, g/c, g/a again
 * and the pair files, in a loop, one by fresh opens, one through
 * descriptors kept open (warm caches).  When g/a read twice gives the same
 * token no group commit happened in between, so g/b and g/c must hold it
 * too; every content must be one whole token; no read may take 2 s.  The
 * tokens they saw go to the oracle, and each must be a committed (or
 * applied) transaction's.
 *
 * A crash point: the test sets the crash flag and the epoch, kills tpfsd;
 * workers finish their (failing) transactions and park; the store is
 * mounted again (recovery); the tree is compared with the oracle: each
 * worker's namespace with the replay of its committed transactions (plus
 * or minus its one maybe), each chain file with the tail of its chain;
 * the maybes are decided by trying every combination (all-or-nothing: one
 * must explain everything); then clean unmount, `tpfs check`, mount, and
 * the workers go on.
 */

#define RW_MAX 8
#define RR 2
#define NS_SLOTS 17
#define NS_DATA 160
#define NCHAIN 5
#define WAIT_SCRIPT_S 90.0
#define READ_LIMIT_S 2.0
#define SEQ_MAX 200000

static const char *const ns_name[NS_SLOTS] = {"f0",    "f1",    "f2",    "f3",    "f4",    "d0",
					      "d1",    "d2",    "d0/f0", "d0/f1", "d0/f2", "d1/f0",
					      "d1/f1", "d1/f2", "d2/f0", "d2/f1", "d2/f2"};
static const char *const chain_name[NCHAIN] = {"g", "p0", "p1", "p2", "p3"};
static const char *const chain_path[NCHAIN] = {"g/a", "p/0", "p/1", "p/2", "p/3"};

static int ns_isdir(int s) { return s >= 5 && s < 8; }
static int ns_parent(int s) { return s < 8 ? -1 : 5 + (s - 8) / 3; }
static int ns_child(int d, int j) { return 8 + (d - 5) * 3 + j; }

typedef struct ns {
	char type[NS_SLOTS]; /* 0, 'f' or 'd' */
	char data[NS_SLOTS][NS_DATA];
} ns;

typedef struct rop {
	char kind; /* W A C U R D M X T G P S (see op_shell) */
	int a, b, n;
} rop;

typedef struct rtx {
	uint64_t id;
	int w;
	unsigned seq;
	char mode; /* 'b' txbegin, 'r' txrun, 'R' txrun --retry 2 */
	char end;  /* 'c' commit, 'a' abort, 'k' killed */
	int nops, killat;
	rop ops[8];
} rtx;

typedef struct shm {
	int stop, crash;
	unsigned epoch;
	int parked[RW_MAX + RR];
	int failed;
	pid_t script[RW_MAX]; /* each worker's running script (a process group) */
	char msg[6000];
	/* readers' statistics, and what they saw that a non-member must not
	 * (counted; the first of each kind kept; the run goes on) */
	uint64_t reads[RR], agree[RR], disagree_ok[RR];
	double slowest[RR];
	uint64_t anomalies[6]; /* read error, not one whole token, group disagrees, a read waited,
				* a member read a non-token, an operation failed in a committed one */
	char anomaly[6][600];
} shm;

static const char *const anomaly_name[6] = {
	"read errors by non-members", "reads by non-members of a token file that was not one whole token",
	"group disagreements seen by non-members", "reads by non-members that waited",
	"chain reads by members that got no committed token (the chain is checked no further)",
	"transactions that committed although one of their operations failed (the oracle records what succeeded)"};

static shm *g_shm;
static int g_nw;
static char g_oracle[600];

static uint64_t tx_id(int w, unsigned seq) { return (uint64_t)(w + 1) * 1000000u + seq; }

/* A child's failure: the first message is kept; the test reports it. */
static void cfail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void cfail(const char *fmt, ...)
{
	va_list ap;
	if (__atomic_exchange_n(&g_shm->failed, 1, __ATOMIC_ACQ_REL) == 0) {
		va_start(ap, fmt);
		vsnprintf(g_shm->msg, sizeof g_shm->msg, fmt, ap);
		va_end(ap);
	}
	_exit(1);
}

static int ld(const int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

static void anomaly(int kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void anomaly(int kind, const char *fmt, ...)
{
	va_list ap;
	if (__atomic_fetch_add(&g_shm->anomalies[kind], 1, __ATOMIC_ACQ_REL) == 0) {
		va_start(ap, fmt);
		vsnprintf(g_shm->anomaly[kind], sizeof g_shm->anomaly[kind], fmt, ap);
		va_end(ap);
	}
}

/* ---- the model of a worker's namespace ---- */

static void op_data(uint64_t id, int k, char *buf, size_t size) { snprintf(buf, size, "T%" PRIu64 ".%d\n", id, k); }

static int parent_ok(const ns *m, int s) { return ns_parent(s) < 0 || m->type[ns_parent(s)] == 'd'; }

/* Applies op k of transaction id; -1 if it is not valid on m. */
static int ns_apply(ns *m, const rop *o, uint64_t id, int k)
{
	char d[40];
	op_data(id, k, d, sizeof d);
	switch (o->kind) {
	case 'W':
		if (ns_isdir(o->a) || !parent_ok(m, o->a))
			return -1;
		m->type[o->a] = 'f';
		snprintf(m->data[o->a], NS_DATA, "%s", d);
		return 0;
	case 'A':
		if (m->type[o->a] != 'f' || strlen(m->data[o->a]) + strlen(d) >= NS_DATA)
			return -1;
		strcat(m->data[o->a], d);
		return 0;
	case 'C':
		if (ns_isdir(o->a) || !parent_ok(m, o->a))
			return -1;
		if (!m->type[o->a]) {
			m->type[o->a] = 'f';
			m->data[o->a][0] = 0;
		}
		return 0;
	case 'U':
		if (m->type[o->a] != 'f')
			return -1;
		m->type[o->a] = 0;
		m->data[o->a][0] = 0;
		return 0;
	case 'R':
		if (m->type[o->a] != 'f' || ns_isdir(o->b) || o->a == o->b || !parent_ok(m, o->b))
			return -1;
		m->type[o->b] = 'f';
		memcpy(m->data[o->b], m->data[o->a], NS_DATA);
		m->type[o->a] = 0;
		m->data[o->a][0] = 0;
		return 0;
	case 'D':
		if (m->type[o->a] != 'd' || m->type[o->b] || !ns_isdir(o->b))
			return -1;
		m->type[o->b] = 'd';
		m->type[o->a] = 0;
		for (int j = 0; j < 3; j++) {
			int x = ns_child(o->a, j), y = ns_child(o->b, j);
			m->type[y] = m->type[x];
			memcpy(m->data[y], m->data[x], NS_DATA);
			m->type[x] = 0;
			m->data[x][0] = 0;
		}
		return 0;
	case 'M':
		if (!ns_isdir(o->a) || m->type[o->a])
			return -1;
		m->type[o->a] = 'd';
		return 0;
	case 'X':
		if (m->type[o->a] != 'd')
			return -1;
		m->type[o->a] = 0;
		for (int j = 0; j < 3; j++) {
			m->type[ns_child(o->a, j)] = 0;
			m->data[ns_child(o->a, j)][0] = 0;
		}
		return 0;
	case 'T': {
		size_t len = strlen(m->data[o->a]);
		if (m->type[o->a] != 'f' || (size_t)o->n >= len)
			return -1;
		m->data[o->a][o->n] = 0;
		return 0;
	}
	default: /* G, P, S: not in the namespace */
		return 0;
	}
}

/* A random operation valid on m (m is advanced). */
static rop gen_op(ns *m, uint64_t *rs, uint64_t id, int k, int *used_g, int *used_p)
{
	for (int tries = 0; tries < 50; tries++) {
		rop o = {0, 0, 0, 0};
		unsigned x = below(rs, 100);
		o.kind = x < 22 ? 'W' : x < 30 ? 'A' : x < 37 ? 'C' : x < 45 ? 'U' : x < 56 ? 'R' : x < 60 ? 'D' : x < 66 ? 'M'
			 : x < 69 ? 'X' : x < 75 ? 'T' : x < 85 ? 'G' : x < 97 ? 'P' : 'S';
		o.a = (int)below(rs, NS_SLOTS);
		o.b = (int)below(rs, NS_SLOTS);
		if (o.kind == 'M' || o.kind == 'X' || o.kind == 'D') {
			o.a = 5 + (int)below(rs, 3);
			o.b = 5 + (int)below(rs, 3);
		}
		if (o.kind == 'T')
			o.n = (int)below(rs, (unsigned)strlen(m->data[o.a]) + 1);
		if (o.kind == 'G') {
			if (*used_g)
				continue;
			*used_g = 1;
			return o;
		}
		if (o.kind == 'P') {
			o.a = (int)below(rs, 4);
			if (used_p[o.a])
				continue;
			used_p[o.a] = 1;
			return o;
		}
		if (o.kind == 'S')
			return o;
		ns t = *m;
		if (ns_apply(&t, &o, id, k) == 0) {
			*m = t;
			return o;
		}
	}
	rop o = {'W', (int)below(rs, 5), 0, 0}; /* f0..f4: always valid */
	ns_apply(m, &o, id, k);
	return o;
}

/* The shell command of op k (paths relative to the mount's root). */
static void op_shell(const rtx *t, int k, char *buf, size_t size)
{
	const rop *o = &t->ops[k];
	char a[40], b[40], d[40];
	snprintf(a, sizeof a, "w%d/%s", t->w, ns_name[o->a]);
	snprintf(b, sizeof b, "w%d/%s", t->w, ns_name[o->b]);
	op_data(t->id, k, d, sizeof d);
	d[strlen(d) - 1] = 0; /* printf adds the \n */
	switch (o->kind) {
	case 'W': snprintf(buf, size, "printf '%s\\n' > %s", d, a); break;
	case 'A': snprintf(buf, size, "printf '%s\\n' >> %s", d, a); break;
	case 'C': snprintf(buf, size, "touch %s", a); break;
	case 'U': snprintf(buf, size, "rm %s", a); break;
	case 'R': snprintf(buf, size, "mv -f %s %s", a, b); break;
	case 'D': snprintf(buf, size, "mv -T %s %s", a, b); break;
	case 'M': snprintf(buf, size, "mkdir %s", a); break;
	case 'X': snprintf(buf, size, "rm -r %s", a); break;
	case 'T': snprintf(buf, size, "truncate -s %d %s", o->n, a); break;
	case 'G':
		snprintf(buf, size,
			 "p=$(cat g/a) && echo \"prev g $p\" >> \"$S\" && printf 'T%" PRIu64 "\\n' > g/a && "
			 "printf 'T%" PRIu64 "\\n' > g/b && printf 'T%" PRIu64 "\\n' > g/c",
			 t->id, t->id, t->id);
		break;
	case 'P':
		snprintf(buf, size, "p=$(cat p/%d) && echo \"prev p%d $p\" >> \"$S\" && printf 'T%" PRIu64 "\\n' > p/%d",
			 o->a, o->a, t->id, o->a);
		break;
	default: snprintf(buf, size, "txstatus > /dev/null"); break;
	}
}

static void op_text(const rop *o, char *buf, size_t size)
{
	snprintf(buf, size, "%c %s %s %d", o->kind, o->kind == 'P' ? chain_name[1 + o->a] : ns_name[o->a], ns_name[o->b],
		 o->n);
}

/* ---- the oracle ---- */

static void db_exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	for (int i = 0; i < 600; i++) {
		int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
		if (rc == SQLITE_OK)
			return;
		if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
			break;
		sqlite3_free(err);
		err = NULL;
		msleep(50);
	}
	cfail("oracle: %s: %s", sql, err ? err : sqlite3_errmsg(db));
}

static sqlite3 *db_open(void)
{
	sqlite3 *db;
	if (sqlite3_open(g_oracle, &db) != SQLITE_OK)
		cfail("cannot open the oracle %s", g_oracle);
	sqlite3_busy_timeout(db, 30000);
	return db;
}

static sqlite3_stmt *db_prep(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		cfail("oracle: %s: %s", sql, sqlite3_errmsg(db));
	return st;
}

/* A worker's namespace: the replay of its committed (and applied)
 * transactions, in order; with_maybe: and its maybe (*maybe: its id). */
static void model_load(sqlite3 *db, int w, int with_maybe, ns *m, uint64_t *maybe)
{
	sqlite3_stmt *st = db_prep(db, "SELECT o.tx, o.k, o.kind, o.a, o.b, o.n, t.fate FROM op o JOIN tx t ON t.id = o.tx "
				       "WHERE t.worker = ?1 AND t.fate IN ('committed', 'applied', 'maybe') "
				       "ORDER BY t.seq, o.k");
	memset(m, 0, sizeof *m);
	if (maybe)
		*maybe = 0;
	sqlite3_bind_int(st, 1, w);
	while (sqlite3_step(st) == SQLITE_ROW) {
		uint64_t id = (uint64_t)sqlite3_column_int64(st, 0);
		const char *fate = (const char *)sqlite3_column_text(st, 6);
		rop o = {((const char *)sqlite3_column_text(st, 2))[0], sqlite3_column_int(st, 3), sqlite3_column_int(st, 4),
			 sqlite3_column_int(st, 5)};
		if (!strcmp(fate, "maybe")) {
			if (maybe)
				*maybe = id;
			if (!with_maybe)
				continue;
		}
		if (ns_apply(m, &o, id, sqlite3_column_int(st, 1)) != 0) {
			char t[80];
			op_text(&o, t, sizeof t);
			cfail("oracle replay of worker %d: operation %d (%s) of T%" PRIu64 " is not valid on the state its "
			      "predecessors left (a test bug)",
			      w, sqlite3_column_int(st, 1), t, id);
		}
	}
	sqlite3_finalize(st);
}

/* ---- a worker ---- */

typedef struct rstat {
	int begun, attempts, killme, committing, body_done;
	int commit_rc, abort_rc, txrun_rc; /* -1: no line */
	int oprc[8];
	int has_prev[NCHAIN]; /* 1: a token; -1: something else (in bad_prev) */
	uint64_t prev[NCHAIN];
	char bad_prev[NCHAIN][48];
} rstat;

#define PREV_BAD ((uint64_t)INT64_MAX) /* a writer that read no committed token */

static int chain_index(const char *name)
{
	for (int c = 0; c < NCHAIN; c++)
		if (!strcmp(name, chain_name[c]))
			return c;
	return -1;
}

/* The status file of a transaction's script: its last attempt. */
static void parse_status(const char *text, rstat *r)
{
	memset(r, 0, sizeof *r);
	r->commit_rc = r->abort_rc = r->txrun_rc = -1;
	for (int k = 0; k < 8; k++)
		r->oprc[k] = -1;
	char *t = strdup(text), *save = NULL;
	for (char *l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int k, rc;
		char name[16], tok[40];
		if (!strcmp(l, "begun"))
			r->begun = 1;
		else if (!strcmp(l, "attempt")) {
			r->attempts++;
			r->body_done = 0;
			for (k = 0; k < 8; k++)
				r->oprc[k] = -1;
			memset(r->has_prev, 0, sizeof r->has_prev);
		} else if (sscanf(l, "op %d %d", &k, &rc) == 2 && k >= 0 && k < 8)
			r->oprc[k] = rc;
		else if (sscanf(l, "prev %15s", name) == 1 && chain_index(name) >= 0) {
			int c = chain_index(name);
			char *v = l + 5 + strlen(name), *end;
			v += *v == ' ';
			snprintf(tok, sizeof tok, "%s", v);
			r->has_prev[c] = 1;
			r->prev[c] = tok[0] == 'T' ? strtoull(tok + 1, &end, 10) : 0;
			if (tok[0] != 'T' || *end || end == tok + 1) {
				r->has_prev[c] = -1;
				r->prev[c] = PREV_BAD;
				snprintf(r->bad_prev[c], sizeof r->bad_prev[c], "%s", tok);
			}
		} else if (!strcmp(l, "killme"))
			r->killme = 1;
		else if (!strcmp(l, "committing"))
			r->committing = 1;
		else if (!strcmp(l, "body-done"))
			r->body_done = 1;
		else if (sscanf(l, "commit %d", &rc) == 1)
			r->commit_rc = rc;
		else if (sscanf(l, "abort %d", &rc) == 1)
			r->abort_rc = rc;
		else if (sscanf(l, "txrun %d", &rc) == 1)
			r->txrun_rc = rc;
	}
	free(t);
}

/* Writes the scripts of t: main.sh (and body.sh under txrun). */
static void write_scripts(const rtx *t, const char *dir)
{
	char path[700], line[400];
	FILE *f;
	snprintf(path, sizeof path, "%s/w%d-body.sh", dir, t->w);
	if (!(f = fopen(path, "we")))
		cfail("cannot write %s", path);
	fprintf(f, "# T%" PRIu64 " (worker %d, %s, %s)\nS=%s/w%d.status\n", t->id, t->w,
		t->mode == 'b' ? "txbegin" : t->mode == 'r' ? "txrun" : "txrun --retry 2",
		t->end == 'c' ? "commit" : t->end == 'a' ? "abort" : "killed", dir, t->w);
	if (t->mode == 'b')
		fprintf(f, "txbegin > /dev/null || { echo \"begin-failed $?\" >> \"$S\"; exit 0; }\necho begun >> \"$S\"\n");
	else
		fprintf(f, "echo attempt >> \"$S\"\n");
	for (int k = 0; k < t->nops; k++) {
		if (t->end == 'k' && k == t->killat)
			fprintf(f, "echo killme >> \"$S\"\n{ printf 'T%" PRIu64 ".kill\\n'; sleep 5; printf 'more\\n'; } > w%d/kill.tmp\n",
				t->id, t->w);
		op_shell(t, k, line, sizeof line);
		fprintf(f, "{ %s; }\necho \"op %d $?\" >> \"$S\"\n", line, k);
	}
	if (t->end == 'k' && t->killat >= t->nops)
		fprintf(f, "echo killme >> \"$S\"\n{ printf 'T%" PRIu64 ".kill\\n'; sleep 5; } > w%d/kill.tmp\n", t->id, t->w);
	if (t->mode == 'b') {
		if (t->end == 'a')
			fprintf(f, "txabort; echo \"abort $?\" >> \"$S\"\n");
		else
			fprintf(f, "echo committing >> \"$S\"\ntxcommit; echo \"commit $?\" >> \"$S\"\n");
	} else {
		fprintf(f, "echo body-done >> \"$S\"\nexit %d\n", t->end == 'a' ? 3 : 0);
	}
	if (fclose(f) != 0)
		cfail("cannot write %s", path);
	if (t->mode == 'b')
		return;
	snprintf(path, sizeof path, "%s/w%d-main.sh", dir, t->w);
	if (!(f = fopen(path, "we")))
		cfail("cannot write %s", path);
	fprintf(f, "S=%s/w%d.status\ntxrun %s-- /bin/sh %s/w%d-body.sh\necho \"txrun $?\" >> \"$S\"\n", dir, t->w,
		t->mode == 'R' ? "--retry 2 " : "", dir, t->w);
	if (fclose(f) != 0)
		cfail("cannot write %s", path);
}

/* Starts a transaction's script in its own process group, in the mount
 * (exit 99: the mount was not there: the daemon had died). */
static pid_t spawn_tx(const rtx *t, const char *dir)
{
	char path[700], err[700];
	snprintf(path, sizeof path, "%s/w%d-%s.sh", dir, t->w, t->mode == 'b' ? "body" : "main");
	snprintf(err, sizeof err, "%s/w%d.err", dir, t->w);
	pid_t pid = fork();
	if (pid < 0)
		cfail("fork: %s", strerror(errno));
	if (pid == 0) {
		struct statfs sf;
		setpgid(0, 0);
		int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (efd >= 0) {
			dup2(efd, 1);
			dup2(efd, 2);
		}
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		if (chdir(g_m.mnt) != 0)
			_exit(99);
		if (statfs(".", &sf) != 0 || sf.f_type != FUSE_SUPER_MAGIC)
			_exit(99);
		execl("/bin/sh", "sh", path, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

static void park(int slot)
{
	__atomic_store_n(&g_shm->parked[slot], 1, __ATOMIC_RELEASE);
	while (ld(&g_shm->crash) && !ld(&g_shm->stop))
		msleep(5);
	__atomic_store_n(&g_shm->parked[slot], 0, __ATOMIC_RELEASE);
}

static void history(const char *dir, const rtx *t, const char *fate, const char *status, const char *err)
{
	char path[700], line[400];
	snprintf(path, sizeof path, "%s/w%d.history", dir, t->w);
	FILE *f = fopen(path, "ae");
	if (!f)
		return;
	fprintf(f, "== T%" PRIu64 " mode %c end %c fate %s\n", t->id, t->mode, t->end, fate);
	for (int k = 0; k < t->nops; k++) {
		op_shell(t, k, line, sizeof line);
		fprintf(f, "   op %d: %s\n", k, line);
	}
	fprintf(f, "-- status:\n%s-- stderr:\n%s", status, err);
	fclose(f);
}

static void worker(int w, uint64_t seed, const char *dir)
{
	sqlite3 *db = db_open();
	uint64_t rs = seed * 0x9e3779b97f4a7c15ull + (uint64_t)w * 7919u + 1;
	char stpath[700], errpath[700];
	ns m;
	snprintf(stpath, sizeof stpath, "%s/w%d.status", dir, w);
	snprintf(errpath, sizeof errpath, "%s/w%d.err", dir, w);
	model_load(db, w, 0, &m, NULL);
	for (unsigned seq = 1; seq < SEQ_MAX && !ld(&g_shm->stop); seq++) {
		if (ld(&g_shm->crash)) {
			park(w);
			model_load(db, w, 0, &m, NULL);
			seq--;
			continue;
		}
		rtx t;
		memset(&t, 0, sizeof t);
		t.w = w;
		t.seq = seq;
		t.id = tx_id(w, seq);
		unsigned x = below(&rs, 100);
		t.mode = x < 50 ? 'b' : x < 85 ? 'r' : 'R';
		x = below(&rs, 100);
		t.end = x < 70 ? 'c' : x < 85 ? 'a' : 'k';
		t.nops = 1 + (int)below(&rs, 8);
		t.killat = (int)below(&rs, (unsigned)t.nops + 1);
		ns after = m;
		int used_g = 0, used_p[4] = {0};
		for (int k = 0; k < t.nops; k++)
			t.ops[k] = gen_op(&after, &rs, t.id, k, &used_g, used_p);
		write_scripts(&t, dir);
		if (spit(stpath, "") != 0)
			cfail("cannot write %s", stpath);
		/* the epoch before the crash flag (the test sets the flag, then
		 * the epoch, then kills): a script that starts after a kill
		 * sees the flag or runs in a changed epoch */
		unsigned e0 = __atomic_load_n(&g_shm->epoch, __ATOMIC_ACQUIRE);
		if (ld(&g_shm->crash)) {
			seq--;
			continue;
		}
		pid_t pid = spawn_tx(&t, dir);
		__atomic_store_n(&g_shm->script[w], pid, __ATOMIC_RELEASE);
		int killed = 0, st = 0;
		double t0 = now_s();
		for (;;) {
			pid_t r = waitpid(pid, &st, WNOHANG);
			if (r == pid)
				break;
			if (t.end == 'k' && !killed) {
				char *s = slurp(stpath, NULL);
				if (s && strstr(s, "killme\n")) {
					usleep_((long)below(&rs, 30000));
					kill(-pid, SIGKILL);
					killed = 1;
				}
				free(s);
			}
			if (now_s() - t0 > WAIT_SCRIPT_S) {
				char cmd[800];
				snprintf(cmd, sizeof cmd, "cd / && txstatus --all > '%s/hang-txstatus.txt' 2>&1", dir);
				if (system(cmd) != 0) {
					/* only for a look */
				}
				kill(-pid, SIGKILL);
				cfail("worker %d: T%" PRIu64 " (%s) still runs after %.0f s: a hang (txstatus --all in "
				      "%s/hang-txstatus.txt; script %s/w%d-*.sh)",
				      w, t.id, t.mode == 'b' ? "txbegin" : "txrun", WAIT_SCRIPT_S, dir, dir, w);
			}
			usleep_(2000);
		}
		kill(-pid, SIGKILL); /* a leftover sleep of a killed script */
		__atomic_store_n(&g_shm->script[w], 0, __ATOMIC_RELEASE);
		unsigned e1 = __atomic_load_n(&g_shm->epoch, __ATOMIC_ACQUIRE);
		int crashed = e0 != e1, ex = wstatus(st);
		char *status = slurp(stpath, NULL), *err = slurp(errpath, NULL);
		if (!status)
			status = strdup("");
		if (!err)
			err = strdup("");
		rstat r;
		parse_status(status, &r);
		const char *fate = NULL;
		char why[600] = "";
		char end = t.end;
		if (end == 'k' && !killed) /* the slow write failed first (the daemon died, a deadlock): */
			end = 'c';         /* the script went on to its commit */
		if (ex == 99 || (t.mode == 'b' && !r.begun) || (t.mode != 'b' && !r.attempts && !killed)) {
			if (crashed)
				fate = "crashed";
			else
				snprintf(why, sizeof why, "it never began (exit %d)", ex);
		} else if (killed) {
			fate = "killed";
		} else if (t.mode == 'b') {
			if (end == 'a')
				fate = r.abort_rc == 0 ? "aborted" : crashed ? "crashed" : NULL;
			else if (r.commit_rc == 0)
				fate = "committed";
			else if (r.committing && crashed)
				fate = "maybe";
			else if (r.commit_rc > 0 && strstr(err, "deadlock"))
				fate = "failed";
			if (!fate)
				snprintf(why, sizeof why, "%s: %s", end == 'a' ? "txabort" : "txcommit",
					 end == 'a' ? (r.abort_rc < 0 ? "did not run" : "failed")
						      : (r.commit_rc < 0 ? "did not answer" : "failed, not as a deadlock victim"));
		} else {
			if (r.txrun_rc == 0)
				fate = "committed";
			else if (end == 'a' && r.txrun_rc == 3)
				fate = "aborted";
			else if (end == 'a' && crashed)
				fate = "crashed";
			else if (end == 'c' && r.body_done && crashed)
				fate = "maybe";
			else if (end == 'c' && r.txrun_rc == 1 && r.body_done && strstr(err, "deadlock"))
				fate = "failed";
			if (!fate)
				snprintf(why, sizeof why, "txrun%s exited %d (CMD %s, ended with %s)",
					 t.mode == 'R' ? " --retry 2" : "", r.txrun_rc, r.body_done ? "ran to its end" : "did not end",
					 end == 'a' ? "exit 3: expected txrun to return 3" : "exit 0");
		}
		int done[8]; /* the operations that took effect (all, unless one failed) */
		for (int k = 0; k < 8; k++)
			done[k] = 1;
		if (fate && !strcmp(fate, "committed"))
			for (int k = 0; k < t.nops; k++)
				if (r.oprc[k] != 0) {
					char line[400], first_err[200] = "";
					op_shell(&t, k, line, sizeof line);
					sscanf(err, "%199[^\n]", first_err);
					anomaly(5,
						"worker %d: T%" PRIu64 " committed, though its operation %d (%s) exited %d "
						"(stderr: %s); history in %s/w%d.history",
						w, t.id, k, line, r.oprc[k], first_err, dir, w);
					done[k] = 0;
				}
		if (fate && !strcmp(fate, "committed")) { /* what it did, on the committed state */
			after = m;
			for (int k = 0; k < t.nops; k++)
				if (done[k] && ns_apply(&after, &t.ops[k], t.id, k) != 0) {
					char line[400];
					op_shell(&t, k, line, sizeof line);
					snprintf(why, sizeof why,
						 "committed, and its operation %d (%s) succeeded, though the operations "
						 "before it that succeeded make it invalid",
						 k, line);
					fate = NULL;
					break;
				}
		}
		history(dir, &t, fate ? fate : "UNEXPECTED", status, err);
		if (!fate)
			cfail("worker %d: T%" PRIu64 " (%s, meant to %s): %s%s.\n--- its status ---\n%.1500s--- its stderr "
			      "---\n%.1500s(scripts %s/w%d-*.sh, history %s/w%d.history)",
			      w, t.id, t.mode == 'b' ? "txbegin" : t.mode == 'r' ? "txrun" : "txrun --retry 2",
			      t.end == 'c' ? "commit" : t.end == 'a' ? "abort" : "be killed", why,
			      crashed ? " (the daemon was killed meanwhile)" : "", status, err, dir, w, dir, w);
		/* the oracle: after txcommit returned */
		db_exec(db, "BEGIN IMMEDIATE");
		sqlite3_stmt *s1 = db_prep(db, "INSERT INTO tx(id, worker, seq, mode, plan, fate, epoch, attempts) "
					       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
		char mode[2] = {t.mode, 0}, plan[2] = {t.end, 0};
		sqlite3_bind_int64(s1, 1, (sqlite3_int64)t.id);
		sqlite3_bind_int(s1, 2, w);
		sqlite3_bind_int(s1, 3, (int)seq);
		sqlite3_bind_text(s1, 4, mode, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(s1, 5, plan, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(s1, 6, fate, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int(s1, 7, (int)e0);
		sqlite3_bind_int(s1, 8, r.attempts);
		if (sqlite3_step(s1) != SQLITE_DONE)
			cfail("oracle insert: %s", sqlite3_errmsg(db));
		sqlite3_finalize(s1);
		s1 = db_prep(db, "INSERT INTO op(tx, k, kind, a, b, n) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
		for (int k = 0; k < t.nops; k++) {
			char kind[2] = {t.ops[k].kind, 0};
			if (!done[k])
				continue;
			sqlite3_reset(s1);
			sqlite3_bind_int64(s1, 1, (sqlite3_int64)t.id);
			sqlite3_bind_int(s1, 2, k);
			sqlite3_bind_text(s1, 3, kind, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int(s1, 4, t.ops[k].a);
			sqlite3_bind_int(s1, 5, t.ops[k].b);
			sqlite3_bind_int(s1, 6, t.ops[k].n);
			if (sqlite3_step(s1) != SQLITE_DONE)
				cfail("oracle insert: %s", sqlite3_errmsg(db));
		}
		sqlite3_finalize(s1);
		if (!strcmp(fate, "committed") || !strcmp(fate, "maybe")) {
			s1 = db_prep(db, "INSERT INTO prev(tx, chain, prev) VALUES(?1, ?2, ?3)");
			for (int k = 0; k < t.nops; k++) {
				int c = t.ops[k].kind == 'G' ? 0 : t.ops[k].kind == 'P' ? 1 + t.ops[k].a : -1;
				if (c < 0 || !done[k])
					continue;
				if (!r.has_prev[c]) {
					if (!strcmp(fate, "committed"))
						cfail("worker %d: T%" PRIu64 " committed without recording what it read from %s",
						      w, t.id, chain_path[c]);
					continue; /* a maybe that never got there: it cannot have applied it */
				}
				if (r.has_prev[c] < 0)
					anomaly(4,
						"worker %d: T%" PRIu64 " (a member, %s) read '%s' from %s -- no committed token "
						"(another transaction's uncommitted truncation?) -- and wrote over it",
						w, t.id, fate, r.bad_prev[c], chain_path[c]);
				sqlite3_reset(s1);
				sqlite3_bind_int64(s1, 1, (sqlite3_int64)t.id);
				sqlite3_bind_int(s1, 2, c);
				sqlite3_bind_int64(s1, 3, (sqlite3_int64)r.prev[c]);
				if (sqlite3_step(s1) != SQLITE_DONE)
					cfail("oracle insert: %s", sqlite3_errmsg(db));
			}
			sqlite3_finalize(s1);
		}
		db_exec(db, "COMMIT");
		if (!strcmp(fate, "committed"))
			m = after;
		free(status);
		free(err);
	}
	sqlite3_close(db);
	_exit(0);
}

/* ---- readers ---- */

/* One token file: 0 and *tok, -1 (errno in *e) or -2 (not one whole
 * token; the bytes in raw). */
static int read_token(int fd, const char *path, uint64_t *tok, char *raw, size_t rsize, int *e)
{
	char b[64];
	ssize_t n;
	int own = fd < 0;
	if (own && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		*e = errno;
		return -1;
	}
	n = pread(fd, b, sizeof b - 1, 0);
	*e = errno;
	if (own)
		close(fd);
	if (n < 0)
		return -1;
	b[n] = 0;
	snprintf(raw, rsize, "%s", b);
	char *end;
	if (n < 3 || b[0] != 'T' || b[n - 1] != '\n')
		return -2;
	*tok = strtoull(b + 1, &end, 10);
	return end == b + n - 1 ? 0 : -2;
}

static void reader(int r, const char *dir)
{
	static const char *const files[8] = {"g/a", "g/b", "g/c", "g/a", "p/0", "p/1", "p/2", "p/3"};
	int fds[8];
	uint8_t *seen = calloc((size_t)RW_MAX * SEQ_MAX / 8 + 1, 1), *flushed = calloc((size_t)RW_MAX * SEQ_MAX / 8 + 1, 1);
	sqlite3 *db = db_open();
	int slot = RW_MAX + r;
	(void)dir;
	for (int i = 0; i < 8; i++)
		fds[i] = -1;
	for (;;) {
		int stopping = ld(&g_shm->stop), crashing = ld(&g_shm->crash);
		if (stopping || crashing) { /* hand the tokens seen to the oracle */
			db_exec(db, "BEGIN IMMEDIATE");
			sqlite3_stmt *st = db_prep(db, "INSERT OR IGNORE INTO seen(tx, reader, epoch) VALUES(?1, ?2, ?3)");
			for (int w = 0; w < RW_MAX; w++)
				for (unsigned q = 0; q < SEQ_MAX; q++) {
					size_t bit = (size_t)w * SEQ_MAX + q;
					if (!(seen[bit / 8] & (1u << (bit % 8))) || (flushed[bit / 8] & (1u << (bit % 8))))
						continue;
					flushed[bit / 8] |= (uint8_t)(1u << (bit % 8));
					sqlite3_reset(st);
					sqlite3_bind_int64(st, 1, (sqlite3_int64)tx_id(w, q));
					sqlite3_bind_int(st, 2, r);
					sqlite3_bind_int(st, 3, (int)g_shm->epoch);
					if (sqlite3_step(st) != SQLITE_DONE)
						cfail("oracle insert: %s", sqlite3_errmsg(db));
				}
			sqlite3_finalize(st);
			db_exec(db, "COMMIT");
			for (int i = 0; i < 8; i++)
				if (fds[i] >= 0) {
					close(fds[i]);
					fds[i] = -1;
				}
			if (stopping)
				break;
			park(slot);
			continue;
		}
		unsigned e0 = __atomic_load_n(&g_shm->epoch, __ATOMIC_ACQUIRE);
		if (r == 1 && fds[0] < 0) /* descriptors kept open */
			for (int i = 0; i < 8; i++)
				fds[i] = open(mp(files[i]), O_RDONLY | O_CLOEXEC);
		uint64_t tok[8];
		char raw[8][64];
		int rc[8], e[8];
		double t0 = now_s();
		for (int i = 0; i < 8; i++)
			rc[i] = read_token(r == 1 ? fds[i] : -1, mp(files[i]), &tok[i], raw[i], sizeof raw[i], &e[i]);
		double dt = now_s() - t0;
		if (__atomic_load_n(&g_shm->epoch, __ATOMIC_ACQUIRE) != e0 || ld(&g_shm->crash))
			continue; /* a crash in between: nothing to judge */
		int whole = 1;
		const char *how = r ? ", descriptors kept open" : ", a fresh open per read";
		for (int i = 0; i < 8; i++) {
			if (rc[i] == -1 || (r == 1 && fds[i] < 0))
				anomaly(0, "reader %d (a non-member%s): reading %s failed: %s", r, how, files[i], strerror(e[i]));
			if (rc[i] == -2)
				anomaly(1,
					"reader %d (a non-member%s): %s holds '%s' (%zu bytes): not one whole token -- a "
					"member's uncommitted truncation or write seen",
					r, how, files[i], raw[i], strlen(raw[i]));
			whole &= rc[i] == 0;
		}
		g_shm->reads[r]++;
		if (dt > g_shm->slowest[r])
			g_shm->slowest[r] = dt;
		if (dt > READ_LIMIT_S)
			anomaly(3, "reader %d (a non-member): reading the 8 token files took %.2f s: a non-member waited", r,
				dt);
		if (!whole)
			continue;
		if (tok[0] == tok[3]) {
			g_shm->agree[r]++;
			if (tok[1] != tok[0] || tok[2] != tok[0])
				anomaly(2,
					"reader %d (a non-member%s): the group disagrees: g/a T%" PRIu64 ", g/b T%" PRIu64
					", g/c T%" PRIu64 ", g/a again T%" PRIu64
					" (g/a unchanged across the reads: no commit between them, so all three must be "
					"equal)",
					r, how, tok[0], tok[1], tok[2], tok[3]);
		} else {
			g_shm->disagree_ok[r]++;
		}
		for (int i = 0; i < 8; i++) {
			if (!tok[i])
				continue;
			unsigned w = (unsigned)(tok[i] / 1000000u) - 1, q = (unsigned)(tok[i] % 1000000u);
			if (w >= RW_MAX || q >= SEQ_MAX)
				cfail("reader %d: %s holds T%" PRIu64 ", no transaction's token", r, files[i], tok[i]);
			size_t bit = (size_t)w * SEQ_MAX + q;
			seen[bit / 8] |= (uint8_t)(1u << (bit % 8));
		}
		usleep_(2000);
	}
	sqlite3_close(db);
	_exit(0);
}

/* ---- the check after a recovery ---- */

typedef struct tree {
	char ns[RW_MAX][4096]; /* canonical text of each namespace */
	uint64_t chain[NCHAIN];
	char other[2000];      /* problems outside the namespaces */
} tree;

static void ns_text(const ns *m, char *buf, size_t size)
{
	buf[0] = 0;
	for (int s = 0; s < NS_SLOTS; s++) {
		if (!m->type[s])
			continue;
		sb(buf, size, "%s %c", ns_name[s], m->type[s]);
		if (m->type[s] == 'f') {
			sb(buf, size, " '");
			for (const char *p = m->data[s]; *p; p++)
				sb(buf, size, *p == '\n' ? "|" : "%c", *p);
			sb(buf, size, "'");
		}
		sb(buf, size, "\n");
	}
}

/* Lists the names of a directory that are not among allowed (NULL-ended)
 * into buf. */
static void extras(const char *dirpath, const char *const *allowed, const char *label, char *buf, size_t size)
{
	DIR *d = opendir(dirpath);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int ok = 0;
		for (const char *const *a = allowed; *a; a++)
			ok |= !strcmp(*a, de->d_name);
		if (!ok)
			sb(buf, size, "extra %s%s\n", label, de->d_name);
	}
	closedir(d);
}

static void scan(tree *t)
{
	static const char *const top[] = {"f0", "f1", "f2", "f3", "f4", "d0", "d1", "d2", NULL};
	static const char *const sub[] = {"f0", "f1", "f2", NULL};
	static const char *const gs[] = {"a", "b", "c", NULL}, *const ps[] = {"0", "1", "2", "3", NULL};
	char path[700];
	memset(t, 0, sizeof *t);
	for (int w = 0; w < g_nw; w++) {
		ns m;
		memset(&m, 0, sizeof m);
		char *buf = t->ns[w], ex[1000] = "";
		for (int s = 0; s < NS_SLOTS; s++) {
			struct stat st;
			snprintf(path, sizeof path, "%s/w%d/%s", g_m.mnt, w, ns_name[s]);
			if (lstat(path, &st) != 0)
				continue;
			if (S_ISDIR(st.st_mode) != ns_isdir(s) || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))) {
				sb(ex, sizeof ex, "%s has the wrong type (mode %o)\n", ns_name[s], (unsigned)st.st_mode);
				continue;
			}
			m.type[s] = S_ISDIR(st.st_mode) ? 'd' : 'f';
			if (m.type[s] == 'f') {
				size_t len;
				char *c = slurp(path, &len);
				if (!c)
					sb(ex, sizeof ex, "%s cannot be read: %s\n", ns_name[s], strerror(errno));
				else
					snprintf(m.data[s], NS_DATA, "%s", c);
				if (c && (len >= NS_DATA || strlen(c) != len))
					sb(ex, sizeof ex, "%s holds %zu bytes (%zu before a NUL)\n", ns_name[s], len, strlen(c));
				free(c);
			}
		}
		ns_text(&m, buf, sizeof t->ns[w]);
		snprintf(path, sizeof path, "%s/w%d", g_m.mnt, w);
		extras(path, top, "", ex, sizeof ex);
		for (int d = 0; d < 3; d++) {
			char label[8];
			snprintf(path, sizeof path, "%s/w%d/d%d", g_m.mnt, w, d);
			snprintf(label, sizeof label, "d%d/", d);
			extras(path, sub, label, ex, sizeof ex);
		}
		sb(buf, sizeof t->ns[w], "%s", ex);
	}
	{
		char names[RW_MAX + 3][16];
		const char *root[RW_MAX + 3];
		int n = 0;
		for (int w = 0; w < g_nw; w++) {
			snprintf(names[n], sizeof names[n], "w%d", w);
			root[n] = names[n];
			n++;
		}
		root[n++] = "g";
		root[n++] = "p";
		root[n] = NULL;
		extras(g_m.mnt, root, "/", t->other, sizeof t->other);
		extras(mp("g"), gs, "g/", t->other, sizeof t->other);
		extras(mp("p"), ps, "p/", t->other, sizeof t->other);
	}
	static const char *const cf[NCHAIN + 2] = {"g/a", "p/0", "p/1", "p/2", "p/3", "g/b", "g/c"};
	uint64_t v[NCHAIN + 2];
	for (int c = 0; c < NCHAIN + 2; c++) {
		char raw[64];
		int e;
		if (read_token(-1, mp(cf[c]), &v[c], raw, sizeof raw, &e) != 0) {
			sb(t->other, sizeof t->other, "%s holds '%s' (%s)\n", cf[c], raw, e ? strerror(e) : "not a token");
			v[c] = UINT64_MAX;
		}
		if (c < NCHAIN)
			t->chain[c] = v[c];
	}
	if (v[0] != v[5] || v[0] != v[6])
		sb(t->other, sizeof t->other, "the group disagrees: g/a T%" PRIu64 ", g/b T%" PRIu64 ", g/c T%" PRIu64 "\n",
		   v[0], v[5], v[6]);
}

typedef struct writer {
	uint64_t tx, prev;
	int chain, maybe; /* index among the maybes, or -1 */
} writer;

typedef struct verdict {
	int points, maybes, applied, lost, invisible;
} verdict;

/* The tail of chain c given which maybes applied (mask): 0; 1 when a
 * writer of it read no token (then it cannot be followed: not checked);
 * -1 if the writers do not form one chain (problems of committed ones
 * into msg). */
static int chain_tail(const writer *wr, int nwr, int c, unsigned mask, uint64_t *tail, char *msg, size_t size)
{
	uint64_t cur = 0;
	int used = 0, total = 0;
	for (int i = 0; i < nwr; i++) {
		int in = wr[i].chain == c && (wr[i].maybe < 0 || (mask >> wr[i].maybe & 1));
		total += in;
		if (in && wr[i].prev == PREV_BAD)
			return 1; /* a writer read no token: the chain cannot be followed */
	}
	for (;;) {
		int found = -1, n = 0;
		for (int i = 0; i < nwr; i++)
			if (wr[i].chain == c && wr[i].prev == cur && (wr[i].maybe < 0 || (mask >> wr[i].maybe & 1))) {
				if (found >= 0 && wr[found].maybe < 0 && wr[i].maybe < 0)
					sb(msg, size,
					   "%s: committed T%" PRIu64 " and T%" PRIu64 " both read T%" PRIu64
					   " and wrote over it: a lost update (not serializable)\n",
					   chain_path[c], wr[found].tx, wr[i].tx, cur);
				found = i;
				n++;
			}
		if (n == 0)
			break;
		if (n > 1)
			return -1;
		cur = wr[found].tx;
		if (++used > total)
			return -1;
	}
	*tail = cur;
	if (used != total) {
		for (int i = 0; i < nwr; i++)
			if (wr[i].chain == c && wr[i].maybe < 0) {
				int reach = wr[i].prev == 0;
				for (int k = 0; k < nwr; k++)
					reach |= wr[k].chain == c && wr[k].tx == wr[i].prev;
				if (!reach)
					sb(msg, size,
					   "%s: committed T%" PRIu64 " read T%" PRIu64
					   ", which no committed transaction wrote (it read uncommitted data)\n",
					   chain_path[c], wr[i].tx, wr[i].prev);
			}
		return -1;
	}
	return 0;
}

/* Compares the tree with the oracle; decides the maybes; 0, or -1 with
 * msg set. */
static int verify(sqlite3 *db, const char *when, verdict *vd, char *msg, size_t size)
{
	tree *t = malloc(sizeof *t);
	ns base[RW_MAX], with[RW_MAX];
	uint64_t maybe_of[RW_MAX], maybes[RW_MAX];
	int nm = 0, nwr = 0, rc = -1, cap = 16;
	writer *wr = NULL, *only = NULL;
	msg[0] = 0;
	scan(t);
	if (t->other[0]) {
		snprintf(msg, size, "%s: outside the namespaces:\n%s", when, t->other);
		goto out;
	}
	for (int w = 0; w < g_nw; w++) {
		model_load(db, w, 0, &base[w], &maybe_of[w]);
		model_load(db, w, 1, &with[w], NULL);
		if (maybe_of[w])
			maybes[nm++] = maybe_of[w];
	}
	{
		sqlite3_stmt *st = db_prep(db, "SELECT count(*) FROM prev");
		if (sqlite3_step(st) == SQLITE_ROW)
			cap += sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
		wr = malloc((size_t)cap * sizeof *wr);
		only = malloc((size_t)cap * sizeof *only);
		st = db_prep(db, "SELECT p.tx, p.chain, p.prev, t.fate FROM prev p JOIN tx t ON t.id = p.tx "
				 "WHERE t.fate IN ('committed', 'applied', 'maybe')");
		while (sqlite3_step(st) == SQLITE_ROW && nwr < cap) {
			writer x = {(uint64_t)sqlite3_column_int64(st, 0), (uint64_t)sqlite3_column_int64(st, 2),
				    sqlite3_column_int(st, 1), -1};
			if (!strcmp((const char *)sqlite3_column_text(st, 3), "maybe"))
				for (int i = 0; i < nm; i++)
					if (maybes[i] == x.tx)
						x.maybe = i;
			wr[nwr++] = x;
		}
		sqlite3_finalize(st);
	}
	/* the committed writers alone must chain */
	for (int c = 0; c < NCHAIN; c++) {
		uint64_t tail;
		char m2[1500] = "";
		int n = 0;
		for (int i = 0; i < nwr; i++)
			if (wr[i].maybe < 0)
				only[n++] = wr[i];
		if (chain_tail(only, n, c, 0, &tail, m2, sizeof m2) < 0 && m2[0]) {
			snprintf(msg, size, "%s: the committed writers of %s do not form one chain:\n%s", when, chain_path[c], m2);
			goto out;
		}
	}
	/* every combination of the maybes; all-or-nothing: one must explain all */
	unsigned best = 0, nvalid = 0, all_valid_and = ~0u, all_valid_or = 0;
	int best_bad = INT_MAX;
	for (unsigned mask = 0; mask < (1u << nm); mask++) {
		int bad = 0;
		for (int w = 0; w < g_nw; w++) {
			char exp[4096];
			int applied = 0;
			for (int i = 0; i < nm; i++)
				applied |= maybes[i] == maybe_of[w] && maybe_of[w] && (mask >> i & 1);
			ns_text(applied ? &with[w] : &base[w], exp, sizeof exp);
			bad += strcmp(exp, t->ns[w]) != 0;
		}
		for (int c = 0; c < NCHAIN; c++) {
			uint64_t tail;
			char m2[100] = "";
			int cr_ = chain_tail(wr, nwr, c, mask, &tail, m2, sizeof m2);
			bad += cr_ < 0 || (cr_ == 0 && tail != t->chain[c]);
		}
		if (bad < best_bad) {
			best_bad = bad;
			best = mask;
		}
		if (!bad) {
			nvalid++;
			all_valid_and &= mask;
			all_valid_or |= mask;
		}
	}
	if (!nvalid) {
		snprintf(msg, size, "%s: the tree is no state the oracle allows (%d maybe transactions: every acknowledged "
				    "commit whole, nothing of the others, each maybe all or nothing). Closest (maybes applied:",
			 when, nm);
		for (int i = 0; i < nm; i++)
			sb(msg, size, " T%" PRIu64 "=%s", maybes[i], best >> i & 1 ? "yes" : "no");
		sb(msg, size, "), its differences:\n");
		for (int w = 0; w < g_nw; w++) {
			char exp[4096];
			int applied = 0;
			for (int i = 0; i < nm; i++)
				applied |= maybes[i] == maybe_of[w] && maybe_of[w] && (best >> i & 1);
			ns_text(applied ? &with[w] : &base[w], exp, sizeof exp);
			if (strcmp(exp, t->ns[w]))
				sb(msg, size, "w%d: expected\n%s  found\n%s", w, exp, t->ns[w]);
		}
		for (int c = 0; c < NCHAIN; c++) {
			uint64_t tail = 0;
			char m2[1000] = "";
			int cr_ = chain_tail(wr, nwr, c, best, &tail, m2, sizeof m2);
			if (cr_ < 0 || (cr_ == 0 && tail != t->chain[c]))
				sb(msg, size, "%s: expected T%" PRIu64 "%s, found T%" PRIu64 "\n%s", chain_path[c], tail,
				   cr_ ? " (no single chain)" : "", t->chain[c], m2);
		}
		sb(msg, size, "(w<N>.history in the run directory has every transaction, with its status and stderr)");
		goto out;
	}
	/* decided: applied in every valid combination, lost in none; the rest
	 * left no visible trace (only touches): lost */
	for (int i = 0; i < nm; i++) {
		int yes = all_valid_and >> i & 1, maybe_yes = all_valid_or >> i & 1;
		char sql[200];
		snprintf(sql, sizeof sql, "UPDATE tx SET fate = '%s', detail = '%s' WHERE id = %" PRIu64,
			 yes ? "applied" : "lost", yes || !maybe_yes ? "decided" : "invisible", maybes[i]);
		db_exec(db, sql);
		vd->applied += yes;
		vd->lost += !yes;
		vd->invisible += !yes && maybe_yes;
	}
	vd->maybes += nm;
	/* what non-members saw was committed */
	{
		sqlite3_stmt *st = db_prep(db, "SELECT s.tx, s.reader, ifnull(t.fate, 'no such transaction') FROM seen s "
					       "LEFT JOIN tx t ON t.id = s.tx WHERE t.fate IS NULL OR t.fate NOT IN "
					       "('committed', 'applied') LIMIT 5");
		while (sqlite3_step(st) == SQLITE_ROW)
			sb(msg, size,
			   "reader %d (a non-member) saw T%" PRIu64 " in a token file, but that transaction is %s: a "
			   "non-member saw uncommitted data\n",
			   sqlite3_column_int(st, 1), (uint64_t)sqlite3_column_int64(st, 0),
			   (const char *)sqlite3_column_text(st, 2));
		sqlite3_finalize(st);
		if (msg[0]) {
			char m3[200];
			snprintf(m3, sizeof m3, "%s: ", when);
			memmove(msg + strlen(m3), msg, strlen(msg) + 1 < size - strlen(m3) ? strlen(msg) + 1 : size - strlen(m3) - 1);
			memcpy(msg, m3, strlen(m3));
			goto out;
		}
	}
	rc = 0;
out:
	free(wr);
	free(only);
	free(t);
	return rc;
}

static void random_crash_test(void)
{
	static const char *const progs[] = {"touch", "truncate", "mv", "rm", "mkdir", "cat", NULL};
	uint64_t points = env_u64("TP_TXCRASH_POINTS", 20), seed = env_u64("TP_TXCRASH_SEED", 1);
	int verbose = getenv("TP_TXCRASH_VERBOSE") != NULL;
	uint64_t rs = seed ^ 0xc4a5;
	double t0 = now_s(), t_rec = 0, t_check = 0, t_work = 0;
	pid_t kids[RW_MAX + RR];
	char dir[600], *msg = malloc(16384);
	verdict vd = {0, 0, 0, 0, 0};
	g_nw = (int)env_u64("TP_TXCRASH_WORKERS", 4);
	if (g_nw < 1)
		g_nw = 1;
	if (g_nw > RW_MAX)
		g_nw = RW_MAX;
	need(progs);
	start();
	STEP_OK("rnd-setup", "for w in $(seq 0 %d); do mkdir w$w; done; mkdir g p\n"
			     "for f in g/a g/b g/c p/0 p/1 p/2 p/3; do echo T0 > $f; done",
		g_nw - 1);
	cycle("after the set-up");
	snprintf(dir, sizeof dir, "%s/rnd", g_m.dir);
	cr_assert(mkdir(dir, 0755) == 0, "mkdir %s", dir);
	snprintf(g_oracle, sizeof g_oracle, "%s/oracle.db", g_m.dir);
	g_shm = mmap(NULL, sizeof *g_shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(g_shm != MAP_FAILED, "mmap");
	memset(g_shm, 0, sizeof *g_shm);
	g_scripts = g_shm->script;
	g_nscripts = RW_MAX;
	{
		sqlite3 *db = db_open();
		db_exec(db, "PRAGMA journal_mode = WAL;"
			    "CREATE TABLE tx(id INTEGER PRIMARY KEY, worker INT, seq INT, mode TEXT, plan TEXT, fate TEXT, "
			    "epoch INT, attempts INT, detail TEXT);"
			    "CREATE TABLE op(tx INT, k INT, kind TEXT, a INT, b INT, n INT, PRIMARY KEY(tx, k));"
			    "CREATE TABLE prev(tx INT, chain INT, prev INT, PRIMARY KEY(tx, chain));"
			    "CREATE TABLE seen(tx INT PRIMARY KEY, reader INT, epoch INT);");
		sqlite3_close(db);
	}
	fflush(NULL);
	for (int i = 0; i < g_nw + RR; i++) {
		kids[i] = fork();
		cr_assert(kids[i] >= 0, "fork");
		if (kids[i] == 0) {
			unsetenv("BXFI_MAP");
			if (i < g_nw)
				worker(i, seed, dir);
			reader(i - g_nw, dir);
		}
		kid_add(kids[i]);
	}
	sqlite3 *db = db_open();
#define RFAIL(...)                                                                                                     \
	do {                                                                                                           \
		__atomic_store_n(&g_shm->stop, 1, __ATOMIC_RELEASE);                                                   \
		cr_assert_fail(__VA_ARGS__);                                                                           \
	} while (0)
	for (uint64_t pt = 1; pt <= points; pt++) {
		double tw = now_s(), span = 0.2 + (double)below(&rs, 1300) / 1000.0;
		while (now_s() - tw < span && !ld(&g_shm->failed))
			msleep(10);
		t_work += now_s() - tw;
		if (ld(&g_shm->failed))
			RFAIL("crash point %" PRIu64 " (seed %" PRIu64 "): %s\n(run kept in %s)", pt, seed, g_shm->msg, g_m.dir);
		/* the crash */
		__atomic_store_n(&g_shm->crash, 1, __ATOMIC_RELEASE);
		__atomic_add_fetch(&g_shm->epoch, 1, __ATOMIC_ACQ_REL);
		tfs_kill9(&g_m);
		double tp = now_s();
		for (;;) {
			int all = 1;
			for (int i = 0; i < g_nw; i++)
				all &= ld(&g_shm->parked[i]);
			for (int i = 0; i < RR; i++)
				all &= ld(&g_shm->parked[RW_MAX + i]);
			if (all || ld(&g_shm->failed))
				break;
			if (now_s() - tp > 120)
				RFAIL("crash point %" PRIu64 ": the workers did not stop within 120 s of the daemon's death (a "
				      "call hung on the dead mount?); run kept in %s",
				      pt, g_m.dir);
			msleep(5);
		}
		if (ld(&g_shm->failed))
			RFAIL("crash point %" PRIu64 " (seed %" PRIu64 "): %s\n(run kept in %s)", pt, seed, g_shm->msg, g_m.dir);
		double tr = now_s();
		if (tfs_remount(&g_m, OPTS) != 0)
			RFAIL("crash point %" PRIu64 ": tpfsd could not mount the store after kill -9 (recovery failed?); "
			      "store kept in %s",
			      pt, g_m.dir);
		t_rec += now_s() - tr;
		char when[100];
		snprintf(when, sizeof when, "after crash point %" PRIu64 " (seed %" PRIu64 ")", pt, seed);
		int before_maybes = vd.maybes, before_applied = vd.applied;
		if (verify(db, when, &vd, msg, 16384) != 0)
			RFAIL("%s\n(store, oracle.db, rnd/ kept in %s)", msg, g_m.dir);
		double tc = now_s();
		int st = tfs_stop(&g_m);
		if (st != 0)
			RFAIL("%s: tpfsd did not exit cleanly at unmount (status %d); store kept in %s", when, st, g_m.dir);
		if ((st = tfs_check(&g_m)) != 0)
			RFAIL("%s: `tpfs check` exited %d; store kept in %s", when, st, g_m.dir);
		if (tfs_remount(&g_m, OPTS) != 0)
			RFAIL("%s: cannot mount the store again", when);
		if (verify(db, when, &vd, msg, 16384) != 0)
			RFAIL("%s, then a clean unmount and mount: %s\n(kept in %s)", when, msg, g_m.dir);
		t_check += now_s() - tc;
		vd.points++;
		if (verbose) {
			sqlite3_stmt *q = db_prep(db, "SELECT count(*) FROM tx");
			sqlite3_step(q);
			fprintf(stderr, "txcrash point %" PRIu64 ": after %.2f s of work; %d transactions so far; %d in flight (%d "
					"applied)\n",
				pt, span, sqlite3_column_int(q, 0), vd.maybes - before_maybes, vd.applied - before_applied);
			sqlite3_finalize(q);
		}
		__atomic_store_n(&g_shm->crash, 0, __ATOMIC_RELEASE);
	}
	/* the end: the workers finish their transactions and exit */
	__atomic_store_n(&g_shm->stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < g_nw + RR; i++) {
		int st;
		double tw = now_s();
		while (waitpid(kids[i], &st, WNOHANG) != kids[i]) {
			if (now_s() - tw > 120) {
				kill(kids[i], SIGKILL);
				waitpid(kids[i], &st, 0);
				break;
			}
			msleep(5);
		}
		kid_del(kids[i]);
	}
	if (ld(&g_shm->failed))
		cr_assert_fail("at the end (seed %" PRIu64 "): %s\n(run kept in %s)", seed, g_shm->msg, g_m.dir);
	cr_assert(verify(db, "at the end, no crash", &vd, msg, 16384) == 0, "%s\n(kept in %s)", msg, g_m.dir);
	cycle("at the end");
	cr_assert(verify(db, "at the end, after a clean remount", &vd, msg, 16384) == 0, "%s\n(kept in %s)", msg, g_m.dir);

	/* counts */
	int n[8] = {0};
	static const char *const fates[8] = {"committed", "aborted", "killed", "failed", "crashed", "applied", "lost", "maybe"};
	for (int i = 0; i < 8; i++) {
		char sql[200];
		snprintf(sql, sizeof sql, "SELECT count(*) FROM tx WHERE fate = '%s'", fates[i]);
		sqlite3_stmt *q = db_prep(db, sql);
		if (sqlite3_step(q) == SQLITE_ROW)
			n[i] = sqlite3_column_int(q, 0);
		sqlite3_finalize(q);
	}
	int retried = 0, by_mode[3] = {0}, seen = 0, ops = 0;
	{
		sqlite3_stmt *q = db_prep(db, "SELECT (SELECT count(*) FROM tx WHERE attempts > 1 AND fate = 'committed'), "
					      "(SELECT count(*) FROM tx WHERE mode = 'b'), (SELECT count(*) FROM tx WHERE mode = 'r'), "
					      "(SELECT count(*) FROM tx WHERE mode = 'R'), (SELECT count(*) FROM seen), "
					      "(SELECT count(*) FROM op o JOIN tx t ON t.id = o.tx WHERE t.fate IN ('committed', 'applied'))");
		if (sqlite3_step(q) == SQLITE_ROW) {
			retried = sqlite3_column_int(q, 0);
			by_mode[0] = sqlite3_column_int(q, 1);
			by_mode[1] = sqlite3_column_int(q, 2);
			by_mode[2] = sqlite3_column_int(q, 3);
			seen = sqlite3_column_int(q, 4);
			ops = sqlite3_column_int(q, 5);
		}
		sqlite3_finalize(q);
	}
	sqlite3_close(db);
	cr_assert(n[7] == 0, "%d transactions were left undecided", n[7]);
	cr_assert(n[0] > 0, "no transaction committed");
	printf("tx_clients random_crash: %d crash points (kill -9 of tpfsd, recovery, oracle check, clean unmount, tpfs "
	       "check, mount, check again) in %.1f s (work %.1f s, recovery mounts %.1f s, unmount+check+mount %.1f s), "
	       "seed %" PRIu64 ", %d workers\n",
	       vd.points, now_s() - t0, t_work, t_rec, t_check, seed, g_nw);
	printf("tx_clients random_crash: %d transactions (%d txbegin/txcommit, %d txrun, %d txrun --retry 2): %d "
	       "committed (%d after a retry; %d operations), %d aborted, %d killed (bound process kill -9), %d failed to "
	       "commit (deadlock victims), %d open at a crash (aborted by it), %d in flight at a crash (%d applied, %d "
	       "lost, %d of those without a visible effect)\n",
	       by_mode[0] + by_mode[1] + by_mode[2], by_mode[0], by_mode[1], by_mode[2], n[0], retried, ops, n[1], n[2], n[3],
	       n[4], n[5] + n[6], n[5], n[6], vd.invisible);
	printf("tx_clients random_crash: readers (non-members): %" PRIu64 " + %" PRIu64 " reads of the 8 token files, %" PRIu64
	       " + %" PRIu64 " group agreement checks, slowest %.3f / %.3f s; %d distinct tokens seen, all committed\n",
	       g_shm->reads[0], g_shm->reads[1], g_shm->agree[0], g_shm->agree[1], g_shm->slowest[0], g_shm->slowest[1],
	       seen);
	fflush(stdout);
	cr_assert(vd.points == (int)points, "ran %d crash points of %" PRIu64, vd.points, points);
	{
		static char rep[3000];
		rep[0] = 0;
		for (int k = 0; k < 6; k++)
			if (g_shm->anomalies[k])
				sb(rep, sizeof rep, "%" PRIu64 " %s; the first: %s\n", g_shm->anomalies[k], anomaly_name[k],
				   g_shm->anomaly[k]);
		printf("tx_clients random_crash: what the readers saw that a non-member must not: %s\n",
		       rep[0] ? "see below" : "nothing");
		fflush(stdout);
		cr_assert(!rep[0],
			  "the oracle checks held at every crash point, but readers saw uncommitted state:\n%s(run "
			  "kept in %s)",
			  rep, g_m.dir);
	}
	g_scripts = NULL;
	munmap(g_shm, sizeof *g_shm);
	free(msg);
	finish();
}

/* No Criterion timeout: the length follows TP_TXCRASH_POINTS; meson's
 * timeout bounds it, and every wait inside is bounded. */
Test(tx_clients, random_crash) { random_crash_test(); }
