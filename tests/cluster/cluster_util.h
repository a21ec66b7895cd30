/*
 * cluster_util.h -- what the cluster tests share: the cluster's settings
 * from the environment `scripts/cluster up` prints, checked loudly (an
 * unset variable or a cluster that does not answer fails the test: these
 * tests never skip), run names that do not collide, and the daemons' pids.
 */
#ifndef TPFS_CLUSTER_UTIL_H
#define TPFS_CLUSTER_UTIL_H

#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"
#include "rados.h"

static inline const char *cl_env(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		cr_assert_fail("%s is not set: start the test cluster first, "
			       "eval \"$(scripts/cluster up)\" (scripts/test --suite cluster does it)",
			name);
	return v;
}

static inline int64_t cl_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A prefix no other run or test uses: "/t28/<tag>/<pid>-<usec>/". */
static inline void cl_prefix(char *buf, size_t sz, const char *tag)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(buf, sz, "/t28/%s/%d-%lld/", tag, (int)getpid(),
		(long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

/* An etcd client on $TPFS_CLUSTER that has answered one request. */
static inline etcd_client *cl_etcd(void)
{
	etcd_client *c;
	etcd_range *r;
	int rc = etcd_open(cl_env("TPFS_CLUSTER"), &c);
	cr_assert_eq(rc, 0, "etcd_open(%s): %s", getenv("TPFS_CLUSTER"), etcd_errmsg());
	rc = etcd_range_get(c, "/t28/ping", 9, NULL, 0, 0, 0, &r);
	cr_assert_eq(rc, 0, "the etcd cluster %s does not answer (scripts/cluster status): %s",
		getenv("TPFS_CLUSTER"), etcd_errmsg());
	etcd_range_free(r);
	return c;
}

/* A RADOS handle on $TPFS_CEPH_CONF / $TPFS_RADOS_POOL / $TPFS_RADOS_CLIENT. */
static inline radosc *cl_rados(void)
{
	radosc *r;
	int rc = radosc_open(cl_env("TPFS_CEPH_CONF"), cl_env("TPFS_RADOS_POOL"),
		getenv("TPFS_RADOS_CLIENT"), &r);
	cr_assert_eq(rc, 0, "the Ceph cluster does not answer (scripts/cluster status): %s",
		radosc_errmsg());
	return r;
}

/* The pid in $TPFS_CLUSTER_DIR/run/NAME.pid (asserted alive). */
static inline pid_t cl_pid(const char *name)
{
	char path[4096];
	long pid = 0;
	FILE *f;
	snprintf(path, sizeof path, "%s/run/%s.pid", cl_env("TPFS_CLUSTER_DIR"), name);
	f = fopen(path, "r");
	cr_assert(f, "no pid file %s", path);
	cr_assert_eq(fscanf(f, "%ld", &pid), 1, "bad pid file %s", path);
	fclose(f);
	cr_assert(pid > 1 && kill((pid_t)pid, 0) == 0, "%s (pid %ld) does not run", name, pid);
	return (pid_t)pid;
}

/* Start again whatever of the cluster is not running, and wait for health. */
static inline void cl_restart_missing(void)
{
	char cmd[8192];
	int st;
	snprintf(cmd, sizeof cmd, "'%s' up --dir '%s' >/dev/null", cl_env("TPFS_CLUSTER_SCRIPT"),
		cl_env("TPFS_CLUSTER_DIR"));
	st = system(cmd);
	cr_assert_eq(st, 0, "'%s' failed (status %d)", cmd, st);
}

#endif
