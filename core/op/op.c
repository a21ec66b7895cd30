/*
 * op -- the registry of operations built from ops.def, the records of the
 * transaction manager and checkpoints, and the record printer.
 *
 * Checkpoint payload (OP_CKPT)
 *     0  8  redo_lsn: recovery's redo starts at or before this LSN
 *     8  8  next_txid
 *    16  8  scan_from: analysis starts here (the log end before the snapshot)
 *    24  4  n transactions, 28 4  m dirty pages
 *    32     n x {txid, first_lsn, last_lsn, undo_next}   (8 bytes each)
 *           m x {pgno, rec_lsn}                          (8 bytes each)
 */
#include "op.h"

#include <inttypes.h>

#include "util.h"

static const op_def ops[] = {
	[0] = {0, "PAD", 0, NULL, NULL, op_print_none},
#define OP(id_, name_, flags_, redo_, undo_, print_) [id_] = {id_, #name_, flags_, redo_, undo_, print_},
#include "ops.def"
#undef OP
};

const op_def *op_get(uint16_t id)
{
	if (id >= sizeof ops / sizeof ops[0] || !ops[id].name)
		return NULL;
	return &ops[id];
}

void op_print(FILE *out, const log_rec *r)
{
	const op_def *op = op_get(r->type);
	fprintf(out, "%12" PRIu64 "  txn %-6" PRIu64 " prev %-12" PRIu64 " %-10s", r->lsn, r->txid, r->prev_lsn,
		op ? op->name : "UNKNOWN");
	if (r->pgno != LOG_NOPAGE)
		fprintf(out, " page %" PRIu64, r->pgno);
	if (r->flags & LOG_CLR)
		fprintf(out, " CLR undo_next %" PRIu64, r->undo_next);
	if (op && op->print)
		op->print(out, r);
	else if (!op)
		fprintf(out, " type %u, %" PRIu32 " bytes", r->type, r->len);
	fputc('\n', out);
}

void op_print_none(FILE *out, const log_rec *r)
{
	(void)out;
	(void)r;
}

void op_print_ckpt(FILE *out, const log_rec *r)
{
	const unsigned char *p = r->data;
	if (r->len < 32) {
		fprintf(out, " (short: %" PRIu32 " bytes)", r->len);
		return;
	}
	uint32_t n = util_get32(p + 24), m = util_get32(p + 28);
	fprintf(out, " redo_lsn %" PRIu64 " next_txid %" PRIu64 " scan_from %" PRIu64 " active %" PRIu32
		     " dirty %" PRIu32,
		util_get64(p), util_get64(p + 8), util_get64(p + 16), n, m);
	if (r->len < 32 + 32ull * n)
		return;
	for (uint32_t i = 0; i < n && i < 8; i++)
		fprintf(out, " [txn %" PRIu64 " last %" PRIu64 "]", util_get64(p + 32 + 32 * i),
			util_get64(p + 32 + 32 * i + 16));
}
