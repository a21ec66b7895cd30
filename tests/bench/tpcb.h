/*
 * tpcb.h -- the driver interface of the TPC-B benchmark (tpcb.c): one
 * tpcb_system per storage system (tpfs, Berkeley DB, SQLite, LMDB, plain
 * files), each in its own tpcb_<system>.c.
 *
 * Data (every system stores the same bytes where it stores records)
 *   accounts, tellers, branches: 100-byte records (tpcb_rec) keyed by their
 *   id (0-based); history: 50-byte records (tpcb_hist) keyed by an
 *   increasing sequence number, appended, never read during a run.
 *
 * Life of a system in one run of tpcb
 *   open (creates its stores under cfg->dir and loads them, printing
 *   progress); for each mode: set_mode, worker_open cfg->max_threads times
 *   (in the main thread; handle i of a mode is then used by thread i of each
 *   measurement of that mode, one thread at a time), sums, a warm-up.  Then
 *   the measurements of every system, mode and thread count, interleaved in
 *   slices: set_mode, then txn calls from the threads for a slice's time;
 *   sums after the last slice of each.  Finally worker_close of every
 *   handle, and close.  set_mode must be cheap: every system is open at
 *   once and switches mode before each slice.
 */
#ifndef TPCB_H
#define TPCB_H

#include <stddef.h>
#include <stdint.h>

enum { TPCB_REC = 100, TPCB_HIST = 50 };

/* An account, teller or branch record: its first TPCB_REC bytes are what is
 * stored (sizeof may be larger, by padding). */
typedef struct tpcb_rec {
	uint64_t id;
	uint64_t branch; /* the branch it belongs to (its own id for branches) */
	int64_t balance;
	char filler[TPCB_REC - 24];
} tpcb_rec;

/* A history record (50 bytes, little-endian, packed by hand). */
typedef struct tpcb_hist {
	unsigned char b[TPCB_HIST]; /* account u64, teller u64, branch u64, delta i64, time u64, filler */
} tpcb_hist;

typedef struct tpcb_cfg {
	const char *dir;       /* stores go under it (on the disk under test) */
	uint32_t branches, tellers, accounts;
	size_t cache_bytes;    /* cache for every system: enough for the data */
	int max_threads;       /* the most threads any run will use */
} tpcb_cfg;

/* One transaction's parameters, chosen by the driver (TPC-B rules). */
typedef struct tpcb_args {
	uint32_t account, teller, branch;
	int32_t delta;  /* in [-99999, 99999] */
	uint64_t hseq;  /* history sequence number: unique, roughly increasing */
	uint64_t time;  /* timestamp, microseconds */
} tpcb_args;

/* The consistency check: the four sums must be equal. */
typedef struct tpcb_sums {
	int64_t accounts, tellers, branches, history;
	uint64_t history_n; /* history records */
} tpcb_sums;

/* Durability classes: ratios compare tpfs with a peer in the same class. */
enum {
	TPCB_DURABLE, /* a commit is on disk when it returns */
	TPCB_NOSYNC,  /* atomic; commits of the last moments may be lost in a crash */
	TPCB_NONE,    /* no crash protection: a crash may leave partial or damaged data */
	TPCB_NCLASS
};

enum { TPCB_MAXSTORES = 2 };

typedef struct tpcb_mode {
	const char *name;
	int cls;                /* TPCB_DURABLE, ... */
	const char *durability; /* what a crash does to it, in a few words */
	int store;              /* which of the system's stores it runs on (0, 1) */
} tpcb_mode;

typedef struct tpcb_system {
	const char *name;
	const tpcb_mode *modes;
	int nmodes;
	const char *notes; /* configuration in one line (locking, cache, ...) */
	/* Creates and loads the store: 0 or an error printed already. */
	int (*open)(const tpcb_cfg *cfg, void **db);
	int (*set_mode)(void *db, int mode);
	int (*worker_open)(void *db, void **w);
	/* One TPC-B transaction, retried inside on deadlock or busy: 0 when
	 * committed, else an error printed already; *retries counts retries. */
	int (*txn)(void *w, const tpcb_args *a, uint64_t *retries);
	void (*worker_close)(void *w);
	int (*sums)(void *db, tpcb_sums *s);
	void (*close)(void *db);
	/* Optional: engine counters over a measurement, called with start 1
	 * before it and start 0 after it, which writes a short note to buf. */
	void (*stats)(void *db, int start, uint64_t commits, char *buf, size_t cap);
	/* LLADD's bulk test: one transaction inserting n (uint32 key, uint32
	 * value) pairs in key order into a fresh store under dir, committed
	 * durably; *secs is its time from begin to durable commit. */
	int (*bulk)(const char *dir, uint32_t n, double *secs);
} tpcb_system;

extern const tpcb_system tpcb_tpfs, tpcb_bdb, tpcb_sqlite, tpcb_lmdb, tpcb_files;

/* Helpers for the systems (tpcb.c). */
void tpcb_rec_init(tpcb_rec *r, uint64_t id, uint64_t branch);
void tpcb_hist_init(tpcb_hist *h, const tpcb_args *a);
int64_t tpcb_hist_delta(const void *h50);
/* Load progress: prints "<what>: loading n ..." and a percentage every
 * quarter; call with i from 0 to n (i == n ends the line). */
void tpcb_progress(const char *sys, const char *what, uint64_t i, uint64_t n);
/* A path under dir: dir/name (static buffer per call site not needed: out). */
void tpcb_path(char *out, size_t cap, const char *dir, const char *name);
/* Removes a directory tree (ignores errors). */
void tpcb_rmtree(const char *path);
/* Big-endian encodings for systems whose keys compare as bytes. */
void tpcb_be64(unsigned char *b, uint64_t v);
void tpcb_be32(unsigned char *b, uint32_t v);
uint32_t tpcb_get_be32(const unsigned char *b);

#endif
