#ifndef TP_TEST_H
#define TP_TEST_H
/*
 * tp_test.h -- entry points of the engine that exist for tests only.
 *
 * Not part of the product's interface (tp.h): only the engine's tests see
 * this header (tptest_dep / tp_internal_dep in core/meson.build).
 */
#include <stddef.h>

#include "tp.h"

/* Pages pinned right now in the buffer pool (0 between calls). */
size_t tp_debug_pinned(tp_env *env);

#endif
