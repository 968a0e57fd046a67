#!/bin/sh
# netns_check.sh - the checks of tests/system/netns.cmake around the namespace harness
# (mpi_hosts.sh, beside this file).
#   netns_check.sh expect  MPIRUN HOSTS [--want RE]... -- COMMAND ARGS...
#   netns_check.sh cleanup MPIRUN PLEXUS
#   netns_check.sh unprivileged
# expect: runs COMMAND under the harness at HOSTS hosts; passes when it exits 0, every --want
# RE (an extended regular expression) matches as many lines of its output as it was given
# (`--want ^PASS$ --want ^PASS$`: two lines PASS), and nothing of the run is left behind.
# cleanup: a job that fails (an unknown example) and a job the harness's 3 s timeout ends (its
# ranks ran plexus, then ignore SIGTERM) both exit non-zero, and neither leaves a namespace
# (`ip netns list`), a link in this namespace (`ip link`), a temporary folder or a rank's
# process behind. unprivileged: the harness run as uid 65534 (setpriv) exits 77 saying it is
# not root, and as root of a user namespace (unshare -r) 77 with the reason (or runs, where
# such a root may make network namespaces). The harness's own 77 passes on as 77.
set -u
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/mpi_hosts.sh
mode=$1
shift

fail() { echo "FAIL: $*"; exit 1; }

# harness_run LOG ARGS...: runs the harness in the background, its output into LOG and
# echoed; sets pid (the harness's pid, the <pid> of its names) and rc.
harness_run() {
    log=$1
    shift
    sh "$harness" "$@" > "$log" 2>&1 &
    pid=$!
    wait "$pid"
    rc=$?
    cat "$log"
    [ "$rc" -ne 77 ] || exit 77
}

# left_by PID: prints what the harness run PID left behind, nothing when clean.
left_by() {
    ip netns list | grep "^pxh-$1-" | sed 's/^/namespace /'
    ip -o link | grep -E ": (pxh[0-9]|p[0-9]+)[@:]" | sed 's/^/link /'
    ls -d "${TMPDIR:-/tmp}/pxh-$1."* 2>/dev/null | sed 's/^/temporary /'
}

check_expect() {
    mpirun=$1 hosts=$2
    shift 2
    wants=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        [ "$1" = --want ] && [ $# -ge 2 ] || fail "netns_check.sh expect: bad argument $1"
        wants="$wants$2
"
        shift 2
    done
    [ $# -ge 2 ] || fail "netns_check.sh expect: no command"
    shift
    out=$(mktemp)
    harness_run "$out" --mpirun "$mpirun" --hosts "$hosts" --timeout 120 -- "$@"
    bad=0
    [ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc, expected 0"; bad=1; }
    printf '%s' "$wants" | sort | uniq -c | while read -r n line; do
        got=$(grep -cE -- "$line" "$out")
        [ "$got" -ge "$n" ] || echo "FAIL: \"$line\" on $got lines, expected $n"
    done > "$out.why"
    [ -s "$out.why" ] && { cat "$out.why"; bad=1; }
    left=$(left_by "$pid")
    [ -z "$left" ] || { echo "FAIL: left behind:"; echo "$left"; bad=1; }
    rm -f "$out" "$out.why"
    [ "$bad" -eq 0 ] || exit 1
    echo "PASS"
}

check_cleanup() {
    mpirun=$1 plexus=$2
    out=$(mktemp)
    echo "== a job that fails"
    harness_run "$out" --mpirun "$mpirun" --hosts 2 --timeout 60 -- \
        "$plexus" run nonexistent_example
    [ "$rc" -ne 0 ] || fail "the failing job exited 0"
    grep -q 'unknown example "nonexistent_example"' "$out" || fail "no error from the job"
    left=$(left_by "$pid")
    [ -z "$left" ] || fail "left behind by the failing job: $left"
    echo "== a job ended by the timeout (3 s; its ranks ignore SIGTERM)"
    harness_run "$out" --mpirun "$mpirun" --hosts 3 --timeout 3 -- sh -c \
        '"$0" run multi_chip --chips 2 --cores 1 > /dev/null; trap "" TERM; sleep 61; sleep 62' \
        "$plexus"
    [ "$rc" -eq 124 ] || fail "the timed-out job exited $rc, expected 124"
    grep -q "ran past 3 s" "$out" || fail "the harness did not say the job ran past its time"
    left=$(left_by "$pid")
    [ -z "$left" ] || fail "left behind by the timed-out job: $left"
    ! ps -eo args | grep -q "^sleep 6[12]$" || fail "a rank of the timed-out job still runs"
    rm -f "$out"
    echo "PASS"
}

check_unprivileged() {
    if [ "$(id -u)" != 0 ]; then
        out=$(sh "$harness" -- true 2>&1)
        rc=$?
        echo "as uid $(id -u): $out (exit $rc)"
        [ "$rc" -eq 77 ] && [ "${out#skipped: not root}" != "$out" ] || fail "not refused"
        echo "PASS"
        return
    fi
    if command -v setpriv > /dev/null 2>&1; then
        out=$(setpriv --reuid=65534 --regid=65534 --clear-groups sh "$harness" -- true 2>&1)
        rc=$?
        echo "as uid 65534: $out (exit $rc)"
        [ "$rc" -eq 77 ] && [ "${out#skipped: not root}" != "$out" ] || fail "not refused"
    else
        echo "setpriv not found: uid 65534 not tried"
    fi
    if unshare -r true 2> /dev/null; then
        out=$(unshare -r sh "$harness" -- true 2>&1)
        rc=$?
        echo "as root of a user namespace: $out (exit $rc)"
        # where a user namespace's root can make network namespaces the harness may run
        [ "$rc" -eq 0 ] || { [ "$rc" -eq 77 ] && [ "${out#skipped: }" != "$out" ]; } ||
            fail "neither refused with a reason nor run"
    else
        echo "unshare -r not allowed here: a user namespace not tried"
    fi
    echo "PASS"
}

case $mode in
    expect) check_expect "$@" ;;
    cleanup) check_cleanup "$@" ;;
    unprivileged) check_unprivileged ;;
    *) fail "netns_check.sh: unknown mode $mode" ;;
esac
