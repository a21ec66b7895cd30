/*
 * benchutil -- see benchutil.h.
 */
#include "benchutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double bench_flush_us(const char *dir)
{
	enum { N = 200, BLOCKS = 1024 };
	char path[4096];
	static char buf[4096];
	double t[N];
	snprintf(path, sizeof path, "%s/flushprobe", dir);
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	for (int i = 0; i < BLOCKS; i++) /* 4 MiB of real blocks */
		if (pwrite(fd, buf, sizeof buf, (off_t)i * 4096) != 4096) {
			perror("pwrite");
			exit(1);
		}
	if (fsync(fd) != 0) {
		perror("fsync");
		exit(1);
	}
	for (int i = 0; i < N; i++) {
		double a = bench_now();
		if (pwrite(fd, buf, sizeof buf, (off_t)(i % BLOCKS) * 4096) != 4096 || fdatasync(fd) != 0) {
			perror("flush probe");
			exit(1);
		}
		t[i] = (bench_now() - a) * 1e6;
	}
	close(fd);
	unlink(path);
	qsort(t, N, sizeof t[0], cmp_dbl);
	return t[N / 2];
}
