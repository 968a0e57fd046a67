/*
 * test_dfx_buffer.c - the DFX framework below the collectors: record payloads survive
 * encoding, a writer faster than the drain waits instead of dropping (back-pressure), a
 * writer past the backstop drops and every dropped record is accounted for, the end-of-run
 * flush publishes every producer's partial buffer, and a lost buffer is detected.
 *
 * A counting collector stands in for the real ones (registered as swimlane, consuming every
 * kind), so the counts are the framework's alone. The chain graph of n tasks has n - 1
 * edges; with swimlane on, each task writes TASK_BEGIN, TASK_END and phases core.run and
 * core.release on its core. Every test is strict (PLEXUS_DFX_STRICT=1).
 */
#include "dfx_testgraph.h"

#include "platform/platform.h"

/* An ARG entry of a strided 3-d tensor, a scalar ARG, SCOPE, PMU and ARGDATA round-trip. */
static void test_records_roundtrip(void **state)
{
    px_dfx_rec buf[8] __attribute__((aligned(32)));
    int64_t shape[3] = {2, 3, 4};
    px_dfx_arg out = {0};
    px_task_args a;
    px_tensor t, v;
    px_dfx_scope_rec sc = {0};
    px_dfx_pmu_rec pm = {0};
    px_dfx_argdata ad = {0};
    px_dfx_task tk = {0};
    px_dfx_occupancy occ = {.tasks_live = 7, .task_slots = 4096, .heap_live = 1 << 20,
                            .heap_size = 64 << 20, .tmap_entries = 12};
    uint64_t pmu[4] = {1, 2, PX_DFX_PMU_NONE, 4};

    px_tensor_make(&t, (void *)0x1000, PX_F64, 3, shape);
    PX_ASSERT_OK(px_tensor_view(&t, 3, shape, (const int64_t[]){24, 4, 1}, 5, &v));
    px_args_init(&a);
    px_args_inout(&a, &v);
    px_args_mark(&a);
    px_args_scalar_i64(&a, -9);
    /* tensor: 2 + 2 * 3 = 8 words -> 2 continuation records -> nrec 3 */
    assert_int_equal(px_dfx_nrec_for_words(px_dfx_arg_words(&a.a[0])), 3);
    memset(buf, 0, sizeof(buf));
    buf[0].kind = PX_DFXK_ARG;
    buf[0].nrec = 3;
    px_dfx_arg_put(&buf[0], 77, 0, &a.a[0]);
    assert_int_equal(px_dfx_arg_decode(&buf[0], &out), 0);
    assert_true(out.task == 77 && out.index == 0 && out.tag == PX_TAG_INOUT && out.marked);
    assert_true(out.t.addr == (void *)0x1000 && out.t.dtype == PX_F64 && out.t.ndim == 3);
    assert_true(out.t.shape[2] == 4 && out.t.stride[0] == 24 && out.t.offset == 5);
    buf[0].nrec = 2;
    px_dfx_arg_put(&buf[0], 78, 1, &a.a[1]);
    assert_int_equal(px_dfx_arg_decode(&buf[0], &out), 0);
    assert_true(out.tag == PX_TAG_SCALAR && out.scalar_kind == PX_SCALAR_I64);
    assert_true((int64_t)out.value == -9 && out.index == 1);
    buf[0].kind = PX_DFXK_SCOPE;
    px_dfx_scope_put(&buf[0], 2, 1, &occ);
    assert_int_equal(px_dfx_scope_decode(&buf[0], &sc), 0);
    assert_true(sc.depth == 2 && sc.begin == 1 && sc.occ.tasks_live == 7);
    assert_true(sc.occ.heap_live == 1 << 20 && sc.occ.tmap_entries == 12);
    buf[0].kind = PX_DFXK_PMU;
    px_dfx_pmu_put(&buf[0], 5, PX_DFX_PMU_SOFTWARE, 3, pmu);
    assert_int_equal(px_dfx_pmu_decode(&buf[0], &pm), 0);
    assert_true(pm.task == 5 && pm.core == 3 && pm.v[2] == PX_DFX_PMU_NONE && pm.v[3] == 4);
    buf[0].kind = PX_DFXK_ARGDATA;
    px_dfx_argdata_put(&buf[0], 9, 2, 64, 40, PX_DFX_ARGDATA_LAST | PX_DFX_ARGDATA_AFTER);
    assert_int_equal(px_dfx_argdata_decode(&buf[0], &ad), -1); /* 40 bytes > 1 x 32 */
    buf[0].nrec = 3;                                           /* 2 continuations: 64 */
    assert_int_equal(px_dfx_argdata_decode(&buf[0], &ad), 0);
    assert_true(ad.task == 9 && ad.index == 2 && ad.offset == 64 && ad.len == 40);
    assert_true(ad.last && ad.after && !ad.truncated);
    buf[0].nrec = 1;
    buf[0].kind = PX_DFXK_TASK_END;
    buf[0].a = 11;
    buf[0].b = px_dfx_task_end_b(PX_EINVAL, 1, 6);
    assert_int_equal(px_dfx_task_decode(&buf[0], &tk), 0);
    assert_true(tk.end && tk.task == 11 && tk.status == PX_EINVAL && tk.poisoned && tk.core == 6);
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
 * the 30 s backstop nothing is dropped and every entry arrives: 1000 TASK_BEGIN, 1000
 * TASK_END, 999 EDGE.
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
    assert_int_equal(tg_count.kinds[PX_DFXK_TASK_BEGIN], 1000);
    assert_int_equal(tg_count.kinds[PX_DFXK_TASK_END], 1000);
    assert_int_equal(tg_count.kinds[PX_DFXK_EDGE], 999);
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

/* Opens a chip and a DFX state with one core producer and the orchestration producer. */
static px_dfx *open_direct(px_chip **chip, px_config *c, const char *dir)
{
    px_dfx_params prm = {0};
    px_caps caps;
    px_dfx *d;

    tg_config(c, 1, PX_DFX_SWIMLANE, dir, "default", NULL);
    c->dfx_buffer_records = 16;
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

/*
 * The end-of-run flush publishes partial buffers: 10 edges on the core producer and 3 on
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
        px_dfx_edge(px_dfx_producer_of(d, 0), (px_task_id)i, (px_task_id)i + 1);
    for (int i = 0; i < 3; i++)
        px_dfx_edge(px_dfx_producer_of(d, 1), 100, 200);
    PX_ASSERT_OK(px_dfx_finish(d, 1));
    assert_int_equal(tg_count.kinds[PX_DFXK_EDGE], 13);
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
        px_dfx_edge(px_dfx_producer_of(d, 0), (px_task_id)i, (px_task_id)i + 1);
    assert_int_equal(px_dfx_finish(d, 0), PX_EIO);
    assert_non_null(strstr(px_last_error(), "do not reconcile"));
    assert_non_null(strstr(px_last_error(), "core 0 wrote 10 records, the drain collected 0"));
    assert_int_equal(tg_count.kinds[PX_DFXK_EDGE], 0);
    px_dfx_destroy(d);
    px_plat_chip_close(chip);
    px_dfx_set_collectors(NULL);
    tg_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_roundtrip),
        cmocka_unit_test(test_saturation_waits_not_drops),
        cmocka_unit_test(test_backstop_drops_are_accounted),
        cmocka_unit_test(test_flush_partial_buffers),
        cmocka_unit_test(test_lost_records_detected),
    };

    if (!PX_DFX)
        px_test_skip("DFX is compiled out of this build (CMake option PX_DFX=OFF)");
    setenv("PLEXUS_DFX_STRICT", "1", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
