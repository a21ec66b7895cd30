/*
 * util -- CRC-32C, per-thread error messages, the clock.
 *
 * CRC-32C uses the SSE4.2 crc32 instruction when the CPU has it (checked
 * once) and a table-driven slicing-by-1 loop otherwise; both give the same
 * value, which a unit test checks against the standard test vector
 * ("123456789" -> 0xe3069283).
 */
#include "util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static uint32_t crc_table[256];
static int crc_hw; /* 0 table, 1 sse4.2; set once by crc_init */
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
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
