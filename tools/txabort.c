/*
 * txabort -- abort the caller's tpfs transaction, or one named by its id.
 *
 * Thin: it finds the mount (for the caller's own transaction, the mount
 * that holds it), asks the daemon through libtpfs_tx to abort, and turns
 * the answer into an exit status (0 aborted, 1 failure, 2 bad usage).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "tpfs_tx.h"
#include "txtool.h"

static const char usage[] =
	"Usage: txabort [-v] [--id ID] [MOUNTPOINT]\n"
	"\n"
	"Abort a transaction on a tpfs mount: the caller's, or transaction ID.\n"
	"\n"
	"Description\n"
	"  Without --id, txabort ends the caller's transaction (the one txbegin\n"
	"  bound to this shell, or to an ancestor of it) and discards all of its\n"
	"  changes: members and everyone else see the state from before it.\n"
	"\n"
	"  With --id ID, it aborts transaction ID (as txstatus --all lists it),\n"
	"  which must be the caller's user's (root may abort any).  When it is\n"
	"  another shell's, that transaction stays doomed until its own shell runs\n"
	"  txcommit (which then fails, saying who aborted it) or txabort.\n"
	"\n"
	"  The mount is MOUNTPOINT (or the tpfs mount holding that path).  Without\n"
	"  it: the tpfs mount containing the current directory, else $TPFS_MOUNT,\n"
	"  else the only tpfs file system mounted; and, without --id, if the caller\n"
	"  has no transaction there, the tpfs mount where it has one.\n"
	"\n"
	"Options\n"
	"  -i, --id ID    abort transaction ID instead of the caller's\n"
	"  -v, --verbose  print which transaction was aborted\n"
	"  -h, --help     print this text and exit\n"
	"  -V, --version  print the version and exit\n"
	"\n"
	"Exit status\n"
	"  0  the transaction was aborted\n"
	"  1  it was not (the message on standard error names the mount and the\n"
	"     cause: no transaction, another user's, no tpfs mount...)\n"
	"  2  bad usage\n"
	"\n"
	"Environment\n"
	"  TPFS_MOUNT   the mount to use when the current directory is not on one\n"
	"\n"
	"Examples\n"
	"  txbegin; rm -r build; txabort      # build/ is back\n"
	"  txabort --id 42 /mnt/tpfs\n"
	"\n"
	"See also: txbegin, txcommit, txrun, txstatus.\n";

static int bad_usage(void)
{
	fputs("Usage: txabort [-v] [--id ID] [MOUNTPOINT]\nTry 'txabort --help' for more information.\n", stderr);
	return 2;
}

/* A transaction id: decimal, not 0. */
static int parse_id(const char *s, uint64_t *id)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v == 0)
		return -1;
	*id = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"id", required_argument, NULL, 'i'},
						 {"verbose", no_argument, NULL, 'v'},
						 {"help", no_argument, NULL, 'h'},
						 {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
	char mount[PATH_MAX], msg[TPFS_TX_MSG_MAX];
	uint64_t id = 0;
	int c, rc, verbose = 0;
	while ((c = getopt_long(argc, argv, "i:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (parse_id(optarg, &id) != 0) {
				fprintf(stderr, "txabort: bad transaction id '%s'\n", optarg);
				return bad_usage();
			}
			break;
		case 'v': verbose = 1; break;
		case 'V': return txtool_version("txabort");
		case 'h': fputs(usage, stdout); return 0;
		default: return bad_usage();
		}
	}
	rc = txtool_mount("txabort", argc, argv, optind, !id, mount, sizeof mount);
	if (rc == 2)
		return bad_usage();
	if (rc != 0)
		return rc;
	rc = id ? tpfs_tx_abort_id(mount, id, msg, sizeof msg) : tpfs_tx_abort(mount, msg, sizeof msg);
	return txtool_done("txabort", mount, rc, msg, verbose);
}
