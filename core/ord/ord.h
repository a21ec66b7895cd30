/*
 * ord -- ordered data: pages written in place without logging their bytes
 * (op_page_alloc_ordered), registered here, are written and the page file
 * synced before the log is next written (N1 of ord.c).
 *
 * A small module the log calls back: ord_open registers its barrier with
 * the log (log_set_barrier), so the log never calls the pool or the
 * transaction manager itself.  Calls: ord -> buf.
 */
#ifndef TP_ORD_H
#define TP_ORD_H

#include <stdint.h>

#include "buf.h"
#include "log.h"

typedef struct ord ord;

/* Registers the barrier with lg. */
int ord_open(log_mgr *lg, buf_pool *bp, ord **out);
/* Runs the barrier a last time (unless the log panicked), for the log's
 * last flush, then unregisters it and frees od. */
void ord_close(ord *od);
/* Registers page pgno, just written without logging its bytes (its LSN
 * lsn), to be written and synced before the log is next written (N1) --
 * unless it was logged since (freed and reused). */
int ord_note(ord *od, uint64_t pgno, uint64_t lsn);

#endif
