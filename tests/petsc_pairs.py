"""The same matrix as PETSc AIJ and as gpusell, and comparisons of what they give."""

import numpy
from petsc4py import PETSc

from petsc_ext.matrices import aij_from_csr
from stencils import laplacian

COMM = PETSc.COMM_WORLD


def nonsymmetric_poisson(n=7):
    indptr, indices, data = laplacian(n)
    data = data * (1.0 + 0.1 * numpy.sin(numpy.arange(data.size)))
    return (indptr, indices, data), (indptr.size - 1,) * 2


def pair(csr, shape, comm=COMM):
    """The same matrix as AIJ and as gpusell."""
    return aij_from_csr(*csr, shape, comm=comm), aij_from_csr(*csr, shape, comm=comm, mat_type="gpusell")


def assert_close(v, w, rtol=1e-13):
    """||v - w|| <= rtol ||w|| over all ranks; v and w may live on different devices."""
    a, b = v.getArray(readonly=True), w.getArray(readonly=True)
    diff, ref = (numpy.sqrt(COMM.tompi4py().allreduce(float(numpy.sum(u**2)))) for u in (a - b, b))
    assert diff <= rtol * max(ref, 1.0), (diff, ref)


def random_vecs(mat, count, side="left"):
    """``count`` random vectors for ``mat`` (its left or right vectors), the same for the same layout."""
    vecs = []
    for k in range(count):
        random = PETSc.Random().create(comm=COMM)
        random.setSeed(k + 1)
        vecs.append(mat.createVecLeft() if side == "left" else mat.createVecRight())
        vecs[-1].setRandom(random)
    return vecs
