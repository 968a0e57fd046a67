/*
 * file.h - the one way plexus writes an output file, and the one JSON string escaper.
 *
 * util_file_replace() writes a whole file atomically: a fresh temporary in the target
 * directory, named `.NAME.<pid>.<random>.tmp` and created with O_CREAT|O_EXCL|O_NOFOLLOW
 * |O_CLOEXEC and mode 0644 (so a link or file planted at that name is never followed or
 * reused: creation fails and another name is drawn), is written whole, fsync'd and renamed
 * over the final name. On any failure the temporary is unlinked and the final name keeps
 * its old file (or none): a reader never sees an empty or partial file. rename(2) replaces a
 * symbolic link planted at the final name by the new file; the link's target is untouched.
 *
 * Test-only hook: PX_TEST_ENOSPC=NAME (a file's base name, or "*" for every file) makes
 * the write of that file fail with ENOSPC after half its bytes, as a full disk would. It
 * exists so that tests can check the clean-up without a real full file system.
 */
#ifndef PX_UTIL_FILE_H
#define PX_UTIL_FILE_H

#include <stddef.h>
#include <plexus/status.h>

/*
 * Replaces path with the n bytes at data (see above). who names the caller for messages.
 * Returns PX_OK, PX_EINVAL for a NULL path or one too long, or PX_EIO with the path, the
 * step that failed and strerror.
 */
px_status util_file_replace(const char *path, const void *data, size_t n, const char *who);

/*
 * Reads path whole into *text (malloc'd, NUL-terminated; *len its bytes). Returns PX_OK,
 * PX_ENOENT when it does not exist (*text NULL, no message set), or PX_EIO with the path
 * (and strerror where it says more), prefixed with who.
 */
px_status util_file_read(const char *path, const char *who, char **text, size_t *len);

/*
 * Takes the output lock of directory dir: an exclusive flock(2) on dir/.plexus.lock (created
 * with O_NOFOLLOW, mode 0644, never removed), so that two runs into one directory take turns
 * instead of removing and reading back each other's files. A run that finds the lock held
 * logs once at info and waits, polling every 10 ms, at most timeout_s seconds. Returns PX_OK
 * with *fd (give it to util_dir_unlock), PX_ETIMEDOUT naming the directory when the other run
 * held it all that time, or PX_EIO with the path and strerror.
 */
px_status util_dir_lock(const char *dir, double timeout_s, const char *who, int *fd);

/* Releases a lock taken by util_dir_lock (closes fd); fd < 0 is ignored. */
void util_dir_unlock(int fd);

/* Receives n bytes of escaped output. */
typedef void (*util_put_cb)(void *ctx, const char *p, size_t n);

/*
 * Writes at most max bytes of s (stopping at a NUL; NULL is "") as a quoted JSON string to
 * put. The one rule: '"' and '\\' get a backslash; \n, \r, \t their short escapes; every other
 * byte below 0x20, 0x7f, and '<', '>', '&' become \u00XX (so the JSON can sit verbatim inside
 * an HTML <script> element); all other bytes (UTF-8 included) pass unchanged.
 */
void util_json_escape(const char *s, size_t max, util_put_cb put, void *ctx);

#endif
