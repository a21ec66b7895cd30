/*
 * txrun -- run a command in a tpfs transaction: commit if it succeeds,
 * abort if it fails, and run it again when it was a deadlock victim.
 *
 * One attempt: begin a transaction bound to txrun itself (the command,
 * forked from txrun, is a member, and so is everything it starts), run the
 * command, wait for it; exit 0 -> commit, anything else -> abort.  A
 * deadlock victim is recognized by the commit's EDEADLK, or, when the
 * command failed, by the transaction's status before the abort (state
 * "doomed", reason "deadlock"); it is retried at most --retry times, after
 * a short randomized pause so that the winners can finish.
 *
 * Signals: SIGINT, SIGTERM and SIGHUP sent to txrun are forwarded to the
 * command, and txrun stays to end the transaction; after one of them
 * nothing is retried.  A signal the kernel sent (a terminal's ^C goes to
 * the whole foreground process group) reached the command already and is
 * not sent twice.  The handler's state is the two globals below.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tpfs_tx.h"
#include "txtool.h"

#define MAX_RETRY 1000
#define BACKOFF_MS 10    /* the first pause; doubled at each retry */
#define BACKOFF_MAX_MS 1000

static const char usage[] =
	"Usage: txrun [--retry N] [MOUNTPOINT] -- CMD [ARG...]\n"
	"\n"
	"Run a command in a transaction on a tpfs mount: commit if it succeeds,\n"
	"abort if it fails.\n"
	"\n"
	"Description\n"
	"  txrun begins a transaction bound to itself, runs CMD with its ARGs (CMD\n"
	"  and everything it starts are members), and waits for it.  If CMD exits\n"
	"  0, txrun commits: every change is applied atomically and durably, or\n"
	"  none is and txrun says why.  Otherwise it aborts: nothing CMD changed on\n"
	"  the mount remains.  If CMD exits 0 while processes it started still\n"
	"  run as members (in the background), txrun commits nothing: it names\n"
	"  them, exits 1, and the transaction is aborted as txrun exits (their\n"
	"  later calls fail with ECANCELED).\n"
	"\n"
	"  A transaction chosen as a deadlock victim (its commit failed with a\n"
	"  deadlock, or CMD failed while its transaction was doomed by one) is run\n"
	"  again, in a new transaction, at most N times, after a short random\n"
	"  pause; each retry is announced on standard error.\n"
	"\n"
	"  SIGINT, SIGTERM and SIGHUP sent to txrun are passed on to CMD; txrun\n"
	"  then ends the transaction as above and retries nothing.  The \"--\" is\n"
	"  required: it separates txrun's arguments from the command's.\n"
	"\n"
	"  The mount is MOUNTPOINT (or the tpfs mount holding that path); without\n"
	"  it, the tpfs mount containing the current directory, else $TPFS_MOUNT,\n"
	"  else the only tpfs file system mounted.  Run from inside a transaction\n"
	"  (after txbegin in the same shell) txrun fails: transactions do not nest.\n"
	"\n"
	"Options\n"
	"  -r, --retry N   run deadlock victims again, at most N times (default 0)\n"
	"  -h, --help      print this text and exit\n"
	"  -V, --version   print the version and exit\n"
	"\n"
	"Exit status\n"
	"  CMD's exit status when CMD failed (the transaction was aborted), or\n"
	"  128+SIG when a signal SIG killed it; 126 when CMD could not be run, 127\n"
	"  when it was not found;\n"
	"  0  CMD succeeded and the transaction committed\n"
	"  1  CMD succeeded but the commit failed (nothing was applied; the reason\n"
	"     is on standard error), or the transaction could not begin\n"
	"  2  bad usage\n"
	"\n"
	"Environment\n"
	"  TPFS_MOUNT   the mount to use when the current directory is not on one\n"
	"  PATH         where CMD is looked for\n"
	"\n"
	"Examples\n"
	"  txrun -- make                       # a failed build leaves nothing\n"
	"  txrun --retry 3 /mnt/tpfs -- sh -c 'ci -u *.c'\n"
	"  txrun -- tar xf release.tar || echo 'not installed'\n"
	"\n"
	"See also: txbegin, txcommit, txabort, txstatus.\n";

static volatile sig_atomic_t g_child;  /* CMD's pid while it runs, else 0 */
static volatile sig_atomic_t g_signal; /* the last signal forwarded, or 0 */

static int bad_usage(const char *why)
{
	if (why)
		fprintf(stderr, "txrun: %s\n", why);
	fputs("Usage: txrun [--retry N] [MOUNTPOINT] -- CMD [ARG...]\nTry 'txrun --help' for more information.\n",
	      stderr);
	return 2;
}

/* ---- the command ---- */

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
	pid_t child = (pid_t)g_child;
	(void)ctx;
	g_signal = sig;
	if (child > 0 && si->si_code != SI_KERNEL) /* SI_KERNEL: CMD's group got it too */
		kill(child, sig);
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
#define NFORWARDED (sizeof forwarded / sizeof *forwarded)

static void install_handlers(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < NFORWARDED; i++)
		sigaction(forwarded[i], &sa, NULL);
}

static void forwarded_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < NFORWARDED; i++)
		sigaddset(set, forwarded[i]);
}

/* In the child: default signal handling, then CMD. */
static void exec_cmd(char **cmd, const sigset_t *mask)
{
	for (size_t i = 0; i < NFORWARDED; i++)
		signal(forwarded[i], SIG_DFL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	execvp(cmd[0], cmd);
	int e = errno;
	fprintf(stderr, "txrun: cannot run %s: %s\n", cmd[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* Runs CMD and waits: its exit status (128+SIG when killed), or -1 when it
 * could not be started (the message is printed). */
static int run_cmd(char **cmd)
{
	sigset_t block, old;
	int status, e;
	forwarded_set(&block);
	sigprocmask(SIG_BLOCK, &block, &old); /* g_child is set before a handler runs */
	pid_t pid = fork();
	if (pid == 0)
		exec_cmd(cmd, &old);
	e = errno;
	if (pid > 0)
		g_child = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		fprintf(stderr, "txrun: cannot start %s: fork: %s\n", cmd[0], strerror(e));
		return -1;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "txrun: waiting for %s: %s\n", cmd[0], strerror(errno));
			status = 1 << 8;
			break;
		}
	g_child = 0;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ---- the transaction ---- */

/* Whether the caller's transaction is doomed as a deadlock victim. */
static int doomed_by_deadlock(const char *mount)
{
	char msg[TPFS_TX_MSG_MAX], state[32], reason[32], *report;
	int victim;
	if (tpfs_tx_status(mount, TPFS_TX_STATUS_JSON, &report, msg, sizeof msg) != 0)
		return 0;
	victim = tpfs_tx_json_string(report, "state", state, sizeof state) == 0 && !strcmp(state, "doomed") &&
		 tpfs_tx_json_string(report, "reason", reason, sizeof reason) == 0 && !strcmp(reason, "deadlock");
	free(report);
	return victim;
}

static void abort_tx(const char *mount, uint64_t id)
{
	char msg[TPFS_TX_MSG_MAX];
	if (tpfs_tx_abort(mount, msg, sizeof msg) != 0)
		fprintf(stderr, "txrun: %s: aborting transaction %" PRIu64 ": %s\n", mount, id, msg);
}

/* Whether a victim may run again: retries left and no signal received. */
static int may_retry(int left) { return left > 0 && !g_signal; }

/* One attempt; txrun's exit status.  *victim: the transaction was a
 * deadlock victim and will be retried (left retries remain), nothing
 * printed about it. */
static int attempt(const char *mount, char **cmd, int left, uint64_t *id, int *victim)
{
	char msg[TPFS_TX_MSG_MAX];
	int st, rc;
	*victim = 0;
	if (tpfs_tx_begin(mount, 0, id, msg, sizeof msg) != 0) {
		fprintf(stderr, "txrun: %s: %s\n", mount, msg);
		return 1;
	}
	st = g_signal ? 128 + g_signal : run_cmd(cmd);
	if (st == 0) {
		if ((rc = tpfs_tx_commit(mount, msg, sizeof msg)) == 0)
			return 0;
		if (rc == EBUSY) { /* other members still run: aborted as txrun exits (the reaper) */
			fprintf(stderr, "txrun: %s: %s; aborted\n", mount, msg);
			return 1;
		}
		if (!(*victim = rc == EDEADLK && may_retry(left)))
			fprintf(stderr, "txrun: %s: %s\n", mount, msg);
		return 1;
	}
	int deadlock = doomed_by_deadlock(mount);
	abort_tx(mount, *id);
	if (!(*victim = deadlock && may_retry(left)) && deadlock)
		fprintf(stderr, "txrun: transaction %" PRIu64 " was a deadlock victim; no retries left\n", *id);
	return st < 0 ? 1 : st;
}

/* A pause before retry k (1-based): BACKOFF_MS doubled each time, capped,
 * and scaled by a random factor in [0.5, 1.5) so victims do not meet again. */
static void backoff(int k)
{
	long ms = BACKOFF_MS;
	for (int i = 1; i < k && ms < BACKOFF_MAX_MS; i++)
		ms *= 2;
	ms = ms < BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS;
	ms = ms / 2 + rand() % (ms > 0 ? ms : 1);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !g_signal)
		;
}

/* ---- arguments ---- */

static int parse_retry(const char *s, int *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v > MAX_RETRY)
		return -1;
	*out = (int)v;
	return 0;
}

/* [MOUNTPOINT] -- CMD...: 0, or bad usage (2). */
static int parse_args(int argc, char **argv, int *retry, const char **path, char ***cmd)
{
	static const struct option longopts[] = {
		{"retry", required_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "+r:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (parse_retry(optarg, retry) != 0) {
				fprintf(stderr, "txrun: bad retry count '%s' (0 to %d)\n", optarg, MAX_RETRY);
				return bad_usage(NULL);
			}
			break;
		case 'V': exit(txtool_version("txrun"));
		case 'h': fputs(usage, stdout); exit(0);
		default: return bad_usage(NULL);
		}
	}
	*path = NULL;
	if (optind > 1 && !strcmp(argv[optind - 1], "--")) { /* getopt ate it */
		*cmd = argv + optind;
	} else if (argc - optind >= 2 && !strcmp(argv[optind + 1], "--")) {
		*path = argv[optind];
		*cmd = argv + optind + 2;
	} else {
		return bad_usage("expected [MOUNTPOINT] -- CMD");
	}
	return **cmd ? 0 : bad_usage("no command given after --");
}

int main(int argc, char **argv)
{
	char mount[PATH_MAX], msg[TPFS_TX_MSG_MAX];
	const char *path = NULL;
	char **cmd = NULL;
	int retry = 0, st, victim;
	uint64_t id;
	if ((st = parse_args(argc, argv, &retry, &path, &cmd)) != 0)
		return st;
	if (tpfs_tx_find_mount(path, mount, sizeof mount, msg, sizeof msg) != 0) {
		fprintf(stderr, "txrun: %s\n", msg);
		return 1;
	}
	srand((unsigned)getpid() ^ (unsigned)time(NULL));
	install_handlers();
	for (int k = 1;; k++) {
		st = attempt(mount, cmd, retry - (k - 1), &id, &victim);
		if (!victim)
			return st;
		fprintf(stderr, "txrun: transaction %" PRIu64 " was a deadlock victim; retrying (%d of %d)\n", id, k,
			retry);
		backoff(k);
	}
}
