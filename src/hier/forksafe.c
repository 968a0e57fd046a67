/*
 * forksafe.c - what the libraries of a process that runs threads need around the chips' fork.
 *
 * px_worker_init forks the chips from the thread that calls it, in whatever process the user
 * has (numpy's BLAS pool, a thread pool of the program's, MPI's threads). fork() copies that
 * one thread; what another thread holds at that moment stays held in the child. glibc covers
 * its own state (malloc, stdio, the loader), util_fork covers plexus's locks, the Python
 * package covers the interpreter (a fork handler of its own). This file covers the libraries
 * known to need more, found among the loaded objects by file name (dl_iterate_phdr) and then
 * by the symbols they export (a library loaded RTLD_LOCAL, as numpy loads its BLAS, is not
 * seen by dlsym(RTLD_DEFAULT)):
 *  - OpenBLAS, pthreads build (a file whose name has "blas" and that exports
 *    openblas_set_num_threads, with or without numpy's 64_ suffix and scipy_ prefix): its fork
 *    handler stops its pool before the fork, and races with a BLAS call another thread runs
 *    meanwhile (a worker finishing its part overwrites the handler's stop word and the join
 *    waits forever; a caller queues to a worker that has gone and waits forever). So before
 *    the first fork plexus sets it to one thread (calls that start now run on their caller
 *    only) and waits, bounded, until every pool worker sleeps on its condition variable: a
 *    thread in FUTEX_WAIT_BITSET (how glibc's pthread_cond_wait sleeps; a mutex sleeps in
 *    FUTEX_WAIT) on an address inside OpenBLAS's writable segments, read from
 *    /proc/self/task/TID/syscall (the pool's size: OpenBLAS's blas_num_threads - 1 where it
 *    is exported, else its thread count - 1). The handler then stops an idle pool. After
 *    the forks the parent gets its thread count back (the pool starts again); the chips keep
 *    one BLAS thread (a chip's cores are its share of the CPUs already). A pool still busy
 *    at the bound is refused, naming the library. Not covered: OpenBLAS's buffer allocator lock
 *    (no fork handler in builds without USE_TLS), held for a moment by every BLAS call: a
 *    chip whose kernels call BLAS could find it held if another thread was inside it at the
 *    instant of the fork; plexus cannot take it.
 *  - GNU OpenMP (libgomp): no fork handler; a chip would inherit a thread pool without its
 *    threads and hang at its first parallel region (GCC bug 60035), and its threads cannot be
 *    told from others: refused when loaded in a process that runs other threads. LLVM's and
 *    Intel's OpenMP (libomp, libiomp5) reset themselves in the child through fork handlers.
 *  - MPI (libmpi.so): refused once MPI_Initialized says so: Open MPI does not support fork
 *    after MPI_Init (the comm layer's init hook refuses the cases it knows first, with its
 *    own words; this catches a worker with PLEXUS_MPI=off in such a process).
 * One level-3 init at a time does all of this (a process-wide lock from hier_fork_prepare to
 * hier_fork_finish), so two inits never save each other's BLAS thread count.
 */
#include "hier/hier_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mpi/mpi_load.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/util.h"
#include "util/wait.h"

#define HIER_BLAS_IDLE_NS 5000000000ull /* a BLAS pool must be idle within this */
#define HIER_BLAS_POLL_NS 1000000ull    /* looked at this often meanwhile */
#define HIER_OBJS_MAX 16                /* candidate objects looked at */

/* ThreadSanitizer runs a background thread of its own once any thread was started. */
#if defined(__SANITIZE_THREAD__)
#define HIER_TOOL_THREADS 1
#else
#define HIER_TOOL_THREADS 0
#endif

static pthread_mutex_t hier_fork_lock = PTHREAD_MUTEX_INITIALIZER;

/* A loaded object whose file name makes it a candidate. */
typedef struct hier_obj {
    char path[256];
    uintptr_t base;                    /* load address of its first segment */
    uintptr_t lo[HIER_FORK_RANGES], hi[HIER_FORK_RANGES]; /* its writable segments */
    int nranges;
} hier_obj;

typedef struct hier_objs {
    hier_obj o[HIER_OBJS_MAX];
    int n;
} hier_objs;

/* The file-name part of path. */
static const char *hier_base_name(const char *path)
{
    const char *s = strrchr(path, '/');

    return s != NULL ? s + 1 : path;
}

/* dl_iterate_phdr callback: keeps the objects named like a BLAS, libgomp or libmpi. */
static int hier_obj_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    hier_objs *objs = arg;
    const char *name = info->dlpi_name != NULL ? hier_base_name(info->dlpi_name) : "";
    hier_obj *o;
    int first = 1;

    (void)size;
    if (objs->n == HIER_OBJS_MAX ||
        (strstr(name, "blas") == NULL && strncmp(name, "libgomp", 7) != 0 &&
         strncmp(name, "libmpi.so", 9) != 0))
        return 0;
    o = &objs->o[objs->n++];
    snprintf(o->path, sizeof(o->path), "%s", info->dlpi_name);
    o->nranges = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

        if (ph->p_type != PT_LOAD)
            continue;
        if (first) {
            o->base = (info->dlpi_addr + ph->p_vaddr) & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
            first = 0;
        }
        if ((ph->p_flags & PF_W) && o->nranges < HIER_FORK_RANGES) {
            o->lo[o->nranges] = info->dlpi_addr + ph->p_vaddr;
            o->hi[o->nranges++] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        }
    }
    return 0;
}

/* sym in object o itself (not one of its dependencies), or NULL. */
static void *hier_obj_sym(void *dl, const hier_obj *o, const char *sym)
{
    void *p = dlsym(dl, sym);
    Dl_info di;

    if (p == NULL || dladdr(p, &di) == 0 || (uintptr_t)di.dli_fbase != o->base)
        return NULL;
    return p;
}

/* OpenBLAS's name for what (set_num_threads, ...) in o: plain, numpy's 64_ suffix, scipy's
 * prefix; NULL when o does not export it. */
static void *hier_openblas_sym(void *dl, const hier_obj *o, const char *what)
{
    static const char *const pre[] = {"openblas_", "scipy_openblas_"};
    static const char *const suf[] = {"", "64_", "_64"};
    char name[96];
    void *p;

    for (size_t i = 0; i < PX_ARRAY_SIZE(pre); i++)
        for (size_t j = 0; j < PX_ARRAY_SIZE(suf); j++) {
            snprintf(name, sizeof(name), "%s%s%s", pre[i], what, suf[j]);
            if ((p = hier_obj_sym(dl, o, name)) != NULL)
                return p;
        }
    return NULL;
}

/* This process's threads (/proc/self/status), or -1. */
static int hier_threads(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "re");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* MPI initialised in this process (libmpi loaded and MPI_Initialized says so): refused. */
static px_status hier_fork_mpi(const hier_obj *o)
{
    void *dl = dlopen(o->path, RTLD_LAZY | RTLD_NOLOAD);
    int (*initialized)(int *) = dl != NULL ? (int (*)(int *))dlsym(dl, "MPI_Initialized") : NULL;
    int flag = 0;
    px_status st = PX_OK;

    if (initialized != NULL && initialized(&flag) == 0 && flag)
        st = px_mpi_state() != PX_MPI_STATE_NONE
                 ? px_set_error(PX_ESTATE, "px_worker_init at level 3: MPI was initialised in "
                                "this process by an earlier level-3 worker (its MPI proxy; "
                                "%s), and Open MPI does not support fork after MPI_Init, nor "
                                "MPI_Init again after MPI_Finalize: one level-3 worker per "
                                "process under MPI. Run everything on the first worker, or "
                                "start this one in a process of its own", o->path)
                 : px_set_error(PX_ESTATE, "px_worker_init at level 3: MPI is initialised "
                                "in this process already (%s), and Open MPI does not support "
                                "fork after MPI_Init: create the level-3 worker before "
                                "MPI_Init and leave MPI to plexus", o->path);
    if (dl != NULL)
        dlclose(dl);
    return st;
}

/* GNU OpenMP loaded in a process that runs other threads: refused. */
static px_status hier_fork_gomp(const hier_obj *o)
{
    int n = hier_threads();

    if (n <= 1 + HIER_TOOL_THREADS)
        return PX_OK;
    return px_set_error(PX_ESTATE, "px_worker_init at level 3: GNU OpenMP (%s) is loaded and "
                        "this process runs %d threads. libgomp has no fork handler: a chip "
                        "would inherit its thread pool without the threads and hang at its "
                        "first parallel region (GCC bug 60035), and plexus cannot tell "
                        "libgomp's threads from others. Create the level-3 worker before the "
                        "program's first OpenMP parallel region, or use libraries built "
                        "without GNU OpenMP (libopenblas0-pthread rather than "
                        "libopenblas0-openmp; LLVM's libomp handles fork)", o->path, n);
}

/* Sets OpenBLAS in o to one thread (saved in fl) when it is a pthreads build with a pool. */
static void hier_fork_openblas(const hier_obj *o, hier_fork_libs *fl)
{
    void *dl;
    int (*get)(void), (*par)(void);
    void (*set)(int);
    const int *nthreads;
    hier_fork_blas *b;

    if (fl->nblas == HIER_FORK_BLAS_MAX || (dl = dlopen(o->path, RTLD_LAZY | RTLD_NOLOAD)) == NULL)
        return;
    get = (int (*)(void))hier_openblas_sym(dl, o, "get_num_threads");
    set = (void (*)(int))hier_openblas_sym(dl, o, "set_num_threads");
    par = (int (*)(void))hier_openblas_sym(dl, o, "get_parallel");
    nthreads = hier_obj_sym(dl, o, "blas_num_threads"); /* the pool's size, where exported */
    dlclose(dl); /* the program keeps it loaded: the pointers stay valid */
    for (int i = 0; i < fl->nblas; i++)
        if (fl->blas[i].set == set)
            return; /* the same library under another file name */
    if (get == NULL || set == NULL || (par != NULL && par() != 1) || get() <= 1)
        return; /* not OpenBLAS, sequential, OpenMP (libgomp's rule), or no pool in use */
    b = &fl->blas[fl->nblas++];
    snprintf(b->path, sizeof(b->path), "%s", o->path);
    b->set = set;
    b->saved = get();
    b->pool = (nthreads != NULL && *nthreads > b->saved ? *nthreads : b->saved) - 1;
    b->nranges = o->nranges;
    memcpy(b->lo, o->lo, sizeof(b->lo));
    memcpy(b->hi, o->hi, sizeof(b->hi));
    set(1);
}

/* Counts, per OpenBLAS of fl, the threads asleep on a condition variable in its data. */
static int hier_blas_sleepers(hier_fork_libs *fl)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int seen = 0;

    for (int i = 0; i < fl->nblas; i++)
        fl->blas[i].asleep = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[300], line[256];
        unsigned long addr, op;
        long nr;
        FILE *f;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/syscall", e->d_name);
        if ((f = fopen(path, "re")) == NULL)
            continue;
        if (fgets(line, sizeof(line), f) != NULL) {
            seen = 1; /* "running" or "nr args..." */
            if (sscanf(line, "%ld 0x%lx 0x%lx", &nr, &addr, &op) == 3 && nr == SYS_futex &&
                (op & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET)
                for (int i = 0; i < fl->nblas; i++)
                    for (int r = 0; r < fl->blas[i].nranges; r++)
                        if (addr >= fl->blas[i].lo[r] && addr < fl->blas[i].hi[r])
                            fl->blas[i].asleep++;
        }
        fclose(f);
    }
    closedir(d);
    return seen ? 0 : -1;
}

/* ready() of the idle wait: every pool of fl asleep (or /proc unreadable: never). */
static int hier_blas_idle(void *arg)
{
    hier_fork_libs *fl = arg;

    if (hier_blas_sleepers(fl) != 0) {
        fl->unreadable = 1;
        return 0;
    }
    for (int i = 0; i < fl->nblas; i++)
        if (fl->blas[i].asleep < fl->blas[i].pool)
            return 0;
    return 1;
}

/* The bound of the idle wait: HIER_BLAS_IDLE_NS, or PX_TEST_BLAS_IDLE_MS (tests only: so a
 * test reaches the refusal without a BLAS call that runs for seconds). */
static uint64_t hier_blas_bound_ns(void)
{
    const char *t = getenv("PX_TEST_BLAS_IDLE_MS");

    return t != NULL && atoi(t) > 0 ? (uint64_t)atoi(t) * 1000000ull : HIER_BLAS_IDLE_NS;
}

/* Waits until every OpenBLAS pool of fl sleeps; refuses at the bound. */
static px_status hier_blas_quiesce(hier_fork_libs *fl)
{
    _Atomic uint32_t no_bell = 0;
    uint64_t t0 = px_now_ns(), bound = hier_blas_bound_ns();
    util_wait wt = {.ready = hier_blas_idle, .arg = fl, .word = &no_bell,
                    .yield_ticks = px_ns_to_ticks(HIER_BLAS_POLL_NS),
                    .deadline_ns = t0 + bound, .slice_ns = HIER_BLAS_POLL_NS};

    if (fl->nblas == 0)
        return PX_OK;
    if (util_wait_run(&wt) == PX_OK) {
        fl->idle_ms = (double)(px_now_ns() - t0) / 1e6;
        return PX_OK;
    }
    for (int i = 0; i < fl->nblas; i++) {
        const hier_fork_blas *b = &fl->blas[i];

        if (b->asleep >= b->pool && !fl->unreadable)
            continue;
        return px_set_error(PX_ESTATE, "px_worker_init at level 3: OpenBLAS (%s) still had "
                            "%d of its %d pool threads busy %.3g s after plexus set it to one "
                            "thread for the fork%s: a BLAS call that began before is still "
                            "running in another thread, and OpenBLAS's own fork handler (it "
                            "stops the pool) can hang against a running call. Create the "
                            "level-3 worker (Python: w.init()) before BLAS work starts in "
                            "other threads, or while none runs", b->path,
                            b->pool - b->asleep, b->pool, (double)bound / 1e9,
                            fl->unreadable ? " (and /proc/self/task/*/syscall, where plexus "
                                             "sees them sleep, cannot be read)" : "");
    }
    return PX_OK;
}

px_status hier_fork_prepare(hier_fork_libs *fl)
{
    hier_objs *objs = calloc(1, sizeof(*objs));
    px_status st = PX_OK;

    memset(fl, 0, sizeof(*fl));
    if (objs == NULL)
        return px_set_error(PX_ENOMEM, "level 3: out of memory before the fork");
    pthread_mutex_lock(&hier_fork_lock);
    fl->threads = hier_threads();
    dl_iterate_phdr(hier_obj_cb, objs); /* names and segments only: dlopen comes after */
    for (int i = 0; st == PX_OK && i < objs->n; i++) {
        const char *name = hier_base_name(objs->o[i].path);

        if (strncmp(name, "libmpi.so", 9) == 0)
            st = hier_fork_mpi(&objs->o[i]);
        else if (strncmp(name, "libgomp", 7) == 0)
            st = hier_fork_gomp(&objs->o[i]);
    }
    for (int i = 0; st == PX_OK && i < objs->n; i++)
        if (strstr(hier_base_name(objs->o[i].path), "blas") != NULL)
            hier_fork_openblas(&objs->o[i], fl);
    free(objs);
    if (st == PX_OK)
        st = hier_blas_quiesce(fl);
    if (st != PX_OK) {
        hier_fork_finish(fl);
        return st;
    }
    fl->locked = 1;
    return PX_OK;
}

void hier_fork_finish(hier_fork_libs *fl)
{
    for (int i = 0; i < fl->nblas; i++)
        fl->blas[i].set(fl->blas[i].saved);
    fl->locked = 0;
    pthread_mutex_unlock(&hier_fork_lock);
}

void hier_fork_child(void)
{
    pthread_mutex_init(&hier_fork_lock, NULL); /* held by the init that forked this child */
}

void hier_fork_describe(const hier_fork_libs *fl, char *buf, size_t n)
{
    size_t len = 0;

    len += (size_t)snprintf(buf, n, "%d threads", fl->threads);
    for (int i = 0; i < fl->nblas && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "; OpenBLAS %s: %d pool threads idle "
                                "after %.0f ms, chips start with 1 BLAS thread",
                                fl->blas[i].path, fl->blas[i].pool, fl->idle_ms);
}
