/*
 * txsh.h -- what the files of test_tx share (test_tx.c defines it): the
 * mount, the views of a tree, the helper, the control channel, the
 * watchdog, transaction shells (members), the non-member's timed calls
 * and the scenario.  The actors and the environment: test_tx.c.
 */
#ifndef TPFS_TXSH_H
#define TPFS_TXSH_H

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "mount_util.h"
#include "txtest.h"
#include "tpfs_tx.h"

#define NM_LIMIT 2.0   /* s: the longest a non-member read may take */
#define WAIT_MS 800    /* how long a writer that must wait is watched waiting */
#define VIEW_MAX 65536
extern tfs_mount g_m;
extern char g_self[PATH_MAX];
extern int g_watch; /* write end: the watchdog's pipe */

/* Small things */
const char *mp(const char *rel);
typedef struct sbuf {
	char *p;
	size_t size, len;
} sbuf;
void sb_add(sbuf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void scopy(char *dst, size_t size, const char *src);
void trim(char *s);
const char *first_diff(const char *a, const char *b);

/* The view of a tree */
int cmp_str(const void *a, const void *b);
void view_obj(sbuf *o, const char *root, const char *rel);
void view(const char *root, const char *rel, char *buf, size_t size);

/* The helper: this binary run from a member's shell */
int proto_at(int dirfd, const char *path, const char *verb, char *ans, size_t size);
int helper(int argc, char **argv);

/* The control channel, directly (fsd/fuse/tpfs_tx_proto.h) */
int proto(const char *verb, char *ans, size_t size);
int tx_listed(uint64_t id);

/* The watchdog: tears the mount down if the test process dies */
void watchdog_start(void);
void watchdog_pid(void);
void watchdog_quit(void);

/* Transaction shells (members) */
#define MAX_SH 8
typedef struct tsh {
	pid_t pid;
	int in, out;
	uint64_t txid;  /* bound at birth: its transaction; else 0 */
	char name[16];
	char acc[VIEW_MAX * 2];
	size_t len;
	char cmd[300];  /* the last command, for messages */
} tsh;
extern tsh g_sh[MAX_SH];
extern int g_nsh;
extern pid_t g_kids[16]; /* other children to kill at the end */
extern int g_nkids;
void close_fds_from(int lowest);
int become_with_setuid(uid_t uid);
tsh *tsh_open_as(const char *name, int bind, uid_t uid);
tsh *tsh_open(const char *name, int bind);
void tsh_send(tsh *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tsh_wait(tsh *s, char *out, size_t size, int timeout_ms);
int tsh_run(tsh *s, const char **outp, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Runs a command that must succeed. */
#define SH_OK(s, ...)                                                                                                  \
	do {                                                                                                           \
		const char *o_;                                                                                        \
		int st_ = tsh_run((s), &o_, __VA_ARGS__);                                                              \
		cr_assert(st_ == 0, "shell %s: `%.300s` exited %d, expected 0; output: %.800s", (s)->name, (s)->cmd,  \
			  st_, o_);                                                                                    \
	} while (0)
void mcheck(tsh *s, const char *expect, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tsh_kill(tsh *s, int whole);
#define HELPER "\"$TX_SELF\" --helper "
void tsh_commit(tsh *s);
void tsh_abort(tsh *s);
void tsh_view(tsh *s, const char *rel, char *buf, size_t size);

/* Mount, set-up, tear-down */
extern const char *g_opts; /* tpfsd's -o options for start() (NULL: none) */
void start_with(const char *preload);
void start(void);
void finish(void);
void put(const char *rel, const char *text);

/* The non-member: timed calls */
extern const char *volatile g_what;
extern double g_t0, g_nm_max;
extern long g_nm_calls;
void on_alarm(int sig);
void nm_begin(const char *what);
void nm_end(void);
void nm_view(const char *rel, char *buf, size_t size);
ssize_t nm_read(const char *rel, char *buf, size_t size);
int nm_access(const char *rel);
void nm_statvfs(struct statvfs *sv);
#define VIEW_EQ(who, seen, expected)                                                                                  \
	cr_expect(!strcmp((seen), (expected)), "%s: the view differs at %s\n--- seen ---\n%s--- expected ---\n%s", (who), \
		  first_diff((seen), (expected)), (seen), (expected))
#define VIEW_NE(who, seen, other)                                                                                      \
	cr_expect(strcmp((seen), (other)) != 0, "%s: the view did not change, expected the member's changes:\n%s", (who), \
		  (seen))

/* The scenario: a committed tree, then a member's changes */
#define MTIME_NEW 981173106 /* 2001-02-03 04:05:06 UTC */
void scen_setup(void);
void scen_change(tsh *s);
void scen_member_checks(tsh *s);
void nm_checks_old(const char *when);

#endif
