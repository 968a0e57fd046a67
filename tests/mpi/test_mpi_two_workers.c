/*
 * test_mpi_two_workers.c - two level-3 workers one after the other in one process under
 * mpirun (issue 34). The first runs the allreduce example under MPI (its proxy initialises
 * MPI; its destroy finalises it) and passes. A second cannot: MPI starts once per process
 * and Open MPI does not support fork after MPI_Init, so it is refused with PX_ESTATE saying
 * why and what to do, and forks nothing: by the comm layer when it wants MPI (under mpirun,
 * PLEXUS_MPI=auto), by level 3's fork check when it has PLEXUS_MPI=off. Each rank prints
 * "rank R: PASS" or "rank R: FAIL: <why>". Links plexus only (MPI comes through the plugin).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <plexus/plexus.h>

#include "examples.h"
#include "mpi/mpi_load.h"

/* Live child processes of this process. */
static int children(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[300], buf[512], *p;
        FILE *f;
        int ppid;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
        fclose(f);
        if (p != NULL && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == getpid())
            n++;
    }
    if (d != NULL)
        closedir(d);
    return n;
}

/* Runs the allreduce example on a level-3 worker of 2 chips; returns its status (message in
 * px_last_error) and sets *ok to its check. */
static px_status run_allreduce(int *ok)
{
    px_example_opts o = {.size = 1000, .iters = 1};
    px_example_result r;
    px_config c;
    px_status st;

    px_config_default(&c);
    c.level = 3;
    c.chips = 2;
    c.cores = 1;
    st = px_example_exec(px_example_find("allreduce"), &c, &o, &r);
    *ok = st == PX_OK && r.check_ok;
    return st;
}

/* The second worker's refusal: PX_ESTATE whose message has want1 and want2, nothing forked. */
static int refused(const char *what, px_status st, const char *want1, const char *want2,
                   int rank)
{
    int good = st == PX_ESTATE && strstr(px_last_error(), want1) != NULL &&
               strstr(px_last_error(), want2) != NULL && children() == 0;

    printf("rank %d: %s: %s: %s\n", rank, what, px_status_name(st), px_last_error());
    return good;
}

int main(void)
{
    int rank = px_mpi_launcher_rank(), ok = 0, pass;
    px_status st = run_allreduce(&ok);

    printf("rank %d: first worker: %s%s\n", rank, px_status_name(st),
           ok ? ", allreduce checked" : "");
    pass = ok && px_mpi_state() == PX_MPI_STATE_DONE && children() == 0;
    st = run_allreduce(&ok);
    pass &= refused("second worker (PLEXUS_MPI=auto)", st, "MPI starts once per process",
                    "run everything on the first worker", rank);
    setenv("PLEXUS_MPI", "off", 1);
    st = run_allreduce(&ok);
    pass &= refused("second worker (PLEXUS_MPI=off)", st, "Open MPI does not support fork "
                    "after MPI_Init", "one level-3 worker per process under MPI", rank);
    printf("rank %d: %s\n", rank, pass ? "PASS" : "FAIL: see the lines above");
    return pass ? 0 : 1;
}
