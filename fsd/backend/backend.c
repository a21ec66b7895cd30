/*
 * backend.c -- the registry of stores: be_open and be_private pick the
 * implementation by the store's name (backend.h); messages and outcomes.
 */
#include <string.h>

#include "backend.h"
#include "be_tp.h"
#include "cluster/be_cluster.h"

/* Every implementation; the one with scheme NULL takes plain paths. */
static const be_ops *const stores[] = {&be_tp_ops, &be_cluster_ops};

/* The implementation of the last be_open or be_private of this
 * thread, whose message be_errmsg(NULL) gives. */
static _Thread_local const be_ops *last_open;

/* Z1: a plain path is the default store; NAME://... the store of scheme NAME. */
static const be_ops *pick(const char *name)
{
	const char *sep = strstr(name, "://");
	for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++) {
		const char *sc = stores[i]->scheme;
		if (sep ? sc && strlen(sc) == (size_t)(sep - name) && !memcmp(sc, name, (size_t)(sep - name)) : !sc)
			return stores[i];
	}
	return NULL;
}

int be_open(const char *name, const be_options *o, be_store **out)
{
	const be_ops *ops = pick(name);
	last_open = ops;
	return ops ? ops->open(name, o, out) : BE_EBADSTORE;
}

int be_mkfs(const char *name, const be_options *o)
{
	const be_ops *ops = pick(name);
	last_open = ops;
	if (!ops)
		return BE_EBADSTORE;
	return ops->mkfs ? ops->mkfs(name, o) : BE_EINVAL;
}

int be_private(const char *name, const char *logdir, int tighten, be_loose_fn *loose, void *arg, unsigned *count)
{
	const be_ops *ops = pick(name);
	last_open = ops;
	if (count)
		*count = 0;
	return ops ? ops->private_(name, logdir, tighten, loose, arg, count) : BE_EBADSTORE;
}

const char *be_errmsg(const be_store *s)
{
	const be_ops *ops = s ? s->ops : last_open;
	return ops ? ops->errmsg() : "no store of this kind (a path, or a scheme:// this build knows)";
}

const char *be_strerror(int rc)
{
	switch (rc) {
	case 0: return "success";
	case BE_ENOTFOUND: return "not found";
	case BE_EDEADLOCK: return "deadlock victim";
	case BE_ECORRUPT: return "store corrupt";
	case BE_EPANIC: return "store needs recovery after a write failure";
	case BE_EVERSION: return "store format too new";
	case BE_EBADSTORE: return "not a tpfs store";
	case BE_EINVAL: return "invalid argument";
	case BE_EROLLBACK: return "transaction must be aborted";
	case BE_ETIMEOUT: return "lock wait timed out";
	default: return rc > 0 ? strerror(rc) : "unknown store error";
	}
}
