/*
 * test_clients -- real programs no one here wrote, on a real tpfs mount:
 * tar, make + gcc (+ binutils), git, the sqlite3 shell, RCS.
 *
 * Each test makes a fresh store, mounts it (tfs_start), runs the program
 * through a shell whose working directory is the mount (tfs_sh) and checks
 * what it produced; then a clean unmount (tpfsd exits 0), `tpfs check`
 * clean, a second mount, and the same checks again on what persisted, and
 * a final clean unmount and check.  Output of the programs goes to
 * client.log in the test's temporary directory; a failure prints its end.
 *
 * A missing program, /dev/fuse, or tpfsd fails the test (never skips it):
 * scripts/setup installs them all.
 *
 * Environment: TPFSD, TPFS_BIN (set by meson), TPFS_SRC (the source tree,
 * for the tarball).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount_util.h"

#define OPTS NULL

static tfs_mount g_m;

static void fini(void)
{
	if (g_m.pid)
		tfs_kill9(&g_m);
}

TestSuite(clients, .fini = fini);

/* The end of client.log, for failure messages. */
static const char *log_tail(void)
{
	static char buf[3000];
	char p[512];
	snprintf(p, sizeof p, "%s/client.log", g_m.dir);
	buf[0] = 0;
	FILE *f = fopen(p, "r");
	if (!f)
		return "(no client.log)";
	if (fseek(f, 0, SEEK_END) == 0) {
		long end = ftell(f);
		fseek(f, end > (long)sizeof buf - 1 ? end - (long)sizeof buf + 1 : 0, SEEK_SET);
	}
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* Runs a shell script (set -e) in the mount, output to client.log; its
 * exit status. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char line[6000], head[64];
	size_t i;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	for (i = 0; i < sizeof head - 1 && line[i]; i++) /* for the log: no quotes */
		head[i] = line[i] == '\'' || line[i] == '\n' || line[i] == '\\' ? ' ' : line[i];
	head[i] = 0;
	return tfs_sh(&g_m, "( set -e; echo '+ %s'; %s ) >>'%s/client.log' 2>&1", head, line, g_m.dir);
}

/* Writes a file on the mount (path relative to it). */
static void put(const char *rel, const char *text)
{
	char p[700];
	snprintf(p, sizeof p, "%s/%s", g_m.mnt, rel);
	FILE *f = fopen(p, "w");
	cr_assert(f != NULL, "create %s: %s", p, strerror(errno));
	cr_assert(fputs(text, f) >= 0 && fclose(f) == 0, "write %s: %s", p, strerror(errno));
}

#define SH_OK(...)                                                                                                     \
	do {                                                                                                           \
		int st_ = sh(__VA_ARGS__);                                                                             \
		cr_assert(st_ == 0, "exit status %d of: %.300s\n--- %s/client.log (end; the store is kept) ---\n%s",   \
			  st_, #__VA_ARGS__, g_m.dir, log_tail());                                                      \
	} while (0)

static void need(const char *const *progs)
{
	for (; *progs; progs++) {
		char cmd[256];
		snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", *progs);
		cr_assert(system(cmd) == 0, "%s is not installed (scripts/setup installs it): the clients suite needs it",
			  *progs);
	}
}

static void start(void)
{
	cr_assert(tfs_start(&g_m, NULL, OPTS) == 0, "cannot make and mount a store (TPFSD, TPFS_BIN, /dev/fuse?)");
}

/* Clean unmount, `tpfs check`, and (again != 0) a new mount. */
static void cycle(int again)
{
	int st = tfs_stop(&g_m);
	cr_assert(st == 0, "tpfsd did not exit cleanly at unmount (status %d)", st);
	st = tfs_check(&g_m);
	cr_assert(st == 0, "tpfs check of the store after the client ran: status %d", st);
	if (again)
		cr_assert(tfs_remount(&g_m, OPTS) == 0, "cannot mount the store again");
}

static void finish(void)
{
	cycle(0);
	tfs_cleanup(&g_m);
}

/* ---------------------------------------------------------------------- */

/* A real source tree, packed at test time on the host's file system,
 * unpacked on the mount, every file's SHA-256 compared with the host's
 * (and sizes, modes, mtimes, symbolic links, directories, a hard link, a
 * sparse file); packed again from the mount and compared; all again after
 * a remount; then removed. */
Test(clients, tar, .timeout = 240)
{
	static const char *const progs[] = {"tar", "gzip", "sha256sum", "find", "sort", "cmp", NULL};
	const char *src = getenv("TPFS_SRC");
	need(progs);
	cr_assert(src && access(src, R_OK) == 0, "TPFS_SRC is not set to the source tree (got %s)", src ? src : "nothing");
	start();
	/* The tree: this repository's sources and /usr/include (thousands of
	 * files of 0 B..100s of KiB, deep directories), with symbolic links, a
	 * hard link and a sparse file of 9 MB added. */
	SH_OK("mkdir '%s/host' && cd '%s/host' && mkdir tpfs && cp -a '%s/core' '%s/fsd' '%s/tools' '%s/tests' tpfs/ "
	      "&& cp -a /usr/include inc && ln -s ../tpfs/core inc/link-to-core && ln -s /nonexistent/target inc/dangling "
	      "&& ln tpfs/core/meson.build tpfs/hardlink.build && printf '' > tpfs/empty && "
	      "head -c 3000000 /dev/urandom > tpfs/big.bin && truncate -s 9000000 tpfs/big.bin",
	      g_m.dir, g_m.dir, src, src, src, src);
	SH_OK("cd '%s/host' && tar czf ../tree.tgz tpfs inc", g_m.dir);
	SH_OK("cd '%s/host' && find . -type f -print0 | sort -z | xargs -0 sha256sum > ../host.sums && "
	      "find . \\( -type d -o -type l \\) -printf '%%y %%p %%l %%m\\n' | sort > ../host.tree && "
	      "find . -type f -printf '%%p %%s %%m %%TY-%%Tm-%%Td %%TH:%%TM\\n' | sort > ../host.sizes",
	      g_m.dir);
	SH_OK("mkdir src && tar xzf '%s/tree.tgz' -C src", g_m.dir);
	for (int pass = 0; pass < 2; pass++) {
		SH_OK("cd src && find . -type f -print0 | sort -z | xargs -0 sha256sum > '%s/mnt.sums' && "
		      "cmp '%s/host.sums' '%s/mnt.sums'",
		      g_m.dir, g_m.dir, g_m.dir);
		SH_OK("cd src && test \"$(stat -c %%i tpfs/hardlink.build)\" = \"$(stat -c %%i tpfs/core/meson.build)\" && "
		      "test \"$(stat -c %%h tpfs/hardlink.build)\" = 2 && test -e inc/link-to-core/meson.build");
		SH_OK("cd src && find . \\( -type d -o -type l \\) -printf '%%y %%p %%l %%m\\n' | sort > '%s/mnt.tree' && "
		      "cmp '%s/host.tree' '%s/mnt.tree' && find . -type f -printf '%%p %%s %%m %%TY-%%Tm-%%Td %%TH:%%TM\\n' | sort > '%s/mnt.sizes' "
		      "&& cmp '%s/host.sizes' '%s/mnt.sizes'",
		      g_m.dir, g_m.dir, g_m.dir, g_m.dir, g_m.dir, g_m.dir);
		if (pass == 0) {
			/* pack it again from the mount: the same bytes come out */
			SH_OK("tar cf '%s/again.tar' -C src . && mkdir '%s/again' && tar xf '%s/again.tar' -C '%s/again' && "
			      "cd '%s/again' && find . -type f -print0 | sort -z | xargs -0 sha256sum | cmp - '%s/host.sums'",
			      g_m.dir, g_m.dir, g_m.dir, g_m.dir, g_m.dir, g_m.dir);
			cycle(1);
		}
	}
	/* and remove it all */
	SH_OK("rm -rf src && test -z \"$(ls -A)\"");
	tfs_sh(&g_m, "printf 'clients tar: %%s files, %%s symbolic links, %%s directories, %%s bytes compared\\n' "
		     "$(wc -l < '%s/host.sums') $(grep -c '^l' '%s/host.tree') $(grep -c '^d' '%s/host.tree') "
		     "$(du -sb --apparent-size '%s/host' | cut -f1)",
	       g_m.dir, g_m.dir, g_m.dir, g_m.dir);
	finish();
}

/* A small C project: make -j2, run, make clean, rebuild, an incremental
 * rebuild after a header changes, a static library with ar, nm. */
Test(clients, make_gcc, .timeout = 180)
{
	static const char *const progs[] = {"make", "gcc", "ar", "nm", NULL};
	need(progs);
	start();
	SH_OK("mkdir proj");
	put("proj/util.h", "#ifndef UTIL_H\n#define UTIL_H\n#define SCALE 3\nint add(int, int);\nint mul(int, int);\n"
			   "long fib(int);\n#endif\n");
	put("proj/add.c", "#include \"util.h\"\nint add(int a, int b) { return a + b; }\n");
	put("proj/mul.c", "#include \"util.h\"\nint mul(int a, int b) { return a * b * SCALE / SCALE; }\n");
	put("proj/fib.c", "#include \"util.h\"\nlong fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n");
	put("proj/main.c", "#include <stdio.h>\n#include \"util.h\"\n"
			   "int main(void)\n{\n\tprintf(\"%d %d %ld %d\\n\", add(2, 3), mul(4, 5), fib(20), SCALE);\n"
			   "\treturn 0;\n}\n");
	put("proj/Makefile", "CFLAGS = -O2 -Wall -Werror\nOBJS = add.o mul.o fib.o\n"
			     "app: main.o libutil.a\n\t$(CC) -o $@ main.o -L. -lutil\n"
			     "libutil.a: $(OBJS)\n\tar rcs $@ $(OBJS)\n"
			     "%.o: %.c util.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n"
			     "clean:\n\trm -f app *.o libutil.a\n.PHONY: clean\n");
	SH_OK("cd proj && make -j2 && test \"$(./app)\" = '5 20 6765 3'");
	SH_OK("cd proj && nm libutil.a | grep -q ' T fib' && nm app | grep -q ' T main'");
	SH_OK("cd proj && make clean && test ! -e app && test ! -e add.o && make -j2 && test \"$(./app)\" = '5 20 6765 3'");
	SH_OK("cd proj && test \"$(make -q; echo $?)\" = 0"); /* up to date */
	SH_OK("cd proj && sleep 1.1 && sed -i 's/SCALE 3/SCALE 7/' util.h && make -j2 && "
	      "test \"$(./app)\" = '5 20 6765 7'");
	cycle(1);
	SH_OK("cd proj && test \"$(./app)\" = '5 20 6765 7' && test \"$(make -q; echo $?)\" = 0 && "
	      "nm app | grep -q ' T add'");
	SH_OK("cd proj && make clean && make -j2 && test \"$(./app)\" = '5 20 6765 7'");
	finish();
}

/* git: init, several commits, a branch and a merge, log, status, fsck, gc
 * (which packs: renames, many small files); all again after a remount. */
Test(clients, git, .timeout = 180)
{
	static const char *const progs[] = {"git", NULL};
	need(progs);
	start();
	SH_OK("export HOME='%s' GIT_CONFIG_NOSYSTEM=1 && git config --global user.name tpfs && "
	      "git config --global user.email tpfs@example.org && git config --global init.defaultBranch main && "
	      "git config --global safe.directory '*'",
	      g_m.dir);
	SH_OK("export HOME='%s' && mkdir repo && cd repo && git init -q && "
	      "for i in 1 2 3 4 5 6; do seq 1 $((i * 100)) > file$i.txt; mkdir -p dir$i; echo $i > dir$i/x; "
	      "git add -A; git commit -q -m \"commit $i\"; done && "
	      "git checkout -q -b side && echo side >> file1.txt && git commit -q -am side && "
	      "git checkout -q main && echo main >> file2.txt && git commit -q -am main2 && "
	      "git merge -q --no-edit side && git rm -q file3.txt && git mv file4.txt moved.txt && "
	      "git commit -q -m 'rm and mv'",
	      g_m.dir);
	for (int pass = 0; pass < 2; pass++) {
		SH_OK("export HOME='%s' && cd repo && test \"$(git log --oneline | wc -l)\" = 10 && "
		      "test -z \"$(git status --porcelain)\" && git fsck --full --strict && "
		      "test \"$(git show HEAD~1:file1.txt | tail -1)\" = side && test \"$(tail -1 file2.txt)\" = main && "
		      "test ! -e file3.txt && test \"$(wc -l < moved.txt)\" = 400 && "
		      "git diff --quiet HEAD~3 HEAD -- file5.txt",
		      g_m.dir);
		if (pass == 0) {
			SH_OK("export HOME='%s' && cd repo && git gc -q && git fsck --full && "
			      "test \"$(git count-objects -v | sed -n 's/^count: //p')\" = 0",
			      g_m.dir);
			cycle(1);
		}
	}
	SH_OK("export HOME='%s' && git clone -q repo clone && cd clone && test \"$(git log --oneline | wc -l)\" = 10",
	      g_m.dir);
	finish();
}

/* sqlite3's shell: a database with a transaction of many inserts, queries,
 * integrity_check; a second database in WAL mode (shared memory through a
 * mapped -shm file on the mount); both again after a remount. */
Test(clients, sqlite3, .timeout = 180)
{
	static const char *const progs[] = {"sqlite3", NULL};
	need(progs);
	start();
	SH_OK("sqlite3 rollback.db \"CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v INTEGER); BEGIN; "
	      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) "
	      "INSERT INTO t(name, v) SELECT printf('name-%%06d', x), x * 7 FROM c; COMMIT; "
	      "CREATE INDEX t_name ON t(name); BEGIN; UPDATE t SET v = v + 1 WHERE id %% 2 = 0; "
	      "DELETE FROM t WHERE id %% 10 = 0; COMMIT; BEGIN; DELETE FROM t; ROLLBACK;\"");
	{ /* a script of 2000 single inserts in one transaction */
		static char sql[2000 * 64 + 64];
		size_t len = (size_t)snprintf(sql, sizeof sql, "BEGIN;\n");
		for (int i = 1; i <= 2000; i++)
			len += (size_t)snprintf(sql + len, sizeof sql - len, "INSERT INTO t(name, v) VALUES('extra-%d', %d);\n", i, i);
		snprintf(sql + len, sizeof sql - len, "COMMIT;\n");
		put("ins.sql", sql);
	}
	SH_OK("sqlite3 rollback.db < ins.sql");
	SH_OK("sqlite3 wal.db 'PRAGMA journal_mode=WAL;' | grep -qx wal && "
	      "sqlite3 wal.db \"CREATE TABLE w(k INTEGER PRIMARY KEY, b BLOB); BEGIN; "
	      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000) "
	      "INSERT INTO w SELECT x, randomblob(200) FROM c; COMMIT; DELETE FROM w WHERE k > 4000;\" && "
	      "test \"$(sqlite3 wal.db 'SELECT count(*) FROM w;')\" = 4000 && "
	      "sqlite3 wal.db 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null");
	for (int pass = 0; pass < 2; pass++) {
		SH_OK("test \"$(sqlite3 rollback.db 'PRAGMA integrity_check;')\" = ok && "
		      "test \"$(sqlite3 rollback.db 'SELECT count(*), sum(v) FROM t;')\" = '20000|1262009000' && "
		      "test \"$(sqlite3 rollback.db \"SELECT v FROM t WHERE name = 'name-000012';\")\" = 85 && "
		      "test \"$(sqlite3 wal.db 'PRAGMA integrity_check;')\" = ok && "
		      "test \"$(sqlite3 wal.db 'PRAGMA journal_mode;')\" = wal && "
		      "test \"$(sqlite3 wal.db 'SELECT count(*), sum(length(b)) FROM w;')\" = '4000|800000'");
		if (pass == 0)
			cycle(1);
	}
	/* after the remount: more in WAL mode, with readers */
	SH_OK("sqlite3 wal.db \"BEGIN; INSERT INTO w SELECT k + 10000, b FROM w; COMMIT;\" && "
	      "test \"$(sqlite3 wal.db 'SELECT count(*) FROM w;')\" = 8000 && "
	      "sqlite3 wal.db 'PRAGMA wal_checkpoint(FULL); PRAGMA integrity_check;' | tail -1 | grep -qx ok");
	finish();
}

/* RCS: 20 files, each checked in with 5 revisions, then checked out by
 * revision and compared, rlog counted; all again after a remount. */
Test(clients, rcs, .timeout = 180)
{
	static const char *const progs[] = {"ci", "co", "rlog", "rcsdiff", NULL};
	need(progs);
	start();
	SH_OK("mkdir -p work/RCS && cd work && for f in $(seq -w 1 20); do "
	      "echo \"file $f revision 1\" > f$f.txt; ci -q -u -t-'file '$f -m'revision 1' f$f.txt; done");
	SH_OK("cd work && for r in 2 3 4 5; do for f in $(seq -w 1 20); do co -q -l f$f.txt; "
	      "echo \"file $f revision $r\" >> f$f.txt; ci -q -u -m\"revision $r\" f$f.txt; done; done");
	for (int pass = 0; pass < 2; pass++) {
		SH_OK("cd work && test \"$(ls RCS | wc -l)\" = 20 && for f in $(seq -w 1 20); do "
		      "test \"$(rlog f$f.txt | grep -c '^revision 1\\.')\" = 5; "
		      "test \"$(rlog -h f$f.txt | sed -n 's/^head: //p')\" = 1.5; "
		      "test \"$(co -q -p -r1.3 f$f.txt | wc -l)\" = 3; "
		      "test \"$(co -q -p -r1.3 f$f.txt | tail -1)\" = \"file $f revision 3\"; "
		      "test \"$(tail -1 f$f.txt)\" = \"file $f revision 5\"; "
		      "rcsdiff -q f$f.txt; test \"$(stat -c %%a f$f.txt)\" = 444; done");
		if (pass == 0)
			cycle(1);
	}
	SH_OK("cd work && rm -f f*.txt && co -q RCS/*,v && test \"$(cat f*.txt | wc -l)\" = 100");
	finish();
}
