/*
 * tp_int.h -- private to core/env: the environment and transaction handles
 * behind tp.h, shared by tp.c (stores, transactions, pages) and tp_tree.c
 * (records).
 */
#ifndef TP_INT_H
#define TP_INT_H

#include <pthread.h>
#include <stdint.h>

#include "buf.h"
#include "io.h"
#include "lock.h"
#include "log.h"
#include "rec.h"
#include "store.h"
#include "tp.h"
#include "txn.h"

struct tp_env {
	char *path;
	tp_options opt;
	store *st;
	log_mgr *lg;
	io_file *data;
	buf_pool *bp;
	txn_mgr *tm;
	uint32_t psize;
	pthread_mutex_t ckpt_mu;  /* one checkpoint at a time; the fields below */
	uint64_t ckpt_end;        /* log end after the last checkpoint */
	uint64_t ckpt_ns;         /* when it was taken */
	uint64_t ckpts;
	rec_result rec;
	pthread_mutex_t txns_mu;  /* the list of open handles */
	struct tp_txn *txns;      /* freed by tp_close if the caller did not end them */
};

struct tp_txn {
	tp_env *env;
	txn *t;
	struct tp_txn *next, **pprev; /* env->txns, under env->txns_mu */
};

#endif
