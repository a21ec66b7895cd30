/*
 * txbench -- transactions from programs, measured on files (scripts/bench
 * tx): LIBTP's comparison done on a file system.
 *
 *   txbench flush DIR
 *       median microseconds of a 4 KiB pwrite + fdatasync on a
 *       preallocated file in DIR: the disk's serial flush cost
 *   txbench latency MNT SECONDS
 *       a small transaction on a tpfs mount (begin, write 3 small files,
 *       commit): median and mean microseconds per transaction
 *   txbench tpcb DIR MODE PROCS SECONDS
 *       TPC-B over files: "account" (100,000 records), "teller" (100),
 *       "branch" (10) of 100 bytes at id * 100, "history" appended with
 *       50-byte records.  One transaction updates one account, teller and
 *       branch (pread, add, pwrite) and appends to history.  PROCS
 *       processes (a transaction binds to a process, so processes, not
 *       threads).  MODE:
 *         tx         on a tpfs mount, each operation one transaction
 *                    (tpfs_tx_begin ... tpfs_tx_commit of the client library:
 *                    atomic, isolated, durable at commit); a deadlock
 *                    victim is aborted and retried
 *         fdatasync  record locks (OFD fcntl) and fdatasync of the 4 files
 *                    per transaction: durable, not atomic
 *         nosync     record locks only
 *       Prints transactions per second and, for tx, retries; then checks
 *       that the sums of accounts, tellers and branches agree and equal
 *       the history's (consistency).
 *
 * Each figure is printed on a line "RESULT name value" for scripts/bench.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tpfs_tx.h"

#define NACC 100000
#define NTEL 100
#define NBR 10
#define REC 100
#define HREC 50

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "txbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Transactions through the client library (tools/tpfs_tx.h), bound to
 * this process. */
static int tx_begin(const char *mnt)
{
	char msg[TPFS_TX_MSG_MAX];
	if (tpfs_tx_begin(mnt, 0, NULL, msg, sizeof msg) != 0) {
		fprintf(stderr, "txbench: begin: %s\n", msg);
		exit(1);
	}
	return 0;
}

static int tx_end(const char *mnt, int commit)
{
	char msg[TPFS_TX_MSG_MAX];
	return commit ? tpfs_tx_commit(mnt, msg, sizeof msg) : tpfs_tx_abort(mnt, msg, sizeof msg);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int do_flush(const char *dir)
{
	char path[4096], buf[4096];
	double t[200];
	snprintf(path, sizeof path, "%s/txbench-flush", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die(path);
	memset(buf, 'f', sizeof buf);
	for (int i = 0; i < 256; i++)
		if (pwrite(fd, buf, sizeof buf, (off_t)i * 4096) != (ssize_t)sizeof buf)
			die("preallocate");
	if (fsync(fd) != 0)
		die("fsync");
	for (int i = 0; i < 200; i++) {
		double a = now_s();
		if (pwrite(fd, buf, sizeof buf, (off_t)(i % 256) * 4096) != (ssize_t)sizeof buf || fdatasync(fd) != 0)
			die("write+fdatasync");
		t[i] = now_s() - a;
	}
	close(fd);
	unlink(path);
	qsort(t, 200, sizeof *t, cmp_d);
	printf("RESULT flush_us %.1f\n", t[100] * 1e6);
	return 0;
}

static void put_file(const char *dir, const char *name, int i, const char *text)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s%d", dir, name, i);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(path);
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die("write");
	close(fd);
}

static int do_latency(const char *mnt, double secs)
{
	static double t[1000000];
	size_t n = 0;
	double end = now_s() + secs, sum = 0;
	char text[64];
	while (now_s() < end && n < sizeof t / sizeof *t) {
		double a = now_s();
		tx_begin(mnt);
		snprintf(text, sizeof text, "transaction %zu\n", n);
		for (int i = 0; i < 3; i++)
			put_file(mnt, "lat", i, text);
		char msg[TPFS_TX_MSG_MAX];
		if (tpfs_tx_commit(mnt, msg, sizeof msg) != 0) {
			fprintf(stderr, "txbench: commit: %s\n", msg);
			return 1;
		}
		t[n] = now_s() - a;
		sum += t[n++];
	}
	qsort(t, n, sizeof *t, cmp_d);
	printf("RESULT latency_median_us %.1f\nRESULT latency_mean_us %.1f\nRESULT latency_n %zu\n", t[n / 2] * 1e6,
	       sum / (double)n * 1e6, n);
	return 0;
}

/* ---- TPC-B over files ---- */

enum { F_ACC, F_TEL, F_BR, F_HIST, NF };
static const char *const fname[NF] = {"account", "teller", "branch", "history"};

static void tpcb_load(const char *dir)
{
	char path[4096], rec[REC];
	static const int n[3] = {NACC, NTEL, NBR};
	memset(rec, 0, sizeof rec);
	for (int f = 0; f < 3; f++) {
		snprintf(path, sizeof path, "%s/%s", dir, fname[f]);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die(path);
		char *big = calloc((size_t)n[f], REC);
		if (!big || pwrite(fd, big, (size_t)n[f] * REC, 0) != (ssize_t)((size_t)n[f] * REC))
			die("load");
		free(big);
		fsync(fd);
		close(fd);
	}
	snprintf(path, sizeof path, "%s/history", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(path);
	fsync(fd);
	close(fd);
}

static int lock_rec(int fd, off_t off, off_t len, int type)
{
	struct flock fl = {.l_type = (short)type, .l_whence = SEEK_SET, .l_start = off, .l_len = len};
	return fcntl(fd, F_OFD_SETLKW, &fl);
}

static int64_t get_bal(const char *rec)
{
	int64_t v;
	memcpy(&v, rec, 8);
	return v;
}

/* One TPC-B transaction: 0, or EDEADLK (retry). */
static int tpcb_one(const char *dir, int mode, int *fd, unsigned *seed)
{
	int a = (int)(rand_r(seed) % NACC), t = (int)(rand_r(seed) % NTEL), b = t / (NTEL / NBR);
	int64_t delta = (int64_t)(rand_r(seed) % 1999999) - 999999;
	const int ids[3] = {a, t, b};
	char rec[REC], hist[HREC];
	if (mode == 0)
		tx_begin(dir);
	for (int f = 0; f < 3; f++) {
		off_t off = (off_t)ids[f] * REC;
		if (mode != 0 && lock_rec(fd[f], off, REC, F_WRLCK) != 0)
			die("lock");
		if (pread(fd[f], rec, REC, off) != REC)
			goto failed;
		int64_t v = get_bal(rec) + delta;
		memcpy(rec, &v, 8);
		if (pwrite(fd[f], rec, REC, off) != REC)
			goto failed;
	}
	memset(hist, ' ', sizeof hist);
	memcpy(hist, &delta, 8);
	memcpy(hist + 8, &a, 4);
	if (mode != 0 && lock_rec(fd[F_HIST], 0, 0, F_WRLCK) != 0)
		die("lock");
	if (write(fd[F_HIST], hist, HREC) != HREC)
		goto failed;
	if (mode == 0) {
		int e = tx_end(dir, 1);
		if (e == EDEADLK)
			return EDEADLK;
		if (e) {
			fprintf(stderr, "txbench: commit failed: errno %d\n", e);
			exit(1);
		}
		return 0;
	}
	if (mode == 1)
		for (int f = 0; f < NF; f++)
			if (fdatasync(fd[f]) != 0)
				die("fdatasync");
	for (int f = 0; f < NF; f++)
		lock_rec(fd[f], 0, 0, F_UNLCK);
	return 0;
failed:
	if (mode == 0 && errno == EDEADLK) {
		tx_end(dir, 0);
		return EDEADLK;
	}
	die("tpcb i/o");
	return 0;
}

static int64_t sum_file(const char *dir, int f, int n, int stride)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, fname[f]);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	struct stat st;
	fstat(fd, &st);
	if (n < 0)
		n = (int)(st.st_size / stride);
	char *buf = malloc((size_t)n * (size_t)stride + 1);
	if (!buf || pread(fd, buf, (size_t)n * (size_t)stride, 0) != (ssize_t)((size_t)n * (size_t)stride))
		die("sum");
	int64_t s = 0;
	for (int i = 0; i < n; i++)
		s += get_bal(buf + (size_t)i * (size_t)stride);
	free(buf);
	close(fd);
	return s;
}

static int do_tpcb(const char *dir, const char *modes, int procs, double secs)
{
	int mode = !strcmp(modes, "tx") ? 0 : !strcmp(modes, "fdatasync") ? 1 : !strcmp(modes, "nosync") ? 2 : -1;
	if (mode < 0) {
		fprintf(stderr, "txbench: unknown mode %s (tx, fdatasync, nosync)\n", modes);
		return 2;
	}
	tpcb_load(dir);
	uint64_t *counts = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counts == MAP_FAILED)
		die("mmap");
	memset(counts, 0, 4096);
	double start = now_s(), end = start + secs;
	for (int p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			int fd[NF];
			char path[4096];
			unsigned seed = (unsigned)(p * 7919 + 17);
			for (int f = 0; f < NF; f++) {
				snprintf(path, sizeof path, "%s/%s", dir, fname[f]);
				if ((fd[f] = open(path, O_RDWR | (f == F_HIST ? O_APPEND : 0))) < 0)
					die(path);
			}
			uint64_t done = 0, retries = 0;
			while (now_s() < end) {
				int rc = tpcb_one(dir, mode, fd, &seed);
				if (rc == EDEADLK)
					retries++;
				else
					done++;
			}
			__atomic_add_fetch(&counts[0], done, __ATOMIC_RELAXED);
			__atomic_add_fetch(&counts[1], retries, __ATOMIC_RELAXED);
			_exit(0);
		}
	}
	int bad = 0;
	for (int p = 0; p < procs; p++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	}
	double el = now_s() - start;
	if (bad) {
		fprintf(stderr, "txbench: a worker failed\n");
		return 1;
	}
	int64_t sa = sum_file(dir, F_ACC, NACC, REC), st = sum_file(dir, F_TEL, NTEL, REC),
		sb = sum_file(dir, F_BR, NBR, REC), sh = sum_file(dir, F_HIST, -1, HREC);
	int ok = sa == st && st == sb && sb == sh;
	printf("RESULT tps %.0f\nRESULT retries %" PRIu64 "\nRESULT committed %" PRIu64 "\nRESULT consistent %s\n",
	       (double)counts[0] / el, counts[1], counts[0], ok ? "yes" : "NO");
	if (!ok)
		fprintf(stderr, "txbench: sums disagree: accounts %" PRId64 ", tellers %" PRId64 ", branches %" PRId64
				", history %" PRId64 "\n",
			sa, st, sb, sh);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		puts("usage: txbench flush DIR\n"
		     "       txbench latency TPFS_MOUNT SECONDS\n"
		     "       txbench tpcb DIR tx|fdatasync|nosync PROCS SECONDS\n"
		     "Transactions on files (scripts/bench tx); prints RESULT lines.");
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "flush"))
		return do_flush(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "latency"))
		return do_latency(argv[2], atof(argv[3]));
	if (argc == 6 && !strcmp(argv[1], "tpcb"))
		return do_tpcb(argv[2], argv[3], atoi(argv[4]), atof(argv[5]));
	fprintf(stderr, "txbench: bad usage; txbench --help\n");
	return 2;
}
