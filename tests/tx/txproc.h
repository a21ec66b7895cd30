/*
 * txproc.h -- processes that both tx test programs (test_tx and
 * test_tx_bystanders) fork: bystanders -- plain processes (in no
 * transaction) sitting in a directory of the mount and calling getcwd()
 * every 10 ms, whose working directory a transaction must not break
 * (issue 24, fsd_txbind.c C6, C9) -- and children that become another
 * user keeping one capability.
 */
#ifndef TPFS_TXPROC_H
#define TPFS_TXPROC_H

#include <sys/types.h>

/* Forks a bystander in directory dir: it calls getcwd() every 10 ms, and
 * reads /proc/self/cwd, until a byte or EOF arrives on stop (stop_w, the
 * pipe's other end, it closes); then writes "calls failures first-error"
 * to out and exits 0 (2: it could not enter dir).  Returns its pid. */
pid_t txbystander(const char *dir, int stop, int stop_w, int out);

/* Stops the n bystanders pid[] (closing stop), reads their lines from out
 * (and closes it), and checks each started, made more than min_calls
 * calls and saw no failure. */
void txbystanders_check(const pid_t *pid, int n, int stop, int out, long min_calls);

/* Forks shell i of a shell-round test: /bin/sh in directory dir runs
 * rounds rounds of txbegin; echo $i >> "<prefix>f<i>"; txcommit, exiting 1,
 * 2 or 3 at the first that fails.  The child first closes close_a and
 * close_b (-1: none) and, if unset_mount, unsets TPFS_MOUNT (the mount is
 * then found from the current directory).  The shell's pid. */
pid_t txshell_rounds(int i, int rounds, const char *dir, const char *prefix, int close_a, int close_b,
		     int unset_mount);

/* Waits for the n shells sh[] (each running rounds of txbegin, a write,
 * txcommit) and expects each exited 0 (1: txbegin, 2: the write, 3:
 * txcommit failed). */
void txshells_wait(const pid_t *sh, int n);

/* The number of lines in buf. */
int txlines(const char *buf);

/* The calling child becomes uid (and gid) uid, keeping capability cap
 * (CAP_SETUID, CAP_SETGID) across exec as an ambient capability: its
 * commands can do what a set-user-ID or set-group-ID program does.  0 on
 * success, -1 on failure. */
int txproc_become_with_cap(uid_t uid, int cap);

#endif
