#!/bin/sh
# install-deps.sh - installs the Debian packages plexus needs, only those that are missing.
#   scripts/install-deps.sh          build and test dependencies (chromium renders
#                                    report.html in the DFX tests; python3-cffi, python3-dev,
#                                    python3-numpy and python3-pytest for `import plexus`
#                                    and its pytest tests; python3-venv, python3-setuptools
#                                    and python3-wheel for its venv route; libopenblas-dev:
#                                    level 3 tested beside OpenBLAS's thread pool, and with
#                                    liblapacke-dev the cholesky example's BLAS kernels)
#   scripts/install-deps.sh --bench  plus the benchmark anchors (StarPU; Dask for
#                                    bench_python)
#   scripts/install-deps.sh --fuzz   clang with libFuzzer, for `make fuzz` only
# Quiet and idempotent when everything is present; runs apt-get update only before an
# install; never prompts.
set -eu

pkgs="gcc make cmake pkg-config libcmocka-dev python3 chromium"
pkgs="$pkgs python3-dev python3-cffi python3-numpy python3-pytest"
pkgs="$pkgs python3-venv python3-setuptools python3-wheel"
# OpenBLAS (pthreads; Debian makes it numpy's libblas.so.3): level 3 is tested beside its
# thread pool (test_l3_threads dlopens it; the Python tests run numpy on it), and it is the
# cholesky example's BLAS. libplexus does not link it.
pkgs="$pkgs libopenblas-dev"
# LAPACKE (OpenBLAS's LAPACK underneath): the cholesky example's POTRF. The examples open
# OpenBLAS and LAPACKE with dlopen when that example runs (only bench_cholesky links them);
# configuring the build needs cblas.h and lapacke.h.
pkgs="$pkgs liblapacke-dev"
# Open MPI: the MPI plugin (libplexus-mpi.so, dlopened under mpirun; libplexus never links
# libmpi) and bench_comm's anchor
pkgs="$pkgs libopenmpi-dev openmpi-bin"
# Universal Ctags: lint.comm_sizes counts the functions of src/comm (scripts/check_sizes.py)
pkgs="$pkgs universal-ctags"
if [ "${1:-}" = "--bench" ]; then
    # starpu-examples: StarPU's own cholesky_implicit, bench_cholesky's anchor
    pkgs="$pkgs libstarpu-dev python3-dask starpu-examples"
fi
if [ "${1:-}" = "--fuzz" ]; then
    pkgs="$pkgs clang libclang-rt-14-dev"
fi

missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root or sudo to install:$missing" >&2; exit 1; }
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
