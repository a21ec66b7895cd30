/*
 * test_private -- nobody reads around the modes tpfsd enforces (store.c
 * S4, tpfsd.c G5, fs_check.c V7), on a real mount:
 *   - a file written through the mount with mode 0600 and a secret in it:
 *     another user (U1) can read it neither through the mount nor out of
 *     the store's page file, superblock or log segments;
 *   - a store whose modes were loosened (files 0644, directories 0755, as
 *     an older tpfs made them): `tpfs check` names every such path with its
 *     mode and exits 1; a read-only mount is refused, naming them, and
 *     changes nothing; a read-write mount tightens each one, saying old ->
 *     new mode, serves the data, and the store checks clean after;
 *   - the daemon's log file STORE/tpfsd.log: 0600, named by `tpfs stat`,
 *     kept by a detached daemon, turned over at 1 MiB (daemon_log_file).
 * The temporary directory is 0755 (fsutil), so that only the store's own
 * modes keep another user out.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsutil.h"

#define MAXP 64

static void setup(void) { fsu_start(NULL, 0); }

/* The store's directories and files (the log is in STORE/log); the first
 * two are directories. */
static int store_paths(char paths[][512])
{
	int n = 0;
	snprintf(paths[n++], 512, "%s", fsu_m.store);
	snprintf(paths[n++], 512, "%s/log", fsu_m.store);
	snprintf(paths[n++], 512, "%s/super", fsu_m.store);
	snprintf(paths[n++], 512, "%s/data", fsu_m.store);
	DIR *d = opendir(paths[1]);
	cr_assert_not_null(d, "%s: %s", paths[1], strerror(errno));
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < MAXP)
		if (e->d_name[0] != '.')
			snprintf(paths[n++], 512, "%s/%s", paths[1], e->d_name);
	closedir(d);
	cr_assert_geq(n, 6, "at least two log segments");
	return n;
}

static unsigned mode_of(const char *p)
{
	struct stat st;
	cr_assert_eq(stat(p, &st), 0, "%s: %s", p, strerror(errno));
	return st.st_mode & 07777;
}

/* How many of the store's paths U1 opens (lists, for directories), in a
 * child that first checks it reaches the directory holding the store. */
static int u1_opens(char paths[][512], int n)
{
	pid_t pid = fsu_fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		fsu_become(&fsu_users[1]);
		if (access(fsu_m.dir, R_OK | X_OK) != 0)
			_exit(98); /* the test would be void */
		int opened = 0;
		for (int i = 0; i < n; i++) {
			if (i < 2) {
				DIR *d = opendir(paths[i]);
				if (d) {
					fprintf(stderr, "test_private: U1 lists %s\n", paths[i]);
					closedir(d);
					opened++;
				}
				continue;
			}
			int fd = open(paths[i], O_RDONLY);
			if (fd >= 0) {
				fprintf(stderr, "test_private: U1 opens %s\n", paths[i]);
				close(fd);
				opened++;
			} else if (errno != EACCES) {
				fprintf(stderr, "test_private: U1: open %s: %s, not EACCES\n", paths[i], strerror(errno));
				opened++;
			}
		}
		_exit(opened);
	}
	return fsu_wait(pid);
}

/* A line of text that holds both a and b. */
static int has_line(const char *text, const char *a, const char *b)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char line[2048];
		snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
		if (strstr(line, a) && strstr(line, b))
			return 1;
	}
	return 0;
}

Test(private, another_user_reads_nothing_out_of_the_store, .init = setup, .fini = fsu_teardown, .timeout = 120)
{
	static char paths[MAXP][512];
	char f[600], secret[64];
	snprintf(secret, sizeof secret, "TOP-SECRET-%d\n", (int)getpid());
	fsu_path(f, sizeof f, "%s/secret", fsu_m.mnt);
	cr_assert_eq(fsu_write_file(f, secret, strlen(secret), 0600), 0);
	cr_assert_eq(tfs_sh(&fsu_m, "sync secret"), 0);
	int n = store_paths(paths);
	cr_assert_eq(u1_opens(paths, n), 0, "another user opened the store's files (listed above)");
	/* through the mount, the file's own mode keeps U1 out */
	pid_t pid = fsu_fork();
	if (pid == 0) {
		fsu_become(&fsu_users[1]);
		_exit(open(f, O_RDONLY) < 0 && errno == EACCES ? 0 : 1);
	}
	cr_assert_eq(fsu_wait(pid), 0, "U1 reads a 0600 file of root through the mount");
	fsu_stop_check();
}

Test(private, loose_store_checked_refused_read_only_tightened, .init = setup, .fini = fsu_teardown, .timeout = 120)
{
	static char paths[MAXP][512];
	static char out[65536];
	char f[600];
	const char *tpfs = getenv("TPFS_BIN"), *tpfsd = getenv("TPFSD");
	cr_assert(tpfs && tpfsd, "TPFS_BIN and TPFSD must be set");
	fsu_path(f, sizeof f, "%s/kept", fsu_m.mnt);
	cr_assert_eq(fsu_write_file(f, "kept\n", 5, 0600), 0);
	fsu_stop_check();
	int n = store_paths(paths);
	for (int i = 0; i < n; i++) /* as an older tpfs made them */
		cr_assert_eq(chmod(paths[i], i < 2 ? 0755 : 0644), 0);
	cr_assert_gt(u1_opens(paths, n), 0, "the loosened store is not readable by others: the test is void");

	/* tpfs check names every path with its mode, exit 1 */
	const char *check[] = {tpfs, "check", fsu_m.store, NULL};
	cr_assert_eq(fsu_run_capture(check, out, sizeof out), 1, "tpfs check of a loose store: %s", out);
	for (int i = 0; i < n; i++)
		cr_assert(has_line(out, paths[i], i < 2 ? "0755" : "0644"), "check does not name %s: %s", paths[i],
			  out);

	/* a read-only mount refuses it, naming them, and changes nothing */
	const char *ro[] = {tpfsd, fsu_m.store, fsu_m.mnt, "-f", "-o", "ro", NULL};
	cr_assert_neq(fsu_run_capture(ro, out, sizeof out), 0, "a read-only mount of a loose store: %s", out);
	cr_assert(strstr(out, "read-only"), "%s", out);
	for (int i = 0; i < n; i++) {
		cr_assert(has_line(out, paths[i], i < 2 ? "0755" : "0644"), "ro mount does not name %s: %s", paths[i],
			  out);
		cr_assert_eq(mode_of(paths[i]), i < 2 ? 0755u : 0644u, "the read-only mount changed %s", paths[i]);
	}

	/* a read-write mount tightens each, saying so (stderr of the daemon) */
	char errf[600];
	snprintf(errf, sizeof errf, "%s/tpfsd.err", fsu_m.dir);
	int saved = dup(2), fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	int rc = fsu_try_remount(NULL);
	dup2(saved, 2);
	close(saved);
	close(fd);
	FILE *ef = fopen(errf, "r");
	cr_assert_not_null(ef);
	size_t len = fread(out, 1, sizeof out - 1, ef);
	out[len] = 0;
	fclose(ef);
	cr_assert_eq(rc, 0, "the read-write mount failed: %s", out);
	for (int i = 0; i < n; i++) {
		cr_assert(has_line(out, paths[i], i < 2 ? "0755 -> 0700" : "0644 -> 0600"),
			  "the mount does not say it tightened %s: %s", paths[i], out);
		cr_assert_eq(mode_of(paths[i]), i < 2 ? 0700u : 0600u, "%s not tightened", paths[i]);
	}
	cr_assert_eq(u1_opens(paths, n), 0, "another user still opens the store after the mount");
	char buf[16];
	cr_assert_eq(fsu_read_file(f, buf, sizeof buf), 5, "the data is served");
	cr_assert_eq(memcmp(buf, "kept\n", 5), 0);
	fsu_stop_check(); /* clean, private */
}

/* A file's text (at most cap - 1 bytes), or "" when it cannot be read. */
static const char *slurp(const char *p, char *buf, size_t cap)
{
	ssize_t n = fsu_read_file(p, buf, cap - 1);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

/* The daemon's messages also go to STORE/tpfsd.log (tpfsd.c, Logging):
 * 0600, so that `tpfs check` (V7) stays clean; named by `tpfs stat`; kept
 * after the daemon detached (where syslog may be missing); and bounded:
 * past 1 MiB it turns over to tpfsd.log.1. */
Test(private, daemon_log_file, .init = setup, .fini = fsu_teardown, .timeout = 120)
{
	static char out[65536], buf[1 << 21];
	char logf[600], old[600];
	const char *tpfs = getenv("TPFS_BIN"), *tpfsd = getenv("TPFSD");
	cr_assert(tpfs && tpfsd, "TPFS_BIN and TPFSD must be set");
	snprintf(logf, sizeof logf, "%s/tpfsd.log", fsu_m.store);
	snprintf(old, sizeof old, "%s/tpfsd.log.1", fsu_m.store);
	cr_assert(strstr(slurp(logf, buf, sizeof buf), "mounted on"),
		  "%s does not hold the daemon's \"mounted on\" message: \"%s\"", logf, buf);
	cr_assert_eq(mode_of(logf), 0600u, "%s is not private (0600)", logf);
	const char *st[] = {tpfs, "stat", fsu_m.mnt, NULL};
	cr_assert_eq(fsu_run_capture(st, out, sizeof out), 0, "tpfs stat: %s", out);
	cr_assert(has_line(out, "daemon messages", logf), "tpfs stat does not name %s: %s", logf, out);
	fsu_stop_check(); /* clean: the log file is nothing open to others */
	cr_assert(strstr(slurp(logf, buf, sizeof buf), "unmounted cleanly"), "%s lacks \"unmounted cleanly\": %s", logf,
		  buf);

	/* detached, with the file at its bound */
	memset(buf, 'x', sizeof buf);
	buf[0] = 'A';
	buf[(1 << 20) - 101] = '\n';
	cr_assert_eq(fsu_write_file(logf, buf, (1 << 20) - 100, 0600), 0);
	const char *mnt[] = {tpfsd, fsu_m.store, fsu_m.mnt, NULL};
	cr_assert_eq(fsu_run_capture(mnt, out, sizeof out), 0, "tpfsd (detached) failed: %s", out);
	const char *um[] = {"/bin/fusermount3", "-u", fsu_m.mnt, NULL};
	cr_assert_eq(fsu_run_capture(um, out, sizeof out), 0, "fusermount3 -u: %s", out);
	int done = 0;
	for (int i = 0; i < 200 && !done; i++) {
		done = strstr(slurp(logf, buf, sizeof buf), "unmounted cleanly") != NULL;
		if (!done)
			usleep(100000);
	}
	cr_assert(done, "20 s after fusermount3 -u of a detached tpfsd, %s lacks \"unmounted cleanly\": \"%s\"", logf,
		  buf);
	cr_assert(strstr(buf, "mounted on"), "%s lacks the detached daemon's \"mounted on\": %s", logf, buf);
	cr_assert(buf[0] != 'A' && strlen(buf) < 4096, "%s did not turn over at 1 MiB (%zu bytes)", logf, strlen(buf));
	cr_assert_eq(slurp(old, buf, sizeof buf)[0], 'A', "%s does not hold the log before the turn", old);
	cr_assert_eq(mode_of(old), 0600u, "%s is not private (0600)", old);
	cr_assert_eq(mode_of(logf), 0600u, "%s is not private (0600)", logf);
	const char *check[] = {tpfs, "check", fsu_m.store, NULL};
	cr_assert_eq(fsu_run_capture(check, out, sizeof out), 0, "tpfs check with the log files in the store: %s", out);
}
