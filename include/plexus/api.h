/*
 * plexus/api.h - export macro shared by every public header.
 *
 * The library is built with -fvisibility=hidden; only declarations marked PX_API are exported
 * from libplexus.so.
 */
#ifndef PLEXUS_API_H
#define PLEXUS_API_H

#if defined(__GNUC__)
#define PX_API __attribute__((visibility("default")))
#define PX_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PX_API
#define PX_PRINTF(f, a)
#endif

#endif
