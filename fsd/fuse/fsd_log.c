/*
 * fsd_log.c -- the daemon's log (fsd_log.h).
 *
 * Where: stderr in the foreground; syslog (facility daemon) once
 * detached, where what the engine writes to stderr is forwarded too.  And,
 * once the store is mounted read-write, every message also goes to the
 * log file STORE/tpfsd.log (FSD_LOGFILE), so that nothing is lost on a
 * machine without syslog: mode 0600 like every store file (io.c I8, so
 * that be_private and `tpfs check` V7 find nothing open to others),
 * written only with pwrite at its end (as io.c writes the store: the fs
 * crash tests' power-cut shim journals it like the other store files),
 * and bounded: past FSD_LOGFILE_MAX bytes it becomes tpfsd.log.1, replacing
 * the one before, and a new one begins.  Not under -o ro: nothing is
 * written to the store then.  `tpfs stat` names it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fsd_log.h"

static int log_syslog; /* detached: syslog instead of stderr */
static int log_debug;  /* -d */

void fsd_log_to_syslog(void) { log_syslog = 1; }
void fsd_log_debug(int on) { log_debug = on; }

#define FSD_LOGFILE_MAX (1u << 20)
static pthread_mutex_t logfile_mu = PTHREAD_MUTEX_INITIALIZER;
static int logfile_fd = -1;        /* under logfile_mu; -1: none */
static uint64_t logfile_off;       /* under logfile_mu: its size */
static char logfile_path[PATH_MAX]; /* set once, before any thread */

static int logfile_open_locked(void)
{
	struct stat st;
	int fd = open(logfile_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	if (fchmod(fd, 0600) != 0 || fstat(fd, &st) != 0) { /* I8: whatever the umask */
		close(fd);
		return -1;
	}
	logfile_fd = fd;
	logfile_off = (uint64_t)st.st_size;
	return 0;
}

int fsd_log_start_file(const char *store)
{
	int rc = 0;
	if (snprintf(logfile_path, sizeof logfile_path, "%s/%s", store, FSD_LOGFILE) >= (int)sizeof logfile_path)
		return ENAMETOOLONG;
	pthread_mutex_lock(&logfile_mu);
	if (logfile_open_locked() != 0)
		rc = errno;
	pthread_mutex_unlock(&logfile_mu);
	if (rc)
		logfile_path[0] = 0;
	return rc;
}

const char *fsd_log_file(void) { return logfile_path[0] ? logfile_path : NULL; }

/* One line, with the time and pid; the file turned over at its bound. */
void fsd_log_line(const char *text)
{
	char line[1200], ts[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	int n = snprintf(line, sizeof line, "%s tpfsd[%d]: %s\n", ts, (int)getpid(), text);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line) {
		n = (int)sizeof line - 1;
		line[n - 1] = '\n';
	}
	pthread_mutex_lock(&logfile_mu);
	if (logfile_fd >= 0 && logfile_off + (uint64_t)n > FSD_LOGFILE_MAX && logfile_off > 0) {
		char old[PATH_MAX + 2];
		snprintf(old, sizeof old, "%s.1", logfile_path);
		close(logfile_fd);
		logfile_fd = -1;
		if (rename(logfile_path, old) == 0 || errno == ENOENT)
			(void)logfile_open_locked();
	}
	if (logfile_fd >= 0 && pwrite(logfile_fd, line, (size_t)n, (off_t)logfile_off) == n)
		logfile_off += (uint64_t)n;
	pthread_mutex_unlock(&logfile_mu);
}

static void logfile_vput(const char *fmt, va_list ap)
{
	char text[1024];
	if (logfile_fd < 0) /* a hint: rechecked under the lock */
		return;
	vsnprintf(text, sizeof text, fmt, ap);
	text[strcspn(text, "\n")] = 0;
	if (text[0])
		fsd_log_line(text);
}

void fsd_log(int prio, const char *fmt, ...)
{
	va_list ap;
	if (prio >= LOG_DEBUG && !log_debug)
		return;
	va_start(ap, fmt);
	va_list ap2;
	va_copy(ap2, ap);
	logfile_vput(fmt, ap2);
	va_end(ap2);
	if (log_syslog) {
		vsyslog(prio, fmt, ap);
	} else {
		fputs("tpfsd: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

void fsd_log_fuse(enum fuse_log_level level, const char *fmt, va_list ap)
{
	if ((int)level >= LOG_DEBUG && !log_debug)
		return;
	va_list ap2;
	va_copy(ap2, ap);
	logfile_vput(fmt, ap2);
	va_end(ap2);
	if (log_syslog)
		vsyslog((int)level, fmt, ap);
	else
		vfprintf(stderr, fmt, ap);
}
