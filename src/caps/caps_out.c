/*
 * caps_out.c - writes the capability table for people and programs.
 *
 * JSON (`plexus doctor --json`, format in docs/formats.md): {"version": 1, "facts": {name:
 * {"value", "source", "note"}}}, booleans as true/false, integers as numbers, strings as
 * strings. Text: one aligned row per fact (fact, value, source, note). The facts object and
 * the string escaper are exported to other writers through caps_internal.h.
 */
#include <plexus/caps.h>

#include <stdint.h>
#include <string.h>

#include "caps/caps_internal.h"
#include "util/file.h"

#define CAPS_JSON_VERSION 1
#define CAPS_KIND_B 'B'
#define CAPS_KIND_I 'I'
#define CAPS_KIND_S 'S'

static const char caps_fact_kinds[PX_FACT_COUNT] = {
#define PX_FACT_KIND_(e, n, k) [e] = CAPS_KIND_##k,
    PX_FACT_MAP(PX_FACT_KIND_)
#undef PX_FACT_KIND_
};

static px_status caps_check_stream(FILE *f, const char *what)
{
    if (ferror(f))
        return px_set_error(PX_EIO, "writing %s failed (stream error); check the output file "
                            "system for space and permissions", what);
    return PX_OK;
}

/* util_put_cb onto a stream. */
static void caps_put_cb(void *ctx, const char *p, size_t n)
{
    (void)fwrite(p, 1, n, ctx);
}

/* Writes at most max bytes of s (stopping at a NUL) as a JSON string literal. */
static void caps_json_nstring(FILE *f, const char *s, size_t max)
{
    util_json_escape(s, max, caps_put_cb, f);
}

/* Returns PX_OK, PX_EINVAL for NULL arguments, PX_EIO when the stream reports an error. */
px_status px_caps_json_string(FILE *f, const char *s)
{
    if (f == NULL || s == NULL)
        return px_set_error(PX_EINVAL, "px_caps_json_string: file and string must not be NULL");
    caps_json_nstring(f, s, SIZE_MAX);
    return caps_check_stream(f, "a JSON string");
}

static void caps_json_value(FILE *f, const px_fact *fact, char kind)
{
    if (kind == CAPS_KIND_B)
        fputs(fact->value ? "true" : "false", f);
    else if (kind == CAPS_KIND_I)
        fprintf(f, "%lld", (long long)fact->value);
    else
        caps_json_nstring(f, fact->text, sizeof(fact->text));
}

static void caps_json_fact(const px_caps *c, FILE *f, int id, int indent)
{
    const px_fact *fact = &c->f[id];

    fprintf(f, "%*s\"%s\": {\"value\": ", indent, "", px_fact_name((px_fact_id)id));
    caps_json_value(f, fact, caps_fact_kinds[id]);
    fputs(", \"source\": ", f);
    caps_json_nstring(f, px_fact_source_name((px_fact_source)fact->source), SIZE_MAX);
    fputs(", \"note\": ", f);
    caps_json_nstring(f, fact->note, sizeof(fact->note));
    fputc('}', f);
}

/* Returns PX_OK, PX_EINVAL for NULL arguments, PX_EIO when writing failed. */
px_status px_caps_write_json_facts(const px_caps *c, FILE *f, int indent)
{
    if (c == NULL || f == NULL)
        return px_set_error(PX_EINVAL, "px_caps_write_json_facts: caps and file must not be "
                            "NULL");
    if (indent < 0)
        indent = 0;
    fputs("{\n", f);
    for (int id = 0; id < PX_FACT_COUNT; id++) {
        caps_json_fact(c, f, id, indent + 2);
        fputs(id + 1 < PX_FACT_COUNT ? ",\n" : "\n", f);
    }
    fprintf(f, "%*s}", indent, "");
    return caps_check_stream(f, "the capability facts");
}

/* Returns PX_OK, PX_EINVAL for NULL arguments, PX_EIO when writing failed. */
px_status px_caps_write_json(const px_caps *caps, FILE *f)
{
    px_status st;

    if (caps == NULL || f == NULL)
        return px_set_error(PX_EINVAL, "px_caps_write_json: caps and file must not be NULL");
    fprintf(f, "{\n  \"version\": %d,\n  \"facts\": ", CAPS_JSON_VERSION);
    st = px_caps_write_json_facts(caps, f, 2);
    if (st != PX_OK)
        return st;
    fputs("\n}\n", f);
    fflush(f);
    return caps_check_stream(f, "the capability table");
}

/* Formats a fact's value for the text table: 4096, true, madvise, or - when empty. */
static void caps_text_value(const px_fact *fact, char kind, char *buf, size_t n)
{
    if (kind == CAPS_KIND_B)
        snprintf(buf, n, "%s", fact->value ? "true" : "false");
    else if (kind == CAPS_KIND_I)
        snprintf(buf, n, "%lld", (long long)fact->value);
    else
        snprintf(buf, n, "%.*s", PX_FACT_TEXT_MAX - 1, fact->text[0] ? fact->text : "-");
}

/* Prints one aligned row per fact; prints nothing for NULL arguments. */
void px_caps_print(const px_caps *caps, FILE *f)
{
    char val[PX_FACT_TEXT_MAX];
    int name_w = (int)strlen("fact"), val_w = (int)strlen("value");

    if (caps == NULL || f == NULL)
        return;
    for (int id = 0; id < PX_FACT_COUNT; id++) {
        int n = (int)strlen(px_fact_name((px_fact_id)id));

        caps_text_value(&caps->f[id], caps_fact_kinds[id], val, sizeof(val));
        name_w = n > name_w ? n : name_w;
        val_w = (int)strlen(val) > val_w ? (int)strlen(val) : val_w;
    }
    fprintf(f, "%-*s  %-*s  %-7s  %s\n", name_w, "fact", val_w, "value", "source", "note");
    for (int id = 0; id < PX_FACT_COUNT; id++) {
        const px_fact *fact = &caps->f[id];

        caps_text_value(fact, caps_fact_kinds[id], val, sizeof(val));
        fprintf(f, "%-*s  %-*s  %-7s  %.*s\n", name_w, px_fact_name((px_fact_id)id), val_w,
                val, px_fact_source_name((px_fact_source)fact->source), PX_FACT_NOTE_MAX - 1,
                fact->note);
    }
}
