/*
 * be_cluster.h -- the cluster store (etcd://...) behind backend.h:
 * be_cluster.c says how (CS1-CS8).
 */
#ifndef TPFS_BE_CLUSTER_H
#define TPFS_BE_CLUSTER_H

#include "backend.h"

extern const be_ops be_cluster_ops;

#endif
