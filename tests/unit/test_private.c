/*
 * test_private -- a store is private to its owner (store.c S4, io.c I8):
 * mkfs under any umask (0, 022, 0277) makes the store directory, its log
 * directory (its own, or one given with -l, new or existing) and every file
 * exactly 0700 / 0600, and so are the log segments the engine makes later;
 * a directory shared with other users (sticky bit) is refused; another
 * user (nobody, 65534) cannot open the page file, the superblock or a log
 * segment of a store that holds a secret, cannot list the store, and
 * `tpfs logdump` fails for them (it works for the owner); tp_private
 * reports a store whose modes were loosened, path by path, without
 * changing it, and tightens it when asked (and leaves a directory that is
 * not a store alone).
 *
 * The temporary directory is made 0755, so that nothing but the store's
 * own modes keeps the other user out.  The tests run as root and drop to
 * nobody in forked children.  The built tool comes in TPFS_BIN.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_util.h"
#include "tp.h"

#define NOBODY 65534
#define SEG 65536u

static char tdir[64];

static void setup(void)
{
	cr_assert_eq(geteuid(), 0, "the privacy tests run as root (they drop to nobody in children)");
	cr_assert_eq(su_tmpdir(tdir, sizeof tdir, "private"), 0);
	cr_assert_eq(chmod(tdir, 0755), 0, "%s: %s", tdir, strerror(errno)); /* only the store's modes guard it */
}

static void teardown(void) { su_rmtree(tdir); }

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", tdir, name); }

/* Commits pages holding secret, enough of them to fill several 64 KiB
 * segments (the engine makes segments after mkfs too); closes cleanly,
 * or as a crash (the log then holds what recovery will need). */
static void write_secret(const char *sdir, const char *secret, int pages, int crash)
{
	tp_options o;
	tp_env *env;
	tp_txn *t;
	uint64_t pg;
	su_options(&o, 4096, SEG, 0);
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
	for (int i = 0; i < pages; i++) {
		cr_assert_eq(tp_begin(env, &t), 0);
		cr_assert_eq(tp_page_alloc(t, 1, &pg), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_page_write(t, pg, 64, secret, (uint32_t)strlen(secret)), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_commit(t, 0), 0, "%s", tp_errmsg());
	}
	if (crash) {
		cr_assert_eq(tp_sync(env), 0);
		tp_crash_close(env);
	} else {
		cr_assert_eq(tp_close(env), 0, "%s", tp_errmsg());
	}
}

/* ---- every mode of a tree ---- */

static int bad_modes, files_seen, dirs_seen;

static int mode_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	unsigned mode = st->st_mode & 07777;
	if (flag == FTW_D || flag == FTW_DP) {
		dirs_seen++;
		if (mode != 0700) {
			bad_modes++;
			fprintf(stderr, "test_private: directory %s has mode %04o, not 0700\n", path, mode);
		}
	} else if (flag == FTW_F) {
		files_seen++;
		if (mode != 0600) {
			bad_modes++;
			fprintf(stderr, "test_private: file %s has mode %04o, not 0600\n", path, mode);
		}
	} else {
		bad_modes++;
		fprintf(stderr, "test_private: %s: unexpected (nftw flag %d)\n", path, flag);
	}
	return 0;
}

/* Asserts every directory of root is 0700 and every file 0600; returns
 * the number of files. */
static int assert_private(const char *root)
{
	bad_modes = files_seen = dirs_seen = 0;
	cr_assert_eq(nftw(root, mode_one, 16, FTW_PHYS), 0, "%s: %s", root, strerror(errno));
	cr_assert_eq(bad_modes, 0, "%s: %d paths are not private (listed above)", root, bad_modes);
	cr_assert_gt(dirs_seen, 0);
	return files_seen;
}

/* ---- mkfs under a umask ---- */

ParameterizedTestParameters(private, mkfs_under_umask)
{
	static mode_t masks[] = {0, 022, 0277};
	return cr_make_param_array(mode_t, masks, sizeof masks / sizeof masks[0]);
}

ParameterizedTest(mode_t *mask, private, mkfs_under_umask, .init = setup, .fini = teardown, .timeout = 120)
{
	char own[128], lstore[128], ldir[128], xstore[128], xlog[128];
	tp_options o;
	su_options(&o, 4096, SEG, 0);
	path_in(own, sizeof own, "own");
	path_in(lstore, sizeof lstore, "lstore");
	path_in(ldir, sizeof ldir, "ldir");
	path_in(xstore, sizeof xstore, "existing");
	path_in(xlog, sizeof xlog, "existing-log");
	/* directories that exist already, made loose on purpose */
	cr_assert_eq(mkdir(xstore, 0777), 0);
	cr_assert_eq(chmod(xstore, 0777), 0);
	cr_assert_eq(mkdir(xlog, 0755), 0);
	cr_assert_eq(chmod(xlog, 0755), 0);

	mode_t old = umask(*mask);
	cr_assert_eq(tp_mkfs(own, &o), 0, "umask %04o: %s", (unsigned)*mask, tp_errmsg());
	o.logdir = ldir; /* made by mkfs */
	cr_assert_eq(tp_mkfs(lstore, &o), 0, "umask %04o: %s", (unsigned)*mask, tp_errmsg());
	o.logdir = xlog; /* exists */
	cr_assert_eq(tp_mkfs(xstore, &o), 0, "umask %04o: %s", (unsigned)*mask, tp_errmsg());
	/* segments made after mkfs, under the same umask */
	write_secret(own, "umask test", 200, 0);
	write_secret(lstore, "umask test", 200, 1);
	umask(old);

	cr_assert_geq(assert_private(own), 4, "super, data and at least two segments");
	cr_assert_eq(assert_private(lstore), 2, "super and data (the log is elsewhere)");
	cr_assert_geq(assert_private(ldir), 2, "the segments");
	cr_assert_eq(assert_private(xstore), 2);
	cr_assert_geq(assert_private(xlog), 2);
	unsigned n = 99;
	cr_assert_eq(tp_private(own, NULL, 0, NULL, NULL, &n), 0, "%s", tp_errmsg());
	cr_assert_eq(n, 0, "tp_private finds %u loose paths in a store mkfs just made", n);
}

Test(private, mkfs_refuses_a_shared_directory, .init = setup, .fini = teardown)
{
	char shared[128], sdir[128];
	tp_options o;
	su_options(&o, 4096, SEG, 0);
	path_in(shared, sizeof shared, "shared");
	path_in(sdir, sizeof sdir, "store");
	cr_assert_eq(mkdir(shared, 0700), 0);
	cr_assert_eq(chmod(shared, 01777), 0);
	o.logdir = shared;
	cr_assert_eq(tp_mkfs(sdir, &o), EPERM, "a log directory like /tmp");
	cr_assert(strstr(tp_errmsg(), shared) && strstr(tp_errmsg(), "sticky"), "%s", tp_errmsg());
	cr_assert_eq(su_raw_size(sdir), -1, "nothing was made");
	struct stat st;
	cr_assert_eq(stat(shared, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 01777, "the shared directory was left as it was");
	o.logdir = NULL;
	cr_assert_eq(tp_mkfs(shared, &o), EPERM, "a store directory like /tmp");
	cr_assert(strstr(tp_errmsg(), "sticky"), "%s", tp_errmsg());
}

/* ---- another user ---- */

/* In a forked child: becomes nobody, or exits 99. */
static void drop_to_nobody(void)
{
	if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) != 0) {
		fprintf(stderr, "test_private: cannot become nobody: %s\n", strerror(errno));
		_exit(99);
	}
}

/* How many of paths nobody opens (or lists), in a child that first checks
 * it reaches the directory above the store, so that only the store's own
 * modes can stop it (98 if not). */
static int as_nobody_open(char paths[][PATH_MAX], int n)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		drop_to_nobody();
		if (access(tdir, R_OK | X_OK) != 0) {
			fprintf(stderr, "test_private: nobody cannot reach %s: %s (the test is void)\n", tdir,
				strerror(errno));
			_exit(98);
		}
		int opened = 0;
		for (int i = 0; i < n; i++) {
			struct stat st;
			int is_dir = stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode);
			if (is_dir) {
				DIR *d = opendir(paths[i]);
				if (d) {
					fprintf(stderr, "test_private: nobody lists %s\n", paths[i]);
					closedir(d);
					opened++;
				}
				continue;
			}
			int fd = open(paths[i], O_RDONLY);
			if (fd >= 0) {
				char b[64];
				ssize_t r = read(fd, b, sizeof b);
				fprintf(stderr, "test_private: nobody opens %s (and reads %zd bytes)\n", paths[i], r);
				close(fd);
				opened++;
			} else if (errno != EACCES) {
				fprintf(stderr, "test_private: nobody: open %s: %s, not EACCES\n", paths[i], strerror(errno));
				opened++;
			}
		}
		_exit(opened > 90 ? 90 : opened);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "the child died");
	return WEXITSTATUS(st);
}

/* Runs `tpfs logdump store` as root or as nobody; its exit status, and
 * whether its output held needle. */
static int logdump_as(int nobody, const char *sdir, const char *needle, int *found)
{
	const char *tpfs = getenv("TPFS_BIN");
	char out[160];
	cr_assert(tpfs && access(tpfs, X_OK) == 0, "TPFS_BIN is not set to the built tpfs tool");
	path_in(out, sizeof out, nobody ? "dump-nobody.txt" : "dump-root.txt");
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(97);
		if (nobody)
			drop_to_nobody();
		execl(tpfs, tpfs, "logdump", sdir, (char *)NULL);
		_exit(127);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "tpfs logdump died");
	FILE *f = fopen(out, "r");
	cr_assert_not_null(f);
	char line[4096];
	*found = 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, needle))
			*found = 1;
	fclose(f);
	return WEXITSTATUS(st);
}

/* The paths of a store's files: the store and log directories, super,
 * data, every segment. */
static int store_paths(const char *sdir, char paths[][PATH_MAX], int max)
{
	char logdir[1024];
	int n = 0;
	cr_assert_eq(su_logdir(sdir, logdir, sizeof logdir), 0);
	snprintf(paths[n++], PATH_MAX, "%s", sdir);
	snprintf(paths[n++], PATH_MAX, "%s/super", sdir);
	snprintf(paths[n++], PATH_MAX, "%s/data", sdir);
	snprintf(paths[n++], PATH_MAX, "%s", logdir);
	DIR *d = opendir(logdir);
	cr_assert_not_null(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max)
		if (e->d_name[0] != '.')
			snprintf(paths[n++], PATH_MAX, "%s/%s", logdir, e->d_name);
	closedir(d);
	cr_assert_geq(n, 6, "at least two segments");
	return n;
}

Test(private, another_user_reads_nothing, .init = setup, .fini = teardown, .timeout = 120)
{
	static char paths[128][PATH_MAX];
	char sdir[128], lstore[128], ldir[128], secret[64];
	tp_options o;
	int found;
	su_options(&o, 4096, SEG, 0);
	snprintf(secret, sizeof secret, "TOP-SECRET-%d", (int)getpid());
	path_in(sdir, sizeof sdir, "store");
	path_in(lstore, sizeof lstore, "lstore");
	path_in(ldir, sizeof ldir, "ldir");
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
	o.logdir = ldir;
	cr_assert_eq(tp_mkfs(lstore, &o), 0, "%s", tp_errmsg());
	write_secret(sdir, secret, 40, 1); /* the secret is in the log, and the store needs recovery */
	write_secret(lstore, secret, 40, 0);

	int n = store_paths(sdir, paths, 128);
	cr_assert_eq(as_nobody_open(paths, n), 0, "another user opened paths of the store (listed above)");
	n = store_paths(lstore, paths, 128);
	cr_assert_eq(as_nobody_open(paths, n), 0, "another user opened paths of a store with its log elsewhere");

	cr_assert_eq(logdump_as(0, sdir, "PAGE_SET", &found), 0, "the owner's logdump fails");
	cr_assert(found, "the owner's logdump prints the records");
	cr_assert_neq(logdump_as(1, sdir, "PAGE_SET", &found), 0, "`tpfs logdump` runs for another user");
	cr_assert_not(found, "another user's logdump printed records");
	cr_assert_neq(logdump_as(1, lstore, "PAGE_SET", &found), 0, "`tpfs logdump` runs for another user (-l)");
	cr_assert_not(found);
}

/* ---- tp_private ---- */

typedef struct seen {
	char path[32][PATH_MAX];
	unsigned mode[32], want[32];
	int n;
} seen;

static void on_loose(void *arg, const char *path, unsigned mode, unsigned want)
{
	seen *s = arg;
	if (s->n < 32) {
		snprintf(s->path[s->n], PATH_MAX, "%s", path);
		s->mode[s->n] = mode;
		s->want[s->n] = want;
	}
	s->n++;
}

static unsigned mode_of(const char *p)
{
	struct stat st;
	cr_assert_eq(stat(p, &st), 0, "%s: %s", p, strerror(errno));
	return st.st_mode & 07777;
}

Test(private, loose_store_reported_then_tightened, .init = setup, .fini = teardown, .timeout = 120)
{
	static char paths[128][PATH_MAX];
	char sdir[128], ldir[128];
	tp_options o;
	static seen s;
	unsigned cnt = 0;
	su_options(&o, 4096, SEG, 0);
	path_in(sdir, sizeof sdir, "store");
	path_in(ldir, sizeof ldir, "ldir");
	o.logdir = ldir;
	cr_assert_eq(tp_mkfs(sdir, &o), 0, "%s", tp_errmsg());
	write_secret(sdir, "loose", 20, 0);
	int n = store_paths(sdir, paths, 128);
	for (int i = 0; i < n; i++) { /* as an old tpfs made it, or a careless chmod -R */
		int dir = i == 0 || i == 3;
		cr_assert_eq(chmod(paths[i], dir ? 0755 : i == 2 ? 0640 : 0644), 0);
	}

	/* reported, nothing changed */
	cr_assert_eq(tp_private(sdir, NULL, 0, on_loose, &s, &cnt), 0, "%s", tp_errmsg());
	cr_assert_eq(cnt, (unsigned)n, "%u of %d loose paths found", cnt, n);
	cr_assert_eq(s.n, n);
	for (int i = 0; i < n; i++) {
		int dir = i == 0 || i == 3, k;
		unsigned was = dir ? 0755 : i == 2 ? 0640 : 0644;
		for (k = 0; k < s.n && strcmp(s.path[k], paths[i]) != 0; k++)
			;
		cr_assert_lt(k, s.n, "%s was not reported", paths[i]);
		cr_assert_eq(s.mode[k], was, "%s: reported %04o, is %04o", paths[i], s.mode[k], was);
		cr_assert_eq(s.want[k], dir ? 0700u : 0600u, "%s: should be %04o", paths[i], s.want[k]);
		cr_assert_eq(mode_of(paths[i]), was, "%s changed without tighten", paths[i]);
	}

	/* another user still reads it: this is what tightening is for */
	cr_assert_gt(as_nobody_open(paths, n), 0, "the loosened store is not readable by others: the test is void");

	/* tightened, reported the same way */
	s.n = 0;
	cr_assert_eq(tp_private(sdir, NULL, 1, on_loose, &s, &cnt), 0, "%s", tp_errmsg());
	cr_assert_eq(cnt, (unsigned)n);
	cr_assert_eq(assert_private(sdir), 2);
	cr_assert_geq(assert_private(ldir), 2);
	cr_assert_eq(as_nobody_open(paths, n), 0, "another user still opens paths after tightening");
	cr_assert_eq(tp_private(sdir, NULL, 0, NULL, NULL, &cnt), 0);
	cr_assert_eq(cnt, 0, "still %u loose after tightening", cnt);

	/* the store still opens, with its data */
	tp_env *env;
	cr_assert_eq(tp_open(sdir, &o, &env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_close(env), 0);

	/* a directory that is not a store is left alone */
	char plain[128];
	path_in(plain, sizeof plain, "plain");
	cr_assert_eq(mkdir(plain, 0755), 0);
	cr_assert_eq(chmod(plain, 0755), 0);
	cr_assert_eq(tp_private(plain, NULL, 1, NULL, NULL, &cnt), TP_EBADSTORE, "%s", tp_errmsg());
	cr_assert_eq(mode_of(plain), 0755u, "tp_private changed a directory that is not a store");
}
