/*
 * tpfs_tx_mount.c -- libtpfs_tx: finding the tpfs mount a request goes to.
 *
 * The tpfs mounts are the lines of /proc/self/mountinfo (proc(5)) whose
 * type is "fuse.tpfs":
 *
 *   36 35 0:52 / /mnt/my\040tx rw,nosuid - fuse.tpfs /srv/store rw,...
 *   ^id   ^dev ^root ^mount point          ^type     ^source
 *
 * Fields are separated by single spaces; the optional fields between the
 * options and the "-" vary in number; space, tab, newline and backslash in
 * paths are escaped as three octal digits (\040, \011, \012, \134).
 *
 * Rules, cited where they are applied:
 *   M1  A directory is on the mount whose mount point is its longest prefix
 *       ending at a component boundary: /mnt/a holds /mnt/a and /mnt/a/x,
 *       not /mnt/ab.  Every mount takes part (a non-tpfs mount inside a
 *       tpfs one hides it); among mounts of one point the later line, the
 *       one on top, wins.
 *   M2  Requests go to the root of the file system: for a bind mount of a
 *       subdirectory (root field other than "/"), a mount point of the same
 *       device whose root is "/" is used when there is one.
 *   M3  "The only tpfs mount" counts file systems (devices), not mount
 *       points.
 *   M4  With no path given: the mount of the current directory, else
 *       $TPFS_MOUNT, else the only tpfs file system (tpfs_tx.h).
 *   M5  The current directory is known by its path (getcwd), or, when it
 *       has none -- removed, or its dentry dropped by the kernel -- by its
 *       device: the tpfs file system whose "major:minor" is st_dev of ".".
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tpfs_tx.h"
#include "tpfs_tx_int.h"

#define MOUNTINFO "/proc/self/mountinfo"
#define MAX_FIELDS 64

typedef struct mnt {
	char *dir;  /* mount point, decoded */
	char *root; /* the directory of its file system mounted there, decoded */
	char *dev;  /* "major:minor": equal for all mounts of one file system */
	int tpfs;   /* type fuse.tpfs */
} mnt;

struct tpfs_tx_mounts {
	mnt *v; /* in the file's order */
	size_t n, cap;
};

/* ---- messages (shared with tpfs_tx.c through tpfs_tx_int.h) ---- */

static void vsay_at(char *msg, size_t msgsize, size_t at, const char *fmt, va_list ap)
{
	if (!msg || at >= msgsize)
		return;
	vsnprintf(msg + at, msgsize - at, fmt, ap);
}

void tpfs_tx_say(char *msg, size_t msgsize, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay_at(msg, msgsize, 0, fmt, ap);
	va_end(ap);
}

void tpfs_tx_say_more(char *msg, size_t msgsize, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay_at(msg, msgsize, msg && msgsize ? strnlen(msg, msgsize) : 0, fmt, ap);
	va_end(ap);
}

/* ---- parsing mountinfo ---- */

static int is_octal(char c) { return c >= '0' && c <= '7'; }

/* Decodes the octal escapes of a mountinfo field in place. */
static void unescape(char *s)
{
	char *w = s;
	for (const char *r = s; *r;) {
		if (r[0] == '\\' && is_octal(r[1]) && is_octal(r[2]) && is_octal(r[3])) {
			*w++ = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
}

/* Splits line at single spaces; the number of fields (at most max). */
static size_t split_fields(char *line, char **f, size_t max)
{
	size_t n = 0;
	char *tok;
	while (n < max && (tok = strsep(&line, " ")) != NULL)
		if (*tok)
			f[n++] = tok;
	return n;
}

static void mnt_free(mnt *e)
{
	free(e->dir);
	free(e->root);
	free(e->dev);
}

/* One line into *e: 0, EINVAL when it does not parse, ENOMEM. */
static int parse_line(char *line, mnt *e)
{
	char *f[MAX_FIELDS];
	size_t n = split_fields(line, f, MAX_FIELDS), sep;
	for (sep = 6; sep < n && strcmp(f[sep], "-") != 0; sep++)
		;
	if (n < 6 || sep + 1 >= n)
		return EINVAL;
	unescape(f[3]);
	unescape(f[4]);
	unescape(f[sep + 1]);
	*e = (mnt){strdup(f[4]), strdup(f[3]), strdup(f[2]), !strcmp(f[sep + 1], TPFS_TX_FSTYPE)};
	if (!e->dir || !e->root || !e->dev) {
		mnt_free(e);
		return ENOMEM;
	}
	return 0;
}

static int mounts_add(tpfs_tx_mounts *m, const mnt *e)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 32;
		mnt *v = realloc(m->v, cap * sizeof *v);
		if (!v)
			return ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n++] = *e;
	return 0;
}

static int mounts_parse(FILE *fp, tpfs_tx_mounts *m)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;
	while (rc == 0 && (len = getline(&line, &cap, fp)) >= 0) {
		mnt e;
		if (len > 0 && line[len - 1] == '\n')
			line[len - 1] = 0;
		if ((rc = parse_line(line, &e)) == EINVAL) {
			rc = 0; /* not a mount line: skipped */
			continue;
		}
		if (rc == 0 && (rc = mounts_add(m, &e)) != 0)
			mnt_free(&e);
	}
	if (rc == 0 && ferror(fp))
		rc = EIO;
	free(line);
	return rc;
}

int tpfs_tx_mounts_read(const char *mountinfo, tpfs_tx_mounts **out, char *msg, size_t msgsize)
{
	const char *path = mountinfo ? mountinfo : MOUNTINFO;
	tpfs_tx_mounts *m;
	int rc;
	*out = NULL;
	FILE *fp = fopen(path, "re");
	if (!fp) {
		rc = errno;
		tpfs_tx_say(msg, msgsize, "cannot read %s: %s", path, strerror(rc));
		return rc;
	}
	if (!(m = calloc(1, sizeof *m)))
		rc = ENOMEM;
	else
		rc = mounts_parse(fp, m);
	fclose(fp);
	if (rc) {
		tpfs_tx_mounts_free(m);
		tpfs_tx_say(msg, msgsize, "cannot read %s: %s", path, strerror(rc));
		return rc;
	}
	*out = m;
	return 0;
}

void tpfs_tx_mounts_free(tpfs_tx_mounts *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		mnt_free(&m->v[i]);
	free(m->v);
	free(m);
}

/* ---- queries ---- */

size_t tpfs_tx_mounts_count(const tpfs_tx_mounts *m)
{
	size_t n = 0;
	for (size_t i = 0; m && i < m->n; i++)
		n += m->v[i].tpfs != 0;
	return n;
}

const char *tpfs_tx_mounts_dir(const tpfs_tx_mounts *m, size_t i)
{
	for (size_t k = 0; m && k < m->n; k++)
		if (m->v[k].tpfs && i-- == 0)
			return m->v[k].dir;
	return NULL;
}

/* M1: the length of mount point mp when it is a prefix of dir at a
 * component boundary, else -1. */
static long prefix_len(const char *mp, const char *dir)
{
	size_t l = strlen(mp);
	while (l > 0 && mp[l - 1] == '/')
		l--; /* "/" becomes "", which every absolute path extends */
	if (strncmp(mp, dir, l) != 0 || (dir[l] != 0 && dir[l] != '/'))
		return -1;
	return (long)l;
}

/* M1: the index of the mount dir is on, or -1. */
static long mount_of(const tpfs_tx_mounts *m, const char *dir)
{
	long best = -1, best_len = -1;
	if (!m || !dir || dir[0] != '/')
		return -1;
	for (size_t i = 0; i < m->n; i++) {
		long l = prefix_len(m->v[i].dir, dir);
		if (l >= 0 && l >= best_len) { /* >=: the later line is on top */
			best = (long)i;
			best_len = l;
		}
	}
	return best;
}

/* M2: where requests for the file system of mount i go. */
static const char *root_dir(const tpfs_tx_mounts *m, size_t i)
{
	const mnt *e = &m->v[i];
	if (!strcmp(e->root, "/"))
		return e->dir;
	for (size_t k = m->n; k-- > 0;)
		if (m->v[k].tpfs && !strcmp(m->v[k].root, "/") && !strcmp(m->v[k].dev, e->dev))
			return m->v[k].dir;
	return e->dir;
}

const char *tpfs_tx_mounts_containing(const tpfs_tx_mounts *m, const char *dir)
{
	long i = mount_of(m, dir);
	if (i < 0 || !m->v[i].tpfs)
		return NULL;
	return root_dir(m, (size_t)i);
}

/* M3: whether tpfs mount i is the first of its file system in the list. */
static int first_of_device(const tpfs_tx_mounts *m, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (m->v[k].tpfs && !strcmp(m->v[k].dev, m->v[i].dev))
			return 0;
	return 1;
}

/* M3: the roots of the tpfs file systems, one per device, into dirs (at
 * most max); how many there are. */
static size_t file_systems(const tpfs_tx_mounts *m, const char **dirs, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; m && i < m->n; i++)
		if (m->v[i].tpfs && first_of_device(m, i)) {
			if (n < max)
				dirs[n] = root_dir(m, i);
			n++;
		}
	return n;
}

static int copy_out(const char *dir, char *out, size_t size, char *msg, size_t msgsize)
{
	if (strlen(dir) >= size) {
		tpfs_tx_say(msg, msgsize, "the mount path %s is too long", dir);
		return ENAMETOOLONG;
	}
	memcpy(out, dir, strlen(dir) + 1);
	return 0;
}

/* A path names the mount that holds it, or else itself (-o subtype=...). */
static const char *resolve(const tpfs_tx_mounts *m, const char *path)
{
	const char *dir = tpfs_tx_mounts_containing(m, path);
	return dir ? dir : path;
}

/* M4, step 3: the only tpfs file system. */
static int choose_only(const tpfs_tx_mounts *m, const char *cwd, char *out, size_t size, char *msg, size_t msgsize)
{
	const char *dirs[8];
	size_t n = file_systems(m, dirs, 8);
	if (n == 1)
		return copy_out(dirs[0], out, size, msg, msgsize);
	tpfs_tx_say(msg, msgsize, "no tpfs mount contains %s and $TPFS_MOUNT is not set", cwd ? cwd : "the current directory");
	if (n == 0) {
		tpfs_tx_say_more(msg, msgsize, "; nothing of type %s is mounted", TPFS_TX_FSTYPE);
		return ENOENT;
	}
	tpfs_tx_say_more(msg, msgsize, "; %zu tpfs file systems are mounted (", n);
	for (size_t i = 0; i < n && i < 8; i++)
		tpfs_tx_say_more(msg, msgsize, "%s%s", i ? ", " : "", dirs[i]);
	tpfs_tx_say_more(msg, msgsize, "%s): name one", n > 8 ? ", ..." : "");
	return ENOTUNIQ;
}

int tpfs_tx_mounts_choose(const tpfs_tx_mounts *m, const char *path, const char *cwd, const char *env, char *out,
			  size_t size, char *msg, size_t msgsize)
{
	const char *dir;
	tpfs_tx_say(msg, msgsize, "%s", "");
	if (path)
		return copy_out(resolve(m, path), out, size, msg, msgsize);
	if ((dir = tpfs_tx_mounts_containing(m, cwd)) != NULL)
		return copy_out(dir, out, size, msg, msgsize);
	if (env && *env)
		return copy_out(resolve(m, env), out, size, msg, msgsize);
	return choose_only(m, cwd, out, size, msg, msgsize);
}

/* ---- with the process's own inputs ---- */

/* M5: the root of the tpfs file system holding the current directory,
 * found by its device; NULL if none. */
static const char *cwd_by_device(const tpfs_tx_mounts *m)
{
	struct stat st;
	char dev[48];
	if (!m || stat(".", &st) != 0)
		return NULL;
	snprintf(dev, sizeof dev, "%u:%u", major(st.st_dev), minor(st.st_dev));
	for (size_t i = m->n; i-- > 0;) /* M1: the later line wins */
		if (m->v[i].tpfs && !strcmp(m->v[i].dev, dev))
			return root_dir(m, i);
	return NULL;
}

int tpfs_tx_find_mount(const char *path, char *mount, size_t size, char *msg, size_t msgsize)
{
	char canon[PATH_MAX], cwd[PATH_MAX], envc[PATH_MAX];
	const char *env = getenv("TPFS_MOUNT");
	tpfs_tx_mounts *m = NULL;
	int rc;
	if (path && !realpath(path, canon)) {
		rc = errno;
		tpfs_tx_say(msg, msgsize, "%s: %s", path, strerror(rc));
		return rc;
	}
	/* a $TPFS_MOUNT that does not resolve is used as it is: the request
	 * then fails naming it */
	if (!path && env && *env && realpath(env, envc))
		env = envc;
	if ((rc = tpfs_tx_mounts_read(NULL, &m, msg, msgsize)) != 0 && !path)
		return rc;
	const char *here = path ? NULL : getcwd(cwd, sizeof cwd);
	if (!path && !here)
		here = cwd_by_device(m); /* M5 */
	rc = tpfs_tx_mounts_choose(m, path ? canon : NULL, here, env, mount, size, msg, msgsize);
	tpfs_tx_mounts_free(m);
	return rc;
}

/* Whether the caller has a transaction on the mount at dir. */
static int has_tx(const char *dir)
{
	char *report = NULL;
	int rc = tpfs_tx_status(dir, 0, &report, NULL, 0);
	free(report);
	return rc == 0;
}

/* The file systems other than skip where the caller has a transaction:
 * how many, the first in *found. */
static size_t search_own(const tpfs_tx_mounts *m, const char *skip, const char **found, char *list, size_t listsize)
{
	const char *dirs[64];
	size_t n = file_systems(m, dirs, 64), hits = 0;
	for (size_t i = 0; i < n && i < 64; i++) {
		if ((skip && !strcmp(dirs[i], skip)) || !has_tx(dirs[i]))
			continue;
		if (hits++ == 0)
			*found = dirs[i];
		tpfs_tx_say_more(list, listsize, "%s%s", hits > 1 ? ", " : "", dirs[i]);
	}
	return hits;
}

int tpfs_tx_find_own(const char *path, char *mount, size_t size, char *msg, size_t msgsize)
{
	char list[512] = "";
	const char *found = NULL;
	tpfs_tx_mounts *m;
	int rc = tpfs_tx_find_mount(path, mount, size, msg, msgsize);
	if (path || (rc == 0 && has_tx(mount)))
		return rc;
	if (rc != 0 && rc != ENOENT && rc != ENOTUNIQ)
		return rc;
	if (tpfs_tx_mounts_read(NULL, &m, NULL, 0) != 0)
		return rc; /* tpfs_tx_find_mount read it a moment ago: keep its answer */
	size_t hits = search_own(m, rc == 0 ? mount : NULL, &found, list, sizeof list);
	if (hits == 1)
		rc = copy_out(found, mount, size, msg, msgsize);
	else if (hits > 1) {
		tpfs_tx_say(msg, msgsize, "the caller has transactions on %zu tpfs mounts (%s): name one", hits, list);
		rc = ENOTUNIQ;
	} else if (rc == ENOTUNIQ)
		tpfs_tx_say_more(msg, msgsize, "; the caller has a transaction on none of them");
	tpfs_tx_mounts_free(m);
	return rc;
}
