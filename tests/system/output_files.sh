#!/bin/sh
# output_files.sh - every DFX output goes through the one atomic writer (src/util/file.c).
#   output_files.sh concurrent PLEXUS PY OUT ROUNDS EXAMPLE [ARGS...]
#   output_files.sh links      PLEXUS PY OUT
#   output_files.sh enospc     PLEXUS PY OUT
# concurrent: ROUNDS times, two runs of EXAMPLE into the same --out at once; both must PASS
# and every JSON file left must parse whole (last rename wins). With the old fixed temporary
# name NAME.tmp about half the rounds failed. links: symbolic links planted at the old
# temporary names (NAME.tmp), at temporary-like names and at a final name: the run passes, no
# link target changes, and the final name holds a regular file; a link planted at args/, or
# at chips/ of a level-3 run, makes the run fail saying so, with nothing written into the
# link's target. enospc: the PX_TEST_ENOSPC
# hook makes one file's write fail half-way as a full disk would: the run fails naming the
# file, and neither a file under that final name nor a temporary remains. A plexus built with
# DFX compiled out (PX_DFX=OFF) and a missing python3 exit 77 (skipped).
set -u
mode=$1 plexus=$2 py=$3 out=$4
shift 4
[ -x "$py" ] || { echo "skipped: python3 not found (scripts/install-deps.sh installs it)"; exit 77; }
export PLEXUS_LOG=warn

fail() { echo "FAIL: $*"; exit 1; }

# skip_if_no_dfx LOG: exits 77 when the run refused --dfx because DFX is compiled out.
skip_if_no_dfx() {
    if grep -q "PX_DFX=OFF" "$1"; then
        echo "skipped: DFX is compiled out of this plexus"
        exit 77
    fi
}

# check_json DIR: every JSON file there parses, every scope_stats line too.
check_json() {
    for f in dfx.json trace.json deps.json args/args_dump.json; do
        [ -f "$1/$f" ] || fail "$1/$f is missing"
        "$py" -m json.tool "$1/$f" > /dev/null || fail "$1/$f is not whole, valid JSON"
    done
    "$py" -c 'import json, sys
for line in open(sys.argv[1]):
    json.loads(line)' "$1/scope_stats.jsonl" || fail "$1/scope_stats.jsonl has a bad line"
}

# no_temporaries DIR: no temporary file of the writer is left in DIR or DIR/args.
no_temporaries() {
    left=$(find "$1" -name '.*.tmp' -o -name '*.tmp' | head -5)
    [ -z "$left" ] || fail "temporaries left behind: $left"
}

case $mode in
concurrent)
    rounds=$1
    shift
    rm -rf "$out"
    mkdir -p "$out" || exit 1
    r=0
    while [ $r -lt "$rounds" ]; do
        "$plexus" run "$@" --dfx all --out "$out" > "$out.a.log" 2>&1 &
        pa=$!
        "$plexus" run "$@" --dfx all --out "$out" > "$out.b.log" 2>&1 &
        pb=$!
        wait $pa; ra=$?
        wait $pb; rb=$?
        skip_if_no_dfx "$out.a.log"
        [ $ra -eq 0 ] || { cat "$out.a.log"; fail "round $r: the first run failed"; }
        [ $rb -eq 0 ] || { cat "$out.b.log"; fail "round $r: the second run failed"; }
        check_json "$out"
        no_temporaries "$out"
        r=$((r + 1))
    done
    echo "PASS: $rounds rounds of two concurrent runs into one --out"
    ;;
links)
    rm -rf "$out" "$out.targets"
    mkdir -p "$out/args" "$out.targets" || exit 1
    i=0
    for name in trace.json.tmp dfx.json.tmp deps.json.tmp report.html.tmp pmu.csv.tmp \
                scope_stats.jsonl.tmp args/args_dump.json.tmp args/args.bin.tmp \
                .trace.json.tmp .dfx.json.tmp; do
        echo "precious $i" > "$out.targets/t$i"
        ln -s "$out.targets/t$i" "$out/$name"
        i=$((i + 1))
    done
    echo "precious final" > "$out.targets/final"
    "$plexus" run vector --dfx all --out "$out" > "$out.log" 2>&1
    rc=$?
    skip_if_no_dfx "$out.log"
    [ $rc -eq 0 ] || { cat "$out.log"; fail "the run failed"; }
    # a link at a final name: planted after a first run, replaced by the second
    ln -sf "$out.targets/final" "$out/trace.json"
    "$plexus" run vector --dfx all --out "$out" > "$out.log" 2>&1 || { cat "$out.log"; fail "the second run failed"; }
    j=0
    while [ $j -lt $i ]; do
        [ "$(cat "$out.targets/t$j")" = "precious $j" ] || fail "link target t$j was written through"
        j=$((j + 1))
    done
    [ "$(cat "$out.targets/final")" = "precious final" ] || fail "the final-name link's target was written through"
    [ -f "$out/trace.json" ] && [ ! -L "$out/trace.json" ] || fail "trace.json is not a regular file"
    check_json "$out"
    # a link planted at the args directory is refused, not written through
    rm -rf "$out/args" "$out.targets/dir"
    mkdir "$out.targets/dir" && ln -s "$out.targets/dir" "$out/args"
    "$plexus" run vector --dfx all --out "$out" > "$out.log" 2>&1 && { cat "$out.log"; fail "a link at args/ was accepted"; }
    grep -q "FAIL: .*args exists and is not a directory" "$out.log" || { cat "$out.log"; fail "the refusal of args/ does not say why"; }
    [ -z "$(ls -A "$out.targets/dir")" ] || fail "files were written through the link at args/"
    # level 3: a link planted at chips/ (where the chips write chips/chip<i>/) is refused too
    rm -rf "$out/args" "$out/chips" "$out.targets/chips"
    mkdir "$out.targets/chips" && ln -s "$out.targets/chips" "$out/chips"
    "$plexus" run multi_chip --chips 2 --cores 1 --dfx all --out "$out" > "$out.log" 2>&1 &&
        { cat "$out.log"; fail "a link at chips/ was accepted"; }
    grep -q "chips\" is a symbolic link" "$out.log" || { cat "$out.log"; fail "the refusal of chips/ does not say why"; }
    [ -z "$(ls -A "$out.targets/chips")" ] || fail "files were written through the link at chips/"
    echo "PASS: no planted link was followed"
    ;;
enospc)
    rm -rf "$out"
    for name in dfx.json trace.json args_dump.json report.html; do
        PX_TEST_ENOSPC=$name "$plexus" run vector --dfx all --out "$out" > "$out.log" 2>&1
        rc=$?
        skip_if_no_dfx "$out.log"
        [ $rc -ne 0 ] || { cat "$out.log"; fail "$name: the run passed although the disk was full"; }
        grep -q "FAIL: .*$name.*No space left on device" "$out.log" || { cat "$out.log"; fail "$name: the failure does not name the file and the error"; }
        [ -z "$(find "$out" -name "$name")" ] || fail "$name: a file remains under its final name"
        no_temporaries "$out"
    done
    echo "PASS: a failed write leaves no file under its final name"
    ;;
*)
    echo "usage: output_files.sh concurrent|links|enospc PLEXUS PY OUT ..." >&2
    exit 2
    ;;
esac
