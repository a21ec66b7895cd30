/*
 * tpfsd -- the tpfs daemon: serves a store as a file system through
 * libfuse3's low-level API with a multi-threaded session loop.
 *
 * Start-up order, and why:
 * G1  Options are parsed, and the FUSE session made (libfuse rejects
 *     unknown options), before anything touches the store.
 * G2  Unless -f, the daemon forks before it opens the store: the child does
 *     all the work and the parent only waits on a pipe for the child's
 *     verdict, then exits with it.  So recovery messages and errors reach
 *     the terminal, the exit status says whether the mount happened, and no
 *     thread, lock or open file of the engine has to survive a fork
 *     (fuse_daemonize forks last, which would lose them).
 * G3  The store is opened (and recovered) before the kernel mount, so a
 *     mount that fails leaves nothing mounted, and a mounted file system
 *     always has a store behind it.
 * G4  Paths are made absolute first: the daemon leaves its working
 *     directory for / when it detaches, and the engine opens log segments
 *     by path long after.
 * G5  Before the store is opened, it is made private to its owner again if
 *     anything of it is open to group or others (be_private; each path is
 *     logged with its old and new mode).  A read-only mount changes
 *     nothing, so it refuses such a store, naming each path.
 * G6  The mount point is looked at in the mount table, after the store
 *     lock is held and before the store is opened (clear_mountpoint): a
 *     dead mount of the same store, left by a crash, is detached; a live
 *     tpfs mount of another store is refused; nothing is stacked on them.
 * Shutdown: fusermount3 -u (or umount) ends the session loop; SIGTERM,
 * SIGINT and SIGHUP end it through libfuse's handlers.  Then the kernel
 * mount goes, the tick thread stops, and fs_unmount flushes the log and
 * writes a checkpoint (the next mount needs no redo).  Its result is the
 * exit status.  Signals are blocked during shutdown.
 *
 * Logging: fsd_log.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fsd_io.h"
#include "fsd_log.h"
#include "fs.h"
#include "fs_lock.h"
#include "fsd_ops.h"
#include "backend.h"

#ifndef TPFS_VERSION
#define TPFS_VERSION "0.1.0"
#endif

static const char usage[] =
	"usage: tpfsd STORE MOUNTPOINT [-o OPTION[,OPTION...]]... [-f] [-d]\n"
	"       tpfsd -h | --help | -V | --version\n"
	"\n"
	"Serves the tpfs store STORE (made by `tpfs mkfs STORE`) as a file system\n"
	"mounted on MOUNTPOINT, through FUSE.  The store is opened, and recovered\n"
	"if it was not closed cleanly, before anything is mounted: recovery messages\n"
	"and errors go to the terminal, and the exit status is 1 if the store cannot\n"
	"be opened or the mount fails.  Then tpfsd detaches and logs to syslog\n"
	"(facility daemon), unless -f or -d; a read-write mount also keeps its\n"
	"messages in STORE/tpfsd.log (the last 1-2 MiB; `tpfs stat` names it).\n"
	"\n"
	"A store serves one mount.  tpfsd waits for a daemon still closing the store\n"
	"(after an unmount), saying so, at most 120 s or $TPFS_LOCK_WAIT seconds,\n"
	"and refuses a store mounted elsewhere, naming its daemon and mount point.\n"
	"A dead mount of the same store on MOUNTPOINT (its daemon killed) is\n"
	"cleared, with a message; a live tpfs mount of another store there is\n"
	"refused: tpfsd never mounts on top of one.\n"
	"\n"
	"It runs until the file system is unmounted (fusermount3 -u MOUNTPOINT, or\n"
	"umount MOUNTPOINT as root) or it receives SIGTERM, SIGINT or SIGHUP; then it\n"
	"unmounts, makes every change durable and writes a checkpoint, so that the\n"
	"next mount needs no recovery.\n"
	"\n"
	"Options:\n"
	"  -o OPTIONS     comma-separated mount options (below); may be repeated\n"
	"  -f             stay in the foreground and log to stderr\n"
	"  -d             debug: -f, and print every FUSE request and reply\n"
	"  -h, --help     this text\n"
	"  -V, --version  the versions of tpfsd and libfuse\n"
	"\n"
	"Mount options of tpfs:\n"
	"  ro                    mount read-only: nothing is written to the store\n"
	"                        (refused if other users may read the store)\n"
	"  rw                    mount read-write (the default)\n"
	"  sync                  every call is durable when it returns\n"
	"  async                 calls are durable after fsync, fdatasync or fsyncdir\n"
	"                        of any file of the mount, or within commit_interval\n"
	"                        (the default); syncfs(2) and sync(1) never reach a\n"
	"                        FUSE daemon: use `tpfs sync MOUNTPOINT` instead\n"
	"  commit_interval=MS    the longest a change waits to become durable, in\n"
	"                        milliseconds, 1 to 86400000 (default 1000)\n"
	"  cache_size=BYTES      the engine's buffer pool, at least 1M; suffixes K,\n"
	"                        M, G (default: 1/8 of the memory, at most 4G)\n"
	"  logdir=DIR            where the store's log is, when it is no longer where\n"
	"                        `tpfs mkfs -l DIR` put it (the log device moved)\n"
	"  quiet                 no messages about recovery\n"
	"  entry_timeout=SEC     how long the kernel may keep a name (default 1)\n"
	"  attr_timeout=SEC      how long it may keep attributes (default 1)\n"
	"  negative_timeout=SEC  how long it may keep the absence of a name\n"
	"                        (default 1; 0: never)\n"
	"  max_threads=N         requests served at once, at most (default 512)\n"
	"  max_idle_threads=N    idle worker threads kept (default 10)\n"
	"  tx_wait=MS            the longest a write from outside every transaction\n"
	"                        waits for transactions' locks, 1 to 3600000: then\n"
	"                        they yield (are aborted; txcommit fails and names\n"
	"                        the writer) (default 500)\n"
	"  tx_short_wait=MS      the same for a write(2) and for creating, removing\n"
	"                        or renaming a name, which the kernel does holding\n"
	"                        a lock that readers wait for (the page's, the\n"
	"                        directory's) (default 10, at most tx_wait)\n"
	"  max_user_tx=N         open transactions a user other than root may have\n"
	"                        at once, 1 to 16384 (default 256); root may always\n"
	"                        begin (a reserve of the table is kept for it)\n"
	"\n";
/* (two strings: C11 compilers need not take one over 4095 characters) */
static const char usage_fuse[] =
	"FUSE options that tpfsd sets:\n"
	"  default_permissions   always: the kernel checks every access against the\n"
	"                        mode, owner and group of the file\n"
	"  allow_other           when run as root, so that every user can use the\n"
	"                        file system (under default_permissions); not with\n"
	"                        allow_root\n"
	"  fsname=STORE          the source column of /proc/mounts and df: the\n"
	"                        store's absolute path (may be overridden)\n"
	"  subtype=tpfs          the type column: fuse.tpfs (may be overridden)\n"
	"\n";

static const char usage_more[] =
	"Other options go to libfuse, which rejects those it does not know: mount\n"
	"options (nosuid, nodev, noexec, suid, dev, noatime, allow_root,\n"
	"auto_unmount, max_read=N, ...; see mount.fuse3(8)) and connection tuning\n"
	"(max_write=N, max_readahead=N, max_background=N, congestion_threshold=N,\n"
	"splice_read, no_splice_read, sync_read, ...).  libfuse mounts with nosuid\n"
	"and nodev unless told suid and dev: device files can be made, but not\n"
	"opened, without dev.  The options mount(8) adds (defaults, auto, noauto,\n"
	"user, users, nouser, owner, group, _netdev, nofail, comment=, x-*) are\n"
	"ignored.\n"
	"\n"
	"Through mount(8), with the helper /sbin/mount.fuse.tpfs:\n"
	"  mount -t fuse.tpfs STORE MOUNTPOINT [-o OPTIONS]\n"
	"  /etc/fstab:  STORE  MOUNTPOINT  fuse.tpfs  defaults,commit_interval=500  0 0\n"
	"\n"
	"Statistics of a mount (requests served by kind, engine counters):\n"
	"  getfattr --only-values -n tpfs.stats MOUNTPOINT\n"
	"\n"
	"Exit status: 0 after a clean unmount; 1 if the store cannot be opened, the\n"
	"mount fails, or the final checkpoint fails; 2 on bad usage.\n";

/* ---------------------------------------------------------------------- */
/* Logging                                                                */

/* Once detached, fd 2 is a pipe whose lines this thread sends to syslog:
 * whatever the engine or a library writes to stderr is kept. */
static pthread_t stderr_thread;
static int stderr_forwarding;

static void *stderr_main(void *arg)
{
	FILE *in = fdopen((int)(intptr_t)arg, "r");
	char line[1024];
	if (!in)
		return NULL;
	while (fgets(line, sizeof line, in)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0]) {
			syslog(LOG_ERR, "%s", line);
			fsd_log_line(line);
		}
	}
	fclose(in);
	return NULL;
}

/* Threads of tpfsd's own leave SIGTERM, SIGINT and SIGHUP to libfuse. */
static int start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;
	sigemptyset(&all);
	sigaddset(&all, SIGTERM);
	sigaddset(&all, SIGINT);
	sigaddset(&all, SIGHUP);
	sigaddset(&all, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Options                                                                */

typedef struct conf {
	const char *store, *mnt;
	char store_abs[PATH_MAX], mnt_abs[PATH_MAX];
	int foreground, debug, help, version;
	fs_options fo;
	char *logdir;              /* logdir=: fs_options.logdir (the log moved) */
	double entry_timeout, attr_timeout, negative_timeout;
	unsigned max_threads, max_idle_threads;
	unsigned max_user_tx;      /* open transactions per user but root (FSD_MAX_USER_TX) */
	int has_fsname, has_subtype, has_allow_other, has_allow_root, has_default_permissions;
	char *fuse_opts;           /* the options libfuse gets, comma-separated and escaped */
} conf;

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*out = v;
	return 0;
}

/* BYTES with an optional K, M or G (powers of 1024). */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned shift = 0;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (*end == 'B' || (*end == 'i' && end[1] == 'B' && shift))
		end += *end == 'B' ? 1 : 2;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0) || v > 1e9)
		return -1;
	*out = v;
	return 0;
}

static int bad_value(const char *opt)
{
	fprintf(stderr, "tpfsd: bad value in -o %s\n", opt);
	return -1;
}

/* A value out of its range: the range is said. */
static int bad_range(const char *opt, const char *range)
{
	fprintf(stderr, "tpfsd: bad value in -o %s: %s\n", opt, range);
	return -1;
}

/* The smallest buffer pool -o cache_size= takes: below it the engine would
 * quietly run with 8 pages. */
#define FSD_CACHE_MIN (1u << 20)

/* The options mount(8) and fstab add that mean nothing to a FUSE mount. */
static int ignored(const char *o)
{
	static const char *const names[] = {"defaults", "auto", "noauto", "user", "users", "nouser", "owner",
					    "group", "_netdev", "nofail", "loop", NULL};
	for (int i = 0; names[i]; i++)
		if (!strcmp(o, names[i]))
			return 1;
	return !strncmp(o, "x-", 2) || !strncmp(o, "comment=", 8);
}

static int pass(conf *c, const char *o)
{
	if (fuse_opt_add_opt_escaped(&c->fuse_opts, o) != 0) {
		fprintf(stderr, "tpfsd: out of memory\n");
		return -1;
	}
	return 0;
}

/* One option of -o (unescaped). */
static int option(conf *c, const char *o)
{
	const char *v = strchr(o, '=');
	uint64_t n;
	v = v ? v + 1 : "";
#define IS(name) (!strcmp(o, name))
#define HAS(prefix) (!strncmp(o, prefix "=", sizeof prefix))
	if (IS("ro")) {
		c->fo.readonly = 1;
		return pass(c, "ro"); /* the kernel refuses writes before they come here */
	}
	if (IS("rw")) {
		c->fo.readonly = 0;
		return 0;
	}
	if (IS("sync") || IS("async")) { /* not for libfuse: a synchronous kernel mount would
					  * add an fsync request to every write */
		c->fo.sync = IS("sync");
		return 0;
	}
	if (IS("quiet")) {
		c->fo.quiet = 1;
		return 0;
	}
	if (IS("debug")) {
		c->debug = c->foreground = 1;
		return 0;
	}
	if (HAS("commit_interval")) {
		if (parse_u64(v, &n) || n == 0 || n > 24 * 3600 * 1000)
			return bad_range(o, "milliseconds, from 1 to 86400000 (24 h); -o sync makes every call durable "
					    "when it returns");
		c->fo.commit_ms = (uint32_t)n;
		return 0;
	}
	if (HAS("cache_size")) {
		if (parse_size(v, &n) || n < FSD_CACHE_MIN)
			return bad_range(o, "bytes, at least 1M; suffixes K, M, G");
		/* fs_options counts pages; stores have 4 KiB pages unless made with
		 * tpfs mkfs -p.  (fs_options should take bytes.) */
		c->fo.cache_pages = (size_t)(n / 4096 ? n / 4096 : 1);
		return 0;
	}
	if (HAS("logdir")) {
		if (!*v)
			return bad_value(o);
		free(c->logdir);
		c->logdir = strdup(v);
		return 0;
	}
	if (HAS("entry_timeout"))
		return parse_seconds(v, &c->entry_timeout) ? bad_value(o) : 0;
	if (HAS("attr_timeout"))
		return parse_seconds(v, &c->attr_timeout) ? bad_value(o) : 0;
	if (HAS("negative_timeout"))
		return parse_seconds(v, &c->negative_timeout) ? bad_value(o) : 0;
	if (HAS("max_threads")) {
		if (parse_u64(v, &n) || n == 0 || n > 100000)
			return bad_value(o);
		c->max_threads = (unsigned)n;
		return 0;
	}
	if (HAS("tx_wait") || HAS("tx_short_wait")) {
		if (parse_u64(v, &n) || n == 0 || n > 3600 * 1000)
			return bad_range(o, "milliseconds, from 1 to 3600000");
		*(HAS("tx_wait") ? &c->fo.tx_wait_ms : &c->fo.tx_short_wait_ms) = (uint32_t)n;
		return 0;
	}
	if (HAS("max_user_tx")) {
		if (parse_u64(v, &n) || n == 0 || n > 16384)
			return bad_range(o, "open transactions per user, from 1 to 16384");
		c->max_user_tx = (unsigned)n;
		return 0;
	}
	if (HAS("max_idle_threads")) {
		if (parse_u64(v, &n) || n > 100000)
			return bad_value(o);
		c->max_idle_threads = (unsigned)n;
		return 0;
	}
	if (ignored(o))
		return 0;
	if (HAS("fsname"))
		c->has_fsname = 1;
	else if (HAS("subtype"))
		c->has_subtype = 1;
	else if (IS("allow_other"))
		c->has_allow_other = 1;
	else if (IS("allow_root"))
		c->has_allow_root = 1;
	else if (IS("default_permissions"))
		c->has_default_permissions = 1;
	return pass(c, o);
#undef IS
#undef HAS
}

/* Splits an -o argument at commas; a backslash escapes the next character. */
static int options(conf *c, const char *arg)
{
	size_t len = strlen(arg);
	char *o = malloc(len + 1);
	size_t n = 0;
	int rc = 0;
	if (!o)
		return -1;
	for (size_t i = 0; i <= len && rc == 0; i++) {
		if (arg[i] == '\\' && i + 1 < len) {
			o[n++] = arg[++i];
		} else if (arg[i] == ',' || arg[i] == 0) {
			o[n] = 0;
			if (n)
				rc = option(c, o);
			n = 0;
		} else {
			o[n++] = arg[i];
		}
	}
	free(o);
	return rc;
}

static int parse_args(conf *c, int argc, char **argv)
{
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			c->help = 1;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			c->version = 1;
		} else if (!strcmp(a, "-f")) {
			c->foreground = 1;
		} else if (!strcmp(a, "-d") || !strcmp(a, "--debug")) {
			c->debug = c->foreground = 1;
		} else if (!strncmp(a, "-o", 2)) {
			const char *v = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			if (!v) {
				fprintf(stderr, "tpfsd: -o needs options\n");
				return -1;
			}
			if (options(c, v) != 0)
				return -1;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "tpfsd: unknown option '%s'\n", a);
			return -1;
		} else if (npos == 0) {
			c->store = a, npos++;
		} else if (npos == 1) {
			c->mnt = a, npos++;
		} else {
			fprintf(stderr, "tpfsd: unexpected argument '%s'\n", a);
			return -1;
		}
	}
	if (c->help || c->version)
		return 0;
	if (npos != 2) {
		fprintf(stderr, "tpfsd: STORE and MOUNTPOINT are required\n");
		return -1;
	}
	return 0;
}

static int resolve_logdir(conf *c);

/* The mount point answers ENOTCONN: a dead FUSE mount (G6).  Its absolute
 * path is its parent's and its name, found without touching it. */
static int dead_mountpoint(conf *c)
{
	char dir[PATH_MAX], abs[PATH_MAX];
	size_t n = strlen(c->mnt);
	if (n == 0 || n >= sizeof dir)
		return -1;
	memcpy(dir, c->mnt, n + 1);
	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = 0;
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (!strcmp(base, ".") || !strcmp(base, "..") || !*base)
		return -1;
	if (slash == dir)
		snprintf(abs, sizeof abs, "/");
	else if (slash) {
		*slash = 0;
		if (!realpath(dir, abs))
			return -1;
	} else if (!getcwd(abs, sizeof abs))
		return -1;
	if ((size_t)snprintf(c->mnt_abs, sizeof c->mnt_abs, "%s%s%s", abs, strcmp(abs, "/") ? "/" : "", base) >=
	    sizeof c->mnt_abs)
		return -1;
	return 0;
}

/* G4, and the checks that give clear messages before anything starts. */
static int resolve_paths(conf *c)
{
	struct stat st;
	if (strstr(c->store, "://")) /* a store named by a URI (etcd://...): no local path */
		snprintf(c->store_abs, sizeof c->store_abs, "%s", c->store);
	else if (!realpath(c->store, c->store_abs)) {
		fprintf(stderr, "tpfsd: %s: %s\n", c->store, strerror(errno));
		return -1;
	}
	if (!realpath(c->mnt, c->mnt_abs) || stat(c->mnt_abs, &st) != 0) {
		int e = errno;
		if (e == ENOTCONN && dead_mountpoint(c) == 0)
			return resolve_logdir(c); /* G6 clears it */
		fprintf(stderr, "tpfsd: mount point %s: %s\n", c->mnt, strerror(e));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "tpfsd: mount point %s: %s\n", c->mnt, strerror(ENOTDIR));
		return -1;
	}
	return resolve_logdir(c);
}

static int resolve_logdir(conf *c)
{
	if (c->logdir) {
		char abs[PATH_MAX];
		if (!realpath(c->logdir, abs)) {
			fprintf(stderr, "tpfsd: logdir %s: %s\n", c->logdir, strerror(errno));
			return -1;
		}
		free(c->logdir);
		c->logdir = strdup(abs);
	}
	return 0;
}

/* The options tpfsd sets for libfuse, after the user's. */
static int fuse_defaults(conf *c)
{
	char fsname[PATH_MAX + 16];
	if (!c->has_fsname) {
		size_t n = (size_t)snprintf(fsname, sizeof fsname, "fsname=");
		for (const char *p = c->store_abs; *p && n + 3 < sizeof fsname; p++) { /* a URI's ',' escaped for -o */
			if (*p == ',' || *p == '\\')
				fsname[n++] = '\\';
			fsname[n++] = *p;
		}
		fsname[n] = 0;
		if (pass(c, fsname))
			return -1;
	}
	if (!c->has_subtype && pass(c, "subtype=tpfs"))
		return -1;
	/* The fs layer leaves permission checks to the kernel. */
	if (!c->has_default_permissions && pass(c, "default_permissions"))
		return -1;
	if (geteuid() == 0 && !c->has_allow_other && !c->has_allow_root && pass(c, "allow_other"))
		return -1;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Detaching (G2)                                                         */

/* Forks; the parent waits for the child's verdict and exits with it. */
static int detach_start(void)
{
	int p[2];
	pid_t pid;
	if (pipe(p) != 0) {
		fprintf(stderr, "tpfsd: pipe: %s\n", strerror(errno));
		exit(1);
	}
	if ((pid = fork()) < 0) {
		fprintf(stderr, "tpfsd: fork: %s\n", strerror(errno));
		exit(1);
	}
	if (pid > 0) {
		unsigned char st = 1;
		ssize_t n;
		int ws;
		close(p[1]);
		while ((n = read(p[0], &st, 1)) < 0 && errno == EINTR)
			;
		if (n == 1)
			_exit(st);
		/* the child died without a verdict */
		if (waitpid(pid, &ws, 0) == pid && WIFSIGNALED(ws))
			fprintf(stderr, "tpfsd: killed by signal %d while starting\n", WTERMSIG(ws));
		_exit(1);
	}
	close(p[0]);
	setsid();
	return p[1];
}

static void detach_verdict(int fd, unsigned char status)
{
	if (fd < 0)
		return;
	while (write(fd, &status, 1) < 0 && errno == EINTR)
		;
	close(fd);
}

/* The child, mounted: leaves the terminal and logs to syslog. */
static void detach_finish(int verdict_fd)
{
	int null = open("/dev/null", O_RDWR), p[2];
	if (chdir("/") != 0)
		fsd_log(LOG_WARNING, "chdir /: %s", strerror(errno));
	fsd_log_to_syslog();
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
	}
	fflush(stderr);
	if (pipe(p) == 0) {
		dup2(p[1], 2);
		close(p[1]);
		if (start_thread(&stderr_thread, stderr_main, (void *)(intptr_t)p[0]) == 0)
			stderr_forwarding = 1;
		else
			close(p[0]);
	} else if (null >= 0) {
		dup2(null, 2);
	}
	if (null > 2)
		close(null);
	detach_verdict(verdict_fd, 0);
}

static void stderr_stop(void)
{
	int null;
	if (!stderr_forwarding)
		return;
	fflush(stderr);
	if ((null = open("/dev/null", O_WRONLY)) >= 0) { /* the pipe's last writer goes */
		dup2(null, 2);
		close(null);
	}
	pthread_join(stderr_thread, NULL);
	stderr_forwarding = 0;
}

/* ---------------------------------------------------------------------- */
/* The tick: lazy durability every commit_interval                        */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	int stop;          /* under mu */
	fs *fs;
	uint32_t ms;
	pthread_t th;
	int running;
} tick = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *tick_main(void *arg)
{
	int last = 0;
	(void)arg;
	pthread_mutex_lock(&tick.mu);
	while (!tick.stop) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_sec += tick.ms / 1000;
		t.tv_nsec += (long)(tick.ms % 1000) * 1000000L;
		if (t.tv_nsec >= 1000000000L)
			t.tv_sec++, t.tv_nsec -= 1000000000L;
		while (!tick.stop && pthread_cond_timedwait(&tick.cv, &tick.mu, &t) != ETIMEDOUT)
			;
		if (tick.stop)
			break;
		pthread_mutex_unlock(&tick.mu);
		int rc = fs_tick(tick.fs);
		if (rc != 0 && rc != last) /* once per kind of failure */
			fsd_log(LOG_ERR, "periodic flush failed: %s", strerror(rc < 0 ? -rc : rc));
		last = rc;
		pthread_mutex_lock(&tick.mu);
	}
	pthread_mutex_unlock(&tick.mu);
	return NULL;
}

static int tick_start(fs *f, uint32_t ms)
{
	pthread_condattr_t ca;
	int rc;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&tick.cv, &ca);
	pthread_condattr_destroy(&ca);
	tick.fs = f;
	tick.ms = ms;
	tick.stop = 0;
	if ((rc = start_thread(&tick.th, tick_main, NULL)) != 0)
		return rc;
	tick.running = 1;
	return 0;
}

static void tick_stop(void)
{
	if (!tick.running)
		return;
	pthread_mutex_lock(&tick.mu);
	tick.stop = 1;
	pthread_cond_signal(&tick.cv);
	pthread_mutex_unlock(&tick.mu);
	pthread_join(tick.th, NULL);
	tick.running = 0;
}

/* ---------------------------------------------------------------------- */

/* ---------------------------------------------------------------------- */
/* The store and the mount                                                */

/* One daemon per store: a second tpfsd (a repeated mount -a, a second
 * fstab line) would run a second engine on the same files.  The store lock
 * (fs_lock.h, Q1), held until exit; taken by the child, which outlives the
 * parent (G2).  A daemon still closing the store after an unmount is waited
 * for (Q2).  (Belongs in tp_open: then drop this.) */
static int lock_store(const char *store)
{
	return fs_lock_store(store, 0, "tpfsd");
}

/* G6: what is mounted on the mount point.  Nothing, or something that is
 * not tpfs: mount over it.  A mount of this store: its daemon is gone (this
 * one holds the store lock), so it is a dead mount left by a crash: abort
 * its connection (a thread of the killed daemon may hang in the kernel),
 * detach it lazily, and look again -- never stack a mount over it.  A live
 * tpfs mount of another store: refuse, naming it; a dead one of another
 * store is not this daemon's to clear. */
static int clear_mountpoint(const conf *c)
{
	char type[256], src[PATH_MAX], comm[64];
	long conn;
	for (int round = 0; round < 16; round++) {
		if (!fs_mount_at(c->mnt_abs, type, sizeof type, src, sizeof src, &conn))
			return 0;
		for (char *r = src, *w = src;; r++) { /* fuse_defaults escaped a URI's ',' */
			if (*r == '\\' && (r[1] == ',' || r[1] == '\\'))
				r++;
			if (!(*w++ = *r))
				break;
		}
		int ours = strcmp(src, c->store_abs) == 0;
		if (!ours && strcmp(type, "fuse.tpfs") != 0)
			return 0;
		if (!ours) {
			int pid = fs_lock_holder(src, comm, sizeof comm);
			if (pid)
				fsd_log(LOG_ERR, "mount point %s: the store %s is mounted there, served by %s (pid %d); "
					"not mounted over it (unmount it first: fusermount3 -u %s)",
					c->mnt_abs, src, comm, pid, c->mnt_abs);
			else
				fsd_log(LOG_ERR, "mount point %s: the dead mount of another store, %s, is there; not "
					"mounted over it (clear it first: fusermount3 -u -z %s)",
					c->mnt_abs, src, c->mnt_abs);
			return -1;
		}
		fsd_log(LOG_WARNING, "mount point %s: the dead mount of %s (its daemon is gone) is still there: "
			"detaching it; processes still inside it get \"Transport endpoint is not connected\" until "
			"they cd %s again", c->mnt_abs, src, c->mnt_abs);
		if (conn >= 0) {
			char path[64];
			snprintf(path, sizeof path, "/sys/fs/fuse/connections/%ld/abort", conn);
			FILE *f = fopen(path, "w");
			if (f) {
				fputs("1", f);
				fclose(f);
			}
		}
		if (umount2(c->mnt_abs, MNT_DETACH) != 0) {
			int e = errno, st = -1;
			pid_t pid = fork();
			if (pid == 0) {
				execlp("fusermount3", "fusermount3", "-u", "-z", "--", c->mnt_abs, (char *)NULL);
				_exit(127);
			}
			if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fsd_log(LOG_ERR, "mount point %s: cannot detach the dead mount (%s; fusermount3 -u -z "
					"failed too); not mounted", c->mnt_abs, strerror(e));
				return -1;
			}
		}
	}
	fsd_log(LOG_ERR, "mount point %s: dead mounts keep appearing there; not mounted", c->mnt_abs);
	return -1;
}

/* G5 */
static void loose_path(void *arg, const char *path, unsigned mode, unsigned want)
{
	const conf *c = arg;
	if (c->fo.readonly)
		fsd_log(LOG_ERR, "%s: mode %04o: other users may read the store through it", path, mode);
	else
		fsd_log(LOG_WARNING, "%s: mode %04o -> %04o: other users could read the store through it", path, mode,
			want);
}

static int make_private(const conf *c)
{
	unsigned n = 0;
	int rc = be_private(c->store_abs, c->logdir, !c->fo.readonly, loose_path, (void *)c, &n);
	if (rc < 0) /* not a store, or no log directory: fs_mount says why */
		return 0;
	if (rc) {
		fsd_log(LOG_ERR, "%s: not mounted: cannot make the store private to its owner: %s", c->store_abs,
			be_errmsg(NULL));
		return -1;
	}
	if (n && c->fo.readonly) {
		fsd_log(LOG_ERR, "%s: not mounted: %u paths of the store are open to other users, and a read-only "
			"mount changes nothing; mount it read-write once (which makes it private), or chmod go-rwx them",
			c->store_abs, n);
		return -1;
	}
	return 0;
}

/* The kernel reads ahead at most the backing device's read_ahead_kb (128 by
 * default), whatever max_readahead asks: sequential reads would come in
 * 128 KiB requests, 8 round trips a MiB.  Raise it to FSD_IO_SIZE; the
 * kernel still keeps the smaller of this and max_readahead at INIT.  The
 * device is found in mountinfo, since a stat of the mount point would wait
 * for the session loop, which has not started.  Root only; best effort. */
static void tune_readahead(const char *mnt)
{
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	char line[8192], dev[64] = "", path[PATH_MAX + 32];
	if (!mi)
		return;
	while (fgets(line, sizeof line, mi)) {
		char d[64], m[PATH_MAX], *sep = strstr(line, " - ");
		/* id parent major:minor root mountpoint ... - fstype source opts */
		if (!sep || sscanf(line, "%*s %*s %63s %*s %4095s", d, m) != 2 || strncmp(sep, " - fuse.", 8) != 0)
			continue;
		/* mountinfo escapes space, tab, newline and backslash as \ooo */
		char un[PATH_MAX], *o = un;
		for (const char *p = m; *p && o < un + sizeof un - 1; p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
				*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else {
				*o++ = *p;
			}
		}
		*o = 0;
		if (!strcmp(un, mnt))
			snprintf(dev, sizeof dev, "%s", d); /* the last one is the newest */
	}
	fclose(mi);
	if (!dev[0])
		return;
	snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
	FILE *ra = fopen(path, "w");
	int ok = ra && fprintf(ra, "%u\n", FSD_IO_SIZE / 1024) > 0;
	if (ra && fclose(ra) != 0)
		ok = 0;
	if (!ok)
		fsd_log(LOG_DEBUG, "%s: cannot raise the read-ahead: %s", path, strerror(errno));
	else
		fsd_log(LOG_DEBUG, "%s: %u", path, FSD_IO_SIZE / 1024);
}

static void block_signals(void)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
}

static const char *errstr(int rc)
{
	return strerror(rc < 0 ? -rc : rc);
}

int main(int argc, char **argv)
{
	conf c;
	fsd d;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	struct fuse_loop_config *loop = NULL;
	int verdict = -1, rc, ret = 1, mounted = 0, signals = 0, loop_rc = 0, lock_fd = -1;

	memset(&c, 0, sizeof c);
	memset(&d, 0, sizeof d);
	c.fo.commit_ms = 1000;
	c.entry_timeout = c.attr_timeout = c.negative_timeout = 1.0;
	c.max_user_tx = 256; /* fsd_txbind.c C15 */
	c.max_threads = 512; /* requests waiting for transactions' locks must leave threads for txcommit */
	c.max_idle_threads = 10;
	if (parse_args(&c, argc, argv) != 0) {
		fprintf(stderr, "Try 'tpfsd --help'.\n");
		return 2;
	}
	if (c.help) {
		fputs(usage, stdout);
		fputs(usage_fuse, stdout);
		fputs(usage_more, stdout);
		return 0;
	}
	if (c.version) {
		printf("tpfsd %s (libfuse %s)\n", TPFS_VERSION, fuse_pkgversion());
		return 0;
	}
	fsd_log_debug(c.debug);
	fuse_set_log_func(fsd_log_fuse);
	if (resolve_paths(&c) != 0 || fuse_defaults(&c) != 0)
		return 1;
	if (c.logdir)
		c.fo.logdir = c.logdir;

	/* G1 */
	if (fuse_opt_add_arg(&args, "tpfsd") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, c.fuse_opts) || (c.debug && fuse_opt_add_arg(&args, "-d"))) {
		fprintf(stderr, "tpfsd: out of memory\n");
		return 1;
	}
	d.entry_timeout = c.entry_timeout;
	d.attr_timeout = c.attr_timeout;
	d.negative_timeout = c.negative_timeout;
	d.readonly = c.fo.readonly;
	d.max_user_tx = c.max_user_tx;
	if (!(d.conn_opts = fuse_parse_conn_info_opts(&args))) {
		fuse_opt_free_args(&args);
		return 2;
	}
	if (!(se = fuse_session_new(&args, &fsd_ops, sizeof fsd_ops, &d))) {
		fprintf(stderr, "Try 'tpfsd --help'.\n");
		ret = 2;
		goto out;
	}

	if (!c.foreground) /* G2 */
		verdict = detach_start();
	openlog("tpfsd", LOG_PID, LOG_DAEMON);

	/* G3 */
	/* A store named by a URI has no directory to lock: one daemon per
	 * cluster file system is the user's to keep until issue 29. */
	int uri = strstr(c.store_abs, "://") != NULL;
	if ((!uri && (lock_fd = lock_store(c.store_abs)) < 0) || clear_mountpoint(&c) != 0 ||
	    make_private(&c) != 0) /* G6, G5 */
		goto out;
	if ((rc = fs_mount(c.store_abs, &c.fo, &d.fs)) != 0) {
		fsd_log(LOG_ERR, "%s: not mounted (%s)", c.store_abs, errstr(rc)); /* fs_mount said why */
		goto out;
	}
	if (!c.fo.readonly && !uri && (rc = fsd_log_start_file(c.store_abs)) != 0)
		fsd_log(LOG_WARNING, "%s/%s: %s: messages go to %s only", c.store_abs, FSD_LOGFILE, strerror(rc),
			c.foreground ? "standard error" : "syslog");
	/* libfuse takes over only signals at their default: a shell without job
	 * control starts `tpfsd -f &` with SIGINT ignored, yet kill -INT must
	 * unmount it. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (fuse_set_signal_handlers(se) != 0)
		goto out;
	signals = 1;
	if (fuse_session_mount(se, c.mnt_abs) != 0) {
		fsd_log(LOG_ERR, "cannot mount on %s", c.mnt_abs);
		goto out;
	}
	mounted = 1;
	if ((rc = fsd_io_install(se)) != 0) {
		fsd_log(LOG_ERR, "cannot install the device I/O hooks: %s", strerror(rc));
		goto out;
	}
	if (geteuid() == 0)
		tune_readahead(c.mnt_abs);
	if (!c.foreground) {
		detach_finish(verdict);
		verdict = -1;
	}
	fsd_log(LOG_INFO, "%s mounted on %s%s%s", c.store_abs, c.mnt_abs, c.fo.readonly ? " read-only" : "",
		c.fo.sync ? ", sync" : "");
	if (!c.fo.readonly && (rc = fsd_tx_start(&d, se)) != 0)
		fsd_log(LOG_ERR, "cannot start transactions: %s; txbegin will fail on this mount", strerror(rc));
	if ((rc = tick_start(d.fs, c.fo.commit_ms)) != 0)
		fsd_log(LOG_ERR, "cannot start the periodic flush: %s; changes are durable at fsync and unmount",
			strerror(rc));

	if (!(loop = fuse_loop_cfg_create())) {
		fsd_log(LOG_ERR, "out of memory");
		loop_rc = -ENOMEM;
	} else {
		fuse_loop_cfg_set_clone_fd(loop, 1);
		fuse_loop_cfg_set_idle_threads(loop, c.max_idle_threads);
		fuse_loop_cfg_set_max_threads(loop, c.max_threads);
		loop_rc = fuse_session_loop_mt(se, loop);
	}

	/* Shutdown */
	block_signals();
	if (loop_rc > 0)
		fsd_log(LOG_INFO, "signal %d: unmounting %s", loop_rc, c.mnt_abs);
	else if (loop_rc < 0)
		fsd_log(LOG_ERR, "session loop failed: %s; unmounting %s", strerror(-loop_rc), c.mnt_abs);
	fuse_session_unmount(se);
	mounted = 0;
	tick_stop();
	fsd_tx_stop(&d);
	rc = fs_unmount(d.fs);
	d.fs = NULL;
	if (rc != 0)
		fsd_log(LOG_ERR, "%s: the final flush and checkpoint failed (%s): the next mount recovers",
			c.store_abs, errstr(rc));
	else
		fsd_log(LOG_INFO, "%s: unmounted cleanly", c.store_abs);
	ret = rc != 0 || loop_rc < 0;

out:
	if (mounted)
		fuse_session_unmount(se);
	if (d.fs)
		fs_unmount(d.fs);
	if (signals)
		fuse_remove_signal_handlers(se);
	if (se)
		fuse_session_destroy(se);
	if (loop)
		fuse_loop_cfg_destroy(loop);
	detach_verdict(verdict, (unsigned char)ret); /* a failure before detaching */
	if (lock_fd >= 0)
		close(lock_fd);
	free(d.conn_opts);
	fuse_opt_free_args(&args);
	free(c.fuse_opts);
	free(c.logdir);
	stderr_stop();
	closelog();
	return ret;
}
