/*
 * rec -- ARIES recovery (analysis, redo, undo) and fuzzy checkpoints.
 */
#ifndef TP_REC_H
#define TP_REC_H

#include <stdint.h>

#include "buf.h"
#include "log.h"
#include "store.h"
#include "txn.h"

typedef struct rec_result {
	uint64_t from_lsn, to_lsn; /* redo start and end of log */
	uint64_t records;          /* records scanned by analysis and redo */
	uint64_t redone;           /* records applied by redo */
	uint64_t losers;           /* transactions rolled back */
	uint64_t undone;           /* records written by undo (CLRs) */
	uint64_t ms;
} rec_result;

/* Recovers from the checkpoint at ckpt_lsn: builds the transaction table
 * (*tm, created here with the next free transaction id), repeats history
 * into the pool, rolls back the losers.  Pages are left dirty in the pool;
 * the caller checkpoints.  progress: a recovery that takes longer than
 * half a second shows how far each pass is on stderr, if stderr is a
 * terminal. */
int rec_recover(log_mgr *lg, buf_pool *bp, uint64_t ckpt_lsn, int progress, txn_mgr **tm, rec_result *res);

/* Takes a fuzzy checkpoint: writes back dirty pages, logs the transaction
 * and dirty-page tables, moves the master, recycles unneeded segments.
 * *ckpt_lsn is the new checkpoint's LSN; *log_start the log start it kept
 * (R3: at or before its redo start and every open transaction's first
 * record -- no recovery from now on reads a record older). */
int rec_checkpoint(log_mgr *lg, buf_pool *bp, txn_mgr *tm, store *st, uint64_t *ckpt_lsn, uint64_t *log_start);

/* Whether the checkpoint at ckpt_lsn left recovery nothing to do by
 * itself: it names no open transaction and no dirty page (a clean close's
 * does; a fuzzy one taken while transactions ran may not, even when no
 * record follows it).  0 also when it cannot be read. */
int rec_ckpt_quiet(log_mgr *lg, uint64_t ckpt_lsn);

/* Logs the first checkpoint of a new store (next transaction id 1). */
int rec_first_checkpoint(log_mgr *lg, uint64_t *ckpt_lsn);

#endif
