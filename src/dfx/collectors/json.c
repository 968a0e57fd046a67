/*
 * json.c - plexus's one JSON reader (json.h): recursive descent over the text, one node per
 * value. Errors name line and column.
 *
 * DFX files reach a hundred megabytes (trace.json of a 100k-task run), so the reader is
 * built for volume: nodes and strings come from an arena that is freed at once, a
 * container's children are gathered on a scratch stack and copied into the arena once, at
 * their final size, and numbers that fit a double exactly take a fast path that gives the
 * same value strtod would. dfxc_json_load_each() hands the elements of the top-level arrays
 * over one at a time and reuses their memory, so reading back a big file takes little.
 */
#include "dfx/collectors/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfx/collectors/out.h"

#define DFXC_JSON_DEPTH 64
#define DFXC_JBLOCK ((size_t)256 << 10) /* arena block bytes */

/* ---- arena ---- */

typedef struct dfxc_jblk {
    struct dfxc_jblk *next;
    size_t used, cap;
    alignas(max_align_t) char mem[];
} dfxc_jblk;

typedef struct dfxc_jarena {
    dfxc_jblk *cur;   /* the block small allocations come from */
    dfxc_jblk *other; /* full blocks and blocks of single large allocations */
} dfxc_jarena;

/* A parsed document: the root node first, so a root pointer is the document's pointer. */
typedef struct dfxc_jdoc {
    dfxc_json root;
    dfxc_jarena arena;
} dfxc_jdoc;

/* Frees every block of a. */
static void dfxc_jarena_free(dfxc_jarena *a)
{
    dfxc_jblk *lists[2] = {a->cur, a->other};

    for (int i = 0; i < 2; i++)
        while (lists[i] != NULL) {
            dfxc_jblk *next = lists[i]->next;

            free(lists[i]);
            lists[i] = next;
        }
    memset(a, 0, sizeof(*a));
}

/* Empties a but keeps its current block for reuse. */
static void dfxc_jarena_reset(dfxc_jarena *a)
{
    dfxc_jblk *keep = a->cur;

    if (keep != NULL)
        a->cur = keep->next;
    dfxc_jarena_free(a);
    if (keep != NULL) {
        keep->next = NULL;
        keep->used = 0;
        a->cur = keep;
    }
}

/* Returns n bytes (aligned for any node) from a, or NULL when out of memory. */
static void *dfxc_jarena_alloc(dfxc_jarena *a, size_t n)
{
    dfxc_jblk *b;

    n = (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
    if (a->cur != NULL && a->cur->cap - a->cur->used >= n) {
        void *p = a->cur->mem + a->cur->used;

        a->cur->used += n;
        return p;
    }
    b = malloc(sizeof(*b) + PX_MAX(n, DFXC_JBLOCK));
    if (b == NULL)
        return NULL;
    b->cap = PX_MAX(n, DFXC_JBLOCK);
    b->used = n;
    if (n >= DFXC_JBLOCK / 2 && a->cur != NULL) { /* a large one: keep the current block */
        b->next = a->other;
        a->other = b;
    } else {
        if (a->cur != NULL) {
            a->cur->next = a->other;
            a->other = a->cur;
        }
        b->next = NULL;
        a->cur = b;
    }
    return b->mem;
}

/* ---- parser ---- */

typedef struct dfxc_jp {
    const char *s, *p, *end;
    const char *what;
    int depth;
    px_status st;       /* first error */
    dfxc_jarena *arena; /* where nodes and strings go now */
    dfxc_jarena elem;   /* for one streamed element at a time */
    dfxc_json *stk;     /* children of the open containers */
    size_t nstk, capstk;
    dfxc_buf esc;       /* a string with escapes while it is decoded */
    dfxc_json_each_cb each;
    void *ctx;
} dfxc_jp;

static int dfxc_jp_value(dfxc_jp *jp, dfxc_json *out);

/* Records the first error at the current position; returns -1. */
static int dfxc_jp_fail(dfxc_jp *jp, px_status st, const char *expected)
{
    int line = 1, col = 1;

    if (jp->st != PX_OK)
        return -1;
    for (const char *c = jp->s; c < jp->p && c < jp->end; c++) {
        col = *c == '\n' ? 1 : col + 1;
        line += *c == '\n';
    }
    jp->st = st == PX_ENOMEM
                 ? px_set_error(st, "%s: out of memory while parsing JSON", jp->what)
                 : px_set_error(st, "%s: invalid JSON at line %d column %d: expected %s", jp->what,
                                line, col, expected);
    return -1;
}

static void dfxc_jp_ws(dfxc_jp *jp)
{
    while (jp->p < jp->end && (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r'))
        jp->p++;
}

/* Consumes the literal word w; returns 1 when it was there. */
static int dfxc_jp_word(dfxc_jp *jp, const char *w)
{
    size_t n = strlen(w);

    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, w, n) != 0)
        return 0;
    jp->p += n;
    return 1;
}

/* Reads 4 hex digits; returns the value or -1. */
static long dfxc_jp_hex4(dfxc_jp *jp)
{
    long v = 0;

    if (jp->end - jp->p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char c = *jp->p++;

        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

/* Appends code point cp as UTF-8. */
static void dfxc_utf8(dfxc_buf *b, unsigned long cp)
{
    unsigned char u[4];
    size_t n;

    if (cp < 0x80) {
        u[0] = (unsigned char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xc0 | cp >> 6), u[1] = (unsigned char)(0x80 | (cp & 63)), n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xe0 | cp >> 12), u[1] = (unsigned char)(0x80 | (cp >> 6 & 63));
        u[2] = (unsigned char)(0x80 | (cp & 63)), n = 3;
    } else {
        u[0] = (unsigned char)(0xf0 | cp >> 18), u[1] = (unsigned char)(0x80 | (cp >> 12 & 63));
        u[2] = (unsigned char)(0x80 | (cp >> 6 & 63)), u[3] = (unsigned char)(0x80 | (cp & 63));
        n = 4;
    }
    dfxc_buf_put(b, u, n);
}

/* Decodes a \u escape (the "\u" already consumed) into b; returns 0 or -1. */
static int dfxc_jp_uescape(dfxc_jp *jp, dfxc_buf *b)
{
    long hi = dfxc_jp_hex4(jp), lo;

    if (hi < 0)
        return -1;
    if (hi >= 0xd800 && hi < 0xdc00) {
        if (!dfxc_jp_word(jp, "\\u") || (lo = dfxc_jp_hex4(jp)) < 0xdc00 || lo >= 0xe000)
            return -1;
        dfxc_utf8(b, 0x10000 + (((unsigned long)hi - 0xd800) << 10) + ((unsigned long)lo - 0xdc00));
        return 0;
    }
    if (hi >= 0xdc00 && hi < 0xe000)
        return -1;
    dfxc_utf8(b, (unsigned long)hi);
    return 0;
}

/* Decodes one escape after a backslash into b; returns 0 or -1. */
static int dfxc_jp_escape(dfxc_jp *jp, dfxc_buf *b)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k;

    if (jp->p >= jp->end)
        return -1;
    if (*jp->p == 'u') {
        jp->p++;
        return dfxc_jp_uescape(jp, b);
    }
    k = strchr(from, *jp->p);
    if (k == NULL || *jp->p == '\0')
        return -1;
    dfxc_buf_put(b, &to[k - from], 1);
    jp->p++;
    return 0;
}

/* Copies n bytes at p into the arena as a string; returns it or NULL (out of memory). */
static char *dfxc_jp_copy(dfxc_jp *jp, const char *p, size_t n)
{
    char *s = dfxc_jarena_alloc(jp->arena, n + 1);

    if (s == NULL) {
        dfxc_jp_fail(jp, PX_ENOMEM, "");
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* Parses a string with escapes (at its opening quote); returns it or NULL on error. */
static char *dfxc_jp_escaped(dfxc_jp *jp)
{
    dfxc_buf *b = &jp->esc;

    b->len = 0;
    dfxc_buf_put(b, "", 0);
    jp->p++;
    while (jp->p < jp->end && *jp->p != '"') {
        unsigned char c = (unsigned char)*jp->p;

        if (c < 0x20)
            break;
        if (c == '\\') {
            jp->p++;
            if (dfxc_jp_escape(jp, b) != 0)
                break;
            continue;
        }
        dfxc_buf_put(b, jp->p++, 1);
    }
    if (jp->p >= jp->end || *jp->p != '"' || b->oom) {
        dfxc_jp_fail(jp, b->oom ? PX_ENOMEM : PX_EINVAL, "a valid string");
        return NULL;
    }
    jp->p++;
    return dfxc_jp_copy(jp, b->p, b->len);
}

/* Parses a string (at its opening quote); returns it (in the arena) or NULL on error. */
static char *dfxc_jp_string(dfxc_jp *jp)
{
    const char *q = jp->p + 1;
    char *s;

    while (q < jp->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        q++;
    if (q >= jp->end || *q != '"')
        return dfxc_jp_escaped(jp);
    s = dfxc_jp_copy(jp, jp->p + 1, (size_t)(q - jp->p - 1));
    jp->p = q + 1;
    return s;
}

/*
 * The value of the number text [p, q) without strtod when its digits fit 2^53 and its
 * decimal exponent is at most 22: then mantissa and power of ten are exact doubles and one
 * IEEE multiplication or division rounds correctly, as strtod does. Returns 1 with *v, or 0.
 */
static int dfxc_jp_fast_number(const char *p, const char *q, double *v)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    uint64_t m = 0;
    int neg = *p == '-', frac = 0, digits = 0, dot = 0;

    for (p += neg; p < q; p++) {
        if (*p == '.') {
            dot = 1;
            continue;
        }
        if (*p < '0' || *p > '9' || ++digits > 15)
            return 0; /* an exponent, or more digits than the fast path keeps exact */
        m = m * 10 + (uint64_t)(*p - '0');
        frac += dot;
    }
    *v = frac ? (double)m / p10[frac] : (double)m;
    if (neg)
        *v = -*v;
    return 1;
}

/* Parses a number in JSON's grammar; returns 0 or -1. */
static int dfxc_jp_number(dfxc_jp *jp, dfxc_json *out)
{
    const char *q = jp->p;
    char tmp[64];

    if (q < jp->end && *q == '-')
        q++;
    if (q < jp->end && *q == '0')
        q++;
    else if (q < jp->end && *q >= '1' && *q <= '9')
        while (q < jp->end && *q >= '0' && *q <= '9')
            q++;
    else
        return dfxc_jp_fail(jp, PX_EINVAL, "a value");
    if (q < jp->end && *q == '.') {
        if (++q >= jp->end || *q < '0' || *q > '9')
            return dfxc_jp_fail(jp, PX_EINVAL, "a digit after '.'");
        while (q < jp->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < jp->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < jp->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= jp->end || *q < '0' || *q > '9')
            return dfxc_jp_fail(jp, PX_EINVAL, "a digit in the exponent");
        while (q < jp->end && *q >= '0' && *q <= '9')
            q++;
    }
    if ((size_t)(q - jp->p) >= sizeof(tmp))
        return dfxc_jp_fail(jp, PX_EINVAL, "a number shorter than 64 characters");
    out->type = DFXC_JNUM;
    if (!dfxc_jp_fast_number(jp->p, q, &out->num)) {
        memcpy(tmp, jp->p, (size_t)(q - jp->p));
        tmp[q - jp->p] = '\0';
        out->num = strtod(tmp, NULL);
    }
    jp->p = q;
    return 0;
}

/* Pushes a finished child onto the scratch stack; returns 0 or -1 (out of memory). */
static int dfxc_jp_push(dfxc_jp *jp, const dfxc_json *kid)
{
    if (jp->nstk == jp->capstk) {
        size_t c = jp->capstk ? jp->capstk * 2 : 256;
        dfxc_json *k = realloc(jp->stk, c * sizeof(*k));

        if (k == NULL)
            return dfxc_jp_fail(jp, PX_ENOMEM, "");
        jp->stk = k;
        jp->capstk = c;
    }
    jp->stk[jp->nstk++] = *kid;
    return 0;
}

/* Moves the children above stack index base into out (in the arena); returns 0 or -1. */
static int dfxc_jp_settle(dfxc_jp *jp, dfxc_json *out, size_t base)
{
    out->n = jp->nstk - base;
    if (out->n > 0) {
        out->kids = dfxc_jarena_alloc(jp->arena, out->n * sizeof(*out->kids));
        if (out->kids == NULL)
            return dfxc_jp_fail(jp, PX_ENOMEM, "");
        memcpy(out->kids, jp->stk + base, out->n * sizeof(*out->kids));
    }
    jp->nstk = base;
    return 0;
}

/*
 * Parses the elements of a top-level array member (at '[') one at a time into the element
 * arena and hands each to the callback; out stays an empty array. Returns 0 or -1.
 */
static int dfxc_jp_stream(dfxc_jp *jp, const char *key, dfxc_json *out)
{
    dfxc_jarena *keep = jp->arena;

    out->type = DFXC_JARR;
    jp->p++;
    dfxc_jp_ws(jp);
    if (jp->p < jp->end && *jp->p == ']') {
        jp->p++;
        return 0;
    }
    for (;;) {
        dfxc_json el = {0};
        px_status st;

        jp->arena = &jp->elem;
        if (dfxc_jp_value(jp, &el) != 0) {
            jp->arena = keep;
            return -1;
        }
        jp->arena = keep;
        st = jp->each(jp->ctx, key, &el);
        dfxc_jarena_reset(&jp->elem);
        if (st != PX_OK && jp->st == PX_OK)
            jp->st = st;
        if (st != PX_OK)
            return -1;
        dfxc_jp_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == ']') {
            jp->p++;
            return 0;
        }
        return dfxc_jp_fail(jp, PX_EINVAL, "',' or ']'");
    }
}

/* Parses one member's name and the ':' after it into kid->key; returns 0 or -1. */
static int dfxc_jp_key(dfxc_jp *jp, dfxc_json *kid)
{
    if (jp->p >= jp->end || *jp->p != '"')
        return dfxc_jp_fail(jp, PX_EINVAL, "a member name");
    kid->key = dfxc_jp_string(jp);
    dfxc_jp_ws(jp);
    if (kid->key == NULL || jp->p >= jp->end || *jp->p != ':')
        return dfxc_jp_fail(jp, PX_EINVAL, "':'");
    jp->p++;
    return 0;
}

/* Parses one child of a container into kid (streamed when it is a top-level array). */
static int dfxc_jp_child(dfxc_jp *jp, dfxc_json *kid, int obj)
{
    if (obj && dfxc_jp_key(jp, kid) != 0)
        return -1;
    if (obj && jp->each != NULL && jp->depth == 1) {
        dfxc_jp_ws(jp);
        if (jp->p < jp->end && *jp->p == '[')
            return dfxc_jp_stream(jp, kid->key, kid);
    }
    return dfxc_jp_value(jp, kid);
}

/* Refuses kid when a member before it in the object (the stack above base) has its name. */
static int dfxc_jp_unique(dfxc_jp *jp, const dfxc_json *kid, size_t base)
{
    for (size_t i = base; i < jp->nstk; i++)
        if (strcmp(jp->stk[i].key, kid->key) == 0)
            return dfxc_jp_fail(jp, PX_EINVAL, "a member name not used before in the object");
    return 0;
}

/*
 * Parses the elements of an array or the members of an object (at the opening bracket);
 * returns 0 or -1.
 */
static int dfxc_jp_container(dfxc_jp *jp, dfxc_json *out, int obj)
{
    size_t base = jp->nstk;
    char close = obj ? '}' : ']';

    out->type = obj ? DFXC_JOBJ : DFXC_JARR;
    jp->p++;
    dfxc_jp_ws(jp);
    if (jp->p < jp->end && *jp->p == close) {
        jp->p++;
        return 0;
    }
    for (;;) {
        dfxc_json kid = {0};

        dfxc_jp_ws(jp);
        if (dfxc_jp_child(jp, &kid, obj) != 0 || (obj && dfxc_jp_unique(jp, &kid, base) != 0) ||
            dfxc_jp_push(jp, &kid) != 0)
            return -1;
        dfxc_jp_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == close) {
            jp->p++;
            return dfxc_jp_settle(jp, out, base);
        }
        return dfxc_jp_fail(jp, PX_EINVAL, obj ? "',' or '}'" : "',' or ']'");
    }
}

/* Parses one value into out; returns 0 or -1 (the error is in jp->st). */
static int dfxc_jp_value(dfxc_jp *jp, dfxc_json *out)
{
    const char *start;
    int rc = 0;

    dfxc_jp_ws(jp);
    if (jp->st != PX_OK)
        return -1;
    start = jp->p;
    if (jp->p >= jp->end)
        return dfxc_jp_fail(jp, PX_EINVAL, "a value");
    if (++jp->depth > DFXC_JSON_DEPTH)
        return dfxc_jp_fail(jp, PX_EINVAL, "at most 64 levels of nesting");
    if (*jp->p == '{' || *jp->p == '[') {
        rc = dfxc_jp_container(jp, out, *jp->p == '{');
    } else if (*jp->p == '"') {
        out->type = DFXC_JSTR;
        out->str = dfxc_jp_string(jp);
        rc = out->str ? 0 : -1;
    } else if (dfxc_jp_word(jp, "true")) {
        out->type = DFXC_JBOOL;
        out->num = 1;
    } else if (dfxc_jp_word(jp, "false")) {
        out->type = DFXC_JBOOL;
    } else if (dfxc_jp_word(jp, "null")) {
        out->type = DFXC_JNULL;
    } else {
        rc = dfxc_jp_number(jp, out);
    }
    jp->depth--;
    out->at = (size_t)(start - jp->s);
    out->len = (size_t)(jp->p - start);
    return rc;
}

void dfxc_json_free(dfxc_json *root)
{
    dfxc_jdoc *doc = (dfxc_jdoc *)(void *)root;

    if (root == NULL)
        return;
    dfxc_jarena_free(&doc->arena);
    free(doc);
}

/* Parses text into a new document; each (may be NULL) streams the top-level arrays. */
static px_status dfxc_json_parse_with(const char *text, size_t n, const char *what,
                                      dfxc_json_each_cb each, void *ctx, dfxc_json **root)
{
    dfxc_jp jp = {.s = text, .p = text, .end = text + n, .what = what, .each = each, .ctx = ctx};
    dfxc_jdoc *doc = calloc(1, sizeof(*doc));

    if (doc == NULL)
        return px_set_error(PX_ENOMEM, "%s: out of memory while parsing JSON", what);
    jp.arena = &doc->arena;
    dfxc_buf_init(&jp.esc);
    dfxc_jp_value(&jp, &doc->root);
    dfxc_jp_ws(&jp);
    if (jp.st == PX_OK && jp.p != jp.end)
        dfxc_jp_fail(&jp, PX_EINVAL, "the end of the text after the top-level value");
    dfxc_jarena_free(&jp.elem);
    dfxc_buf_free(&jp.esc);
    free(jp.stk);
    if (jp.st != PX_OK) {
        dfxc_json_free(&doc->root);
        return jp.st;
    }
    *root = &doc->root;
    return PX_OK;
}

px_status dfxc_json_parse(const char *text, size_t n, const char *what, dfxc_json **root)
{
    return dfxc_json_parse_with(text, n, what, NULL, NULL, root);
}

px_status dfxc_json_parse_each(const char *text, size_t n, const char *what,
                               dfxc_json_each_cb each, void *ctx, dfxc_json **root)
{
    return dfxc_json_parse_with(text, n, what, each, ctx, root);
}

/* Reads what is left of fd (a pipe, say) into b. Returns PX_OK, PX_EIO or PX_ENOMEM. */
static px_status dfxc_read_rest(int fd, const char *path, dfxc_buf *b)
{
    char chunk[65536];
    ssize_t got;

    dfxc_buf_put(b, "", 0);
    while ((got = read(fd, chunk, sizeof(chunk))) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return px_set_error(PX_EIO, "cannot read %s: %s", path, strerror(errno));
        dfxc_buf_put(b, chunk, (size_t)got);
    }
    if (b->oom)
        return px_set_error(PX_ENOMEM, "cannot read %s: out of memory", path);
    return PX_OK;
}

/*
 * Maps a regular file read-only (*map = 1; unmap *text, *n) or reads another kind of file
 * into b (*map = 0). Returns PX_OK, PX_ENOENT, PX_EIO or PX_ENOMEM.
 */
static px_status dfxc_open_text(const char *path, const char **text, size_t *n, int *map,
                                dfxc_buf *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    px_status st = PX_OK;
    struct stat sb;
    void *p;

    *map = 0;
    if (fd < 0)
        return px_set_error(errno == ENOENT ? PX_ENOENT : PX_EIO, "cannot open %s: %s", path,
                            strerror(errno));
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
        p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (p != MAP_FAILED) {
            *text = p;
            *n = (size_t)sb.st_size;
            *map = 1;
        }
    }
    if (!*map && (st = dfxc_read_rest(fd, path, b)) == PX_OK) {
        *text = b->p;
        *n = b->len;
    }
    close(fd);
    return st;
}

px_status dfxc_json_load_each(const char *path, dfxc_json_each_cb each, void *ctx,
                              dfxc_json **root)
{
    const char *text = NULL;
    size_t n = 0;
    int map = 0;
    dfxc_buf b;
    px_status st;

    dfxc_buf_init(&b);
    st = dfxc_open_text(path, &text, &n, &map, &b);
    if (st == PX_OK)
        st = dfxc_json_parse_with(text, n, path, each, ctx, root);
    if (map)
        munmap((void *)(uintptr_t)text, n);
    dfxc_buf_free(&b);
    return st;
}

px_status dfxc_json_load(const char *path, dfxc_json **root)
{
    return dfxc_json_load_each(path, NULL, NULL, root);
}

const dfxc_json *dfxc_json_get(const dfxc_json *j, const char *key)
{
    if (j == NULL || j->type != DFXC_JOBJ)
        return NULL;
    for (size_t i = 0; i < j->n; i++)
        if (strcmp(j->kids[i].key, key) == 0)
            return &j->kids[i];
    return NULL;
}

double dfxc_json_num(const dfxc_json *j, const char *key, double dflt)
{
    const dfxc_json *m = dfxc_json_get(j, key);

    return m != NULL && m->type == DFXC_JNUM ? m->num : dflt;
}

const char *dfxc_json_str(const dfxc_json *j, const char *key, const char *dflt)
{
    const dfxc_json *m = dfxc_json_get(j, key);

    return m != NULL && m->type == DFXC_JSTR ? m->str : dflt;
}
