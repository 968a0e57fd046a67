#!/bin/sh
# mpi_mismatch.sh MPIRUN ARGS...: runs an MPI job (issue 37: hosts that must refuse each
# other), prints its whole output, then each rank's last line (PASS or FAIL: ...) sorted, so
# that a test can require one line per host in a fixed order whatever order the ranks wrote
# them in, then mpirun's exit status.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "final lines, sorted:"
printf '%s\n' "$out" | grep -E '^(PASS$|FAIL: )' | LC_ALL=C sort
echo "exit status $rc"
