/*
 * fork.h - plexus's own fork (the chips of a level-3 worker) in a process that runs threads.
 *
 * fork() copies only the calling thread: a lock that another thread holds at that moment
 * stays held forever in the child. glibc makes its own state safe (malloc's arenas and the
 * stdio list are locked around fork(); every FILE lock and the loader's locks are reset in
 * the child); libraries do theirs with pthread_atfork handlers (OpenBLAS, the interpreter
 * through the Python package's handler). What is left is plexus's own process-wide locks that
 * a child may take: the module that owns one guards it here (util_fork_guard, from a
 * constructor, so the list is complete before any thread of plexus runs), and util_fork takes
 * every guarded lock before fork() (so no other thread is inside one of those critical
 * sections at the copy), releases them in the parent and initialises them afresh in the
 * child. A guarded lock must be a leaf: its holder takes no other plexus lock meanwhile, so
 * taking them all in the order they were guarded cannot deadlock. A program's own fork() is
 * left alone: only util_fork takes them.
 */
#ifndef PX_UTIL_FORK_H
#define PX_UTIL_FORK_H

#include <pthread.h>
#include <sys/types.h>

#define UTIL_FORK_GUARDS_MAX 16

/* Adds m (a process-wide default mutex) to the locks util_fork holds across the fork. */
void util_fork_guard(pthread_mutex_t *m);

/* fork() with every guarded lock held: returns fork()'s value (the child's pid, 0 in the
 * child, -1 with errno). */
pid_t util_fork(void);

#endif
