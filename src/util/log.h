/*
 * log.h - leveled logging to stderr.
 *
 * Levels: error, warn, info, debug (PLEXUS_LOG). The PX_LOG_* macros test the level before
 * formatting anything, so a disabled log line costs one load and one branch.
 */
#ifndef PX_UTIL_LOG_H
#define PX_UTIL_LOG_H

#include <plexus/api.h>

enum { PX_LOG_ERROR = 0, PX_LOG_WARN = 1, PX_LOG_INFO = 2, PX_LOG_DEBUG = 3 };

extern int px_log_level_g;

/* Writes one line "plexus: <level>: <text>" to stderr. */
PX_API void px_log_write(int level, const char *fmt, ...) PX_PRINTF(2, 3);

/* Sets the level; returns the previous one. */
PX_API int px_log_set_level(int level);

/* Parses "error|warn|info|debug"; returns -1 when the text is none of them. */
int px_log_parse_level(const char *s);

/* Returns the name of a level. */
const char *px_log_level_name(int level);

#define PX_LOG_(lvl, ...)                                                                  \
    do {                                                                                   \
        if (__builtin_expect(px_log_level_g >= (lvl), 0))                                  \
            px_log_write((lvl), __VA_ARGS__);                                              \
    } while (0)

#define PX_LOG_ERROR(...) PX_LOG_(PX_LOG_ERROR, __VA_ARGS__)
#define PX_LOG_WARN(...) PX_LOG_(PX_LOG_WARN, __VA_ARGS__)
#define PX_LOG_INFO(...) PX_LOG_(PX_LOG_INFO, __VA_ARGS__)
#define PX_LOG_DEBUG(...) PX_LOG_(PX_LOG_DEBUG, __VA_ARGS__)

#endif
