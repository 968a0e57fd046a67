/*
 * mpi_fold.h - what the MPI shrink tests (test_mpi_shrink.c, test_mpi_kshrink.c) check on a
 * survivors' communicator: each member's window markers carried, and an allreduce of
 * non-integer inputs bit for bit the serial rank-order fold of the survivors' inputs.
 * Members are named by global id g = host * chips + chip; `dead` is a mask of global ids.
 */
#ifndef PX_TESTS_MPI_FOLD_H
#define PX_TESTS_MPI_FOLD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <plexus/plexus.h>

/* The input of member g at element i: not an integer, so the fold's order shows in the bits. */
static inline double mpi_fold_in(int g, size_t i)
{
    return 0.1 * (g + 1) + 1e-3 * (double)i + 1.0 / (3.0 + (double)g);
}

/*
 * On c (every member of ids 0 .. ids-1 but those in dead, in order): checks this member's
 * (global id me) nmark markers 1000 me + i at x (unless nmark is 0), then allreduces count
 * inputs at x + nmark and compares them with the rank-order fold. PX_OK, the allreduce's
 * failure, or PX_EIO naming what differs (host: this worker's, for the message).
 */
static inline px_status mpi_fold_check(px_comm *c, double *x, int nmark, size_t count, int me,
                                       int ids, uint64_t dead, int host)
{
    double *y = x + nmark;
    int n = 0;
    px_status st;

    for (int g = 0; g < ids; g++)
        n += !(dead >> g & 1);
    if (px_comm_size(c) != n)
        return px_set_error(PX_EIO, "host %d chip %d: the communicator has %d ranks; %d "
                            "expected", host, px_chip_index(), px_comm_size(c), n);
    for (int i = 0; i < nmark; i++)
        if (x[i] != 1000.0 * me + i)
            return px_set_error(PX_EIO, "host %d chip %d: marker %d is %g, expected %g (the "
                                "window was not carried)", host, px_chip_index(), i, x[i],
                                1000.0 * me + i);
    for (size_t i = 0; i < count; i++)
        y[i] = mpi_fold_in(me, i);
    if ((st = px_comm_allreduce(c, y, count, PX_F64, PX_OP_SUM)) != PX_OK)
        return st;
    for (size_t i = 0; i < count; i++) {
        double want = 0;

        for (int g = 0, r = 0; g < ids; g++) {
            if (dead >> g & 1)
                continue;
            want = r++ == 0 ? mpi_fold_in(g, i) : want + mpi_fold_in(g, i);
        }
        if (memcmp(&want, &y[i], sizeof(want)) != 0)
            return px_set_error(PX_EIO, "host %d chip %d: element %zu is %.17g, the rank-order "
                                "fold %.17g (%d ranks)", host, px_chip_index(), i, y[i], want,
                                n);
    }
    return PX_OK;
}

#endif
