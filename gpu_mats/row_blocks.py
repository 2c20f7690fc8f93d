"""A sparse matrix split by rows over MPI ranks, each rank holding its rows
with global column numbers (the MPIAIJ layout before its split into the
owned and halo blocks), and what a distributed Galerkin product R A P needs:

* ``fetch_rows``: rows other ranks own, asked for by number (the rows of P
  that a rank's rows of A reach, as PETSc's MatMatMult for MPIAIJ fetches
  them);
* ``to_owners``: entries any rank computed, sent to the ranks owning their
  rows and summed there (P^T's contributions to other ranks' coarse rows);
* ``HaloColumns``: the block on the columns other ranks own, multiplied
  after an exchange of their values (gpu_mats.exchange), for the cycle.

Matrices are scipy or cupyx CSR matrices; the messages are host arrays sent
with mpi4py (set-up only: the entries that stay on their rank never leave
the device).
"""

import numpy

from .backend import array_module, sparse_module, to_host
from .exchange import halo_plan, transport
from .ops import spmv


def owner(starts, index):
    """The rank owning each global ``index`` (numpy) when rank p owns starts[p] .. starts[p + 1] - 1."""
    return numpy.searchsorted(starts, index, side="right") - 1


def ownership(count, comm):
    """starts (numpy, size + 1) of the ranks' consecutive ranges when this rank owns ``count``."""
    return numpy.concatenate(([0], numpy.cumsum(comm.allgather(int(count))))).astype(numpy.int64)


def to_owners(rows, cols, values, row_starts, ncols, comm):
    """This rank's rows (CSR, local row numbers, ``ncols`` columns) of the
    entries (rows, cols, values) every rank holds, rows numbered globally:
    each entry goes to the rank owning its row, and duplicates are summed."""
    xp = array_module(values)
    rank = comm.Get_rank()
    start, end = int(row_starts[rank]), int(row_starts[rank + 1])
    local = (rows >= start) & (rows < end)
    away = [to_host(xp, a[~local]) for a in (rows, cols, values)]
    destination = owner(row_starts, away[0])
    order = numpy.argsort(destination, kind="stable")
    bounds = numpy.searchsorted(destination[order], numpy.arange(comm.Get_size() + 1))
    parts = [tuple(a[order[bounds[p]:bounds[p + 1]]] for a in away) for p in range(comm.Get_size())]
    received = comm.alltoall(parts)
    entries = [xp.concatenate([a[local]] + [xp.asarray(part[k]) for part in received]) for k, a in
               enumerate((rows, cols, values))]
    matrix = sparse_module(xp).coo_matrix((entries[2], (entries[0] - start, entries[1])),
                                          shape=(end - start, ncols)).tocsr()
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


def transpose(matrix, row_starts, col_starts, comm):
    """This rank's rows of M^T, where ``matrix`` is this rank's rows of M
    (global columns, split over the ranks by ``col_starts``)."""
    xp = array_module(matrix.data)
    coo = matrix.tocoo()
    rank = comm.Get_rank()
    rows = coo.row.astype(xp.int64) + int(row_starts[rank])
    return to_owners(coo.col.astype(xp.int64), rows, coo.data, col_starts, int(row_starts[-1]), comm)


def fetch_rows(matrix, row_starts, wanted, comm):
    """The rows ``wanted`` (global numbers, ascending, numpy) of a matrix whose
    rows are split over the ranks by ``row_starts``, ``matrix`` this rank's
    rows: CSR with one row per wanted row, in their order."""
    xp = array_module(matrix.data)
    rank, size = comm.Get_rank(), comm.Get_size()
    owners = owner(row_starts, wanted)
    asked = comm.alltoall([wanted[owners == p] for p in range(size)])
    replies = []
    for p in range(size):
        rows = matrix[xp.asarray(asked[p] - row_starts[rank])] if asked[p].size else None
        replies.append((numpy.zeros(0, dtype=numpy.int64),) * 3 if rows is None else
                       (to_host(xp, xp.diff(rows.indptr)), to_host(xp, rows.indices), to_host(xp, rows.data)))
    received = comm.alltoall(replies)
    lengths, indices, data = (numpy.concatenate([part[k] for part in received]) for k in range(3))
    indptr = numpy.concatenate(([0], numpy.cumsum(lengths))).astype(numpy.int64)
    return sparse_module(xp).csr_matrix((xp.asarray(data, dtype=xp.float64), xp.asarray(indices, dtype=xp.int64),
                                         xp.asarray(indptr)), shape=(wanted.size, matrix.shape[1]))


def multiply(A, B, B_starts, comm):
    """This rank's rows of A B: ``A`` this rank's rows of A (global columns),
    ``B`` this rank's rows of B, whose rows are split by ``B_starts``; the rows
    of B that A's columns reach on other ranks are fetched first."""
    product, columns = _compact_product(A, B, B_starts, comm)
    return sparse_module(array_module(A.data)).csr_matrix((product.data, columns[product.indices], product.indptr),
                                                          shape=(A.shape[0], B.shape[1]))


def _compact_product(A, B, B_starts, comm):
    """multiply's product on the columns of B the rank's rows reach (compact_columns), and their global numbers."""
    xp = array_module(A.data)
    rank = comm.Get_rank()
    start, end = int(B_starts[rank]), int(B_starts[rank + 1])
    cols = A.indices.astype(xp.int64)
    own = (cols >= start) & (cols < end)
    remote = xp.unique(cols[~own])
    fetched = fetch_rows(B, B_starts, to_host(xp, remote), comm)
    extended = sparse_module(xp).vstack([B, fetched]).tocsr() if remote.size else B
    mapped = xp.where(own, cols - start, (end - start) + xp.searchsorted(remote, cols))
    A_mapped = sparse_module(xp).csr_matrix((A.data, mapped, A.indptr), shape=(A.shape[0], extended.shape[0]))
    extended, used = compact_columns(extended)
    return (A_mapped @ extended).tocsr(), used


def galerkin(P, A, fine_starts, coarse_starts, comm):
    """This rank's rows of P^T A P, for P's and A's rows split by ``fine_starts``
    and P's columns (the coarse rows) by ``coarse_starts``."""
    AP, columns = _compact_product(A, P, fine_starts, comm)
    P, rows = compact_columns(P)
    contributions = (P.T.tocsr() @ AP).tocoo()  # rows: coarse rows this rank touches, many another rank's
    ncoarse = int(coarse_starts[-1])
    return to_owners(rows[contributions.row], columns[contributions.col], contributions.data,
                     coarse_starts, ncoarse, comm)


def compact_columns(matrix):
    """(the CSR ``matrix`` on only the columns it holds, numbered in order;
    their global numbers): a product's dimensions are then the rank's, not the
    whole problem's (cuSPARSE's product runs out of resources on the latter
    as the ranks grow)."""
    xp = array_module(matrix.data)
    matrix = matrix.tocsr()
    used = xp.unique(matrix.indices).astype(xp.int64)
    compact = xp.searchsorted(used, matrix.indices)
    return sparse_module(xp).csr_matrix((matrix.data, compact, matrix.indptr),
                                        shape=(matrix.shape[0], used.size)), used


def asymmetry(matrix, starts, comm):
    """||A - A^T||_F / ||A||_F of the matrix whose rows (``matrix``: this rank's, global columns) and
    columns are split by ``starts``: only the entries of other ranks' columns travel."""
    xp = array_module(matrix.data)
    difference = matrix - transpose(matrix, starts, starts, comm)
    sums = comm.allreduce(numpy.array([float(xp.vdot(difference.data, difference.data)),
                                       float(xp.vdot(matrix.data, matrix.data))]))
    return float(numpy.sqrt(sums[0] / sums[1])) if sums[1] > 0 else 0.0


class HaloColumns:
    """The block of a rank's rows on the columns other ranks own (SELL), the
    exchange that brings those columns' values, and the array they land in:
    ``start(x)`` sends, the caller multiplies its owned block, ``finish(y)``
    adds this block's product (the exchange overlapped with the owned one)."""

    def __init__(self, block, halo, col_starts, comm, xp, choice="auto"):
        self.block = block
        self.exchange = transport(halo_plan(to_host(xp, halo), col_starts, comm), comm, xp, choice)
        self.values = xp.zeros(block.shape[1])

    @property
    def nbytes(self):
        return self.block.nbytes + self.values.nbytes

    def start(self, x):
        self.exchange.forward_begin(x, self.values)

    def finish(self, y, alpha=1.0):
        """y += alpha B x_halo, once the halo has arrived."""
        self.exchange.forward_end()
        if self.block.shape[1]:
            spmv(self.block, self.values, y, alpha=alpha, beta=1.0)


class WholeVector:
    """A vector split over the ranks by ``starts``, gathered whole on every
    rank: this rank's entries first, then the others' in global order
    (``order``: the global index at each position), for the coarsest level,
    whose rows reach every column."""

    def __init__(self, starts, comm, xp, choice="auto"):
        rank, total = comm.Get_rank(), int(starts[-1])
        start, end = int(starts[rank]), int(starts[rank + 1])
        others = numpy.concatenate((numpy.arange(start), numpy.arange(end, total))).astype(numpy.int64)
        self.order = numpy.concatenate((numpy.arange(start, end), others))
        self.exchange = transport(halo_plan(others, starts, comm), comm, xp, choice)
        self.values = xp.zeros(total)
        self._own, self._others = end - start, self.values[end - start:]

    @property
    def nbytes(self):
        return self.values.nbytes

    def gather(self, x):
        """The whole vector, in ``order``, of this rank's entries ``x``."""
        self.values[:self._own] = x
        self.exchange.forward_begin(x, self._others)
        self.exchange.forward_end()
        return self.values
