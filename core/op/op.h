/*
 * op -- the operation registry (LLADD): every log record type is an
 * operation with a redo, an undo and a printer, listed in ops.def.
 *
 * Normal processing changes a page only by logging a record and calling
 * that record's redo on the page (txn_update): the code that recovery runs
 * is the code that runs all the time.  Redo is page-oriented: it reads only
 * the record and the page r->pgno.  Undo may be logical: it performs the
 * inverse through txn_compensate, which logs it as a CLR.
 *
 * This module also owns the page operations (op_page.c): physical byte-range
 * set, page init, and page allocation in bitmap pages.
 *
 * Layers: the registry (op.c, op_get) is below txn -- txn and rec look an
 * operation up in it and call nothing else of op.  The page operations
 * (op_page.c) are above txn, as the B-tree is: they change pages through
 * txn_update and txn_compensate, take allocation state from the page
 * allocator (alloc.h) and register ordered pages with ord.h.
 */
#ifndef TP_OP_H
#define TP_OP_H

#include <stdint.h>
#include <stdio.h>

#include "buf.h"
#include "log.h"

typedef struct txn txn;
typedef struct txn_mgr txn_mgr;

enum {
	OPF_PAGE = 1 << 0,
	OPF_FULLPAGE = 1 << 1,
};

enum op_id {
#define OP(id, name, flags, redo, undo, print) OP_##name = id,
#include "ops.def"
#undef OP
	OP__END
};

typedef struct op_def {
	uint16_t id;
	const char *name;
	unsigned flags;
	/* 0, or TP_ECORRUPT when the record does not fit the page */
	int (*redo)(unsigned char *page, uint32_t page_size, const log_rec *r);
	int (*undo)(txn *t, const log_rec *r);
	void (*print)(FILE *out, const log_rec *r);
} op_def;

/* The operation of a record type, or NULL if unknown. */
const op_def *op_get(uint16_t id);
/* Prints one record: LSN, transaction, chain, type, page and arguments. */
void op_print(FILE *out, const log_rec *r);

/* Checkpoint record payload */
typedef struct op_ckpt_txn {
	uint64_t txid, first_lsn, last_lsn, undo_next;
} op_ckpt_txn;
typedef struct op_ckpt_page {
	uint64_t pgno, rec_lsn;
} op_ckpt_page;

/* ---- page operations (op_page.c) ---- */

/* Page allocation map: page 0 is the root page; then groups of G pages
 * (G = bits in a page body), each starting with its bitmap page. */
uint64_t op_group_pages(uint32_t page_size);
int op_is_bitmap(uint32_t page_size, uint64_t pgno);

/* Sets len bytes at off (an offset into the whole page, >= BUF_HDR). */
int op_page_set(txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len);
/* op_page_set for a page that may hold bytes no record has (ordered data):
 * a full-page image is logged first unless the page is known to be
 * rebuildable from the log (buf.h, B12). */
int op_page_patch(txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len);
/* Writes bytes into a page this transaction has just allocated and nobody
 * else can reach yet: logged without a before-image (its undo is the undo
 * of the allocation, which frees the page). */
int op_page_fill(txn *t, uint64_t pgno, uint32_t off, const void *data, uint32_t len);
/* Allocates a page and initializes it (zeroed body, the given type). */
int op_page_alloc(txn *t, uint16_t type, uint64_t *pgno);
int op_page_free(txn *t, uint64_t pgno);
/* Ordered data: allocates a page (the bitmap change is logged) and returns
 * it X-latched, zeroed but for its type, for the caller to fill in place
 * with bytes that are never logged -- every byte of [BUF_HDR, fill) it
 * must write itself (those are not zeroed first: a page of file data is
 * written whole, and zeroing it too was 5% of a large write's CPU); op_page_ordered_done releases it and
 * registers it to be written and synced before the log is next written
 * (ord.h, ord.c N1), so a commit that survives a crash finds the bytes.  O1: the
 * page LSN is the log's durable end minus one (the log is flushed first if
 * the page's earlier records are not durable yet): redo skips every record
 * of the page's earlier lives and applies every later one, even after a
 * crash that cut the log.  For file data, where logging every byte would
 * write it twice; never for pages redo must rebuild. */
int op_page_alloc_ordered(txn *t, uint16_t type, uint32_t fill, uint64_t *pgno, buf_page **pg);
int op_page_ordered_done(txn *t, buf_page *pg);
/* The same without a transaction or log, for unprotected trees. */
int op_page_alloc_unlogged(txn_mgr *tm, uint16_t type, uint64_t *pgno);
int op_page_free_unlogged(txn_mgr *tm, uint64_t pgno);
/* Is pgno allocated?  Bitmap pages and the root page are. */
int op_page_allocated(buf_pool *bp, uint64_t pgno, int *allocated);

/* The redo/undo/print functions named in ops.def */
int op_fpi_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int op_set_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int op_fill_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
void op_fill_print(FILE *out, const log_rec *r);
int op_init_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int op_alloc_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int op_free_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int op_set_undo(txn *t, const log_rec *r);
int op_alloc_undo(txn *t, const log_rec *r);
int op_free_undo(txn *t, const log_rec *r);
void op_print_none(FILE *out, const log_rec *r);
void op_print_ckpt(FILE *out, const log_rec *r);
void op_fpi_print(FILE *out, const log_rec *r);
void op_set_print(FILE *out, const log_rec *r);
void op_init_print(FILE *out, const log_rec *r);
void op_bit_print(FILE *out, const log_rec *r);

/* B-tree operations (btree/bt_page.c) */
int bt_init_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int bt_insert_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int bt_delete_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int bt_replace_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int bt_link_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int bt_rewrite_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int bt_rewrite_undo(txn *t, const log_rec *r);
int bt_insert_undo(txn *t, const log_rec *r);
int bt_delete_undo(txn *t, const log_rec *r);
int bt_replace_undo(txn *t, const log_rec *r);
int bt_patch_redo(unsigned char *page, uint32_t page_size, const log_rec *r);
int bt_patch_undo(txn *t, const log_rec *r);
void bt_patch_print(FILE *out, const log_rec *r);
void bt_init_print(FILE *out, const log_rec *r);
void bt_cell_print(FILE *out, const log_rec *r);
void bt_link_print(FILE *out, const log_rec *r);

/* Space: gives the disk blocks of free pages back to the file system
 * (holes), those whose freeing commit is older than before -- the redo
 * start of a completed checkpoint (alloc.c A4).  Runs of pages go in one
 * call; what it did in *sp. */
typedef struct op_space {
	uint64_t pages, calls; /* pages punched, in so many calls */
} op_space;
int op_page_return(txn_mgr *tm, uint64_t before, op_space *sp);

#endif
