/*
 * log.c - leveled logging to stderr, one write(2) per line so lines of concurrent threads
 * and processes do not interleave.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int px_log_level_g = PX_LOG_WARN;

static const char *const px_log_names[] = {"error", "warn", "info", "debug"};

void px_log_write(int level, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    int n;

    if (level < PX_LOG_ERROR || level > PX_LOG_DEBUG)
        level = PX_LOG_ERROR;
    n = snprintf(line, sizeof(line), "plexus: %s: ", px_log_names[level]);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nowhere left to report a failing stderr */
    }
}

int px_log_set_level(int level)
{
    int old = px_log_level_g;

    px_log_level_g = level;
    return old;
}

int px_log_parse_level(const char *s)
{
    for (int i = 0; i <= PX_LOG_DEBUG; i++)
        if (strcmp(s, px_log_names[i]) == 0)
            return i;
    return -1;
}

const char *px_log_level_name(int level)
{
    if (level < PX_LOG_ERROR || level > PX_LOG_DEBUG)
        return "?";
    return px_log_names[level];
}
