/*
 * test_etcd.c -- the etcd client (fsd/backend/cluster/etcd.h) against the
 * real 3-member cluster of scripts/cluster: keys, binary keys, ranges with
 * a limit, transactions (compares that hold and fail, a lost-update race,
 * 10,000 puts in one, a txn over the limit), reads at a past revision,
 * leases, watches, failover past a dead endpoint.
 */
#include <errno.h>
#include <pthread.h>

#include "cluster_util.h"

static void put_s(etcd_client *c, const char *k, const char *v, int64_t *rev)
{
	int rc = etcd_put(c, k, strlen(k), v, strlen(v), 0, rev);
	cr_assert_eq(rc, 0, "put %s: %s", k, etcd_errmsg());
}

Test(etcd, put_get_delete, .timeout = 60)
{
	etcd_client *c = cl_etcd();
	char p[128], k[160];
	etcd_kv *kv;
	int64_t r1, r2, r3, n;

	cl_prefix(p, sizeof p, "basic");
	snprintf(k, sizeof k, "%skey", p);
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0, "%s", etcd_errmsg());
	cr_assert_null(kv, "a fresh key exists");
	put_s(c, k, "one", &r1);
	put_s(c, k, "two", &r2);
	cr_assert_gt(r2, r1);
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, &r3), 0, "%s", etcd_errmsg());
	cr_assert_not_null(kv);
	cr_assert_eq(kv->value_len, 3);
	cr_assert_str_eq(kv->value, "two");
	cr_assert_str_eq(kv->key, k);
	cr_assert_eq(kv->version, 2);
	cr_assert_eq(kv->create_revision, r1);
	cr_assert_eq(kv->mod_revision, r2);
	cr_assert_geq(r3, r2);
	etcd_kv_free(kv);
	cr_assert_eq(etcd_delete(c, k, strlen(k), NULL, 0, &n, NULL), 0, "%s", etcd_errmsg());
	cr_assert_eq(n, 1);
	cr_assert_eq(etcd_delete(c, k, strlen(k), NULL, 0, &n, NULL), 0, "%s", etcd_errmsg());
	cr_assert_eq(n, 0, "deleting an absent key deleted %lld", (long long)n);
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
	cr_assert_null(kv, "a deleted key is still there");
	/* an empty value is a value, not an absence */
	cr_assert_eq(etcd_put(c, k, strlen(k), "", 0, 0, NULL), 0, "%s", etcd_errmsg());
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
	cr_assert_not_null(kv);
	cr_assert_eq(kv->value_len, 0);
	etcd_kv_free(kv);
	etcd_close(c);
}

Test(etcd, binary_keys_and_values, .timeout = 60)
{
	etcd_client *c = cl_etcd();
	char p[128], key[512], end[512];
	size_t klen, vlen = 256 * 1024, i, elen;
	unsigned char *val = malloc(vlen);
	etcd_kv *kv;
	etcd_range *r;

	cl_prefix(p, sizeof p, "binary");
	klen = strlen(p);
	memcpy(key, p, klen);
	for (i = 0; i < 256; i++) /* every byte value, NULs and 0xff included */
		key[klen++] = (char)i;
	srand(28);
	for (i = 0; i < vlen; i++)
		val[i] = (unsigned char)(i % 7 == 0 ? 0 : rand());
	cr_assert_eq(etcd_put(c, key, klen, val, vlen, 0, NULL), 0, "%s", etcd_errmsg());
	cr_assert_eq(etcd_get(c, key, klen, 0, &kv, NULL), 0, "%s", etcd_errmsg());
	cr_assert_not_null(kv);
	cr_assert_eq(kv->key_len, klen);
	cr_assert(memcmp(kv->key, key, klen) == 0, "binary key changed on the way");
	cr_assert_eq(kv->value_len, vlen);
	cr_assert(memcmp(kv->value, val, vlen) == 0, "binary value changed on the way");
	etcd_kv_free(kv);
	/* a key that is a prefix of it differs: not found */
	cr_assert_eq(etcd_get(c, key, klen - 1, 0, &kv, NULL), 0);
	cr_assert_null(kv);
	/* a prefix ending in 0xff: its range end carries over */
	elen = etcd_prefix_end(key, klen, end);
	cr_assert_eq(elen, klen - 1);
	cr_assert_eq((unsigned char)end[elen - 1], 0xff);
	elen = etcd_prefix_end(p, strlen(p), end);
	cr_assert_eq(etcd_range_get(c, p, strlen(p), end, elen, 0, 0, &r), 0, "%s", etcd_errmsg());
	cr_assert_eq(r->n, 1);
	cr_assert_eq(r->kvs[0].key_len, klen);
	etcd_range_free(r);
	free(val);
	etcd_close(c);
}

Test(etcd, prefix_range_with_limit, .timeout = 60)
{
	etcd_client *c = cl_etcd();
	char p[128], k[200], end[200], other[200];
	size_t elen, i, seen = 0;
	etcd_range *r;

	cl_prefix(p, sizeof p, "range");
	for (i = 0; i < 50; i++) {
		snprintf(k, sizeof k, "%s%03zu", p, i);
		put_s(c, k, k, NULL);
	}
	/* neighbours that must stay out: the prefix without its '/', and past it */
	snprintf(other, sizeof other, "%.*s", (int)strlen(p) - 1, p);
	put_s(c, other, "out", NULL);
	snprintf(other, sizeof other, "%.*s0", (int)strlen(p) - 1, p);
	put_s(c, other, "out", NULL);
	elen = etcd_prefix_end(p, strlen(p), end);
	cr_assert_eq(etcd_range_get(c, p, strlen(p), end, elen, 10, 0, &r), 0, "%s", etcd_errmsg());
	cr_assert_eq(r->n, 10);
	cr_assert(r->more, "a limited range does not say there is more");
	cr_assert_eq(r->count, 50, "count %lld, want 50", (long long)r->count);
	for (i = 0; i < 10; i++) {
		snprintf(k, sizeof k, "%s%03zu", p, i);
		cr_assert_str_eq(r->kvs[i].key, k, "range out of order");
	}
	/* page through from after the last key */
	while (r->n > 0) {
		char from[256];
		size_t flen = r->kvs[r->n - 1].key_len;
		int more = r->more;
		memcpy(from, r->kvs[r->n - 1].key, flen);
		from[flen++] = '\0';
		seen += r->n;
		etcd_range_free(r);
		if (!more) {
			r = NULL;
			break;
		}
		cr_assert_eq(etcd_range_get(c, from, flen, end, elen, 10, 0, &r), 0, "%s", etcd_errmsg());
	}
	etcd_range_free(r);
	cr_assert_eq(seen, 50, "paging saw %zu keys", seen);
	etcd_close(c);
}

Test(etcd, txn_compares, .timeout = 60)
{
	etcd_client *c = cl_etcd();
	char p[128], k[200];
	etcd_txn *t;
	int ok;
	int64_t rev, rev2;
	etcd_kv *kv;

	cl_prefix(p, sizeof p, "txn");
	snprintf(k, sizeof k, "%slock", p);
	/* create-if-absent holds once */
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(etcd_txn_new(&t), 0);
		cr_assert_eq(etcd_txn_compare(t, k, strlen(k), ETCD_VERSION, ETCD_EQ, 0), 0);
		cr_assert_eq(etcd_txn_put(t, k, strlen(k), "mine", 4, 0), 0);
		cr_assert_eq(etcd_txn_commit(c, t, &ok, &rev), 0, "%s", etcd_errmsg());
		cr_assert_eq(ok, round == 0, "create-if-absent round %d: succeeded=%d", round, ok);
		etcd_txn_free(t);
	}
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
	cr_assert_not_null(kv);
	rev = kv->mod_revision;
	etcd_kv_free(kv);
	/* mod_revision: the current one holds, a stale one fails; nothing applied */
	cr_assert_eq(etcd_txn_new(&t), 0);
	cr_assert_eq(etcd_txn_compare(t, k, strlen(k), ETCD_MOD, ETCD_EQ, rev), 0);
	cr_assert_eq(etcd_txn_compare(t, k, strlen(k), ETCD_CREATE, ETCD_EQ, rev), 0);
	cr_assert_eq(etcd_txn_put(t, k, strlen(k), "v2", 2, 0), 0);
	snprintf(k + strlen(k), sizeof k - strlen(k), "-side");
	cr_assert_eq(etcd_txn_put(t, k, strlen(k), "side", 4, 0), 0);
	k[strlen(k) - 5] = '\0';
	cr_assert_eq(etcd_txn_ops(t), 2);
	cr_assert_eq(etcd_txn_compares(t), 2);
	cr_assert_eq(etcd_txn_commit(c, t, &ok, &rev2), 0, "%s", etcd_errmsg());
	cr_assert(ok, "compares on the current revisions failed");
	cr_assert_gt(rev2, rev);
	cr_assert_eq(etcd_txn_commit(c, t, &ok, NULL), 0, "%s", etcd_errmsg());
	cr_assert(!ok, "a compare on a stale mod_revision held");
	etcd_txn_free(t);
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
	cr_assert_eq(kv->mod_revision, rev2, "the failed txn changed the key");
	cr_assert_str_eq(kv->value, "v2");
	etcd_kv_free(kv);
	/* GREATER / LESS / NOT_EQUAL, and a delete in a txn */
	cr_assert_eq(etcd_txn_new(&t), 0);
	cr_assert_eq(etcd_txn_compare(t, k, strlen(k), ETCD_VERSION, ETCD_GT, 1), 0);
	cr_assert_eq(etcd_txn_compare(t, k, strlen(k), ETCD_MOD, ETCD_LT, rev2 + 1), 0);
	cr_assert_eq(etcd_txn_compare(t, k, strlen(k), ETCD_MOD, ETCD_NE, rev), 0);
	cr_assert_eq(etcd_txn_delete(t, k, strlen(k), NULL, 0), 0);
	cr_assert_eq(etcd_txn_commit(c, t, &ok, NULL), 0, "%s", etcd_errmsg());
	cr_assert(ok);
	etcd_txn_free(t);
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
	cr_assert_null(kv, "the txn's delete was not applied");
	etcd_close(c);
}

/* Two threads increment one counter by read + compare-and-put on its
 * mod_revision: no increment may be lost. */
struct race {
	etcd_client *c;
	const char *key;
	int incs;
	int retries;
	int err;
};

static void *racer(void *arg)
{
	struct race *r = arg;
	for (int i = 0; i < r->incs; i++) {
		for (;;) {
			etcd_kv *kv;
			etcd_txn *t;
			char v[32];
			long n = 0;
			int ok, rc;
			int64_t mod = 0;
			if ((rc = etcd_get(r->c, r->key, strlen(r->key), 0, &kv, NULL)) != 0) {
				r->err = rc;
				return NULL;
			}
			if (kv) {
				n = atol(kv->value);
				mod = kv->mod_revision;
				etcd_kv_free(kv);
			}
			snprintf(v, sizeof v, "%ld", n + 1);
			etcd_txn_new(&t);
			etcd_txn_compare(t, r->key, strlen(r->key), ETCD_MOD, ETCD_EQ, mod);
			etcd_txn_put(t, r->key, strlen(r->key), v, strlen(v), 0);
			rc = etcd_txn_commit(r->c, t, &ok, NULL);
			etcd_txn_free(t);
			if (rc != 0) {
				r->err = rc;
				return NULL;
			}
			if (ok)
				break;
			r->retries++;
		}
	}
	return NULL;
}

Test(etcd, lost_update_race, .timeout = 180)
{
	etcd_client *c = cl_etcd();
	char p[128], k[200];
	struct race r[2];
	pthread_t th[2];
	etcd_kv *kv;

	cl_prefix(p, sizeof p, "race");
	snprintf(k, sizeof k, "%scounter", p);
	for (int i = 0; i < 2; i++) {
		r[i] = (struct race){.c = c, .key = k, .incs = 150};
		pthread_create(&th[i], NULL, racer, &r[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(r[0].err, 0, "thread 0: %d", r[0].err);
	cr_assert_eq(r[1].err, 0, "thread 1: %d", r[1].err);
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
	cr_assert_not_null(kv);
	printf("lost_update_race: 300 increments, %d + %d compare failures retried\n", r[0].retries,
		r[1].retries);
	cr_assert_eq(atol(kv->value), 300, "counter %s after 300 increments: updates lost", kv->value);
	cr_assert_eq(kv->version, 300);
	etcd_kv_free(kv);
	etcd_close(c);
}

Test(etcd, txn_of_10000_puts, .timeout = 300)
{
	etcd_client *c = cl_etcd();
	char p[128], k[200], v[512], end[200];
	etcd_txn *t;
	etcd_range *r;
	int ok, rc;
	size_t elen;
	int64_t t0;

	cl_prefix(p, sizeof p, "big");
	cr_assert_eq(etcd_txn_new(&t), 0);
	for (int i = 0; i < 10000; i++) {
		snprintf(k, sizeof k, "%sfile-%05d", p, i);
		/* 400 bytes: the request is ~10 MiB, over etcd's default 1.5 MiB */
		snprintf(v, sizeof v, "inode %05d: %0390d", i, i);
		cr_assert_eq(etcd_txn_compare(t, k, strlen(k), ETCD_VERSION, ETCD_EQ, 0), 0);
		cr_assert_eq(etcd_txn_put(t, k, strlen(k), v, strlen(v), 0), 0);
	}
	t0 = cl_now_us();
	rc = etcd_txn_commit(c, t, &ok, NULL);
	cr_assert_eq(rc, 0, "a txn of 10,000 compares + 10,000 puts: %s", etcd_errmsg());
	cr_assert(ok);
	printf("txn_of_10000_puts: 10,000 compares + 10,000 puts of 400 bytes committed in %.0f ms\n",
		(double)(cl_now_us() - t0) / 1000);
	etcd_txn_free(t);
	elen = etcd_prefix_end(p, strlen(p), end);
	cr_assert_eq(etcd_range_get(c, p, strlen(p), end, elen, 1, 0, &r), 0, "%s", etcd_errmsg());
	cr_assert_eq(r->count, 10000, "count %lld after the big txn", (long long)r->count);
	etcd_range_free(r);
	/* all of it in one answer of ~8 MiB (over gRPC's default 4 MiB) */
	cr_assert_eq(etcd_range_get(c, p, strlen(p), end, elen, 0, 0, &r), 0, "%s", etcd_errmsg());
	cr_assert_eq(r->n, 10000);
	cr_assert(!r->more);
	snprintf(k, sizeof k, "%sfile-%05d", p, 9999);
	cr_assert_str_eq(r->kvs[9999].key, k);
	snprintf(v, sizeof v, "inode %05d: %0390d", 9999, 9999);
	cr_assert_str_eq(r->kvs[9999].value, v);
	etcd_range_free(r);

	/* past the limit (65,536 ops): refused as a whole, with the setting named */
	cl_prefix(p, sizeof p, "toobig");
	cr_assert_eq(etcd_txn_new(&t), 0);
	for (int i = 0; i < 70000; i++) {
		snprintf(k, sizeof k, "%s%05d", p, i);
		cr_assert_eq(etcd_txn_put(t, k, strlen(k), "x", 1, 0), 0);
	}
	rc = etcd_txn_commit(c, t, &ok, NULL);
	etcd_txn_free(t);
	cr_assert_eq(rc, -E2BIG, "a txn of 70,000 puts: rc %d (%s)", rc, etcd_errmsg());
	cr_assert(strstr(etcd_errmsg(), "--max-txn-ops"), "message: %s", etcd_errmsg());
	printf("txn over the limit: %s\n", etcd_errmsg());
	elen = etcd_prefix_end(p, strlen(p), end);
	cr_assert_eq(etcd_range_get(c, p, strlen(p), end, elen, 1, 0, &r), 0, "%s", etcd_errmsg());
	cr_assert_eq(r->count, 0, "a refused txn applied %lld puts", (long long)r->count);
	etcd_range_free(r);
	etcd_close(c);
}

Test(etcd, read_at_past_revision, .timeout = 60)
{
	etcd_client *c = cl_etcd();
	char p[128], k[200], end[200];
	int64_t r1, r2;
	etcd_kv *kv;
	etcd_range *r;
	size_t elen;

	cl_prefix(p, sizeof p, "past");
	snprintf(k, sizeof k, "%sa", p);
	put_s(c, k, "old", &r1);
	put_s(c, k, "new", &r2);
	snprintf(k, sizeof k, "%sb", p);
	put_s(c, k, "later", NULL);
	snprintf(k, sizeof k, "%sa", p);
	cr_assert_eq(etcd_get(c, k, strlen(k), r1, &kv, NULL), 0, "%s", etcd_errmsg());
	cr_assert_not_null(kv);
	cr_assert_str_eq(kv->value, "old", "read at revision %lld gave %s", (long long)r1, kv->value);
	etcd_kv_free(kv);
	elen = etcd_prefix_end(p, strlen(p), end);
	cr_assert_eq(etcd_range_get(c, p, strlen(p), end, elen, 0, r2, &r), 0, "%s", etcd_errmsg());
	cr_assert_eq(r->n, 1, "the range at revision %lld saw a later key", (long long)r2);
	cr_assert_str_eq(r->kvs[0].value, "new");
	etcd_range_free(r);
	/* a revision that is not there yet */
	cr_assert_eq(etcd_get(c, k, strlen(k), r2 + 1000000, &kv, NULL), -ERANGE, "%s", etcd_errmsg());
	etcd_close(c);
}

Test(etcd, lease_keepalive_and_expiry, .timeout = 90)
{
	etcd_client *c = cl_etcd();
	char p[128], k[200];
	int64_t id, ttl;
	etcd_kv *kv;
	int64_t t0;

	cl_prefix(p, sizeof p, "lease");
	snprintf(k, sizeof k, "%sowner", p);
	cr_assert_eq(etcd_lease_grant(c, 2, &id), 0, "%s", etcd_errmsg());
	cr_assert_neq(id, 0);
	cr_assert_eq(etcd_put(c, k, strlen(k), "me", 2, id, NULL), 0, "%s", etcd_errmsg());
	/* kept alive for 5 s (2.5 TTLs): the key stays */
	t0 = cl_now_us();
	while (cl_now_us() - t0 < 5000000) {
		cr_assert_eq(etcd_lease_keepalive(c, id, &ttl), 0, "%s", etcd_errmsg());
		cr_assert_gt(ttl, 0);
		usleep(500000);
	}
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
	cr_assert_not_null(kv, "the key of a lease kept alive went away");
	cr_assert_eq(kv->lease, id);
	etcd_kv_free(kv);
	/* left alone: expires, and its key with it */
	t0 = cl_now_us();
	for (;;) {
		cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
		if (!kv)
			break;
		etcd_kv_free(kv);
		cr_assert_lt(cl_now_us() - t0, 20000000, "the key of an expired 2 s lease is there after 20 s");
		usleep(200000);
	}
	printf("lease: key gone %.1f s after the last keepalive\n", (double)(cl_now_us() - t0) / 1e6);
	cr_assert_eq(etcd_lease_keepalive(c, id, &ttl), -ENOENT, "keepalive of an expired lease: %s",
		etcd_errmsg());
	/* revoke deletes at once */
	cr_assert_eq(etcd_lease_grant(c, 60, &id), 0, "%s", etcd_errmsg());
	cr_assert_eq(etcd_put(c, k, strlen(k), "me", 2, id, NULL), 0, "%s", etcd_errmsg());
	cr_assert_eq(etcd_lease_revoke(c, id), 0, "%s", etcd_errmsg());
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0);
	cr_assert_null(kv, "the key of a revoked lease is there");
	etcd_close(c);
}

Test(etcd, watch_from_revision, .timeout = 90)
{
	etcd_client *c = cl_etcd();
	char p[128], k[200], end[200];
	int64_t first = 0, rev;
	etcd_watch *w;
	etcd_event *evs;
	size_t n, elen, got = 0;
	int64_t last = 0;

	cl_prefix(p, sizeof p, "watch");
	for (int i = 0; i < 20; i++) {
		snprintf(k, sizeof k, "%sk%02d", p, i);
		put_s(c, k, k, &rev);
		if (i == 0)
			first = rev;
	}
	snprintf(k, sizeof k, "%sk05", p);
	cr_assert_eq(etcd_delete(c, k, strlen(k), NULL, 0, NULL, NULL), 0);
	/* opened after the fact, from the first put: sees all 21, in order */
	elen = etcd_prefix_end(p, strlen(p), end);
	cr_assert_eq(etcd_watch_open(c, p, strlen(p), end, elen, first, &w), 0, "%s", etcd_errmsg());
	while (got < 21) {
		int rc = etcd_watch_next(w, 10000, &evs, &n);
		cr_assert_eq(rc, 0, "after %zu events: %s", got, etcd_errmsg());
		for (size_t i = 0; i < n; i++, got++) {
			cr_assert_gt(evs[i].kv.mod_revision, last, "events out of order");
			last = evs[i].kv.mod_revision;
			if (got < 20) {
				snprintf(k, sizeof k, "%sk%02zu", p, got);
				cr_assert_eq(evs[i].type, ETCD_EV_PUT);
				cr_assert_str_eq(evs[i].kv.key, k);
				cr_assert_str_eq(evs[i].kv.value, k);
			} else {
				snprintf(k, sizeof k, "%sk05", p);
				cr_assert_eq(evs[i].type, ETCD_EV_DELETE, "event %zu is not the delete", got);
				cr_assert_str_eq(evs[i].kv.key, k);
			}
		}
		etcd_events_free(evs, n);
	}
	/* then live: a put made now arrives, and nothing outside the prefix */
	snprintf(k, sizeof k, "%.*sX", (int)strlen(p) - 1, p);
	put_s(c, k, "outside", NULL);
	snprintf(k, sizeof k, "%slive", p);
	put_s(c, k, "now", &rev);
	cr_assert_eq(etcd_watch_next(w, 10000, &evs, &n), 0, "%s", etcd_errmsg());
	cr_assert_eq(n, 1);
	cr_assert_str_eq(evs[0].kv.key, k);
	cr_assert_eq(evs[0].kv.mod_revision, rev);
	etcd_events_free(evs, n);
	cr_assert_eq(etcd_watch_next(w, 500, &evs, &n), -ETIMEDOUT, "an event came from nowhere");
	etcd_watch_close(w);
	etcd_close(c);
}

Test(etcd, failover_past_dead_endpoint, .timeout = 90)
{
	char spec[1024];
	etcd_client *c;
	char p[128], k[200];
	etcd_kv *kv;
	const char *env = cl_env("TPFS_CLUSTER");

	/* port 1 on loopback: nothing listens, connection refused */
	snprintf(spec, sizeof spec, "etcd://127.0.0.1:1,%s/fsname?pool=x", env + strlen("etcd://"));
	cr_assert_eq(etcd_open(spec, &c), 0, "%s", etcd_errmsg());
	cr_assert_eq(etcd_endpoint_count(c), 4);
	cr_assert_str_eq(etcd_endpoint(c, 0), "127.0.0.1:1");
	cl_prefix(p, sizeof p, "failover");
	snprintf(k, sizeof k, "%sk", p);
	put_s(c, k, "v", NULL);
	cr_assert_eq(etcd_get(c, k, strlen(k), 0, &kv, NULL), 0, "%s", etcd_errmsg());
	cr_assert_not_null(kv);
	etcd_kv_free(kv);
	printf("failover past a dead endpoint: longest stall %lld ms\n",
		(long long)etcd_max_stall_ms(c));
	etcd_close(c);
	cr_assert_eq(etcd_open("etcd:///name", &c), -EINVAL);
	cr_assert_eq(etcd_open("127.0.0.1", &c), -EINVAL);
	cr_assert(strstr(etcd_errmsg(), "127.0.0.1"), "message: %s", etcd_errmsg());
}
