#!/bin/sh
# setup.sh - system tests of the set-up a new user goes through (driven by setup.cmake).
#   setup.sh install SRC BUILD WORK [CFLAGS]  `make install PREFIX=WORK/prefix` from the
#                                     build BUILD, then the user guide's example program built
#                                     with pkg-config against that prefix (and CFLAGS: the
#                                     sanitizer of a sanitizer build) and run
#   setup.sh fresh SRC WORK           a clean build folder WORK/build: `make test`, then
#                                     `make bench-quick` after the StarPU anchor appeared
#   setup.sh build-types SRC WORK     the library and the command line configured with the
#                                     other optimising build types (Release: -O3,
#                                     MinSizeRel: -Os), warnings as errors as always: each
#                                     optimisation level inlines differently, and GCC's
#                                     format-truncation and maybe-uninitialized checks then
#                                     see different bounds. Not Debug: at -O0 GCC runs none of
#                                     those flow checks, so it can only warn about what every
#                                     build warns about (a third of the test's time for
#                                     nothing; `make test` must stay under 4 minutes)
# install: the guide's program is the first ```c block after "## Writing your own program" in
# docs/user-guide.md, so the test checks what users copy; its expected line is the one the
# guide's own comment gives (y[3] = 12; 2 tasks, 1 edges). Nothing may be installed outside
# the prefix (the install manifest is checked), and the summary must say how the library is
# found at run time.
# fresh: the first configure runs with a pkg-config folder that holds every .pc file of this
# machine except StarPU's, as on a fresh machine before `make deps-bench`; StarPU's .pc is
# then put into that folder (what installing libstarpu-dev does), and `make bench-quick` must
# find the anchor without anyone reconfiguring by hand.
set -u
mode=$1 src=$2
shift 2
# The make that runs ctest passes its job server down; the makes started here are new ones.
unset MAKEFLAGS MFLAGS MAKELEVEL

fail() { echo "FAIL: $*"; exit 1; }

case $mode in
install)
    build=$1 work=$2 prefix=$2/prefix cflags=${3:-}
    rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
    # A dry run first: a make that ignored PREFIX would install into /usr/local for real.
    make -n -C "$src" --no-print-directory BUILD="$build" PREFIX="$prefix" install |
        grep -q -e "--prefix $prefix" || fail "make install ignores PREFIX=$prefix"
    make -C "$src" --no-print-directory BUILD="$build" PREFIX="$prefix" install \
        > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "make install failed"; }
    cat "$work/install.log"
    manifest="$build/install_manifest.txt"
    [ -s "$manifest" ] || fail "no install manifest $manifest"
    outside=$(grep -v "^$prefix/" "$manifest")
    [ -z "$outside" ] || fail "installed outside PREFIX=$prefix: $outside"
    grep -q "LD_LIBRARY_PATH=$prefix/lib" "$work/install.log" ||
        fail "the install summary does not say how programs find libplexus.so.0"
    awk '/^## Writing your own program/ { s = 1 } s == 1 && /^```c$/ { s = 2; next }
         s == 2 && /^```$/ { exit } s == 2 { print }' "$src/docs/user-guide.md" > "$work/prog.c"
    grep -q "int main" "$work/prog.c" || fail "no example program found in docs/user-guide.md"
    pc="$prefix/lib/pkgconfig"
    flags=$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs plexus) ||
        fail "pkg-config finds no plexus in $pc"
    echo "cc prog.c $flags"
    # shellcheck disable=SC2086
    cc $cflags -o "$work/prog" "$work/prog.c" $flags || fail "the guide's program does not build"
    ldd "$work/prog" | grep -q "libplexus.so.0 => $prefix/lib/" ||
        LD_LIBRARY_PATH="$prefix/lib" ldd "$work/prog" | grep -q "libplexus.so.0 => $prefix/lib/" ||
        fail "the program is not linked against $prefix/lib/libplexus.so.0"
    out=$(LD_LIBRARY_PATH="$prefix/lib" PLEXUS_LOG=warn "$work/prog") ||
        fail "the guide's program failed: $out"
    echo "$out"
    [ "$out" = "y[3] = 12; 2 tasks, 1 edges" ] || fail "unexpected output: $out"
    echo PASS
    ;;
fresh)
    work=$1 build=$1/build pcdir=$1/pkgconfig
    rm -rf "$work" && mkdir -p "$pcdir" || fail "cannot make $work"
    starpu_pc=$(pkg-config --variable=pcfiledir starpu-1.3 2>/dev/null)/starpu-1.3.pc
    [ -f "$starpu_pc" ] || {
        echo "skipped: libstarpu-dev is not installed (make deps-bench installs it)"; exit 77; }
    for d in $(pkg-config --variable pc_path pkg-config | tr ':' ' ') $(echo "${PKG_CONFIG_PATH:-}" | tr ':' ' '); do
        [ -d "$d" ] && cp -n "$d"/*.pc "$pcdir"/ 2>/dev/null
    done
    rm -f "$pcdir/starpu-1.3.pc"
    export PKG_CONFIG_LIBDIR="$pcdir" PKG_CONFIG_PATH=""
    make -C "$src" --no-print-directory BUILD="$build" test > "$work/test.log" 2>&1 ||
        { tail -50 "$work/test.log"; fail "make test in a clean build folder failed"; }
    tail -5 "$work/test.log"
    ! grep -q "^STARPU_FOUND:INTERNAL=1" "$build/CMakeCache.txt" ||
        fail "the first configure found StarPU although it was hidden"
    cp "$starpu_pc" "$pcdir/"
    make -C "$src" --no-print-directory BUILD="$build" bench-quick > "$work/bench.log" 2>&1 ||
        { tail -50 "$work/bench.log"; fail "make bench-quick after make test failed"; }
    grep "^BENCH" "$work/bench.log"
    grep -q "^STARPU_FOUND:INTERNAL=1" "$build/CMakeCache.txt" ||
        fail "the build did not reconfigure: StarPU is still missing from its cache"
    grep -q "^BENCH tasks config .*starpu=[0-9]" "$work/bench.log" ||
        fail "bench-quick ran without the StarPU anchor"
    echo PASS
    ;;
build-types)
    work=$1
    rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
    for bt in Release MinSizeRel; do
        cmake -S "$src" -B "$work/$bt" -DCMAKE_BUILD_TYPE=$bt > "$work/$bt.log" 2>&1 &&
            cmake --build "$work/$bt" -j 2 --target plexus_shared plexus \
                >> "$work/$bt.log" 2>&1 ||
            { grep -E "error|warning" "$work/$bt.log" | head -20
              fail "CMAKE_BUILD_TYPE=$bt does not build"; }
        echo "CMAKE_BUILD_TYPE=$bt builds"
    done
    rm -rf "$work"
    echo PASS
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
