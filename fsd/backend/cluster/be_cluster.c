/*
 * be_cluster.c -- the cluster store behind backend.h (issue 28): every
 * record of every tree is a key in etcd; a transaction validates what it
 * read at commit (BE_CAP_VALIDATE), in one etcd transaction.
 *
 * Name: etcd://HOST:PORT[,HOST:PORT...]/NAME[?pool=P&conf=C&client=U&quota=B]
 * NAME: letters, digits, '.', '_', '-'.  pool, conf, client name the RADOS
 * pool of the file system's large blocks (defaults: TPFS_RADOS_POOL,
 * TPFS_CEPH_CONF, TPFS_RADOS_CLIENT); quota is the etcd cluster's
 * --quota-backend-bytes (default: TPFS_ETCD_QUOTA, else etcd's default,
 * 2 GiB), for be_space.  (RADOS is not used yet: every block is in etcd.)
 *
 * Keys (P = "tpfs/" NAME "/"):
 *   P "meta"            the store's marker: "tpfs-cluster 1 block_size=4096\n"
 *                       (be_mkfs puts it; be_open refuses a NAME without it)
 *   P "t/" TREE "/" K   a record of tree TREE (a name without '/'); K is the
 *                       record's key, byte for byte, except in a BE_TREE_U64
 *                       tree, where the 8-byte little-endian number is
 *                       stored big-endian, so etcd's byte order (memcmp) is
 *                       the tree's order (CS1).
 *   P "c/" ID "/" SEQ   a commit's id (CS5), under a lease that expires.
 *
 *   CS1  Within a tree, the order of etcd keys is the order of the tree's
 *       keys: one prefix per tree, keys as bytes (U64: big-endian).
 *   CS2  A transaction's write set (puts and deletes, by full etcd key) is
 *       kept in memory until commit; its reads see it first.  Nothing is
 *       sent to etcd before be_commit.
 *   CS3  Its read set: every key it read from etcd and the mod revision it
 *       had (0: absent), and every range a cursor scanned: [lo, hi] (hi
 *       the last key the cursor gave, or the tree's end when it ran out)
 *       and the revision R the scan read at (every page of one scan reads
 *       at the revision of its first page).
 *   CS4  be_commit is ONE etcd txn: a compare per key read (mod_revision ==
 *       what was read; 0 = still absent), a compare per range (every key
 *       in [lo, hi] has mod_revision < R + 1: nothing in the range was
 *       created or changed since the scan; a key the scan gave and that
 *       was deleted since fails its own key compare), then every write.
 *       A failed compare: BE_EDEADLOCK, nothing applied; fs_run retries.
 *   CS5  A commit that writes also puts P "c/" ID "/" SEQ (ID: random, of
 *       this open; SEQ: the transaction's id).  etcd.c resends a txn that
 *       got no answer; when the resent one fails its compares (or the
 *       whole request timed out) the key tells whether an earlier attempt
 *       was applied: present = committed.  The keys carry a lease of
 *       LEASE_TTL_S, renewed by granting a new one, so they go by
 *       themselves.
 *   CS6  Durability: etcd acknowledges a txn after a majority of members
 *       wrote it to their logs and synced (etcd's default): every commit
 *       is durable when it returns; BE_COMMIT_LAZY is ignored and be_sync
 *       has nothing to do.
 *   CS8  Every read of a transaction is made at one revision, that of its
 *       first read (etcd keeps past revisions until a compaction, which
 *       the test cluster never does; a compacted one: BE_EDEADLOCK, a
 *       retry).  A transaction that wrote nothing therefore read one
 *       consistent state -- the committed state after the writing
 *       transactions up to that revision, which CS4 serializes in revision
 *       order -- and its commit sends nothing.  One that wrote is validated
 *       by CS4 against the latest state.
 *   CS7  No locks (BE_CAP_VALIDATE): be_lock grants at once, nothing held.
 *       One daemon per cluster file system (issue 29 makes it several):
 *       inode numbers are allocated by the daemon in memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "be_cluster.h"
#include "etcd.h"

#define BLOCK_SIZE 4096
#define MAX_KEY 1024
#define PAGE 128
#define LEASE_TTL_S 600
#define MARKER "tpfs-cluster 1 block_size=4096\n"

typedef struct cls {
	be_store pub;
	etcd_client *ec;
	char *uri;
	char *prefix;     /* "tpfs/NAME/" */
	size_t plen;
	char *pool, *conf, *client;
	uint64_t quota;
	be_caps caps;
	char id[33];      /* CS5: this open's random id, hex */
	pthread_mutex_t mu;
	int64_t lease;    /* under mu; 0: none yet */
	int64_t lease_ms; /* under mu: when it was granted */
	_Atomic uint64_t next_txid;
	_Atomic uint64_t commits, aborts, aborts_empty, conflicts, round_trips, reads; /* be_stats */
} cls;

typedef struct clt {
	be_tree pub;
	cls *s;
	char *pfx; /* P "t/" TREE "/" */
	size_t pfxlen;
	int u64;
} clt;

/* A write (CS2) or a read (CS3), by full etcd key. */
typedef struct ent {
	char *k;
	size_t kl;
	char *v;      /* a write's value; NULL with del */
	size_t vl;
	int del;      /* a write: deletion */
	int64_t rev;  /* a read: mod revision seen, 0 absent */
} ent;

typedef struct vec {
	ent *a;
	size_t n, cap;
} vec;

typedef struct rng {
	char *lo, *hi; /* [lo, hi) as etcd range ends */
	size_t ll, hl;
	int64_t rev;
} rng;

typedef struct clx {
	be_txn pub;
	cls *s;
	uint64_t id;
	int64_t rev; /* CS8: the revision every read of t is made at; 0 before the first */
	vec ws, rs;
	rng *rg;
	size_t nrg, crg;
} clx;

typedef struct clc {
	be_cursor pub;
	clx *t;   /* NULL: a plain read */
	clt *tr;
	etcd_range *pg; /* the store's page; NULL: fetch from the position */
	size_t pi;
	int64_t rev;    /* the scan's revision (CS3), 0 before its first page */
	long ri;        /* the scan's range in t->rg, -1 none */
	char *cur;      /* the position: full key, NULL unpositioned */
	size_t curl;
	const char *val;
	size_t vall;
	unsigned char kbuf[MAX_KEY]; /* the key as the tree's (U64: little-endian) */
	size_t kbl;
} clc;

static _Thread_local char msg[512];

static int err(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int err(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return rc;
}

static const char *cl_errmsg(void) { return msg; }

/* An etcd client's error as a store's: a positive errno, the message kept. */
static int eout(int rc)
{
	snprintf(msg, sizeof msg, "%s", etcd_errmsg());
	if (rc == -ENOMEM || rc == -E2BIG || rc == -ETIMEDOUT)
		return -rc;
	return EIO;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- sorted vectors of entries ---- */

static int kcmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

/* The index of the first entry >= key (gt: > key). */
static size_t vfind(const vec *v, const char *k, size_t kl, int gt)
{
	size_t lo = 0, hi = v->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = kcmp(v->a[mid].k, v->a[mid].kl, k, kl);
		if (c < 0 || (gt && c == 0))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static ent *vget(const vec *v, const char *k, size_t kl)
{
	size_t i = vfind(v, k, kl, 0);
	return i < v->n && !kcmp(v->a[i].k, v->a[i].kl, k, kl) ? &v->a[i] : NULL;
}

/* The entry of k, made (zeroed but for its key) if missing; *made says which. */
static ent *vadd(vec *v, const char *k, size_t kl, int *made)
{
	size_t i = vfind(v, k, kl, 0);
	*made = 0;
	if (i < v->n && !kcmp(v->a[i].k, v->a[i].kl, k, kl))
		return &v->a[i];
	if (v->n == v->cap) {
		size_t nc = v->cap ? v->cap * 2 : 16;
		ent *na = realloc(v->a, nc * sizeof *na);
		if (!na)
			return NULL;
		v->a = na;
		v->cap = nc;
	}
	char *kc = malloc(kl ? kl : 1);
	if (!kc)
		return NULL;
	memcpy(kc, k, kl);
	memmove(&v->a[i + 1], &v->a[i], (v->n - i) * sizeof *v->a);
	v->n++;
	v->a[i] = (ent){.k = kc, .kl = kl};
	*made = 1;
	return &v->a[i];
}

static void vfree(vec *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->a[i].k);
		free(v->a[i].v);
	}
	free(v->a);
	*v = (vec){0};
}

/* ---- names ---- */

static char *dup_n(const char *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

/* A query parameter's value (percent-decoding not needed for paths and
 * names: none of '&', '=' in them), or the environment's, or def. */
static char *param(const char *q, const char *name, const char *env, const char *def)
{
	size_t nl = strlen(name);
	for (const char *p = q; p && *p;) {
		const char *amp = strchr(p, '&');
		size_t len = amp ? (size_t)(amp - p) : strlen(p);
		if (len > nl && !strncmp(p, name, nl) && p[nl] == '=')
			return dup_n(p + nl + 1, len - nl - 1);
		p = amp ? amp + 1 : NULL;
	}
	const char *e = env ? getenv(env) : NULL;
	return e && *e ? strdup(e) : def ? strdup(def) : NULL;
}

/* Parses etcd://HOSTS/NAME[?QUERY] into s (hosts into *hosts). */
static int parse(cls *s, const char *uri, char **hosts)
{
	if (strncmp(uri, "etcd://", 7) != 0) /* (before reading past a shorter name) */
		return err(BE_EBADSTORE, "%s: not etcd://HOST:PORT[,HOST:PORT...]/NAME[?pool=..&conf=..&client=..]", uri);
	const char *p = uri + 7, *slash = strchr(p, '/'), *q;
	if (!slash || slash == p)
		return err(BE_EBADSTORE, "%s: not etcd://HOST:PORT[,HOST:PORT...]/NAME[?pool=..&conf=..&client=..]", uri);
	q = strchr(slash, '?');
	size_t nl = q ? (size_t)(q - slash - 1) : strlen(slash + 1);
	if (!nl || nl > 100) /* (key buffers: MAX_KEY + 200 holds the prefix) */
		return err(BE_EBADSTORE, "%s: NAME: 1..100 bytes after the hosts", uri);
	for (size_t i = 0; i < nl; i++) {
		char ch = slash[1 + i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
		      ch == '_' || ch == '-'))
			return err(BE_EBADSTORE, "%s: NAME may hold letters, digits, '.', '_' and '-' only", uri);
	}
	if (!(*hosts = dup_n(p, (size_t)(slash - p))) || !(s->prefix = malloc(nl + 7)))
		return ENOMEM;
	s->plen = (size_t)sprintf(s->prefix, "tpfs/%.*s/", (int)nl, slash + 1);
	if (q)
		q++;
	s->pool = param(q, "pool", "TPFS_RADOS_POOL", "tpfs");
	s->conf = param(q, "conf", "TPFS_CEPH_CONF", NULL);
	s->client = param(q, "client", "TPFS_RADOS_CLIENT", "admin");
	char *quota = param(q, "quota", "TPFS_ETCD_QUOTA", NULL);
	s->quota = quota ? strtoull(quota, NULL, 10) : 0;
	if (!s->quota)
		s->quota = 2ull << 30; /* etcd's default --quota-backend-bytes */
	free(quota);
	return 0;
}

/* A full etcd key: s's prefix, then tail. */
static size_t skey(const cls *s, char *out, const char *tail)
{
	memcpy(out, s->prefix, s->plen);
	strcpy(out + s->plen, tail);
	return s->plen + strlen(tail);
}

static void cls_free(cls *s)
{
	if (!s)
		return;
	if (s->ec)
		etcd_close(s->ec);
	free(s->uri);
	free(s->prefix);
	free(s->pool);
	free(s->conf);
	free(s->client);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static const be_ops *ops_self(void);

static int connect_(const char *uri, cls **out)
{
	char *hosts = NULL;
	cls *s = calloc(1, sizeof *s);
	int rc;
	*out = NULL;
	if (!s)
		return ENOMEM;
	pthread_mutex_init(&s->mu, NULL);
	s->pub.ops = ops_self();
	s->caps = (be_caps){.flags = BE_CAP_VALIDATE, .block_size = BLOCK_SIZE, .max_key = MAX_KEY};
	s->next_txid = 1;
	if (!(s->uri = strdup(uri))) {
		rc = ENOMEM;
		goto fail;
	}
	if ((rc = parse(s, uri, &hosts)) != 0)
		goto fail;
	if ((rc = etcd_open(hosts, &s->ec)) != 0) {
		rc = err(BE_EBADSTORE, "%s: %s", uri, etcd_errmsg());
		goto fail;
	}
	unsigned char r[16];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		rc = err(errno, "getrandom: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < 16; i++)
		sprintf(s->id + 2 * i, "%02x", r[i]);
	free(hosts);
	*out = s;
	return 0;
fail:
	free(hosts);
	cls_free(s);
	return rc;
}

/* ---- lifecycle ---- */

static int cl_mkfs(const char *uri, const be_options *o)
{
	cls *s;
	etcd_txn *x = NULL;
	int rc, ok = 0;
	char k[300], end[300];
	(void)o;
	if ((rc = connect_(uri, &s)) != 0)
		return rc;
	size_t kl = skey(s, k, "meta");
	size_t el = etcd_prefix_end(s->prefix, s->plen, end);
	/* nothing of NAME yet (no key under its prefix), then the marker */
	if ((rc = etcd_txn_new(&x)) != 0 ||
	    (rc = etcd_txn_compare_range(x, s->prefix, s->plen, end, el, ETCD_VERSION, ETCD_EQ, 0)) != 0 ||
	    (rc = etcd_txn_put(x, k, kl, MARKER, strlen(MARKER), 0)) != 0 ||
	    (rc = etcd_txn_commit(s->ec, x, &ok, NULL)) != 0)
		rc = eout(rc);
	else if (!ok)
		rc = err(EEXIST, "%s: a file system of this NAME exists (keys under '%s' in etcd)", uri, s->prefix);
	etcd_txn_free(x);
	cls_free(s);
	return rc;
}

static int cl_open(const char *uri, const be_options *o, be_store **out)
{
	cls *s;
	etcd_kv *kv = NULL;
	char k[300];
	int rc;
	(void)o;
	if ((rc = connect_(uri, &s)) != 0)
		return rc;
	size_t kl = skey(s, k, "meta");
	if ((rc = etcd_get(s->ec, k, kl, 0, &kv, NULL)) != 0) {
		rc = err(BE_EBADSTORE, "%s: %s", uri, etcd_errmsg());
		goto fail;
	}
	if (!kv) {
		rc = err(BE_EBADSTORE, "%s: no file system of this NAME in etcd (`tpfs mkfs %s` makes one)", uri, uri);
		goto fail;
	}
	if (strncmp(kv->value, "tpfs-cluster ", 13)) {
		rc = err(BE_EBADSTORE, "%s: '%s' is not a tpfs marker", uri, k);
		goto fail;
	}
	if (strcmp(kv->value, MARKER)) {
		rc = err(BE_EVERSION, "%s: format '%.60s' is not this program's", uri, kv->value);
		goto fail;
	}
	etcd_kv_free(kv);
	*out = &s->pub;
	return 0;
fail:
	etcd_kv_free(kv);
	cls_free(s);
	return rc;
}

static int cl_private(const char *name, const char *logdir, int tighten, be_loose_fn *loose, void *arg,
		      unsigned *count)
{
	(void)name, (void)logdir, (void)tighten, (void)loose, (void)arg;
	if (count) /* no local files */
		*count = 0;
	return 0;
}

#define S(x) ((cls *)(x))

static int cl_close(be_store *s)
{
	cls_free(S(s));
	return 0;
}

static const be_caps *cl_caps(const be_store *s) { return &((const cls *)s)->caps; }
static int cl_recovered(be_store *s) { (void)s; return 0; }
static int cl_sync(be_store *s) { (void)s; return 0; } /* CS6 */
static int cl_checkpoint(be_store *s) { (void)s; return 0; }

static void cl_stats(be_store *bs, be_stats *o)
{
	cls *s = S(bs);
	*o = (be_stats){.commits = s->commits, .aborts = s->aborts, .aborts_empty = s->aborts_empty,
			.lock_deadlocks = s->conflicts, .log_flushes = s->round_trips,
			.page_reads = s->reads}; /* etcd txns sent, etcd reads */
}

static int cl_space(be_store *bs, uint64_t *total, uint64_t *avail)
{
	cls *s = S(bs);
	int64_t db = 0;
	int rc = etcd_status(s->ec, &db, NULL);
	if (rc)
		return eout(rc);
	*total = s->quota;
	*avail = (uint64_t)db < s->quota ? s->quota - (uint64_t)db : 0;
	return 0;
}

/* Every key under the prefix is the marker, a commit id or a record of a
 * tree with a non-empty key. */
static int cl_verify(be_store *bs, FILE *o)
{
	cls *s = S(bs);
	char end[300], *from = NULL;
	size_t fl = 0, el = etcd_prefix_end(s->prefix, s->plen, end);
	uint64_t recs = 0, ids = 0, meta = 0;
	int64_t rev = 0;
	int rc = 0;
	if (!(from = dup_n(s->prefix, s->plen)))
		return ENOMEM;
	fl = s->plen;
	for (;;) {
		etcd_range *r;
		if ((rc = etcd_range_get(s->ec, from, fl, end, el, 1000, rev, &r)) != 0) {
			rc = eout(rc);
			break;
		}
		rev = r->revision;
		for (size_t i = 0; i < r->n && !rc; i++) {
			const char *k = r->kvs[i].key + s->plen;
			size_t kl = r->kvs[i].key_len - s->plen;
			const char *sl;
			if (kl == 4 && !memcmp(k, "meta", 4))
				meta++;
			else if (kl > 2 && !memcmp(k, "c/", 2))
				ids++;
			else if (kl > 2 && !memcmp(k, "t/", 2) && (sl = memchr(k + 2, '/', kl - 2)) && sl > k + 2 &&
				 sl + 1 < k + kl)
				recs++;
			else
				rc = err(BE_ECORRUPT, "%s: key '%.*s' is not of a tpfs store", s->uri,
					 (int)r->kvs[i].key_len, r->kvs[i].key);
		}
		int more = r->more && r->n;
		if (more && !rc) {
			free(from);
			fl = r->kvs[r->n - 1].key_len + 1;
			if ((from = malloc(fl)))
				memcpy(from, r->kvs[r->n - 1].key, fl - 1), from[fl - 1] = 0;
		}
		etcd_range_free(r);
		if (rc || !more)
			break;
		if (!from) {
			rc = ENOMEM;
			break;
		}
	}
	free(from);
	if (!rc && meta != 1)
		rc = err(BE_ECORRUPT, "%s: no marker key %smeta", s->uri, s->prefix);
	if (!rc && o)
		fprintf(o, "store %s: %" PRIu64 " records, %" PRIu64 " commit ids, at etcd revision %" PRId64 "\n",
			s->uri, recs, ids, rev);
	return rc;
}

/* ---- trees ---- */

static int cl_tree_open(be_store *bs, const char *name, int flags, be_tree **out)
{
	cls *s = S(bs);
	clt *t;
	if (!*name || strchr(name, '/') || strlen(name) > 32)
		return err(BE_EINVAL, "tree name '%s': 1..32 bytes, no '/'", name);
	if (!(t = calloc(1, sizeof *t)) || !(t->pfx = malloc(s->plen + strlen(name) + 4))) {
		free(t);
		return ENOMEM;
	}
	t->pub.ops = ops_self();
	t->s = s;
	t->u64 = !!(flags & BE_TREE_U64);
	t->pfxlen = (size_t)sprintf(t->pfx, "%st/%s/", s->prefix, name);
	*out = &t->pub;
	return 0;
}

static void cl_tree_close(be_tree *tr)
{
	free(((clt *)tr)->pfx);
	free(tr);
}

#define T(x) ((clt *)(x))
#define X(x) ((clx *)(x))

/* CS1: the full etcd key of a tree's key into out (room for pfxlen+MAX_KEY). */
static int fkey(const clt *t, const void *key, size_t klen, char *out, size_t *ol)
{
	if (klen > MAX_KEY || (t->u64 && klen != 8))
		return err(BE_EINVAL, "bad key length %zu", klen);
	memcpy(out, t->pfx, t->pfxlen);
	if (t->u64) {
		const unsigned char *k = key;
		for (int i = 0; i < 8; i++)
			out[t->pfxlen + i] = (char)k[7 - i];
	} else if (klen) {
		memcpy(out + t->pfxlen, key, klen);
	}
	*ol = t->pfxlen + klen;
	return 0;
}

/* ---- transactions ---- */

static int cl_begin(be_store *bs, be_txn **out)
{
	clx *x = calloc(1, sizeof *x);
	if (!x)
		return ENOMEM;
	x->pub.ops = ops_self();
	x->s = S(bs);
	x->id = atomic_fetch_add(&x->s->next_txid, 1);
	*out = &x->pub;
	return 0;
}

static void txn_free(clx *x)
{
	vfree(&x->ws);
	vfree(&x->rs);
	for (size_t i = 0; i < x->nrg; i++) {
		free(x->rg[i].lo);
		free(x->rg[i].hi);
	}
	free(x->rg);
	free(x);
}

/* CS5: the lease of commit ids, granted anew when half its TTL passed. */
static int lease_of(cls *s, int64_t *lease)
{
	int rc = 0;
	pthread_mutex_lock(&s->mu);
	if (!s->lease || now_ms() - s->lease_ms > LEASE_TTL_S * 500) {
		int64_t id;
		if ((rc = etcd_lease_grant(s->ec, LEASE_TTL_S, &id)) == 0) {
			s->lease = id;
			s->lease_ms = now_ms();
		}
	}
	*lease = s->lease;
	pthread_mutex_unlock(&s->mu);
	return rc ? eout(rc) : 0;
}

/* A record's key as a person reads it: "TREE N" for a U64 tree, else
 * "TREE N/'TEXT'" when it starts with an 8-byte number (an inode: the fs
 * layer's keys), else hex. */
static void key_text(const cls *s, const char *k, size_t kl, char *out, size_t size)
{
	const char *t = k + s->plen + 2, *e = k + kl, *sl;
	if (kl < s->plen + 3 || memcmp(k + s->plen, "t/", 2) || !(sl = memchr(t, '/', (size_t)(e - t)))) {
		snprintf(out, size, "key of %zu bytes", kl);
		return;
	}
	const unsigned char *r = (const unsigned char *)sl + 1;
	size_t rl = (size_t)(e - (const char *)r), n = (size_t)snprintf(out, size, "%.*s", (int)(sl - t), t);
	if (rl >= 8 && n < size) {
		uint64_t v = 0;
		for (int i = 0; i < 8; i++)
			v = v << 8 | r[i];
		n += (size_t)snprintf(out + n, size - n, " %" PRIu64, v);
		r += 8, rl -= 8;
	}
	int text = rl > 0;
	for (size_t i = 0; i < rl; i++)
		text &= r[i] >= 0x20 && r[i] < 0x7f;
	if (text && n < size)
		snprintf(out + n, size - n, "/'%.*s'", (int)rl, (const char *)r);
	else
		for (size_t i = 0; i < rl && n + 3 < size; i++)
			n += (size_t)snprintf(out + n, size - n, "%s%02x", i ? "" : "/", r[i]);
}

/* After failed compares: the first key of x's read set that changed
 * (at most 256 looked at), named in the message. */
static int conflict(clx *x)
{
	cls *s = x->s;
	char what[200] = "";
	for (size_t i = 0; i < x->rs.n && i < 256 && !what[0]; i++) {
		etcd_kv *kv = NULL;
		if (etcd_get(s->ec, x->rs.a[i].k, x->rs.a[i].kl, 0, &kv, NULL) != 0)
			break;
		int64_t now = kv ? kv->mod_revision : 0;
		etcd_kv_free(kv);
		if (now != x->rs.a[i].rev)
			key_text(s, x->rs.a[i].k, x->rs.a[i].kl, what, sizeof what);
	}
	atomic_fetch_add(&s->conflicts, 1);
	if (what[0])
		return err(BE_EDEADLOCK, "another commit changed %s, which it read", what);
	return err(BE_EDEADLOCK, "another commit changed a record or a listing it read");
}

static int commit_(clx *x)
{
	cls *s = x->s;
	etcd_txn *e = NULL;
	char idk[400];
	size_t idl = 0;
	int rc, ok = 0;
	int64_t lease = 0;
	if (!x->ws.n)
		return 0; /* CS8: nothing to apply; what it read is one snapshot */
	if ((rc = etcd_txn_new(&e)) != 0)
		return eout(rc);
	for (size_t i = 0; i < x->rs.n && !rc; i++) /* CS4 */
		rc = etcd_txn_compare(e, x->rs.a[i].k, x->rs.a[i].kl, ETCD_MOD, ETCD_EQ, x->rs.a[i].rev);
	for (size_t i = 0; i < x->nrg && !rc; i++)
		rc = etcd_txn_compare_range(e, x->rg[i].lo, x->rg[i].ll, x->rg[i].hi, x->rg[i].hl, ETCD_MOD, ETCD_LT,
					    x->rg[i].rev + 1);
	for (size_t i = 0; i < x->ws.n && !rc; i++) {
		ent *w = &x->ws.a[i];
		rc = w->del ? etcd_txn_delete(e, w->k, w->kl, NULL, 0) : etcd_txn_put(e, w->k, w->kl, w->v, w->vl, 0);
	}
	if (rc) {
		rc = eout(rc);
		goto out;
	}
	if (x->ws.n) { /* CS5 */
		if ((rc = lease_of(s, &lease)) != 0)
			goto out;
		idl = (size_t)snprintf(idk, sizeof idk, "%sc/%s/%" PRIu64, s->prefix, s->id, x->id);
		if ((rc = etcd_txn_put(e, idk, idl, "", 0, lease)) != 0) {
			rc = eout(rc);
			goto out;
		}
	}
	atomic_fetch_add(&s->round_trips, 1);
	rc = etcd_txn_commit(s->ec, e, &ok, NULL);
	if (rc == -E2BIG) {
		rc = err(E2BIG, "%s: a transaction of %zu writes and %zu compares is over the etcd cluster's limits: %s",
			 s->uri, etcd_txn_ops(e), etcd_txn_compares(e), etcd_errmsg());
		goto out;
	}
	if ((rc == 0 && !ok) || rc == -ETIMEDOUT) { /* CS5: applied by an attempt that got no answer? */
		etcd_kv *kv = NULL;
		int was = rc;
		if (idl && etcd_get(s->ec, idk, idl, 0, &kv, NULL) == 0 && kv) {
			etcd_kv_free(kv);
			rc = 0;
		} else if (was) {
			rc = eout(was);
		} else {
			rc = conflict(x);
		}
	} else if (rc) {
		rc = eout(rc);
	}
out:
	etcd_txn_free(e);
	return rc;
}

static int cl_commit(be_txn *t, int flags)
{
	clx *x = X(t);
	(void)flags; /* CS6 */
	int rc = commit_(x);
	atomic_fetch_add(rc ? &x->s->aborts : &x->s->commits, 1);
	txn_free(x);
	return rc;
}

static int cl_commit_held(be_txn *t, const void *keep, size_t kplen, void (*held)(void *arg), void *arg)
{
	(void)keep, (void)kplen;
	int rc = cl_commit(t, 0);
	if (!rc && held)
		held(arg);
	return rc;
}

static int cl_abort(be_txn *t)
{
	clx *x = X(t);
	atomic_fetch_add(&x->s->aborts, 1);
	if (!x->ws.n)
		atomic_fetch_add(&x->s->aborts_empty, 1);
	txn_free(x);
	return 0;
}

static uint64_t cl_txn_id(const be_txn *t) { return ((const clx *)t)->id; }

/* CS7 */
static int cl_lock(be_txn *t, const void *name, size_t len, int mode) { (void)t, (void)name, (void)len, (void)mode; return 0; }
static int cl_unlock(be_txn *t, const void *name, size_t len) { (void)t, (void)name, (void)len; return 0; }
static void cl_lock_timeout(be_txn *t, uint32_t ms) { (void)t, (void)ms; }
static size_t cl_lock_count(be_txn *t) { (void)t; return 0; }
static uint64_t cl_lock_waits_for(be_txn *t) { (void)t; return 0; }
static int cl_lock_held(be_txn *t, const void *name, size_t len) { (void)t, (void)name, (void)len; return 0; }
static int cl_lock_cancel(be_txn *t) { (void)t; return 0; }

/* ---- records ---- */

/* Reads k from etcd (latest) into *kv (NULL: absent), recording it in x's read set (CS3). */
static int sget(cls *s, clx *x, const char *k, size_t kl, etcd_kv **kv)
{
	int64_t seen = 0;
	int rc = etcd_get(s->ec, k, kl, x ? x->rev : 0, kv, &seen);
	atomic_fetch_add(&s->reads, 1);
	if (rc == -ERANGE)
		return err(BE_EDEADLOCK, "%s: the transaction's revision was compacted", s->uri);
	if (rc)
		return eout(rc);
	if (x) {
		if (!x->rev) /* CS8 */
			x->rev = seen;
		int made;
		ent *r = vadd(&x->rs, k, kl, &made);
		if (!r) {
			etcd_kv_free(*kv);
			*kv = NULL;
			return ENOMEM;
		}
		if (made)
			r->rev = *kv ? (*kv)->mod_revision : 0;
	}
	return 0;
}

static int copy_out(const void *v, size_t vl, void *val, size_t cap, size_t *vlen)
{
	if (vlen)
		*vlen = vl;
	if (cap && val)
		memcpy(val, v, vl < cap ? vl : cap);
	return 0;
}

static int cl_get(be_txn *t, be_tree *tr, const void *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	char k[MAX_KEY + 200];
	size_t kl;
	etcd_kv *kv;
	int rc;
	if ((rc = fkey(T(tr), key, klen, k, &kl)) != 0)
		return rc;
	if (t) { /* CS2 */
		ent *w = vget(&X(t)->ws, k, kl);
		if (w)
			return w->del ? BE_ENOTFOUND : copy_out(w->v, w->vl, val, cap, vlen);
	}
	if ((rc = sget(T(tr)->s, X(t), k, kl, &kv)) != 0)
		return rc;
	if (!kv)
		return BE_ENOTFOUND;
	copy_out(kv->value, kv->value_len, val, cap, vlen);
	etcd_kv_free(kv);
	return 0;
}

/* Whether k exists as t sees it: 1, 0, or an error. */
static int exists(clx *x, cls *s, const char *k, size_t kl)
{
	ent *w = vget(&x->ws, k, kl);
	etcd_kv *kv;
	int rc;
	if (w)
		return !w->del;
	if ((rc = sget(s, x, k, kl, &kv)) != 0)
		return rc;
	rc = kv != NULL;
	etcd_kv_free(kv);
	return rc;
}

static int cl_put(be_txn *t, be_tree *tr, const void *key, size_t klen, const void *val, size_t vlen, int flags)
{
	char k[MAX_KEY + 200];
	size_t kl;
	int rc, made;
	if (!t)
		return err(BE_EINVAL, "a put needs a transaction");
	if ((rc = fkey(T(tr), key, klen, k, &kl)) != 0)
		return rc;
	if (flags & BE_NOOVERWRITE) {
		if ((rc = exists(X(t), T(tr)->s, k, kl)) < 0 || rc > 1)
			return rc;
		if (rc == 1)
			return EEXIST;
	}
	char *v = malloc(vlen ? vlen : 1);
	if (!v)
		return ENOMEM;
	memcpy(v, val, vlen);
	ent *w = vadd(&X(t)->ws, k, kl, &made);
	if (!w) {
		free(v);
		return ENOMEM;
	}
	free(w->v);
	w->v = v;
	w->vl = vlen;
	w->del = 0;
	return 0;
}

static int cl_del(be_txn *t, be_tree *tr, const void *key, size_t klen)
{
	char k[MAX_KEY + 200];
	size_t kl;
	int rc, made;
	if (!t)
		return err(BE_EINVAL, "a delete needs a transaction");
	if ((rc = fkey(T(tr), key, klen, k, &kl)) != 0)
		return rc;
	if ((rc = exists(X(t), T(tr)->s, k, kl)) < 0 || rc > 1)
		return rc;
	if (rc == 0)
		return BE_ENOTFOUND;
	ent *w = vadd(&X(t)->ws, k, kl, &made);
	if (!w)
		return ENOMEM;
	free(w->v);
	w->v = NULL;
	w->vl = 0;
	w->del = 1;
	return 0;
}

static void cl_prefetch(be_tree *tr, const void *lo, size_t lolen, const void *hi, size_t hilen)
{
	(void)tr, (void)lo, (void)lolen, (void)hi, (void)hilen;
}

/* ---- cursors ---- */

static int cl_cursor_open(be_txn *t, be_tree *tr, be_cursor **out)
{
	clc *c = calloc(1, sizeof *c);
	if (!c)
		return ENOMEM;
	c->pub.ops = ops_self();
	c->t = X(t);
	c->tr = T(tr);
	c->ri = -1;
	*out = &c->pub;
	return 0;
}

static void drop_page(clc *c)
{
	etcd_range_free(c->pg);
	c->pg = NULL;
	c->pi = 0;
}

/* The tree's end as an etcd range end. */
static size_t tree_end(const clt *t, char *end) { return etcd_prefix_end(t->pfx, t->pfxlen, end); }

/* CS3: the scan's range grows to cover [lo, k] (k NULL: to the tree's end). */
static int cover(clc *c, const char *k, size_t kl)
{
	clx *x = c->t;
	if (!x || c->ri < 0)
		return 0;
	rng *r = &x->rg[c->ri];
	char end[MAX_KEY + 200];
	size_t el;
	if (k) {
		memcpy(end, k, kl);
		end[kl] = 0; /* the key right after k */
		el = kl + 1;
	} else {
		el = tree_end(c->tr, end);
	}
	if (kcmp(end, el, r->hi, r->hl) <= 0)
		return 0;
	char *h = dup_n(end, el);
	if (!h)
		return ENOMEM;
	free(r->hi);
	r->hi = h;
	r->hl = el;
	return 0;
}

/* Starts a scan's range at lo (CS3), when the first page is read. */
static int begin_range(clc *c, const char *lo, size_t ll, int64_t rev)
{
	clx *x = c->t;
	if (!x)
		return 0;
	if (x->nrg == x->crg) {
		size_t nc = x->crg ? x->crg * 2 : 4;
		rng *n = realloc(x->rg, nc * sizeof *n);
		if (!n)
			return ENOMEM;
		x->rg = n;
		x->crg = nc;
	}
	rng *r = &x->rg[x->nrg];
	if (!(r->lo = dup_n(lo, ll)) || !(r->hi = dup_n(lo, ll + 1))) {
		free(r->lo);
		return ENOMEM;
	}
	r->hi[ll] = 0; /* [lo, lo] */
	r->ll = ll;
	r->hl = ll + 1;
	r->rev = rev;
	c->ri = (long)x->nrg++;
	return 0;
}

/* Fetches the store's page of keys >= k (gt: > k) in the tree. */
static int fetch(clc *c, const char *k, size_t kl, int gt)
{
	cls *s = c->tr->s;
	char from[MAX_KEY + 201], end[MAX_KEY + 200];
	size_t fl = kl, el = tree_end(c->tr, end);
	int rc;
	drop_page(c);
	memcpy(from, k, kl);
	if (gt)
		from[fl++] = 0;
	int64_t at = c->rev ? c->rev : c->t ? c->t->rev : 0; /* CS8 */
	rc = etcd_range_get(s->ec, from, fl, end, el, PAGE, at, &c->pg);
	atomic_fetch_add(&s->reads, 1);
	if (rc == -ERANGE)
		return err(BE_EDEADLOCK, "%s: the scan's revision was compacted", s->uri);
	if (rc)
		return eout(rc);
	if (!c->rev) {
		c->rev = at ? at : c->pg->revision; /* (the header's revision is the latest, not the one read at) */
		if (c->t && !c->t->rev)
			c->t->rev = c->rev;
		if ((rc = begin_range(c, from, fl, c->rev)) != 0)
			return rc;
	}
	return 0;
}

/* The store's first key >= k (gt: > k): *out NULL when none. */
static int store_next(clc *c, const char *k, size_t kl, int gt, etcd_kv **out)
{
	int rc;
	*out = NULL;
	for (;;) {
		if (!c->pg) {
			if ((rc = fetch(c, k, kl, gt)) != 0)
				return rc;
		}
		while (c->pi < c->pg->n) {
			etcd_kv *e = &c->pg->kvs[c->pi];
			int cmp = kcmp(e->key, e->key_len, k, kl);
			if (cmp > 0 || (cmp == 0 && !gt)) {
				*out = e;
				return 0;
			}
			c->pi++;
		}
		if (!c->pg->more || !c->pg->n)
			return 0;
		/* the next page, from after this one's last key */
		etcd_kv *last = &c->pg->kvs[c->pg->n - 1];
		char lk[MAX_KEY + 200];
		size_t ll = last->key_len;
		memcpy(lk, last->key, ll);
		if ((rc = fetch(c, lk, ll, 1)) != 0)
			return rc;
	}
}

static int set_pos(clc *c, const char *k, size_t kl, const char *v, size_t vl)
{
	char *n = dup_n(k, kl);
	if (!n)
		return ENOMEM;
	free(c->cur);
	c->cur = n;
	c->curl = kl;
	c->val = v;
	c->vall = vl;
	const char *tk = k + c->tr->pfxlen;
	c->kbl = kl - c->tr->pfxlen;
	if (c->tr->u64) {
		for (int i = 0; i < 8; i++)
			c->kbuf[i] = (unsigned char)tk[7 - i];
	} else {
		memcpy(c->kbuf, tk, c->kbl);
	}
	return 0;
}

/* Positions c on the first key >= k (gt: > k) as its transaction sees it:
 * the store's merged with the write set (CS2), deletions skipped. */
static int settle(clc *c, const char *k0, size_t kl0, int gt)
{
	char k[MAX_KEY + 200];
	size_t kl = kl0;
	int rc;
	memcpy(k, k0, kl0);
	for (;;) {
		etcd_kv *se;
		ent *we = NULL;
		if ((rc = store_next(c, k, kl, gt, &se)) != 0)
			return rc;
		if (c->t) {
			size_t i = vfind(&c->t->ws, k, kl, gt);
			if (i < c->t->ws.n) {
				we = &c->t->ws.a[i];
				if (we->kl < c->tr->pfxlen || memcmp(we->k, c->tr->pfx, c->tr->pfxlen))
					we = NULL; /* past the tree */
			}
		}
		int cmp = !se ? 1 : !we ? -1 : kcmp(se->key, se->key_len, we->k, we->kl);
		if (!se && !we) {
			free(c->cur);
			c->cur = NULL;
			if ((rc = cover(c, NULL, 0)) != 0)
				return rc;
			return BE_ENOTFOUND;
		}
		if (cmp < 0) { /* the store's, not written by t */
			if (c->t) {
				int made;
				ent *r = vadd(&c->t->rs, se->key, se->key_len, &made); /* CS3 */
				if (!r)
					return ENOMEM;
				if (made)
					r->rev = se->mod_revision;
			}
			if ((rc = cover(c, se->key, se->key_len)) != 0)
				return rc;
			return set_pos(c, se->key, se->key_len, se->value, se->value_len);
		}
		if ((rc = cover(c, we->k, we->kl)) != 0)
			return rc;
		if (!we->del)
			return set_pos(c, we->k, we->kl, we->v, we->vl);
		memcpy(k, we->k, we->kl); /* deleted by t: past it */
		kl = we->kl;
		gt = 1;
	}
}

static int cl_cursor_seek(be_cursor *bc, const void *key, size_t klen, int how)
{
	clc *c = (clc *)bc;
	char k[MAX_KEY + 200];
	size_t kl;
	int rc;
	drop_page(c);
	c->rev = 0; /* a new scan (CS3) */
	c->ri = -1;
	free(c->cur);
	c->cur = NULL;
	if (how == BE_FIRST)
		return settle(c, c->tr->pfx, c->tr->pfxlen, 0);
	if (how == BE_LAST) {
		char end[MAX_KEY + 200];
		size_t el = tree_end(c->tr, end);
		int has_ws = 0;
		if (c->t) {
			size_t i = vfind(&c->t->ws, c->tr->pfx, c->tr->pfxlen, 0);
			has_ws = i < c->t->ws.n && c->t->ws.a[i].kl >= c->tr->pfxlen &&
				 !memcmp(c->t->ws.a[i].k, c->tr->pfx, c->tr->pfxlen);
		}
		if (has_ws) { /* merged: walk the whole tree */
			char last[MAX_KEY + 200];
			size_t ll = 0;
			for (rc = settle(c, c->tr->pfx, c->tr->pfxlen, 0); rc == 0;
			     rc = settle(c, last, ll, 1)) {
				ll = c->curl;
				memcpy(last, c->cur, ll);
			}
			if (rc != BE_ENOTFOUND)
				return rc;
			if (!ll)
				return BE_ENOTFOUND;
			drop_page(c);
			return settle(c, last, ll, 0);
		}
		etcd_kv *kv = NULL;
		int64_t rev = 0;
		int64_t at = c->t ? c->t->rev : 0; /* CS8 */
		if ((rc = etcd_range_last(c->tr->s->ec, c->tr->pfx, c->tr->pfxlen, end, el, at, &kv, &rev)) != 0)
			return eout(rc);
		c->rev = at ? at : rev;
		if (c->t && !c->t->rev)
			c->t->rev = c->rev;
		if (!kv) {
			if ((rc = begin_range(c, c->tr->pfx, c->tr->pfxlen, rev)) == 0)
				rc = cover(c, NULL, 0);
			return rc ? rc : BE_ENOTFOUND;
		}
		if ((rc = begin_range(c, kv->key, kv->key_len, rev)) == 0 && (rc = cover(c, NULL, 0)) == 0)
			rc = settle(c, kv->key, kv->key_len, 0);
		etcd_kv_free(kv);
		return rc;
	}
	if ((rc = fkey(c->tr, key, klen, k, &kl)) != 0)
		return rc;
	return settle(c, k, kl, how == BE_SEEK_GT);
}

static int cl_cursor_next(be_cursor *bc)
{
	clc *c = (clc *)bc;
	char k[MAX_KEY + 200];
	size_t kl;
	if (!c->cur)
		return BE_ENOTFOUND;
	kl = c->curl;
	memcpy(k, c->cur, kl);
	return settle(c, k, kl, 1);
}

static int cl_cursor_get(be_cursor *bc, const void **key, size_t *klen, const void **val, size_t *vlen)
{
	clc *c = (clc *)bc;
	if (!c->cur)
		return BE_ENOTFOUND;
	if (key)
		*key = c->kbuf;
	if (klen)
		*klen = c->kbl;
	if (val)
		*val = c->val;
	if (vlen)
		*vlen = c->vall;
	return 0;
}

static void cl_cursor_close(be_cursor *bc)
{
	clc *c = (clc *)bc;
	drop_page(c);
	free(c->cur);
	free(c);
}

const be_ops be_cluster_ops = {
	.scheme = "etcd",
	.open = cl_open,
	.mkfs = cl_mkfs,
	.private_ = cl_private,
	.errmsg = cl_errmsg,
	.close = cl_close,
	.caps = cl_caps,
	.recovered = cl_recovered,
	.sync = cl_sync,
	.checkpoint = cl_checkpoint,
	.verify = cl_verify,
	.stats = cl_stats,
	.space = cl_space,
	.tree_open = cl_tree_open,
	.tree_close = cl_tree_close,
	.begin = cl_begin,
	.commit = cl_commit,
	.commit_held = cl_commit_held,
	.abort = cl_abort,
	.txn_id = cl_txn_id,
	.lock = cl_lock,
	.unlock = cl_unlock,
	.lock_timeout = cl_lock_timeout,
	.lock_count = cl_lock_count,
	.lock_waits_for = cl_lock_waits_for,
	.lock_held = cl_lock_held,
	.lock_cancel = cl_lock_cancel,
	.get = cl_get,
	.put = cl_put,
	.del = cl_del,
	.prefetch = cl_prefetch,
	.cursor_open = cl_cursor_open,
	.cursor_seek = cl_cursor_seek,
	.cursor_next = cl_cursor_next,
	.cursor_get = cl_cursor_get,
	.cursor_close = cl_cursor_close,
};

static const be_ops *ops_self(void) { return &be_cluster_ops; }
