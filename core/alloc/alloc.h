/*
 * alloc -- the page allocator's state: where searches start (the hint and
 * the rover) and which free pages may not be taken yet (pages freed by open
 * transactions, T5 of alloc.c; pages freed by commits not yet durable, for
 * ordered data, A2).  The allocation itself -- the bitmap pages and their
 * logged records -- is an operation (op_page.c), which asks this module
 * where to look and what to skip.
 *
 * Calls: alloc -> log only.  txn reports a transaction's frees at its
 * commit and end; op and rec record frees and ask.
 */
#ifndef TP_ALLOC_H
#define TP_ALLOC_H

#include <stdint.h>

#include "log.h"

typedef struct alloc_mgr alloc_mgr;
/* The pages one open transaction freed: owned by this module, held by the
 * transaction (NULL until its first free). */
typedef struct alloc_freed alloc_freed;

/* Set-up */
int alloc_open(log_mgr *lg, alloc_mgr **out);
void alloc_close(alloc_mgr *am);

/* Where to search.  The hint: groups of pages below it had no free page
 * when last searched.  alloc_full moves it past a group found full; it
 * goes back to 0 (alloc_reset) whenever pages may have become free (a
 * transaction that freed pages or rolled back ended). */
uint64_t alloc_hint(alloc_mgr *am);
void alloc_full(alloc_mgr *am, uint64_t group);
void alloc_reset(alloc_mgr *am);
/* Where the next ordered search within a group starts: the page after the
 * last one allocated. */
uint64_t alloc_rover(alloc_mgr *am);
void alloc_set_rover(alloc_mgr *am, uint64_t pgno);

/* Frees of transactions */
/* Records that the transaction holding *f freed pgno (A1). */
int alloc_note_free(alloc_mgr *am, alloc_freed **f, uint64_t pgno);
/* The transaction holding f committed at lsn: its pages wait in the limbo
 * until the log is durable past lsn (A2). */
int alloc_committed(alloc_mgr *am, const alloc_freed *f, uint64_t lsn);
/* The transaction holding *f ended: its pages are free (A1); *f = NULL. */
void alloc_release(alloc_mgr *am, alloc_freed **f);

/* What to skip */
/* 1 if pgno, free in its bitmap, may not be taken yet: an open transaction
 * freed it (A1), or, for ordered data, a commit not yet durable (A2). */
int alloc_held(alloc_mgr *am, uint64_t pgno, int ordered);
/* A2 on a full disk: makes the commits whose freed pages wait in the limbo
 * durable (log_flush), so that ordered data can take those pages at once;
 * *flushed says whether any waited (then a new search finds them). */
int alloc_limbo_flush(alloc_mgr *am, int *flushed);

/* Space that goes back to the file system (alloc.c A4, A5) */
/* pgno was allocated: it is no longer a candidate. */
void alloc_taken(alloc_mgr *am, uint64_t pgno);
/* The candidates whose freeing commit is older than before, ascending, in
 * a malloc'ed array (*out NULL when none). */
int alloc_returnable(alloc_mgr *am, uint64_t before, uint64_t **out, size_t *n);
/* Takes n pages out of the candidates (returned, or found allocated). */
void alloc_forget(alloc_mgr *am, const uint64_t *pgnos, size_t n);
size_t alloc_returnable_count(alloc_mgr *am);
/* Whether chunk (op_page.c numbers them) is known to have its disk blocks;
 * alloc_chunk_mark says it is (1) or may not be (0). */
int alloc_chunk_known(alloc_mgr *am, uint64_t chunk);
void alloc_chunk_mark(alloc_mgr *am, uint64_t chunk, int known);

#endif
