/*
 * test_tx -- user transactions on real mounts (issue 6): what members and
 * non-members see, through warm kernel caches; when writers wait; two
 * transactions (names, same file, phantoms, deadlocks); binding rules and
 * other users; mmap; the end of a transaction whose shell or daemon was
 * killed.
 *
 * This file holds the actors and the helpers (declared in txsh.h) and main;
 * the tests are in test_tx_*.c by topic (tests/tx/meson.build lists them).
 *
 * The actors.  The test process itself is the non-member: it never binds
 * and is no descendant of a bound process.  A member is a "transaction
 * shell" (tsh): /bin/sh -s forked by the test, reading commands from a
 * pipe; it is either bound to a transaction at birth (the forked child
 * sends tpfs.tx.begin.<its own pid> before it execs sh: exec keeps the pid
 * and start time) or binds itself with `txbegin`.  Every command it runs
 * (cat, stat, mv, ...) is another member process.  What a shell cannot do
 * (xattrs, mmap, raw protocol requests, a canonical description of a tree)
 * is done by this very binary run as `test_tx --helper OP ...` from the
 * shell (main below), so that it too is a member process.
 *
 * A view.  `view DIR` describes a tree canonically, one line per object:
 * type, inode, mode, owner, links, size, mtime, ctime, a checksum and the
 * head of the data, a symlink's target, user.* xattrs.  The non-member's
 * view (computed in the test process) and a member's (the helper run from
 * its shell) are compared with each other and with the committed state.
 * Every non-member call is timed: while a transaction holds its locks a
 * reader must not wait (NM_LIMIT; a 10 s alarm stops a reader that hangs).
 *
 * Environment (meson): TPFSD, TPFS_BIN (mount_util), TX_BIN (the directory
 * of txbegin, txcommit, txabort, txrun, txstatus: put first in PATH);
 * TX_KEEP=1 keeps the store of a failed test (in /var/tmp/tpfs-test-*).
 */
#include "txproc.h"
#include "txsh.h"


tfs_mount g_m;
char g_self[PATH_MAX];
int g_watch = -1; /* write end: the watchdog's pipe */

/* ---------------------------------------------------------------------- */
/* Small things                                                           */

/* A path on the mount (rotating buffers). */
const char *mp(const char *rel) { return txtest_path(g_m.mnt, rel); }

void sb_add(sbuf *o, const char *fmt, ...)
{
	va_list ap;
	if (o->len >= o->size)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(o->p + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len = o->len + (size_t)n < o->size ? o->len + (size_t)n : o->size - 1;
}

/* Copies src into dst (size bytes), cut if longer. */
void scopy(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

void trim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

/* The first line where a and b differ, for failure messages. */
const char *first_diff(const char *a, const char *b)
{
	static char out[1200];
	int line = 1;
	while (*a || *b) {
		const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
		size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
		if (la != lb || memcmp(a, b, la) != 0) {
			snprintf(out, sizeof out, "line %d: seen \"%.*s\", expected \"%.*s\"", line, (int)(la > 500 ? 500 : la), a,
				 (int)(lb > 500 ? 500 : lb), b);
			return out;
		}
		a += la + (ea != NULL);
		b += lb + (eb != NULL);
		line++;
	}
	return "(none)";
}

/* ---------------------------------------------------------------------- */
/* The view of a tree                                                     */

int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void view_obj(sbuf *o, const char *root, const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", root, rel);
	if (lstat(p, &st) != 0) {
		sb_add(o, "%s lstat-failed errno=%d\n", rel, errno);
		return;
	}
	char t = S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : S_ISREG(st.st_mode) ? 'f' : '?';
	sb_add(o, "%s %c ino=%llu mode=%04o uid=%u gid=%u nlink=%lu size=%lld mtime=%lld.%09ld ctime=%lld.%09ld", rel, t,
	       (unsigned long long)st.st_ino, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid,
	       (unsigned long)st.st_nlink, (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
	       (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
	if (t == 'f') {
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			sb_add(o, " open-failed errno=%d", errno);
		} else {
			unsigned char buf[65536];
			char head[100];
			size_t hl = 0;
			uint64_t h = 1469598103934665603ull, total = 0;
			ssize_t n;
			while ((n = read(fd, buf, sizeof buf)) > 0) {
				for (ssize_t i = 0; i < n; i++) {
					h = (h ^ buf[i]) * 1099511628211ull;
					if (hl < 40 && total + (uint64_t)i < 40)
						hl += (size_t)snprintf(head + hl, sizeof head - hl,
								       buf[i] >= 0x20 && buf[i] < 0x7f && buf[i] != '\\' ? "%c" : "\\%o",
								       buf[i]);
				}
				total += (uint64_t)n;
			}
			if (n < 0)
				sb_add(o, " read-failed errno=%d", errno);
			head[hl] = 0;
			sb_add(o, " read=%llu fnv=%016llx data=\"%s\"", (unsigned long long)total, (unsigned long long)h, head);
			close(fd);
		}
	} else if (t == 'l') {
		char target[PATH_MAX];
		ssize_t n = readlink(p, target, sizeof target - 1);
		if (n < 0)
			sb_add(o, " readlink-failed errno=%d", errno);
		else
			sb_add(o, " -> %.*s", (int)n, target);
	}
	char names[4096];
	ssize_t nl = llistxattr(p, names, sizeof names);
	if (nl < 0) {
		sb_add(o, " listxattr-failed errno=%d", errno);
	} else {
		char *v[64];
		int nv = 0;
		for (char *s = names; s < names + nl && nv < 64; s += strlen(s) + 1)
			if (!strncmp(s, "user.", 5))
				v[nv++] = s;
		qsort(v, (size_t)nv, sizeof *v, cmp_str);
		for (int i = 0; i < nv; i++) {
			char val[256];
			ssize_t vl = lgetxattr(p, v[i], val, sizeof val - 1);
			if (vl < 0)
				sb_add(o, " x:%s(errno=%d)", v[i], errno);
			else
				sb_add(o, " x:%s=%.*s", v[i], (int)vl, val);
		}
	}
	sb_add(o, "\n");
	if (t != 'd')
		return;
	DIR *dir = opendir(p);
	if (!dir) {
		sb_add(o, "%s opendir-failed errno=%d\n", rel, errno);
		return;
	}
	char *ents[256];
	int ne = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(dir)) != NULL && ne < 256)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ents[ne++] = strdup(de->d_name);
	if (errno)
		sb_add(o, "%s readdir-failed errno=%d\n", rel, errno);
	closedir(dir);
	qsort(ents, (size_t)ne, sizeof *ents, cmp_str);
	for (int i = 0; i < ne; i++) {
		char sub[PATH_MAX];
		snprintf(sub, sizeof sub, "%s/%s", rel, ents[i]);
		view_obj(o, root, sub);
		free(ents[i]);
	}
}

/* The view of ROOT/rel, into buf. */
void view(const char *root, const char *rel, char *buf, size_t size)
{
	sbuf o = {buf, size, 0};
	buf[0] = 0;
	view_obj(&o, root, rel);
}

/* ---------------------------------------------------------------------- */
/* The helper: this binary run from a member's shell                       */

int helper(int argc, char **argv)
{
	if (argc < 1)
		return 2;
	const char *op = argv[0];
	if (!strcmp(op, "view") && argc == 2) {
		static char buf[VIEW_MAX];
		view(".", argv[1], buf, sizeof buf);
		fputs(buf, stdout);
		return 0;
	}
	if (!strcmp(op, "setx") && argc == 4) {
		if (lsetxattr(argv[1], argv[2], argv[3], strlen(argv[3]), 0) != 0) {
			printf("setxattr %s %s: %s\n", argv[1], argv[2], strerror(errno));
			return 1;
		}
		return 0;
	}
	if (!strcmp(op, "rmx") && argc == 3) {
		if (lremovexattr(argv[1], argv[2]) != 0) {
			printf("removexattr %s %s: %s\n", argv[1], argv[2], strerror(errno));
			return 1;
		}
		return 0;
	}
	if (!strcmp(op, "getx") && argc == 3) {
		char v[256];
		ssize_t n = lgetxattr(argv[1], argv[2], v, sizeof v);
		if (n < 0)
			printf("ERR %d\n", errno);
		else
			printf("%.*s\n", (int)n, v);
		return 0;
	}
	if (!strcmp(op, "proto") && argc == 2) { /* the mount: $TPFS_MOUNT */
		char ans[4096];
		const char *m = getenv("TPFS_MOUNT");
		int e = proto_at(AT_FDCWD, m ? m : ".", argv[1], ans, sizeof ans);
		printf("%s\n", ans);
		return e == 0 ? 0 : 1;
	}
	if (!strcmp(op, "mmap") && argc == 2) {
		/* a member maps a file it opened: shared must fail (ENODEV),
		 * private must read the member's view */
		int fd = open(argv[1], O_RDWR | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0) {
			printf("open %s: %s\n", argv[1], strerror(errno));
			return 1;
		}
		size_t len = (size_t)st.st_size;
		void *sh = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		int she = sh == MAP_FAILED ? errno : 0;
		void *shw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		int shwe = shw == MAP_FAILED ? errno : 0;
		void *pv = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		int pve = pv == MAP_FAILED ? errno : 0;
		printf("shared=%s shared_rw=%s private=", she ? strerror(she) : "mapped", shwe ? strerror(shwe) : "mapped");
		if (pve)
			printf("%s", strerror(pve));
		else
			printf("%.*s", (int)len, (const char *)pv);
		printf("\n");
		return 0;
	}
	if (!strcmp(op, "mmapwait") && argc == 3) {
		/* maps a file privately, prints it, waits for a line on a FIFO,
		 * prints the same mapping again */
		int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
		struct stat st;
		char b;
		if (fd < 0 || fstat(fd, &st) != 0 || !st.st_size) {
			printf("open %s: %s\n", argv[1], strerror(errno));
			return 1;
		}
		const char *pv = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (pv == MAP_FAILED) {
			printf("mmap %s: %s\n", argv[1], strerror(errno));
			return 1;
		}
		printf("%.*s\n", (int)st.st_size, pv);
		fflush(stdout);
		int ff = open(argv[2], O_RDONLY | O_CLOEXEC);
		if (ff < 0 || read(ff, &b, 1) != 1) {
			printf("fifo %s: %s\n", argv[2], strerror(errno));
			return 1;
		}
		printf("%.*s\n", (int)st.st_size, pv);
		return 0;
	}
	if (!strcmp(op, "mmapfd") && argc == 2) { /* a private mapping of an open descriptor */
		int fd = atoi(argv[1]);
		struct stat st;
		if (fstat(fd, &st) != 0) {
			printf("fstat %d: %s\n", fd, strerror(errno));
			return 1;
		}
		void *pv = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
		if (pv == MAP_FAILED) {
			printf("mmap %d: %s\n", fd, strerror(errno));
			return 1;
		}
		printf("%.*s\n", (int)st.st_size, pv ? (const char *)pv : "");
		return 0;
	}
	if (!strcmp(op, "as") && argc == 4) {
		/* what a set-user-ID program does: switch the effective (and so
		 * the file-system) user to UID, then append a line to FILE
		 * (needs CAP_SETUID: tsh_open_as) */
		uid_t u = (uid_t)strtoul(argv[1], NULL, 10);
		if (setresuid((uid_t)-1, u, (uid_t)-1) != 0) {
			printf("setresuid(-1, %u, -1): %s\n", (unsigned)u, strerror(errno));
			return 1;
		}
		int fd = open(argv[2], O_WRONLY | O_APPEND | O_CLOEXEC);
		size_t len = strlen(argv[3]);
		char line[512];
		snprintf(line, sizeof line, "%s\n", argv[3]);
		int ok = fd >= 0 && write(fd, line, len + 1) == (ssize_t)(len + 1) && close(fd) == 0;
		if (!ok)
			printf("append to %s as uid %u: %s\n", argv[2], (unsigned)u, strerror(errno));
		/* _exit: after a change of user the process is not dumpable, and
		 * LeakSanitizer's check at exit (ASan builds) cannot read it */
		fflush(stdout);
		_exit(ok ? 0 : 1);
	}
	fprintf(stderr, "test_tx --helper: unknown request %s\n", op);
	return 2;
}

/* ---------------------------------------------------------------------- */
/* The control channel, directly (fsd/fuse/tpfs_tx_proto.h)                   */

/* getxattr(path, verb); the answer's errno (0: success), or -errno when the
 * channel itself failed; ans gets the answer's text. */
int proto_at(int dirfd, const char *path, const char *verb, char *ans, size_t size)
{
	char buf[65536];
	ssize_t n;
	if (dirfd >= 0)
		n = fgetxattr(dirfd, verb, buf, sizeof buf - 1);
	else
		n = getxattr(path, verb, buf, sizeof buf - 1);
	if (n < 0) {
		int e = errno;
		snprintf(ans, size, "(getxattr %s failed: %s)", verb, strerror(e));
		return -e;
	}
	buf[n] = 0;
	char *sp = strchr(buf, ' ');
	snprintf(ans, size, "%s", sp ? sp + 1 : buf);
	trim(ans);
	return atoi(buf);
}

/* A request from the test process (the non-member), on the mount. */
int proto(const char *verb, char *ans, size_t size) { return proto_at(-1, g_m.mnt, verb, ans, size); }

/* Is transaction id listed (open) by status.all? */
int tx_listed(uint64_t id)
{
	char ans[65536], key[64];
	int e = proto("tpfs.tx.status.all", ans, sizeof ans);
	cr_assert(e == 0, "status.all from the test process: answer %d %s", e, ans);
	snprintf(key, sizeof key, "transaction %llu ", (unsigned long long)id);
	return strstr(ans, key) != NULL;
}

/* ---------------------------------------------------------------------- */
/* The watchdog: tears the mount down if the test process dies             */

void watchdog_start(void)
{
	int p[2];
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		char line[64];
		pid_t daemon = g_m.pid;
		FILE *in;
		close(p[1]);
		setsid();
		in = fdopen(p[0], "r");
		while (in && fgets(line, sizeof line, in)) {
			if (line[0] == 'q')
				_exit(0);
			if (line[0] == 'p')
				daemon = (pid_t)atoi(line + 1);
		}
		if (daemon > 0)
			kill(daemon, SIGKILL);
		execl("/bin/fusermount3", "fusermount3", "-u", "-z", g_m.mnt, (char *)NULL);
		_exit(0);
	}
	close(p[0]);
	g_watch = p[1];
}

void watchdog_pid(void)
{
	char line[64];
	int n = snprintf(line, sizeof line, "p%d\n", (int)g_m.pid);
	if (g_watch >= 0 && write(g_watch, line, (size_t)n) != n) {
		/* the watchdog is gone: nothing to tell */
	}
}

void watchdog_quit(void)
{
	if (g_watch >= 0) {
		if (write(g_watch, "q\n", 2) != 2) {
			/* gone already */
		}
		close(g_watch);
		g_watch = -1;
	}
}

/* ---------------------------------------------------------------------- */
/* Transaction shells (members)                                            */


tsh g_sh[MAX_SH];
int g_nsh;
pid_t g_kids[16]; /* other children to kill at the end */
int g_nkids;

void close_fds_from(int lowest)
{
	for (int fd = lowest; fd < 1024; fd++)
		close(fd);
}

/* The calling child becomes uid (and gid) uid, keeping CAP_SETUID across
 * exec (an ambient capability): its commands can do what a set-user-ID
 * program does (helper "as").  0 on success. */
int become_with_setuid(uid_t uid)
{
	return txproc_become_with_cap(uid, CAP_SETUID);
}

/* A shell in the mount; bound (bind != 0) to a new transaction at birth;
 * run as uid (not 0: with CAP_SETUID kept, become_with_setuid). */
tsh *tsh_open_as(const char *name, int bind, uid_t uid)
{
	int pin[2], pout[2];
	cr_assert(g_nsh < MAX_SH);
	tsh *s = &g_sh[g_nsh++];
	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", name);
	cr_assert(pipe2(pin, O_CLOEXEC) == 0 && pipe2(pout, O_CLOEXEC) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		char ans[512], verb[64], line[700];
		setpgid(0, 0);
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(pout[1], 2);
		close_fds_from(3);
		if (uid && become_with_setuid(uid) != 0) {
			snprintf(line, sizeof line, "@@TX cannot become uid %u: %s\n", (unsigned)uid, strerror(errno));
			if (write(1, line, strlen(line)) < 0)
				_exit(125);
			_exit(124);
		}
		if (chdir(g_m.mnt) != 0)
			_exit(126);
		unsetenv("BXFI_MAP"); /* Criterion's, not the helper's */
		if (bind) {
			snprintf(verb, sizeof verb, "tpfs.tx.begin.%d", (int)getpid());
			int e = proto(verb, ans, sizeof ans);
			snprintf(line, sizeof line, "@@TX %d %s\n", e, ans);
		} else {
			snprintf(line, sizeof line, "@@TX none\n");
		}
		if (write(1, line, strlen(line)) < 0)
			_exit(125);
		execl("/bin/sh", "sh", "-s", (char *)NULL);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	s->pid = pid;
	s->in = pin[1];
	s->out = pout[0];
	/* the first line: the binding */
	double end = now_s() + 10;
	char *nl = NULL;
	while (!(nl = memchr(s->acc, '\n', s->len)) && now_s() < end) {
		struct pollfd p = {s->out, POLLIN, 0};
		if (poll(&p, 1, 100) > 0) {
			ssize_t n = read(s->out, s->acc + s->len, sizeof s->acc - 1 - s->len);
			if (n <= 0)
				break;
			s->len += (size_t)n;
		}
	}
	cr_assert(nl != NULL, "shell %s did not start", name);
	*nl = 0;
	if (bind) {
		int e = -1;
		unsigned long long id = 0;
		cr_assert(sscanf(s->acc, "@@TX %d %llu", &e, &id) == 2 && e == 0 && id > 0,
			  "shell %s (pid %d): tpfs.tx.begin.%d answered \"%s\", expected \"0 <id>\"", name, (int)pid,
			  (int)pid, s->acc + 5);
		s->txid = id;
	}
	size_t rest = s->len - (size_t)(nl + 1 - s->acc);
	memmove(s->acc, nl + 1, rest);
	s->len = rest;
	return s;
}

tsh *tsh_open(const char *name, int bind) { return tsh_open_as(name, bind, 0); }

/* Starts a command in the shell (stdin /dev/null, stderr into stdout). */
void tsh_send(tsh *s, const char *fmt, ...)
{
	char cmd[6000], line[6200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	scopy(s->cmd, sizeof s->cmd, cmd);
	int n = snprintf(line, sizeof line, "{ %s\n} </dev/null 2>&1; echo \"@@END $?\"\n", cmd);
	cr_assert(write(s->in, line, (size_t)n) == n, "shell %s: cannot send `%s`: %s", s->name, cmd, strerror(errno));
}

/* Waits for the command sent last: its exit status, its output in out;
 * -1 if it has not finished after timeout_ms (it goes on), -2 if the
 * shell is gone. */
int tsh_wait(tsh *s, char *out, size_t size, int timeout_ms)
{
	double end = now_s() + timeout_ms / 1000.0;
	for (;;) {
		s->acc[s->len] = 0;
		char *m = strstr(s->acc, "@@END ");
		if (m && strchr(m, '\n')) {
			int st = atoi(m + 6);
			*m = 0;
			if (out) {
				scopy(out, size, s->acc);
				trim(out);
			}
			char *after = strchr(m + 1, '\n') + 1;
			size_t rest = s->len - (size_t)(after - s->acc);
			memmove(s->acc, after, rest);
			s->len = rest;
			return st;
		}
		double left = end - now_s();
		if (left <= 0)
			return -1;
		struct pollfd p = {s->out, POLLIN, 0};
		int r = poll(&p, 1, (int)(left * 1000) + 1);
		if (r > 0) {
			ssize_t n = read(s->out, s->acc + s->len, sizeof s->acc - 1 - s->len);
			if (n <= 0) {
				if (out) {
					scopy(out, size, s->acc);
					trim(out);
				}
				return -2;
			}
			s->len += (size_t)n;
		}
	}
}

/* Runs a command (up to 30 s); its exit status, its output in a static
 * buffer *outp. */
int tsh_run(tsh *s, const char **outp, const char *fmt, ...)
{
	static char outs[4][VIEW_MAX];
	static int k;
	char cmd[6000];
	char *out = outs[k++ % 4];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	tsh_send(s, "%s", cmd);
	int st = tsh_wait(s, out, VIEW_MAX, 30000);
	cr_assert(st >= 0, "shell %s: `%.300s` %s (output so far: %.500s)", s->name, cmd,
		  st == -1 ? "did not finish in 30 s" : "lost its shell", out);
	if (outp)
		*outp = out;
	return st;
}

/* A member's check: the command's output must be `expect`. */
void mcheck(tsh *s, const char *expect, const char *fmt, ...)
{
	char cmd[2000];
	const char *out;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int st = tsh_run(s, &out, "%s", cmd);
	cr_expect(st == 0 && !strcmp(out, expect),
		  "member (shell %s, a child process of the bound shell) `%s`: saw \"%s\" (exit %d), expected \"%s\"",
		  s->name, cmd, out, st, expect);
}

/* kill -9 of the shell (whole=1: and everything it started). */
void tsh_kill(tsh *s, int whole)
{
	if (!s->pid)
		return;
	kill(whole ? -s->pid : s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
	close(s->in);
	close(s->out);
	s->pid = 0;
}

/* A member's commit or abort through the protocol (from a child of the
 * shell): the answer's text; asserts success. */
void tsh_commit(tsh *s)
{
	SH_OK(s, HELPER "proto tpfs.tx.commit");
}

void tsh_abort(tsh *s)
{
	SH_OK(s, HELPER "proto tpfs.tx.abort");
}

/* The view of rel from a process of the shell (a member, if it is bound). */
void tsh_view(tsh *s, const char *rel, char *buf, size_t size)
{
	const char *out;
	int st = tsh_run(s, &out, HELPER "view %s", rel);
	cr_assert(st == 0 && out[0], "shell %s: the view of %s failed (exit %d): %s", s->name, rel, st, out);
	snprintf(buf, size, "%s\n", out);
}

/* ---------------------------------------------------------------------- */
/* Mount, set-up, tear-down                                               */

/* Kills everything the test started.  A process waiting in the daemon (for
 * a transaction's lock) dies only when its request is answered, so every
 * process is signalled first, then the daemon killed (which ends every
 * request), and only then are they waited for. */
static void fini(void)
{
	alarm(0);
	for (int i = 0; i < g_nsh; i++)
		if (g_sh[i].pid)
			kill(-g_sh[i].pid, SIGKILL);
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] > 0)
			kill(g_kids[i], SIGKILL);
	if (g_m.pid)
		tfs_kill9(&g_m);
	for (int i = 0; i < g_nsh; i++)
		tsh_kill(&g_sh[i], 1);
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] > 0)
			waitpid(g_kids[i], NULL, 0);
	watchdog_quit();
	if (g_m.dir[0] && !getenv("TX_KEEP")) /* TX_KEEP=1 keeps a failed test's store */
		tfs_cleanup(&g_m);
}

TestSuite(tx, .fini = fini);

const char *g_opts; /* tpfsd's -o options for start() (NULL: none) */

/* preload: a shim LD_PRELOADed into the daemon (this mount only), or NULL. */
void start_with(const char *preload)
{
	static char path[8192];
	const char *bin = getenv("TX_BIN");
	if (!g_self[0]) { /* Criterion's workers may not pass through main */
		ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
		g_self[n > 0 ? n : 0] = 0;
	}
	cr_assert(g_self[0], "cannot read /proc/self/exe");
	if (preload)
		setenv("LD_PRELOAD", preload, 1);
	int rc = tfs_start(&g_m, NULL, g_opts);
	unsetenv("LD_PRELOAD");
	cr_assert(rc == 0, "cannot make and mount a store (TPFSD, TPFS_BIN, /dev/fuse?)");
	watchdog_start();
	snprintf(path, sizeof path, "%s:%s", bin ? bin : "/nonexistent", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	setenv("PATH", path, 1);
	setenv("TPFS_MOUNT", g_m.mnt, 1);
	setenv("TX_SELF", g_self, 1);
	setenv("LC_ALL", "C", 1);
}

void start(void) { start_with(NULL); }

/* Kills the shells, clean unmount (tpfsd exits 0), `tpfs check` clean,
 * removes the store. */
void finish(void)
{
	for (int i = 0; i < g_nsh; i++)
		tsh_kill(&g_sh[i], 1);
	g_nsh = 0;
	int st = tfs_stop(&g_m);
	cr_assert(st == 0, "tpfsd did not exit cleanly at unmount (status %d)", st);
	st = tfs_check(&g_m);
	cr_assert(st == 0, "tpfs check after the test: status %d (%s; TX_KEEP=1 keeps it)", st, g_m.store);
	watchdog_quit();
	tfs_cleanup(&g_m);
	g_m.dir[0] = 0;
}

void put(const char *rel, const char *text)
{
	int fd = open(mp(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "create %s: %s", mp(rel), strerror(errno));
	cr_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write %s: %s", rel, strerror(errno));
	cr_assert(close(fd) == 0);
}

/* ---------------------------------------------------------------------- */
/* The non-member: timed calls                                            */

const char *volatile g_what;
double g_t0, g_nm_max;
long g_nm_calls;

void on_alarm(int sig)
{
	static const char m[] = "test_tx: a non-member call blocked for 10 s (readers must never wait): ";
	(void)sig;
	if (write(2, m, sizeof m - 1) < 0 || (g_what && write(2, g_what, strlen(g_what)) < 0) || write(2, "\n", 1) < 0)
		_exit(71);
	_exit(71);
}

void nm_begin(const char *what)
{
	g_what = what;
	signal(SIGALRM, on_alarm);
	alarm(10);
	g_t0 = now_s();
}

void nm_end(void)
{
	double dt = now_s() - g_t0;
	alarm(0);
	g_nm_calls++;
	if (dt > g_nm_max)
		g_nm_max = dt;
	cr_expect(dt < NM_LIMIT, "non-member %s took %.2f s (expected < %.0f s: readers never wait for a transaction)",
		  g_what, dt, NM_LIMIT);
}

/* The non-member's view of rel (timed). */
void nm_view(const char *rel, char *buf, size_t size)
{
	char what[300];
	snprintf(what, sizeof what, "view of %s (lstat, open, read, readdir, readlink, listxattr, getxattr)", rel);
	nm_begin(what);
	view(g_m.mnt, rel, buf, size);
	nm_end();
}

/* The non-member reads a whole file (timed); its length or -errno. */
ssize_t nm_read(const char *rel, char *buf, size_t size)
{
	char what[300];
	snprintf(what, sizeof what, "read of %s", rel);
	nm_begin(what);
	int fd = open(mp(rel), O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -errno : read(fd, buf, size - 1);
	if (fd >= 0 && n < 0)
		n = -errno;
	if (fd >= 0)
		close(fd);
	nm_end();
	buf[n > 0 ? n : 0] = 0;
	return n;
}

/* access(F_OK) by the non-member (timed): 0 or errno. */
int nm_access(const char *rel)
{
	char what[300];
	snprintf(what, sizeof what, "access(%s)", rel);
	nm_begin(what);
	int e = access(mp(rel), F_OK) == 0 ? 0 : errno;
	nm_end();
	return e;
}

void nm_statvfs(struct statvfs *sv)
{
	nm_begin("statvfs of the mount");
	cr_assert(statvfs(g_m.mnt, sv) == 0, "statvfs %s: %s", g_m.mnt, strerror(errno));
	nm_end();
}

/* ---------------------------------------------------------------------- */
/* The scenario: a committed tree, then a member's changes                 */

/* Committed, by the non-member, before any transaction. */
void scen_setup(void)
{
	cr_assert(mkdir(mp("d"), 0755) == 0, "mkdir d: %s", strerror(errno));
	put("d/f", "old\n");
	put("d/g", "gdata");
	put("d/h", "hh");
	put("d/del", "deleted");
	cr_assert(symlink("old-target", mp("d/l")) == 0);
	cr_assert(mkdir(mp("d/sub"), 0755) == 0);
	cr_assert(mkdir(mp("d/sub2"), 0755) == 0);
	put("d/sub2/x", "x");
	cr_assert(setxattr(mp("d/f"), "user.k", "v0", 2, 0) == 0, "setxattr d/f: %s", strerror(errno));
	cr_assert(setxattr(mp("d/f"), "user.gone", "bye", 3, 0) == 0);
	cr_assert(chmod(mp("d/f"), 0644) == 0 && chmod(mp("d/g"), 0644) == 0);
}

/* The member's changes, each by another child process of the shell (the
 * builtins -- printf, the redirections -- by the bound shell itself). */
void scen_change(tsh *s)
{
	SH_OK(s, "sh -c \"printf 'new content\\n' > d/f\"");  /* data, size */
	SH_OK(s, "sh -c 'printf more >> d/g'");               /* append */
	SH_OK(s, "printf n > d/new");                         /* a new name, by the bound shell */
	SH_OK(s, "mv d/h d/h2");                              /* rename */
	SH_OK(s, "truncate -s 10000 d/h2");                   /* size */
	SH_OK(s, "rm d/del");                                 /* deletion */
	SH_OK(s, "chmod 600 d/f");
	SH_OK(s, "chown 123:456 d/g");
	SH_OK(s, "touch -m -d @%d d/new", MTIME_NEW);         /* utimes */
	SH_OK(s, "ln -s new-target d/l2");                    /* symlinks */
	SH_OK(s, "ln -sfn other-target d/l");
	SH_OK(s, HELPER "setx d/f user.k v1");                /* xattrs */
	SH_OK(s, HELPER "setx d/new user.n nv");
	SH_OK(s, HELPER "rmx d/f user.gone");
	SH_OK(s, "mkdir d/newdir && printf y > d/newdir/y");  /* mkdir */
	SH_OK(s, "rmdir d/sub");                              /* rmdir */
	SH_OK(s, "mv d/sub2 d/sub3");                         /* a directory renamed */
}

/* What a member sees after scen_change: each change, checked by a process
 * other than the one that made it. */
void scen_member_checks(tsh *s)
{
	char x[32];
	mcheck(s, "new content", "cat d/f");
	mcheck(s, "12 600", "stat -c '%%s %%a' d/f");
	mcheck(s, "gdatamore", "read v < d/g; echo \"$v\""); /* the bound shell itself */
	mcheck(s, "9 123:456", "stat -c '%%s %%u:%%g' d/g");
	mcheck(s, "n", "cat d/new");
	snprintf(x, sizeof x, "%d", MTIME_NEW);
	mcheck(s, x, "stat -c %%Y d/new");
	mcheck(s, "absent", "test -e d/h && echo present || echo absent");
	mcheck(s, "10000 hh", "echo $(stat -c %%s d/h2) $(head -c 2 d/h2)");
	mcheck(s, "absent", "test -e d/del && echo present || echo absent");
	mcheck(s, "new-target", "readlink d/l2");
	mcheck(s, "other-target", "readlink d/l");
	mcheck(s, "v1", HELPER "getx d/f user.k");
	mcheck(s, "nv", HELPER "getx d/new user.n");
	snprintf(x, sizeof x, "ERR %d", ENODATA);
	mcheck(s, x, HELPER "getx d/f user.gone");
	mcheck(s, "y", "cat d/newdir/y");
	mcheck(s, "absent", "test -e d/sub && echo present || echo absent");
	mcheck(s, "absent", "test -e d/sub2 && echo present || echo absent");
	mcheck(s, "x", "cat d/sub3/x");
	mcheck(s, ". .. f g h2 l l2 new newdir sub3", "echo $(ls -a d)");
}

/* The non-member's specific checks of the committed (old) state, besides
 * the view. */
void nm_checks_old(const char *when)
{
	char buf[256], x[64];
	ssize_t n = nm_read("d/f", buf, sizeof buf);
	cr_expect(n == 4 && !strcmp(buf, "old\n"), "non-member (%s): d/f reads \"%s\" (%zd), expected \"old\\n\"", when,
		  buf, n);
	int e = nm_access("d/new");
	cr_expect(e == ENOENT, "non-member (%s): access(d/new) = %s, expected ENOENT (uncommitted create)", when,
		  strerror(e));
	e = nm_access("d/l2");
	cr_expect(e == ENOENT, "non-member (%s): access(d/l2) = %s, expected ENOENT", when, strerror(e));
	nm_begin("open(d/new)");
	int fd = open(mp("d/new"), O_RDONLY | O_CLOEXEC);
	e = fd < 0 ? errno : 0;
	nm_end();
	if (fd >= 0)
		close(fd);
	cr_expect(e == ENOENT, "non-member (%s): open(d/new) = %s, expected ENOENT", when, e ? strerror(e) : "success");
	e = nm_access("d/del");
	cr_expect(e == 0, "non-member (%s): access(d/del) = %s, expected it present (uncommitted delete)", when,
		  strerror(e));
	nm_begin("readlink(d/l)");
	n = readlink(mp("d/l"), x, sizeof x - 1);
	nm_end();
	x[n > 0 ? n : 0] = 0;
	cr_expect(n > 0 && !strcmp(x, "old-target"), "non-member (%s): readlink d/l = \"%s\", expected \"old-target\"", when,
		  x);
	nm_begin("getxattr(d/f, user.k)");
	n = getxattr(mp("d/f"), "user.k", x, sizeof x - 1);
	nm_end();
	x[n > 0 ? n : 0] = 0;
	cr_expect(n == 2 && !strcmp(x, "v0"), "non-member (%s): getxattr d/f user.k = \"%s\", expected \"v0\"", when, x);
}

int main(int argc, char *argv[]) { return txtest_main(argc, argv, g_self, sizeof g_self, helper); }
