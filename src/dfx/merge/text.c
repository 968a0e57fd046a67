/*
 * text.c - the merge's reading of plexus's own text: dfx.json's top-level members found by a
 * scanner that only skips strings and brackets (mrg_obj), time stamps as dfxc_buf_us writes
 * them, and plain search in the lines of trace.json.
 */
#include "dfx/merge/merge_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns the end of the JSON string starting at s (after its closing quote), or NULL. */
static const char *mrg_skip_string(const char *s, const char *end)
{
    for (s++; s < end; s++) {
        if (*s == '\\')
            s++;
        else if (*s == '"')
            return s + 1;
    }
    return NULL;
}

/* Returns the end of the JSON value at s (a string, a bracketed value or a scalar). */
static const char *mrg_skip_value(const char *s, const char *end)
{
    int depth = 0;

    while (s < end) {
        if (*s == '"') {
            if ((s = mrg_skip_string(s, end)) == NULL)
                return NULL;
            if (depth == 0)
                return s;
            continue;
        }
        if (*s == '{' || *s == '[') {
            depth++;
        } else if (*s == '}' || *s == ']') {
            if (depth == 0)
                return s; /* the end of the enclosing object */
            if (--depth == 0)
                return s + 1;
        } else if (depth == 0 && (*s == ',' || *s == '\n')) {
            return s;
        }
        s++;
    }
    return depth == 0 ? s : NULL;
}

static const char *mrg_skip_space(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r'))
        s++;
    return s;
}

/* Finds the top-level members of the object in text[0..n). Returns PX_OK or PX_EINVAL. */
px_status mrg_obj_scan(const char *text, size_t n, const char *what, mrg_obj *o)
{
    const char *s = mrg_skip_space(text, text + n), *end = text + n;

    o->n = 0;
    if (s == end || *s++ != '{')
        return px_set_error(PX_EINVAL, "dfx: %s is not a JSON object", what);
    for (;;) {
        const char *k, *v;

        s = mrg_skip_space(s, end);
        if (s < end && *s == '}')
            return PX_OK;
        if (s == end || *s != '"' || (k = mrg_skip_string(s, end)) == NULL ||
            o->n == MRG_MAX_MEMBERS)
            break;
        o->key[o->n] = (mrg_str){s + 1, (size_t)(k - s - 2)};
        s = mrg_skip_space(k, end);
        if (s == end || *s++ != ':')
            break;
        s = mrg_skip_space(s, end);
        if ((v = mrg_skip_value(s, end)) == NULL || v == s)
            break;
        o->value[o->n++] = (mrg_str){s, (size_t)(v - s)};
        s = mrg_skip_space(v, end);
        if (s < end && *s == ',')
            s++;
    }
    return px_set_error(PX_EINVAL, "dfx: %s: member %d is not \"key\": value (not a dfx.json "
                        "written by this plexus?)", what, o->n);
}

/* The value of member key, or a span of n 0. */
mrg_str mrg_get(const mrg_obj *o, const char *key)
{
    for (int i = 0; i < o->n; i++)
        if (o->key[i].n == strlen(key) && memcmp(o->key[i].p, key, o->key[i].n) == 0)
            return o->value[i];
    return (mrg_str){NULL, 0};
}

/* The number value of key, or def. */
double mrg_num(const mrg_obj *o, const char *key, double def)
{
    mrg_str v = mrg_get(o, key);
    char tmp[64], *e;
    double d;

    if (v.n == 0 || v.n >= sizeof(tmp))
        return def;
    memcpy(tmp, v.p, v.n);
    tmp[v.n] = '\0';
    d = strtod(tmp, &e);
    return e == tmp + v.n ? d : def;
}

/* 1 when the string value of key is s. */
int mrg_str_is(const mrg_obj *o, const char *key, const char *s)
{
    mrg_str v = mrg_get(o, key);

    return v.n == strlen(s) + 2 && v.p[0] == '"' && memcmp(v.p + 1, s, v.n - 2) == 0;
}

/* Parses microseconds with up to three decimals (as dfxc_buf_us writes them) into ns. */
int mrg_parse_us(const char *s, const char *end, int64_t *ns, const char **after)
{
    int neg = s < end && *s == '-', digits = 0;
    int64_t v = 0, frac = 0;

    s += neg;
    for (; s < end && *s >= '0' && *s <= '9' && v < INT64_MAX / 10000; s++, digits++)
        v = v * 10 + (*s - '0');
    if (digits == 0)
        return -1;
    if (s < end && *s == '.') {
        int f = 0;

        for (s++; s < end && *s >= '0' && *s <= '9'; s++)
            if (f++ < 3)
                frac = frac * 10 + (*s - '0');
        for (; f < 3; f++)
            frac *= 10;
    }
    *ns = (neg ? -1 : 1) * (v * 1000 + frac);
    *after = s;
    return 0;
}

/* Finds needle in [s, end), the last occurrence when last; NULL when absent. */
const char *mrg_find(const char *s, const char *end, const char *needle, int last)
{
    size_t n = strlen(needle);
    const char *hit = NULL;

    for (; s + n <= end; s++)
        if (memcmp(s, needle, n) == 0) {
            hit = s;
            if (!last)
                return hit;
        }
    return hit;
}

/*
 * Copies the JSON string starting at s (at its opening quote) into out (n bytes), decoding
 * the escapes plexus writes (\" \\ \/ \n \t \r \b \f and \u00XX); others become '?'.
 */
void mrg_unescape(const char *s, const char *end, char *out, size_t n)
{
    size_t o = 0;

    for (s++; s < end && *s != '"' && o + 1 < n; s++) {
        char c = *s;

        if (c == '\\' && s + 1 < end) {
            c = *++s;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'r' || c == 'b' || c == 'f')
                c = ' ';
            else if (c == 'u' && s + 4 < end && s[1] == '0' && s[2] == '0') {
                char hex[3] = {s[3], s[4], 0};

                c = (char)strtol(hex, NULL, 16);
                s += 4;
            } else if (c != '"' && c != '\\' && c != '/')
                c = '?';
        }
        out[o++] = c;
    }
    out[o] = '\0';
}

/* The unsigned number after needle in [p, end), or -1 when absent. */
int64_t mrg_after_num(const char *p, const char *end, const char *needle)
{
    const char *at = mrg_find(p, end, needle, 0);

    return at ? strtoll(at + strlen(needle), NULL, 10) : -1;
}

/* 1 when dfx.json o says "reconciled": true. */
int mrg_true(const mrg_obj *o, const char *key)
{
    mrg_str v = mrg_get(o, key);

    return v.n == 4 && memcmp(v.p, "true", 4) == 0;
}

