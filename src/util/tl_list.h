/*
 * tl_list.h - the one list of comm transports, in the order the selection rule tries them.
 *
 * Each row is X(id, name, contract): the id (PX_COMM_TL_*, also the transport's number in DFX
 * records and in the set-up messages), the name (PLEXUS_COMM_TRANSPORT, --comm-transport,
 * doctor, logs, dfx.json, trace.json) and the px_comm_tl its file under src/comm/transport/
 * defines. Everything that names or counts transports is made from this list: comm/select.c's
 * table, the knob parser (util/config.c), the command line, DFX's decoding, and the
 * per-transport test suites (tests/system/transports.cmake reads the rows of this file: keep
 * each row in this shape, X(PX_COMM_TL_<ID>, "<name>", <contract>)). Adding a transport is its
 * file under src/comm/transport/ plus one row here (docs/architecture.md, "Adding a
 * transport").
 *
 * A leaf header of util/: data only, below comm/ and dfx/, so that util/ and dfx/ read the
 * names without an include that runs up the layers.
 */
#ifndef PX_UTIL_TL_LIST_H
#define PX_UTIL_TL_LIST_H

#define PX_COMM_TL_MAP(X)                                                                  \
    X(PX_COMM_TL_DIRECT, "direct", px_comm_tl_direct)                                      \
    X(PX_COMM_TL_STAGED, "staged", px_comm_tl_staged)                                      \
    X(PX_COMM_TL_MPI, "mpi", px_comm_tl_mpi)

enum {
    PX_COMM_TL_NONE = 0,
#define PX_COMM_TL_ENUM_(id, name, tl) id,
    PX_COMM_TL_MAP(PX_COMM_TL_ENUM_)
#undef PX_COMM_TL_ENUM_
    PX_COMM_TL_COUNT
};

#define PX_COMM_TL_AUTO 0 /* a forced value of 0: no transport forced */

/* The names by id: "none" at PX_COMM_TL_NONE (not a transport; "auto" is not one either). */
#define PX_COMM_TL_NAME_(id, name, tl) name,
#define PX_COMM_TL_NAMES {"none", PX_COMM_TL_MAP(PX_COMM_TL_NAME_)}

/* "auto, direct, staged": the values PLEXUS_COMM_TRANSPORT accepts, in words. */
#define PX_COMM_TL_WORD_(id, name, tl) ", " name
#define PX_COMM_TL_CHOICES "auto" PX_COMM_TL_MAP(PX_COMM_TL_WORD_)

static inline const char *px_comm_tl_name(int id)
{
    static const char *const names[PX_COMM_TL_COUNT] = PX_COMM_TL_NAMES;

    return id > 0 && id < PX_COMM_TL_COUNT ? names[id] : "none";
}

/* The id of a transport's name, PX_COMM_TL_AUTO for "auto", -1 for anything else. */
static inline int px_comm_tl_parse(const char *text)
{
    static const char *const names[PX_COMM_TL_COUNT] = PX_COMM_TL_NAMES;

    if (text == NULL)
        return -1;
    if (__builtin_strcmp(text, "auto") == 0)
        return PX_COMM_TL_AUTO;
    for (int i = 1; i < PX_COMM_TL_COUNT; i++)
        if (__builtin_strcmp(text, names[i]) == 0)
            return i;
    return -1;
}

#endif
