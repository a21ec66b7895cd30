/*
 * store_util -- helpers shared by the unit and recover suites: temporary
 * directories, raw file access that bypasses io (the "disk"), fingerprints
 * of every file of a store (to prove it was not modified), the engine's
 * modules opened by hand (for tests below tp.h), page snapshots through
 * tp.h, and forked children.
 *
 * Nothing here calls cr_assert: helpers return 0 or an error code (errno or
 * TP_E*), so they can run in forked children too.
 */
#ifndef TP_TEST_STORE_UTIL_H
#define TP_TEST_STORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "io.h"
#include "log.h"
#include "rec.h"
#include "store.h"
#include "tp.h"
#include "txn.h"

/* ---- directories and paths ---- */

/* Makes a fresh directory /tmp/tpfs-<tag>-XXXXXX into out (>= 64 bytes). */
int su_tmpdir(char *out, size_t n, const char *tag);
/* Removes a tree (no error if it is missing). */
void su_rmtree(const char *path);
/* dir/name into out. */
char *su_path(char *out, size_t n, const char *dir, const char *name);
/* The log directory of a store (its own log/ or the superblock's logdir). */
int su_logdir(const char *store, char *out, size_t n);
/* The path of log segment idx of a store. */
int su_segpath(const char *store, uint64_t idx, char *out, size_t n);

/* ---- raw files: plain POSIX, never through io or the simulator ---- */

int su_raw_read(const char *path, uint64_t off, void *buf, size_t len, size_t *got);
int su_raw_write(const char *path, uint64_t off, const void *buf, size_t len);
int su_raw_truncate(const char *path, uint64_t size);
int64_t su_raw_size(const char *path); /* -1 if it does not exist */
/* XORs byte off of path with x (x != 0 changes it). */
int su_raw_flip(const char *path, uint64_t off, unsigned char x);
/* Sets the durable mark of the log in logdir (log.c L14) to lsn, as a
 * power cut leaves it when the write of a newer mark was lost: a test that
 * cuts the log where a power cut could have torn it lowers the mark to
 * the durable point before the lost writes first. */
int su_raw_mark(const char *logdir, uint64_t lsn);

/* ---- fingerprints of a tree: every file's path, size and content hash ---- */

typedef struct su_tree su_tree;
su_tree *su_tree_take(const char *dir);
/* 1 when both trees hold the same files with the same bytes; otherwise 0
 * and why names the first difference. */
int su_tree_equal(const su_tree *a, const su_tree *b, char *why, size_t n);
void su_tree_free(su_tree *t);

/* ---- stores through tp.h ---- */

/* Options for tests: quiet, the given sizes (0 keeps the default). */
void su_options(tp_options *o, uint32_t page_size, uint64_t seg_size, size_t cache_pages);

/* A snapshot of pages [0, npages): allocation state and, for allocated
 * pages, the body (freed pages' contents do not matter). */
typedef struct su_snap {
	uint64_t npages;
	uint32_t body;
	unsigned char *alloc; /* npages flags */
	unsigned char *data;  /* npages * body bytes; zeros where not allocated */
} su_snap;
int su_snap_take(tp_env *env, uint64_t npages, su_snap *s);
int su_snap_equal(const su_snap *a, const su_snap *b, char *why, size_t n);
void su_snap_free(su_snap *s);

/* ---- the engine's modules opened by hand, as tp_open does ---- */

typedef struct su_engine {
	store *st;
	log_mgr *lg;
	io_file *data;
	buf_pool *bp;
	txn_mgr *tm;
	rec_result rec; /* what recovery did at open */
} su_engine;

/* Opens store with a pool of frames pages and recovers it. */
int su_engine_open(const char *store_dir, size_t frames, su_engine *e);
int su_engine_checkpoint(su_engine *e);
/* Checkpoints and closes (open transactions are dropped first). */
int su_engine_close(su_engine *e);
/* Closes writing nothing more, as if the process died. */
void su_engine_crash(su_engine *e);

/* Opens the log of a store read-only (no tail repair) from its log start;
 * *st is left open for the caller (store_close it). */
int su_log_open_ro(const char *store_dir, store **st, log_mgr **lg);
/* Counts the records from the log start of a store (read-only). */
int su_log_count(const char *store_dir, uint64_t *n);

/* ---- children ---- */

#define SU_CHILD_FAIL 3
/* In a child: report a failed check and exit with SU_CHILD_FAIL. */
#define SU_CK(c)                                                                                                       \
	do {                                                                                                           \
		if (!(c))                                                                                              \
			su_child_fail(__FILE__, __LINE__, #c);                                                         \
	} while (0)
_Noreturn void su_child_fail(const char *file, int line, const char *what);
/* Forks, runs fn(arg) in the child (exit 0 if it returns); returns the
 * child's exit status, or 128 + signal. */
int su_run_child(void (*fn)(void *arg), void *arg);

#endif
