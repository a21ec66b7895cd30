#!/bin/sh
# on_cluster.sh PROGRAM ARGS... -- runs a file-system test on the cluster of
# `scripts/cluster up` (TPFS_CLUSTER): its stores become cluster file
# systems (TPFS_TEST_STORE_URI for tests/lib/mount_util, TPFS_FSLAYER_STORE
# for tests/fslayer).  Fails when no cluster is named.
if [ -z "$TPFS_CLUSTER" ]; then
	echo "on_cluster.sh: TPFS_CLUSTER is not set: eval \"\$(scripts/cluster up)\" first" >&2
	exit 1
fi
TPFS_TEST_STORE_URI=$TPFS_CLUSTER TPFS_FSLAYER_STORE=$TPFS_CLUSTER exec "$@"
