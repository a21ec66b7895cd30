/*
 * pcut -- a power cut under an unchanged tpfsd, for the fs crash tests.
 *
 * The engine's own crash simulator (core/io/io_sim.h) needs a daemon linked
 * with the testing library.  tpfsd is not, so this emulates the same model
 * from outside, at the system-call layer:
 *
 *   pcut_shim.so (LD_PRELOAD into tpfsd) journals, for every pwrite(2),
 *   pwritev(2) (as the one pwrite of its bytes) and ftruncate(2) on a
 *   regular file under PCUT_ENV_DIR (the store), the new bytes and the
 *   bytes (and size) they replace, before the call runs; and after every
 *   fdatasync(2)/fsync(2) of such a file, which of its records that sync
 *   covered (those journaled before the sync began).  Another way of
 *   writing a store file (write, writev, fallocate) marks the journal
 *   unusable, so that the test fails instead of emulating the wrong
 *   thing.  (core/io/io.c, the only code that writes the store, uses
 *   none of them, nor O_SYNC, O_DSYNC or mmap: io.c I6.)
 *
 *   pcut_apply (the test, after SIGKILL of the daemon) rolls each file back
 *   to its last sync by undoing its later records in reverse, then replays
 *   them in order as the simulator decides at a crash: a truncation is
 *   applied (metadata is durable at once, as in io_sim), each write is
 *   applied whole, dropped, or torn (a prefix of it); PCUT_DROP_ALL drops
 *   every unsynced write.  The moment of the cut is the test's SIGKILL, or
 *   the daemon's own at its Nth sync (PCUT_ENV_ARM), when the most writes
 *   are pending.  Names (create, rename, unlink) are durable at
 *   once, as in io_sim.
 */
#ifndef TPFS_PCUT_H
#define TPFS_PCUT_H

#include <stdint.h>

#define PCUT_ENV_JOURNAL "TPFS_PCUT_JOURNAL"
#define PCUT_ENV_DIR "TPFS_PCUT_DIR"
/* A file holding a number N: while it exists, the daemon kills itself
 * (SIGKILL) at its Nth fdatasync/fsync of a store file since the file
 * appeared, before that sync takes effect -- io_sim's crash at the Nth
 * sync.  Looked for at each sync: removing the file disarms. */
#define PCUT_ENV_ARM "TPFS_PCUT_ARM"

#define PCUT_MAGIC 0x50435554u

/* Journal record, followed by len new bytes then old_len old bytes (W), or
 * old_len old bytes (T). */
typedef struct pcut_rec {
	uint32_t magic;
	uint32_t kind;     /* 'W' write, 'T' truncate, 'S' sync, 'C' crash at a sync, '!' unusable */
	uint64_t seq;      /* record number */
	uint64_t dev, ino; /* the file */
	uint64_t off;      /* W: offset; T: new size; S: records below this seq are durable */
	uint64_t len;      /* W: bytes written */
	uint64_t old_size; /* W, T: the file's size before */
	uint64_t old_len;  /* W: old bytes at off; T: old bytes from the new size on */
} pcut_rec;

enum pcut_mode { PCUT_DROP_ALL, PCUT_RANDOM };

typedef struct pcut_stats {
	uint64_t files, pending, dropped, torn, kept;
	int at_sync; /* the daemon cut itself at a sync (PCUT_ENV_ARM) */
} pcut_stats;

/* Empties the journal before a daemon starts.  0, or -1. */
int pcut_reset(const char *journal);
/* Applies the power cut to the files under store (the daemon is dead).
 * 0, or -1 with a message on stderr (the journal is unusable). */
int pcut_apply(const char *journal, const char *store, uint64_t seed, enum pcut_mode mode, pcut_stats *st);

#endif
