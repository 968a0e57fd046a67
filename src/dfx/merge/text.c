/*
 * text.c - the merge's reading of plexus's own text: dfx.json through the one JSON reader
 * (dfx/collectors/json.h), each member's value kept as written so that the merge copies it
 * unchanged; time stamps as dfxc_buf_us writes them, and plain search in the lines of
 * trace.json (each line is in the layout plexus's writer gives it: mrg_line_add checks it).
 */
#include "dfx/merge/merge_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

px_status mrg_obj_parse(const char *text, size_t n, const char *what, mrg_obj *o)
{
    dfxc_json *root = NULL;
    px_status st = dfxc_json_parse(text, n, what, &root);

    if (st != PX_OK)
        return st;
    if (root->type != DFXC_JOBJ) {
        dfxc_json_free(root);
        return px_set_error(PX_EINVAL, "%s is not a JSON object", what);
    }
    *o = (mrg_obj){.text = text, .root = root};
    return PX_OK;
}

void mrg_obj_free(mrg_obj *o)
{
    dfxc_json_free(o->root);
    *o = (mrg_obj){0};
}

mrg_str mrg_value(const mrg_obj *o, size_t i)
{
    return (mrg_str){o->text + o->root->kids[i].at, o->root->kids[i].len};
}

mrg_str mrg_get(const mrg_obj *o, const char *key)
{
    const dfxc_json *v = o->root != NULL ? dfxc_json_get(o->root, key) : NULL;

    return v != NULL ? (mrg_str){o->text + v->at, v->len} : (mrg_str){NULL, 0};
}

double mrg_num(const mrg_obj *o, const char *key, double def)
{
    return dfxc_json_num(o->root, key, def);
}

int mrg_str_is(const mrg_obj *o, const char *key, const char *s)
{
    const char *v = dfxc_json_str(o->root, key, NULL);

    return v != NULL && strcmp(v, s) == 0;
}

int mrg_true(const dfxc_json *o, const char *key)
{
    const dfxc_json *v = dfxc_json_get(o, key);

    return v != NULL && v->type == DFXC_JBOOL && v->num == 1;
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
