/*
 * test_tensormap.c - the tensor map on its own: overlap of views and the dependencies it
 * reports for each access pattern. Addresses are offsets into a local buffer; no runtime.
 */
#include "testutil.h"

#include <string.h>

#include "runtime/tensormap.h"

static double buf[4096];

typedef struct deps {
    px_task_id ids[64];
    int n;
} deps;

static int collect_cb(void *ctx, px_task_id producer)
{
    deps *d = ctx;

    d->ids[d->n++] = producer;
    return 0;
}

/* A 1-D f64 view of buf: n elements starting at element off, stride s. */
static px_tm_view view1(int64_t off, int64_t n, int64_t s)
{
    px_tensor t;
    px_tm_view v;
    int64_t shape = n;

    px_tensor_make(&t, buf, PX_F64, 1, &shape);
    t.offset = off;
    t.stride[0] = s;
    px_tm_view_make(&v, &t);
    return v;
}

/* A 2-D f64 view of buf as a rows x cols block of a matrix with `ld` columns. */
static px_tm_view view2(int64_t row, int64_t col, int64_t rows, int64_t cols, int64_t ld)
{
    px_tensor t;
    px_tm_view v;
    int64_t shape[2] = {rows, cols};

    px_tensor_make(&t, buf, PX_F64, 2, shape);
    t.offset = row * ld + col;
    t.stride[0] = ld;
    t.stride[1] = 1;
    px_tm_view_make(&v, &t);
    return v;
}

/* Records an access and returns the dependencies it reported, sorted. */
static deps access(px_tmap *m, px_tm_view v, int write, px_task_id id)
{
    deps d = {.n = 0};

    assert_int_equal(px_tmap_access(m, &v, write, id, collect_cb, &d), 0);
    for (int i = 1; i < d.n; i++)
        for (int j = i; j > 0 && d.ids[j - 1] > d.ids[j]; j--) {
            px_task_id x = d.ids[j];
            d.ids[j] = d.ids[j - 1];
            d.ids[j - 1] = x;
        }
    return d;
}

/* Disjoint contiguous ranges do not overlap; touching ranges do not either. */
static void test_overlap_disjoint(void **state)
{
    px_tm_view a = view1(0, 100, 1), b = view1(100, 50, 1), c = view1(99, 2, 1);

    assert_int_equal(px_tm_views_may_overlap(&a, &b), 0);
    assert_int_equal(px_tm_views_may_overlap(&a, &c), 1);
    assert_int_equal(px_tm_views_may_overlap(&b, &c), 1);
}

/* Column halves of a row-major 8x16 matrix are disjoint; two overlapping column ranges and a
 * 2-D block against the 1-D view of its first row overlap (same base, different views). */
static void test_overlap_strided(void **state)
{
    px_tm_view left = view2(0, 0, 8, 8, 16), right = view2(0, 8, 8, 8, 16);
    px_tm_view mid = view2(0, 4, 8, 8, 16), row0 = view1(0, 16, 1);
    px_tm_view evens = view1(0, 32, 2), odds = view1(1, 32, 2);

    assert_int_equal(px_tm_views_may_overlap(&left, &right), 0);
    assert_int_equal(px_tm_views_may_overlap(&left, &mid), 1);
    assert_int_equal(px_tm_views_may_overlap(&right, &mid), 1);
    assert_int_equal(px_tm_views_may_overlap(&left, &row0), 1);
    /* Interleaved elements: bounding ranges overlap, elements do not. */
    assert_int_equal(px_tm_views_may_overlap(&evens, &odds), 0);
    /* Lower and upper row blocks of the same columns. */
    px_tm_view top = view2(0, 0, 4, 16, 16), bottom = view2(4, 0, 4, 16, 16);
    assert_int_equal(px_tm_views_may_overlap(&top, &bottom), 0);
}

/* RAW: a read depends on the last writer; WAW: a write on the last writer; WAR: a write on
 * every reader since the last write. Sequence: 1 W, 2 R, 3 R, 4 W, 5 R. */
static void test_raw_waw_war(void **state)
{
    px_tmap m;
    px_tm_view v = view1(0, 64, 1);
    deps d;

    px_tmap_init(&m);
    d = access(&m, v, 1, 1);
    assert_int_equal(d.n, 0);
    d = access(&m, v, 0, 2); /* RAW on 1 */
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], 1);
    d = access(&m, v, 0, 3); /* RAW on 1 */
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], 1);
    d = access(&m, v, 1, 4); /* WAW on 1, WAR on 2 and 3 */
    assert_int_equal(d.n, 3);
    assert_int_equal(d.ids[0], 1);
    assert_int_equal(d.ids[1], 2);
    assert_int_equal(d.ids[2], 3);
    d = access(&m, v, 0, 5); /* RAW on 4 only */
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], 4);
    px_tmap_fini(&m);
}

/* A partial overlap reports the dependency; a disjoint view reports none. */
static void test_partial_and_disjoint(void **state)
{
    px_tmap m;
    deps d;

    px_tmap_init(&m);
    access(&m, view1(0, 100, 1), 1, 1);
    d = access(&m, view1(50, 100, 1), 0, 2); /* overlaps [50, 100) of task 1's write */
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], 1);
    d = access(&m, view1(200, 10, 1), 1, 3); /* disjoint from both */
    assert_int_equal(d.n, 0);
    d = access(&m, view1(120, 100, 1), 1, 4); /* WAR on 2 ([120,150)), WAW on 3 ([200,210)) */
    assert_int_equal(d.n, 2);
    assert_int_equal(d.ids[0], 2);
    assert_int_equal(d.ids[1], 3);
    px_tmap_fini(&m);
}

/* Writes to the two column halves do not depend on each other; a write of the whole matrix
 * depends on both and then covers them, so a later read of one half depends only on it. */
static void test_strided_columns(void **state)
{
    px_tmap m;
    deps d;

    px_tmap_init(&m);
    d = access(&m, view2(0, 0, 8, 8, 16), 1, 1);
    assert_int_equal(d.n, 0);
    d = access(&m, view2(0, 8, 8, 8, 16), 1, 2);
    assert_int_equal(d.n, 0);
    d = access(&m, view2(0, 0, 8, 16, 16), 1, 3);
    assert_int_equal(d.n, 2);
    d = access(&m, view2(0, 8, 8, 8, 16), 0, 4);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], 3);
    px_tmap_fini(&m);
}

/* A task's own earlier access never makes it depend on itself; clear forgets everything;
 * forget drops entries inside a freshly allocated range. */
static void test_self_clear_forget(void **state)
{
    px_tmap m;
    deps d;

    px_tmap_init(&m);
    access(&m, view1(0, 10, 1), 1, 7);
    d = access(&m, view1(0, 10, 1), 0, 7);
    assert_int_equal(d.n, 0);
    px_tmap_clear(&m);
    assert_int_equal(px_tmap_size(&m), 0);
    d = access(&m, view1(0, 10, 1), 0, 8);
    assert_int_equal(d.n, 0);
    access(&m, view1(100, 10, 1), 1, 9);
    px_tmap_forget(&m, (uintptr_t)&buf[100], (uintptr_t)&buf[110]);
    d = access(&m, view1(100, 10, 1), 0, 10);
    assert_int_equal(d.n, 0);
    px_tmap_fini(&m);
}

/* Many entries: each of 1000 disjoint tensors written twice depends only on its own writer. */
static void test_many_entries(void **state)
{
    px_tmap m;
    deps d;

    px_tmap_init(&m);
    for (int i = 0; i < 1000; i++)
        access(&m, view1(i * 4, 4, 1), 1, (px_task_id)(i + 1));
    for (int i = 999; i >= 0; i--) {
        d = access(&m, view1(i * 4, 4, 1), 1, (px_task_id)(2000 + i));
        assert_int_equal(d.n, 1);
        assert_int_equal(d.ids[0], (px_task_id)(i + 1));
    }
    assert_int_equal(px_tmap_size(&m), 1000);
    px_tmap_fini(&m);
}

/*
 * The exact-view cache: an access of the same view again is answered without a search (the
 * hit counter moves) as long as no other entry may overlap it. Once a different, overlapping
 * view has been recorded, the next access of the first view must search again and report the
 * other view's writer too. Sequence on v = [0, 8) and w = [4, 12): 1 W v, 2 R v (cached: RAW
 * on 1), 3 W w (WAW on 1, WAR on 2), 4 R v (RAW on 1 and 3, not from the cache).
 */
static void test_cache_isolated(void **state)
{
    px_tmap m;
    px_tm_view v = view1(0, 8, 1), w = view1(4, 8, 1);
    uint64_t hits;
    deps d;

    px_tmap_init(&m);
    access(&m, v, 1, 1);
    hits = m.cache_hits;
    d = access(&m, v, 0, 2);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], 1);
    assert_int_equal(m.cache_hits, hits + 1); /* the search was skipped */
    d = access(&m, w, 1, 3);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.ids[0], 1);
    assert_int_equal(d.ids[1], 2);
    hits = m.cache_hits;
    d = access(&m, v, 0, 4);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.ids[0], 1);
    assert_int_equal(d.ids[1], 3);
    assert_int_equal(m.cache_hits, hits); /* v overlaps w now: searched */
    px_tmap_fini(&m);
}

/*
 * A view inserted over an existing overlapping entry is never isolated: 1 W [0, 16), 2 W
 * [0, 8) (WAW on 1; [0, 16) is not covered, so both entries stay), 3 R [0, 8) must report
 * both writers (RAW on 2 from its own entry, on 1 from the larger one), and so must a second
 * read 4.
 */
static void test_cache_inserted_over(void **state)
{
    px_tmap m;
    px_tm_view big = view1(0, 16, 1), v = view1(0, 8, 1);
    deps d;

    px_tmap_init(&m);
    access(&m, big, 1, 1);
    d = access(&m, v, 1, 2);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], 1);
    for (px_task_id id = 3; id <= 4; id++) {
        d = access(&m, v, 0, id);
        assert_int_equal(d.n, 2);
        assert_int_equal(d.ids[0], 1);
        assert_int_equal(d.ids[1], 2);
    }
    px_tmap_fini(&m);
}

/* Sorts d's ids (insertion sort; a handful). */
static void deps_sort(deps *d)
{
    for (int i = 1; i < d->n; i++)
        for (int j = i; j > 0 && d->ids[j - 1] > d->ids[j]; j--) {
            px_task_id x = d->ids[j];
            d->ids[j] = d->ids[j - 1];
            d->ids[j - 1] = x;
        }
}

/*
 * px_tmap_access_span (the submit's path: a cache hit answered from the tensor, no view made)
 * reports what px_tm_view_span + px_tmap_access report, access for access: 3000 accesses,
 * reads and writes, drawn from a pool of 24 views (1-D strided, 2-D blocks, repeated so the
 * cache hits, overlapping so it misses and entries stop being isolated). A third map takes
 * the orchestration's path: each pool view keeps the entry its last access used, with that
 * entry's gen, and an access whose kept entry is current (px_tm_entry_current) is that entry's
 * cache answer. Every 500 accesses all three maps forget a range, and every 1000 they are
 * cleared, so kept entries go stale, are recycled and come back for other views.
 */
static void test_access_span_same_as_view(void **state)
{
    px_tensor pool[24];
    px_tm_entry *kept[24] = {NULL};
    uint64_t kept_gen[24] = {0}, kept_hits = 0;
    px_tmap a, b, c;
    uint64_t x = 12345;

    for (int i = 0; i < 24; i++) {
        int64_t shape[2];

        if (i % 3 != 2) {
            shape[0] = 8 + (i * 7) % 40;
            px_tensor_make(&pool[i], buf, PX_F64, 1, shape);
            pool[i].offset = (i * 37) % 900;
            pool[i].stride[0] = 1 + i % 3;
        } else {
            shape[0] = 4 + i % 5;
            shape[1] = 6 + i % 4;
            px_tensor_make(&pool[i], buf, PX_F64, 2, shape);
            pool[i].offset = (i * 53) % 800;
            pool[i].stride[0] = 32;
            pool[i].stride[1] = 1;
        }
    }
    assert_int_equal(px_tmap_init(&a), 0);
    assert_int_equal(px_tmap_init(&b), 0);
    assert_int_equal(px_tmap_init(&c), 0);
    for (px_task_id id = 1; id <= 3000; id++) {
        px_tm_view made, span, scratch;
        deps da = {.n = 0}, db = {.n = 0}, dc = {.n = 0};
        px_tm_entry *self;
        const px_tensor *t;
        int write, p;

        if (id % 1000 == 0) {
            px_tmap_clear(&a);
            px_tmap_clear(&b);
            px_tmap_clear(&c);
        } else if (id % 500 == 0) {
            uintptr_t lo = (uintptr_t)buf + 800, hi = (uintptr_t)buf + 4000;

            px_tmap_forget(&a, lo, hi);
            px_tmap_forget(&b, lo, hi);
            px_tmap_forget(&c, lo, hi);
        }
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p = (int)((x >> 33) % 24);
        t = &pool[p];
        write = (x >> 20) % 3 == 0;
        assert_int_equal(px_tm_view_make(&made, t), 1);
        assert_int_equal(px_tm_view_span(&span, t, made.lo, made.hi, 8), 1);
        assert_int_equal(px_tmap_access_span(&a, t, made.lo, made.hi, 8, write, id, collect_cb,
                                             &da, &scratch, &self), 0);
        assert_non_null(self);
        assert_true(px_tm_same_view(&self->v, &span));
        assert_int_equal(px_tmap_access(&b, &span, write, id, collect_cb, &db), 0);
        if (kept[p] != NULL && px_tm_entry_current(kept[p], kept_gen[p])) {
            assert_true(px_tm_same_view(&kept[p]->v, &span));
            assert_int_equal(px_tm_cache_answer(&c, kept[p], write, id, collect_cb, &dc), 0);
            kept_hits++;
        } else {
            assert_int_equal(px_tmap_access_span(&c, t, made.lo, made.hi, 8, write, id,
                                                 collect_cb, &dc, &scratch, &kept[p]), 0);
            kept_gen[p] = kept[p]->gen;
        }
        deps_sort(&da);
        deps_sort(&db);
        deps_sort(&dc);
        assert_int_equal(da.n, db.n);
        assert_int_equal(dc.n, db.n);
        for (int k = 0; k < da.n; k++) {
            assert_int_equal(da.ids[k], db.ids[k]);
            assert_int_equal(dc.ids[k], db.ids[k]);
        }
    }
    assert_true(a.cache_hits > 0);
    assert_int_equal(a.cache_hits, b.cache_hits);
    assert_true(kept_hits > 0);
    px_tmap_fini(&a);
    px_tmap_fini(&b);
    px_tmap_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overlap_disjoint),  cmocka_unit_test(test_overlap_strided),
        cmocka_unit_test(test_raw_waw_war),       cmocka_unit_test(test_partial_and_disjoint),
        cmocka_unit_test(test_strided_columns),   cmocka_unit_test(test_self_clear_forget),
        cmocka_unit_test(test_many_entries),      cmocka_unit_test(test_cache_isolated),
        cmocka_unit_test(test_cache_inserted_over),
        cmocka_unit_test(test_access_span_same_as_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
