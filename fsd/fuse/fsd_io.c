/*
 * fsd_io -- the daemon's reads and writes of /dev/fuse, through libfuse's
 * custom I/O hooks: every request and reply passes unchanged, except the
 * reply to the kernel's INIT, which also asks for FUSE_HANDLE_KILLPRIV_V2
 * when the kernel offers it.  libfuse 3.14 (Debian 12's) has no capability
 * bit for that flag, so it cannot be asked for through conn->want.
 *
 * Why: without it the kernel clears the set-user-ID bits of a file itself,
 * and to learn whether it has to, it asks the daemon for the file's
 * "security.capability" attribute before every write(2): a second round
 * trip per write (a 4 KiB random write cost two requests, 1 GiB in 1 MiB
 * writes 2,048).  With it, the kernel marks an inode with no set-id bits
 * S_NOSEC after one such question and stops asking; the daemon clears the
 * bits on write, truncate, fallocate and chown itself (fs_data.c D6).
 *
 * Invariants
 *   U1  Only the INIT reply is changed, and only to add the flag the kernel
 *       listed in its INIT request: a kernel that did not offer it never
 *       sees it.
 *   U2  Every other byte goes to and from the device as libfuse gave it;
 *       read(2) and writev(2) results and errno reach libfuse unchanged.
 *   U3  fsd_io_expire_entry writes its own notification (libfuse 3.14 has
 *       no fuse_lowlevel_notify_expire_entry, which came in 3.16): one
 *       writev(2) of a whole message, as libfuse's notifications are, and
 *       only to a kernel whose INIT offered protocol 7.38 or later
 *       (FUSE_EXPIRE_ONLY, Linux 6.2): an older one would take the flag
 *       for padding and drop the dentry after all.
 */
#include "fsd_io.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The INIT request's unique id while its reply is to be changed; 0 after. */
static _Atomic uint64_t init_unique;
static _Atomic int init_seen; /* INIT was read: later reads need no look */
static _Atomic int killpriv_v2;
static _Atomic int expire_only; /* U3: the kernel's INIT offered 7.38 or later */
static _Atomic int dev_fd = -1;

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, len);
	if (n >= (ssize_t)(sizeof(struct fuse_in_header) + offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) &&
	    !atomic_load_explicit(&init_seen, memory_order_relaxed)) {
		const struct fuse_in_header *h = buf;
		if (h->opcode == FUSE_INIT) {
			const struct fuse_init_in *in = (const void *)(h + 1);
			if (in->flags & FUSE_HANDLE_KILLPRIV_V2)
				atomic_store(&init_unique, h->unique);
			if (in->major > 7 || (in->major == 7 && in->minor >= 38))
				atomic_store(&expire_only, 1); /* U3 */
			atomic_store(&init_seen, 1);
		}
	}
	return n; /* errno untouched after a failed read (U2) */
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	uint64_t u = atomic_load_explicit(&init_unique, memory_order_relaxed);
	if (u && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
		const struct fuse_out_header *h = iov[0].iov_base;
		if (h->unique == u) { /* U1 */
			atomic_store(&init_unique, 0);
			if (h->error == 0 && iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
				((struct fuse_init_out *)iov[1].iov_base)->flags |= FUSE_HANDLE_KILLPRIV_V2;
				atomic_store(&killpriv_v2, 1);
			}
		}
	}
	return writev(fd, iov, count);
}

static ssize_t io_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len, unsigned int flags,
				 void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len, unsigned int flags,
			      void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

static const struct fuse_custom_io fsd_custom_io = {
	.writev = io_writev,
	.read = io_read,
	.splice_receive = io_splice_receive,
	.splice_send = io_splice_send,
};

int fsd_io_install(struct fuse_session *se)
{
	int rc = fuse_session_custom_io(se, &fsd_custom_io, fuse_session_fd(se));
	if (rc == 0)
		atomic_store(&dev_fd, fuse_session_fd(se));
	return rc < 0 ? -rc : rc;
}

int fsd_io_expire_entry(uint64_t parent, const char *name, size_t len)
{
	int fd = atomic_load(&dev_fd);
	if (fd < 0 || !atomic_load(&expire_only))
		return ENOSYS; /* U3 */
	struct fuse_notify_inval_entry_out arg = {.parent = parent, .namelen = (uint32_t)len, .flags = FUSE_EXPIRE_ONLY};
	struct fuse_out_header h = {.len = (uint32_t)(sizeof h + sizeof arg + len + 1), .error = FUSE_NOTIFY_INVAL_ENTRY};
	struct iovec iov[] = {{&h, sizeof h}, {&arg, sizeof arg}, {(void *)name, len}, {"", 1}};
	ssize_t n = writev(fd, iov, 4);
	if (n < 0) {
		int e = errno;
		return e == ENOENT ? 0 : e; /* ENOENT: the kernel holds no such dentry */
	}
	return 0;
}

int fsd_io_killpriv_v2(void) { return atomic_load(&killpriv_v2); }

int fsd_io_sleeps_in_kernel(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	const char *r = strrchr(buf, ')');
	if (!r || r[1] != ' ' || !r[2])
		return -1;
	return r[2] == 'D';
}
