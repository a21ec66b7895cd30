/*
 * txcommit -- commit the caller's tpfs transaction.
 *
 * Thin: it finds the mount that holds the caller's transaction (the shell
 * that ran txbegin is an ancestor of txcommit), asks the daemon through
 * libtpfs_tx to commit it, and turns the answer into an exit status: 0
 * only when everything was applied and is durable, 1 with the daemon's
 * reason otherwise, 2 on bad usage.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "tpfs_tx.h"
#include "txtool.h"

static const char usage[] =
	"Usage: txcommit [-v] [-w | -f] [MOUNTPOINT]\n"
	"\n"
	"Commit the transaction of the calling shell on a tpfs mount.\n"
	"\n"
	"Description\n"
	"  txcommit applies every change of the caller's transaction (the one\n"
	"  txbegin bound to this shell, or to an ancestor of it) atomically and\n"
	"  durably: when it exits 0 every change is there and survives a crash.\n"
	"  Otherwise nothing was applied, the transaction has ended all the same,\n"
	"  and txcommit prints why: it was a deadlock victim (run it again), it was\n"
	"  aborted (a member was killed, an administrator aborted it, the daemon\n"
	"  restarted), the store is full, an I/O error, or there was no\n"
	"  transaction.\n"
	"\n"
	"  While other members of the transaction still run (a command the shell\n"
	"  started in the background, not yet finished), txcommit commits nothing:\n"
	"  it names them (pid and command), exits 1, and the transaction stays\n"
	"  open.  With --wait it waits for them to exit, then commits; with\n"
	"  --force it commits what they have done so far, and they are cut off:\n"
	"  every later call of theirs (and of what they start) fails with\n"
	"  ECANCELED until they exit, rather than commit one call at a time.\n"
	"\n"
	"  The mount is MOUNTPOINT (or the tpfs mount holding that path).  Without\n"
	"  it: the tpfs mount containing the current directory, else $TPFS_MOUNT,\n"
	"  else the only tpfs file system mounted; and if the caller has no\n"
	"  transaction there, the tpfs mount where it has one.\n"
	"\n"
	"Options\n"
	"  -v, --verbose  print what was committed (calls, records, bytes)\n"
	"  -w, --wait     wait for the other members to exit, then commit\n"
	"  -f, --force    commit while other members run; they are cut off\n"
	"  -h, --help     print this text and exit\n"
	"  -V, --version  print the version and exit\n"
	"\n"
	"Exit status\n"
	"  0  committed: every change is applied and durable\n"
	"  1  not committed, nothing applied (the message on standard error names\n"
	"     the mount and the cause); the transaction has ended, unless other\n"
	"     members still run (without --wait or --force)\n"
	"  2  bad usage\n"
	"\n"
	"Environment\n"
	"  TPFS_MOUNT   the mount to use when the current directory is not on one\n"
	"\n"
	"Examples\n"
	"  txbegin && make install && txcommit\n"
	"  txcommit || echo 'nothing was applied'\n"
	"  txcommit /mnt/tpfs\n"
	"  long_job & txcommit --wait\n"
	"\n"
	"See also: txbegin, txabort, txrun, txstatus.\n";

static int bad_usage(void)
{
	fputs("Usage: txcommit [-v] [-w | -f] [MOUNTPOINT]\nTry 'txcommit --help' for more information.\n", stderr);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"verbose", no_argument, NULL, 'v'},
		{"wait", no_argument, NULL, 'w'},
		{"force", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0}};
	char mount[PATH_MAX], msg[TPFS_TX_MSG_MAX];
	int c, verbose = 0, flags = 0;
	while ((c = getopt_long(argc, argv, "vwfhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'v': verbose = 1; break;
		case 'w': flags |= TPFS_TX_COMMIT_WAIT; break;
		case 'f': flags |= TPFS_TX_COMMIT_FORCE; break;
		case 'V': return txtool_version("txcommit");
		case 'h': fputs(usage, stdout); return 0;
		default: return bad_usage();
		}
	}
	if (flags == (TPFS_TX_COMMIT_WAIT | TPFS_TX_COMMIT_FORCE)) {
		fputs("txcommit: --wait and --force exclude each other\n", stderr);
		return bad_usage();
	}
	int rc = txtool_mount("txcommit", argc, argv, optind, 1, mount, sizeof mount);
	if (rc == 2)
		return bad_usage();
	if (rc != 0)
		return rc;
	rc = tpfs_tx_commit_flags(mount, flags, msg, sizeof msg);
	if (rc == 0 && !verbose && strstr(msg, "; cut off")) /* --force: say whom */
		fprintf(stderr, "txcommit: %s: %s\n", mount, strstr(msg, "; cut off") + 2);
	return txtool_done("txcommit", mount, rc, msg, verbose);
}
