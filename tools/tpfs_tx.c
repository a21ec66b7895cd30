/*
 * tpfs_tx.c -- libtpfs_tx: the control channel to tpfsd (tpfs_tx_proto.h)
 * and the parsing of its answers.
 *
 * A request is getxattr(MOUNT, "tpfs.tx.VERB", buf, size); the value is
 * the text "ERRNO MESSAGE".  The design, and its rules (M6-M12; M1-M5 are
 * tpfs_tx_mount.c's, the same library):
 *   M6  begin, commit and abort change state: they are asked exactly once,
 *       with a buffer of TPFS_TX_ANSWER_MAX bytes (their answers are
 *       shorter), never probed with size 0 (a daemon of protocol version
 *       1 would run them; version 2 answers a probe with the buffer's size
 *       and does nothing) and never retried (a second commit would not be
 *       the first one's answer).
 *   M7  status changes nothing: on ERANGE it is probed with size 0 for the
 *       answer's length and asked again larger, up to the kernel's xattr
 *       limit (XATTR_SIZE_MAX; beyond it the kernel answers E2BIG).
 *   M8  An answer that does not start with 1 to 4 decimal digits followed
 *       by a space or its end is malformed: EPROTO, never a guess.
 *   M9  The library's own messages do not name the mount (the caller
 *       prints it first); they name the request.
 *   M10 A program that opened files on the mount before it began (and
 *       keeps them open across transactions) would write through handles
 *       that are outside the transaction (fsd/DESIGN.md: descriptors opened
 *       outside).  So tpfs_tx_begin binding the caller itself reopens them:
 *       every regular file of the mount open on a descriptor >= 3 is
 *       opened again (same file -- same inode -- access mode, O_APPEND and
 *       offset) and put on the same descriptor (at every begin: whether
 *       a handle is the daemon's outside kind cannot be told from here, and
 *       the program may have reopened a file between transactions).  Descriptors
 *       0-2 are left alone: they are usually shared with the shell, whose
 *       offset a reopened copy would no longer move.
 *   M11 A handle a begin put on a descriptor stays the daemon's transaction
 *       kind (direct I/O, opened by a member) for good: later transactions
 *       of the process take it as theirs.  So the begin keeps a hidden
 *       duplicate of it (close-on-exec, from descriptor KEEP_FD_MIN up),
 *       and a later begin does not reopen a descriptor that still holds
 *       that very handle (kcmp(2), KCMP_FILE): a program that keeps its
 *       files open pays no round trip for them after its first
 *       transaction.  A descriptor closed or given another handle since is
 *       reopened as before; a duplicate whose descriptor no longer holds
 *       its handle is closed at the next begin.
 *   M12 status --all is asked for in pages (protocol version 2): each
 *       page says where the next begins, and the pages' texts one after
 *       the other are the report, so a list of any length is read in
 *       answers the kernel lets an xattr be.  A daemon of version 1 takes
 *       the page request for status.all and answers the whole list: used
 *       as it is.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/kcmp.h>
#include <linux/limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "tpfs_tx.h"
#include "tpfs_tx_int.h"
#include "tpfs_tx_proto.h"

#define STATUS_TRIES 8 /* M7: the list may grow between probe and ask */

/* ---- answers ---- */

/* M8: splits answer into its errno and its text; 0 or EPROTO. */
static int split(const char *a, size_t len, int *err, const char **text, size_t *tlen)
{
	size_t i = 0;
	int e = 0;
	while (i < len && i < 4 && isdigit((unsigned char)a[i]))
		e = e * 10 + (a[i++] - '0');
	if (i == 0 || (i < len && a[i] != ' '))
		return EPROTO;
	*err = e;
	*text = a + i + (i < len);
	*tlen = strnlen(*text, len - i - (i < len)); /* a NUL ends the text */
	return 0;
}

/* The length of text without trailing white space. */
static size_t trimmed(const char *text, size_t len)
{
	while (len > 0 && isspace((unsigned char)text[len - 1]))
		len--;
	return len;
}

/* A malformed answer, quoted with control characters made visible. */
static void say_malformed(const char *a, size_t len, char *msg, size_t msgsize)
{
	char q[81];
	size_t n = len < sizeof q - 1 ? len : sizeof q - 1;
	for (size_t i = 0; i < n; i++)
		q[i] = isprint((unsigned char)a[i]) ? a[i] : '?';
	q[n] = 0;
	tpfs_tx_say(msg, msgsize, "malformed answer from the daemon: \"%s\"%s (expected \"ERRNO MESSAGE\")", q,
		    len > n ? "..." : "");
}

int tpfs_tx_answer_parse(const char *answer, size_t len, char *msg, size_t msgsize)
{
	const char *text;
	size_t tlen;
	int err;
	if (split(answer, len, &err, &text, &tlen) != 0) {
		say_malformed(answer, len, msg, msgsize);
		return EPROTO;
	}
	tpfs_tx_say(msg, msgsize, "%.*s", (int)trimmed(text, tlen), text);
	return err;
}

int tpfs_tx_answer_id(const char *text, uint64_t *id)
{
	uint64_t v = 0;
	const char *p = text;
	while (isspace((unsigned char)*p))
		p++;
	if (!isdigit((unsigned char)*p))
		return EPROTO;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return EPROTO;
		v = v * 10 + d;
	}
	while (isspace((unsigned char)*p))
		p++;
	if (*p || v == 0)
		return EPROTO;
	*id = v;
	return 0;
}

/* ---- the channel ---- */

/* M9: why getxattr(name) failed with e. */
static void say_channel(const char *name, int e, size_t size, char *msg, size_t msgsize)
{
	/* a begin has nothing to lose; the other requests are about a
	 * transaction that may have been begun there */
	int begin = !strncmp(name, TPFS_TX_BEGIN, strlen(TPFS_TX_BEGIN));
	switch (e) {
	case ENODATA:
	case ENOTSUP: /* EOPNOTSUPP */
		tpfs_tx_say(msg, msgsize, "not a tpfs mount%s",
			    begin ? "" : " (any transaction begun there was lost when its file system was unmounted: "
					 "nothing of it was applied)");
		break;
	case ENOTCONN:
	case ECONNABORTED:
		tpfs_tx_say(msg, msgsize, "the daemon of this mount stopped (%s)%s; unmount it with fusermount3 -u",
			    strerror(e),
			    begin ? "" : ": any transaction there was lost, nothing of it applied");
		break;
	case ERANGE:
		tpfs_tx_say(msg, msgsize, "the answer to %s is longer than %zu bytes", name, size);
		break;
	case E2BIG:
		tpfs_tx_say(msg, msgsize, "the answer to %s is longer than the kernel lets an xattr be (%d bytes)", name,
			    XATTR_SIZE_MAX);
		break;
	default:
		tpfs_tx_say(msg, msgsize, "request %s failed: %s", name, strerror(e));
	}
}

/* M6: asks name once; the answer's errno, its text in msg. */
static int request(const char *mount, const char *name, char *msg, size_t msgsize)
{
	char buf[TPFS_TX_ANSWER_MAX];
	ssize_t n = getxattr(mount, name, buf, sizeof buf);
	if (n < 0) {
		int e = errno;
		say_channel(name, e, sizeof buf, msg, msgsize);
		if (e == ERANGE) {
			tpfs_tx_say_more(msg, msgsize, "; what it did is unknown");
			return EPROTO;
		}
		return e;
	}
	return tpfs_tx_answer_parse(buf, (size_t)n, msg, msgsize);
}

/* M7: the next size to ask with, after a probe found len bytes. */
static size_t grown(ssize_t len)
{
	size_t want = (size_t)len + (size_t)len / 4 + 1024;
	return want < XATTR_SIZE_MAX ? want : XATTR_SIZE_MAX;
}

/* M7: the whole answer to name, NUL-terminated, in a malloc'd *out;
 * asked first with size bytes. */
static int fetch(const char *mount, const char *name, size_t size, char **out, size_t *len, char *msg, size_t msgsize)
{
	*out = NULL;
	*len = 0;
	for (int tries = 0; tries < STATUS_TRIES; tries++) {
		char *buf = malloc(size + 1);
		if (!buf) {
			tpfs_tx_say(msg, msgsize, "%s: %s", name, strerror(ENOMEM));
			return ENOMEM;
		}
		ssize_t n = getxattr(mount, name, buf, size);
		int e = errno;
		if (n >= 0) {
			buf[n] = 0;
			*out = buf;
			*len = (size_t)n;
			return 0;
		}
		free(buf);
		if (e == ERANGE && (n = getxattr(mount, name, NULL, 0)) < 0)
			e = errno;
		if (e == ERANGE)
			size = grown(n);
		else if (e != EINTR) {
			say_channel(name, e, size, msg, msgsize);
			return e;
		}
	}
	tpfs_tx_say(msg, msgsize, "the answer to %s kept growing past %zu bytes", name, size);
	return EAGAIN;
}

/* ---- transactions ---- */

/* M10: a descriptor to reopen, learnt before the begin: after it, an fstat
 * of the old handle would lock the file in the transaction (a read), and
 * the daemon would then refuse changes through the old handle. */
typedef struct own_file {
	int fd;
	dev_t dev;
	ino_t ino;
	char path[PATH_MAX];
} own_file;
#define OWN_MAX 64

/* stat without asking the daemon: the kernel's cached type, device and
 * inode, which never change for an open file or the mount's root (an
 * fstat would be a FUSE round trip each -- zero attribute timeouts while
 * transactions are open). */
static int cached_stat(int dirfd, const char *path, int flags, struct stat *st)
{
	struct statx x;
	if (statx(dirfd, path, flags | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &x) != 0)
		return -1;
	memset(st, 0, sizeof *st);
	st->st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
	st->st_ino = x.stx_ino;
	st->st_mode = x.stx_mode;
	return 0;
}

/* M11: the descriptors begins reopened, each with its hidden duplicate. */
#define KEEP_FD_MIN 512
static struct kept {
	int fd, dup;
} kept[OWN_MAX];
static int nkept;
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

static int same_handle(int a, int b)
{
	pid_t p = getpid();
	return syscall(SYS_kcmp, (long)p, (long)p, (long)KCMP_FILE, (long)a, (long)b) == 0;
}

/* Closes the duplicates whose descriptor holds another handle now. */
static void kept_sweep(void)
{
	pthread_mutex_lock(&kept_mu);
	for (int i = 0; i < nkept;)
		if (same_handle(kept[i].fd, kept[i].dup)) {
			i++;
		} else {
			close(kept[i].dup);
			kept[i] = kept[--nkept];
		}
	pthread_mutex_unlock(&kept_mu);
}

/* 1 if fd needs no reopen (it holds its kept handle: kept_sweep just
 * checked every entry) or is a duplicate. */
static int kept_skip(int fd)
{
	int r = 0;
	pthread_mutex_lock(&kept_mu);
	for (int i = 0; i < nkept && !r; i++)
		r = kept[i].dup == fd || kept[i].fd == fd;
	pthread_mutex_unlock(&kept_mu);
	return r;
}

static void kept_add(int fd)
{
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, KEEP_FD_MIN);
	if (dup < 0)
		return; /* (then reopened at every begin) */
	pthread_mutex_lock(&kept_mu);
	int i = 0;
	while (i < nkept && kept[i].fd != fd)
		i++;
	if (i < nkept)
		close(kept[i].dup);
	else if (nkept < OWN_MAX)
		nkept++;
	else
		i = -1;
	if (i >= 0)
		kept[i] = (struct kept){fd, dup};
	else
		close(dup);
	pthread_mutex_unlock(&kept_mu);
}

/* The regular files of the mount open on descriptors >= 3 that need a
 * reopen (M10, M11); a malloc'ed array (NULL, 0: none). */
static own_file *own_files(const char *mount, int *n)
{
	struct stat mst, st;
	own_file *v = NULL;
	*n = 0;
	if (cached_stat(AT_FDCWD, mount, 0, &mst) != 0)
		return NULL;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return NULL;
	int dfd = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL && *n < OWN_MAX) {
		char *end, link[64];
		long fd = strtol(e->d_name, &end, 10);
		if (*end || fd < 3 || fd == dfd || kept_skip((int)fd) || cached_stat((int)fd, "", AT_EMPTY_PATH, &st) != 0 ||
		    st.st_dev != mst.st_dev || !S_ISREG(st.st_mode))
			continue;
		if (!v && !(v = malloc(OWN_MAX * sizeof *v)))
			break;
		own_file *o = &v[*n];
		snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
		ssize_t len = readlink(link, o->path, sizeof o->path - 1);
		if (len <= 0 || o->path[0] != '/')
			continue;
		o->path[len] = 0;
		/* the kernel says " (deleted)" of a name it merely dropped from its
		 * cache too (fsd_txbind.c C5, C6): reopen_own checks the inode */
		static const char del[] = " (deleted)";
		if ((size_t)len > sizeof del - 1 && !strcmp(o->path + len - (sizeof del - 1), del))
			o->path[len - (sizeof del - 1)] = 0;
		o->fd = (int)fd, o->dev = st.st_dev, o->ino = st.st_ino;
		(*n)++;
	}
	closedir(d);
	return v;
}

/* The inode number of fd, from /proc/self/fdinfo: the kernel's, without
 * asking the daemon (an fstat in the transaction would lock the file for
 * reading, and two programs updating it would then deadlock on the
 * upgrade); 0 if unknown. */
static unsigned long long fd_ino(int fd)
{
	char path[64], line[128];
	unsigned long long ino = 0;
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return 0;
	while (fgets(line, sizeof line, fp))
		if (sscanf(line, "ino: %llu", &ino) == 1)
			break;
	fclose(fp);
	return ino;
}

/* Puts a new handle of the same file on o->fd (access mode, O_APPEND and
 * offset kept); left as it is if the path no longer names that file. */
static void reopen_own(const own_file *o)
{
	int fl = fcntl(o->fd, F_GETFL), fdfl = fcntl(o->fd, F_GETFD);
	off_t off = lseek(o->fd, 0, SEEK_CUR);
	if (fl < 0 || fdfl < 0)
		return;
	int keep = fl & (O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | O_SYNC | O_NOATIME);
	int nfd = open(o->path, keep | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (nfd < 0)
		return; /* (unlinked, renamed, no permission any more) */
	if (fd_ino(nfd) == (unsigned long long)o->ino && (off < 0 || lseek(nfd, off, SEEK_SET) == off) &&
	    dup3(nfd, o->fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) >= 0)
		kept_add(o->fd); /* M11 */
	close(nfd);
}

int tpfs_tx_begin(const char *mount, pid_t pid, uint64_t *id, char *msg, size_t msgsize)
{
	char name[64], text[TPFS_TX_MSG_MAX];
	uint64_t v;
	int rc;
	if (pid < 0) {
		tpfs_tx_say(msg, msgsize, "bad process id %ld", (long)pid);
		return EINVAL;
	}
	snprintf(name, sizeof name, TPFS_TX_BEGIN "%ld", (long)(pid ? pid : getpid()));
	int nown = 0;
	kept_sweep();
	own_file *own = pid == 0 || pid == getpid() ? own_files(mount, &nown) : NULL; /* M10 */
	rc = request(mount, name, text, sizeof text);
	if (rc == 0 && tpfs_tx_answer_id(text, &v) != 0) {
		tpfs_tx_say(msg, msgsize, "%s answered success without a transaction id: \"%s\"", name, text);
		free(own);
		return EPROTO;
	}
	tpfs_tx_say(msg, msgsize, "%s", text);
	if (rc == 0 && id)
		*id = v;
	for (int i = 0; rc == 0 && i < nown; i++)
		reopen_own(&own[i]);
	free(own);
	return rc;
}

int tpfs_tx_commit(const char *mount, char *msg, size_t msgsize)
{
	return request(mount, TPFS_TX_COMMIT, msg, msgsize);
}

int tpfs_tx_commit_flags(const char *mount, int flags, char *msg, size_t msgsize)
{
	int rc;
	if ((flags & ~(TPFS_TX_COMMIT_WAIT | TPFS_TX_COMMIT_FORCE)) ||
	    flags == (TPFS_TX_COMMIT_WAIT | TPFS_TX_COMMIT_FORCE)) {
		tpfs_tx_say(msg, msgsize, "bad commit flags %#x", (unsigned)flags);
		return EINVAL;
	}
	if (flags & TPFS_TX_COMMIT_FORCE)
		return request(mount, TPFS_TX_COMMIT ".force", msg, msgsize);
	/* M6's exception: a refused commit (EBUSY) changed nothing, so it is
	 * asked again */
	while ((rc = request(mount, TPFS_TX_COMMIT, msg, msgsize)) == EBUSY && (flags & TPFS_TX_COMMIT_WAIT)) {
		struct timespec ts = {0, 50000000L};
		nanosleep(&ts, NULL);
	}
	return rc;
}

int tpfs_tx_abort(const char *mount, char *msg, size_t msgsize)
{
	return request(mount, TPFS_TX_ABORT, msg, msgsize);
}

int tpfs_tx_abort_id(const char *mount, uint64_t id, char *msg, size_t msgsize)
{
	char name[64];
	if (id == 0) {
		tpfs_tx_say(msg, msgsize, "there is no transaction 0");
		return EINVAL;
	}
	snprintf(name, sizeof name, TPFS_TX_ABORT ".%" PRIu64, id);
	return request(mount, name, msg, msgsize);
}

/* M12: one status request: its text moved to the start of *buf (len
 * bytes); 0, or the answer's errno with its text in msg. */
static int status_ask(const char *mount, const char *name, size_t size, char **buf, size_t *len, char *msg,
		      size_t msgsize)
{
	const char *text;
	size_t tlen;
	int rc, err;
	if ((rc = fetch(mount, name, size, buf, len, msg, msgsize)) != 0)
		return rc;
	if (split(*buf, *len, &err, &text, &tlen) != 0) {
		say_malformed(*buf, *len, msg, msgsize);
		free(*buf);
		*buf = NULL;
		return EPROTO;
	}
	if (err) {
		tpfs_tx_say(msg, msgsize, "%.*s", (int)trimmed(text, tlen), text);
		free(*buf);
		*buf = NULL;
		return err;
	}
	memmove(*buf, text, tlen);
	(*buf)[tlen] = 0;
	*len = tlen;
	return 0;
}

/* M12: every transaction, page after page; a daemon of version 1 answers
 * the first request with the whole list (no "page" line). */
static int status_pages(const char *mount, int json, char **report, char *msg, size_t msgsize)
{
	char name[96], *all = NULL;
	size_t len = 0;
	uint64_t before = 0;
	for (;;) {
		char *buf, *end;
		size_t n;
		snprintf(name, sizeof name, TPFS_TX_STATUS ".all%s" TPFS_TX_PAGE "%" PRIu64, json ? ".json" : "", before);
		int rc = status_ask(mount, name, TPFS_TX_PAGE_MAX + 64, &buf, &n, msg, msgsize);
		if (rc) {
			free(all);
			return rc;
		}
		const char *body = buf;
		uint64_t next = 0;
		if (!strncmp(buf, "page ", 5)) {
			errno = 0;
			next = strtoull(buf + 5, &end, 10);
			while (*end == ' ')
				end++;
			if (errno || *end != '\n' || (next && before && next >= before)) {
				say_malformed(buf, n, msg, msgsize);
				free(buf);
				free(all);
				return EPROTO;
			}
			body = end + 1;
		} else if (before) { /* (a daemon cannot change its version between two pages) */
			say_malformed(buf, n, msg, msgsize);
			free(buf);
			free(all);
			return EPROTO;
		}
		size_t blen = n - (size_t)(body - buf);
		char *more = realloc(all, len + blen + 1);
		if (!more) {
			free(buf);
			free(all);
			tpfs_tx_say(msg, msgsize, "%s: %s", name, strerror(ENOMEM));
			return ENOMEM;
		}
		all = more;
		memcpy(all + len, body, blen);
		len += blen;
		all[len] = 0;
		free(buf);
		if (!next)
			break;
		before = next;
	}
	*report = all;
	tpfs_tx_say(msg, msgsize, "%s", "");
	return 0;
}

int tpfs_tx_status(const char *mount, int flags, char **report, char *msg, size_t msgsize)
{
	char name[64], *buf = NULL;
	size_t len = 0;
	int rc;
	*report = NULL;
	if (flags & ~(TPFS_TX_STATUS_ALL | TPFS_TX_STATUS_JSON)) {
		tpfs_tx_say(msg, msgsize, "unknown status flags %#x", (unsigned)flags);
		return EINVAL;
	}
	if (flags & TPFS_TX_STATUS_ALL)
		return status_pages(mount, flags & TPFS_TX_STATUS_JSON, report, msg, msgsize);
	snprintf(name, sizeof name, "%s%s", TPFS_TX_STATUS, flags & TPFS_TX_STATUS_JSON ? ".json" : "");
	if ((rc = status_ask(mount, name, TPFS_TX_ANSWER_MAX, &buf, &len, msg, msgsize)) != 0)
		return rc;
	*report = buf;
	tpfs_tx_say(msg, msgsize, "%s", "");
	return 0;
}

/* ---- JSON, minimally ---- */

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The character an escape "\X..." at p stands for; *p advanced past it. */
static char unescape_json(const char **p)
{
	char c = *(*p)++;
	switch (c) {
	case 'b': return '\b';
	case 'f': return '\f';
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	case 'u': {
		int v = 0;
		for (int i = 0; i < 4; i++) {
			int h = hexval(**p);
			if (h < 0)
				return '?';
			v = v * 16 + h;
			(*p)++;
		}
		return v > 0 && v < 0x80 ? (char)v : '?';
	}
	default: return c; /* '"', '\\', '/' */
	}
}

/* The string whose opening quote is at p, decoded into out (size bytes,
 * out may be NULL); the position after its closing quote, or NULL when it
 * does not end.  *fits: whether it fit. */
static const char *json_str(const char *p, char *out, size_t size, int *fits)
{
	size_t n = 0;
	*fits = 1;
	for (p++; *p && *p != '"';) {
		char c = *p++;
		if (c == '\\') {
			if (!*p)
				return NULL;
			c = unescape_json(&p);
		}
		if (out && n + 1 < size)
			out[n++] = c;
		else
			*fits = 0;
	}
	if (out && size)
		out[n] = 0;
	return *p == '"' ? p + 1 : NULL;
}

static const char *skip_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

int tpfs_tx_json_string(const char *json, const char *key, char *out, size_t size)
{
	char name[64];
	int fits;
	for (const char *p = json; *p;) {
		if (*p != '"') {
			p++;
			continue;
		}
		if (!(p = json_str(p, name, sizeof name, &fits)))
			return EPROTO;
		p = skip_space(p);
		if (*p != ':' || !fits || strcmp(name, key) != 0)
			continue; /* a value, or another member */
		p = skip_space(p + 1);
		if (*p != '"')
			return EINVAL;
		if (!json_str(p, out, size, &fits))
			return EPROTO;
		return fits ? 0 : ERANGE;
	}
	return ENOENT;
}
