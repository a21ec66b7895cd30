/*
 * tpfs_tx_int.h -- what the files of libtpfs_tx share and do not export:
 * writing the caller's message buffer.  tpfs_tx_mount.c finds mounts,
 * tpfs_tx.c speaks the control channel.
 */
#ifndef TPFS_TX_INT_H
#define TPFS_TX_INT_H

#include <stddef.h>

#define TPFS_TX_HIDDEN __attribute__((visibility("hidden")))

/* Formats into msg (msgsize bytes; nothing when msgsize is 0), truncating. */
TPFS_TX_HIDDEN void tpfs_tx_say(char *msg, size_t msgsize, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Appends to the message already in msg, truncating. */
TPFS_TX_HIDDEN void tpfs_tx_say_more(char *msg, size_t msgsize, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
