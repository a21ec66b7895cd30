/*
 * store -- the store directory and its superblock: what files make a store,
 * the format version, and the two checkpoint master slots.
 *
 * `super` holds, in 512-byte sectors:
 *   sector 0: the superblock, written once by mkfs
 *     0  8  magic "TPFSSUPR"      8  4  format version     12  4  page size
 *    16  8  log segment size     24 16  uuid              40  8  created (s)
 *    48  2  length of logdir     50 ..  logdir ("" = STORE/log)
 *   508  4  CRC-32C of bytes 0..507
 *   sectors 1 and 2: master slots, written alternately by checkpoints
 *     0  8  magic "TPFSMSTR"      8  8  sequence           16  8  checkpoint LSN
 *    24  8  log start LSN        32  8  pages in the page file at the checkpoint
 *   508  4  CRC-32C of bytes 0..507
 *   The valid slot with the higher sequence wins, so a torn slot write
 *   leaves the previous checkpoint in force.
 */
#ifndef TP_STORE_H
#define TP_STORE_H

#include <stddef.h>
#include <stdint.h>

#define STORE_VERSION 1u
#define STORE_LOGDIR_MAX 400

typedef struct store store;

typedef struct store_super {
	uint32_t version, page_size;
	uint64_t seg_size, created;
	uint8_t uuid[16];
	char logdir[STORE_LOGDIR_MAX + 1]; /* absolute path of the log directory */
} store_super;

typedef struct store_master {
	uint64_t seq, ckpt_lsn, log_start;
	uint64_t data_pages; /* the page file held at least this many pages */
} store_master;

/* Writes the superblock and first master slot of a new store (dir exists). */
int store_create(const char *dir, const store_super *sb, const store_master *m);
/* Reads and checks the superblock and master; nothing is written. */
int store_open(const char *dir, int readonly, store **out);
void store_close(store *st);
const store_super *store_sb(const store *st);
const store_master *store_master_get(const store *st);
/* Writes the next master slot and syncs it. */
int store_master_put(store *st, uint64_t ckpt_lsn, uint64_t log_start, uint64_t data_pages);
/* S4: calls fn(arg, path, mode, want) for the store directory dir, the
 * log directory (logdir; NULL: the superblock's) and every file and
 * directory in them that group or others may access -- want is mode
 * without those bits; with tighten, after chmod'ing it to want -- and
 * counts them in *count.  Symbolic links are not followed, except to the
 * log directory.  0, or an error naming the path; a directory whose
 * superblock cannot be read is left alone (store_open's error). */
typedef void store_loose_fn(void *arg, const char *path, unsigned mode, unsigned want);
int store_private(const char *dir, const char *logdir, int tighten, store_loose_fn *fn, void *arg, unsigned *count);
/* dir/name into out. */
void store_path(const char *dir, const char *name, char *out, size_t n);

#endif
