/*
 * io_sim -- crash simulator and fault injector for the io seam.
 *
 * Part of the testing library (libtptest), never linked into the product.
 * iosim_install() replaces the POSIX backend of io.h with one that:
 *
 *   - keeps every write since a file's last io_sync in memory, in order
 *     (reads see them: the simulated page cache), and applies them to the
 *     real file only at io_sync.  The real file plays the disk; the sim does
 *     not call fsync, so crash tests run fast.
 *   - at a crash point (the Nth io_sync, before it takes effect, or the Nth
 *     pass through a named io_point) decides under its seed, for each
 *     pending write of each file: apply it whole, drop it, or tear it (apply
 *     only a prefix that ends inside a 512-byte sector), then _exit()s with
 *     IOSIM_CRASH_EXIT.  That is a power cut that loses unsynced writes.
 *   - models io_punch as a pending write of zeros that keeps the size (a
 *     crash may apply all of it, none, or a prefix of whole 4 KiB blocks).
 *   - injects a fault at the Kth data call (pread, pwrite, sync, truncate,
 *     punch, counted together from 1): EIO, ENOSPC, or a short transfer.
 *
 * Names (mkdir, rename, unlink, creation) take effect at once and are
 * durable, as on a file system that journals metadata synchronously.
 * Truncation is applied at once and trims the pending writes past the new
 * size.
 *
 * State is per process; a crash test forks a child per crash point.
 */
#ifndef TP_IO_SIM_H
#define TP_IO_SIM_H

#include <stdint.h>

#define IOSIM_CRASH_EXIT 86

enum iosim_fault {
	IOSIM_FAULT_EIO = 1,
	IOSIM_FAULT_ENOSPC, /* on pwrite/truncate; EIO on other calls */
	IOSIM_FAULT_SHORT,  /* pread/pwrite transfer part of the request */
};

/* Installing resets every counter, arming and fault; seed drives the crash. */
void iosim_install(uint64_t seed);
void iosim_uninstall(void);

/* Crash arming: 0 disarms. */
void iosim_crash_at_sync(uint64_t n);
void iosim_crash_at_point(const char *name, uint64_t nth);
/* Applies, drops or tears every pending write under the seed, then _exit. */
_Noreturn void iosim_crash_now(void);

/* Counters since install. */
uint64_t iosim_syncs(void);
uint64_t iosim_calls(void);
/* Hole punches (io_punch) the simulator took since install. */
uint64_t iosim_punches(void);
uint64_t iosim_point_hits(const char *name);

/* Fault at data call number call (1-based); sticky: every later call of the
 * same class fails too (a full disk stays full).  0 disarms. */
void iosim_fault_at(uint64_t call, enum iosim_fault kind, int sticky);
/* A full disk (1) or not (0): while full, no file grows -- a pwrite past a
 * file's end and a truncate to a larger size fail with ENOSPC, writes
 * inside a file's size succeed (see io_sim.c).  Reset by install. */
void iosim_disk_full(int full);
/* How many faults were injected so far. */
uint64_t iosim_faults(void);

/* Applies every pending write of every open file, as a sync would. */
void iosim_flush_all(void);

#endif
