#!/bin/sh
# package.sh - system tests of what a C or Python user installs (driven by package.cmake).
#   package.sh cmake SRC BUILD WORK PYTHON  `make install PREFIX=WORK/prefix`, then the user
#                                 guide's program built by CMake with find_package(plexus)
#                                 and plexus::plexus against that prefix, and run; then the
#                                 installed Python package imported from PREFIX by PYTHON
#                                 (outside the source tree) running examples/python/vector.py
#   package.sh venv SRC BUILD WORK PYTHON   `PYTHON -m venv --system-site-packages` and
#                                 `pip install --no-build-isolation SRC` with no package
#                                 index (offline), reusing BUILD; the venv's python runs
#                                 examples/python/vector.py from the installed copy
set -u
mode=$1 src=$2 build=$3 work=$4 py=$5
unset MAKEFLAGS MFLAGS MAKELEVEL

fail() { echo "FAIL: $*"; exit 1; }

rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
case $mode in
cmake)
    prefix=$work/prefix
    make -C "$src" --no-print-directory BUILD="$build" PREFIX="$prefix" install \
        > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "make install failed"; }
    [ -f "$prefix/lib/cmake/plexus/plexusConfig.cmake" ] ||
        fail "no CMake package config in $prefix/lib/cmake/plexus"
    mkdir -p "$work/app"
    awk '/^## Writing your own program/ { s = 1 } s == 1 && /^```c$/ { s = 2; next }
         s == 2 && /^```$/ { exit } s == 2 { print }' "$src/docs/user-guide.md" > "$work/app/prog.c"
    grep -q "int main" "$work/app/prog.c" || fail "no example program found in docs/user-guide.md"
    cat > "$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(app LANGUAGES C)
find_package(plexus 0.1 REQUIRED)
add_executable(prog prog.c)
target_link_libraries(prog PRIVATE plexus::plexus)
add_executable(prog_static prog.c)
target_link_libraries(prog_static PRIVATE plexus::static)
CM
    cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$prefix" \
        > "$work/app.log" 2>&1 && cmake --build "$work/app/build" >> "$work/app.log" 2>&1 ||
        { cat "$work/app.log"; fail "the guide's program does not build with find_package"; }
    grep -q "plexus_DIR:PATH=$prefix/lib/cmake/plexus" "$work/app/build/CMakeCache.txt" ||
        fail "find_package(plexus) did not find the package in $prefix"
    for p in prog prog_static; do
        out=$(PLEXUS_LOG=warn "$work/app/build/$p") || fail "$p failed: $out"
        echo "$p: $out"
        [ "$out" = "y[3] = 12; 2 tasks, 1 edges" ] || fail "unexpected output of $p: $out"
    done
    site=$(find "$prefix" -type d -name dist-packages | head -1)
    [ -f "$site/plexus/__init__.py" ] || fail "no Python package under $prefix"
    out=$(cd "$work" && PYTHONPATH="$site" PLEXUS_LOG=warn "$py" -c \
        'import plexus, sys; print(plexus.__file__)') || fail "import plexus from $site: $out"
    case $out in "$site/plexus/"*) ;; *) fail "imported $out, not the installed copy";; esac
    (cd "$work" && PYTHONPATH="$site" PLEXUS_LOG=warn "$py" "$src/examples/python/vector.py" \
        --size 1024) || fail "the installed package does not run vector.py"
    echo PASS
    ;;
venv)
    "$py" -m venv --system-site-packages "$work/v" > "$work/venv.log" 2>&1 ||
        { cat "$work/venv.log"; fail "python3 -m venv failed (make deps installs python3-venv)"; }
    (cd "$work" && PIP_NO_INDEX=1 PLEXUS_BUILD="$build" "$work/v/bin/pip" install \
        --no-build-isolation "$src" > "$work/pip.log" 2>&1) ||
        { tail -30 "$work/pip.log"; fail "pip install --no-build-isolation failed"; }
    out=$(cd "$work" && "$work/v/bin/python" -c 'import plexus; print(plexus.__file__)') ||
        fail "the venv cannot import plexus: $out"
    case $out in "$work/v/"*) ;; *) fail "the venv imported $out, not its own copy";; esac
    echo "venv: $out"
    (cd "$work" && PLEXUS_LOG=warn "$work/v/bin/python" "$src/examples/python/vector.py" \
        --size 1024) || fail "the venv's package does not run vector.py"
    echo PASS
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
