/*
 * txbegin -- begin a tpfs transaction bound to the calling shell.
 *
 * Thin: it finds the mount, asks the daemon through libtpfs_tx to bind a
 * new transaction to its parent process (the shell that runs it) and
 * prints the transaction's id.  Exit 0 on success, 1 on failure, 2 on bad
 * usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "tpfs_tx.h"
#include "txtool.h"

static const char usage[] =
	"Usage: txbegin [MOUNTPOINT]\n"
	"\n"
	"Begin a transaction on a tpfs mount, bound to the calling shell.\n"
	"\n"
	"Description\n"
	"  txbegin asks the tpfs daemon to start a transaction bound to its parent\n"
	"  process, normally the interactive shell or the script that runs it, and\n"
	"  prints the transaction's id (a decimal number, alone on its line).\n"
	"  From then on the shell and every process it starts, however deep, are\n"
	"  members: they see the transaction's changes, which no one else sees\n"
	"  until txcommit applies them all at once, durably, or txabort discards\n"
	"  them.  If the shell exits first, the transaction is aborted.  A\n"
	"  transaction covers one mount; a second txbegin in the same shell (on\n"
	"  the same mount) fails.  Run txbegin directly from the shell: run\n"
	"  through `sh -c`, it binds that short-lived sh instead.\n"
	"\n"
	"  The mount is MOUNTPOINT (or the tpfs mount holding that path); without\n"
	"  it, the tpfs mount containing the current directory, else $TPFS_MOUNT,\n"
	"  else the only tpfs file system mounted.\n"
	"\n"
	"Options\n"
	"  -h, --help     print this text and exit\n"
	"  -V, --version  print the version and exit\n"
	"\n"
	"Exit status\n"
	"  0  the transaction began; its id is on standard output\n"
	"  1  it did not (the message on standard error names the mount and the\n"
	"     cause: already in a transaction, read-only mount, no tpfs mount...)\n"
	"  2  bad usage\n"
	"\n"
	"Environment\n"
	"  TPFS_MOUNT   the mount to use when the current directory is not on one\n"
	"\n"
	"Examples\n"
	"  cd /mnt/tpfs/src && txbegin\n"
	"  id=$(txbegin /mnt/tpfs) && echo \"in transaction $id\"\n"
	"  txbegin; ci -u *.c; txcommit || echo 'nothing was checked in'\n"
	"\n"
	"See also: txcommit, txabort, txrun, txstatus.\n";

static int bad_usage(void)
{
	fputs("Usage: txbegin [MOUNTPOINT]\nTry 'txbegin --help' for more information.\n", stderr);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
	char mount[PATH_MAX], msg[TPFS_TX_MSG_MAX];
	uint64_t id;
	int c;
	while ((c = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
		if (c == 'V')
			return txtool_version("txbegin");
		if (c != 'h')
			return bad_usage();
		fputs(usage, stdout);
		return 0;
	}
	int rc = txtool_mount("txbegin", argc, argv, optind, 0, mount, sizeof mount);
	if (rc == 2)
		return bad_usage();
	if (rc != 0)
		return rc;
	rc = tpfs_tx_begin(mount, getppid(), &id, msg, sizeof msg);
	if (rc != 0)
		return txtool_done("txbegin", mount, rc, msg, 0);
	printf("%" PRIu64 "\n", id);
	if (fflush(stdout) != 0) {
		perror("txbegin: writing the transaction id");
		return 1;
	}
	return 0;
}
