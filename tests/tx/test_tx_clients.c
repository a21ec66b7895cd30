/*
 * test_tx_clients -- real programs in transactions on real tpfs mounts
 * (issue 6, "Atomicity and durability"): RCS, an assembler-like rewrite of
 * a .o read by nm, make, and a randomized crash test of many shells with a
 * SQLite oracle.
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
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mount_util.h"
#include "txtest.h"

#define OPTS "quiet,cache_size=8M" /* small: quick mounts (MALLOC_PERTURB_ under meson fills the pool), and it evicts */
#define FUSE_SUPER_MAGIC 0x65735546
#define MAX_KIDS 64

static tfs_mount g_m;
static char g_self[PATH_MAX];
static char g_log[400];
static int g_step;
static pid_t g_kids[MAX_KIDS]; /* process groups to kill at the end */
static pid_t *g_scripts;      /* random_crash: the workers' running scripts (shared) */
static int g_nscripts;

/* ---------------------------------------------------------------------- */
/* Small things                                                           */

static double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usleep_(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

/* splitmix64 */
static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned below(uint64_t *s, unsigned n) { return n ? (unsigned)(rnd(s) % n) : 0; }

/* Appends to the string buf (size bytes). */
static void sb(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sb(char *buf, size_t size, const char *fmt, ...)
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
static char *slurp(const char *path, size_t *len)
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

static int spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	int ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* The last max bytes of a file (static buffer). */
static const char *tail_of(const char *path, size_t max)
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

static const char *log_tail(void) { return tail_of(g_log, 2500); }

/* A path in the test's directory (rotating buffers). */
static const char *dp(const char *rel)
{
	static char b[8][600];
	static int i;
	char *p = b[i++ % 8];
	snprintf(p, sizeof b[0], "%s/%s", g_m.dir, rel);
	return p;
}

/* A path on the mount (rotating buffers). */
static const char *mp(const char *rel)
{
	static char b[8][600];
	static int i;
	char *p = b[i++ % 8];
	snprintf(p, sizeof b[0], "%s/%s", g_m.mnt, rel);
	return p;
}

static void kid_add(pid_t p)
{
	for (int i = 0; i < MAX_KIDS; i++)
		if (!g_kids[i]) {
			g_kids[i] = p;
			return;
		}
}

static void kid_del(pid_t p)
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

static void need(const char *const *progs)
{
	for (; *progs; progs++) {
		char cmd[256];
		snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", *progs);
		cr_assert(system(cmd) == 0, "%s is not installed (scripts/setup installs it): this test needs it", *progs);
	}
}

static void start(void)
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
static const char *write_step(const char *name, const char *body)
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

/* A background job: a shell in its own process group. */
typedef struct job {
	pid_t pid;
	int done, status; /* exit status, or 128 + signal */
	char script[700];
} job;

static pid_t spawn_step(const char *path, int own_group)
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

static int wstatus(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

/* Runs a step in the mount (as the non-member); its exit status. */
static int step(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int step(const char *name, const char *fmt, ...)
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

#define STEP_OK(name, ...)                                                                                             \
	do {                                                                                                           \
		int st_ = step(name, __VA_ARGS__);                                                                     \
		cr_assert(st_ == 0, "step %02d-%s.sh exited %d (expected 0)\n--- %s (end; the store is kept) ---\n%s", \
			  g_step, name, st_, g_log, log_tail());                                                       \
	} while (0)

static void bg(job *j, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void bg(job *j, const char *name, const char *fmt, ...)
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
static int job_poll(job *j)
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
static int job_wait(job *j, double secs)
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
static int progress_has(const char *line)
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

/* Waits until the progress file has the line: 1; 0 when the job ended
 * first; -1 after secs. */
static int wait_line(job *j, const char *line, double secs)
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

static void progress_reset(void)
{
	cr_assert(spit(dp("progress"), "") == 0, "cannot write %s", dp("progress"));
	unlink(dp("go"));
	cr_assert(mkfifo(dp("go"), 0644) == 0, "mkfifo %s: %s", dp("go"), strerror(errno));
}

/* Lets a shell blocked in `read x < $G` go on; whether one was there. */
static int release(void)
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
static void cycle(const char *when)
{
	int st = tfs_stop(&g_m);
	cr_assert(st == 0, "%s: tpfsd did not exit cleanly at unmount (status %d); store kept in %s", when, st, g_m.dir);
	st = tfs_check(&g_m);
	cr_assert(st == 0, "%s: `tpfs check %s` exited %d (expected 0: clean)", when, g_m.store, st);
	cr_assert(tfs_remount(&g_m, OPTS) == 0, "%s: cannot mount the store again", when);
}

/* kill -9 of the daemon, then the recovery mount, then cycle(). */
static void crash_and_recover(const char *when)
{
	tfs_kill9(&g_m);
	cr_assert(tfs_remount(&g_m, OPTS) == 0, "%s: tpfsd could not mount the store after kill -9 (recovery failed?); "
						"store kept in %s",
		  when, g_m.dir);
}

static void finish(void)
{
	int st = tfs_stop(&g_m);
	cr_assert(st == 0, "tpfsd did not exit cleanly at the final unmount (status %d)", st);
	st = tfs_check(&g_m);
	cr_assert(st == 0, "final `tpfs check %s` exited %d (expected 0: clean)", g_m.store, st);
	tfs_cleanup(&g_m);
}

/* `diff A B`, at most 3000 bytes of it (static). */
static const char *diff_of(const char *a, const char *b)
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
static pid_t child_named(pid_t parent, const char *comm)
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
/* RCS                                                                    */

enum rcs_end {
	RCS_COMMIT,
	RCS_TXABORT,
	RCS_KILL_MEMBER,
	RCS_KILL_SHELL,
	RCS_KILL_SHELL_JOB,
	RCS_DAEMON_BEFORE,
	RCS_DAEMON_MIDWAY,
	RCS_DAEMON_PRECOMMIT,
};

static const char *const rcs_how[] = {
	"txcommit, then kill -9 of tpfsd",
	"txabort after 10 ci",
	"kill -9 of the member ci after 10 ci",
	"kill -9 of the bound shell (waiting in a builtin) after 10 ci",
	"kill -9 of the bound shell and its running ci after 10 ci",
	"kill -9 of tpfsd after txbegin, before any ci",
	"kill -9 of tpfsd after 10 ci (during the 11th)",
	"kill -9 of tpfsd after 20 ci, right before txcommit",
};

/* The whole work tree, canonically: every object's type, name, size,
 * mode, mtime, ctime and target, and every file's SHA-256. */
static void snap(const char *name)
{
	STEP_OK("snapshot", "cd work\n{ find . -printf '%%y %%p %%s %%m %%T@ %%C@ %%l\\n' | LC_ALL=C sort\n"
			    "  find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum; } > \"$TXC_DIR/%s\"",
		name);
}

/* How many of the 20 files are at revision 1.rev with the right text;
 * the description of what is there in state (DIR/rcs.state). */
static int rcs_count(int rev)
{
	STEP_OK("rcs-state", "cd work\nfor f in $(seq -w 1 20); do\n"
			     "  if [ -e RCS/f$f.txt,v ]; then\n"
			     "    echo \"f$f head=$(rlog -h f$f.txt | sed -n 's/^head: //p') "
			     "revisions=$(rlog f$f.txt | grep -c '^revision 1\\.') last=$(co -q -p f$f.txt | tail -1)\"\n"
			     "  else echo \"f$f no-rcs-file\"; fi\n"
			     "done > \"$TXC_DIR/rcs.state\"\necho \"RCS/: $(ls -A RCS | wc -l) entries\" >> \"$TXC_DIR/rcs.state\"");
	char *t = slurp(dp("rcs.state"), NULL);
	cr_assert(t, "no rcs.state");
	int n = 0;
	for (int f = 1; f <= 20; f++) {
		char want[200];
		snprintf(want, sizeof want, "f%02d head=1.%d revisions=%d last=file %02d revision %d\n", f, rev, rev, f, rev);
		n += strstr(t, want) != NULL;
	}
	if (n == 20 && !strstr(t, "RCS/: 20 entries"))
		n = -1; /* stray files in RCS/ */
	free(t);
	return n;
}

/* The first line of the progress file that starts with prefix, copied to
 * out (size bytes); whether there is one. */
static int progress_prefix(const char *prefix, char *out, size_t size)
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

/* One transaction of 20 ci (revision 1.rev), ended as how says; then the
 * check: all 20 revisions (commit) or none (the tree is the snapshot). */
static void rcs_round(enum rcs_end how, int rev, uint64_t *seed)
{
	job j;
	char pre[100] = "", mod[100] = "", mid[200] = "", end[100] = "", what[200], line[200];
	int r, n;
	int wait20 = how == RCS_COMMIT || how == RCS_DAEMON_PRECOMMIT || how == RCS_KILL_MEMBER ||
		     how == RCS_KILL_SHELL_JOB || how == RCS_DAEMON_MIDWAY;
	snprintf(what, sizeof what, "RCS check-in of revision 1.%d, ended by %s", rev, rcs_how[how]);
	if (how == RCS_DAEMON_BEFORE)
		snprintf(pre, sizeof pre, "echo wait0 >> \"$P\"; read x < \"$G\"\n");
	if (rev > 1)
		snprintf(mod, sizeof mod, "echo \"file $f revision %d\" >> f$f.txt\n  ", rev);
	if (how == RCS_TXABORT)
		snprintf(mid, sizeof mid, "if [ $n = 10 ]; then txabort; echo aborted >> \"$P\"; exit 0; fi\n");
	if (how == RCS_KILL_SHELL)
		snprintf(mid, sizeof mid, "if [ $n = 10 ]; then echo wait10 >> \"$P\"; read x < \"$G\"; fi\n");
	if (wait20) /* where the test looks, or kills the daemon; a missed kill stops here too */
		snprintf(end, sizeof end, "echo wait20 >> \"$P\"; read x < \"$G\"\n");

	snap("before.snap");
	progress_reset();
	bg(&j, "rcs-tx",
	   "cd work\ntxbegin\necho begun >> \"$P\"\n%s"
	   "n=0\nfor f in $(seq -w 1 20); do\n"
	   "  %sci -q -l -m'revision %d' -t-\"file $f\" f$f.txt || { echo \"ci-failed $f $?\" >> \"$P\"; exit 1; }\n"
	   "  n=$((n + 1)); echo \"ci $n\" >> \"$P\"\n"
	   "  %s"
	   "done\n"
	   "# a member sees its own revisions\n"
	   "for f in $(seq -w 1 20); do test \"$(rlog -h f$f.txt | sed -n 's/^head: //p')\" = 1.%d; done\n"
	   "echo member-sees-all >> \"$P\"\n%s"
	   "if txcommit; then echo committed >> \"$P\"; else echo \"commit-failed $?\" >> \"$P\"; exit 1; fi\n",
	   pre, mod, rev, mid, rev, end);

	switch (how) {
	case RCS_COMMIT:
		r = wait_line(&j, "wait20", 60);
		cr_assert(r == 1, "%s: the member shell did not reach txcommit (exit %d)\n--- log ---\n%s", what, j.status,
			  log_tail());
		/* isolation: all 20 done in the transaction, none visible outside */
		snap("during.snap");
		cr_assert(!strcmp(diff_of(dp("before.snap"), dp("during.snap")), ""),
			  "%s: a non-member sees uncommitted changes (20 ci done, txcommit not yet run): the tree "
			  "differs from before the transaction:\n%s",
			  what, diff_of(dp("before.snap"), dp("during.snap")));
		release();
		if (rev == 1) { /* visible at once after txcommit, then durable */
			r = job_wait(&j, 60);
			cr_assert(r == 0 && progress_has("committed"), "%s: txcommit did not succeed (shell exit %d)\n--- log ---\n%s",
				  what, r, log_tail());
			n = rcs_count(rev);
			cr_assert(n == 20, "%s: after txcommit returned 0, a non-member sees %d of 20 files at revision 1.%d "
					   "(expected all 20):\n%s",
				  what, n, rev, tail_of(dp("rcs.state"), 2000));
			crash_and_recover(what);
		} else { /* kill -9 the moment txcommit returns */
			r = wait_line(&j, "committed", 60);
			if (r == 1)
				tfs_kill9(&g_m);
			cr_assert(r == 1, "%s: txcommit did not succeed: %s\n--- log ---\n%s", what,
				  progress_prefix("commit-failed", line, sizeof line) ? line : "no answer", log_tail());
			job_wait(&j, 60);
			cr_assert(tfs_remount(&g_m, OPTS) == 0, "%s: no mount after kill -9 (recovery failed?)", what);
		}
		n = rcs_count(rev);
		cr_assert(n == 20, "%s: txcommit returned 0, then kill -9 of tpfsd; after recovery %d of 20 files are at "
				   "revision 1.%d (expected all 20: durable on return):\n%s",
			  what, n, rev, tail_of(dp("rcs.state"), 2000));
		cycle(what);
		n = rcs_count(rev);
		cr_assert(n == 20, "%s: after a clean remount %d of 20 files are at revision 1.%d (expected 20):\n%s", what, n,
			  rev, tail_of(dp("rcs.state"), 2000));
		return;
	case RCS_TXABORT:
		r = job_wait(&j, 60);
		cr_assert(r == 0 && progress_has("aborted") && progress_has("ci 10") && !progress_has("ci 11"),
			  "%s: the shell did not run 10 ci and txabort (exit %d)\n--- log ---\n%s", what, r, log_tail());
		break;
	case RCS_KILL_MEMBER: {
		pid_t last = 0;
		int kills = 0;
		r = wait_line(&j, "ci 10", 60);
		cr_assert(r == 1, "%s: the shell did not get to 10 ci (exit %d)\n--- log ---\n%s", what, j.status, log_tail());
		/* kill a running ci, a random moment into it; if it ended first, the next */
		while (!progress_prefix("ci-failed", NULL, 0) && !progress_has("wait20") && !job_poll(&j)) {
			pid_t c = child_named(j.pid, "ci");
			if (c > 0 && c != last) {
				usleep_(below(seed, 3000));
				if (kill(c, SIGKILL) == 0)
					kills++;
				last = c;
			}
			usleep_(100);
		}
		r = job_wait(&j, 60);
		cr_assert(progress_prefix("ci-failed", line, sizeof line),
			  "%s: no ci was caught running (%d kills sent; the shell got to the end of the loop)\n--- log ---\n%s",
			  what, kills, log_tail());
		cr_assert(strstr(line, " 137") && r == 1, "%s: the killed ci should exit 137 and the shell 1; got '%s', shell %d",
			  what, line, r);
		printf("tx_clients rcs: killed the member ci: %s\n", line);
		break;
	}
	case RCS_KILL_SHELL:
		r = wait_line(&j, "wait10", 60);
		cr_assert(r == 1, "%s: the shell did not get to 10 ci (exit %d)\n--- log ---\n%s", what, j.status, log_tail());
		kill(j.pid, SIGKILL);
		r = job_wait(&j, 60);
		cr_assert(r == 137, "%s: the shell exited %d, not 137 (killed)", what, r);
		break;
	case RCS_KILL_SHELL_JOB:
		r = wait_line(&j, "ci 10", 60);
		cr_assert(r == 1, "%s: the shell did not get to 10 ci (exit %d)\n--- log ---\n%s", what, j.status, log_tail());
		usleep_(below(seed, 3000));
		kill(-j.pid, SIGKILL);
		r = job_wait(&j, 60);
		cr_assert(r == 137, "%s: the shell exited %d, not 137 (killed)", what, r);
		break;
	case RCS_DAEMON_BEFORE:
	case RCS_DAEMON_MIDWAY:
	case RCS_DAEMON_PRECOMMIT: {
		const char *at = how == RCS_DAEMON_BEFORE ? "wait0" : how == RCS_DAEMON_MIDWAY ? "ci 10" : "wait20";
		r = wait_line(&j, at, 60);
		cr_assert(r == 1, "%s: the shell did not get to '%s' (exit %d)\n--- log ---\n%s", what, at, j.status,
			  log_tail());
		crash_and_recover(what);
		/* the shell goes on: on the dead mount (its working directory)
		 * every call fails, and txcommit must not succeed anywhere */
		double t0 = now_s();
		int released = 0;
		while (!job_poll(&j) && now_s() - t0 < 60) {
			if (!released && (progress_has("wait0") || progress_has("wait20")))
				released = release();
			usleep_(2000);
		}
		r = job_wait(&j, 1);
		cr_assert(!progress_has("committed"),
			  "%s: txcommit returned 0 for a transaction whose daemon was killed (and restarted) before it",
			  what);
		cr_assert(r != 0 && r != -1, "%s: the shell should fail after the daemon died; it exited %d\n--- log ---\n%s",
			  what, r, log_tail());
		if (how == RCS_DAEMON_PRECOMMIT) {
			cr_assert(progress_prefix("commit-failed", line, sizeof line), "%s: txcommit did not run", what);
			printf("tx_clients rcs: txcommit after the daemon restart: %s (expected non-zero)\n", line);
		}
		break;
	}
	}
	/* none of it: the tree is byte for byte what it was */
	snap("after.snap");
	n = rcs_count(rev);
	cr_assert(!strcmp(diff_of(dp("before.snap"), dp("after.snap")), ""),
		  "%s: expected none of the 20 revisions, but the tree changed (%d of 20 files are at revision 1.%d); "
		  "diff of before and after:\n%s\n--- rcs.state ---\n%s\n--- log ---\n%s",
		  what, n, rev, diff_of(dp("before.snap"), dp("after.snap")), tail_of(dp("rcs.state"), 1500), log_tail());
	if (how >= RCS_DAEMON_BEFORE) {
		cycle(what);
		snap("after2.snap");
		cr_assert(!strcmp(diff_of(dp("before.snap"), dp("after2.snap")), ""),
			  "%s: after a clean remount the tree differs from before the transaction:\n%s", what,
			  diff_of(dp("before.snap"), dp("after2.snap")));
	}
}

static void rcs_test(enum rcs_end how)
{
	static const char *const progs[] = {"ci", "co", "rlog", "find", "sha256sum", NULL};
	uint64_t seed = 0x7c5 + (uint64_t)how * 1000003u + (uint64_t)time(NULL);
	double t0 = now_s();
	need(progs);
	start();
	STEP_OK("rcs-setup", "mkdir -p work/RCS && cd work && for f in $(seq -w 1 20); do "
			     "echo \"file $f revision 1\" > f$f.txt; done");
	cycle("after the set-up"); /* durable: plain calls are lazy (commit_interval) */
	/* the initial check-in (the ,v files are made in the transaction) */
	rcs_round(how, 1, &seed);
	if (how != RCS_COMMIT) { /* now commit it, to end the next one on existing files */
		STEP_OK("rcs-initial", "cd work && txrun -- sh -ec 'for f in $(seq -w 1 20); do "
				       "ci -q -l -m\"revision 1\" -t-\"file $f\" f$f.txt; done'");
		int n = rcs_count(1);
		cr_assert(n == 20, "txrun of the initial check-in: %d of 20 files at revision 1.1:\n%s", n,
			  tail_of(dp("rcs.state"), 2000));
	}
	/* revision 1.2 of every file */
	rcs_round(how, 2, &seed);
	finish();
	printf("tx_clients rcs: %s: all-or-nothing held for the initial check-in and for revision 1.2 (%.1f s)\n",
	       rcs_how[how], now_s() - t0);
	fflush(stdout);
}

Test(tx_clients, rcs_commit, .timeout = 120) { rcs_test(RCS_COMMIT); }
Test(tx_clients, rcs_txabort, .timeout = 120) { rcs_test(RCS_TXABORT); }
Test(tx_clients, rcs_kill_member, .timeout = 120) { rcs_test(RCS_KILL_MEMBER); }
Test(tx_clients, rcs_kill_shell, .timeout = 120) { rcs_test(RCS_KILL_SHELL); }
Test(tx_clients, rcs_kill_shell_job, .timeout = 120) { rcs_test(RCS_KILL_SHELL_JOB); }
Test(tx_clients, rcs_kill_daemon_before, .timeout = 120) { rcs_test(RCS_DAEMON_BEFORE); }
Test(tx_clients, rcs_kill_daemon_midway, .timeout = 120) { rcs_test(RCS_DAEMON_MIDWAY); }
Test(tx_clients, rcs_kill_daemon_precommit, .timeout = 120) { rcs_test(RCS_DAEMON_PRECOMMIT); }

/* ---------------------------------------------------------------------- */
/* An assembler rewriting a .o in place while nm reads it                 */

/* test_tx_clients --helper rewrite SRC DST PIECE USLEEP: writes SRC over
 * DST as an assembler or linker does: open without O_TRUNC, ftruncate to
 * 0, a placeholder for the ELF header, the rest in PIECE-byte writes with
 * USLEEP microseconds between them, then the header last. */
static int helper_rewrite(int argc, char **argv)
{
	size_t len;
	if (argc != 4) {
		fprintf(stderr, "usage: --helper rewrite SRC DST PIECE USLEEP\n");
		return 2;
	}
	char *data = slurp(argv[0], &len);
	size_t piece = (size_t)atol(argv[2]), hdr = len < 64 ? len : 64;
	long us = atol(argv[3]);
	static const char zero[64];
	if (!data || !piece) {
		fprintf(stderr, "rewrite: cannot read %s\n", argv[0]);
		return 1;
	}
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, 0) != 0 || write(fd, zero, hdr) != (ssize_t)hdr) {
		fprintf(stderr, "rewrite: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	for (size_t off = hdr; off < len; off += piece) {
		size_t n = len - off < piece ? len - off : piece;
		if (write(fd, data + off, n) != (ssize_t)n) {
			fprintf(stderr, "rewrite: write %s at %zu: %s\n", argv[1], off, strerror(errno));
			return 1;
		}
		usleep_(us);
	}
	if (pwrite(fd, data, hdr, 0) != (ssize_t)hdr || close(fd) != 0) {
		fprintf(stderr, "rewrite: header of %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	free(data);
	return 0;
}

/* --helper ftrunc PATH TEXT: open without O_TRUNC, ftruncate 0, write TEXT. */
static int helper_ftrunc(int argc, char **argv)
{
	int fd = argc == 2 ? open(argv[0], O_WRONLY | O_CLOEXEC) : -1;
	size_t n = argc == 2 ? strlen(argv[1]) : 0;
	if (fd < 0 || ftruncate(fd, 0) != 0 || write(fd, argv[1], n) != (ssize_t)n || close(fd) != 0) {
		fprintf(stderr, "ftrunc: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}

/* --helper mapread PATH N: the first N bytes of PATH through a private
 * read-only mapping, on stdout. */
static int helper_mapread(int argc, char **argv)
{
	int fd = argc == 2 ? open(argv[0], O_RDONLY | O_CLOEXEC) : -1;
	size_t n = argc == 2 ? (size_t)atol(argv[1]) : 0;
	if (fd < 0 || !n)
		return 1;
	char *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "mapread: mmap: %s\n", strerror(errno));
		return 1;
	}
	return fwrite(p, 1, n, stdout) == n ? 0 : 1;
}

static int helper(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "rewrite"))
		return helper_rewrite(argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "ftrunc"))
		return helper_ftrunc(argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "mapread"))
		return helper_mapread(argc - 1, argv + 1);
	fprintf(stderr, "test_tx_clients --helper: unknown request %s\n", argc ? argv[0] : "(none)");
	return 2;
}

/* Two objects with different symbol tables, built on the host: old.o
 * (a1..a200) and new.o (b1..b300), each function with a 1 KiB table, so
 * 270 and 410 KB; their nm output in old.nm and new.nm. */
static void make_objects(void)
{
	char p[600];
	cr_assert(mkdir(dp("obj"), 0755) == 0, "mkdir obj: %s", strerror(errno));
	for (int v = 0; v < 2; v++) {
		snprintf(p, sizeof p, "%s/obj/%s.c", g_m.dir, v ? "new" : "old");
		FILE *f = fopen(p, "we");
		cr_assert(f, "cannot write %s", p);
		int n = v ? 300 : 200;
		for (int i = 1; i <= n; i++) {
			fprintf(f, "int %c%d(int x)\n{\n\tstatic const int t[256] = {", v ? 'b' : 'a', i);
			for (int k = 0; k < 256; k++)
				fprintf(f, "%d,", (i * k + n) % 997);
			fprintf(f, "};\n\treturn t[x & 255] * %d;\n}\n", i);
		}
		cr_assert(fclose(f) == 0, "cannot write %s", p);
	}
	STEP_OK("objects", "cd \"$TXC_DIR/obj\" && for v in old new; do gcc -O0 -g -c -o $v.o $v.c && nm $v.o > $v.nm; done\n"
			   "test \"$(wc -l < old.nm)\" -ge 200 && test \"$(wc -l < new.nm)\" -ge 300 && ! cmp -s old.nm new.nm");
}

typedef struct nm_reader {
	pid_t pid;
	int *stop; /* shared */
} nm_reader;

/* The non-member: nm target.o in a loop until *stop; each run as a line
 * "START END CLASS STATUS" in DIR/nm.runs (CLASS O: exactly old.nm, N:
 * exactly new.nm, X: anything else, its output kept in nm-bad-K.txt). */
static void nm_loop(int *stop)
{
	size_t lo, ln;
	char *old_nm = slurp(dp("obj/old.nm"), &lo), *new_nm = slurp(dp("obj/new.nm"), &ln);
	FILE *runs = fopen(dp("nm.runs"), "we");
	if (!old_nm || !new_nm || !runs || chdir(g_m.mnt) != 0)
		_exit(3);
	static char out[1 << 20];
	for (int k = 0; !__atomic_load_n(stop, __ATOMIC_ACQUIRE); k++) {
		int pfd[2];
		if (pipe(pfd) != 0)
			_exit(3);
		double t0 = wall_s();
		pid_t pid = fork();
		if (pid == 0) {
			dup2(pfd[1], 1);
			dup2(pfd[1], 2);
			close(pfd[0]);
			close(pfd[1]);
			execlp("nm", "nm", "target.o", (char *)NULL);
			_exit(127);
		}
		close(pfd[1]);
		size_t n = 0;
		ssize_t r;
		while ((r = read(pfd[0], out + n, sizeof out - 1 - n)) > 0)
			n += (size_t)r;
		close(pfd[0]);
		int st;
		waitpid(pid, &st, 0);
		double t1 = wall_s();
		out[n] = 0;
		char cls = 'X';
		if (wstatus(st) == 0 && n == lo && !memcmp(out, old_nm, n))
			cls = 'O';
		else if (wstatus(st) == 0 && n == ln && !memcmp(out, new_nm, n))
			cls = 'N';
		else {
			char bad[600];
			snprintf(bad, sizeof bad, "%s/nm-bad-%d.txt", g_m.dir, k);
			spit(bad, out);
		}
		fprintf(runs, "%.6f %.6f %c %d %d\n", t0, t1, cls, wstatus(st), k);
		fflush(runs);
	}
	fclose(runs);
	_exit(0);
}

static void nm_start(nm_reader *r)
{
	r->stop = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(r->stop != MAP_FAILED, "mmap: %s", strerror(errno));
	*r->stop = 0;
	fflush(NULL);
	r->pid = fork();
	cr_assert(r->pid >= 0, "fork: %s", strerror(errno));
	if (r->pid == 0)
		nm_loop(r->stop);
	kid_add(r->pid);
}

static void nm_stop(nm_reader *r)
{
	int st;
	__atomic_store_n(r->stop, 1, __ATOMIC_RELEASE);
	waitpid(r->pid, &st, 0);
	kid_del(r->pid);
	munmap(r->stop, sizeof(int));
	cr_assert(wstatus(st) == 0, "the nm reader failed to start (status %d)", wstatus(st));
}

typedef struct owin {
	double cs, ce; /* txcommit began, returned (CLOCK_REALTIME) */
	char after;    /* the committed state after it: 'O' or 'N' */
} owin;

/* A sequence of transactions each rewriting target.o `rewrites` times,
 * alternately with the other object and its own (ending with the other),
 * committed or aborted in turn, with nm running all along. */
static void orewrite_test(int member_nm)
{
	static const char *const progs[] = {"nm", "gcc", "cmp", "date", NULL};
	unsigned rounds = (unsigned)env_u64("TP_TXO_ROUNDS", 5), rewrites = (unsigned)env_u64("TP_TXO_REWRITES", 5);
	owin w[64];
	int nw = 0;
	char committed = 'O';
	nm_reader rd;
	double t0 = now_s();
	unsigned n_commit = 0, n_abort = 0;
	static char member_bad[1200], nonmember_bad[3000];
	member_bad[0] = nonmember_bad[0] = 0;
	if (rounds > 60)
		rounds = 60;
	need(progs);
	start();
	make_objects();
	STEP_OK("o-initial", "cp \"$TXC_DIR/obj/old.o\" target.o && cmp target.o \"$TXC_DIR/obj/old.o\"");
	cycle("after the set-up");
	nm_start(&rd);
	msleep(300); /* a few runs on the committed state, caches warm */
	for (unsigned r = 0; r < rounds; r++) {
		int commit = r % 2 == 0;
		char to = committed == 'O' ? 'N' : 'O';
		const char *tos = to == 'O' ? "old" : "new", *froms = to == 'O' ? "new" : "old";
		job j;
		char line[200];
		progress_reset();
		bg(&j, "o-rewrite",
		   "txbegin\n"
		   "i=1\nwhile [ $i -le %u ]; do\n"
		   "  if [ $(( (%u - i) %% 2 )) = 0 ]; then v=%s; else v=%s; fi\n"
		   "  \"$TX_SELF\" --helper rewrite \"$TXC_DIR/obj/$v.o\" target.o 4096 300\n"
		   "  cmp -s target.o \"$TXC_DIR/obj/$v.o\" || echo \"member-reads-other $i $v\" >> \"$P\"\n"
		   "%s"
		   "  echo \"rewrite $i $v\" >> \"$P\"; i=$((i + 1))\n"
		   "done\n"
		   "echo \"end-start $(date +%%s.%%N)\" >> \"$P\"\n"
		   "%s\n"
		   "echo \"end-done $(date +%%s.%%N)\" >> \"$P\"\n",
		   rewrites, rewrites, tos, froms,
		   member_nm ? "  nm target.o > \"$TXC_DIR/member.nm\" 2>&1 || true\n"
			       "  cmp -s \"$TXC_DIR/member.nm\" \"$TXC_DIR/obj/$v.nm\" || "
			       "{ echo \"member-nm-other $i $v\" >> \"$P\"; cp \"$TXC_DIR/member.nm\" \"$TXC_DIR/member-nm-bad.txt\"; }\n"
				     : "",
		   commit ? "txcommit" : "txabort");
		int st = job_wait(&j, 120);
		if (progress_prefix("member-reads-other", line, sizeof line)) {
			nm_stop(&rd);
			cr_assert_fail("round %u: a member's read() of target.o after its own rewrite differs from what it "
				       "wrote (%s): a member must see its own writes",
				       r, line);
		}
		if (progress_prefix("member-nm-other", line, sizeof line) && !member_bad[0]) {
			char *t = slurp(dp("member-nm-bad.txt"), NULL);
			snprintf(member_bad, sizeof member_bad,
				 "round %u (%s): a member's nm (BFD maps the file MAP_PRIVATE) right after its own rewrite "
				 "does not show what it wrote ('%s'); its output:\n%.600s",
				 r, commit ? "committed" : "aborted", line, t ? t : "?");
			free(t);
		}
		if (st != 0)
			nm_stop(&rd);
		cr_assert(st == 0, "round %u: the member shell exited %d (expected 0 after %s)\n--- log ---\n%s", r, st,
			  commit ? "txcommit" : "txabort", log_tail());
		{ /* every round's progress, for a look after a failure */
			char *t = slurp(dp("progress"), NULL);
			FILE *f = fopen(dp("rounds.log"), "ae");
			if (f && t)
				fprintf(f, "round %u (%s, target %s)\n%s", r, commit ? "txcommit" : "txabort", tos, t);
			if (f)
				fclose(f);
			free(t);
		}
		if (commit) {
			char a[100], b[100];
			cr_assert(progress_prefix("end-start ", a, sizeof a) && progress_prefix("end-done ", b, sizeof b));
			w[nw].cs = atof(a + 10);
			w[nw].ce = atof(b + 9);
			w[nw].after = to;
			nw++;
			committed = to;
			n_commit++;
		} else {
			n_abort++;
		}
		msleep(150); /* runs after the end */
	}
	nm_stop(&rd);

	/* every run: exactly the old or the new table, the committed one */
	size_t len;
	char *runs = slurp(dp("nm.runs"), &len);
	cr_assert(runs, "no nm.runs");
	unsigned total = 0, strict = 0, n_old = 0, n_new = 0, n_bad = 0, n_wrong = 0, n_bad_overlap = 0;
	double longest = 0;
	for (char *p = runs, *save = NULL, *ln_; (ln_ = strtok_r(p, "\n", &save)) != NULL; p = NULL) {
		double s, e;
		char cls;
		int st, k;
		cr_assert(sscanf(ln_, "%lf %lf %c %d %d", &s, &e, &cls, &st, &k) == 5, "bad line in nm.runs: %s", ln_);
		total++;
		if (e - s > longest)
			longest = e - s;
		int lo = 0, hi = 0;
		for (int i = 0; i < nw; i++) {
			lo += w[i].ce < s;
			hi += w[i].cs <= e;
		}
		if (cls == 'X') {
			char bad[100], when[300] = "no commit ran during it";
			snprintf(bad, sizeof bad, "nm-bad-%d.txt", k);
			n_bad++;
			n_bad_overlap += lo != hi;
			if (lo != hi)
				snprintf(when, sizeof when,
					 "it overlapped the commit that changed target.o from the %s to the %s object "
					 "(nm ran from %.3f to %.3f s, txcommit from %.3f to %.3f s, relative to the nm start)",
					 w[lo].after == 'O' ? "new" : "old", w[lo].after == 'O' ? "old" : "new", 0.0, e - s,
					 w[lo].cs - s, w[lo].ce - s);
			if (!nonmember_bad[0])
				snprintf(nonmember_bad, sizeof nonmember_bad,
					 "nm run %d (a non-member) exited %d%s and printed neither the complete old nor the "
					 "complete new symbol table; %s; its output (%s):\n%.800s",
					 k, st, st == 128 + SIGBUS ? " (SIGBUS)" : "", when, dp(bad), tail_of(dp(bad), 800));
			continue;
		}
		/* the states from S_lo to S_hi were possible during the run */
		int ok = 0;
		for (int i = lo; i <= hi; i++) {
			char want = i == 0 ? 'O' : w[i - 1].after;
			ok |= want == cls;
		}
		strict += lo == hi;
		n_old += cls == 'O';
		n_new += cls == 'N';
		if (!ok) {
			n_wrong++;
			if (!nonmember_bad[0])
				snprintf(nonmember_bad, sizeof nonmember_bad,
					 "nm run %d (a non-member) printed the complete %s table, but the committed object "
					 "was the %s one for the whole run (%d commits before it, %d by its end): a "
					 "non-member saw an uncommitted rewrite (or missed a committed one)",
					 k, cls == 'O' ? "old" : "new",
					 (lo == 0 ? 'O' : w[lo - 1].after) == 'O' ? "old" : "new", lo, hi);
		}
	}
	free(runs);
	cr_assert(!nonmember_bad[0] && !member_bad[0],
		  "%u of %u nm runs by a non-member printed neither table (%u of them overlapped a commit), %u printed a "
		  "table not committed at the time%s.\nFirst non-member failure: %s\nFirst member failure: %s\n(store, nm.runs and nm-bad-*.txt kept "
		  "in %s)",
		  n_bad, total, n_bad_overlap, n_wrong, member_nm ? "; the member ran nm (a MAP_PRIVATE mapping) after each rewrite" : "",
		  nonmember_bad[0] ? nonmember_bad : "none", member_bad[0] ? member_bad : "none", g_m.dir);
	cr_assert(total >= 20, "only %u nm runs happened (expected dozens)", total);
	cr_assert(longest < 5.0, "an nm run by a non-member took %.2f s: it waited for the transaction", longest);

	/* then kill -9 of the daemon in the middle of a rewrite: the committed
	 * object after recovery */
	{
		job j;
		char want[600];
		progress_reset();
		bg(&j, "o-rewrite-crash",
		   "txbegin\necho begun >> \"$P\"\n"
		   "while :; do \"$TX_SELF\" --helper rewrite \"$TXC_DIR/obj/%s.o\" target.o 4096 300; "
		   "echo rewrote >> \"$P\"; done\n",
		   committed == 'O' ? "new" : "old");
		cr_assert(wait_line(&j, "rewrote", 60) == 1, "the crash round's member did not rewrite\n%s", log_tail());
		msleep(20);
		crash_and_recover("orewrite: kill -9 of tpfsd during a rewrite");
		kill(-j.pid, SIGKILL);
		job_wait(&j, 10);
		snprintf(want, sizeof want, "%s/obj/%s.o", g_m.dir, committed == 'O' ? "old" : "new");
		STEP_OK("o-after-crash", "cmp target.o '%s' && nm target.o | cmp - '%s/obj/%s.nm'", want, g_m.dir,
			committed == 'O' ? "old" : "new");
		cycle("orewrite: after the crash");
		STEP_OK("o-after-cycle", "cmp target.o '%s'", want);
	}
	finish();
	printf("tx_clients orewrite%s: %u transactions (%u committed, %u aborted) of %u rewrites each, + 1 killed by a "
	       "daemon crash; %u nm runs by a non-member (%u old, %u new; %u wholly inside one committed state), every "
	       "one complete and committed; longest nm %.3f s (%.1f s)\n",
	       member_nm ? " (member runs nm too)" : "", rounds, n_commit, n_abort, rewrites, total, n_old, n_new, strict, longest, now_s() - t0);
	fflush(stdout);
}

/* The issue's scenario: the member only writes (and checks with read()). */
Test(tx_clients, orewrite, .timeout = 300) { orewrite_test(0); }

/* The member also runs nm on its own output after each rewrite: BFD maps
 * the object MAP_PRIVATE, through the page cache the kernel shares with
 * the non-member's nm (DESIGN.md 3: "a private one reads the transaction's
 * view"). */
Test(tx_clients, orewrite_member_nm, .timeout = 300) { orewrite_test(1); }

/* ---------------------------------------------------------------------- */
/* The isolation leaks the tests above run into, one at a time            */

/* Small reproductions (each one's count is printed):
 *   1. a member truncates and rewrites t.txt (O_TRUNC opens and
 *      ftruncate, 20 times, then txabort) while a non-member reads it in a
 *      loop, through a descriptor kept open and through fresh opens: it
 *      must read "T0\n" every time (random_crash's readers, nm's "file
 *      format not recognized" in orewrite);
 *   2. a non-member maps a committed 20000-byte file; a member truncates it
 *      to 0 and writes 100 bytes (uncommitted); the non-member touches page
 *      3 of its mapping: it must read the committed bytes, not die of
 *      SIGBUS (nm's SIGBUS in orewrite);
 *   3. a member writes m.txt and maps it MAP_PRIVATE (as nm does); a
 *      non-member then reads m.txt: it must see the committed bytes
 *      (orewrite_member_nm);
 *   4. 60 transactions each write g/a, g/b, g/c and commit; a non-member
 *      reads them through descriptors kept open, in the order c, b, a: as
 *      the values grow, a and b must never be older than the c read
 *      before them (random_crash's group disagreements).
 * All four are checked; the failure lists each one that leaked. */
Test(tx_clients, isolation_repro, .timeout = 120)
{
	static char fails[4000];
	job j;
	char buf[64];
	double t0 = now_s();
	fails[0] = 0;
	start();
	STEP_OK("iso-setup", "echo T0 > t.txt && head -c 20000 /dev/zero | tr '\\000' c > big.bin && "
			     "printf 'COMMITTED-%%05000d' 0 > m.txt");
	cycle("after the set-up");

	/* 1 */
	progress_reset();
	bg(&j, "iso-truncate", "txbegin\nfor i in $(seq 10); do\n  printf \"T$i\\n\" > t.txt; sleep 0.05\n"
			       "  \"$TX_SELF\" --helper ftrunc t.txt \"U$i\\n\"; sleep 0.05\ndone\ntxabort\n");
	uint64_t reads = 0, bad_kept = 0, bad_fresh = 0;
	char first[200] = "";
	int kfd = open(mp("t.txt"), O_RDONLY | O_CLOEXEC);
	cr_assert(kfd >= 0, "open t.txt: %s", strerror(errno));
	while (!job_poll(&j)) {
		for (int pass = 0; pass < 2; pass++) {
			int fd = pass ? open(mp("t.txt"), O_RDONLY | O_CLOEXEC) : kfd;
			ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
			if (pass && fd >= 0)
				close(fd);
			buf[n > 0 ? n : 0] = 0;
			reads++;
			if (n != 3 || memcmp(buf, "T0\n", 3)) {
				*(pass ? &bad_fresh : &bad_kept) += 1;
				if (!first[0])
					snprintf(first, sizeof first, "'%s' (%zd bytes, %s)", buf, n,
						 pass ? "a fresh open" : "a descriptor kept open");
			}
		}
	}
	close(kfd);
	cr_assert(j.status == 0, "the member script failed (%d)\n%s", j.status, log_tail());
	printf("tx_clients isolation_repro 1: %" PRIu64 " non-member reads during 20 uncommitted truncations: %" PRIu64
	       " through the kept descriptor and %" PRIu64 " through fresh opens did not read the committed 'T0\\n'%s%s\n",
	       reads, bad_kept, bad_fresh, first[0] ? "; the first: " : "", first);
	if (bad_kept || bad_fresh)
		sb(fails, sizeof fails,
		   "1. a member's uncommitted truncation is visible to a non-member: %" PRIu64 " of %" PRIu64
		   " reads got %s instead of the committed 'T0\\n'\n",
		   bad_kept + bad_fresh, reads, first);

	/* 2 */
	{
		int pfd[2], qfd[2], st;
		cr_assert(pipe(pfd) == 0 && pipe(qfd) == 0);
		fflush(NULL);
		pid_t c = fork();
		if (c == 0) { /* the non-member with a mapping */
			char x;
			int fd = open(mp("big.bin"), O_RDONLY | O_CLOEXEC);
			char *p = fd >= 0 ? mmap(NULL, 20000, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
			if (p == MAP_FAILED)
				_exit(3);
			if (write(pfd[1], "m", 1) != 1 || read(qfd[0], &x, 1) != 1)
				_exit(4);
			_exit(p[12288] == 'c' ? 0 : 5);
		}
		kid_add(c);
		cr_assert(read(pfd[0], buf, 1) == 1, "the mapping child did not map big.bin");
		progress_reset();
		bg(&j, "iso-mmap", "txbegin\n\"$TX_SELF\" --helper ftrunc big.bin \"$(head -c 100 /dev/zero | tr '\\000' x)\"\n"
				   "echo truncated >> \"$P\"; read x < \"$G\"\ntxabort\n");
		cr_assert(wait_line(&j, "truncated", 30) == 1, "the member did not truncate\n%s", log_tail());
		cr_assert(write(qfd[1], "t", 1) == 1);
		waitpid(c, &st, 0);
		kid_del(c);
		release();
		job_wait(&j, 30);
		printf("tx_clients isolation_repro 2: a non-member touching its mapping of a committed 20000-byte file "
		       "after a member's uncommitted truncation: %s\n",
		       wstatus(st) == 0 ? "read the committed bytes" : wstatus(st) == 128 + SIGBUS ? "SIGBUS" : "failed");
		if (wstatus(st) != 0)
			sb(fails, sizeof fails,
			   "2. a non-member's mapping of a committed 20000-byte file, touched at page 3 after a member's "
			   "uncommitted ftruncate(0) + 100-byte write: %s (status %d), not the committed bytes\n",
			   wstatus(st) == 128 + SIGBUS ? "SIGBUS" : "wrong data", wstatus(st));
		close(pfd[0]);
		close(pfd[1]);
		close(qfd[0]);
		close(qfd[1]);
	}

	/* 3 */
	progress_reset();
	bg(&j, "iso-mapleak", "txbegin\nprintf 'MEMBER----%%05000d' 0 > m.txt\n"
			      "\"$TX_SELF\" --helper mapread m.txt 10 > \"$TXC_DIR/member-map.txt\"\n"
			      "echo mapped >> \"$P\"; read x < \"$G\"\ntxabort\n");
	cr_assert(wait_line(&j, "mapped", 30) == 1, "the member did not map m.txt\n%s", log_tail());
	char *nm_view = NULL;
	{
		int fd = open(mp("m.txt"), O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? pread(fd, buf, 10, 0) : -1;
		buf[n > 0 ? n : 0] = 0;
		if (fd >= 0)
			close(fd);
		nm_view = strdup(buf);
	}
	release();
	job_wait(&j, 30);
	char *member_view = slurp(dp("member-map.txt"), NULL);
	printf("tx_clients isolation_repro 3: a member's private mapping read '%s'; then a non-member read '%s' "
	       "(committed: 'COMMITTED-')\n",
	       member_view ? member_view : "?", nm_view);
	if (strcmp(nm_view, "COMMITTED-"))
		sb(fails, sizeof fails,
		   "3. after a member mapped m.txt MAP_PRIVATE (reading its uncommitted 'MEMBER----'), a non-member's "
		   "read() returned '%s', not the committed 'COMMITTED-'\n",
		   nm_view);
	free(nm_view);
	free(member_view);
	/* 4. commits of a group of three files, read by a non-member through
	 * descriptors kept open (warm caches) in the order c, b, a: tokens
	 * grow, so a must never be older than the c read before it */
	{
		STEP_OK("iso-group", "mkdir g && for f in a b c; do echo 0 > g/$f; done");
		int fa = open(mp("g/a"), O_RDONLY | O_CLOEXEC), fb = open(mp("g/b"), O_RDONLY | O_CLOEXEC),
		    fc = open(mp("g/c"), O_RDONLY | O_CLOEXEC);
		cr_assert(fa >= 0 && fb >= 0 && fc >= 0, "open g/*: %s", strerror(errno));
		progress_reset();
		bg(&j, "iso-group-commits", "for i in $(seq 1 60); do\n  txrun -- sh -c \"echo $i > g/a; echo $i > g/b; echo $i > g/c\"\n"
					    "  sleep 0.01\ndone\n");
		uint64_t rounds = 0, torn = 0, empty = 0;
		char tfirst[200] = "";
		while (!job_poll(&j)) {
			char x[3][32];
			int fdv[3] = {fc, fb, fa};
			for (int k = 0; k < 3; k++) {
				ssize_t n = pread(fdv[k], x[k], sizeof x[k] - 1, 0);
				x[k][n > 0 ? n : 0] = 0;
			}
			rounds++;
			long c = atol(x[0]), b = atol(x[1]), a = atol(x[2]);
			int whole = 1;
			for (int k = 0; k < 3; k++)
				whole &= x[k][0] >= '0' && x[k][0] <= '9' && x[k][strlen(x[k]) - 1] == '\n';
			if (!whole)
				empty++;
			else if (a < c || b < c) {
				torn++;
				if (!tfirst[0])
					snprintf(tfirst, sizeof tfirst, "c=%ld then b=%ld then a=%ld", c, b, a);
			}
		}
		close(fa);
		close(fb);
		close(fc);
		cr_assert(j.status == 0, "the committing script failed (%d)\n%s", j.status, log_tail());
		printf("tx_clients isolation_repro 4: %" PRIu64 " reads of g/c, g/b, g/a (descriptors kept open) during 60 "
		       "commits of all three: %" PRIu64 " saw a commit in c but an older a or b%s%s (and %" PRIu64
		       " read an empty or partial file: the truncations of 1)\n",
		       rounds, torn, tfirst[0] ? "; the first: " : "", tfirst, empty);
		if (torn)
			sb(fails, sizeof fails,
			   "4. a commit of g/a, g/b, g/c is not atomic for a non-member with warm caches: %" PRIu64 " of %" PRIu64
			   " reads in the order c, b, a saw the commit in c and then an older a or b (%s)\n",
			   torn, rounds, tfirst);
	}
	STEP_OK("iso-after", "test \"$(cat t.txt)\" = T0 && test \"$(head -c 10 m.txt)\" = COMMITTED- && "
			     "test \"$(stat -c %%s big.bin)\" = 20000");
	cr_assert(!fails[0], "non-members saw uncommitted state:\n%s", fails);
	finish();
	printf("tx_clients isolation_repro: no leak (%.1f s)\n", now_s() - t0);
}

/* ---------------------------------------------------------------------- */
/* make in a transaction                                                  */

static void put(const char *rel, const char *text)
{
	cr_assert(spit(mp(rel), text) == 0, "write %s: %s", mp(rel), strerror(errno));
}

/* The tree of proj/ as a non-member sees it (file DIR/name). */
static void proj_snap(const char *name)
{
	STEP_OK("proj-snapshot", "cd proj\n{ find . -printf '%%y %%p %%s %%m %%T@ %%C@\\n' | LC_ALL=C sort\n"
				 "  find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum; } > \"$TXC_DIR/%s\"",
		name);
}

static void proj_same(const char *a, const char *b, const char *what)
{
	const char *d = diff_of(dp(a), dp(b));
	cr_assert(!strcmp(d, ""), "%s: the tree differs from before (a non-member's view):\n%s\n--- log ---\n%s", what, d,
		  log_tail());
}

Test(tx_clients, make, .timeout = 300)
{
	static const char *const progs[] = {"make", "gcc", "find", "sha256sum", NULL};
	double t0 = now_s();
	job j;
	int st;
	need(progs);
	start();
	STEP_OK("proj", "mkdir proj");
	put("proj/util.h", "#ifndef UTIL_H\n#define UTIL_H\nint add(int, int);\nint mul(int, int);\nlong fib(int);\n"
			   "int sq(int);\n#endif\n");
	put("proj/add.c", "#include \"util.h\"\nint add(int a, int b) { return a + b; }\n");
	put("proj/mul.c", "#include \"util.h\"\nint mul(int a, int b) { return a * b; }\n");
	put("proj/fib.c", "#include \"util.h\"\nlong fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n");
	put("proj/sq.c", "#include \"util.h\"\nint sq(int a) { return mul(a, a) BROKEN; }\n");
	put("proj/main.c", "#include <stdio.h>\n#include \"util.h\"\n"
			   "int main(void)\n{\n\tprintf(\"%d %d %ld %d\\n\", add(2, 3), mul(4, 5), fib(20), sq(7));\n"
			   "\treturn 0;\n}\n");
	put("proj/Makefile", "CFLAGS = -O2 -Wall -Werror\nOBJS = main.o add.o mul.o fib.o sq.o\n"
			     "app: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n"
			     "%.o: %.c util.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n"
			     "clean:\n\trm -f app *.o\n.PHONY: clean\n");
	cycle("after the set-up");
	proj_snap("p0.snap");

	/* 1. a compile fails (sq.c): make -k builds every other object, then
	 * txrun returns make's status, and nothing of it is there */
	progress_reset();
	bg(&j, "make-fails", "txrun -- make -k -j2 -C proj > \"$TXC_DIR/make1.out\" 2>&1 || echo \"txrun $?\" >> \"$P\"\n"
			     "grep -q 'sq.c' \"$TXC_DIR/make1.out\"\n");
	st = job_wait(&j, 120);
	char line[200] = "";
	progress_prefix("txrun ", line, sizeof line);
	cr_assert(st == 0 && !strcmp(line, "txrun 2"),
		  "txrun -- make with a failing compile: expected make's status 2 from txrun, got '%s' (script %d)\n"
		  "--- make output ---\n%s",
		  line[0] ? line : "txrun 0", st, tail_of(dp("make1.out"), 1500));
	cr_assert(strstr(tail_of(dp("make1.out"), 4000), "-o add.o"), "make -k did not build the other objects:\n%s",
		  tail_of(dp("make1.out"), 1500));
	proj_snap("p1.snap");
	proj_same("p0.snap", "p1.snap", "after txrun -- make whose compile of sq.c failed (the other objects were built)");

	/* 2. fixed: the build commits; a non-member sees nothing of it before
	 * txrun commits, everything after */
	put("proj/sq.c", "#include \"util.h\"\nint sq(int a) { return mul(a, a); }\n");
	proj_snap("p2.snap");
	progress_reset();
	bg(&j, "make-ok", "txrun -- sh -ec 'make -j2 -C proj > \"$TXC_DIR/make2.out\" 2>&1; test \"$(proj/app)\" = \"5 20 6765 49\"; "
			  "echo built >> \"$P\"; read x < \"$G\"'\necho \"txrun $?\" >> \"$P\"\n");
	cr_assert(wait_line(&j, "built", 120) == 1, "txrun -- make of a correct project did not build (a member runs "
						    "app)\n--- make output ---\n%s\n--- log ---\n%s",
		  tail_of(dp("make2.out"), 1500), log_tail());
	proj_snap("p3.snap");
	proj_same("p2.snap", "p3.snap", "after make in txrun, before its commit");
	release();
	st = job_wait(&j, 60);
	cr_assert(st == 0 && progress_has("txrun 0"), "txrun -- make: expected 0, the script %d\n--- log ---\n%s", st,
		  log_tail());
	STEP_OK("make-visible", "cd proj && for f in main add mul fib sq; do test -s $f.o; done && "
				"test \"$(./app)\" = '5 20 6765 49' && make -q");
	crash_and_recover("make: kill -9 of tpfsd after txrun committed the build");
	STEP_OK("make-durable", "cd proj && for f in main add mul fib sq; do test -s $f.o; done && "
				"test \"$(./app)\" = '5 20 6765 49' && make -q");
	cycle("make: after the crash");

	/* 3. make clean in a transaction that fails after it: still built */
	proj_snap("p4.snap");
	st = step("clean-fails", "r=0; txrun -- sh -c 'make -C proj clean && test ! -e proj/app && exit 5' || r=$?; "
				 "test $r = 5");
	cr_assert(st == 0, "txrun -- (make clean; exit 5): expected status 5\n--- log ---\n%s", log_tail());
	proj_snap("p5.snap");
	proj_same("p4.snap", "p5.snap", "after txrun of make clean and exit 5");

	/* 4. txrun's statuses */
	STEP_OK("txrun-status",
		"set +e\n"
		"txrun -- sh -c 'echo x > s1.txt; exit 7'; r=$?; test $r = 7 || { echo \"exit 7: txrun gave $r\"; exit 1; }\n"
		"test ! -e s1.txt || { echo 's1.txt of an aborted txrun is there'; exit 1; }\n"
		"txrun --retry 3 -- sh -c 'echo y > s2.txt'; r=$?; test $r = 0 || { echo \"--retry 3, exit 0: txrun gave $r\"; exit 1; }\n"
		"test \"$(cat s2.txt)\" = y || { echo 's2.txt of a committed txrun is missing'; exit 1; }\n"
		"txrun --retry 2 -- false; r=$?; test $r = 1 || { echo \"--retry 2 -- false: txrun gave $r\"; exit 1; }\n"
		"txrun -- sh -c 'echo z > s3.txt; kill -9 $$'; r=$?; echo \"txrun of a CMD killed by SIGKILL: $r\"\n"
		"test $r != 0 && test ! -e s3.txt || { echo \"killed CMD: txrun gave $r, s3.txt: $(cat s3.txt 2>&1)\"; exit 1; }\n"
		"txrun -- sh -c 'txrun -- true'; r=$?; echo \"txrun inside txrun: $r\"\n");

	/* 5. deadlock victims: two txruns write x and y in opposite orders;
	 * their CMDs ignore errors and exit 0, so the victim's txrun learns
	 * it from the commit: 1 without --retry, 0 with it */
	STEP_OK("dl-setup", "echo 0 > x && echo 0 > y");
	cycle("before the deadlocks");
	for (int retry = 0; retry < 2; retry++) {
		job a, b;
		const char *rt = retry ? "--retry 3 " : "";
		progress_reset();
		bg(&a, "deadlock-a", "txrun %s-- sh -c 'echo a >> \"$P\"; printf A > x; sleep 0.5; printf A > y 2>/dev/null; exit 0' || r=$?\n"
				     "echo \"A ${r:-0}\" >> \"$P\"\n", rt);
		bg(&b, "deadlock-b", "txrun %s-- sh -c 'echo b >> \"$P\"; printf B > y; sleep 0.5; printf B > x 2>/dev/null; exit 0' || r=$?\n"
				     "echo \"B ${r:-0}\" >> \"$P\"\n", rt);
		int sa = job_wait(&a, 60), sb = job_wait(&b, 60);
		char la[50] = "", lb[50] = "";
		progress_prefix("A ", la, sizeof la);
		progress_prefix("B ", lb, sizeof lb);
		STEP_OK("dl-state", "echo \"$(cat x) $(cat y)\" > \"$TXC_DIR/xy\"");
		char *xy = slurp(dp("xy"), NULL);
		cr_assert(sa == 0 && sb == 0 && xy, "deadlock round %d: scripts %d %d", retry, sa, sb);
		if (!retry)
			cr_assert((!strcmp(la, "A 0") && !strcmp(lb, "B 1") && !strcmp(xy, "A A\n")) ||
					  (!strcmp(la, "A 1") && !strcmp(lb, "B 0") && !strcmp(xy, "B B\n")),
				  "two txruns in a deadlock, no --retry: expected one to exit 0 and the victim 1 (its commit "
				  "refused), x and y both the winner's; got '%s', '%s', x y = %s\n--- log ---\n%s",
				  la, lb, xy, log_tail());
		else
			cr_assert(!strcmp(la, "A 0") && !strcmp(lb, "B 0") && (!strcmp(xy, "A A\n") || !strcmp(xy, "B B\n")),
				  "two txruns --retry 3 in a deadlock: expected both to exit 0 (the victim retried), x and y "
				  "the same writer's; got '%s', '%s', x y = %s\n--- log ---\n%s",
				  la, lb, xy, log_tail());
		printf("tx_clients make: deadlock %s: %s, %s, x y = %s", retry ? "with --retry 3" : "without --retry", la,
		       lb, xy);
		free(xy);
	}
	finish();
	printf("tx_clients make: a failed build left the tree as it was, a good one committed whole and durable, txrun "
	       "statuses as documented (%.1f s)\n",
	       now_s() - t0);
	fflush(stdout);
}

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

/* ---------------------------------------------------------------------- */

int main(int argc, char *argv[]) { return txtest_main(argc, argv, g_self, sizeof g_self, helper); }
