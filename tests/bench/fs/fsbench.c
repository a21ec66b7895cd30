/*
 * fsbench -- the file-system workloads of scripts/bench_fs, run against one
 * directory (the host's own, or a FUSE mount).  It measures one system; the
 * driver runs it on each system in the same run and prints the ratios.
 *
 *   fsbench [options] DIR PHASE...
 *
 * Each phase prints one machine-readable line on stdout:
 *
 *   PHASE N WHAT SECONDS s RATE UNIT
 *   create 10000 files 1.234 s 8103.2 ops/s
 *   seqwrite 1073741824 bytes 2.345 s 436.7 MiB/s
 *
 * Phases (the small-file phases work on DIR/d00 ... DIR/dNN, the large-file
 * phases on DIR/seqfile, the project phases on DIR/proj):
 *   create     mkdir the directories; create, write 4 KiB and close each file
 *   stat       stat(2) every file by path
 *   readdir    opendir/readdir every directory (N = entries returned)
 *   read       open, read to EOF and close every file, checking its content
 *   unlink     unlink every file, then rmdir the directories
 *   seqwrite   write the large file in 1 MiB write(2)s, then fsync
 *   seqread    read it in 1 MiB read(2)s, checking every 4 KiB block
 *   randread   4 KiB preads at random 4 KiB-aligned offsets (fixed seed)
 *   randwrite  4 KiB pwrites at random aligned offsets (fixed seed), then fsync
 *   genproject write a small C project (modules, headers, Makefile) to
 *              DIR/proj (not timed: the driver tars it)
 *   untar      tar -xf TARBALL -C DIR (N = entries extracted)
 *   build      make -j JOBS -C DIR/proj (N = objects), then run the program
 *              and check its output (not timed)
 *
 * Every phase checks what it reads, so that a broken file system cannot look
 * fast.  Each 4 KiB block of every file starts with a stamp (the file's
 * index, or the block's offset in the large file); the rest is pseudo-random
 * bytes, not zeros.  Errors name the phase, the path and the cause, and exit
 * with status 1.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096u
#define CHUNK (1u << 20)
#define STEPS 8 /* functions per generated module */

static const char usage[] =
	"usage: fsbench [options] DIR PHASE...\n"
	"       fsbench --getxattr NAME PATH\n"
	"\n"
	"Runs file-system workloads against DIR and prints one line per phase:\n"
	"  PHASE N WHAT SECONDS s RATE UNIT\n"
	"\n"
	"Phases: create stat readdir read unlink (small files in DIR/dNN);\n"
	"seqwrite seqread randread randwrite (DIR/seqfile); genproject untar build\n"
	"(DIR/proj).\n"
	"\n"
	"Options:\n"
	"  --files N      small files (default 10000)\n"
	"  --dirs N       directories they are spread over (default 10)\n"
	"  --file-size B  bytes per small file (default 4096)\n"
	"  --size BYTES   large file, a multiple of 1 MiB; suffixes K M G (default 1G)\n"
	"  --ops N        random reads, and random writes (default 20000)\n"
	"  --seed S       seed of the random offsets (default 1)\n"
	"  --modules N    C modules of the generated project (default 48)\n"
	"  --tarball F    the project's tarball, for untar\n"
	"  --jobs N       make -j (default 2)\n"
	"  --drop         sync and drop the kernel's caches before each phase\n"
	"                 (root: echo 3 > /proc/sys/vm/drop_caches)\n"
	"  --getxattr NAME PATH  print the value of an extended attribute and exit\n"
	"                 (the passthrough's request counters)\n"
	"  -h, --help     this text\n";

static struct {
	const char *dir;
	uint64_t files, dirs, file_size, size, ops, seed, modules, jobs;
	const char *tarball;
	int drop;
} cfg = {.files = 10000, .dirs = 10, .file_size = BLOCK, .size = 1ull << 30, .ops = 20000, .seed = 1,
	 .modules = 48, .jobs = 2};

static const char *phase = "fsbench";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fsbench %s: ", phase);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* xorshift64*: the random offsets and the filler bytes. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static void *xmalloc(size_t n)
{
	void *p;
	if (posix_memalign(&p, BLOCK, n ? n : 1) != 0)
		die("out of memory (%zu bytes)", n);
	return p;
}

static void fill(char *buf, size_t n, uint64_t seed)
{
	uint64_t s = seed * 2654435761u + 0x9E3779B97F4A7C15ull, v;
	for (size_t i = 0; i < n; i += sizeof v) {
		v = rnd(&s);
		memcpy(buf + i, &v, n - i < sizeof v ? n - i : sizeof v);
	}
}

/* Every 4 KiB block of buf starts with its stamp: base + its offset. */
static void stamp(char *buf, size_t n, uint64_t base)
{
	for (size_t o = 0; o < n; o += BLOCK) {
		uint64_t v = base + o;
		memcpy(buf + o, &v, n - o < sizeof v ? n - o : sizeof v);
	}
}

static void check_stamp(const char *buf, size_t n, uint64_t base, const char *path)
{
	for (size_t o = 0; o + sizeof(uint64_t) <= n; o += BLOCK) {
		uint64_t v;
		memcpy(&v, buf + o, sizeof v);
		if (v != base + o)
			die("%s: wrong data at offset %" PRIu64 " (stamp %" PRIu64 ", expected %" PRIu64 ")", path,
			    base + o, v, base + o);
	}
}

static void write_all(int fd, const char *buf, size_t n, const char *path)
{
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("%s: write: %s", path, w < 0 ? strerror(errno) : "wrote nothing");
		buf += w;
		n -= (size_t)w;
	}
}

static void drop_caches(void)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0 || write(fd, "3\n", 2) != 2)
		die("--drop: /proc/sys/vm/drop_caches: %s (needs root)", strerror(errno));
	close(fd);
}

static void report(const char *what, uint64_t n, double secs, double rate, const char *unit)
{
	printf("%s %" PRIu64 " %s %.4f s %.2f %s\n", phase, n, what, secs, rate, unit);
	fflush(stdout);
}

static void report_ops(const char *what, uint64_t n, double secs)
{
	report(what, n, secs, (double)n / secs, "ops/s");
}

static void report_bytes(uint64_t n, double secs)
{
	report("bytes", n, secs, (double)n / secs / (1 << 20), "MiB/s");
}

/* ---------------------------------------------------------------------- */
/* Small files                                                            */

static void dir_path(char *p, size_t size, uint64_t d)
{
	snprintf(p, size, "%s/d%02" PRIu64, cfg.dir, d);
}

/* File i lives in directory i / per_dir: the files are made directory by
 * directory, as an untar or a build would. */
static void file_path(char *p, size_t size, uint64_t i)
{
	uint64_t per_dir = (cfg.files + cfg.dirs - 1) / cfg.dirs;
	snprintf(p, size, "%s/d%02" PRIu64 "/f%06" PRIu64, cfg.dir, i / per_dir, i);
}

static void ph_create(void)
{
	char path[4096];
	char *buf = xmalloc(cfg.file_size);
	fill(buf, cfg.file_size, 7);
	double t0 = now();
	for (uint64_t d = 0; d < cfg.dirs; d++) {
		dir_path(path, sizeof path, d);
		if (mkdir(path, 0755) != 0)
			die("%s: mkdir: %s", path, strerror(errno));
	}
	for (uint64_t i = 0; i < cfg.files; i++) {
		file_path(path, sizeof path, i);
		stamp(buf, cfg.file_size, i << 32);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0)
			die("%s: open: %s", path, strerror(errno));
		write_all(fd, buf, cfg.file_size, path);
		if (close(fd) != 0)
			die("%s: close: %s", path, strerror(errno));
	}
	report_ops("files", cfg.files, now() - t0);
	free(buf);
}

static void ph_stat(void)
{
	char path[4096];
	struct stat st;
	double t0 = now();
	for (uint64_t i = 0; i < cfg.files; i++) {
		file_path(path, sizeof path, i);
		if (stat(path, &st) != 0)
			die("%s: stat: %s", path, strerror(errno));
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != cfg.file_size)
			die("%s: mode %o size %jd, expected a regular file of %" PRIu64 " bytes", path,
			    (unsigned)st.st_mode, (intmax_t)st.st_size, cfg.file_size);
	}
	report_ops("files", cfg.files, now() - t0);
}

static void ph_readdir(void)
{
	char path[4096];
	uint64_t n = 0;
	double t0 = now();
	for (uint64_t d = 0; d < cfg.dirs; d++) {
		dir_path(path, sizeof path, d);
		DIR *dp = opendir(path);
		struct dirent *e;
		if (!dp)
			die("%s: opendir: %s", path, strerror(errno));
		errno = 0;
		while ((e = readdir(dp)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				n++;
		if (errno)
			die("%s: readdir: %s", path, strerror(errno));
		closedir(dp);
	}
	double t = now() - t0;
	if (n != cfg.files)
		die("%" PRIu64 " entries listed, expected %" PRIu64, n, cfg.files);
	report_ops("entries", n, t);
}

static void ph_read(void)
{
	char path[4096];
	size_t cap = cfg.file_size + 65536;
	char *buf = xmalloc(cap);
	double t0 = now();
	for (uint64_t i = 0; i < cfg.files; i++) {
		file_path(path, sizeof path, i);
		int fd = open(path, O_RDONLY);
		size_t got = 0;
		ssize_t r;
		if (fd < 0)
			die("%s: open: %s", path, strerror(errno));
		while ((r = read(fd, buf + got, cap - got)) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				die("%s: read: %s", path, strerror(errno));
			if ((got += (size_t)r) == cap)
				die("%s: longer than %" PRIu64 " bytes", path, cfg.file_size);
		}
		close(fd);
		if (got != cfg.file_size)
			die("%s: read %zu bytes, expected %" PRIu64, path, got, cfg.file_size);
		check_stamp(buf, got, i << 32, path);
	}
	report_ops("files", cfg.files, now() - t0);
	free(buf);
}

static void ph_unlink(void)
{
	char path[4096];
	double t0 = now();
	for (uint64_t i = 0; i < cfg.files; i++) {
		file_path(path, sizeof path, i);
		if (unlink(path) != 0)
			die("%s: unlink: %s", path, strerror(errno));
	}
	for (uint64_t d = 0; d < cfg.dirs; d++) {
		dir_path(path, sizeof path, d);
		if (rmdir(path) != 0)
			die("%s: rmdir: %s", path, strerror(errno));
	}
	report_ops("files", cfg.files, now() - t0);
}

/* ---------------------------------------------------------------------- */
/* The large file                                                         */

static void seq_path(char *p, size_t size)
{
	snprintf(p, size, "%s/seqfile", cfg.dir);
}

static void ph_seqwrite(void)
{
	char path[4096];
	char *buf = xmalloc(CHUNK);
	seq_path(path, sizeof path);
	fill(buf, CHUNK, 11);
	double t0 = now();
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("%s: open: %s", path, strerror(errno));
	for (uint64_t off = 0; off < cfg.size; off += CHUNK) {
		stamp(buf, CHUNK, off);
		write_all(fd, buf, CHUNK, path);
	}
	if (fsync(fd) != 0)
		die("%s: fsync: %s", path, strerror(errno));
	if (close(fd) != 0)
		die("%s: close: %s", path, strerror(errno));
	report_bytes(cfg.size, now() - t0);
	free(buf);
}

static void ph_seqread(void)
{
	char path[4096];
	char *buf = xmalloc(CHUNK);
	uint64_t off = 0;
	ssize_t r;
	seq_path(path, sizeof path);
	double t0 = now();
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("%s: open: %s", path, strerror(errno));
	while ((r = read(fd, buf, CHUNK)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("%s: read: %s", path, strerror(errno));
		if (r % BLOCK)
			die("%s: a read of %zd bytes at %" PRIu64 ", not whole blocks", path, r, off);
		check_stamp(buf, (size_t)r, off, path);
		off += (uint64_t)r;
	}
	close(fd);
	double t = now() - t0;
	if (off != cfg.size)
		die("%s: read %" PRIu64 " bytes, expected %" PRIu64, path, off, cfg.size);
	report_bytes(off, t);
	free(buf);
}

static void ph_randread(void)
{
	char path[4096];
	char *buf = xmalloc(BLOCK);
	uint64_t s = cfg.seed * 0x9E3779B97F4A7C15ull + 1, blocks = cfg.size / BLOCK;
	seq_path(path, sizeof path);
	double t0 = now();
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("%s: open: %s", path, strerror(errno));
	for (uint64_t i = 0; i < cfg.ops; i++) {
		uint64_t off = rnd(&s) % blocks * BLOCK;
		ssize_t r = pread(fd, buf, BLOCK, (off_t)off);
		if (r != (ssize_t)BLOCK)
			die("%s: pread at %" PRIu64 ": %s", path, off, r < 0 ? strerror(errno) : "short read");
		check_stamp(buf, BLOCK, off, path);
	}
	close(fd);
	report_ops("reads", cfg.ops, now() - t0);
	free(buf);
}

static void ph_randwrite(void)
{
	char path[4096];
	char *buf = xmalloc(BLOCK);
	uint64_t s = cfg.seed * 0x9E3779B97F4A7C15ull + 2, blocks = cfg.size / BLOCK;
	seq_path(path, sizeof path);
	fill(buf, BLOCK, 13);
	double t0 = now();
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		die("%s: open: %s", path, strerror(errno));
	for (uint64_t i = 0; i < cfg.ops; i++) {
		uint64_t off = rnd(&s) % blocks * BLOCK;
		stamp(buf, BLOCK, off); /* the file still checks after this phase */
		ssize_t w = pwrite(fd, buf, BLOCK, (off_t)off);
		if (w != (ssize_t)BLOCK)
			die("%s: pwrite at %" PRIu64 ": %s", path, off, w < 0 ? strerror(errno) : "short write");
	}
	if (fsync(fd) != 0)
		die("%s: fsync: %s", path, strerror(errno));
	if (close(fd) != 0)
		die("%s: close: %s", path, strerror(errno));
	report_ops("writes", cfg.ops, now() - t0);
	free(buf);
}

/* ---------------------------------------------------------------------- */
/* The project                                                            */

static FILE *create_file(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static FILE *create_file(const char *fmt, ...)
{
	char path[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof path, fmt, ap);
	va_end(ap);
	FILE *f = fopen(path, "w");
	if (!f)
		die("%s: %s", path, strerror(errno));
	return f;
}

static void close_file(FILE *f)
{
	if (ferror(f) | fclose(f))
		die("writing the project: %s", strerror(errno));
}

static void make_dir(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void make_dir(const char *fmt, ...)
{
	char path[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof path, fmt, ap);
	va_end(ap);
	if (mkdir(path, 0755) != 0)
		die("%s: mkdir: %s", path, strerror(errno));
}

/* A module: a table, a record type and eight functions with loops and
 * switches, so that gcc -O2 has real work (about 0.1 s a module here). */
static void gen_module(uint64_t m)
{
	uint64_t s = m + 101;
	FILE *f = create_file("%s/proj/src/mod%02" PRIu64 ".c", cfg.dir, m);
	fprintf(f, "/* mod%02" PRIu64 ".c -- generated by fsbench genproject */\n", m);
	fprintf(f, "#include <stdint.h>\n#include <string.h>\n#include \"common.h\"\n#include \"util.h\"\n"
		   "#include \"modules.h\"\n\n");
	fprintf(f, "static const uint32_t table[64] = {\n");
	for (int i = 0; i < 64; i++)
		fprintf(f, "\t0x%08" PRIx32 "u,%s", (uint32_t)rnd(&s), i % 4 == 3 ? "\n" : "");
	fprintf(f, "};\n\ntypedef struct rec {\n\tuint32_t a, b;\n\tdouble c;\n\tchar name[16];\n} rec;\n\n");
	for (int k = 0; k < STEPS; k++) {
		fprintf(f, "static uint32_t step%d(uint32_t x, rec *r)\n{\n", k);
		fprintf(f, "\tfor (int i = 0; i < %d; i++) {\n", 3 + k);
		fprintf(f, "\t\tswitch ((x >> %d) & 7) {\n", k % 5);
		for (int c = 0; c < 8; c++)
			fprintf(f, "\t\tcase %d: x = util_rotl(x ^ table[(x + %d) & 63], %d) + %" PRIu32 "u; r->a += x; break;\n",
				c, c * 7 + k, (c + k) % 31 + 1, (uint32_t)rnd(&s) & 0xffff);
		fprintf(f, "\t\t}\n\t\tr->c = r->c * 0.5 + (double)(x & 1023) / %d.0;\n", k + 3);
		fprintf(f, "\t\tif (r->c > %d.0)\n\t\t\tr->b ^= (uint32_t)r->c;\n\t}\n", 100 + k);
		fprintf(f, "\tmemcpy(r->name, \"mod%02" PRIu64 "-%02d\", 9);\n", m, k);
		fprintf(f, "\treturn x ^ r->a ^ r->b;\n}\n\n");
	}
	fprintf(f, "uint64_t mod%02" PRIu64 "_run(uint32_t seed)\n{\n\trec r = {0};\n\tuint64_t h = COMMON_SEED;\n",
		m);
	fprintf(f, "\tfor (uint32_t i = 0; i < 16; i++) {\n\t\tuint32_t x = seed + i;\n");
	for (int k = 0; k < STEPS; k++)
		fprintf(f, "\t\tx = step%d(x, &r);\n", k);
	fprintf(f, "\t\th = util_mix(h, x);\n\t}\n\treturn h ^ r.a;\n}\n\n");
	fprintf(f, "int mod%02" PRIu64 "_id(void)\n{\n\treturn %" PRIu64 ";\n}\n", m, m);
	close_file(f);
}

static void ph_genproject(void)
{
	FILE *f;
	make_dir("%s/proj", cfg.dir);
	make_dir("%s/proj/include", cfg.dir);
	make_dir("%s/proj/src", cfg.dir);

	f = create_file("%s/proj/include/common.h", cfg.dir);
	fprintf(f, "#ifndef COMMON_H\n#define COMMON_H\n#define COMMON_SEED 0x9E3779B97F4A7C15ull\n#endif\n");
	close_file(f);
	f = create_file("%s/proj/include/util.h", cfg.dir);
	fprintf(f, "#ifndef UTIL_H\n#define UTIL_H\n#include <stdint.h>\n"
		   "static inline uint32_t util_rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }\n"
		   "uint64_t util_mix(uint64_t h, uint32_t x);\n#endif\n");
	close_file(f);
	f = create_file("%s/proj/include/modules.h", cfg.dir);
	fprintf(f, "#ifndef MODULES_H\n#define MODULES_H\n#include <stdint.h>\n");
	for (uint64_t m = 0; m < cfg.modules; m++)
		fprintf(f, "uint64_t mod%02" PRIu64 "_run(uint32_t seed);\nint mod%02" PRIu64 "_id(void);\n", m, m);
	fprintf(f, "#endif\n");
	close_file(f);

	f = create_file("%s/proj/src/util.c", cfg.dir);
	fprintf(f, "#include \"util.h\"\nuint64_t util_mix(uint64_t h, uint32_t x)\n{\n"
		   "\th ^= x;\n\th *= 0x100000001B3ull;\n\treturn h ^ (h >> 29);\n}\n");
	close_file(f);
	for (uint64_t m = 0; m < cfg.modules; m++)
		gen_module(m);
	f = create_file("%s/proj/main.c", cfg.dir);
	fprintf(f, "#include <stdio.h>\n#include <inttypes.h>\n#include \"modules.h\"\n\nint main(void)\n{\n"
		   "\tuint64_t h = 0;\n\tint ids = 0;\n");
	for (uint64_t m = 0; m < cfg.modules; m++)
		fprintf(f, "\th ^= mod%02" PRIu64 "_run(%" PRIu64 "u);\n\tids += mod%02" PRIu64 "_id();\n", m, m, m);
	fprintf(f, "\tprintf(\"ids=%%d hash=%%016\" PRIx64 \"\\n\", ids, h);\n\treturn 0;\n}\n");
	close_file(f);

	f = create_file("%s/proj/Makefile", cfg.dir);
	fprintf(f, "# generated by fsbench genproject\n"
		   "CC = cc\nCFLAGS = -O2 -g -Wall -Iinclude\n"
		   "MODS = $(patsubst %%.c,%%.o,$(sort $(wildcard src/*.c)))\n"
		   "HDRS = $(wildcard include/*.h)\n\n"
		   "app: main.o libmods.a\n\t$(CC) -o $@ main.o libmods.a\n\n"
		   "libmods.a: $(MODS)\n\trm -f $@\n\tar rcs $@ $(MODS)\n\n"
		   "%%.o: %%.c $(HDRS)\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n"
		   "clean:\n\trm -f app main.o libmods.a $(MODS)\n");
	close_file(f);
	printf("genproject %" PRIu64 " files in %s/proj\n", cfg.modules + 6, cfg.dir);
}

/* Runs argv; dies unless it exits 0. */
static void run(char *const argv[])
{
	pid_t pid = fork();
	int st;
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "fsbench %s: %s: %s\n", phase, argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("%s failed (status %d)", argv[0], WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static uint64_t tree_entries;
static int count_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)p, (void)st, (void)flag, (void)ftw;
	tree_entries++;
	return 0;
}

static void ph_untar(void)
{
	char path[4096];
	if (!cfg.tarball)
		die("needs --tarball FILE");
	char *argv[] = {"tar", "-xf", (char *)cfg.tarball, "-C", (char *)cfg.dir, NULL};
	double t0 = now();
	run(argv);
	double t = now() - t0;
	snprintf(path, sizeof path, "%s/proj", cfg.dir);
	tree_entries = 0;
	if (nftw(path, count_entry, 16, FTW_PHYS) != 0)
		die("%s: %s", path, strerror(errno));
	report_ops("entries", tree_entries, t);
}

static void ph_build(void)
{
	char path[4096], jobs[32], line[256] = "";
	snprintf(path, sizeof path, "%s/proj", cfg.dir);
	snprintf(jobs, sizeof jobs, "-j%" PRIu64, cfg.jobs);
	char *argv[] = {"make", "-s", jobs, "-C", path, NULL};
	double t0 = now();
	run(argv);
	double t = now() - t0;
	/* The program must run and print what its modules say. */
	snprintf(path, sizeof path, "%s/proj/app", cfg.dir);
	FILE *p = popen(path, "r");
	if (!p || !fgets(line, sizeof line, p) || pclose(p) != 0)
		die("%s did not run", path);
	unsigned long long ids = 0;
	if (sscanf(line, "ids=%llu", &ids) != 1 || ids != cfg.modules * (cfg.modules - 1) / 2)
		die("%s printed '%s', expected ids=%" PRIu64, path, strtok(line, "\n"),
		    cfg.modules * (cfg.modules - 1) / 2);
	report_ops("objects", cfg.modules + 2, t);
}

/* ---------------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*fn)(void);
} phases[] = {
	{"create", ph_create},       {"stat", ph_stat},         {"readdir", ph_readdir},
	{"read", ph_read},           {"unlink", ph_unlink},     {"seqwrite", ph_seqwrite},
	{"seqread", ph_seqread},     {"randread", ph_randread}, {"randwrite", ph_randwrite},
	{"genproject", ph_genproject}, {"untar", ph_untar},     {"build", ph_build},
};
#define NPHASES (sizeof phases / sizeof phases[0])

static uint64_t parse_num(const char *opt, const char *s, int suffixes)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		goto bad;
	if (suffixes && *end) {
		int sh = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : *end == 'g' || *end == 'G' ? 30 : -1;
		if (sh < 0 || v > (~0ull >> sh))
			goto bad;
		v <<= sh;
		end++;
	}
	if (*end)
		goto bad;
	return v;
bad:
	fprintf(stderr, "fsbench: %s: bad value '%s'\n", opt, s);
	exit(2);
}

static int getxattr_cmd(const char *name, const char *path)
{
	char buf[65536];
	ssize_t n = getxattr(path, name, buf, sizeof buf);
	if (n < 0) {
		fprintf(stderr, "fsbench: %s: %s: %s\n", path, name, strerror(errno));
		return 1;
	}
	fwrite(buf, 1, (size_t)n, stdout);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"files", required_argument, NULL, 'n'}, {"dirs", required_argument, NULL, 'd'},
		{"file-size", required_argument, NULL, 'b'}, {"size", required_argument, NULL, 's'},
		{"ops", required_argument, NULL, 'o'}, {"seed", required_argument, NULL, 'r'},
		{"modules", required_argument, NULL, 'm'}, {"tarball", required_argument, NULL, 't'},
		{"jobs", required_argument, NULL, 'j'}, {"drop", no_argument, NULL, 'D'},
		{"getxattr", required_argument, NULL, 'x'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *xattr = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': cfg.files = parse_num("--files", optarg, 0); break;
		case 'd': cfg.dirs = parse_num("--dirs", optarg, 0); break;
		case 'b': cfg.file_size = parse_num("--file-size", optarg, 1); break;
		case 's': cfg.size = parse_num("--size", optarg, 1); break;
		case 'o': cfg.ops = parse_num("--ops", optarg, 0); break;
		case 'r': cfg.seed = parse_num("--seed", optarg, 0); break;
		case 'm': cfg.modules = parse_num("--modules", optarg, 0); break;
		case 't': cfg.tarball = optarg; break;
		case 'j': cfg.jobs = parse_num("--jobs", optarg, 0); break;
		case 'D': cfg.drop = 1; break;
		case 'x': xattr = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (xattr) {
		if (optind + 1 != argc) {
			fputs(usage, stderr);
			return 2;
		}
		return getxattr_cmd(xattr, argv[optind]);
	}
	if (optind + 2 > argc) {
		fputs(usage, stderr);
		return 2;
	}
	if (!cfg.dirs || cfg.dirs > 100 || !cfg.files || cfg.file_size < sizeof(uint64_t) || cfg.size < CHUNK ||
	    cfg.size % CHUNK || !cfg.modules || cfg.modules > 100 || !cfg.jobs) {
		fprintf(stderr, "fsbench: need 1-100 dirs, files >= 1, file size >= 8, size a multiple of 1 MiB, "
				"1-100 modules, jobs >= 1\n");
		return 2;
	}
	cfg.dir = argv[optind];
	for (int i = optind + 1; i < argc; i++) {
		size_t p = 0;
		while (p < NPHASES && strcmp(phases[p].name, argv[i]))
			p++;
		if (p == NPHASES) {
			fprintf(stderr, "fsbench: unknown phase '%s'\n", argv[i]);
			fputs(usage, stderr);
			return 2;
		}
	}
	for (int i = optind + 1; i < argc; i++) {
		size_t p = 0;
		while (strcmp(phases[p].name, argv[i]))
			p++;
		phase = phases[p].name;
		if (cfg.drop)
			drop_caches();
		phases[p].fn();
	}
	return 0;
}
