/*
 * etcd.h -- an etcd v3 client: the metadata half of the cluster store
 * (issue 28).  Its whole contract is this header.
 *
 * It speaks etcd's v3 API through the JSON gateway every etcd >= 3.4 member
 * serves on its client port (POST /v3/kv/range, /v3/kv/put,
 * /v3/kv/deleterange, /v3/kv/txn, /v3/lease/grant|keepalive|revoke,
 * /v3/watch), with libcurl and json-c.  Keys and values are bytes of any
 * value and length (base64 on the wire, handled inside).
 *
 * Endpoints: a client is opened on "HOST:PORT[,HOST:PORT...]", optionally
 * as "etcd://HOST:PORT,...[/NAME][?QUERY]" (only the host list is used
 * here).  A request goes to the current endpoint; when that member cannot
 * be reached, times out, or answers that it has no leader or the leader
 * changed, the request is sent again to the next endpoint, round robin,
 * until one answers or ETCD_DEADLINE_MS passes (one attempt may take 2 s
 * for a request under 64 KiB: a follower whose leader died holds a request
 * for etcd's 7 s request timeout).  The longest time a request
 * took that needed such a retry is kept: etcd_max_stall_ms().  A retried
 * put or txn may have been applied by the attempt that got no answer:
 * puts and deletes are idempotent; a txn whose compares then fail may be
 * the caller's own earlier attempt (compare with what it wrote).
 *
 * Threads: one client may be used by any number of threads at once; each
 * request borrows a curl handle from the client's small pool (keep-alive
 * connections are reused across requests).  A watch is used by one thread.
 *
 * Errors: 0 on success or a negative errno; etcd_errmsg() gives the calling
 * thread's last message, naming the endpoint and etcd's own error text:
 *   -EINVAL   a bad argument, or etcd rejected the request
 *   -E2BIG    the request exceeds the cluster's limits (--max-txn-ops,
 *             --max-request-bytes): the message names the setting
 *   -ERANGE   the revision asked for was compacted (or is in the future)
 *   -ENOENT   no such lease (expired or revoked)
 *   -ETIMEDOUT no endpoint answered within the deadline (or a watch had no
 *             event within its timeout)
 *   -EIO      anything else etcd or the transport reported
 *   -ENOMEM   out of memory
 */
#ifndef TPFS_ETCD_H
#define TPFS_ETCD_H

#include <stddef.h>
#include <stdint.h>

typedef struct etcd_client etcd_client;
typedef struct etcd_txn etcd_txn;
typedef struct etcd_watch etcd_watch;

/* How long a request is tried across all endpoints before -ETIMEDOUT. */
#define ETCD_DEADLINE_MS 60000

/* A key-value pair as etcd stores it.  key/value are malloc'd and
 * NUL-terminated (the NUL not counted), so text keys print as strings. */
typedef struct etcd_kv {
	char *key;
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_revision; /* revision of the put that created the key */
	int64_t mod_revision;    /* revision of its last change */
	int64_t version;         /* puts since creation (1 after the first) */
	int64_t lease;           /* 0: none */
} etcd_kv;

/* ---- client ---- */

int etcd_open(const char *endpoints, etcd_client **out);
void etcd_close(etcd_client *c);
/* The calling thread's last error message ("" if none). */
const char *etcd_errmsg(void);
/* The longest time, in ms, a request took that needed a retry (failover). */
int64_t etcd_max_stall_ms(etcd_client *c);
/* The number of endpoints and the one requests go to now ("host:port"). */
size_t etcd_endpoint_count(etcd_client *c);
const char *etcd_endpoint(etcd_client *c, size_t i);

/* ---- keys ---- */

/* The range_end that makes [key, end) every key starting with prefix:
 * writes it into end (room for plen bytes) and returns its length; a prefix
 * of only 0xff bytes (or empty) gives the one byte "\0": every key >= key. */
size_t etcd_prefix_end(const void *prefix, size_t plen, char *end);

/* Put key = value (lease 0: none).  *rev_out (may be NULL): the revision. */
int etcd_put(etcd_client *c, const void *key, size_t klen, const void *val, size_t vlen,
	int64_t lease, int64_t *rev_out);

/* Get one key at revision rev (0: the latest).  *out is NULL when the key is
 * absent; free it with etcd_kv_free.  *rev_out (may be NULL): the store's
 * revision the read saw. */
int etcd_get(etcd_client *c, const void *key, size_t klen, int64_t rev, etcd_kv **out,
	int64_t *rev_out);

/* The keys in [key, end) (end NULL: key alone; "\0" of length 1: every key
 * >= key), in key order, at most limit of them (0: no limit), at revision
 * rev (0: the latest).  *more is set when the limit cut the result. */
typedef struct etcd_range {
	etcd_kv *kvs;
	size_t n;
	int more;
	int64_t count;    /* keys in the whole range */
	int64_t revision; /* the revision the read saw */
} etcd_range;
int etcd_range_get(etcd_client *c, const void *key, size_t klen, const void *end, size_t elen,
	int64_t limit, int64_t rev, etcd_range **out);
void etcd_range_free(etcd_range *r);
/* The last key of [key, end) at revision rev (0: the latest): *out NULL
 * when the range is empty; *rev_out (may be NULL) the revision read. */
int etcd_range_last(etcd_client *c, const void *key, size_t klen, const void *end, size_t elen,
	int64_t rev, etcd_kv **out, int64_t *rev_out);
/* The answering member's database size in bytes and the store's revision
 * (either may be NULL). */
int etcd_status(etcd_client *c, int64_t *db_size, int64_t *revision);
void etcd_kv_free(etcd_kv *kv);

/* Delete [key, end) (end NULL: key alone).  *deleted (may be NULL): how many. */
int etcd_delete(etcd_client *c, const void *key, size_t klen, const void *end, size_t elen,
	int64_t *deleted, int64_t *rev_out);

/* ---- transactions ---- */

/* What a compare looks at, and how.  The absence of a key: ETCD_VERSION
 * ETCD_EQ 0 (or ETCD_CREATE ETCD_EQ 0). */
typedef enum { ETCD_MOD, ETCD_VERSION, ETCD_CREATE } etcd_target;
typedef enum { ETCD_EQ, ETCD_NE, ETCD_LT, ETCD_GT } etcd_result;

/* A transaction: compares, and the puts and deletes applied if every
 * compare holds (all of it atomically, at one new revision).  Building
 * never talks to etcd; the builders fail only with -ENOMEM or -EINVAL. */
int etcd_txn_new(etcd_txn **out);
void etcd_txn_free(etcd_txn *t);
int etcd_txn_compare(etcd_txn *t, const void *key, size_t klen, etcd_target target, etcd_result op,
	int64_t value);
int etcd_txn_put(etcd_txn *t, const void *key, size_t klen, const void *val, size_t vlen,
	int64_t lease);
int etcd_txn_delete(etcd_txn *t, const void *key, size_t klen, const void *end, size_t elen);
/* Operations (puts and deletes) in t so far; compares in t so far. */
/* A compare over every key of [key, end) (etcd >= 3.3): holds when it
 * holds for each key present there (a range with no key: it holds). */
int etcd_txn_compare_range(etcd_txn *t, const void *key, size_t klen, const void *end, size_t elen,
	etcd_target target, etcd_result op, int64_t value);
size_t etcd_txn_ops(const etcd_txn *t);
size_t etcd_txn_compares(const etcd_txn *t);
/* Send t.  *succeeded: 1 if the compares held and the operations were
 * applied, 0 if not (not an error).  *rev_out (may be NULL): the revision. */
int etcd_txn_commit(etcd_client *c, etcd_txn *t, int *succeeded, int64_t *rev_out);

/* ---- leases ---- */

int etcd_lease_grant(etcd_client *c, int64_t ttl_s, int64_t *id_out);
/* Refresh lease id; *ttl_out (may be NULL): its TTL now.  -ENOENT if gone. */
int etcd_lease_keepalive(etcd_client *c, int64_t id, int64_t *ttl_out);
/* Revoke it: its keys are deleted. */
int etcd_lease_revoke(etcd_client *c, int64_t id);

/* ---- watches ---- */

typedef enum { ETCD_EV_PUT, ETCD_EV_DELETE } etcd_ev_type;
typedef struct etcd_event {
	etcd_ev_type type;
	etcd_kv kv; /* for a delete: the key and mod_revision (its revision) */
} etcd_event;

/* Watch [key, end) (end NULL: key alone) from revision start_rev (0: from
 * now).  Events come in revision order; a watch whose stream breaks is
 * opened again on the next endpoint from the revision after the last
 * event it gave. */
int etcd_watch_open(etcd_client *c, const void *key, size_t klen, const void *end, size_t elen,
	int64_t start_rev, etcd_watch **out);
/* The next batch of events (all of one revision or more), waiting up to
 * timeout_ms: -ETIMEDOUT when none came.  Free with etcd_events_free. */
int etcd_watch_next(etcd_watch *w, int timeout_ms, etcd_event **evs, size_t *n);
void etcd_events_free(etcd_event *evs, size_t n);
void etcd_watch_close(etcd_watch *w);

#endif
