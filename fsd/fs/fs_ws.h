/*
 * fs_ws -- a user transaction's write set: the records it put or deleted,
 * kept out of the store until commit (DESIGN.md 3: "a private write set
 * merged over committed state").  Private to the fs layer.
 *
 * A write set is an ordered map from (tree, key) to a value or a deletion
 * mark.  Small values live in memory; larger ones (file blocks) in an
 * unnamed temporary file next to the store, so a transaction may write far
 * more than memory holds.  Changes are grouped per call: ws_call_end(ws, 0)
 * keeps what the call did, ws_call_end(ws, rc != 0) undoes it, so a call
 * that fails half way leaves the transaction as it was (fs.c F1 for
 * members).  One thread at a time (the transaction's mutex).
 *
 *   Y1  A key present in the map shadows the store: a value replaces the
 *       stored record, a deletion mark hides it.  A key absent from the map
 *       reads through to the store.
 *   Y2  Nodes are never freed before the write set: an undone insertion
 *       only marks its node absent, so iterators stay valid.
 */
#ifndef TPFS_FS_WS_H
#define TPFS_FS_WS_H

#include <stddef.h>
#include <stdint.h>

typedef struct fs_ws fs_ws;
typedef struct ws_node ws_node;

/* Trees of a write set: the store's five, and the directory deltas of
 * fs_dir_touch (key: inode, value: ws_delta). */
enum { WS_INODE, WS_DIRENT, WS_DATA, WS_XATTR, WS_ORPHAN, WS_DELTA, WS_NTREES };

typedef struct ws_delta {
	int32_t nlink;          /* links gained (negative: lost) */
	int64_t sec;            /* mtime = ctime = this, when touched */
	uint32_t nsec, touched;
} ws_delta;

/* spill_dir: where the temporary file goes (the store). */
int ws_create(const char *spill_dir, fs_ws **out);
void ws_destroy(fs_ws *ws);

/* Lookup: 1 and the value (up to cap bytes copied, *vlen the whole
 * length) for a value, 0 for a deletion mark, -1 if the key is absent
 * (read the store), or a positive errno (the spill file failed). */
int ws_get(fs_ws *ws, int tree, const void *key, size_t klen, void *val, size_t cap, size_t *vlen);
/* Puts a value (val != NULL) or a deletion mark (val == NULL). */
int ws_put(fs_ws *ws, int tree, const void *key, size_t klen, const void *val, size_t vlen);

/* Calls: every change between ws_call_begin and ws_call_end belongs to the
 * call; undo != 0 takes them back. */
void ws_call_begin(fs_ws *ws);
void ws_call_end(fs_ws *ws, int undo);

/* Iteration in key order (bytewise) within one tree; absent nodes are
 * skipped, deletion marks are returned (ws_node_is_del). */
ws_node *ws_seek(fs_ws *ws, int tree, const void *key, size_t klen, int gt);
ws_node *ws_next(fs_ws *ws, ws_node *n);
int ws_node_tree(const ws_node *n);
const unsigned char *ws_node_key(const ws_node *n, size_t *klen);
int ws_node_is_del(const ws_node *n);
/* The node's value into buf (cap bytes at most); *vlen its length. */
int ws_node_value(fs_ws *ws, const ws_node *n, void *buf, size_t cap, size_t *vlen);

/* Accounting for txstatus */
uint64_t ws_records(const fs_ws *ws);
uint64_t ws_bytes(const fs_ws *ws);

#endif
