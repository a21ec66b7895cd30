/*
 * bt_model -- an in-memory model of a B-tree's logical contents for the
 * B-tree tests: a sorted array of key/value records under the engine's
 * comparators, seek semantics identical to the cursor's, snapshots of a
 * real tree through a cursor, and deterministic value bytes.
 *
 * Nothing here calls cr_assert (usable in forked children): functions
 * return 0 or an error code and describe a difference in `why`.
 */
#ifndef TP_TEST_BT_MODEL_H
#define TP_TEST_BT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

typedef struct btm_rec {
	unsigned char *k, *v;
	size_t kl, vl;
} btm_rec;

typedef struct btm {
	int u64;          /* keys compare as TP_TREE_U64 trees do */
	btm_rec *r;       /* sorted, strictly increasing keys */
	size_t n, cap;
} btm;

/* The engine's orders: bytes (memcmp, shorter first on a tie) or, for two
 * 8-byte keys of a u64 tree, little-endian unsigned integers. */
int btm_cmp(int u64, const void *a, size_t al, const void *b, size_t bl);

void btm_init(btm *m, int u64);
void btm_free(btm *m);
void btm_clear(btm *m);
int btm_copy(btm *dst, const btm *src); /* dst initialized; 0 or ENOMEM */

/* First index whose key is >= k; *found if equal. */
size_t btm_find(const btm *m, const void *k, size_t kl, int *found);
const btm_rec *btm_get(const btm *m, const void *k, size_t kl);
int btm_put(btm *m, const void *k, size_t kl, const void *v, size_t vl); /* 0 or ENOMEM */
int btm_del(btm *m, const void *k, size_t kl);                            /* 1 if it was there */

/* The index a cursor seek (TP_SEEK_GE .. TP_LAST) lands on, or -1. */
long btm_seek(const btm *m, const void *k, size_t kl, int how);

/* 1 if equal; else 0 and the first difference in why. */
int btm_equal(const btm *want, const btm *got, char *why, size_t n);

/* Loads the whole tree through a cursor in t (may be NULL) into m
 * (emptied first), checking that keys strictly increase.  0, an engine
 * code, or TP_ECORRUPT with why set on an order problem. */
int btm_load(btm *m, tp_txn *t, tp_tree *tr, char *why, size_t n);
/* Walks the tree backward from TP_LAST and checks it gives exactly m's
 * records in reverse.  0, an engine code, or TP_ECORRUPT with why. */
int btm_check_backward(const btm *m, tp_txn *t, tp_tree *tr, char *why, size_t n);

/* Deterministic bytes for value seed s. */
void btm_fill(void *buf, size_t len, uint64_t s);
/* splitmix64 step. */
uint64_t btm_rand(uint64_t *s);

/* "k[len]=6b6579..." (at most 24 bytes shown) into out. */
const char *btm_keystr(const void *k, size_t kl, char *out, size_t n);

#endif
