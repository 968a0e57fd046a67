/*
 * test_mpi_preinit.c - a program that initialised MPI itself, then makes a level-3 worker
 * under mpirun: px_worker_init must refuse with PX_ESTATE saying what to do (plexus forks its
 * chips before MPI starts and initialises MPI itself), never crash or hang. Links MPI (the
 * program's, not libplexus's); built where MPI is found (tests/system/mpi.cmake).
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include <plexus/plexus.h>

int main(int argc, char **argv)
{
    px_config c;
    px_worker *w = NULL;
    px_status st;
    int ok;

    MPI_Init(&argc, &argv);
    px_config_default(&c);
    c.level = 3;
    c.chips = 2;
    c.cores = 1;
    if ((st = px_worker_create(&c, &w)) != PX_OK) {
        printf("FAIL: px_worker_create: %s\n", px_last_error());
        return 1;
    }
    st = px_worker_init(w);
    ok = st == PX_ESTATE && strstr(px_last_error(), "MPI is initialised in this process "
                                   "already") != NULL &&
         strstr(px_last_error(), "create the level-3 worker before MPI_Init") != NULL;
    printf("px_worker_init: %s: %s\n", px_status_name(st), px_last_error());
    px_worker_destroy(w);
    MPI_Finalize();
    printf("%s\n", ok ? "PASS" : "FAIL: px_worker_init did not refuse as expected");
    return ok ? 0 : 1;
}
