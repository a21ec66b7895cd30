/*
 * bench_cluster.c -- raw latencies of the two engines under the cluster
 * store, through its clients, one thread: etcd put, get, a txn of 10
 * compares + 10 puts; RADOS write_full and read of 4 KiB and 4 MiB
 * objects.  Not a test (the machine is shared and noisy): it prints the
 * median, p90 and max of each, and MB/s for 4 MiB objects.
 *
 *   eval "$(scripts/cluster up)"; build/tests/cluster/bench_cluster [N]
 *
 * N: operations per measurement (default 200; 20 for 4 MiB objects).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"
#include "rados.h"

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void report(const char *what, int64_t *us, int n, size_t bytes)
{
	int64_t sum = 0;
	qsort(us, (size_t)n, sizeof *us, cmp64);
	for (int i = 0; i < n; i++)
		sum += us[i];
	printf("%-28s n=%-4d median %8.2f ms  p90 %8.2f ms  max %8.2f ms", what, n,
		(double)us[n / 2] / 1000, (double)us[n * 9 / 10] / 1000, (double)us[n - 1] / 1000);
	if (bytes)
		printf("  %7.1f MB/s", (double)bytes * n / (double)sum);
	printf("\n");
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "bench_cluster: %s: %s\n", what, msg);
	exit(1);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200, nbig = n / 10 > 0 ? n / 10 : 1;
	const char *cl = getenv("TPFS_CLUSTER"), *conf = getenv("TPFS_CEPH_CONF");
	const char *pool = getenv("TPFS_RADOS_POOL");
	etcd_client *c;
	radosc *r;
	int64_t *us = calloc((size_t)n, sizeof *us), t0;
	char key[128], oid[128], prefix[64], end[64];
	size_t big = 4u << 20, elen;
	char *buf = malloc(big);
	etcd_kv *kv;

	if (n <= 0 || !cl || !conf || !pool) {
		fprintf(stderr, "usage: eval \"$(scripts/cluster up)\"; bench_cluster [N]\n"
				"(needs TPFS_CLUSTER, TPFS_CEPH_CONF, TPFS_RADOS_POOL)\n");
		return 2;
	}
	memset(buf, 'x', big);
	if (etcd_open(cl, &c) != 0)
		die(cl, etcd_errmsg());
	if (radosc_open(conf, pool, getenv("TPFS_RADOS_CLIENT"), &r) != 0)
		die(conf, radosc_errmsg());
	snprintf(prefix, sizeof prefix, "/bench/%d/", (int)getpid());

	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof key, "%sk%05d", prefix, i);
		t0 = now_us();
		if (etcd_put(c, key, strlen(key), buf, 100, 0, NULL) != 0)
			die("etcd put", etcd_errmsg());
		us[i] = now_us() - t0;
	}
	report("etcd put (100 B)", us, n, 0);
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof key, "%sk%05d", prefix, i);
		t0 = now_us();
		if (etcd_get(c, key, strlen(key), 0, &kv, NULL) != 0 || !kv)
			die("etcd get", etcd_errmsg());
		us[i] = now_us() - t0;
		etcd_kv_free(kv);
	}
	report("etcd get", us, n, 0);
	for (int i = 0; i < n; i++) {
		etcd_txn *t;
		int ok;
		etcd_txn_new(&t);
		for (int j = 0; j < 10; j++) {
			snprintf(key, sizeof key, "%st%05d-%d", prefix, i, j);
			etcd_txn_compare(t, key, strlen(key), ETCD_VERSION, ETCD_EQ, 0);
			etcd_txn_put(t, key, strlen(key), buf, 100, 0);
		}
		t0 = now_us();
		if (etcd_txn_commit(c, t, &ok, NULL) != 0 || !ok)
			die("etcd txn", etcd_errmsg());
		us[i] = now_us() - t0;
		etcd_txn_free(t);
	}
	report("etcd txn (10 cmp + 10 put)", us, n, 0);
	elen = etcd_prefix_end(prefix, strlen(prefix), end);
	etcd_delete(c, prefix, strlen(prefix), end, elen, NULL, NULL);

	for (int i = 0; i < n; i++) {
		snprintf(oid, sizeof oid, "bench.%d.s%05d", (int)getpid(), i);
		t0 = now_us();
		if (radosc_write_full(r, oid, buf, 4096) != 0)
			die("rados write", radosc_errmsg());
		us[i] = now_us() - t0;
	}
	report("rados write_full 4 KiB", us, n, 4096);
	for (int i = 0; i < n; i++) {
		snprintf(oid, sizeof oid, "bench.%d.s%05d", (int)getpid(), i);
		t0 = now_us();
		if (radosc_read(r, oid, buf, 4096, 0) != 4096)
			die("rados read", radosc_errmsg());
		us[i] = now_us() - t0;
		radosc_remove(r, oid);
	}
	report("rados read 4 KiB", us, n, 4096);
	for (int i = 0; i < nbig; i++) {
		snprintf(oid, sizeof oid, "bench.%d.b%05d", (int)getpid(), i);
		t0 = now_us();
		if (radosc_write_full(r, oid, buf, big) != 0)
			die("rados write", radosc_errmsg());
		us[i] = now_us() - t0;
	}
	report("rados write_full 4 MiB", us, nbig, big);
	for (int i = 0; i < nbig; i++) {
		snprintf(oid, sizeof oid, "bench.%d.b%05d", (int)getpid(), i);
		t0 = now_us();
		if (radosc_read(r, oid, buf, big, 0) != (int64_t)big)
			die("rados read", radosc_errmsg());
		us[i] = now_us() - t0;
		radosc_remove(r, oid);
	}
	report("rados read 4 MiB", us, nbig, big);
	radosc_close(r);
	etcd_close(c);
	free(us);
	free(buf);
	return 0;
}
