"""Kernel families: each a package holding its CUDA sources (``.cu``), its
CUDA driver (``cuda.py``, CuPy) and its NumPy twin (``host.py``), with the
interface both implement written in the package's ``__init__`` (functions
with a docstring and no body; tests/test_kernel_families.py checks the
twins against it).

``family(name, xp)`` is the one dispatcher: the CUDA driver for CuPy arrays,
the NumPy twin for NumPy ones. ``cuda_graphs`` holds the CUDA-graph capture
that several families' users share.
"""

import functools
import importlib

import numpy

FAMILIES = ("sell", "csr", "stencil", "local_solves", "blas", "multigrid", "block_ilu", "flow", "pcg", "les", "spectral",
            "shifted", "box", "guess")


@functools.cache
def family(name, xp):
    """The module of family ``name`` that works on arrays of ``xp`` (numpy or cupy)."""
    if name not in FAMILIES:
        raise ValueError(f"unknown kernel family {name!r}: the families are {', '.join(FAMILIES)}")
    return importlib.import_module(f"{__name__}.{name}.{'host' if xp is numpy else 'cuda'}")


def keyed_graphs(relaunch=True):
    """A cuda_graphs.KeyedGraphs (CuPy's, imported here only where it is called: where there is a GPU)."""
    from .cuda_graphs import KeyedGraphs

    return KeyedGraphs(relaunch)


def graph_cache():
    """A cuda_graphs.GraphCache (CuPy's, imported here only where it is called: where there is a GPU)."""
    from .cuda_graphs import GraphCache

    return GraphCache()


def conditional_loops():
    """Why CUDA graphs here cannot hold loops the device ends (None: they
    can; cuda_graphs.conditional_loops, imported only where it is called)."""
    from .cuda_graphs import conditional_loops as why_not

    return why_not()


def wide(v):
    """``v`` in float64: the host twins compute so whatever the vectors' type, as the CUDA kernels do in
    registers, and store in the vectors' type."""
    return numpy.asarray(v, dtype=numpy.float64)
