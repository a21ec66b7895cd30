/*
 * tpfs_tx_proto.h -- the transaction control channel between tpfsd and its
 * clients (libtpfs_tx, txbegin, txcommit, txabort, txrun, txstatus).
 *
 * A request is one getxattr(2) on the mount's root directory; the attribute
 * name is the verb (and its argument), the value is the answer.  One FUSE
 * round trip per request, no open file, and only read permission on the
 * root is needed, so every user can reach it.  The daemon identifies the
 * caller by the request's pid/uid (fuse_req_ctx), and the caller's
 * transaction by its ancestry: the transaction bound to the caller or to
 * its nearest bound ancestor.
 *
 * Names:
 *   tpfs.tx.begin.PID      begin a transaction bound to process PID (the
 *                          caller or one of its ancestors; same user or root)
 *   tpfs.tx.commit         commit the caller's transaction (durable on return);
 *                          refused (EBUSY) while other members run
 *   tpfs.tx.commit.force   commit it all the same; those members are cut off
 *                          (their later calls fail with ECANCELED)
 *   tpfs.tx.abort          abort the caller's transaction
 *   tpfs.tx.abort.ID       abort transaction ID (its owner, or root)
 *   tpfs.tx.status         the caller's transaction, as text
 *   tpfs.tx.status.all     every transaction the caller may see (root: all)
 *   tpfs.tx.status.json    ... .status.all.json: the same as JSON
 *
 * Answer (the attribute's value, text): "ERRNO MESSAGE" where ERRNO is a
 * decimal errno, 0 on success.  On success MESSAGE is the payload: begin
 * gives the transaction id, status its report; otherwise MESSAGE says why,
 * naming the transaction and the cause, e.g.
 *   "0 42"
 *   "16 process 1234 (bash) is already in transaction 41"
 *   "35 transaction 42 was chosen as a deadlock victim: nothing was applied"
 * The getxattr call itself fails only if the channel does (no such mount,
 * ERANGE for a buffer under TPFS_TX_ANSWER_MAX: retry larger).
 *
 * Errnos a client should expect:
 *   EBUSY   begin: the process is already in a transaction
 *   EPERM   begin: PID is another user's, or not the caller or an ancestor
 *   ESRCH   begin: no such process; commit/abort/status: no transaction
 *   EBUSY   commit: other member processes still run (named); nothing
 *           changed, the transaction is still open
 *   EDEADLK commit: the transaction was a deadlock victim (retry it)
 *   ECONNABORTED commit: the transaction was aborted (its process exited,
 *           the administrator killed it, the daemon restarted)
 *   ENOSPC, EIO commit: the store is full / failed; nothing was applied
 *   EROFS   begin: the mount is read-only
 */
#ifndef TPFS_TX_PROTO_H
#define TPFS_TX_PROTO_H

#define TPFS_TX_PREFIX "tpfs.tx."
#define TPFS_TX_BEGIN "tpfs.tx.begin."   /* followed by the decimal pid */
#define TPFS_TX_COMMIT "tpfs.tx.commit"
#define TPFS_TX_ABORT "tpfs.tx.abort"    /* optionally followed by .ID */
#define TPFS_TX_STATUS "tpfs.tx.status"  /* optionally followed by .all, .json, .all.json */

/* A client's first buffer: answers are at most this long except status of
 * many transactions (then ERANGE; the client asks with size 0 and retries). */
#define TPFS_TX_ANSWER_MAX 4096

#endif
