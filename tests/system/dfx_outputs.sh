#!/bin/sh
# dfx_outputs.sh - system checks of the DFX outputs (driven by dfx_outputs.cmake).
#   dfx_outputs.sh check   PLEXUS PY OUT EXAMPLE TASKS EDGES [ARGS...]
#   dfx_outputs.sh summary PLEXUS PY OUT
#   dfx_outputs.sh chromium PLEXUS PY OUT CHROMIUM TASKS GROUPS ZOOM EXAMPLE [ARGS...]
# check: runs the example with every collector into OUT and checks the files with
# dfx_check.py (counts worked out by hand by the caller). summary: `plexus trace summary OUT`
# must list the kernels and the transport table. chromium: runs EXAMPLE, renders
# OUT/report.html#zoom=ZOOM headless and checks the DOM (dfx_check.py --dom): the data-task
# elements, the view zoomed ZOOM times, the time axis, a tooltip per task, utilisation, the
# critical path and GROUPS groups of rows. A missing python3 or chromium exits 77 (skipped),
# and so does a plexus built with DFX compiled out (CMake option PX_DFX=OFF), which refuses
# --dfx with a message naming that option.
set -u
mode=$1 plexus=$2 py=$3 out=$4
shift 4
here=$(dirname "$0")
[ -x "$py" ] || { echo "skipped: python3 not found (scripts/install-deps.sh installs it)"; exit 77; }

# run_dfx EXAMPLE [ARGS...]: runs EXAMPLE with every collector into $out, its output in
# $out.log; exits 77 when this plexus has DFX compiled out, returns plexus's status otherwise.
run_dfx() {
    rm -rf "$out" "$out.log"
    mkdir -p "$(dirname "$out")" || exit 1
    PLEXUS_DFX_STRICT=1 "$plexus" run "$@" --dfx all --out "$out" > "$out.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && grep -q "PX_DFX=OFF" "$out.log"; then
        echo "skipped: DFX is compiled out of this plexus: $(grep -m1 "PX_DFX=OFF" "$out.log")"
        exit 77
    fi
    [ $rc -eq 0 ] || cat "$out.log"
    return $rc
}

case $mode in
check)
    example=$1 tasks=$2 edges=$3
    shift 3
    run_dfx "$example" "$@" || exit 1
    cat "$out.log"
    exec "$py" "$here/dfx_check.py" "$out" "$tasks" "$edges"
    ;;
summary)
    run_dfx vector || exit 1
    "$plexus" trace summary "$out" > "$out.summary" || { cat "$out.summary"; exit 1; }
    cat "$out.summary"
    for k in add add_scalar mul; do
        grep -q "$k" "$out.summary" || { echo "FAIL: kernel $k missing from the summary"; exit 1; }
    done
    grep -q "mapped" "$out.summary" || { echo "FAIL: no transport table in the summary"; exit 1; }
    ;;
chromium)
    chromium=$1 tasks=$2 groups=$3 zoom=$4
    shift 4
    [ -x "$chromium" ] || { echo "skipped: chromium not found (scripts/install-deps.sh installs it)"; exit 77; }
    rm -rf "$out.profile"
    run_dfx "$@" || exit 1
    "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$out.profile" \
        --dump-dom "file://$(cd "$out" && pwd)/report.html#zoom=$zoom&start=0" \
        > "$out.dom" 2> "$out.chromium.log" || { tail -20 "$out.chromium.log"; exit 1; }
    rm -rf "$out.profile"
    exec "$py" "$here/dfx_check.py" --dom "$out.dom" "$tasks" "$zoom" "$groups"
    ;;
*)
    echo "usage: see the header of $0"; exit 2 ;;
esac
