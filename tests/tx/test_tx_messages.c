/*
 * test_tx_messages -- messages that tell the truth (issue 25, 6; test_tx.c
 * has the actors and the helpers): what the tools say outside a mount, with
 * no transaction, after a failed command; what tpfs.stats counts.
 */
#include "txsh.h"

/* ---------------------------------------------------------------------- */
/* Messages that tell the truth (issue 25, 6)                             */

/* The "transactions: C committed, R rolled back" counts of tpfs.stats. */
static void stat_tx(unsigned long long *rolled, unsigned long long *errors)
{
	static char buf[65536];
	unsigned long long c;
	cr_assert(tfs_stats(&g_m, buf, sizeof buf) > 0, "cannot read tpfs.stats of %s: %s", g_m.mnt, strerror(errno));
	const char *l = strstr(buf, "transactions: ");
	cr_assert(l && sscanf(l, "transactions: %llu committed, %llu rolled back", &c, rolled) == 2,
		  "tpfs.stats has no line \"transactions: C committed, R rolled back\": %s", buf);
	cr_assert(tfs_stat_count(&g_m, "errors", errors) == 0, "tpfs.stats has no \"errors\" count: %s", buf);
}

/* txbegin outside any tpfs mount says "not a tpfs mount" (no protocol
 * internals); txstatus and txcommit of a shell with no transaction do not
 * name another shell's transaction as its last one, and do name its own;
 * `txrun -- nosuchcmd` does not leave "aborted by uid 0 (txabort --id)";
 * ordinary negative lookups and absent attributes are neither rolled-back
 * transactions nor errors in tpfs.stats; txcommit after the daemon died
 * says the transaction was lost; txbegin on a read-only mount says so. */
Test(tx, messages_tell_the_truth, .timeout = 120)
{
	const char *out;
	char ida[32], pat[64];
	unsigned long long r0, e0, r1, e1, nf0, nf1;
	start();
	need_tools();
	tsh *a = tsh_open("A", 0), *b = tsh_open("B", 0);

	int st = tsh_run(a, &out, "txbegin '%s' 2>&1", g_m.dir);
	cr_expect(st == 1 && strstr(out, "not a tpfs mount") && !strstr(out, "tpfs.tx."),
		  "txbegin %s (no tpfs mount) exited %d saying \"%s\": expected 1 and \"not a tpfs mount\", without "
		  "protocol names",
		  g_m.dir, st, out);

	st = tsh_run(a, &out, "txbegin");
	cr_assert(st == 0, "txbegin in shell A: exit %d: %s", st, out);
	snprintf(ida, sizeof ida, "%s", out);
	SH_OK(a, "txcommit");
	snprintf(pat, sizeof pat, "transaction %s ", ida);
	for (int k = 0; k < 2; k++) {
		const char *tool = k ? "txcommit" : "txstatus";
		st = tsh_run(b, &out, "%s 2>&1", tool);
		cr_expect(st == 1 && !strstr(out, pat),
			  "%s in shell B, which never had a transaction, exited %d saying \"%s\": it names shell A's "
			  "transaction %s",
			  tool, st, out, ida);
	}
	st = tsh_run(a, &out, "txstatus 2>&1");
	cr_expect(st == 1 && strstr(out, pat) && strstr(out, "committed"),
		  "txstatus in shell A after its commit said \"%s\" (exit %d): expected its last one, transaction %s, "
		  "committed",
		  out, st, ida);

	st = tsh_run(b, &out, "txrun -- nosuchcmd-tpfs 2>&1");
	cr_expect(st == 127, "txrun -- nosuchcmd-tpfs exited %d (%s), expected 127", st, out);
	st = tsh_run(b, &out, "txstatus 2>&1");
	cr_expect(st == 1 && strstr(out, "txrun") && strstr(out, "aborted") && !strstr(out, "txabort --id") &&
			  !strstr(out, "by uid"),
		  "txstatus after `txrun -- nosuchcmd-tpfs` says \"%s\": expected txrun's transaction, aborted by "
		  "its member txrun, not by \"uid N (txabort --id)\"",
		  out);

	/* 40 lookups of missing names and 40 reads of an absent attribute */
	put("present", "x");
	stat_tx(&r0, &e0);
	cr_assert(tfs_stat_count(&g_m, "not-found", &nf0) == 0, "tpfs.stats has no \"not-found\" count");
	for (int i = 0; i < 40; i++) {
		char p[64], v[8];
		struct stat sb;
		snprintf(p, sizeof p, "missing-%d", i);
		cr_assert(stat(mp(p), &sb) != 0 && errno == ENOENT);
		cr_assert(getxattr(mp("present"), "user.absent", v, sizeof v) < 0 && errno == ENODATA,
			  "getxattr of an absent attribute: %s", strerror(errno));
	}
	stat_tx(&r1, &e1);
	cr_assert(tfs_stat_count(&g_m, "not-found", &nf1) == 0, "tpfs.stats has no \"not-found\" count");
	cr_expect(r1 == r0, "tpfs stat: 40 lookups of missing names and 40 absent attributes made %llu transactions "
			    "\"rolled back\"",
		  r1 - r0);
	cr_expect(e1 == e0, "tpfs stat: 40 lookups of missing names and 40 absent attributes made %llu \"errors\"",
		  e1 - e0);
	cr_expect(nf1 >= nf0 + 40, "tpfs stat: \"not-found\" went from %llu to %llu after 40 absent attributes", nf0,
		  nf1);

	/* the daemon dies under an open transaction */
	tsh *c = tsh_open("C", 0);
	st = tsh_run(c, &out, "txbegin");
	cr_assert(st == 0, "txbegin in shell C: exit %d: %s", st, out);
	kill(g_m.pid, SIGKILL);
	st = tsh_run(c, &out, "txcommit 2>&1");
	cr_expect(st == 1 && strstr(out, "daemon of this mount stopped") && strstr(out, "lost"),
		  "txcommit after kill -9 of tpfsd said \"%s\" (exit %d): expected that the daemon stopped and the "
		  "transaction was lost",
		  out, st);
	tsh_kill(c, 1);
	tfs_kill9(&g_m);
	cr_assert(tfs_remount(&g_m, NULL) == 0, "mount after kill -9 failed");
	cr_assert(tfs_stop(&g_m) == 0, "clean unmount after recovery failed");

	/* read-only */
	cr_assert(tfs_remount(&g_m, "ro") == 0, "mount -o ro failed");
	tsh *d = tsh_open("D", 0);
	st = tsh_run(d, &out, "txbegin 2>&1");
	cr_expect(st == 1 && strstr(out, "read-only"),
		  "txbegin on a read-only mount exited %d saying \"%s\": expected 1 and that the mount is read-only",
		  st, out);
	finish();
}
