/*
 * fs_check -- the offline checker behind `tpfs check STORE`: read-only, it
 * verifies every engine tree (be_verify: order, fences, links, space, no
 * page leaked or shared) and the file-system invariants:
 *   V1  every directory entry names an existing inode, and a directory's
 *       entry is in the directory its parent field names;
 *   V2  a file's link count is the number of entries naming it; a
 *       directory's is 2 plus its subdirectories;
 *   V3  every inode is reachable from the root, or an orphan (unlinked while
 *       open: reclaimed at the next mount);
 *   V4  every data block belongs to an existing inode, holds at most one
 *       block, and no byte at or past the file's size (fs_data.c D1; blocks
 *       fallocate made past the size with KEEP_SIZE hold only zeros);
 *   V5  an inode's block count is the number of its blocks;
 *   V6  a symlink's target is 1 to FS_SYMLINK_MAX bytes, held whole in
 *       its first blocks (no hole: size / bsize rounded up, with V4);
 *   V7  the store is private to its owner (be_private): no file or
 *       directory of it, or of its log directory, open to group or others.
 * A store that was not closed cleanly is checked as recovery leaves it:
 * the read-only open recovers it in memory and writes nothing (backend.h).
 */
#include "fs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct ck_inode {
	uint64_t ino, parent, size, blocks;
	uint32_t mode, nlink;
	uint32_t links;   /* entries naming it */
	uint32_t subdirs; /* directories among its entries */
	uint64_t nblocks; /* blocks found */
	int orphan, reached;
} ck_inode;

typedef struct ck {
	ck_inode *v;
	size_t n, cap;
	FILE *err;
	int bad;
} ck;

static ck_inode *find(ck *k, uint64_t ino)
{
	size_t lo = 0, hi = k->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (k->v[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < k->n && k->v[lo].ino == ino ? &k->v[lo] : NULL;
}

#define PROBLEM(...)                                                                                                   \
	do {                                                                                                           \
		fprintf(k->err, "tpfs check: " __VA_ARGS__);                                                           \
		fputc('\n', k->err);                                                                                   \
		k->bad++;                                                                                              \
	} while (0)

static int load_inodes(fs *f, ck *k)
{
	be_cursor *c;
	int rc = be_cursor_open(NULL, f->inodes, &c);
	if (rc)
		return rc;
	for (rc = be_cursor_seek(c, NULL, 0, BE_FIRST); rc == 0; rc = be_cursor_next(c)) {
		const void *key, *val;
		size_t kl, vl;
		fs_inode in;
		fs_op op = {.f = f};
		be_cursor_get(c, &key, &kl, &val, &vl);
		uint64_t ino;
		memcpy(&ino, key, 8);
		if ((rc = fs_iget(&op, ino, &in)) != 0)
			break;
		if (k->n == k->cap) {
			size_t nc = k->cap ? 2 * k->cap : 1024;
			ck_inode *nv = realloc(k->v, nc * sizeof *nv);
			if (!nv) {
				rc = ENOMEM;
				break;
			}
			k->v = nv;
			k->cap = nc;
		}
		k->v[k->n++] = (ck_inode){.ino = ino, .parent = in.parent, .size = in.size, .blocks = in.blocks,
					  .mode = in.mode, .nlink = in.nlink};
	}
	be_cursor_close(c);
	return rc == BE_ENOTFOUND ? 0 : rc;
}

static int scan_dirents(fs *f, ck *k)
{
	be_cursor *c;
	int rc = be_cursor_open(NULL, f->dirents, &c);
	if (rc)
		return rc;
	for (rc = be_cursor_seek(c, NULL, 0, BE_FIRST); rc == 0; rc = be_cursor_next(c)) {
		const unsigned char *key, *val;
		size_t kl, vl;
		be_cursor_get(c, (const void **)&key, &kl, (const void **)&val, &vl);
		uint64_t parent = fs_getbe64(key), child;
		if (kl < 17 || vl != 9) {
			PROBLEM("a directory entry of inode %" PRIu64 " is malformed", parent);
			continue;
		}
		memcpy(&child, val, 8);
		ck_inode *p = find(k, parent), *ch = find(k, child);
		if (!p || !S_ISDIR(p->mode))
			PROBLEM("entry '%.*s' is in inode %" PRIu64 ", which is not a directory", (int)(kl - 16),
				key + 16, parent);
		if (!ch) {
			PROBLEM("entry '%.*s' in directory %" PRIu64 " names inode %" PRIu64 ", which does not exist (V1)",
				(int)(kl - 16), key + 16, parent, child);
			continue;
		}
		ch->links++;
		if (S_ISDIR(ch->mode)) {
			if (p)
				p->subdirs++;
			if (ch->parent != parent)
				PROBLEM("directory %" PRIu64 " is named in directory %" PRIu64 " but its parent is %" PRIu64 " (V1)",
					child, parent, ch->parent);
		}
	}
	be_cursor_close(c);
	return rc == BE_ENOTFOUND ? 0 : rc;
}

static int scan_blocks(fs *f, ck *k)
{
	unsigned char *buf = malloc(f->bsize);
	be_cursor *c;
	int rc;
	if (!buf)
		return ENOMEM;
	if ((rc = be_cursor_open(NULL, f->data, &c)) != 0) {
		free(buf);
		return rc;
	}
	for (rc = be_cursor_seek(c, NULL, 0, BE_FIRST); rc == 0; rc = be_cursor_next(c)) {
		const unsigned char *key, *val;
		size_t kl, vl;
		be_cursor_get(c, (const void **)&key, &kl, (const void **)&val, &vl);
		uint64_t ino = fs_getbe64(key), b = fs_getbe64(key + 8), start = b * f->bsize;
		ck_inode *in = find(k, ino);
		if (kl != 16 || !in) {
			PROBLEM("block %" PRIu64 " belongs to inode %" PRIu64 ", which does not exist (V4)", b, ino);
			continue;
		}
		in->nblocks++;
		if (vl > f->bsize)
			PROBLEM("inode %" PRIu64 " block %" PRIu64 " holds %zu bytes, more than a block (V4)", ino, b, vl);
		else if (start + vl > in->size) {
			size_t from = start >= in->size ? 0 : (size_t)(in->size - start);
			for (size_t i = from; i < vl; i++)
				if (val[i]) {
					PROBLEM("inode %" PRIu64 " block %" PRIu64 " holds data past the size %" PRIu64 " (V4)",
						ino, b, in->size);
					break;
				}
		}
	}
	be_cursor_close(c);
	free(buf);
	return rc == BE_ENOTFOUND ? 0 : rc;
}

static int scan_orphans(fs *f, ck *k)
{
	be_cursor *c;
	int rc = be_cursor_open(NULL, f->orphans, &c);
	if (rc)
		return rc;
	for (rc = be_cursor_seek(c, NULL, 0, BE_FIRST); rc == 0; rc = be_cursor_next(c)) {
		const void *key;
		uint64_t ino;
		be_cursor_get(c, &key, NULL, NULL, NULL);
		memcpy(&ino, key, 8);
		ck_inode *in = find(k, ino);
		if (in)
			in->orphan = 1;
		else
			PROBLEM("orphan %" PRIu64 " has no inode", ino);
	}
	be_cursor_close(c);
	return rc == BE_ENOTFOUND ? 0 : rc;
}

/* V3: marks everything reachable from the root (directories by their
 * entries: a breadth-first walk over the dirent tree per directory). */
static int reach(fs *f, ck *k)
{
	uint64_t *queue = malloc((k->n + 1) * sizeof *queue);
	size_t head = 0, tail = 0;
	int rc = 0;
	if (!queue)
		return ENOMEM;
	ck_inode *root = find(k, FS_ROOT_INO);
	if (!root) {
		free(queue);
		PROBLEM("the root directory (inode 1) is missing");
		return 0;
	}
	root->reached = 1;
	queue[tail++] = FS_ROOT_INO;
	while (head < tail && !rc) {
		uint64_t dir = queue[head++];
		unsigned char kk[8];
		be_cursor *c;
		fs_be64(kk, dir);
		if ((rc = be_cursor_open(NULL, f->dirents, &c)) != 0)
			break;
		for (rc = be_cursor_seek(c, kk, 8, BE_SEEK_GE); rc == 0; rc = be_cursor_next(c)) {
			const unsigned char *key, *val;
			size_t kl, vl;
			uint64_t child;
			be_cursor_get(c, (const void **)&key, &kl, (const void **)&val, &vl);
			if (kl < 16 || memcmp(key, kk, 8) != 0)
				break;
			memcpy(&child, val, 8);
			ck_inode *ch = find(k, child);
			if (ch && !ch->reached) {
				ch->reached = 1;
				if (S_ISDIR(ch->mode))
					queue[tail++] = child;
			}
		}
		be_cursor_close(c);
		if (rc == BE_ENOTFOUND)
			rc = 0;
	}
	free(queue);
	return rc;
}

/* V7: one path of the store that other users may access. */
static void loose_path(void *arg, const char *path, unsigned mode, unsigned want)
{
	ck *k = arg;
	PROBLEM("%s: mode %04o: other users may read the store through it; should be %04o (V7)", path, mode, want);
}

int fs_check(const char *store, void *errp, int verbose)
{
	FILE *err = errp ? errp : stderr;
	fs_options o = {.readonly = 1, .quiet = 1, .progress = 1, .cache_pages = 4096};
	ck kk = {.err = err}, *k = &kk;
	fs *f;
	int rc;

	(void)be_private(store, NULL, 0, loose_path, k, NULL); /* V7; an error: fs_mount says why */
	if ((rc = fs_mount(store, &o, &f)) != 0) { /* read-only: writes nothing, recovers in memory */
		const char *m = be_errmsg(NULL);
		size_t n = strlen(store); /* (the message names the store's file itself) */
		if (m && *m && strncmp(m, store, n) == 0 && (m[n] == ':' || m[n] == '/'))
			fprintf(err, "tpfs check: cannot check %s\n", m);
		else
			fprintf(err, "tpfs check: %s: cannot check it: %s\n", store, m && *m ? m : strerror(-rc));
		return rc;
	}
	if (be_recovered(f->be))
		fprintf(err, "tpfs check: %s: the store was not closed cleanly: checking it as recovery leaves it "
			     "(recovered in memory; nothing written)\n",
			store);
	if ((rc = be_verify(f->be, verbose ? err : NULL)) != 0) {
		PROBLEM("%s", be_errmsg(f->be));
		rc = 0;
	}
	if (!rc)
		rc = load_inodes(f, k);
	if (!rc)
		rc = scan_dirents(f, k);
	if (!rc)
		rc = scan_blocks(f, k);
	if (!rc)
		rc = scan_orphans(f, k);
	if (!rc)
		rc = reach(f, k);
	uint64_t dirs = 0, files = 0, blocks = 0;
	for (size_t i = 0; !rc && i < k->n; i++) {
		ck_inode *in = &k->v[i];
		uint32_t want = S_ISDIR(in->mode) ? 2 + in->subdirs : in->links;
		uint32_t have_links = S_ISDIR(in->mode) && in->ino != FS_ROOT_INO ? in->links : 0;
		if (S_ISDIR(in->mode))
			dirs++;
		else
			files++;
		blocks += in->nblocks;
		if (S_ISLNK(in->mode) && (in->size == 0 || in->size > FS_SYMLINK_MAX ||
					  in->nblocks != (in->size + f->bsize - 1) / f->bsize))
			PROBLEM("symlink %" PRIu64 " has a target of %" PRIu64 " bytes in %" PRIu64 " blocks (V6)", in->ino,
				in->size, in->nblocks);
		if (in->orphan) {
			if (in->links)
				PROBLEM("inode %" PRIu64 " is an orphan but still has %" PRIu32 " entries", in->ino, in->links);
			continue;
		}
		if (in->nlink != want)
			PROBLEM("inode %" PRIu64 " has link count %" PRIu32 ", but %" PRIu32 " (V2)", in->ino, in->nlink, want);
		if (S_ISDIR(in->mode) && in->ino != FS_ROOT_INO && have_links != 1)
			PROBLEM("directory %" PRIu64 " is named by %" PRIu32 " entries (V2)", in->ino, have_links);
		if (!in->reached)
			PROBLEM("inode %" PRIu64 " is not reachable from the root and not an orphan (V3)", in->ino);
		if (in->blocks != in->nblocks)
			PROBLEM("inode %" PRIu64 " counts %" PRIu64 " blocks but has %" PRIu64 " (V5)", in->ino, in->blocks,
				in->nblocks);
	}
	if (rc) {
		fprintf(err, "tpfs check: %s: %s\n", store, be_strerror(rc));
	} else if (verbose || k->bad) {
		fprintf(err, "tpfs check: %s: %" PRIu64 " directories, %" PRIu64 " other inodes, %" PRIu64 " blocks: %s\n",
			store, dirs, files, blocks, k->bad ? "PROBLEMS FOUND" : "clean");
	}
	free(k->v);
	fs_unmount(f);
	if (rc)
		return fs_errno(rc);
	return k->bad ? -EUCLEAN : 0;
}
