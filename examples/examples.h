/*
 * examples.h - the example programs shared by the `plexus` command line and the tests.
 *
 * An example is a small plexus program described by callbacks: `reg` registers its kernels
 * and prepares host data, `orchestrate` submits its tasks inside px_run, `run` builds the host
 * arguments and calls px_run (through px_example_run_once, which adds the run's statistics
 * to the result), `check` compares the output with a host computation and the task and edge
 * counts with the ones worked out by hand, and `fini` frees what `reg` made.
 *
 * px_examples[] (table.c) lists every example in the order `plexus help` shows them; a new
 * example (a level-3 `multi_chip` one, say) only adds a row there. px_example_exec() is the
 * one driver: it creates the worker, calls the callbacks in order and destroys the worker.
 */
#ifndef PX_EXAMPLES_H
#define PX_EXAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include <plexus/plexus.h>

/* What the user asked for; 0 in a field means "the example's default". */
typedef struct px_example_opts {
    int cores;    /* core threads per chip; 0: the configuration's value */
    int64_t size; /* problem size (see px_example.size_doc); 0: default_size */
    int iters;    /* repetitions inside the one orchestration; 0: 1 */
    int64_t tile; /* tile edge for tiled examples; 0: the example's default */
    const char *op;    /* reduction of a reducing example ("sum", ...); NULL: "sum" */
    const char *dtype; /* element type of a reducing example ("f32", ...); NULL: "f32" */
    int kill_chip;     /* train_loop: the chip to kill, plus one (0: none) */
    int kill_host;     /* train_loop: the host of that chip (--kill-chip H:C; 0 for C alone) */
    int at_iter;       /* train_loop: the iteration at which it dies; 0: iters / 2 */
    const char *shrink; /* train_loop: "orchestration" or "kernel"; NULL: orchestration */
    int chips;          /* examples with chips_opt: chips of a level-3 run (--chips); 0: the
                         * example runs at level 2 */
    int64_t indefinite; /* cholesky: the row whose diagonal is made negative, plus one (0:
                         * none): the factorisation must fail there */
} px_example_opts;

#define PX_EXAMPLE_WHY_MAX 512
#define PX_EXAMPLE_COMM_MAX 2048
#define PX_EXAMPLE_INFO_MAX 1024

/* What one execution produced. Counts and time are sums over the example's px_run calls. */
typedef struct px_example_result {
    uint64_t tasks;                 /* tasks submitted, from px_run_stats_get */
    uint64_t edges;                 /* dependencies inferred, from px_run_stats_get */
    double seconds;                 /* wall time of the px_run calls */
    int runs;                       /* px_run calls made */
    int cores;                      /* core threads of the worker */
    int64_t size;                   /* effective size */
    int iters;                      /* effective iterations */
    int64_t tile;                   /* effective tile (0 when the example has none) */
    int check_ok;                   /* 1 when check() passed */
    char check[PX_EXAMPLE_WHY_MAX]; /* check()'s one-line verdict: what matched, or why not */
    char comm[PX_EXAMPLE_COMM_MAX]; /* communication examples: one line per domain (members,
                                     * transport and pairs per transport, bytes moved, time),
                                     * then a line per distinct reason of its pairs not on
                                     * direct; "" otherwise */
    char info[PX_EXAMPLE_INFO_MAX]; /* more lines of the run, each "name value ..." (rates,
                                     * bytes copied), printed before the check; "" if none */
} px_example_result;

typedef struct px_example {
    const char *name;     /* command-line name ("vector") */
    const char *doc;      /* one line for `plexus help` */
    int level;            /* worker level it needs: 2 (one chip) or 3 (chips of a host) */
    int64_t default_size; /* used when opts.size is 0 */
    int64_t default_tile; /* used when opts.tile is 0; 0 when the example is not tiled */
    const char *size_doc; /* what --size means for it ("floats per vector") */
    int reduces;          /* 1: takes --op and --dtype (opts.op, opts.dtype) */
    int chips_opt;        /* 1: runs at `level` 2, or at level 3 over opts.chips chips when
                           * that is set (--chips) */
    const char *dtypes;   /* not NULL: takes --dtype (opts.dtype), one of these ("f32, f64") */

    /*
     * Optional: the device memory a run with o (already defaulted) needs: *run bytes of run
     * area for px_run's tensors and *heap bytes of heap ring for its scopes. The driver raises
     * PLEXUS_DEVICE_MEM / PLEXUS_HEAP_RING to fit when the user did not set them, and refuses
     * the run before starting it when the user's values are too small.
     */
    void (*memory)(const px_example_opts *o, uint64_t *run, uint64_t *heap);
    /* Validates o (already defaulted), registers kernels on w, makes host data in *state. */
    px_status (*reg)(px_worker *w, const px_example_opts *o, void **state);
    /* The orchestration passed to px_run; user is the example's state. */
    px_status (*orchestrate)(px_orch *o, const px_task_args *args, void *state);
    /* Builds host args and runs (px_example_run_once); may run more than once. */
    px_status (*run)(px_worker *w, void *state, px_example_result *r);
    /*
     * Compares outputs with the host computation and r's counts with the hand-worked ones.
     * Writes a one-line verdict into why (n bytes) and returns 1 on success, 0 on mismatch.
     */
    int (*check)(void *state, const px_example_result *r, char *why, size_t n);
    /* Frees the state; NULL is accepted. */
    void (*fini)(void *state);
} px_example;

/* Every example, in display order, terminated by NULL. */
extern const px_example *const px_examples[];

/* Returns the example called name, or NULL when there is none. */
const px_example *px_example_find(const char *name);

/*
 * Fills out with o's values, each 0 replaced by the example's default. Returns PX_OK.
 */
px_status px_example_defaults(const px_example *ex, const px_example_opts *o, px_example_opts *out);

/*
 * Runs example ex once on a new worker made from cfg (NULL: px_config_default()) and o:
 * create, reg, run, check, fini, destroy. Returns the first runtime failure (px_last_error()
 * holds its message); PX_OK means everything ran, and r->check_ok says whether the check
 * passed. r is always filled with what is known.
 */
px_status px_example_exec(const px_example *ex, const px_config *cfg, const px_example_opts *o,
                          px_example_result *r);

/*
 * Calls px_run(w, fn, args, state) and adds the run's task and edge counts and wall time to
 * r. Returns px_run's status (or px_run_stats_get's).
 */
px_status px_example_run_once(px_worker *w, px_orch_fn fn, const px_task_args *args, void *state,
                              px_example_result *r);

/* ---- comm_common.c: shared by the communication examples ---- */

/* The reduction called name ("sum", "prod", "min", "max"; NULL: sum), or PX_EINVAL naming
 * example ex and the choices. */
px_status px_example_redop(const char *ex, const char *name, px_redop *op);
const char *px_example_redop_name(px_redop op);

/* The element type called name ("f32", "f64", "i32", "i64"; NULL: f32), or PX_EINVAL. */
px_status px_example_dtype(const char *ex, const char *name, px_dtype *dt);

/* Element i of an array of dt (one of the four above) set from / read as an exact value. */
void px_example_elem_set(void *base, px_dtype dt, size_t i, int64_t v);
double px_example_elem_get(const void *base, px_dtype dt, size_t i);

/*
 * "domain <name>: <n> members (chips ...), transport <t> (<pairs per transport>)" into buf
 * (n bytes); t is the one transport every pair of ranks uses, or "mixed"; where all are
 * direct the parentheses give their reason first ("peer_map=1 in profile default: 6 pairs
 * direct, ..."). chips are the spec's member chips.
 */
void px_example_domain_info(const px_domain *d, const int *chips, char *buf, size_t n);

/*
 * The ranks of an example's domain over every host of w (after px_worker_init; one host
 * without MPI): host-major, rank = host * chips + chip. Sets *n (all ranks), *nl and *r0 (this
 * host's: r0 .. r0 + nl - 1) and chips[*n] (the spec's: this worker's chips on one host,
 * px_chip_global names on several). PX_EINVAL (message naming ex) past PX_COMM_MAX_RANKS.
 */
px_status px_example_ranks(px_worker *w, const char *ex, int *n, int *nl, int *r0, int *chips);

/*
 * One line per distinct reason of d's pairs not on direct, each starting with a newline
 * ("\n  staged for 4 pairs: peer_map=0 in profile a2a3-pcie"), into buf (n bytes); "" when
 * every pair is direct. Up to 8 lines, then one line counting the pairs left.
 */
void px_example_domain_reasons(const px_domain *d, const int *chips, char *buf, size_t n);

/* A domain's pairs of ranks as the two calls above read them: px_domain_transport and
 * px_domain_transport_reason of a domain, or a table (tests/unit/test_example_domain.c). */
typedef struct px_example_pairs {
    const char *name;  /* the domain's name */
    int size;          /* ranks */
    const int *chips;  /* rank -> chip */
    const void *ctx;   /* passed to the two readers */
    const char *(*transport)(const void *ctx, int a, int b); /* "direct", "staged", ... */
    const char *(*reason)(const void *ctx, int a, int b);    /* why pair (a, b) uses it */
} px_example_pairs;

/* px_example_domain_info and px_example_domain_reasons of the pairs p. */
void px_example_pairs_info(const px_example_pairs *p, char *buf, size_t n);
void px_example_pairs_reasons(const px_example_pairs *p, char *buf, size_t n);

#define PX_EXAMPLE_REASONS_MAX 1024 /* px_example_domain_reasons' buffer */

#endif
