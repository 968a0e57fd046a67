/*
 * plexus/status.h - the one status type, its names, and the thread-local error message.
 *
 * Every public function returns px_status (PX_OK == 0). The function that detects a failure
 * writes a message for px_last_error(): what failed, the values involved, why, and what to
 * do. Callers pass the status up without rewriting the message.
 */
#ifndef PLEXUS_STATUS_H
#define PLEXUS_STATUS_H

#include <plexus/api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, short description) - the single list the enum and its strings come from. */
#define PX_STATUS_MAP(X)                                                                   \
    X(PX_OK, 0, "success")                                                                 \
    X(PX_EINVAL, -1, "invalid argument")                                                   \
    X(PX_ENOMEM, -2, "out of memory")                                                      \
    X(PX_ENOTSUP, -3, "not supported")                                                     \
    X(PX_ETIMEDOUT, -4, "timed out")                                                       \
    X(PX_EPEERDEAD, -5, "peer process died")                                               \
    X(PX_EIO, -6, "input/output error")                                                    \
    X(PX_ESTATE, -7, "invalid state")                                                      \
    X(PX_EABORTED, -8, "aborted by an earlier failure")                                    \
    X(PX_EKERNEL, -9, "kernel failed")                                                     \
    X(PX_ENOENT, -10, "not found")                                                         \
    X(PX_EREVOKED, -11, "domain revoked")

typedef enum px_status {
#define PX_STATUS_ENUM_(name, value, text) name = value,
    PX_STATUS_MAP(PX_STATUS_ENUM_)
#undef PX_STATUS_ENUM_
} px_status;

/* Returns the symbolic name of a status ("PX_EINVAL"); "PX_E?" for an unknown value. */
PX_API const char *px_status_name(px_status s);

/* Returns a short English description of a status ("invalid argument"). */
PX_API const char *px_status_str(px_status s);

/*
 * Returns the message written by the last failing plexus call on this thread, or "" when
 * none has failed. The text stays valid until the next failing call on the same thread.
 */
PX_API const char *px_last_error(void);

/*
 * Records a failure message for px_last_error() on this thread and returns s. Kernels and
 * host functions use it to explain why they return a non-zero status.
 */
PX_API px_status px_set_error(px_status s, const char *fmt, ...) PX_PRINTF(2, 3);

/* Clears this thread's message. */
PX_API void px_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
