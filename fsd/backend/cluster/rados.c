/*
 * rados.c -- the librados wrapper of rados.h.
 *
 * Design.  One rados_t and one rados_ioctx_t per handle; librados makes
 * both safe to share between threads.  Timeouts are set before connecting
 * so that a dead cluster gives -ETIMEDOUT instead of a hang.  Every error
 * is turned into a message naming the pool and object.
 *
 * RA1  A handle exists only connected with its pool open: radosc_open
 *     returns one or nothing.
 */
#include "rados.h"

#include <errno.h>
#include <rados/librados.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct radosc {
	rados_t cluster;   /* immutable after open (RA1) */
	rados_ioctx_t io;  /* immutable after open (RA1) */
	char *pool;
};

static _Thread_local char errbuf[1024];

const char *radosc_errmsg(void)
{
	return errbuf;
}

static int fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int rc, const char *fmt, ...)
{
	va_list ap;
	size_t n;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof errbuf, fmt, ap);
	va_end(ap);
	n = strlen(errbuf);
	snprintf(errbuf + n, sizeof errbuf - n, ": %s", strerror(-rc));
	return rc;
}

int radosc_open(const char *conf, const char *pool, const char *client, radosc **out)
{
	radosc *r;
	char t[16];
	int rc;

	*out = NULL;
	if (!pool || !*pool)
		return fail(-EINVAL, "rados: no pool named");
	if (!(r = calloc(1, sizeof *r)) || !(r->pool = strdup(pool))) {
		free(r);
		return fail(-ENOMEM, "rados: pool %s", pool);
	}
	if ((rc = rados_create(&r->cluster, client ? client : "admin")) < 0) {
		fail(rc, "rados: client.%s", client ? client : "admin");
		goto err_free;
	}
	if ((rc = rados_conf_read_file(r->cluster, conf)) < 0) {
		fail(rc, "rados: reading %s", conf ? conf : "the default ceph.conf");
		goto err_shut;
	}
	snprintf(t, sizeof t, "%d", RADOSC_TIMEOUT_S);
	if ((rc = rados_conf_set(r->cluster, "client_mount_timeout", t)) < 0 ||
		(rc = rados_conf_set(r->cluster, "rados_osd_op_timeout", t)) < 0 ||
		(rc = rados_conf_set(r->cluster, "rados_mon_op_timeout", t)) < 0) {
		fail(rc, "rados: setting timeouts");
		goto err_shut;
	}
	if ((rc = rados_connect(r->cluster)) < 0) {
		fail(rc, "rados: connecting as client.%s with %s", client ? client : "admin",
			conf ? conf : "the default ceph.conf");
		goto err_shut;
	}
	if ((rc = rados_ioctx_create(r->cluster, pool, &r->io)) < 0) {
		fail(rc, "rados: opening pool %s", pool);
		goto err_shut;
	}
	*out = r;
	return 0;
err_shut:
	rados_shutdown(r->cluster);
err_free:
	free(r->pool);
	free(r);
	return rc;
}

void radosc_close(radosc *r)
{
	if (!r)
		return;
	rados_ioctx_destroy(r->io);
	rados_shutdown(r->cluster);
	free(r->pool);
	free(r);
}

const char *radosc_pool(const radosc *r)
{
	return r->pool;
}

int radosc_write_full(radosc *r, const char *oid, const void *buf, size_t len)
{
	int rc = rados_write_full(r->io, oid, buf, len);
	return rc < 0 ? fail(rc, "rados: write_full of %zu bytes to %s/%s", len, r->pool, oid) : 0;
}

int radosc_write(radosc *r, const char *oid, const void *buf, size_t len, uint64_t off)
{
	int rc = rados_write(r->io, oid, buf, len, off);
	return rc < 0 ? fail(rc, "rados: write of %zu bytes at %llu to %s/%s", len,
			(unsigned long long)off, r->pool, oid)
		      : 0;
}

int64_t radosc_read(radosc *r, const char *oid, void *buf, size_t len, uint64_t off)
{
	int rc = rados_read(r->io, oid, buf, len, off);
	if (rc < 0)
		return fail(rc, "rados: read of %zu bytes at %llu from %s/%s", len,
			(unsigned long long)off, r->pool, oid);
	return rc;
}

int radosc_stat(radosc *r, const char *oid, uint64_t *size, int64_t *mtime)
{
	uint64_t sz = 0;
	time_t mt = 0;
	int rc = rados_stat(r->io, oid, &sz, &mt);
	if (rc < 0)
		return fail(rc, "rados: stat of %s/%s", r->pool, oid);
	if (size)
		*size = sz;
	if (mtime)
		*mtime = mt;
	return 0;
}

int radosc_remove(radosc *r, const char *oid)
{
	int rc = rados_remove(r->io, oid);
	return rc < 0 ? fail(rc, "rados: remove of %s/%s", r->pool, oid) : 0;
}

int radosc_list(radosc *r, const char *prefix, char ***names, size_t *n)
{
	rados_list_ctx_t ctx;
	const char *entry;
	char **v = NULL;
	size_t cnt = 0, cap = 0, plen = prefix ? strlen(prefix) : 0;
	int rc;

	*names = NULL;
	*n = 0;
	if ((rc = rados_nobjects_list_open(r->io, &ctx)) < 0)
		return fail(rc, "rados: listing pool %s", r->pool);
	while ((rc = rados_nobjects_list_next(ctx, &entry, NULL, NULL)) == 0) {
		if (plen && strncmp(entry, prefix, plen) != 0)
			continue;
		if (cnt == cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof *v);
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		if (!(v[cnt] = strdup(entry))) {
			rc = -ENOMEM;
			break;
		}
		cnt++;
	}
	rados_nobjects_list_close(ctx);
	if (rc != -ENOENT) { /* -ENOENT: the end of the list */
		radosc_names_free(v, cnt);
		return fail(rc, "rados: listing pool %s (prefix '%s')", r->pool, prefix ? prefix : "");
	}
	*names = v;
	*n = cnt;
	return 0;
}

void radosc_names_free(char **names, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}
