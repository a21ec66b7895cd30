/*
 * fsutil -- see fsutil.h.
 *
 * The watchdog: a Criterion timeout or a crash kills the test process, and
 * the daemon it started would go on serving a mount nobody removes.  So
 * fsu_start forks a watchdog in its own session that holds the read end of
 * a pipe; the test process writes the daemon's pid into it whenever it
 * changes.  When the pipe closes (the test process is gone) and the last pid
 * is not 0, the watchdog kills that daemon, unmounts lazily and removes the
 * temporary directories.  Workers forked with fsu_fork close their copy of
 * the pipe, so that a worker stuck on a hung mount does not keep it open.
 */
#include "fsutil.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

tfs_mount fsu_m;
char fsu_host[256];
static int wd_fd = -1; /* write end of the watchdog's pipe */
static char mount_opts[512]; /* -o of fsu_start, used again by fsu_remount */

static void wd_tell(pid_t pid)
{
	int32_t v = (int32_t)pid;
	if (wd_fd >= 0 && write(wd_fd, &v, sizeof v) != (ssize_t)sizeof v)
		fprintf(stderr, "fsutil: watchdog pipe: %s\n", strerror(errno));
}

static void wd_start(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		cr_assert_fail("pipe2: %s", strerror(errno));
	pid_t pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int32_t v, last = 0;
		close(p[1]);
		if (setsid() < 0 || chdir("/") != 0)
			_exit(1);
		/* the test's own stdin/stdout stay open: nothing to do with them */
		while (read(p[0], &v, sizeof v) == (ssize_t)sizeof v)
			last = v;
		if (last > 0) {
			char cmd[2000];
			kill(last, SIGKILL);
			/* the mount, then anything a test mounted below the directory */
			snprintf(cmd, sizeof cmd,
				 "/bin/fusermount3 -u -z '%s' >/dev/null 2>&1; "
				 "for m in $(awk -v d='%s/' 'index($2, d) == 1 {print $2}' /proc/mounts); do umount -l $m; done; "
				 "rm -rf '%s' '%s'",
				 fsu_m.mnt, fsu_m.dir, fsu_m.dir, fsu_host);
			fprintf(stderr, "fsutil watchdog: the test process died with tpfsd %d running: killed it\n",
				(int)last);
			if (system(cmd) != 0)
				_exit(1);
		}
		_exit(0);
	}
	close(p[0]);
	wd_fd = p[1];
}

void fsu_start(const char *opts, int with_host) { fsu_start_mkfs(NULL, opts, with_host); }

void fsu_start_mkfs(const char *mkfs_args, const char *opts, int with_host)
{
	memset(&fsu_m, 0, sizeof fsu_m);
	fsu_host[0] = 0;
	snprintf(mount_opts, sizeof mount_opts, "%s", opts ? opts : "");
	umask(022);
	if (with_host) {
		snprintf(fsu_host, sizeof fsu_host, "/var/tmp/tpfs-host-XXXXXX");
		cr_assert_not_null(mkdtemp(fsu_host), "mkdtemp: %s", strerror(errno));
		cr_assert_eq(chmod(fsu_host, 0755), 0);
	}
	cr_assert_eq(access("/dev/fuse", R_OK | W_OK), 0, "/dev/fuse is not usable: %s", strerror(errno));
	/* meson sets MALLOC_PERTURB_ for the test (glibc read it at our start);
	 * the daemon would fill its whole buffer pool (1/8 of the memory) at
	 * every mount, a second each: not for the daemon and the tools */
	unsetenv("MALLOC_PERTURB_");
	int rc = tfs_start(&fsu_m, mkfs_args, opts);
	if (rc != 0) { /* Criterion runs no .fini after a failed .init: clean up here */
		tfs_cleanup(&fsu_m);
		if (fsu_host[0])
			fsu_rm_rf(fsu_host);
		fsu_host[0] = 0;
	}
	cr_assert_eq(rc, 0, "tfs_start failed (TPFSD=%s TPFS_BIN=%s): is the daemon built?",
		     getenv("TPFSD") ? getenv("TPFSD") : "(unset)", getenv("TPFS_BIN") ? getenv("TPFS_BIN") : "(unset)");
	/* other users must reach the mount point (mkdtemp makes it 0700) */
	cr_assert_eq(chmod(fsu_m.dir, 0755), 0);
	wd_start();
	wd_tell(fsu_m.pid);
}

void fsu_stop_check(void)
{
	int rc = tfs_stop(&fsu_m);
	wd_tell(0);
	cr_assert_eq(rc, 0, "tpfsd exited with status %d after fusermount3 -u (want 0)", rc);
	rc = tfs_check(&fsu_m);
	cr_assert_eq(rc, 0, "tpfs check %s: exit status %d (want 0: clean)", fsu_m.store, rc);
}

void fsu_remount(void)
{
	int rc = tfs_remount(&fsu_m, mount_opts[0] ? mount_opts : NULL);
	wd_tell(fsu_m.pid);
	cr_assert_eq(rc, 0, "remounting %s failed", fsu_m.store);
}

int fsu_try_remount(const char *opts)
{
	int rc = tfs_remount(&fsu_m, opts);
	wd_tell(fsu_m.pid);
	return rc;
}

void fsu_cycle(void)
{
	fsu_stop_check();
	fsu_remount();
}

void fsu_kill9(void)
{
	tfs_kill9(&fsu_m);
	wd_tell(0);
}

void fsu_teardown(void)
{
	if (fsu_m.pid)
		tfs_kill9(&fsu_m);
	wd_tell(0);
	tfs_cleanup(&fsu_m);
	if (fsu_host[0])
		fsu_rm_rf(fsu_host);
	fsu_host[0] = 0;
	if (wd_fd >= 0)
		close(wd_fd);
	wd_fd = -1;
}

/* Runs argv with stdout and stderr into a buffer; the exit status.  A
 * command still running after 20 s (a tpfsd that mounted when it should
 * have refused) gets SIGTERM, which unmounts it, and fails the test. */
int fsu_run_capture(const char *const argv[], char *out, size_t cap)
{
	int p[2];
	size_t n = 0;
	double deadline = fsu_now() + 20;
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fsu_fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	int late = 0;
	for (;;) {
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		if (!late && fsu_now() > deadline) {
			kill(pid, SIGTERM);
			late = 1;
		}
		if (poll(&pf, 1, 200) == 0)
			continue;
		ssize_t r = n < cap - 1 ? read(p[0], out + n, cap - 1 - n) : 0;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	out[n] = 0;
	close(p[0]);
	int st = fsu_wait(pid);
	cr_assert_not(late, "%s was still running after 20 s: %s", argv[0], out);
	return st;
}

int fsu_check_counts(uint64_t *dirs, uint64_t *others, uint64_t *blocks)
{
	const char *tpfs = getenv("TPFS_BIN");
	char out[8192];
	cr_assert_not_null(tpfs, "TPFS_BIN is not set");
	const char *argv[] = {tpfs, "check", "-v", fsu_m.store, NULL};
	int st = fsu_run_capture(argv, out, sizeof out);
	uint64_t d = 0, o = 0, b = 0;
	const char *s = strstr(out, " directories, ");
	int found = 0;
	if (s) {
		while (s > out && s[-1] >= '0' && s[-1] <= '9')
			s--;
		found = sscanf(s, "%" SCNu64 " directories, %" SCNu64 " other inodes, %" SCNu64 " blocks", &d, &o, &b) == 3;
	}
	if (st != 0 || !found)
		fprintf(stderr, "tpfs check -v %s (status %d):\n%s", fsu_m.store, st, out);
	cr_assert(found, "tpfs check -v printed no counts");
	if (dirs)
		*dirs = d;
	if (others)
		*others = o;
	if (blocks)
		*blocks = b;
	return st;
}

pid_t fsu_fork(void)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0 && wd_fd >= 0) {
		close(wd_fd);
		wd_fd = -1;
	}
	return pid;
}

int fsu_wait(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void fsu_become(const fsu_user *u)
{
	if (u->uid == 0 && u->gid == 0 && u->ngroups == 0)
		return;
	if (setgroups((size_t)u->ngroups, u->groups) != 0 || setresgid(u->gid, u->gid, u->gid) != 0 ||
	    setresuid(u->uid, u->uid, u->uid) != 0) {
		fprintf(stderr, "fsutil: cannot become uid %u gid %u: %s\n", (unsigned)u->uid, (unsigned)u->gid,
			strerror(errno));
		_exit(99);
	}
}

const char *fsu_path(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return buf;
}

double fsu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int fsu_long(void)
{
	const char *s = getenv("TP_LONG");
	return s && *s && strcmp(s, "0") != 0;
}

uint64_t fsu_env_seed(const char *var, uint64_t dflt)
{
	const char *s = getenv(var);
	return s && *s ? strtoull(s, NULL, 0) : dflt;
}

int fsu_write_file(const char *path, const void *buf, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, (const char *)buf + done, len - done);
		if (w < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		done += (size_t)w;
	}
	return close(fd) == 0 ? 0 : -errno;
}

ssize_t fsu_read_file(const char *path, void *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < cap) {
		ssize_t r = read(fd, (char *)buf + done, cap - done);
		if (r < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	close(fd);
	return (ssize_t)done;
}

int fsu_rm_rf(const char *path)
{
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- snapshots of a tree ---- */

void fsu_sb_printf(fsu_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (b->p && (size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		b->cap = (b->cap + (size_t)k + 1) * 2;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

typedef struct inomap {
	struct {
		ino_t ino;
		char rel[512];
	} v[256];
	int n;
} inomap;

static int not_dots(const struct dirent *d) { return strcmp(d->d_name, ".") && strcmp(d->d_name, ".."); }

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void desc_xattrs(fsu_sbuf *b, const char *path)
{
	static char list[70000], val[70000];
	ssize_t n = llistxattr(path, list, sizeof list);
	if (n <= 0)
		return;
	char *names[256];
	int k = 0;
	for (char *s = list; s < list + n && k < 256; s += strlen(s) + 1)
		if (strncmp(s, "security.", 9) && strncmp(s, "system.", 7))
			names[k++] = s;
	qsort(names, (size_t)k, sizeof names[0], cmp_str);
	for (int i = 0; i < k; i++) {
		ssize_t vl = lgetxattr(path, names[i], val, sizeof val);
		fsu_sb_printf(b, " x[%s=%zd:%016" PRIx64 "]", names[i], vl, vl > 0 ? fnv(val, (size_t)vl, 14695981039346656037ull) : 0);
	}
}

/* dtype, dino: what readdir said of this entry (dtype -1: the root) */
static void desc_node(fsu_sbuf *b, const char *path, const char *rel, int times, inomap *im, int dtype, ino_t dino)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		fsu_sb_printf(b, "%s: lstat %s\n", rel, strerror(errno));
		return;
	}
	if (dtype >= 0 && dtype != (int)IFTODT(st.st_mode))
		fsu_sb_printf(b, "[readdir d_type %d, lstat type %d] ", dtype, (int)IFTODT(st.st_mode));
	if (dtype >= 0 && dino != st.st_ino)
		fsu_sb_printf(b, "[readdir d_ino %llu, st_ino %llu] ", (unsigned long long)dino, (unsigned long long)st.st_ino);
	char t = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : S_ISFIFO(st.st_mode) ? 'p'
		 : S_ISCHR(st.st_mode) ? 'c' : S_ISBLK(st.st_mode) ? 'b' : S_ISSOCK(st.st_mode) ? 's' : '?';
	fsu_sb_printf(b, "%s %c%04o n%lu u%u g%u", rel, t, (unsigned)(st.st_mode & 07777), (unsigned long)st.st_nlink,
		  (unsigned)st.st_uid, (unsigned)st.st_gid);
	if (!S_ISDIR(st.st_mode))
		fsu_sb_printf(b, " s%lld", (long long)st.st_size);
	if (S_ISREG(st.st_mode)) {
		if (st.st_size <= (1 << 20)) {
			static char data[1 << 20];
			ssize_t r = fsu_read_file(path, data, sizeof data);
			fsu_sb_printf(b, " h%016" PRIx64, r >= 0 ? fnv(data, (size_t)r, 14695981039346656037ull) : (uint64_t)r);
		} else {
			fsu_sb_printf(b, " big");
		}
	} else if (S_ISLNK(st.st_mode)) {
		static char tg[8192];
		ssize_t r = readlink(path, tg, sizeof tg - 1);
		tg[r < 0 ? 0 : r] = 0;
		if (r > 64)
			fsu_sb_printf(b, " ->[%zd:%016" PRIx64 "]", r, fnv(tg, (size_t)r, 14695981039346656037ull));
		else
			fsu_sb_printf(b, " ->%s", tg);
	} else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		fsu_sb_printf(b, " r%u,%u", major(st.st_rdev), minor(st.st_rdev));
	}
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		int i;
		for (i = 0; i < im->n && im->v[i].ino != st.st_ino; i++)
			;
		if (i < im->n) {
			fsu_sb_printf(b, " L=%s", im->v[i].rel);
		} else if (im->n < 256) {
			im->v[im->n].ino = st.st_ino;
			snprintf(im->v[im->n].rel, sizeof im->v[0].rel, "%s", rel);
			im->n++;
		}
	}
	desc_xattrs(b, path);
	if (times)
		fsu_sb_printf(b, " m%lld.%09ld c%lld.%09ld", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
			  (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
	fsu_sb_printf(b, "\n");
	if (S_ISDIR(st.st_mode)) {
		struct dirent **names;
		int n = scandir(path, &names, not_dots, alphasort);
		if (n < 0) {
			fsu_sb_printf(b, "%s: scandir %s\n", rel, strerror(errno));
			return;
		}
		for (int i = 0; i < n; i++) {
			size_t pl = strlen(path) + strlen(names[i]->d_name) + 2, rl = strlen(rel) + strlen(names[i]->d_name) + 2;
			char *cp = malloc(pl), *cr = malloc(rl);
			snprintf(cp, pl, "%s/%s", path, names[i]->d_name);
			snprintf(cr, rl, "%s/%s", rel, names[i]->d_name);
			desc_node(b, cp, cr, times, im, names[i]->d_type, names[i]->d_ino);
			free(cp);
			free(cr);
			free(names[i]);
		}
		free(names);
	}
}

char *fsu_tree(const char *root, int times)
{
	fsu_sbuf b = {0};
	inomap *im = calloc(1, sizeof *im);
	desc_node(&b, root, ".", times, im, -1, 0);
	free(im);
	if (!b.p)
		fsu_sb_printf(&b, "%s", "");
	return b.p;
}

void fsu_print_diff(const char *what, const char *xl, const char *yl, const char *x, const char *y)
{
	fprintf(stderr, "    %s differ:\n", what);
	const char *p = x, *q = y;
	int shown = 0;
	while ((*p || *q) && shown < 12) {
		const char *pe = strchr(p, '\n'), *qe = strchr(q, '\n');
		size_t pl = pe ? (size_t)(pe - p) : strlen(p), ql = qe ? (size_t)(qe - q) : strlen(q);
		if (pl != ql || memcmp(p, q, pl) != 0) {
			fprintf(stderr, "      %s: %.*s\n      %s: %.*s\n", xl, (int)(pl > 300 ? 300 : pl), p, yl,
				(int)(ql > 300 ? 300 : ql), q);
			shown++;
		}
		p += pl + (pe ? 1 : 0);
		q += ql + (qe ? 1 : 0);
	}
}

int fsu_ts_eq(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

const char *fsu_errname(int e)
{
	static char b[4][64];
	static int k;
	if (e == 0)
		return "success";
	k = (k + 1) % 4;
	snprintf(b[k], sizeof b[k], "%s", strerrorname_np(e) ? strerrorname_np(e) : "?");
	return b[k];
}

const fsu_user fsu_users[4] = {
	{0, 0, 0, {0}},
	{1000, 1000, 1, {1000}},
	{1001, 1001, 2, {1001, 1000}},
	{1002, 1002, 1, {1002}},
};
