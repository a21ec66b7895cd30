/*
 * tpcb -- the TPC-B benchmark on tpfs and, in the same run, on the systems
 * a user would pick instead: Berkeley DB 5.3, SQLite 3, LMDB and plain
 * files.  Built only with -Dbench_peers=true, run by scripts/bench.
 *
 *   tpcb run  [options]   TPC-B transactions per second
 *   tpcb bulk [options]   LLADD's bulk test: one transaction inserting
 *                         1,000,000 (uint32, uint32) pairs in key order
 *
 * Options
 *   --dir DIR            stores go here (default /var/tmp/tpfs-bench)
 *   --seconds S          seconds per figure (default 5)
 *   --slices N           measured in N interleaved slices (default 5)
 *   --warmup S           unmeasured seconds at the most threads before the
 *                        measurements of each mode (default 1)
 *   --threads LIST       thread counts (default 1,2,4,8)
 *   --scale F            branches 10F, tellers 100F, accounts 100,000F
 *   --branches N --tellers N --accounts N
 *   --systems LIST       of tpfs,bdb,sqlite,lmdb,files (default all)
 *   --modes LIST         only these modes (names as printed, e.g. nosync,OFF)
 *   --cache-mb MB        cache of every system (default 160: the data fits)
 *   --pairs N            pairs of the bulk test (default 1,000,000)
 *   --bulk-runs N        runs of the bulk test per system, median (default 3)
 *
 * The workload (TPC-B, clause 1.2): a transaction picks a teller at
 * random, the teller's branch, and an account (85% of the time of that
 * branch, else of another branch, each at random), adds a delta drawn from
 * [-99999, 99999] to the account, the teller and the branch, and appends a
 * 50-byte history record (account, teller, branch, delta, time).  Each
 * configuration runs after the load for a fixed time, in slices: every
 * system is loaded first, and each round of slices measures every
 * system, mode and thread count once, so that a change in the load of the
 * (shared, noisy) machine falls on all of them alike.  A slice's time runs
 * from the start of its threads until the last finished its last
 * transaction; a figure is its commits over its slices' time.  Each mode
 * starts with an unmeasured warm-up.  After the last slice of each
 * configuration the store is checked: the sums of account, teller and
 * branch balances and of history deltas must be equal, and there must be
 * one history record per commit (OK/FAIL).
 *
 * Every figure is compared with a peer measured in the same run: the disk's
 * serial flush limit (1e6 / median microseconds of a 4 KiB write+fdatasync
 * on a preallocated file) and the other systems in the same durability
 * class (tpcb.h).  Live lines go to stderr, the tables to stdout at the end.
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "tpcb.h"

#define MAXTHREADS 64
#define NTHREADS_MAX 8 /* thread counts in one run */
#define MAXMODES 4

static const tpcb_system *const all_systems[] = {&tpcb_tpfs, &tpcb_bdb, &tpcb_sqlite, &tpcb_lmdb, &tpcb_files};
static const char *const sys_key[] = {"tpfs", "bdb", "sqlite", "lmdb", "files"};
#define NSYS (sizeof all_systems / sizeof all_systems[0])

static const char *const class_name[TPCB_NCLASS] = {"durable", "nosync", "none"};

/* ---- helpers for the systems ---- */

void tpcb_rec_init(tpcb_rec *r, uint64_t id, uint64_t branch)
{
	memset(r, 0, sizeof *r);
	r->id = id;
	r->branch = branch;
	memset(r->filler, 'f', sizeof r->filler);
}

static void le64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

void tpcb_hist_init(tpcb_hist *h, const tpcb_args *a)
{
	le64(h->b, a->account);
	le64(h->b + 8, a->teller);
	le64(h->b + 16, a->branch);
	le64(h->b + 24, (uint64_t)(int64_t)a->delta);
	le64(h->b + 32, a->time);
	memset(h->b + 40, 'h', TPCB_HIST - 40);
}

int64_t tpcb_hist_delta(const void *h50)
{
	const unsigned char *b = (const unsigned char *)h50 + 24;
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return (int64_t)v;
}

void tpcb_be64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (56 - 8 * i));
}

void tpcb_be32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (24 - 8 * i));
}

uint32_t tpcb_get_be32(const unsigned char *b) { return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]; }

static double load_start;
static int load_quarter;

void tpcb_progress(const char *sys, const char *what, uint64_t i, uint64_t n)
{
	if (i == 0) {
		load_start = bench_now();
		load_quarter = 0;
		fprintf(stderr, "  %s: loading %" PRIu64 " %s ...", sys, n, what);
	} else if (i >= n) {
		fprintf(stderr, " done (%.1f s)\n", bench_now() - load_start);
	} else if ((int)(i * 4 / n) > load_quarter) {
		load_quarter = (int)(i * 4 / n);
		fprintf(stderr, " %d%%", load_quarter * 25);
	}
	fflush(stderr);
}

void tpcb_path(char *out, size_t cap, const char *dir, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

void tpcb_rmtree(const char *path) { nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* ---- options ---- */

static struct {
	const char *dir;
	double seconds, warmup;
	int rounds;
	int threads[NTHREADS_MAX], nthreads;
	uint32_t branches, tellers, accounts;
	int use[NSYS];
	size_t cache_mb;
	uint32_t pairs;
	int bulk_reps;
	const char *modes; /* NULL: every mode */
} opt = {
	.dir = "/var/tmp/tpfs-bench",
	.seconds = 5,
	.warmup = 1,
	.rounds = 5,
	.threads = {1, 2, 4, 8},
	.nthreads = 4,
	.branches = 10,
	.tellers = 100,
	.accounts = 100000,
	.use = {1, 1, 1, 1, 1},
	.cache_mb = 160,
	.pairs = 1000000,
	.bulk_reps = 3,
};

static void usage(void)
{
	fprintf(stderr,
		"usage: tpcb run|bulk [--dir DIR] [--seconds S] [--slices N] [--warmup S] [--threads 1,2,4,8]\n"
		"                     [--scale F]\n"
		"                     [--branches N] [--tellers N] [--accounts N]\n"
		"                     [--systems tpfs,bdb,sqlite,lmdb,files] [--modes LIST] [--cache-mb MB]\n"
		"                     [--pairs N] [--bulk-runs N]\n");
}

static int parse_systems(const char *s)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	memset(opt.use, 0, sizeof opt.use);
	for (char *save, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; i < NSYS && strcmp(p, sys_key[i]); i++)
			;
		if (i == NSYS) {
			fprintf(stderr, "tpcb: unknown system '%s'\n", p);
			return -1;
		}
		opt.use[i] = 1;
	}
	return 0;
}

static int parse_threads(const char *s)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	opt.nthreads = 0;
	for (char *save, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		int n = atoi(p);
		if (n < 1 || n > MAXTHREADS || opt.nthreads == NTHREADS_MAX) {
			fprintf(stderr, "tpcb: bad thread list '%s'\n", s);
			return -1;
		}
		opt.threads[opt.nthreads++] = n;
	}
	return opt.nthreads ? 0 : -1;
}

static int parse(int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			usage();
			return -1;
		}
		i++;
		if (!strcmp(a, "--dir"))
			opt.dir = v;
		else if (!strcmp(a, "--seconds"))
			opt.seconds = atof(v);
		else if (!strcmp(a, "--warmup"))
			opt.warmup = atof(v);
		else if (!strcmp(a, "--slices"))
			opt.rounds = atoi(v);
		else if (!strcmp(a, "--threads")) {
			if (parse_threads(v))
				return -1;
		} else if (!strcmp(a, "--scale")) {
			double f = atof(v);
			opt.branches = (uint32_t)(10 * f + 0.5);
			opt.tellers = (uint32_t)(100 * f + 0.5);
			opt.accounts = (uint32_t)(100000 * f + 0.5);
		} else if (!strcmp(a, "--branches"))
			opt.branches = (uint32_t)atol(v);
		else if (!strcmp(a, "--tellers"))
			opt.tellers = (uint32_t)atol(v);
		else if (!strcmp(a, "--accounts"))
			opt.accounts = (uint32_t)atol(v);
		else if (!strcmp(a, "--systems")) {
			if (parse_systems(v))
				return -1;
		} else if (!strcmp(a, "--cache-mb"))
			opt.cache_mb = (size_t)atol(v);
		else if (!strcmp(a, "--pairs"))
			opt.pairs = (uint32_t)atol(v);
		else if (!strcmp(a, "--bulk-runs"))
			opt.bulk_reps = atoi(v);
		else if (!strcmp(a, "--modes"))
			opt.modes = v;
		else {
			usage();
			return -1;
		}
	}
	if (opt.branches < 1 || opt.tellers < opt.branches || opt.accounts < opt.branches ||
	    opt.tellers % opt.branches || opt.accounts % opt.branches) {
		fprintf(stderr, "tpcb: need 1 <= branches, and tellers and accounts multiples of branches\n");
		return -1;
	}
	if (opt.seconds <= 0 || opt.rounds < 1 || opt.rounds > 64 || opt.bulk_reps < 1 || opt.bulk_reps > 16) {
		fprintf(stderr, "tpcb: need seconds > 0, 1 <= slices <= 64, 1 <= bulk runs <= 16\n");
		return -1;
	}
	return 0;
}

/* ---- the TPC-B run ---- */

static int mode_wanted(const char *name)
{
	char buf[256];
	if (!opt.modes)
		return 1;
	snprintf(buf, sizeof buf, "%s", opt.modes);
	for (char *save, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
		if (!strcasecmp(p, name))
			return 1;
	return 0;
}

static uint64_t rng(uint64_t *s)
{
	uint64_t x = *s; /* xorshift64* */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void pick(uint64_t *seed, tpcb_args *a)
{
	uint32_t tpb = opt.tellers / opt.branches, apb = opt.accounts / opt.branches;
	a->teller = (uint32_t)(rng(seed) % opt.tellers);
	a->branch = a->teller / tpb;
	uint32_t ab = a->branch;
	if (opt.branches > 1 && rng(seed) % 100 >= 85)
		ab = (uint32_t)((a->branch + 1 + rng(seed) % (opt.branches - 1)) % opt.branches);
	a->account = ab * apb + (uint32_t)(rng(seed) % apb);
	a->delta = (int32_t)(rng(seed) % 199999) - 99999;
	a->time = now_us();
}

typedef struct worker {
	const tpcb_system *sys;
	void *h; /* from worker_open, kept for all measurements of a mode */
	atomic_int *stop;
	atomic_uint_fast64_t *hseq;
	uint64_t seed, commits, retries;
	int err;
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		tpcb_args a;
		pick(&w->seed, &a);
		a.hseq = atomic_fetch_add(w->hseq, 1);
		if ((w->err = w->sys->txn(w->h, &a, &w->retries)) != 0)
			break;
		w->commits++;
	}
	return NULL;
}

typedef struct result {
	int ran;        /* measured at least once */
	double secs;    /* measured time, summed over the rounds */
	uint64_t commits, retries;
	int ok;         /* every check passed */
	char note[256]; /* the engine's counters over the last slice */
} result;

static double tps(const result *r) { return r->secs > 0 ? (double)r->commits / r->secs : 0; }

static result res[NSYS][MAXMODES][NTHREADS_MAX];
static double flush_us_start;                /* the probe before everything */
static double flush_probe[64 * NTHREADS_MAX]; /* flush limits, one before each thread count of each round */
static int nflush;

/* One slice: secs with nthreads threads using handles h[0..], added to r;
 * *commits is the slice's.  -1 on an error (printed). */
static int measure(const tpcb_system *sys, void *db, void **h, int nthreads, double secs, atomic_uint_fast64_t *hseq,
		   result *r, uint64_t *commits)
{
	worker w[MAXTHREADS];
	pthread_t th[MAXTHREADS];
	atomic_int stop = 0;
	int err = 0;
	r->note[0] = 0;
	if (sys->stats)
		sys->stats(db, 1, 0, r->note, sizeof r->note);
	double a = bench_now();
	for (int i = 0; i < nthreads; i++) {
		w[i] = (worker){.sys = sys,
				.h = h[i],
				.stop = &stop,
				.hseq = hseq,
				.seed = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ (uint64_t)(a * 1e6)};
		if (pthread_create(&th[i], NULL, work, &w[i]) != 0) {
			fprintf(stderr, "tpcb: cannot start a thread\n");
			exit(1);
		}
	}
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, 1);
	uint64_t c = 0, rt = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		if (w[i].err)
			err = w[i].err;
		c += w[i].commits;
		rt += w[i].retries;
	}
	double el = bench_now() - a;
	if (sys->stats)
		sys->stats(db, 0, c, r->note, sizeof r->note);
	r->secs += el;
	r->commits += c;
	r->retries += rt;
	r->ran = 1;
	*commits = c;
	return err ? -1 : 0;
}

static int check(const tpcb_system *sys, void *db, const char *mode, int nthreads, uint64_t hist_n)
{
	tpcb_sums s;
	if (sys->sums(db, &s) != 0) {
		fprintf(stderr, "tpcb: %s %s: the check could not read the store\n", sys->name, mode);
		return 0;
	}
	int ok = s.accounts == s.tellers && s.tellers == s.branches && s.branches == s.history && s.history_n == hist_n;
	if (!ok)
		fprintf(stderr,
			"tpcb: %s %s %d threads: check FAILED: sums accounts %" PRId64 ", tellers %" PRId64
			", branches %" PRId64 ", history %" PRId64 "; %" PRIu64 " history records for %" PRIu64
			" commits\n",
			sys->name, mode, nthreads, s.accounts, s.tellers, s.branches, s.history, s.history_n, hist_n);
	return ok;
}

static void print_env(void)
{
	struct utsname u;
	time_t t = time(NULL);
	char date[64];
	uname(&u);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
	double load[3] = {0, 0, 0};
	if (getloadavg(load, 3) < 0)
		load[0] = -1;
	printf("date %s; %ld cores; %s %s %s; load average %.2f; dir %s\n", date, sysconf(_SC_NPROCESSORS_ONLN),
	       u.sysname, u.release, u.machine, load[0], opt.dir);
}

static int cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

/* The median of the flush limits probed during the run (0: none). */
static double flush_median(double *lo, double *hi)
{
	double v[sizeof flush_probe / sizeof flush_probe[0]];
	if (!nflush)
		return *lo = *hi = 0;
	memcpy(v, flush_probe, (size_t)nflush * sizeof v[0]);
	qsort(v, (size_t)nflush, sizeof v[0], cmp_dbl);
	*lo = v[0];
	*hi = v[nflush - 1];
	return nflush % 2 ? v[nflush / 2] : (v[nflush / 2 - 1] + v[nflush / 2]) / 2;
}

static int mode_of(size_t s, const char *name)
{
	for (int m = 0; m < all_systems[s]->nmodes; m++)
		if (!strcmp(all_systems[s]->modes[m].name, name))
			return m;
	return -1;
}

/* tpfs's mode in class cls (its modes are one per class). */
static int tpfs_mode(int cls)
{
	for (int m = 0; m < tpcb_tpfs.nmodes; m++)
		if (tpcb_tpfs.modes[m].cls == cls)
			return m;
	return -1;
}

static int thread_index(int n)
{
	for (int k = 0; k < opt.nthreads; k++)
		if (opt.threads[k] == n)
			return k;
	return -1;
}

static void target(const char *what, int have, double got, double want)
{
	if (!have)
		printf("- %s: not measured\n", what);
	else
		printf("- %s: %.2f (target %.2f): %s\n", what, got, want, got >= want ? "met" : "NOT met");
}

static void report(void)
{
	double lo, hi, fmed = flush_median(&lo, &hi);
	printf("\n### TPC-B transactions per second\n\n");
	printf("branches %" PRIu32 ", tellers %" PRIu32 ", accounts %" PRIu32 "; %g s per figure in %d interleaved slices "
	       "after a %g s warm-up per mode; cache %zu MiB each\n\n",
	       opt.branches, opt.tellers, opt.accounts, opt.seconds, opt.rounds, opt.warmup, opt.cache_mb);
	printf("| system | mode | class |");
	for (int k = 0; k < opt.nthreads; k++)
		printf(" %d thr |", opt.threads[k]);
	printf(" retries | check | durability |\n|---|---|---|");
	for (int k = 0; k < opt.nthreads; k++)
		printf("---:|");
	printf("---:|---|---|\n");
	for (size_t s = 0; s < NSYS; s++) {
		const tpcb_system *sys = all_systems[s];
		for (int m = 0; m < sys->nmodes; m++) {
			uint64_t rt = 0;
			int ok = 1, ran = 0;
			for (int k = 0; k < opt.nthreads; k++)
				ran |= res[s][m][k].ran;
			if (!ran)
				continue;
			printf("| %s | %s | %s |", sys->name, sys->modes[m].name, class_name[sys->modes[m].cls]);
			for (int k = 0; k < opt.nthreads; k++) {
				result *r = &res[s][m][k];
				if (r->ran)
					printf(" %.0f |", tps(r));
				else
					printf(" - |");
				rt += r->retries;
				ok &= !r->ran || r->ok == 1;
			}
			printf(" %" PRIu64 " | %s | %s |\n", rt, ok ? "OK" : "FAIL", sys->modes[m].durability);
		}
	}
	printf("\nThe disk's serial flush limit (1e6 / median us of a 4 KiB write+fdatasync on a preallocated file):\n"
	       "%.0f/s before the run; probed %d times during it (before each thread count of each slice): median %.0f/s,\n"
	       "range %.0f..%.0f/s.\n",
	       flush_us_start > 0 ? 1e6 / flush_us_start : 0, nflush, fmed, lo, hi);

	printf("\n### Ratios: tpfs / peer at equal durability (tpfs's mode of the peer's class)\n\n| tpfs mode | peer | peer mode |");
	for (int k = 0; k < opt.nthreads; k++)
		printf(" %d thr |", opt.threads[k]);
	printf("\n|---|---|---|");
	for (int k = 0; k < opt.nthreads; k++)
		printf("---:|");
	printf("\n");
	for (size_t s = 1; s < NSYS; s++) {
		const tpcb_system *sys = all_systems[s];
		for (int m = 0; m < sys->nmodes; m++) {
			int tm = tpfs_mode(sys->modes[m].cls), ran = 0;
			for (int k = 0; k < opt.nthreads; k++)
				ran |= res[s][m][k].ran;
			if (tm < 0 || !ran)
				continue;
			printf("| %s | %s | %s |", tpcb_tpfs.modes[tm].name, sys->name, sys->modes[m].name);
			for (int k = 0; k < opt.nthreads; k++) {
				result *p = &res[s][m][k], *t = &res[0][tm][k];
				if (p->ran && t->ran && tps(p) > 0)
					printf(" %.2fx |", tps(t) / tps(p));
				else
					printf(" - |");
			}
			printf("\n");
		}
	}

	printf("\n### Targets (reported, not asserted)\n\n");
	int td = mode_of(0, "durable"), tn = mode_of(0, "nosync"), tu = mode_of(0, "unprotected");
	int bd = mode_of(1, "durable"), bn = mode_of(1, "nosync");
	int k1 = thread_index(1), k8 = thread_index(8);
	result z = {0};
	result *t1 = k1 >= 0 ? &res[0][td][k1] : &z, *t8 = k8 >= 0 ? &res[0][td][k8] : &z;
	result *b1 = k1 >= 0 ? &res[1][bd][k1] : &z, *b8 = k8 >= 0 ? &res[1][bd][k8] : &z;
	target("1 thread, durable: tpfs / Berkeley DB", t1->ran && b1->ran && tps(b1) > 0,
	       tps(b1) > 0 ? tps(t1) / tps(b1) : 0, 1.2);
	target("1 thread, durable: tpfs / the disk's serial flush limit (median of the probes)", t1->ran && fmed > 0,
	       fmed > 0 ? tps(t1) / fmed : 0, 0.75);
	target("8 threads, durable: tpfs / Berkeley DB", t8->ran && b8->ran && tps(b8) > 0,
	       tps(b8) > 0 ? tps(t8) / tps(b8) : 0, 3.0);
	for (int k = 0; k < opt.nthreads; k++) {
		char what[128];
		result *tr = &res[0][tn][k], *br = &res[1][bn][k];
		int n = opt.threads[k];
		snprintf(what, sizeof what, "%d thread%s, no sync: tpfs / Berkeley DB DB_TXN_NOSYNC", n, n > 1 ? "s" : "");
		target(what, tr->ran && br->ran && tps(br) > 0, tps(br) > 0 ? tps(tr) / tps(br) : 0, 1.0);
	}
	for (int k = 0; k < opt.nthreads; k++) {
		char what[128];
		result *tr = &res[0][tn][k], *ur = &res[0][tu][k];
		int n = opt.threads[k];
		snprintf(what, sizeof what, "%d thread%s: tpfs nosync / the same trees unprotected (NOTXN%s)", n,
			 n > 1 ? "s" : "", n > 1 ? ", serialized by a global mutex" : "");
		target(what, tr->ran && ur->ran && tps(ur) > 0, tps(ur) > 0 ? tps(tr) / tps(ur) : 0, 0.85);
	}
	/* the same ratio for Berkeley DB, LIBTP's descendant: what protection
	 * costs a mature engine when the data is in memory (no target) */
	int bu = mode_of(1, "unprotected");
	for (int k = 0; bu >= 0 && bn >= 0 && k < opt.nthreads; k++) {
		result *br = &res[1][bn][k], *ur = &res[1][bu][k];
		int n = opt.threads[k];
		if (br->ran && ur->ran && tps(ur) > 0)
			printf("- for reference, %d thread%s: Berkeley DB DB_TXN_NOSYNC / its trees unprotected "
			       "(DB_INIT_MPOOL alone): %.2f\n",
			       n, n > 1 ? "s" : "", tps(br) / tps(ur));
	}
}

/* A mode's worker handles, kept open for the whole run. */
static void *handles[NSYS][MAXMODES][MAXTHREADS];
static int nhandles[NSYS][MAXMODES];

static void close_handles(size_t s, int m)
{
	for (int i = 0; i < nhandles[s][m]; i++)
		all_systems[s]->worker_close(handles[s][m][i]);
	nhandles[s][m] = 0;
}

/* Opens system s (load) and readies its modes: handles, the starting
 * history count of each store, a warm-up.  Modes that fail are skipped
 * (ready[m] == 0). */
static int prepare(size_t s, const tpcb_cfg *cfg, void **db, int *ready, uint64_t *hist_known,
		   atomic_uint_fast64_t *hseq)
{
	const tpcb_system *sys = all_systems[s];
	int failed = 0;
	fprintf(stderr, "%s (%s)\n", sys->name, sys->notes);
	if (sys->open(cfg, db) != 0) {
		fprintf(stderr, "tpcb: %s: could not open and load; skipped\n", sys->name);
		return 1;
	}
	for (int m = 0; m < sys->nmodes; m++) {
		const tpcb_mode *md = &sys->modes[m];
		result warm = {0};
		tpcb_sums s0;
		uint64_t c = 0;
		ready[m] = 0;
		if (!mode_wanted(md->name))
			continue;
		if (sys->set_mode(*db, m) != 0)
			goto bad;
		for (; nhandles[s][m] < cfg->max_threads; nhandles[s][m]++)
			if (sys->worker_open(*db, &handles[s][m][nhandles[s][m]]) != 0)
				goto bad;
		if (sys->sums(*db, &s0) != 0)
			goto bad;
		hist_known[md->store] = s0.history_n;
		if (opt.warmup > 0 && measure(sys, *db, handles[s][m], cfg->max_threads, opt.warmup, hseq, &warm, &c) != 0)
			goto bad;
		hist_known[md->store] += c;
		ready[m] = 1;
		continue;
	bad:
		fprintf(stderr, "tpcb: %s: mode %s failed to start; skipped\n", sys->name, md->name);
		close_handles(s, m);
		failed = 1;
	}
	return failed;
}

static int run_tpcb(void)
{
	tpcb_cfg cfg = {
		.dir = opt.dir,
		.branches = opt.branches,
		.tellers = opt.tellers,
		.accounts = opt.accounts,
		.cache_bytes = opt.cache_mb << 20,
	};
	void *db[NSYS] = {0};
	int ready[NSYS][MAXMODES] = {{0}}, failed = 0;
	uint64_t hist_known[NSYS][TPCB_MAXSTORES] = {{0}};
	atomic_uint_fast64_t hseq[NSYS];
	double slice = opt.seconds / opt.rounds;

	for (int k = 0; k < opt.nthreads; k++)
		if (opt.threads[k] > cfg.max_threads)
			cfg.max_threads = opt.threads[k];
	print_env();
	flush_us_start = bench_flush_us(opt.dir);
	printf("disk: 4 KiB write+fdatasync on a preallocated file: median %.0f us -> serial flush limit %.0f/s\n",
	       flush_us_start, 1e6 / flush_us_start);
	fflush(stdout);
	for (size_t s = 0; s < NSYS; s++) {
		atomic_init(&hseq[s], 1);
		if (opt.use[s] && prepare(s, &cfg, &db[s], ready[s], hist_known[s], &hseq[s]) != 0)
			failed = 1;
	}
	/* Interleaved: each figure is the sum of rounds slices, and one round
	 * measures every configuration once, so a change in the machine's load
	 * (these machines are shared) falls on every system alike. */
	for (int r = 0; r < opt.rounds; r++) {
		int last = r == opt.rounds - 1;
		fprintf(stderr, "slice %d of %d (%g s per configuration)%s\n", r + 1, opt.rounds, slice,
			last ? "; each configuration is checked after its last slice" : "");
		for (int k = 0; k < opt.nthreads; k++) {
			if (nflush < (int)(sizeof flush_probe / sizeof flush_probe[0]))
				flush_probe[nflush++] = 1e6 / bench_flush_us(opt.dir);
			for (size_t s = 0; s < NSYS; s++) {
				const tpcb_system *sys = all_systems[s];
				for (int m = 0; db[s] && m < sys->nmodes; m++) {
					result *re = &res[s][m][k];
					const tpcb_mode *md = &sys->modes[m];
					uint64_t c = 0;
					int rc;
					if (!ready[s][m])
						continue;
					if ((rc = sys->set_mode(db[s], m)) == 0)
						rc = measure(sys, db[s], handles[s][m], opt.threads[k], slice, &hseq[s], re, &c);
					hist_known[s][md->store] += c;
					if (rc)
						re->ok = -1; /* failed: stays FAIL */
					if (!last)
						continue;
					int ok = rc == 0 && re->ok != -1 &&
						 check(sys, db[s], md->name, opt.threads[k], hist_known[s][md->store]);
					re->ok = ok;
					failed |= !ok;
					fprintf(stderr, "  %-6s %-12s %2d thr: %8.0f tps  retries %-6" PRIu64 " check %s%s%s\n",
						sys->name, md->name, opt.threads[k], tps(re), re->retries, ok ? "OK" : "FAIL",
						re->note[0] ? "  last slice: " : "", re->note);
				}
			}
		}
	}
	for (size_t s = 0; s < NSYS; s++) {
		for (int m = 0; m < all_systems[s]->nmodes; m++)
			close_handles(s, m);
		if (db[s])
			all_systems[s]->close(db[s]);
	}
	report();
	return failed;
}

/* ---- bulk ---- */

/* LLADD's bulk test, repeated opt.bulk_reps times round-robin over the
 * systems (a change in the machine's load falls on all); the median time
 * of each system is reported. */
static int run_bulk(void)
{
	double secs[NSYS][16], med[NSYS] = {0};
	int ran[NSYS] = {0}, failed = 0;
	print_env();
	fprintf(stderr, "bulk: one transaction inserting %" PRIu32 " (uint32, uint32) pairs in key order, %d times each\n",
		opt.pairs, opt.bulk_reps);
	for (int r = 0; r < opt.bulk_reps; r++) {
		for (size_t s = 0; s < NSYS; s++) {
			if (!opt.use[s] || !all_systems[s]->bulk || ran[s] < r)
				continue;
			if (all_systems[s]->bulk(opt.dir, opt.pairs, &secs[s][r]) != 0) {
				fprintf(stderr, "tpcb: bulk on %s failed\n", all_systems[s]->name);
				failed = 1;
				continue;
			}
			ran[s]++;
			fprintf(stderr, "  %-6s %.2f s\n", all_systems[s]->name, secs[s][r]);
		}
	}
	for (size_t s = 0; s < NSYS; s++) {
		if (ran[s] < opt.bulk_reps) {
			ran[s] = 0;
			continue;
		}
		qsort(secs[s], (size_t)ran[s], sizeof secs[s][0], cmp_dbl);
		med[s] = ran[s] % 2 ? secs[s][ran[s] / 2] : (secs[s][ran[s] / 2 - 1] + secs[s][ran[s] / 2]) / 2;
	}
	printf("\n### Bulk load: one durable transaction inserting %" PRIu32
	       " (uint32 key, uint32 value) pairs in key order\n\n"
	       "median of %d runs, round-robin over the systems; time from begin to durable commit\n\n",
	       opt.pairs, opt.bulk_reps);
	printf("| system | seconds | fastest run | pairs/s | tpfs time / its time |\n|---|---:|---:|---:|---:|\n");
	for (size_t s = 0; s < NSYS; s++) {
		if (!ran[s])
			continue;
		printf("| %s | %.2f | %.2f | %.0f |", all_systems[s]->name, med[s], secs[s][0], opt.pairs / med[s]);
		if (ran[0])
			printf(" %.2f |\n", med[0] / med[s]);
		else
			printf(" - |\n");
	}
	printf("\n### Bulk targets (reported, not asserted)\n\n");
	size_t sq = 2, lm = 3;
	if (ran[0] && ran[sq])
		printf("- tpfs no slower than SQLite: %.2f s vs %.2f s: %s\n", med[0], med[sq],
		       med[0] <= med[sq] ? "met" : "NOT met");
	if (ran[0] && ran[lm])
		printf("- aim, LMDB's time: %.2f s vs %.2f s: %s\n", med[0], med[lm],
		       med[0] <= med[lm] ? "reached" : "not reached");
	return failed;
}

int main(int argc, char **argv)
{
	if (argc < 2 || parse(argc, argv) != 0) {
		if (argc < 2)
			usage();
		return 2;
	}
	if (mkdir(opt.dir, 0755) != 0 && errno != EEXIST) {
		perror(opt.dir);
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "run"))
		return run_tpcb();
	if (!strcmp(argv[1], "bulk"))
		return run_bulk();
	usage();
	return 2;
}
