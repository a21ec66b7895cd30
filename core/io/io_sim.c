/*
 * io_sim -- crash simulator and fault injector behind the io seam.
 *
 * Design
 *
 * iosim_install() puts sim_backend in place of the POSIX backend.  The real
 * file plays the disk; a list of pending writes per file plays the page
 * cache.  Each store file is one sim_file, keyed by its inode (st_dev,
 * st_ino) so that every io_open of the same file -- twice at once, or
 * closed and reopened, or under another spelling of the path, or after a
 * rename -- shares one list of pending writes.  (Keying by the path string
 * would give a renamed-over path the old file's pending list.)
 *
 *   pwrite    appends {off, len, copy of the data} to the file's list.
 *   pread     reads the real file (zeros past its end) and lays the pending
 *             writes over it, oldest first, so the newest write wins.
 *   size      max(real size, end of the furthest pending write).
 *   sync      the Nth sync crashes first if armed; otherwise the pending
 *             writes are applied to the real file with plain pwrite (no
 *             fsync: the real file is the disk) and dropped from memory.
 *   punch     appends {off, len, no data} marked as a punch: reads see
 *             zeros, size ignores it, sync punches the real file (or
 *             writes zeros there); a crash applies it whole, drops it, or
 *             applies a prefix of whole 4 KiB blocks (a punch is not torn
 *             inside a block: the file system frees whole blocks).
 *   truncate  ftruncate of the real file at once (metadata is durable at
 *             once); pending writes past the new size are dropped or
 *             clipped, so they can neither be read nor reach the disk.
 *   names     mkdir, rename, unlink and sync_dir go straight to the POSIX
 *             backend: durable at once.
 *
 * A crash (the Nth sync, the Nth hit of an armed io_point, or
 * iosim_crash_now) walks every sim_file -- open or retained, see I15 -- and
 * every pending write in order and, with a splitmix64 generator seeded by
 * iosim_install, applies it whole, drops it, or tears it (each 1/3).  A torn
 * write applies a prefix of p bytes with 1 <= p < len and off + p not a
 * multiple of 512: the cut lands inside a sector.  A write that cannot be
 * torn that way (len 1, or len 2 whose only cut is a sector boundary) is
 * dropped instead.  Then _exit(IOSIM_CRASH_EXIT), without stdio flushing or
 * atexit handlers: a power cut.  Applying a later write and dropping an
 * earlier one models reordering.
 *
 * Faults: every data call (pread, pwrite, sync, truncate, punch) increments
 * sim.calls first, counted from 1 since install; the call whose number is
 * the armed K gets the fault and fixes the fault's kind of call.  EIO fails
 * with EIO; ENOSPC fails pwrite and truncate with ENOSPC and pread and sync
 * with EIO; SHORT makes a pread or pwrite of more than one byte transfer
 * half of it (at least 1 byte) and succeed; on a sync, truncate or punch, or a
 * one-byte transfer, SHORT does nothing.  A failing call changes nothing
 * (a failed sync leaves the pending writes pending).  Sticky: every later
 * call of the same kind as call K (pread, pwrite, sync or truncate) gets
 * the same fault.  iosim_faults counts calls that actually failed or were
 * shortened.
 *
 * Counting: crash_at_sync(n) and crash_at_point(name, n) compare n with the
 * counts since install (iosim_syncs, iosim_point_hits), so arming for a
 * count already passed never fires.  A sync that crashes is counted; the
 * sync count includes syncs that a fault then fails.
 *
 * A full disk (iosim_disk_full): while it is set, a pwrite that would make
 * a file longer than it is (its size as sim_size gives it) and a truncate
 * that would grow one fail with ENOSPC, and change nothing; writes inside a
 * file's size go on, as on a file system with no free block left, where
 * only blocks a file holds already can be written.  The call is counted as
 * usual; the full disk is not an injected fault (iosim_faults).
 *
 * iosim_uninstall restores POSIX and applies every pending write (a clean
 * shutdown: the page cache reaches the disk); files still open keep their
 * sim_file and keep working through this backend until io_close.
 *
 * Threads: one mutex, sim.mu, guards all state below, including the real
 * file I/O the sim does, so each sim call is atomic with respect to the
 * others.  pthread_atfork keeps the mutex usable in a forked child.
 *
 * Invariants
 *
 * I13  For each sim_file, the bytes a reader sees are the real file's bytes
 *     with the pending writes applied in list order over them; sync, flush
 *     and crash apply them to the real file in that same order.
 * I14  At most one sim_file per inode; its fd is open for writing whenever a
 *     handle that may write has been opened on it, so pending writes can
 *     always be applied.
 * I15  A sim_file lives while a handle is open on it or while it has pending
 *     writes (a closed file's unsynced writes are still at the mercy of a
 *     crash; close does not make data durable).  A retained sim_file keeps
 *     its fd, so its inode cannot be reused while it is in the table.
 * I16  No pending write extends past a size the file was truncated to after
 *     the write was made.
 * I17  The crash check of the Nth sync happens before that sync applies
 *     anything.
 * I18  The crash decisions depend only on the seed and the sequence of
 *     pending writes: the same workload under the same seed crashes the
 *     same way.
 */
#include "io_sim.h"
#include "io.h"
#include "util.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define SIM_SECTOR 512
#define SIM_MAX_POINTS 64 /* distinct io_point names counted */

enum sim_op { SIM_PREAD = 1, SIM_PWRITE, SIM_SYNC, SIM_TRUNCATE, SIM_PUNCH };
#define SIM_PUNCH_GRAIN 4096 /* a punch a crash cut ends at a multiple of it */

typedef struct sim_write {
	struct sim_write *sw_next; /* next younger write of the file */
	uint64_t sw_off;
	size_t sw_len;             /* > 0; clipped by truncate (I16) */
	int sw_punch;              /* a hole punched: zeros, no data below */
	unsigned char sw_data[];
} sim_write;

typedef struct sim_file {
	struct sim_file *sf_next;  /* in sim.files, oldest first */
	dev_t sf_dev;              /* key with sf_ino (I14) */
	ino_t sf_ino;
	int sf_fd;                 /* real file; O_RDWR if sf_writable */
	int sf_writable;
	unsigned sf_opens;         /* open handles; 0 means retained (I15) */
	sim_write *sf_head;        /* pending writes, oldest first */
	sim_write *sf_tail;
	char *sf_path;             /* path of the first open, for messages */
} sim_file;

typedef struct sim_handle {
	sim_file *sh_file;
	int sh_rdonly;             /* opened IO_RDONLY: pwrite/truncate refused */
} sim_handle;

typedef struct sim_point {
	char *sp_name;
	uint64_t sp_hits;
} sim_point;

static struct {
	pthread_mutex_t mu;
	/* everything below under mu */
	sim_file *files;
	uint64_t rng;              /* splitmix64 state, seeded at install (I18) */
	uint64_t calls, syncs, faults, punches;
	uint64_t crash_sync;       /* 0 disarmed */
	char *crash_point;         /* NULL disarmed */
	uint64_t crash_point_nth;
	uint64_t crash_point_hits; /* hits of crash_point since install */
	uint64_t fault_call;       /* K, 0 disarmed */
	enum iosim_fault fault_kind;
	int fault_sticky;
	enum sim_op fault_op;      /* kind of call K, once it happened; else 0 */
	int full;                  /* iosim_disk_full: no file may grow */
	sim_point points[SIM_MAX_POINTS];
	unsigned npoints;
} sim = { .mu = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t sim_once = PTHREAD_ONCE_INIT;

static void sim_lock(void) { pthread_mutex_lock(&sim.mu); }
static void sim_unlock(void) { pthread_mutex_unlock(&sim.mu); }

static void sim_atfork_init(void)
{
	pthread_atfork(sim_lock, sim_unlock, sim_unlock);
}

/* ------------------------------------------------------------------ */
/* Helpers, all called with sim.mu held                                */

static uint64_t sim_rand(void) /* splitmix64 */
{
	uint64_t z = (sim.rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Writes all of buf to the real file. */
static int sim_write_all(int fd, const unsigned char *buf, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, buf, len, (off_t)off);
		int rc = n < 0 ? errno : 0;
		if (rc == EINTR)
			continue;
		if (rc != 0)
			return rc;
		if (n == 0)
			return EIO;
		buf += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads len bytes of the real file; zeros past its end. */
static int sim_read_all(int fd, unsigned char *buf, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t n = pread(fd, buf, len, (off_t)off);
		int rc = n < 0 ? errno : 0;
		if (rc == EINTR)
			continue;
		if (rc != 0)
			return rc;
		if (n == 0)
			break;
		buf += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	memset(buf, 0, len);
	return 0;
}

static int sim_size_locked(sim_file *sf, uint64_t *out)
{
	struct stat st;
	uint64_t size;

	if (fstat(sf->sf_fd, &st) < 0)
		return errno;
	size = (uint64_t)st.st_size;
	for (sim_write *w = sf->sf_head; w != NULL; w = w->sw_next)
		if (!w->sw_punch && w->sw_off + w->sw_len > size) /* a punch keeps the size */
			size = w->sw_off + w->sw_len;
	*out = size;
	return 0;
}

static void sim_free_writes(sim_file *sf)
{
	sim_write *w = sf->sf_head, *next;

	for (; w != NULL; w = next) {
		next = w->sw_next;
		free(w);
	}
	sf->sf_head = sf->sf_tail = NULL;
}

/* Punches [off, off+len) of the real file, or writes zeros there where it
 * has no holes; never past its end (the punch kept the size). */
static int sim_zero_all(int fd, uint64_t off, size_t len)
{
	static const unsigned char zeros[SIM_PUNCH_GRAIN];
	struct stat st;
	if (fstat(fd, &st) < 0)
		return errno;
	if (off >= (uint64_t)st.st_size)
		return 0;
	if ((uint64_t)st.st_size - off < len)
		len = (size_t)((uint64_t)st.st_size - off);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof zeros ? len - done : sizeof zeros;
		int rc = sim_write_all(fd, zeros, n, off + done);
		if (rc != 0)
			return rc;
		done += n;
	}
	return 0;
}

/* Applies the first len bytes of pending write w to the real file. */
static int sim_put(sim_file *sf, const sim_write *w, size_t len)
{
	return w->sw_punch ? sim_zero_all(sf->sf_fd, w->sw_off, len) : sim_write_all(sf->sf_fd, w->sw_data, len, w->sw_off);
}

#ifndef NDEBUG
/* Checks I14-I16 for sf; called only inside assert, with sim.mu held. */
static int sim_check_file(const sim_file *sf)
{
	const sim_write *w, *last = NULL;
	unsigned same = 0;

	for (const sim_file *o = sim.files; o != NULL; o = o->sf_next)
		same += o->sf_dev == sf->sf_dev && o->sf_ino == sf->sf_ino;
	if (same != 1 || sf->sf_fd < 0)
		return 0; /* I14 */
	if (sf->sf_opens == 0 && sf->sf_head == NULL)
		return 0; /* I15: a clean closed file is freed */
	for (w = sf->sf_head; w != NULL; w = w->sw_next) {
		if (w->sw_len == 0 || w->sw_off + w->sw_len < w->sw_off)
			return 0; /* I16 keeps every write non-empty */
		last = w;
	}
	return sf->sf_tail == last;
}
#endif

/* Applies the pending writes of sf in order (I13) and forgets them.  On a
 * failure of the real file the writes not yet applied stay pending. */
static int sim_apply(sim_file *sf)
{
	sim_write *w;
	int rc;

	while ((w = sf->sf_head) != NULL) {
		if ((rc = sim_put(sf, w, w->sw_len)) != 0)
			return rc;
		sf->sf_head = w->sw_next;
		free(w);
	}
	sf->sf_tail = NULL;
	return 0;
}

/* Unlinks sf from sim.files, closes its fd and frees it. */
static void sim_file_free(sim_file *sf)
{
	sim_file **pp = &sim.files;

	while (*pp != NULL && *pp != sf)
		pp = &(*pp)->sf_next;
	if (*pp == sf)
		*pp = sf->sf_next;
	sim_free_writes(sf);
	close(sf->sf_fd);
	free(sf->sf_path);
	free(sf);
}

/* Applies every pending write; frees retained files that are now clean. */
static void sim_flush_locked(void)
{
	sim_file *sf = sim.files, *next;

	for (; sf != NULL; sf = next) {
		next = sf->sf_next;
		if (sim_apply(sf) != 0)
			util_err(EIO, "iosim: flush of %s failed", sf->sf_path);
		if (sf->sf_opens == 0 && sf->sf_head == NULL)
			sim_file_free(sf);
	}
}

/* The power cut: apply, drop or tear each pending write, then _exit. */
_Noreturn static void sim_crash_locked(void)
{
	for (sim_file *sf = sim.files; sf != NULL; sf = sf->sf_next) {
		for (sim_write *w = sf->sf_head; w != NULL; w = w->sw_next) {
			size_t len = w->sw_len;
			if (w->sw_punch) { /* whole, not at all, or a prefix of whole blocks */
				uint64_t r = sim_rand() % 3, blocks = (len + SIM_PUNCH_GRAIN - 1) / SIM_PUNCH_GRAIN;
				len = r == 0 ? len : r == 1 || blocks < 2 ? 0 : (size_t)(1 + sim_rand() % (blocks - 1)) * SIM_PUNCH_GRAIN;
				if (len > 0)
					(void)sim_put(sf, w, len);
				continue;
			}
			switch (sim_rand() % 3) {
			case 0: /* whole */
				break;
			case 1: /* dropped */
				len = 0;
				break;
			default: /* torn inside a sector */
				len = w->sw_len > 1 ? 1 + (size_t)(sim_rand() % (w->sw_len - 1)) : 0;
				if (len > 0 && (w->sw_off + len) % SIM_SECTOR == 0) {
					/* neighbours of a sector boundary are not on one */
					if (len > 1)
						len--;
					else if (len + 1 < w->sw_len)
						len++;
					else
						len = 0;
				}
				break;
			}
			if (len > 0)
				(void)sim_put(sf, w, len);
		}
	}
	_exit(IOSIM_CRASH_EXIT);
}

/* The fault for this data call, if any: returns the errno to fail with, or
 * 0 with *shorten set when a pread/pwrite is to transfer half. */
static int sim_fault(enum sim_op op, int *shorten)
{
	int hit;

	*shorten = 0;
	if (sim.fault_call == 0)
		return 0;
	if (sim.calls == sim.fault_call) {
		sim.fault_op = op;
		hit = 1;
	} else {
		hit = sim.fault_sticky && sim.fault_op == op && sim.calls > sim.fault_call;
	}
	if (!hit)
		return 0;
	switch (sim.fault_kind) {
	case IOSIM_FAULT_EIO:
		sim.faults++;
		return EIO;
	case IOSIM_FAULT_ENOSPC:
		sim.faults++;
		return (op == SIM_PWRITE || op == SIM_TRUNCATE) ? ENOSPC : EIO;
	case IOSIM_FAULT_SHORT:
		*shorten = (op == SIM_PREAD || op == SIM_PWRITE);
		return 0; /* counted by the caller if it really shortens */
	}
	return 0;
}

/* Halves a transfer of n > 1 bytes for a SHORT fault. */
static size_t sim_shorten(size_t n)
{
	if (n <= 1)
		return n;
	sim.faults++;
	return n / 2;
}

static sim_point *sim_point_find(const char *name)
{
	for (unsigned i = 0; i < sim.npoints; i++)
		if (strcmp(sim.points[i].sp_name, name) == 0)
			return &sim.points[i];
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The backend                                                         */

static int sim_open(const char *path, int flags, void **h)
{
	sim_handle *sh = NULL;
	sim_file *sf = NULL;
	int fd = -1, rc;
	struct stat st;

	if ((sh = calloc(1, sizeof *sh)) == NULL)
		return ENOMEM;
	sh->sh_rdonly = (flags & IO_RDONLY) != 0;
	if ((rc = io_posix_open_fd(path, flags, &fd)) != 0) /* the product's modes (io.c I8) */
		goto err;
	if (fstat(fd, &st) < 0) {
		rc = errno;
		goto err;
	}

	sim_lock();
	for (sf = sim.files; sf != NULL; sf = sf->sf_next)
		if (sf->sf_dev == st.st_dev && sf->sf_ino == st.st_ino)
			break;
	if (sf != NULL) {
		if (!sh->sh_rdonly && !sf->sf_writable) { /* I14: upgrade */
			close(sf->sf_fd);
			sf->sf_fd = fd;
			sf->sf_writable = 1;
		} else {
			close(fd);
		}
		fd = -1;
	} else {
		if ((sf = calloc(1, sizeof *sf)) == NULL || (sf->sf_path = strdup(path)) == NULL) {
			free(sf);
			sim_unlock();
			rc = ENOMEM;
			goto err;
		}
		sf->sf_dev = st.st_dev;
		sf->sf_ino = st.st_ino;
		sf->sf_fd = fd;
		sf->sf_writable = !sh->sh_rdonly;
		fd = -1;
		sim_file **pp = &sim.files; /* append: oldest first */
		while (*pp != NULL)
			pp = &(*pp)->sf_next;
		*pp = sf;
	}
	sf->sf_opens++;
	sh->sh_file = sf;
	assert(sim_check_file(sf));
	sim_unlock();
	*h = sh;
	return 0;
err:
	if (fd >= 0)
		close(fd);
	free(sh);
	return rc;
}

static int sim_close(void *h)
{
	sim_handle *sh = h;
	sim_file *sf = sh->sh_file;

	sim_lock();
	if (--sf->sf_opens == 0 && sf->sf_head == NULL)
		sim_file_free(sf); /* else retained until sync, flush or crash (I15) */
	sim_unlock();
	free(sh);
	return 0;
}

static int sim_pread(void *h, void *buf, size_t len, uint64_t off, size_t *done)
{
	sim_handle *sh = h;
	sim_file *sf = sh->sh_file;
	unsigned char *p = buf;
	uint64_t size;
	size_t n;
	int rc, shorten;

	*done = 0;
	sim_lock();
	sim.calls++;
	if ((rc = sim_fault(SIM_PREAD, &shorten)) != 0)
		goto out;
	if ((rc = sim_size_locked(sf, &size)) != 0)
		goto out;
	if (off >= size || len == 0)
		goto out;
	n = size - off < len ? (size_t)(size - off) : len;
	if (shorten)
		n = sim_shorten(n);
	if ((rc = sim_read_all(sf->sf_fd, p, n, off)) != 0)
		goto out;
	for (sim_write *w = sf->sf_head; w != NULL; w = w->sw_next) { /* I13 */
		uint64_t lo = w->sw_off > off ? w->sw_off : off;
		uint64_t hi = w->sw_off + w->sw_len < off + n ? w->sw_off + w->sw_len : off + n;
		if (lo < hi && w->sw_punch)
			memset(p + (lo - off), 0, (size_t)(hi - lo));
		else if (lo < hi)
			memcpy(p + (lo - off), w->sw_data + (lo - w->sw_off), (size_t)(hi - lo));
	}
	*done = n;
out:
	sim_unlock();
	return rc;
}

/* Queues a pending write of len bytes at off on sf (I13): of data, or a
 * punch (data NULL: zeros, no data held).  0 or ENOMEM. */
static int sim_queue(sim_file *sf, uint64_t off, size_t len, const void *data)
{
	sim_write *w = malloc(sizeof *w + (data != NULL ? len : 0));

	if (w == NULL)
		return ENOMEM;
	w->sw_next = NULL;
	w->sw_off = off;
	w->sw_len = len;
	w->sw_punch = data == NULL;
	if (data != NULL)
		memcpy(w->sw_data, data, len);
	if (sf->sf_tail != NULL)
		sf->sf_tail->sw_next = w;
	else
		sf->sf_head = w;
	sf->sf_tail = w;
	return 0;
}

/* The start of a call that changes a file through handle sh: EBADF if sh is
 * read-only, else the fault armed for op (sim_fault). */
static int sim_writable(sim_handle *sh, enum sim_op op, int *shorten)
{
	if (sh->sh_rdonly)
		return EBADF;
	return sim_fault(op, shorten);
}

static int sim_pwrite(void *h, const void *buf, size_t len, uint64_t off, size_t *done)
{
	sim_handle *sh = h;
	sim_file *sf = sh->sh_file;
	int rc, shorten;

	*done = 0;
	sim_lock();
	sim.calls++;
	if ((rc = sim_writable(sh, SIM_PWRITE, &shorten)) != 0)
		goto out;
	if (len == 0)
		goto out;
	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off) {
		rc = EFBIG;
		goto out;
	}
	if (sim.full) { /* a full disk: no new blocks */
		uint64_t size;
		if ((rc = sim_size_locked(sf, &size)) != 0)
			goto out;
		if (off + len > size) {
			rc = ENOSPC;
			goto out;
		}
	}
	if (shorten)
		len = sim_shorten(len);
	if ((rc = sim_queue(sf, off, len, buf)) != 0)
		goto out;
	*done = len;
	assert(sim_check_file(sf));
out:
	sim_unlock();
	return rc;
}

static int sim_sync(void *h)
{
	sim_handle *sh = h;
	int rc, shorten;

	sim_lock();
	sim.calls++;
	sim.syncs++;
	if (sim.crash_sync != 0 && sim.syncs == sim.crash_sync)
		sim_crash_locked(); /* I17: before anything is applied */
	if ((rc = sim_fault(SIM_SYNC, &shorten)) == 0)
		rc = sim_apply(sh->sh_file);
	assert(sim_check_file(sh->sh_file));
	sim_unlock();
	return rc;
}

static int sim_size(void *h, uint64_t *out)
{
	sim_handle *sh = h;
	int rc;

	sim_lock();
	rc = sim_size_locked(sh->sh_file, out);
	sim_unlock();
	return rc;
}

static int sim_truncate(void *h, uint64_t size)
{
	sim_handle *sh = h;
	sim_file *sf = sh->sh_file;
	sim_write **pp, *w, *prev = NULL;
	int rc, shorten;

	sim_lock();
	sim.calls++;
	if (sh->sh_rdonly) {
		rc = EINVAL; /* what ftruncate says for a read-only fd */
		goto out;
	}
	if ((rc = sim_fault(SIM_TRUNCATE, &shorten)) != 0)
		goto out;
	if (size > (uint64_t)INT64_MAX) {
		rc = EFBIG;
		goto out;
	}
	if (sim.full) { /* a full disk: a file may shrink, not grow */
		uint64_t cur;
		if ((rc = sim_size_locked(sf, &cur)) != 0)
			goto out;
		if (size > cur) {
			rc = ENOSPC;
			goto out;
		}
	}
	do
		rc = ftruncate(sf->sf_fd, (off_t)size) < 0 ? errno : 0;
	while (rc == EINTR);
	if (rc != 0)
		goto out;
	for (pp = &sf->sf_head; (w = *pp) != NULL;) { /* I16 */
		if (w->sw_off >= size) {
			*pp = w->sw_next;
			free(w);
			continue;
		}
		if (w->sw_off + w->sw_len > size)
			w->sw_len = (size_t)(size - w->sw_off);
		prev = w;
		pp = &w->sw_next;
	}
	sf->sf_tail = prev;
	assert(sim_check_file(sf));
out:
	sim_unlock();
	return rc;
}

/* A punch is a pending write of zeros that keeps the size and holds no
 * data: reads see zeros at once, a sync makes it a hole of the real file,
 * and a crash applies all of it, none, or a prefix of whole 4 KiB blocks. */
static int sim_punch(void *h, uint64_t off, uint64_t len)
{
	sim_handle *sh = h;
	sim_file *sf = sh->sh_file;
	uint64_t size;
	int rc, shorten;

	sim_lock();
	sim.calls++;
	if ((rc = sim_writable(sh, SIM_PUNCH, &shorten)) != 0)
		goto out;
	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off) {
		rc = EFBIG;
		goto out;
	}
	if ((rc = sim_size_locked(sf, &size)) != 0)
		goto out;
	if (off >= size || len == 0)
		goto out;
	if (size - off < len)
		len = size - off;
	if ((rc = sim_queue(sf, off, (size_t)len, NULL)) != 0)
		goto out;
	sim.punches++;
	assert(sim_check_file(sf));
out:
	sim_unlock();
	return rc;
}

static int sim_mkdir(const char *path) { return io_posix_backend()->mkdir(path); }
static int sim_rename(const char *from, const char *to) { return io_posix_backend()->rename(from, to); }
static int sim_unlink(const char *path) { return io_posix_backend()->unlink(path); }
static int sim_sync_dir(const char *path) { return io_posix_backend()->sync_dir(path); }

static void sim_point_hit(const char *name)
{
	sim_point *sp;

	if (name == NULL)
		return;
	sim_lock();
	if ((sp = sim_point_find(name)) == NULL && sim.npoints < SIM_MAX_POINTS) {
		char *copy = strdup(name);
		if (copy != NULL) {
			sp = &sim.points[sim.npoints++];
			sp->sp_name = copy;
			sp->sp_hits = 0;
		}
	}
	if (sp != NULL)
		sp->sp_hits++;
	if (sim.crash_point != NULL && strcmp(sim.crash_point, name) == 0 &&
	    ++sim.crash_point_hits == sim.crash_point_nth)
		sim_crash_locked();
	sim_unlock();
}

static const io_backend sim_backend = {
	.open = sim_open,
	.close = sim_close,
	.pread = sim_pread,
	.pwrite = sim_pwrite,
	.sync = sim_sync,
	.size = sim_size,
	.truncate = sim_truncate,
	.punch = sim_punch,
	.mkdir = sim_mkdir,
	.rename = sim_rename,
	.unlink = sim_unlink,
	.sync_dir = sim_sync_dir,
	.point = sim_point_hit,
};

/* ------------------------------------------------------------------ */
/* Control                                                             */

static void sim_reset_locked(void)
{
	sim.calls = sim.syncs = sim.faults = sim.punches = 0;
	sim.crash_sync = 0;
	free(sim.crash_point);
	sim.crash_point = NULL;
	sim.crash_point_nth = sim.crash_point_hits = 0;
	sim.fault_call = 0;
	sim.fault_kind = 0;
	sim.fault_sticky = 0;
	sim.fault_op = 0;
	sim.full = 0;
	for (unsigned i = 0; i < sim.npoints; i++)
		free(sim.points[i].sp_name);
	sim.npoints = 0;
}

void iosim_install(uint64_t seed)
{
	pthread_once(&sim_once, sim_atfork_init);
	sim_lock();
	sim_reset_locked();
	sim.rng = seed;
	sim_unlock();
	io_set_backend(&sim_backend);
}

void iosim_uninstall(void)
{
	io_set_backend(NULL);
	sim_lock();
	sim_flush_locked();
	sim_reset_locked();
	sim_unlock();
}

void iosim_crash_at_sync(uint64_t n)
{
	sim_lock();
	sim.crash_sync = n;
	sim_unlock();
}

void iosim_crash_at_point(const char *name, uint64_t nth)
{
	sim_point *sp;
	char *copy = (name != NULL && nth != 0) ? strdup(name) : NULL;

	sim_lock();
	free(sim.crash_point);
	sim.crash_point = copy;
	sim.crash_point_nth = copy != NULL ? nth : 0;
	sp = copy != NULL ? sim_point_find(copy) : NULL;
	sim.crash_point_hits = sp != NULL ? sp->sp_hits : 0; /* since install */
	sim_unlock();
}

_Noreturn void iosim_crash_now(void)
{
	sim_lock();
	sim_crash_locked();
}

uint64_t iosim_syncs(void)
{
	uint64_t n;

	sim_lock();
	n = sim.syncs;
	sim_unlock();
	return n;
}

uint64_t iosim_punches(void)
{
	uint64_t n;

	sim_lock();
	n = sim.punches;
	sim_unlock();
	return n;
}

uint64_t iosim_calls(void)
{
	uint64_t n;

	sim_lock();
	n = sim.calls;
	sim_unlock();
	return n;
}

uint64_t iosim_point_hits(const char *name)
{
	sim_point *sp;
	uint64_t n;

	if (name == NULL)
		return 0;
	sim_lock();
	sp = sim_point_find(name);
	n = sp != NULL ? sp->sp_hits : 0;
	sim_unlock();
	return n;
}

void iosim_fault_at(uint64_t call, enum iosim_fault kind, int sticky)
{
	sim_lock();
	sim.fault_call = call;
	sim.fault_kind = call != 0 ? kind : 0;
	sim.fault_sticky = call != 0 && sticky;
	sim.fault_op = 0;
	sim_unlock();
}

void iosim_disk_full(int full)
{
	sim_lock();
	sim.full = full != 0;
	sim_unlock();
}

uint64_t iosim_faults(void)
{
	uint64_t n;

	sim_lock();
	n = sim.faults;
	sim_unlock();
	return n;
}

void iosim_flush_all(void)
{
	sim_lock();
	sim_flush_locked();
	sim_unlock();
}
