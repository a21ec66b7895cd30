/*
 * test_posix -- POSIX behaviour of a real tpfs mount, table-driven, each
 * case compared with the same call on a directory of the host file system.
 *
 * A case is one call (chmod, chown, lchown, link, linkat, mkdir, mkfifo,
 * mknod, open with any flags, rename/renameat2, rmdir, symlink, readlink,
 * truncate, ftruncate, unlink, utimensat, stat, access, pwrite, fallocate,
 * the xattr calls) with its arguments, the user who makes it (root, or a
 * child that switched uid, gid and supplementary groups), the expected
 * result and errno, and its expected side effects (.fx, below).  Each case
 * runs in a fresh copy of the same fixture tree (mk_fixture) made in both
 * places, c<N>/ under the mount and under the host directory:
 *   1. the result and errno on tpfs must be the expected ones, and so must
 *      the host's (a host that disagrees means the table is wrong: that
 *      fails too, marked TABLE);
 *   2. the side effects must hold on both;
 *   3. the two trees must then be identical: names, types, modes, link
 *      counts, owners, sizes, contents, symlink targets, device numbers,
 *      hard-link identity, extended attributes, and readdir's d_type and
 *      d_ino against lstat (not timestamps, st_blocks or directory sizes,
 *      where file systems may differ).
 * Cases marked .only run on tpfs alone: POSIX leaves a choice there, or
 * tpfs documents another limit than ext4 (the largest file is 2^44 bytes,
 * ext4's is 2^44 - 4096; xattr values up to 64 KiB).  Every test ends by
 * snapshotting the whole mount with mtime and ctime, unmounting (the
 * daemon must exit 0), running `tpfs check` (must be clean), remounting
 * and comparing the snapshot again: persistence.
 *
 * Side effects (.fx): "PATH:TOKEN TOKEN...; PATH:..." checked with lstat,
 * PATH "." being the case directory.  Tokens:
 *   !            PATH does not exist
 *   f0644        type (f d l p c b S: socket) and, if digits follow, mode & 07777
 *   nN sN uN gN  link count, size, owner, group
 *   =TEXT        file content, or symlink target, is exactly TEXT
 *   mS[.NS] aS[.NS]  mtime / atime; m* a*: within 30 s of now
 *   M+ M= C+ C= A+ A=  mtime / ctime / atime changed or not by the call
 *   rMAJ,MIN     device number
 *   xNAME=VAL    extended attribute NAME is VAL;  XNAME: it is absent
 * In paths, names and values "#N" stands for N 'a' characters, and a
 * leading "@/" for the case directory on the other side (host <-> tpfs:
 * EXDEV).
 *
 * Users: U1 = 1000:1000 {1000}, U2 = 1001:1001 {1001, 1000},
 * U3 = 1002:1002 {1002}; umask 022.
 *
 * posix/sequences, in test_posix_seq.c: scenarios of several calls and
 * processes, compared with the host the same way.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fsutil.h"

/* Seconds per test; the cluster suite builds this with more (tests/cluster:
 * every call is etcd round trips). */
#ifndef POSIX_TIMEOUT_S
#define POSIX_TIMEOUT_S 240
#endif

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

enum op {
	CHMOD, CHOWN, LCHOWN, LINK, LINKF, MKDIR, MKFIFO, MKNOD, OPEN, RENAME, RMDIR, SYMLINK, READLINK, TRUNC,
	FTRUNC, UNLINK, UTIMENS, STAT, LSTAT, ACCESS, WRITE, FALLOC, SETX, LSETX, GETX, LISTX, REMOVEX,
};
static const char *const op_names[] = {
	"chmod", "chown", "lchown", "link", "linkat(FOLLOW)", "mkdir", "mkfifo", "mknod", "open", "rename",
	"rmdir", "symlink", "readlink", "truncate", "ftruncate", "unlink", "utimensat", "stat", "lstat", "access",
	"pwrite", "fallocate", "setxattr", "lsetxattr", "getxattr", "listxattr", "removexattr",
};

enum { ROOT, U1, U2, U3 }; /* indexes of fsu_users */
static const char *const user_names[] = {"root", "u1", "u2", "u3"};

#define ALT_OK 10000 /* .alt: success is acceptable as well */
#define MAXF 17592186044416LL /* 2^44: tpfs's largest file */
#define EXT4_MAXF (MAXF - 4096)

typedef struct pcase {
	const char *g;        /* group: the test that runs it */
	enum op op;
	const char *a, *b, *c; /* paths; symlink: a is the link, b the target; xattr: b name, c value */
	long long x, y, z;    /* flags, modes, sizes, ids, offsets (per op, see do_op) */
	struct timespec t[2]; /* utimensat times */
	int tnull;            /* utimensat with NULL times */
	int who;              /* ROOT, U1, U2, U3 */
	int wr;               /* open: write "ab" before closing */
	long long rl;         /* RLIMIT_FSIZE for the call (0: none) */
	const char *pre;      /* shell command run as root in the case directory first (both sides) */
	int err;              /* expected errno, 0: success */
	int cr;               /* check the return value against .ret */
	long long ret;
	const char *fx;       /* expected side effects */
	int only;             /* tpfs only: documented tpfs behaviour or freedom left by POSIX */
	int alt;              /* .only: another acceptable errno (ALT_OK: success) */
	const char *why;
} pcase;

/* "#N" names */
#define N255 "#255"
#define N256 "#256"

static const pcase cases[] = {
	/* ---- open: every flag ---- */
	{"open", OPEN, "f", .x = O_RDONLY, .fx = "f:f0644 =hello n1 M= C="},
	{"open", OPEN, "f", .x = O_WRONLY, .wr = 1, .fx = "f:f0644 =abllo M+ C+"},
	{"open", OPEN, "f", .x = O_RDWR, .wr = 1, .fx = "f:=abllo"},
	{"open", OPEN, "f", .x = O_WRONLY | O_APPEND, .wr = 1, .fx = "f:=helloab s7"},
	{"open", OPEN, "f", .x = O_RDWR | O_APPEND, .wr = 1, .fx = "f:=helloab"},
	{"open", OPEN, "f", .x = O_WRONLY | O_TRUNC, .fx = "f:f0644 s0 M+ C+"},
	{"open", OPEN, "f", .x = O_RDWR | O_TRUNC, .wr = 1, .fx = "f:=ab s2"},
	{"open", OPEN, "f", .x = O_WRONLY | O_TRUNC | O_APPEND, .wr = 1, .fx = "f:=ab"},
	{"open", OPEN, "h1", .x = O_WRONLY | O_TRUNC, .fx = "h1:s0 n2; h2:s0 n2"},
	{"open", OPEN, "new", .x = O_WRONLY | O_CREAT, .y = 0640, .fx = "new:f0640 s0 n1 u0 g0; .:M+ C+"},
	{"open", OPEN, "new", .x = O_RDONLY | O_CREAT, .y = 0777, .fx = "new:f0755", .why = "umask 022"},
	{"open", OPEN, "new", .x = O_RDWR | O_CREAT, .y = 07777, .fx = "new:f7755"},
	{"open", OPEN, "new", .x = O_WRONLY | O_CREAT | O_EXCL, .y = 0600, .wr = 1, .fx = "new:f0600 =ab"},
	{"open", OPEN, "new", .x = O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, .y = 0644, .wr = 1, .fx = "new:=ab"},
	{"open", OPEN, "f", .x = O_WRONLY | O_CREAT | O_EXCL, .y = 0600, .err = EEXIST, .fx = "f:f0644 =hello"},
	{"open", OPEN, "f", .x = O_WRONLY | O_CREAT, .y = 0600, .fx = "f:f0644 =hello", .why = "mode ignored"},
	{"open", OPEN, "d", .x = O_RDONLY | O_CREAT | O_EXCL, .y = 0600, .err = EEXIST},
	{"open", OPEN, "sl", .x = O_WRONLY | O_CREAT | O_EXCL, .y = 0600, .err = EEXIST},
	{"open", OPEN, "dang", .x = O_WRONLY | O_CREAT | O_EXCL, .y = 0600, .err = EEXIST, .fx = "nowhere:!"},
	{"open", OPEN, "dang", .x = O_WRONLY | O_CREAT, .y = 0600, .wr = 1, .fx = "nowhere:f0600 =ab; dang:l =nowhere"},
	{"open", OPEN, "sl", .x = O_WRONLY | O_CREAT, .y = 0600, .wr = 1, .fx = "f:=abllo"},
	{"open", OPEN, "sd/new", .x = O_WRONLY | O_CREAT, .y = 0644, .fx = "d/new:f0644"},
	{"open", OPEN, "missing", .x = O_RDONLY, .err = ENOENT},
	{"open", OPEN, "nodir/x", .x = O_WRONLY | O_CREAT, .y = 0644, .err = ENOENT},
	{"open", OPEN, "", .x = O_RDONLY, .err = ENOENT},
	{"open", OPEN, "dang", .x = O_RDONLY, .err = ENOENT},
	{"open", OPEN, "f/", .x = O_RDONLY, .err = ENOTDIR},
	{"open", OPEN, "f/x", .x = O_WRONLY | O_CREAT, .y = 0644, .err = ENOTDIR},
	{"open", OPEN, "sl/", .x = O_RDONLY, .err = ENOTDIR},
	{"open", OPEN, "new/", .x = O_WRONLY | O_CREAT, .y = 0644, .err = EISDIR, .fx = "new:!"},
	{"open", OPEN, "d", .x = O_RDONLY},
	{"open", OPEN, "d", .x = O_WRONLY, .err = EISDIR},
	{"open", OPEN, "d", .x = O_RDWR, .err = EISDIR},
	{"open", OPEN, "d", .x = O_RDONLY | O_CREAT, .y = 0644, .err = EISDIR},
	{"open", OPEN, "d", .x = O_RDONLY | O_DIRECTORY},
	{"open", OPEN, "d/", .x = O_RDONLY | O_DIRECTORY},
	{"open", OPEN, "f", .x = O_RDONLY | O_DIRECTORY, .err = ENOTDIR},
	{"open", OPEN, "fifo", .x = O_RDONLY | O_DIRECTORY | O_NONBLOCK, .err = ENOTDIR},
	{"open", OPEN, "sd", .x = O_RDONLY | O_DIRECTORY},
	{"open", OPEN, "sd", .x = O_RDONLY | O_DIRECTORY | O_NOFOLLOW, .err = ENOTDIR},
	{"open", OPEN, "new", .x = O_RDONLY | O_CREAT | O_DIRECTORY, .y = 0755, .err = EINVAL, .fx = "new:!"},
	{"open", OPEN, "sl", .x = O_RDONLY | O_NOFOLLOW, .err = ELOOP},
	{"open", OPEN, "sl", .x = O_WRONLY | O_CREAT | O_NOFOLLOW, .y = 0644, .err = ELOOP},
	{"open", OPEN, "sl", .x = O_PATH | O_NOFOLLOW},
	{"open", OPEN, "sd/g2", .x = O_RDONLY | O_NOFOLLOW},
	{"open", OPEN, "f", .x = O_RDONLY | O_NOFOLLOW},
	{"open", OPEN, "loop1", .x = O_RDONLY, .err = ELOOP},
	{"open", OPEN, "self", .x = O_RDONLY, .err = ELOOP},
	{"open", OPEN, "loop1/x", .x = O_WRONLY | O_CREAT, .y = 0644, .err = ELOOP},
	{"open", OPEN, "fifo", .x = O_RDONLY | O_NONBLOCK},
	{"open", OPEN, "fifo", .x = O_WRONLY | O_NONBLOCK, .err = ENXIO},
	{"open", OPEN, "f", .x = O_RDONLY | O_NONBLOCK},
	{"open", OPEN, "f", .x = O_WRONLY | O_SYNC, .wr = 1, .fx = "f:=abllo"},
	{"open", OPEN, "f", .x = O_WRONLY | O_DSYNC, .wr = 1, .fx = "f:=abllo"},
	{"open", OPEN, "f", .x = O_RDWR | O_CLOEXEC, .wr = 1, .fx = "f:=abllo"},
	{"open", OPEN, "f", .x = O_RDONLY | O_NOATIME},
	{"open", OPEN, "f", .x = O_RDONLY | O_NOCTTY},
	{"open", OPEN, "f", .x = O_RDWR | O_ASYNC},
	{"open", OPEN, "f", .x = O_RDWR | O_LARGEFILE, .wr = 1, .fx = "f:=abllo"},
	{"open", OPEN, "f", .x = O_PATH},
	{"open", OPEN, "d", .x = O_PATH | O_DIRECTORY},
	{"open", OPEN, "ro", .x = O_WRONLY, .wr = 1, .fx = "ro:=ab", .why = "root overrides 0444"},
	{"open", OPEN, "f", .x = O_RDONLY | O_DIRECT, .only = 1, .alt = EINVAL, .why = "O_DIRECT: tpfs may refuse it (fsd/DESIGN.md)"},
	{"open", OPEN, ".", .x = O_TMPFILE | O_RDWR, .y = 0600, .wr = 1, .only = 1, .alt = EOPNOTSUPP,
	 .why = "O_TMPFILE: optional for a file system"},

	/* ---- mkdir, mkfifo, mknod ---- */
	{"mkdir", MKDIR, "new", .x = 0755, .fx = "new:d0755 n2 u0 g0; .:M+ C+"},
	{"mkdir", MKDIR, "new", .x = 0777, .fx = "new:d0755"},
	{"mkdir", MKDIR, "new", .x = 01777, .fx = "new:d1755"},
	{"mkdir", MKDIR, "new", .x = 02755, .fx = "new:d0755", .why = "S_ISGID is not taken from mkdir's mode"},
	{"mkdir", MKDIR, "new/", .x = 0700, .fx = "new:d0700"},
	{"mkdir", MKDIR, "d/new", .x = 0755, .fx = "d:n3 M+ C+; d/new:d0755 n2"},
	{"mkdir", MKDIR, "sd/new", .x = 0755, .fx = "d/new:d"},
	{"mkdir", MKDIR, "f", .x = 0755, .err = EEXIST},
	{"mkdir", MKDIR, "d", .x = 0755, .err = EEXIST},
	{"mkdir", MKDIR, "d/", .x = 0755, .err = EEXIST},
	{"mkdir", MKDIR, "sl", .x = 0755, .err = EEXIST},
	{"mkdir", MKDIR, "dang", .x = 0755, .err = EEXIST, .fx = "nowhere:!"},
	{"mkdir", MKDIR, "nodir/x", .x = 0755, .err = ENOENT},
	{"mkdir", MKDIR, "", .x = 0755, .err = ENOENT},
	{"mkdir", MKDIR, "f/x", .x = 0755, .err = ENOTDIR},
	{"mkdir", MKDIR, "loop1/x", .x = 0755, .err = ELOOP},
	{"mkdir", MKFIFO, "new", .x = 0644, .fx = "new:p0644 n1 u0 g0; .:M+ C+"},
	{"mkdir", MKFIFO, "new", .x = 0666, .fx = "new:p0644"},
	{"mkdir", MKFIFO, "f", .x = 0644, .err = EEXIST},
	{"mkdir", MKFIFO, "nodir/p", .x = 0644, .err = ENOENT},
	{"mkdir", MKFIFO, "f/p", .x = 0644, .err = ENOTDIR},
	{"mkdir", MKNOD, "new", .x = S_IFREG | 0600, .fx = "new:f0600 s0 n1"},
	{"mkdir", MKNOD, "new", .x = 0644, .fx = "new:f0644", .why = "type 0 is a regular file"},
	{"mkdir", MKNOD, "new", .x = S_IFCHR | 0644, .y = 0x103 /* makedev(1, 3) */, .fx = "new:c0644 r1,3"},
	{"mkdir", MKNOD, "new", .x = S_IFBLK | 0600, .y = 0x700, .fx = "new:b0600 r7,0"},
	{"mkdir", MKNOD, "new", .x = S_IFSOCK | 0755, .fx = "new:S0755"},
	{"mkdir", MKNOD, "new", .x = S_IFIFO | 0640, .fx = "new:p0640"},
	{"mkdir", MKNOD, "new", .x = S_IFDIR | 0755, .err = EPERM},
	{"mkdir", MKNOD, "new", .x = S_IFMT | 0755, .err = EINVAL},
	{"mkdir", MKNOD, "f", .x = S_IFREG | 0644, .err = EEXIST},
	{"mkdir", MKNOD, "w/c", .x = S_IFCHR | 0644, .y = 0x103, .who = U1, .err = EPERM},
	{"mkdir", MKNOD, "w/r", .x = S_IFREG | 0640, .who = U1, .fx = "w/r:f0640 u1000 g1000"},
	{"mkdir", MKNOD, "w/p", .x = S_IFIFO | 0640, .who = U1, .fx = "w/p:p0640 u1000 g1000"},

	/* ---- chmod ---- */
	{"chmod", CHMOD, "f", .x = 0600, .fx = "f:f0600 M= C+"},
	{"chmod", CHMOD, "f", .x = 07777, .fx = "f:f7777"},
	{"chmod", CHMOD, "f", .x = 01644, .fx = "f:f1644"},
	{"chmod", CHMOD, "d", .x = 01777, .fx = "d:d1777"},
	{"chmod", CHMOD, "d", .x = 0, .fx = "d:d0000"},
	{"chmod", CHMOD, "sl", .x = 0600, .fx = "f:f0600; sl:l0777"},
	{"chmod", CHMOD, "fifo", .x = 0600, .fx = "fifo:p0600"},
	{"chmod", CHMOD, "dang", .x = 0600, .err = ENOENT},
	{"chmod", CHMOD, "missing", .x = 0600, .err = ENOENT},
	{"chmod", CHMOD, "f/x", .x = 0600, .err = ENOTDIR},
	{"chmod", CHMOD, "loop1", .x = 0600, .err = ELOOP},
	{"chmod", CHMOD, "f", .x = 0777, .who = U1, .err = EPERM, .fx = "f:f0644"},
	{"chmod", CHMOD, "g", .x = 0700, .who = U1, .fx = "g:f0700 C+"},
	{"chmod", CHMOD, "g", .x = 04755, .who = U1, .fx = "g:f4755"},
	{"chmod", CHMOD, "g", .x = 02755, .who = U1, .fx = "g:f2755", .why = "owner in the file's group"},
	{"chmod", CHMOD, "g", .x = 02755, .who = U1, .pre = "chgrp 2000 g", .fx = "g:f0755 g2000",
	 .why = "S_ISGID dropped: owner not in the file's group"},
	{"chmod", CHMOD, "u1d", .x = 02755, .who = U1, .pre = "chgrp 2000 u1d", .fx = "u1d:d0755"},
	{"chmod", CHMOD, "gw", .x = 0666, .who = U2, .err = EPERM},

	/* ---- chown, lchown ---- */
	{"chown", CHOWN, "f", .x = 1000, .y = 1000, .fx = "f:u1000 g1000 C+ M="},
	{"chown", CHOWN, "f", .x = -1, .y = 1000, .fx = "f:u0 g1000"},
	{"chown", CHOWN, "f", .x = 1000, .y = -1, .fx = "f:u1000 g0"},
	{"chown", CHOWN, "f", .x = -1, .y = -1, .fx = "f:u0 g0 f0644"},
	{"chown", CHOWN, "sl", .x = 1000, .y = 1001, .fx = "f:u1000 g1001; sl:u0 g0"},
	{"chown", LCHOWN, "sl", .x = 1000, .y = 1001, .fx = "f:u0 g0; sl:u1000 g1001 =f"},
	{"chown", LCHOWN, "dang", .x = 1000, .y = 1000, .fx = "dang:u1000"},
	{"chown", CHOWN, "dang", .x = 1000, .y = 1000, .err = ENOENT},
	{"chown", CHOWN, "missing", .x = 1000, .y = 1000, .err = ENOENT},
	{"chown", CHOWN, "d", .x = 1000, .y = 1000, .fx = "d:d0755 u1000 g1000"},
	{"chown", CHOWN, "fifo", .x = 1000, .y = 1000, .fx = "fifo:p0644 u1000"},
	{"chown", CHOWN, "loop1", .x = 1000, .y = 1000, .err = ELOOP},
	{"chown", CHOWN, "f/x", .x = 1000, .y = 1000, .err = ENOTDIR},
	{"chown", CHOWN, "g", .x = 1001, .y = -1, .who = U1, .err = EPERM, .fx = "g:u1000"},
	{"chown", CHOWN, "g", .x = 1000, .y = -1, .who = U1, .fx = "g:u1000"},
	{"chown", CHOWN, "g", .x = -1, .y = 1001, .who = U1, .err = EPERM, .fx = "g:g1000"},
	{"chown", CHOWN, "w/u2f", .x = -1, .y = 1000, .who = U2, .fx = "w/u2f:u1001 g1000",
	 .why = "to a supplementary group"},
	{"chown", CHOWN, "w/u2f", .x = -1, .y = 1002, .who = U2, .err = EPERM},
	{"chown", CHOWN, "f", .x = 1000, .y = 1000, .who = U1, .err = EPERM},
	{"chown", LCHOWN, "u1d/sl", .x = -1, .y = 1000, .who = U1, .pre = "ln -s x u1d/sl && chown -h 1000:0 u1d/sl",
	 .fx = "u1d/sl:u1000 g1000"},

	/* ---- link ---- */
	{"link", LINK, "f", "new", .fx = "f:n2 C+; new:f0644 n2 =hello; .:M+ C+"},
	{"link", LINK, "h1", "new", .fx = "h1:n3; h2:n3; new:n3 =link"},
	{"link", LINK, "f", "d/new", .fx = "d/new:n2 =hello; d:M+"},
	{"link", LINK, "d", "new", .err = EPERM},
	{"link", LINK, "f", "f", .err = EEXIST},
	{"link", LINK, "f", "h1", .err = EEXIST, .fx = "h1:=link n2"},
	{"link", LINK, "f", "d", .err = EEXIST},
	{"link", LINK, "f", "dang", .err = EEXIST, .fx = "nowhere:!"},
	{"link", LINK, "missing", "new", .err = ENOENT},
	{"link", LINK, "f", "nodir/x", .err = ENOENT},
	{"link", LINK, "f", "f/x", .err = ENOTDIR},
	{"link", LINK, "f", "new/", .err = ENOENT},
	{"link", LINK, "sl", "new", .fx = "new:l =f n2; sl:n2; f:n1"},
	{"link", LINKF, "sl", "new", .fx = "new:f =hello n2; f:n2; sl:n1"},
	{"link", LINK, "dang", "new", .fx = "new:l =nowhere"},
	{"link", LINK, "loop1", "new", .fx = "new:l =loop2"},
	{"link", LINKF, "loop1", "new", .err = ELOOP},
	{"link", LINK, "fifo", "new", .fx = "new:p n2"},
	{"link", LINK, "f", "@/new", .err = EXDEV, .fx = "f:n1"},
	{"link", LINK, "f", "w/l", .who = U1, .err = EPERM, .why = "fs.protected_hardlinks=1"},
	{"link", LINK, "w/u1f", "w/l", .who = U1, .fx = "w/l:u1000 n2"},
	{"link", LINK, "w/u1f", "nw/l", .who = U1, .err = EACCES},

	/* ---- rename ---- */
	{"rename", RENAME, "f", "new", .fx = "f:!; new:f0644 =hello n1; .:M+ C+"},
	{"rename", RENAME, "f", "g", .fx = "f:!; g:=hello u0 f0644"},
	{"rename", RENAME, "f", "h1", .fx = "f:!; h1:=hello n1; h2:n1 =link"},
	{"rename", RENAME, "h1", "h2", .fx = "h1:n2; h2:n2", .why = "two names of one file: nothing happens"},
	{"rename", RENAME, "f", "f", .fx = "f:=hello"},
	{"rename", RENAME, "f", "d/new", .fx = "f:!; d/new:=hello; d:M+ C+"},
	{"rename", RENAME, "d", "new", .fx = "d:!; new:d0755 n2; new/g2:=g2"},
	{"rename", RENAME, "d", "e", .fx = "d:!; e:d n2; e/g2:=g2"},
	{"rename", RENAME, "e", "ne/sub", .fx = "e:!; ne:n3; ne/sub:d n2"},
	{"rename", RENAME, "ne/x", "e/x", .fx = "ne/x:!; e/x:=x; e:M+; ne:M+"},
	{"rename", RENAME, "d", "w/ud", .fx = "d:!; w/ud/g2:=g2; w:n4", .why = "over an empty directory elsewhere"},
	{"rename", RENAME, "ne", "w/ud", .x = RENAME_EXCHANGE, .fx = "ne:d; w/ud/x:=x; w:n4"},
	{"rename", RENAME, "f", "w/ud", .x = RENAME_EXCHANGE, .fx = "f:d; w/ud:f =hello; w:n3"},
	{"rename", RENAME, "d", "ne", .err = ENOTEMPTY, .fx = "ne/x:=x"},
	{"rename", RENAME, "e", "ne", .err = ENOTEMPTY},
	{"rename", RENAME, "d", "f", .err = ENOTDIR},
	{"rename", RENAME, "f", "d", .err = EISDIR},
	{"rename", RENAME, "f", "e", .err = EISDIR},
	{"rename", RENAME, "d", "d/new", .err = EINVAL},
	{"rename", RENAME, "d", "d/a/b/c/x", .pre = "mkdir -p d/a/b/c", .err = EINVAL},
	{"rename", RENAME, "d", "sd/new", .err = EINVAL},
	{"rename", RENAME, "d", "d/new/x", .err = ENOENT},
	{"rename", RENAME, "ne", "ne/x/y", .err = ENOTDIR},
	{"rename", RENAME, "missing", "new", .err = ENOENT},
	{"rename", RENAME, "f", "nodir/x", .err = ENOENT},
	{"rename", RENAME, "f", "f/x", .err = ENOTDIR},
	{"rename", RENAME, "f", "new/", .err = ENOTDIR},
	{"rename", RENAME, "f/", "new", .err = ENOTDIR},
	{"rename", RENAME, "d", "new/", .fx = "new:d"},
	{"rename", RENAME, "sl", "new", .fx = "new:l =f; f:f =hello; sl:!"},
	{"rename", RENAME, "dang", "d/new", .fx = "d/new:l =nowhere"},
	{"rename", RENAME, "f", "loop1", .fx = "loop1:f =hello"},
	{"rename", RENAME, "sd", "e", .err = EISDIR, .why = "a symlink (not a directory) over a directory"},
	{"rename", RENAME, ".", "new", .err = EBUSY},
	{"rename", RENAME, "d", ".", .err = EBUSY},
	{"rename", RENAME, "d/..", "new", .err = EBUSY},
	{"rename", RENAME, "f", "@/new", .err = EXDEV, .fx = "f:=hello"},
	{"rename", RENAME, "@/f", "new", .err = EXDEV, .fx = "new:!"},
	{"rename", RENAME, "d", "@/new", .err = EXDEV},
	{"rename", RENAME, "f", "g", .x = RENAME_NOREPLACE, .err = EEXIST, .fx = "g:=data1"},
	{"rename", RENAME, "f", "new", .x = RENAME_NOREPLACE, .fx = "new:=hello; f:!"},
	{"rename", RENAME, "f", "d", .x = RENAME_EXCHANGE, .fx = "f:d; f/g2:=g2; d:f =hello"},
	{"rename", RENAME, "e", "ne/x", .x = RENAME_EXCHANGE, .fx = "e:f =x; ne/x:d; ne:n3"},
	{"rename", RENAME, "f", "missing", .x = RENAME_EXCHANGE, .err = ENOENT},
	{"rename", RENAME, "d", "d/g2", .x = RENAME_EXCHANGE, .err = EINVAL},
	{"rename", RENAME, "f", "new", .x = 0x100, .err = EINVAL},
	{"rename", RENAME, "f", "g", .x = RENAME_NOREPLACE | RENAME_EXCHANGE, .err = EINVAL},
	{"rename", RENAME, "w/u2f", "w/z", .who = U1, .fx = "w/z:u1001"},
	{"rename", RENAME, "w/ud", "u1d/ud", .who = U1, .err = EACCES,
	 .why = "moving a directory to another parent needs write permission on it"},
	{"rename", RENAME, "w/u1d", "u1d/x", .who = U1, .fx = "u1d/x:d u1000; u1d:n4"},
	{"rename", RENAME, "f", "w/f", .who = U1, .err = EACCES},
	{"rename", RENAME, "nw/f", "w/f", .who = U1, .err = EACCES},

	/* ---- rmdir ---- */
	{"rmdir", RMDIR, "e", .fx = "e:!; .:M+ C+"},
	{"rmdir", RMDIR, "e/", .fx = "e:!"},
	{"rmdir", RMDIR, "e", .pre = "touch e/a && rm e/a", .fx = "e:!"},
	{"rmdir", RMDIR, "ne", .err = ENOTEMPTY, .fx = "ne/x:=x"},
	{"rmdir", RMDIR, "f", .err = ENOTDIR},
	{"rmdir", RMDIR, "d/g2", .err = ENOTDIR},
	{"rmdir", RMDIR, "missing", .err = ENOENT},
	{"rmdir", RMDIR, "nodir/x", .err = ENOENT},
	{"rmdir", RMDIR, "f/x", .err = ENOTDIR},
	{"rmdir", RMDIR, ".", .err = EINVAL},
	{"rmdir", RMDIR, "e/.", .err = EINVAL},
	{"rmdir", RMDIR, "e/..", .err = ENOTEMPTY},
	{"rmdir", RMDIR, "sd", .err = ENOTDIR},
	{"rmdir", RMDIR, "d/a", .pre = "mkdir -p d/a/b", .err = ENOTEMPTY},
	{"rmdir", RMDIR, "d/a/b", .pre = "mkdir -p d/a/b", .fx = "d/a:n2; d/a/b:!"},
	{"rmdir", RMDIR, "t/u1d", .who = U1, .fx = "t/u1d:!"},
	{"rmdir", RMDIR, "w/ud", .who = U1, .fx = "w/ud:!", .why = "w is 0777, not sticky"},
	{"rmdir", RMDIR, "nw/sub", .who = U1, .pre = "mkdir nw/sub", .err = EACCES},

	/* ---- symlink, readlink ---- */
	{"symlink", SYMLINK, "new", "f", .fx = "new:l0777 =f n1 u0 g0 s1; .:M+ C+"},
	{"symlink", SYMLINK, "new", "nowhere/x y", .fx = "new:l =nowhere/x\\sy"},
	{"symlink", SYMLINK, "new", "#4068", .fx = "new:l s4068"},
	{"symlink", SYMLINK, "new", "#4096", .err = ENAMETOOLONG, .fx = "new:!"},
	{"symlink", SYMLINK, "new", "", .err = ENOENT},
	{"symlink", SYMLINK, "f", "x", .err = EEXIST, .fx = "f:f =hello"},
	{"symlink", SYMLINK, "d", "x", .err = EEXIST},
	{"symlink", SYMLINK, "dang", "x", .err = EEXIST, .fx = "nowhere:!"},
	{"symlink", SYMLINK, "nodir/n", "x", .err = ENOENT},
	{"symlink", SYMLINK, "f/n", "x", .err = ENOTDIR},
	{"symlink", SYMLINK, "new/", "x", .err = ENOENT},
	{"symlink", SYMLINK, "d/up", "../f", .fx = "d/up:l =../f"},
	{"symlink", SYMLINK, "w/l", "f", .who = U1, .fx = "w/l:l u1000 g1000"},
	{"symlink", READLINK, "sl", .x = 100, .cr = 1, .ret = 1},
	{"symlink", READLINK, "sd", .x = 100, .cr = 1, .ret = 1},
	{"symlink", READLINK, "long", .x = 5000, .pre = "ln -s \"$(head -c 4068 /dev/zero | tr '\\0' a)\" long", .cr = 1,
	 .ret = 4068},
	{"symlink", READLINK, "long", .x = 10, .pre = "ln -s \"$(head -c 100 /dev/zero | tr '\\0' a)\" long", .cr = 1,
	 .ret = 10, .why = "truncated to the buffer"},
	{"symlink", READLINK, "sl", .x = 0, .err = EINVAL},
	{"symlink", READLINK, "f", .x = 100, .err = EINVAL},
	{"symlink", READLINK, "d", .x = 100, .err = EINVAL},
	{"symlink", READLINK, "missing", .x = 100, .err = ENOENT},

	/* ---- truncate, ftruncate ---- */
	{"truncate", TRUNC, "f", .x = 2, .fx = "f:s2 =he M+ C+"},
	{"truncate", TRUNC, "f", .x = 0, .fx = "f:s0"},
	{"truncate", TRUNC, "f", .x = 10, .fx = "f:s10"},
	{"truncate", TRUNC, "f", .x = 1 << 20, .fx = "f:s1048576"},
	{"truncate", TRUNC, "f", .x = 100000, .pre = "seq 60000 > f", .fx = "f:s100000"},
	{"truncate", TRUNC, "f", .x = -1, .err = EINVAL},
	{"truncate", TRUNC, "d", .x = 0, .err = EISDIR},
	{"truncate", TRUNC, "fifo", .x = 0, .err = EINVAL},
	{"truncate", TRUNC, "sl", .x = 1, .fx = "f:s1 =h"},
	{"truncate", TRUNC, "h1", .x = 0, .fx = "h2:s0"},
	{"truncate", TRUNC, "dang", .x = 0, .err = ENOENT},
	{"truncate", TRUNC, "missing", .x = 0, .err = ENOENT},
	{"truncate", TRUNC, "f/x", .x = 0, .err = ENOTDIR},
	{"truncate", TRUNC, "loop1", .x = 0, .err = ELOOP},
	{"truncate", TRUNC, "f", .x = 0, .who = U1, .err = EACCES},
	{"truncate", TRUNC, "g", .x = 1, .who = U1, .fx = "g:s1 =d"},
	{"truncate", TRUNC, "gw", .x = 0, .who = U2, .fx = "gw:s0"},
	{"truncate", FTRUNC, "f", .x = O_WRONLY, .y = 3, .fx = "f:s3 =hel M+ C+"},
	{"truncate", FTRUNC, "f", .x = O_RDWR, .y = 100, .fx = "f:s100"},
	{"truncate", FTRUNC, "f", .x = O_WRONLY | O_APPEND, .y = 1, .fx = "f:s1"},
	{"truncate", FTRUNC, "f", .x = O_RDONLY, .y = 3, .err = EINVAL, .fx = "f:s5"},
	{"truncate", FTRUNC, "f", .x = O_WRONLY, .y = -1, .err = EINVAL},
	{"truncate", FTRUNC, "d", .x = O_RDONLY, .y = 0, .err = EINVAL},
	{"truncate", FTRUNC, "f", .x = O_RDONLY, .y = 0, .who = U1, .err = EINVAL},

	/* ---- unlink ---- */
	{"unlink", UNLINK, "f", .fx = "f:!; .:M+ C+"},
	{"unlink", UNLINK, "h1", .fx = "h1:!; h2:n1 =link C+"},
	{"unlink", UNLINK, "d", .err = EISDIR},
	{"unlink", UNLINK, "missing", .err = ENOENT},
	{"unlink", UNLINK, "", .err = ENOENT},
	{"unlink", UNLINK, "sl", .fx = "sl:!; f:f0644 =hello"},
	{"unlink", UNLINK, "sd", .fx = "sd:!; d:d"},
	{"unlink", UNLINK, "dang", .fx = "dang:!"},
	{"unlink", UNLINK, "loop1", .fx = "loop1:!; loop2:l"},
	{"unlink", UNLINK, "fifo", .fx = "fifo:!"},
	{"unlink", UNLINK, "f/", .err = ENOTDIR},
	{"unlink", UNLINK, "nodir/x", .err = ENOENT},
	{"unlink", UNLINK, "f/x", .err = ENOTDIR},
	{"unlink", UNLINK, "sd/g2", .fx = "d/g2:!; d:M+"},
	{"unlink", UNLINK, ".", .err = EISDIR},
	{"unlink", UNLINK, "w/u2f", .who = U1, .fx = "w/u2f:!"},
	{"unlink", UNLINK, "w/rootf", .who = U1, .fx = "w/rootf:!"},
	{"unlink", UNLINK, "nw/f", .who = U1, .err = EACCES},
	{"unlink", UNLINK, "nx/f", .who = U1, .err = EACCES},

	/* ---- utimensat ---- */
	{"utimensat", UTIMENS, "f", .tnull = 1, .fx = "f:a* m* C+"},
	{"utimensat", UTIMENS, "f", .t = {{100, 5}, {200, 7}}, .fx = "f:a100.5 m200.7 C+"},
	{"utimensat", UTIMENS, "f", .t = {{0, UTIME_OMIT}, {300, 0}}, .fx = "f:m300.0 A= C+"},
	{"utimensat", UTIMENS, "f", .t = {{400, 0}, {0, UTIME_OMIT}}, .fx = "f:a400.0 M= C+"},
	{"utimensat", UTIMENS, "f", .t = {{0, UTIME_OMIT}, {0, UTIME_OMIT}}, .fx = "f:A= M= C="},
	{"utimensat", UTIMENS, "f", .t = {{0, UTIME_NOW}, {0, UTIME_NOW}}, .fx = "f:a* m* C+"},
	{"utimensat", UTIMENS, "f", .t = {{0, UTIME_NOW}, {500, 1}}, .fx = "f:a* m500.1"},
	{"utimensat", UTIMENS, "f", .t = {{-100, 0}, {-200, 5}}, .fx = "f:a-100.0 m-200.5"},
	{"utimensat", UTIMENS, "f", .t = {{8589934592LL, 0}, {8589934592LL, 999999999}},
	 .fx = "f:a8589934592.0 m8589934592.999999999"},
	{"utimensat", UTIMENS, "f", .t = {{0, 0}, {0, 0}}, .fx = "f:a0.0 m0.0"},
	{"utimensat", UTIMENS, "f", .t = {{0, 1000000000}, {0, 0}}, .err = EINVAL},
	{"utimensat", UTIMENS, "f", .t = {{0, 0}, {0, -1}}, .err = EINVAL},
	{"utimensat", UTIMENS, "f", .x = 0x8000, .tnull = 1, .err = EINVAL},
	{"utimensat", UTIMENS, "sl", .x = AT_SYMLINK_NOFOLLOW, .t = {{100, 0}, {200, 0}}, .fx = "sl:m200.0; f:M="},
	{"utimensat", UTIMENS, "sl", .t = {{100, 0}, {200, 0}}, .fx = "f:m200.0"},
	{"utimensat", UTIMENS, "dang", .x = AT_SYMLINK_NOFOLLOW, .t = {{100, 0}, {200, 0}}, .fx = "dang:m200.0"},
	{"utimensat", UTIMENS, "dang", .tnull = 1, .err = ENOENT},
	{"utimensat", UTIMENS, "missing", .tnull = 1, .err = ENOENT},
	{"utimensat", UTIMENS, "d", .t = {{100, 0}, {200, 0}}, .fx = "d:m200.0 a100.0"},
	{"utimensat", UTIMENS, "f", .tnull = 1, .who = U1, .err = EACCES, .fx = "f:M="},
	{"utimensat", UTIMENS, "gw", .tnull = 1, .who = U2, .fx = "gw:m* C+", .why = "write permission suffices"},
	{"utimensat", UTIMENS, "gw", .t = {{0, UTIME_NOW}, {0, UTIME_NOW}}, .who = U2, .fx = "gw:m*"},
	{"utimensat", UTIMENS, "gw", .t = {{100, 0}, {200, 0}}, .who = U2, .err = EPERM},
	{"utimensat", UTIMENS, "gw", .t = {{0, UTIME_OMIT}, {0, UTIME_NOW}}, .who = U2, .err = EPERM},
	{"utimensat", UTIMENS, "g", .t = {{100, 0}, {200, 0}}, .who = U1, .fx = "g:m200.0"},

	/* ---- extended attributes ---- */
	{"xattr", SETX, "f", "user.b", "v", .fx = "f:xuser.b=v xuser.a=1 C+ M="},
	{"xattr", SETX, "f", "user.b", "", .fx = "f:xuser.b="},
	{"xattr", SETX, "f", "user.a", "2", .x = XATTR_CREATE, .err = EEXIST, .fx = "f:xuser.a=1"},
	{"xattr", SETX, "f", "user.b", "2", .x = XATTR_CREATE, .fx = "f:xuser.b=2"},
	{"xattr", SETX, "f", "user.b", "2", .x = XATTR_REPLACE, .err = ENODATA, .fx = "f:Xuser.b"},
	{"xattr", SETX, "f", "user.a", "2", .x = XATTR_REPLACE, .fx = "f:xuser.a=2"},
	{"xattr", SETX, "f", "user.a", "2", .x = XATTR_CREATE | XATTR_REPLACE, .err = EEXIST},
	{"xattr", SETX, "f", "user.b", "#2000", .fx = "f:xuser.b=#2000"},
	{"xattr", SETX, "f", "user.b", "#65537", .err = E2BIG},
	{"xattr", SETX, "f", "user.b", "#65536", .only = 1, .fx = "f:xuser.b=#65536",
	 .why = "tpfs takes values up to 64 KiB (ext4 only one block)"},
	{"xattr", SETX, "f", "user.#250", "v", .fx = "f:xuser.#250=v", .why = "a name of 255 bytes"},
	{"xattr", SETX, "f", "user.#251", "v", .err = ERANGE},
	{"xattr", SETX, "f", "", "v", .err = ERANGE},
	{"xattr", SETX, "f", "foo.bar", "v", .err = EOPNOTSUPP},
	{"xattr", SETX, "f", "trusted.t", "v", .fx = "f:xtrusted.t=v"},
	{"xattr", SETX, "sl", "user.c", "v", .fx = "f:xuser.c=v"},
	{"xattr", LSETX, "sl", "user.c", "v", .err = EPERM},
	{"xattr", LSETX, "sl", "trusted.t", "v", .fx = "sl:xtrusted.t=v; f:Xtrusted.t"},
	{"xattr", SETX, "f", "security.foo", "v", .fx = "f:xsecurity.foo=v"},
	{"xattr", SETX, "d", "user.c", "v", .fx = "d:xuser.c=v"},
	{"xattr", SETX, "fifo", "user.c", "v", .err = EPERM},
	{"xattr", SETX, "missing", "user.c", "v", .err = ENOENT},
	{"xattr", GETX, "f", "user.a", .x = 0, .cr = 1, .ret = 1},
	{"xattr", GETX, "f", "user.a", .x = 100, .cr = 1, .ret = 1},
	{"xattr", GETX, "f", "user.big", .x = 100, .cr = 1, .ret = 100},
	{"xattr", GETX, "f", "user.big", .x = 0, .cr = 1, .ret = 100},
	{"xattr", GETX, "f", "user.big", .x = 99, .err = ERANGE},
	{"xattr", GETX, "f", "user.none", .x = 100, .err = ENODATA},
	{"xattr", GETX, "d", "user.none", .x = 100, .err = ENODATA},
	{"xattr", GETX, "missing", "user.a", .x = 100, .err = ENOENT},
	{"xattr", LISTX, "f", .x = 0, .cr = 1, .ret = 16},
	{"xattr", LISTX, "f", .x = 100, .cr = 1, .ret = 16},
	{"xattr", LISTX, "f", .x = 3, .err = ERANGE},
	{"xattr", LISTX, "d", .x = 100, .cr = 1, .ret = 0},
	{"xattr", REMOVEX, "f", "user.a", .fx = "f:Xuser.a xuser.big=#100 C+"},
	{"xattr", REMOVEX, "f", "user.none", .err = ENODATA},
	{"xattr", REMOVEX, "missing", "user.a", .err = ENOENT},
	{"xattr", SETX, "g", "user.b", "v", .who = U1, .fx = "g:xuser.b=v"},
	{"xattr", SETX, "f", "user.b", "v", .who = U1, .err = EACCES},
	{"xattr", SETX, "g", "trusted.t", "v", .who = U1, .err = EPERM},
	{"xattr", GETX, "f", "user.a", .x = 100, .who = U1, .cr = 1, .ret = 1},
	{"xattr", GETX, "g", "user.a", .x = 100, .who = U2, .err = EACCES},
	{"xattr", REMOVEX, "f", "user.a", .who = U1, .err = EACCES},

	/* ---- names: ENAMETOOLONG at 256 bytes, ELOOP, ENOTDIR, ENOENT ---- */
	{"names", OPEN, N255, .x = O_WRONLY | O_CREAT, .y = 0644, .wr = 1, .fx = N255 ":f0644 =ab"},
	{"names", OPEN, N256, .x = O_WRONLY | O_CREAT, .y = 0644, .err = ENAMETOOLONG},
	{"names", OPEN, N256, .x = O_RDONLY, .err = ENAMETOOLONG},
	{"names", OPEN, "d/" N256 "/x", .x = O_RDONLY, .err = ENAMETOOLONG},
	{"names", MKDIR, N255, .x = 0755, .fx = N255 ":d0755"},
	{"names", MKDIR, N256, .x = 0755, .err = ENAMETOOLONG},
	{"names", MKFIFO, N256, .x = 0644, .err = ENAMETOOLONG},
	{"names", MKNOD, N256, .x = S_IFREG | 0644, .err = ENAMETOOLONG},
	{"names", SYMLINK, N255, "f", .fx = N255 ":l =f"},
	{"names", SYMLINK, N256, "f", .err = ENAMETOOLONG},
	{"names", SYMLINK, "new", N256, .fx = "new:l s256", .why = "a long target is fine"},
	{"names", LINK, "f", N255, .fx = N255 ":=hello n2"},
	{"names", LINK, "f", N256, .err = ENAMETOOLONG},
	{"names", RENAME, "f", N255, .fx = N255 ":=hello; f:!"},
	{"names", RENAME, "f", N256, .err = ENAMETOOLONG, .fx = "f:=hello"},
	{"names", RENAME, N256, "x", .err = ENAMETOOLONG},
	{"names", RENAME, "d", "e/" N256, .err = ENAMETOOLONG},
	{"names", UNLINK, N256, .err = ENAMETOOLONG},
	{"names", RMDIR, N256, .err = ENAMETOOLONG},
	{"names", STAT, N256, .err = ENAMETOOLONG},
	{"names", LSTAT, N256, .err = ENAMETOOLONG},
	{"names", TRUNC, N256, .x = 0, .err = ENAMETOOLONG},
	{"names", CHMOD, N256, .x = 0644, .err = ENAMETOOLONG},
	{"names", CHOWN, N256, .x = 0, .y = 0, .err = ENAMETOOLONG},
	{"names", UTIMENS, N256, .tnull = 1, .err = ENAMETOOLONG},
	{"names", SETX, N256, "user.a", "v", .err = ENAMETOOLONG},
	{"names", STAT, "#4096", .err = ENAMETOOLONG},
	{"names", OPEN, "#5000", .x = O_RDONLY, .err = ENAMETOOLONG},
	{"names", STAT, "#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200/#200",
	 .pre = "p=.; for i in $(seq 19); do p=$p/$(head -c 200 /dev/zero | tr '\\0' a); done; mkdir -p $p",
	 .why = "a path of 3818 bytes"},
	{"names", STAT, "c1", .pre = "ln -s f c40; for i in $(seq 39 -1 0); do ln -s c$((i+1)) c$i; done",
	 .why = "40 symlinks are followed"},
	{"names", STAT, "c0", .pre = "ln -s f c40; for i in $(seq 39 -1 0); do ln -s c$((i+1)) c$i; done",
	 .err = ELOOP, .why = "41 are not"},
	{"names", STAT, "loop1", .err = ELOOP},
	{"names", STAT, "self", .err = ELOOP},
	{"names", STAT, "loop1/x", .err = ELOOP},
	{"names", LSTAT, "loop1", .err = 0},
	{"names", STAT, "f/", .err = ENOTDIR},
	{"names", STAT, "f/.", .err = ENOTDIR},
	{"names", STAT, "f/..", .err = ENOTDIR},
	{"names", STAT, "d/g2/x", .err = ENOTDIR},
	{"names", STAT, "sl/", .err = ENOTDIR},
	{"names", STAT, "sd/", .err = 0},
	{"names", LSTAT, "sd/", .err = 0},
	{"names", STAT, "dang/", .err = ENOENT},
	{"names", STAT, "d/../f", .err = 0},
	{"names", STAT, "d/./g2", .err = 0},
	{"names", STAT, "nodir/x", .err = ENOENT},
	{"names", STAT, "", .err = ENOENT},
	{"names", ACCESS, "f", .x = X_OK, .err = EACCES, .why = "root needs an x bit somewhere"},
	{"names", ACCESS, "x", .x = X_OK},
	{"names", ACCESS, "d", .x = X_OK},
	{"names", ACCESS, "ro", .x = W_OK},
	{"names", ACCESS, "missing", .x = F_OK, .err = ENOENT},

	/* ---- permissions of other users ---- */
	{"perm", OPEN, "f", .x = O_RDONLY, .who = U1},
	{"perm", OPEN, "f", .x = O_WRONLY, .who = U1, .err = EACCES},
	{"perm", OPEN, "g", .x = O_RDWR, .who = U1, .wr = 1, .fx = "g:=abta1"},
	{"perm", OPEN, "g", .x = O_RDONLY, .who = U2, .err = EACCES},
	{"perm", OPEN, "gw", .x = O_RDWR, .who = U1, .why = "group by primary gid"},
	{"perm", OPEN, "gw", .x = O_RDWR, .who = U2, .wr = 1, .fx = "gw:=abp", .why = "group by supplementary gid"},
	{"perm", OPEN, "gw", .x = O_RDONLY, .who = U3, .err = EACCES},
	{"perm", OPEN, "g", .x = O_RDONLY, .who = U1, .pre = "chmod 0077 g", .err = EACCES,
	 .why = "the owner class does not fall through to group and other"},
	{"perm", OPEN, "gw", .x = O_RDONLY, .who = U1, .pre = "chmod 0606 gw", .err = EACCES,
	 .why = "nor does the group class"},
	{"perm", OPEN, "nx/f", .x = O_RDONLY, .who = U1, .err = EACCES},
	{"perm", STAT, "nx/f", .who = U1, .err = EACCES},
	{"perm", STAT, "nx", .who = U1},
	{"perm", OPEN, "nx", .x = O_RDONLY, .who = U1, .err = EACCES},
	{"perm", OPEN, "nw/f", .x = O_RDWR, .who = U1, .wr = 1, .fx = "nw/f:=ab"},
	{"perm", OPEN, "nw/new", .x = O_WRONLY | O_CREAT, .y = 0644, .who = U1, .err = EACCES},
	{"perm", MKDIR, "nw/new", .x = 0755, .who = U1, .err = EACCES},
	{"perm", OPEN, "ro", .x = O_WRONLY, .who = U1, .err = EACCES},
	{"perm", OPEN, "f", .x = O_RDONLY | O_NOATIME, .who = U1, .err = EPERM},
	{"perm", OPEN, "sl", .x = O_RDONLY, .who = U1},
	{"perm", OPEN, "t/rootf", .x = O_RDWR, .who = U1, .wr = 1, .fx = "t/rootf:=ab"},
	{"perm", UNLINK, "t/u2f", .who = U1, .err = EPERM, .why = "sticky directory"},
	{"perm", UNLINK, "t/rootf", .who = U1, .err = EPERM},
	{"perm", UNLINK, "t/u1f", .who = U1, .fx = "t/u1f:!"},
	{"perm", RENAME, "t/u2f", "t/z", .who = U1, .err = EPERM},
	{"perm", RENAME, "t/u1f", "t/z", .who = U1, .fx = "t/z:u1000"},
	{"perm", RENAME, "t/u1f", "t/u2f", .who = U1, .err = EPERM, .why = "the target is protected too"},
	{"perm", RENAME, "t/u1f", "w/z", .who = U1, .fx = "w/z:u1000"},
	{"perm", RMDIR, "t/u1d", .who = U1, .fx = "t/u1d:!"},
	{"perm", RMDIR, "t/u1d", .who = U2, .err = EPERM},
	{"perm", ACCESS, "f", .x = R_OK, .who = U1},
	{"perm", ACCESS, "f", .x = W_OK, .who = U1, .err = EACCES},
	{"perm", ACCESS, "gw", .x = W_OK, .who = U2},
	{"perm", ACCESS, "x", .x = X_OK, .who = U1},
	{"perm", ACCESS, "u1d", .x = W_OK | X_OK, .who = U1},
	{"perm", ACCESS, "u1d", .x = W_OK, .who = U2, .err = EACCES},
	{"perm", MKDIR, "u1d/sub/x", .x = 0755, .who = U2, .err = EACCES},
	{"perm", OPEN, "u1d/f", .x = O_RDONLY, .who = U3},

	/* ---- set-user-ID and set-group-ID bits ---- */
	{"setid", WRITE, "ux", .y = 0, .z = 3, .who = U2, .fx = "ux:f0775 =wwwe", .why = "non-owner write clears both"},
	{"setid", WRITE, "ux", .y = 0, .z = 3, .who = U1, .fx = "ux:f0775", .why = "the owner has no CAP_FSETID either"},
	{"setid", WRITE, "ux", .y = 0, .z = 3, .who = U2, .pre = "chmod 02664 ux", .fx = "ux:f2664",
	 .why = "S_ISGID without group execute is kept"},
	{"setid", WRITE, "ux", .y = 0, .z = 3, .who = U2, .pre = "chmod 04664 ux", .fx = "ux:f0664"},
	{"setid", WRITE, "x", .y = 0, .z = 3, .fx = "x:f6755", .why = "root keeps them (CAP_FSETID)"},
	{"setid", TRUNC, "ux", .x = 0, .who = U2, .fx = "ux:f0775 s0"},
	{"setid", FTRUNC, "ux", .x = O_WRONLY, .y = 1, .who = U2, .fx = "ux:f0775 s1"},
	{"setid", OPEN, "ux", .x = O_WRONLY | O_TRUNC, .who = U2, .fx = "ux:f0775 s0"},
	{"setid", OPEN, "x", .x = O_WRONLY | O_TRUNC, .fx = "x:f6755 s0"},
	{"setid", CHOWN, "x", .x = 0, .y = 0, .fx = "x:f0755", .why = "chown clears them, even by root"},
	{"setid", CHOWN, "x", .x = -1, .y = -1, .fx = "x:f0755"},
	{"setid", CHOWN, "x", .x = 1000, .y = -1, .fx = "x:f0755 u1000"},
	{"setid", CHOWN, "x", .x = 0, .y = 0, .pre = "chmod 06644 x", .fx = "x:f2644"},
	{"setid", CHOWN, "ux", .x = -1, .y = 1000, .who = U1, .fx = "ux:f0775"},
	{"setid", CHOWN, "sg", .x = 1000, .y = 1000, .fx = "sg:d2777 u1000 g1000", .why = "directories keep S_ISGID"},
	{"setid", FALLOC, "ux", .x = 0, .y = 0, .z = 8192, .who = U2, .fx = "ux:f0775 s8192"},
	{"setid", SETX, "ux", "user.a", "v", .who = U1, .fx = "ux:f6775", .why = "xattrs do not touch the mode"},

	/* ---- ownership of new objects, set-group-ID directories ---- */
	{"owner", OPEN, "w/new", .x = O_WRONLY | O_CREAT, .y = 0666, .who = U1, .fx = "w/new:f0644 u1000 g1000"},
	{"owner", OPEN, "w/new", .x = O_WRONLY | O_CREAT, .y = 0666, .who = U2, .fx = "w/new:u1001 g1001",
	 .why = "the primary group, not a supplementary one"},
	{"owner", MKDIR, "w/new", .x = 0777, .who = U1, .fx = "w/new:d0755 u1000 g1000 n2"},
	{"owner", MKFIFO, "w/new", .x = 0600, .who = U2, .fx = "w/new:p0600 u1001 g1001"},
	{"owner", SYMLINK, "w/new", "f", .who = U2, .fx = "w/new:l u1001 g1001"},
	{"owner", LINK, "w/u2f", "w/new", .who = U1, .pre = "chmod 0666 w/u2f", .fx = "w/new:u1001 g1001 n2"},
	{"owner", RENAME, "w/u2f", "w/new", .who = U1, .fx = "w/new:u1001 g1001"},
	{"owner", OPEN, "sg/new", .x = O_WRONLY | O_CREAT, .y = 0644, .who = U2, .fx = "sg/new:u1001 g1000",
	 .why = "setgid directory: its group"},
	{"owner", OPEN, "ng/new", .x = O_WRONLY | O_CREAT, .y = 0644, .who = U1, .fx = "ng/new:f0644 u1000 g2000"},
	{"owner", MKDIR, "ng/new", .x = 0755, .who = U1, .fx = "ng/new:d2755 u1000 g2000",
	 .why = "a subdirectory inherits S_ISGID"},
	{"owner", MKDIR, "ng/new/sub", .x = 0700, .who = U1, .pre = "mkdir ng/new && chown 1000 ng/new",
	 .fx = "ng/new/sub:d2700 g2000"},
	{"owner", OPEN, "ng/new", .x = O_WRONLY | O_CREAT, .y = 02755, .who = U1, .fx = "ng/new:f0755 g2000",
	 .why = "a new file's S_ISGID is dropped when the creator is not in its group"},
	{"owner", OPEN, "sg/new", .x = O_WRONLY | O_CREAT, .y = 02755, .who = U1, .fx = "sg/new:f2755 g1000"},
	{"owner", MKFIFO, "ng/new", .x = 0644, .who = U1, .fx = "ng/new:p0644 u1000 g2000"},
	{"owner", SYMLINK, "ng/new", "x", .who = U1, .fx = "ng/new:l u1000 g2000"},
	{"owner", MKNOD, "ng/new", .x = S_IFREG | 0600, .who = U1, .fx = "ng/new:f0600 g2000"},
	{"owner", MKDIR, "ng/new", .x = 0755, .fx = "ng/new:d2755 u0 g2000"},
	{"owner", RENAME, "w/u1f", "ng/new", .who = U1, .fx = "ng/new:g1000", .why = "rename keeps the group"},

	/* ---- limits: EFBIG, RLIMIT_FSIZE, EXDEV, fallocate ---- */
	{"limits", TRUNC, "f", .x = MAXF + 1, .err = EFBIG, .fx = "f:s5"},
	{"limits", TRUNC, "f", .x = EXT4_MAXF, .fx = "f:s17592186040320"},
	{"limits", TRUNC, "f", .x = MAXF, .only = 1, .fx = "f:s17592186044416", .why = "2^44 is tpfs's largest file"},
	{"limits", FTRUNC, "f", .x = O_WRONLY, .y = MAXF + 1, .err = EFBIG},
	{"limits", WRITE, "f", .y = MAXF, .z = 1, .err = EFBIG, .fx = "f:s5"},
	{"limits", WRITE, "f", .y = MAXF + 4096, .z = 10, .err = EFBIG, .fx = "f:s5"},
	{"limits", WRITE, "f", .y = EXT4_MAXF - 1, .z = 1, .cr = 1, .ret = 1, .fx = "f:s17592186040320"},
	{"limits", WRITE, "f", .y = MAXF - 1, .z = 1, .only = 1, .cr = 1, .ret = 1, .fx = "f:s17592186044416"},
	{"limits", WRITE, "f", .y = 4096, .z = 1, .rl = 4096, .err = EFBIG, .fx = "f:s5"},
	{"limits", WRITE, "f", .y = 4000, .z = 200, .rl = 4096, .cr = 1, .ret = 96, .fx = "f:s4096"},
	{"limits", TRUNC, "f", .x = 8192, .rl = 4096, .err = EFBIG, .fx = "f:s5"},
	{"limits", FALLOC, "f", .x = 0, .y = MAXF, .z = 4096, .err = EFBIG},
	{"limits", FALLOC, "f", .x = 0, .y = 0, .z = 0, .err = EINVAL},
	{"limits", FALLOC, "f", .x = FALLOC_FL_PUNCH_HOLE, .y = 0, .z = 2, .err = EOPNOTSUPP},
	{"limits", FALLOC, "f", .x = 0, .y = 0, .z = 10000, .fx = "f:s10000"},
	{"limits", FALLOC, "f", .x = 0, .y = 1, .z = 2, .fx = "f:s5 =hello"},
	{"limits", FALLOC, "f", .x = FALLOC_FL_KEEP_SIZE, .y = 0, .z = 8192, .fx = "f:s5 =hello"},
	{"limits", FALLOC, "f", .x = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, .y = 0, .z = 2, .fx = "f:s5"},
	{"limits", FALLOC, "f", .x = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, .y = 3, .z = 100, .fx = "f:s5"},
	{"limits", FALLOC, "f", .x = FALLOC_FL_ZERO_RANGE, .y = 0, .z = 2, .only = 1, .err = EOPNOTSUPP, .alt = ALT_OK,
	 .why = "zero range: optional"},
	{"limits", FALLOC, "fifo", .x = 0, .y = 0, .z = 10, .err = ESPIPE},
	{"limits", RENAME, "f", "@/new", .err = EXDEV},
	{"limits", RENAME, "@/d", "new", .err = EXDEV},
	{"limits", LINK, "@/f", "new", .err = EXDEV},
};

/* ---- strings: "#N" and "@/" ---- */

static char *expand(const char *s, const char *other)
{
	if (!s)
		return NULL;
	size_t cap = strlen(s) + 256, n = 0;
	for (const char *p = s; *p; p++)
		if (*p == '#')
			cap += strtoul(p + 1, NULL, 10);
	char *out = malloc(cap);
	cr_assert_not_null(out);
	if (s[0] == '@' && s[1] == '/') {
		n = (size_t)snprintf(out, cap, "%s", other);
		s++;
	}
	while (*s) {
		if (*s == '#' && s[1] >= '0' && s[1] <= '9') {
			char *end;
			unsigned long k = strtoul(s + 1, &end, 10);
			memset(out + n, 'a', k);
			n += k;
			s = end;
		} else if (*s == '\\' && s[1] == 's') {
			out[n++] = ' ';
			s += 2;
		} else {
			out[n++] = *s++;
		}
	}
	out[n] = 0;
	return out;
}

/* ---- the fixture ---- */

static void mkf(const char *root, const char *name, const char *content, mode_t mode, uid_t u, gid_t g)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", root, name);
	/* created with its mode when the umask (022) leaves it whole: fewer calls */
	cr_assert_eq(fsu_write_file(p, content, strlen(content), mode & 0777), 0, "fixture %s", p);
	if (u || g)
		cr_assert_eq(chown(p, u, g), 0, "fixture chown %s: %s", p, strerror(errno));
	if (mode & 07022)
		cr_assert_eq(chmod(p, mode), 0, "fixture chmod %s: %s", p, strerror(errno));
}

static void mkd(const char *root, const char *name, mode_t mode, uid_t u, gid_t g)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", root, name);
	cr_assert_eq(mkdir(p, mode & 0777), 0, "fixture mkdir %s: %s", p, strerror(errno));
	if (u || g)
		cr_assert_eq(chown(p, u, g), 0, "fixture chown %s: %s", p, strerror(errno));
	if (mode & 07022)
		cr_assert_eq(chmod(p, mode), 0, "fixture chmod %s: %s", p, strerror(errno));
}

static void mkl(const char *root, const char *name, const char *target)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", root, name);
	cr_assert_eq(symlink(target, p), 0, "fixture symlink %s: %s", p, strerror(errno));
}

static void mk_fixture(const char *root)
{
	char p[4096], q[4096], big[101];
	mkf(root, "f", "hello", 0644, 0, 0);
	snprintf(p, sizeof p, "%s/f", root);
	memset(big, 'a', 100);
	big[100] = 0;
	cr_assert_eq(setxattr(p, "user.a", "1", 1, 0), 0, "fixture setxattr: %s", strerror(errno));
	cr_assert_eq(setxattr(p, "user.big", big, 100, 0), 0, "fixture setxattr: %s", strerror(errno));
	mkf(root, "g", "data1", 0600, 1000, 1000);
	mkf(root, "ro", "ro", 0444, 0, 0);
	mkf(root, "x", "exe", 06755, 0, 0);
	mkf(root, "ux", "uexe", 06775, 1000, 1000);
	mkf(root, "gw", "grp", 0660, 0, 1000);
	mkf(root, "h1", "link", 0644, 0, 0);
	snprintf(p, sizeof p, "%s/h1", root);
	snprintf(q, sizeof q, "%s/h2", root);
	cr_assert_eq(link(p, q), 0);
	mkd(root, "d", 0755, 0, 0);
	mkf(root, "d/g2", "g2", 0644, 0, 0);
	mkd(root, "e", 0755, 0, 0);
	mkd(root, "ne", 0755, 0, 0);
	mkf(root, "ne/x", "x", 0644, 0, 0);
	mkl(root, "sl", "f");
	mkl(root, "sd", "d");
	mkl(root, "dang", "nowhere");
	mkl(root, "loop1", "loop2");
	mkl(root, "loop2", "loop1");
	mkl(root, "self", "self");
	snprintf(p, sizeof p, "%s/fifo", root);
	cr_assert_eq(mkfifo(p, 0644), 0);
	mkd(root, "w", 0777, 0, 0);
	mkf(root, "w/rootf", "r", 0644, 0, 0);
	mkf(root, "w/u1f", "1", 0644, 1000, 1000);
	mkf(root, "w/u2f", "2", 0644, 1001, 1001);
	mkd(root, "w/ud", 0755, 0, 0);
	mkd(root, "w/u1d", 0755, 1000, 1000);
	mkd(root, "t", 01777, 0, 0);
	mkf(root, "t/rootf", "r", 0666, 0, 0);
	mkf(root, "t/u1f", "1", 0644, 1000, 1000);
	mkf(root, "t/u2f", "2", 0644, 1001, 1001);
	mkd(root, "t/u1d", 0755, 1000, 1000);
	mkd(root, "nx", 0700, 0, 0);
	mkf(root, "nx/f", "nx", 0644, 0, 0);
	mkd(root, "nw", 0555, 0, 0);
	mkf(root, "nw/f", "nw", 0666, 0, 0);
	mkd(root, "sg", 02777, 0, 1000);
	mkd(root, "ng", 02777, 0, 2000);
	mkd(root, "u1d", 0755, 1000, 1000);
	mkf(root, "u1d/f", "u1", 0644, 1000, 1000);
	mkd(root, "u1d/sub", 0755, 1000, 1000);
}

/* ---- running one call ---- */

typedef struct res {
	long long ret;
	int err;
	int done;
} res;

static res *shared; /* one page shared with the children */

static void do_op(const pcase *p, const char *a, const char *b, const char *c, res *r)
{
	long long ret = 0;
	int fd, e = 0;
	struct stat st;
	static char buf[1 << 20];
	errno = 0;
	switch (p->op) {
	case CHMOD: ret = chmod(a, (mode_t)p->x); break;
	case CHOWN: ret = chown(a, (uid_t)p->x, (gid_t)p->y); break;
	case LCHOWN: ret = lchown(a, (uid_t)p->x, (gid_t)p->y); break;
	case LINK: ret = link(a, b); break;
	case LINKF: ret = linkat(AT_FDCWD, a, AT_FDCWD, b, AT_SYMLINK_FOLLOW); break;
	case MKDIR: ret = mkdir(a, (mode_t)p->x); break;
	case MKFIFO: ret = mkfifo(a, (mode_t)p->x); break;
	case MKNOD: ret = mknod(a, (mode_t)p->x, (dev_t)p->y); break;
	case OPEN:
		fd = open(a, (int)p->x, (mode_t)p->y);
		if (fd < 0) {
			ret = -1;
			break;
		}
		if (p->wr && write(fd, "ab", 2) != 2) {
			ret = -1;
			e = errno;
		}
		if (close(fd) != 0 && !e) {
			ret = -1;
			e = errno;
		}
		errno = e;
		break;
	case RENAME:
		ret = p->x ? renameat2(AT_FDCWD, a, AT_FDCWD, b, (unsigned)p->x) : rename(a, b);
		break;
	case RMDIR: ret = rmdir(a); break;
	case SYMLINK: ret = symlink(b, a); break;
	case READLINK: ret = readlink(a, buf, (size_t)p->x); break;
	case TRUNC: ret = truncate(a, (off_t)p->x); break;
	case FTRUNC:
		fd = open(a, (int)p->x);
		if (fd < 0) {
			ret = -1;
			break;
		}
		ret = ftruncate(fd, (off_t)p->y);
		e = errno;
		close(fd);
		errno = e;
		break;
	case UNLINK: ret = unlink(a); break;
	case UTIMENS: ret = utimensat(AT_FDCWD, a, p->tnull ? NULL : p->t, (int)p->x); break;
	case STAT: ret = stat(a, &st); break;
	case LSTAT: ret = lstat(a, &st); break;
	case ACCESS: ret = access(a, (int)p->x); break;
	case WRITE:
	case FALLOC:
		fd = open(a, p->op == WRITE ? O_WRONLY : O_RDWR | O_NONBLOCK);
		if (fd < 0) {
			ret = -1;
			break;
		}
		if (p->op == WRITE) {
			memset(buf, 'w', (size_t)p->z);
			ret = pwrite(fd, buf, (size_t)p->z, (off_t)p->y);
		} else {
			ret = fallocate(fd, (int)p->x, (off_t)p->y, (off_t)p->z);
		}
		e = errno;
		if (close(fd) != 0 && ret >= 0) {
			ret = -1;
			e = errno;
		}
		errno = e;
		break;
	case SETX: ret = setxattr(a, b, c, strlen(c), (int)p->x); break;
	case LSETX: ret = lsetxattr(a, b, c, strlen(c), (int)p->x); break;
	case GETX: ret = getxattr(a, b, p->x ? buf : NULL, (size_t)p->x); break;
	case LISTX: ret = listxattr(a, p->x ? buf : NULL, (size_t)p->x); break;
	case REMOVEX: ret = removexattr(a, b); break;
	}
	r->ret = ret;
	r->err = ret < 0 ? errno : 0;
	r->done = 1;
}

/* Runs case p in directory root (other: the other side's case directory)
 * in a child as p's user. */
static res run_in(const pcase *p, const char *root, const char *other)
{
	char *a = expand(p->a, other), *b = expand(p->b, other), *c = expand(p->c, other);
	memset(shared, 0, sizeof *shared);
	pid_t pid = fsu_fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (chdir(root) != 0)
			_exit(98);
		signal(SIGXFSZ, SIG_IGN);
		if (p->rl) {
			struct rlimit rl = {(rlim_t)p->rl, (rlim_t)p->rl};
			if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
				_exit(97);
		}
		fsu_become(&fsu_users[p->who]);
		do_op(p, a, b, c, shared);
		_exit(0);
	}
	int st = fsu_wait(pid);
	cr_assert_eq(st, 0, "case child exited with %d", st);
	cr_assert(shared->done);
	free(a);
	free(b);
	free(c);
	return *shared;
}

/* ---- side effects ---- */

#define MAXFX 16

typedef struct fxpre {
	struct stat st;
	int ok;
} fxpre;

/* Splits fx into items "path:tokens"; returns the count. */
static int fx_split(const char *fx, char *buf, size_t size, char *paths[], char *toks[])
{
	int n = 0;
	if (!fx)
		return 0;
	snprintf(buf, size, "%s", fx);
	for (char *save = NULL, *it = strtok_r(buf, ";", &save); it && n < MAXFX; it = strtok_r(NULL, ";", &save)) {
		while (*it == ' ')
			it++;
		char *colon = strchr(it, ':');
		if (!colon)
			continue;
		*colon = 0;
		paths[n] = it;
		toks[n] = colon + 1;
		n++;
	}
	return n;
}

static char *fx_path(const char *root, const char *rel, const char *other)
{
	char *e = expand(rel, other);
	size_t l = strlen(root) + strlen(e) + 2;
	char *p = malloc(l);
	if (!strcmp(e, "."))
		snprintf(p, l, "%s", root);
	else
		snprintf(p, l, "%s/%s", root, e);
	free(e);
	return p;
}

static void fx_prestat(const pcase *pc, const char *root, const char *other, fxpre pre[MAXFX])
{
	char buf[2048], *paths[MAXFX], *toks[MAXFX];
	int n = fx_split(pc->fx, buf, sizeof buf, paths, toks);
	for (int i = 0; i < n; i++) {
		char *p = fx_path(root, paths[i], other);
		pre[i].ok = lstat(p, &pre[i].st) == 0;
		free(p);
	}
}

/* Checks the side effects; appends problems to msg; returns their count. */
static int fx_check(const pcase *pc, const char *root, const char *other, const fxpre pre[MAXFX], fsu_sbuf *msg)
{
	char buf[2048], *paths[MAXFX], *toks[MAXFX];
	int n = fx_split(pc->fx, buf, sizeof buf, paths, toks), bad = 0;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	for (int i = 0; i < n; i++) {
		char *path = fx_path(root, paths[i], other);
		struct stat st;
		int ok = lstat(path, &st) == 0, e = errno;
		char *save = NULL;
		for (char *t = strtok_r(toks[i], " ", &save); t; t = strtok_r(NULL, " ", &save)) {
			char why[512] = "";
			if (!strcmp(t, "!")) {
				if (ok || e != ENOENT)
					snprintf(why, sizeof why, "should not exist (%s)", ok ? "it does" : strerror(e));
			} else if (!ok) {
				snprintf(why, sizeof why, "lstat: %s", strerror(e));
			} else if (strchr("fdlpcbS", t[0]) && (t[1] == 0 || (t[1] >= '0' && t[1] <= '7'))) {
				mode_t want = t[0] == 'f' ? S_IFREG : t[0] == 'd' ? S_IFDIR : t[0] == 'l' ? S_IFLNK : t[0] == 'p' ? S_IFIFO
					    : t[0] == 'c' ? S_IFCHR : t[0] == 'b' ? S_IFBLK : S_IFSOCK; /* S */
				if ((st.st_mode & S_IFMT) != want)
					snprintf(why, sizeof why, "type %o, want %o", (unsigned)(st.st_mode & S_IFMT), (unsigned)want);
				else if (t[1] && (st.st_mode & 07777) != strtoul(t + 1, NULL, 8))
					snprintf(why, sizeof why, "mode %04o, want %s", (unsigned)(st.st_mode & 07777), t + 1);
			} else if (t[0] == 'n' || t[0] == 's' || t[0] == 'u' || t[0] == 'g') {
				long long want = strtoll(t + 1, NULL, 10);
				long long have = t[0] == 'n' ? (long long)st.st_nlink : t[0] == 's' ? (long long)st.st_size
						 : t[0] == 'u' ? (long long)st.st_uid : (long long)st.st_gid;
				if (have != want)
					snprintf(why, sizeof why, "%c is %lld, want %lld", t[0], have, want);
			} else if (t[0] == '=') {
				char *want = expand(t + 1, other);
				static char have[70000];
				ssize_t r = S_ISLNK(st.st_mode) ? readlink(path, have, sizeof have - 1)
								 : fsu_read_file(path, have, sizeof have - 1);
				have[r < 0 ? 0 : r] = 0;
				if (r < 0 || strlen(have) != (size_t)r || strcmp(have, want))
					snprintf(why, sizeof why, "content \"%.40s\" (%zd bytes), want \"%.40s\"", have, r, want);
				free(want);
			} else if ((t[0] == 'm' || t[0] == 'a') && t[1] == '*') {
				const struct timespec *ts = t[0] == 'm' ? &st.st_mtim : &st.st_atim;
				if (ts->tv_sec < now.tv_sec - 30 || ts->tv_sec > now.tv_sec + 30)
					snprintf(why, sizeof why, "%ctime %lld is not now (%lld)", t[0], (long long)ts->tv_sec,
						 (long long)now.tv_sec);
			} else if (t[0] == 'm' || t[0] == 'a') {
				const struct timespec *ts = t[0] == 'm' ? &st.st_mtim : &st.st_atim;
				char *dot;
				long long s = strtoll(t + 1, &dot, 10);
				long ns = *dot == '.' ? strtol(dot + 1, NULL, 10) : -1;
				if (ts->tv_sec != s || (ns >= 0 && ts->tv_nsec != ns))
					snprintf(why, sizeof why, "%ctime %lld.%09ld, want %s", t[0], (long long)ts->tv_sec,
						 ts->tv_nsec, t + 1);
			} else if ((t[0] == 'M' || t[0] == 'C' || t[0] == 'A') && (t[1] == '+' || t[1] == '=')) {
				const struct timespec *a = t[0] == 'M' ? &st.st_mtim : t[0] == 'C' ? &st.st_ctim : &st.st_atim;
				const struct timespec *b = t[0] == 'M' ? &pre[i].st.st_mtim : t[0] == 'C' ? &pre[i].st.st_ctim
									    : &pre[i].st.st_atim;
				if (!pre[i].ok)
					snprintf(why, sizeof why, "%s: did not exist before the call", t);
				else if (t[1] == '+' && fsu_ts_eq(a, b))
					snprintf(why, sizeof why, "%ctime unchanged (%lld.%09ld)", t[0], (long long)a->tv_sec,
						 a->tv_nsec);
				else if (t[1] == '=' && !fsu_ts_eq(a, b))
					snprintf(why, sizeof why, "%ctime changed from %lld.%09ld to %lld.%09ld", t[0],
						 (long long)b->tv_sec, b->tv_nsec, (long long)a->tv_sec, a->tv_nsec);
			} else if (t[0] == 'r') {
				unsigned ma = 0, mi = 0;
				sscanf(t + 1, "%u,%u", &ma, &mi);
				if (major(st.st_rdev) != ma || minor(st.st_rdev) != mi)
					snprintf(why, sizeof why, "rdev %u,%u, want %s", major(st.st_rdev), minor(st.st_rdev), t + 1);
			} else if (t[0] == 'x' || t[0] == 'X') {
				char *spec = expand(t + 1, other), *eq = strchr(spec, '=');
				static char val[70000];
				if (eq)
					*eq = 0;
				ssize_t r = lgetxattr(path, spec, val, sizeof val - 1);
				int xe = errno;
				if (t[0] == 'X' && (r >= 0 || xe != ENODATA))
					snprintf(why, sizeof why, "xattr %s should be absent (%s)", spec, r >= 0 ? "present" : strerror(xe));
				if (t[0] == 'x') {
					if (r < 0)
						snprintf(why, sizeof why, "xattr %s: %s", spec, strerror(xe));
					else if ((size_t)r != strlen(eq ? eq + 1 : "") || memcmp(val, eq ? eq + 1 : "", (size_t)r))
						snprintf(why, sizeof why, "xattr %s has %zd bytes \"%.20s\", want \"%.20s\"", spec, r,
							 val, eq ? eq + 1 : "");
				}
				free(spec);
			} else {
				snprintf(why, sizeof why, "bad token '%s' in the table", t);
			}
			if (why[0]) {
				fsu_sb_printf(msg, "      %s: %s\n", paths[i], why);
				bad++;
			}
		}
		free(path);
	}
	return bad;
}

/* ---- the runner ---- */

static void describe(const pcase *p, int idx, char *out, size_t size)
{
	char args[256];
	const char *a = p->a ? p->a : "", *b = p->b ? p->b : "";
	switch (p->op) {
	case LINK:
	case LINKF:
	case RENAME: snprintf(args, sizeof args, "%.60s, %.60s, 0x%llx", a, b, p->x); break;
	case SYMLINK: snprintf(args, sizeof args, "target %.60s, %.60s", b, a); break;
	case SETX:
	case LSETX: snprintf(args, sizeof args, "%.60s, %.40s, \"%.20s\", 0x%llx", a, b, p->c, p->x); break;
	case GETX:
	case REMOVEX: snprintf(args, sizeof args, "%.60s, %.40s, %lld", a, b, p->x); break;
	case UTIMENS:
		if (p->tnull)
			snprintf(args, sizeof args, "%.60s, NULL, 0x%llx", a, p->x);
		else
			snprintf(args, sizeof args, "%.60s, {%lld.%ld, %lld.%ld}, 0x%llx", a, (long long)p->t[0].tv_sec,
				 p->t[0].tv_nsec, (long long)p->t[1].tv_sec, p->t[1].tv_nsec, p->x);
		break;
	default: snprintf(args, sizeof args, "%.60s, 0%llo/%lld, %lld, %lld", a, p->x, p->x, p->y, p->z); break;
	}
	snprintf(out, size, "%s#%d %s(%s) as %s%s%s%s%s", p->g, idx, op_names[p->op], args, user_names[p->who],
		 p->pre ? " after `" : "", p->pre ? p->pre : "", p->pre ? "`" : "", p->wr ? " +write" : "");
}

static int result_ok(const pcase *p, res r, int only)
{
	int want_ok = p->err == 0 || (only && p->alt == ALT_OK);
	if (r.ret >= 0)
		return want_ok && (!p->cr || r.ret == p->ret);
	return r.err == p->err || (only && p->alt && r.err == p->alt);
}

static void run_group(const char *group)
{
	char tdir[512], hdir[512], what[1024];
	int ran = 0, failed = 0;
	shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(shared, MAP_FAILED);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const pcase *p = &cases[i];
		if (strcmp(p->g, group))
			continue;
		fsu_sbuf msg = {0};
		int bad = 0;
		fxpre tpre[MAXFX], hpre[MAXFX];
		describe(p, (int)i, what, sizeof what);
		snprintf(tdir, sizeof tdir, "%s/c%03zu", fsu_m.mnt, i);
		snprintf(hdir, sizeof hdir, "%s/c%03zu", fsu_host, i);
		cr_assert_eq(mkdir(tdir, 0755), 0, "mkdir %s: %s", tdir, strerror(errno));
		cr_assert_eq(mkdir(hdir, 0755), 0, "mkdir %s: %s", hdir, strerror(errno));
		mk_fixture(tdir);
		mk_fixture(hdir);
		if (p->pre) {
			char cmd[2048];
			snprintf(cmd, sizeof cmd, "cd '%s' && { %s; }", tdir, p->pre);
			cr_assert_eq(system(cmd), 0, "%s: setup failed on tpfs", what);
			snprintf(cmd, sizeof cmd, "cd '%s' && { %s; }", hdir, p->pre);
			cr_assert_eq(system(cmd), 0, "%s: setup failed on the host", what);
		}
		fx_prestat(p, tdir, hdir, tpre);
		fx_prestat(p, hdir, tdir, hpre);
		if (p->fx && (strchr(p->fx, '+') || strchr(p->fx, '=')))
			usleep(20000); /* timestamps must be able to move */
		res hr = {0};
		if (!p->only)
			hr = run_in(p, hdir, tdir);
		res tr = run_in(p, tdir, hdir);
		if (!p->only && !result_ok(p, hr, 0)) {
			fsu_sb_printf(&msg, "    TABLE: the host gives ret %lld %s, the table wants %s (ret %lld)\n", hr.ret,
				  fsu_errname(hr.err), fsu_errname(p->err), p->cr ? p->ret : 0);
			bad++;
		}
		if (!result_ok(p, tr, p->only)) {
			fsu_sb_printf(&msg, "    tpfs gives ret %lld %s, want %s%s%s", tr.ret, fsu_errname(tr.err), fsu_errname(p->err),
				  p->only && p->alt ? " or " : "", p->only && p->alt ? fsu_errname(p->alt == ALT_OK ? 0 : p->alt) : "");
			if (p->cr)
				fsu_sb_printf(&msg, " (ret %lld)", p->ret);
			fsu_sb_printf(&msg, "\n");
			bad++;
		} else if (!p->only && (tr.ret != hr.ret || tr.err != hr.err)) {
			fsu_sb_printf(&msg, "    tpfs gives ret %lld %s, the host ret %lld %s\n", tr.ret, fsu_errname(tr.err), hr.ret,
				  fsu_errname(hr.err));
			bad++;
		}
		fsu_sbuf fm = {0};
		int fb = fx_check(p, tdir, hdir, tpre, &fm);
		if (fb) {
			fsu_sb_printf(&msg, "    side effects on tpfs:\n%s", fm.p);
			bad += fb;
		}
		free(fm.p);
		if (!p->only) {
			fsu_sbuf hm = {0};
			int hb = fx_check(p, hdir, tdir, hpre, &hm);
			if (hb) {
				fsu_sb_printf(&msg, "    TABLE: side effects on the host:\n%s", hm.p);
				bad += hb;
			}
			free(hm.p);
			char *dt = fsu_tree(tdir, 0), *dh = fsu_tree(hdir, 0);
			if (strcmp(dt, dh)) {
				fsu_sb_printf(&msg, "    the trees differ from the host's after the call\n");
				bad++;
			}
			if (bad)
				fprintf(stderr, "FAIL %s%s%s\n%s", what, p->why ? "  -- " : "", p->why ? p->why : "", msg.p);
			if (strcmp(dt, dh))
				fsu_print_diff("trees", "tpfs", "host", dt, dh);
			free(dt);
			free(dh);
		} else if (bad) {
			fprintf(stderr, "FAIL %s%s%s\n%s", what, p->why ? "  -- " : "", p->why ? p->why : "", msg.p);
		}
		free(msg.p);
		ran++;
		failed += bad != 0;
	}
	cr_assert_gt(ran, 0, "no case in group %s", group);
	fprintf(stderr, "posix %s: %d cases, %d failed\n", group, ran, failed);

	/* persistence: the whole mount, with mtime and ctime, survives an unmount */
	char *before = fsu_tree(fsu_m.mnt, 1);
	fsu_cycle();
	char *after = fsu_tree(fsu_m.mnt, 1);
	if (strcmp(before, after)) {
		fprintf(stderr, "posix %s: the mount changed across unmount and mount:\n", group);
		fsu_print_diff("snapshots", "before", " after", before, after);
	}
	int persisted = !strcmp(before, after);
	free(before);
	free(after);
	fsu_stop_check();
	munmap(shared, 4096);
	cr_expect(persisted, "posix %s: the tree is not the same after remounting", group);
	cr_assert_eq(failed, 0, "posix %s: %d of %d cases failed (details above)", group, failed, ran);
}

static void setup(void) { fsu_start(NULL, 1); }

#define GROUP(name)                                                                                                    \
	Test(posix, name, .init = setup, .fini = fsu_teardown, .timeout = POSIX_TIMEOUT_S) { run_group(#name); }

GROUP(open)
GROUP(mkdir)
GROUP(chmod)
GROUP(chown)
GROUP(link)
GROUP(rename)
GROUP(rmdir)
GROUP(symlink)
GROUP(truncate)
GROUP(unlink)
GROUP(utimensat)
GROUP(xattr)
GROUP(names)
GROUP(perm)
GROUP(setid)
GROUP(owner)
GROUP(limits)
