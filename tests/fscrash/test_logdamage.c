/*
 * test_logdamage -- a damaged log on real mounts (issue 23, section 1):
 * damage that a crash cannot have made is refused by tpfsd and by
 * `tpfs check`, naming the file, offset and LSN and writing nothing; an
 * administrator accepts the loss with `tpfs recover --discard-after LSN`
 * (a dry run first, then --yes); a genuine torn tail still mounts; and a
 * store that only needs recovery is checked and mounted read-only without
 * a byte of it changing (core/log/log.c L14-L17, core/env/tp.c E2).
 *
 * The crashed store (crashed_store): mkfs -s 1M (1 MiB log segments), 300
 * files of 10 KiB, each with content of its own, an fsync of the mount's
 * root directory (which makes every call before it durable), kill -9 of
 * tpfsd.  Its log spans a few segments; "the last segment" below is the
 * last one holding records.
 *
 *   flip_in_last_segment  one byte of the last segment flipped a third of
 *       the way between its header and the log's end, below the durable
 *       mark: (a) tpfsd refuses to mount (exit 1) naming the segment file,
 *       the offset and LSN of the damaged record and the recover command;
 *       (b) `tpfs check` exits 1 naming the same; (c) neither changed a
 *       byte of the store; (d) `tpfs recover --discard-after LSN` says
 *       what it would discard, exits 0, changes nothing; (e) with --yes it
 *       cuts there (log.<index>.discarded-<LSN> kept), the mount works, `tpfs
 *       check` is clean, and the files are one prefix of what was written:
 *       every file before the cut exactly as written, at most one file --
 *       the one whose create is before the cut and whose write is after
 *       it -- present with a prefix of its content (in practice empty),
 *       every later one missing; at least one file kept, one lost.
 *   missing_last_segments  the last segment and every (empty, spare) one
 *       after it deleted: the mount refuses naming the missing segment,
 *       `tpfs check` exits 1 naming it, nothing changed.
 *   torn_tail_mounts  -o commit_interval=60000 (no timer flush): 20 files
 *       fsynced, then 100 more without a sync, kill -9.  The records past
 *       the durable mark reached the segment files unsynced (the log's
 *       writer spills its buffer); one byte of one of them, in the last
 *       segment, is flipped: a tear a power cut could have made.  The
 *       mount succeeds ("torn tail cut at LSN" of that record), every
 *       fsynced file is intact, the files are one prefix of what was
 *       written, `tpfs check` is clean.
 *   check_and_ro_write_nothing  kill -9 after writes, no damage: `tpfs
 *       check` exits 0, says the store was not closed cleanly and was
 *       checked as recovery leaves it, and the store is byte for byte
 *       unchanged; `tpfsd -o ro` mounts it (recovered in memory), shows
 *       every fsynced file and refuses a write; after its unmount the store
 *       is still unchanged; a read-write mount then works.
 *
 * Every failure is loud (a missing binary or /dev/fuse fails, never skips)
 * and keeps the test's directory (/var/tmp/tpfs-test-*) for a look.
 * TPFSD, TPFS_BIN: the binaries (set by meson).
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount_util.h"

#define SEG ((uint64_t)1 << 20) /* mkfs -s 1M */
#define SEG_HDR 512             /* log.c: segment header */
#define REC_HDR 64              /* log.c: record header */
#define NFILES 300
#define FSIZE 10240
#define OUT_MAX 65536

static tfs_mount g_m;
static int g_live; /* g_m holds a store: fini kills its daemon */

static void fini(void)
{
	if (g_live && g_m.pid)
		tfs_kill9(&g_m);
}

TestSuite(logdamage, .fini = fini);

/* ---------------------------------------------------------------------- */
/* Files of the workload                                                  */

/* The content of file i of a set: a line naming it, then bytes of its own. */
static void content(unsigned set, unsigned i, unsigned char *buf)
{
	uint64_t s = 0x9e3779b97f4a7c15ull * (set * 1000 + i + 1);
	int n = snprintf((char *)buf, FSIZE, "file %u of set %u, test_logdamage\n", i, set);
	for (size_t k = (size_t)n; k < FSIZE; k++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		buf[k] = (unsigned char)s;
	}
}

static void fname(char *p, size_t n, const tfs_mount *m, unsigned set, unsigned i)
{
	snprintf(p, n, "%s/s%u_%03u", m->mnt, set, i);
}

static void write_files(const tfs_mount *m, unsigned set, unsigned from, unsigned to)
{
	unsigned char buf[FSIZE];
	char p[1024];
	for (unsigned i = from; i < to; i++) {
		fname(p, sizeof p, m, set, i);
		content(set, i, buf);
		int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
		cr_assert(fd >= 0, "create %s: %s", p, strerror(errno));
		cr_assert(write(fd, buf, FSIZE) == FSIZE, "write %s: %s", p, strerror(errno));
		cr_assert(close(fd) == 0, "close %s: %s", p, strerror(errno));
	}
}

/* fsync of the mount's root directory: every call before it is durable. */
static void fsync_root(const tfs_mount *m)
{
	int fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
	cr_assert(fd >= 0, "open %s: %s", m->mnt, strerror(errno));
	cr_assert(fsync(fd) == 0, "fsync of the root directory %s: %s", m->mnt, strerror(errno));
	close(fd);
}

typedef struct tally {
	unsigned full, partial, missing;
	unsigned first_lost; /* the first file not there exactly */
} tally;

/* The files of set, indexes from..to-1, must be one prefix of what was
 * written (calls commit in order into one log): exactly as written up to
 * some file, then at most one with a prefix of its content (created before
 * the cut, written after it), then none.  Fails on anything else. */
static tally check_prefix(const tfs_mount *m, unsigned set, unsigned from, unsigned to, const char *when)
{
	unsigned char want[FSIZE], got[FSIZE + 1];
	char p[1024];
	tally t = {0, 0, 0, to};
	for (unsigned i = from; i < to; i++) {
		fname(p, sizeof p, m, set, i);
		int fd = open(p, O_RDONLY);
		if (fd < 0) {
			cr_assert(errno == ENOENT, "%s: open %s: %s", when, p, strerror(errno));
			t.missing++;
			if (t.first_lost == to)
				t.first_lost = i;
			continue;
		}
		ssize_t n = 0, r;
		while (n <= FSIZE && (r = read(fd, got + n, FSIZE + 1 - (size_t)n)) > 0)
			n += r;
		int e = errno;
		close(fd);
		cr_assert(n >= 0 && r >= 0, "%s: read %s: %s", when, p, strerror(e));
		content(set, i, want);
		cr_assert(n <= FSIZE && !memcmp(got, want, (size_t)n),
			  "%s: %s holds %zd bytes that are not (a prefix of) what was written", when, p, n);
		cr_assert(t.missing == 0 && t.partial == 0,
			  "%s: %s is there although file %u before it is %s: not one prefix of the calls", when, p,
			  t.first_lost, t.missing ? "missing" : "incomplete");
		if (n == FSIZE) {
			t.full++;
		} else {
			t.partial++;
			t.first_lost = i;
		}
	}
	return t;
}

/* The number of names in the mount's root directory. */
static unsigned count_names(const tfs_mount *m)
{
	DIR *d = opendir(m->mnt);
	struct dirent *de;
	unsigned n = 0;
	cr_assert(d, "opendir %s: %s", m->mnt, strerror(errno));
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* ---------------------------------------------------------------------- */
/* Commands                                                               */

/* Runs `tpfs ARGS` (printf-style), stdout and stderr into out; its exit
 * status. */
static int tool(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tool(char *out, size_t cap, const char *fmt, ...)
{
	const char *tpfs = getenv("TPFS_BIN");
	char args[2048], cmd[4096];
	va_list ap;
	cr_assert(tpfs && access(tpfs, X_OK) == 0, "TPFS_BIN is not set to an executable");
	va_start(ap, fmt);
	vsnprintf(args, sizeof args, fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", tpfs, args);
	FILE *f = popen(cmd, "r");
	cr_assert(f, "popen %s: %s", cmd, strerror(errno));
	size_t n = 0, r;
	while (n < cap - 1 && (r = fread(out + n, 1, cap - 1 - n, f)) > 0)
		n += r;
	while (fgetc(f) != EOF) /* drain what did not fit */
		;
	out[n] = 0;
	int st = pclose(f);
	cr_assert(st != -1 && WIFEXITED(st), "%s: did not exit normally (status %d)", cmd, st);
	return WEXITSTATUS(st);
}

/* tfs_remount with the daemon's stderr (and mount_util's, which names the
 * daemon's exit status when it quits before mounting) in out. */
static int remount_capture(tfs_mount *m, const char *opts, char *out, size_t cap)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/tpfsd.stderr", m->dir);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644), saved = dup(2);
	cr_assert(fd >= 0 && saved >= 0, "%s: %s", path, strerror(errno));
	fflush(stderr);
	cr_assert(dup2(fd, 2) == 2, "dup2: %s", strerror(errno));
	int rc = tfs_remount(m, opts);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	FILE *f = fopen(path, "r");
	cr_assert(f, "%s: %s", path, strerror(errno));
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	fclose(f);
	fprintf(stderr, "%s", out); /* in the test's log too */
	return rc;
}

/* The log's end as `tpfs logdump` finds it on disk ("end at LSN N"). */
static uint64_t log_end(const tfs_mount *m)
{
	static char out[1 << 21];
	unsigned long long end;
	int rc = tool(out, sizeof out, "logdump '%s'", m->store);
	const char *p = strstr(out, "end at LSN ");
	cr_assert(rc == 0 && p && sscanf(p, "end at LSN %llu", &end) == 1, "tpfs logdump exited %d:\n%.2000s", rc,
		  out);
	return end;
}

/* The durable mark's LSN (log.c: file log/durable, LSN at byte 16). */
static uint64_t mark_lsn(const tfs_mount *m)
{
	unsigned char b[512];
	char p[1024];
	snprintf(p, sizeof p, "%s/log/durable", m->store);
	int fd = open(p, O_RDONLY);
	cr_assert(fd >= 0, "%s: %s", p, strerror(errno));
	cr_assert(read(fd, b, sizeof b) == (ssize_t)sizeof b && !memcmp(b, "TPFSDURA", 8), "%s: not a durable mark",
		  p);
	close(fd);
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[16 + i];
	return v;
}

static void seg_path(const tfs_mount *m, uint64_t idx, char *p, size_t n)
{
	snprintf(p, n, "%s/log/log.%016" PRIx64, m->store, idx);
}

/* The last segment holding records, for a log ending at end. */
static uint64_t last_seg(uint64_t end)
{
	return end % SEG <= SEG_HDR ? end / SEG - 1 : end / SEG;
}

/* Flips the byte at offset off of segment idx, moved if need be onto a
 * byte that its record's checksum covers (the padding to 8 bytes after a
 * payload is not): the offset of the record holding it into *rec. */
static uint64_t flip(const tfs_mount *m, uint64_t idx, uint64_t off, uint64_t *rec)
{
	static unsigned char seg[SEG];
	char p[1024];
	seg_path(m, idx, p, sizeof p);
	int fd = open(p, O_RDWR);
	cr_assert(fd >= 0, "%s: %s", p, strerror(errno));
	cr_assert(pread(fd, seg, SEG, 0) == (ssize_t)SEG, "%s: short read", p);
	uint64_t r = SEG_HDR;
	for (;;) { /* walk the records from the segment's first */
		uint32_t size = seg[r + 4] | seg[r + 5] << 8 | seg[r + 6] << 16 | (uint32_t)seg[r + 7] << 24;
		cr_assert(size >= REC_HDR && size % 8 == 0 && r + size <= SEG, "%s: no record at offset %" PRIu64
			  " on the way to %" PRIu64 " (size %" PRIu32 ")", p, r, off, size);
		if (off < r + size)
			break;
		r += size;
	}
	uint32_t len = seg[r + 60] | seg[r + 61] << 8 | seg[r + 62] << 16 | (uint32_t)seg[r + 63] << 24;
	if (off < r + 4 || off >= r + REC_HDR + len) /* the CRC itself, or padding: the lsn field */
		off = r + 8;
	unsigned char b = seg[off] ^ 0x5a;
	cr_assert(pwrite(fd, &b, 1, (off_t)off) == 1 && fsync(fd) == 0, "%s: cannot flip a byte: %s", p,
		  strerror(errno));
	close(fd);
	printf("logdamage: flipped the byte at offset %" PRIu64 " of %s (record at offset %" PRIu64 ", LSN %" PRIu64
	       ")\n",
	       off, p, r, idx * SEG + r);
	*rec = r;
	return off;
}

/* ---------------------------------------------------------------------- */
/* Snapshots of the store directory: every file's bytes                   */

typedef struct snap {
	size_t n;
	char *name[64];
	unsigned char *data[64];
	size_t len[64];
} snap;

static void snap_dir(snap *s, const char *dir, const char *rel)
{
	char p[2048], r[1024];
	DIR *d = opendir(dir);
	struct dirent *de;
	cr_assert(d, "opendir %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
		snprintf(r, sizeof r, "%s%s", rel, de->d_name);
		cr_assert(lstat(p, &st) == 0, "%s: %s", p, strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			strcat(r, "/");
			snap_dir(s, p, r);
			continue;
		}
		cr_assert(S_ISREG(st.st_mode) && s->n < 64, "%s: unexpected in a store", p);
		unsigned char *b = malloc((size_t)st.st_size + 1);
		int fd = open(p, O_RDONLY);
		cr_assert(b && fd >= 0, "%s: %s", p, strerror(errno));
		cr_assert(read(fd, b, (size_t)st.st_size + 1) == st.st_size, "%s: short read", p);
		close(fd);
		s->name[s->n] = strdup(r);
		s->data[s->n] = b;
		s->len[s->n++] = (size_t)st.st_size;
	}
	closedir(d);
}

static void snap_take(snap *s, const tfs_mount *m)
{
	memset(s, 0, sizeof *s);
	snap_dir(s, m->store, "");
}

static void snap_free(snap *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->name[i]);
		free(s->data[i]);
	}
	s->n = 0;
}

/* The store must hold exactly the files and bytes of s. */
static void snap_same(const snap *s, const tfs_mount *m, const char *after)
{
	snap t;
	snap_take(&t, m);
	for (size_t i = 0; i < s->n; i++) {
		size_t j = 0;
		while (j < t.n && strcmp(t.name[j], s->name[i]))
			j++;
		cr_assert(j < t.n, "after %s: the store's %s is gone", after, s->name[i]);
		cr_assert(t.len[j] == s->len[i], "after %s: the store's %s changed size (%zu bytes, was %zu)", after,
			  s->name[i], t.len[j], s->len[i]);
		size_t k = 0;
		while (k < s->len[i] && t.data[j][k] == s->data[i][k])
			k++;
		cr_assert(k == s->len[i], "after %s: the store's %s changed at offset %zu", after, s->name[i], k);
	}
	cr_assert(t.n == s->n, "after %s: the store holds %zu files, it held %zu", after, t.n, s->n);
	snap_free(&t);
}

/* ---------------------------------------------------------------------- */
/* The tests                                                              */

/* The crashed store: NFILES files of set 0 fsynced, kill -9.  The
 * log's end and durable mark into *end, *mark. */
static void crashed_store(tfs_mount *m, uint64_t *end, uint64_t *mark)
{
	g_live = 1;
	cr_assert(tfs_start(m, "-s 1M", NULL) == 0, "mkfs -s 1M and mount failed (see above)");
	write_files(m, 0, 0, NFILES);
	fsync_root(m);
	tfs_kill9(m);
	*end = log_end(m);
	*mark = mark_lsn(m);
	printf("logdamage: %s: log ends at LSN %" PRIu64 " (segment %" PRIu64 "), durable mark %" PRIu64 "\n",
	       m->store, *end, last_seg(*end), *mark);
	cr_assert(last_seg(*end) >= 1, "the log of %u files of %u bytes fits in its first segment: no test", NFILES,
		  FSIZE);
}

static void done(tfs_mount *m)
{
	cr_assert(m->pid == 0, "a daemon is left running");
	tfs_cleanup(m);
	g_live = 0;
}

Test(logdamage, flip_in_last_segment, .timeout = 120)
{
	static char out[OUT_MAX];
	tfs_mount *m = &g_m;
	uint64_t end, mark, rec, lsn;
	char seg[1024], want[2048];
	snap s;

	crashed_store(m, &end, &mark);
	uint64_t k = last_seg(end), end_off = end - k * SEG > SEG ? SEG : end - k * SEG;
	uint64_t off = flip(m, k, SEG_HDR + (end_off - SEG_HDR) / 3, &rec);
	cr_assert(k * SEG + off < mark, "the flipped byte (LSN %" PRIu64 ") is not below the durable mark %" PRIu64
		  ": the fsync did not make the log durable", k * SEG + off, mark);
	seg_path(m, k, seg, sizeof seg);
	snap_take(&s, m);

	/* (a) the mount refuses, naming the damage */
	int rc = remount_capture(m, NULL, out, sizeof out);
	if (rc == 0)
		tfs_stop(m);
	cr_assert(rc != 0, "tpfsd mounted a store whose log is damaged below its durable mark:\n%s", out);
	cr_assert(strstr(out, "tpfsd exited (1) before mounting"), "tpfsd did not exit with status 1:\n%s", out);
	snprintf(want, sizeof want, "%s, offset %" PRIu64 " (LSN %" PRIu64 ")", seg, rec, k * SEG + rec);
	cr_assert(strstr(out, want), "tpfsd's refusal does not name \"%s\":\n%s", want, out);
	const char *p = strstr(out, "tpfs recover --discard-after ");
	unsigned long long l;
	cr_assert(p && sscanf(p, "tpfs recover --discard-after %llu STORE", &l) == 1,
		  "tpfsd's refusal does not name the recover command:\n%s", out);
	lsn = l;
	cr_assert(lsn == k * SEG + rec, "tpfsd's refusal offers to discard from LSN %" PRIu64
		  ", not from the damaged record's %" PRIu64, lsn, k * SEG + rec);

	/* (b) tpfs check says the same */
	rc = tool(out, sizeof out, "check '%s'", m->store);
	cr_assert(rc == 1, "tpfs check exited %d on a damaged log, not 1:\n%s", rc, out);
	cr_assert(strstr(out, want), "tpfs check does not name \"%s\":\n%s", want, out);

	/* (c) neither wrote anything */
	snap_same(&s, m, "the refused mount and tpfs check");

	/* (d) the dry run */
	rc = tool(out, sizeof out, "recover --discard-after %" PRIu64 " '%s'", lsn, m->store);
	printf("%s", out);
	snprintf(want, sizeof want, "would discard the log from LSN %" PRIu64 " on", lsn);
	cr_assert(rc == 0 && strstr(out, want) && strstr(out, "Nothing was changed"),
		  "tpfs recover --discard-after %" PRIu64 " (dry run) exited %d:\n%s", lsn, rc, out);
	snap_same(&s, m, "tpfs recover --discard-after without --yes");

	/* (e) the cut */
	rc = tool(out, sizeof out, "recover --discard-after %" PRIu64 " --yes '%s'", lsn, m->store);
	printf("%s", out);
	snprintf(want, sizeof want, "discarded the log from LSN %" PRIu64 " on", lsn);
	cr_assert(rc == 0 && strstr(out, want) && strstr(out, "checked: clean"),
		  "tpfs recover --discard-after %" PRIu64 " --yes exited %d:\n%s", lsn, rc, out);
	snprintf(want, sizeof want, "%s.discarded-%" PRIu64, seg, lsn);
	cr_assert(access(want, F_OK) == 0, "%s is not there after the discard", want);
	cr_assert(tfs_remount(m, NULL) == 0, "the mount after tpfs recover --yes failed");
	tally t = check_prefix(m, 0, 0, NFILES, "after the discard");
	cr_assert(count_names(m) == t.full + t.partial, "the root holds %u names, not the %u files found",
		  count_names(m), t.full + t.partial);
	printf("logdamage: flip_in_last_segment: after discarding from LSN %" PRIu64 ": %u files intact, %u present "
	       "with a prefix of their content, %u missing (from file %u on)\n",
	       lsn, t.full, t.partial, t.missing, t.first_lost);
	cr_assert(t.full >= 1 && t.missing >= 1, "%u files intact and %u missing: the cut at LSN %" PRIu64
		  " did not cut the files' history", t.full, t.missing, lsn);
	cr_assert(tfs_stop(m) == 0, "tpfsd did not unmount cleanly");
	rc = tool(out, sizeof out, "check '%s'", m->store);
	cr_assert(rc == 0, "tpfs check after the discard exited %d:\n%s", rc, out);
	snap_free(&s);
	done(m);
}

Test(logdamage, missing_last_segments, .timeout = 120)
{
	static char out[OUT_MAX];
	tfs_mount *m = &g_m;
	uint64_t end, mark;
	char seg[1024], dir[1024], p[2048];
	snap s;

	crashed_store(m, &end, &mark);
	uint64_t k = last_seg(end);
	cr_assert(k * SEG + SEG_HDR < mark, "the last segment's records are not below the durable mark %" PRIu64,
		  mark);
	seg_path(m, k, seg, sizeof seg);
	snprintf(dir, sizeof dir, "%s/log", m->store);
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned removed = 0;
	cr_assert(d, "opendir %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		unsigned long long idx;
		int len = 0;
		if (sscanf(de->d_name, "log.%16llx%n", &idx, &len) == 1 && de->d_name[len] == 0 && idx >= k) {
			snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
			cr_assert(unlink(p) == 0, "unlink %s: %s", p, strerror(errno));
			printf("logdamage: removed %s\n", p);
			removed++;
		}
	}
	closedir(d);
	cr_assert(removed >= 2, "removed %u segments: expected the last one holding records and a spare", removed);
	snap_take(&s, m);

	int rc = remount_capture(m, NULL, out, sizeof out);
	if (rc == 0)
		tfs_stop(m);
	cr_assert(rc != 0, "tpfsd mounted a store whose last log segments are gone:\n%s", out);
	cr_assert(strstr(out, "tpfsd exited (1) before mounting"), "tpfsd did not exit with status 1:\n%s", out);
	cr_assert(strstr(out, seg) && strstr(out, "missing"), "tpfsd's refusal does not name the missing %s:\n%s",
		  seg, out);
	rc = tool(out, sizeof out, "check '%s'", m->store);
	cr_assert(rc == 1, "tpfs check exited %d on a log missing its last segments, not 1:\n%s", rc, out);
	cr_assert(strstr(out, seg) && strstr(out, "missing"), "tpfs check does not name the missing %s:\n%s", seg,
		  out);
	snap_same(&s, m, "the refused mount and tpfs check");
	snap_free(&s);
	done(m);
}

Test(logdamage, torn_tail_mounts, .timeout = 120)
{
	static char out[OUT_MAX];
	tfs_mount *m = &g_m;
	enum { SYNCED = 20, MORE = 100 };
	uint64_t rec;

	g_live = 1;
	cr_assert(tfs_start(m, "-s 1M", "commit_interval=60000") == 0, "mkfs -s 1M and mount failed (see above)");
	write_files(m, 1, 0, SYNCED);
	fsync_root(m);
	write_files(m, 1, SYNCED, SYNCED + MORE);
	tfs_kill9(m);
	uint64_t end = log_end(m), mark = mark_lsn(m), k = last_seg(end);
	printf("logdamage: %s: log ends at LSN %" PRIu64 " (segment %" PRIu64 "), durable mark %" PRIu64 "\n",
	       m->store, end, k, mark);
	uint64_t lo = mark > k * SEG + SEG_HDR ? mark : k * SEG + SEG_HDR;
	cr_assert(lo < end, "no unsynced records on disk past the durable mark (LSN %" PRIu64 ") in the last "
		  "segment %" PRIu64 " (the log ends at %" PRIu64 "): nothing to tear",
		  mark, k, end);
	flip(m, k, lo + (end - lo) / 2 - k * SEG, &rec);
	cr_assert(k * SEG + rec >= mark, "the torn record (LSN %" PRIu64 ") is below the durable mark %" PRIu64,
		  k * SEG + rec, mark);

	int rc = remount_capture(m, NULL, out, sizeof out);
	cr_assert(rc == 0, "tpfsd refused a store with a torn tail past its durable mark:\n%s", out);
	char want[200];
	snprintf(want, sizeof want, "torn tail cut at LSN %" PRIu64 " ", k * SEG + rec);
	cr_assert(strstr(out, want), "the mount did not say \"%s\":\n%s", want, out);
	tally t = check_prefix(m, 1, 0, SYNCED + MORE, "after the torn tail");
	cr_assert(t.full >= SYNCED, "only %u files intact: file %u, fsynced, is lost or incomplete", t.full,
		  t.first_lost);
	cr_assert(count_names(m) == t.full + t.partial, "the root holds %u names, not the %u files found",
		  count_names(m), t.full + t.partial);
	printf("logdamage: torn_tail_mounts: %u fsynced files intact; of %u unsynced, %u intact, %u with a prefix "
	       "of their content, %u missing\n",
	       SYNCED, MORE, t.full - SYNCED, t.partial, t.missing);
	cr_assert(tfs_stop(m) == 0, "tpfsd did not unmount cleanly");
	rc = tool(out, sizeof out, "check '%s'", m->store);
	cr_assert(rc == 0, "tpfs check after the torn tail exited %d:\n%s", rc, out);
	done(m);
}

Test(logdamage, check_and_ro_write_nothing, .timeout = 120)
{
	static char out[OUT_MAX];
	tfs_mount *m = &g_m;
	enum { SYNCED = 40, MORE = 10 };
	char p[1024];
	snap s;

	g_live = 1;
	cr_assert(tfs_start(m, "-s 1M", NULL) == 0, "mkfs -s 1M and mount failed (see above)");
	write_files(m, 2, 0, SYNCED);
	fsync_root(m);
	write_files(m, 2, SYNCED, SYNCED + MORE);
	tfs_kill9(m);
	snap_take(&s, m);

	int rc = tool(out, sizeof out, "check '%s'", m->store);
	printf("%s", out);
	cr_assert(rc == 0, "tpfs check of a store that needs recovery exited %d:\n%s", rc, out);
	cr_assert(strstr(out, "the store was not closed cleanly: checking it as recovery leaves it") &&
			  strstr(out, ": clean"),
		  "tpfs check did not say it checked the store as recovery leaves it:\n%s", out);
	snap_same(&s, m, "tpfs check");

	rc = remount_capture(m, "ro", out, sizeof out);
	cr_assert(rc == 0, "tpfsd -o ro refused a store that needs recovery:\n%s", out);
	cr_assert(strstr(out, "recovered in memory for this read-only mount"),
		  "tpfsd -o ro did not say it recovered in memory:\n%s", out);
	tally t = check_prefix(m, 2, 0, SYNCED + MORE, "on the read-only mount");
	cr_assert(t.full >= SYNCED, "read-only mount: only %u files intact: file %u, fsynced, is lost or incomplete",
		  t.full, t.first_lost);
	fname(p, sizeof p, m, 9, 0);
	int fd = open(p, O_CREAT | O_WRONLY, 0644);
	cr_assert(fd < 0 && errno == EROFS, "a create on the read-only mount: %s",
		  fd < 0 ? strerror(errno) : "it worked");
	cr_assert(tfs_stop(m) == 0, "the read-only tpfsd did not unmount cleanly");
	snap_same(&s, m, "a read-only mount and its unmount");

	cr_assert(tfs_remount(m, NULL) == 0, "the read-write mount after the read-only one failed");
	tally u = check_prefix(m, 2, 0, SYNCED + MORE, "on the read-write mount");
	cr_assert(u.full == t.full && u.partial == t.partial,
		  "the read-write mount shows %u+%u files, the read-only one showed %u+%u", u.full, u.partial, t.full,
		  t.partial);
	write_files(m, 3, 0, 1);
	cr_assert(tfs_stop(m) == 0, "tpfsd did not unmount cleanly");
	rc = tool(out, sizeof out, "check '%s'", m->store);
	cr_assert(rc == 0, "tpfs check after the read-write mount exited %d:\n%s", rc, out);
	printf("logdamage: check_and_ro_write_nothing: %u fsynced and %u of %u unsynced files intact\n", SYNCED,
	       t.full - SYNCED, MORE);
	snap_free(&s);
	done(m);
}
