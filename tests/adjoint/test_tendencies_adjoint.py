"""Tangent-linear and adjoint of the shallow-water tendencies (swm.tendencies, composed from the
terms of swm.terms): dot-product tests (the whole map, each physics term alone, each block of the
Jacobian), Taylor tests against the forward, float32, and CuPy against NumPy."""
from dataclasses import replace

import numpy as np
import pytest

import meshops
from adjoint import dot_product_test, tangent_taylor_test
from grids.icosahedral import generate_icosahedral
from meshops.modes import ADJOINT_MODES
from framework.constants import EARTH_RADIUS
from swm.tendencies import tendencies, tendencies_adj, tendencies_tl

from .states import DT, PHYSICS, adjoint_inputs, directions, perturbed_state

CASES = ("williamson5", "williamson6")


@pytest.fixture(scope="module")
def ico():
    """An icosahedral level-3 mesh (642 cells) on the Earth's radius."""
    return generate_icosahedral(3, sphere_radius=EARTH_RADIUS)


@pytest.fixture(scope="module")
def dmesh(ico):
    return meshops.device_mesh(ico, np)


def _physics(name):
    return replace(PHYSICS[name], dt=DT)


def _pair(mesh, base, physics, mode):
    h, u, b, f = base
    return (lambda *d: tendencies_tl(mesh, h, u, b, f, physics, *d),
            lambda *a: tendencies_adj(mesh, h, u, b, f, physics, *a, mode=mode))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("physics", list(PHYSICS))
def test_dot_product(ico, dmesh, rng, physics, mode, case):
    base = perturbed_state(ico, case, rng)
    tl, adj = _pair(dmesh, base, _physics(physics), mode)
    result = dot_product_test(tl, adj, directions(ico, rng), adjoint_inputs(ico, rng))
    assert result.relative_error <= 1e-12, result


@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("term", ["apvm", "visc2", "visc4"])
def test_dot_product_of_each_physics_term_alone(ico, dmesh, rng, term, mode):
    """The part a physics option adds (its tangent minus the plain tangent, its adjoint minus the
    plain adjoint) is a linear map of its own: dot-tested alone, so an error in a term much smaller
    than the rest of the tendencies cannot hide under them."""
    base = perturbed_state(ico, "williamson5", rng)
    tl, adj = _pair(dmesh, base, _physics(term), mode)
    tl0, adj0 = _pair(dmesh, base, _physics("plain"), mode)
    x, y = directions(ico, rng), adjoint_inputs(ico, rng)
    assert np.abs(tl(*x)[1] - tl0(*x)[1]).max() > 1e-3 * np.abs(tl0(*x)[1]).max()  # the term acts
    result = dot_product_test(lambda *d: tuple(a - b for a, b in zip(tl(*d), tl0(*d))),
                              lambda *a: tuple(p - q for p, q in zip(adj(*a), adj0(*a))), x, y)
    assert result.relative_error <= 1e-12, result


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_dot_product_of_each_block(ico, dmesh, rng, mode):
    """Every block (dh, du, db) -> (tend_h, tend_u) of the Jacobian alone, all physics on (the
    block db -> tend_h is zero: its adjoint must be exactly zero)."""
    base = perturbed_state(ico, "williamson6", rng)
    tl, adj = _pair(dmesh, base, _physics("all"), mode)
    x, y = directions(ico, rng), adjoint_inputs(ico, rng)
    for i in range(3):
        xi = tuple(a if k == i else np.zeros_like(a) for k, a in enumerate(x))
        for j in range(2):
            yj = tuple(a if k == j else np.zeros_like(a) for k, a in enumerate(y))
            if (i, j) == (2, 0):
                assert not np.any(tl(*xi)[0]) and not np.any(adj(*yj)[2])
                continue
            result = dot_product_test(tl, adj, xi, yj)
            assert result.relative_error <= 1e-12, (i, j, result)


@pytest.mark.parametrize("physics", list(PHYSICS))
def test_tangent_linear_against_the_forward(ico, dmesh, rng, physics):
    """Taylor remainder of <tendencies(x + eps dx), y> falls as eps^2 (rate >= 1.9), controls h, u, b."""
    h, u, b, f = perturbed_state(ico, "williamson5", rng)
    p = _physics(physics)
    result = tangent_taylor_test(lambda *x: tendencies(dmesh, *x[:2], x[2], f, p),
                                 lambda *a: tendencies_tl(dmesh, *a[:3], f, p, *a[3:]),
                                 (h, u, b), directions(ico, rng), adjoint_inputs(ico, rng))
    assert not result.exact and result.passed(1.9), result


def test_host_mesh_and_device_mesh_agree(ico, dmesh, rng):
    """The functions take a mesh or a DeviceMesh: the same results, bitwise."""
    base = perturbed_state(ico, "williamson6", rng)
    p = _physics("all")
    x, y = directions(ico, rng), adjoint_inputs(ico, rng)
    for mode in ADJOINT_MODES:
        (tl, adj), (tl_d, adj_d) = _pair(ico, base, p, mode), _pair(dmesh, base, p, mode)
        for a, b in zip(tl(*x) + adj(*y), tl_d(*x) + adj_d(*y)):
            assert np.array_equal(a, b)


def test_adjoint_modes_agree_to_round_off(ico, dmesh, rng):
    base = perturbed_state(ico, "williamson5", rng)
    y = adjoint_inputs(ico, rng)
    atomic, deterministic = (_pair(dmesh, base, _physics("all"), m)[1](*y) for m in ADJOINT_MODES)
    for a, d in zip(atomic, deterministic):
        assert np.abs(a - d).max() <= 1e-13 * np.abs(d).max()


@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_dot_product_float32(ico, dmesh, rng, mode):
    base = tuple(a.astype(np.float32) for a in perturbed_state(ico, "williamson5", rng))
    tl, adj = _pair(dmesh, base, _physics("all"), mode)
    x = tuple(a.astype(np.float32) for a in directions(ico, rng))
    y = tuple(a.astype(np.float32) for a in adjoint_inputs(ico, rng))
    assert all(a.dtype == np.float32 for a in tl(*x) + adj(*y))
    result = dot_product_test(tl, adj, x, y)
    assert result.relative_error <= 1e-5, result


# -- CuPy ------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("physics", ["plain", "all"])
def test_cupy_equals_numpy_and_dot_product(ico, dmesh, rng, physics, mode):
    """CuPy tangent and adjoint equal NumPy's to 1e-12 relative (both adjoint modes), and pass the
    dot-product test on the GPU."""
    import cupy

    base = perturbed_state(ico, "williamson5", rng)
    p = _physics(physics)
    x, y = directions(ico, rng), adjoint_inputs(ico, rng)
    gpu_mesh = meshops.device_mesh(ico, cupy)
    tl, adj = _pair(dmesh, base, p, mode)
    tl_gpu, adj_gpu = _pair(gpu_mesh, tuple(cupy.asarray(a) for a in base), p, mode)
    x_gpu, y_gpu = tuple(cupy.asarray(a) for a in x), tuple(cupy.asarray(a) for a in y)
    for ref, got in zip(tl(*x) + adj(*y), tl_gpu(*x_gpu) + adj_gpu(*y_gpu)):
        assert isinstance(got, cupy.ndarray)
        assert np.abs(cupy.asnumpy(got) - ref).max() <= 1e-12 * np.abs(ref).max()
    result = dot_product_test(tl_gpu, adj_gpu, x_gpu, y_gpu)
    assert result.relative_error <= 1e-12, result
