/*
 * shim.h -- what the tests' LD_PRELOAD shims (tests/fscrash/pcut_shim.c,
 * tests/tx/slowlog_shim.c) share: finding the function they wrap.
 */
#ifndef TPFS_SHIM_H
#define TPFS_SHIM_H

#include <dlfcn.h>
#include <string.h>

/* real_NAME = the next definition of NAME after the shim's own.  dlsym
 * gives an object pointer: it is copied into the function pointer. */
#define SHIM_RESOLVE(name)                                                                                             \
	do {                                                                                                           \
		void *p_ = dlsym(RTLD_NEXT, #name);                                                                     \
		memcpy(&real_##name, &p_, sizeof p_);                                                                  \
	} while (0)

#endif
