/*
 * fs_lock -- who uses a store, and what is mounted where: the store lock
 * that keeps one tpfsd per store and keeps `tpfs check` and `tpfs recover`
 * off a store in use, and the kernel's mount table as tpfsd needs it to
 * mount only where nothing of tpfs is (issue 25: 3, 4, 5, 8).
 *
 * The store lock is a flock on the store directory: exclusive for a writer
 * (tpfsd, tpfs recover), shared for a reader (tpfs check).  Its holder is
 * found in /proc/locks, its mounts in /proc/self/mountinfo (the source
 * column of a tpfs mount is the store's absolute path, tpfsd's fsname).
 * Messages go to stderr, each beginning with the caller's prefix.
 */
#ifndef TPFS_FS_LOCK_H
#define TPFS_FS_LOCK_H

#include <stddef.h>

/* How long a store lock is waited for when its holder is not serving a
 * mount (a daemon closing the store after an unmount, a check): seconds;
 * TPFS_LOCK_WAIT in the environment overrides it. */
#define FS_LOCK_WAIT_S 120

/* Takes the lock of store (an absolute path) for a writer (shared = 0) or
 * a reader (shared = 1).  A holder that serves a mount of the store is
 * final: "in use by tpfsd (pid N), mounted on M", and -1.  Any other holder
 * is waited for (a daemon closing the store after `fusermount3 -u` returns
 * holds it for a while), saying so once; after the bound, -1 naming it.
 * Returns the lock's file descriptor (close it to let go), or -1 after
 * printing why, prefixed by who ("tpfsd", "tpfs check"). */
int fs_lock_store(const char *store, int shared, const char *who);

/* The pid holding the lock of the store directory store, 0 if none; its
 * command name into comm (at least 32 bytes). */
int fs_lock_holder(const char *store, char *comm, size_t size);

/* The top mount at mnt (absolute, as the kernel shows it): 1 and its type
 * (fuse.tpfs), source and FUSE connection (-1 if not FUSE), or 0 if
 * nothing is mounted there.  Reads mountinfo only: never touches the mount,
 * which may be dead or hung. */
int fs_mount_at(const char *mnt, char *type, size_t tsize, char *source, size_t ssize, long *conn);

/* Where store is mounted (the newest mount whose source is store): 1 and
 * its mount point, or 0. */
int fs_mounted_on(const char *store, char *mnt, size_t size);

#endif
