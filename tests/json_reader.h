/*
 * json_reader.h - a small strict JSON reader (RFC 8259) with which the tests and bench_dfx
 * read DFX outputs back to check them. It is not part of the library: the library writes
 * JSON and reads none (report.html comes from memory, the level-3 merge streams its own
 * files), and `plexus trace summary` reads with libjansson (tools/trace_load.c).
 *
 * The parser builds a tree of dfxc_json nodes. Objects keep their members in file order;
 * numbers are doubles; strings are decoded to UTF-8 (\u escapes included, surrogate pairs
 * joined). Nesting is limited to 64 levels. A tree is one allocation as far as its owner is
 * concerned: only its root is freed. Big files (trace.json of a large run) are read with
 * dfxc_json_load_each(), which hands the elements of the top-level arrays over one at a time
 * instead of keeping them all.
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

/* Frees a tree returned by dfxc_json_parse or a dfxc_json_load*; NULL is accepted. */
void dfxc_json_free(dfxc_json *root);

/* Returns the member called key of an object, or NULL (also when j is not an object). */
const dfxc_json *dfxc_json_get(const dfxc_json *j, const char *key);
/* Returns the member's number, or dflt when absent or not a number. */
double dfxc_json_num(const dfxc_json *j, const char *key, double dflt);
/* Returns the member's string, or dflt when absent or not a string. */
const char *dfxc_json_str(const dfxc_json *j, const char *key, const char *dflt);

#endif
