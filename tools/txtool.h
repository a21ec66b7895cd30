/*
 * txtool -- what the shell commands of transactions (txbegin, txcommit,
 * txabort, txstatus) share: their MOUNTPOINT operand and how they report
 * the answer of the daemon.
 */
#ifndef TPFS_TXTOOL_H
#define TPFS_TXTOOL_H

#include <stddef.h>

/* The optional MOUNTPOINT operand, argv[optind..argc): the tpfs mount
 * containing it (or the current directory, or $TPFS_MOUNT...); with own,
 * the mount where the caller is in a transaction (tpfs_tx_find_own).
 * 0: found; 1: not found, said on stderr as "PROG: why"; 2: more than one
 * operand (the caller prints its usage). */
int txtool_mount(const char *prog, int argc, char **argv, int optind, int own, char *mount, size_t size);

/* The exit status of a request that returned rc with message msg:
 * 1 with "PROG: MOUNT: msg" on stderr if rc != 0; else 0, with the same
 * line on stdout when verbose. */
int txtool_done(const char *prog, const char *mount, int rc, const char *msg, int verbose);

/* Prints "PROG (tpfs) VERSION" on stdout; returns 0 (the exit status). */
int txtool_version(const char *prog);

#endif
