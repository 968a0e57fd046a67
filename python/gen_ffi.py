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

The emitted C file is compiled by CMake (python/CMakeLists.txt), with the binding's own C
helpers (python/pxpy.c, declared in python/pxpy.h and again in HELPER_CDEF below), into the
extension module plexus/_plexus_cffi*.so; nothing here calls a compiler except the
preprocessor, and this file holds no C function bodies.
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

# The binding's own C helpers, declared to cffi: the same declarations as python/pxpy.h (cffi
# cannot read a header), whose definitions are python/pxpy.c; the generated module includes
# pxpy.h, so the compiler checks that the two agree. A px_kernel_fn has no user pointer, so
# each Python kernel gets one C trampoline of a fixed table (pxpy.c) that passes its slot on.
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
char *pxpy_caps_json(const px_caps *c);
char *pxpy_config_text(const px_config *c);
void pxpy_free(void *p);

extern "Python" px_status pxpy_orch_cb(px_orch *o, const px_task_args *args, void *user);
extern "Python" px_status pxpy_host_cb(const px_task_args *args, void *user);
extern "Python+C" px_status pxpy_kernel_cb(int slot, px_core_ctx *ctx, const px_task_args *args);
extern "Python+C" px_status pxpy_callable_cb(int slot, px_orch *o, const px_task_args *args);
"""



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
                   "#include <plexus/plexus.h>\n#include \"pxpy.h\"\n")
    tmp = opts.out + ".tmp"
    ffi.emit_c_code(tmp)
    os.replace(tmp, opts.out)
    if opts.cdef_out:
        with open(opts.cdef_out, "w") as f:
            f.write(cdef)


if __name__ == "__main__":
    main()
