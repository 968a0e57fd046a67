#!/usr/bin/env python3
"""gen_ffi.py - generates plexus's cffi extension source from the public headers.

    gen_ffi.py --include DIR --out FILE.c [--cdef-out FILE.h]

The declarations are not written by hand: the C preprocessor expands include/plexus/plexus.h
(its X-macro tables become plain enums, PX_API and PX_PRINTF expand to nothing because
__GNUC__ is undefined, and the C library headers are replaced by empty stand-ins whose types
cffi knows), and the result is the cdef. Object-like macros with an integer value become
`#define NAME ...` (cffi reads their values when compiling); the other macros are listed in
the generated file's comment with the reason they are left out. Anything cffi cannot parse
fails the build with the construct and the header line it came from: a header change that
the binding does not handle is never dropped silently.

The emitted C file is compiled by CMake (python/CMakeLists.txt) into the extension module
plexus/_plexus_cffi*.so; nothing here calls a compiler except the preprocessor.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import cffi

# C library headers the public headers may include, and the types cffi already knows from them.
STAND_INS = ("stdint.h", "stddef.h", "stdio.h", "stdbool.h", "stdarg.h")

# Kernel and callable slots: a px_kernel_fn has no user pointer, so each Python kernel gets one
# C trampoline of this fixed table that passes its slot number on.
SLOTS = 64

# The binding's own C helpers: declared here and defined in HELPERS below.
HELPER_CDEF = r"""
px_kernel_fn pxpy_kernel_slot(int slot);
px_orch_fn pxpy_callable_slot(int slot);
int pxpy_slots(void);
px_status pxpy_worker_init(px_worker *w);
int pxpy_fork_hook(void);
void *pxpy_dlopen(const char *path);
const char *pxpy_dlerror(void);
void *pxpy_dlsym(void *h, const char *name);
int pxpy_dlclose(void *h);
px_status pxpy_set_error(px_status s, const char *msg);
px_status pxpy_submit(px_orch *o, px_kernel_id k, px_task_args *a, int n, const uint8_t *tags,
                      px_tensor **ts, const double *f, const int64_t *i, px_task_id *id);
px_status pxpy_build(px_task_args *a, int n, const uint8_t *tags, px_tensor **ts,
                     const double *f, const int64_t *i);
typedef struct pxpy_sub {
    px_orch *o;
    px_task_args a;
    px_tensor *ts[16];
    double f[16];
    int64_t i[16];
    uint8_t tags[16];
    px_task_id id;
} pxpy_sub;
px_status pxpy_submit_sub(pxpy_sub *s, px_kernel_id k, int n);
px_status pxpy_copy_kernel(px_core_ctx *ctx, const px_task_args *args);
px_status pxpy_copy_host(const px_task_args *args, void *user);
char *pxpy_caps_json(const px_caps *c);
char *pxpy_config_text(const px_config *c);
void pxpy_free(void *p);

extern "Python" px_status pxpy_orch_cb(px_orch *o, const px_task_args *args, void *user);
extern "Python" px_status pxpy_host_cb(const px_task_args *args, void *user);
extern "Python" px_status pxpy_kernel_cb(int slot, px_core_ctx *ctx, const px_task_args *args);
extern "Python" px_status pxpy_callable_cb(int slot, px_orch *o, const px_task_args *args);
"""

HELPERS = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static px_status pxpy_kernel_cb(int slot, px_core_ctx *ctx, const px_task_args *args);
static px_status pxpy_callable_cb(int slot, px_orch *o, const px_task_args *args);

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

px_status pxpy_submit_sub(pxpy_sub *s, px_kernel_id k, int n)
{
    return pxpy_submit(s->o, k, &s->a, n, s->tags, s->ts, s->f, s->i, &s->id);
}

/* The staging copies of the host arrays an orchestration uses: tensor 0 is the contiguous
 * device (or host-heap) copy, scalar 1 the host address, scalar 2 the direction (0: the
 * copy-back, tensor to host, after the tasks that wrote it; 1: tensor from host, a copy-in
 * that must wait for an earlier copy-back of the same host bytes). */
static px_status pxpy_copy(const px_task_args *args)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    int64_t n = px_arg_numel(args, 0);
    void *host = (void *)(uintptr_t)px_arg_u64(args, 1);
    size_t bytes;

    if (t == NULL || n < 0 || px_arg_count(args) != 3 || host == NULL)
        return px_set_error(PX_EINVAL, "python: staging copy task got malformed arguments "
                            "(a bug of the plexus package: please report it)");
    bytes = (size_t)n * px_dtype_size(t->dtype);
    if (px_arg_u64(args, 2) == 0)
        memcpy(host, px_tensor_data(t), bytes);
    else
        memcpy(px_tensor_data(t), host, bytes);
    return PX_OK;
}

px_status pxpy_copy_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    (void)ctx;
    return pxpy_copy(args);
}

px_status pxpy_copy_host(const px_task_args *args, void *user)
{
    (void)user;
    return pxpy_copy(args);
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
"""


def slot_code(n):
    """The trampoline tables: pxpy_k<i> and pxpy_c<i> pass their slot to Python."""
    out = []
    for i in range(n):
        out.append("static px_status pxpy_k%d(px_core_ctx *c, const px_task_args *a) "
                   "{ return pxpy_kernel_cb(%d, c, a); }" % (i, i))
        out.append("static px_status pxpy_c%d(px_orch *o, const px_task_args *a, void *u) "
                   "{ (void)u; return pxpy_callable_cb(%d, o, a); }" % (i, i))
    out.append("static const px_kernel_fn pxpy_kslots[%d] = {%s};"
               % (n, ", ".join("pxpy_k%d" % i for i in range(n))))
    out.append("static const px_orch_fn pxpy_cslots[%d] = {%s};"
               % (n, ", ".join("pxpy_c%d" % i for i in range(n))))
    out.append("px_kernel_fn pxpy_kernel_slot(int s) "
               "{ return s >= 0 && s < %d ? pxpy_kslots[s] : NULL; }" % n)
    out.append("px_orch_fn pxpy_callable_slot(int s) "
               "{ return s >= 0 && s < %d ? pxpy_cslots[s] : NULL; }" % n)
    out.append("int pxpy_slots(void) { return %d; }" % n)
    return "\n".join(out) + "\n"


INT_RE = re.compile(r"^\s*#\s*define\s+(PX_\w+)\s+"
                    r"(\(?-?(?:0x[0-9a-fA-F]+|\d+)[uUlL]*\)?)\s*(?:/\*.*)?$")
DEFINE_RE = re.compile(r"^\s*#\s*define\s+(\w+)(\(?)")


def scan_macros(incdir, headers):
    """Integer macros (exported) and the others (listed with why they are left out)."""
    ints, skipped = [], []
    for h in headers:
        path = os.path.join(incdir, "plexus", h)
        with open(path) as f:
            lines = f.read().replace("\\\n", " ").split("\n")
        for ln in lines:
            m = DEFINE_RE.match(ln)
            if not m:
                continue
            name = m.group(1)
            if re.fullmatch(r"PLEXUS_\w+_H", name):
                continue  # include guard
            mi = INT_RE.match(ln)
            if mi:
                ints.append(name)
            elif m.group(2) == "(":
                skipped.append((h, name, "function-like (an X-macro table is expanded by the "
                                "preprocessor)"))
            else:
                skipped.append((h, name, "not an integer constant"))
    return ints, sorted(set(skipped))


def headers_of(incdir):
    """The headers plexus.h includes, in its order, plus any other public header."""
    with open(os.path.join(incdir, "plexus", "plexus.h")) as f:
        order = re.findall(r"#include\s*<plexus/(\w+\.h)>", f.read())
    every = sorted(x for x in os.listdir(os.path.join(incdir, "plexus")) if x.endswith(".h"))
    missing = [h for h in every if h not in order and h != "plexus.h"]
    return order + missing + ["plexus.h"], missing


def preprocess(incdir, extra):
    with tempfile.TemporaryDirectory() as tmp:
        for h in STAND_INS:
            open(os.path.join(tmp, h), "w").close()
        src = os.path.join(tmp, "all.h")
        with open(src, "w") as f:
            f.write("#include <plexus/plexus.h>\n")
            for h in extra:
                f.write("#include <plexus/%s>\n" % h)
        cpp = os.environ.get("CC", "cc")
        cmd = [cpp, "-E", "-P", "-nostdinc", "-U__GNUC__", "-U__cplusplus", "-I", tmp,
               "-I", incdir, src]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("gen_ffi: the preprocessor failed on the public headers (%s):\n%s\n"
                     "A public header includes something the binding does not stand in for: "
                     "add it to STAND_INS in python/gen_ffi.py if cffi knows its types."
                     % (" ".join(cmd), r.stderr))
        return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--include", required=True, help="the include/ folder")
    ap.add_argument("--out", required=True, help="C file to write")
    ap.add_argument("--cdef-out", help="also write the generated cdef here")
    opts = ap.parse_args()

    headers, extra = headers_of(opts.include)
    text = preprocess(opts.include, extra)
    leftovers = [ln for ln in text.split("\n") if "__attribute__" in ln or "inline" in ln]
    if leftovers:
        sys.exit("gen_ffi: construct not handled in the public headers: %r\n"
                 "Teach python/gen_ffi.py about it (or keep it out of the public headers)."
                 % leftovers[0])
    ints, skipped = scan_macros(opts.include, headers)
    cdef = text + "\n" + "".join("#define %s ...\n" % n for n in ints) + HELPER_CDEF
    ffi = cffi.FFI()
    try:
        ffi.cdef(cdef)
    except cffi.CDefError as e:
        sys.exit("gen_ffi: cffi cannot parse the declarations generated from %s/plexus: %s\n"
                 "Teach python/gen_ffi.py about that construct." % (opts.include, e))
    note = "".join(" *   %s %s: %s\n" % s for s in skipped)
    ffi.set_source("plexus._plexus_cffi",
                   "/* generated by python/gen_ffi.py from include/plexus/*.h: do not edit.\n"
                   " * Macros left out of the cdef:\n" + note + " */\n"
                   "#include <plexus/plexus.h>\n" + HELPERS + slot_code(SLOTS))
    tmp = opts.out + ".tmp"
    ffi.emit_c_code(tmp)
    os.replace(tmp, opts.out)
    if opts.cdef_out:
        with open(opts.cdef_out, "w") as f:
            f.write(cdef)


if __name__ == "__main__":
    main()
