"""gpu_mats.krylov: basis recurrences, the small Gram solves, the tall-skinny products."""

import numpy
import pytest

from gpu_mats.kernels.blas import host
from gpu_mats.krylov import GramBreakdown, basis_recurrence, leading_solutions, leading_solve, leja_order


def polynomials(kind, s, low, high, t):
    """Evaluate the basis polynomials p_j(t) of the recurrence with w = t z."""
    p = [numpy.ones_like(t)]
    for j, (a, b, c) in enumerate(basis_recurrence(kind, s, low, high)):
        p.append(a * t * p[j] + b * p[j] + (c * p[j - 1] if j else 0))
    return numpy.array(p)


def test_chebyshev_basis_is_chebyshev_on_the_interval():
    t = numpy.linspace(0.5, 2.5, 41)
    x = (2 * t - 3.0) / 2.0  # [0.5, 2.5] onto [-1, 1]
    numpy.testing.assert_allclose(polynomials("chebyshev", 9, 0.5, 2.5, t),
                                  numpy.cos(numpy.arange(9)[:, None] * numpy.arccos(x)), atol=1e-12)


def test_newton_basis_uses_leja_ordered_shifts_and_monomial_powers():
    t = numpy.linspace(0.0, 1.0, 5)
    numpy.testing.assert_allclose(polynomials("monomial", 4, 0, 1, t), t[None, :] ** numpy.arange(4)[:, None])
    assert leja_order([0.1, -3.0, 2.0, 0.5]) == [-3.0, 2.0, 0.1, 0.5]
    shifts = [-b / a for a, b, _ in basis_recurrence("newton", 5, 1.0, 3.0)]
    assert sorted(shifts) == sorted(leja_order(shifts)) and max(map(abs, shifts)) == abs(shifts[0])
    with pytest.raises(ValueError, match="valid values are monomial, newton, chebyshev"):
        basis_recurrence("legendre", 4, 0, 1)


def test_gram_solves_classify_their_failures():
    with pytest.raises(GramBreakdown) as info:
        leading_solve(numpy.array([[1.0, 0.0], [0.0, -2.0]]), numpy.ones(2), 2)
    assert info.value.kind == "indefinite"
    with pytest.raises(GramBreakdown) as info:
        leading_solve(numpy.array([[numpy.nan]]), numpy.ones(1), 1)
    assert info.value.kind == "nonfinite"


def test_a_dependent_basis_vector_is_left_out_of_the_solve():
    """The second vector is the first (Gram pivot 0): the solve uses the first alone."""
    G = numpy.array([[4.0, 4.0, 0.0], [4.0, 4.0, 0.0], [0.0, 0.0, 1.0]])
    assert len(leading_solutions(G, numpy.ones(3), numpy.eye(3), numpy.ones(3), 3.0)) == 1
    numpy.testing.assert_allclose(leading_solve(G, numpy.array([[2.0], [2.0], [5.0]]), 1), [[0.5]])


@pytest.mark.parametrize("s", [1, 3, 8])
def test_leading_solutions_are_the_galerkin_solutions_of_the_leading_blocks(s):
    rng = numpy.random.default_rng(s)
    X = rng.standard_normal((s, 40))
    A = 3 * numpy.eye(40) + 0.1 * rng.standard_normal((40, 40))
    A = A + A.T
    AX, r = X @ A, rng.standard_normal(40)
    for j, (a, norm) in enumerate(leading_solutions(X @ AX.T, X @ r, AX @ AX.T, AX @ r, r @ r), 1):
        expected = numpy.linalg.solve((X @ AX.T)[:j, :j], (X @ r)[:j])
        numpy.testing.assert_allclose(a, expected, rtol=1e-10)
        assert norm == pytest.approx(numpy.linalg.norm(r - expected @ AX[:j]), rel=1e-9)


@pytest.mark.parametrize("n", [5, 1024, 3000])
def test_tall_skinny_products_and_three_term_updates(n):
    rng = numpy.random.default_rng(n)
    W = rng.standard_normal((7, n))
    numpy.testing.assert_allclose(host.ts_gram(W, W[3:]), W @ W[3:].T, rtol=1e-12, atol=1e-12)
    w = numpy.empty(n)
    host.three_term(w, 2.0, W[0], -1.0, W[1], 0.5, W[2])
    numpy.testing.assert_allclose(w, 2 * W[0] - W[1] + 0.5 * W[2])
    scaled = numpy.empty(n)
    host.three_term(w, 1.0, W[0], 0.0, W[1], -2.0, W[2], W[3], scaled)  # with a Jacobi scaling fused in
    numpy.testing.assert_allclose(w, W[0] - 2 * W[2])
    numpy.testing.assert_allclose(scaled, W[3] * (W[0] - 2 * W[2]))


def test_copy_and_fill_kernels_refuse_what_they_cannot_take():
    """The copy and the fill that a CUDA graph launches as kernels take contiguous arrays alike, and the fill
    float64 only: what a memcpy would convert or broadcast is refused, not copied otherwise."""
    x = numpy.arange(6.0)
    w = numpy.zeros(6)
    host.copy(w, x)
    assert numpy.array_equal(w, x)
    for target, source in ((numpy.zeros(6, dtype=numpy.float32), x), (numpy.zeros(5), x[:5:1][::-1]),
                           (numpy.zeros(4), x), (numpy.zeros(3, dtype=numpy.int8), numpy.ones(3, dtype=numpy.int8))):
        with pytest.raises(ValueError, match="copy takes contiguous arrays"):
            host.copy(target, source)
    host.fill(w[2:4], -1.0)
    assert w.tolist() == [0.0, 1.0, -1.0, -1.0, 4.0, 5.0]
    with pytest.raises(TypeError, match="fill takes a contiguous float64 array"):
        host.fill(numpy.zeros(4, dtype=numpy.float32), 1.0)
    with pytest.raises(TypeError, match="fill takes a contiguous float64 array"):
        host.fill(numpy.zeros((4, 4))[:, 1], 1.0)
