/*
 * test_etcd_failover.c -- kill -9 of the etcd leader during a stream of
 * puts from 4 threads: no put fails, no acknowledged put is lost, and the
 * longest stall is printed.  A watch opened on the leader before the kill
 * goes on on another member and sees every acknowledged put, in order.  The killed member is started again
 * (scripts/cluster up) and must catch up.  Runs alone (it kills a member
 * the other tests use).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cluster_util.h"

#define WRITERS 4

/* The index (in $TPFS_CLUSTER, = member mI of scripts/cluster) of the leader. */
static int find_leader(etcd_client *c)
{
	for (size_t i = 0; i < etcd_endpoint_count(c); i++) {
		char cmd[512], line[1024];
		FILE *f;
		snprintf(cmd, sizeof cmd,
			"ETCDCTL_API=3 etcdctl --endpoints=%s --command-timeout=3s endpoint status 2>/dev/null",
			etcd_endpoint(c, i));
		f = popen(cmd, "r");
		cr_assert(f, "popen etcdctl");
		/* "127.0.0.1:23790, 8e9e05c52164694d, 3.4.23, 20 kB, true, false, ..." */
		while (fgets(line, sizeof line, f)) {
			char *s = line;
			for (int field = 0; field < 4 && s; field++)
				if ((s = strchr(s, ',')))
					s++;
			if (s && strncmp(s, " true,", 6) == 0) {
				pclose(f);
				return (int)i;
			}
		}
		pclose(f);
	}
	return -1;
}

struct writer {
	etcd_client *c;
	const char *prefix;
	int id;
	atomic_int *stop;
	long acked;
	int64_t max_us;
	int err;
	char msg[512];
};

static void *write_loop(void *arg)
{
	struct writer *w = arg;
	while (!atomic_load(w->stop)) {
		char k[256], v[64];
		int64_t t0 = cl_now_us(), dt;
		int rc;
		snprintf(k, sizeof k, "%sw%d/%06ld", w->prefix, w->id, w->acked);
		snprintf(v, sizeof v, "value %d.%ld", w->id, w->acked);
		rc = etcd_put(w->c, k, strlen(k), v, strlen(v), 0, NULL);
		dt = cl_now_us() - t0;
		if (rc != 0) {
			w->err = rc;
			snprintf(w->msg, sizeof w->msg, "%s", etcd_errmsg());
			return NULL;
		}
		w->acked++; /* acknowledged */
		if (dt > w->max_us)
			w->max_us = dt;
	}
	return NULL;
}

Test(etcd_failover, kill_leader_during_puts, .timeout = 300)
{
	etcd_client *c = cl_etcd();
	char p[128], name[32], end[200];
	struct writer w[WRITERS];
	pthread_t th[WRITERS];
	atomic_int stop = 0;
	int leader, newleader;
	pid_t pid;
	int64_t max_us = 0;
	long total = 0;
	size_t elen;
	etcd_range *r;

	etcd_client *wc;
	etcd_watch *wat;
	char spec[1024];
	int64_t start_rev;

	cl_prefix(p, sizeof p, "leaderkill");
	leader = find_leader(c);
	cr_assert_geq(leader, 0, "no etcd member says it is the leader");
	snprintf(name, sizeof name, "etcd-m%d", leader);
	pid = cl_pid(name);
	/* a watch whose stream is on the leader (its first endpoint) */
	snprintf(spec, sizeof spec, "%s", etcd_endpoint(c, (size_t)leader));
	for (size_t i = 0; i < etcd_endpoint_count(c); i++)
		if ((int)i != leader)
			snprintf(spec + strlen(spec), sizeof spec - strlen(spec), ",%s", etcd_endpoint(c, i));
	cr_assert_eq(etcd_open(spec, &wc), 0, "%s", etcd_errmsg());
	cr_assert_eq(etcd_put(c, p, strlen(p), "start", 5, 0, &start_rev), 0, "%s", etcd_errmsg());
	elen = etcd_prefix_end(p, strlen(p), end);
	cr_assert_eq(etcd_watch_open(wc, p, strlen(p), end, elen, start_rev + 1, &wat), 0, "%s",
		etcd_errmsg());
	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){.c = c, .prefix = p, .id = i, .stop = &stop};
		pthread_create(&th[i], NULL, write_loop, &w[i]);
	}
	sleep(2);
	printf("kill -9 of the leader %s (%s, pid %d)\n", name, etcd_endpoint(c, (size_t)leader),
		(int)pid);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	sleep(8);
	atomic_store(&stop, 1);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < WRITERS; i++) {
		cr_assert_eq(w[i].err, 0, "writer %d: a put failed after %ld acked: %s", i, w[i].acked,
			w[i].msg);
		total += w[i].acked;
		if (w[i].max_us > max_us)
			max_us = w[i].max_us;
	}
	newleader = find_leader(c);
	printf("etcd leader kill: %ld puts acknowledged by %d threads in 10 s, longest put %.0f ms, "
	       "longest stall seen by the client (failover) %lld ms; new leader m%d\n",
		total, WRITERS, (double)max_us / 1000, (long long)etcd_max_stall_ms(c), newleader);
	cr_assert_geq(newleader, 0, "no new leader");
	cr_assert_neq(newleader, leader);

	/* every acknowledged put is there, with its value */
	for (int i = 0; i < WRITERS; i++) {
		char wp[200];
		snprintf(wp, sizeof wp, "%sw%d/", p, i);
		elen = etcd_prefix_end(wp, strlen(wp), end);
		cr_assert_eq(etcd_range_get(c, wp, strlen(wp), end, elen, 0, 0, &r), 0, "%s", etcd_errmsg());
		cr_assert_geq((long)r->n, w[i].acked, "writer %d: %ld puts acknowledged, %zu there", i,
			w[i].acked, r->n);
		for (long j = 0; j < w[i].acked; j++) {
			char k[256], v[64];
			snprintf(k, sizeof k, "%s%06ld", wp, j);
			snprintf(v, sizeof v, "value %d.%ld", i, j);
			cr_assert_str_eq(r->kvs[j].key, k, "acknowledged put %s lost", k);
			cr_assert_str_eq(r->kvs[j].value, v);
		}
		etcd_range_free(r);
	}

	/* the watch: every acknowledged put, per writer in order (a put retried
	 * after an attempt that had been applied shows twice, in a row) */
	{
		long next[WRITERS] = {0}, events = 0;
		int64_t last = 0, t0 = cl_now_us();
		long want = total;
		while (want > 0) {
			etcd_event *evs;
			size_t n;
			int rc = etcd_watch_next(wat, 20000, &evs, &n);
			cr_assert_eq(rc, 0, "watch after %ld events: %s", events, etcd_errmsg());
			for (size_t i = 0; i < n; i++, events++) {
				int wi;
				long seq;
				cr_assert_gt(evs[i].kv.mod_revision, last, "watch events out of order");
				last = evs[i].kv.mod_revision;
				cr_assert_eq(sscanf(evs[i].kv.key + strlen(p), "w%d/%ld", &wi, &seq), 2,
					"watch event for %s", evs[i].kv.key);
				cr_assert(wi >= 0 && wi < WRITERS);
				if (seq == next[wi] - 1)
					continue; /* the same put again */
				cr_assert_eq(seq, next[wi], "writer %d: the watch skipped from %ld to %ld", wi,
					next[wi] - 1, seq);
				next[wi]++;
				if (seq < w[wi].acked)
					want--;
			}
			etcd_events_free(evs, n);
			cr_assert_lt(cl_now_us() - t0, 120000000, "the watch is slow");
		}
		printf("watch across the kill: %ld events, all %ld acknowledged puts in order\n", events,
			total);
		etcd_watch_close(wat);
		etcd_close(wc);
	}

	/* the member comes back on its data and catches up */
	cl_restart_missing();
	{
		etcd_client *one;
		etcd_kv *kv = NULL;
		char k[256];
		int64_t t0 = cl_now_us();
		cr_assert_eq(etcd_open(etcd_endpoint(c, (size_t)leader), &one), 0);
		snprintf(k, sizeof k, "%sw0/%06ld", p, w[0].acked - 1);
		while (cl_now_us() - t0 < 30000000) {
			if (etcd_get(one, k, strlen(k), 0, &kv, NULL) == 0 && kv)
				break;
			usleep(200000);
		}
		cr_assert_not_null(kv, "the restarted member %s does not have %s after 30 s", name, k);
		etcd_kv_free(kv);
		etcd_close(one);
	}
	etcd_close(c);
}
