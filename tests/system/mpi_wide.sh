#!/bin/sh
# mpi_wide.sh - a domain of more than 64 ranks (issue 21): `mpi_wide.sh MPIRUN SUITE HOSTS
# CHIPS`. HOSTS workers of CHIPS chips each (2 x 64: 128 ranks) run test_mpi_suite's cut
# suite (`wide`: allreduces of 7 .. 262147 elements, reduce_scatter, allgather, broadcast,
# alltoall, alltoallv, barrier), every result compared in the chips byte for byte with the
# rank-order fold. What must hold: every host prints PASS for HOSTS x CHIPS ranks over mpi,
# the job exits 0, and afterwards no process of the job (workers and chips, recorded while
# it ran) and no new /dev/shm entry of this job is left.
set -u
MPIRUN=$1 SUITE=$2 HOSTS=$3 CHIPS=$4
N=$((HOSTS * CHIPS))
LOG=$(mktemp "${TMPDIR:-/tmp}/px-mpi-wide.XXXXXX")
SHM0=$(mktemp "${TMPDIR:-/tmp}/px-mpi-shm.XXXXXX")
trap 'rm -f "$LOG" "$SHM0"' EXIT
trap 'exit 1' INT TERM
ls /dev/shm | sort >"$SHM0"
fail() { echo "FAIL: $*"; cut -c1-400 "$LOG" | tail -40; exit 1; }
timeout -k 5 150 "$MPIRUN" -np "$HOSTS" "$SUITE" "$CHIPS" wide >"$LOG" 2>&1 &
job=$!
# the job's processes while it runs: timeout -> mpirun -> the workers -> their chips
pids="" jobhex=0 i=0
while kill -0 "$job" 2>/dev/null; do
    launcher=$(pgrep -P "$job" | head -1)
    # no launcher yet (or any more): nothing to record; pgrep -P 1 would list init's children
    [ -n "$launcher" ] || { i=$((i + 1)); [ $i -gt 3000 ] && break; sleep 0.1; continue; }
    for w in $(pgrep -P "$launcher" 2>/dev/null); do
        case " $pids " in *" $w "*) ;; *) pids="$pids $w" ;; esac
        for c in $(pgrep -P "$w" 2>/dev/null); do
            case " $pids " in *" $c "*) ;; *) pids="$pids $c" ;; esac
        done
        if [ "$jobhex" = 0 ]; then # this job's Open MPI id (its vader segments' names)
            jobid=$(tr '\0' '\n' < /proc/$w/environ 2>/dev/null |
                    sed -n 's/^OMPI_MCA_ess_base_jobid=//p' | head -1)
            [ -n "$jobid" ] && jobhex=$(printf '%x' "$jobid")
        fi
    done
    i=$((i + 1)); [ $i -gt 3000 ] && break
    sleep 0.1
done
wait "$job"
rc=$?
[ "$rc" -eq 0 ] || fail "the job exited $rc"
[ "$(grep -c "^host [0-9]* of $HOSTS: $N ranks, rank 0 -> rank $((N - 1)) via mpi: every collective matches the rank-order fold" "$LOG")" -eq "$HOSTS" ] ||
    fail "not every host passed $N ranks"
[ "$(grep -c '^PASS$' "$LOG")" -eq "$HOSTS" ] || fail "not every host printed PASS"
! grep -q FAIL "$LOG" || fail "a host failed"
[ "$(echo $pids | wc -w)" -ge $((HOSTS + N)) ] ||
    fail "saw $(echo $pids | wc -w) processes of the job, expected $((HOSTS + N)) at least"
# processes still going after the job ended: 5 s x PLEXUS_TEST_SLACK to leave, in 0.1 s looks
looks=$(awk -v s="${PLEXUS_TEST_SLACK:-1}" 'BEGIN { printf "%d", 50 * (s > 1 ? s : 1) }')
i=0
left=x
while [ -n "$left" ]; do
    left=""
    for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
    [ -z "$left" ] && break
    i=$((i + 1)); [ $i -gt "$looks" ] && fail "processes of the job are left:$left"
    sleep 0.1
done
# new entries: this job's Open MPI segments, or anything not Open MPI's (but another
# checkout's benchmark anchor scratch, as mpi_fault.sh leaves it out)
left=$(ls /dev/shm | sort | comm -13 "$SHM0" - |
       grep -v '^vader_segment\.' | grep -v '^plexus-mpi-anchor\.' ;
       ls /dev/shm | sort | comm -13 "$SHM0" - | grep "^vader_segment\..*\.$jobhex\.")
[ -z "$left" ] || fail "/dev/shm entries left: $left"
grep "^host 0 of" "$LOG"
echo "PASS: $N ranks in one domain, $(echo $pids | wc -w) processes, none left"
