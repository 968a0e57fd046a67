/*
 * tsan.h - telling ThreadSanitizer about synchronisation it cannot see.
 *
 * Level 3 orders work across processes: a chip's service thread answers a control call, the
 * parent reads the answer and only then posts a call that the chip's main thread runs. TSan
 * instruments one process and sees no order between the two threads of the chip, so it reports
 * a race on everything the first wrote and the second reads (a domain's communicator). The
 * hand-offs through the parent are real; these annotations say so: a thread that has done its
 * part of a message releases a token, a thread that starts on a message acquires it. Outside
 * TSan builds they compile to nothing.
 */
#ifndef PX_UTIL_TSAN_H
#define PX_UTIL_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define PX_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PX_TSAN 1
#endif
#endif

#ifdef PX_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define PX_TSAN_ACQUIRE(addr) __tsan_acquire((void *)(addr))
#define PX_TSAN_RELEASE(addr) __tsan_release((void *)(addr))
#else
#define PX_TSAN_ACQUIRE(addr) ((void)(addr))
#define PX_TSAN_RELEASE(addr) ((void)(addr))
#endif

#endif
