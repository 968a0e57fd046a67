#!/bin/sh
# hugepages.sh - the ctest fixture that reserves huge pages for the DFX mapped_huge test.
#
#   hugepages.sh reserve N STATE   make at least N huge pages free (raising vm.nr_hugepages),
#                                  remembering the old value in STATE
#   hugepages.sh restore STATE     put vm.nr_hugepages back to the remembered value
#
# It never fails: when the pages cannot be reserved (not root, no hugetlbfs, no memory), it
# says why and the test that needs them skips (exit 77) with the probe's numbers.
set -u
sysctl=/proc/sys/vm/nr_hugepages
free_pages() { awk '/^HugePages_Free:/ {print $2}' /proc/meminfo; }

case "${1:-}" in
reserve)
    n=$2 state=$3
    old=$(cat "$sysctl" 2>/dev/null) || { echo "hugepages: cannot read $sysctl"; exit 0; }
    echo "$old" > "$state"
    free=$(free_pages)
    if [ "${free:-0}" -ge "$n" ]; then
        echo "hugepages: $free already free, nr_hugepages stays $old"
        exit 0
    fi
    want=$((old + n - ${free:-0}))
    if ! (echo "$want" > "$sysctl") 2>/dev/null; then
        echo "hugepages: cannot write $sysctl (not root?); the mapped_huge test will skip"
        exit 0
    fi
    echo "hugepages: nr_hugepages $old -> $(cat "$sysctl"), free $(free_pages) (wanted $n)"
    ;;
restore)
    state=$2
    if [ -f "$state" ]; then
        old=$(cat "$state")
        (echo "$old" > "$sysctl") 2>/dev/null && echo "hugepages: nr_hugepages back to $old"
        rm -f "$state"
    fi
    ;;
*)
    echo "usage: hugepages.sh reserve N STATE | restore STATE" >&2
    exit 2
    ;;
esac
exit 0
