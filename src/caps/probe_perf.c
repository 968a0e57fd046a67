/*
 * probe_perf.c - facts about observing processes: process_vm_readv (the host reads another
 * process's memory) and perf_event counters (the PMU collector). Each is tried for real on
 * this process and undone at once: one word read from our own memory, one counter opened
 * (disabled, user space only) and closed.
 *
 * When perf_event_open is refused, the note carries the errno text and either the value of
 * /proc/sys/kernel/perf_event_paranoid (a permission error) or the hint that the machine has
 * no such counter (typical of virtual machines).
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "caps/caps_internal.h"
#include "util/perf.h"

#define CAPS_PARANOID_PATH "/proc/sys/kernel/perf_event_paranoid"

static void caps_probe_vm_readv(px_caps *c)
{
    volatile uint64_t word = 0x706c657875735f31ull;
    uint64_t copy = 0;
    struct iovec local = {.iov_base = &copy, .iov_len = sizeof(copy)};
    struct iovec remote = {.iov_base = (void *)&word, .iov_len = sizeof(word)};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);

    if (n == (ssize_t)sizeof(copy) && copy == word)
        caps_fact_set(c, PX_FACT_PROCESS_VM_READV, 1, PX_SRC_OS,
                      "read one word of this process's memory");
    else if (n < 0)
        caps_fact_set(c, PX_FACT_PROCESS_VM_READV, 0, PX_SRC_OS,
                      "process_vm_readv on this process failed: %s", strerror(errno));
    else
        caps_fact_set(c, PX_FACT_PROCESS_VM_READV, 0, PX_SRC_OS,
                      "process_vm_readv on this process read %zd bytes, wrong data", n);
}

/* Opens one disabled user-space counter on this process and closes it; 0 or errno. */
static int caps_try_counter(uint32_t type, uint64_t config)
{
    int fd = px_perf_open(type, config, -1, 0, 1);

    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

static void caps_perf_refused(px_caps *c, px_fact_id id, const char *what, int err)
{
    char paranoid[32];

    if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV) {
        caps_fact_set(c, id, 0, PX_SRC_OS, "perf_event_open(%s) failed: %s (no such counter "
                      "here; a VM without a virtual PMU?)", what, strerror(err));
        return;
    }
    if (caps_read_line(CAPS_PARANOID_PATH, paranoid, sizeof(paranoid)) != 0)
        snprintf(paranoid, sizeof(paranoid), "unknown");
    caps_fact_set(c, id, 0, PX_SRC_OS, "perf_event_open(%s) failed: %s (perf_event_paranoid=%s)",
                  what, strerror(err), paranoid);
}

static void caps_probe_perf_hw(px_caps *c)
{
    int err = caps_try_counter(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS);

    if (err == 0) {
        caps_fact_set(c, PX_FACT_PERF_HW, 1, PX_SRC_OS,
                      "perf_event_open(hardware instructions) on this process");
        return;
    }
    err = caps_try_counter(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
    if (err == 0)
        caps_fact_set(c, PX_FACT_PERF_HW, 1, PX_SRC_OS,
                      "perf_event_open(hardware cpu-cycles) on this process (no instructions)");
    else
        caps_perf_refused(c, PX_FACT_PERF_HW, "hardware instructions and cpu-cycles", err);
}

static void caps_probe_perf_sw(px_caps *c)
{
    int err = caps_try_counter(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);

    if (err == 0)
        caps_fact_set(c, PX_FACT_PERF_SW, 1, PX_SRC_OS,
                      "perf_event_open(software task-clock) on this process");
    else
        caps_perf_refused(c, PX_FACT_PERF_SW, "software task-clock", err);
}

/* Fills process_vm_readv, perf_hw and perf_sw; never fails. */
void caps_probe_perf(px_caps *c)
{
    caps_probe_vm_readv(c);
    caps_probe_perf_hw(c);
    caps_probe_perf_sw(c);
}
