/*
 * tpfs_tx.h -- libtpfs_tx, the client library of tpfs transactions.
 *
 * A program begins, commits, aborts and inspects transactions on a tpfs
 * mount through this library, without the shell tools (txbegin, txcommit,
 * txabort, txrun, txstatus are built on it).  It owns two things:
 *
 *   - finding the mount: the tpfs mounts are the lines of
 *     /proc/self/mountinfo whose file system type is "fuse.tpfs";
 *   - the control channel (tpfs_tx_proto.h): each request is one
 *     getxattr(2) on the mount's root directory, whose name is the verb
 *     and whose value is the daemon's answer "ERRNO MESSAGE".
 *
 * A transaction is bound to a process; that process and all its
 * descendants (threads included) are its members.  The daemon identifies
 * the caller of every request by its process, so commit, abort and status
 * act on the transaction of the calling process or of its nearest bound
 * ancestor.  A transaction covers one mount.
 *
 * Conventions, for every function below:
 *   - The result is 0 on success or a positive errno value.  The errnos a
 *     daemon answers with are listed in tpfs_tx_proto.h; the library adds
 *     EPROTO (a malformed answer), ENOENT and ENOTUNIQ (finding a mount)
 *     and passes the errors of getxattr(2) through (ENOTCONN: the daemon is
 *     gone; ENODATA or ENOTSUP: the directory is not a tpfs mount (or
 *     no longer: a commit, abort or status then says that a transaction
 *     begun there was lost); EACCES; ENOENT...).
 *   - msg, msgsize: a caller-supplied buffer that receives a one-line
 *     message without a trailing newline, always NUL-terminated (truncated
 *     if need be; TPFS_TX_MSG_MAX bytes always suffice for the daemon's
 *     messages).  msg may be NULL when msgsize is 0.  On failure it says
 *     why: the daemon's own words (for example "process 1234 (bash) is
 *     already in transaction 41") or a local message.  The messages of the
 *     functions that take a mount do not repeat the mount's path: print
 *     them after it ("txbegin: /mnt/t: process 1234 (bash) is ...").  The
 *     messages of the functions that find a mount are complete sentences.
 *   - Outputs come last, before msg and msgsize.
 *   - The library keeps no state between calls: no globals, no open
 *     descriptors.  Every function is safe to call from several threads at
 *     once.  errno is unspecified after a call: use the result.
 */
#ifndef TPFS_TX_H
#define TPFS_TX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Large enough for every message the daemon sends (begin, commit, abort,
 * errors) and every local one. */
#define TPFS_TX_MSG_MAX 1024

/* The type column of /proc/self/mountinfo for a tpfs mount. */
#define TPFS_TX_FSTYPE "fuse.tpfs"

/* ---- finding the mount -------------------------------------------------- */

/*
 * tpfs_tx_find_mount -- the root directory of the tpfs mount to use.
 *
 * With path != NULL: the tpfs mount that holds path (any file or directory
 * inside the mount may be named, "." included); if /proc/self/mountinfo
 * lists no tpfs mount holding it, path itself (made absolute), so that a
 * mount whose type was renamed with -o subtype still works.  With
 * path == NULL, the first of:
 *   1. the tpfs mount containing the current directory;
 *   2. $TPFS_MOUNT (a path, resolved as above), when set and not empty;
 *   3. the only tpfs file system mounted (several mount points of one file
 *      system, such as bind mounts, count once).
 * A directory is contained in the mount whose mount point is its longest
 * prefix ending at a path component boundary (/mnt/a contains /mnt/a/x
 * but not /mnt/ab), and it counts as on a tpfs mount only when that mount
 * is a tpfs one.  For a bind mount of a subdirectory, the mount point of
 * the same file system's root is given when one is mounted.
 *
 * On success the absolute path is copied to mount (size bytes).
 *
 * Errors:
 *   ENOENT    path does not exist (or another error of realpath(3) is
 *             passed through); or, with path == NULL, no tpfs mount
 *             contains the current directory, $TPFS_MOUNT is not set and
 *             nothing of type fuse.tpfs is mounted
 *   ENOTUNIQ  path == NULL, the current directory is on no tpfs mount,
 *             $TPFS_MOUNT is not set, and several tpfs file systems are
 *             mounted (the message lists them): name one
 *   ENAMETOOLONG  the mount's path does not fit in size bytes
 *   EACCES, EIO, ENOMEM...  /proc/self/mountinfo cannot be read (only
 *             when path == NULL: with a path, the path itself is used)
 */
int tpfs_tx_find_mount(const char *path, char *mount, size_t size, char *msg, size_t msgsize);

/*
 * tpfs_tx_find_own -- the root of the tpfs mount that holds the calling
 * process's transaction.
 *
 * With path != NULL, exactly tpfs_tx_find_mount(path, ...): no request
 * is sent.  With path == NULL, the mount tpfs_tx_find_mount(NULL, ...)
 * chooses, when the caller has a transaction there (one status request);
 * otherwise every other tpfs mount is asked, and the one where the caller
 * has a transaction is given.  When no mount has one, the chosen mount is
 * given anyway (with result 0), so that the request the caller makes next
 * fails there with the daemon's explanation (which names the caller's last
 * transaction, if any).  txcommit, txabort and txstatus use this.  The
 * search asks every tpfs mount once: a mount whose daemon does not answer
 * makes it wait (as any access to that mount would).
 *
 * Errors: those of tpfs_tx_find_mount, when it found no mount and no
 * mount holds a transaction of the caller; ENOTUNIQ when no mount was
 * chosen and the caller has transactions on several mounts (the message
 * lists them).
 */
int tpfs_tx_find_own(const char *path, char *mount, size_t size, char *msg, size_t msgsize);

/* ---- finding the mount, in steps (for tests and other tools) ------------ */

/* The mounts of one mountinfo file: an opaque, read-only list. */
typedef struct tpfs_tx_mounts tpfs_tx_mounts;

/*
 * tpfs_tx_mounts_read -- read and parse a mountinfo file (the format of
 * proc(5), /proc/PID/mountinfo); mountinfo == NULL reads
 * /proc/self/mountinfo.  Every mount is kept (the tpfs ones and the others,
 * which decide what a directory is on); octal escapes such as "\040" (a
 * space) in paths are decoded; lines that do not parse are skipped.  Free
 * the list with tpfs_tx_mounts_free.
 *
 * Errors: the errno of fopen(3) or of reading (the message names the
 * file); ENOMEM.
 */
int tpfs_tx_mounts_read(const char *mountinfo, tpfs_tx_mounts **out, char *msg, size_t msgsize);

/* tpfs_tx_mounts_free -- free a list (NULL is accepted). */
void tpfs_tx_mounts_free(tpfs_tx_mounts *m);

/*
 * tpfs_tx_mounts_count, tpfs_tx_mounts_dir -- the tpfs mounts of the list,
 * in the file's order: how many, and the mount point of the i-th (0-based;
 * NULL when i is out of range).  The strings live as long as the list.
 * m == NULL is an empty list.
 */
size_t tpfs_tx_mounts_count(const tpfs_tx_mounts *m);
const char *tpfs_tx_mounts_dir(const tpfs_tx_mounts *m, size_t i);

/*
 * tpfs_tx_mounts_containing -- the root of the tpfs mount that the
 * absolute, canonical path dir is on, or NULL when dir is on no tpfs
 * mount.  Rules as in tpfs_tx_find_mount: the longest mount point that is
 * a prefix of dir at a component boundary (the later line among mounts of
 * the same point: it is on top), which must be of type fuse.tpfs; for a
 * bind mount of a subdirectory, a mount point of the same file system's
 * root when one is listed.  No system call.
 */
const char *tpfs_tx_mounts_containing(const tpfs_tx_mounts *m, const char *dir);

/*
 * tpfs_tx_mounts_choose -- tpfs_tx_find_mount's choice, with its inputs
 * given (no system call): path and env are absolute paths or NULL (env is
 * the value of $TPFS_MOUNT; "" counts as unset), cwd the current directory
 * or NULL.  Copies the chosen root to out (size bytes).
 *
 * Errors: ENOENT, ENOTUNIQ, ENAMETOOLONG as for tpfs_tx_find_mount.
 */
int tpfs_tx_mounts_choose(const tpfs_tx_mounts *m, const char *path, const char *cwd, const char *env, char *out,
			  size_t size, char *msg, size_t msgsize);

/* ---- transactions ------------------------------------------------------- */

/*
 * tpfs_tx_begin -- begin a transaction on mount (the mount's root
 * directory), bound to process pid: the calling process when pid is 0, or
 * one of its ancestors (txbegin binds its shell, getppid()).  The process
 * and all its descendants become members.  The transaction ends with
 * tpfs_tx_commit or tpfs_tx_abort, or is aborted when the bound process
 * exits first.  On success *id (if id != NULL) is the transaction's id and
 * msg holds it in decimal.  Bound to the calling process, it also reopens
 * the regular files of the mount the caller has open on descriptors 3 and
 * up (same file, access mode, O_APPEND and offset, on the same descriptor),
 * since a handle opened outside every transaction stays outside it: a
 * program may open its files once and then run transaction after
 * transaction.  (A reopened descriptor no longer shares its offset with
 * copies another process holds.)
 *
 * Errors:
 *   EBUSY   the process, or an ancestor of it, is already in a transaction
 *           on this mount
 *   EPERM   pid is neither the caller nor one of its ancestors, or belongs
 *           to another user (only root may bind another user's process)
 *   ESRCH   no such process
 *   EROFS   the mount is read-only
 *   EAGAIN  too many transactions are open on the mount
 *   EINVAL  pid < 0
 *   EPROTO  the daemon's answer is malformed
 *   and the channel's errors (see the conventions above).
 */
int tpfs_tx_begin(const char *mount, pid_t pid, uint64_t *id, char *msg, size_t msgsize);

/*
 * tpfs_tx_commit -- commit the caller's transaction on mount: on success
 * every change of the transaction is applied atomically and is durable;
 * msg says what was committed.  On failure nothing was applied and the
 * transaction has ended all the same (the message says why) -- except
 * EBUSY: other members still run, and nothing changed (see
 * tpfs_tx_commit_flags).
 *
 * Errors:
 *   ESRCH   the caller is in no transaction on this mount (the message
 *           names its last one, if any)
 *   EDEADLK the transaction was chosen as a deadlock victim: run it again
 *   ECONNABORTED  the transaction was aborted before (its bound process
 *           exited, an administrator aborted it, the daemon restarted)
 *   ENOSPC, EIO  the store is full / failed
 *   EPROTO  the daemon's answer is malformed; the outcome is unknown
 *   and the channel's errors.
 */
int tpfs_tx_commit(const char *mount, char *msg, size_t msgsize);

/* tpfs_tx_commit_flags flags */
#define TPFS_TX_COMMIT_WAIT 1  /* while other members run, wait for them to exit */
#define TPFS_TX_COMMIT_FORCE 2 /* commit while other members run; cut them off */

/*
 * tpfs_tx_commit_flags -- tpfs_tx_commit, and what to do while other
 * member processes still run (live processes of the transaction other
 * than the caller and its ancestors: a background job of the shell).
 * With flags 0 (as tpfs_tx_commit) the daemon then refuses: EBUSY,
 * nothing changed, the transaction still open, msg naming them (pid and
 * command).  TPFS_TX_COMMIT_WAIT asks again every 50 ms until none is
 * left, then commits (for ever, if one never exits).  TPFS_TX_COMMIT_FORCE
 * commits the state of that moment, and the others are cut off: every
 * later call of theirs, and of what they start, fails with ECANCELED
 * until they exit (msg names them).
 *
 * Errors: those of tpfs_tx_commit, and
 *   EBUSY   (flags 0) other members still run; the transaction is open
 *   EINVAL  unknown flags, or both
 */
int tpfs_tx_commit_flags(const char *mount, int flags, char *msg, size_t msgsize);

/*
 * tpfs_tx_abort -- abort the caller's transaction on mount: all of its
 * changes are discarded, and it ends.  msg says which transaction ended.
 *
 * Errors: ESRCH (no transaction), EPROTO, and the channel's errors.
 */
int tpfs_tx_abort(const char *mount, char *msg, size_t msgsize);

/*
 * tpfs_tx_abort_id -- abort transaction id on mount, whoever its members
 * are: its owner's or root's right.  Another process's transaction is left
 * doomed, so that its owner's commit fails, saying who aborted it.
 *
 * Errors: ESRCH (no open transaction id), EPERM (another user's), EINVAL
 * (id 0), EPROTO, and the channel's errors.
 */
int tpfs_tx_abort_id(const char *mount, uint64_t id, char *msg, size_t msgsize);

/* tpfs_tx_status flags */
#define TPFS_TX_STATUS_ALL 1  /* every transaction the caller may see (root: all) */
#define TPFS_TX_STATUS_JSON 2 /* JSON instead of text */

/*
 * tpfs_tx_status -- the daemon's report on the caller's transaction on
 * mount or, with TPFS_TX_STATUS_ALL, on every transaction the caller may
 * see: id, state (active, doomed and why), bound process, age, members,
 * files touched, write-set size, locks held, what it waits for.  Text
 * (one block per transaction; "no open transactions" when the list is
 * empty) or, with TPFS_TX_STATUS_JSON:
 *   {"transactions":[{"id":42,"state":"active"|"doomed","reason":
 *    "deadlock"|"killed"|"error"|"","message":"...","pid":1234,"comm":"bash",
 *    "uid":0,"age_ms":12300,"members":[1234],"files":17,"records":20,
 *    "bytes":123456,"locks":25,"waiting":null|"..."}]}
 * On success *report is a NUL-terminated malloc'd string (free it) and
 * msg is empty; on failure *report is NULL.  A long report is fetched in
 * full: the library asks for the answer's size and retries larger.
 *
 * Errors:
 *   ESRCH   without TPFS_TX_STATUS_ALL: the caller is in no transaction on
 *           this mount (the message names its last one, if any)
 *   EINVAL  unknown flags
 *   E2BIG   the report is longer than the kernel lets an xattr be (64 KiB)
 *   EOVERFLOW  too many transactions for the daemon to list
 *   ENOMEM, EPROTO, and the channel's errors.
 */
int tpfs_tx_status(const char *mount, int flags, char **report, char *msg, size_t msgsize);

/* ---- parsing (for tests and other clients) ------------------------------ */

/*
 * tpfs_tx_answer_parse -- split a daemon answer of len bytes (not
 * necessarily NUL-terminated) of the form "ERRNO MESSAGE": ERRNO is 1 to 4
 * decimal digits, followed by a space and the message, or by nothing.
 * Copies the message to msg (trailing newlines and spaces removed) and
 * returns ERRNO; "0 42" gives 0 and "42", "16 busy" gives EBUSY and "busy".
 *
 * Errors: EPROTO when the answer does not have that form (msg then quotes
 * it); any other value is the daemon's errno.
 */
int tpfs_tx_answer_parse(const char *answer, size_t len, char *msg, size_t msgsize);

/*
 * tpfs_tx_answer_id -- the transaction id of a begin answer's message:
 * decimal digits only (surrounding white space allowed), not 0, no
 * overflow.  Sets *id.
 *
 * Errors: EPROTO otherwise.
 */
int tpfs_tx_answer_id(const char *text, uint64_t *id);

/*
 * tpfs_tx_json_string -- the value of the first object member named key,
 * anywhere in the JSON text, when it is a string: decoded (escapes
 * resolved; \u escapes beyond ASCII become '?') and copied to out (size
 * bytes).  Text inside strings is never mistaken for a member, so a
 * message that quotes "reason":"deadlock" is no reason.  A minimal
 * scanner, enough for tpfs_tx_status's JSON; it does not validate.
 *
 * Errors: ENOENT (no such member), EINVAL (its value is not a string),
 * ERANGE (the value does not fit in out), EPROTO (an unterminated string).
 */
int tpfs_tx_json_string(const char *json, const char *key, char *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif
