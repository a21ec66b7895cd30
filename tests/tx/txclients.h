/*
 * txclients.h -- what the files of test_tx_clients share (test_tx_clients.c
 * defines it): small things, the mount, steps and background shells.  The
 * actors, the tests and the environment: test_tx_clients.c.
 */
#ifndef TPFS_TXCLIENTS_H
#define TPFS_TXCLIENTS_H

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mount_util.h"
#include "txtest.h"

#define OPTS "quiet,cache_size=8M" /* small: quick mounts (MALLOC_PERTURB_ under meson fills the pool), and it evicts */
#define FUSE_SUPER_MAGIC 0x65735546
#define MAX_KIDS 64
extern tfs_mount g_m;
extern char g_self[PATH_MAX];
extern char g_log[400];
extern int g_step;
extern pid_t g_kids[MAX_KIDS]; /* process groups to kill at the end */
extern pid_t *g_scripts; /* random_crash: the workers' running scripts (shared) */
extern int g_nscripts;

/* Small things */
double wall_s(void);
void usleep_(long us);
uint64_t env_u64(const char *name, uint64_t dflt);
uint64_t rnd(uint64_t *s);
unsigned below(uint64_t *s, unsigned n);
void sb(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
char *slurp(const char *path, size_t *len);
int spit(const char *path, const char *text);
const char *tail_of(const char *path, size_t max);
const char *log_tail(void);
const char *dp(const char *rel);
const char *mp(const char *rel);
void kid_add(pid_t p);
void kid_del(pid_t p);

/* Mount, steps, background shells */
void need(const char *const *progs);
void start(void);
const char *write_step(const char *name, const char *body);
/* A background job: a shell in its own process group. */
typedef struct job {
	pid_t pid;
	int done, status; /* exit status, or 128 + signal */
	char script[700];
} job;
pid_t spawn_step(const char *path, int own_group);
int wstatus(int st);
int step(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define STEP_OK(name, ...)                                                                                             \
	do {                                                                                                           \
		int st_ = step(name, __VA_ARGS__);                                                                     \
		cr_assert(st_ == 0, "step %02d-%s.sh exited %d (expected 0)\n--- %s (end; the store is kept) ---\n%s", \
			  g_step, name, st_, g_log, log_tail());                                                       \
	} while (0)
void bg(job *j, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int job_poll(job *j);
int job_wait(job *j, double secs);
int progress_has(const char *line);
int progress_prefix(const char *prefix, char *out, size_t size);
int wait_line(job *j, const char *line, double secs);
void progress_reset(void);
int release(void);
void cycle(const char *when);
void crash_and_recover(const char *when);
void finish(void);
const char *diff_of(const char *a, const char *b);
pid_t child_named(pid_t parent, const char *comm);

/* The --helper requests of the tests' shells (test_tx_orewrite.c) */
int helper(int argc, char **argv);

#endif
