#!/usr/bin/env bash
# Everything `make demo` and `make test` need on a fresh Debian or Ubuntu
# machine: MPI and BLAS from apt when missing, a virtual environment .venv at
# the repository root, PETSc, petsc4py and mpi4py built from source against
# that MPI (pip keeps the built wheels, so a second run takes seconds), and this
# package with its test dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

if ! command -v mpicc >/dev/null || ! command -v mpiexec >/dev/null || ! ldconfig -p | grep -q libopenblas; then
    apt_install mpich libmpich-dev libopenblas-dev
fi
python3 -c "import ensurepip, venv" 2>/dev/null || apt_install python3-venv

[ -x .venv/bin/python ] || python3 -m venv .venv
pip() { .venv/bin/python -m pip "$@"; }
pip install -q --upgrade pip setuptools wheel
pip install -q numpy cython
pip install -q petsc==3.26.1                          # PETSc from source, ~5-15 min the first time
pip install -q --no-binary mpi4py mpi4py               # against the same MPI as PETSc
pip install -q --no-build-isolation petsc4py==3.26.1
pip install -q --no-build-isolation -e ".[test]"
touch .venv/.installed
