#!/bin/sh
# mpi_fault.sh - a host that dies or stops in the middle of a domain spanning hosts (issue
# 21, "Failure"): `mpi_fault.sh MPIRUN PLEXUS kill|stop`. Two hosts (workers) run the
# allreduce example in a long loop over one domain; once both have allocated it, host 1's
# worker gets SIGKILL or SIGSTOP. What must hold:
#   kill: mpirun ends the job non-zero within 8 s (a rank died; x PLEXUS_TEST_SLACK);
#   stop: host 0's collective fails within PLEXUS_COMM_TIMEOUT_S (2 s here) + 6 s, naming
#         the mpi peer ("... the MPI proxies ... rank 2 (a chip of host 1)"), its worker ends
#         without waiting on MPI again, and mpirun ends the job non-zero;
#   both: no process of the job and no /dev/shm entry of plexus or Open MPI are left.
# Every loop is bounded; the whole job runs under timeout.
set -u
MPIRUN=$1 PLEXUS=$2 MODE=$3
LOG=$(mktemp /tmp/px-mpi-fault.XXXXXX)
shm0=$(ls /dev/shm | wc -l)
PLEXUS_LOG=info PLEXUS_COMM_TIMEOUT_S=2 timeout -k 5 60 "$MPIRUN" -np 2 "$PLEXUS" run allreduce \
    --chips 2 --cores 1 --iters 1000 --size 30000 >"$LOG" 2>&1 &
job=$!
fail() { echo "FAIL: $*"; cat "$LOG"; kill -9 "$job" 2>/dev/null; rm -f "$LOG"; exit 1; }
# both hosts have the domain (its log line), then host 1's worker (OMPI_COMM_WORLD_RANK=1)
i=0
while [ "$(grep -c 'comm\[allreduce\]: 4 ranks' "$LOG")" -lt 2 ]; do
    i=$((i + 1)); [ $i -gt 300 ] && fail "the domain was not allocated within 30 s"
    sleep 0.1
done
sleep 0.5
victim=""
for p in $(pgrep -f "run allreduce --chips 2 --cores 1 --iters 1000"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' &&
       [ "$(ps -o comm= -p "$(ps -o ppid= -p $p | tr -d ' ')")" != plexus ]; then
        victim=$p
    fi
done
[ -n "$victim" ] || fail "host 1's worker not found"
t0=$(date +%s.%N)
if [ "$MODE" = kill ]; then kill -9 "$victim"; else kill -STOP "$victim"; fi
wait "$job"; rc=$?
t1=$(date +%s.%N)
took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
echo "host 1 (pid $victim) got SIG$( [ "$MODE" = kill ] && echo KILL || echo STOP); mpirun exit status $rc after $took s"
[ "$rc" -ne 0 ] || fail "mpirun exited 0"
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 -o "$MODE" = kill ] || fail "the job ran into its timeout"
limit=$(awk -v s="${PLEXUS_TEST_SLACK:-1}" "BEGIN { print 8 * s }")
awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t < l) }' ||
    fail "the job took $took s to end (bound $limit s)"
if [ "$MODE" = stop ]; then
    grep -q "FAIL: allreduce: PX_ETIMEDOUT:.*rank [0-9] (a chip of host 1)" "$LOG" ||
        fail "host 0 did not fail naming a rank of host 1"
fi
i=0
while pgrep -f "run allreduce --chips 2 --cores 1 --iters 1000" >/dev/null; do
    i=$((i + 1)); [ $i -gt 50 ] && fail "processes of the job are left: $(pgrep -fa 'run allreduce --chips 2 --cores 1 --iters 1000')"
    sleep 0.1
done
shm1=$(ls /dev/shm | wc -l)
[ "$shm1" -le "$shm0" ] || fail "/dev/shm entries left: $(ls /dev/shm)"
grep "FAIL\|named\|proxies" "$LOG" | head -3 | cut -c1-300
rm -f "$LOG"
echo PASS
