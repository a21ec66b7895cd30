/*
 * test_tx_clients -- real programs in transactions on real tpfs mounts
 * (issue 6, "Atomicity and durability"): RCS, an assembler-like rewrite of
 * a .o read by nm, make, and a randomized crash test of many shells with a
 * SQLite oracle.
 *
 * This file holds the actors and the helpers (declared in txclients.h)
 * and main; the tests are in test_tx_rcs.c, test_tx_orewrite.c,
 * test_tx_make.c and test_tx_random_crash.c.
 *
 * The actors.  The test process is the non-member: it never binds and is
 * no descendant of a bound process, so every check it runs (a step script,
 * nm, a tree scan) sees committed state only.  Each step is a shell script
 * written to DIR/steps/NN-name.sh (DIR: the test's temporary directory,
 * which also holds the store and the mount) and run with /bin/sh -e in the
 * mount; all output goes to DIR/tx-clients.log, whose end a failure prints.
 * A transaction's shell is such a script run in the background in its own
 * process group: it binds itself with `txbegin` (or runs `txrun`), reports
 * its progress in DIR/progress (outside the mount) and, where the test must
 * act at an exact moment, waits on the fifo DIR/go.  The store, the steps
 * and the log of a failed test are kept.
 *
 * Tests
 *   rcs_*       20 files checked in with `ci -l` in one transaction, twice
 *               (the initial check-in, then revision 1.2), ended midway by
 *               txabort, kill -9 of the member ci, kill -9 of the bound
 *               shell (idle, or with its running ci), kill -9 of the daemon
 *               before any ci, after 10, or right before txcommit: then
 *               none of the revisions is there (the tree is the snapshot
 *               taken before, byte for byte, mtimes and ctimes included).
 *               rcs_commit: all 20 after txcommit, and after a kill -9 of
 *               the daemon right after it (durability); a non-member sees
 *               none of them before txcommit.  `tpfs check` after every
 *               remount.
 *   orewrite    a member rewrites target.o in place like an assembler
 *               (open without O_TRUNC, ftruncate 0, 4 KiB writes with
 *               sleeps, the ELF header last), alternating two objects with
 *               different symbol sets, in a sequence of transactions
 *               (commit, abort, commit, ...), while a non-member runs nm in
 *               a loop: every run succeeds and prints exactly the old or
 *               the new symbol table -- the committed one at that moment;
 *               then kill -9 of the daemon in mid-rewrite: the committed
 *               object after recovery.  orewrite_member_nm: the member also
 *               runs nm on its output (BFD maps it MAP_PRIVATE).
 *   make        `txrun -- make -j2`: the build commits (everything visible
 *               to a non-member at once, nothing before; durable) or, when
 *               a compile fails, txrun returns make's status and the tree
 *               is exactly as before; txrun's exit statuses (CMD's status,
 *               1 when the commit fails, --retry of deadlock victims).
 *   isolation_repro  small reproductions of the leaks the tests above run
 *               into (see the test).
 *   random_crash  workers (shells) running random transactions of 1-8 file
 *               operations (txbegin/txcommit, txabort, txrun, txrun
 *               --retry, kill -9 of the bound process), non-member readers
 *               checking that the 3 files of a group always agree, the
 *               daemon killed at random moments; after each crash the tree
 *               is compared with a SQLite oracle of acknowledged commits
 *               (design below, before the code).  What readers see that
 *               they must not is counted and reported at the end, so that
 *               the crash checks run to the end in spite of it.
 *
 * Environment: TPFSD, TPFS_BIN, TX_BIN (meson; TX_BIN is put first in
 * PATH), and
 *   TP_TXCRASH_POINTS   crash points of random_crash (default 20)
 *   TP_TXCRASH_WORKERS  its concurrent shells (default 4, at most 8)
 *   TP_TXCRASH_SEED     its seed (default 1; printed with every failure)
 *   TP_TXCRASH_VERBOSE  one line per crash point
 *   TP_TXO_ROUNDS       orewrite: transactions (default 5)
 *   TP_TXO_REWRITES     orewrite: rewrites per transaction (default 5)
 */
#include "txclients.h"


tfs_mount g_m;
char g_self[PATH_MAX];
char g_log[400];
int g_step;
pid_t g_kids[MAX_KIDS]; /* process groups to kill at the end */
pid_t *g_scripts;      /* random_crash: the workers' running scripts (shared) */
int g_nscripts;

/* ---------------------------------------------------------------------- */
/* Small things                                                           */

double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void usleep_(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

/* splitmix64 */
uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

unsigned below(uint64_t *s, unsigned n) { return n ? (unsigned)(rnd(s) % n) : 0; }

/* Appends to the string buf (size bytes). */
void sb(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;
	if (len + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

/* A whole (small) file, NUL-terminated, in a malloc'ed buffer; NULL if it
 * cannot be read. */
char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	for (;;) {
		if (n + 1 >= cap)
			b = realloc(b, cap *= 2);
		size_t k = fread(b + n, 1, cap - n - 1, f);
		if (k == 0)
			break;
		n += k;
	}
	fclose(f);
	b[n] = 0;
	if (len)
		*len = n;
	return b;
}

int spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	int ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* The last max bytes of a file (static buffer). */
const char *tail_of(const char *path, size_t max)
{
	static char buf[4096];
	if (max >= sizeof buf)
		max = sizeof buf - 1;
	buf[0] = 0;
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(buf, sizeof buf, "(no %s)", path);
		return buf;
	}
	if (fseek(f, 0, SEEK_END) == 0) {
		long end = ftell(f);
		fseek(f, end > (long)max ? end - (long)max : 0, SEEK_SET);
	}
	size_t n = fread(buf, 1, max, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

const char *log_tail(void) { return tail_of(g_log, 2500); }

/* A path in the test's directory (rotating buffers). */
const char *dp(const char *rel) { return txtest_path(g_m.dir, rel); }

/* A path on the mount (rotating buffers). */
const char *mp(const char *rel) { return txtest_path(g_m.mnt, rel); }

void kid_add(pid_t p)
{
	for (int i = 0; i < MAX_KIDS; i++)
		if (!g_kids[i]) {
			g_kids[i] = p;
			return;
		}
}

void kid_del(pid_t p)
{
	for (int i = 0; i < MAX_KIDS; i++)
		if (g_kids[i] == p)
			g_kids[i] = 0;
}

static void fini(void)
{
	for (int i = 0; g_scripts && i < g_nscripts; i++)
		if (g_scripts[i] > 0)
			kill(-g_scripts[i], SIGKILL);
	for (int i = 0; i < MAX_KIDS; i++)
		if (g_kids[i] > 0) {
			kill(-g_kids[i], SIGKILL);
			kill(g_kids[i], SIGKILL);
			waitpid(g_kids[i], NULL, 0);
			g_kids[i] = 0;
		}
	if (g_m.pid)
		tfs_kill9(&g_m); /* the store, steps and log stay for a look */
}

TestSuite(tx_clients, .fini = fini);

/* ---------------------------------------------------------------------- */
/* Mount, steps, background shells                                        */

void need(const char *const *progs)
{
	for (; *progs; progs++) {
		char cmd[256];
		snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", *progs);
		cr_assert(system(cmd) == 0, "%s is not installed (scripts/setup installs it): this test needs it", *progs);
	}
}

void start(void)
{
	static char path[8192];
	const char *bin = getenv("TX_BIN");
	if (!g_self[0]) {
		ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
		g_self[n > 0 ? n : 0] = 0;
	}
	need_tools();
	cr_assert(tfs_start(&g_m, NULL, OPTS) == 0, "cannot make and mount a store (TPFSD, TPFS_BIN, /dev/fuse?)");
	snprintf(g_log, sizeof g_log, "%s/tx-clients.log", g_m.dir);
	cr_assert(mkdir(dp("steps"), 0755) == 0, "mkdir %s: %s", dp("steps"), strerror(errno));
	snprintf(path, sizeof path, "%s:%s", bin, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	setenv("PATH", path, 1);
	setenv("TPFS_MOUNT", g_m.mnt, 1);
	setenv("TXC_DIR", g_m.dir, 1);
	setenv("TX_SELF", g_self, 1);
	setenv("LC_ALL", "C", 1);
	setenv("P", dp("progress"), 1);
	setenv("G", dp("go"), 1);
	g_step = 0;
}

/* Writes the step script NN-name.sh; its path (static). */
const char *write_step(const char *name, const char *body)
{
	static char path[700];
	snprintf(path, sizeof path, "%s/steps/%02d-%s.sh", g_m.dir, ++g_step, name);
	FILE *f = fopen(path, "we");
	cr_assert(f, "cannot write %s: %s", path, strerror(errno));
	fprintf(f, "# step %s of test_tx_clients: /bin/sh -e, in %s\n# env: P=progress file, G=fifo, TXC_DIR=%s\n", name,
		g_m.mnt, g_m.dir);
	fputs(body, f);
	fputc('\n', f);
	cr_assert(fclose(f) == 0, "cannot write %s", path);
	return path;
}

pid_t spawn_step(const char *path, int own_group)
{
	char head[800];
	int lfd = open(g_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	cr_assert(lfd >= 0, "open %s: %s", g_log, strerror(errno));
	int hl = snprintf(head, sizeof head, "=== %s\n", strrchr(path, '/') + 1);
	if (write(lfd, head, (size_t)hl) < 0) {
		/* the log is for reading only */
	}
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (own_group)
			setpgid(0, 0);
		if (chdir(g_m.mnt) != 0)
			_exit(126);
		dup2(lfd, 1);
		dup2(lfd, 2);
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, 0);
		for (int fd = 3; fd < 1024; fd++) /* Criterion's pipes stay with it */
			close(fd);
		unsetenv("BXFI_MAP"); /* Criterion's, not the step's (TX_SELF is this binary) */
		execl("/bin/sh", "sh", "-e", path, (char *)NULL);
		_exit(127);
	}
	if (own_group)
		setpgid(pid, pid);
	close(lfd);
	return pid;
}

int wstatus(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

/* Runs a step in the mount (as the non-member); its exit status. */
int step(const char *name, const char *fmt, ...)
{
	static char body[16384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	pid_t pid = spawn_step(write_step(name, body), 0);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return wstatus(st);
}

void bg(job *j, const char *name, const char *fmt, ...)
{
	static char body[16384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	memset(j, 0, sizeof *j);
	snprintf(j->script, sizeof j->script, "%s", write_step(name, body));
	j->pid = spawn_step(j->script, 1);
	kid_add(j->pid);
}

/* Reaps the job if it ended; whether it did. */
int job_poll(job *j)
{
	int st;
	if (j->done)
		return 1;
	if (waitpid(j->pid, &st, WNOHANG) == j->pid) {
		j->done = 1;
		j->status = wstatus(st);
		kid_del(j->pid);
	}
	return j->done;
}

/* Waits for the job's end (at most secs): its status, or -1 after killing
 * its process group when it did not end in time. */
int job_wait(job *j, double secs)
{
	double t0 = now_s();
	while (!job_poll(j)) {
		if (now_s() - t0 > secs) {
			kill(-j->pid, SIGKILL);
			waitpid(j->pid, NULL, 0);
			kid_del(j->pid);
			j->done = 1;
			j->status = -1;
			return -1;
		}
		usleep_(1000);
	}
	return j->status;
}

/* Whether the progress file has the line. */
int progress_has(const char *line)
{
	char *t = slurp(dp("progress"), NULL);
	int found = 0;
	size_t ll = strlen(line);
	for (char *p = t; p && *p;) {
		char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		if (n == ll && !memcmp(p, line, ll)) {
			found = 1;
			break;
		}
		p = nl ? nl + 1 : p + n;
	}
	free(t);
	return found;
}

/* The first line of the progress file that starts with prefix, copied to
 * out (size bytes); whether there is one. */
int progress_prefix(const char *prefix, char *out, size_t size)
{
	char *t = slurp(dp("progress"), NULL);
	int found = 0;
	size_t pl = strlen(prefix);
	for (char *p = t; p && *p;) {
		char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		if (n >= pl && !memcmp(p, prefix, pl)) {
			found = 1;
			if (out && size)
				snprintf(out, size, "%.*s", (int)n, p);
			break;
		}
		p = nl ? nl + 1 : p + n;
	}
	free(t);
	return found;
}

/* Waits until the progress file has the line: 1; 0 when the job ended
 * first; -1 after secs. */
int wait_line(job *j, const char *line, double secs)
{
	double t0 = now_s();
	for (;;) {
		if (progress_has(line))
			return 1;
		if (job_poll(j))
			return progress_has(line);
		if (now_s() - t0 > secs)
			return -1;
		usleep_(500);
	}
}

void progress_reset(void)
{
	cr_assert(spit(dp("progress"), "") == 0, "cannot write %s", dp("progress"));
	unlink(dp("go"));
	cr_assert(mkfifo(dp("go"), 0644) == 0, "mkfifo %s: %s", dp("go"), strerror(errno));
}

/* Lets a shell blocked in `read x < $G` go on; whether one was there. */
int release(void)
{
	for (int i = 0; i < 2000; i++) {
		int fd = open(dp("go"), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = write(fd, "go\n", 3);
			close(fd);
			return n == 3;
		}
		if (errno != ENXIO)
			return 0;
		usleep_(1000); /* the reader has not opened it yet */
	}
	return 0;
}

/* Clean unmount, `tpfs check`, a new mount. */
void cycle(const char *when)
{
	int st = tfs_stop(&g_m);
	cr_assert(st == 0, "%s: tpfsd did not exit cleanly at unmount (status %d); store kept in %s", when, st, g_m.dir);
	st = tfs_check(&g_m);
	cr_assert(st == 0, "%s: `tpfs check %s` exited %d (expected 0: clean)", when, g_m.store, st);
	cr_assert(tfs_remount(&g_m, OPTS) == 0, "%s: cannot mount the store again", when);
}

/* kill -9 of the daemon, then the recovery mount, then cycle(). */
void crash_and_recover(const char *when)
{
	tfs_kill9(&g_m);
	cr_assert(tfs_remount(&g_m, OPTS) == 0, "%s: tpfsd could not mount the store after kill -9 (recovery failed?); "
						"store kept in %s",
		  when, g_m.dir);
}

void finish(void)
{
	int st = tfs_stop(&g_m);
	cr_assert(st == 0, "tpfsd did not exit cleanly at the final unmount (status %d)", st);
	st = tfs_check(&g_m);
	cr_assert(st == 0, "final `tpfs check %s` exited %d (expected 0: clean)", g_m.store, st);
	tfs_cleanup(&g_m);
}

/* `diff A B`, at most 3000 bytes of it (static). */
const char *diff_of(const char *a, const char *b)
{
	static char buf[3200];
	char cmd[1400];
	snprintf(cmd, sizeof cmd, "diff '%s' '%s' 2>&1 | head -c 3000", a, b);
	buf[0] = 0;
	FILE *p = popen(cmd, "r");
	if (!p)
		return "(diff failed)";
	size_t n = fread(buf, 1, sizeof buf - 1, p);
	buf[n] = 0;
	pclose(p);
	return buf;
}

/* The children of a process (from /proc/PID/task/PID/children) whose
 * command is comm: the first, or 0. */
pid_t child_named(pid_t parent, const char *comm)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
	char *t = slurp(path, NULL);
	pid_t found = 0;
	for (char *p = t, *save = NULL, *tok; p && (tok = strtok_r(p, " \n", &save)) != NULL; p = NULL) {
		char cp[96], c[64] = "", st[256] = "";
		pid_t k = (pid_t)atoi(tok);
		snprintf(cp, sizeof cp, "/proc/%d/comm", (int)k);
		FILE *f = fopen(cp, "re");
		if (f) {
			if (!fgets(c, sizeof c, f))
				c[0] = 0;
			fclose(f);
		}
		c[strcspn(c, "\n")] = 0;
		snprintf(cp, sizeof cp, "/proc/%d/stat", (int)k);
		if ((f = fopen(cp, "re")) != NULL) {
			if (!fgets(st, sizeof st, f))
				st[0] = 0;
			fclose(f);
		}
		char *r = strrchr(st, ')');
		if (!strcmp(c, comm) && r && r[1] == ' ' && r[2] != 'Z') {
			found = k;
			break;
		}
	}
	free(t);
	return found;
}

/* ---------------------------------------------------------------------- */

int main(int argc, char *argv[]) { return txtest_main(argc, argv, g_self, sizeof g_self, helper); }
