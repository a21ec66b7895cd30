/*
 * test_txclient -- libtpfs_tx and the tx tools, where no daemon is needed:
 * parsing mountinfo (escaped paths, several tpfs mounts, other types
 * ignored, bind mounts, stacked mounts), choosing the mount (longest
 * prefix at a component boundary, $TPFS_MOUNT, the only one, the
 * messages), the answer parser ("ERRNO MESSAGE", malformed -> EPROTO), the
 * id parser, the minimal JSON scanner txrun relies on, and the built
 * commands (TX_BIN: --help exits 0 with a full usage text, bad usage exits
 * 2, a path that is no tpfs mount exits 1 naming it).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tpfs_tx.h"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                */

/* A mountinfo file holding text; the list it parses to. */
static tpfs_tx_mounts *mounts_of(const char *text)
{
	char path[] = "/tmp/txclient-mountinfo-XXXXXX", msg[256];
	tpfs_tx_mounts *m = NULL;
	int fd = mkstemp(path);
	cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	int rc = tpfs_tx_mounts_read(path, &m, msg, sizeof msg);
	unlink(path);
	cr_assert_eq(rc, 0, "tpfs_tx_mounts_read: %d %s", rc, msg);
	cr_assert_not_null(m);
	return m;
}

/* A root file system, three tpfs mounts (one with a space and a backslash
 * in its path), a proc mount inside one of them, a bind mount of a
 * subdirectory of the first, an sshfs mount, and a line that is no mount. */
static const char g_mountinfo[] =
	"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
	"40 22 0:40 / /mnt/a rw,nosuid,nodev - fuse.tpfs /srv/a rw,user_id=0,group_id=0\n"
	"41 22 0:41 / /mnt/ab rw,relatime - fuse.tpfs /srv/ab rw,user_id=0\n"
	"42 22 0:42 / /mnt/my\\040tx\\134dir rw shared:5 master:3 - fuse.tpfs /srv/my\\040store rw\n"
	"43 40 0:50 / /mnt/a/proc rw - proc proc rw\n"
	"44 22 0:40 /sub /bind rw - fuse.tpfs /srv/a rw\n"
	"45 22 0:60 / /mnt/remote rw - fuse.sshfs host:/x rw\n"
	"this is not a mount line\n";

/* The chooser's answer for (path, cwd, env): its result, the mount in out. */
static int choose(const tpfs_tx_mounts *m, const char *path, const char *cwd, const char *env, char *out,
		  char *msg, size_t msgsize)
{
	out[0] = 0;
	return tpfs_tx_mounts_choose(m, path, cwd, env, out, PATH_MAX, msg, msgsize);
}

/* ---------------------------------------------------------------------- */
/* mountinfo                                                              */

Test(txclient, mountinfo_lists_tpfs_mounts_in_order_decoded)
{
	tpfs_tx_mounts *m = mounts_of(g_mountinfo);
	cr_expect_eq(tpfs_tx_mounts_count(m), 4, "tpfs mounts: %zu, expected 4 (a, ab, my tx\\dir, bind)",
		     tpfs_tx_mounts_count(m));
	const char *want[] = {"/mnt/a", "/mnt/ab", "/mnt/my tx\\dir", "/bind"};
	for (size_t i = 0; i < 4; i++) {
		const char *d = tpfs_tx_mounts_dir(m, i);
		cr_expect(d && !strcmp(d, want[i]), "tpfs mount %zu: \"%s\", expected \"%s\"", i, d ? d : "(null)",
			  want[i]);
	}
	cr_expect_null(tpfs_tx_mounts_dir(m, 4), "a fifth tpfs mount listed");
	tpfs_tx_mounts_free(m);
}

Test(txclient, mountinfo_missing_file)
{
	tpfs_tx_mounts *m = (tpfs_tx_mounts *)1;
	char msg[256];
	int rc = tpfs_tx_mounts_read("/nonexistent/mountinfo", &m, msg, sizeof msg);
	cr_expect_eq(rc, ENOENT, "reading a missing file: %d, expected ENOENT", rc);
	cr_expect_null(m);
	cr_expect(strstr(msg, "/nonexistent/mountinfo") != NULL, "the message does not name the file: \"%s\"", msg);
}

Test(txclient, mountinfo_empty_and_null)
{
	tpfs_tx_mounts *m = mounts_of("");
	cr_expect_eq(tpfs_tx_mounts_count(m), 0);
	cr_expect_null(tpfs_tx_mounts_containing(m, "/mnt/a"));
	tpfs_tx_mounts_free(m);
	cr_expect_eq(tpfs_tx_mounts_count(NULL), 0);
	cr_expect_null(tpfs_tx_mounts_dir(NULL, 0));
	cr_expect_null(tpfs_tx_mounts_containing(NULL, "/mnt/a"));
	tpfs_tx_mounts_free(NULL);
}

Test(txclient, mountinfo_real_file_parses)
{
	char msg[256];
	tpfs_tx_mounts *m = NULL;
	int rc = tpfs_tx_mounts_read(NULL, &m, msg, sizeof msg);
	cr_assert_eq(rc, 0, "/proc/self/mountinfo: %d %s", rc, msg);
	/* every process's root is on some mount: never a tpfs one here unless
	 * the test runs inside a tpfs mount, which it does not */
	for (size_t i = 0; i < tpfs_tx_mounts_count(m); i++)
		cr_expect(tpfs_tx_mounts_dir(m, i)[0] == '/', "tpfs mount %zu is not absolute: %s", i,
			  tpfs_tx_mounts_dir(m, i));
	tpfs_tx_mounts_free(m);
}

/* ---------------------------------------------------------------------- */
/* The mount a directory is on                                            */

static void expect_on(const tpfs_tx_mounts *m, const char *dir, const char *want)
{
	const char *got = tpfs_tx_mounts_containing(m, dir);
	if (want)
		cr_expect(got && !strcmp(got, want), "%s is on \"%s\", expected \"%s\"", dir, got ? got : "(no tpfs mount)",
			  want);
	else
		cr_expect_null(got, "%s is on \"%s\", expected no tpfs mount", dir, got);
}

Test(txclient, containing_longest_prefix_at_component_boundary)
{
	tpfs_tx_mounts *m = mounts_of(g_mountinfo);
	expect_on(m, "/mnt/a", "/mnt/a");
	expect_on(m, "/mnt/a/", "/mnt/a");
	expect_on(m, "/mnt/a/x/y", "/mnt/a");
	expect_on(m, "/mnt/ab", "/mnt/ab"); /* not /mnt/a */
	expect_on(m, "/mnt/ab/x", "/mnt/ab");
	expect_on(m, "/mnt/abc", NULL); /* neither */
	expect_on(m, "/mnt/abc/x", NULL);
	expect_on(m, "/mnt", NULL);
	expect_on(m, "/", NULL);
	expect_on(m, "/mnt/my tx\\dir/f", "/mnt/my tx\\dir");
	expect_on(m, "/mnt/my tx", NULL);
	expect_on(m, "mnt/a", NULL); /* relative: not a canonical path */
	tpfs_tx_mounts_free(m);
}

Test(txclient, containing_other_types_ignored_and_hiding)
{
	tpfs_tx_mounts *m = mounts_of(g_mountinfo);
	expect_on(m, "/mnt/remote/x", NULL); /* fuse.sshfs is no tpfs */
	expect_on(m, "/mnt/a/proc/1", NULL); /* proc mounted inside /mnt/a */
	expect_on(m, "/mnt/a/procx", "/mnt/a");
	tpfs_tx_mounts_free(m);
}

Test(txclient, containing_bind_mount_of_subdirectory_goes_to_root)
{
	tpfs_tx_mounts *m = mounts_of(g_mountinfo);
	expect_on(m, "/bind", "/mnt/a");
	expect_on(m, "/bind/deep/er", "/mnt/a");
	tpfs_tx_mounts_free(m);
	/* with no mount of that file system's root, the bind mount itself */
	m = mounts_of("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
		      "44 22 0:40 /sub /bind rw - fuse.tpfs /srv/a rw\n");
	expect_on(m, "/bind/x", "/bind");
	tpfs_tx_mounts_free(m);
}

Test(txclient, containing_stacked_mounts_later_wins)
{
	tpfs_tx_mounts *m = mounts_of("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
				      "40 22 0:40 / /mnt/t rw - fuse.tpfs /srv/a rw\n"
				      "41 40 8:17 / /mnt/t rw - ext4 /dev/sdb1 rw\n"
				      "42 22 8:17 / /mnt/u rw - ext4 /dev/sdb1 rw\n"
				      "43 42 0:41 / /mnt/u rw - fuse.tpfs /srv/b rw\n");
	expect_on(m, "/mnt/t/x", NULL);      /* ext4 on top of the tpfs mount */
	expect_on(m, "/mnt/u/x", "/mnt/u"); /* tpfs on top of ext4 */
	tpfs_tx_mounts_free(m);
}

Test(txclient, containing_root_mount_is_tpfs)
{
	tpfs_tx_mounts *m = mounts_of("22 1 0:40 / / rw - fuse.tpfs /srv/a rw\n"
				      "23 22 0:5 / /proc rw - proc proc rw\n");
	expect_on(m, "/", "/");
	expect_on(m, "/home/x", "/");
	expect_on(m, "/proc/1", NULL);
	tpfs_tx_mounts_free(m);
}

/* ---------------------------------------------------------------------- */
/* Choosing the mount                                                     */

Test(txclient, choose_explicit_path)
{
	char out[PATH_MAX], msg[512];
	tpfs_tx_mounts *m = mounts_of(g_mountinfo);
	cr_expect_eq(choose(m, "/mnt/ab/sub/dir", "/home", NULL, out, msg, sizeof msg), 0, "%s", msg);
	cr_expect_str_eq(out, "/mnt/ab");
	/* a path on no tpfs mount is used as it is (a renamed subtype) */
	cr_expect_eq(choose(m, "/srv/elsewhere", "/mnt/a", "/mnt/ab", out, msg, sizeof msg), 0, "%s", msg);
	cr_expect_str_eq(out, "/srv/elsewhere");
	/* an explicit path wins over the current directory and the environment */
	cr_expect_eq(choose(m, "/mnt/a/x", "/mnt/ab", "/mnt/ab", out, msg, sizeof msg), 0, "%s", msg);
	cr_expect_str_eq(out, "/mnt/a");
	cr_expect_eq(choose(NULL, "/mnt/a/x", NULL, NULL, out, msg, sizeof msg), 0, "%s", msg);
	cr_expect_str_eq(out, "/mnt/a/x");
	tpfs_tx_mounts_free(m);
}

Test(txclient, choose_cwd_then_env)
{
	char out[PATH_MAX], msg[512];
	tpfs_tx_mounts *m = mounts_of(g_mountinfo);
	cr_expect_eq(choose(m, NULL, "/mnt/ab/src", "/mnt/a", out, msg, sizeof msg), 0, "%s", msg);
	cr_expect_str_eq(out, "/mnt/ab", "the current directory's mount comes before $TPFS_MOUNT");
	cr_expect_eq(choose(m, NULL, "/home/u", "/mnt/a/deep", out, msg, sizeof msg), 0, "%s", msg);
	cr_expect_str_eq(out, "/mnt/a", "$TPFS_MOUNT names the mount holding it");
	cr_expect_eq(choose(m, NULL, "/mnt/abc", "/srv/other", out, msg, sizeof msg), 0, "%s", msg);
	cr_expect_str_eq(out, "/srv/other", "a $TPFS_MOUNT on no tpfs mount is used as it is");
	cr_expect_eq(choose(m, NULL, NULL, "/mnt/ab", out, msg, sizeof msg), 0, "%s", msg);
	cr_expect_str_eq(out, "/mnt/ab", "no current directory: $TPFS_MOUNT");
	tpfs_tx_mounts_free(m);
}

Test(txclient, choose_several_mounts_is_an_error)
{
	char out[PATH_MAX], msg[512];
	tpfs_tx_mounts *m = mounts_of(g_mountinfo);
	int rc = choose(m, NULL, "/home/u", NULL, out, msg, sizeof msg);
	cr_expect_eq(rc, ENOTUNIQ, "several tpfs mounts, none chosen: %d \"%s\", expected ENOTUNIQ", rc, msg);
	cr_expect(strstr(msg, "no tpfs mount contains /home/u and $TPFS_MOUNT is not set") != NULL, "message: \"%s\"",
		  msg);
	/* three file systems: /bind is /mnt/a's */
	cr_expect(strstr(msg, "3 tpfs file systems") && strstr(msg, "/mnt/a") && strstr(msg, "/mnt/ab") &&
			  strstr(msg, "/mnt/my tx\\dir") && !strstr(msg, "/bind") && strstr(msg, "name one"),
		  "message: \"%s\"", msg);
	rc = choose(m, NULL, "/home/u", "", out, msg, sizeof msg);
	cr_expect_eq(rc, ENOTUNIQ, "an empty $TPFS_MOUNT counts as unset: %d \"%s\"", rc, msg);
	tpfs_tx_mounts_free(m);
}

Test(txclient, choose_the_only_file_system)
{
	char out[PATH_MAX], msg[512];
	/* one file system at two places (a bind of a subdirectory first) */
	tpfs_tx_mounts *m = mounts_of("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
				      "44 22 0:40 /sub /bind rw - fuse.tpfs /srv/a rw\n"
				      "40 22 0:40 / /mnt/only\\040one rw - fuse.tpfs /srv/a rw\n"
				      "45 22 0:60 / /mnt/remote rw - fuse.sshfs host:/x rw\n");
	int rc = choose(m, NULL, "/home/u", NULL, out, msg, sizeof msg);
	cr_expect_eq(rc, 0, "the only tpfs file system: %d \"%s\"", rc, msg);
	cr_expect_str_eq(out, "/mnt/only one");
	tpfs_tx_mounts_free(m);
}

Test(txclient, choose_no_mount)
{
	char out[PATH_MAX], msg[512];
	tpfs_tx_mounts *m = mounts_of("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
				      "45 22 0:60 / /mnt/remote rw - fuse.sshfs host:/x rw\n");
	int rc = choose(m, NULL, "/x", NULL, out, msg, sizeof msg);
	cr_expect_eq(rc, ENOENT, "no tpfs mount: %d \"%s\", expected ENOENT", rc, msg);
	cr_expect(!strncmp(msg, "no tpfs mount contains /x and $TPFS_MOUNT is not set", 52) &&
			  strstr(msg, "nothing of type fuse.tpfs is mounted"),
		  "message: \"%s\"", msg);
	rc = choose(NULL, NULL, "/x", NULL, out, msg, sizeof msg);
	cr_expect_eq(rc, ENOENT, "no list: %d \"%s\", expected ENOENT", rc, msg);
	tpfs_tx_mounts_free(m);
}

Test(txclient, choose_out_too_small)
{
	char out[7], msg[512];
	tpfs_tx_mounts *m = mounts_of(g_mountinfo);
	int rc = tpfs_tx_mounts_choose(m, "/mnt/ab/x", NULL, NULL, out, sizeof out, msg, sizeof msg);
	cr_expect_eq(rc, ENAMETOOLONG, "\"/mnt/ab\" into 7 bytes: %d, expected ENAMETOOLONG", rc);
	rc = tpfs_tx_mounts_choose(m, "/mnt/a/x", NULL, NULL, out, sizeof out, msg, sizeof msg);
	cr_expect_eq(rc, 0, "\"/mnt/a\" into 7 bytes: %d \"%s\"", rc, msg);
	cr_expect_str_eq(out, "/mnt/a");
	tpfs_tx_mounts_free(m);
}

Test(txclient, find_mount_with_a_path)
{
	char out[PATH_MAX], msg[512], dir[] = "/tmp/txclient-dir-XXXXXX", real[PATH_MAX];
	int rc = tpfs_tx_find_mount("/nonexistent/x", out, sizeof out, msg, sizeof msg);
	cr_expect_eq(rc, ENOENT, "a missing path: %d \"%s\"", rc, msg);
	cr_expect_str_eq(msg, "/nonexistent/x: No such file or directory");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_not_null(realpath(dir, real));
	rc = tpfs_tx_find_mount(dir, out, sizeof out, msg, sizeof msg);
	cr_expect_eq(rc, 0, "a directory on no tpfs mount: %d \"%s\"", rc, msg);
	cr_expect_str_eq(out, real, "a path on no tpfs mount is used as it is");
	rmdir(dir);
}

/* ---------------------------------------------------------------------- */
/* Answers                                                                */

static int parse(const char *answer, char *msg, size_t msgsize)
{
	return tpfs_tx_answer_parse(answer, strlen(answer), msg, msgsize);
}

Test(txclient, answer_success_with_id)
{
	char msg[256];
	uint64_t id = 0;
	cr_expect_eq(parse("0 42", msg, sizeof msg), 0);
	cr_expect_str_eq(msg, "42");
	cr_expect_eq(tpfs_tx_answer_id(msg, &id), 0);
	cr_expect_eq(id, 42);
	/* the length bounds the answer: it need not be NUL-terminated */
	cr_expect_eq(tpfs_tx_answer_parse("0 7junk", 3, msg, sizeof msg), 0);
	cr_expect_str_eq(msg, "7");
	cr_expect_eq(parse("0", msg, sizeof msg), 0, "\"0\" alone is success with no message");
	cr_expect_str_eq(msg, "");
	cr_expect_eq(parse("0 transaction 1 committed\n", msg, sizeof msg), 0);
	cr_expect_str_eq(msg, "transaction 1 committed", "the trailing newline is dropped");
}

Test(txclient, answer_errors)
{
	char msg[256];
	cr_expect_eq(parse("16 process 1234 (bash) is already in transaction 41", msg, sizeof msg), EBUSY);
	cr_expect_str_eq(msg, "process 1234 (bash) is already in transaction 41");
	cr_expect_eq(parse("35 transaction 42 was chosen as a deadlock victim", msg, sizeof msg), EDEADLK);
	cr_expect_str_eq(msg, "transaction 42 was chosen as a deadlock victim");
	cr_expect_eq(parse("3 process 9 is in no transaction on this mount", msg, sizeof msg), ESRCH);
	/* a small buffer truncates, NUL-terminated */
	char small[6];
	memset(small, 'x', sizeof small);
	cr_expect_eq(parse("16 busy busy busy", small, sizeof small), EBUSY);
	cr_expect_str_eq(small, "busy ");
	cr_expect_eq(parse("16 busy", NULL, 0), EBUSY, "msg may be NULL with size 0");
}

Test(txclient, answer_malformed_is_eproto)
{
	static const char *const bad[] = {"", "x", " 0 42", "-1 x", "16x msg", "12345 five digits", "abc 1", "0x10 hex",
					  "\n0 42"};
	char msg[256];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int rc = parse(bad[i], msg, sizeof msg);
		cr_expect_eq(rc, EPROTO, "answer \"%s\": %d, expected EPROTO", bad[i], rc);
		cr_expect(strstr(msg, "malformed") != NULL, "answer \"%s\": message \"%s\"", bad[i], msg);
	}
	cr_expect_eq(tpfs_tx_answer_parse("0 42", 0, msg, sizeof msg), EPROTO, "an empty answer");
}

Test(txclient, answer_id)
{
	uint64_t id = 0;
	cr_expect_eq(tpfs_tx_answer_id(" 7\n", &id), 0);
	cr_expect_eq(id, 7);
	cr_expect_eq(tpfs_tx_answer_id("18446744073709551615", &id), 0);
	cr_expect_eq(id, UINT64_MAX);
	static const char *const bad[] = {"", "0", "42x", "x42", "-1", "4 2", "18446744073709551616", " "};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		id = 99;
		cr_expect_eq(tpfs_tx_answer_id(bad[i], &id), EPROTO, "id \"%s\" accepted", bad[i]);
		cr_expect_eq(id, 99, "id \"%s\": *id changed on failure", bad[i]);
	}
}

/* ---------------------------------------------------------------------- */
/* JSON                                                                   */

static const char g_doomed[] =
	"{\"transactions\":[{\"id\":42,\"state\":\"doomed\",\"reason\":\"killed\",\"message\":"
	"\"not \\\"reason\\\":\\\"deadlock\\\" \\\\\",\"pid\":1234,\"comm\":\"ba\\u0073h\",\"uid\":0,"
	"\"age_ms\":12300,\"members\":[1234,1240],\"files\":17,\"records\":20,\"bytes\":123456,"
	"\"locks\":25,\"waiting\":null}]}\n";

static void expect_json(const char *json, const char *key, int want_rc, const char *want)
{
	char out[128] = "untouched";
	int rc = tpfs_tx_json_string(json, key, out, sizeof out);
	cr_expect_eq(rc, want_rc, "\"%s\": %d, expected %d", key, rc, want_rc);
	if (want)
		cr_expect_str_eq(out, want, "\"%s\"", key);
}

Test(txclient, json_members)
{
	expect_json(g_doomed, "state", 0, "doomed");
	expect_json(g_doomed, "reason", 0, "killed"); /* not the quoted one */
	expect_json(g_doomed, "message", 0, "not \"reason\":\"deadlock\" \\");
	expect_json(g_doomed, "comm", 0, "bash");
	expect_json(g_doomed, "waiting", EINVAL, NULL); /* null */
	expect_json(g_doomed, "id", EINVAL, NULL);      /* a number */
	expect_json(g_doomed, "nosuch", ENOENT, NULL);
	expect_json("{\"transactions\":[]}", "state", ENOENT, NULL);
	expect_json("{ \"state\" :\n \"active\" }", "state", 0, "active");
	expect_json("{\"message\":\"reason\", \"reason\":\"deadlock\"}", "reason", 0, "deadlock"); /* a value is no key */
	expect_json("{\"state\":\"act", "state", EPROTO, NULL);
	expect_json("{\"sta", "state", EPROTO, NULL);
}

Test(txclient, json_deadlock_victim_and_range)
{
	const char *victim = "{\"transactions\":[{\"id\":7,\"state\":\"doomed\",\"reason\":\"deadlock\",\"message\":"
			     "\"transaction 7 was chosen as a deadlock victim\"}]}";
	char small[4];
	expect_json(victim, "state", 0, "doomed");
	expect_json(victim, "reason", 0, "deadlock");
	cr_expect_eq(tpfs_tx_json_string(victim, "reason", small, sizeof small), ERANGE);
	cr_expect_str_eq(small, "dea", "truncated and NUL-terminated");
}

/* ---------------------------------------------------------------------- */
/* The commands                                                           */

typedef struct run {
	int status; /* exit status, or 128 + signal */
	char out[16384], err[16384];
} run;

static void slurp(int fd, char *buf, size_t size)
{
	ssize_t n = pread(fd, buf, size - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
}

static int tmpfile_fd(void)
{
	char path[] = "/tmp/txclient-out-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	return fd;
}

/* Runs $TX_BIN/tool with args (NULL-terminated, after argv[0]), without
 * $TPFS_MOUNT, in /; stdout and stderr into r. */
static void run_tool(const char *tool, const char *const *args, run *r)
{
	const char *bin = getenv("TX_BIN");
	char path[PATH_MAX];
	const char *argv[16] = {tool};
	size_t n = 1;
	cr_assert_not_null(bin, "TX_BIN is not set: meson passes the directory of the built tx tools");
	snprintf(path, sizeof path, "%s/%s", bin, tool);
	cr_assert(access(path, X_OK) == 0, "%s is not built", path);
	while (args && *args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	int out = tmpfile_fd(), err = tmpfile_fd(), st;
	pid_t pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(out, 1);
		dup2(err, 2);
		unsetenv("TPFS_MOUNT");
		if (chdir("/") != 0)
			_exit(99);
		execv(path, (char *const *)argv);
		_exit(98);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	slurp(out, r->out, sizeof r->out);
	slurp(err, r->err, sizeof r->err);
}

static const char *const g_tools[] = {"txbegin", "txcommit", "txabort", "txrun", "txstatus"};
#define NTOOLS (sizeof g_tools / sizeof *g_tools)

Test(txclient, tools_help, .timeout = 30)
{
	static const char *const sections[] = {"Usage: ", "Description", "Options", "Exit status", "Environment",
					       "TPFS_MOUNT", "Examples", "--help"};
	static run r;
	for (size_t i = 0; i < NTOOLS; i++) {
		const char *h[] = {"--help", NULL}, *h2[] = {"-h", NULL};
		run_tool(g_tools[i], h, &r);
		cr_expect_eq(r.status, 0, "%s --help exited %d (stderr: %s)", g_tools[i], r.status, r.err);
		cr_expect_str_empty(r.err, "%s --help wrote to stderr: %s", g_tools[i], r.err);
		for (size_t k = 0; k < sizeof sections / sizeof *sections; k++)
			cr_expect(strstr(r.out, sections[k]) != NULL, "%s --help lacks \"%s\":\n%s", g_tools[i],
				  sections[k], r.out);
		cr_expect(!strncmp(r.out + 7, g_tools[i], strlen(g_tools[i])), "%s --help: the synopsis names %.20s",
			  g_tools[i], r.out + 7);
		run_tool(g_tools[i], h2, &r);
		cr_expect_eq(r.status, 0, "%s -h exited %d", g_tools[i], r.status);
	}
}

/* A usage error: exit 2, a message on stderr naming the tool, nothing on
 * stdout. */
static void expect_usage_error(const char *tool, const char *const *args, const char *what)
{
	static run r;
	run_tool(tool, args, &r);
	cr_expect_eq(r.status, 2, "%s %s: exit %d, expected 2 (stderr: %s)", tool, what, r.status, r.err);
	cr_expect(strstr(r.err, tool) != NULL && strstr(r.err, "Usage: ") != NULL, "%s %s: stderr \"%s\"", tool, what,
		  r.err);
	cr_expect_str_empty(r.out, "%s %s: stdout \"%s\"", tool, what, r.out);
}

Test(txclient, tools_bad_usage, .timeout = 30)
{
	for (size_t i = 0; i < NTOOLS; i++) {
		const char *bogus[] = {"--bogus", NULL}, *two[] = {"/a", "/b", "--", "true", NULL};
		expect_usage_error(g_tools[i], bogus, "--bogus");
		if (strcmp(g_tools[i], "txrun") != 0)
			expect_usage_error(g_tools[i], two, "with two mount points");
	}
	const char *no_dashes[] = {"true", NULL}, *no_cmd[] = {"--", NULL}, *mnt_no_cmd[] = {"/mnt", "--", NULL},
		   *neg[] = {"--retry", "-1", "--", "true", NULL}, *nan[] = {"--retry", "x", "--", "true", NULL},
		   *huge[] = {"--retry", "99999999999", "--", "true", NULL}, *noarg[] = {"--retry", NULL};
	expect_usage_error("txrun", no_dashes, "without --");
	expect_usage_error("txrun", no_cmd, "-- and no command");
	expect_usage_error("txrun", mnt_no_cmd, "MOUNTPOINT -- and no command");
	expect_usage_error("txrun", neg, "--retry -1");
	expect_usage_error("txrun", nan, "--retry x");
	expect_usage_error("txrun", huge, "--retry 99999999999");
	expect_usage_error("txrun", noarg, "--retry without a value");
	const char *id0[] = {"--id", "0", NULL}, *idx[] = {"--id", "x1", NULL}, *idneg[] = {"--id", "-3", NULL};
	expect_usage_error("txabort", id0, "--id 0");
	expect_usage_error("txabort", idx, "--id x1");
	expect_usage_error("txabort", idneg, "--id -3");
}

/* A path that is not a tpfs mount: exit 1, "TOOL: PATH: cause". */
Test(txclient, tools_not_a_mount, .timeout = 30)
{
	static run r;
	char dir[] = "/tmp/txclient-nomount-XXXXXX", real[PATH_MAX], prefix[PATH_MAX + 32];
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_not_null(realpath(dir, real));
	for (size_t i = 0; i < NTOOLS; i++) {
		const char *args[] = {dir, NULL}, *run_args[] = {dir, "--", "true", NULL};
		const char *tool = g_tools[i];
		run_tool(tool, strcmp(tool, "txrun") ? args : run_args, &r);
		snprintf(prefix, sizeof prefix, "%s: %s: ", tool, real);
		cr_expect_eq(r.status, 1, "%s %s: exit %d, expected 1 (stderr: %s)", tool, dir, r.status, r.err);
		cr_expect(!strncmp(r.err, prefix, strlen(prefix)) && strstr(r.err, "tpfs"),
			  "%s %s: stderr \"%s\", expected \"%s...\" saying it is not a tpfs mount", tool, dir, r.err,
			  prefix);
		cr_expect_str_empty(r.out, "%s %s: stdout \"%s\"", tool, dir, r.out);
	}
	const char *missing[] = {"/nonexistent/mnt", NULL};
	run_tool("txstatus", missing, &r);
	cr_expect_eq(r.status, 1);
	cr_expect_str_eq(r.err, "txstatus: /nonexistent/mnt: No such file or directory\n");
	rmdir(dir);
}
