#!/bin/sh
# mpi_hosts.sh - run one MPI job over several "hosts" made on this machine, one network
# namespace per host (issue 21, level 4). Used by ctest (tests/system/netns.cmake) and by hand.
#
#   mpi_hosts.sh [--hosts H] [--np-per-host N] [--timeout S] [--mpirun PATH] -- COMMAND ARGS...
#
# H (2..4, default 2) namespaces pxh-<pid>-<i> are made, each with one link, pxh0, holding
# 10.213.0.<i+1>/24: for H = 2 the two ends of one veth pair; for H > 2 a veth pair per host
# whose other end sits in a bridge in one more namespace, pxh-<pid>-br. (One host needs no
# harness, and Open MPI's TCP would not take an address on lo.) The range 10.213.0.0/24 exists
# only inside those namespaces: they have no default route and no other link but lo, and
# nothing is added to or changed in the machine's own namespace, so the job's traffic can go
# only to those addresses or to loopback. IPv6 is switched off inside them.
#
# COMMAND runs as one job of H x N ranks, ranks iN..iN+N-1 in namespace i, each host with its
# own UTS namespace and hostname host-<i>, and PLEXUS_HOST_ID=host-<i> in its ranks' environment
# (so plexus sees H hosts). The launch, as it works with Open MPI 4.1.4:
#  - mpirun itself runs in namespace 0 (host-0) with a hostfile naming the hosts by their test
#    addresses (`10.213.0.<i+1> slots=N`); Open MPI sees 10.213.0.1 as its own node and starts
#    rank 0's host's processes itself;
#  - `--mca plm_rsh_agent <agent>`: for every other host mpirun runs `<agent> 10.213.0.<i+1>
#    orted ...` as it would ssh; the agent (written into this run's temporary folder) maps the
#    address to namespace i and runs the command there like a remote shell would:
#    `ip netns exec pxh-<pid>-<i> unshare --uts sh -c 'hostname host-<i>; ...; <command>'`;
#    `plm_rsh_no_tree_spawn 1` keeps every launch in mpirun (no orted launching orteds);
#  - the orted inherits mpirun's environment through the agent (not a login shell as with
#    ssh), so what the caller exported (PLEXUS_LOG, ...) reaches every rank, as on one host;
#    the agent only replaces PLEXUS_HOST_ID and HOSTNAME;
#  - `btl self,vader,tcp`, `btl_tcp_if_include` and `oob_tcp_if_include` 10.213.0.0/24: MPI's
#    and the launcher's TCP only over the test links (vader between ranks of one host);
#  - `orte_tmpdir_base` in this run's temporary folder, so Open MPI's session folders go too;
#  - OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (the harness runs as root).
#
# The whole job runs under `timeout` (S seconds, default 240, PXH_TIMEOUT_S; then KILL 10 s
# later). On any end, also on failure, SIGINT, SIGTERM or SIGHUP, a trap ends every process
# left in the namespaces (TERM, then KILL after at most 5 s; `ip netns pids`, since the orteds
# run --daemonize, outside mpirun's process tree), deletes the namespaces (which removes their
# links and the bridge) and the temporary folder. The job's output is passed through; the exit
# status is the job's (124 when the timeout ended it, 137 when it had to kill it, 128+n when a
# signal ended the harness). Where the harness cannot run (not root, `ip netns add` refused,
# no mpirun, no `unshare`) it prints `skipped: <why>` and exits 77.
set -u

PXH_NET=10.213.0        # the test range's first three octets; hosts are .1 to .4
PXH_LINK=pxh0           # the link's name inside each host's namespace

usage() {
    echo "usage: $0 [--hosts 2..4] [--np-per-host 1..8] [--timeout S] [--mpirun PATH]" \
         "-- COMMAND ARGS..." >&2
    exit 2
}

skip() {
    echo "skipped: $*"
    exit 77
}

say() {
    echo "mpi_hosts: $*" >&2
}

hosts=2
npph=1
limit=${PXH_TIMEOUT_S:-240}
mpirun=${PXH_MPIRUN:-mpirun}
while [ $# -gt 0 ]; do
    case $1 in
        --hosts) [ $# -ge 2 ] || usage; hosts=$2; shift 2 ;;
        --np-per-host) [ $# -ge 2 ] || usage; npph=$2; shift 2 ;;
        --timeout) [ $# -ge 2 ] || usage; limit=$2; shift 2 ;;
        --mpirun) [ $# -ge 2 ] || usage; mpirun=$2; shift 2 ;;
        --) shift; break ;;
        *) usage ;;
    esac
done
[ $# -ge 1 ] || usage
case $hosts in [2-4]) ;; *) say "--hosts $hosts: expected 2 to 4"; exit 2 ;; esac
case $npph in [1-8]) ;; *) say "--np-per-host $npph: expected 1 to 8"; exit 2 ;; esac
case $limit in ''|*[!0-9]*|0) say "--timeout $limit: expected whole seconds > 0"; exit 2 ;; esac

# 1. Can it run here?
[ "$(id -u)" = 0 ] || skip "not root (uid $(id -u)): network namespaces need root"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
command -v "$mpirun" >/dev/null 2>&1 || skip "no mpirun ($mpirun not found)"
command -v unshare >/dev/null 2>&1 || skip "no unshare command (util-linux)"
command -v timeout >/dev/null 2>&1 || skip "no timeout command (coreutils)"
mpirun=$(command -v "$mpirun")

prefix=pxh-$$
tmp=
made=

# Ends every process in namespace $1: TERM, up to 5 s for them to go, then KILL.
ns_end_pids() {
    pids=$(ip netns pids "$1" 2>/dev/null)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086 # one word per pid
    kill -TERM $pids 2>/dev/null
    n=0
    while [ $n -lt 50 ] && [ -n "$(ip netns pids "$1" 2>/dev/null)" ]; do
        sleep 0.1
        n=$((n + 1))
    done
    pids=$(ip netns pids "$1" 2>/dev/null)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    n=0
    while [ $n -lt 20 ] && [ -n "$(ip netns pids "$1" 2>/dev/null)" ]; do
        sleep 0.1
        n=$((n + 1))
    done
}

# Removes all this run made: processes in its namespaces, the namespaces (with their links),
# the temporary folder. Safe to call more than once.
cleanup() {
    for ns in $made; do
        ns_end_pids "$ns"
    done
    for ns in $made; do
        ip netns del "$ns" 2>/dev/null || say "could not delete namespace $ns"
    done
    made=
    [ -z "$tmp" ] || rm -rf "$tmp"
    tmp=
}

job=
# shellcheck disable=SC2317 # reached through the traps below
on_signal() {
    say "$1: ending the job"
    [ -z "$job" ] || kill -TERM "$job" 2>/dev/null
    cleanup
    exit "$2"
}
trap cleanup EXIT
trap 'on_signal SIGINT 130' INT
trap 'on_signal SIGTERM 143' TERM
trap 'on_signal SIGHUP 129' HUP

# 2. The namespaces and their links. The first `ip netns add` doubles as the probe.
ns_add() {
    err=$(ip netns add "$1" 2>&1) || return 1
    made="$made $1"
    ip -n "$1" link set lo up
    # no IPv6: no link-local chatter, nothing but the test addresses
    ip netns exec "$1" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' 2>/dev/null
    return 0
}

ns_add "$prefix-0" || skip "cannot create a network namespace (ip netns add: $err)"
unshare --uts true 2>/dev/null || skip "cannot create a UTS namespace (unshare --uts failed)"
i=1
while [ $i -lt "$hosts" ]; do
    ns_add "$prefix-$i" || { say "ip netns add $prefix-$i: $err"; exit 1; }
    i=$((i + 1))
done

set -e
if [ "$hosts" -eq 2 ]; then
    ip link add "$PXH_LINK" netns "$prefix-0" type veth peer name "$PXH_LINK" netns "$prefix-1"
elif [ "$hosts" -gt 2 ]; then
    ns_add "$prefix-br" || { say "ip netns add $prefix-br: $err"; exit 1; }
    ip -n "$prefix-br" link add br0 type bridge
    ip -n "$prefix-br" link set br0 up
    i=0
    while [ $i -lt "$hosts" ]; do
        ip link add "$PXH_LINK" netns "$prefix-$i" type veth peer name "p$i" netns "$prefix-br"
        ip -n "$prefix-br" link set "p$i" master br0
        ip -n "$prefix-br" link set "p$i" up
        i=$((i + 1))
    done
fi
i=0
while [ $i -lt "$hosts" ]; do
    ip -n "$prefix-$i" addr add "$PXH_NET.$((i + 1))/24" dev "$PXH_LINK"
    ip -n "$prefix-$i" link set "$PXH_LINK" up
    i=$((i + 1))
done

# 3. The agent, the hostfile and the job.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")
cat > "$tmp/agent" <<EOF
#!/bin/sh
# mpirun's rsh agent for $prefix: [options] HOST COMMAND..., HOST one of $PXH_NET.1 to .$hosts.
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
case \$1 in
    $PXH_NET.[1-$hosts]) i=\$((\${1##*.} - 1)) ;;
    *) echo "mpi_hosts agent: unknown host \$1" >&2; exit 1 ;;
esac
shift
PLEXUS_HOST_ID=host-\$i HOSTNAME=host-\$i
export PLEXUS_HOST_ID HOSTNAME
exec ip netns exec "$prefix-\$i" unshare --uts sh -c "hostname host-\$i && \$*"
EOF
chmod 700 "$tmp/agent"
i=0
while [ $i -lt "$hosts" ]; do
    echo "$PXH_NET.$((i + 1)) slots=$npph" >> "$tmp/hostfile"
    i=$((i + 1))
done
mkdir "$tmp/ompi"
set +e

OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PLEXUS_HOST_ID=host-0 HOSTNAME=host-0
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PLEXUS_HOST_ID HOSTNAME
timeout -k 10 "$limit" \
    ip netns exec "$prefix-0" unshare --uts sh -c 'hostname host-0 && exec "$@"' sh \
    "$mpirun" --hostfile "$tmp/hostfile" -np $((hosts * npph)) \
        --mca plm_rsh_agent "$tmp/agent" --mca plm_rsh_no_tree_spawn 1 \
        --mca btl self,vader,tcp \
        --mca btl_tcp_if_include "$PXH_NET.0/24" --mca oob_tcp_if_include "$PXH_NET.0/24" \
        --mca orte_tmpdir_base "$tmp/ompi" \
        "$@" &
job=$!
wait "$job"
rc=$?
job=
case $rc in
    124) say "the job ran past ${limit} s and was ended" ;;
    137) say "the job ran past ${limit} s and was killed 10 s later" ;;
esac
cleanup
exit $rc
