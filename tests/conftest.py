import numpy
import pytest
import scipy.sparse
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from gpu_mats.backend import cupy_status

# The same examples on every run and machine: no per-example deadline, no
# "data generation too slow" check, no database of earlier failures.
settings.register_profile("repeatable", deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("repeatable")


def krylov_solve(csr, n, options, comm=None, rhs=None, nullspace=False, max_it=3000, mat_type="gpusell"):
    """(ksp, x) of a solve with a gpusell (or mat_type) matrix and KSP options (prefix t_), rtol 1e-8, b = 1 or rhs."""
    from petsc4py import PETSc

    import plugin  # noqa: F401
    from petsc_ext.matrices import aij_from_csr
    from petsc_ext.options import option_defaults

    comm = comm or PETSc.COMM_WORLD
    A = aij_from_csr(*csr, (n, n), comm=comm, mat_type=mat_type)
    if nullspace:
        A.setNullSpace(PETSc.NullSpace().create(constant=True, comm=comm))
    ksp = PETSc.KSP().create(comm=comm)
    ksp.setOptionsPrefix("t_")
    ksp.setOperators(A)
    ksp.setTolerances(rtol=1e-8, max_it=max_it)
    with option_defaults("t_", options):
        ksp.setFromOptions()
    b, x = A.createVecs()
    if rhs is None:
        b.set(1.0)
    else:
        lo, hi = b.getOwnershipRange()
        b.setArray(rhs[lo:hi])
    ksp.solve(b, x)
    return ksp, x


def gpu_usable():
    """CuPy with a device, and a PETSc built with CUDA."""
    from petsc4py import PETSc

    return cupy_status()[0] is not None and PETSc.Sys.hasExternalPackage("cuda")


def pytest_collection_modifyitems(config, items):
    if gpu_usable():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU, CuPy and a PETSc built with CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@st.composite
def csr_matrices(draw, max_rows=90, max_cols=90, square=False):
    """Random sparse matrices with the shapes SELL must handle: empty rows,
    single rows, one very long row, rectangular (unless ``square``), sizes
    around multiples of C."""
    nrows = draw(st.integers(0, max_rows))
    ncols = nrows if square else draw(st.integers(1, max_cols)) if nrows else draw(st.integers(0, max_cols))
    seed = draw(st.integers(0, 2**32 - 1))
    density = draw(st.sampled_from([0.0, 0.02, 0.1, 0.4]))
    rng = numpy.random.default_rng(seed)
    dense = (rng.random((nrows, ncols)) < density) * rng.standard_normal((nrows, ncols))
    if nrows and ncols and draw(st.booleans()):
        dense[rng.integers(nrows)] = rng.standard_normal(ncols)  # one full (long) row
    matrix = scipy.sparse.csr_matrix(dense)
    matrix.sort_indices()
    return matrix


@pytest.fixture
def rng():
    return numpy.random.default_rng(20261122)
