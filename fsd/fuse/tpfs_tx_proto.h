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
 *   tpfs.tx.status.all.page.BEFORE, tpfs.tx.status.all.json.page.BEFORE
 *                          (version 2) one page of the list: the
 *                          transactions whose id is below BEFORE (0: from
 *                          the newest), newest first, at most
 *                          TPFS_TX_PAGE_MAX bytes; answer "0 page NEXT\nTEXT":
 *                          ask again with BEFORE = NEXT until NEXT is 0.
 *                          The pages' TEXTs one after the other are the
 *                          report (JSON: one document).  Every transaction
 *                          open from the first page to the last is in it
 *                          once; one begun meanwhile is not.
 *   tpfs.tx.version        (version 2) "0 VERSION": TPFS_TX_PROTO_VERSION
 *
 * Any other name under tpfs.tx. fails with ENODATA, as an attribute the
 * root does not have (since version 2; before, an unknown status.X was
 * taken for status).  A known verb with a bad argument is answered, e.g.
 * "22 begin: no process id given".
 *
 * Size probes (version 2): begin, commit and abort are carried out only
 * when their answer can be delivered.  A probe (size 0, as getfattr(1)
 * sends before it asks) is answered TPFS_TX_ANSWER_MAX and changes
 * nothing; a buffer under TPFS_TX_ANSWER_MAX fails with ERANGE and
 * changes nothing.  (Version 1 carried the action out at the probe, so
 * getfattr ran it twice.)  status and version change nothing: a probe gets
 * the answer's length.
 *
 * Answer (the attribute's value, text): "ERRNO MESSAGE" where ERRNO is a
 * decimal errno, 0 on success.  On success MESSAGE is the payload: begin
 * gives the transaction id, status its report; otherwise MESSAGE says why,
 * naming the transaction and the cause, e.g.
 *   "0 42"
 *   "16 process 1234 (bash) is already in transaction 41"
 *   "35 transaction 42 was chosen as a deadlock victim: nothing was applied"
 * The getxattr call itself fails only if the channel does (no such mount,
 * ERANGE for a buffer under TPFS_TX_ANSWER_MAX: retry larger) or the name
 * is not a request (ENODATA).  A whole status.all that would not fit in an
 * xattr (64 KiB) is answered EOVERFLOW: a client asks for pages.
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
 *   EAGAIN  begin: the caller's user has as many open transactions as
 *           tpfsd -o max_user_tx= lets a user have, or the table is full
 *           (a reserve of it is root's: root can always begin)
 *   EOVERFLOW status.all: too long for one answer (ask for pages)
 */
#ifndef TPFS_TX_PROTO_H
#define TPFS_TX_PROTO_H

#define TPFS_TX_PREFIX "tpfs.tx."
#define TPFS_TX_BEGIN "tpfs.tx.begin."   /* followed by the decimal pid */
#define TPFS_TX_COMMIT "tpfs.tx.commit"
#define TPFS_TX_ABORT "tpfs.tx.abort"    /* optionally followed by .ID */
#define TPFS_TX_STATUS "tpfs.tx.status"  /* optionally followed by .all, .json, .all.json */
#define TPFS_TX_PAGE ".page."            /* after .all or .all.json, followed by BEFORE */
#define TPFS_TX_VERSION "tpfs.tx.version"

/* 1: the first; 2: size probes change nothing, unknown names fail with
 * ENODATA, status.all in pages, version. */
#define TPFS_TX_PROTO_VERSION 2

/* A page's text is at most this long; its answer at most 64 bytes more. */
#define TPFS_TX_PAGE_MAX 61440

/* A client's first buffer: answers are at most this long except status of
 * many transactions (then ERANGE; the client asks with size 0 and retries). */
#define TPFS_TX_ANSWER_MAX 4096

#endif
