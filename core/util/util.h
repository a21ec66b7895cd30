/*
 * util -- small pieces every engine module shares: CRC-32C checksums, the
 * thread's last error message, little-endian encoding, and the clock.
 */
#ifndef TP_UTIL_H
#define TP_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* CRC-32C (Castagnoli), hardware-accelerated where the CPU has SSE4.2. */
uint32_t util_crc32c(uint32_t crc, const void *buf, size_t len);

/* The calling thread's last error message: set where an error is found, so
 * the message names the file, page or record and the cause.  util_err
 * returns rc, so `return util_err(rc, "...", ...)` reports and fails. */
int util_err(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *util_errmsg(void);
void util_err_clear(void);
/* What an error code means: strerror for a positive errno, a short text
 * for the engine's own codes (TP_E*, defined in tp.h, the public
 * interface); tp_strerror is this function. */
const char *util_strerror(int rc);

/* Debug checks (core/DESIGN.md, "Checks"): TP_CHECK(cond) stops the
 * process with the file, line and condition when cond is false, in builds
 * with -Ddebug_checks=true (TP_DEBUG_CHECKS: every test build).  Elsewhere
 * cond is not evaluated (sizeof only names it, so its variables count as
 * used).  Conditions are cheap and have no side effects. */
#ifdef TP_DEBUG_CHECKS
#define TP_CHECK(cond) ((cond) ? (void)0 : util_check_failed(#cond, __FILE__, __LINE__))
#else
#define TP_CHECK(cond) ((void)sizeof(cond))
#endif
_Noreturn void util_check_failed(const char *what, const char *file, int line);

/* Monotonic clock; condition variables that wait on it, and the point
 * ns from now to wait until (pthread_cond_timedwait). */
uint64_t util_now_ns(void);
void util_cond_init_mono(pthread_cond_t *cv);
/* A mutex many threads take for a few hundred nanoseconds at a time (the
 * log's, the lock manager's, the pool's): adaptive, so a thread that finds
 * it held spins briefly before it sleeps in the kernel. */
void util_mutex_init_hot(pthread_mutex_t *mu);
struct timespec util_deadline_ns(uint64_t ns);

/* Little-endian fixed-width encoding, alignment-free. */
static inline void util_put16(void *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void util_put32(void *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void util_put64(void *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint16_t util_get16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t util_get32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t util_get64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }

#endif
