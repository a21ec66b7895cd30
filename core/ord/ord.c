/*
 * ord -- ordered data (ord.h).
 *
 * Design
 *   An ordered page's bytes are never logged (op.h, op_page_alloc_ordered):
 *   only the records that make it reachable are.  So the page must be on
 *   disk before those records are: the log calls ord_barrier before it
 *   writes bytes appended after a registration (log.c L10), and the
 *   barrier writes the pages registered so far and syncs the page file.
 *   To spread the writes, ORD_EARLY registered pages are written at once
 *   (without a sync), while requests go on.
 *
 * Invariants
 *   N1  A page registered with ord_note is written and the page file
 *       synced by the log's barrier, before any log bytes appended after
 *       the registration reach a file.
 *       So a commit that survives a crash finds its ordered pages on disk.
 *   N2  The barrier waits for every early writer before it syncs.
 *       A page written early but not yet synced would otherwise be
 *       counted as durable.
 *
 * Lock order: od->mu, released before the pool is called.
 */
#include "ord.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* Registered ordered pages written early, before a barrier asks (4 MiB of
 * 4 KiB pages). */
#define ORD_EARLY 1024

struct ord {
	log_mgr *lg;
	buf_pool *bp;
	pthread_mutex_t mu;  /* N1: the ordered pages not yet written */
	pthread_cond_t cv;   /* an early writer finished */
	int busy;            /* early writers at work */
	int written;         /* pages written early since the last sync */
	buf_unlogged *pages; /* registered, not yet written */
	size_t n, cap;
};

/* The log's barrier (N1, log.c L10): writes the ordered pages registered so
 * far, waits for early writers (N2), and syncs the page file. */
static int ord_barrier(void *ctx)
{
	ord *od = ctx;
	pthread_mutex_lock(&od->mu);
	buf_unlogged *list = od->pages;
	size_t n = od->n;
	od->pages = NULL;
	od->n = od->cap = 0;
	while (od->busy)
		pthread_cond_wait(&od->cv, &od->mu);
	int need_sync = n || od->written;
	od->written = 0;
	pthread_mutex_unlock(&od->mu);
	int rc = n ? buf_write_unlogged(od->bp, list, n) : 0;
	if (need_sync && !rc)
		rc = buf_sync(od->bp);
	free(list);
	return rc;
}

/* Writes the ordered pages registered so far without syncing (od->mu held,
 * released and taken again): the disk works on them while requests go on,
 * and the barrier's sync has less to wait for. */
static void write_early(ord *od)
{
	buf_unlogged *list = od->pages;
	size_t n = od->n;
	od->pages = NULL;
	od->n = od->cap = 0;
	od->busy++;
	pthread_mutex_unlock(&od->mu);
	int rc = buf_write_unlogged(od->bp, list, n); /* a failure panics the log (B5) */
	(void)rc;
	free(list);
	pthread_mutex_lock(&od->mu);
	od->busy--;
	od->written = 1;
	pthread_cond_broadcast(&od->cv);
}

int ord_open(log_mgr *lg, buf_pool *bp, ord **out)
{
	ord *od = calloc(1, sizeof *od);
	if (!od)
		return ENOMEM;
	od->lg = lg;
	od->bp = bp;
	pthread_mutex_init(&od->mu, NULL);
	pthread_cond_init(&od->cv, NULL);
	log_set_barrier(lg, ord_barrier, od);
	*out = od;
	return 0;
}

void ord_close(ord *od)
{
	if (!od)
		return;
	if (!log_panicked(od->lg))
		(void)ord_barrier(od); /* for the log's last flush */
	log_set_barrier(od->lg, NULL, NULL);
	pthread_mutex_destroy(&od->mu);
	pthread_cond_destroy(&od->cv);
	free(od->pages);
	free(od);
}

int ord_note(ord *od, uint64_t pgno, uint64_t lsn)
{
	pthread_mutex_lock(&od->mu);
	if (od->n == od->cap) {
		size_t nc = od->cap ? 2 * od->cap : 256;
		buf_unlogged *n = realloc(od->pages, nc * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&od->mu);
			return ENOMEM;
		}
		od->pages = n;
		od->cap = nc;
	}
	od->pages[od->n++] = (buf_unlogged){.pgno = pgno, .lsn = lsn};
	if (od->n >= ORD_EARLY)
		write_early(od);
	pthread_mutex_unlock(&od->mu);
	return 0;
}
