/*
 * txstatus -- show the caller's tpfs transaction, or every transaction.
 *
 * Thin: it finds the mount, fetches the daemon's report through
 * libtpfs_tx and prints it as the daemon wrote it (text or JSON).  Exit 0
 * when a report was printed, 1 when the caller has no transaction (or on
 * failure), 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpfs_tx.h"
#include "txtool.h"

static const char usage[] =
	"Usage: txstatus [--all] [--json] [MOUNTPOINT]\n"
	"\n"
	"Show the caller's transaction on a tpfs mount, or every transaction.\n"
	"\n"
	"Description\n"
	"  txstatus prints the daemon's report on the caller's transaction (the\n"
	"  one txbegin bound to this shell, or to an ancestor of it): its id, its\n"
	"  state (active, or doomed and why: a deadlock victim, aborted), the\n"
	"  process it is bound to, its age, the member processes seen so far, the\n"
	"  calls served, the files it touched, the records and bytes of its\n"
	"  write set, the locks it holds, and what it waits for and who holds it.\n"
	"  When the caller has no transaction, it says so and names the caller's\n"
	"  last transaction on the mount and how it ended.\n"
	"\n"
	"  With --all it lists every transaction on the mount that the caller may\n"
	"  see (root: all of them; others: their own user's).\n"
	"\n"
	"  The mount is MOUNTPOINT (or the tpfs mount holding that path).  Without\n"
	"  it: the tpfs mount containing the current directory, else $TPFS_MOUNT,\n"
	"  else the only tpfs file system mounted; and, without --all, if the\n"
	"  caller has no transaction there, the tpfs mount where it has one.\n"
	"\n"
	"Options\n"
	"  -a, --all      every transaction the caller may see\n"
	"  -j, --json     JSON instead of text: {\"transactions\":[{\"id\":42,\n"
	"                 \"state\":\"active\",\"reason\":\"\",\"message\":\"\",\"pid\":1234,\n"
	"                 \"comm\":\"bash\",\"uid\":1000,\"age_ms\":12300,\"members\":[1234],\n"
	"                 \"files\":17,\"records\":20,\"bytes\":123456,\"locks\":25,\n"
	"                 \"waiting\":null}]}\n"
	"  -h, --help     print this text and exit\n"
	"  -V, --version  print the version and exit\n"
	"\n"
	"Exit status\n"
	"  0  a report was printed (with --all, even an empty list)\n"
	"  1  the caller has no transaction (the message on standard error says\n"
	"     so), or the report could not be fetched\n"
	"  2  bad usage\n"
	"\n"
	"Environment\n"
	"  TPFS_MOUNT   the mount to use when the current directory is not on one\n"
	"\n"
	"Examples\n"
	"  txstatus\n"
	"  txstatus --all /mnt/tpfs\n"
	"  txstatus --json | jq .transactions[0].locks\n"
	"\n"
	"See also: txbegin, txcommit, txabort, txrun.\n";

static int bad_usage(void)
{
	fputs("Usage: txstatus [--all] [--json] [MOUNTPOINT]\nTry 'txstatus --help' for more information.\n", stderr);
	return 2;
}

/* The report, ending with a newline. */
static int print_report(const char *report)
{
	size_t len = strlen(report);
	fputs(report, stdout);
	if (len == 0 || report[len - 1] != '\n')
		putchar('\n');
	if (fflush(stdout) != 0) {
		perror("txstatus: writing the report");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"all", no_argument, NULL, 'a'},
						 {"json", no_argument, NULL, 'j'},
						 {"help", no_argument, NULL, 'h'},
						 {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
	char mount[PATH_MAX], msg[TPFS_TX_MSG_MAX], *report;
	int c, rc, flags = 0;
	while ((c = getopt_long(argc, argv, "ajhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'a': flags |= TPFS_TX_STATUS_ALL; break;
		case 'j': flags |= TPFS_TX_STATUS_JSON; break;
		case 'V': return txtool_version("txstatus");
		case 'h': fputs(usage, stdout); return 0;
		default: return bad_usage();
		}
	}
	rc = txtool_mount("txstatus", argc, argv, optind, !(flags & TPFS_TX_STATUS_ALL), mount, sizeof mount);
	if (rc == 2)
		return bad_usage();
	if (rc != 0)
		return rc;
	rc = tpfs_tx_status(mount, flags, &report, msg, sizeof msg);
	if (rc != 0)
		return txtool_done("txstatus", mount, rc, msg, 0);
	rc = print_report(report);
	free(report);
	return rc;
}
