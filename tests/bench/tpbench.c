/*
 * tpbench -- engine benchmarks run by scripts/bench (never by the tests).
 *
 *   tpbench commit DIR [SECONDS]   commits per second of tiny durable
 *                                  transactions at 1, 2, 4, 8, 16 threads,
 *                                  log flushes per commit, against the disk's
 *                                  serial flush limit measured in the same run
 *   tpbench locks                  uncontended lock acquire+release, ns/pair
 *
 * Every figure is printed next to a peer measured in the same run (the
 * machines are shared and noisy): the 1-thread rate, and 1e6 / the median
 * microseconds of one 4 KiB write+fdatasync on a preallocated file.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchutil.h"
#include "lock.h"
#include "tp.h"

static int commit_flags; /* TP_COMMIT_NOSYNC with --nosync */

typedef struct worker {
	tp_env *env;
	uint64_t pgno;
	volatile int *stop;
	uint64_t commits;
	int err;
} worker;

static void *commit_loop(void *arg)
{
	worker *w = arg;
	uint64_t v = 0;
	while (!*w->stop) {
		tp_txn *t;
		int rc;
		if ((rc = tp_begin(w->env, &t)) != 0 || (rc = tp_page_write(t, w->pgno, 0, &v, sizeof v)) != 0 ||
		    (rc = tp_commit(t, commit_flags)) != 0) {
			fprintf(stderr, "tpbench: %s\n", tp_errmsg());
			w->err = rc;
			return NULL;
		}
		v++;
		w->commits++;
	}
	return NULL;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "tpbench: %s: %s (%s)\n", what, tp_strerror(rc), tp_errmsg());
	exit(1);
}

static int bench_commit(const char *dir, double secs)
{
	char store[4096];
	tp_options o;
	tp_env *env;
	tp_txn *t;
	int rc;
	int nthreads[] = {1, 2, 4, 8, 16};
	double rate[5], fpc[5];
	uint64_t pg[16];

	snprintf(store, sizeof store, "%s/commit-store", dir);
	tp_options_init(&o);
	o.quiet = 1;
	if ((rc = tp_mkfs(store, &o)) != 0)
		die("mkfs", rc);
	if ((rc = tp_open(store, &o, &env)) != 0)
		die("open", rc);
	if ((rc = tp_begin(env, &t)) != 0)
		die("begin", rc);
	for (int i = 0; i < 16; i++)
		if ((rc = tp_page_alloc(t, 1, &pg[i])) != 0)
			die("alloc", rc);
	if ((rc = tp_commit(t, 0)) != 0)
		die("commit", rc);
	double fus = bench_flush_us(dir);
	printf("disk: 4 KiB write+fdatasync on a preallocated file: median %.0f us -> serial flush limit %.0f/s\n",
	       fus, 1e6 / fus);
	printf("%-8s %12s %14s %12s %14s\n", "threads", "commits/s", "flushes/commit", "vs 1 thread",
	       "vs flush limit");
	for (int k = 0; k < 5; k++) {
		int n = nthreads[k];
		volatile int stop = 0;
		worker w[16];
		pthread_t th[16];
		tp_stats s0, s1;
		tp_stats_get(env, &s0);
		double a = bench_now();
		for (int i = 0; i < n; i++) {
			w[i] = (worker){.env = env, .pgno = pg[i], .stop = &stop};
			pthread_create(&th[i], NULL, commit_loop, &w[i]);
		}
		usleep((useconds_t)(secs * 1e6));
		stop = 1;
		uint64_t c = 0;
		for (int i = 0; i < n; i++) {
			pthread_join(th[i], NULL);
			if (w[i].err)
				die("commit loop", w[i].err);
			c += w[i].commits;
		}
		double el = bench_now() - a;
		tp_stats_get(env, &s1);
		rate[k] = c / el;
		fpc[k] = c ? (double)(s1.log_flushes - s0.log_flushes) / c : 0;
		printf("%-8d %12.0f %14.3f %11.2fx %13.2fx\n", n, rate[k], fpc[k], rate[k] / rate[0],
		       rate[k] / (1e6 / fus));
		fflush(stdout);
	}
	printf("target: 8 threads >= 4x 1 thread (%.2fx: %s), flushes/commit < 0.3 at 8 threads (%.3f: %s)\n",
	       rate[3] / rate[0], rate[3] / rate[0] >= 4 ? "met" : "NOT met", fpc[3], fpc[3] < 0.3 ? "met" : "NOT met");
	printf("group commit: adaptive leader/follower -- the first committer to find no flush in progress writes\n"
	       "and syncs everything appended so far; committers arriving meanwhile wait for the next flush, which\n"
	       "takes all of them (no timers: group size follows the arrival rate during one flush)\n");
	if ((rc = tp_close(env)) != 0)
		die("close", rc);
	return 0;
}

static int bench_locks(void)
{
	lock_mgr *lm;
	lock_owner *o;
	const int n = 2000000;
	char key[16];
	if (lock_mgr_open(&lm) || lock_owner_new(lm, 1, &o)) {
		fprintf(stderr, "tpbench: lock manager: out of memory\n");
		return 1;
	}
	double a = bench_now();
	for (int i = 0; i < n; i++) {
		int len = snprintf(key, sizeof key, "k%d", i & 1023);
		if (lock_get(o, key, (size_t)len, LOCK_X, 0) != 0 || lock_release(o, key, (size_t)len) != 0) {
			fprintf(stderr, "tpbench: lock pair failed\n");
			return 1;
		}
	}
	double el = bench_now() - a;
	printf("lock: uncontended acquire+release: %.0f ns per pair (%d pairs)\n", el * 1e9 / n, n);
	lock_owner_free(o);
	lock_mgr_close(lm);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "commit-nosync")) {
		commit_flags = TP_COMMIT_NOSYNC;
		return bench_commit(argv[2], argc > 3 ? atof(argv[3]) : 3.0);
	}
	if (argc >= 3 && !strcmp(argv[1], "commit"))
		return bench_commit(argv[2], argc > 3 ? atof(argv[3]) : 3.0);
	if (argc == 2 && !strcmp(argv[1], "locks"))
		return bench_locks();
	fprintf(stderr, "usage: tpbench commit DIR [SECONDS] | tpbench locks\n");
	return 2;
}
