"""The subgrid models' eddy viscosity (gpu_mats.subgrid, the les kernel
family's NumPy twin) against their definitions: closed forms on analytic
gradients, the cases each model must see as laminar, non-negativity and
invariance under a rotation of the axes. The CUDA kernel is held to this
twin in tests/test_gpu.py."""

import numpy
import pytest

from gpu_mats.subgrid import CONSTANTS, MODELS, eddy_viscosity, filter_width


def nu_t(model, gradients, width=0.1, constant=1.0):
    """nu_t of each (3, 3) or (2, 2) gradient in ``gradients`` (n, d, d)."""
    gradients = numpy.asarray(gradients, dtype=float)
    n, dim = gradients.shape[0], gradients.shape[1]
    columns = numpy.moveaxis(gradients, 0, -1).reshape(dim * dim, n)  # row i * dim + j: du_i/dx_j
    return eddy_viscosity(numpy, model, columns, numpy.full(n, width), numpy.empty(n), constant)


def random_gradients(n, seed):
    return numpy.random.default_rng(seed).standard_normal((n, 3, 3))


def test_smagorinsky_is_the_strain_rates_norm():
    g = random_gradients(50, 1)
    S = 0.5 * (g + g.transpose(0, 2, 1))
    expected = (0.1 * 0.2) ** 2 * numpy.sqrt(2.0 * numpy.einsum("nij,nij->n", S, S))
    numpy.testing.assert_allclose(nu_t("smagorinsky", g, width=0.2, constant=0.1), expected, rtol=1e-14)


def test_wale_is_nicoud_and_ducros_operator_in_strain_and_rotation():
    """Sd from S and Omega (Nicoud and Ducros 1999, eq. 10: S S + O O - 1/3 tr(S S + O O) I),
    where the kernel takes the symmetric part of g^2."""
    g = random_gradients(50, 2)
    S, O = 0.5 * (g + g.transpose(0, 2, 1)), 0.5 * (g - g.transpose(0, 2, 1))
    B = S @ S + O @ O
    Sd = B - numpy.eye(3) * numpy.trace(B, axis1=1, axis2=2)[:, None, None] / 3.0
    sd2, ss = numpy.einsum("nij,nij->n", Sd, Sd), numpy.einsum("nij,nij->n", S, S)
    expected = 0.1**2 * sd2**1.5 / (ss**2.5 + sd2**1.25)
    numpy.testing.assert_allclose(nu_t("wale", g), expected, rtol=1e-12)


def test_sigma_takes_the_singular_values():
    """On diagonal gradients the singular values are the entries' magnitudes."""
    entries = numpy.array([[3.0, -1.0, 0.5], [0.2, 2.0, -4.0], [1.0, 1.0, 1.0], [2.0, 2.0, 1.0], [1.0, -2.0, 0.0]])
    s = -numpy.sort(-abs(entries), axis=1)
    expected = 0.1**2 * s[:, 2] * (s[:, 0] - s[:, 1]) * (s[:, 1] - s[:, 2]) / s[:, 0] ** 2
    numpy.testing.assert_allclose(nu_t("sigma", [numpy.diag(e) for e in entries]), expected, rtol=1e-13, atol=1e-16)
    assert expected[2] == expected[3] == expected[4] == 0.0  # isotropic; two equal; rank 2


def laminar_cases():
    """Velocity gradients of flows that are no turbulence: (name, gradient, scale)."""
    shear = numpy.zeros((3, 3))
    shear[0, 1] = 2.5  # u = 2.5 y
    rotation = numpy.array([[0.0, -1.5, 0.0], [1.5, 0.0, 0.0], [0.0, 0.0, 0.0]])  # u = -1.5 y, v = 1.5 x
    axis = numpy.array([1.0, 2.0, 2.0]) / 3.0
    rotation_3d = 0.7 * numpy.cross(numpy.eye(3), axis)  # rotation about an oblique axis
    return {"pure shear": shear, "solid-body rotation": rotation, "oblique rotation": rotation_3d,
            "2D strain": numpy.diag([1.0, -1.0, 0.0]), "isotropic expansion": 0.3 * numpy.eye(3)}


@pytest.mark.parametrize("case", list(laminar_cases()))
def test_which_laminar_flows_each_model_leaves_alone(case):
    """Pure shear gives no WALE or Sigma viscosity (Nicoud and Ducros
    1999; Nicoud et al. 2011, table 1); solid-body rotation, 2D flows and
    isotropic expansion give none with Sigma. WALE's Sd is the traceless
    part of S^2 + Omega^2, so a rotation alone gives it (C width)^2
    (Sd:Sd)^(1/4) = (C width)^2 (2/3)^(1/4) |omega|; Smagorinsky sees the
    strain of any flow."""
    g = laminar_cases()[case]
    values = {model: nu_t(model, [g])[0] for model in MODELS}
    assert values["sigma"] == 0.0
    if case == "pure shear":
        assert values["wale"] == 0.0
    if case in ("solid-body rotation", "oblique rotation"):
        omega = 0.5 * numpy.linalg.norm(g - g.T) / numpy.sqrt(2.0)
        assert values["wale"] == pytest.approx(0.1**2 * (2.0 / 3.0) ** 0.25 * omega, rel=1e-12)
        assert values["smagorinsky"] == pytest.approx(0.0, abs=1e-15)
    if case == "2D strain":
        assert values["smagorinsky"] > 0.0 and values["wale"] > 0.0


@pytest.mark.parametrize("model", MODELS)
def test_every_model_is_non_negative_and_blind_to_the_axes(model):
    g = random_gradients(200, 3)
    Q, _ = numpy.linalg.qr(numpy.random.default_rng(4).standard_normal((3, 3)))
    values = nu_t(model, g)
    assert (values >= 0.0).all() and values.max() > 0.0
    numpy.testing.assert_allclose(nu_t(model, Q @ g @ Q.T), values, rtol=1e-10, atol=1e-14)
    numpy.testing.assert_allclose(nu_t(model, 2.0 * g), 2.0 * values, rtol=1e-10, atol=1e-14)  # a rate


def test_2d_gradients_are_3d_ones_without_a_third_component():
    g2 = numpy.random.default_rng(5).standard_normal((20, 2, 2))
    g3 = numpy.zeros((20, 3, 3))
    g3[:, :2, :2] = g2
    for model in MODELS:
        numpy.testing.assert_array_equal(nu_t(model, g2), nu_t(model, g3))
    assert (nu_t("sigma", g2) == 0.0).all()  # no 2D flow has a third singular value


def test_the_constants_and_the_width():
    assert CONSTANTS == {"smagorinsky": 0.1, "wale": 0.325, "sigma": 1.35}
    numpy.testing.assert_allclose(filter_width(numpy.array([8.0, 0.001]), 3), [2.0, 0.1])
    g = random_gradients(3, 6)
    columns = numpy.moveaxis(g, 0, -1).reshape(9, 3)
    default = eddy_viscosity(numpy, "wale", columns, numpy.ones(3), numpy.empty(3))
    numpy.testing.assert_allclose(default, 0.325**2 * nu_t("wale", g, width=1.0), rtol=1e-14)
    with pytest.raises(ValueError, match="subgrid model must be one of"):
        eddy_viscosity(numpy, "vreman", columns, numpy.ones(3), numpy.empty(3))
    with pytest.raises(ValueError, match="a gradient of shape"):
        eddy_viscosity(numpy, "wale", columns[:5], numpy.ones(3), numpy.empty(3))
