/*
 * test_logdamage -- damage to the log of a crashed store never loses a
 * durable commit silently (core/log/log.c L14-L16).
 *
 * Two stores are crashed once each (golden copies): a tree gets NDUR
 * commits, each durable when tp_commit returns; then, in the first, a few
 * lazy commits that never leave memory, so that its last segment holds
 * durable records up to the durable mark; in the second, NLAZY lazy
 * commits whose records reach the segment files without a sync (spilled
 * buffers), past the mark.  Then the process dies (tp_crash_close: what
 * was still in memory is lost).
 * Then, each time on a fresh copy of it, one damage: one byte flipped,
 * one 512-byte sector zeroed, one segment file removed or truncated, or
 * the durable mark flipped -- most of them in the last segment that holds
 * records (where a torn tail is looked for), the rest across every
 * segment file.  For each, the open (recovery) must either refuse,
 * naming the damage (TP_ECORRUPT or TP_EBADSTORE with a message naming a
 * log file), or find every durable commit intact.  A silent loss -- an
 * open that succeeds without one of them -- fails the test, naming the
 * damage.  The counts are printed: refused / intact.
 *
 * Before the durable mark (d590149), a flip below the end of the last
 * segment was cut as a torn tail with every commit after it, and removing
 * the last segments ended the log early: both counted as silent losses
 * here.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_util.h"
#include "tp.h"
#include "workload.h"

#define SEG 65536u
#define NDUR 300   /* durable commits */
#define NLAZY 160  /* lazy commits of LAZYLEN bytes: more than a log buffer, so some spill */
#define LAZYLEN 3000

static char tdir[64], golden[128], work[128];
static int spilled; /* the golden store being damaged: 1, the one with lazy records past the mark */
static uint64_t mark_lsn, log_end_lsn;
static uint64_t segs[64];
static size_t nsegs;

static size_t val_len(unsigned i) { return 40 + (i * 97u) % 700; }

static void val_fill(unsigned i, unsigned char *v, size_t n)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
	for (size_t k = 0; k < n; k++) {
		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ull;
		v[k] = (unsigned char)(x >> 56);
	}
}

static void options(tp_options *o)
{
	su_options(o, 1024, SEG, 8192); /* no page is written back: only commits sync the log */
	o->ckpt_log_bytes = 1ull << 40; /* no checkpoint: every segment stays */
	o->ckpt_ms = UINT32_MAX;
}

static void key_of(unsigned i, char k[16]) { snprintf(k, 16, "k%06u", i); }

/* The golden crashed store, and what its log looks like. */
static void make_golden(int with_spill)
{
	tp_options o;
	tp_env *env;
	tp_tree *tr;
	tp_txn *t;
	static unsigned char v[LAZYLEN];
	char k[16], logdir[PATH_MAX];
	/* in memory: every trial recovers and checkpoints (syncs) a copy */
	snprintf(tdir, sizeof tdir, "/dev/shm/tpfs-logdmg-XXXXXX");
	cr_assert_not_null(mkdtemp(tdir), "/dev/shm: %s", strerror(errno));
	spilled = with_spill;
	mark_lsn = 0;
	nsegs = 0;
	snprintf(golden, sizeof golden, "%s/golden", tdir);
	snprintf(work, sizeof work, "%s/work", tdir);
	options(&o);
	cr_assert_eq(tp_mkfs(golden, &o), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_open(golden, &o, &env), 0, "%s", tp_errmsg());
	cr_assert_eq(tp_tree_open(env, "t", TP_TREE_CREATE, &tr), 0, "%s", tp_errmsg());
	unsigned nlazy = with_spill ? NLAZY : 4;
	for (unsigned i = 0; i < NDUR + nlazy; i++) {
		size_t n = i < NDUR ? val_len(i) : LAZYLEN;
		key_of(i, k);
		val_fill(i, v, n);
		cr_assert_eq(tp_begin(env, &t), 0);
		cr_assert_eq(tp_put(t, tr, k, strlen(k), v, n, 0), 0, "%s", tp_errmsg());
		cr_assert_eq(tp_commit(t, i < NDUR ? 0 : TP_COMMIT_NOSYNC), 0, "%s", tp_errmsg());
	}
	tp_tree_close(tr);
	tp_crash_close(env);

	cr_assert_eq(su_logdir(golden, logdir, sizeof logdir), 0);
	char p[PATH_MAX + 16];
	unsigned char h[512];
	size_t got;
	su_path(p, sizeof p, logdir, "durable");
	cr_assert_eq(su_raw_read(p, 0, h, sizeof h, &got), 0);
	cr_assert_eq(got, sizeof h);
	for (int b = 7; b >= 0; b--)
		mark_lsn = mark_lsn << 8 | h[16 + b];
	for (uint64_t i = 0; i < 64; i++) {
		cr_assert_eq(su_segpath(golden, i, p, sizeof p), 0);
		if (su_raw_size(p) >= 0)
			segs[nsegs++] = i;
	}
	/* the log's end: a read-only open of the golden store (it changes nothing) */
	o.readonly = 1;
	cr_assert_eq(tp_open(golden, &o, &env), 0, "%s", tp_errmsg());
	tp_stats st;
	tp_stats_get(env, &st);
	cr_assert_eq(st.rec_cut_bytes, 0, "the golden log ends at a record boundary");
	tp_close(env);
	log_end_lsn = 0;
	{
		store *sst;
		log_mgr *lg;
		cr_assert_eq(su_log_open_ro(golden, &sst, &lg), 0, "%s", tp_errmsg());
		log_end_lsn = log_end(lg);
		log_close(lg);
		store_close(sst);
	}
	if (with_spill)
		cr_assert_gt(log_end_lsn, mark_lsn, "lazy records reached the files past the durable mark (end %" PRIu64
			     ", mark %" PRIu64 ")", log_end_lsn, mark_lsn);
	else
		cr_assert_eq(log_end_lsn, mark_lsn, "the log ends with the last durable commit (end %" PRIu64
			     ", mark %" PRIu64 ")", log_end_lsn, mark_lsn);
	cr_assert_geq(nsegs, 5, "the log spans several segments (%zu)", nsegs);
}

typedef enum { FLIP, SECTOR, REMOVE, TRUNCATE, MARK, NKINDS } kind;
static const char *kind_name[NKINDS] = {"flip", "zeroed sector", "removal", "truncation", "mark flip"};

typedef struct tally {
	unsigned n[NKINDS], refused, intact, last_seg;
} tally;

/* One damage on a fresh copy; the outcome is counted, a silent loss fails. */
static void trial(tally *ty, kind kd, uint64_t idx, uint64_t off)
{
	char p[PATH_MAX + 16], logdir[PATH_MAX], what[160];
	cr_assert_eq(wl_copy_store(golden, work), 0);
	cr_assert_eq(su_segpath(work, idx, p, sizeof p), 0);
	cr_assert_eq(su_logdir(work, logdir, sizeof logdir), 0);
	switch (kd) {
	case FLIP:
		cr_assert_eq(su_raw_flip(p, off, 0x24), 0);
		snprintf(what, sizeof what, "byte %" PRIu64 " of segment %" PRIu64 " flipped (LSN %" PRIu64 ")", off, idx,
			 idx * SEG + off);
		break;
	case SECTOR: {
		static const unsigned char z[512];
		cr_assert_eq(su_raw_write(p, off, z, sizeof z), 0);
		snprintf(what, sizeof what, "sector at %" PRIu64 " of segment %" PRIu64 " zeroed (LSN %" PRIu64 ")", off,
			 idx, idx * SEG + off);
		break;
	}
	case REMOVE:
		cr_assert_eq(unlink(p), 0);
		snprintf(what, sizeof what, "segment %" PRIu64 " removed", idx);
		break;
	case TRUNCATE:
		cr_assert_eq(su_raw_truncate(p, off), 0);
		snprintf(what, sizeof what, "segment %" PRIu64 " truncated to %" PRIu64 " bytes", idx, off);
		break;
	case MARK:
		su_path(p, sizeof p, logdir, "durable");
		cr_assert_eq(su_raw_flip(p, off, 0x81), 0);
		snprintf(what, sizeof what, "byte %" PRIu64 " of the durable mark flipped", off);
		break;
	default: cr_assert_fail();
	}
	ty->n[kd]++;
	if (idx == log_end_lsn / SEG && kd != MARK && kd != REMOVE && kd != TRUNCATE)
		ty->last_seg++;

	tp_options o;
	tp_env *env;
	options(&o);
	int rc = tp_open(work, &o, &env);
	if (rc) {
		cr_assert(rc == TP_ECORRUPT || rc == TP_EBADSTORE, "%s: refused with %d (%s): %s", what, rc,
			  tp_strerror(rc), tp_errmsg());
		cr_assert_not_null(strstr(tp_errmsg(), logdir), "%s: the refusal names no log file: %s", what,
				   tp_errmsg());
		ty->refused++;
		return;
	}
	tp_tree *tr;
	static unsigned char want[LAZYLEN], got[LAZYLEN];
	char k[16];
	cr_assert_eq(tp_tree_open(env, "t", 0, &tr), 0, "%s: the open succeeded, the tree is gone: %s", what,
		     tp_errmsg());
	for (unsigned i = 0; i < NDUR; i++) {
		size_t vl = 0, n = val_len(i);
		key_of(i, k);
		val_fill(i, want, n);
		rc = tp_get(NULL, tr, k, strlen(k), got, sizeof got, &vl);
		cr_assert(rc == 0 && vl == n && memcmp(got, want, n) == 0,
			  "SILENT LOSS: %s: the open succeeded, but durable commit %u (key %s) is %s", what, i, k,
			  rc ? tp_strerror(rc) : "changed");
	}
	tp_tree_close(tr);
	cr_assert_eq(tp_close(env), 0, "%s: %s", what, tp_errmsg());
	ty->intact++;
}

static uint64_t rng = 0x5eed;
static uint64_t rnd(uint64_t n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (rng >> 33) % n;
}

/* The damages of one golden store: flips and sectors in its last segment
 * holding records (nlast), in every other segment (nother each), whole
 * files removed and truncated, the mark flipped. */
static void damage_all(tally *ty, int nlast, int nother)
{
	uint64_t last = log_end_lsn / SEG, lend = log_end_lsn % SEG;
	for (int i = 0; i < nlast; i++) { /* mostly between the header and the end; some in the header, past it */
		uint64_t off = i % 16 == 0 ? rnd(512) : i % 16 == 1 ? lend + rnd(4096) : 512 + rnd(lend - 512);
		trial(ty, FLIP, last, off);
	}
	for (int i = 0; i < nlast / 6; i++)
		trial(ty, SECTOR, last, 512 * (1 + rnd((lend + 1024) / 512)));
	for (size_t s = 0; s < nsegs; s++) {
		if (segs[s] == last)
			continue;
		for (int i = 0; i < nother; i++)
			trial(ty, FLIP, segs[s], rnd(SEG));
		for (int i = 0; i < nother / 5; i++)
			trial(ty, SECTOR, segs[s], 512 * rnd(SEG / 512));
	}
	for (size_t s = 0; s < nsegs; s++) {
		trial(ty, REMOVE, segs[s], 0);
		trial(ty, TRUNCATE, segs[s], rnd(SEG));
		trial(ty, TRUNCATE, segs[s], 512 * rnd(SEG / 512));
	}
	for (int i = 0; i < 12; i++)
		trial(ty, MARK, 0, rnd(512));
}

static void report(const tally *ty, const char *which)
{
	unsigned total = ty->refused + ty->intact;
	printf("logdamage (%s): %u damages to a crashed store (%u durable commits, mark at LSN %" PRIu64
	       ", log end %" PRIu64 ", %zu segments), %u in the last segment holding records: ",
	       which, total, NDUR, mark_lsn, log_end_lsn, nsegs, ty->last_seg);
	for (int k = 0; k < NKINDS; k++)
		printf("%s%u %ss", k ? ", " : "", ty->n[k], kind_name[k]);
	printf("\nlogdamage (%s): refused (naming the damage) %u, every durable commit intact %u, silent losses 0\n",
	       which, ty->refused, ty->intact);
	fflush(stdout);
}

/* The case: damage in the last segment, below the mark. */
Test(logdamage, damage_below_the_mark_is_refused_or_harmless, .timeout = 900)
{
	tally ty = {0};
	make_golden(0);
	damage_all(&ty, 800, 30);
	report(&ty, "log ending at the last durable commit");
	unsigned total = ty.refused + ty.intact;
	cr_assert_geq(total, 1000);
	cr_assert_gt(ty.last_seg, total / 2, "most damages in the last segment");
	cr_assert_gt(ty.refused, total / 2, "damage below the mark is refused");
	cr_assert_gt(ty.intact, 0, "some damage was harmless (past the end, a spare, the mark itself)");
	su_rmtree(tdir);
}

/* A torn tail is still cut: damage to the lazy records past the mark. */
Test(logdamage, damage_past_the_mark_is_cut_keeping_every_durable_commit, .timeout = 900)
{
	tally ty = {0};
	make_golden(1);
	damage_all(&ty, 200, 8);
	report(&ty, "lazy records past the mark");
	cr_assert_gt(ty.intact, ty.n[FLIP] / 2, "most flips past the mark are cut as a torn tail");
	su_rmtree(tdir);
}
