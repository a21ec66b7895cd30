/*
 * test_rados_failover.c -- kill -9 of one OSD: reads and writes go on (the
 * pool has size 3, min_size 2).  Objects written before the kill are read
 * back during it; new ones are written and read; the longest operation is
 * printed.  The OSD is started again (scripts/cluster up waits for
 * active+clean).  Runs alone.
 */
#include <errno.h>

#include "cluster_util.h"

Test(rados_failover, kill_one_osd, .timeout = 600)
{
	radosc *r = cl_rados();
	char p[128], oid[200], buf[4096], got[4096];
	pid_t pid;
	int64_t t0, max_us = 0;
	int before = 50, during = 0;

	cl_prefix(p, sizeof p, "osdkill");
	for (char *s = p; *s; s++)
		if (*s == '/')
			*s = '.';
	for (int i = 0; i < before; i++) {
		snprintf(oid, sizeof oid, "%sbefore-%03d", p, i);
		memset(buf, 'a' + i % 26, sizeof buf);
		cr_assert_eq(radosc_write_full(r, oid, buf, sizeof buf), 0, "%s", radosc_errmsg());
	}
	pid = cl_pid("osd.1");
	printf("kill -9 of osd.1 (pid %d)\n", (int)pid);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	t0 = cl_now_us();
	while (cl_now_us() - t0 < 20000000) { /* 20 s of writes and reads */
		int64_t s = cl_now_us(), dt;
		int i = during % before;
		snprintf(oid, sizeof oid, "%sduring-%05d", p, during);
		memset(buf, 'A' + during % 26, sizeof buf);
		cr_assert_eq(radosc_write_full(r, oid, buf, sizeof buf), 0,
			"write %d with osd.1 down: %s", during, radosc_errmsg());
		cr_assert_eq(radosc_read(r, oid, got, sizeof got, 0), (int64_t)sizeof got, "%s",
			radosc_errmsg());
		cr_assert(memcmp(buf, got, sizeof buf) == 0, "object %s read back differs", oid);
		snprintf(oid, sizeof oid, "%sbefore-%03d", p, i);
		memset(buf, 'a' + i % 26, sizeof buf);
		cr_assert_eq(radosc_read(r, oid, got, sizeof got, 0), (int64_t)sizeof got,
			"read of %s with osd.1 down: %s", oid, radosc_errmsg());
		cr_assert(memcmp(buf, got, sizeof buf) == 0, "object %s differs", oid);
		dt = cl_now_us() - s;
		if (dt > max_us)
			max_us = dt;
		during++;
	}
	printf("osd kill: %d writes + %d reads of 4 KiB in 20 s with osd.1 down, longest "
	       "write+read+read %.0f ms\n", during, 2 * during, (double)max_us / 1000);
	cr_assert_gt(during, 10);
	cl_restart_missing();
	cr_assert_eq(radosc_read(r, oid, got, sizeof got, 0), (int64_t)sizeof got, "%s", radosc_errmsg());
	{ /* every object written is listed, and goes */
		char **names;
		size_t n;
		cr_assert_eq(radosc_list(r, p, &names, &n), 0, "%s", radosc_errmsg());
		cr_assert_eq(n, (size_t)(before + during), "listed %zu objects, wrote %d", n,
			before + during);
		for (size_t i = 0; i < n; i++)
			cr_assert_eq(radosc_remove(r, names[i]), 0, "%s", radosc_errmsg());
		radosc_names_free(names, n);
	}
	radosc_close(r);
}
