/*
 * test_staged.c - the staged transport against a peer that writes malformed requests
 * (issue 20 item 12): two ranks of one process share a real staging pair (formatted by
 * comm_stg_pair_init, connected by comm_build, the transport's connect) and windows, each
 * surrounded by canary bytes. Malformed requests are written straight into a ring, as a buggy
 * or hostile peer would, and carried out by the target's poll: each must be skipped and
 * counted, and no byte of the window, the staging mapping or the canaries around them may
 * change but the ring's done count. The issue's case is an inline GET_HEAD as long as the
 * head (36 KiB with 4096 signals) in the ring's last slot, with 16 KiB chunks: carried out,
 * it copied past the end of the mapping (target rank 0) or over the other ring's header
 * (target rank 1).
 *
 * Also: well-formed requests still do exactly what they say, and the transport's connect
 * refuses a pair whose header does not describe the bytes mapped.
 */
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "comm/transport/staged.h"
#include "util/util.h"

#define TS_NSIG 4096u
#define TS_DATA (8u << 10)
#define TS_CHUNK (16u << 10)
#define TS_CANARY (64u << 10) /* more than any request could reach past its mapping */
#define TS_FILL 0xa5

typedef struct ts_region {
    char *base;   /* canary, the object, canary */
    size_t len;
    char *obj;
    size_t bytes;
    char *copy;   /* a snapshot of base */
} ts_region;

typedef struct ts_pair {
    ts_region pair, win[2];
    px_comm comm[2];
    comm_bell bell[2];
    comm_stg_bounds b;     /* of either rank (both have the same window) */
} ts_pair;

static void ts_region_map(ts_region *r, size_t bytes)
{
    r->bytes = bytes;
    r->len = bytes + 2 * TS_CANARY;
    r->base = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(r->base != MAP_FAILED);
    memset(r->base, TS_FILL, r->len);
    r->obj = r->base + TS_CANARY;
    memset(r->obj, 0, bytes);
    r->copy = malloc(r->len);
    assert_non_null(r->copy);
}

static void ts_region_unmap(ts_region *r)
{
    munmap(r->base, r->len);
    free(r->copy);
}

static void ts_snap(ts_pair *t)
{
    memcpy(t->pair.copy, t->pair.base, t->pair.len);
    for (int i = 0; i < 2; i++)
        memcpy(t->win[i].copy, t->win[i].base, t->win[i].len);
}

/* Takes bytes [off, off + n) of r's object as they are now into the snapshot: a change
 * there is allowed. */
static void ts_allow(ts_region *r, size_t off, size_t n)
{
    memcpy(r->copy + TS_CANARY + off, r->obj + off, n);
}

/* The first byte of r (from its base) that differs from the snapshot; -1 when none. */
static long ts_changed(const ts_region *r)
{
    for (size_t i = 0; i < r->len; i++)
        if (r->base[i] != r->copy[i])
            return (long)i;
    return -1;
}

/* Where in region r byte i is, for a message. */
static const char *ts_where(const ts_region *r, long i, char *buf, size_t n)
{
    if (i < (long)TS_CANARY)
        snprintf(buf, n, "%ld bytes before it", (long)TS_CANARY - i);
    else if ((size_t)i >= TS_CANARY + r->bytes)
        snprintf(buf, n, "%zu bytes past its end", (size_t)i - TS_CANARY - r->bytes + 1);
    else
        snprintf(buf, n, "at offset %zu", (size_t)i - TS_CANARY);
    return buf;
}

static void ts_init(ts_pair *t)
{
    size_t wb = px_comm_window_bytes(2, TS_NSIG, TS_DATA);
    size_t pb = comm_stg_pair_bytes(TS_CHUNK);
    /* the domain's pair table: the one pair is staged */
    static const uint8_t pairs[4] = {PX_COMM_TL_DIRECT, PX_COMM_TL_STAGED, PX_COMM_TL_STAGED,
                                     PX_COMM_TL_DIRECT};

    memset(t, 0, sizeof(*t));
    ts_region_map(&t->pair, pb);
    comm_stg_pair_init(t->pair.obj, TS_CHUNK);
    for (int r = 0; r < 2; r++) {
        ts_region_map(&t->win[r], wb);
        for (size_t i = px_comm_area_bytes(2, TS_NSIG); i < wb; i++) /* data: a pattern */
            t->win[r].obj[i] = (char)(i * 7 + r);
    }
    for (int r = 0; r < 2; r++) {
        comm_link links[2] = {{0}, {0}};
        px_comm_spec s = {.name = "staged", .rank = r, .n = 2, .data_bytes = TS_DATA,
                          .nsig = TS_NSIG, .pairs = pairs, .links = links, .timeout_s = 5};

        links[r].window = t->win[r].obj;
        links[1 - r] = (comm_link){.shared = t->pair.obj, .shared_bytes = pb,
                                   .bell = &t->bell[1 - r]};
        PX_ASSERT_OK(comm_build(&t->comm[r], &s));
    }
    t->b = comm_stg_bounds_of(&t->comm[0], TS_CHUNK);
    assert_int_equal(t->b.head_bytes, px_comm_area_bytes(2, TS_NSIG));
    assert_int_equal(t->b.win_bytes, TS_DATA + 2 * (size_t)PX_COMM_SLOT_BYTES);
    assert_int_equal(t->b.nslots, 2 * 2 + TS_NSIG); /* barrier, user, collective slots */
    assert_true(t->b.head_bytes > TS_CHUNK); /* so a head-long copy leaves the chunk */
}

static void ts_fini(ts_pair *t)
{
    for (int r = 0; r < 2; r++) {
        comm_fini(&t->comm[r]);
        ts_region_unmap(&t->win[r]);
    }
    ts_region_unmap(&t->pair);
}

/* The ring that carries requests of rank `from` to the other rank. */
static comm_stg_ring *ts_ring(ts_pair *t, int from)
{
    return comm_stg_ring_at(t->pair.obj, TS_CHUNK, from);
}

/* Writes rq into from's outgoing ring as its next request (as the requester would, all but
 * the checks). Returns the request's number. */
static uint32_t ts_inject(ts_pair *t, int from, const comm_stg_req *rq)
{
    comm_stg_ring *r = ts_ring(t, from);
    uint32_t h = atomic_load(&r->head);
    comm_stg_req *q = &r->req[h % COMM_STG_SLOTS];

    memcpy((char *)q + sizeof(q->seq), (const char *)rq + sizeof(rq->seq),
           sizeof(*q) - sizeof(q->seq));
    atomic_store(&q->seq, h + 1);
    atomic_store(&r->head, h + 1);
    return h;
}

/* Byte offset of from's ring's done word in the pair. */
static size_t ts_done_off(ts_pair *t, int from)
{
    return (size_t)((char *)&ts_ring(t, from)->done - t->pair.obj);
}

/* Posts malformed rq from `from` and has the other rank poll: it must be skipped, counted,
 * and change nothing but the ring's done count. */
static void ts_expect_skipped(ts_pair *t, int from, const comm_stg_req *rq, const char *what)
{
    int to = 1 - from;
    uint32_t skipped = comm_stg_skipped(&t->comm[to], from), h;
    comm_stg_op op;
    long at;
    char where[64];

    h = ts_inject(t, from, rq);
    ts_snap(t);
    assert_int_equal(comm_stg_decode(&ts_ring(t, from)->req[h % COMM_STG_SLOTS], &t->b, &op),
                     0);
    assert_int_equal(comm_progress_all(&t->comm[to]), 1);
    assert_int_equal(atomic_load(&ts_ring(t, from)->done), h + 1);
    ts_allow(&t->pair, ts_done_off(t, from), sizeof(uint32_t));
    if ((at = ts_changed(&t->pair)) >= 0)
        fail_msg("%s (request %u, rank %d -> %d): staging memory changed %s", what, h, from, to,
                 ts_where(&t->pair, at, where, sizeof(where)));
    for (int r = 0; r < 2; r++)
        if ((at = ts_changed(&t->win[r])) >= 0)
            fail_msg("%s (request %u, rank %d -> %d): rank %d's window changed %s", what, h,
                     from, to, r, ts_where(&t->win[r], at, where, sizeof(where)));
    if (comm_stg_skipped(&t->comm[to], from) != skipped + 1)
        fail_msg("%s (request %u, rank %d -> %d): not counted as skipped", what, h, from, to);
}

/* Puts the ring of `from` at request number n (nothing in flight). */
static void ts_ring_at_number(ts_pair *t, int from, uint32_t n)
{
    atomic_store(&ts_ring(t, from)->head, n);
    atomic_store(&ts_ring(t, from)->done, n);
}

/* The issue's request, from either side: an inline GET_HEAD as long as the head, in the
 * ring's last slot. */
static void test_issue_get_head_inline(void **state)
{
    (void)state;
    for (int from = 0; from < 2; from++) {
        ts_pair t;
        comm_stg_req rq = {.op = COMM_STG_GET_HEAD, .inl = 1, .off = 0};

        ts_init(&t);
        rq.n = t.b.head_bytes;
        ts_ring_at_number(&t, from, COMM_STG_SLOTS - 1);
        ts_expect_skipped(&t, from, &rq, "inline GET_HEAD of the whole head");
        ts_fini(&t);
    }
}

/* Every other way a field can be wrong, each in every slot position of both rings. */
static void test_malformed_requests(void **state)
{
    ts_pair t;
    size_t hb, wb, ch;
    uint32_t ns;

    (void)state;
    ts_init(&t);
    hb = t.b.head_bytes;
    wb = t.b.win_bytes;
    ch = t.b.chunk;
    ns = t.b.nslots;
    {
        const struct {
            const char *what;
            comm_stg_req rq;
        } cases[] = {
            {"inline GET_HEAD, one chunk + 1", {.op = COMM_STG_GET_HEAD, .inl = 1, .n = ch + 1}},
            {"inline GET_HEAD, 8 bytes", {.op = COMM_STG_GET_HEAD, .inl = 1, .n = 8}},
            {"GET_HEAD past the head", {.op = COMM_STG_GET_HEAD, .off = hb - 8, .n = 16}},
            {"GET_HEAD offset + length overflows",
             {.op = COMM_STG_GET_HEAD, .off = UINT64_MAX - 7, .n = 16}},
            {"GET_HEAD longer than the chunk", {.op = COMM_STG_GET_HEAD, .off = 64, .n = ch}},
            {"GET_HEAD at the chunk's end", {.op = COMM_STG_GET_HEAD, .off = 4095, .n = ch}},
            {"GET longer than the chunk", {.op = COMM_STG_GET, .n = ch + 1}},
            {"GET past the window", {.op = COMM_STG_GET, .off = wb - 8, .n = 16}},
            {"GET at an offset past the window", {.op = COMM_STG_GET, .off = wb + 4096, .n = 0}},
            {"GET offset + length overflows", {.op = COMM_STG_GET, .off = UINT64_MAX, .n = 2}},
            {"inline GET", {.op = COMM_STG_GET, .inl = 1, .n = 8}},
            {"GET with the signal flag", {.op = COMM_STG_GET, .flags = COMM_STG_F_SIGNAL, .n = 8,
                                          .slot = 1, .v = 5}},
            {"PUT past the window", {.op = COMM_STG_PUT, .off = wb - 8, .n = 16}},
            {"inline PUT past the window", {.op = COMM_STG_PUT, .inl = 1, .off = wb - 8, .n = 16}},
            {"inline PUT of 25 bytes", {.op = COMM_STG_PUT, .inl = 1, .n = COMM_STG_INLINE + 1}},
            {"inline PUT of 2^63 bytes", {.op = COMM_STG_PUT, .inl = 1, .n = 1ull << 63}},
            {"PUT with inl 2", {.op = COMM_STG_PUT, .inl = 2, .n = 8}},
            {"inline PUT offset + length overflows",
             {.op = COMM_STG_PUT, .inl = 1, .off = UINT64_MAX - 3, .n = 8}},
            {"PUT longer than the chunk", {.op = COMM_STG_PUT, .off = 100, .n = ch - 99}},
            {"PUT with its signal's slot out of range",
             {.op = COMM_STG_PUT, .inl = 1, .n = 8, .flags = COMM_STG_F_SIGNAL, .slot = ns,
              .v = 1}},
            {"PUT with its signal's op unknown",
             {.op = COMM_STG_PUT, .inl = 1, .n = 8, .flags = COMM_STG_F_SIGNAL, .slot = 64,
              .sigop = 2, .v = 1}},
            {"PUT with unknown flags", {.op = COMM_STG_PUT, .inl = 1, .n = 8, .flags = 2}},
            {"PUT without signal but a value", {.op = COMM_STG_PUT, .inl = 1, .n = 8, .v = 3}},
            {"SIGNAL slot past the signals", {.op = COMM_STG_SIGNAL, .slot = ns, .v = 1}},
            {"SIGNAL slot 2^32 - 1", {.op = COMM_STG_SIGNAL, .slot = UINT32_MAX, .v = 1}},
            {"SIGNAL op unknown", {.op = COMM_STG_SIGNAL, .slot = 3, .sigop = 9, .v = 1}},
            {"SIGNAL with inline bytes", {.op = COMM_STG_SIGNAL, .inl = 1, .n = 8, .slot = 3,
                                          .v = 1}},
            {"SIGNAL with a length", {.op = COMM_STG_SIGNAL, .n = 8, .slot = 3, .v = 1}},
            {"SIGNAL with flags", {.op = COMM_STG_SIGNAL, .flags = 1, .slot = 3, .v = 1}},
            {"opcode 0", {.op = 0, .n = 8}},
            {"opcode 5", {.op = 5, .n = 8}},
            {"opcode 255", {.op = 255, .slot = 3, .v = 1}},
        };
        int ncases = (int)(sizeof(cases) / sizeof(cases[0]));

        /* 2 x ncases requests per ring: every case meets more than one slot */
        for (int k = 0; k < 2 * ncases; k++)
            for (int from = 0; from < 2; from++)
                ts_expect_skipped(&t, from, &cases[k % ncases].rq, cases[k % ncases].what);
        assert_int_equal(comm_stg_skipped(&t.comm[0], 1), 2 * ncases);
        assert_int_equal(comm_stg_skipped(&t.comm[1], 0), 2 * ncases);
    }
    ts_fini(&t);
}

/* Posts well-formed rq from `from`; the poll carries it out, changing only bytes [win_off,
 * win_off + win_n) of the target's window, the ring's done count and bytes [pair_off,
 * pair_off + pair_n) of the staging memory (a get's chunk). */
static void ts_expect_done(ts_pair *t, int from, const comm_stg_req *rq, size_t win_off,
                           size_t win_n, size_t pair_off, size_t pair_n)
{
    int to = 1 - from;
    long at;
    char where[64];

    (void)ts_inject(t, from, rq);
    ts_snap(t);
    assert_int_equal(comm_progress_all(&t->comm[to]), 1);
    assert_int_equal(comm_stg_skipped(&t->comm[to], from), 0);
    ts_allow(&t->win[to], win_off, win_n);
    ts_allow(&t->pair, ts_done_off(t, from), sizeof(uint32_t));
    ts_allow(&t->pair, pair_off, pair_n);
    for (int r = 0; r < 2; r++)
        if ((at = ts_changed(&t->win[r])) >= 0)
            fail_msg("op %d: rank %d's window changed %s", rq->op, r,
                     ts_where(&t->win[r], at, where, sizeof(where)));
    if ((at = ts_changed(&t->pair)) >= 0)
        fail_msg("op %d: staging memory changed %s", rq->op,
                 ts_where(&t->pair, at, where, sizeof(where)));
}

/* Well-formed requests around the bounds are carried out, exactly. */
static void test_wellformed_requests(void **state)
{
    ts_pair t;
    size_t ab = px_comm_area_bytes(2, TS_NSIG), wb, hb;

    (void)state;
    ts_init(&t);
    wb = t.b.win_bytes;
    hb = t.b.head_bytes;
    for (int from = 0; from < 2; from++) {
        comm_stg_ring *r = ts_ring(&t, from);
        char *chunks = (char *)r + COMM_STG_HEAD_BYTES;
        size_t coff = (size_t)(chunks - t.pair.obj);
        comm_stg_req put = {.op = COMM_STG_PUT, .inl = 1, .off = wb - 8, .n = 8,
                            .data = {1, 2, 3, 4, 5, 6, 7, 8}};
        comm_stg_req sig = {.op = COMM_STG_SIGNAL, .slot = t.b.nslots - 1,
                            .sigop = PX_SIG_ADD, .v = 7};
        comm_stg_req get = {.op = COMM_STG_GET, .off = wb - 100, .n = 100};
        comm_stg_req gh = {.op = COMM_STG_GET_HEAD, .off = hb - 64, .n = 64};
        size_t slot_off = (size_t)((char *)comm_slot((px_comm_area *)t.win[0].obj, 2,
                                                     t.b.nslots - 1) - t.win[0].obj);
        uint32_t h;
        char *slot_chunk;

        ts_expect_done(&t, from, &put, ab + wb - 8, 8, 0, 0);
        assert_memory_equal(t.win[1 - from].obj + ab + wb - 8, put.data, 8);
        ts_expect_done(&t, from, &sig, slot_off, 8, 0, 0);
        assert_int_equal(atomic_load(comm_slot((px_comm_area *)t.win[1 - from].obj, 2,
                                               t.b.nslots - 1)), 7);
        /* gets write the request's chunk at the bytes' page offset */
        h = atomic_load(&r->head);
        slot_chunk = chunks + (size_t)(h % COMM_STG_SLOTS) * TS_CHUNK;
        ts_expect_done(&t, from, &get, 0, 0, coff + (size_t)(h % COMM_STG_SLOTS) * TS_CHUNK +
                                                 (wb - 100) % 4096, 100);
        assert_memory_equal(slot_chunk + (wb - 100) % 4096, t.win[1 - from].obj + ab + wb - 100,
                            100);
        h = atomic_load(&r->head);
        slot_chunk = chunks + (size_t)(h % COMM_STG_SLOTS) * TS_CHUNK;
        ts_expect_done(&t, from, &gh, 0, 0, coff + (size_t)(h % COMM_STG_SLOTS) * TS_CHUNK +
                                                (hb - 64) % 4096, 64);
        assert_memory_equal(slot_chunk + (hb - 64) % 4096, t.win[1 - from].obj + hb - 64, 64);
    }
    /* and through the transport's own calls: a put of two chunks with its signal */
    {
        size_t n = TS_DATA, i;
        char *src = malloc(n);

        assert_non_null(src);
        for (i = 0; i < n; i++)
            src[i] = (char)(i ^ 0x5a);
        PX_ASSERT_OK(px_comm_tl_staged.put_signal(&t.comm[0], 1, 0, src, n,
                                                  PX_COMM_SLOT_SIG(2, 5), PX_SIG_SET, 99));
        while (comm_progress_all(&t.comm[1]) > 0)
            ;
        assert_memory_equal(t.win[1].obj + ab, src, n);
        assert_int_equal(atomic_load(comm_slot((px_comm_area *)t.win[1].obj, 2,
                                               PX_COMM_SLOT_SIG(2, 5))), 99);
        assert_int_equal(comm_stg_skipped(&t.comm[1], 0), 0);
        free(src);
    }
    ts_fini(&t);
}

/* comm_build over a staged pair of `bytes` bytes at pair: its status. */
static px_status ts_build(px_comm *c, void *win, void *pair, size_t bytes, comm_bell *bell)
{
    /* the domain's pair table: the one pair is staged */
    static const uint8_t pairs[4] = {PX_COMM_TL_DIRECT, PX_COMM_TL_STAGED, PX_COMM_TL_STAGED,
                                     PX_COMM_TL_DIRECT};
    comm_link links[2] = {{.shared = pair, .shared_bytes = bytes, .bell = bell},
                          {.window = win}};
    px_comm_spec s = {.name = "staged", .rank = 1, .n = 2, .data_bytes = TS_DATA,
                      .nsig = TS_NSIG, .pairs = pairs, .links = links, .timeout_s = 5};

    return comm_build(c, &s);
}

/* A pair whose header does not describe the bytes mapped is refused at connect. */
static void test_connect_checks_header(void **state)
{
    size_t pb = comm_stg_pair_bytes(TS_CHUNK);
    px_comm c;
    comm_bell bell = {0};
    comm_link again;
    char *pair = calloc(1, pb);
    void *win;

    (void)state;
    assert_non_null(pair);
    win = calloc(1, px_comm_window_bytes(2, TS_NSIG, TS_DATA));
    assert_non_null(win);
    /* not formatted */
    assert_int_equal(ts_build(&c, win, pair, pb, &bell), PX_EINVAL);
    comm_stg_pair_init(pair, TS_CHUNK);
    /* formatted for another size than mapped */
    assert_int_equal(ts_build(&c, win, pair, comm_stg_pair_bytes(2 * TS_CHUNK), &bell),
                     PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "not formatted for its size"));
    assert_int_equal(ts_build(&c, win, pair, pb - 4096, &bell), PX_EINVAL);
    /* a chunk that would put the rings past the mapping */
    ((comm_stg_ring *)pair)->chunk = 1u << 30;
    assert_int_equal(ts_build(&c, win, pair, pb, &bell), PX_EINVAL);
    ((comm_stg_ring *)pair)->chunk = TS_CHUNK + 1;
    assert_int_equal(ts_build(&c, win, pair, pb, &bell), PX_EINVAL);
    ((comm_stg_ring *)pair)->chunk = TS_CHUNK;
    /* the second ring's header disagrees */
    comm_stg_ring_at(pair, TS_CHUNK, 1)->chunk = TS_CHUNK / 2;
    assert_int_equal(ts_build(&c, win, pair, pb, &bell), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "rings of different formats"));
    comm_stg_ring_at(pair, TS_CHUNK, 1)->chunk = TS_CHUNK;
    /* no doorbell */
    assert_int_equal(ts_build(&c, win, pair, pb, NULL), PX_EINVAL);
    PX_ASSERT_OK(ts_build(&c, win, pair, pb, &bell));
    /* twice */
    again = (comm_link){.shared = pair, .shared_bytes = pb, .bell = &bell};
    assert_int_equal(px_comm_tl_staged.connect(&c, 0, &again), PX_EINVAL);
    comm_fini(&c);
    free(win);
    free(pair);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_issue_get_head_inline),
        cmocka_unit_test(test_malformed_requests),
        cmocka_unit_test(test_wellformed_requests),
        cmocka_unit_test(test_connect_checks_header),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
