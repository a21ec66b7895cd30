/*
 * btree -- transaction-protected B-link trees: variable-length keys and
 * values, overflow pages for large values, cursors, logical undo, splits
 * as redo-only structure changes, and a verifier.
 *
 * A tree is named by its root page, which never moves.  Keys are ordered by
 * a comparator chosen by id (BT_CMP_BYTES: memcmp, shorter first on a tie;
 * BT_CMP_U64: 8-byte little-endian unsigned integers), because undo must
 * find the tree's order from the log alone.
 */
#ifndef TP_BT_H
#define TP_BT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "buf.h"
#include "txn.h"

typedef struct bt_tree bt_tree;
typedef struct bt_cursor bt_cursor;

enum { BT_CMP_BYTES = 0, BT_CMP_U64 = 1, BT_NCMP };

/* bt_put flags */
enum {
	BT_NOOVERWRITE = 1 << 0, /* EEXIST if the key is present */
	BT_APPEND = 1 << 1,      /* hint: keys arrive in order (split unevenly) */
	BT_ORDERED = 1 << 2,     /* overflow pages as ordered data (op.h) */
	BT_PATCH = 1 << 3,       /* same length, in overflow pages: only the
				    bytes that differ are changed and logged */
};

/* Trees */
/* Makes an empty tree in t; *root is its root page. */
int bt_create(txn *t, uint64_t *root);
/* A handle on the tree at root.  tm gives the pool and, for a tree used
 * without transactions (t == NULL in the calls below), the log end. */
int bt_open(txn_mgr *tm, uint64_t root, int cmp, bt_tree **out);
void bt_close(bt_tree *bt);
/* Records are not locked by the tree: the caller's locks cover them. */
void bt_set_nolock(bt_tree *bt);
uint64_t bt_root(const bt_tree *bt);
/* Frees every page of the tree (in t). */
int bt_drop(bt_tree *bt, txn *t);

/* Records.  With t, keys are locked (S to read, X to write) until t ends,
 * and every change is logged; with t == NULL the tree is unprotected, as
 * db(3) allowed: no locks, no log, no recovery. */
int bt_get(bt_tree *bt, txn *t, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
/* bt_get for a read-modify-write: the key is X-locked, not S (never upgraded). */
int bt_get_rmw(bt_tree *bt, txn *t, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
/* A hint: the leaves that hold the keys from lo to hi (or would) are
 * asked for in the background (buf_prefetch) -- those of them that one
 * parent page names -- so that a stream of gets whose leaves lie apart on
 * the disk does not wait for each.  Internal pages are latched briefly;
 * nothing is locked, read into the pool or returned. */
void bt_prefetch(bt_tree *bt, const void *lo, size_t lolen, const void *hi, size_t hilen);
int bt_put(bt_tree *bt, txn *t, const void *key, size_t klen, const void *val, size_t vlen, int flags);
int bt_delete(bt_tree *bt, txn *t, const void *key, size_t klen);
size_t bt_max_key(const bt_tree *bt);
/* Values of this many bytes or fewer take at most one overflow page. */
size_t bt_value_page(const bt_tree *bt);

/* Cursors: positioned by key, so a split or a concurrent change never makes
 * them lose their place.  Returned pointers are valid until the next call. */
enum { BT_SEEK_GE = 0, BT_SEEK_GT, BT_SEEK_LE, BT_SEEK_LT, BT_FIRST, BT_LAST };
int bt_cursor_open(bt_tree *bt, txn *t, bt_cursor **out);
/* Positions on the first key satisfying how relative to key. */
int bt_cursor_seek(bt_cursor *c, const void *key, size_t klen, int how);
int bt_cursor_next(bt_cursor *c);
int bt_cursor_prev(bt_cursor *c);
/* The current record; TP_ENOTFOUND when not positioned. */
int bt_cursor_get(bt_cursor *c, const void **key, size_t *klen, const void **val, size_t *vlen);
void bt_cursor_close(bt_cursor *c);

/* Checks */
typedef struct bt_verify_result {
	uint64_t pages, leaves, records, overflow_pages, levels, half_splits;
	uint64_t bytes_used, bytes_free;
} bt_verify_result;
/* Checks order, fences (high keys), sibling links, levels, free-space
 * accounting and overflow chains; calls seen(ctx, pgno) for every page of
 * the tree, so a caller can check that each allocated page is reachable.
 * TP_ECORRUPT with a message naming the page on the first problem. */
int bt_verify(bt_tree *bt, void (*seen)(void *ctx, uint64_t pgno), void *ctx, bt_verify_result *res);

#endif
