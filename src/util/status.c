/*
 * status.c - status names and strings from the one list in plexus/status.h, and the
 * thread-local message behind px_last_error().
 */
#include <plexus/status.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PX_ERROR_MAX 1024

static _Thread_local char px_error_buf[PX_ERROR_MAX];

const char *px_status_name(px_status s)
{
    switch (s) {
#define PX_STATUS_NAME_(name, value, text)                                                 \
    case name:                                                                             \
        return #name;
        PX_STATUS_MAP(PX_STATUS_NAME_)
#undef PX_STATUS_NAME_
    }
    return "PX_E?";
}

const char *px_status_str(px_status s)
{
    switch (s) {
#define PX_STATUS_STR_(name, value, text)                                                  \
    case name:                                                                             \
        return text;
        PX_STATUS_MAP(PX_STATUS_STR_)
#undef PX_STATUS_STR_
    }
    return "unknown status";
}

const char *px_last_error(void)
{
    return px_error_buf;
}

/*
 * Formats into a scratch buffer, then copies: an argument may point into px_error_buf itself
 * (px_set_error(st, "prefix: %s", px_last_error()) is the usual way to add context), and
 * vsnprintf into the buffer it reads from overwrites its source as it goes.
 */
px_status px_set_error(px_status s, const char *fmt, ...)
{
    char tmp[PX_ERROR_MAX];
    va_list ap;
    int n;

    if (fmt == NULL) {
        px_error_buf[0] = '\0';
        return s;
    }
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(tmp))
        n = (int)sizeof(tmp) - 1;
    memcpy(px_error_buf, tmp, (size_t)n);
    px_error_buf[n] = '\0';
    return s;
}

void px_clear_error(void)
{
    px_error_buf[0] = '\0';
}
