/*
 * test_tx_orewrite -- an assembler rewriting a .o in place while nm reads
 * it (test_tx_clients.c has the actors, the helpers and the tests'
 * description), and isolation_repro: the leaks these tests ran into, one at
 * a time.
 */
#include "txclients.h"

/* ---------------------------------------------------------------------- */
/* An assembler rewriting a .o in place while nm reads it                 */

/* test_tx_clients --helper rewrite SRC DST PIECE USLEEP: writes SRC over
 * DST as an assembler or linker does: open without O_TRUNC, ftruncate to
 * 0, a placeholder for the ELF header, the rest in PIECE-byte writes with
 * USLEEP microseconds between them, then the header last. */
static int helper_rewrite(int argc, char **argv)
{
	size_t len;
	if (argc != 4) {
		fprintf(stderr, "usage: --helper rewrite SRC DST PIECE USLEEP\n");
		return 2;
	}
	char *data = slurp(argv[0], &len);
	size_t piece = (size_t)atol(argv[2]), hdr = len < 64 ? len : 64;
	long us = atol(argv[3]);
	static const char zero[64];
	if (!data || !piece) {
		fprintf(stderr, "rewrite: cannot read %s\n", argv[0]);
		return 1;
	}
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, 0) != 0 || write(fd, zero, hdr) != (ssize_t)hdr) {
		fprintf(stderr, "rewrite: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	for (size_t off = hdr; off < len; off += piece) {
		size_t n = len - off < piece ? len - off : piece;
		if (write(fd, data + off, n) != (ssize_t)n) {
			fprintf(stderr, "rewrite: write %s at %zu: %s\n", argv[1], off, strerror(errno));
			return 1;
		}
		usleep_(us);
	}
	if (pwrite(fd, data, hdr, 0) != (ssize_t)hdr || close(fd) != 0) {
		fprintf(stderr, "rewrite: header of %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	free(data);
	return 0;
}

/* --helper ftrunc PATH TEXT: open without O_TRUNC, ftruncate 0, write TEXT. */
static int helper_ftrunc(int argc, char **argv)
{
	int fd = argc == 2 ? open(argv[0], O_WRONLY | O_CLOEXEC) : -1;
	size_t n = argc == 2 ? strlen(argv[1]) : 0;
	if (fd < 0 || ftruncate(fd, 0) != 0 || write(fd, argv[1], n) != (ssize_t)n || close(fd) != 0) {
		fprintf(stderr, "ftrunc: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}

/* --helper mapread PATH N: the first N bytes of PATH through a private
 * read-only mapping, on stdout. */
static int helper_mapread(int argc, char **argv)
{
	int fd = argc == 2 ? open(argv[0], O_RDONLY | O_CLOEXEC) : -1;
	size_t n = argc == 2 ? (size_t)atol(argv[1]) : 0;
	if (fd < 0 || !n)
		return 1;
	char *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "mapread: mmap: %s\n", strerror(errno));
		return 1;
	}
	return fwrite(p, 1, n, stdout) == n ? 0 : 1;
}

/* test_tx_clients --helper REQUEST ...: rewrite, ftrunc or mapread. */
int helper(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "rewrite"))
		return helper_rewrite(argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "ftrunc"))
		return helper_ftrunc(argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "mapread"))
		return helper_mapread(argc - 1, argv + 1);
	fprintf(stderr, "test_tx_clients --helper: unknown request %s\n", argc ? argv[0] : "(none)");
	return 2;
}

/* Two objects with different symbol tables, built on the host: old.o
 * (a1..a200) and new.o (b1..b300), each function with a 1 KiB table, so
 * 270 and 410 KB; their nm output in old.nm and new.nm. */
static void make_objects(void)
{
	char p[600];
	cr_assert(mkdir(dp("obj"), 0755) == 0, "mkdir obj: %s", strerror(errno));
	for (int v = 0; v < 2; v++) {
		snprintf(p, sizeof p, "%s/obj/%s.c", g_m.dir, v ? "new" : "old");
		FILE *f = fopen(p, "we");
		cr_assert(f, "cannot write %s", p);
		int n = v ? 300 : 200;
		for (int i = 1; i <= n; i++) {
			fprintf(f, "int %c%d(int x)\n{\n\tstatic const int t[256] = {", v ? 'b' : 'a', i);
			for (int k = 0; k < 256; k++)
				fprintf(f, "%d,", (i * k + n) % 997);
			fprintf(f, "};\n\treturn t[x & 255] * %d;\n}\n", i);
		}
		cr_assert(fclose(f) == 0, "cannot write %s", p);
	}
	STEP_OK("objects", "cd \"$TXC_DIR/obj\" && for v in old new; do gcc -O0 -g -c -o $v.o $v.c && nm $v.o > $v.nm; done\n"
			   "test \"$(wc -l < old.nm)\" -ge 200 && test \"$(wc -l < new.nm)\" -ge 300 && ! cmp -s old.nm new.nm");
}

typedef struct nm_reader {
	pid_t pid;
	int *stop; /* shared */
} nm_reader;

/* The non-member: nm target.o in a loop until *stop; each run as a line
 * "START END CLASS STATUS" in DIR/nm.runs (CLASS O: exactly old.nm, N:
 * exactly new.nm, X: anything else, its output kept in nm-bad-K.txt). */
static void nm_loop(int *stop)
{
	size_t lo, ln;
	char *old_nm = slurp(dp("obj/old.nm"), &lo), *new_nm = slurp(dp("obj/new.nm"), &ln);
	FILE *runs = fopen(dp("nm.runs"), "we");
	if (!old_nm || !new_nm || !runs || chdir(g_m.mnt) != 0)
		_exit(3);
	static char out[1 << 20];
	for (int k = 0; !__atomic_load_n(stop, __ATOMIC_ACQUIRE); k++) {
		int pfd[2];
		if (pipe(pfd) != 0)
			_exit(3);
		double t0 = wall_s();
		pid_t pid = fork();
		if (pid == 0) {
			dup2(pfd[1], 1);
			dup2(pfd[1], 2);
			close(pfd[0]);
			close(pfd[1]);
			execlp("nm", "nm", "target.o", (char *)NULL);
			_exit(127);
		}
		close(pfd[1]);
		size_t n = 0;
		ssize_t r;
		while ((r = read(pfd[0], out + n, sizeof out - 1 - n)) > 0)
			n += (size_t)r;
		close(pfd[0]);
		int st;
		waitpid(pid, &st, 0);
		double t1 = wall_s();
		out[n] = 0;
		char cls = 'X';
		if (wstatus(st) == 0 && n == lo && !memcmp(out, old_nm, n))
			cls = 'O';
		else if (wstatus(st) == 0 && n == ln && !memcmp(out, new_nm, n))
			cls = 'N';
		else {
			char bad[600];
			snprintf(bad, sizeof bad, "%s/nm-bad-%d.txt", g_m.dir, k);
			spit(bad, out);
		}
		fprintf(runs, "%.6f %.6f %c %d %d\n", t0, t1, cls, wstatus(st), k);
		fflush(runs);
	}
	fclose(runs);
	_exit(0);
}

static void nm_start(nm_reader *r)
{
	r->stop = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(r->stop != MAP_FAILED, "mmap: %s", strerror(errno));
	*r->stop = 0;
	fflush(NULL);
	r->pid = fork();
	cr_assert(r->pid >= 0, "fork: %s", strerror(errno));
	if (r->pid == 0)
		nm_loop(r->stop);
	kid_add(r->pid);
}

static void nm_stop(nm_reader *r)
{
	int st;
	__atomic_store_n(r->stop, 1, __ATOMIC_RELEASE);
	waitpid(r->pid, &st, 0);
	kid_del(r->pid);
	munmap(r->stop, sizeof(int));
	cr_assert(wstatus(st) == 0, "the nm reader failed to start (status %d)", wstatus(st));
}

typedef struct owin {
	double cs, ce; /* txcommit began, returned (CLOCK_REALTIME) */
	char after;    /* the committed state after it: 'O' or 'N' */
} owin;

/* A sequence of transactions each rewriting target.o `rewrites` times,
 * alternately with the other object and its own (ending with the other),
 * committed or aborted in turn, with nm running all along. */
static void orewrite_test(int member_nm)
{
	static const char *const progs[] = {"nm", "gcc", "cmp", "date", NULL};
	unsigned rounds = (unsigned)env_u64("TP_TXO_ROUNDS", 5), rewrites = (unsigned)env_u64("TP_TXO_REWRITES", 5);
	owin w[64];
	int nw = 0;
	char committed = 'O';
	nm_reader rd;
	double t0 = now_s();
	unsigned n_commit = 0, n_abort = 0;
	static char member_bad[1200], nonmember_bad[3000];
	member_bad[0] = nonmember_bad[0] = 0;
	if (rounds > 60)
		rounds = 60;
	need(progs);
	start();
	make_objects();
	STEP_OK("o-initial", "cp \"$TXC_DIR/obj/old.o\" target.o && cmp target.o \"$TXC_DIR/obj/old.o\"");
	cycle("after the set-up");
	nm_start(&rd);
	msleep(300); /* a few runs on the committed state, caches warm */
	for (unsigned r = 0; r < rounds; r++) {
		int commit = r % 2 == 0;
		char to = committed == 'O' ? 'N' : 'O';
		const char *tos = to == 'O' ? "old" : "new", *froms = to == 'O' ? "new" : "old";
		job j;
		char line[200];
		progress_reset();
		bg(&j, "o-rewrite",
		   "txbegin\n"
		   "i=1\nwhile [ $i -le %u ]; do\n"
		   "  if [ $(( (%u - i) %% 2 )) = 0 ]; then v=%s; else v=%s; fi\n"
		   "  \"$TX_SELF\" --helper rewrite \"$TXC_DIR/obj/$v.o\" target.o 4096 300\n"
		   "  cmp -s target.o \"$TXC_DIR/obj/$v.o\" || echo \"member-reads-other $i $v\" >> \"$P\"\n"
		   "%s"
		   "  echo \"rewrite $i $v\" >> \"$P\"; i=$((i + 1))\n"
		   "done\n"
		   "echo \"end-start $(date +%%s.%%N)\" >> \"$P\"\n"
		   "%s\n"
		   "echo \"end-done $(date +%%s.%%N)\" >> \"$P\"\n",
		   rewrites, rewrites, tos, froms,
		   member_nm ? "  nm target.o > \"$TXC_DIR/member.nm\" 2>&1 || true\n"
			       "  cmp -s \"$TXC_DIR/member.nm\" \"$TXC_DIR/obj/$v.nm\" || "
			       "{ echo \"member-nm-other $i $v\" >> \"$P\"; cp \"$TXC_DIR/member.nm\" \"$TXC_DIR/member-nm-bad.txt\"; }\n"
				     : "",
		   commit ? "txcommit" : "txabort");
		int st = job_wait(&j, 120);
		if (progress_prefix("member-reads-other", line, sizeof line)) {
			nm_stop(&rd);
			cr_assert_fail("round %u: a member's read() of target.o after its own rewrite differs from what it "
				       "wrote (%s): a member must see its own writes",
				       r, line);
		}
		if (progress_prefix("member-nm-other", line, sizeof line) && !member_bad[0]) {
			char *t = slurp(dp("member-nm-bad.txt"), NULL);
			snprintf(member_bad, sizeof member_bad,
				 "round %u (%s): a member's nm (BFD maps the file MAP_PRIVATE) right after its own rewrite "
				 "does not show what it wrote ('%s'); its output:\n%.600s",
				 r, commit ? "committed" : "aborted", line, t ? t : "?");
			free(t);
		}
		if (st != 0)
			nm_stop(&rd);
		cr_assert(st == 0, "round %u: the member shell exited %d (expected 0 after %s)\n--- log ---\n%s", r, st,
			  commit ? "txcommit" : "txabort", log_tail());
		{ /* every round's progress, for a look after a failure */
			char *t = slurp(dp("progress"), NULL);
			FILE *f = fopen(dp("rounds.log"), "ae");
			if (f && t)
				fprintf(f, "round %u (%s, target %s)\n%s", r, commit ? "txcommit" : "txabort", tos, t);
			if (f)
				fclose(f);
			free(t);
		}
		if (commit) {
			char a[100], b[100];
			cr_assert(progress_prefix("end-start ", a, sizeof a) && progress_prefix("end-done ", b, sizeof b));
			w[nw].cs = atof(a + 10);
			w[nw].ce = atof(b + 9);
			w[nw].after = to;
			nw++;
			committed = to;
			n_commit++;
		} else {
			n_abort++;
		}
		msleep(150); /* runs after the end */
	}
	nm_stop(&rd);

	/* every run: exactly the old or the new table, the committed one */
	size_t len;
	char *runs = slurp(dp("nm.runs"), &len);
	cr_assert(runs, "no nm.runs");
	unsigned total = 0, strict = 0, n_old = 0, n_new = 0, n_bad = 0, n_wrong = 0, n_bad_overlap = 0;
	double longest = 0;
	for (char *p = runs, *save = NULL, *ln_; (ln_ = strtok_r(p, "\n", &save)) != NULL; p = NULL) {
		double s, e;
		char cls;
		int st, k;
		cr_assert(sscanf(ln_, "%lf %lf %c %d %d", &s, &e, &cls, &st, &k) == 5, "bad line in nm.runs: %s", ln_);
		total++;
		if (e - s > longest)
			longest = e - s;
		int lo = 0, hi = 0;
		for (int i = 0; i < nw; i++) {
			lo += w[i].ce < s;
			hi += w[i].cs <= e;
		}
		if (cls == 'X') {
			char bad[100], when[300] = "no commit ran during it";
			snprintf(bad, sizeof bad, "nm-bad-%d.txt", k);
			n_bad++;
			n_bad_overlap += lo != hi;
			if (lo != hi)
				snprintf(when, sizeof when,
					 "it overlapped the commit that changed target.o from the %s to the %s object "
					 "(nm ran from %.3f to %.3f s, txcommit from %.3f to %.3f s, relative to the nm start)",
					 w[lo].after == 'O' ? "new" : "old", w[lo].after == 'O' ? "old" : "new", 0.0, e - s,
					 w[lo].cs - s, w[lo].ce - s);
			if (!nonmember_bad[0])
				snprintf(nonmember_bad, sizeof nonmember_bad,
					 "nm run %d (a non-member) exited %d%s and printed neither the complete old nor the "
					 "complete new symbol table; %s; its output (%s):\n%.800s",
					 k, st, st == 128 + SIGBUS ? " (SIGBUS)" : "", when, dp(bad), tail_of(dp(bad), 800));
			continue;
		}
		/* the states from S_lo to S_hi were possible during the run */
		int ok = 0;
		for (int i = lo; i <= hi; i++) {
			char want = i == 0 ? 'O' : w[i - 1].after;
			ok |= want == cls;
		}
		strict += lo == hi;
		n_old += cls == 'O';
		n_new += cls == 'N';
		if (!ok) {
			n_wrong++;
			if (!nonmember_bad[0])
				snprintf(nonmember_bad, sizeof nonmember_bad,
					 "nm run %d (a non-member) printed the complete %s table, but the committed object "
					 "was the %s one for the whole run (%d commits before it, %d by its end): a "
					 "non-member saw an uncommitted rewrite (or missed a committed one)",
					 k, cls == 'O' ? "old" : "new",
					 (lo == 0 ? 'O' : w[lo - 1].after) == 'O' ? "old" : "new", lo, hi);
		}
	}
	free(runs);
	cr_assert(!nonmember_bad[0] && !member_bad[0],
		  "%u of %u nm runs by a non-member printed neither table (%u of them overlapped a commit), %u printed a "
		  "table not committed at the time%s.\nFirst non-member failure: %s\nFirst member failure: %s\n(store, nm.runs and nm-bad-*.txt kept "
		  "in %s)",
		  n_bad, total, n_bad_overlap, n_wrong, member_nm ? "; the member ran nm (a MAP_PRIVATE mapping) after each rewrite" : "",
		  nonmember_bad[0] ? nonmember_bad : "none", member_bad[0] ? member_bad : "none", g_m.dir);
	cr_assert(total >= 20, "only %u nm runs happened (expected dozens)", total);
	cr_assert(longest < 5.0, "an nm run by a non-member took %.2f s: it waited for the transaction", longest);

	/* then kill -9 of the daemon in the middle of a rewrite: the committed
	 * object after recovery */
	{
		job j;
		char want[600];
		progress_reset();
		bg(&j, "o-rewrite-crash",
		   "txbegin\necho begun >> \"$P\"\n"
		   "while :; do \"$TX_SELF\" --helper rewrite \"$TXC_DIR/obj/%s.o\" target.o 4096 300; "
		   "echo rewrote >> \"$P\"; done\n",
		   committed == 'O' ? "new" : "old");
		cr_assert(wait_line(&j, "rewrote", 60) == 1, "the crash round's member did not rewrite\n%s", log_tail());
		msleep(20);
		crash_and_recover("orewrite: kill -9 of tpfsd during a rewrite");
		kill(-j.pid, SIGKILL);
		job_wait(&j, 10);
		snprintf(want, sizeof want, "%s/obj/%s.o", g_m.dir, committed == 'O' ? "old" : "new");
		STEP_OK("o-after-crash", "cmp target.o '%s' && nm target.o | cmp - '%s/obj/%s.nm'", want, g_m.dir,
			committed == 'O' ? "old" : "new");
		cycle("orewrite: after the crash");
		STEP_OK("o-after-cycle", "cmp target.o '%s'", want);
	}
	finish();
	printf("tx_clients orewrite%s: %u transactions (%u committed, %u aborted) of %u rewrites each, + 1 killed by a "
	       "daemon crash; %u nm runs by a non-member (%u old, %u new; %u wholly inside one committed state), every "
	       "one complete and committed; longest nm %.3f s (%.1f s)\n",
	       member_nm ? " (member runs nm too)" : "", rounds, n_commit, n_abort, rewrites, total, n_old, n_new, strict, longest, now_s() - t0);
	fflush(stdout);
}

/* The scenario: the member only writes (and checks with read()). */
Test(tx_clients, orewrite, .timeout = 300) { orewrite_test(0); }

/* The member also runs nm on its own output after each rewrite: BFD maps
 * the object MAP_PRIVATE, through the page cache the kernel shares with
 * the non-member's nm (fsd/DESIGN.md, "mmap": a member's MAP_PRIVATE
 * mapping "reads the transaction's view"). */
Test(tx_clients, orewrite_member_nm, .timeout = 300) { orewrite_test(1); }

/* ---------------------------------------------------------------------- */
/* The isolation leaks the tests above run into, one at a time            */

/* Small reproductions (each one's count is printed):
 *   1. a member truncates and rewrites t.txt (O_TRUNC opens and
 *      ftruncate, 20 times, then txabort) while a non-member reads it in a
 *      loop, through a descriptor kept open and through fresh opens: it
 *      must read "T0\n" every time (random_crash's readers, nm's "file
 *      format not recognized" in orewrite);
 *   2. a non-member maps a committed 20000-byte file; a member truncates it
 *      to 0 and writes 100 bytes (uncommitted); the non-member touches page
 *      3 of its mapping: it must read the committed bytes, not die of
 *      SIGBUS (nm's SIGBUS in orewrite);
 *   3. a member writes m.txt and maps it MAP_PRIVATE (as nm does); a
 *      non-member then reads m.txt: it must see the committed bytes
 *      (orewrite_member_nm);
 *   4. 60 transactions each write g/a, g/b, g/c and commit; a non-member
 *      reads them through descriptors kept open, in the order c, b, a: as
 *      the values grow, a and b must never be older than the c read
 *      before them (random_crash's group disagreements).
 * All four are checked; the failure lists each one that leaked. */
Test(tx_clients, isolation_repro, .timeout = 120)
{
	static char fails[4000];
	job j;
	char buf[64];
	double t0 = now_s();
	fails[0] = 0;
	start();
	STEP_OK("iso-setup", "echo T0 > t.txt && head -c 20000 /dev/zero | tr '\\000' c > big.bin && "
			     "printf 'COMMITTED-%%05000d' 0 > m.txt");
	cycle("after the set-up");

	/* 1 */
	progress_reset();
	bg(&j, "iso-truncate", "txbegin\nfor i in $(seq 10); do\n  printf \"T$i\\n\" > t.txt; sleep 0.05\n"
			       "  \"$TX_SELF\" --helper ftrunc t.txt \"U$i\\n\"; sleep 0.05\ndone\ntxabort\n");
	uint64_t reads = 0, bad_kept = 0, bad_fresh = 0;
	char first[200] = "";
	int kfd = open(mp("t.txt"), O_RDONLY | O_CLOEXEC);
	cr_assert(kfd >= 0, "open t.txt: %s", strerror(errno));
	while (!job_poll(&j)) {
		for (int pass = 0; pass < 2; pass++) {
			int fd = pass ? open(mp("t.txt"), O_RDONLY | O_CLOEXEC) : kfd;
			ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
			if (pass && fd >= 0)
				close(fd);
			buf[n > 0 ? n : 0] = 0;
			reads++;
			if (n != 3 || memcmp(buf, "T0\n", 3)) {
				*(pass ? &bad_fresh : &bad_kept) += 1;
				if (!first[0])
					snprintf(first, sizeof first, "'%s' (%zd bytes, %s)", buf, n,
						 pass ? "a fresh open" : "a descriptor kept open");
			}
		}
	}
	close(kfd);
	cr_assert(j.status == 0, "the member script failed (%d)\n%s", j.status, log_tail());
	printf("tx_clients isolation_repro 1: %" PRIu64 " non-member reads during 20 uncommitted truncations: %" PRIu64
	       " through the kept descriptor and %" PRIu64 " through fresh opens did not read the committed 'T0\\n'%s%s\n",
	       reads, bad_kept, bad_fresh, first[0] ? "; the first: " : "", first);
	if (bad_kept || bad_fresh)
		sb(fails, sizeof fails,
		   "1. a member's uncommitted truncation is visible to a non-member: %" PRIu64 " of %" PRIu64
		   " reads got %s instead of the committed 'T0\\n'\n",
		   bad_kept + bad_fresh, reads, first);

	/* 2 */
	{
		int pfd[2], qfd[2], st;
		cr_assert(pipe(pfd) == 0 && pipe(qfd) == 0);
		fflush(NULL);
		pid_t c = fork();
		if (c == 0) { /* the non-member with a mapping */
			char x;
			int fd = open(mp("big.bin"), O_RDONLY | O_CLOEXEC);
			char *p = fd >= 0 ? mmap(NULL, 20000, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
			if (p == MAP_FAILED)
				_exit(3);
			if (write(pfd[1], "m", 1) != 1 || read(qfd[0], &x, 1) != 1)
				_exit(4);
			_exit(p[12288] == 'c' ? 0 : 5);
		}
		kid_add(c);
		cr_assert(read(pfd[0], buf, 1) == 1, "the mapping child did not map big.bin");
		progress_reset();
		bg(&j, "iso-mmap", "txbegin\n\"$TX_SELF\" --helper ftrunc big.bin \"$(head -c 100 /dev/zero | tr '\\000' x)\"\n"
				   "echo truncated >> \"$P\"; read x < \"$G\"\ntxabort\n");
		cr_assert(wait_line(&j, "truncated", 30) == 1, "the member did not truncate\n%s", log_tail());
		cr_assert(write(qfd[1], "t", 1) == 1);
		waitpid(c, &st, 0);
		kid_del(c);
		release();
		job_wait(&j, 30);
		printf("tx_clients isolation_repro 2: a non-member touching its mapping of a committed 20000-byte file "
		       "after a member's uncommitted truncation: %s\n",
		       wstatus(st) == 0 ? "read the committed bytes" : wstatus(st) == 128 + SIGBUS ? "SIGBUS" : "failed");
		if (wstatus(st) != 0)
			sb(fails, sizeof fails,
			   "2. a non-member's mapping of a committed 20000-byte file, touched at page 3 after a member's "
			   "uncommitted ftruncate(0) + 100-byte write: %s (status %d), not the committed bytes\n",
			   wstatus(st) == 128 + SIGBUS ? "SIGBUS" : "wrong data", wstatus(st));
		close(pfd[0]);
		close(pfd[1]);
		close(qfd[0]);
		close(qfd[1]);
	}

	/* 3 */
	progress_reset();
	bg(&j, "iso-mapleak", "txbegin\nprintf 'MEMBER----%%05000d' 0 > m.txt\n"
			      "\"$TX_SELF\" --helper mapread m.txt 10 > \"$TXC_DIR/member-map.txt\"\n"
			      "echo mapped >> \"$P\"; read x < \"$G\"\ntxabort\n");
	cr_assert(wait_line(&j, "mapped", 30) == 1, "the member did not map m.txt\n%s", log_tail());
	char *nm_view = NULL;
	{
		int fd = open(mp("m.txt"), O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? pread(fd, buf, 10, 0) : -1;
		buf[n > 0 ? n : 0] = 0;
		if (fd >= 0)
			close(fd);
		nm_view = strdup(buf);
	}
	release();
	job_wait(&j, 30);
	char *member_view = slurp(dp("member-map.txt"), NULL);
	printf("tx_clients isolation_repro 3: a member's private mapping read '%s'; then a non-member read '%s' "
	       "(committed: 'COMMITTED-')\n",
	       member_view ? member_view : "?", nm_view);
	if (strcmp(nm_view, "COMMITTED-"))
		sb(fails, sizeof fails,
		   "3. after a member mapped m.txt MAP_PRIVATE (reading its uncommitted 'MEMBER----'), a non-member's "
		   "read() returned '%s', not the committed 'COMMITTED-'\n",
		   nm_view);
	free(nm_view);
	free(member_view);
	/* 4. commits of a group of three files, read by a non-member through
	 * descriptors kept open (warm caches) in the order c, b, a: tokens
	 * grow, so a must never be older than the c read before it */
	{
		STEP_OK("iso-group", "mkdir g && for f in a b c; do echo 0 > g/$f; done");
		int fa = open(mp("g/a"), O_RDONLY | O_CLOEXEC), fb = open(mp("g/b"), O_RDONLY | O_CLOEXEC),
		    fc = open(mp("g/c"), O_RDONLY | O_CLOEXEC);
		cr_assert(fa >= 0 && fb >= 0 && fc >= 0, "open g/*: %s", strerror(errno));
		progress_reset();
		bg(&j, "iso-group-commits", "for i in $(seq 1 60); do\n  txrun -- sh -c \"echo $i > g/a; echo $i > g/b; echo $i > g/c\"\n"
					    "  sleep 0.01\ndone\n");
		uint64_t rounds = 0, torn = 0, empty = 0;
		char tfirst[200] = "";
		while (!job_poll(&j)) {
			char x[3][32];
			int fdv[3] = {fc, fb, fa};
			for (int k = 0; k < 3; k++) {
				ssize_t n = pread(fdv[k], x[k], sizeof x[k] - 1, 0);
				x[k][n > 0 ? n : 0] = 0;
			}
			rounds++;
			long c = atol(x[0]), b = atol(x[1]), a = atol(x[2]);
			int whole = 1;
			for (int k = 0; k < 3; k++)
				whole &= x[k][0] >= '0' && x[k][0] <= '9' && x[k][strlen(x[k]) - 1] == '\n';
			if (!whole)
				empty++;
			else if (a < c || b < c) {
				torn++;
				if (!tfirst[0])
					snprintf(tfirst, sizeof tfirst, "c=%ld then b=%ld then a=%ld", c, b, a);
			}
		}
		close(fa);
		close(fb);
		close(fc);
		cr_assert(j.status == 0, "the committing script failed (%d)\n%s", j.status, log_tail());
		printf("tx_clients isolation_repro 4: %" PRIu64 " reads of g/c, g/b, g/a (descriptors kept open) during 60 "
		       "commits of all three: %" PRIu64 " saw a commit in c but an older a or b%s%s (and %" PRIu64
		       " read an empty or partial file: the truncations of 1)\n",
		       rounds, torn, tfirst[0] ? "; the first: " : "", tfirst, empty);
		if (torn)
			sb(fails, sizeof fails,
			   "4. a commit of g/a, g/b, g/c is not atomic for a non-member with warm caches: %" PRIu64 " of %" PRIu64
			   " reads in the order c, b, a saw the commit in c and then an older a or b (%s)\n",
			   torn, rounds, tfirst);
	}
	STEP_OK("iso-after", "test \"$(cat t.txt)\" = T0 && test \"$(head -c 10 m.txt)\" = COMMITTED- && "
			     "test \"$(stat -c %%s big.bin)\" = 20000");
	cr_assert(!fails[0], "non-members saw uncommitted state:\n%s", fails);
	finish();
	printf("tx_clients isolation_repro: no leak (%.1f s)\n", now_s() - t0);
}
