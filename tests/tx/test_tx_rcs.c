/*
 * test_tx_rcs -- RCS in a transaction (test_tx_clients.c has the actors,
 * the helpers and the tests' description): 20 files checked in with `ci -l`,
 * committed, or ended by txabort, kill -9 of a member, of the shell, of the
 * daemon before, midway or right before txcommit.
 */
#include "txclients.h"

/* RCS                                                                    */

enum rcs_end {
	RCS_COMMIT,
	RCS_TXABORT,
	RCS_KILL_MEMBER,
	RCS_KILL_SHELL,
	RCS_KILL_SHELL_JOB,
	RCS_DAEMON_BEFORE,
	RCS_DAEMON_MIDWAY,
	RCS_DAEMON_PRECOMMIT,
};

static const char *const rcs_how[] = {
	"txcommit, then kill -9 of tpfsd",
	"txabort after 10 ci",
	"kill -9 of the member ci after 10 ci",
	"kill -9 of the bound shell (waiting in a builtin) after 10 ci",
	"kill -9 of the bound shell and its running ci after 10 ci",
	"kill -9 of tpfsd after txbegin, before any ci",
	"kill -9 of tpfsd after 10 ci (during the 11th)",
	"kill -9 of tpfsd after 20 ci, right before txcommit",
};

/* The whole work tree, canonically: every object's type, name, size,
 * mode, mtime, ctime and target, and every file's SHA-256. */
static void snap(const char *name)
{
	STEP_OK("snapshot", "cd work\n{ find . -printf '%%y %%p %%s %%m %%T@ %%C@ %%l\\n' | LC_ALL=C sort\n"
			    "  find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum; } > \"$TXC_DIR/%s\"",
		name);
}

/* How many of the 20 files are at revision 1.rev with the right text;
 * the description of what is there in state (DIR/rcs.state). */
static int rcs_count(int rev)
{
	STEP_OK("rcs-state", "cd work\nfor f in $(seq -w 1 20); do\n"
			     "  if [ -e RCS/f$f.txt,v ]; then\n"
			     "    echo \"f$f head=$(rlog -h f$f.txt | sed -n 's/^head: //p') "
			     "revisions=$(rlog f$f.txt | grep -c '^revision 1\\.') last=$(co -q -p f$f.txt | tail -1)\"\n"
			     "  else echo \"f$f no-rcs-file\"; fi\n"
			     "done > \"$TXC_DIR/rcs.state\"\necho \"RCS/: $(ls -A RCS | wc -l) entries\" >> \"$TXC_DIR/rcs.state\"");
	char *t = slurp(dp("rcs.state"), NULL);
	cr_assert(t, "no rcs.state");
	int n = 0;
	for (int f = 1; f <= 20; f++) {
		char want[200];
		snprintf(want, sizeof want, "f%02d head=1.%d revisions=%d last=file %02d revision %d\n", f, rev, rev, f, rev);
		n += strstr(t, want) != NULL;
	}
	if (n == 20 && !strstr(t, "RCS/: 20 entries"))
		n = -1; /* stray files in RCS/ */
	free(t);
	return n;
}

/* One transaction of 20 ci (revision 1.rev), ended as how says; then the
 * check: all 20 revisions (commit) or none (the tree is the snapshot). */
static void rcs_round(enum rcs_end how, int rev, uint64_t *seed)
{
	job j;
	char pre[100] = "", mod[100] = "", mid[200] = "", end[100] = "", what[200], line[200];
	int r, n;
	int wait20 = how == RCS_COMMIT || how == RCS_DAEMON_PRECOMMIT || how == RCS_KILL_MEMBER ||
		     how == RCS_KILL_SHELL_JOB || how == RCS_DAEMON_MIDWAY;
	snprintf(what, sizeof what, "RCS check-in of revision 1.%d, ended by %s", rev, rcs_how[how]);
	if (how == RCS_DAEMON_BEFORE)
		snprintf(pre, sizeof pre, "echo wait0 >> \"$P\"; read x < \"$G\"\n");
	if (rev > 1)
		snprintf(mod, sizeof mod, "echo \"file $f revision %d\" >> f$f.txt\n  ", rev);
	if (how == RCS_TXABORT)
		snprintf(mid, sizeof mid, "if [ $n = 10 ]; then txabort; echo aborted >> \"$P\"; exit 0; fi\n");
	if (how == RCS_KILL_SHELL)
		snprintf(mid, sizeof mid, "if [ $n = 10 ]; then echo wait10 >> \"$P\"; read x < \"$G\"; fi\n");
	if (wait20) /* where the test looks, or kills the daemon; a missed kill stops here too */
		snprintf(end, sizeof end, "echo wait20 >> \"$P\"; read x < \"$G\"\n");

	snap("before.snap");
	progress_reset();
	bg(&j, "rcs-tx",
	   "cd work\ntxbegin\necho begun >> \"$P\"\n%s"
	   "n=0\nfor f in $(seq -w 1 20); do\n"
	   "  %sci -q -l -m'revision %d' -t-\"file $f\" f$f.txt || { echo \"ci-failed $f $?\" >> \"$P\"; exit 1; }\n"
	   "  n=$((n + 1)); echo \"ci $n\" >> \"$P\"\n"
	   "  %s"
	   "done\n"
	   "# a member sees its own revisions\n"
	   "for f in $(seq -w 1 20); do test \"$(rlog -h f$f.txt | sed -n 's/^head: //p')\" = 1.%d; done\n"
	   "echo member-sees-all >> \"$P\"\n%s"
	   "if txcommit; then echo committed >> \"$P\"; else echo \"commit-failed $?\" >> \"$P\"; exit 1; fi\n",
	   pre, mod, rev, mid, rev, end);

	switch (how) {
	case RCS_COMMIT:
		r = wait_line(&j, "wait20", 60);
		cr_assert(r == 1, "%s: the member shell did not reach txcommit (exit %d)\n--- log ---\n%s", what, j.status,
			  log_tail());
		/* isolation: all 20 done in the transaction, none visible outside */
		snap("during.snap");
		cr_assert(!strcmp(diff_of(dp("before.snap"), dp("during.snap")), ""),
			  "%s: a non-member sees uncommitted changes (20 ci done, txcommit not yet run): the tree "
			  "differs from before the transaction:\n%s",
			  what, diff_of(dp("before.snap"), dp("during.snap")));
		release();
		if (rev == 1) { /* visible at once after txcommit, then durable */
			r = job_wait(&j, 60);
			cr_assert(r == 0 && progress_has("committed"), "%s: txcommit did not succeed (shell exit %d)\n--- log ---\n%s",
				  what, r, log_tail());
			n = rcs_count(rev);
			cr_assert(n == 20, "%s: after txcommit returned 0, a non-member sees %d of 20 files at revision 1.%d "
					   "(expected all 20):\n%s",
				  what, n, rev, tail_of(dp("rcs.state"), 2000));
			crash_and_recover(what);
		} else { /* kill -9 the moment txcommit returns */
			r = wait_line(&j, "committed", 60);
			if (r == 1)
				tfs_kill9(&g_m);
			cr_assert(r == 1, "%s: txcommit did not succeed: %s\n--- log ---\n%s", what,
				  progress_prefix("commit-failed", line, sizeof line) ? line : "no answer", log_tail());
			job_wait(&j, 60);
			cr_assert(tfs_remount(&g_m, OPTS) == 0, "%s: no mount after kill -9 (recovery failed?)", what);
		}
		n = rcs_count(rev);
		cr_assert(n == 20, "%s: txcommit returned 0, then kill -9 of tpfsd; after recovery %d of 20 files are at "
				   "revision 1.%d (expected all 20: durable on return):\n%s",
			  what, n, rev, tail_of(dp("rcs.state"), 2000));
		cycle(what);
		n = rcs_count(rev);
		cr_assert(n == 20, "%s: after a clean remount %d of 20 files are at revision 1.%d (expected 20):\n%s", what, n,
			  rev, tail_of(dp("rcs.state"), 2000));
		return;
	case RCS_TXABORT:
		r = job_wait(&j, 60);
		cr_assert(r == 0 && progress_has("aborted") && progress_has("ci 10") && !progress_has("ci 11"),
			  "%s: the shell did not run 10 ci and txabort (exit %d)\n--- log ---\n%s", what, r, log_tail());
		break;
	case RCS_KILL_MEMBER: {
		pid_t last = 0;
		int kills = 0;
		r = wait_line(&j, "ci 10", 60);
		cr_assert(r == 1, "%s: the shell did not get to 10 ci (exit %d)\n--- log ---\n%s", what, j.status, log_tail());
		/* kill a running ci, a random moment into it; if it ended first, the next */
		while (!progress_prefix("ci-failed", NULL, 0) && !progress_has("wait20") && !job_poll(&j)) {
			pid_t c = child_named(j.pid, "ci");
			if (c > 0 && c != last) {
				usleep_(below(seed, 3000));
				if (kill(c, SIGKILL) == 0)
					kills++;
				last = c;
			}
			usleep_(100);
		}
		r = job_wait(&j, 60);
		cr_assert(progress_prefix("ci-failed", line, sizeof line),
			  "%s: no ci was caught running (%d kills sent; the shell got to the end of the loop)\n--- log ---\n%s",
			  what, kills, log_tail());
		cr_assert(strstr(line, " 137") && r == 1, "%s: the killed ci should exit 137 and the shell 1; got '%s', shell %d",
			  what, line, r);
		printf("tx_clients rcs: killed the member ci: %s\n", line);
		break;
	}
	case RCS_KILL_SHELL:
		r = wait_line(&j, "wait10", 60);
		cr_assert(r == 1, "%s: the shell did not get to 10 ci (exit %d)\n--- log ---\n%s", what, j.status, log_tail());
		kill(j.pid, SIGKILL);
		r = job_wait(&j, 60);
		cr_assert(r == 137, "%s: the shell exited %d, not 137 (killed)", what, r);
		break;
	case RCS_KILL_SHELL_JOB:
		r = wait_line(&j, "ci 10", 60);
		cr_assert(r == 1, "%s: the shell did not get to 10 ci (exit %d)\n--- log ---\n%s", what, j.status, log_tail());
		usleep_(below(seed, 3000));
		kill(-j.pid, SIGKILL);
		r = job_wait(&j, 60);
		cr_assert(r == 137, "%s: the shell exited %d, not 137 (killed)", what, r);
		break;
	case RCS_DAEMON_BEFORE:
	case RCS_DAEMON_MIDWAY:
	case RCS_DAEMON_PRECOMMIT: {
		const char *at = how == RCS_DAEMON_BEFORE ? "wait0" : how == RCS_DAEMON_MIDWAY ? "ci 10" : "wait20";
		r = wait_line(&j, at, 60);
		cr_assert(r == 1, "%s: the shell did not get to '%s' (exit %d)\n--- log ---\n%s", what, at, j.status,
			  log_tail());
		crash_and_recover(what);
		/* the shell goes on: on the dead mount (its working directory)
		 * every call fails, and txcommit must not succeed anywhere */
		double t0 = now_s();
		int released = 0;
		while (!job_poll(&j) && now_s() - t0 < 60) {
			if (!released && (progress_has("wait0") || progress_has("wait20")))
				released = release();
			usleep_(2000);
		}
		r = job_wait(&j, 1);
		cr_assert(!progress_has("committed"),
			  "%s: txcommit returned 0 for a transaction whose daemon was killed (and restarted) before it",
			  what);
		cr_assert(r != 0 && r != -1, "%s: the shell should fail after the daemon died; it exited %d\n--- log ---\n%s",
			  what, r, log_tail());
		if (how == RCS_DAEMON_PRECOMMIT) {
			cr_assert(progress_prefix("commit-failed", line, sizeof line), "%s: txcommit did not run", what);
			printf("tx_clients rcs: txcommit after the daemon restart: %s (expected non-zero)\n", line);
		}
		break;
	}
	}
	/* none of it: the tree is byte for byte what it was */
	snap("after.snap");
	n = rcs_count(rev);
	cr_assert(!strcmp(diff_of(dp("before.snap"), dp("after.snap")), ""),
		  "%s: expected none of the 20 revisions, but the tree changed (%d of 20 files are at revision 1.%d); "
		  "diff of before and after:\n%s\n--- rcs.state ---\n%s\n--- log ---\n%s",
		  what, n, rev, diff_of(dp("before.snap"), dp("after.snap")), tail_of(dp("rcs.state"), 1500), log_tail());
	if (how >= RCS_DAEMON_BEFORE) {
		cycle(what);
		snap("after2.snap");
		cr_assert(!strcmp(diff_of(dp("before.snap"), dp("after2.snap")), ""),
			  "%s: after a clean remount the tree differs from before the transaction:\n%s", what,
			  diff_of(dp("before.snap"), dp("after2.snap")));
	}
}

static void rcs_test(enum rcs_end how)
{
	static const char *const progs[] = {"ci", "co", "rlog", "find", "sha256sum", NULL};
	uint64_t seed = 0x7c5 + (uint64_t)how * 1000003u + (uint64_t)time(NULL);
	double t0 = now_s();
	need(progs);
	start();
	STEP_OK("rcs-setup", "mkdir -p work/RCS && cd work && for f in $(seq -w 1 20); do "
			     "echo \"file $f revision 1\" > f$f.txt; done");
	cycle("after the set-up"); /* durable: plain calls are lazy (commit_interval) */
	/* the initial check-in (the ,v files are made in the transaction) */
	rcs_round(how, 1, &seed);
	if (how != RCS_COMMIT) { /* now commit it, to end the next one on existing files */
		STEP_OK("rcs-initial", "cd work && txrun -- sh -ec 'for f in $(seq -w 1 20); do "
				       "ci -q -l -m\"revision 1\" -t-\"file $f\" f$f.txt; done'");
		int n = rcs_count(1);
		cr_assert(n == 20, "txrun of the initial check-in: %d of 20 files at revision 1.1:\n%s", n,
			  tail_of(dp("rcs.state"), 2000));
	}
	/* revision 1.2 of every file */
	rcs_round(how, 2, &seed);
	finish();
	printf("tx_clients rcs: %s: all-or-nothing held for the initial check-in and for revision 1.2 (%.1f s)\n",
	       rcs_how[how], now_s() - t0);
	fflush(stdout);
}

Test(tx_clients, rcs_commit, .timeout = 120) { rcs_test(RCS_COMMIT); }
Test(tx_clients, rcs_txabort, .timeout = 120) { rcs_test(RCS_TXABORT); }
Test(tx_clients, rcs_kill_member, .timeout = 120) { rcs_test(RCS_KILL_MEMBER); }
Test(tx_clients, rcs_kill_shell, .timeout = 120) { rcs_test(RCS_KILL_SHELL); }
Test(tx_clients, rcs_kill_shell_job, .timeout = 120) { rcs_test(RCS_KILL_SHELL_JOB); }
Test(tx_clients, rcs_kill_daemon_before, .timeout = 120) { rcs_test(RCS_DAEMON_BEFORE); }
Test(tx_clients, rcs_kill_daemon_midway, .timeout = 120) { rcs_test(RCS_DAEMON_MIDWAY); }
Test(tx_clients, rcs_kill_daemon_precommit, .timeout = 120) { rcs_test(RCS_DAEMON_PRECOMMIT); }
