/*
 * fault.c - PLEXUS_TEST_FAULT: a chip's fault at a named point of its work (tests only;
 * fault.h has the grammar and why it exists).
 *
 * The parse is strict (every part named, decimal numbers, nothing left over), because a test
 * whose fault never lands would check nothing. A chip process arms the fault once at start-up
 * when the spec names it; each point then counts in this process only (chips are processes,
 * and a chip's points are met by its one main thread, kernels included).
 */
#include "util/fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int px_fault_armed;

static px_fault_spec fault_spec;
static uint64_t fault_count[PX_FAULT_AT_COUNT];

static const char *const fault_points[PX_FAULT_AT_COUNT] = {"coll", "call"};
static const char *const fault_point_words[PX_FAULT_AT_COUNT] = {"collective", "call"};

#define FAULT_FORM "[host:H:]chip:C:ACTION:POINT:N, ACTION kill, stop, kill-worker or " \
                   "stop-worker, POINT coll or call, N from 1 (e.g. host:1:chip:0:kill:coll:50)"

/* Takes "word:" from *p; 1 when it was there. */
static int fault_word(const char **p, const char *word)
{
    size_t n = strlen(word);

    if (strncmp(*p, word, n) != 0 || (*p)[n] != ':')
        return 0;
    *p += n + 1;
    return 1;
}

/* Takes a decimal number in [lo, hi] from *p, followed by ':' (taken) or the end (end=1). */
static int fault_number(const char **p, uint64_t lo, uint64_t hi, int end, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;

    if (*s < '0' || *s > '9')
        return 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > (UINT64_MAX - 9) / 10)
            return 0;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    if (x < lo || x > hi || (end ? *s != '\0' : *s != ':'))
        return 0;
    *p = end ? s : s + 1;
    *v = x;
    return 1;
}

static px_status fault_bad(const char *text, const char *what)
{
    return px_set_error(PX_EINVAL, "PLEXUS_TEST_FAULT=\"%s\" is not valid: %s; expected "
                        FAULT_FORM " (a test-only knob: unset it outside tests)", text, what);
}

px_status px_fault_parse(const char *text, px_fault_spec *f)
{
    static const struct {
        const char *word;
        int signo, to_parent;
    } actions[] = {{"kill", SIGKILL, 0}, {"stop", SIGSTOP, 0}, {"kill-worker", SIGKILL, 1},
                   {"stop-worker", SIGSTOP, 1}};
    const char *p = text;
    uint64_t v;
    int i;

    memset(f, 0, sizeof(*f));
    if (fault_word(&p, "host")) {
        if (!fault_number(&p, 0, 65535, 0, &v))
            return fault_bad(text, "host:H needs a host number 0..65535 and a ':'");
        f->host = (int)v;
    }
    if (!fault_word(&p, "chip") ||
        (!fault_number(&p, 0, 1023, 0, &v) && !fault_number(&p, 0, 1023, 1, &v)))
        return fault_bad(text, "chip:C (a chip number 0..1023) is missing or malformed");
    if (*p == '\0')
        return fault_bad(text, "the action, the point and the count after chip:C are missing");
    f->chip = (int)v;
    for (i = 0; i < (int)PX_ARRAY_SIZE(actions); i++)
        if (fault_word(&p, actions[i].word))
            break;
    if (i == (int)PX_ARRAY_SIZE(actions))
        return fault_bad(text, "the action after chip:C is not one of kill, stop, kill-worker, "
                         "stop-worker");
    f->signo = actions[i].signo;
    f->to_parent = actions[i].to_parent;
    for (i = 0; i < PX_FAULT_AT_COUNT; i++)
        if (fault_word(&p, fault_points[i]))
            break;
    if (i == PX_FAULT_AT_COUNT)
        return fault_bad(text, "the point after the action is not coll or call");
    f->point = (px_fault_point)i;
    if (!fault_number(&p, 1, UINT64_MAX / 2, 1, &v))
        return fault_bad(text, "the count N after the point must be a number from 1 and end "
                         "the text");
    f->n = v;
    return PX_OK;
}

void px_fault_arm(int host, int chip)
{
    const char *text = getenv("PLEXUS_TEST_FAULT");
    px_fault_spec f;

    if (text == NULL || text[0] == '\0' || px_fault_parse(text, &f) != PX_OK)
        return; /* refused already when the configuration was read */
    if (f.host != host || f.chip != chip)
        return;
    fault_spec = f;
    memset(fault_count, 0, sizeof(fault_count));
    px_fault_armed = 1;
}

void px_fault_hit(px_fault_point point)
{
    struct timespec ts;
    char line[256];
    pid_t target;
    int n;

    if (point != fault_spec.point || ++fault_count[point] != fault_spec.n)
        return;
    px_fault_armed = 0; /* once */
    target = fault_spec.to_parent ? getppid() : getpid();
    clock_gettime(CLOCK_REALTIME, &ts);
    n = snprintf(line, sizeof(line), "plexus: test fault: chip %d of host %d (pid %d) sends %s "
                 "to %s (pid %d) at its %s %llu (PLEXUS_TEST_FAULT) t=%lld.%06ld\n",
                 fault_spec.chip, fault_spec.host, (int)getpid(),
                 fault_spec.signo == SIGKILL ? "SIGKILL" : "SIGSTOP",
                 fault_spec.to_parent ? "its worker" : "itself", (int)target,
                 fault_point_words[point], (unsigned long long)fault_spec.n, (long long)ts.tv_sec,
                 ts.tv_nsec / 1000);
    if (n > 0)
        (void)!write(STDERR_FILENO, line, (size_t)PX_MIN(n, (int)sizeof(line) - 1));
    /* to itself: raise, so the signal is this thread's (a core thread at a collective): it
     * does not go on past the point while the kernel picks another thread for a kill() */
    if (fault_spec.to_parent)
        kill(target, fault_spec.signo);
    else
        raise(fault_spec.signo);
}
