/*
 * mpi_anchor.c - runs the Open MPI anchor (comm_mpi_anchor) under mpirun for bench_comm and
 * parses its ANCHOR lines (see mpi_anchor.h); also measures the single-thread memcpy floor.
 *
 * The mpirun configuration is pinned here, in one table, and returned as text so the
 * benchmark prints exactly what ran. The job runs in a session of its own with a private
 * scratch directory (Open MPI's session directory and shared-memory backing files) that is
 * removed afterwards, and under a wall-clock deadline: past it mpirun gets SIGTERM, then the
 * whole session SIGKILL. No MPI header is included: only the anchor program links libmpi.
 */
#define _GNU_SOURCE
#include "mpi_anchor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MPI_ANCHOR_MAX_ARGS 64
#define MPI_ANCHOR_LINE_MAX 1024
#define MPI_ANCHOR_KILL_GRACE_MS 3000
#define MPI_ANCHOR_HOSTS_GRACE_MS 20000 /* the harness's own clean-up: processes, namespaces */
#define MPI_ANCHOR_SKIPPED 77           /* the harness's "cannot run here" */

/* The pinned mpirun options (before -np and the scratch-directory options). */
/* clang-format off */
static const char *const mpi_anchor_pinned[] = {
    "--allow-run-as-root",                     /* we run as root, also in CI */
    "--oversubscribe",                         /* 4 ranks on 2 CPUs */
    "--bind-to", "none",                       /* the machine is shared; no pinning to cores */
    "--stdin", "none",                         /* never read the benchmark's terminal */
    "--mca", "pml", "ob1",                     /* point-to-point over the BTLs below */
    "--mca", "btl", "self,vader",              /* shared memory (vader) and self only */
    "--mca", "btl_vader_single_copy_mechanism", "cma", /* large messages: process_vm_* */
    "--mca", "osc", "sm",                      /* MPI_Win_allocate_shared: load/store window */
    "--mca", "btl_tcp_if_include", "lo",       /* nothing ever leaves loopback */
    "--mca", "oob_tcp_if_include", "lo",
    "--mca", "mpi_yield_when_idle", "1",       /* a waiting rank yields its CPU: see docs */
    NULL,
};

/* The pinned options of a job across the namespace hosts (bench_mpi_hosts_run), after the
 * harness's own (btl self,vader,tcp; btl_tcp_if_include and oob_tcp_if_include 10.213.0.0/24;
 * plm_rsh_agent, its hostfile, orte_tmpdir_base): the same for plexus's job and Open MPI's. */
static const char *const mpi_anchor_pinned_hosts[] = {
    "--allow-run-as-root",
    "--oversubscribe",
    "--bind-to", "none",
    "--stdin", "none",
    "--mca", "pml", "ob1",                     /* point-to-point over the harness's BTLs */
    "--mca", "btl_vader_single_copy_mechanism", "cma", /* ranks of one host */
    "--mca", "osc", "pt2pt",                   /* MPI_Win_allocate over ob1 (btl tcp) across
                                                  hosts: rdma refuses btl tcp, ucx goes
                                                  through shared memory between the
                                                  namespaces (see docs/benchmarks.md) */
    "--mca", "mpi_yield_when_idle", "1",       /* a waiting rank yields its CPU */
    NULL,
};
/* clang-format on */

/* Writes "what" into why (when given) and returns 0. */
static int mpi_anchor_no(char *why, size_t whyn, const char *fmt, const char *arg)
{
    if (why != NULL && whyn > 0)
        snprintf(why, whyn, fmt, arg);
    return 0;
}

/* Finds an executable named name on PATH; returns 1 and fills out, or 0. */
static int mpi_anchor_which(const char *name, char *out, size_t outn)
{
    const char *path = getenv("PATH");

    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t len = strcspn(path, ":");
        int n = snprintf(out, outn, "%.*s/%s", (int)len, path, name);

        if (len > 0 && n > 0 && (size_t)n < outn && access(out, X_OK) == 0)
            return 1;
        path += len;
        if (*path == ':')
            path++;
    }
    return 0;
}

/* The path of mpirun (PLEXUS_MPIRUN or PATH); returns 1, or 0 with why. */
static int mpi_anchor_mpirun(char *out, size_t outn, char *why, size_t whyn)
{
    const char *env = getenv("PLEXUS_MPIRUN");

    if (env != NULL && env[0] != '\0') {
        if (access(env, X_OK) != 0)
            return mpi_anchor_no(why, whyn, "PLEXUS_MPIRUN=%s is not an executable file", env);
        snprintf(out, outn, "%s", env);
        return 1;
    }
    if (!mpi_anchor_which("mpirun", out, outn))
        return mpi_anchor_no(why, whyn, "%s",
                             "mpirun is not on PATH (make deps-bench installs openmpi-bin)");
    return 1;
}

/* The path of comm_mpi_anchor (PLEXUS_MPI_ANCHOR or next to this program); 1, or 0 + why. */
static int mpi_anchor_program(char *out, size_t outn, char *why, size_t whyn)
{
    const char *env = getenv("PLEXUS_MPI_ANCHOR");
    char self[PATH_MAX];
    ssize_t n;
    char *slash;

    if (env != NULL && env[0] != '\0') {
        snprintf(out, outn, "%s", env);
    } else {
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return mpi_anchor_no(why, whyn, "cannot read /proc/self/exe: %s", strerror(errno));
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash != NULL)
            *slash = '\0';
        if (snprintf(out, outn, "%s/comm_mpi_anchor", self) >= (int)outn)
            return mpi_anchor_no(why, whyn, "%s", "the anchor's path is too long");
    }
    if (access(out, X_OK) != 0)
        return mpi_anchor_no(why, whyn,
                             "%s does not exist (built only when CMake finds MPI: run "
                             "make deps-bench, then reconfigure)",
                             out);
    return 1;
}

int bench_mpi_available(char *why, size_t whyn)
{
    char path[PATH_MAX];

    return mpi_anchor_mpirun(path, sizeof(path), why, whyn) &&
           mpi_anchor_program(path, sizeof(path), why, whyn);
}

/* The job's deadline in ms: by mode, or PLEXUS_MPI_ANCHOR_TIMEOUT_S; -1 on a bad value. */
static long mpi_anchor_timeout_ms(bench_mode mode)
{
    const char *env = getenv("PLEXUS_MPI_ANCHOR_TIMEOUT_S");
    char *end = NULL;
    double s;

    if (env == NULL || env[0] == '\0')
        return mode == BENCH_FULL ? 900000 : mode == BENCH_QUICK ? 180000 : 60000;
    s = strtod(env, &end);
    if (end == env || *end != '\0' || !(s > 0.0) || s > 86400.0) {
        fprintf(stderr,
                "bench_mpi_anchor: PLEXUS_MPI_ANCHOR_TIMEOUT_S='%s' is not a number "
                "of seconds in (0, 86400]; set e.g. 600 or unset it\n",
                env);
        return -1;
    }
    return (long)(s * 1000.0);
}

/* The job being built and run. */
typedef struct mpi_anchor_job {
    char mpirun[PATH_MAX];
    char program[PATH_MAX];
    char scratch[64]; /* private directory under /dev/shm, removed afterwards */
    char np[16];
    const char *argv[MPI_ANCHOR_MAX_ARGS];
    int argc;
    pid_t pid;
    int out_fd; /* the job's stdout */
    int variant; /* BENCH_MPI_DEFAULT or BENCH_MPI_MALLOC */
    const bench_mpi_hosts *hosts; /* NULL: mpirun on this host; else under the harness */
    char hosts_args[3][24];       /* --hosts, --np-per-host, --timeout values */
    const char *const *tail;      /* the program and its arguments; NULL: the anchor's */
    int put_peer;                 /* the anchor's put_signal partner (1: the default) */
    char peer_arg[24];
} mpi_anchor_job;

/* BENCH_MPI_MALLOC's environment: glibc keeps large blocks on the heap instead of mapping a
 * fresh one per call (its mmap threshold stops growing at 32 MiB, so Open MPI's 64 MiB
 * allreduce temporary was a new mapping, and its page faults, on every call). */
static const char *const mpi_anchor_malloc_env[] = {
    "MALLOC_MMAP_THRESHOLD_=1073741824", "MALLOC_TRIM_THRESHOLD_=4294967296",
    "MALLOC_TOP_PAD_=268435456", NULL,
};

/* Appends one argument; returns 0 or -1 (too many: a programming error, reported). */
static int mpi_anchor_arg(mpi_anchor_job *j, const char *a)
{
    if (j->argc + 1 >= MPI_ANCHOR_MAX_ARGS) {
        fprintf(stderr, "bench_mpi_anchor: more than %d mpirun arguments\n",
                MPI_ANCHOR_MAX_ARGS - 1);
        return -1;
    }
    j->argv[j->argc++] = a;
    j->argv[j->argc] = NULL;
    return 0;
}

/* The launcher: mpirun with the one-host pinned options, or the namespace harness (its
 * --hosts, --np-per-host, --timeout below the job's deadline, --mpirun) and the hosts' ones. */
static int mpi_anchor_launcher(mpi_anchor_job *j, int ranks, long timeout_ms)
{
    const char *const *pinned = j->hosts != NULL ? mpi_anchor_pinned_hosts : mpi_anchor_pinned;
    long harness_s = (timeout_ms - MPI_ANCHOR_HOSTS_GRACE_MS) / 1000;
    int rc = 0;

    if (j->hosts == NULL) {
        snprintf(j->np, sizeof(j->np), "%d", ranks);
        rc |= mpi_anchor_arg(j, j->mpirun);
    } else {
        snprintf(j->hosts_args[0], sizeof(j->hosts_args[0]), "%d", j->hosts->hosts);
        snprintf(j->hosts_args[1], sizeof(j->hosts_args[1]), "%d", j->hosts->per_host);
        snprintf(j->hosts_args[2], sizeof(j->hosts_args[2]), "%ld",
                 harness_s < 10 ? 10 : harness_s);
        snprintf(j->np, sizeof(j->np), "%d", j->hosts->hosts * j->hosts->per_host);
        rc |= mpi_anchor_arg(j, "/bin/sh");
        rc |= mpi_anchor_arg(j, j->hosts->harness);
        rc |= mpi_anchor_arg(j, "--hosts");
        rc |= mpi_anchor_arg(j, j->hosts_args[0]);
        rc |= mpi_anchor_arg(j, "--np-per-host");
        rc |= mpi_anchor_arg(j, j->hosts_args[1]);
        rc |= mpi_anchor_arg(j, "--timeout");
        rc |= mpi_anchor_arg(j, j->hosts_args[2]);
        rc |= mpi_anchor_arg(j, "--mpirun");
        rc |= mpi_anchor_arg(j, j->mpirun);
        rc |= mpi_anchor_arg(j, "--");
    }
    for (int i = 0; pinned[i] != NULL; i++)
        rc |= mpi_anchor_arg(j, pinned[i]);
    return rc;
}

/* Builds the argument vector; returns 0 or -1. */
static int mpi_anchor_argv(mpi_anchor_job *j, int ranks, bench_mode mode, unsigned ops,
                           long timeout_ms)
{
    static const char *const scratch_params[] = {"btl_vader_backing_directory",
                                                 "osc_sm_backing_directory", "orte_tmpdir_base"};
    static const char *const fwd[] = {"PLEXUS_MPI_ANCHOR_FAULT", "PLEXUS_MPI_ANCHOR_WAIT_S"};
    int rc = mpi_anchor_launcher(j, ranks, timeout_ms);

    /* under the harness, orte_tmpdir_base is the harness's own folder (removed by it) */
    for (size_t i = 0; i < sizeof(scratch_params) / sizeof(scratch_params[0]); i++) {
        if (j->hosts != NULL && i == 2)
            continue;
        rc |= mpi_anchor_arg(j, "--mca");
        rc |= mpi_anchor_arg(j, scratch_params[i]);
        rc |= mpi_anchor_arg(j, j->scratch);
    }
    for (size_t i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++) {
        if (getenv(fwd[i]) != NULL) {
            rc |= mpi_anchor_arg(j, "-x");
            rc |= mpi_anchor_arg(j, fwd[i]);
        }
    }
    for (int i = 0; j->variant == BENCH_MPI_MALLOC && mpi_anchor_malloc_env[i] != NULL; i++) {
        rc |= mpi_anchor_arg(j, "-x"); /* NAME=VALUE: mpirun sets it in every rank */
        rc |= mpi_anchor_arg(j, mpi_anchor_malloc_env[i]);
    }
    if (j->hosts == NULL) { /* the harness gives -np and the hostfile itself */
        rc |= mpi_anchor_arg(j, "-np");
        rc |= mpi_anchor_arg(j, j->np);
    }
    if (j->tail != NULL) {
        for (int i = 0; j->tail[i] != NULL; i++)
            rc |= mpi_anchor_arg(j, j->tail[i]);
        return rc;
    }
    rc |= mpi_anchor_arg(j, j->program);
    rc |= mpi_anchor_arg(j, bench_mode_name(mode));
    if (ops & BENCH_MPI_ALLREDUCE)
        rc |= mpi_anchor_arg(j, "allreduce");
    if (ops & BENCH_MPI_PUT_SIGNAL)
        rc |= mpi_anchor_arg(j, "put_signal");
    if ((ops & BENCH_MPI_PUT_SIGNAL) && j->put_peer != 1) {
        snprintf(j->peer_arg, sizeof(j->peer_arg), "put_peer=%d", j->put_peer);
        rc |= mpi_anchor_arg(j, j->peer_arg);
    }
    return rc;
}

/* Writes the command line (scratch directory shown as <scratch>) into cfg. */
static void mpi_anchor_cfg(const mpi_anchor_job *j, char *cfg, size_t cfgn)
{
    size_t used = 0;

    if (cfg == NULL || cfgn == 0)
        return;
    cfg[0] = '\0';
    used += (size_t)snprintf(cfg, cfgn,
                             "env=OMPI_ALLOW_RUN_AS_ROOT=1,"
                             "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,no_OMPI_MCA_* cmd=\"");
    if (used >= cfgn)
        return;
    for (int i = 0; i < j->argc && used < cfgn; i++) {
        const char *a = strcmp(j->argv[i], j->scratch) == 0 ? "<scratch>" : j->argv[i];

        used += (size_t)snprintf(cfg + used, cfgn - used, "%s%s", i ? " " : "", a);
    }
    if (used < cfgn)
        snprintf(cfg + used, cfgn - used, "\"");
}

/*
 * Builds the job's environment: this process's, without OMPI_ALLOW_RUN_AS_ROOT* and without
 * OMPI_MCA_* (a stray OMPI_MCA_coll_tuned_... would change what is measured behind the
 * printed configuration), plus the two variables that let mpirun run as root. Returns a
 * malloc'ed array or NULL.
 */
static char **mpi_anchor_env(void)
{
    static char root[] = "OMPI_ALLOW_RUN_AS_ROOT=1";
    static char confirm[] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    size_t n = 0, k = 0, bytes;
    char **env;

    while (environ[n] != NULL)
        n++;
    if (__builtin_add_overflow(n, (size_t)3, &bytes) ||
        __builtin_mul_overflow(bytes, sizeof(char *), &bytes))
        return NULL;
    env = malloc(bytes);
    if (env == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "OMPI_ALLOW_RUN_AS_ROOT", 22) != 0 &&
            strncmp(environ[i], "OMPI_MCA_", 9) != 0)
            env[k++] = environ[i];
    env[k++] = root;
    env[k++] = confirm;
    env[k] = NULL;
    return env;
}

/*
 * Starts the job in a session of its own with stdout on a pipe; returns 0 or -1. The child
 * only calls async-signal-safe functions (the caller may have threads).
 */
static int mpi_anchor_spawn(mpi_anchor_job *j)
{
    static const char nexec[] = "bench_mpi_anchor: cannot execute mpirun\n";
    char **env = mpi_anchor_env();
    int p[2];

    if (env == NULL) {
        fprintf(stderr, "bench_mpi_anchor: out of memory for the job's environment\n");
        return -1;
    }
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "bench_mpi_anchor: pipe2 failed: %s\n", strerror(errno));
        free(env);
        return -1;
    }
    fflush(NULL);
    j->pid = fork();
    if (j->pid == 0) {
        setsid();
        dup2(p[1], STDOUT_FILENO);
        execve(j->argv[0], (char *const *)j->argv, env);
        if (write(STDERR_FILENO, nexec, sizeof(nexec) - 1) < 0)
            _exit(127);
        _exit(127);
    }
    free(env);
    close(p[1]);
    if (j->pid < 0) {
        fprintf(stderr, "bench_mpi_anchor: fork failed: %s\n", strerror(errno));
        close(p[0]);
        return -1;
    }
    j->out_fd = p[0];
    return 0;
}

static long mpi_anchor_now_ms(void)
{
    return (long)(bench_now_ns() / 1000000u);
}

/*
 * SIGKILLs every process of session sid (mpirun and its ranks: mpirun's children get process
 * groups of their own but keep its session). Called only while mpirun is unreaped, so sid
 * cannot have been reused.
 */
static void mpi_anchor_kill_session(pid_t sid)
{
    DIR *d = opendir("/proc");
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[300], stat[512];
        const char *rp;
        long pid = strtol(e->d_name, NULL, 10), sess = 0;
        ssize_t n;
        int fd;

        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        n = read(fd, stat, sizeof(stat) - 1);
        close(fd);
        if (n <= 0)
            continue;
        stat[n] = '\0';
        rp = strrchr(stat, ')'); /* "pid (comm) state ppid pgrp session ..." */
        if (rp != NULL && sscanf(rp + 1, " %*c %*d %*d %ld", &sess) == 1 && sess == sid)
            kill((pid_t)pid, SIGKILL);
    }
    closedir(d);
}

/* mpirun's state, looked at without reaping it (while unreaped its pid cannot be reused). */
typedef enum mpi_anchor_state {
    MPI_ANCHOR_RUNNING,
    MPI_ANCHOR_EXITED, /* exited, not yet reaped */
    MPI_ANCHOR_GONE    /* reaped elsewhere (e.g. SIGCHLD ignored): never signal its pid */
} mpi_anchor_state;

static mpi_anchor_state mpi_anchor_peek(const mpi_anchor_job *j)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == EINTR ? MPI_ANCHOR_RUNNING : MPI_ANCHOR_GONE;
    return si.si_pid != 0 ? MPI_ANCHOR_EXITED : MPI_ANCHOR_RUNNING;
}

/* Whether mpirun has exited and is still unreaped. */
static int mpi_anchor_exited(const mpi_anchor_job *j)
{
    return mpi_anchor_peek(j) == MPI_ANCHOR_EXITED;
}

/* Ends the job: SIGTERM to mpirun (it ends its ranks), a grace period, then SIGKILL to the
 * whole session; reaps mpirun. */
static void mpi_anchor_kill(mpi_anchor_job *j, int *status)
{
    long until = mpi_anchor_now_ms() +
                 (j->hosts != NULL ? MPI_ANCHOR_HOSTS_GRACE_MS : MPI_ANCHOR_KILL_GRACE_MS);
    struct timespec nap = {0, 20 * 1000 * 1000};

    if (mpi_anchor_peek(j) == MPI_ANCHOR_GONE)
        return;
    kill(j->pid, SIGTERM);
    while (mpi_anchor_now_ms() < until && mpi_anchor_peek(j) == MPI_ANCHOR_RUNNING)
        nanosleep(&nap, NULL);
    if (mpi_anchor_peek(j) != MPI_ANCHOR_GONE)
        mpi_anchor_kill_session(j->pid);
    waitpid(j->pid, status, 0);
}

/* Looks up key=value in a line of space-separated tokens; returns the value or NULL. */
static const char *mpi_anchor_field(const char *line, const char *key, char *val, size_t valn)
{
    size_t klen = strlen(key);

    for (const char *t = line; t != NULL && *t != '\0'; t = strchr(t, ' ')) {
        while (*t == ' ')
            t++;
        if (strncmp(t, key, klen) == 0 && t[klen] == '=') {
            size_t len = strcspn(t + klen + 1, " ");

            if (len >= valn)
                return NULL;
            memcpy(val, t + klen + 1, len);
            val[len] = '\0';
            return val;
        }
    }
    return NULL;
}

/* Reads a number field; returns 0 or -1 when it is missing or not a number. */
static int mpi_anchor_num(const char *line, const char *key, double *out)
{
    char val[64];
    char *end = NULL;

    if (mpi_anchor_field(line, key, val, sizeof(val)) == NULL)
        return -1;
    *out = strtod(val, &end);
    return end == val || *end != '\0' ? -1 : 0;
}

/* Parses one `ANCHOR op=...` line into row; returns 0 or -1 with a message. */
static int mpi_anchor_parse(const char *line, bench_mpi_row *row)
{
    char op[32];
    double ranks = 0, bytes = 0, us = 0, iters = 0, reps = 0, ver = 0, alg = 0, bus = 0;
    int bad = 0;

    memset(row, 0, sizeof(*row));
    if (mpi_anchor_field(line, "op", op, sizeof(op)) == NULL)
        goto out_bad;
    bad |= mpi_anchor_num(line, "ranks", &ranks) | mpi_anchor_num(line, "bytes", &bytes);
    bad |= mpi_anchor_num(line, "iters", &iters) | mpi_anchor_num(line, "reps", &reps);
    bad |= mpi_anchor_num(line, "verified", &ver);
    if (strcmp(op, "allreduce") == 0) {
        row->op = BENCH_MPI_ALLREDUCE;
        bad |= mpi_anchor_num(line, "us", &us) | mpi_anchor_num(line, "algbw_gbs", &alg);
        bad |= mpi_anchor_num(line, "busbw_gbs", &bus);
    } else if (strcmp(op, "put_signal") == 0) {
        row->op = BENCH_MPI_PUT_SIGNAL;
        bad |= mpi_anchor_num(line, "half_rtt_us", &us);
    } else {
        goto out_bad;
    }
    if (bad || ranks < 1 || bytes < 1 || iters < 1 || reps < 1 || !(us > 0.0))
        goto out_bad;
    row->ranks = (int)ranks;
    row->bytes = (uint64_t)bytes;
    row->us = us;
    row->algbw_gbs = alg;
    row->busbw_gbs = bus;
    row->iters = (int)iters;
    row->reps = (int)reps;
    row->verified = ver == 1.0;
    return 0;
out_bad:
    fprintf(stderr,
            "bench_mpi_anchor: cannot parse the anchor's line '%s' (expected op, "
            "ranks, bytes, iters, reps, verified and the op's timings; is comm_mpi_anchor "
            "from another build?)\n",
            line);
    return -1;
}

/* What the reader has collected so far. */
typedef struct mpi_anchor_out {
    bench_mpi_row *rows;
    int max_rows;
    int nrows;
    int failed;        /* a line did not parse, did not verify, or rows overflowed */
    char library[256]; /* from the config line */
    char skipped[256]; /* the harness's "skipped: <why>" */
    char line[MPI_ANCHOR_LINE_MAX];
    size_t len;
} mpi_anchor_out;

/* Handles one complete stdout line of the job. */
static void mpi_anchor_line(mpi_anchor_out *o, const char *line)
{
    const char *lib;

    if (strncmp(line, "ANCHOR config ", 14) == 0) {
        lib = strstr(line, "library=\"");
        if (lib != NULL)
            snprintf(o->library, sizeof(o->library), "%.*s", (int)strcspn(lib + 9, "\""), lib + 9);
        return;
    }
    if (strncmp(line, "skipped: ", 9) == 0) { /* the harness cannot run here */
        snprintf(o->skipped, sizeof(o->skipped), "%s", line + 9);
        return;
    }
    if (strncmp(line, "ANCHOR ", 7) != 0) {
        fprintf(stderr, "comm_mpi_anchor: %s\n", line); /* Open MPI's own chatter */
        return;
    }
    if (o->nrows >= o->max_rows) {
        fprintf(stderr, "bench_mpi_anchor: more than %d result rows; pass a larger array\n",
                o->max_rows);
        o->failed = 1;
        return;
    }
    if (mpi_anchor_parse(line + 7, &o->rows[o->nrows]) != 0) {
        o->failed = 1;
        return;
    }
    if (!o->rows[o->nrows].verified) {
        fprintf(stderr,
                "bench_mpi_anchor: the anchor's result did not verify: '%s' (the "
                "ranks' messages above say which elements)\n",
                line);
        o->failed = 1;
    }
    o->nrows++;
}

/* Feeds bytes of the job's stdout into lines (over-long lines are cut, never overflow). */
static void mpi_anchor_feed(mpi_anchor_out *o, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            o->line[o->len] = '\0';
            mpi_anchor_line(o, o->line);
            o->len = 0;
        } else if (o->len + 1 < sizeof(o->line)) {
            o->line[o->len++] = buf[i];
        }
    }
}

/* Reads the job's stdout until EOF or the deadline; returns 0, or -1 on the deadline. */
static int mpi_anchor_read(mpi_anchor_job *j, mpi_anchor_out *o, long deadline_ms)
{
    char buf[4096];

    for (;;) {
        long left = deadline_ms - mpi_anchor_now_ms();
        struct pollfd pfd = {.fd = j->out_fd, .events = POLLIN};
        ssize_t n;
        int r;

        if (left <= 0)
            return -1;
        r = poll(&pfd, 1, left > 1000 ? 1000 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        n = read(j->out_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (o->len > 0)
                mpi_anchor_feed(o, "\n", 1);
            return 0;
        }
        mpi_anchor_feed(o, buf, (size_t)n);
    }
}

/* Waits for mpirun to exit by the deadline; returns 0 with *status, -1 on the deadline, or -2
 * when mpirun was reaped elsewhere. */
static int mpi_anchor_reap(mpi_anchor_job *j, int *status, long deadline_ms)
{
    struct timespec nap = {0, 10 * 1000 * 1000};

    for (;;) {
        pid_t r;

        if (mpi_anchor_exited(j))
            mpi_anchor_kill_session(j->pid); /* ranks that outlived mpirun, if any */
        r = waitpid(j->pid, status, WNOHANG);
        if (r == j->pid)
            return 0;
        if (r < 0 && errno != EINTR) {
            fprintf(stderr,
                    "bench_mpi_anchor: waitpid(%d) failed: %s (was mpirun reaped elsewhere, "
                    "e.g. SIGCHLD ignored? its exit status is unknown)\n",
                    (int)j->pid, strerror(errno));
            return -2;
        }
        if (mpi_anchor_now_ms() >= deadline_ms)
            return -1;
        nanosleep(&nap, NULL);
    }
}

static int mpi_anchor_rm_cb(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    remove(path);
    return 0;
}

/*
 * Makes the job's private scratch directory: /dev/shm/plexus-mpi-anchor.XXXXXX (tmpfs, where
 * Open MPI puts its backing files by default), or the same under /tmp where /dev/shm is
 * missing or not writable. Returns 0, or -1 after a message.
 */
static int mpi_anchor_scratch(char *dir, size_t dirn)
{
    static const char *const bases[] = {"/dev/shm", "/tmp"};
    int err = 0;

    for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        snprintf(dir, dirn, "%s/plexus-mpi-anchor.XXXXXX", bases[i]);
        if (mkdtemp(dir) != NULL)
            return 0;
        err = errno;
    }
    fprintf(stderr,
            "bench_mpi_anchor: cannot make a scratch directory in /dev/shm or /tmp: %s; make "
            "one of them writable\n",
            strerror(err));
    return -1;
}

/* Runs the built job to its end; returns the rows parsed, -1, or -2 when the harness said it
 * cannot run here (its reason in o->skipped). */
static int mpi_anchor_run(mpi_anchor_job *j, mpi_anchor_out *o, long timeout_ms)
{
    long deadline = mpi_anchor_now_ms() + timeout_ms;
    int status = 0, timed_out = 0, reaped = 0;

    if (mpi_anchor_spawn(j) != 0)
        return -1;
    if (mpi_anchor_read(j, o, deadline) != 0 ||
        (reaped = mpi_anchor_reap(j, &status, deadline)) == -1) {
        timed_out = 1;
        mpi_anchor_kill(j, &status);
    }
    close(j->out_fd);
    if (reaped == -2)
        return -1;
    if (timed_out) {
        fprintf(stderr,
                "bench_mpi_anchor: mpirun -np %s ran past its deadline of %.0f s and "
                "was killed (raise PLEXUS_MPI_ANCHOR_TIMEOUT_S if the machine is busy)\n",
                j->np, timeout_ms / 1000.0);
        return -1;
    }
    if (j->hosts != NULL && WIFEXITED(status) && WEXITSTATUS(status) == MPI_ANCHOR_SKIPPED &&
        o->skipped[0] != '\0')
        return -2;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_mpi_anchor: mpirun -np %s %s %d (see the messages above)\n", j->np,
                WIFEXITED(status) ? "exited with status" : "was killed by signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return -1;
    }
    return o->failed ? -1 : o->nrows;
}

int bench_mpi_anchor(int ranks, bench_mode mode, unsigned ops, bench_mpi_row *rows, int max_rows,
                     char *cfg, size_t cfgn)
{
    return bench_mpi_anchor_variant(ranks, mode, ops, BENCH_MPI_DEFAULT, rows, max_rows, cfg,
                                    cfgn);
}

/* What one job runs: where (this host, or the harness's hosts), what (the anchor's ops, or
 * a program of the caller's), and which environment. */
typedef struct mpi_anchor_what {
    const bench_mpi_hosts *hosts;
    const char *const *tail;
    int ranks;
    bench_mode mode;
    unsigned ops;
    int variant;
    int put_peer;
} mpi_anchor_what;

/* Builds, runs and cleans up one job; returns the rows, -1, or -2 with the harness's reason
 * for not running in skip. */
static int mpi_anchor_go(const mpi_anchor_what *w, bench_mpi_row *rows, int max_rows, char *cfg,
                         size_t cfgn, char *skip, size_t skipn)
{
    mpi_anchor_job *j = NULL;
    mpi_anchor_out *o = NULL;
    char why[PATH_MAX + 128];
    long timeout_ms = mpi_anchor_timeout_ms(w->mode);
    int n = -1;

    if (cfg != NULL && cfgn > 0)
        cfg[0] = '\0';
    if (timeout_ms < 0)
        return -1;
    j = calloc(1, sizeof(*j));
    o = calloc(1, sizeof(*o));
    if (j == NULL || o == NULL) {
        fprintf(stderr, "bench_mpi_anchor: out of memory\n");
        goto out_free;
    }
    if (!mpi_anchor_mpirun(j->mpirun, sizeof(j->mpirun), why, sizeof(why)) ||
        (w->tail == NULL && !mpi_anchor_program(j->program, sizeof(j->program), why,
                                                sizeof(why)))) {
        fprintf(stderr, "bench_mpi_anchor: the Open MPI anchor cannot run: %s\n", why);
        goto out_free;
    }
    if (mpi_anchor_scratch(j->scratch, sizeof(j->scratch)) != 0)
        goto out_free;
    j->variant = w->variant;
    j->hosts = w->hosts;
    j->tail = w->tail;
    j->put_peer = w->put_peer;
    if (mpi_anchor_argv(j, w->ranks, w->mode, w->ops, timeout_ms) != 0)
        goto out_rmdir;
    o->rows = rows;
    o->max_rows = max_rows;
    n = mpi_anchor_run(j, o, timeout_ms);
    if (n == -2 && skip != NULL && skipn > 0)
        snprintf(skip, skipn, "%s", o->skipped);
    mpi_anchor_cfg(j, cfg, cfgn);
    if (cfg != NULL && o->library[0] != '\0') {
        size_t used = strlen(cfg);

        if (used < cfgn)
            snprintf(cfg + used, cfgn - used, " library=\"%s\"", o->library);
    }
out_rmdir:
    nftw(j->scratch, mpi_anchor_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
out_free:
    free(o);
    free(j);
    return n;
}

/* Whether the arguments of an anchor job are sane; 0, or -1 after a message. */
static int mpi_anchor_check_args(int ranks, unsigned ops, const bench_mpi_row *rows,
                                 int max_rows, int peer)
{
    if (ranks < 1 || ranks > 64 || (ops & ~(unsigned)BENCH_MPI_ALL) != 0 || ops == 0 ||
        rows == NULL || max_rows < 1 || ((ops & BENCH_MPI_PUT_SIGNAL) && ranks <= peer)) {
        fprintf(stderr,
                "bench_mpi_anchor: bad arguments: ranks %d (1..64, put_signal > its peer %d), "
                "ops 0x%x (BENCH_MPI_* bits), rows %p, max_rows %d (>= 1)\n",
                ranks, peer, ops, (const void *)rows, max_rows);
        return -1;
    }
    return 0;
}

int bench_mpi_anchor_variant(int ranks, bench_mode mode, unsigned ops, int variant,
                             bench_mpi_row *rows, int max_rows, char *cfg, size_t cfgn)
{
    mpi_anchor_what w = {.ranks = ranks, .mode = mode, .ops = ops, .variant = variant,
                         .put_peer = 1};

    if (cfg != NULL && cfgn > 0)
        cfg[0] = '\0';
    if (mpi_anchor_check_args(ranks, ops, rows, max_rows, 1) != 0)
        return -1;
    return mpi_anchor_go(&w, rows, max_rows, cfg, cfgn, NULL, 0);
}

/* Whether h names a harness and a shape it takes; 0, or -1 after a message. */
static int mpi_anchor_check_hosts(const bench_mpi_hosts *h)
{
    if (h == NULL || h->harness == NULL || h->hosts < 2 || h->hosts > 4 || h->per_host < 1 ||
        h->per_host > 8) {
        fprintf(stderr, "bench_mpi_hosts: bad hosts: expected a harness path, 2..4 hosts and "
                "1..8 ranks per host\n");
        return -1;
    }
    return 0;
}

int bench_mpi_anchor_hosts(const bench_mpi_hosts *h, bench_mode mode, unsigned ops, int variant,
                           bench_mpi_row *rows, int max_rows, char *cfg, size_t cfgn,
                           char *skip, size_t skipn)
{
    mpi_anchor_what w = {.hosts = h, .mode = mode, .ops = ops, .variant = variant};

    if (cfg != NULL && cfgn > 0)
        cfg[0] = '\0';
    if (mpi_anchor_check_hosts(h) != 0)
        return -1;
    w.ranks = h->hosts * h->per_host;
    w.put_peer = h->per_host; /* the first rank of host 1 */
    if (mpi_anchor_check_args(w.ranks, ops, rows, max_rows, w.put_peer) != 0)
        return -1;
    return mpi_anchor_go(&w, rows, max_rows, cfg, cfgn, skip, skipn);
}

int bench_mpi_hosts_run(const bench_mpi_hosts *h, bench_mode mode, const char *const *argv,
                        bench_mpi_row *rows, int max_rows, char *cfg, size_t cfgn, char *skip,
                        size_t skipn)
{
    mpi_anchor_what w = {.hosts = h, .tail = argv, .mode = mode};

    if (cfg != NULL && cfgn > 0)
        cfg[0] = '\0';
    if (mpi_anchor_check_hosts(h) != 0)
        return -1;
    if (argv == NULL || argv[0] == NULL || rows == NULL || max_rows < 1) {
        fprintf(stderr, "bench_mpi_hosts_run: expected a program to run and room for rows\n");
        return -1;
    }
    w.ranks = h->hosts * h->per_host;
    return mpi_anchor_go(&w, rows, max_rows, cfg, cfgn, skip, skipn);
}

double bench_memcpy_floor(size_t bytes)
{
    enum { REPS = 5 };
    const uint64_t min_rep_ns = 10 * 1000 * 1000;
    double times[REPS];
    unsigned char *src, *dst;
    uint64_t iters = 1;
    int ok;

    if (bytes == 0) {
        fprintf(stderr, "bench_memcpy_floor: bytes is 0; pass the message size\n");
        return -1.0;
    }
    src = malloc(bytes);
    dst = malloc(bytes);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "bench_memcpy_floor: cannot allocate 2 x %zu bytes\n", bytes);
        free(src);
        free(dst);
        return -1.0;
    }
    memset(src, 0x5a, bytes);
    memset(dst, 0, bytes);
    for (;;) { /* calibration, also the warm-up */
        uint64_t t0 = bench_now_ns(), dt;

        for (uint64_t k = 0; k < iters; k++) {
            memcpy(dst, src, bytes);
            __asm__ __volatile__("" ::"r"(dst) : "memory");
        }
        dt = bench_now_ns() - t0;
        if (dt >= min_rep_ns || iters >= (1u << 30))
            break;
        iters = dt * 8 < min_rep_ns ? iters * 8 : iters * min_rep_ns / (dt ? dt : 1) * 11 / 10 + 1;
    }
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = bench_now_ns();

        for (uint64_t k = 0; k < iters; k++) {
            memcpy(dst, src, bytes);
            __asm__ __volatile__("" ::"r"(dst) : "memory");
        }
        times[r] = (double)(bench_now_ns() - t0) / (double)iters;
    }
    ok = dst[0] == 0x5a && dst[bytes - 1] == 0x5a;
    free(src);
    free(dst);
    if (!ok) {
        fprintf(stderr, "bench_memcpy_floor: the copy of %zu bytes is wrong\n", bytes);
        return -1.0;
    }
    return (double)bytes / bench_median(times, REPS); /* bytes per ns = GB/s */
}
