/*
 * fsd_log.h -- the daemon's log (fsd_log.c): stderr in the foreground,
 * syslog once detached, and the store's log file STORE/tpfsd.log.
 */
#ifndef TPFS_FSD_LOG_H
#define TPFS_FSD_LOG_H

#include <stdarg.h>

#include <fuse_lowlevel.h>

/* The log file, in the store directory. */
#define FSD_LOGFILE "tpfsd.log"

/* A message; prio is a syslog priority (LOG_ERR, ...; LOG_DEBUG only
 * with fsd_log_debug). */
void fsd_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* libfuse's messages (fuse_set_log_func); they end with a newline. */
void fsd_log_fuse(enum fuse_log_level level, const char *fmt, va_list ap);
/* From now on to syslog instead of stderr (detached). */
void fsd_log_to_syslog(void);
void fsd_log_debug(int on);
/* Starts the log file of the mounted store (before any thread): 0, or an
 * errno. */
int fsd_log_start_file(const char *store);
/* The log file every message also goes to (STORE/tpfsd.log), or NULL. */
const char *fsd_log_file(void);
/* One line to the log file only (what stderr forwarding read). */
void fsd_log_line(const char *text);

#endif
