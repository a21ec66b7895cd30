/*
 * lock -- the lock manager: S/X and intention locks (IS, IX, SIX) on
 * logical names (byte strings: an inode, a directory entry, a record) and
 * on pages, strict two-phase locking with release at commit or abort,
 * upgrade and downgrade, FIFO queues, immediate waits-for deadlock
 * detection with one victim per cycle, and per-owner timeouts.
 *
 * An owner is a transaction.  Its locks are chained to it, so releasing
 * them all costs in proportion to the locks held.  Latch and lock order:
 * lock/DESIGN.md.
 */
#ifndef TP_LOCK_H
#define TP_LOCK_H

#include <stddef.h>
#include <stdint.h>

typedef struct lock_mgr lock_mgr;
typedef struct lock_owner lock_owner;

enum lock_mode { LOCK_NL = 0, LOCK_IS, LOCK_IX, LOCK_S, LOCK_SIX, LOCK_X, LOCK_NMODES };

#define LOCK_KEY_MAX 512

/* lock_get flags */
enum { LOCK_NOWAIT = 1 << 0 }; /* fail with EAGAIN instead of waiting */

/* Set-up */
int lock_mgr_open(lock_mgr **out);
/* fn(ctx, -1) is called as a request starts to wait, fn(ctx, 1) when its
 * wait ends (granted or not); under the manager's mutex, so fn must not
 * call the manager. */
void lock_mgr_on_wait(lock_mgr *lm, void (*fn)(void *ctx, int delta), void *ctx);
/* All owners must be gone. */
void lock_mgr_close(lock_mgr *lm);

/* Owners: id orders them by age (larger is younger). */
int lock_owner_new(lock_mgr *lm, uint64_t id, lock_owner **out);
/* Releases everything the owner holds, then frees it. */
void lock_owner_free(lock_owner *o);
/* Makes an owner that holds and waits for nothing (lock_release_all) a new
 * owner, id, its timeout back to none: kept for reuse instead of freed.
 * Only its own thread may use it meanwhile. */
void lock_owner_renew(lock_owner *o, uint64_t id);
/* Waits longer than ms fail with TP_ETIMEOUT; 0 waits for ever. */
void lock_set_timeout(lock_owner *o, uint32_t ms);

/* Locking */
/* Acquires (or upgrades to include) mode on key.  Returns 0, EAGAIN with
 * LOCK_NOWAIT, TP_EDEADLOCK when chosen as a deadlock victim (the owner must
 * abort), or TP_ETIMEOUT. */
int lock_get(lock_owner *o, const void *key, size_t len, enum lock_mode mode, int flags);
/* lock_get of k1, then (once granted) of k2, waiting as needed, with the
 * manager's mutex taken once: a child lock under its parent's intention
 * lock.  *first says whether k1 was granted (when k2 failed). */
int lock_get_two(lock_owner *o, const void *k1, size_t l1, enum lock_mode m1, const void *k2, size_t l2,
		 enum lock_mode m2, int *first);
/* The same on page pgno of file `file`. */
int lock_page(lock_owner *o, uint32_t file, uint64_t pgno, enum lock_mode mode, int flags);
/* Early release, where a protocol allows it (B-tree internal pages, short
 * system transactions).  ENOENT if not held. */
int lock_release(lock_owner *o, const void *key, size_t len);
/* Lowers a held lock to mode (for example X to S).  ENOENT if not held,
 * EINVAL if mode is not weaker. */
int lock_downgrade(lock_owner *o, const void *key, size_t len, enum lock_mode mode);
/* Strict 2PL: everything at commit or abort. */
void lock_release_all(lock_owner *o);
/* Releases every lock of o but those whose names start with prefix (plen
 * bytes). */
void lock_release_except(lock_owner *o, const void *prefix, size_t plen);
/* Ends o's current wait, from another thread: its lock_get returns
 * TP_ETIMEOUT, as after a timeout.  For cycles that pass through waits the
 * manager cannot see (a caller knows one of its waiters blocks a holder
 * elsewhere).  1 if o was waiting. */
int lock_cancel(lock_owner *o);

/* Introspection */
/* The mode o holds on key (LOCK_NL if none). */
enum lock_mode lock_held_mode(lock_owner *o, const void *key, size_t len);
size_t lock_count(lock_owner *o);
/* The id of an owner that o waits for right now, or 0. */
uint64_t lock_waits_for(lock_owner *o);
const char *lock_mode_name(enum lock_mode m);
/* The weakest mode at least as strong as both (a covers b iff
 * lock_join(a, b) == a). */
enum lock_mode lock_join(enum lock_mode a, enum lock_mode b);

typedef struct lock_stats {
	uint64_t requests, waits, deadlocks, timeouts, objects;
	uint64_t allocs; /* requests and objects taken from malloc, not a free list */
} lock_stats;
void lock_stats_get(lock_mgr *lm, lock_stats *s);

#endif
