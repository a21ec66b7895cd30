/*
 * bt_int.h -- private to the btree module: the page format and helpers
 * shared by bt_page.c (page operations, redo, undo), bt.c (search, update,
 * split), bt_cursor.c and bt_verify.c.
 *
 * B-tree page (after the BUF_HDR bytes owned by buf):
 *    16  2  nslots
 *    18  2  level: 0 for leaves
 *    20  4  cell_start: lowest byte of the cell area (cells grow down)
 *    24  4  frag: bytes of dead cells inside the cell area
 *    28  2  high key length, or BT_HK_INF: no upper bound (rightmost page)
 *    30  2  high key offset (in the cell area)
 *    32  8  right sibling (B-link), 0 at the right edge of a level
 *    40  8  leftmost child (internal pages): keys below the first key
 *    48  8  tree: the root page of the tree the page belongs to
 *    56  2  low fence length, or BT_HK_INF: no lower bound (leftmost page)
 *    58  2  low fence offset (in the cell area)
 *    60  4  0
 *    64  .. slot array: u16 offsets of cells, in key order
 *
 * Cell:   0 2 key length   2 1 flags (BT_CF_OVF)   3 1 0   4 4 value length
 *         8 .. key, then the payload: the value (leaf), or the first
 *         overflow page (leaf, BT_CF_OVF; value length is the whole value),
 *         or the child page (internal), 8 bytes each.
 *
 * Overflow page: BUF_HDR, then u64 next page, u32 bytes here, the bytes.
 *
 * Invariants (each rule is its first sentence; the lines under it say why)
 *   P1  Keys in a page are strictly increasing in slot order.
 *       A search is a binary search, and a key has one place.
 *   P2  Every key in a page is at or above its low fence and below its high
 *       key, and a page's high key is its right sibling's low fence.
 *       A page reached through a stale pointer (after a merge freed it) is
 *       recognized by its tree, level and fences, and the search restarts.
 *   P3  An internal cell (k, c): every key in c's subtree is >= k and below
 *       the next cell's key; the leftmost child holds the keys below the
 *       first cell's key.
 *       A descent takes one child per level.
 *   P4  cell_start + the live cells + frag account for the whole cell area.
 *       No byte of a page is lost or counted twice as cells come and go.
 *   P5  Every cell is at most a sixth of the page body and every key (so
 *       every fence) at most an eighth.
 *       A full page holds at least four cells, and a split always leaves
 *       room for the cell that caused it.
 *   P6  A page a merge or a root collapse frees is first rewritten as no
 *       tree's (tree 0, no cells), and one a rollback frees is zeroed
 *       (op_page.c).
 *       Its old fences would still fit keys that now live elsewhere; so a
 *       page that looks like a live page of the tree covering a key is one.
 */
#ifndef TP_BT_INT_H
#define TP_BT_INT_H

#include <string.h>

#include "bt.h"
#include "lock.h"
#include "util.h"

#define BT_PT_LEAF 0x4c42     /* "BL" */
#define BT_PT_INTERNAL 0x4942 /* "BI" */
#define BT_PT_OVERFLOW 0x4f42 /* "BO" */

#define BT_H_NSLOTS 16
#define BT_H_LEVEL 18
#define BT_H_CSTART 20
#define BT_H_FRAG 24
#define BT_H_HKLEN 28
#define BT_H_HKOFF 30
#define BT_H_RIGHT 32
#define BT_H_LEFT 40
#define BT_H_TREE 48
#define BT_H_LOLEN 56
#define BT_H_LOOFF 58
#define BT_HDR 64
#define BT_HK_INF 0xffffu

#define BT_CELL_HDR 8
#define BT_CF_OVF 1

#define BT_OVF_HDR (BUF_HDR + 12)

struct bt_tree {
	txn_mgr *tm;
	buf_pool *bp;
	uint64_t root;
	int cmp;
	uint32_t psize;
	size_t max_cell;    /* P5 */
	size_t max_key;
	int nolock;         /* bt_set_nolock */
	uint64_t hint;      /* atomic: the leaf the last search ended in (leaf_for) */
};

/* ---- page accessors ---- */

static inline unsigned bt_nslots(const unsigned char *p) { return util_get16(p + BT_H_NSLOTS); }
static inline unsigned bt_level(const unsigned char *p) { return util_get16(p + BT_H_LEVEL); }
static inline uint64_t bt_right(const unsigned char *p) { return util_get64(p + BT_H_RIGHT); }
static inline uint64_t bt_leftmost(const unsigned char *p) { return util_get64(p + BT_H_LEFT); }
static inline unsigned char *bt_cell(unsigned char *p, unsigned i) { return p + util_get16(p + BT_HDR + 2 * i); }
static inline const unsigned char *bt_ccell(const unsigned char *p, unsigned i)
{
	return p + util_get16(p + BT_HDR + 2 * i);
}
static inline unsigned bt_cklen(const unsigned char *c) { return util_get16(c); }
static inline const unsigned char *bt_ckey(const unsigned char *c) { return c + BT_CELL_HDR; }
static inline uint32_t bt_cvlen(const unsigned char *c) { return util_get32(c + 4); }
static inline int bt_covf(const unsigned char *c) { return c[2] & BT_CF_OVF; }
static inline const unsigned char *bt_cpayload(const unsigned char *c) { return c + BT_CELL_HDR + bt_cklen(c); }
/* Child page of an internal cell. */
static inline uint64_t bt_cchild(const unsigned char *c) { return util_get64(bt_cpayload(c)); }
/* Bytes of a cell on a page of the given level. */
static inline size_t bt_csize(const unsigned char *c, unsigned level)
{
	size_t pay = level ? 8 : bt_covf(c) ? 8 : bt_cvlen(c);
	return BT_CELL_HDR + bt_cklen(c) + pay;
}
static inline int bt_hk_inf(const unsigned char *p) { return util_get16(p + BT_H_HKLEN) == BT_HK_INF; }
static inline int bt_lo_inf(const unsigned char *p) { return util_get16(p + BT_H_LOLEN) == BT_HK_INF; }
static inline uint64_t bt_tree_of(const unsigned char *p) { return util_get64(p + BT_H_TREE); }

/* What a page is, apart from its cells: BT_INIT's arguments and bt_format's. */
typedef struct bt_shape {
	unsigned level;
	uint64_t right, leftmost, tree;
	const void *low; /* lowlen BT_HK_INF: no lower bound */
	unsigned lowlen;
	const void *hk;  /* hklen BT_HK_INF: no upper bound */
	unsigned hklen;
} bt_shape;
void bt_shape_of(const unsigned char *p, bt_shape *s);

/* ---- bt_page.c: page-local primitives, deterministic (redo runs them) ---- */

int bt_cmp(int cmp, const void *a, size_t alen, const void *b, size_t blen);
/* First slot whose key is >= key; *found if equal. */
unsigned bt_search(const unsigned char *p, int cmp, const void *key, size_t klen, int *found);
/* Is key at or above the page's high key (so it belongs further right)? */
int bt_beyond(const unsigned char *p, int cmp, const void *key, size_t klen);
/* The child of internal page p that covers key. */
uint64_t bt_child_for(const unsigned char *p, int cmp, const void *key, size_t klen);
size_t bt_free_space(const unsigned char *p);
void bt_format(unsigned char *p, uint32_t psize, const bt_shape *s);
/* Inserts the cell at slot i (compacting if needed); the caller checked
 * bt_free_space >= len + 2. */
void bt_put_cell(unsigned char *p, uint32_t psize, unsigned i, const void *cell, size_t len);
void bt_del_cell(unsigned char *p, unsigned i);
void bt_compact(unsigned char *p, uint32_t psize);

/* Arguments of BT_INIT: a whole page's content, the n cells given.  out
 * needs room for 32 bytes, both fences and the cells. */
size_t bt_init_args(unsigned char *out, const bt_shape *s, const unsigned char *const *cells, unsigned n);
/* Is key inside the page's fences (low <= key, and key < high unless
 * below_high is 0)?  pred: the search is for the keys just below key. */
int bt_in_fences(const unsigned char *p, int cmp, const void *key, size_t klen, int pred);

/* ---- bt.c, for cursors, verify and undo ---- */

typedef struct bt_descent {
	int pred, inf;                 /* in: predecessor search; toward +infinity */
	int have_low;                  /* out: low is set */
	unsigned char low[LOCK_KEY_MAX]; /* out: low fence of the page reached */
	size_t lowlen;
} bt_descent;
int bt_descend(bt_tree *bt, const void *key, size_t klen, unsigned target, int x, bt_descent *d, buf_page **out);
int bt_ovf_read(bt_tree *bt, uint64_t pgno, uint32_t vlen, void *out, size_t cap);
int bt_check_page(bt_tree *bt, buf_page *pg);


enum { BT_DO_INSERT, BT_DO_DELETE, BT_DO_REPLACE, BT_DO_PATCH };
/* Applies a cell change to whichever leaf holds the key now, logging the
 * leaf change as a CLR with undo_next (compensation for logical undo). */
int bt_compensate(txn *t, uint64_t root, int cmp, int what, const unsigned char *cell, size_t len,
		  uint64_t undo_next);

/* Leaf-change record arguments: u64 root, u16 cmp, u16 slot, then for
 * INSERT/DELETE the cell, for REPLACE u32 old length, old cell, new cell,
 * for PATCH u16 klen, the key, u32 offset in the cell, u32 n, the n bytes
 * there before, the n bytes after (a same-size replace: LIBTP's before and
 * after images of the bytes changed, not of the record). */
#define BT_ARG_HDR 12

#endif
