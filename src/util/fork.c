/*
 * fork.c - plexus's own fork: fork() with plexus's process-wide locks held (see fork.h).
 */
#include "util/fork.h"

#include <stdatomic.h>
#include <unistd.h>

#include "util/log.h"

static pthread_mutex_t *util_fork_guards[UTIL_FORK_GUARDS_MAX];
static _Atomic int util_fork_nguards;

void util_fork_guard(pthread_mutex_t *m)
{
    int i = atomic_fetch_add(&util_fork_nguards, 1);

    if (i >= UTIL_FORK_GUARDS_MAX) { /* a build-time mistake: raise UTIL_FORK_GUARDS_MAX */
        atomic_fetch_sub(&util_fork_nguards, 1);
        PX_LOG_ERROR("fork: more than %d guarded locks; one is not held across plexus's "
                     "forks", UTIL_FORK_GUARDS_MAX);
        return;
    }
    util_fork_guards[i] = m;
}

pid_t util_fork(void)
{
    int n = atomic_load(&util_fork_nguards);
    pid_t pid;

    for (int i = 0; i < n; i++)
        pthread_mutex_lock(util_fork_guards[i]);
    pid = fork();
    for (int i = n - 1; i >= 0; i--) {
        if (pid == 0)
            pthread_mutex_init(util_fork_guards[i], NULL); /* its holder is not in this copy */
        else
            pthread_mutex_unlock(util_fork_guards[i]);
    }
    return pid;
}
