/*
 * test_posix_seq -- posix/sequences: scenarios of several calls and
 * processes, run the same way in a directory of a real tpfs mount and in
 * one of the host file system, each recording every result; the records and
 * the trees left (fsu_tree) must be the same on both.  The scenarios: a
 * removed directory or cwd, a directory fd after a rename, '..' after moving
 * a directory (readdir's d_ino, through a kernel readdir cache), a reused
 * name, O_APPEND, SEEK_END holes, two descriptors, access through an open
 * fd after chmod, FIFOs, Unix sockets, POSIX and flock locks, times kept by
 * rename, linkat(AT_EMPTY_PATH), the sync calls, vectored I/O of 3 MiB,
 * exec, renames through directory fds, directory permissions (x-only,
 * -wx, r--), mmap and timestamps, and security.capability removal (tpfs
 * may refuse file capabilities altogether: documented).  The test ends, as
 * the table's do, with a persistence check across a remount and `tpfs
 * check`.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/xattr.h>
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

static void setup(void) { fsu_start(NULL, 1); }

/* What a scenario records, in memory shared with its children. */
typedef struct sqout {
	size_t n;
	char buf[65536];
} sqout;
static sqout *sq;

static void sq_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sq_printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(sq->buf + sq->n, sizeof sq->buf - sq->n, fmt, ap);
	va_end(ap);
	if (k > 0)
		sq->n += (size_t)k < sizeof sq->buf - sq->n ? (size_t)k : sizeof sq->buf - sq->n - 1;
}

/* records a call's result: "label: value" or "label: -1 ENAME" */
#define R(label, expr)                                                                                                 \
	do {                                                                                                           \
		errno = 0;                                                                                             \
		long long r_ = (long long)(expr);                                                                      \
		int e_ = errno;                                                                                        \
		if (r_ < 0)                                                                                            \
			sq_printf("%s: -1 %s\n", label, fsu_errname(e_));                                                  \
		else                                                                                                   \
			sq_printf("%s: %lld\n", label, r_);                                                            \
	} while (0)

static void sq_content(const char *label, int fd, off_t off, size_t len)
{
	char b[256];
	ssize_t r = pread(fd, b, len < sizeof b ? len : sizeof b, off);
	sq_printf("%s: %zd \"", label, r);
	for (ssize_t i = 0; i < r; i++)
		sq_printf(b[i] >= 32 && b[i] < 127 ? "%c" : "\\x%02x", (unsigned char)b[i]);
	sq_printf("\"\n");
}

static int put(const char *path, const char *text)
{
	return fsu_write_file(path, text, strlen(text), 0644);
}

static void sq_deleted_dir(void)
{
	struct stat st;
	mkdir("a", 0755);
	int fd = open("a", O_RDONLY | O_DIRECTORY);
	R("rmdir a", rmdir("a"));
	R("create in the removed directory", openat(fd, "x", O_WRONLY | O_CREAT, 0644));
	R("mkdir in the removed directory", mkdirat(fd, "y", 0755));
	R("fstat", fstat(fd, &st));
	sq_printf("st_nlink %lu\n", (unsigned long)st.st_nlink);
	char buf[4096];
	R("getdents of the removed directory", syscall(SYS_getdents64, fd, buf, sizeof buf));
	close(fd);
	mkdir("c", 0755);
	pid_t pid = fsu_fork();
	if (pid == 0) {
		if (chdir("c") != 0)
			_exit(1);
		R("rmdir of the cwd", rmdir("../c"));
		R("create in the removed cwd", open("x", O_WRONLY | O_CREAT, 0644));
		R("mkdir in the removed cwd", mkdir("y", 0755));
		R("stat .", stat(".", &st));
		_exit(0);
	}
	fsu_wait(pid);
}

static void sq_dir_fd_after_rename(void)
{
	struct stat st;
	mkdir("a", 0755);
	put("a/f", "data");
	int dfd = open("a", O_RDONLY | O_DIRECTORY);
	R("rename a b", rename("a", "b"));
	int fd = openat(dfd, "f", O_RDONLY);
	R("openat through the old directory fd", fd);
	sq_content("content", fd, 0, 10);
	close(fd);
	R("stat a/f", stat("a/f", &st));
	R("stat b/f", stat("b/f", &st));
	R("create through the fd", openat(dfd, "g", O_WRONLY | O_CREAT, 0644));
	R("stat b/g", stat("b/g", &st));
	close(dfd);
}

static void sq_dotdot_after_rename(void)
{
	struct stat c, cb, dd;
	mkdir("a", 0755);
	mkdir("a/b", 0755);
	mkdir("c", 0755);
	DIR *d0 = opendir("a/b"); /* a listing the kernel may cache */
	while (readdir(d0))
		;
	closedir(d0);
	R("rename a/b c/b", rename("a/b", "c/b"));
	stat("c", &c);
	stat("c/b", &cb);
	R("stat c/b/..", stat("c/b/..", &dd));
	sq_printf("c/b/.. is c: %d\n", dd.st_ino == c.st_ino);
	DIR *d = opendir("c/b");
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strcmp(e->d_name, ".."))
			sq_printf("readdir(c/b) '..' names c: %d\n", e->d_ino == c.st_ino);
		else if (!strcmp(e->d_name, "."))
			sq_printf("readdir(c/b) '.' names c/b: %d\n", e->d_ino == cb.st_ino);
	closedir(d);
	/* and after a remount-free second move, through RENAME_EXCHANGE */
	mkdir("x", 0755);
	R("exchange c/b and x", renameat2(AT_FDCWD, "c/b", AT_FDCWD, "x", RENAME_EXCHANGE));
	struct stat root;
	stat(".", &root);
	d = opendir("x");
	while ((e = readdir(d)))
		if (!strcmp(e->d_name, ".."))
			sq_printf("readdir(x) '..' names the case directory: %d\n", e->d_ino == root.st_ino);
	closedir(d);
	struct stat sa, sc;
	stat("a", &sa);
	stat("c", &sc);
	sq_printf("nlink a %lu, c %lu\n", (unsigned long)sa.st_nlink, (unsigned long)sc.st_nlink);
}

static void sq_reuse_name(void)
{
	struct stat a, b;
	put("f", "old");
	int fd = open("f", O_RDONLY);
	R("unlink f", unlink("f"));
	put("f", "new!");
	sq_content("old fd", fd, 0, 10);
	int fd2 = open("f", O_RDONLY);
	sq_content("new name", fd2, 0, 10);
	fstat(fd, &a);
	fstat(fd2, &b);
	sq_printf("different inodes: %d, old nlink %lu\n", a.st_ino != b.st_ino, (unsigned long)a.st_nlink);
	close(fd);
	close(fd2);
}

static void sq_append(void)
{
	int fd = open("f", O_RDWR | O_CREAT | O_APPEND, 0644);
	R("write", write(fd, "abc", 3));
	R("lseek 0", lseek(fd, 0, SEEK_SET));
	R("write after lseek", write(fd, "de", 2));
	R("offset", lseek(fd, 0, SEEK_CUR));
	R("pwrite at 0 on O_APPEND", pwrite(fd, "X", 1, 0));
	sq_content("content", fd, 0, 20);
	int fd2 = open("f", O_WRONLY);
	R("a second fd writes at 0", pwrite(fd2, "Q", 1, 0));
	R("O_APPEND write after it", write(fd, "Z", 1));
	sq_content("content", fd, 0, 20);
	close(fd2);
	close(fd);
}

static void sq_seek_end_hole(void)
{
	struct stat st;
	int fd = open("f", O_RDWR | O_CREAT, 0644);
	R("write", write(fd, "12345", 5));
	R("lseek SEEK_END+10", lseek(fd, 10, SEEK_END));
	R("write", write(fd, "z", 1));
	fstat(fd, &st);
	sq_printf("size %lld\n", (long long)st.st_size);
	sq_content("content", fd, 0, 40);
	R("lseek SEEK_CUR-100", lseek(fd, -100, SEEK_CUR));
	R("lseek SEEK_DATA past the end", lseek(fd, 100, SEEK_DATA));
	R("lseek SEEK_HOLE past the end", lseek(fd, 100, SEEK_HOLE));
	R("lseek SEEK_HOLE at 0", lseek(fd, 0, SEEK_HOLE) <= 16);
	R("read at the end", read(fd, (char[8]){0}, 8));
	close(fd);
}

static void sq_two_fds(void)
{
	put("f", "0123456789");
	int a = open("f", O_RDWR), b = open("f", O_RDONLY);
	R("ftruncate 2 through a", ftruncate(a, 2));
	sq_content("b sees", b, 0, 20);
	R("write at 5 through a", pwrite(a, "x", 1, 5));
	sq_content("b sees", b, 0, 20);
	int c = open("f", O_WRONLY | O_TRUNC);
	sq_content("after O_TRUNC b sees", b, 0, 20);
	close(a);
	close(b);
	close(c);
}

static void sq_open_fd_keeps_access(void)
{
	put("f", "data");
	chown("f", 1000, 1000);
	pid_t pid = fsu_fork();
	if (pid == 0) {
		fsu_become(&fsu_users[1]);
		int fd = open("f", O_RDWR);
		R("open as owner", fd);
		R("chmod 0", chmod("f", 0));
		R("write through the open fd", pwrite(fd, "X", 1, 0));
		R("read through the open fd", pread(fd, (char[4]){0}, 4, 0));
		R("open again", open("f", O_RDONLY));
		_exit(0);
	}
	fsu_wait(pid);
}

static void sq_fifo(void)
{
	R("mkfifo", mkfifo("p", 0644));
	pid_t pid = fsu_fork();
	if (pid == 0) {
		int fd = open("p", O_WRONLY);
		_exit(fd >= 0 && write(fd, "hello", 5) == 5 ? 0 : 1);
	}
	int fd = open("p", O_RDONLY);
	char b[16] = {0};
	R("open the fifo", fd);
	R("read", read(fd, b, sizeof b - 1));
	sq_printf("got %s\n", b);
	close(fd);
	sq_printf("writer %d\n", fsu_wait(pid));
	struct stat st;
	stat("p", &st);
	sq_printf("size %lld\n", (long long)st.st_size);
}

static void sq_unix_socket(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "sock");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	R("bind", bind(s, (struct sockaddr *)&sa, sizeof sa));
	R("listen", listen(s, 1));
	struct stat st;
	lstat("sock", &st);
	sq_printf("a socket: %d\n", S_ISSOCK(st.st_mode));
	pid_t pid = fsu_fork();
	if (pid == 0) {
		int c = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(c, (struct sockaddr *)&sa, sizeof sa) != 0 || write(c, "hi", 2) != 2)
			_exit(1);
		_exit(0);
	}
	int c = accept(s, NULL, NULL);
	char b[8] = {0};
	R("accept", c >= 0);
	R("recv", read(c, b, sizeof b - 1));
	sq_printf("got %s, client %d\n", b, fsu_wait(pid));
	close(c);
	close(s);
	R("bind again", (s = socket(AF_UNIX, SOCK_STREAM, 0), bind(s, (struct sockaddr *)&sa, sizeof sa)));
	close(s);
	R("unlink", unlink("sock"));
}

static void sq_locks(void)
{
	put("f", "0123456789abcdefghij");
	int fd = open("f", O_RDWR);
	struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10};
	R("F_SETLK [0,10)", fcntl(fd, F_SETLK, &l));
	R("flock LOCK_EX", flock(fd, LOCK_EX));
	pid_t pid = fsu_fork();
	if (pid == 0) {
		int f2 = open("f", O_RDWR);
		struct flock m = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 5, .l_len = 10};
		R("child F_SETLK [5,15)", fcntl(f2, F_SETLK, &m));
		m.l_start = 10;
		R("child F_SETLK [10,20)", fcntl(f2, F_SETLK, &m));
		m.l_start = 0;
		m.l_len = 10;
		R("child F_GETLK [0,10)", fcntl(f2, F_GETLK, &m));
		sq_printf("conflict: type %d, start %lld, len %lld, held by the parent %d\n", m.l_type, (long long)m.l_start,
			  (long long)m.l_len, m.l_pid == getppid());
		R("child flock LOCK_EX|LOCK_NB", flock(f2, LOCK_EX | LOCK_NB));
		_exit(0);
	}
	fsu_wait(pid);
	close(fd);
}

static void sq_rename_keeps_times(void)
{
	struct stat st;
	put("f", "x");
	struct timespec t[2] = {{100, 0}, {200, 300}};
	utimensat(AT_FDCWD, "f", t, 0);
	mkdir("d", 0755);
	R("rename", rename("f", "d/g"));
	stat("d/g", &st);
	sq_printf("mtime %lld.%ld atime %lld.%ld\n", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
		  (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
	R("link", link("d/g", "h"));
	stat("h", &st);
	sq_printf("mtime after link %lld.%ld\n", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	R("chmod", chmod("h", 0600));
	stat("h", &st);
	sq_printf("mtime after chmod %lld.%ld\n", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static void sq_linkat_empty_path(void)
{
	struct stat st;
	put("f", "f");
	put("h", "h");
	int fd = open("f", O_RDONLY), fh = open("h", O_RDONLY);
	unlink("f");
	R("linkat AT_EMPTY_PATH of an unlinked file", linkat(fd, "", AT_FDCWD, "g", AT_EMPTY_PATH));
	R("linkat AT_EMPTY_PATH of a linked file", linkat(fh, "", AT_FDCWD, "h2", AT_EMPTY_PATH));
	stat("h", &st);
	sq_printf("nlink %lu\n", (unsigned long)st.st_nlink);
	close(fd);
	close(fh);
}

static void sq_sync_calls(void)
{
	put("f", "x");
	int fd = open("f", O_RDONLY), d = open(".", O_RDONLY | O_DIRECTORY);
	R("fsync", fsync(fd));
	R("fdatasync", fdatasync(fd));
	R("syncfs", syncfs(fd));
	R("sync_file_range", sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE));
	R("fsync of a directory", fsync(d));
	R("fdatasync of a directory", fdatasync(d));
	close(fd);
	close(d);
}

static void sq_vectors(void)
{
	static unsigned char data[3 << 20], back[3 << 20];
	struct iovec iov[64], iov2[64];
	size_t off = 0;
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (unsigned char)(i * 7 + i / 4093);
	for (int i = 0; i < 64; i++) {
		size_t len = i == 63 ? sizeof data - off : (size_t)(1 + i * 1531);
		iov[i] = (struct iovec){data + off, len};
		iov2[i] = (struct iovec){back + off, len};
		off += len;
	}
	int fd = open("f", O_RDWR | O_CREAT, 0644);
	R("pwritev", pwritev(fd, iov, 64, 12345));
	R("preadv", preadv(fd, iov2, 64, 12345));
	sq_printf("same: %d\n", !memcmp(data, back, sizeof data));
	R("a 3 MiB pread", pread(fd, back, sizeof back, 12345));
	sq_printf("same: %d\n", !memcmp(data, back, sizeof data));
	close(fd);
}

static void sq_exec(void)
{
	put("script", "#!/bin/sh\nexit 7\n");
	R("chmod 0755", chmod("script", 0755));
	pid_t pid = fsu_fork();
	if (pid == 0) {
		execl("./script", "script", (char *)NULL);
		_exit(99);
	}
	sq_printf("exit status %d\n", fsu_wait(pid));
	R("chmod 0644", chmod("script", 0644));
	pid = fsu_fork();
	if (pid == 0) {
		execl("./script", "script", (char *)NULL);
		_exit(errno == EACCES ? 98 : 99);
	}
	sq_printf("without x: %d\n", fsu_wait(pid));
	int fd = open("script", O_WRONLY);
	pid = fsu_fork();
	if (pid == 0) {
		chmod("script", 0755);
		execl("./script", "script", (char *)NULL);
		_exit(errno == ETXTBSY ? 97 : 99);
	}
	sq_printf("open for writing: %d\n", fsu_wait(pid));
	close(fd);
}

static void sq_dirfd_renames(void)
{
	struct stat st;
	mkdir("a", 0755);
	mkdir("b", 0755);
	mkdir("a/s", 0755);
	int da = open("a", O_RDONLY | O_DIRECTORY), db = open("b", O_RDONLY | O_DIRECTORY);
	R("renameat a/s -> b/s", renameat(da, "s", db, "s"));
	fstat(da, &st);
	sq_printf("a nlink %lu\n", (unsigned long)st.st_nlink);
	fstat(db, &st);
	sq_printf("b nlink %lu\n", (unsigned long)st.st_nlink);
	R("renameat b/s -> a/s NOREPLACE", renameat2(db, "s", da, "s", RENAME_NOREPLACE));
	R("mkdir a/t", mkdirat(da, "t", 0700));
	R("rename a/s over a/t", renameat(da, "s", da, "t"));
	fstat(da, &st);
	sq_printf("a nlink %lu\n", (unsigned long)st.st_nlink);
	close(da);
	close(db);
}

static void sq_dir_perms(void)
{
	mkdir("xo", 0711);
	put("xo/f", "f");
	mkdir("wo", 0733);
	mkdir("ro", 0755);
	put("ro/f", "f");
	chmod("ro", 0744);
	pid_t pid = fsu_fork();
	if (pid == 0) {
		struct stat st;
		fsu_become(&fsu_users[1]);
		R("opendir of an x-only directory", open("xo", O_RDONLY | O_DIRECTORY));
		R("stat a known name in it", stat("xo/f", &st));
		R("create in a -wx directory", open("wo/n", O_WRONLY | O_CREAT, 0644));
		R("list the -wx directory", open("wo", O_RDONLY | O_DIRECTORY));
		R("list an r-- directory", open("ro", O_RDONLY | O_DIRECTORY));
		R("stat in an r-- directory", stat("ro/f", &st));
		_exit(0);
	}
	fsu_wait(pid);
}

static void sq_mmap_times(void)
{
	struct stat a, b;
	put("f", "0123456789");
	stat("f", &a);
	usleep(20000);
	int fd = open("f", O_RDWR);
	char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	R("mmap", m == MAP_FAILED ? -1 : 0);
	m[3] = 'X';
	R("msync", msync(m, 4096, MS_SYNC));
	stat("f", &b);
	sq_printf("after msync: mtime moved %d, ctime moved %d\n", !fsu_ts_eq(&a.st_mtim, &b.st_mtim),
		  !fsu_ts_eq(&a.st_ctim, &b.st_ctim));
	munmap(m, 4096);
	sq_content("content", fd, 0, 10);
	close(fd);
}

/* security.capability goes when an unprivileged process writes the file,
 * and at chown (as Linux does with commoncap) */
static void sq_capability(void)
{
	/* vfs_cap_data, revision 2: CAP_NET_RAW permitted */
	static const unsigned char cap[20] = {0, 0, 0, 2, 0, 0x20, 0, 0};
	unsigned char got[64];
	put("f", "data");
	chown("f", 1000, 1000);
	chmod("f", 0664);
	if (setxattr("f", "security.capability", cap, sizeof cap, 0) != 0 && errno == EOPNOTSUPP) {
		sq_printf("file capabilities: not supported\n");
		return;
	}
	R("get", getxattr("f", "security.capability", got, sizeof got));
	pid_t pid = fsu_fork();
	if (pid == 0) {
		fsu_become(&fsu_users[2]);
		int fd = open("f", O_WRONLY);
		R("write by a group member", pwrite(fd, "X", 1, 0));
		close(fd);
		_exit(0);
	}
	fsu_wait(pid);
	R("get after the write", getxattr("f", "security.capability", got, sizeof got));
	R("set again", setxattr("f", "security.capability", cap, sizeof cap, 0));
	R("chown", chown("f", 1001, 1001));
	R("get after chown", getxattr("f", "security.capability", got, sizeof got));
	R("set again", setxattr("f", "security.capability", cap, sizeof cap, 0));
	R("root writes", (put("f", "root"), 0));
	R("get after root's write", getxattr("f", "security.capability", got, sizeof got));
}

typedef struct sqdef {
	const char *name;
	void (*fn)(void);
	const char *tpfs_may_say; /* a record tpfs may give instead: a documented refusal */
} sqdef;

static const sqdef scenarios[] = {
	{"deleted_dir", sq_deleted_dir, NULL},
	{"dir_fd_after_rename", sq_dir_fd_after_rename, NULL},
	{"dotdot_after_rename", sq_dotdot_after_rename, NULL},
	{"reuse_name", sq_reuse_name, NULL},
	{"append", sq_append, NULL},
	{"seek_end_hole", sq_seek_end_hole, NULL},
	{"two_fds", sq_two_fds, NULL},
	{"open_fd_keeps_access", sq_open_fd_keeps_access, NULL},
	{"fifo", sq_fifo, NULL},
	{"unix_socket", sq_unix_socket, NULL},
	{"locks", sq_locks, NULL},
	{"rename_keeps_times", sq_rename_keeps_times, NULL},
	{"linkat_empty_path", sq_linkat_empty_path, NULL},
	{"sync_calls", sq_sync_calls, NULL},
	{"vectors", sq_vectors, NULL},
	{"exec", sq_exec, NULL},
	{"dirfd_renames", sq_dirfd_renames, NULL},
	{"dir_perms", sq_dir_perms, NULL},
	{"mmap_times", sq_mmap_times, NULL},
	{"capability", sq_capability, "file capabilities: not supported\n"},
};

/* Runs scenario k in root/s<k>; its record. */
static char *run_scenario(int k, const char *root)
{
	char dir[600];
	snprintf(dir, sizeof dir, "%s/s%02d", root, k);
	cr_assert_eq(mkdir(dir, 0777), 0);
	cr_assert_eq(chmod(dir, 0777), 0);
	sq->n = 0;
	sq->buf[0] = 0;
	pid_t pid = fsu_fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (chdir(dir) != 0)
			_exit(1);
		scenarios[k].fn();
		_exit(0);
	}
	int st = fsu_wait(pid);
	char *out = strdup(sq->buf);
	if (st != 0) {
		char *o2 = malloc(strlen(out) + 64);
		sprintf(o2, "%sscenario exit status %d\n", out, st);
		free(out);
		out = o2;
	}
	return out;
}

Test(posix, sequences, .init = setup, .fini = fsu_teardown, .timeout = POSIX_TIMEOUT_S)
{
	int failed = 0, n = (int)(sizeof scenarios / sizeof scenarios[0]);
	sq = mmap(NULL, sizeof *sq, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sq, MAP_FAILED);
	for (int k = 0; k < n; k++) {
		char *h = run_scenario(k, fsu_host), *t = run_scenario(k, fsu_m.mnt);
		char td[600], hd[600];
		snprintf(td, sizeof td, "%s/s%02d", fsu_m.mnt, k);
		snprintf(hd, sizeof hd, "%s/s%02d", fsu_host, k);
		char *dt = fsu_tree(td, 0), *dh = fsu_tree(hd, 0);
		if (scenarios[k].tpfs_may_say && !strcmp(t, scenarios[k].tpfs_may_say)) {
			fprintf(stderr, "posix sequence %s: tpfs says %s", scenarios[k].name, t);
		} else if (strcmp(h, t) || strcmp(dt, dh)) {
			failed++;
			fprintf(stderr, "FAIL sequence %s: tpfs and the host differ\n", scenarios[k].name);
			if (strcmp(h, t))
				fsu_print_diff("records", "tpfs", "host", t, h);
			if (strcmp(dt, dh))
				fsu_print_diff("trees", "tpfs", "host", dt, dh);
		}
		free(h);
		free(t);
		free(dt);
		free(dh);
	}
	fprintf(stderr, "posix sequences: %d scenarios, %d failed\n", n, failed);
	char *before = fsu_tree(fsu_m.mnt, 1);
	fsu_cycle();
	char *after = fsu_tree(fsu_m.mnt, 1);
	int persisted = !strcmp(before, after);
	if (!persisted)
		fsu_print_diff("snapshots", "before", " after", before, after);
	free(before);
	free(after);
	fsu_stop_check();
	munmap(sq, sizeof *sq);
	cr_expect(persisted, "posix sequences: the tree is not the same after remounting");
	cr_assert_eq(failed, 0, "posix sequences: %d of %d scenarios differ from the host (details above)", failed, n);
}
