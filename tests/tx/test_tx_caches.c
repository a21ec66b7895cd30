/*
 * test_tx_caches -- kernel caches across a transaction's begin and end
 * (test_tx.c has the actors and the helpers): a handle opened before the
 * transaction, cached names dropped once at begin, the next transaction of
 * a process, programs that keep their files open, txrun's redirections.
 */
#include "txsh.h"

/* ---------------------------------------------------------------------- */
/* Kernel caches: a handle opened before the transaction                  */

/* A member process opened f before it joined: the descriptor names the
 * shared inode and stays outside the transaction (fsd_data.c C5): a write
 * through it is a plain write, visible to a non-member at once and kept
 * after the abort, as output to a terminal would be.  A write through a
 * handle opened in the transaction is the transaction's; and once the
 * transaction has locked a file, the outside descriptor can no longer
 * change it (EBADF).  A non-member never sees the transaction's bytes. */
Test(tx, prejoin_handle_stays_outside, .timeout = 60)
{
	static const char committed[] = "committed-bytes!", outside[] = "outside--written", mine[] = "UNCOMMITTED-----";
	size_t len = strlen(committed);
	int p[2];
	start();
	put("f", committed);
	put("g", committed);
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		char verb[64], ans[512], b[64], r[64];
		long bad = 0;
		close(p[0]);
		int fd = open(mp("f"), O_RDWR | O_CLOEXEC), gfd = open(mp("g"), O_RDWR | O_CLOEXEC);
		snprintf(verb, sizeof verb, "tpfs.tx.begin.%d", (int)getpid());
		if (fd < 0 || gfd < 0 || proto(verb, ans, sizeof ans) != 0)
			_exit(2);
		/* 1: through the outside descriptor: a plain write */
		if (pwrite(fd, outside, len, 0) != (ssize_t)len)
			bad |= 1;
		if (write(p[1], "1", 1) != 1)
			_exit(3);
		/* 2: g through a handle opened in the transaction, then through
		 * the outside one */
		int fresh = open(mp("g"), O_RDWR | O_CLOEXEC);
		if (fresh < 0 || pwrite(fresh, mine, len, 0) != (ssize_t)len || pread(fresh, b, len, 0) != (ssize_t)len ||
		    memcmp(b, mine, len))
			bad |= 2;
		errno = 0;
		if (pwrite(gfd, outside, len, 0) != -1 || errno != EBADF)
			bad |= 4;
		errno = 0;
		if (ftruncate(gfd, 0) != -1 || errno != EBADF)
			bad |= 8;
		if (write(p[1], "2", 1) != 1)
			_exit(3);
		usleep(300000); /* the non-member looks meanwhile */
		proto("tpfs.tx.abort", ans, sizeof ans);
		int n = snprintf(r, sizeof r, " %ld", bad);
		if (write(p[1], r, (size_t)n) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	g_kids[g_nkids++] = c;
	char step[2] = "";
	char buf[64];
	cr_assert(read(p[0], step, 1) == 1 && step[0] == '1', "the member child could not open f and g and bind itself");
	ssize_t n = nm_read("f", buf, sizeof buf);
	cr_expect(n == (ssize_t)len && !strcmp(buf, outside),
		  "non-member: f reads \"%s\" right after the member's write through a descriptor opened before it "
		  "joined, expected \"%s\" (a plain write)",
		  buf, outside);
	cr_assert(read(p[0], step, 1) == 1 && step[0] == '2');
	n = nm_read("g", buf, sizeof buf);
	cr_expect(n == (ssize_t)len && !strcmp(buf, committed),
		  "non-member: g reads \"%s\" while the transaction has written it, expected \"%s\"", buf, committed);
	char r[32] = "";
	ssize_t rn = read(p[0], r, sizeof r - 1);
	r[rn > 0 ? rn : 0] = 0;
	close(p[0]);
	int st;
	waitpid(c, &st, 0);
	g_kids[g_nkids - 1] = 0;
	long bad = -1;
	sscanf(r, "%ld", &bad);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the member child failed (status 0x%x: 2 open or bind)", st);
	cr_expect(bad == 0,
		  "member: wrong results (bits %ld: 1 a write through the descriptor opened before joining failed, 2 a "
		  "handle opened in the transaction did not read back its write, 4 a write through the outside descriptor "
		  "of a file the transaction wrote was not refused with EBADF, 8 nor was its ftruncate)",
		  bad);
	n = nm_read("f", buf, sizeof buf);
	cr_expect(n == (ssize_t)len && !strcmp(buf, outside), "after the abort f holds \"%s\", expected \"%s\" (the "
							       "plain write stays)",
		  buf, outside);
	n = nm_read("g", buf, sizeof buf);
	cr_expect(n == (ssize_t)len && !strcmp(buf, committed), "after the abort g holds \"%s\", expected \"%s\"", buf,
		  committed);
	finish();
}

/* The client library's promise (tools/tpfs_tx.c M10): a program opens its
 * files once, then runs transaction after transaction through the same
 * descriptors -- they were opened outside every transaction, and
 * tpfs_tx_begin reopens them so that its writes are the transaction's:
 * invisible until the commit, gone at an abort, offsets kept. */
/* A request count of the daemon's statistics (tpfs.stats: "  NAME  N"). */
static uint64_t stat_count(const char *name)
{
	unsigned long long v = 0;
	cr_assert(tfs_stat_count(&g_m, name, &v) == 0, "tpfs.stats of %s has no count \"%s\" (%s)", g_m.mnt, name,
		  strerror(errno));
	return v;
}

/* C6: names the kernel may keep (looked up before any transaction, with
 * the usual timeout) are dropped by the first begin -- and only by it:
 * the next begins of a program that keeps running transactions must not
 * drop them again (each drop is a thread and a notification per name). */
Test(tx, begin_drops_cached_names_once, .timeout = 60)
{
	struct stat st;
	start();
	for (int i = 0; i < 4; i++) {
		char rel[16];
		snprintf(rel, sizeof rel, "n%d", i);
		put(rel, "x");
		cr_assert(stat(mp(rel), &st) == 0);
	}
	usleep(30000); /* (names put just before a begin are dropped again by the next) */
	uint64_t d0 = stat_count("begin-dropped");
	int dropped[5];
	for (int round = 0; round < 5; round++) {
		pid_t c = fork();
		cr_assert(c >= 0);
		if (c == 0) { /* a program of its own: begins bind the caller */
			char msg[TPFS_TX_MSG_MAX];
			_exit(tpfs_tx_begin(g_m.mnt, 0, NULL, msg, sizeof msg) == 0 &&
					      tpfs_tx_commit(g_m.mnt, msg, sizeof msg) == 0
				      ? 0
				      : 1);
		}
		int wst = 0;
		cr_assert(waitpid(c, &wst, 0) == c && WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
			  "round %d: begin and commit failed (status 0x%x)", round + 1, wst);
		dropped[round] = (int)(stat_count("begin-dropped") - d0);
	}
	cr_expect(dropped[0] >= 4, "the first begin dropped %d names, expected at least the 4 looked up", dropped[0]);
	cr_expect(dropped[4] == dropped[0],
		  "begins 2-5 dropped names again: %d after the first, %d after five (expected no more)", dropped[0],
		  dropped[4]);
	finish();
}

/* C8: a process's transactions after a committed one keep its alias tag,
 * so the names its last transaction resolved still name the inodes the
 * kernel holds for it: opening a file of the root is then one lookup, not
 * two (the old dentry's check answered with another node id, then the
 * lookup again).  After an abort the tag is new: nothing of the aborted
 * view can be met again. */
Test(tx, next_transaction_of_a_process_looks_up_once, .timeout = 60)
{
	int p[2], q[2];
	start();
	put("f", "data");
	usleep(30000); /* (a name put just before a begin is dropped again by the next: C6) */
	cr_assert(pipe2(p, O_CLOEXEC) == 0 && pipe2(q, O_CLOEXEC) == 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		char msg[TPFS_TX_MSG_MAX], b;
		close(p[0]);
		close(q[1]);
		for (int round = 0; round < 4; round++) {
			if (read(q[0], &b, 1) != 1 || tpfs_tx_begin(g_m.mnt, 0, NULL, msg, sizeof msg) != 0)
				_exit(2);
			int fd = open(mp("f"), O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				_exit(3);
			close(fd);
			int rc = round == 1 ? tpfs_tx_abort(g_m.mnt, msg, sizeof msg) : tpfs_tx_commit(g_m.mnt, msg, sizeof msg);
			if (rc != 0 || write(p[1], "d", 1) != 1)
				_exit(4);
		}
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	g_kids[g_nkids++] = c;
	uint64_t lookups[4];
	char b;
	for (int round = 0; round < 4; round++) {
		uint64_t l0 = stat_count("lookup");
		cr_assert(write(q[1], "g", 1) == 1);
		cr_assert(read(p[0], &b, 1) == 1, "the program failed in round %d", round + 1);
		lookups[round] = stat_count("lookup") - l0;
	}
	int st = 0;
	waitpid(c, &st, 0);
	g_kids[g_nkids - 1] = 0;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the program exited 0x%x", st);
	/* round 1 commits, round 2 aborts, rounds 3 and 4 commit */
	cr_expect_eq(lookups[1], 1, "the transaction after a commit looked f up %" PRIu64 " times, expected once",
		     lookups[1]);
	cr_expect_eq(lookups[2], 2, "the transaction after an abort looked f up %" PRIu64 " times, expected twice "
				    "(a new tag: the old dentry names the aborted view's inode)",
		     lookups[2]);
	cr_expect_eq(lookups[3], 1, "the transaction after a commit looked f up %" PRIu64 " times, expected once",
		     lookups[3]);
	close(p[0]);
	close(q[1]);
	finish();
}

Test(tx, library_program_keeps_its_files_open, .timeout = 60)
{
	static const char *const words[3] = {"ROUND-ONE", "ROUND-TWO", "ROUND-3RD"};
	static const char *const before[3] = {"committed", "ROUND-ONE", "ROUND-ONE"};
	static const char *const after[3] = {"ROUND-ONE", "ROUND-ONE", "ROUND-3RD"};
	uint64_t opens[4];
	int p[2], q[2];
	start();
	put("f", "committed");
	cr_assert(pipe2(p, O_CLOEXEC) == 0 && pipe2(q, O_CLOEXEC) == 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		char msg[TPFS_TX_MSG_MAX], b[64];
		close(p[0]);
		close(q[1]);
		int fd = open(mp("f"), O_RDWR | O_CLOEXEC);
		if (fd < 0 || lseek(fd, 3, SEEK_SET) != 3)
			_exit(2);
		for (int round = 0; round < 3; round++) {
			if (round == 2) { /* a new handle, opened outside: reopened again (M11) */
				close(fd);
				if ((fd = open(mp("f"), O_RDWR | O_CLOEXEC)) < 0 || lseek(fd, 3, SEEK_SET) != 3)
					_exit(2);
			}
			if (tpfs_tx_begin(g_m.mnt, 0, NULL, msg, sizeof msg) != 0)
				_exit(3);
			if (lseek(fd, 0, SEEK_CUR) != 3) /* the offset survived the reopen */
				_exit(4);
			if (pwrite(fd, words[round], 9, 0) != 9 || pread(fd, b, 9, 0) != 9 || memcmp(b, words[round], 9))
				_exit(5);
			if (write(p[1], "w", 1) != 1 || read(q[0], b, 1) != 1) /* the parent looks */
				_exit(6);
			int rc = round == 1 ? tpfs_tx_abort(g_m.mnt, msg, sizeof msg) : tpfs_tx_commit(g_m.mnt, msg, sizeof msg);
			if (rc != 0)
				_exit(7);
			if (write(p[1], "e", 1) != 1 || read(q[0], b, 1) != 1)
				_exit(6);
		}
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	g_kids[g_nkids++] = c;
	char b, buf[64];
	for (int round = 0; round < 3; round++) {
		if (read(p[0], &b, 1) != 1 || b != 'w') {
			int st = 0;
			waitpid(c, &st, 0);
			g_kids[g_nkids - 1] = 0;
			cr_assert(0, "the program failed before its write of round %d (status 0x%x: 2 open, 3 begin, 4 offset "
				     "lost, 5 I/O)",
				  round + 1, st);
		}
		opens[round] = stat_count("open");
		nm_read("f", buf, sizeof buf);
		cr_expect(!strcmp(buf, before[round]),
			  "round %d: a non-member reads f as \"%s\" before the end of the transaction, expected \"%s\" (a "
			  "write through a descriptor opened before tpfs_tx_begin escaped the transaction)",
			  round + 1, buf, before[round]);
		cr_assert(write(q[1], "k", 1) == 1);
		cr_assert(read(p[0], &b, 1) == 1 && b == 'e', "the program's %s failed", round == 1 ? "abort" : "commit");
		nm_read("f", buf, sizeof buf);
		cr_expect(!strcmp(buf, after[round]), "round %d: f reads \"%s\" after the %s, expected \"%s\"", round + 1,
			  buf, round == 1 ? "abort" : "commit", after[round]);
		cr_assert(write(q[1], "k", 1) == 1);
	}
	/* M11: the handle the first begin put there served the second
	 * transaction without a reopen; the third begin reopened the new one
	 * (each nm_read above opens f once too) */
	cr_expect(opens[1] - opens[0] == 2, "round 2's begin opened f again (%" PRIu64 " opens between the rounds, 2 are "
					   "the non-member's): the kept handle was not recognized",
		  opens[1] - opens[0]);
	cr_expect(opens[2] - opens[1] >= 4, "round 3's begin did not reopen a descriptor opened outside (%" PRIu64
					    " opens between the rounds)",
		  opens[2] - opens[1]);
	int st;
	waitpid(c, &st, 0);
	g_kids[g_nkids - 1] = 0;
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the program failed (status 0x%x: 2 open, 3 begin, 4 offset lost, 5 I/O, 7 commit or abort)", st);
	close(p[0]);
	close(q[1]);
	finish();
}

/* txrun -- CMD > log: the shell opened log before txrun began, so CMD's
 * output goes through a descriptor opened outside the transaction: written
 * at once (plain), even though CMD's stdio fstat()s it and CMD's own files
 * are the transaction's; an abort (CMD fails) keeps the log and drops the
 * rest. */
Test(tx, txrun_output_redirected_outside, .timeout = 60)
{
	const char *out;
	char buf[256];
	need_tools();
	start();
	tsh *s = tsh_open("S", 0);
	int st = tsh_run(s, &out, "txrun -- sh -c 'echo one; printf in > made; /bin/echo two; exit 3' > log");
	cr_expect(st == 3, "txrun of a command exiting 3: exit %d (%s)", st, out);
	ssize_t n = nm_read("log", buf, sizeof buf);
	cr_expect(n > 0 && !strcmp(buf, "one\ntwo\n"), "log holds \"%s\" after the aborted txrun, expected \"one\\ntwo\\n\" "
						     "(written through the shell's descriptor, outside the transaction)",
		  n > 0 ? buf : strerror((int)-n));
	cr_expect(nm_access("made") == ENOENT, "made exists: the aborted transaction's file was kept");
	st = tsh_run(s, &out, "txrun -- sh -c 'echo three; printf in > made' >> log");
	cr_expect(st == 0 && nm_access("made") == 0, "txrun of a command exiting 0: exit %d (%s), made %s", st, out,
		  nm_access("made") ? "absent" : "present");
	n = nm_read("log", buf, sizeof buf);
	cr_expect(n > 0 && !strcmp(buf, "one\ntwo\nthree\n"), "log holds \"%s\", expected \"one\\ntwo\\nthree\\n\"",
		  n > 0 ? buf : "");
	finish();
}

/* A directory renamed twice in a transaction that removed an entry in it
 * (its pending link-count delta was already folded into its record by the
 * first rename: the second used to fail with EPERM). */
Test(tx, rename_dir_twice_after_unlink_in_it, .timeout = 60)
{
	start();
	cr_assert(mkdir(mp("rd"), 0755) == 0 && mkdir(mp("rd/d1"), 0755) == 0);
	put("rd/d1/f1", "x");
	tsh *s = tsh_open("T", 1);
	SH_OK(s, "rm rd/d1/f1 && mv -T rd/d1 rd/d2 && mv -T rd/d2 rd/d3 && mkdir rd/d3/e && mv -T rd/d3 rd/d4");
	cr_expect(nm_access("rd/d1/f1") == 0 && nm_access("rd/d4") == ENOENT, "the renames are visible before the commit");
	tsh_commit(s);
	cr_expect(nm_access("rd/d4/e") == 0 && nm_access("rd/d1") == ENOENT && nm_access("rd/d2") == ENOENT &&
			  nm_access("rd/d3") == ENOENT && nm_access("rd/d4/f1") == ENOENT,
		  "after the commit: rd/d4/e, and neither rd/d1, rd/d2, rd/d3 nor rd/d4/f1");
	struct stat st;
	cr_expect(stat(mp("rd"), &st) == 0 && st.st_nlink == 3, "rd has %ld links, expected 3", (long)st.st_nlink);
	cr_expect(stat(mp("rd/d4"), &st) == 0 && st.st_nlink == 3, "rd/d4 has %ld links, expected 3",
		  (long)st.st_nlink);
	finish();
}

/* kill -9 of the bound shell while a command it started in the background
 * (a member: it read a file in the transaction) sleeps: the command
 * outlives the shell, reparented, but must not go on as a plain caller
 * whose writes are committed one call at a time (fsd_txbind.c C13). */
Test(tx, orphaned_member_is_refused, .timeout = 60)
{
	char st_path[64], buf[32] = "";
	snprintf(st_path, sizeof st_path, "/tmp/tpfs-orphan-%d", (int)getpid());
	unlink(st_path);
	start();
	put("x", "x");
	tsh *s = tsh_open("T", 1);
	uint64_t id = s->txid;
	SH_OK(s, "(cat x > /dev/null; sleep 1; printf late > late; echo $? > %s) < /dev/null > /dev/null 2>&1 &",
	      st_path);
	tsh_kill(s, 0);
	double t0 = now_s();
	while (tx_listed(id) && now_s() - t0 < 5)
		msleep(10);
	cr_expect(!tx_listed(id), "transaction %llu still listed after kill -9 of its shell", (unsigned long long)id);
	int fd = -1;
	while (now_s() - t0 < 5 && (fd = open(st_path, O_RDONLY | O_CLOEXEC)) < 0)
		msleep(20);
	msleep(50);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	unlink(st_path);
	cr_expect(n > 0 && atoi(buf) != 0, "the orphaned member's write of late: exit status \"%s\" (expected a failure: "
					   "its transaction was aborted)",
		  n > 0 ? buf : "none: it never finished");
	cr_expect(nm_access("late") == ENOENT, "late exists: an orphaned member of an aborted transaction wrote it");
	put("late2", "plain\n"); /* a plain process is not refused */
	cr_expect(nm_access("late2") == 0, "a plain write after the orphan's refusal failed");
	finish();
}
