/*
 * submits.h - the submitted tasks of a run with their arguments, rebuilt from SUBMIT
 * entries (each holds its task's arguments); shared by depgen (deps.json) and argsdump
 * (args/args_dump.json), which describe every argument with the same JSON object.
 *
 * Task ids are renumbered from the run's first task, and a tensor's base address is given as
 * a buffer number (distinct base addresses numbered in order of first use, by task and
 * argument), so the files are the same across runs and transports: device addresses move
 * with the arena's mapping and with where px_run places the host tensors.
 */
#ifndef PX_DFX_COLLECTORS_SUBMITS_H
#define PX_DFX_COLLECTORS_SUBMITS_H

#include <stddef.h>
#include <stdint.h>

#include "dfx/collectors/out.h"
#include "dfx/records.h"

typedef struct dfxc_subtask {
    uint64_t id; /* task id as recorded */
    int32_t kernel;
    int nargs;    /* arguments in its SUBMIT (continuations not counted) */
    int nseen;    /* arguments received, continuations included */
    size_t first; /* index of its first argument in args[] (after dfxc_submits_sort) */
} dfxc_subtask;

typedef struct dfxc_submits {
    dfxc_subtask *t;
    size_t n, cap;
    dfxc_idmap ids; /* task id -> index in t (rebuilt by dfxc_submits_sort) */
    px_dfx_arg *args;
    size_t nargs, cap_args;
    uint32_t *buffer; /* per argument after sorting: its base address's buffer number */
    uint64_t min_id;  /* first task of the run (UINT64_MAX before any) */
    uint64_t bad;     /* entries that did not decode */
    int oom;
} dfxc_submits;

/* Makes s empty. */
void dfxc_submits_init(dfxc_submits *s);
/* Frees what s holds and makes it empty. */
void dfxc_submits_free(dfxc_submits *s);
/* Keeps a SUBMIT entry with its arguments; ignores other kinds. */
void dfxc_submits_on_record(dfxc_submits *s, const px_dfx_rec *r);
/*
 * Sorts tasks by id and arguments by (task, index) and links them. Returns PX_OK, or
 * PX_ENOMEM when a record could not be kept (who names the collector in the message).
 */
px_status dfxc_submits_sort(dfxc_submits *s, const char *who);
/* The arguments of task i (after sorting): *n of them from index *first of s->args. */
void dfxc_submits_args(const dfxc_submits *s, size_t i, size_t *first, int *n);
/* Returns the renumbered id of a recorded task id. */
uint64_t dfxc_submits_rid(const dfxc_submits *s, uint64_t id);
/*
 * Appends argument k (an index into s->args) as a JSON object without its closing brace
 * (callers add members).
 */
void dfxc_submits_arg_json(dfxc_buf *b, const dfxc_submits *s, size_t k);

#endif
