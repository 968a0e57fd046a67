/*
 * bench_cholesky.c - a tiled dense factorisation on real BLAS kernels: plexus's cholesky
 * example against StarPU's own cholesky_implicit, LAPACKE's potrf and the machine's gemm.
 *
 * In one run, on one machine, with the configuration printed first:
 *   - plexus at level 2 on every online CPU (the `cholesky` example: POTRF/TRSM/SYRK/GEMM
 *     tasks on tile views, one OpenBLAS thread per task), f32 and f64, N = 2048 and 4096, NB
 *     swept over {128, 192, 256, 384, 512} (--quick: {256, 512}); the median of the reps of
 *     each (N, NB, dtype), each run checked (scaled residual, counts: the example's check);
 *   - plexus at level 3 with 2 chips x 1 core at NB = 256, with the bytes it copied between
 *     the host heap and the chips against the distribution's minimum;
 *   - StarPU's cholesky_implicit (Debian starpu-examples, single precision only) in its own
 *     process: -size N -nblocks N/NB for the NB that divide N, STARPU_NCPU = the CPUs,
 *     OPENBLAS_NUM_THREADS=1, schedulers lws, eager and dmda (dmda after two calibrating runs
 *     with STARPU_CALIBRATE=1 in a private STARPU_HOME), its GFlop/s parsed from its output;
 *     the best scheduler counts. Absent, its lines say so (`skipped=`), never a figure;
 *   - LAPACKE spotrf / dpotrf with OpenBLAS on every CPU, in a process of its own (this
 *     program again, `--child potrf`), the vendor call a user would make;
 *   - the limit: sgemm / dgemm on every CPU (`--child gemm`), measured in the same run: the
 *     best of 3 at N = min(N, 2048) (near the peak already at 2048, and quick).
 * GFLOP/s are N^3/3 flops over the time for a factorisation (plexus: px_run's wall time,
 * the matrix used in place), 2 N^3 for a gemm.
 *
 * Lines: `BENCH cholesky n=N nb=NB dtype=T system=plexus|starpu|lapacke|gemm_peak
 * gflops=G ...`, the best NB per system (`nb_best=`), and at the largest N per dtype
 * `BENCH cholesky n=N dtype=T plexus_over_starpu=R plexus_over_lapacke=R
 * plexus_over_gemm_peak=R` (best NB of each system). --smoke: N = 300 with NB 64 and 100,
 * verified, StarPU skipped; its timings mean nothing.
 */
#include "benchutil.h"
#include "examples.h"
#include "kernels/chol_kernels.h"

#include <cblas.h>
#include <lapacke.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BC_NAME "cholesky"
#define BC_STARPU_BIN "/usr/lib/x86_64-linux-gnu/starpu/examples/cholesky_implicit"
#define BC_CHILD_TIMEOUT_S 600
#define BC_MAX_NB 5
#define BC_MAX_N 2
#define BC_MAX_REPS 5
#define BC_GEMM_N 2048 /* the gemm peak's size: near the peak already, and quick */

typedef struct bc_params {
    bench_mode mode;
    int cores;
    int ns[BC_MAX_N], nn;
    int nbs[BC_MAX_NB], nnb;
    int reps;
    char self[PATH_MAX];
    char starpu_home[64];
} bc_params;

/* Best figure of one system at one (n, dtype): gflops and the NB that gave it. */
typedef struct bc_best {
    double gflops;
    int nb;
} bc_best;

static void bc_best_take(bc_best *b, double g, int nb)
{
    if (g > b->gflops) {
        b->gflops = g;
        b->nb = nb;
    }
}

/* ---- children: LAPACKE potrf and gemm on every CPU, in a process of their own ---- */

/* The symmetric positive definite test matrix (as the example's: |off-diagonal| < 0.5, N on
 * the diagonal), column-major = row-major. */
static void bc_fill(double *a, float *af, int n)
{
    uint64_t x = 36;

    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            double v;

            x = x * 6364136223846793005ull + 1442695040888963407ull;
            v = i == j ? (double)n : (double)(x >> 11) * 0x1.0p-53 - 0.5;
            if (a != NULL)
                a[(size_t)i * n + j] = a[(size_t)j * n + i] = v;
            else
                af[(size_t)i * n + j] = af[(size_t)j * n + i] = (float)v;
        }
}

/* `--child potrf|gemm f32|f64 N reps threads`: prints "gflops=G" (median) or "error=...". */
static int bc_child(int argc, char **argv)
{
    int f64, n, reps, threads, gemm;
    double samples[BC_MAX_REPS];
    void *a, *b = NULL, *c = NULL;
    size_t es;

    if (argc != 7) {
        printf("error=usage: --child potrf|gemm f32|f64 N reps threads\n");
        return 1;
    }
    gemm = strcmp(argv[2], "gemm") == 0;
    f64 = strcmp(argv[3], "f64") == 0;
    n = atoi(argv[4]);
    reps = atoi(argv[5]);
    threads = atoi(argv[6]);
    if (n < 1 || reps < 1 || reps > BC_MAX_REPS || threads < 1) {
        printf("error=bad child arguments\n");
        return 1;
    }
    openblas_set_num_threads(threads);
    es = f64 ? sizeof(double) : sizeof(float);
    a = malloc((size_t)n * n * es);
    if (gemm) {
        b = malloc((size_t)n * n * es);
        c = calloc((size_t)n * n, es);
    }
    if (a == NULL || (gemm && (b == NULL || c == NULL))) {
        printf("error=out of memory for N=%d\n", n);
        return 1;
    }
    bc_fill(f64 ? a : NULL, f64 ? NULL : a, n);
    if (gemm)
        bc_fill(f64 ? b : NULL, f64 ? NULL : b, n);
    for (int r = -1; r < reps; r++) { /* r = -1: a warm-up, not counted */
        uint64_t t0;
        int info = 0;

        if (!gemm && r >= 0)
            bc_fill(f64 ? a : NULL, f64 ? NULL : a, n); /* potrf overwrote it */
        t0 = bench_now_ns();
        if (gemm && f64)
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n,
                        0.0, c, n);
        else if (gemm)
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n,
                        0.0f, c, n);
        else if (f64)
            info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, a, n);
        else
            info = LAPACKE_spotrf(LAPACK_COL_MAJOR, 'L', n, a, n);
        if (info != 0) {
            printf("error=LAPACKE potrf returned info %d\n", info);
            return 1;
        }
        if (r >= 0)
            samples[r] = (double)(bench_now_ns() - t0) * 1e-9;
        if (!gemm && r < 0)
            bc_fill(f64 ? a : NULL, f64 ? NULL : a, n);
    }
    /* potrf: the median; gemm: the best rep, as a peak is */
    if (gemm)
        for (int r = 1; r < reps; r++)
            if (samples[r] < samples[0])
                samples[0] = samples[r];
    printf("gflops=%.3f\n", (gemm ? 2.0 : 1.0 / 3.0) * (double)n * n * n /
                                (gemm ? samples[0] : bench_median(samples, reps)) / 1e9);
    free(a);
    free(b);
    free(c);
    return 0;
}

/*
 * Runs cmd (through sh, under `timeout`) and returns a positive number from its output: the
 * one after key (the last line that has it), or with key NULL column `column` of the last
 * table row whose first column is row (StarPU's "size ms GFlop/s" table). Returns -1 after
 * bench_fail naming what, the status and the last line of output when there is none.
 */
static double bc_run_parse(const char *what, const char *cmd, const char *key, int column,
                           long row)
{
    char line[512], last[512] = "", full[2048];
    double v = -1;
    FILE *p;
    int rc;

    snprintf(full, sizeof(full), "timeout %d %s 2>&1", BC_CHILD_TIMEOUT_S, cmd);
    p = popen(full, "r");
    if (p == NULL) {
        bench_fail(BC_NAME, "%s: cannot start `%s`", what, cmd);
        return -1;
    }
    while (fgets(line, sizeof(line), p) != NULL) {
        char *k;

        line[strcspn(line, "\n")] = '\0';
        if (line[0] != '\0')
            snprintf(last, sizeof(last), "%s", line);
        if (key != NULL && (k = strstr(line, key)) != NULL)
            v = atof(k + strlen(key));
        if (key == NULL && line[0] >= '0' && line[0] <= '9' && strtol(line, NULL, 10) == row) {
            char *tok = strtok(line, " \t");

            for (int c = 0; tok != NULL && c < column; c++)
                tok = strtok(NULL, " \t");
            if (tok != NULL)
                v = atof(tok);
        }
    }
    rc = pclose(p);
    if (rc != 0 || !(v > 0)) {
        bench_fail(BC_NAME, "%s: `%s` exited with status %d, no figure parsed (last line: %s)",
                   what, cmd, rc, last);
        return -1;
    }
    return v;
}

static double bc_child_run(const bc_params *p, const char *kind, const char *dt, int n)
{
    char cmd[PATH_MAX + 128], what[64];

    snprintf(cmd, sizeof(cmd), "'%s' --child %s %s %d %d %d", p->self, kind, dt, n,
             strcmp(kind, "gemm") == 0 ? 3 : p->reps, p->cores);
    snprintf(what, sizeof(what), "%s %s n=%d", kind, dt, n);
    return bc_run_parse(what, cmd, "gflops=", 0, 0);
}

/* ---- plexus ---- */

/*
 * One plexus run of the example: level 2 on every CPU, or level 3 on `chips` chips of one
 * core. Returns GFLOP/s, or -1 after bench_fail. info (n bytes) gets the run's info lines.
 */
static double bc_plexus_once(const bc_params *p, int n, int nb, const char *dt, int chips,
                             char *info, size_t ninfo)
{
    const px_example *ex = px_example_find("cholesky");
    px_example_opts o = {.size = n, .tile = nb, .dtype = dt, .chips = chips,
                         .cores = chips > 0 ? 1 : p->cores};
    px_example_result r;
    px_status st;

    if (ex == NULL) {
        bench_fail(BC_NAME, "the cholesky example is missing from the examples' table");
        return -1;
    }
    st = px_example_exec(ex, NULL, &o, &r);
    if (st != PX_OK || !r.check_ok || r.seconds <= 0) {
        bench_fail(BC_NAME, "plexus n=%d nb=%d dtype=%s chips=%d: %s", n, nb, dt, chips,
                   st != PX_OK ? px_last_error() : r.check);
        return -1;
    }
    if (info != NULL)
        snprintf(info, ninfo, "%s", r.info);
    return (double)n * n * n / 3.0 / r.seconds / 1e9;
}

static double bc_plexus(const bc_params *p, int n, int nb, const char *dt)
{
    double s[BC_MAX_REPS];

    for (int r = 0; r < p->reps; r++)
        s[r] = bc_plexus_once(p, n, nb, dt, 0, NULL, 0);
    return bench_median_ok(s, p->reps);
}

/* Level 3, 2 chips x 1 core, NB 256 (or the first NB): its line with the bytes copied. */
static void bc_plexus_l3(const bc_params *p, int n, const char *dt)
{
    int nb = p->nbs[0];
    char info[PX_EXAMPLE_INFO_MAX];
    unsigned long long bytes = 0, min = 0;
    const char *b;
    double g;

    for (int i = 0; i < p->nnb; i++)
        if (p->nbs[i] == 256)
            nb = 256;
    g = bc_plexus_once(p, n, nb, dt, 2, info, sizeof(info));
    if (g < 0)
        return;
    b = strstr(info, "bytes_copied ");
    if (b == NULL || sscanf(b, "bytes_copied %llu (host heap <-> chips), minimum %llu", &bytes,
                            &min) != 2) {
        bench_fail(BC_NAME, "plexus level 3 n=%d: no bytes_copied line in \"%s\"", n, info);
        return;
    }
    bench_line(BC_NAME, "n=%d nb=%d dtype=%s system=plexus_l3 chips=2 cores_per_chip=1 "
               "gflops=%.2f bytes_copied=%llu bytes_min=%llu copy_factor=%.2f", n, nb, dt, g,
               bytes, min, min ? (double)bytes / (double)min : 0.0);
}

/* ---- StarPU ---- */

/* Runs cholesky_implicit once with scheduler sched; calibrate: STARPU_CALIBRATE=1. */
static double bc_starpu_once(const bc_params *p, int n, int nb, const char *sched,
                             int calibrate)
{
    char cmd[1024], what[96];

    snprintf(cmd, sizeof(cmd), "env STARPU_NCPU=%d STARPU_NCUDA=0 STARPU_NOPENCL=0 "
             "STARPU_SILENT=1 STARPU_SCHED=%s STARPU_CALIBRATE=%d STARPU_HOME=%s "
             "OPENBLAS_NUM_THREADS=1 %s -size %d -nblocks %d", p->cores, sched, calibrate,
             p->starpu_home, BC_STARPU_BIN, n, n / nb);
    snprintf(what, sizeof(what), "starpu n=%d nb=%d sched=%s", n, nb, sched);
    return bc_run_parse(what, cmd, NULL, 2, n); /* "# size ms GFlop/s", then the row */
}

/* The best of lws, eager and dmda at (n, nb), f32; -1 when none ran. */
static double bc_starpu(const bc_params *p, int n, int nb)
{
    static const char *const scheds[] = {"lws", "eager", "dmda"};
    double best = -1;

    for (int s = 0; s < 3; s++) {
        double v[BC_MAX_REPS], m;

        if (strcmp(scheds[s], "dmda") == 0)
            for (int c = 0; c < (p->mode == BENCH_FULL ? 2 : 1); c++)
                bc_starpu_once(p, n, nb, scheds[s], 1);
        for (int r = 0; r < p->reps; r++)
            v[r] = bc_starpu_once(p, n, nb, scheds[s], 0);
        m = bench_median_ok(v, p->reps);
        if (m > 0)
            bench_line(BC_NAME, "n=%d nb=%d dtype=f32 system=starpu sched=%s gflops=%.2f", n,
                       nb, scheds[s], m);
        if (m > best)
            best = m;
    }
    return best;
}

/* ---- the run ---- */

static void bc_ratio(char *buf, size_t n, const char *name, double num, double den)
{
    size_t used = strlen(buf);

    if (num > 0 && den > 0)
        snprintf(buf + used, n - used, " %s=%.3f", name, num / den);
    else
        snprintf(buf + used, n - used, " %s=none", name);
}

/* Resolves the libblas.so.3 StarPU's binary loads (as its loader would) into out. */
static void bc_starpu_blas(char *out, size_t n)
{
    char cmd[512], line[512];
    FILE *p;

    snprintf(out, n, "none");
    snprintf(cmd, sizeof(cmd), "timeout 30 ldd %s 2>/dev/null", BC_STARPU_BIN);
    p = popen(cmd, "r");
    if (p == NULL)
        return;
    while (fgets(line, sizeof(line), p) != NULL) {
        char *s = strstr(line, "libblas.so.3 => "), *e, real[PATH_MAX];

        if (s == NULL)
            continue;
        s += strlen("libblas.so.3 => ");
        e = strchr(s, ' ');
        if (e != NULL)
            *e = '\0';
        snprintf(out, n, "%s", realpath(s, real) != NULL ? real : s);
    }
    pclose(p);
}

static void bc_config(const bc_params *p, int have_starpu)
{
    char plexus_blas[PATH_MAX] = "none", starpu_blas[PATH_MAX], nbs[64] = "";
    const char *pb = chol_blas_path();

    if (pb[0] != '\0' && realpath(pb, plexus_blas) == NULL)
        snprintf(plexus_blas, sizeof(plexus_blas), "%s", pb);
    bc_starpu_blas(starpu_blas, sizeof(starpu_blas));
    for (int i = 0; i < p->nnb; i++)
        snprintf(nbs + strlen(nbs), sizeof(nbs) - strlen(nbs), "%s%d", i ? "," : "", p->nbs[i]);
    bench_line(BC_NAME, "config mode=%s cores=%d reps=%d nb=%s plexus=%s "
               "plexus_blas=%s blas_threads_per_task=1 starpu=%s starpu_blas=%s "
               "lapacke_threads=%d gemm_threads=%d", bench_mode_name(p->mode), p->cores,
               p->reps, nbs, PX_VERSION_STRING, plexus_blas,
               have_starpu ? BC_STARPU_BIN
               : p->mode == BENCH_SMOKE ? "skipped_in_smoke" : "absent",
               have_starpu ? starpu_blas : "none",
               p->cores, p->cores);
}

static void bc_params_init(bc_params *p, bench_mode mode)
{
    static const int full_nb[] = {128, 192, 256, 384, 512}, quick_nb[] = {256, 512};
    static const int smoke_nb[] = {64, 100};
    const int *nb = mode == BENCH_FULL ? full_nb : mode == BENCH_QUICK ? quick_nb : smoke_nb;

    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (p->cores < 1)
        p->cores = 1;
    p->nnb = mode == BENCH_FULL ? 5 : 2;
    memcpy(p->nbs, nb, (size_t)p->nnb * sizeof(int));
    if (mode == BENCH_SMOKE) {
        p->ns[0] = 300;
        p->nn = 1;
    } else {
        p->ns[0] = 2048;
        p->ns[1] = 4096;
        p->nn = 2;
    }
    p->reps = mode == BENCH_FULL ? 3 : 1;
    if (readlink("/proc/self/exe", p->self, sizeof(p->self) - 1) < 0)
        snprintf(p->self, sizeof(p->self), "bench_cholesky");
}

/* One (n, dtype): the plexus sweep, StarPU (f32), LAPACKE, gemm, and at the largest n the
 * ratios and level 3. */
static void bc_case(const bc_params *p, int n, const char *dt, int have_starpu, int last)
{
    bc_best plx = {0, 0}, sp = {0, 0};
    double lap, gemm;
    char ratios[256] = "";

    for (int i = 0; i < p->nnb; i++) {
        int nb = p->nbs[i];
        double g = bc_plexus(p, n, nb, dt);

        if (g > 0)
            bench_line(BC_NAME, "n=%d nb=%d dtype=%s system=plexus gflops=%.2f", n, nb, dt, g);
        bc_best_take(&plx, g, nb);
        if (strcmp(dt, "f32") != 0 || !have_starpu)
            continue;
        if (n % nb != 0) {
            bench_line(BC_NAME, "n=%d nb=%d dtype=f32 system=starpu skipped=%d_blocks_do_not_"
                       "tile_%d", n, nb, n / nb, n);
            continue;
        }
        bc_best_take(&sp, bc_starpu(p, n, nb), nb);
    }
    if (strcmp(dt, "f32") == 0 && !have_starpu)
        bench_line(BC_NAME, "n=%d dtype=f32 system=starpu skipped=%s", n,
                   p->mode == BENCH_SMOKE ? "smoke_mode"
                                          : "cholesky_implicit_absent_(make_deps-bench_installs_"
                                            "starpu-examples)");
    lap = bc_child_run(p, "potrf", dt, n);
    gemm = bc_child_run(p, "gemm", dt, n < BC_GEMM_N ? n : BC_GEMM_N);
    bench_line(BC_NAME, "n=%d nb_best=%d dtype=%s system=plexus gflops=%.2f", n, plx.nb, dt,
               plx.gflops);
    if (sp.gflops > 0)
        bench_line(BC_NAME, "n=%d nb_best=%d dtype=f32 system=starpu gflops=%.2f", n, sp.nb,
                   sp.gflops);
    if (lap > 0)
        bench_line(BC_NAME, "n=%d nb=- dtype=%s system=lapacke gflops=%.2f threads=%d", n, dt,
                   lap, p->cores);
    if (gemm > 0)
        bench_line(BC_NAME, "n=%d dtype=%s system=gemm_peak gflops=%.2f threads=%d gemm_n=%d "
                   "best_of=3", n, dt, gemm, p->cores, n < BC_GEMM_N ? n : BC_GEMM_N);
    if (!last)
        return;
    if (strcmp(dt, "f32") == 0)
        bc_ratio(ratios, sizeof(ratios), "plexus_over_starpu", plx.gflops, sp.gflops);
    bc_ratio(ratios, sizeof(ratios), "plexus_over_lapacke", plx.gflops, lap);
    bc_ratio(ratios, sizeof(ratios), "plexus_over_gemm_peak", plx.gflops, gemm);
    bench_line(BC_NAME, "n=%d dtype=%s nb_best=%d%s", n, dt, plx.nb, ratios);
    bc_plexus_l3(p, n, dt);
}

int main(int argc, char **argv)
{
    bc_params p;
    bench_mode mode;
    int rc, have_starpu;
    uint64_t t0 = bench_now_ns();

    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return bc_child(argc, argv);
    if ((rc = bench_start(argc, argv, "bench_cholesky",
                          "tiled Cholesky GFLOP/s: plexus against StarPU, LAPACKE and gemm",
                          &mode)) >= 0)
        return rc;
    bc_params_init(&p, mode);
    if (chol_blas_load() != PX_OK) {
        bench_fail(BC_NAME, "%s", px_last_error());
        return bench_finish();
    }
    have_starpu = mode != BENCH_SMOKE && access(BC_STARPU_BIN, X_OK) == 0;
    snprintf(p.starpu_home, sizeof(p.starpu_home), "/tmp/bench_cholesky.XXXXXX");
    if (have_starpu && mkdtemp(p.starpu_home) == NULL) {
        bench_fail(BC_NAME, "cannot make a private STARPU_HOME under /tmp");
        have_starpu = 0;
    }
    bc_config(&p, have_starpu);
    for (int i = 0; i < p.nn; i++) {
        bc_case(&p, p.ns[i], "f32", have_starpu, i == p.nn - 1);
        bc_case(&p, p.ns[i], "f64", have_starpu, i == p.nn - 1);
    }
    if (have_starpu) {
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p.starpu_home);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_cholesky: could not remove %s\n", p.starpu_home);
    }
    bench_line(BC_NAME, "elapsed_s=%.1f mode=%s", (double)(bench_now_ns() - t0) * 1e-9,
               bench_mode_name(mode));
    return bench_finish();
}
