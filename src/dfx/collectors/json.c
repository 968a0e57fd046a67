/*
 * json.c - the strict JSON reader of json.h: recursive descent over the text, one node per
 * value, children in arrays that grow by doubling. Errors name line and column.
 */
#include "dfx/collectors/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfx/collectors/out.h"

#define DFXC_JSON_DEPTH 64

typedef struct dfxc_jp {
    const char *s, *p, *end;
    const char *what;
    int depth;
    px_status st; /* first error */
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

/*
 * Copies a string without escapes (the common case) of n bytes at p; returns it malloc'ed,
 * or NULL when out of memory.
 */
static char *dfxc_jp_plain(dfxc_jp *jp, const char *p, size_t n)
{
    char *s = malloc(n + 1);

    if (s == NULL) {
        dfxc_jp_fail(jp, PX_ENOMEM, "");
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = '\0';
    jp->p = p + n + 1;
    return s;
}

/* Parses a string (at its opening quote); returns it malloc'ed or NULL on error. */
static char *dfxc_jp_string(dfxc_jp *jp)
{
    const char *q = jp->p + 1;
    dfxc_buf b;
    char *s;

    while (q < jp->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        q++;
    if (q < jp->end && *q == '"')
        return dfxc_jp_plain(jp, jp->p + 1, (size_t)(q - jp->p - 1));
    dfxc_buf_init(&b);
    dfxc_buf_put(&b, "", 0);
    jp->p++;
    while (jp->p < jp->end && *jp->p != '"') {
        unsigned char c = (unsigned char)*jp->p;

        if (c < 0x20)
            break;
        if (c == '\\') {
            jp->p++;
            if (dfxc_jp_escape(jp, &b) != 0)
                break;
            continue;
        }
        dfxc_buf_put(&b, jp->p++, 1);
    }
    if (jp->p >= jp->end || *jp->p != '"' || b.oom) {
        dfxc_jp_fail(jp, b.oom ? PX_ENOMEM : PX_EINVAL, "a valid string");
        dfxc_buf_free(&b);
        return NULL;
    }
    jp->p++;
    s = realloc(b.p, b.len + 1); /* give back the buffer's slack */
    return s ? s : b.p;
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
    memcpy(tmp, jp->p, (size_t)(q - jp->p));
    tmp[q - jp->p] = '\0';
    out->type = DFXC_JNUM;
    out->num = strtod(tmp, NULL);
    jp->p = q;
    return 0;
}

/*
 * Appends a zeroed kid to j (capacity *cap, starting at 4: most containers of DFX files are
 * small objects). Returns it, or NULL when out of memory.
 */
static dfxc_json *dfxc_jp_push(dfxc_json *j, size_t *cap)
{
    if (j->n == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        dfxc_json *k = realloc(j->kids, c * sizeof(*k));

        if (k == NULL)
            return NULL;
        j->kids = k;
        *cap = c;
    }
    memset(&j->kids[j->n], 0, sizeof(*j->kids));
    return &j->kids[j->n++];
}

/*
 * Parses the elements of an array or the members of an object (at the opening bracket);
 * returns 0 or -1.
 */
static int dfxc_jp_container(dfxc_jp *jp, dfxc_json *out, int obj)
{
    size_t cap = 0;
    char close = obj ? '}' : ']';

    out->type = obj ? DFXC_JOBJ : DFXC_JARR;
    jp->p++;
    dfxc_jp_ws(jp);
    if (jp->p < jp->end && *jp->p == close) {
        jp->p++;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        dfxc_json *kid;

        dfxc_jp_ws(jp);
        if (obj) {
            if (jp->p >= jp->end || *jp->p != '"')
                return dfxc_jp_fail(jp, PX_EINVAL, "a member name");
            key = dfxc_jp_string(jp);
            dfxc_jp_ws(jp);
            if (key == NULL || jp->p >= jp->end || *jp->p != ':') {
                free(key);
                return dfxc_jp_fail(jp, PX_EINVAL, "':'");
            }
            jp->p++;
        }
        kid = dfxc_jp_push(out, &cap);
        if (kid == NULL) {
            free(key);
            return dfxc_jp_fail(jp, PX_ENOMEM, "");
        }
        kid->key = key;
        if (dfxc_jp_value(jp, kid) != 0)
            return -1;
        dfxc_jp_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == close) {
            jp->p++;
            return 0;
        }
        return dfxc_jp_fail(jp, PX_EINVAL, obj ? "',' or '}'" : "',' or ']'");
    }
}

/* Parses one value into out; returns 0 or -1 (the error is in jp->st). */
static int dfxc_jp_value(dfxc_jp *jp, dfxc_json *out)
{
    int rc = 0;

    dfxc_jp_ws(jp);
    if (jp->st != PX_OK)
        return -1;
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
    return rc;
}

/* Frees the contents of one node (not the node itself). */
static void dfxc_json_clear(dfxc_json *j)
{
    for (size_t i = 0; i < j->n; i++)
        dfxc_json_clear(&j->kids[i]);
    free(j->kids);
    free(j->str);
    free(j->key);
}

void dfxc_json_free(dfxc_json *root)
{
    if (root == NULL)
        return;
    dfxc_json_clear(root);
    free(root);
}

px_status dfxc_json_parse(const char *text, size_t n, const char *what, dfxc_json **root)
{
    dfxc_jp jp = {.s = text, .p = text, .end = text + n, .what = what, .st = PX_OK};
    dfxc_json *j = calloc(1, sizeof(*j));

    if (j == NULL)
        return px_set_error(PX_ENOMEM, "%s: out of memory while parsing JSON", what);
    dfxc_jp_value(&jp, j);
    dfxc_jp_ws(&jp);
    if (jp.st == PX_OK && jp.p != jp.end)
        dfxc_jp_fail(&jp, PX_EINVAL, "the end of the text after the top-level value");
    if (jp.st != PX_OK) {
        dfxc_json_free(j);
        return jp.st;
    }
    *root = j;
    return PX_OK;
}

/* Reads a whole file into a malloc'ed buffer. Returns PX_OK, PX_ENOENT, PX_EIO or PX_ENOMEM. */
static px_status dfxc_read_file(const char *path, char **text, size_t *n)
{
    FILE *f = fopen(path, "rb");
    dfxc_buf b;
    char chunk[65536];
    size_t got;

    if (f == NULL)
        return px_set_error(errno == ENOENT ? PX_ENOENT : PX_EIO, "cannot open %s: %s", path,
                            strerror(errno));
    dfxc_buf_init(&b);
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        dfxc_buf_put(&b, chunk, got);
    if (ferror(f) || b.oom) {
        px_status st = b.oom ? PX_ENOMEM : PX_EIO;

        fclose(f);
        dfxc_buf_free(&b);
        return px_set_error(st, "cannot read %s: %s", path,
                            st == PX_ENOMEM ? "out of memory" : "read error");
    }
    fclose(f);
    *text = b.p;
    *n = b.len;
    return PX_OK;
}

px_status dfxc_json_load(const char *path, dfxc_json **root)
{
    char *text = NULL;
    size_t n = 0;
    px_status st = dfxc_read_file(path, &text, &n);

    if (st != PX_OK)
        return st;
    st = dfxc_json_parse(text ? text : "", n, path, root);
    free(text);
    return st;
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
