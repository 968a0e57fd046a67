/*
 * test_dfx_buffer.c - the DFX framework below the collectors: record payloads survive
 * encoding, a writer faster than the drain waits instead of dropping (back-pressure), a
 * writer past the backstop drops and every dropped record is accounted for, the end-of-run
 * flush publishes every producer's partial buffer, a lost buffer is detected, the
 * orchestration drains for itself when the drain thread does not, and a sleeping drain is
 * woken once per batch of buffers.
 *
 * A counting collector stands in for the real ones (registered as swimlane, consuming every
 * kind), so the counts are the framework's alone. The chain graph of n tasks has n - 1
 * edges; with swimlane on, each task writes one SUBMIT (its edges inside) on the
 * orchestration and one TASK on its core. Every test is strict (PLEXUS_DFX_STRICT=1).
 */
#include "dfx_testgraph.h"

#include <sched.h>

#include "dfx/dfx_internal.h"
#include "platform/platform.h"

/*
 * A SUBMIT with a strided 3-d tensor, a scalar and two edges, an EDGE entry, TASK, SCOPE, PMU
 * and ARGDATA round-trip; a SUBMIT one record too short or too long does not decode.
 */
static void test_records_roundtrip(void **state)
{
    px_dfx_rec buf[8] __attribute__((aligned(32)));
    int64_t shape[3] = {2, 3, 4};
    const px_task_id prods[2] = {70, 71};
    px_dfx_arg out = {0};
    px_dfx_submit_rec su = {0};
    px_dfx_edge_rec ed = {0};
    px_task_args a;
    px_tensor t, v;
    px_dfx_scope_rec sc = {0};
    px_dfx_pmu_rec pm = {0};
    px_dfx_argdata ad = {0};
    px_dfx_task tk = {0};
    px_dfx_occupancy occ = {.tasks_live = 7, .task_slots = 4096, .heap_live = 1 << 20,
                            .heap_size = 64 << 20, .tmap_entries = 12};
    uint64_t pmu[4] = {1, 2, PX_DFX_PMU_NONE, 4};
    uint32_t at;

    px_tensor_make(&t, (void *)0x1000, PX_F64, 3, shape);
    PX_ASSERT_OK(px_tensor_view(&t, 3, shape, (const int64_t[]){24, 4, 1}, 5, &v));
    px_args_init(&a);
    px_args_inout(&a, &v);
    px_args_mark(&a);
    px_args_scalar_i64(&a, -9);
    /* duration 1 + tensor 3 + 2 * 3 + scalar 2 + edges 2 = 14 words -> 4 continuations */
    assert_int_equal(px_dfx_submit_words(&a, 2), 14);
    memset(buf, 0, sizeof(buf));
    buf[0].kind = PX_DFXK_SUBMIT;
    buf[0].ts = 1000;
    buf[0].nrec = (uint8_t)px_dfx_nrec_for_words(14);
    assert_int_equal(buf[0].nrec, 5);
    px_dfx_submit_put(&buf[0], 77, 3, 250, &a, prods, 2);
    assert_int_equal(px_dfx_submit_decode(&buf[0], &su), 0);
    assert_true(su.task == 77 && su.kernel == 3 && su.ts == 1000 && su.dur == 250);
    assert_true(su.nargs == 2 && su.nedges == 2 && su.edges[0] == 70 && su.edges[1] == 71);
    at = px_dfx_arg_get(su.args, su.args_words, &out);
    assert_int_equal(at, 9);
    assert_true(out.index == 0 && out.tag == PX_TAG_INOUT && out.marked);
    assert_true(out.t.addr == (void *)0x1000 && out.t.dtype == PX_F64 && out.t.ndim == 3);
    assert_true(out.t.shape[2] == 4 && out.t.stride[0] == 24 && out.t.offset == 5);
    assert_int_equal(px_dfx_arg_get(su.args + at, su.args_words - at, &out), 2);
    assert_true(out.tag == PX_TAG_SCALAR && out.scalar_kind == PX_SCALAR_I64);
    assert_true((int64_t)out.value == -9 && out.index == 1);
    buf[0].nrec = 4; /* the edges no longer fit */
    assert_int_equal(px_dfx_submit_decode(&buf[0], &su), -1);
    buf[0].nrec = 6; /* a whole record past the edges */
    assert_int_equal(px_dfx_submit_decode(&buf[0], &su), -1);
    buf[0].kind = PX_DFXK_EDGE;
    buf[0].nrec = (uint8_t)px_dfx_nrec_for_words(2);
    px_dfx_edge_put(&buf[0], 80, prods, 2);
    assert_int_equal(px_dfx_edge_decode(&buf[0], &ed), 0);
    assert_true(ed.consumer == 80 && ed.n == 2 && ed.producers[1] == 71);
    buf[0].kind = PX_DFXK_SCOPE;
    buf[0].nrec = (uint8_t)px_dfx_nrec_for_words(PX_DFX_SCOPE_WORDS);
    px_dfx_scope_put(&buf[0], 2, 1, &occ);
    assert_int_equal(px_dfx_scope_decode(&buf[0], &sc), 0);
    assert_true(sc.depth == 2 && sc.begin == 1 && sc.occ.tasks_live == 7);
    assert_true(sc.occ.heap_live == 1 << 20 && sc.occ.tmap_entries == 12);
    buf[0].kind = PX_DFXK_PMU;
    px_dfx_pmu_put(&buf[0], 5, PX_DFX_PMU_SOFTWARE, 3, pmu);
    assert_int_equal(px_dfx_pmu_decode(&buf[0], &pm), 0);
    assert_true(pm.task == 5 && pm.core == 3 && pm.v[2] == PX_DFX_PMU_NONE && pm.v[3] == 4);
    buf[0].kind = PX_DFXK_ARGDATA;
    buf[0].nrec = 2;
    px_dfx_argdata_put(&buf[0], 9, 2, 64, 40, PX_DFX_ARGDATA_LAST | PX_DFX_ARGDATA_AFTER);
    assert_int_equal(px_dfx_argdata_decode(&buf[0], &ad), -1); /* 40 bytes > 1 x 32 */
    buf[0].nrec = 3;                                           /* 2 continuations: 64 */
    assert_int_equal(px_dfx_argdata_decode(&buf[0], &ad), 0);
    assert_true(ad.task == 9 && ad.index == 2 && ad.offset == 64 && ad.len == 40);
    assert_true(ad.last && ad.after && !ad.truncated);
    buf[0].kind = PX_DFXK_TASK;
    buf[0].ts = 5000;
    buf[0].nrec = (uint8_t)px_dfx_nrec_for_words(PX_DFX_TASK_WORDS);
    px_dfx_task_put(&buf[0], 11, 4, 6, PX_EINVAL, 30, 0, 20,
                    PX_DFX_TASK_POISONED | PX_DFX_TASK_RELEASE | PX_DFX_TASK_WAITED);
    assert_int_equal(px_dfx_task_decode(&buf[0], &tk), 0);
    assert_true(tk.task == 11 && tk.kernel == 4 && tk.core == 6 && tk.status == PX_EINVAL);
    assert_true(tk.wait == 30 && tk.run == 0 && tk.release == 20 && tk.ts == 5000);
    assert_true(px_dfx_task_t_end(&tk) == 5020 && (tk.flags & PX_DFX_TASK_POISONED));
    buf[0].nrec = 1;
    assert_int_equal(px_dfx_task_decode(&buf[0], &tk), -1);
}

/*
 * Records per task (records version 2): the chain of 1000 tasks, each one 1-d INOUT tensor
 * with one edge (none for the first), swimlane and depgen on, writes per task one SUBMIT of
 * 1 + ceil((1 duration + 5 argument + 1 edge words) / 4) = 3 records (the first: 6 words, also
 * 3) and one TASK of 2: 5000 records, where version 1 wrote 9 per task (TASK_BEGIN,
 * TASK_END, core.run, core.release, orch.submit, SUBMIT, an ARG of 2, EDGE) and a tenth,
 * core.pop or core.idle, whenever the core waited. Entries: swimlane 1000 TASK + 1000 SUBMIT,
 * depgen 1000.
 */
static void test_records_per_task(void **state)
{
    static float x[1];
    int64_t shape[1] = {1};
    px_task_args args;
    px_run_stats rs;
    px_tensor tx;
    tg_kernels k;
    px_worker *w;
    dfxc_json *root;
    char dir[256];
    px_config c;

    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 2, PX_DFX_SWIMLANE | PX_DFX_DEPGEN, dir, "default", NULL);
    x[0] = 0.0f;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    tg_register(w, &k);
    k.chain_n = 1000;
    px_tensor_make(&tx, x, PX_F32, 1, shape);
    px_args_init(&args);
    px_args_inout(&args, &tx);
    PX_ASSERT_OK(px_run(w, tg_chain_orch, &args, &k));
    PX_ASSERT_OK(px_run_stats_get(w, &rs));
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_true(x[0] == 1000.0f);
    assert_int_equal(rs.tasks, 1000);
    assert_int_equal(rs.dfx_records, 5000);
    assert_true(dfxc_json_num(tg_dfx_json(dir, "swimlane", &root), "produced", -1) == 2000);
    dfxc_json_free(root);
    assert_true(dfxc_json_num(tg_dfx_json(dir, "depgen", &root), "produced", -1) == 1000);
    dfxc_json_free(root);
    tg_rmdir(dir);
}

static px_status nop_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    return PX_OK;
}

/* Submits one task with 6 IN views of a 2x2x2 tensor (args) followed by a scalar. */
static px_status many_args_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_kernel_id k = *(px_kernel_id *)user;
    px_task_args t;

    px_args_init(&t);
    for (int i = 0; i < 6; i++)
        px_args_in(&t, &args->a[0].v.t);
    px_args_scalar_u64(&t, 42);
    return px_submit(o, k, &t, NULL);
}

/*
 * A SUBMIT larger than a buffer is split, not dropped: with 8-record buffers (28 words per
 * entry) a task with 6 3-d tensor args (9 words each) and a scalar (2) needs 1 + 54 + 2 = 57
 * words, so it goes out as 3 entries: the SUBMIT with the duration and 3 args (28 words), a
 * continuation with 3 args (28), one with the scalar (3). deps.json still lists all 7 args
 * in order, nothing is dropped and the run reconciles (strict). Unsplit, the 16-record entry
 * would not fit a buffer and would be dropped (and deps.json not written).
 */
static void test_submit_split(void **state)
{
    static float x[8];
    int64_t shape[3] = {2, 2, 2};
    px_task_args args;
    px_tensor tx;
    px_kernel_id k;
    px_worker *w;
    dfxc_json *root, *deps;
    const dfxc_json *targs, *dep;
    char dir[256], path[300];
    px_config c;

    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 1, PX_DFX_DEPGEN, dir, "default", NULL);
    c.dfx_buffer_records = 8;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "nop", nop_kernel, NULL, &k));
    px_tensor_make(&tx, x, PX_F32, 3, shape);
    px_args_init(&args);
    px_args_in(&args, &tx);
    PX_ASSERT_OK(px_run(w, many_args_orch, &args, &k));
    PX_ASSERT_OK(px_worker_destroy(w));
    dep = tg_dfx_json(dir, "depgen", &root);
    assert_true(dfxc_json_num(dep, "dropped", -1) == 0);
    assert_true(dfxc_json_num(dep, "produced", -1) == 3);
    dfxc_json_free(root);
    snprintf(path, sizeof(path), "%s/deps.json", dir);
    PX_ASSERT_OK(dfxc_json_load(path, &deps));
    targs = dfxc_json_get(&dfxc_json_get(deps, "tasks")->kids[0], "args");
    assert_non_null(targs);
    assert_int_equal(targs->n, 7);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(dfxc_json_num(&targs->kids[i], "index", -1), i);
        assert_int_equal(dfxc_json_get(&targs->kids[i], "shape")->n, 3);
    }
    assert_true(dfxc_json_num(&targs->kids[6], "value", -1) == 42);
    dfxc_json_free(deps);
    tg_rmdir(dir);
}

/* Reads collector swimlane's counts from dir/dfx.json. */
static void read_counts(const char *dir, double *produced, double *collected, double *dropped,
                        double *waits)
{
    dfxc_json *root;
    const dfxc_json *c = tg_dfx_json(dir, "swimlane", &root);

    *produced = dfxc_json_num(c, "produced", -1);
    *collected = dfxc_json_num(c, "collected", -1);
    *dropped = dfxc_json_num(c, "dropped", -1);
    *waits = dfxc_json_num(c, "writer_waits", -1);
    assert_true(dfxc_json_get(c, "reconciled")->num == 1);
    dfxc_json_free(root);
}

/*
 * Saturation: 8-record buffers, 8 of them, a drain that spends 20 us per entry, and a chain
 * of 1000 tasks: the writers outrun the drain, so they wait (writer_waits > 0), but within
 * the 30 s backstop nothing is dropped and every entry arrives: 1000 TASK and 1000 SUBMIT
 * (a chain task has one edge, inside its SUBMIT: no EDGE entry).
 */
static void test_saturation_waits_not_drops(void **state)
{
    double produced, collected, dropped, waits;
    char dir[256];
    px_config c;

    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 2, PX_DFX_SWIMLANE, dir, "default", NULL);
    c.dfx_buffer_records = 8;
    c.dfx_buffers = 8;
    px_dfx_set_collectors(tg_coll_table);
    tg_count.spin_ns = 20000;
    PX_ASSERT_OK(tg_run_chain(&c, 1000));
    assert_true(tg_count.finished);
    assert_int_equal(tg_count.kinds[PX_DFXK_TASK], 1000);
    assert_int_equal(tg_count.kinds[PX_DFXK_SUBMIT], 1000);
    assert_int_equal(tg_count.kinds[PX_DFXK_EDGE], 0);
    read_counts(dir, &produced, &collected, &dropped, &waits);
    assert_true(waits > 0);
    assert_true(dropped == 0);
    assert_true(collected == produced && produced == (double)tg_count.entries);
    px_dfx_set_collectors(NULL);
    tg_count.spin_ns = 0;
    tg_rmdir(dir);
}

/*
 * Backstop: the same, but a drain at 2 ms per entry and a 1 ms backstop: writers give up
 * and drop. The run still succeeds under strict reconcile, because every dropped entry is
 * counted: collected + dropped == produced, and the entries the collector saw are exactly
 * the collected ones.
 */
static void test_backstop_drops_are_accounted(void **state)
{
    double produced, collected, dropped, waits;
    char dir[256];
    px_config c;

    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 2, PX_DFX_SWIMLANE, dir, "default", NULL);
    c.dfx_buffer_records = 8;
    c.dfx_buffers = 5;
    c.dfx_backstop_s = 0.001;
    px_dfx_set_collectors(tg_coll_table);
    tg_count.spin_ns = 2000000;
    PX_ASSERT_OK(tg_run_chain(&c, 200));
    read_counts(dir, &produced, &collected, &dropped, &waits);
    assert_true(dropped > 0);
    assert_true(collected + dropped == produced);
    assert_true(collected == (double)tg_count.entries);
    px_dfx_set_collectors(NULL);
    tg_count.spin_ns = 0;
    tg_rmdir(dir);
}

/* Opens a chip and a DFX state with one core producer and the orchestration producer, in
 * buffers of `records` records; backstop_s > 0 replaces PLEXUS_DFX_BACKSTOP_S. */
static px_dfx *open_direct_with(px_chip **chip, px_config *c, const char *dir,
                                uint32_t records, double backstop_s)
{
    px_dfx_params prm = {0};
    px_caps caps;
    px_dfx *d;

    tg_config(c, 1, PX_DFX_SWIMLANE, dir, "default", NULL);
    c->dfx_buffer_records = records;
    if (backstop_s > 0)
        c->dfx_backstop_s = backstop_s;
    PX_ASSERT_OK(px_caps_probe_with(c, &caps));
    PX_ASSERT_OK(px_plat_chip_open(&caps, 0, 16 << 20, chip));
    prm.cfg = c;
    prm.chip = *chip;
    prm.dev_region = px_plat_dev_base(*chip);
    prm.dev_region_bytes = px_dfx_region_bytes(c, 1);
    prm.ncores = 1;
    px_dfx_set_collectors(tg_coll_table);
    PX_ASSERT_OK(px_dfx_create(&prm, &d));
    return d;
}

/* open_direct_with 16-record buffers and the default backstop. */
static px_dfx *open_direct(px_chip **chip, px_config *c, const char *dir)
{
    return open_direct_with(chip, c, dir, 16, 0);
}

/* Writes one 1-record PHASE entry for task i. */
static void emit_one(px_dfx_producer *p, uint64_t i)
{
    px_dfx_phase(p, PX_PHASE_CORE_RUN, 100 + i, 101 + i, i);
}

/*
 * The end-of-run flush publishes partial buffers: 10 entries on the core producer and 3 on
 * the orchestration (neither fills a 16-record buffer) all arrive, 13 entries.
 */
static void test_flush_partial_buffers(void **state)
{
    char dir[256];
    px_chip *chip;
    px_config c;
    px_dfx *d;

    tg_tmpdir(dir, sizeof(dir));
    d = open_direct(&chip, &c, dir);
    for (int i = 0; i < 10; i++)
        emit_one(px_dfx_producer_of(d, 0), (uint64_t)i);
    for (int i = 0; i < 3; i++)
        emit_one(px_dfx_producer_of(d, 1), 200);
    PX_ASSERT_OK(px_dfx_finish(d, 1));
    assert_int_equal(tg_count.kinds[PX_DFXK_PHASE], 13);
    px_dfx_destroy(d);
    px_plat_chip_close(chip);
    px_dfx_set_collectors(NULL);
    tg_rmdir(dir);
}

/*
 * A lost buffer is detected: finishing without flushing the core (quiescent = 0, as after a
 * drain that timed out) leaves its 10 records uncollected; strict reconcile says so.
 */
static void test_lost_records_detected(void **state)
{
    char dir[256];
    px_chip *chip;
    px_config c;
    px_dfx *d;

    tg_tmpdir(dir, sizeof(dir));
    d = open_direct(&chip, &c, dir);
    for (int i = 0; i < 10; i++)
        emit_one(px_dfx_producer_of(d, 0), (uint64_t)i);
    assert_int_equal(px_dfx_finish(d, 0), PX_EIO);
    assert_non_null(strstr(px_last_error(), "do not reconcile"));
    assert_non_null(strstr(px_last_error(), "core 0 wrote 10 records, the drain collected 0"));
    assert_int_equal(tg_count.kinds[PX_DFXK_PHASE], 0);
    px_dfx_destroy(d);
    px_plat_chip_close(chip);
    px_dfx_set_collectors(NULL);
    tg_rmdir(dir);
}

/*
 * A drain thread kept off the buffers (as a scheduler that gives it no CPU would) does not
 * make the orchestration wait: with no free buffer it drains the ready ones itself, so 64
 * buffers' worth of entries go through a pool of 16 without a wait or a drop, in order (the
 * strict reconcile checks every sequence number). A core, the device side, never drains: it
 * waits, and past a 50 ms backstop drops, every drop accounted for. The end of the run
 * drains what is left on the finishing thread, not on the held drain thread. Before the
 * orchestration drained for itself it waited like the core and dropped at the backstop.
 */
static void test_orchestration_drains_when_drain_held(void **state)
{
    char dir[256];
    px_dfx_counts k;
    px_chip *chip;
    px_config c;
    px_dfx *d;

    tg_tmpdir(dir, sizeof(dir));
    d = open_direct_with(&chip, &c, dir, 16, 0.05);
    assert_int_equal(d->nbufs, 16); /* 4 per producer + 8 */
    dfx_drain_hold(d, 1);
    for (int i = 0; i < 64 * 16; i++)
        emit_one(px_dfx_producer_of(d, 1), (uint64_t)i);
    PX_ASSERT_OK(px_dfx_finish(d, 1));
    px_dfx_counts_get(d, &k);
    assert_int_equal(tg_count.kinds[PX_DFXK_PHASE], 64 * 16);
    assert_int_equal(k.publishes, 64);
    assert_int_equal(k.writer_waits, 0);
    assert_int_equal(k.dropped, 0);
    assert_true(k.writer_drained >= 64 - 16);     /* all but what the pool held */
    assert_int_equal(k.writer_drained + k.finish_drained, 64);
    assert_int_equal(k.drained, 0); /* held: the end of the run drained the rest itself */
    px_dfx_destroy(d);
    px_plat_chip_close(chip);

    d = open_direct_with(&chip, &c, dir, 16, 0.05);
    dfx_drain_hold(d, 1);
    for (int i = 0; i < 64 * 16; i++)
        emit_one(px_dfx_producer_of(d, 0), (uint64_t)i);
    PX_ASSERT_OK(px_dfx_finish(d, 1)); /* drops are counted: it still reconciles */
    px_dfx_counts_get(d, &k);
    assert_int_equal(k.writer_drained, 0);
    assert_int_equal(k.drained, 0);
    assert_true(k.finish_drained >= 1);
    assert_true(k.writer_waits >= 1 && k.backstops == 1);
    assert_true(k.dropped > 0);
    assert_int_equal(tg_count.kinds[PX_DFXK_PHASE] + k.dropped, 64 * 16);
    px_dfx_destroy(d);
    px_plat_chip_close(chip);
    px_dfx_set_collectors(NULL);
    tg_rmdir(dir);
}

/* Waits (bounded) until d's drain thread sleeps on its futex. */
static void wait_drain_asleep(px_dfx *d)
{
    uint64_t until = px_now_ns() + (uint64_t)(10e9 * px_test_slack());

    while (atomic_load_explicit(&d->drain_sleeping, memory_order_seq_cst) == 0) {
        if (px_now_ns() > until)
            fail_msg("the drain thread did not go to sleep within 10 s");
        sched_yield();
    }
}

/*
 * A sleeping drain is woken once per batch of ready buffers, not once per buffer: 100 full
 * buffers, each written while the drain sleeps, cost at most 100 / wake_batch + 1
 * FUTEX_WAKEs. Before, every buffer published to a sleeping drain woke it (100 here).
 */
static void test_drain_woken_per_batch(void **state)
{
    char dir[256];
    px_dfx_counts k;
    px_chip *chip;
    px_config c;
    px_dfx *d;
    uint32_t batch;

    tg_tmpdir(dir, sizeof(dir));
    d = open_direct_with(&chip, &c, dir, 64, 0);
    batch = d->wake_batch;
    assert_int_equal(batch, (16 - 2) / 2);
    for (int b = 0; b < 100; b++) {
        wait_drain_asleep(d);
        for (int i = 0; i < 64; i++)
            emit_one(px_dfx_producer_of(d, 1), (uint64_t)(b * 64 + i));
    }
    PX_ASSERT_OK(px_dfx_finish(d, 1));
    px_dfx_counts_get(d, &k);
    assert_int_equal(tg_count.kinds[PX_DFXK_PHASE], 100 * 64);
    assert_int_equal(k.publishes, 100);
    if (k.drain_wakes > 100 / batch + 1)
        fail_msg("%llu wake-ups of the drain for 100 buffers, batch %u",
                 (unsigned long long)k.drain_wakes, batch);
    px_dfx_destroy(d);
    px_plat_chip_close(chip);
    px_dfx_set_collectors(NULL);
    tg_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_roundtrip),
        cmocka_unit_test(test_records_per_task),
        cmocka_unit_test(test_submit_split),
        cmocka_unit_test(test_saturation_waits_not_drops),
        cmocka_unit_test(test_backstop_drops_are_accounted),
        cmocka_unit_test(test_flush_partial_buffers),
        cmocka_unit_test(test_lost_records_detected),
        cmocka_unit_test(test_orchestration_drains_when_drain_held),
        cmocka_unit_test(test_drain_woken_per_batch),
    };

    if (!PX_DFX)
        px_test_skip("DFX is compiled out of this build (CMake option PX_DFX=OFF)");
    setenv("PLEXUS_DFX_STRICT", "1", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
