/*
 * pxpy.h - the Python binding's own C helpers (pxpy.c), between the cffi extension module
 * and libplexus. python/gen_ffi.py declares the same names to cffi (its HELPER_CDEF: cffi
 * cannot read a header), and the generated module includes this file, so the compiler checks
 * that the two agree (the struct's layout included).
 */
#ifndef PXPY_H
#define PXPY_H

#include <stdint.h>
#include <plexus/plexus.h>

/* ---- Python kernels and callables: a C trampoline per slot passes its slot number ---- */

/* The trampoline of kernel (callable) slot `slot`, NULL outside 0 .. pxpy_slots() - 1. */
px_kernel_fn pxpy_kernel_slot(int slot);
px_orch_fn pxpy_callable_slot(int slot);
int pxpy_slots(void);

/* Defined in Python (cffi's extern "Python+C", in the generated module). */
px_status pxpy_kernel_cb(int slot, px_core_ctx *ctx, const px_task_args *args);
px_status pxpy_callable_cb(int slot, px_orch *o, const px_task_args *args);

/* ---- workers: px_worker_init with the interpreter made ready for chip processes ---- */
px_status pxpy_worker_init(px_worker *w);
int pxpy_fork_hook(void);

/* ---- kernel libraries ---- */
void *pxpy_dlopen(const char *path);
const char *pxpy_dlerror(void);
void *pxpy_dlsym(void *h, const char *name);
int pxpy_dlclose(void *h);

/* px_set_error with a message that is not a format. */
px_status pxpy_set_error(px_status s, const char *msg);

/* ---- task arguments from tag codes (see pxpy.c) ---- */
px_status pxpy_build(px_task_args *a, int n, const uint8_t *tags, px_tensor **ts,
                     const double *f, const int64_t *i);
px_status pxpy_submit(px_orch *o, px_kernel_id k, px_task_args *a, int n, const uint8_t *tags,
                      px_tensor **ts, const double *f, const int64_t *i, px_task_id *id);

/* submit's fast path: everything but the kernel and the count lives in one struct the
 * orchestration keeps, so a task costs a C call with three arguments. */
typedef struct pxpy_sub {
    px_orch *o;
    px_task_args a;
    px_tensor *ts[PX_MAX_ARGS];
    double f[PX_MAX_ARGS];
    int64_t i[PX_MAX_ARGS];
    uint8_t tags[PX_MAX_ARGS];
    px_task_id id;
} pxpy_sub;

px_status pxpy_submit_sub(pxpy_sub *s, px_kernel_id k, int n);

/* ---- the probe as JSON and the knob table as text (malloc'd; pxpy_free) ---- */
char *pxpy_caps_json(const px_caps *c);
char *pxpy_config_text(const px_config *c);
void pxpy_free(void *p);

#endif
