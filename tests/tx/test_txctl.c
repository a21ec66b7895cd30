/*
 * test_txctl -- the transaction control channel and the transaction table
 * on real mounts (issue 24, items 7 and 3).
 *
 *   probe_changes_nothing       a size-0 getxattr of begin, commit or abort
 *                               (what getfattr sends first) carries nothing
 *                               out; getfattr's probe-then-ask runs each
 *                               once
 *   unknown_names_fail          a name under tpfs.tx. that is no request
 *                               fails with ENODATA, probe or not
 *   per_user_limit              -o max_user_tx=3: a fourth begin of one user
 *                               fails with EAGAIN, naming the option; another
 *                               user and root still begin; root lists and
 *                               aborts the user's transactions
 *   users_leave_root_a_reserve  users together get 7/8 of the table (80 here,
 *                               from the daemon's limit of open files); root
 *                               begins in the rest
 *   status_all_10000            txstatus --all, text and JSON, with 10,000
 *                               transactions open (listed in pages)
 *
 * The actors are processes forked by the test ("kids"): each binds itself
 * (tpfs.tx.begin.<its pid>, as the client library's begin does), reports
 * the answer on a pipe and sleeps until it is killed -- by its pid -- so its
 * transaction stays open.  A user other than root is a kid that set its
 * uid first.  Every failure is loud; nothing is skipped.
 *
 * Environment (meson): TPFSD, TPFS_BIN (mount_util), TX_BIN (the tools).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mount_util.h"
#include "txtest.h"

#define MAX_KIDS 10100

static tfs_mount g_m;
static pid_t g_kids[MAX_KIDS];
static int g_nkids;
static int g_pipe[2] = {-1, -1}; /* kids' answers: one line each */

static void kill_kids(void)
{
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] > 0)
			kill(g_kids[i], SIGKILL);
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] > 0)
			waitpid(g_kids[i], NULL, 0);
	g_nkids = 0;
}

static void fini(void)
{
	kill_kids();
	if (g_m.pid)
		tfs_kill9(&g_m);
	if (g_m.dir[0])
		tfs_cleanup(&g_m);
}

TestSuite(txctl, .fini = fini);

static void start(const char *opts)
{
	static char path[8192];
	const char *bin = getenv("TX_BIN");
	need_tools();
	cr_assert(tfs_start(&g_m, NULL, opts) == 0, "cannot make and mount a store with -o %s", opts ? opts : "(none)");
	cr_assert(chmod(g_m.dir, 0711) == 0); /* other users reach the mount point */
	snprintf(path, sizeof path, "%s:%s", bin, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	setenv("PATH", path, 1);
	setenv("LC_ALL", "C", 1);
	if (g_pipe[0] < 0)
		cr_assert(pipe2(g_pipe, O_CLOEXEC) == 0);
}

static void finish(void)
{
	kill_kids();
	int st = tfs_stop(&g_m);
	cr_assert(st == 0, "tpfsd did not exit cleanly at unmount (status %d)", st);
	cr_assert(tfs_check(&g_m) == 0, "tpfs check after the test");
	tfs_cleanup(&g_m);
	g_m.dir[0] = 0;
}

/* getxattr(mount, name) with a buffer of size bytes: the answer's errno
 * and its text in ans; or -errno when the call itself failed. */
static int ask(const char *name, size_t size, char *ans, size_t ansize)
{
	static char buf[65537];
	ssize_t n = getxattr(g_m.mnt, name, size ? buf : NULL, size);
	if (n < 0) {
		int e = errno;
		snprintf(ans, ansize, "(getxattr %s failed: %s)", name, strerror(e));
		return -e;
	}
	if (!size) {
		snprintf(ans, ansize, "(probe: %zd)", n);
		return (int)n; /* (the size a probe answered) */
	}
	buf[n] = 0;
	char *sp = strchr(buf, ' ');
	snprintf(ans, ansize, "%s", sp ? sp + 1 : "");
	size_t l = strlen(ans);
	while (l && (ans[l - 1] == '\n' || ans[l - 1] == ' '))
		ans[--l] = 0;
	return atoi(buf);
}

/* A kid of uid (0: root) that binds itself; its answer: the errno, and in
 * *id the transaction (0 if it failed), the text in msg.  It stays until
 * killed. */
static int kid_begin(uid_t uid, uint64_t *id, char *msg, size_t msgsize)
{
	cr_assert(g_nkids < MAX_KIDS);
	pid_t c = fork();
	cr_assert(c >= 0, "fork: %s", strerror(errno));
	if (c == 0) {
		char name[64], ans[512], line[600];
		if (uid && (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0))
			_exit(2);
		snprintf(name, sizeof name, "tpfs.tx.begin.%d", (int)getpid());
		int e = ask(name, 4096, ans, sizeof ans);
		int n = snprintf(line, sizeof line, "%d %s\n", e, ans);
		if (write(g_pipe[1], line, (size_t)n) != n) /* (atomic: under PIPE_BUF) */
			_exit(3);
		for (;;)
			pause();
	}
	g_kids[g_nkids++] = c;
	char line[600];
	size_t len = 0;
	while (len < sizeof line - 1) {
		ssize_t r = read(g_pipe[0], line + len, 1);
		cr_assert(r == 1, "kid %d (uid %u) sent no answer", (int)c, (unsigned)uid);
		if (line[len++] == '\n')
			break;
	}
	line[len ? len - 1 : 0] = 0;
	char *sp = strchr(line, ' ');
	snprintf(msg, msgsize, "%s", sp ? sp + 1 : "");
	int e = atoi(line);
	*id = e == 0 ? strtoull(msg, NULL, 10) : 0;
	return e;
}

/* A command's standard output (and error, 2>&1 in cmd), and its status. */
static char *run(const char *cmd, int *status)
{
	FILE *f = popen(cmd, "r");
	cr_assert(f, "popen %s", cmd);
	size_t cap = 1 << 20, len = 0, n;
	char *out = malloc(cap);
	cr_assert(out);
	while ((n = fread(out + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 4096) {
			cap *= 2;
			cr_assert(out = realloc(out, cap));
		}
	}
	out[len] = 0;
	*status = pclose(f);
	return out;
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* ---------------------------------------------------------------------- */

/* What getfattr(1) does (attr's getfattr, libattr): a size probe, then
 * the request with a buffer of the size the probe answered.  The
 * answer's errno (text in ans), or -errno of the failed call. */
static int getfattr_like(const char *name, char *ans, size_t ansize)
{
	ssize_t n = getxattr(g_m.mnt, name, NULL, 0);
	if (n < 0)
		return -errno;
	char *buf = malloc((size_t)n + 1);
	if (!buf)
		return -ENOMEM;
	ssize_t m = getxattr(g_m.mnt, name, buf, (size_t)n);
	if (m < 0) {
		int e = errno;
		free(buf);
		return -e;
	}
	buf[m] = 0;
	char *sp = strchr(buf, ' ');
	snprintf(ans, ansize, "%s", sp ? sp + 1 : "");
	int e = atoi(buf);
	free(buf);
	return e;
}

/* The kid that probes: its lines, one per step, into out. */
static void probe_steps(char *out, size_t size)
{
	char name[64], ans[4096];
	size_t len = 0;
#define STEP(...) (len += (size_t)snprintf(out + len, size - len, __VA_ARGS__))
	snprintf(name, sizeof name, "tpfs.tx.begin.%d", (int)getpid());
	STEP("probe-begin %d\n", ask(name, 0, ans, sizeof ans));
	int e = ask("tpfs.tx.status", 4096, ans, sizeof ans);
	STEP("status-after-probe %d\n", e);
	STEP("small-begin %d\n", ask(name, 16, ans, sizeof ans));
	e = ask("tpfs.tx.status", 4096, ans, sizeof ans);
	STEP("status-after-small %d\n", e);
	e = ask(name, 4096, ans, sizeof ans);
	unsigned long long id = strtoull(ans, NULL, 10);
	STEP("begin %d %s\n", e, e ? ans : "ID");
	STEP("probe-commit %d\n", ask("tpfs.tx.commit", 0, ans, sizeof ans));
	STEP("probe-abort %d\n", ask("tpfs.tx.abort", 0, ans, sizeof ans));
	char byid[64];
	snprintf(byid, sizeof byid, "tpfs.tx.abort.%llu", id);
	STEP("probe-abort-id %d\n", ask(byid, 0, ans, sizeof ans));
	STEP("small-commit %d\n", ask("tpfs.tx.commit", 100, ans, sizeof ans));
	e = ask("tpfs.tx.status", 4096, ans, sizeof ans);
	char want[64];
	snprintf(want, sizeof want, "transaction %llu (active)", id);
	STEP("status-after-probes %d %s\n", e, strstr(ans, want) ? "open" : ans);
	e = ask("tpfs.tx.commit", 4096, ans, sizeof ans);
	snprintf(want, sizeof want, "transaction %llu committed", id);
	STEP("commit %d %s\n", e, strstr(ans, want) ? "committed" : ans);
	/* as getfattr -n tpfs.tx.begin.PID, -n tpfs.tx.commit, ... would */
	e = getfattr_like(name, ans, sizeof ans);
	STEP("getfattr-begin %d %s\n", e, e ? ans : "ID");
	e = getfattr_like("tpfs.tx.commit", ans, sizeof ans);
	STEP("getfattr-commit %d %s\n", e, e ? ans : strstr(ans, " committed") ? "committed" : ans);
	e = getfattr_like(name, ans, sizeof ans);
	STEP("getfattr-begin %d %s\n", e, e ? ans : "ID");
	e = getfattr_like("tpfs.tx.abort", ans, sizeof ans);
	STEP("getfattr-abort %d %s\n", e, e ? ans : strstr(ans, " aborted") ? "aborted" : ans);
#undef STEP
}

/* A size-0 getxattr of begin, commit or abort changes nothing (it is
 * answered TPFS_TX_ANSWER_MAX, 4096), nor does one with a buffer too small
 * for the answer (ERANGE); and what getfattr does -- probe, then ask with
 * the size probed -- begins, commits and aborts exactly once each. */
Test(txctl, probe_changes_nothing, .timeout = 60)
{
	start(NULL);
	int p[2];
	cr_assert(pipe(p) == 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		static char out[8192];
		close(p[0]);
		probe_steps(out, sizeof out);
		_exit(write(p[1], out, strlen(out)) == (ssize_t)strlen(out) ? 0 : 1);
	}
	close(p[1]);
	char out[8192];
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], out + len, sizeof out - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(p[0]);
	int st;
	waitpid(c, &st, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the probing child failed (0x%x)", st);
	const char *want = "probe-begin 4096\n"
			   "status-after-probe 3\n" /* ESRCH: no transaction was begun */
			   "small-begin -34\n"      /* ERANGE, and nothing begun */
			   "status-after-small 3\n"
			   "begin 0 ID\n"
			   "probe-commit 4096\n"
			   "probe-abort 4096\n"
			   "probe-abort-id 4096\n"
			   "small-commit -34\n"
			   "status-after-probes 0 open\n"
			   "commit 0 committed\n"
			   "getfattr-begin 0 ID\n"
			   "getfattr-commit 0 committed\n"
			   "getfattr-begin 0 ID\n"
			   "getfattr-abort 0 aborted\n";
	cr_assert_str_eq(out, want, "the probes changed something:\n%s\nexpected:\n%s", out, want);

	finish();
}

/* A name under tpfs.tx. that is no request of the protocol fails with
 * ENODATA -- probed or asked -- and is never taken for another request;
 * the requests themselves still work. */
Test(txctl, unknown_names_fail, .timeout = 60)
{
	static const char *const bad[] = {
		"tpfs.tx.statusX",   "tpfs.tx.status.allX",     "tpfs.tx.status.bogus",  "tpfs.tx.status.json.all",
		"tpfs.tx.status.all.page.", "tpfs.tx.status.all.page.x", "tpfs.tx.status.page.0", "tpfs.tx.commitX",
		"tpfs.tx.commit.1",  "tpfs.tx.abortX",          "tpfs.tx.beginX",        "tpfs.tx.",
		"tpfs.tx.frobnicate", "tpfs.tx.versionX",
	};
	char ans[65536];
	start(NULL);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int e = ask(bad[i], 0, ans, sizeof ans);
		cr_assert(e == -ENODATA, "probe of %s: %d %s (expected ENODATA)", bad[i], e, ans);
		e = ask(bad[i], 4096, ans, sizeof ans);
		cr_assert(e == -ENODATA, "%s: %d %s (expected ENODATA)", bad[i], e, ans);
	}
	int e = ask("tpfs.tx.status.all", 65536, ans, sizeof ans);
	cr_assert(e == 0 && !strcmp(ans, "no open transactions"), "status.all: %d %s", e, ans);
	e = ask("tpfs.tx.status", 4096, ans, sizeof ans);
	cr_assert(e == ESRCH, "status of a process in no transaction: %d %s", e, ans);
	e = ask("tpfs.tx.version", 4096, ans, sizeof ans);
	cr_assert(e == 0 && !strcmp(ans, "2"), "version: %d %s", e, ans);
	finish();
}

/* One user cannot take the table: with -o max_user_tx=3, nobody's fourth
 * begin fails with EAGAIN and a message naming the limit; another user and
 * root still begin; root lists nobody's transactions (txstatus --all, text
 * and JSON) and aborts them (txabort --id); once their processes are gone
 * nobody begins again. */
Test(txctl, per_user_limit, .timeout = 60)
{
	char msg[600], cmd[600];
	uint64_t ids[3], id;
	int status;
	start("max_user_tx=3");
	for (int i = 0; i < 3; i++) {
		int e = kid_begin(65534, &ids[i], msg, sizeof msg);
		cr_assert(e == 0 && ids[i], "nobody's begin %d: %d %s", i + 1, e, msg);
	}
	int e = kid_begin(65534, &id, msg, sizeof msg);
	cr_assert(e == EAGAIN, "nobody's fourth begin: %d %s (expected EAGAIN)", e, msg);
	cr_assert(strstr(msg, "max_user_tx=3") && strstr(msg, "uid 65534 has 3 open transactions"),
		  "the refusal does not say why: %s", msg);
	e = kid_begin(65533, &id, msg, sizeof msg);
	cr_assert(e == 0 && id, "another user's begin: %d %s", e, msg);
	e = kid_begin(0, &id, msg, sizeof msg);
	cr_assert(e == 0 && id, "root's begin: %d %s", e, msg);

	snprintf(cmd, sizeof cmd, "txstatus --all '%s' 2>&1", g_m.mnt);
	char *o = run(cmd, &status);
	cr_assert(status == 0, "root's txstatus --all: %d\n%s", status, o);
	cr_assert(count(o, "uid 65534\n") == 3 && count(o, "uid 65533\n") == 1 && count(o, "uid 0\n") == 1,
		  "root's txstatus --all:\n%s", o);
	free(o);
	snprintf(cmd, sizeof cmd, "txstatus --all --json '%s' 2>&1", g_m.mnt);
	o = run(cmd, &status);
	cr_assert(status == 0 && count(o, "\"uid\":65534,") == 3 && count(o, "\"id\":") == 5,
		  "root's txstatus --all --json: %d\n%s", status, o);
	free(o);
	for (int i = 0; i < 3; i++) {
		snprintf(cmd, sizeof cmd, "txabort --id %" PRIu64 " '%s' 2>&1", ids[i], g_m.mnt);
		o = run(cmd, &status);
		cr_assert(status == 0, "root's txabort --id %" PRIu64 ": %d\n%s", ids[i], status, o);
		free(o);
	}
	/* aborted, doomed: they hold their places until their processes end */
	for (int i = 0; i < 3; i++) {
		kill(g_kids[i], SIGKILL);
		waitpid(g_kids[i], NULL, 0);
		g_kids[i] = -1;
	}
	double t0 = now_s();
	do {
		msleep(50);
		e = kid_begin(65534, &id, msg, sizeof msg);
	} while (e == EAGAIN && now_s() - t0 < 5);
	cr_assert(e == 0 && id, "nobody's begin after its transactions ended: %d %s", e, msg);
	finish();
}

/* Users together cannot take root's reserve: a daemon that may open 1,104
 * files has a table of 80 (C14), 70 for users; with -o max_user_tx=20
 * three users take 60, a fourth gets 10 and then EAGAIN naming the users'
 * share, and root still begins its 10. */
Test(txctl, users_leave_root_a_reserve, .timeout = 60)
{
	struct rlimit low = {1104, 1104};
	char msg[600];
	uint64_t id;
	/* (for good: this test's process, Criterion's, may not raise it again) */
	cr_assert(setrlimit(RLIMIT_NOFILE, &low) == 0);
	start("max_user_tx=20"); /* the daemon inherits the limit */
	for (uid_t u = 65532; u <= 65534; u++)
		for (int i = 0; i < 20; i++) {
			int e = kid_begin(u, &id, msg, sizeof msg);
			cr_assert(e == 0 && id, "uid %u's begin %d: %d %s", (unsigned)u, i + 1, e, msg);
		}
	for (int i = 0; i < 10; i++) {
		int e = kid_begin(65531, &id, msg, sizeof msg);
		cr_assert(e == 0 && id, "uid 65531's begin %d: %d %s", i + 1, e, msg);
	}
	int e = kid_begin(65531, &id, msg, sizeof msg);
	cr_assert(e == EAGAIN && strstr(msg, "share"), "uid 65531's begin past the users' share: %d %s", e, msg);
	for (int i = 0; i < 10; i++) {
		e = kid_begin(0, &id, msg, sizeof msg);
		cr_assert(e == 0 && id, "root's begin %d in its reserve: %d %s", i + 1, e, msg);
	}
	e = kid_begin(0, &id, msg, sizeof msg);
	cr_assert(e == EAGAIN && strstr(msg, "too many open transactions on this mount (80"),
		  "root's begin past the table: %d %s", e, msg);
	finish();
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Every id in ids (n, sorted) is listed once by report, after key. */
static void listed_once(const char *report, const char *key, const uint64_t *ids, int n, const char *what)
{
	uint64_t *seen = malloc((size_t)(n + 1) * sizeof *seen);
	int k = 0;
	cr_assert(seen);
	for (const char *p = report; (p = strstr(p, key)); p += strlen(key)) {
		cr_assert(k <= n, "%s lists more than %d transactions", what, n);
		seen[k++] = strtoull(p + strlen(key), NULL, 10);
	}
	cr_assert(k == n, "%s lists %d transactions, not %d", what, k, n);
	qsort(seen, (size_t)k, sizeof *seen, cmp_u64);
	for (int i = 0; i < n; i++)
		cr_assert(seen[i] == ids[i], "%s: transaction %" PRIu64 " missing or listed twice", what, ids[i]);
	free(seen);
}

/* txstatus --all, text and JSON, with 10,000 transactions open (root's:
 * beyond any user's share).  The whole list is far longer than an xattr
 * may be: the library reads it in pages.  A client that asks for it whole
 * is told so (EOVERFLOW), not cut off by the kernel. */
#define MANY 10000
Test(txctl, status_all_10000, .timeout = 180)
{
	static uint64_t ids[MANY];
	char msg[600], cmd[600];
	int status;
	start(NULL);
	double t0 = now_s();
	for (int i = 0; i < MANY; i++) {
		int e = kid_begin(0, &ids[i], msg, sizeof msg);
		cr_assert(e == 0 && ids[i], "begin %d of %d: %d %s", i + 1, MANY, e, msg);
	}
	double t1 = now_s();
	qsort(ids, MANY, sizeof *ids, cmp_u64);

	snprintf(cmd, sizeof cmd, "txstatus --all '%s' 2>&1", g_m.mnt);
	char *o = run(cmd, &status);
	cr_assert(status == 0, "txstatus --all: status %d\n%.2000s", status, o);
	cr_assert(strlen(o) > 65536, "txstatus --all: only %zu bytes", strlen(o));
	cr_assert(!strncmp(o, "transaction ", 12), "txstatus --all starts: %.200s", o);
	/* every report starts a line: "\ntransaction ID", with a newline put first */
	char *nl = malloc(strlen(o) + 2);
	cr_assert(nl);
	nl[0] = '\n';
	strcpy(nl + 1, o);
	listed_once(nl, "\ntransaction ", ids, MANY, "txstatus --all");
	free(nl);
	free(o);
	double t2 = now_s();

	snprintf(cmd, sizeof cmd, "txstatus --all --json '%s' 2>&1", g_m.mnt);
	o = run(cmd, &status);
	cr_assert(status == 0, "txstatus --all --json: status %d\n%.2000s", status, o);
	cr_assert(!strncmp(o, "{\"transactions\":[{\"id\":", 23) && strstr(o, "}]}\n") == o + strlen(o) - 4,
		  "txstatus --all --json is not one document: %.200s ... %s", o, o + strlen(o) - 100);
	listed_once(o, "{\"id\":", ids, MANY, "txstatus --all --json");
	cr_assert(count(o, "},{\"id\":") == MANY - 1, "the JSON's elements are not separated by single commas");
	free(o);
	double t3 = now_s();

	/* a request for the whole list, as a client of protocol 1 makes */
	static char whole[65536];
	int e = ask("tpfs.tx.status.all", sizeof whole, whole, sizeof whole);
	cr_assert(e == EOVERFLOW, "status.all whole: %d %.200s (expected EOVERFLOW)", e, whole);
	fprintf(stderr, "status_all_10000: %d begins %.1f s, text listing %.2f s, JSON %.2f s\n", MANY, t1 - t0, t2 - t1,
		t3 - t2);
	finish();
}

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests = criterion_initialize();
	int result = 0;
	if (criterion_handle_args(argc, argv, true))
		result = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	return result;
}
