/*
 * plexus/args.h - task arguments: tagged tensors and scalars, built with typed calls.
 *
 * Tags say how a task touches a tensor and so which dependencies the tensor map infers:
 *   IN               read: waits for the last writer of overlapping bytes (RAW)
 *   OUT              written: waits for earlier writers (WAW) and readers (WAR); an OUT
 *                    tensor without an address is allocated by the runtime in the enclosing
 *                    scope, and its address is written back into the args
 *   INOUT            read and written
 *   OUTPUT_EXISTING  written into memory that must already exist (addr required)
 *   NO_DEP           passed to the kernel, ignored by the tensor map
 * Kernel signatures list the tag (and optionally dtype) of every parameter.
 *
 * Inside one task, an input (IN, INOUT) and an output (OUT, INOUT, OUTPUT_EXISTING) may share
 * bytes only by being exactly the same bytes (the same view, or dense views of the same
 * range): the element-wise in-place update. A partial overlap (reading x[0:40] while writing
 * x[8:48]) makes the result depend on the kernel's loop order, so every submit (px_submit,
 * px_submit_after, px_submit_batch, and at level 3 px_submit_next_level, px_submit_host and
 * each chip's args of px_submit_group) refuses it with PX_EINVAL naming both arguments.
 * Strided views whose elements never meet (even and odd elements) are fine; NO_DEP tensors
 * and px_run's own args (copied in and out as merged ranges) are not checked.
 */
#ifndef PLEXUS_ARGS_H
#define PLEXUS_ARGS_H

#include <stdint.h>
#include <plexus/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PX_MAX_ARGS 16

/* X(enum, name) */
#define PX_TAG_MAP(X)                                                                      \
    X(PX_TAG_IN, "in")                                                                     \
    X(PX_TAG_OUT, "out")                                                                   \
    X(PX_TAG_INOUT, "inout")                                                               \
    X(PX_TAG_OUTPUT_EXISTING, "output_existing")                                           \
    X(PX_TAG_NO_DEP, "no_dep")                                                             \
    X(PX_TAG_SCALAR, "scalar")

typedef enum px_tag {
    PX_TAG_NONE = 0,
#define PX_TAG_ENUM_(e, n) e,
    PX_TAG_MAP(PX_TAG_ENUM_)
#undef PX_TAG_ENUM_
    PX_TAG_COUNT
} px_tag;

typedef enum px_scalar_kind { PX_SCALAR_U64 = 1, PX_SCALAR_I64, PX_SCALAR_F64 } px_scalar_kind;

typedef struct px_arg {
    uint8_t tag;         /* px_tag */
    uint8_t scalar_kind; /* px_scalar_kind for PX_TAG_SCALAR */
    uint8_t marked;      /* set by px_args_mark: argsdump level 2 dumps its data */
    uint8_t null_tensor; /* the builder was given a NULL tensor pointer */
    uint8_t dep_only;    /* internal: an access for dependencies only, never read or written
                          * through (a layer above describes memory the engine cannot see) */
    union {
        px_tensor t;
        uint64_t u64;
        int64_t i64;
        double f64;
    } v;
} px_arg;

typedef struct px_task_args {
    int32_t n;        /* number of arguments */
    int32_t overflow; /* arguments dropped because more than PX_MAX_ARGS were added */
    px_arg a[PX_MAX_ARGS];
} px_task_args;

/* Empties a. Precondition: a is not NULL (a NULL a is ignored). Call it before the first
 * px_args_* on a px_task_args: the builders append after a->n. */
PX_API void px_args_init(px_task_args *a);

/* Append one argument each. A NULL tensor is recorded and rejected by submit with a message;
 * past PX_MAX_ARGS the argument is counted in a->overflow (submit refuses it); a NULL a is
 * ignored. */
PX_API void px_args_in(px_task_args *a, const px_tensor *t);
PX_API void px_args_out(px_task_args *a, const px_tensor *t);
PX_API void px_args_inout(px_task_args *a, const px_tensor *t);
PX_API void px_args_output_existing(px_task_args *a, const px_tensor *t);
PX_API void px_args_no_dep(px_task_args *a, const px_tensor *t);
PX_API void px_args_scalar_u64(px_task_args *a, uint64_t v);
PX_API void px_args_scalar_i64(px_task_args *a, int64_t v);
PX_API void px_args_scalar_f64(px_task_args *a, double v);

/* Marks the most recently added argument for argsdump level 2. */
PX_API void px_args_mark(px_task_args *a);

/*
 * Accessors for kernels. Precondition: a is the kernel's args and 0 <= i < px_arg_count(a);
 * they do not check tags (reading a scalar as a tensor gives garbage). Out of that range (or a
 * NULL a) px_arg_count returns 0, px_arg_tensor and px_arg_data NULL, px_arg_numel -1 and the
 * scalar accessors 0.
 */
PX_API int px_arg_count(const px_task_args *a);
PX_API const px_tensor *px_arg_tensor(const px_task_args *a, int i);
PX_API void *px_arg_data(const px_task_args *a, int i); /* first element of tensor i */
PX_API int64_t px_arg_numel(const px_task_args *a, int i);
PX_API uint64_t px_arg_u64(const px_task_args *a, int i);
PX_API int64_t px_arg_i64(const px_task_args *a, int i);
PX_API double px_arg_f64(const px_task_args *a, int i);

/* Returns the tag's name ("inout"), "?" if invalid. */
PX_API const char *px_tag_name(px_tag t);

/* A kernel's parameter list: the tag and dtype (PX_DTYPE_ANY: any) of every argument. */
typedef struct px_param {
    uint8_t tag;   /* px_tag; OUT also accepts OUTPUT_EXISTING; any tensor tag accepts NO_DEP */
    uint8_t dtype; /* px_dtype; PX_DTYPE_ANY accepts every dtype */
} px_param;

typedef struct px_signature {
    int32_t nargs;
    px_param params[PX_MAX_ARGS];
} px_signature;

#ifdef __cplusplus
}
#endif
#endif
