"""A and M^-1 as functions on arrays, for solvers that keep their vectors as
NumPy or CuPy blocks (cacg's basis).

A PETSc MatMult or PCApply from Python costs tens of microseconds of host
time, more than the GPU work of a 64^3 product. So the project's own types
are called on the arrays directly: a gpusell matrix runs its SELL product,
an ainv preconditioner its approximate inverse, gpuamg its cycle, boxfft and
layerfft their transforms, and jacobi becomes the diagonal it applies (read once per solve
by applying it to a vector of ones), which the caller may fuse into its own
kernels. Every other Mat or PC runs
through PETSc on vectors wrapped over the arrays; PETSc is told before that
the arrays were written, and asked after for the copy in the arrays' memory.
"""

from . import gpusell
from .ainv import ApproximateInversePC
from .gpuamg import AggregationMultigridPC
from .python_type import ExactSolvePC
from .arrays import get_array, restore_array


def mark_written(vec):
    """Tell PETSc that the copy we wrote through the array (device or host) is the valid one."""
    get_array(vec, "w")
    restore_array(vec, "w")


def mark_read(vec):
    """Make the array's copy valid after PETSc wrote the vector (a host-side PC, say)."""
    get_array(vec, "r")
    restore_array(vec, "r")


class ArrayOperator:
    """``op(x, y)`` sets y = A x (or M^-1 x) on arrays; a matrix's ``op(x, y, z)``
    sets y = A x + z. x, y, z may also be (k, n) blocks of k vectors.

    ``graph_key`` is None unless the work goes to the current CUDA stream
    only, with no host round trip and no temporary arrays, so that a CUDA
    graph may capture it; it then holds the objects whose arrays such a graph
    reads (a new key means a new graph). ``diagonal`` is the
    array d of a diagonal operator diag(d), which callers may fuse into
    their own kernels; None otherwise. ``blocks``: ``apply`` takes a block
    in one pass (a generalized SpMV); otherwise blocks go vector by vector.
    ``rounded``, for a preconditioner that works in float32 (gpuamg's float32
    cycle): (b, z, apply), where apply() sets z = M^-1 b on its own float32
    arrays, b rounded from the input by the caller's kernels, z read by
    them, without apply's two roundings; None otherwise.
    """

    def __init__(self, apply, graph_key=None, diagonal=None, blocks=False, rounded=None):
        self.apply, self.graph_key, self.diagonal, self.blocks = apply, graph_key, diagonal, blocks
        self.rounded = rounded

    def __call__(self, x, y, z=None):
        if x.ndim == 2 and not self.blocks:
            for k in range(len(x)):
                self._apply(x[k], y[k], None if z is None else z[k])
        else:
            self._apply(x, y, z)

    def _apply(self, x, y, z):
        if z is None:
            self.apply(x, y)
        else:
            self.apply(x, y, z)


def matrix_product(mat, xp, vec_of):
    """y = mat x (+ z) on arrays; ``vec_of(array)`` is a PETSc Vec over an array.
    ``mat`` may also be a gpusell.SellOperator (no PETSc matrix)."""
    if isinstance(mat, gpusell.SellOperator):
        return ArrayOperator(mat.multiply_arrays, graph_key=mat.graph_key(), blocks=True)
    if mat.getType() in (gpusell.SEQ_TYPE, gpusell.MPI_TYPE):
        ctx = gpusell.context(mat)
        if ctx.xp is xp:
            ctx.update()  # the SELL copy a graph reads is current from here to the end of the solve
            return ArrayOperator(ctx.multiply_arrays, graph_key=ctx.graph_key(), blocks=not ctx.parallel)
    return _through_petsc(mat.mult, vec_of, mat.multAdd)


def preconditioner(pc, xp, vec_of, scratch):
    """M^-1 of ``pc`` (set up here if needed) on arrays; ``scratch`` is an array
    over which vec_of gives a vector, to hold the Jacobi diagonal."""
    pc.setUp()
    kind = pc.getType()
    if kind == "jacobi":
        ones = vec_of(scratch).duplicate()
        ones.set(1.0)
        pc.apply(ones, vec_of(scratch))
        ones.destroy()
        mark_read(vec_of(scratch))
        return ArrayOperator(lambda x, y: xp.multiply(scratch, x, out=y), graph_key=("diagonal",), diagonal=scratch)
    if kind == "none":
        return ArrayOperator(lambda x, y: xp.copyto(y, x), graph_key=("identity",))
    if kind in ("ainv", "gpuamg", "boxfft", "layerfft"):
        ctx = pc.getPythonContext()
        if isinstance(ctx, AggregationMultigridPC) and ctx.cycle != "v":
            raise ValueError("an s-step basis needs a linear preconditioner, and gpuamg's K-cycle is not: use "
                             "-pc_gpuamg_cycle v, or the K-cycle under a flexible method (-ksp_type fcg)")
        if isinstance(ctx, AggregationMultigridPC) and ctx.xp is xp:
            return ArrayOperator(ctx.apply_arrays, graph_key=ctx.graph_key(), rounded=ctx.rounded())
        if isinstance(ctx, (ApproximateInversePC, ExactSolvePC)) and ctx.xp is xp:
            return ArrayOperator(ctx.apply_arrays, graph_key=ctx.graph_key())
    return _through_petsc(pc.apply, vec_of)


def _through_petsc(call, vec_of, call_add=None):
    """The PETSc ``call(x, y)`` (MatMult, PCApply) on vectors wrapped over the
    arrays, and ``call_add(x, z, y)`` (MatMultAdd) for y = A x + z."""

    def apply(x, y, z=None):
        xv, yv = vec_of(x), vec_of(y)
        mark_written(xv)
        if z is None:
            call(xv, yv)
        else:
            zv = vec_of(z)
            mark_written(zv)
            call_add(xv, zv, yv)
        mark_read(yv)

    return ArrayOperator(apply)
