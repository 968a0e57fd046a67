/*
 * fuzz_stgreq.c - fuzzes the staged transport's request decoder (comm_stg_decode in
 * src/comm/transport/staged.c) and the target's side that carries requests out, as a buggy
 * or hostile peer would drive them: through a real staging pair.
 *
 * The input: byte 0 chooses the target rank (bit 0) and the chunk (bits 1-2: 16, 32, 64 or
 * 128 KiB); byte 1 the target's signal count (bits 0-2, of 0 .. 4096); byte 2 its data bytes
 * (bits 0-2, of 0 .. 192 KiB + 3); byte 3 the ring's first request number; the rest is up to
 * 64 request lines of 64 bytes (the last one padded with zeros), written into the peer's
 * outgoing ring in batches of COMM_STG_SLOTS, each made ready (its seq word) and then carried
 * out by the target's progress (comm_progress_all). The window and the pair are exactly as large as they
 * should be, so the sanitizers see a byte read or written past them; and every byte of both
 * is compared with a copy: a request the decoder refuses must change nothing, a request it
 * accepts only what it says (a put's bytes, a signal's slot, a get's bytes in its chunk), and
 * the ring only its done count. The skipped count must match the decoder's refusals. The
 * pairs (one per chunk size, exactly as large as the chunk says) and their copies are made
 * once; an input formats its pair's headers afresh, and the copy equals the pair after every
 * batch, so only the headers need copying before the next.
 */
#include "fuzz.h"

#include <string.h>

#include "comm/transport/staged.h"
#include "util/log.h"
#include "util/util.h"

#define FZ_MAX_REQS 64

static const size_t fz_chunks[4] = {16u << 10, 32u << 10, 64u << 10, 128u << 10};
static const uint32_t fz_nsigs[8] = {0, 1, 7, 16, 64, 500, 1024, 4096};
static const size_t fz_data[8] = {0, 64, 4096, 8192, 4099, 65536, 131072, 196611};

/* Marks bytes [off, off + n) of an object and its copy equal (a change allowed there). */
static void fz_allow(char *copy, const char *obj, size_t off, size_t n)
{
    memcpy(copy + off, obj + off, n);
}

/* The pair for chunk size i and its copy, made once (exactly comm_stg_pair_bytes large). */
static int fz_pair(int i, char **pair, char **copy)
{
    static char *pairs[4], *copies[4];
    size_t pbytes = comm_stg_pair_bytes(fz_chunks[i]);

    if (pairs[i] == NULL) {
        pairs[i] = calloc(1, pbytes);
        copies[i] = malloc(pbytes);
        if (pairs[i] == NULL || copies[i] == NULL) {
            free(pairs[i]);
            free(copies[i]);
            pairs[i] = copies[i] = NULL;
            return -1;
        }
        memcpy(copies[i], pairs[i], pbytes);
    }
    /* the headers zeroed and formatted; chunks keep what earlier inputs left there */
    memset(pairs[i], 0, COMM_STG_HEAD_BYTES);
    memset(comm_stg_ring_at(pairs[i], fz_chunks[i], 1), 0, COMM_STG_HEAD_BYTES);
    comm_stg_pair_init(pairs[i], fz_chunks[i]);
    *pair = pairs[i];
    *copy = copies[i];
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the domain's pair table: the one pair is staged */
    static const uint8_t pairs[4] = {PX_COMM_TL_DIRECT, PX_COMM_TL_STAGED, PX_COMM_TL_STAGED,
                                     PX_COMM_TL_DIRECT};
    size_t chunk, dbytes, wbytes, pbytes, ab, nreq;
    uint32_t nsig, first, skipped = 0;
    int to, from;
    char *win = NULL, *pair = NULL, *wcopy = NULL, *pcopy = NULL;
    comm_link links[2];
    comm_bell bell = {0};
    comm_stg_bounds b;
    comm_stg_ring *r;
    px_comm c;

    if (size < 4)
        return 0;
    px_log_set_level(PX_LOG_ERROR); /* comm_fini warns of every skipped request */
    to = data[0] & 1;
    from = 1 - to;
    chunk = fz_chunks[data[0] >> 1 & 3];
    nsig = fz_nsigs[data[1] & 7];
    dbytes = fz_data[data[2] & 7];
    first = (uint32_t)data[3] * 0x01010101u; /* any place in the ring, near wrap too */
    nreq = PX_MIN((size - 4 + 63) / 64, (size_t)FZ_MAX_REQS);
    wbytes = px_comm_window_bytes(2, nsig, dbytes);
    pbytes = comm_stg_pair_bytes(chunk);
    ab = px_comm_area_bytes(2, nsig);
    win = calloc(1, wbytes);
    wcopy = malloc(wbytes);
    if (win == NULL || wcopy == NULL || fz_pair(data[0] >> 1 & 3, &pair, &pcopy) != 0)
        goto out;
    for (size_t i = ab; i < wbytes; i++)
        win[i] = (char)(i * 13);
    {
        px_comm_spec s = {.name = "fuzz", .rank = to, .n = 2, .data_bytes = dbytes,
                          .nsig = nsig, .pairs = pairs, .links = links, .timeout_s = 1};

        memset(links, 0, sizeof(links));
        links[to].window = win;
        links[from] = (comm_link){.shared = pair, .shared_bytes = pbytes, .bell = &bell};
        FUZZ_CHECK(comm_build(&c, &s) == PX_OK);
    }
    b = comm_stg_bounds_of(&c, chunk);
    r = comm_stg_ring_at(pair, chunk, from);
    atomic_store(&r->head, first);
    atomic_store(&r->done, first);
    for (size_t k = 0; k < nreq;) {
        size_t batch = PX_MIN(nreq - k, (size_t)COMM_STG_SLOTS);
        uint32_t h = first + (uint32_t)k, bad = 0;
        comm_stg_op op[COMM_STG_SLOTS];
        int ok[COMM_STG_SLOTS];

        for (size_t j = 0; j < batch; j++) {
            comm_stg_req *q = &r->req[(h + j) % COMM_STG_SLOTS];
            size_t at = 4 + (k + j) * 64, len = at < size ? PX_MIN(size - at, (size_t)64) : 0;

            memset(q, 0, sizeof(*q));
            memcpy(q, data + at, len);
            ok[j] = comm_stg_decode(q, &b, &op[j]);
            bad += !ok[j];
            atomic_store(&q->seq, h + (uint32_t)j + 1);
        }
        atomic_store(&r->head, h + (uint32_t)batch);
        memcpy(wcopy, win, wbytes);
        /* the copy is the pair but for the headers this input wrote (chunks: invariant) */
        for (int i = 0; i < 2; i++) {
            size_t h0 = (size_t)((char *)comm_stg_ring_at(pair, chunk, i) - pair);

            memcpy(pcopy + h0, pair + h0, COMM_STG_HEAD_BYTES);
        }
        FUZZ_CHECK(comm_progress_all(&c) == (int)batch);
        FUZZ_CHECK(atomic_load(&r->done) == h + (uint32_t)batch);
        skipped += bad;
        FUZZ_CHECK(comm_stg_skipped(&c, from) == skipped);
        /* what the accepted requests may change, in order */
        fz_allow(pcopy, pair, (size_t)((char *)&r->done - pair), sizeof(uint32_t));
        for (size_t j = 0; j < batch; j++) {
            size_t ck = (size_t)((char *)r + COMM_STG_HEAD_BYTES - pair) +
                        (size_t)((h + j) % COMM_STG_SLOTS) * chunk;

            if (!ok[j])
                continue;
            FUZZ_CHECK(op[j].off + op[j].n >= op[j].off);
            if (op[j].op == COMM_STG_GET || op[j].op == COMM_STG_GET_HEAD) {
                FUZZ_CHECK(op[j].at + op[j].n <= chunk);
                FUZZ_CHECK(op[j].off + op[j].n <=
                           (op[j].op == COMM_STG_GET ? b.win_bytes : b.head_bytes));
                fz_allow(pcopy, pair, ck + op[j].at, op[j].n);
            }
            if (op[j].op == COMM_STG_PUT) {
                FUZZ_CHECK(op[j].off + op[j].n <= b.win_bytes);
                FUZZ_CHECK(op[j].inl ? op[j].n <= COMM_STG_INLINE : op[j].at + op[j].n <= chunk);
                fz_allow(wcopy, win, ab + op[j].off, op[j].n);
            }
            if (op[j].signal) {
                FUZZ_CHECK(op[j].slot < b.nslots);
                fz_allow(wcopy, win, (size_t)((char *)comm_slot((px_comm_area *)win, 2,
                                                                op[j].slot) - win), 8);
            }
        }
        FUZZ_CHECK(memcmp(wcopy, win, wbytes) == 0);
        FUZZ_CHECK(memcmp(pcopy, pair, pbytes) == 0); /* the copy stays equal to the pair */
        k += batch;
    }
    comm_fini(&c);
out:
    free(win);
    free(wcopy);
    return 0;
}
