/*
 * txtool -- the MOUNTPOINT operand and the reports of the tx commands
 * (txtool.h).
 */
#include "txtool.h"

#include <stdio.h>

#include "tpfs_tx.h"

int txtool_mount(const char *prog, int argc, char **argv, int optind, int own, char *mount, size_t size)
{
	char msg[TPFS_TX_MSG_MAX];
	const char *path = NULL;
	if (argc - optind > 1)
		return 2;
	if (optind < argc)
		path = argv[optind];
	int rc = own ? tpfs_tx_find_own(path, mount, size, msg, sizeof msg)
		     : tpfs_tx_find_mount(path, mount, size, msg, sizeof msg);
	if (rc != 0) {
		fprintf(stderr, "%s: %s\n", prog, msg);
		return 1;
	}
	return 0;
}

int txtool_done(const char *prog, const char *mount, int rc, const char *msg, int verbose)
{
	if (rc != 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, mount, msg);
		return 1;
	}
	if (verbose)
		printf("%s: %s: %s\n", prog, mount, msg);
	return 0;
}

int txtool_version(const char *prog)
{
	printf("%s (tpfs) %s\n", prog, TPFS_VERSION);
	return 0;
}
