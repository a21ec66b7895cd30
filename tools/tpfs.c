/*
 * tpfs -- the store administration command: mkfs, check, recover, stat,
 * sync, logdump, demo.
 *
 * Thin: it parses arguments, calls the engine through tp.h, and turns
 * engine errors into messages and exit codes (0 ok, 1 failure, 2 usage).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend.h"
#include "fs.h"
#include "fs_lock.h"
#include "tp.h"
#include "tpfs_tx.h"

static const char usage[] =
	"usage: tpfs COMMAND [OPTIONS] STORE\n"
	"\n"
	"Administers a tpfs store: a directory holding a page file, a write-ahead\n"
	"log and a superblock.\n"
	"\n"
	"Commands:\n"
	"  mkfs [-f] [-p PAGE_SIZE] [-s SEGMENT_SIZE] [-l LOGDIR] STORE\n"
	"        Create an empty store in STORE (created if missing; must not hold a\n"
	"        store already, nor anything else unless -f, --force).  PAGE_SIZE: a power of two from 1024 to 65536\n"
	"        (default 4096).  SEGMENT_SIZE: log segment bytes, a multiple of 4096,\n"
	"        at least 64 KiB (default 16 MiB; suffixes K, M, G).  LOGDIR: keep the\n"
	"        log in another directory, for example on another device.\n"
	"        STORE may be a cluster URI, etcd://HOST:PORT[,...]/NAME[?pool=..]\n"
	"        (fsd/backend/cluster/README.md): NAME is made in etcd, refused if it\n"
	"        exists; the options are the embedded store's and do not apply.\n"
	"  logdump [-f LSN | -a] STORE\n"
	"        Print every log record from the log start (or from LSN) without\n"
	"        recovering or changing anything.  -a: from as far back as the log\n"
	"        segment files still hold records, including those before the log\n"
	"        start that recovery no longer needs (to look into a past crash).\n"
	"        A damaged log is dumped up to the damage, which is named last\n"
	"        (exit 1).\n"
	"  check [-v] STORE\n"
	"        Verify a store that is not mounted, read-only: every tree (order,\n"
	"        fences, links, free space, no page leaked) and the file system (link\n"
	"        counts, every inode reachable, block ownership, sizes).  Exit 0 when\n"
	"        clean, 1 when problems were found (each is printed), 2 on usage.\n"
	"        A mounted store is refused (exit 1), naming the tpfsd serving it\n"
	"        and where; a tpfsd still closing it after an unmount is waited for\n"
	"        (at most 120 s, or TPFS_LOCK_WAIT seconds); so is it by recover.\n"
	"        A store that was not closed cleanly is checked as recovery leaves\n"
	"        it, recovered in memory: checking never writes to the store.\n"
	"  recover [--discard-after LSN [--yes]] STORE\n"
	"        Recover a store that is not mounted (as the next mount would) and\n"
	"        check it.  When the log is damaged -- the mount and `tpfs check`\n"
	"        refuse, naming the file, offset and LSN -- --discard-after LSN\n"
	"        accepts losing every change logged from that LSN on: it first says\n"
	"        what would be discarded and what recovery would then do, changing\n"
	"        nothing; with --yes it cuts the log there (the cut segment files\n"
	"        are kept beside the log as log.<index>.discarded-<LSN>), recovers\n"
	"        and checks.\n"
	"        Pages the engine had already written back with changes from the\n"
	"        discarded records are reported by the check.\n"
	"  stat MOUNTPOINT\n"
	"        Print the statistics of a mounted tpfs: operations served (FUSE round\n"
	"        trips), transactions, log bytes and flushes, cache hit rate, lock\n"
	"        requests, waits and deadlocks, and what recovery did at mount.\n"
	"  demo STORE\n"
	"        Run a few transactions on STORE (one of them aborted), reopen it,\n"
	"        and show what was kept.\n"
	"\n"
	"Options:\n"
	"  -h, --help     this text\n"
	"  -V, --version  the version of tpfs\n"
	"\n"
	"Exit status: 0 on success, 1 on failure (the message names the file and\n"
	"the cause), 2 on bad usage.\n";

/* The engine's message names the file it is about: the store is named
 * only when it does not already begin with it. */
static int fail(const char *what, const char *store, int rc)
{
	const char *m = tp_errmsg();
	size_t n = strlen(store);
	if (!m || !*m)
		fprintf(stderr, "tpfs %s: %s: %s\n", what, store, tp_strerror(rc));
	else if (strncmp(m, store, n) == 0 && (m[n] == ':' || m[n] == '/'))
		fprintf(stderr, "tpfs %s: %s\n", what, m);
	else
		fprintf(stderr, "tpfs %s: %s: %s\n", what, store, m);
	return 1;
}

/* fs_lock.c Q1: a store in use is neither checked nor recovered; a daemon still
 * closing it after an unmount is waited for (fs_lock.h).  The lock's fd,
 * -2 when store is not a directory (the engine says why), or -1. */
static int lock(const char *store, int shared, const char *who)
{
	char abs[PATH_MAX];
	struct stat st;
	if (!realpath(store, abs) || stat(abs, &st) != 0 || !S_ISDIR(st.st_mode))
		return -2;
	return fs_lock_store(abs, shared, who);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* Issue 25, 8: a store made into a directory of the user's files would mix
 * with them.  1 when dir exists, is a directory and holds anything (a
 * store already there is for tp_mkfs to refuse). */
static int nonempty_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while (!n && (e = readdir(d)))
		n = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* A store is there already (its superblock): tp_mkfs refuses it, naming it. */
static int is_store(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/super", dir);
	return access(p, F_OK) == 0;
}

static int cmd_mkfs(int argc, char **argv)
{
	static const struct option lo[] = {{"force", no_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	tp_options o;
	uint64_t v;
	int c, rc, force = 0;
	tp_options_init(&o);
	while ((c = getopt_long(argc, argv, "hfp:s:l:", lo, NULL)) != -1) {
		switch (c) {
		case 'f': force = 1; break;
		case 'p':
			if (parse_size(optarg, &v) || v > 65536) {
				fprintf(stderr, "tpfs mkfs: bad page size '%s'\n", optarg);
				return 2;
			}
			o.page_size = (uint32_t)v;
			break;
		case 's':
			if (parse_size(optarg, &v)) {
				fprintf(stderr, "tpfs mkfs: bad segment size '%s'\n", optarg);
				return 2;
			}
			o.seg_size = v;
			break;
		case 'l': o.logdir = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fputs(usage, stderr);
		return 2;
	}
	if (strstr(argv[optind], "://")) { /* a store of a scheme (etcd://...): made through the seam */
		fs_options fo = {.quiet = 1};
		fs *f;
		if ((rc = be_mkfs(argv[optind], NULL)) != 0) {
			fprintf(stderr, "tpfs mkfs: %s\n", be_errmsg(NULL));
			return 1;
		}
		/* its root directory, as the first mount would make it */
		if ((rc = fs_mount(argv[optind], &fo, &f)) != 0 || (rc = fs_unmount(f)) != 0) {
			fprintf(stderr, "tpfs mkfs: %s: the root directory: %s\n", argv[optind], strerror(rc < 0 ? -rc : rc));
			return 1;
		}
		printf("tpfs: created store %s\n", argv[optind]);
		return 0;
	}
	if (!force && nonempty_dir(argv[optind]) && !is_store(argv[optind])) {
		fprintf(stderr, "tpfs mkfs: %s: a directory that is not empty; a store made there would mix with its "
			"files (use --force to make it there anyway)\n", argv[optind]);
		return 1;
	}
	if ((rc = tp_mkfs(argv[optind], &o)) != 0)
		return fail("mkfs", argv[optind], rc);
	printf("tpfs: created store %s (page size %" PRIu32 ", log segments of %" PRIu64 " bytes%s%s)\n", argv[optind],
	       o.page_size, o.seg_size, o.logdir ? ", log in " : "", o.logdir ? o.logdir : "");
	return 0;
}

static int cmd_logdump(int argc, char **argv)
{
	uint64_t from = 0;
	int c, rc;
	while ((c = getopt(argc, argv, "haf:")) != -1) {
		switch (c) {
		case 'a': from = TP_LOGDUMP_ALL; break;
		case 'f':
			if (parse_size(optarg, &from)) {
				fprintf(stderr, "tpfs logdump: bad LSN '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fputs(usage, stderr);
		return 2;
	}
	if ((rc = tp_logdump(argv[optind], stdout, from)) != 0)
		return fail("logdump", argv[optind], rc);
	return 0;
}

#define CHECK(call)                                                                                                    \
	do {                                                                                                           \
		if ((rc = (call)) != 0)                                                                                \
			return fail("demo", store, rc);                                                                \
	} while (0)

static int cmd_demo(int argc, char **argv)
{
	tp_env *env;
	tp_txn *t;
	uint64_t pg;
	char buf[64];
	int rc;
	if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, argc == 2 ? stdout : stderr);
		return argc == 2 ? 0 : 2;
	}
	const char *store = argv[1];
	CHECK(tp_open(store, NULL, &env));
	CHECK(tp_begin(env, &t));
	CHECK(tp_page_alloc(t, 1, &pg));
	CHECK(tp_page_write(t, pg, 0, "committed: hello from tpfs", 27));
	printf("txn %" PRIu64 ": allocated page %" PRIu64 ", wrote a greeting, committing\n", tp_txn_id(t), pg);
	CHECK(tp_commit(t, 0));
	CHECK(tp_begin(env, &t));
	CHECK(tp_page_write(t, pg, 0, "aborted: this must not stay", 28));
	printf("txn %" PRIu64 ": overwrote page %" PRIu64 ", aborting\n", tp_txn_id(t), pg);
	CHECK(tp_abort(t));
	CHECK(tp_begin(env, &t));
	CHECK(tp_page_write(t, pg, 32, "in flight at the crash", 23));
	printf("txn %" PRIu64 ": wrote page %" PRIu64 " and the process 'crashes' before commit\n", tp_txn_id(t), pg);
	CHECK(tp_sync(env)); /* its records reach the log: recovery must undo them */
	tp_crash_close(env);
	printf("reopening: recovery runs\n");
	CHECK(tp_open(store, NULL, &env));
	CHECK(tp_page_read(env, pg, 0, buf, 27));
	printf("page %" PRIu64 " at 0:  \"%s\"\n", pg, buf);
	CHECK(tp_page_read(env, pg, 32, buf, 23));
	printf("page %" PRIu64 " at 32: %s\n", pg, buf[0] ? "in-flight data survived (BUG)" : "empty, as it should be");
	CHECK(tp_close(env));
	return 0;
}

static int cmd_check(int argc, char **argv)
{
	int verbose = 0, c, rc, fd;
	while ((c = getopt(argc, argv, "hv")) != -1) {
		switch (c) {
		case 'v': verbose = 1; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fputs(usage, stderr);
		return 2;
	}
	if ((fd = lock(argv[optind], 1, "tpfs check")) == -1)
		return 1;
	rc = fs_check(argv[optind], stderr, verbose);
	if (fd >= 0)
		close(fd);
	if (rc == 0 && !verbose)
		printf("tpfs check: %s: clean\n", argv[optind]);
	return rc == 0 ? 0 : 1;
}

static int recover(const char *store, uint64_t lsn, int yes);

static int cmd_recover(int argc, char **argv)
{
	static const struct option lo[] = {{"discard-after", required_argument, NULL, 'd'},
					   {"yes", no_argument, NULL, 'y'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	uint64_t lsn = 0;
	int yes = 0, c, rc;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (parse_size(optarg, &lsn) || !lsn) {
				fprintf(stderr, "tpfs recover: bad LSN '%s'\n", optarg);
				return 2;
			}
			break;
		case 'y': yes = 1; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc - 1 || (yes && !lsn)) {
		fputs(usage, stderr);
		return 2;
	}
	const char *store = argv[optind];
	int fd = lock(store, !(lsn && !yes), "tpfs recover");
	if (fd == -1)
		return 1;
	rc = recover(store, lsn, yes);
	if (fd >= 0)
		close(fd);
	return rc;
}

static int recover(const char *store, uint64_t lsn, int yes)
{
	tp_options o;
	tp_env *env;
	tp_stats st;
	int rc;
	tp_options_init(&o);
	o.quiet = 1;
	o.progress = 1;
	o.discard_after = lsn;
	if (lsn && !yes) { /* say what it would do, changing nothing */
		o.readonly = 1;
		if ((rc = tp_open(store, &o, &env)) != 0)
			return fail("recover", store, rc);
		tp_stats_get(env, &st);
		tp_close(env);
		printf("tpfs recover: %s: would discard the log from LSN %" PRIu64 " on: %" PRIu64
		       " bytes that still hold records; recovery would then redo %" PRIu64
		       " records and roll back %" PRIu64 " transactions.\n"
		       "Every change logged from LSN %" PRIu64 " on would be lost, committed or not.  Nothing was "
		       "changed.  To do it: tpfs recover --discard-after %" PRIu64 " --yes %s\n",
		       store, lsn, st.rec_cut_bytes, st.rec_redone, st.rec_losers, lsn, lsn, store);
		return 0;
	}
	if ((rc = tp_open(store, &o, &env)) != 0)
		return fail("recover", store, rc);
	tp_stats_get(env, &st);
	if ((rc = tp_close(env)) != 0)
		return fail("recover", store, rc);
	if (lsn)
		printf("tpfs recover: %s: discarded the log from LSN %" PRIu64 " on (%" PRIu64
		       " bytes; the cut segment files are kept as log.<index>.discarded-%" PRIu64 ")\n",
		       store, lsn, st.rec_cut_bytes, lsn);
	printf("tpfs recover: %s: recovered: %" PRIu64 " records redone, %" PRIu64 " transactions rolled back\n",
	       store, st.rec_redone, st.rec_losers);
	rc = fs_check(store, stderr, 0);
	printf("tpfs recover: %s: %s\n", store, rc == 0 ? "checked: clean" : "the check found problems (above)");
	return rc == 0 ? 0 : 1;
}

static int cmd_stat(int argc, char **argv)
{
	char buf[8192];
	if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, argc == 2 ? stdout : stderr);
		return argc == 2 ? 0 : 2;
	}
	ssize_t n = getxattr(argv[1], "tpfs.stats", buf, sizeof buf - 1);
	if (n < 0) {
		int e = errno;
		fprintf(stderr, "tpfs stat: %s: %s\n", argv[1],
			e == ENODATA || e == ENOTSUP ? "not a tpfs mount point" : strerror(e));
		return 1;
	}
	buf[n] = 0;
	fputs(buf, stdout);
	return 0;
}

/* tpfs sync: an fsync of the mount's root, which the daemon answers by
 * making its whole log durable (fsd_fsyncdir -> fs_sync); any other file
 * of the mount does the same, for a user who may not open the root. */
static int cmd_sync(int argc, char **argv)
{
	char root[PATH_MAX], msg[TPFS_TX_MSG_MAX];
	tpfs_tx_mounts *mi = NULL;
	const char *path = argc == 2 ? argv[1] : NULL;
	int rc, fd, e;
	if (argc > 2 || (path && (!strcmp(path, "-h") || !strcmp(path, "--help")))) {
		fputs(usage, argc == 2 ? stdout : stderr);
		return argc == 2 ? 0 : 2;
	}
	if ((rc = tpfs_tx_find_mount(path, root, sizeof root, msg, sizeof msg)) != 0) {
		fprintf(stderr, "tpfs sync: %s\n", msg);
		return 1;
	}
	/* a path on no tpfs mount comes back as itself: refuse it, or an
	 * fsync of a directory elsewhere would pass for a sync of tpfs */
	if ((rc = tpfs_tx_mounts_read(NULL, &mi, msg, sizeof msg)) != 0) {
		fprintf(stderr, "tpfs sync: %s\n", msg);
		return 1;
	}
	rc = tpfs_tx_mounts_containing(mi, root) != NULL;
	tpfs_tx_mounts_free(mi);
	if (!rc) {
		fprintf(stderr, "tpfs sync: %s: not on a tpfs mount\n", path ? path : root);
		return 1;
	}
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	e = errno;
	if (fd < 0 && e == EACCES && path) {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd < 0 && errno == EACCES)
			fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd < 0)
			e = errno;
	}
	if (fd < 0) {
		fprintf(stderr, "tpfs sync: %s: %s%s\n", e == EACCES && path ? path : root, strerror(e),
			e == ENOTCONN ? " (its daemon is not running: what it had not made durable may be lost)"
			: e == EACCES ? " (name a file of the mount that you may open)"
				      : "");
		return 1;
	}
	rc = fsync(fd) == 0 ? 0 : errno;
	close(fd);
	if (rc) {
		fprintf(stderr, "tpfs sync: %s: %s%s\n", root, strerror(rc),
			rc == ENOTCONN || rc == ECONNABORTED
				? " (its daemon is not running: what it had not made durable may be lost)"
				: "");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("tpfs %s\n", TPFS_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "mkfs"))
		return cmd_mkfs(argc - 1, argv + 1);
	if (!strcmp(argv[1], "logdump"))
		return cmd_logdump(argc - 1, argv + 1);
	if (!strcmp(argv[1], "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(argv[1], "recover"))
		return cmd_recover(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stat"))
		return cmd_stat(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sync"))
		return cmd_sync(argc - 1, argv + 1);
	if (!strcmp(argv[1], "demo"))
		return cmd_demo(argc - 1, argv + 1);
	fprintf(stderr, "tpfs: unknown command '%s'\n\n%s", argv[1], usage);
	return 2;
}
