/*
 * be_tp.h -- the embedded engine as a store (be_tp.c): the ops table
 * backend.c's registry names.  Nothing here needs tp.h.
 */
#ifndef TPFS_BE_TP_H
#define TPFS_BE_TP_H

#include "backend.h"

extern const be_ops be_tp_ops;

#endif
