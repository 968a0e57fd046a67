#!/bin/sh
# mpi_dfx_print.sh - what `plexus run` prints about DFX under mpirun (issue 37): every host
# prints the outputs it wrote and where the job's merged set is, never another host's files
# as its own. `mpi_dfx_print.sh MPIRUN PLEXUS BASE`: two hosts of 2 chips run tp_mlp with
# every collector twice: each host with its own --out (BASE/own/r0, BASE/own/r1: nothing one
# prints can come from the other's directory by accident), then both with one --out
# (BASE/shared/r, where host 0's merged files are there for host 1 to see). In each, with D0
# host 0's --out and D1 host 1's, what must hold:
#   host 1: `dfx D1/hosts/host1` and its files there (dfx.json, trace.json, report.html),
#           `dfx merged D0 by host 0 (...)`, and no `dfx file` outside D1/hosts/host1;
#   host 0: its own (D0/hosts/host0) and the merged set it wrote (`dfx D0`, with D0/dfx.json
#           and trace.json), which exist.
# Each rank's stdout goes to a file of its own; each job runs under timeout.
set -u
MPIRUN=$1 PLEXUS=$2 BASE=$3
fail() {
    echo "FAIL ($CASE): $*"
    for r in 0 1; do echo "--- rank $r:"; cat "$BASE/$CASE/out.$r" 2>/dev/null; done
    exit 1
}
rm -rf "$BASE" || exit 1
for CASE in own shared; do
    mkdir -p "$BASE/$CASE" || exit 1
    if [ "$CASE" = own ]; then D0=$BASE/own/r0 D1=$BASE/own/r1; else D0=$BASE/shared/r D1=$D0; fi
    timeout 100 "$MPIRUN" -np 2 sh -c 'r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
[ "$2" = own ] && out=$1/own/r$r || out=$1/shared/r
exec "$0" run tp_mlp --chips 2 --cores 1 --iters 1 --dfx all --out "$out" > "$1/$2/out.$r" 2>&1' \
        "$PLEXUS" "$BASE" "$CASE" || fail "the job failed"
    o0=$BASE/$CASE/out.0 o1=$BASE/$CASE/out.1
    for f in dfx.json trace.json report.html; do
        grep -qx "dfx file $D1/hosts/host1/$f" "$o1" || fail "host 1 does not list its $f"
        grep -qx "dfx file $D0/hosts/host0/$f" "$o0" || fail "host 0 does not list its $f"
    done
    grep -qx "dfx $D1/hosts/host1" "$o1" || fail "host 1 does not name its directory"
    grep -q "^dfx merged $D0 by host 0 (.*)\$" "$o1" ||
        fail "host 1 does not say where the merge is"
    grep "^dfx file " "$o1" | grep -v "^dfx file $D1/hosts/host1/" &&
        fail "host 1 lists files it did not write"
    grep -qx "dfx $D0" "$o0" || fail "host 0 does not name the merged set"
    for f in dfx.json trace.json; do
        grep -qx "dfx file $D0/$f" "$o0" || fail "host 0 does not list the merged $f"
        [ -s "$D0/$f" ] || fail "the merged $f is missing"
    done
    [ "$CASE" = own ] && [ -e "$D1/dfx.json" ] && fail "host 1 wrote a merged dfx.json"
    grep -q "^PASS\$" "$o0" && grep -q "^PASS\$" "$o1" || fail "a host did not pass"
    echo "$CASE: host 1 printed:"
    grep "^dfx" "$o1"
done
echo PASS
