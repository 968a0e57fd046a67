#!/bin/sh
# mpi_dfx_print.sh - what `plexus run` prints about DFX under mpirun (issue 37): every host
# prints the outputs it wrote and where the job's merged set is, not another host's files as
# its own. `mpi_dfx_print.sh MPIRUN PLEXUS BASE`: two hosts of 2 chips run tp_mlp with every
# collector, each with its own --out (BASE/r0, BASE/r1), so that nothing either prints can
# come from the other's directory by accident. What must hold:
#   host 1: `dfx BASE/r1/hosts/host1` and its files there (dfx.json, trace.json, report.html),
#           `dfx merged BASE/r0 by host 0 (...)`, and no `dfx file` outside BASE/r1/hosts/host1;
#   host 0: its own (BASE/r0/hosts/host0) and the merged set it wrote (`dfx BASE/r0`, with
#           BASE/r0/dfx.json and trace.json), which exist.
# Each rank's stdout goes to a file of its own (BASE/out.<rank>); the job runs under timeout.
set -u
MPIRUN=$1 PLEXUS=$2 BASE=$3
fail() {
    echo "FAIL: $*"
    for r in 0 1; do echo "--- rank $r:"; cat "$BASE/out.$r" 2>/dev/null; done
    exit 1
}
rm -rf "$BASE" && mkdir -p "$BASE" || exit 1
timeout 100 "$MPIRUN" -np 2 sh -c 'r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
exec "$0" run tp_mlp --chips 2 --cores 1 --iters 1 --dfx all --out "$1/r$r" > "$1/out.$r" 2>&1' \
    "$PLEXUS" "$BASE" || fail "the job failed"
o0=$BASE/out.0 o1=$BASE/out.1
for f in dfx.json trace.json report.html; do
    grep -qx "dfx file $BASE/r1/hosts/host1/$f" "$o1" || fail "host 1 does not list its $f"
    grep -qx "dfx file $BASE/r0/hosts/host0/$f" "$o0" || fail "host 0 does not list its $f"
done
grep -qx "dfx $BASE/r1/hosts/host1" "$o1" || fail "host 1 does not name its directory"
grep -q "^dfx merged $BASE/r0 by host 0 (.*)\$" "$o1" ||
    fail "host 1 does not say where the merge is"
grep "^dfx file " "$o1" | grep -v "^dfx file $BASE/r1/hosts/host1/" &&
    fail "host 1 lists files it did not write"
grep -qx "dfx $BASE/r0" "$o0" || fail "host 0 does not name the merged set"
for f in dfx.json trace.json; do
    grep -qx "dfx file $BASE/r0/$f" "$o0" || fail "host 0 does not list the merged $f"
    [ -s "$BASE/r0/$f" ] || fail "the merged $f is missing"
done
[ -e "$BASE/r1/dfx.json" ] && fail "host 1 wrote a merged dfx.json in its own --out"
grep -q "^PASS\$" "$o0" && grep -q "^PASS\$" "$o1" || fail "a host did not pass"
echo "host 1 printed:"
grep "^dfx" "$o1"
echo PASS
