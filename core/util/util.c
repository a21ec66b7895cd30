/*
 * util -- CRC-32C, per-thread error messages, the clock.
 *
 * CRC-32C uses the SSE4.2 crc32 instruction when the CPU has it (checked
 * once) and a table-driven slicing-by-1 loop otherwise; both give the same
 * value, which a unit test checks against the standard test vector
 * ("123456789" -> 0xe3069283).  The instruction has a latency of three
 * cycles and a throughput of one, so a buffer of at least 3 * CRC_L bytes
 * (a page) is taken in blocks of three streams of CRC_L bytes computed
 * side by side, then joined: the CRC of A then B is the CRC of A moved
 * past |B| zero bytes, xor the CRC of B started from zero.  Moving past
 * CRC_L zero bytes is a linear map of the 32-bit register, applied with
 * four 256-entry tables built once (from the map of one zero bit, squared
 * up, as zlib's crc32_combine does).
 */
#include "util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tp.h" /* the engine's error codes (their values only) */

#define CRC_POLY 0x82f63b78u
#define CRC_L 1360 /* bytes per stream: 3 * CRC_L fits a 4 KiB page's 4092 */

static uint32_t crc_table[256];
static uint32_t crc_shift_l[4][256]; /* the register moved past CRC_L zero bytes */
static int crc_hw; /* 0 table, 1 sse4.2; set once by crc_init */
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* m applied to v: m is a 32x32 matrix over GF(2), column i = m[i]. */
static uint32_t gf2_times(const uint32_t *m, uint32_t v)
{
	uint32_t r = 0;
	for (int i = 0; v; i++, v >>= 1)
		if (v & 1)
			r ^= m[i];
	return r;
}

static void gf2_square(uint32_t *sq, const uint32_t *m)
{
	for (int i = 0; i < 32; i++)
		sq[i] = gf2_times(m, m[i]);
}

/* crc_shift_l: the map of one zero bit, squared up to 8 * CRC_L bits. */
static void crc_shift_init(void)
{
	uint32_t m[32], t[32], acc[32];
	int have = 0;
	m[0] = CRC_POLY; /* one zero bit */
	for (int i = 1; i < 32; i++)
		m[i] = 1u << (i - 1);
	for (uint64_t bits = 8ull * CRC_L; bits; bits >>= 1) {
		if (bits & 1) {
			if (!have) {
				memcpy(acc, m, sizeof acc);
				have = 1;
			} else {
				for (int i = 0; i < 32; i++)
					t[i] = gf2_times(m, acc[i]);
				memcpy(acc, t, sizeof acc);
			}
		}
		gf2_square(t, m);
		memcpy(m, t, sizeof m);
	}
	for (int k = 0; k < 4; k++)
		for (uint32_t b = 0; b < 256; b++)
			crc_shift_l[k][b] = gf2_times(acc, b << (8 * k));
}

static uint32_t crc_shift(uint32_t c)
{
	return crc_shift_l[0][c & 0xff] ^ crc_shift_l[1][(c >> 8) & 0xff] ^ crc_shift_l[2][(c >> 16) & 0xff] ^
	       crc_shift_l[3][c >> 24];
}

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC_POLY : c >> 1;
		crc_table[i] = c;
	}
	crc_shift_init();
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
	crc_hw = 0;
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;
	while (len >= 3 * CRC_L) { /* three streams side by side, then joined */
		uint64_t a = c, b = 0, d = 0;
		for (size_t i = 0; i < CRC_L; i += 8) {
			a = __builtin_ia32_crc32di(a, util_get64(p + i));
			b = __builtin_ia32_crc32di(b, util_get64(p + CRC_L + i));
			d = __builtin_ia32_crc32di(d, util_get64(p + 2 * CRC_L + i));
		}
		c = crc_shift(crc_shift((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
		p += 3 * CRC_L;
		len -= 3 * CRC_L;
	}
	while (len >= 8) {
		c = __builtin_ia32_crc32di(c, util_get64(p));
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = __builtin_ia32_crc32qi(c32, *p++);
	return c32;
}
#endif

uint32_t util_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	pthread_once(&crc_once, crc_init);
	crc = ~crc;
#if defined(__x86_64__)
	if (crc_hw == 1)
		return ~crc_sse(crc, p, len);
#endif
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static _Thread_local char errbuf[512];

int util_err(int rc, const char *fmt, ...)
{
	char tmp[sizeof errbuf]; /* the arguments may include util_errmsg() itself */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	memcpy(errbuf, tmp, sizeof errbuf);
	return rc;
}

const char *util_errmsg(void) { return errbuf; }
void util_err_clear(void) { errbuf[0] = 0; }

uint64_t util_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void util_cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

void util_mutex_init_hot(pthread_mutex_t *mu)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(mu, &a);
	pthread_mutexattr_destroy(&a);
}

struct timespec util_deadline_ns(uint64_t ns)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (time_t)(ns / 1000000000u);
	t.tv_nsec += (long)(ns % 1000000000u);
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

const char *util_strerror(int rc)
{
	switch (rc) {
	case 0: return "success";
	case TP_ENOTFOUND: return "not found";
	case TP_EDEADLOCK: return "deadlock victim";
	case TP_ECORRUPT: return "store corrupt";
	case TP_EPANIC: return "store needs recovery after a write failure";
	case TP_EVERSION: return "store format too new";
	case TP_EBADSTORE: return "not a tpfs store";
	case TP_EINVAL: return "invalid argument";
	case TP_EROLLBACK: return "transaction must be aborted";
	case TP_ETIMEOUT: return "lock wait timed out";
	default: return rc > 0 ? strerror(rc) : "unknown engine error";
	}
}

void util_check_failed(const char *what, const char *file, int line)
{
	fprintf(stderr, "tpfs: %s:%d: engine check failed: %s\n", file, line, what);
	abort();
}
