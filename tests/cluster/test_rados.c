/*
 * test_rados.c -- the RADOS wrapper (fsd/backend/cluster/rados.h) against
 * the real Ceph cluster of scripts/cluster: small and 4 MiB objects,
 * writes at offsets, stat, remove, listing by prefix, errors that name the
 * pool and the object.
 */
#include <errno.h>

#include "cluster_util.h"

static void oid_prefix(char *buf, size_t sz, const char *tag)
{
	cl_prefix(buf, sz, tag);
	for (char *s = buf; *s; s++) /* object names: no slashes needed */
		if (*s == '/')
			*s = '.';
}

Test(rados, write_read_stat_remove, .timeout = 120)
{
	radosc *r = cl_rados();
	char p[128], oid[200], buf[64];
	uint64_t size;
	int64_t mtime;

	oid_prefix(p, sizeof p, "small");
	snprintf(oid, sizeof oid, "%sobj", p);
	cr_assert_eq(radosc_stat(r, oid, &size, NULL), -ENOENT);
	cr_assert(strstr(radosc_errmsg(), oid) && strstr(radosc_errmsg(), radosc_pool(r)),
		"the message names neither pool nor object: %s", radosc_errmsg());
	cr_assert_eq(radosc_write_full(r, oid, "hello, rados", 12), 0, "%s", radosc_errmsg());
	cr_assert_eq(radosc_stat(r, oid, &size, &mtime), 0, "%s", radosc_errmsg());
	cr_assert_eq(size, 12);
	cr_assert_gt(mtime, 0);
	cr_assert_eq(radosc_read(r, oid, buf, sizeof buf, 0), 12, "%s", radosc_errmsg());
	cr_assert(memcmp(buf, "hello, rados", 12) == 0);
	/* write_full replaces: shorter content, shorter object */
	cr_assert_eq(radosc_write_full(r, oid, "bye", 3), 0, "%s", radosc_errmsg());
	cr_assert_eq(radosc_read(r, oid, buf, sizeof buf, 0), 3);
	cr_assert(memcmp(buf, "bye", 3) == 0);
	/* write at an offset past the end: a hole of zeros */
	cr_assert_eq(radosc_write(r, oid, "XY", 2, 10), 0, "%s", radosc_errmsg());
	cr_assert_eq(radosc_stat(r, oid, &size, NULL), 0);
	cr_assert_eq(size, 12);
	cr_assert_eq(radosc_read(r, oid, buf, sizeof buf, 0), 12);
	cr_assert(memcmp(buf, "bye\0\0\0\0\0\0\0XY", 12) == 0, "hole or offset write wrong");
	cr_assert_eq(radosc_read(r, oid, buf, 4, 9), 3, "short read at the end");
	cr_assert_eq(radosc_remove(r, oid), 0, "%s", radosc_errmsg());
	cr_assert_eq(radosc_stat(r, oid, NULL, NULL), -ENOENT);
	cr_assert_eq(radosc_read(r, oid, buf, sizeof buf, 0), -ENOENT);
	cr_assert_eq(radosc_remove(r, oid), -ENOENT);
	radosc_close(r);
}

Test(rados, object_of_4_mib, .timeout = 120)
{
	radosc *r = cl_rados();
	char p[128], oid[200];
	size_t len = 4u << 20;
	unsigned char *a = malloc(len), *b = malloc(len);
	uint64_t size;
	int64_t t0;

	oid_prefix(p, sizeof p, "big");
	snprintf(oid, sizeof oid, "%sobj", p);
	srand(4);
	for (size_t i = 0; i < len; i++)
		a[i] = (unsigned char)rand();
	t0 = cl_now_us();
	cr_assert_eq(radosc_write_full(r, oid, a, len), 0, "%s", radosc_errmsg());
	printf("rados: 4 MiB write_full in %.1f ms\n", (double)(cl_now_us() - t0) / 1000);
	cr_assert_eq(radosc_stat(r, oid, &size, NULL), 0);
	cr_assert_eq(size, len);
	t0 = cl_now_us();
	cr_assert_eq(radosc_read(r, oid, b, len, 0), (int64_t)len, "%s", radosc_errmsg());
	printf("rados: 4 MiB read in %.1f ms\n", (double)(cl_now_us() - t0) / 1000);
	cr_assert(memcmp(a, b, len) == 0, "4 MiB object read back differs");
	/* a 4 KiB block rewritten in the middle */
	memset(a + 1000000, 0xab, 4096);
	cr_assert_eq(radosc_write(r, oid, a + 1000000, 4096, 1000000), 0, "%s", radosc_errmsg());
	cr_assert_eq(radosc_read(r, oid, b, len, 0), (int64_t)len);
	cr_assert(memcmp(a, b, len) == 0, "after a 4 KiB write at 1000000 the object differs");
	cr_assert_eq(radosc_remove(r, oid), 0, "%s", radosc_errmsg());
	free(a);
	free(b);
	radosc_close(r);
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

Test(rados, list_by_prefix, .timeout = 180)
{
	radosc *r = cl_rados();
	char p[128], q[128], oid[200];
	char **names;
	size_t n;

	oid_prefix(p, sizeof p, "list");
	oid_prefix(q, sizeof q, "listother");
	for (int i = 0; i < 20; i++) {
		snprintf(oid, sizeof oid, "%s%02d", p, i);
		cr_assert_eq(radosc_write_full(r, oid, oid, strlen(oid)), 0, "%s", radosc_errmsg());
	}
	for (int i = 0; i < 5; i++) {
		snprintf(oid, sizeof oid, "%s%02d", q, i);
		cr_assert_eq(radosc_write_full(r, oid, oid, strlen(oid)), 0, "%s", radosc_errmsg());
	}
	cr_assert_eq(radosc_list(r, p, &names, &n), 0, "%s", radosc_errmsg());
	cr_assert_eq(n, 20, "listing prefix %s found %zu objects, want 20", p, n);
	qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; i < n; i++) {
		snprintf(oid, sizeof oid, "%s%02zu", p, i);
		cr_assert_str_eq(names[i], oid);
	}
	radosc_names_free(names, n);
	for (int i = 0; i < 20; i++) {
		snprintf(oid, sizeof oid, "%s%02d", p, i);
		cr_assert_eq(radosc_remove(r, oid), 0, "%s", radosc_errmsg());
	}
	for (int i = 0; i < 5; i++) {
		snprintf(oid, sizeof oid, "%s%02d", q, i);
		cr_assert_eq(radosc_remove(r, oid), 0, "%s", radosc_errmsg());
	}
	cr_assert_eq(radosc_list(r, p, &names, &n), 0, "%s", radosc_errmsg());
	cr_assert_eq(n, 0, "%zu objects left after removing them all", n);
	radosc_names_free(names, n);
	radosc_close(r);
}

Test(rados, bad_pool_named, .timeout = 120)
{
	radosc *r;
	int rc = radosc_open(cl_env("TPFS_CEPH_CONF"), "no-such-pool-t28", NULL, &r);
	cr_assert_eq(rc, -ENOENT, "opening a missing pool: %d %s", rc, radosc_errmsg());
	cr_assert(strstr(radosc_errmsg(), "no-such-pool-t28"), "message: %s", radosc_errmsg());
}
