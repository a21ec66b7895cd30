/*
 * etcd.c -- the etcd v3 client of etcd.h, over etcd's JSON gateway.
 *
 * Design.  Each call builds one JSON request (json-c), POSTs it with a
 * libcurl easy handle borrowed from the client's pool, and decodes the JSON
 * answer.  The gateway is etcd's own grpc-gateway: field names are the
 * protobuf ones, bytes are base64, int64 values come back as strings,
 * fields at their zero value are left out (a missing "succeeded" is false),
 * and the streaming calls (lease keepalive, watch) answer with one
 * {"result": ...} or {"error": ...} object per line.
 *
 * Invariants:
 * ET1  A request is retried on another endpoint only for a transport failure
 *     or an error etcd marks as passing (no leader, leader changed, timed
 *     out, unavailable, too many requests): never for a refusal (bad
 *     argument, too large, compacted, no lease), which would fail again.
 * ET2  c->cur only moves forward (compare-and-swap from the index that
 *     failed): threads failing on the same dead member move it once.
 * ET3  A handle in the pool has no request in flight; a borrowed one is used
 *     by one thread only.
 * ET4  A watch's next_rev is the revision after the last event it returned
 *     (or after the revision it was created at): a stream opened again from
 *     next_rev neither repeats nor skips an event.
 */
#include "etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_MAX 16
#define CONNECT_TIMEOUT_MS 1000L
/* How long one attempt may take before it is sent again elsewhere: a small
 * request forwarded by a follower to a leader that just died gets no answer
 * until etcd's own request timeout (7 s), while a new leader is there after
 * ~1-2 s; a large one (a txn of thousands of puts) takes seconds to apply. */
#define SMALL_TIMEOUT_MS 2000L
#define SMALL_BODY 65536
#define LARGE_TIMEOUT_MS 15000L /* plus 4 s per MiB of request */

struct etcd_client {
	char **eps;               /* "host:port", immutable after open */
	size_t nep;
	atomic_size_t cur;        /* index of the endpoint to use (ET2) */
	atomic_llong max_stall;   /* ms */
	pthread_mutex_t mu;
	CURL *pool[POOL_MAX];     /* under mu: idle handles (ET3) */
	size_t npool;             /* under mu */
	struct curl_slist *hdrs;  /* immutable after open */
};

struct etcd_txn {
	json_object *compare; /* array */
	json_object *success; /* array */
	size_t ncmp, nops;
};

struct etcd_watch {
	etcd_client *c;
	CURL *h;
	CURLM *m;
	char *key, *end;
	size_t klen, elen;
	int64_t next_rev; /* ET4 */
	size_t ep;
	int running;
	char *buf;
	size_t len, cap;
};

/* ---- errors ---- */

static _Thread_local char errbuf[1024];

const char *etcd_errmsg(void)
{
	return errbuf;
}

static int set_err(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int set_err(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof errbuf, fmt, ap);
	va_end(ap);
	return rc;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- base64 ---- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const void *src, size_t n, size_t *outlen)
{
	const unsigned char *s = src;
	size_t olen = (n + 2) / 3 * 4, i, o = 0;
	char *out = malloc(olen + 1);
	if (!out)
		return NULL;
	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		out[o++] = b64chars[v >> 18 & 63];
		out[o++] = b64chars[v >> 12 & 63];
		out[o++] = b64chars[v >> 6 & 63];
		out[o++] = b64chars[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
		out[o++] = b64chars[v >> 18 & 63];
		out[o++] = b64chars[v >> 12 & 63];
		out[o++] = i + 1 < n ? b64chars[v >> 6 & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	*outlen = o;
	return out;
}

static int b64_val(char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+' || ch == '-')
		return 62;
	if (ch == '/' || ch == '_')
		return 63;
	return -1;
}

/* Decode into a malloc'd, NUL-terminated buffer; -EIO on bad input. */
static int b64_decode(const char *s, size_t n, char **out, size_t *outlen)
{
	char *d = malloc(n / 4 * 3 + 4);
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0, i;
	if (!d)
		return -ENOMEM;
	for (i = 0; i < n && s[i] != '='; i++) {
		int v = b64_val(s[i]);
		if (v < 0) {
			free(d);
			return -EIO;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			d[o++] = (char)(acc >> bits & 0xff);
		}
	}
	d[o] = '\0';
	*out = d;
	*outlen = o;
	return 0;
}

/* ---- JSON helpers ---- */

static int add_b64(json_object *o, const char *field, const void *p, size_t n)
{
	size_t len;
	char *s = b64_encode(p, n, &len);
	json_object *js;
	if (!s)
		return -ENOMEM;
	js = json_object_new_string_len(s, (int)len);
	free(s);
	if (!js)
		return -ENOMEM;
	json_object_object_add(o, field, js);
	return 0;
}

static int add_i64(json_object *o, const char *field, int64_t v)
{
	json_object *j = json_object_new_int64(v);
	if (!j)
		return -ENOMEM;
	json_object_object_add(o, field, j);
	return 0;
}

/* An int64 field (etcd sends them as strings); 0 when absent. */
static int64_t get_i64(json_object *o, const char *field)
{
	json_object *v;
	if (!o || !json_object_object_get_ex(o, field, &v))
		return 0;
	return json_object_get_int64(v);
}

static int get_bool(json_object *o, const char *field)
{
	json_object *v;
	if (!o || !json_object_object_get_ex(o, field, &v))
		return 0;
	return json_object_get_boolean(v);
}

static int get_bytes(json_object *o, const char *field, char **out, size_t *len)
{
	json_object *v;
	if (!o || !json_object_object_get_ex(o, field, &v)) {
		*out = calloc(1, 1);
		*len = 0;
		return *out ? 0 : -ENOMEM;
	}
	return b64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v), out, len);
}

static int kv_parse(json_object *j, etcd_kv *kv)
{
	int rc;
	memset(kv, 0, sizeof *kv);
	if ((rc = get_bytes(j, "key", &kv->key, &kv->key_len)) != 0)
		return rc;
	if ((rc = get_bytes(j, "value", &kv->value, &kv->value_len)) != 0) {
		free(kv->key);
		kv->key = NULL;
		return rc;
	}
	kv->create_revision = get_i64(j, "create_revision");
	kv->mod_revision = get_i64(j, "mod_revision");
	kv->version = get_i64(j, "version");
	kv->lease = get_i64(j, "lease");
	return 0;
}

static void kv_clear(etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
}

void etcd_kv_free(etcd_kv *kv)
{
	if (kv) {
		kv_clear(kv);
		free(kv);
	}
}

/* ---- client ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int etcd_open(const char *spec, etcd_client **out)
{
	etcd_client *c;
	const char *p = spec, *stop;
	*out = NULL;
	if (!spec)
		return set_err(-EINVAL, "etcd: no endpoints");
	if (strncmp(p, "etcd://", 7) == 0)
		p += 7;
	stop = p + strcspn(p, "/?");
	if (stop == p)
		return set_err(-EINVAL, "etcd: no endpoints in '%s'", spec);
	pthread_once(&curl_once, curl_init);
	if (!(c = calloc(1, sizeof *c)))
		return set_err(-ENOMEM, "etcd: out of memory");
	pthread_mutex_init(&c->mu, NULL);
	while (p < stop) {
		size_t n = strcspn(p, ",");
		char **eps;
		if (p + n > stop)
			n = (size_t)(stop - p);
		if (n == 0 || !memchr(p, ':', n)) {
			etcd_close(c);
			return set_err(-EINVAL, "etcd: bad endpoint '%.*s' in '%s' (want HOST:PORT)",
				(int)n, p, spec);
		}
		eps = realloc(c->eps, (c->nep + 1) * sizeof *eps);
		if (!eps || !(eps[c->nep] = strndup(p, n))) {
			if (eps)
				c->eps = eps;
			etcd_close(c);
			return set_err(-ENOMEM, "etcd: out of memory");
		}
		c->eps = eps;
		c->nep++;
		p += n;
		if (p < stop && *p == ',')
			p++;
	}
	c->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	if (c->hdrs)
		c->hdrs = curl_slist_append(c->hdrs, "Expect:");
	if (!c->hdrs) {
		etcd_close(c);
		return set_err(-ENOMEM, "etcd: out of memory");
	}
	*out = c;
	return 0;
}

void etcd_close(etcd_client *c)
{
	size_t i;
	if (!c)
		return;
	for (i = 0; i < c->npool; i++)
		curl_easy_cleanup(c->pool[i]);
	for (i = 0; i < c->nep; i++)
		free(c->eps[i]);
	free(c->eps);
	curl_slist_free_all(c->hdrs);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

int64_t etcd_max_stall_ms(etcd_client *c)
{
	return atomic_load(&c->max_stall);
}

size_t etcd_endpoint_count(etcd_client *c)
{
	return c->nep;
}

const char *etcd_endpoint(etcd_client *c, size_t i)
{
	return i < c->nep ? c->eps[i] : NULL;
}

static CURL *handle_get(etcd_client *c)
{
	CURL *h = NULL;
	pthread_mutex_lock(&c->mu);
	if (c->npool > 0)
		h = c->pool[--c->npool];
	pthread_mutex_unlock(&c->mu);
	return h ? h : curl_easy_init();
}

static void handle_put(etcd_client *c, CURL *h)
{
	pthread_mutex_lock(&c->mu);
	if (c->npool < POOL_MAX) {
		c->pool[c->npool++] = h; /* ET3 */
		h = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	if (h)
		curl_easy_cleanup(h);
}

typedef struct rbuf {
	char *p;
	size_t n, cap;
} rbuf;

static size_t rbuf_write(char *data, size_t sz, size_t nm, void *arg)
{
	rbuf *b = arg;
	size_t n = sz * nm;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;
		while (cap < b->n + n + 1)
			cap *= 2;
		if (!(p = realloc(b->p, cap)))
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

/* Map etcd's error (gRPC code and text) to an errno; *transient says
 * whether another endpoint may answer differently (ET1). */
static int map_error(const char *ep, const char *path, int code, const char *msg, int *transient)
{
	*transient = 0;
	if (strstr(msg, "too many operations in txn"))
		return set_err(-E2BIG, "etcd %s%s: %s (the server's --max-txn-ops)", ep, path, msg);
	if (strstr(msg, "too many requests") || strstr(msg, "no leader") || strstr(msg, "leader changed") ||
		strstr(msg, "timed out") || strstr(msg, "not capable") || strstr(msg, "stopped") ||
		code == 14 || code == 4 || code == 1) {
		*transient = 1;
		return set_err(-EIO, "etcd %s%s: %s", ep, path, msg);
	}
	if (strstr(msg, "request is too large") || strstr(msg, "larger than max") || code == 8)
		return set_err(-E2BIG, "etcd %s%s: %s (the server's --max-request-bytes)", ep, path, msg);
	if (strstr(msg, "compacted") || strstr(msg, "future revision") || code == 11)
		return set_err(-ERANGE, "etcd %s%s: %s", ep, path, msg);
	if (strstr(msg, "lease not found") || code == 5)
		return set_err(-ENOENT, "etcd %s%s: %s", ep, path, msg);
	if (code == 3)
		return set_err(-EINVAL, "etcd %s%s: %s", ep, path, msg);
	return set_err(-EIO, "etcd %s%s: %s (gRPC code %d)", ep, path, msg, code);
}

/* The error in a gateway answer, if any: {"error":"text","code":N} for a
 * unary call, {"error":{"grpc_code":N,"message":"text"}} in a stream. */
static int answer_error(json_object *j, const char *ep, const char *path, int *transient)
{
	json_object *e, *v;
	int code = 0;
	const char *msg = "";
	if (!json_object_object_get_ex(j, "error", &e))
		return 0;
	if (json_object_is_type(e, json_type_object)) {
		code = (int)get_i64(e, "grpc_code");
		if (json_object_object_get_ex(e, "message", &v))
			msg = json_object_get_string(v);
	} else {
		code = (int)get_i64(j, "code");
		if (json_object_object_get_ex(j, "message", &v))
			msg = json_object_get_string(v);
		else
			msg = json_object_get_string(e);
	}
	return map_error(ep, path, code, msg ? msg : "", transient);
}

/* POST body to one endpoint.  0 and *out = the answer (its "result" for a
 * streaming call), or an error with *transient set when retrying elsewhere
 * may help. */
static int post_once(etcd_client *c, CURL *h, const char *ep, const char *path, const char *body,
	size_t blen, json_object **out, int *transient)
{
	char url[512];
	rbuf b = {0};
	CURLcode cr;
	long status = 0;
	json_object *j, *res;
	int rc;

	*transient = 0;
	*out = NULL;
	snprintf(url, sizeof url, "http://%s%s", ep, path);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, rbuf_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
		blen < SMALL_BODY ? SMALL_TIMEOUT_MS : LARGE_TIMEOUT_MS + (long)(blen >> 20) * 4000L);
	cr = curl_easy_perform(h);
	if (cr != CURLE_OK) {
		free(b.p);
		*transient = 1;
		return set_err(cr == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO, "etcd %s%s: %s", ep,
			path, curl_easy_strerror(cr));
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	j = b.p ? json_tokener_parse(b.p) : NULL;
	if (!j || !json_object_is_type(j, json_type_object)) {
		rc = set_err(-EIO, "etcd %s%s: HTTP %ld, not a JSON answer: %.200s", ep, path, status,
			b.p ? b.p : "(empty)");
		*transient = status >= 500 || status == 0;
		json_object_put(j);
		free(b.p);
		return rc;
	}
	free(b.p);
	if ((rc = answer_error(j, ep, path, transient)) != 0) {
		json_object_put(j);
		return rc;
	}
	if (status != 200) {
		json_object_put(j);
		*transient = status >= 500;
		return set_err(-EIO, "etcd %s%s: HTTP %ld", ep, path, status);
	}
	if (json_object_object_get_ex(j, "result", &res)) {
		json_object_get(res);
		json_object_put(j);
		j = res;
	}
	*out = j;
	return 0;
}

/* Send req to path, failing over across the endpoints (ET1, ET2). */
static int request(etcd_client *c, const char *path, json_object *req, json_object **out)
{
	size_t blen;
	const char *body = json_object_to_json_string_length(req, JSON_C_TO_STRING_PLAIN, &blen);
	int64_t t0 = now_ms();
	size_t tries = 0;
	int retried = 0, rc, transient;
	CURL *h;

	*out = NULL;
	if (!body)
		return set_err(-ENOMEM, "etcd: out of memory");
	if (!(h = handle_get(c)))
		return set_err(-ENOMEM, "etcd: out of memory (curl handle)");
	for (;;) {
		size_t seen = atomic_load(&c->cur), i = seen % c->nep;
		rc = post_once(c, h, c->eps[i], path, body, blen, out, &transient);
		if (rc == 0 || !transient)
			break;
		retried = 1;
		tries++;
		if (now_ms() - t0 >= ETCD_DEADLINE_MS) {
			char last[sizeof errbuf];
			snprintf(last, sizeof last, "%s", errbuf);
			rc = set_err(-ETIMEDOUT, "etcd: no endpoint answered %s within %d ms; last: %s",
				path, ETCD_DEADLINE_MS, last);
			break;
		}
		/* ET2: from the value read, never from its index (c->cur only grows) */
		atomic_compare_exchange_strong(&c->cur, &seen, seen + 1);
		if (tries % c->nep == 0)
			sleep_ms(100);
	}
	handle_put(c, h);
	if (retried) {
		long long stall = now_ms() - t0, old = atomic_load(&c->max_stall);
		while (stall > old && !atomic_compare_exchange_weak(&c->max_stall, &old, stall))
			;
	}
	return rc;
}

/* ---- keys ---- */

size_t etcd_prefix_end(const void *prefix, size_t plen, char *end)
{
	const unsigned char *p = prefix;
	size_t n = plen;
	while (n > 0 && p[n - 1] == 0xff)
		n--;
	if (n == 0) {
		end[0] = '\0';
		return 1;
	}
	memcpy(end, p, n);
	end[n - 1] = (char)(p[n - 1] + 1);
	return n;
}

int etcd_put(etcd_client *c, const void *key, size_t klen, const void *val, size_t vlen,
	int64_t lease, int64_t *rev_out)
{
	json_object *req = json_object_new_object(), *ans = NULL;
	int rc = -ENOMEM;
	if (!req || add_b64(req, "key", key, klen) || add_b64(req, "value", val, vlen) ||
		(lease && add_i64(req, "lease", lease))) {
		set_err(rc, "etcd: out of memory");
		goto out;
	}
	if ((rc = request(c, "/v3/kv/put", req, &ans)) != 0)
		goto out;
	if (rev_out) {
		json_object *hdr = NULL;
		json_object_object_get_ex(ans, "header", &hdr);
		*rev_out = get_i64(hdr, "revision");
	}
out:
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

int etcd_range_get(etcd_client *c, const void *key, size_t klen, const void *end, size_t elen,
	int64_t limit, int64_t rev, etcd_range **out)
{
	json_object *req = json_object_new_object(), *ans = NULL, *kvs, *hdr = NULL;
	etcd_range *r = NULL;
	int rc = -ENOMEM;
	size_t i, n;

	*out = NULL;
	if (!req || add_b64(req, "key", key, klen) || (end && add_b64(req, "range_end", end, elen)) ||
		(limit && add_i64(req, "limit", limit)) || (rev && add_i64(req, "revision", rev))) {
		set_err(rc, "etcd: out of memory");
		goto out;
	}
	if ((rc = request(c, "/v3/kv/range", req, &ans)) != 0)
		goto out;
	rc = -ENOMEM;
	if (!(r = calloc(1, sizeof *r))) {
		set_err(rc, "etcd: out of memory");
		goto out;
	}
	json_object_object_get_ex(ans, "header", &hdr);
	r->revision = get_i64(hdr, "revision");
	r->more = get_bool(ans, "more");
	r->count = get_i64(ans, "count");
	if (json_object_object_get_ex(ans, "kvs", &kvs) && (n = json_object_array_length(kvs)) > 0) {
		if (!(r->kvs = calloc(n, sizeof *r->kvs))) {
			set_err(rc, "etcd: out of memory");
			goto out;
		}
		for (i = 0; i < n; i++) {
			if ((rc = kv_parse(json_object_array_get_idx(kvs, i), &r->kvs[i])) != 0) {
				set_err(rc, "etcd /v3/kv/range: bad base64 in an answer");
				goto out;
			}
			r->n++;
		}
	}
	*out = r;
	r = NULL;
	rc = 0;
out:
	etcd_range_free(r);
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

int etcd_range_last(etcd_client *c, const void *key, size_t klen, const void *end, size_t elen,
	int64_t rev, etcd_kv **out, int64_t *rev_out)
{
	json_object *req = json_object_new_object(), *ans = NULL, *kvs, *hdr = NULL;
	int rc = -ENOMEM;

	*out = NULL;
	if (!req || add_b64(req, "key", key, klen) || add_b64(req, "range_end", end, elen) ||
		add_i64(req, "limit", 1) || (rev && add_i64(req, "revision", rev)) ||
		json_object_object_add(req, "sort_order", json_object_new_string("DESCEND")) ||
		json_object_object_add(req, "sort_target", json_object_new_string("KEY"))) {
		set_err(rc, "etcd: out of memory");
		goto out;
	}
	if ((rc = request(c, "/v3/kv/range", req, &ans)) != 0)
		goto out;
	json_object_object_get_ex(ans, "header", &hdr);
	if (rev_out)
		*rev_out = get_i64(hdr, "revision");
	if (json_object_object_get_ex(ans, "kvs", &kvs) && json_object_array_length(kvs) > 0) {
		rc = -ENOMEM;
		if (!(*out = calloc(1, sizeof **out))) {
			set_err(rc, "etcd: out of memory");
			goto out;
		}
		if ((rc = kv_parse(json_object_array_get_idx(kvs, 0), *out)) != 0) {
			etcd_kv_free(*out);
			*out = NULL;
			set_err(rc, "etcd /v3/kv/range: bad base64 in an answer");
			goto out;
		}
	}
	rc = 0;
out:
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

int etcd_status(etcd_client *c, int64_t *db_size, int64_t *revision)
{
	json_object *req = json_object_new_object(), *ans = NULL, *hdr = NULL;
	int rc;
	if (!req)
		return set_err(-ENOMEM, "etcd: out of memory");
	if ((rc = request(c, "/v3/maintenance/status", req, &ans)) == 0) {
		if (db_size)
			*db_size = get_i64(ans, "db_size");
		json_object_object_get_ex(ans, "header", &hdr);
		if (revision)
			*revision = get_i64(hdr, "revision");
	}
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

void etcd_range_free(etcd_range *r)
{
	size_t i;
	if (!r)
		return;
	for (i = 0; i < r->n; i++)
		kv_clear(&r->kvs[i]);
	free(r->kvs);
	free(r);
}

int etcd_get(etcd_client *c, const void *key, size_t klen, int64_t rev, etcd_kv **out,
	int64_t *rev_out)
{
	etcd_range *r;
	int rc;
	*out = NULL;
	if ((rc = etcd_range_get(c, key, klen, NULL, 0, 0, rev, &r)) != 0)
		return rc;
	if (rev_out)
		*rev_out = r->revision;
	if (r->n > 0) {
		etcd_kv *kv = malloc(sizeof *kv);
		if (!kv) {
			etcd_range_free(r);
			return set_err(-ENOMEM, "etcd: out of memory");
		}
		*kv = r->kvs[0];
		r->kvs[0] = r->kvs[--r->n];
		*out = kv;
	}
	etcd_range_free(r);
	return 0;
}

int etcd_delete(etcd_client *c, const void *key, size_t klen, const void *end, size_t elen,
	int64_t *deleted, int64_t *rev_out)
{
	json_object *req = json_object_new_object(), *ans = NULL, *hdr = NULL;
	int rc = -ENOMEM;
	if (!req || add_b64(req, "key", key, klen) || (end && add_b64(req, "range_end", end, elen))) {
		set_err(rc, "etcd: out of memory");
		goto out;
	}
	if ((rc = request(c, "/v3/kv/deleterange", req, &ans)) != 0)
		goto out;
	json_object_object_get_ex(ans, "header", &hdr);
	if (deleted)
		*deleted = get_i64(ans, "deleted");
	if (rev_out)
		*rev_out = get_i64(hdr, "revision");
out:
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

/* ---- transactions ---- */

int etcd_txn_new(etcd_txn **out)
{
	etcd_txn *t = calloc(1, sizeof *t);
	*out = NULL;
	if (!t || !(t->compare = json_object_new_array()) || !(t->success = json_object_new_array())) {
		etcd_txn_free(t);
		return set_err(-ENOMEM, "etcd: out of memory");
	}
	*out = t;
	return 0;
}

void etcd_txn_free(etcd_txn *t)
{
	if (!t)
		return;
	json_object_put(t->compare);
	json_object_put(t->success);
	free(t);
}

int etcd_txn_compare(etcd_txn *t, const void *key, size_t klen, etcd_target target, etcd_result op,
	int64_t value)
{
	static const char *const targets[] = {"MOD", "VERSION", "CREATE"};
	static const char *const fields[] = {"mod_revision", "version", "create_revision"};
	static const char *const results[] = {"EQUAL", "NOT_EQUAL", "LESS", "GREATER"};
	json_object *cmp;
	if ((unsigned)target > ETCD_CREATE || (unsigned)op > ETCD_GT)
		return set_err(-EINVAL, "etcd: bad compare (target %d, result %d)", target, op);
	if (!(cmp = json_object_new_object()))
		return set_err(-ENOMEM, "etcd: out of memory");
	if (add_b64(cmp, "key", key, klen) ||
		json_object_object_add(cmp, "target", json_object_new_string(targets[target])) ||
		json_object_object_add(cmp, "result", json_object_new_string(results[op])) ||
		add_i64(cmp, fields[target], value) || json_object_array_add(t->compare, cmp)) {
		json_object_put(cmp);
		return set_err(-ENOMEM, "etcd: out of memory");
	}
	t->ncmp++;
	return 0;
}

int etcd_txn_compare_range(etcd_txn *t, const void *key, size_t klen, const void *end, size_t elen,
	etcd_target target, etcd_result op, int64_t value)
{
	json_object *cmp;
	int rc = etcd_txn_compare(t, key, klen, target, op, value);
	if (rc)
		return rc;
	/* the compare just added: give it its range_end */
	cmp = json_object_array_get_idx(t->compare, json_object_array_length(t->compare) - 1);
	if (add_b64(cmp, "range_end", end, elen))
		return set_err(-ENOMEM, "etcd: out of memory");
	return 0;
}

static int txn_add_op(etcd_txn *t, const char *kind, json_object *op)
{
	json_object *wrap = json_object_new_object();
	if (!wrap || json_object_object_add(wrap, kind, op)) {
		json_object_put(wrap);
		json_object_put(op);
		return set_err(-ENOMEM, "etcd: out of memory");
	}
	if (json_object_array_add(t->success, wrap)) {
		json_object_put(wrap);
		return set_err(-ENOMEM, "etcd: out of memory");
	}
	t->nops++;
	return 0;
}

int etcd_txn_put(etcd_txn *t, const void *key, size_t klen, const void *val, size_t vlen,
	int64_t lease)
{
	json_object *op = json_object_new_object();
	if (!op || add_b64(op, "key", key, klen) || add_b64(op, "value", val, vlen) ||
		(lease && add_i64(op, "lease", lease))) {
		json_object_put(op);
		return set_err(-ENOMEM, "etcd: out of memory");
	}
	return txn_add_op(t, "request_put", op);
}

int etcd_txn_delete(etcd_txn *t, const void *key, size_t klen, const void *end, size_t elen)
{
	json_object *op = json_object_new_object();
	if (!op || add_b64(op, "key", key, klen) || (end && add_b64(op, "range_end", end, elen))) {
		json_object_put(op);
		return set_err(-ENOMEM, "etcd: out of memory");
	}
	return txn_add_op(t, "request_delete_range", op);
}

size_t etcd_txn_ops(const etcd_txn *t)
{
	return t->nops;
}

size_t etcd_txn_compares(const etcd_txn *t)
{
	return t->ncmp;
}

int etcd_txn_commit(etcd_client *c, etcd_txn *t, int *succeeded, int64_t *rev_out)
{
	json_object *req = json_object_new_object(), *ans = NULL, *hdr = NULL;
	int rc;
	*succeeded = 0;
	if (!req)
		return set_err(-ENOMEM, "etcd: out of memory");
	json_object_object_add(req, "compare", json_object_get(t->compare));
	json_object_object_add(req, "success", json_object_get(t->success));
	if ((rc = request(c, "/v3/kv/txn", req, &ans)) == 0) {
		*succeeded = get_bool(ans, "succeeded");
		json_object_object_get_ex(ans, "header", &hdr);
		if (rev_out)
			*rev_out = get_i64(hdr, "revision");
	}
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

/* ---- leases ---- */

int etcd_lease_grant(etcd_client *c, int64_t ttl_s, int64_t *id_out)
{
	json_object *req = json_object_new_object(), *ans = NULL, *e;
	int rc = -ENOMEM;
	*id_out = 0;
	if (!req || add_i64(req, "TTL", ttl_s)) {
		set_err(rc, "etcd: out of memory");
		goto out;
	}
	if ((rc = request(c, "/v3/lease/grant", req, &ans)) != 0)
		goto out;
	if (json_object_object_get_ex(ans, "error", &e) && json_object_get_string_len(e) > 0) {
		rc = set_err(-EIO, "etcd /v3/lease/grant: %s", json_object_get_string(e));
		goto out;
	}
	*id_out = get_i64(ans, "ID");
out:
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

int etcd_lease_keepalive(etcd_client *c, int64_t id, int64_t *ttl_out)
{
	json_object *req = json_object_new_object(), *ans = NULL;
	int64_t ttl;
	int rc = -ENOMEM;
	if (!req || add_i64(req, "ID", id)) {
		set_err(rc, "etcd: out of memory");
		goto out;
	}
	if ((rc = request(c, "/v3/lease/keepalive", req, &ans)) != 0)
		goto out;
	ttl = get_i64(ans, "TTL");
	if (ttl <= 0) /* etcd answers TTL 0 for a lease it does not have */
		rc = set_err(-ENOENT, "etcd /v3/lease/keepalive: lease %lld not found (expired or revoked)",
			(long long)id);
	if (ttl_out)
		*ttl_out = ttl;
out:
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

int etcd_lease_revoke(etcd_client *c, int64_t id)
{
	json_object *req = json_object_new_object(), *ans = NULL;
	int rc = -ENOMEM;
	if (!req || add_i64(req, "ID", id)) {
		set_err(rc, "etcd: out of memory");
		goto out;
	}
	rc = request(c, "/v3/lease/revoke", req, &ans);
out:
	json_object_put(ans);
	json_object_put(req);
	return rc;
}

/* ---- watches ---- */

static void watch_stop(etcd_watch *w)
{
	if (w->h) {
		curl_multi_remove_handle(w->m, w->h);
		curl_easy_cleanup(w->h);
		w->h = NULL;
	}
	w->running = 0;
	w->len = 0;
}

static size_t watch_write(char *data, size_t sz, size_t nm, void *arg)
{
	etcd_watch *w = arg;
	rbuf b = {w->buf, w->len, w->cap};
	size_t n = rbuf_write(data, sz, nm, &b);
	w->buf = b.p;
	w->len = b.n;
	w->cap = b.cap;
	return n;
}

/* Open the stream on endpoint w->ep from w->next_rev. */
static int watch_start(etcd_watch *w)
{
	etcd_client *c = w->c;
	json_object *req = json_object_new_object(), *cr = json_object_new_object();
	char url[512];
	const char *body;
	int rc = -ENOMEM;

	watch_stop(w);
	if (!req || !cr || add_b64(cr, "key", w->key, w->klen) ||
		(w->end && add_b64(cr, "range_end", w->end, w->elen)) ||
		(w->next_rev && add_i64(cr, "start_revision", w->next_rev))) {
		json_object_put(cr);
		goto out;
	}
	json_object_object_add(req, "create_request", cr);
	if (!(body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN)) ||
		!(w->h = curl_easy_init()))
		goto out;
	snprintf(url, sizeof url, "http://%s/v3/watch", c->eps[w->ep % c->nep]);
	curl_easy_setopt(w->h, CURLOPT_URL, url);
	curl_easy_setopt(w->h, CURLOPT_COPYPOSTFIELDS, body);
	curl_easy_setopt(w->h, CURLOPT_HTTPHEADER, c->hdrs);
	curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(w->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(w->h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	if (curl_multi_add_handle(w->m, w->h) != CURLM_OK) {
		curl_easy_cleanup(w->h);
		w->h = NULL;
		goto out;
	}
	w->running = 1;
	rc = 0;
out:
	json_object_put(req);
	return rc ? set_err(rc, "etcd: out of memory (watch)") : 0;
}

int etcd_watch_open(etcd_client *c, const void *key, size_t klen, const void *end, size_t elen,
	int64_t start_rev, etcd_watch **out)
{
	etcd_watch *w = calloc(1, sizeof *w);
	int rc;
	*out = NULL;
	if (!w || !(w->m = curl_multi_init()) || !(w->key = malloc(klen + 1)) ||
		(end && !(w->end = malloc(elen + 1)))) {
		etcd_watch_close(w);
		return set_err(-ENOMEM, "etcd: out of memory (watch)");
	}
	w->c = c;
	memcpy(w->key, key, klen);
	w->klen = klen;
	if (end) {
		memcpy(w->end, end, elen);
		w->elen = elen;
	}
	w->next_rev = start_rev;
	w->ep = atomic_load(&c->cur);
	if ((rc = watch_start(w)) != 0) {
		etcd_watch_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

void etcd_watch_close(etcd_watch *w)
{
	if (!w)
		return;
	watch_stop(w);
	if (w->m)
		curl_multi_cleanup(w->m);
	free(w->key);
	free(w->end);
	free(w->buf);
	free(w);
}

void etcd_events_free(etcd_event *evs, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		kv_clear(&evs[i].kv);
	free(evs);
}

/* Handle one line of the stream: 1 and events when it carried some, 0 when
 * it carried none, or an error (*transient: reopen elsewhere). */
static int watch_line(etcd_watch *w, const char *line, etcd_event **evs, size_t *n, int *transient)
{
	const char *ep = w->c->eps[w->ep % w->c->nep];
	json_object *j = json_tokener_parse(line), *res, *hdr = NULL, *arr;
	int rc = 0;
	size_t i, cnt;

	*transient = 0;
	if (!j) {
		*transient = 1;
		return set_err(-EIO, "etcd %s/v3/watch: not JSON: %.200s", ep, line);
	}
	if ((rc = answer_error(j, ep, "/v3/watch", transient)) != 0)
		goto out;
	if (!json_object_object_get_ex(j, "result", &res))
		goto out;
	json_object_object_get_ex(res, "header", &hdr);
	if (get_bool(res, "canceled")) {
		json_object *reason = NULL;
		json_object_object_get_ex(res, "cancel_reason", &reason);
		if (get_i64(res, "compact_revision"))
			rc = set_err(-ERANGE, "etcd %s/v3/watch: revision %lld compacted (oldest kept: %lld)",
				ep, (long long)w->next_rev, (long long)get_i64(res, "compact_revision"));
		else
			rc = set_err(-EIO, "etcd %s/v3/watch: canceled: %s", ep,
				reason ? json_object_get_string(reason) : "(no reason)");
		goto out;
	}
	if (get_bool(res, "created") && w->next_rev == 0)
		w->next_rev = get_i64(hdr, "revision") + 1; /* ET4 */
	if (!json_object_object_get_ex(res, "events", &arr) || (cnt = json_object_array_length(arr)) == 0)
		goto out;
	if (!(*evs = calloc(cnt, sizeof **evs))) {
		rc = set_err(-ENOMEM, "etcd: out of memory (watch)");
		goto out;
	}
	for (i = 0; i < cnt; i++) {
		json_object *ev = json_object_array_get_idx(arr, i), *kv = NULL, *type;
		json_object_object_get_ex(ev, "kv", &kv);
		if ((rc = kv_parse(kv, &(*evs)[i].kv)) != 0) {
			etcd_events_free(*evs, i);
			*evs = NULL;
			set_err(rc, "etcd %s/v3/watch: bad base64 in an event", ep);
			goto out;
		}
		(*evs)[i].type = json_object_object_get_ex(ev, "type", &type) &&
				strcmp(json_object_get_string(type), "DELETE") == 0
			? ETCD_EV_DELETE
			: ETCD_EV_PUT;
		w->next_rev = (*evs)[i].kv.mod_revision + 1; /* ET4 */
	}
	*n = cnt;
	rc = 1;
out:
	json_object_put(j);
	return rc;
}

int etcd_watch_next(etcd_watch *w, int timeout_ms, etcd_event **evs, size_t *n)
{
	int64_t deadline = now_ms() + timeout_ms;
	int rc, transient, still;

	*evs = NULL;
	*n = 0;
	for (;;) {
		char *nl;
		while (w->buf && (nl = memchr(w->buf, '\n', w->len)) != NULL) {
			size_t ll = (size_t)(nl - w->buf) + 1;
			*nl = '\0';
			rc = watch_line(w, w->buf, evs, n, &transient);
			memmove(w->buf, w->buf + ll, w->len - ll);
			w->len -= ll;
			if (rc == 1)
				return 0;
			if (rc < 0 && !transient)
				return rc;
			if (rc < 0) { /* reopen on the next endpoint */
				w->ep++;
				if ((rc = watch_start(w)) != 0)
					return rc;
				break;
			}
		}
		if (now_ms() >= deadline)
			return set_err(-ETIMEDOUT, "etcd %s/v3/watch: no event within %d ms",
				w->c->eps[w->ep % w->c->nep], timeout_ms);
		if (!w->running) {
			w->ep++;
			sleep_ms(100);
			if ((rc = watch_start(w)) != 0)
				return rc;
		}
		int64_t left = deadline - now_ms();
		curl_multi_poll(w->m, NULL, 0, (int)(left < 100 ? (left > 0 ? left : 0) : 100), NULL);
		curl_multi_perform(w->m, &still);
		if (still == 0 && w->running) {
			/* the stream ended (member gone): keep what it sent, then reopen */
			int q;
			CURLMsg *msg;
			while ((msg = curl_multi_info_read(w->m, &q)) != NULL)
				;
			curl_multi_remove_handle(w->m, w->h);
			curl_easy_cleanup(w->h);
			w->h = NULL;
			w->running = 0;
			if (w->len > 0 && w->buf[w->len - 1] != '\n')
				w->len = 0; /* a partial line: dropped, ET4 makes it come again */
		}
	}
}
