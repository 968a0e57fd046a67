/*
 * pxpy.c - the Python binding's own C helpers (declared in pxpy.h): the trampolines of Python
 * kernels and callables, px_worker_init made safe for an interpreter (chip processes are
 * forked while Python runs), dlopen for kernel libraries, the fast submit from tag codes,
 * and the probe's and the config's text (host arrays are the runtime's: px_tensor_from_host). Compiled into the extension
 * module beside the source cffi generates (python/CMakeLists.txt).
 */
#include <Python.h> /* first, as Python asks */

#include "pxpy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- chip processes: fork from C while Python runs ----
 * px_worker_init at level 3 forks one process per chip from the calling thread, which cffi
 * has made release the GIL, while other Python threads may run. Fork handlers armed for that
 * thread only, and only inside pxpy_worker_init, do what os.fork does around each of its
 * forks: before, take the GIL (so no other thread runs Python during the copy) and
 * PyOS_BeforeFork (the os.register_at_fork "before" callbacks, the import lock); in the
 * parent, PyOS_AfterFork_Parent and give the GIL back; in the child, PyOS_AfterFork_Child
 * (a fresh GIL, other threads' states dropped, the import lock and the threading module
 * reset, the "after_in_child" callbacks) and give the GIL back, so the chip's threads can run
 * Python callables and kernels. A fork by any other thread meanwhile (subprocess, say) is
 * not touched, nor is any fork outside pxpy_worker_init. */
static volatile int pxpy_forking;
static pthread_t pxpy_forker;
static PyGILState_STATE pxpy_fork_gil;
static int pxpy_hooked;

static int pxpy_is_forker(void)
{
    return pxpy_forking && pthread_equal(pthread_self(), pxpy_forker);
}

static void pxpy_fork_prepare(void)
{
    if (!pxpy_is_forker())
        return;
    pxpy_fork_gil = PyGILState_Ensure();
    PyOS_BeforeFork();
}

static void pxpy_fork_parent(void)
{
    if (!pxpy_is_forker())
        return;
    PyOS_AfterFork_Parent();
    PyGILState_Release(pxpy_fork_gil);
}

static void pxpy_fork_child(void)
{
    if (!pxpy_is_forker())
        return;
    pxpy_forking = 0;
    PyOS_AfterFork_Child();
    PyGILState_Release(pxpy_fork_gil);
}

px_status pxpy_worker_init(px_worker *w)
{
    px_status st;

    if (!pxpy_hooked) {
        if (pthread_atfork(pxpy_fork_prepare, pxpy_fork_parent, pxpy_fork_child) != 0)
            return px_set_error(PX_ENOMEM, "python: pthread_atfork failed: cannot prepare the "
                                "interpreter for chip processes; free memory and retry");
        pxpy_hooked = 1;
    }
    pxpy_forker = pthread_self();
    pxpy_forking = 1;
    st = px_worker_init(w);
    pxpy_forking = 0;
    return st;
}

int pxpy_fork_hook(void)
{
    return pxpy_hooked;
}

void *pxpy_dlopen(const char *path)
{
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

const char *pxpy_dlerror(void)
{
    const char *e = dlerror();

    return e ? e : "";
}

void *pxpy_dlsym(void *h, const char *name)
{
    return dlsym(h, name);
}

int pxpy_dlclose(void *h)
{
    return dlclose(h);
}

px_status pxpy_set_error(px_status s, const char *msg)
{
    return px_set_error(s, "%s", msg);
}

/* Builds a from n tags (px_tag values; PX_TAG_SCALAR with kind in the tag's high bits:
 * 0x80 | PX_SCALAR_F64 is tagged 0x80 | 1<<4 ...): tensor args come from ts[], scalars from
 * f[] (f64) and i[] (i64, u64) at the same index. */
px_status pxpy_build(px_task_args *a, int n, const uint8_t *tags, px_tensor **ts,
                     const double *f, const int64_t *i)
{
    px_args_init(a);
    for (int k = 0; k < n; k++) {
        unsigned t = tags[k];

        switch (t) {
        case PX_TAG_IN: px_args_in(a, ts[k]); break;
        case PX_TAG_OUT: px_args_out(a, ts[k]); break;
        case PX_TAG_INOUT: px_args_inout(a, ts[k]); break;
        case PX_TAG_OUTPUT_EXISTING: px_args_output_existing(a, ts[k]); break;
        case PX_TAG_NO_DEP: px_args_no_dep(a, ts[k]); break;
        case 0x80 | PX_SCALAR_F64: px_args_scalar_f64(a, f[k]); break;
        case 0x80 | PX_SCALAR_I64: px_args_scalar_i64(a, i[k]); break;
        case 0x80 | PX_SCALAR_U64: px_args_scalar_u64(a, (uint64_t)i[k]); break;
        default:
            return px_set_error(PX_EINVAL, "python: argument %d has the invalid tag code %u "
                                "(a bug of the plexus package: please report it)", k, t);
        }
    }
    return PX_OK;
}

px_status pxpy_submit(px_orch *o, px_kernel_id k, px_task_args *a, int n, const uint8_t *tags,
                      px_tensor **ts, const double *f, const int64_t *i, px_task_id *id)
{
    px_status st = pxpy_build(a, n, tags, ts, f, i);

    return st == PX_OK ? px_submit(o, k, a, id) : st;
}

px_status pxpy_submit_sub(pxpy_sub *s, px_kernel_id k, int n)
{
    return pxpy_submit(s->o, k, &s->a, n, s->tags, s->ts, s->f, s->i, &s->id);
}

/* The probe as JSON and the knob table as text, in malloc'd strings (pxpy_free), NULL when
 * out of memory or on a write error (message set). */
char *pxpy_caps_json(const px_caps *c)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    px_status st;

    if (f == NULL) {
        px_set_error(PX_ENOMEM, "python: open_memstream failed for the probe's JSON");
        return NULL;
    }
    st = px_caps_write_json(c, f);
    fclose(f);
    if (st != PX_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *pxpy_config_text(const px_config *c)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);

    if (f == NULL) {
        px_set_error(PX_ENOMEM, "python: open_memstream failed for the knob table");
        return NULL;
    }
    px_config_print(c, f);
    fclose(f);
    return buf;
}

void pxpy_free(void *p)
{
    free(p);
}

/* ---- the trampolines: one per slot, each passing its slot number to Python ---- */

#define PXPY_SLOT_LIST(X)                                                                   \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)    \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29)      \
    X(30) X(31) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43)      \
    X(44) X(45) X(46) X(47) X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57)      \
    X(58) X(59) X(60) X(61) X(62) X(63)

#define PXPY_TRAMPOLINES(i)                                                                 \
    static px_status pxpy_k##i(px_core_ctx *c, const px_task_args *a)                       \
    {                                                                                       \
        return pxpy_kernel_cb(i, c, a);                                                     \
    }                                                                                       \
    static px_status pxpy_c##i(px_orch *o, const px_task_args *a, void *u)                  \
    {                                                                                       \
        (void)u;                                                                            \
        return pxpy_callable_cb(i, o, a);                                                   \
    }
PXPY_SLOT_LIST(PXPY_TRAMPOLINES)

#define PXPY_KSLOT(i) pxpy_k##i,
#define PXPY_CSLOT(i) pxpy_c##i,
static const px_kernel_fn pxpy_kslots[] = {PXPY_SLOT_LIST(PXPY_KSLOT)};
static const px_orch_fn pxpy_cslots[] = {PXPY_SLOT_LIST(PXPY_CSLOT)};
#define PXPY_SLOTS ((int)(sizeof(pxpy_kslots) / sizeof(pxpy_kslots[0])))

px_kernel_fn pxpy_kernel_slot(int s)
{
    return s >= 0 && s < PXPY_SLOTS ? pxpy_kslots[s] : NULL;
}

px_orch_fn pxpy_callable_slot(int s)
{
    return s >= 0 && s < PXPY_SLOTS ? pxpy_cslots[s] : NULL;
}

int pxpy_slots(void)
{
    return PXPY_SLOTS;
}
