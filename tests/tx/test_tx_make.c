/*
 * test_tx_make -- `txrun -- make -j2` (test_tx_clients.c has the actors,
 * the helpers and the tests' description): the build commits at once and
 * durably, or a failed compile leaves the tree as before; txrun's exit
 * statuses.
 */
#include "txclients.h"

/* ---------------------------------------------------------------------- */
/* make in a transaction                                                  */

static void put(const char *rel, const char *text)
{
	cr_assert(spit(mp(rel), text) == 0, "write %s: %s", mp(rel), strerror(errno));
}

/* The tree of proj/ as a non-member sees it (file DIR/name). */
static void proj_snap(const char *name)
{
	STEP_OK("proj-snapshot", "cd proj\n{ find . -printf '%%y %%p %%s %%m %%T@ %%C@\\n' | LC_ALL=C sort\n"
				 "  find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum; } > \"$TXC_DIR/%s\"",
		name);
}

static void proj_same(const char *a, const char *b, const char *what)
{
	const char *d = diff_of(dp(a), dp(b));
	cr_assert(!strcmp(d, ""), "%s: the tree differs from before (a non-member's view):\n%s\n--- log ---\n%s", what, d,
		  log_tail());
}

Test(tx_clients, make, .timeout = 300)
{
	static const char *const progs[] = {"make", "gcc", "find", "sha256sum", NULL};
	double t0 = now_s();
	job j;
	int st;
	need(progs);
	start();
	STEP_OK("proj", "mkdir proj");
	put("proj/util.h", "#ifndef UTIL_H\n#define UTIL_H\nint add(int, int);\nint mul(int, int);\nlong fib(int);\n"
			   "int sq(int);\n#endif\n");
	put("proj/add.c", "#include \"util.h\"\nint add(int a, int b) { return a + b; }\n");
	put("proj/mul.c", "#include \"util.h\"\nint mul(int a, int b) { return a * b; }\n");
	put("proj/fib.c", "#include \"util.h\"\nlong fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n");
	put("proj/sq.c", "#include \"util.h\"\nint sq(int a) { return mul(a, a) BROKEN; }\n");
	put("proj/main.c", "#include <stdio.h>\n#include \"util.h\"\n"
			   "int main(void)\n{\n\tprintf(\"%d %d %ld %d\\n\", add(2, 3), mul(4, 5), fib(20), sq(7));\n"
			   "\treturn 0;\n}\n");
	put("proj/Makefile", "CFLAGS = -O2 -Wall -Werror\nOBJS = main.o add.o mul.o fib.o sq.o\n"
			     "app: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n"
			     "%.o: %.c util.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n"
			     "clean:\n\trm -f app *.o\n.PHONY: clean\n");
	cycle("after the set-up");
	proj_snap("p0.snap");

	/* 1. a compile fails (sq.c): make -k builds every other object, then
	 * txrun returns make's status, and nothing of it is there */
	progress_reset();
	bg(&j, "make-fails", "txrun -- make -k -j2 -C proj > \"$TXC_DIR/make1.out\" 2>&1 || echo \"txrun $?\" >> \"$P\"\n"
			     "grep -q 'sq.c' \"$TXC_DIR/make1.out\"\n");
	st = job_wait(&j, 120);
	char line[200] = "";
	progress_prefix("txrun ", line, sizeof line);
	cr_assert(st == 0 && !strcmp(line, "txrun 2"),
		  "txrun -- make with a failing compile: expected make's status 2 from txrun, got '%s' (script %d)\n"
		  "--- make output ---\n%s",
		  line[0] ? line : "txrun 0", st, tail_of(dp("make1.out"), 1500));
	cr_assert(strstr(tail_of(dp("make1.out"), 4000), "-o add.o"), "make -k did not build the other objects:\n%s",
		  tail_of(dp("make1.out"), 1500));
	proj_snap("p1.snap");
	proj_same("p0.snap", "p1.snap", "after txrun -- make whose compile of sq.c failed (the other objects were built)");

	/* 2. fixed: the build commits; a non-member sees nothing of it before
	 * txrun commits, everything after */
	put("proj/sq.c", "#include \"util.h\"\nint sq(int a) { return mul(a, a); }\n");
	proj_snap("p2.snap");
	progress_reset();
	bg(&j, "make-ok", "txrun -- sh -ec 'make -j2 -C proj > \"$TXC_DIR/make2.out\" 2>&1; test \"$(proj/app)\" = \"5 20 6765 49\"; "
			  "echo built >> \"$P\"; read x < \"$G\"'\necho \"txrun $?\" >> \"$P\"\n");
	cr_assert(wait_line(&j, "built", 120) == 1, "txrun -- make of a correct project did not build (a member runs "
						    "app)\n--- make output ---\n%s\n--- log ---\n%s",
		  tail_of(dp("make2.out"), 1500), log_tail());
	proj_snap("p3.snap");
	proj_same("p2.snap", "p3.snap", "after make in txrun, before its commit");
	release();
	st = job_wait(&j, 60);
	cr_assert(st == 0 && progress_has("txrun 0"), "txrun -- make: expected 0, the script %d\n--- log ---\n%s", st,
		  log_tail());
	STEP_OK("make-visible", "cd proj && for f in main add mul fib sq; do test -s $f.o; done && "
				"test \"$(./app)\" = '5 20 6765 49' && make -q");
	crash_and_recover("make: kill -9 of tpfsd after txrun committed the build");
	STEP_OK("make-durable", "cd proj && for f in main add mul fib sq; do test -s $f.o; done && "
				"test \"$(./app)\" = '5 20 6765 49' && make -q");
	cycle("make: after the crash");

	/* 3. make clean in a transaction that fails after it: still built */
	proj_snap("p4.snap");
	st = step("clean-fails", "r=0; txrun -- sh -c 'make -C proj clean && test ! -e proj/app && exit 5' || r=$?; "
				 "test $r = 5");
	cr_assert(st == 0, "txrun -- (make clean; exit 5): expected status 5\n--- log ---\n%s", log_tail());
	proj_snap("p5.snap");
	proj_same("p4.snap", "p5.snap", "after txrun of make clean and exit 5");

	/* 4. txrun's statuses */
	STEP_OK("txrun-status",
		"set +e\n"
		"txrun -- sh -c 'echo x > s1.txt; exit 7'; r=$?; test $r = 7 || { echo \"exit 7: txrun gave $r\"; exit 1; }\n"
		"test ! -e s1.txt || { echo 's1.txt of an aborted txrun is there'; exit 1; }\n"
		"txrun --retry 3 -- sh -c 'echo y > s2.txt'; r=$?; test $r = 0 || { echo \"--retry 3, exit 0: txrun gave $r\"; exit 1; }\n"
		"test \"$(cat s2.txt)\" = y || { echo 's2.txt of a committed txrun is missing'; exit 1; }\n"
		"txrun --retry 2 -- false; r=$?; test $r = 1 || { echo \"--retry 2 -- false: txrun gave $r\"; exit 1; }\n"
		"txrun -- sh -c 'echo z > s3.txt; kill -9 $$'; r=$?; echo \"txrun of a CMD killed by SIGKILL: $r\"\n"
		"test $r != 0 && test ! -e s3.txt || { echo \"killed CMD: txrun gave $r, s3.txt: $(cat s3.txt 2>&1)\"; exit 1; }\n"
		"txrun -- sh -c 'txrun -- true'; r=$?; echo \"txrun inside txrun: $r\"\n");

	/* 5. deadlock victims: two txruns write x and y in opposite orders;
	 * their CMDs ignore errors and exit 0, so the victim's txrun learns
	 * it from the commit: 1 without --retry, 0 with it */
	STEP_OK("dl-setup", "echo 0 > x && echo 0 > y");
	cycle("before the deadlocks");
	for (int retry = 0; retry < 2; retry++) {
		job a, b;
		const char *rt = retry ? "--retry 3 " : "";
		progress_reset();
		bg(&a, "deadlock-a", "txrun %s-- sh -c 'echo a >> \"$P\"; printf A > x; sleep 0.5; printf A > y 2>/dev/null; exit 0' || r=$?\n"
				     "echo \"A ${r:-0}\" >> \"$P\"\n", rt);
		bg(&b, "deadlock-b", "txrun %s-- sh -c 'echo b >> \"$P\"; printf B > y; sleep 0.5; printf B > x 2>/dev/null; exit 0' || r=$?\n"
				     "echo \"B ${r:-0}\" >> \"$P\"\n", rt);
		int sa = job_wait(&a, 60), sb = job_wait(&b, 60);
		char la[50] = "", lb[50] = "";
		progress_prefix("A ", la, sizeof la);
		progress_prefix("B ", lb, sizeof lb);
		STEP_OK("dl-state", "echo \"$(cat x) $(cat y)\" > \"$TXC_DIR/xy\"");
		char *xy = slurp(dp("xy"), NULL);
		cr_assert(sa == 0 && sb == 0 && xy, "deadlock round %d: scripts %d %d", retry, sa, sb);
		if (!retry)
			cr_assert((!strcmp(la, "A 0") && !strcmp(lb, "B 1") && !strcmp(xy, "A A\n")) ||
					  (!strcmp(la, "A 1") && !strcmp(lb, "B 0") && !strcmp(xy, "B B\n")),
				  "two txruns in a deadlock, no --retry: expected one to exit 0 and the victim 1 (its commit "
				  "refused), x and y both the winner's; got '%s', '%s', x y = %s\n--- log ---\n%s",
				  la, lb, xy, log_tail());
		else
			cr_assert(!strcmp(la, "A 0") && !strcmp(lb, "B 0") && (!strcmp(xy, "A A\n") || !strcmp(xy, "B B\n")),
				  "two txruns --retry 3 in a deadlock: expected both to exit 0 (the victim retried), x and y "
				  "the same writer's; got '%s', '%s', x y = %s\n--- log ---\n%s",
				  la, lb, xy, log_tail());
		printf("tx_clients make: deadlock %s: %s, %s, x y = %s", retry ? "with --retry 3" : "without --retry", la,
		       lb, xy);
		free(xy);
	}
	finish();
	printf("tx_clients make: a failed build left the tree as it was, a good one committed whole and durable, txrun "
	       "statuses as documented (%.1f s)\n",
	       now_s() - t0);
	fflush(stdout);
}
