/*
 * caps_internal.h - the capability probe's internal contract.
 *
 * The probe is split by source: probe_host.c reads the operating system, probe_mpi.c looks
 * for an MPI library and launcher, profiles.c holds the device-profile table and derives the
 * effective flags, caps_out.c writes the table as JSON or text. caps.c ties them together
 * behind the public API in plexus/caps.h. Other writers (the CLI, dfx.json) reuse the JSON
 * helpers declared here to embed the facts into larger documents.
 */
#ifndef PX_CAPS_INTERNAL_H
#define PX_CAPS_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include <plexus/caps.h>

/*
 * Writes just the facts object `{"host_page_size": {...}, ...}` to f, starting at the current
 * position: one fact per line indented by indent + 2 spaces, the closing brace indented by
 * indent spaces, no trailing newline. Returns PX_OK, or PX_EIO when writing to f failed.
 */
px_status px_caps_write_json_facts(const px_caps *c, FILE *f, int indent);

/*
 * Writes s as a JSON string literal (quotes included; quote, backslash and control
 * characters escaped, other bytes passed through as UTF-8). Returns PX_OK, or PX_EIO when
 * writing to f failed.
 */
px_status px_caps_json_string(FILE *f, const char *s);

/* Sets fact id to an integer or boolean value with its source and a printf-style note. */
void caps_fact_set(px_caps *c, px_fact_id id, int64_t value, px_fact_source src,
                   const char *fmt, ...) PX_PRINTF(5, 6);

/* Sets fact id (an S fact) to text with its source and a printf-style note. */
void caps_fact_set_text(px_caps *c, px_fact_id id, const char *text, px_fact_source src,
                        const char *fmt, ...) PX_PRINTF(5, 6);

/* Fills the host facts: memory (caps_probe_memory), perf (caps_probe_perf), TSC, CPUs, identity. */
void caps_probe_host(px_caps *c);

/* Fills host_page_size, the huge-page facts, thp_mode, memfd, memfd_hugetlb, shm_free_bytes. */
void caps_probe_memory(px_caps *c);

/* Fills process_vm_readv, perf_hw and perf_sw. */
void caps_probe_perf(px_caps *c);

/*
 * Reads the first line of a small file into buf (newline stripped). Returns 0, or the errno
 * of the failing open or read (ENODATA for an empty file).
 */
int caps_read_line(const char *path, char *buf, size_t n);

/* Fills the MPI facts (library present, launched by a launcher, initialised). */
void caps_probe_mpi(px_caps *c);

/*
 * Returns PX_OK when name is a built-in device profile, else PX_EINVAL with a message that
 * lists the valid names.
 */
px_status caps_profile_check(const char *name);

/*
 * Fills the device facts from profile `name` (which caps_profile_check accepted) and derives
 * the effective flags from them and the host facts already in c.
 */
void caps_apply_profile(px_caps *c, const char *name);

/* Returns the one-line description of a built-in profile, or NULL for an unknown name. */
const char *caps_profile_describe(const char *name);

#endif
