/*
 * test_util -- CRC-32C (hardware and table paths against a bitwise
 * reference and the standard vectors), per-thread error messages,
 * little-endian encoding, the clock, and the engine's error strings.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tp.h"
#include "util.h"

/* Bitwise CRC-32C: the definition, slow and obviously right. */
static uint32_t crc_ref(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
	}
	return ~crc;
}

static void pattern(unsigned char *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

TestSuite(crc, .timeout = 30);

Test(crc, standard_vector)
{
	cr_assert_eq(util_crc32c(0, "123456789", 9), 0xe3069283u);
	cr_assert_eq(crc_ref(0, "123456789", 9), 0xe3069283u, "the reference itself is right");
}

Test(crc, empty_is_zero_and_identity)
{
	cr_assert_eq(util_crc32c(0, "", 0), 0);
	cr_assert_eq(util_crc32c(0x12345678u, "x", 0), 0x12345678u, "no bytes: the crc passes through");
}

/* RFC 3720 (iSCSI) B.4 vectors */
Test(crc, rfc3720_vectors)
{
	unsigned char b[32];
	memset(b, 0, sizeof b);
	cr_assert_eq(util_crc32c(0, b, 32), 0x8a9136aau);
	memset(b, 0xff, sizeof b);
	cr_assert_eq(util_crc32c(0, b, 32), 0x62a8ab43u);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)i;
	cr_assert_eq(util_crc32c(0, b, 32), 0x46dd794eu);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)(31 - i);
	cr_assert_eq(util_crc32c(0, b, 32), 0x113fdb5cu);
}

/* Every length 0..300 at every alignment 0..15: the 8-byte stride of the
 * hardware path and its byte tail must agree with the definition. */
Test(crc, matches_reference_all_lengths_and_alignments)
{
	static unsigned char buf[512];
	pattern(buf, sizeof buf, 7);
	for (size_t a = 0; a < 16; a++)
		for (size_t len = 0; len <= 300; len++)
			cr_assert_eq(util_crc32c(0, buf + a, len), crc_ref(0, buf + a, len), "align %zu len %zu", a, len);
}

/* Lengths around and well past the three-stream blocks of the hardware
 * path (3 * 1360 bytes: a page's 4092 takes one block and a tail), at
 * several alignments and starting values: the joined streams must agree
 * with the definition. */
Test(crc, three_stream_blocks_match_reference)
{
	static unsigned char buf[20000 + 16];
	pattern(buf, sizeof buf, 11);
	const uint32_t starts[] = {0, 0xffffffffu, 0x12345678u};
	for (size_t a = 0; a < 16; a += 5)
		for (size_t s = 0; s < 3; s++) {
			for (size_t len = 4070; len <= 4200; len++)
				cr_assert_eq(util_crc32c(starts[s], buf + a, len), crc_ref(starts[s], buf + a, len),
					     "align %zu len %zu", a, len);
			for (size_t len = 8150; len <= 20000; len += 997)
				cr_assert_eq(util_crc32c(starts[s], buf + a, len), crc_ref(starts[s], buf + a, len),
					     "align %zu len %zu", a, len);
		}
}

Test(crc, incremental_equals_one_shot)
{
	static unsigned char buf[10007];
	pattern(buf, sizeof buf, 3);
	uint32_t whole = util_crc32c(0, buf, sizeof buf);
	cr_assert_eq(whole, crc_ref(0, buf, sizeof buf));
	for (size_t cut = 0; cut <= sizeof buf; cut += 97) {
		uint32_t c = util_crc32c(0, buf, cut);
		c = util_crc32c(c, buf + cut, sizeof buf - cut);
		cr_assert_eq(c, whole, "split at %zu", cut);
	}
	/* many small pieces of odd sizes */
	uint32_t c = 0;
	size_t pos = 0, step = 1;
	while (pos < sizeof buf) {
		size_t k = step < sizeof buf - pos ? step : sizeof buf - pos;
		c = util_crc32c(c, buf + pos, k);
		pos += k;
		step = step % 13 + 1;
	}
	cr_assert_eq(c, whole);
}

Test(crc, detects_every_single_bit_flip)
{
	unsigned char buf[256];
	pattern(buf, sizeof buf, 11);
	uint32_t c = util_crc32c(0, buf, sizeof buf);
	for (size_t i = 0; i < sizeof buf * 8; i++) {
		buf[i / 8] ^= (unsigned char)(1u << (i % 8));
		cr_assert_neq(util_crc32c(0, buf, sizeof buf), c, "bit %zu", i);
		buf[i / 8] ^= (unsigned char)(1u << (i % 8));
	}
}

static void *crc_thread(void *arg)
{
	unsigned char buf[4096];
	uintptr_t seed = (uintptr_t)arg;
	for (int i = 0; i < 200; i++) {
		pattern(buf, sizeof buf, (uint32_t)(seed * 1000 + (uintptr_t)i));
		if (util_crc32c(0, buf, sizeof buf) != crc_ref(0, buf, sizeof buf))
			return (void *)1;
	}
	return NULL;
}

/* The first calls race to initialize the table and the CPU check. */
Test(crc, first_use_from_many_threads)
{
	pthread_t th[8];
	for (uintptr_t i = 0; i < 8; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, crc_thread, (void *)i), 0);
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(th[i], &r);
		cr_assert_null(r, "thread %d computed a wrong crc", i);
	}
}

TestSuite(err, .timeout = 30);

Test(err, returns_rc_and_formats)
{
	util_err_clear();
	cr_assert_str_empty(util_errmsg());
	int rc = util_err(TP_ECORRUPT, "%s: page %d: %s", "/s/data", 42, "checksum mismatch");
	cr_assert_eq(rc, TP_ECORRUPT);
	cr_assert_str_eq(util_errmsg(), "/s/data: page 42: checksum mismatch");
	cr_assert_str_eq(tp_errmsg(), util_errmsg(), "tp_errmsg is the same message");
	cr_assert_eq(util_err(EIO, "x"), EIO);
	cr_assert_str_eq(util_errmsg(), "x", "a new error replaces the old message");
	util_err_clear();
	cr_assert_str_empty(util_errmsg());
}

/* Callers wrap a lower layer's message: util_err(rc, "...: %s",
 * util_errmsg()) (rec.c does).  The result must be the outer text followed
 * by the inner message, not a mix of the buffer being overwritten. */
Test(err, may_wrap_the_previous_message)
{
	util_err(TP_ECORRUPT, "/s/data: page 7: checksum mismatch");
	cr_assert_eq(util_err(TP_ECORRUPT, "redo failed: %s; the log holds no image", util_errmsg()), TP_ECORRUPT);
	cr_assert_str_eq(util_errmsg(), "redo failed: /s/data: page 7: checksum mismatch; the log holds no image");
	util_err(EIO, "inner");
	util_err(EIO, "%s", util_errmsg());
	cr_assert_str_eq(util_errmsg(), "inner");
	util_err(EIO, "inner");
	util_err(EIO, "%s; outer", util_errmsg());
	cr_assert_str_eq(util_errmsg(), "inner; outer");
}

Test(err, long_message_is_truncated_not_overflowed)
{
	char big[2000];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = 0;
	util_err(EINVAL, "%s-end", big);
	size_t n = strlen(util_errmsg());
	cr_assert_gt(n, 100);
	cr_assert_lt(n, sizeof big, "truncated to the buffer");
	cr_assert_eq(util_errmsg()[0], 'a');
}

static void *err_thread(void *arg)
{
	(void)arg;
	util_err(EIO, "message of the other thread");
	return (void *)(uintptr_t)(strcmp(util_errmsg(), "message of the other thread") == 0);
}

Test(err, message_is_per_thread)
{
	pthread_t th;
	void *ok;
	util_err(TP_EINVAL, "mine");
	cr_assert_eq(pthread_create(&th, NULL, err_thread, NULL), 0);
	pthread_join(th, &ok);
	cr_assert(ok, "the other thread sees its own message");
	cr_assert_str_eq(util_errmsg(), "mine", "another thread's error does not replace mine");
}

Test(err, engine_error_strings)
{
	const int codes[] = {TP_ENOTFOUND, TP_EDEADLOCK, TP_ECORRUPT, TP_EPANIC, TP_EVERSION,
			     TP_EBADSTORE, TP_EINVAL,    TP_EROLLBACK, TP_ETIMEOUT};
	const size_t n = sizeof codes / sizeof codes[0];
	for (size_t i = 0; i < n; i++) {
		cr_assert_lt(codes[i], 0, "engine codes are negative");
		const char *s = tp_strerror(codes[i]);
		cr_assert_not_null(s);
		cr_assert_str_neq(s, "", "code %d", codes[i]);
		cr_assert_str_neq(s, "unknown engine error", "code %d has its own text", codes[i]);
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(s, tp_strerror(codes[j]), "codes %d and %d share a text", codes[i], codes[j]);
	}
	cr_assert_str_eq(tp_strerror(0), "success");
	cr_assert_str_eq(tp_strerror(ENOSPC), strerror(ENOSPC), "errno values pass through");
	cr_assert_str_eq(tp_strerror(-1000), "unknown engine error");
}

TestSuite(enc, .timeout = 30);

Test(enc, little_endian_unaligned)
{
	unsigned char b[20];
	memset(b, 0xee, sizeof b);
	util_put16(b + 1, 0x1122);
	util_put32(b + 3, 0x33445566u);
	util_put64(b + 7, 0x778899aabbccddeeull);
	const unsigned char want[] = {0xee, 0x22, 0x11, 0x66, 0x55, 0x44, 0x33, 0xee, 0xdd,
				      0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0xee};
	cr_assert_arr_eq(b, want, sizeof want, "on-disk integers are little-endian");
	cr_assert_eq(util_get16(b + 1), 0x1122);
	cr_assert_eq(util_get32(b + 3), 0x33445566u);
	cr_assert_eq(util_get64(b + 7), 0x778899aabbccddeeull);
}

Test(enc, clock_is_monotonic)
{
	uint64_t a = util_now_ns();
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL);
	uint64_t b = util_now_ns();
	cr_assert_gt(b, a);
	cr_assert_geq(b - a, 2000000u, "slept 2 ms");
	cr_assert_lt(b - a, 2000000000u);
}
