/*
 * fsc_model -- the model, workload and checker of the file-system crash
 * tests (test_crash_fs.c): a tree of files and directories whose every
 * object names itself, the random plain calls a workload makes on a mount,
 * the oracle they leave, and the comparison of a recovered mount with it.
 *
 * Objects identify themselves, so a checker can tell which object a name
 * holds whatever renames happened:
 *   - a regular file's first FSC_HDR bytes are "TPFSOBJ nnnnnnn\n" (its
 *     id); files are created empty as "f<id>" and the header is the very
 *     next call, so an empty file is identified by that name;
 *   - a directory is named "d<id>" for life (directories only move).
 * Writes and truncations stay at or past FSC_HDR, so the header survives.
 *
 * Every call the workload makes is one model operation (fsc_op), applied
 * to the model only after it returned -- except a write(2) that starts
 * inside a page and goes past its end: the kernel may send the rest of
 * that first page as a request of its own (fuse_fill_write_pages stops
 * after a partial page that is not in the page cache), so such a write is
 * two operations, split at the page boundary, and a crash may keep the
 * first alone.  The oracle gets, with write(2):
 *   B i TEXT   before operation i (TEXT parses back with fsc_op_parse)
 *   A i        operation i returned success
 *   E i ERRNO  operation i failed (ENOTCONN/ECONNABORTED: the daemon died)
 *   S k KIND   a sync returned: everything up to state k (the state after
 *              operations 0..k-1) is durable.  KIND: f fsync, d fdatasync,
 *              D fsync of a directory, s syncfs
 *   H n        the workload now holds n orphans open (files whose last
 *              name it removed; written and fsync'd now and then, closed
 *              later: the daemon reclaims them at the last close or at the
 *              next mount)
 *   X          the workload found the mount dead and stopped
 */
#ifndef TPFS_FSC_MODEL_H
#define TPFS_FSC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define FSC_HDR 16
#define FSC_PATH 192
#define FSC_MAX_FILE (256 * 1024)
#define FSC_PAGE 4096 /* the kernel's page: how FUSE splits writes */

/* ---- random numbers ---- */
uint64_t fsc_mix(uint64_t x);
typedef struct fsc_rng {
	uint64_t s;
} fsc_rng;
uint64_t fsc_rand(fsc_rng *r);
uint64_t fsc_below(fsc_rng *r, uint64_t n);

/* ---- the model ---- */
typedef struct fsc_obj {
	char type; /* 0 never seen, 'f' file, 'd' directory */
	uint8_t *data;
	size_t size, cap;
	uint64_t chash; /* content hash, valid when chash_ok */
	int chash_ok;
} fsc_obj;

typedef struct fsc_ent {
	char path[FSC_PATH]; /* relative to the mount root, no leading '/' */
	uint32_t id;
} fsc_ent;

typedef struct fsc_model {
	fsc_obj *o; /* by id; id 0 is unused (the root) */
	uint32_t no;
	fsc_ent *e;
	size_t ne, ce;
} fsc_model;

void fsc_model_init(fsc_model *m);
void fsc_model_free(fsc_model *m);
void fsc_model_copy(fsc_model *dst, const fsc_model *src);
fsc_obj *fsc_obj_get(fsc_model *m, uint32_t id);
/* The entry index of path, or -1. */
long fsc_find(const fsc_model *m, const char *path);
/* Adds a name for id (type given); data copied when not NULL. */
void fsc_model_add(fsc_model *m, const char *path, uint32_t id, char type, const void *data, size_t size);
/* The object's signature: its type, sorted names, size and content; 0 when
 * it has no name. */
uint64_t fsc_sig(fsc_model *m, uint32_t id);
/* A short description of the object for messages. */
void fsc_describe(fsc_model *m, uint32_t id, char *buf, size_t size);

/* ---- operations ---- */
enum fsc_kind { FSC_CREATE, FSC_HDRW, FSC_WRITE, FSC_TRUNC, FSC_RENAME, FSC_UNLINK, FSC_LINK, FSC_MKDIR, FSC_RMDIR };

typedef struct fsc_op {
	int kind;
	char p[FSC_PATH], q[FSC_PATH];
	uint32_t id;
	uint64_t off, len, seed; /* write: off, len, seed; trunc: off is the size */
} fsc_op;

void fsc_op_format(const fsc_op *op, char *buf, size_t size);
int fsc_op_parse(const char *text, fsc_op *op); /* 0, or -1 */
/* Applies op to the model; the ids it changed go to ids (at most cap),
 * their count is returned. */
size_t fsc_apply(fsc_model *m, const fsc_op *op, uint32_t *ids, size_t cap);
/* The bytes a write puts at absolute file offset x. */
uint8_t fsc_byte(uint64_t seed, uint64_t x);
void fsc_header(uint32_t id, char out[FSC_HDR + 1]);

/* ---- the workload (a child process) ---- */
typedef struct fsc_wl_cfg {
	int rootfd;        /* the mount's root directory */
	int oracle;        /* append-only oracle file */
	uint64_t seed;
	uint32_t next_id;  /* ids from here on are new */
	unsigned round;    /* for fresh names */
	unsigned max_files, max_dirs;
	uint64_t max_ops;  /* stop after this many (0: until the mount dies) */
} fsc_wl_cfg;
/* Runs until the mount dies or max_ops; returns the exit status for the
 * child: 0 (stopped on a dead mount or max_ops), 1 (an unexpected error,
 * recorded in the oracle). */
int fsc_workload(fsc_model *m, const fsc_wl_cfg *cfg);

/* ---- the oracle ---- */
typedef struct fsc_oracle {
	fsc_op *ops;
	size_t n, cap;    /* operations begun */
	size_t acked;     /* operations acknowledged (A) */
	size_t s_all;     /* the last durable state by any sync */
	size_t s_nosyncfs;/* ...by a sync other than syncfs */
	size_t syncs[4];  /* f, d, D, s */
	int err_op;       /* an operation that failed unexpectedly, or -1 */
	int err_no;
	int dead;         /* the workload saw the mount die */
	int held;         /* orphans held open when it stopped */
} fsc_oracle;
int fsc_oracle_read(const char *path, fsc_oracle *o, char *msg, size_t msz);
void fsc_oracle_free(fsc_oracle *o);

/* ---- scanning a mount ---- */
typedef struct fsc_scan_ent {
	char path[FSC_PATH];
	uint32_t id;
	char type;
	uint64_t ino, nlink, size;
	uint8_t *data; /* files: the content (owned by the first name of the inode) */
	int owner;
} fsc_scan_ent;

typedef struct fsc_scan {
	fsc_scan_ent *e;
	size_t n, cap;
	uint64_t root_nlink;
} fsc_scan;
/* Reads the whole tree under root; 0, or -1 with msg (a stray entry, an
 * unreadable file, an I/O error). */
int fsc_scan_tree(const char *root, fsc_scan *s, char *msg, size_t msz);
void fsc_scan_free(fsc_scan *s);
/* The model the scan shows. */
void fsc_scan_model(const fsc_scan *s, fsc_model *m);

/* ---- the check ---- */
typedef struct fsc_verdict {
	int ok;          /* every object shows a state it had in [s, n] */
	int prefix;      /* ...and one state t in [s, n] explains all of them */
	size_t t_lo, t_hi; /* the states that explain all (when prefix) */
	size_t objects;  /* objects compared */
	char msg[8192];
} fsc_verdict;
/* Compares the scanned tree with the states m0 went through under ops[0..n)
 * from state s on (everything before s was acknowledged durable). */
void fsc_verify(const fsc_model *m0, const fsc_oracle *o, size_t s, const fsc_scan *sc, fsc_verdict *v);

#endif
