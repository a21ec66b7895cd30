/*
 * fsd_io.h -- a FUSE session's reads and writes of /dev/fuse, with
 * FUSE_HANDLE_KILLPRIV_V2 asked for in the INIT reply (fsd_io.c).  Needs
 * only libfuse: the benchmark's passthrough (tests/bench/fs) uses it too.
 */
#ifndef TPFS_FSD_IO_H
#define TPFS_FSD_IO_H

#include <fuse_lowlevel.h>

/* Installs the hooks on a mounted session, before its loop; 0 or an errno. */
int fsd_io_install(struct fuse_session *se);
/* The kernel agreed to FUSE_HANDLE_KILLPRIV_V2 (known once INIT was
 * answered): it then leaves clearing set-id bits to the file system. */
int fsd_io_killpriv_v2(void);
/* Marks the kernel's dentry of name in parent expired without dropping it
 * (FUSE_EXPIRE_ONLY): its next use asks the daemon, while a process whose
 * working directory it is keeps it (getcwd works).  0 (also when the
 * kernel holds no such name), ENOSYS when the kernel's protocol is older
 * than 7.38 or the hooks are not installed, or writev's errno (U3). */
int fsd_io_expire_entry(uint64_t parent, const char *name, size_t len);

/* Whether process or thread pid sleeps uninterruptibly in the kernel
 * (state D of /proc/PID/stat): 1, 0, or -1 when that cannot be read. */
int fsd_io_sleeps_in_kernel(pid_t pid);

#endif
