/*
 * benchutil -- helpers shared by the benchmarks in tests/bench (tpbench,
 * tpcb): a monotonic clock and the disk's serial flush probe, the peer every
 * durable figure is compared with.
 */
#ifndef BENCHUTIL_H
#define BENCHUTIL_H

/* Seconds on the monotonic clock. */
double bench_now(void);

/* Median microseconds of one 4 KiB pwrite+fdatasync inside a preallocated
 * file in dir (200 samples); exits with a message if the probe fails.
 * 1e6 / this is the disk's serial flush limit: the most durable commits per
 * second one thread can make if each needs one flush. */
double bench_flush_us(const char *dir);

#endif
