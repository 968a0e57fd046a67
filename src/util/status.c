/*
 * status.c - status names and strings from the one list in plexus/status.h, and the
 * thread-local message behind px_last_error().
 */
#include <plexus/status.h>

#include <stdarg.h>
#include <stdio.h>

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

px_status px_set_error(px_status s, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(px_error_buf, sizeof(px_error_buf), fmt, ap);
    va_end(ap);
    return s;
}

void px_clear_error(void)
{
    px_error_buf[0] = '\0';
}
