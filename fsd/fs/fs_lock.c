/*
 * fs_lock -- see fs_lock.h.
 *
 * Q1  One writer per store: tpfsd and tpfs recover hold the store's flock
 *     exclusively from before the store is opened until after it is closed;
 *     tpfs check holds it shared.  So nobody checks a store in use, and a
 *     second daemon never runs a second engine on the same files.
 * Q2  A holder that serves a mount of the store is refused at once (it is
 *     not going away); any other holder is waited for, at most a bound:
 *     `fusermount3 -u M` returns when the kernel mount is gone, before the
 *     daemon has written its final checkpoint and let go of the lock, and a
 *     script that unmounts and then checks or mounts again must not fail.
 * Q3  The mount table is read from /proc/self/mountinfo, never by a stat
 *     of a mount point: a dead mount answers ENOTCONN (or a stale cached
 *     attribute), a hung one never answers.
 * Q4  A holder that was killed but cannot exit (stuck in the kernel on its
 *     own dead mount) is not serving: its FUSE connection is aborted, once,
 *     and it is waited for.
 */
#include "fs_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape(const char *in, char *out, size_t size)
{
	char *o = out;
	for (const char *p = in; *p && o < out + size - 1; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
}

/* Calls fn for every mount (in mountinfo order: a mount comes after the
 * one it covers); stops when fn returns nonzero. */
static void each_mount(int (*fn)(void *arg, const char *mnt, const char *type, const char *src, long conn),
		       void *arg)
{
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	static __thread char line[3 * PATH_MAX + 1024];
	if (!mi)
		return;
	while (fgets(line, sizeof line, mi)) {
		char m[PATH_MAX], t[256], s[PATH_MAX], um[PATH_MAX], us[PATH_MAX];
		unsigned maj, min;
		char *sep = strstr(line, " - ");
		/* id parent major:minor root mountpoint ... - fstype source opts */
		if (!sep || sscanf(line, "%*s %*s %u:%u %*s %4095s", &maj, &min, m) != 3 ||
		    sscanf(sep + 3, "%255s %4095s", t, s) != 2)
			continue;
		unescape(m, um, sizeof um);
		unescape(s, us, sizeof us);
		if (fn(arg, um, t, us, strncmp(t, "fuse", 4) == 0 && maj == 0 ? (long)min : -1L))
			break;
	}
	fclose(mi);
}

typedef struct mount_q {
	const char *key; /* the mount point, or the source */
	int found;
	char *a, *b;
	size_t asize, bsize;
	long conn;
} mount_q;

static int at_fn(void *arg, const char *mnt, const char *type, const char *src, long conn)
{
	mount_q *q = arg;
	if (strcmp(mnt, q->key) == 0) { /* the last one is the top */
		q->found = 1;
		snprintf(q->a, q->asize, "%s", type);
		snprintf(q->b, q->bsize, "%s", src);
		q->conn = conn;
	}
	return 0;
}

int fs_mount_at(const char *mnt, char *type, size_t tsize, char *source, size_t ssize, long *conn)
{
	mount_q q = {.key = mnt, .a = type, .asize = tsize, .b = source, .bsize = ssize, .conn = -1};
	each_mount(at_fn, &q);
	if (conn)
		*conn = q.conn;
	return q.found;
}

static int on_fn(void *arg, const char *mnt, const char *type, const char *src, long conn)
{
	mount_q *q = arg;
	(void)conn;
	if (strncmp(type, "fuse", 4) == 0 && strcmp(src, q->key) == 0) {
		q->found = 1;
		snprintf(q->a, q->asize, "%s", mnt);
	}
	return 0;
}

int fs_mounted_on(const char *store, char *mnt, size_t size)
{
	mount_q q = {.key = store, .a = mnt, .asize = size};
	each_mount(on_fn, &q);
	return q.found;
}

int fs_lock_holder(const char *store, char *comm, size_t size)
{
	struct stat st;
	char line[512], path[64];
	FILE *f;
	int pid = 0;
	if (size)
		comm[0] = 0;
	if (stat(store, &st) != 0 || !(f = fopen("/proc/locks", "r")))
		return 0;
	/* "1: FLOCK  ADVISORY  WRITE 29833 fe:00:983128 0 EOF"; waiters have "->" */
	while (!pid && fgets(line, sizeof line, f)) {
		char kind[16];
		int p;
		unsigned maj, min;
		unsigned long long ino;
		if (sscanf(line, "%*s %15s %*s %*s %d %x:%x:%llu", kind, &p, &maj, &min, &ino) == 5 &&
		    !strcmp(kind, "FLOCK") && maj == major(st.st_dev) && min == minor(st.st_dev) &&
		    ino == (unsigned long long)st.st_ino)
			pid = p;
	}
	fclose(f);
	if (pid && size) {
		snprintf(path, sizeof path, "/proc/%d/comm", pid);
		if ((f = fopen(path, "r"))) {
			if (fgets(comm, (int)size, f))
				comm[strcspn(comm, "\n")] = 0;
			fclose(f);
		}
		if (!comm[0])
			snprintf(comm, size, "a process");
	}
	return pid;
}

/* The holder was killed but has not exited: SIGKILL pending for its
 * thread group, or its leader a zombie while another thread lives on. */
static int dying(int pid)
{
	char path[64], line[256];
	int d = 0;
	FILE *f;
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (!d && fgets(line, sizeof line, f)) {
		unsigned long long mask;
		if (!strncmp(line, "State:", 6))
			d = strchr(line, 'Z') != NULL;
		else if (sscanf(line, "ShdPnd: %llx", &mask) == 1)
			d = (mask >> (9 - 1)) & 1; /* SIGKILL */
	}
	fclose(f);
	return d;
}

/* Q4: a killed daemon can stay stuck in the kernel for ever (a thread of
 * it waits for a directory lock held by a request the dead daemon will
 * never answer; README), holding the store lock.  Aborting its FUSE
 * connection ends that request and lets it exit.  Root only; best
 * effort. */
static void abort_connection(const char *mnt, const char *who, const char *store, int pid)
{
	char type[256], src[PATH_MAX], path[64];
	long conn;
	if (!fs_mount_at(mnt, type, sizeof type, src, sizeof src, &conn) || conn < 0 || strcmp(src, store))
		return;
	snprintf(path, sizeof path, "/sys/fs/fuse/connections/%ld/abort", conn);
	FILE *f = fopen(path, "w");
	if (!f)
		return;
	fputs("1", f);
	fclose(f);
	fprintf(stderr, "%s: %s: tpfsd (pid %d) was killed but is stuck in the kernel: aborted the FUSE "
		"connection %ld of its mount on %s\n", who, store, pid, conn, mnt);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int fs_lock_store(const char *store, int shared, const char *who)
{
	const char *w = getenv("TPFS_LOCK_WAIT");
	unsigned bound = w && *w ? (unsigned)strtoul(w, NULL, 10) : FS_LOCK_WAIT_S;
	char comm[64] = "another process", mnt[PATH_MAX];
	int fd, e, said = 0, pid = 0, aborted = 0;
	double t0 = now_s();
	if ((fd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "%s: %s: %s\n", who, store, strerror(errno));
		return -1;
	}
	for (;;) {
		if (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0) {
			if (said)
				fprintf(stderr, "%s: %s: %s (pid %d) let go of the store after %.1f s\n", who, store,
					comm, pid, now_s() - t0);
			return fd;
		}
		if ((e = errno) != EWOULDBLOCK && e != EINTR) {
			fprintf(stderr, "%s: %s: cannot lock the store: %s\n", who, store, strerror(e));
			break;
		}
		char cm[64];
		int p = fs_lock_holder(store, cm, sizeof cm);
		if (p) {
			pid = p;
			memcpy(comm, cm, sizeof comm);
		} else if (!pid) {
			snprintf(comm, sizeof comm, "another process");
		}
		int mounted = fs_mounted_on(store, mnt, sizeof mnt);
		if (mounted && pid && dying(pid)) { /* Q4 */
			if (!aborted)
				abort_connection(mnt, who, store, pid);
			aborted = 1;
			mounted = 0;
		}
		/* a process other than tpfsd (a check) holding it is waited for,
		 * even while a dead mount of the store is left somewhere */
		if (mounted && (!pid || !strcmp(comm, "tpfsd"))) { /* Q2 */
			if (pid)
				fprintf(stderr, "%s: %s: in use by %s (pid %d), mounted on %s\n", who, store, comm, pid,
					mnt);
			else
				fprintf(stderr, "%s: %s: in use: mounted on %s\n", who, store, mnt);
			break;
		}
		if (now_s() - t0 >= bound) {
			fprintf(stderr, "%s: %s: still in use by %s (pid %d) after %u s, though not mounted; gave up\n",
				who, store, comm, pid, bound);
			break;
		}
		if (!said && pid) {
			fprintf(stderr, "%s: %s: waiting for %s (pid %d), which holds the store%s, to let go of it (at "
				"most %u s)\n", who, store, comm, pid,
				strcmp(comm, "tpfsd") ? "" : " (closing it after an unmount)", bound);
			said = 1;
		}
		usleep(20000);
	}
	close(fd);
	return -1;
}
