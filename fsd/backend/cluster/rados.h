/*
 * rados.h -- a small wrapper over librados: the file-data half of the
 * cluster store (issue 28).  Its whole contract is this header.
 *
 * A radosc handle is one connection (librados cluster handle) and one pool
 * (I/O context), made from a ceph.conf, a pool name and a client name
 * ("admin" for client.admin; its keyring is the one ceph.conf names).
 * Objects are named by NUL-terminated strings.  Every call is synchronous
 * and may be made by any number of threads at once on one handle.
 *
 * Errors: 0 (or a byte count) on success, a negative errno otherwise, as
 * librados gives it (-ENOENT: no such object; -ETIMEDOUT: the cluster did
 * not answer within RADOSC_TIMEOUT_S); radosc_errmsg() gives the calling
 * thread's last message, naming the pool and the object.
 *
 * (The prefix is radosc_: librados owns rados_.)
 */
#ifndef TPFS_RADOS_H
#define TPFS_RADOS_H

#include <stddef.h>
#include <stdint.h>

typedef struct radosc radosc;

/* Connection and operation timeout, seconds (client_mount_timeout,
 * rados_osd_op_timeout, rados_mon_op_timeout). */
#define RADOSC_TIMEOUT_S 60

/* ---- connection ---- */

/* Connect to the cluster of conf (a ceph.conf path; NULL: the default
 * search) as client.<client> (NULL: "admin") and open pool. */
int radosc_open(const char *conf, const char *pool, const char *client, radosc **out);
void radosc_close(radosc *r);
const char *radosc_errmsg(void);
const char *radosc_pool(const radosc *r);

/* ---- objects ---- */

/* Replace the object's whole content by buf (creating it). */
int radosc_write_full(radosc *r, const char *oid, const void *buf, size_t len);
/* Write buf at offset off (creating the object, extending it as needed). */
int radosc_write(radosc *r, const char *oid, const void *buf, size_t len, uint64_t off);
/* Read up to len bytes at off: the number read (short at the end), or an error. */
int64_t radosc_read(radosc *r, const char *oid, void *buf, size_t len, uint64_t off);
/* The object's size and mtime (seconds). */
int radosc_stat(radosc *r, const char *oid, uint64_t *size, int64_t *mtime);
int radosc_remove(radosc *r, const char *oid);

/* Every object of the pool whose name starts with prefix (""; all), in no
 * particular order: *names is a malloc'd array of malloc'd strings, freed
 * with radosc_names_free.  For collecting leftovers: a full pool scan. */
int radosc_list(radosc *r, const char *prefix, char ***names, size_t *n);
void radosc_names_free(char **names, size_t n);

#endif
