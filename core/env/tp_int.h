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
	uint64_t ckpt_end;        /* log end after the last checkpoint (also read
				     atomically, without ckpt_mu) */
	uint64_t ckpt_ns;         /* when it was taken (likewise) */
	uint64_t seg_seen;        /* atomic: the log segment its end was last seen in (E1) */
	uint64_t space_pages, space_calls; /* under bg_mu: E3, pages punched, in calls */
	uint64_t ckpts, ckpts_bg; /* under bg_mu (statistics need not wait for a checkpoint) */
	/* opt.background: the checkpoint thread and what wakes it */
	pthread_t bg;
	int bg_running;           /* set before the thread starts, then read only */
	pthread_mutex_t bg_mu;    /* the fields below, and ckpts */
	pthread_cond_t bg_cv;     /* CLOCK_MONOTONIC */
	int bg_kick, bg_stop;
	int bg_kicked;            /* atomic: a kick is pending (commits skip bg_mu) */
	rec_result rec;
	int recovered;          /* this open found work for recovery (E2) */
};

struct tp_txn {
	tp_env *env;
	txn *t;
};

#endif
