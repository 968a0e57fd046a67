/*
 * json.h - plexus's one JSON reader: a small strict reader (RFC 8259; a member name twice in
 * one object is refused too) of the files DFX writes. The DFX merge reads dfx.json with it
 * (src/dfx/merge), `plexus trace summary` reads trace.json, deps.json and dfx.json with it
 * (tools/trace_load.c), and the tests and bench_dfx read the outputs back with it to check
 * them. The writers are the collectors' buffer helpers (out.h).
 *
 * The parser builds a tree of dfxc_json nodes. Objects keep their members in file order;
 * numbers are doubles; strings are decoded to UTF-8 (\u escapes included, surrogate pairs
 * joined); each node knows where its value's text is (at, len), so a caller may copy a value
 * as it was written. Nesting is limited to 64 levels. A tree is one allocation as far as its
 * owner is concerned: only its root is freed. Big files (trace.json of a large run) are read
 * with dfxc_json_load_each() or dfxc_json_parse_each(), which hand the elements of the
 * top-level arrays over one at a time instead of keeping them all.
 */
#ifndef PX_DFX_COLLECTORS_JSON_H
#define PX_DFX_COLLECTORS_JSON_H

#include <stddef.h>
#include <plexus/status.h>

typedef enum dfxc_jtype {
    DFXC_JNULL,
    DFXC_JBOOL,
    DFXC_JNUM,
    DFXC_JSTR,
    DFXC_JARR,
    DFXC_JOBJ
} dfxc_jtype;

typedef struct dfxc_json {
    dfxc_jtype type;
    double num;             /* JNUM, and JBOOL as 0 or 1 */
    char *str;              /* JSTR */
    char *key;              /* the member name when inside an object */
    struct dfxc_json *kids; /* JARR, JOBJ */
    size_t n;               /* number of kids */
    size_t at, len;         /* the value's text: len bytes at offset at of the parsed text */
} dfxc_json;

/*
 * Parses text (n bytes). Returns PX_OK with *root (free with dfxc_json_free), or PX_EINVAL
 * with the line, column and what was expected in the message (prefixed by `what`, e.g. a
 * file name), or PX_ENOMEM.
 */
px_status dfxc_json_parse(const char *text, size_t n, const char *what, dfxc_json **root);

/* Reads and parses a whole file. Returns as dfxc_json_parse, or PX_ENOENT / PX_EIO. */
px_status dfxc_json_load(const char *path, dfxc_json **root);

/*
 * Called by dfxc_json_load_each() for each element of an array that is a member of the
 * top-level object; key names the member. elem and everything below it are valid during the
 * call only. Returns PX_OK to go on; any other status stops the parse and is returned (the
 * callback writes the message).
 */
typedef px_status (*dfxc_json_each_cb)(void *ctx, const char *key, const dfxc_json *elem);

/*
 * Like dfxc_json_load(), but every array member of the top-level object is handed to `each`
 * element by element and left empty in *root, so a file of a million events takes the memory
 * of one. Returns as dfxc_json_load(), or the status a callback stopped with.
 */
px_status dfxc_json_load_each(const char *path, dfxc_json_each_cb each, void *ctx,
                              dfxc_json **root);

/* dfxc_json_load_each() over text (n bytes) instead of a file; what names it in messages.
 * Returns as dfxc_json_parse, or the status a callback stopped with. */
px_status dfxc_json_parse_each(const char *text, size_t n, const char *what,
                               dfxc_json_each_cb each, void *ctx, dfxc_json **root);

/* Frees a tree returned by dfxc_json_parse or a dfxc_json_load*; NULL is accepted. */
void dfxc_json_free(dfxc_json *root);

/* Returns the member called key of an object, or NULL (also when j is not an object). */
const dfxc_json *dfxc_json_get(const dfxc_json *j, const char *key);
/* Returns the member's number, or dflt when absent or not a number. */
double dfxc_json_num(const dfxc_json *j, const char *key, double dflt);
/* Returns the member's string, or dflt when absent or not a string. */
const char *dfxc_json_str(const dfxc_json *j, const char *key, const char *dflt);

#endif
