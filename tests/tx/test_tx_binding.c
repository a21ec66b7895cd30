/*
 * test_tx_binding -- who belongs to a transaction (test_tx.c has the
 * actors and the helpers): binding rules (one transaction per shell, other
 * users, committed permissions), membership by user (C10) and running
 * members at commit (C11), the tools end to end.
 */
#include "txsh.h"

/* ---------------------------------------------------------------------- */
/* 6. Binding rules                                                       */

/* A second txbegin in the same shell fails with a clear message; through
 * the protocol: EBUSY, for the bound process and for its descendants. */
Test(tx, second_txbegin_fails, .timeout = 60)
{
	const char *out;
	char o1[512];
	start();
	/* the protocol: a child binds itself, then again; its own child too */
	int p[2];
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		char verb[64], ans[512], line[2000];
		int len = 0;
		snprintf(verb, sizeof verb, "tpfs.tx.begin.%d", (int)getpid());
		int e1 = proto(verb, ans, sizeof ans);
		len += snprintf(line + len, sizeof line - (size_t)len, "%d|%s\n", e1, ans);
		int e2 = proto(verb, ans, sizeof ans);
		len += snprintf(line + len, sizeof line - (size_t)len, "%d|%s\n", e2, ans);
		pid_t g = fork();
		if (g == 0) {
			char v2[64];
			snprintf(v2, sizeof v2, "tpfs.tx.begin.%d", (int)getpid());
			int e3 = proto(v2, ans, sizeof ans);
			printf("%d|%s\n", e3, ans);
			_exit(e3 == EBUSY ? 0 : 1);
		}
		int gs;
		waitpid(g, &gs, 0);
		len += snprintf(line + len, sizeof line - (size_t)len, "grandchild %d\n", WEXITSTATUS(gs));
		proto("tpfs.tx.abort", ans, sizeof ans);
		if (write(p[1], line, (size_t)len) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	char res[2000] = "";
	ssize_t n = read(p[0], res, sizeof res - 1);
	res[n > 0 ? n : 0] = 0;
	close(p[0]);
	waitpid(c, NULL, 0);
	int e1 = -1, e2 = -1, gs = -1;
	char *l2 = strchr(res, '\n');
	char *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;
	e1 = atoi(res);
	e2 = l2 ? atoi(l2 + 1) : -1;
	if (l3)
		sscanf(l3 + 1, "grandchild %d", &gs);
	cr_expect(e1 == 0, "protocol: the first begin answered: %s", res);
	cr_expect(e2 == EBUSY, "protocol: a second begin of the same process answered %d (expected %d EBUSY): %s", e2, EBUSY,
		  res);
	cr_expect(l2 && strstr(l2, "already"), "protocol: the second begin's message does not say it is already in a "
					      "transaction: %s",
		  res);
	cr_expect(gs == 0, "protocol: begin by a child of a bound process was not refused with EBUSY: %s", res);

	/* the tools */
	need_tools();
	tsh *s = tsh_open("S", 0);
	int st = tsh_run(s, &out, "txbegin");
	cr_assert(st == 0, "txbegin: exit %d: %s", st, out);
	snprintf(o1, sizeof o1, "%s", out);
	cr_expect(strtoull(o1, NULL, 10) > 0, "txbegin printed \"%s\", expected the transaction id", o1);
	st = tsh_run(s, &out, "txbegin");
	cr_expect(st != 0, "a second txbegin in the same shell exited 0 (%s), expected failure", out);
	cr_expect(strstr(out, "already") != NULL,
		  "a second txbegin's message \"%s\" does not say the shell is already in a transaction", out);
	printf("tx second_txbegin: exit %d: %s\n", st, out);
	/* the first transaction is intact */
	SH_OK(s, "printf x > f");
	st = tsh_run(s, &out, "txcommit");
	cr_expect(st == 0, "txcommit after the refused second txbegin: exit %d: %s", st, out);
	cr_expect(nm_access("f") == 0, "f absent after the commit");
	finish();
}

/* txcommit (and txabort) with no transaction: exit 1 and a message;
 * protocol: ESRCH. */
Test(tx, txcommit_without_transaction, .timeout = 60)
{
	const char *out;
	char ans[512];
	start();
	int e = proto("tpfs.tx.commit", ans, sizeof ans);
	cr_expect(e == ESRCH, "protocol commit with no transaction answered %d \"%s\", expected %d ESRCH", e, ans, ESRCH);
	need_tools();
	tsh *s = tsh_open("S", 0);
	int st = tsh_run(s, &out, "txcommit");
	cr_expect(st == 1 && strlen(out) > 0, "txcommit with no transaction exited %d printing \"%s\"; expected 1 and a "
					       "message",
		  st, out);
	printf("tx txcommit_without_transaction: exit %d: %s\n", st, out);
	st = tsh_run(s, &out, "txabort");
	cr_expect(st != 0 && strlen(out) > 0, "txabort with no transaction exited %d printing \"%s\"; expected failure "
					       "and a message",
		  st, out);
	finish();
}

/* A child that runs as nobody (uid/gid 65534), with fd an open descriptor
 * of the mount's root (the test's temporary directory is not searchable
 * by others); fn writes its findings into out. */
static void as_nobody(void (*fn)(int fd, char *out, size_t size, void *arg), void *arg, char *out, size_t size)
{
	int p[2];
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		static char res[16384];
		close(p[0]);
		int fd = open(g_m.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(2);
		res[0] = 0;
		fn(fd, res, sizeof res, arg);
		if (write(p[1], res, strlen(res)) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	size_t len = 0;
	ssize_t n;
	while (len < size - 1 && (n = read(p[0], out + len, size - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(p[0]);
	int st;
	waitpid(c, &st, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child running as uid 65534 failed (status 0x%x)", st);
}

static void nobody_proto(int fd, char *out, size_t size, void *arg)
{
	uint64_t id = *(uint64_t *)arg;
	char verb[64], ans[4096];
	sbuf o = {out, size, 0};
	snprintf(verb, sizeof verb, "tpfs.tx.begin.%d", (int)getppid()); /* root's process, an ancestor */
	int e = proto_at(fd, NULL, verb, ans, sizeof ans);
	sb_add(&o, "bind-root-parent %d %s\n", e, ans);
	snprintf(verb, sizeof verb, "tpfs.tx.abort.%llu", (unsigned long long)id);
	e = proto_at(fd, NULL, verb, ans, sizeof ans);
	sb_add(&o, "abort-root-tx %d %s\n", e, ans);
	e = proto_at(fd, NULL, "tpfs.tx.status.all", ans, sizeof ans);
	for (char *c = ans; *c; c++)
		if (*c == '\n')
			*c = '|';
	sb_add(&o, "status-all %d %s\n", e, ans);
	/* its own transaction: allowed, listed for it */
	snprintf(verb, sizeof verb, "tpfs.tx.begin.%d", (int)getpid());
	e = proto_at(fd, NULL, verb, ans, sizeof ans);
	sb_add(&o, "bind-self %d %s\n", e, ans);
	e = proto_at(fd, NULL, "tpfs.tx.status.all", ans, sizeof ans);
	for (char *c = ans; *c; c++)
		if (*c == '\n')
			*c = '|';
	sb_add(&o, "status-all-own %d %s\n", e, ans);
	e = proto_at(fd, NULL, "tpfs.tx.abort", ans, sizeof ans);
	sb_add(&o, "abort-own %d %s\n", e, ans);
}

/* The tools as nobody: txabort --id of root's transaction, txstatus --all. */
static void nobody_tools(int fd, char *out, size_t size, void *arg)
{
	uint64_t id = *(uint64_t *)arg;
	char cmd[512];
	if (fchdir(fd) != 0) {
		snprintf(out, size, "fchdir: %s\n", strerror(errno));
		return;
	}
	snprintf(cmd, sizeof cmd,
		 "txabort --id %llu 2>&1; echo \"@abort-exit $?\"; txstatus --all 2>&1; echo \"@status-exit $?\"",
		 (unsigned long long)id);
	FILE *f = popen(cmd, "r");
	if (!f) {
		snprintf(out, size, "popen: %s\n", strerror(errno));
		return;
	}
	size_t n = fread(out, 1, size - 1, f);
	out[n] = 0;
	pclose(f);
}

/* Another user (nobody) cannot bind root's process, cannot abort root's
 * transaction (protocol and txabort --id), and does not see it in
 * status --all / txstatus --all; it can bind its own process. */
Test(tx, other_user_cannot_touch, .timeout = 60)
{
	char res[16384], key[64], line[600];
	start();
	/* the tools find the mount by path: let others search the test's
	 * temporary directory (mkdtemp made it 0700) */
	cr_assert(chmod(g_m.dir, 0711) == 0);
	tsh *s = tsh_open("R", 1);
	uint64_t id = s->txid;
	SH_OK(s, "printf secret > f");
	snprintf(key, sizeof key, "transaction %llu ", (unsigned long long)id);
	as_nobody(nobody_proto, &id, res, sizeof res);
	printf("tx other_user (protocol as uid 65534):\n%s", res);
	int e;
	char *l = strstr(res, "bind-root-parent ");
	cr_expect(l && sscanf(l, "bind-root-parent %d", &e) == 1 && e == EPERM,
		  "uid 65534 binding its parent (root's process): expected EPERM (%d); got: %s", EPERM, res);
	l = strstr(res, "abort-root-tx ");
	cr_expect(l && sscanf(l, "abort-root-tx %d", &e) == 1 && e == EPERM,
		  "uid 65534 aborting root's transaction %llu: expected EPERM (%d); got: %s", (unsigned long long)id, EPERM,
		  res);
	l = strstr(res, "status-all ");
	cr_expect(l, "no status-all answer");
	if (l) {
		char *end = strchr(l, '\n');
		snprintf(line, sizeof line, "%.*s", end ? (int)(end - l) : 500, l);
		cr_expect(!strstr(line, key), "uid 65534's status.all shows root's %s: %s", key, line);
	}
	l = strstr(res, "bind-self ");
	cr_expect(l && sscanf(l, "bind-self %d", &e) == 1 && e == 0, "uid 65534 could not bind its own process: %s", res);
	l = strstr(res, "status-all-own ");
	cr_expect(l && !strstr(strchr(l, ' '), key) && strstr(l, "transaction "),
		  "uid 65534's status.all with a transaction of its own: expected its own listed and not root's %s: %s", key,
		  l ? l : "(none)");
	cr_expect(tx_listed(id), "root's transaction %llu is gone after uid 65534 tried to abort it", (unsigned long long)id);
	/* the tools */
	need_tools();
	as_nobody(nobody_tools, &id, res, sizeof res);
	printf("tx other_user (tools as uid 65534):\n%s", res);
	cr_expect(strstr(res, "@status-exit 0") != NULL,
		  "txstatus --all as uid 65534 failed (cannot the tools reach the mount?): %s", res);
	l = strstr(res, "@abort-exit ");
	cr_expect(l && atoi(l + 12) != 0, "txabort --id %llu as uid 65534 did not fail: %s", (unsigned long long)id, res);
	snprintf(line, sizeof line, "transaction %llu", (unsigned long long)id);
	l = strstr(res, "@abort-exit ");
	cr_expect(l && !strstr(strchr(l, '\n') ? strchr(l, '\n') : l, line),
		  "txstatus --all as uid 65534 shows root's %s: %s", line, res);
	cr_expect(tx_listed(id), "root's transaction %llu is gone after uid 65534 ran txabort --id", (unsigned long long)id);
	/* root's transaction still works */
	tsh_commit(s);
	char buf[32];
	nm_read("f", buf, sizeof buf);
	cr_expect(!strcmp(buf, "secret"), "root's transaction's f reads \"%s\" after its commit, expected \"secret\"", buf);
	finish();
}

/* What uid 65534 can do with p (read), q (list) and p2 (read), relative
 * to the mount's root. */
static void nobody_perms(int fd, char *out, size_t size, void *arg)
{
	sbuf o = {out, size, 0};
	const char *names[] = {"p", "p2"};
	(void)arg;
	for (int i = 0; i < 2; i++) {
		int f = openat(fd, names[i], O_RDONLY | O_CLOEXEC);
		sb_add(&o, "read %s %s\n", names[i], f >= 0 ? "ok" : strerror(errno));
		if (f >= 0)
			close(f);
	}
	int q = openat(fd, "q", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	sb_add(&o, "list q %s\n", q >= 0 ? "ok" : strerror(errno));
	if (q >= 0)
		close(q);
}

/* A non-member's permissions are checked against the committed modes,
 * not the modes a member set (the kernel checks, default_permissions,
 * against the attributes it holds -- which a member's chmod updated). */
Test(tx, nonmember_permissions_use_committed_modes, .timeout = 60)
{
	char res[1024];
	start();
	cr_assert(chmod(g_m.dir, 0711) == 0);
	put("p", "readable");
	put("p2", "private");
	cr_assert(chmod(mp("p"), 0644) == 0 && chmod(mp("p2"), 0600) == 0 && mkdir(mp("q"), 0755) == 0);
	as_nobody(nobody_perms, NULL, res, sizeof res); /* warm, and the expectation */
	cr_assert(!strcmp(res, "read p ok\nread p2 Permission denied\nlist q ok\n"),
		  "uid 65534 before any transaction: %s", res);
	tsh *s = tsh_open("T", 1);
	SH_OK(s, "chmod 600 p && chmod 700 q && chmod 644 p2 && stat -c %%a p q p2 >/dev/null && ls -l >/dev/null");
	as_nobody(nobody_perms, NULL, res, sizeof res);
	cr_expect(!strcmp(res, "read p ok\nread p2 Permission denied\nlist q ok\n"),
		  "uid 65534 (a non-member) while a member's chmods are uncommitted: saw\n%sexpected\nread p ok\nread p2 "
		  "Permission denied\nlist q ok",
		  res);
	tsh_commit(s);
	as_nobody(nobody_perms, NULL, res, sizeof res);
	cr_expect(!strcmp(res, "read p Permission denied\nread p2 ok\nlist q Permission denied\n"),
		  "uid 65534 after the commit of the chmods: saw\n%sexpected p and q denied, p2 readable", res);
	finish();
}

/* A large write (megabytes: the write set may spill to a file) is the
 * member's alone until commit. */
Test(tx, large_write_isolated, .timeout = 120)
{
	static char old[VIEW_MAX], now[VIEW_MAX], member[VIEW_MAX];
	start();
	cr_assert(mkdir(mp("big"), 0755) == 0);
	cr_assert(tfs_sh(&g_m, "head -c 1000000 /dev/zero | tr '\\0' a > big/f") == 0);
	nm_view("big", old, sizeof old);
	tsh *s = tsh_open("T", 1);
	SH_OK(s, "head -c 12000000 /dev/urandom > big/f && head -c 3000000 /dev/urandom > big/g && "
		 "dd if=big/f of=big/f bs=65536 seek=100 count=10 conv=notrunc status=none");
	tsh_view(s, "big", member, sizeof member);
	mcheck(s, "12000000 3000000", "echo $(stat -c %%s big/f big/g)");
	nm_view("big", now, sizeof now);
	VIEW_EQ("non-member during a large uncommitted write", now, old);
	tsh_commit(s);
	nm_view("big", now, sizeof now);
	VIEW_EQ("non-member after the commit of a large write (expected the member's view)", now, member);
	finish();
}

/* ---------------------------------------------------------------------- */
/* Membership: other users' programs, members running at commit           */

/* C10 (fsd_txbind.c, issue 24 item 5): a request joins a transaction only with
 * its owner's user (fsuid), or when the owner is root.  A non-root user's
 * shell in a transaction runs what set-user-ID programs do: one switches
 * to root and appends to a root-owned log, one to another user and appends
 * to that user's file.  Both appends are plain calls: non-members see them
 * at once, and the user's txabort cannot take them back; the user's own
 * write in the same shell is still the transaction's, and rolled back.
 * Root's transaction, on the other hand, takes a descendant that switched
 * to another user. */
Test(tx, setuid_program_does_not_join, .timeout = 60)
{
	char buf[4096];
	const uid_t user = 65534, other = 65533;
	start();
	/* the shell as user starts in the mount: let others search the test's
	 * temporary directory (mkdtemp made it 0700) */
	cr_assert(chmod(g_m.dir, 0711) == 0);
	put("log", "boot\n"); /* root's, 0644 */
	cr_assert(mkdir(mp("u"), 0755) == 0 && chown(mp("u"), user, user) == 0);
	put("u/own", "v1\n");
	cr_assert(chown(mp("u/own"), user, user) == 0);
	cr_assert(mkdir(mp("o"), 0755) == 0 && chown(mp("o"), other, other) == 0);
	put("o/f", "o1\n");
	cr_assert(chown(mp("o/f"), other, other) == 0);

	tsh *s = tsh_open_as("U", 1, user);
	SH_OK(s, "echo member >> u/own");
	SH_OK(s, HELPER "as 0 log privileged");
	SH_OK(s, HELPER "as %u o/f by-other", (unsigned)other);
	mcheck(s, "boot\nprivileged", "cat log");
	mcheck(s, "v1\nmember", "cat u/own");

	/* non-members see the set-user-ID writes at once, not the member's */
	cr_expect(nm_read("log", buf, sizeof buf) > 0 && !strcmp(buf, "boot\nprivileged\n"),
		  "a non-member reads log as \"%s\" before txabort: the append of uid 0 under the transaction of "
		  "uid %u must be a plain call, seen at once (\"boot\\nprivileged\\n\")",
		  buf, (unsigned)user);
	cr_expect(nm_read("o/f", buf, sizeof buf) > 0 && !strcmp(buf, "o1\nby-other\n"),
		  "a non-member reads o/f as \"%s\" before txabort, expected \"o1\\nby-other\\n\" (uid %u's append "
		  "is not uid %u's transaction's)",
		  buf, (unsigned)other, (unsigned)user);
	cr_expect(nm_read("u/own", buf, sizeof buf) > 0 && !strcmp(buf, "v1\n"),
		  "a non-member reads u/own as \"%s\" before txabort: the member's own write leaked", buf);

	SH_OK(s, HELPER "proto tpfs.tx.abort");
	cr_expect(nm_read("log", buf, sizeof buf) > 0 && !strcmp(buf, "boot\nprivileged\n"),
		  "after uid %u's txabort log reads \"%s\": an unprivileged user rolled back root's append", (unsigned)user,
		  buf);
	cr_expect(nm_read("o/f", buf, sizeof buf) > 0 && !strcmp(buf, "o1\nby-other\n"),
		  "after uid %u's txabort o/f reads \"%s\": uid %u's append was rolled back", (unsigned)user, buf,
		  (unsigned)other);
	cr_expect(nm_read("u/own", buf, sizeof buf) > 0 && !strcmp(buf, "v1\n"),
		  "after txabort u/own reads \"%s\": the member's own write was not rolled back", buf);

	/* root's transaction: a descendant that switched to uid user joins it */
	tsh *r = tsh_open("R", 1);
	SH_OK(r, HELPER "as %u u/own rootjob", (unsigned)user);
	cr_expect(nm_read("u/own", buf, sizeof buf) > 0 && !strcmp(buf, "v1\n"),
		  "u/own reads \"%s\" to a non-member while root's transaction is open: the write of root's "
		  "descendant that switched to uid %u must be the transaction's",
		  buf, (unsigned)user);
	tsh_abort(r);
	cr_expect(nm_read("u/own", buf, sizeof buf) > 0 && !strcmp(buf, "v1\n"),
		  "after root's txabort u/own reads \"%s\", expected \"v1\\n\"", buf);
	finish();
}

/* C11 (fsd_txbind.c, issue 24 item 6): txcommit while a background job of the
 * shell still runs commits nothing -- exit 1, the running members named,
 * the transaction still open; --force commits what the job wrote so far
 * and cuts the job off: its next write fails with ECANCELED instead of
 * being committed on its own; --wait waits for the job, then commits it
 * whole. */
Test(tx, commit_while_a_member_runs, .timeout = 90)
{
	char buf[4096], err_path[64];
	const char *out;
	need_tools();
	snprintf(err_path, sizeof err_path, "/tmp/tpfs-stray-%d", (int)getpid());
	unlink(err_path);
	start();
	put("out", "");
	tsh *s = tsh_open("T", 1);
	uint64_t id = s->txid;
	SH_OK(s, "(echo first >> out; sleep 2; echo second >> out) 2>%s </dev/null >/dev/null &", err_path);
	SH_OK(s, "i=0; until grep -q first out; do i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.05; done");

	int st = tsh_run(s, &out, "txcommit");
	cr_expect(st == 1, "txcommit while a background member runs exited %d, expected 1 (refused); output: %s", st,
		  out);
	cr_expect(strstr(out, "still run") && strstr(out, "(sleep)"),
		  "the refused txcommit does not name the running members (\"still run\", \"(sleep)\"): %s", out);
	cr_expect(tx_listed(id), "transaction %llu is no longer open after a refused txcommit", (unsigned long long)id);
	cr_expect(nm_read("out", buf, sizeof buf) == 0, "a non-member reads out as \"%s\" after the refused commit", buf);

	st = tsh_run(s, &out, "txcommit --force");
	cr_expect(st == 0 && strstr(out, "cut off") && strstr(out, "(sleep)"),
		  "txcommit --force exited %d, expected 0 naming the members it cut off; output: %s", st, out);
	cr_expect(nm_read("out", buf, sizeof buf) > 0 && !strcmp(buf, "first\n"),
		  "after txcommit --force a non-member reads out as \"%s\", expected \"first\\n\"", buf);
	/* the job's next write (after its sleep) must fail, not be committed */
	double t0 = now_s();
	struct stat est;
	while (now_s() - t0 < 6 && (stat(err_path, &est) != 0 || est.st_size == 0))
		msleep(50);
	int fd = open(err_path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	unlink(err_path);
	cr_expect(n > 0 && strstr(buf, strerror(ECANCELED)),
		  "the cut-off member's later write said \"%s\", expected an error \"%s\"", buf, strerror(ECANCELED));
	cr_expect(nm_read("out", buf, sizeof buf) > 0 && !strcmp(buf, "first\n"),
		  "out reads \"%s\" after the cut-off member's later write, expected \"first\\n\" (its write must "
		  "not be committed on its own)",
		  buf);

	/* --wait: a new transaction of the same shell, a job, then its whole output */
	SH_OK(s, "txbegin >/dev/null");
	SH_OK(s, "(sleep 0.5; echo w1 >> w; sleep 0.3; echo w2 >> w) </dev/null >/dev/null 2>&1 &");
	st = tsh_run(s, &out, "txcommit --wait");
	cr_expect(st == 0, "txcommit --wait exited %d: %s", st, out);
	cr_expect(nm_read("w", buf, sizeof buf) > 0 && !strcmp(buf, "w1\nw2\n"),
		  "after txcommit --wait a non-member reads w as \"%s\", expected \"w1\\nw2\\n\"", buf);
	finish();
}

/* ---------------------------------------------------------------------- */
/* The tools, end to end                                                  */

/* txbegin prints the id; txstatus names it (active, files touched); txrun
 * commits on exit 0 and aborts otherwise; txcommit makes it visible. */
Test(tx, tools_roundtrip, .timeout = 60)
{
	const char *out;
	char id[32], key[64];
	need_tools();
	start();
	tsh *s = tsh_open("S", 0);
	int st = tsh_run(s, &out, "txbegin");
	cr_assert(st == 0, "txbegin: exit %d: %s", st, out);
	snprintf(id, sizeof id, "%s", out);
	SH_OK(s, "printf 1 > one && sh -c 'printf 2 > two'");
	st = tsh_run(s, &out, "txstatus");
	cr_expect(st == 0 && strstr(out, id) && strstr(out, "active"),
		  "txstatus in the shell of transaction %s: exit %d: \"%s\" (expected its id and \"active\")", id, st, out);
	snprintf(key, sizeof key, "%s", id);
	st = tsh_run(s, &out, "txstatus --all");
	cr_expect(st == 0 && strstr(out, key), "txstatus --all: exit %d, \"%s\" does not show transaction %s", st, out, id);
	cr_expect(nm_access("one") == ENOENT, "one visible before the commit");
	st = tsh_run(s, &out, "txcommit");
	cr_expect(st == 0, "txcommit: exit %d: %s", st, out);
	cr_expect(nm_access("one") == 0 && nm_access("two") == 0, "one or two absent after txcommit");
	st = tsh_run(s, &out, "txrun -- sh -c 'printf 3 > three'");
	cr_expect(st == 0 && nm_access("three") == 0, "txrun of a command exiting 0: exit %d (%s), three %s", st, out,
		  nm_access("three") ? "absent" : "present");
	st = tsh_run(s, &out, "txrun -- sh -c 'printf 4 > four; exit 3'");
	cr_expect(st == 3 && nm_access("four") == ENOENT, "txrun of a command exiting 3: exit %d (%s), four %s (expected "
							  "exit 3 and four absent: aborted)",
		  st, out, nm_access("four") ? "absent" : "present");
	finish();
}
