"""Every registered operator x backend x adjoint mode x dtype x level count: dot-product tests,
and for nonlinear operators Taylor tests of the tangent-linear model. Vertical operators run on
columns of cells with the level counts given (a single layer where nlev is None: conftest's
random_field), about base states where they are defined (conftest's base_state)."""
import numpy as np
import pytest

import meshops
from adjoint.verification import dot_product_test, tangent_taylor_test
from meshops.modes import ADJOINT_MODES
from meshops.registry import OPERATORS

from .conftest import backend_pairs, base_state, random_field

BACKENDS = ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]
TOLERANCE = {np.float64: 1e-12, np.float32: 1e-5}


def _xp(backend):
    if backend == "cupy":
        import cupy

        return cupy
    return np


@pytest.mark.parametrize("nlev", [None, 5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_dot_product(name, backend, mode, dtype, nlev, mesh, rng):
    spec, xp = OPERATORS[name], _xp(backend)

    def field(loc):
        return random_field(mesh, loc, rng, nlev=nlev, dtype=dtype, xp=xp)

    x = tuple(field(loc) for loc in spec.domain)
    y = tuple(field(loc) for loc in spec.range)
    if spec.linear:
        forward = lambda *xs: spec.forward(mesh, *xs)
        adjoint = lambda *ys: spec.adjoint(mesh, *ys, mode=mode)
    else:  # the tangent-linear model about a random base state, and its adjoint
        base = base_state(spec, tuple(field(loc) for loc in spec.domain))
        forward = lambda *dxs: spec.tangent(mesh, *base, *dxs)
        adjoint = lambda *ys: spec.adjoint(mesh, *base, *ys, mode=mode)
    result = dot_product_test(forward, adjoint, x, y)   # y aligned with A x: no cancellation
    assert result.relative_error <= TOLERANCE[dtype], result


@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.linear))
def test_tangent_linear_taylor(name, mesh, rng):
    spec = OPERATORS[name]
    x = base_state(spec, tuple(random_field(mesh, loc, rng, nlev=3) for loc in spec.domain))
    dx = tuple(random_field(mesh, loc, rng, nlev=3) for loc in spec.domain)
    y = tuple(random_field(mesh, loc, rng, nlev=3) for loc in spec.range)
    result = tangent_taylor_test(lambda *xs: spec.forward(mesh, *xs),
                                 lambda *a: spec.tangent(mesh, *a), x, dx, y)
    assert result.min_rate >= 1.9, result


@pytest.mark.gpu
@pytest.mark.parametrize("nlev, dtype, tol", [
    (None, np.float64, 1e-13), (7, np.float64, 1e-13),
    (8, np.float64, 1e-13),    # lanes of 2 float64 levels, wide lanes of 4
    (16, np.float32, 1e-5),    # lanes of 4 float32 levels, wide lanes of 8
])
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_cupy_matches_numpy(name, mode, nlev, dtype, tol, mesh, rng):
    import cupy

    spec = OPERATORS[name]
    field = lambda loc: random_field(mesh, loc, rng, nlev=nlev, dtype=dtype)  # noqa: E731
    x, y = tuple(map(field, spec.domain)), tuple(map(field, spec.range))
    dx = () if spec.linear else tuple(map(field, spec.domain))
    x = x if spec.linear else base_state(spec, x)
    gpu = lambda arrays: tuple(cupy.asarray(a) for a in arrays)
    pairs = backend_pairs(spec, mesh, gpu, x, y, base=() if spec.linear else x, dx=dx, modes=(mode,))
    for ref, res in pairs:
        res = cupy.asnumpy(res)
        scale = np.abs(ref).max()
        assert np.abs(res - ref).max() <= tol * scale, (name, mode)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_deterministic_adjoint_is_bitwise_reproducible(name, dtype, mesh, rng):
    import cupy

    spec = OPERATORS[name]
    y = tuple(random_field(mesh, loc, rng, nlev=4, dtype=dtype, xp=cupy) for loc in spec.range)
    base = () if spec.linear else base_state(spec, tuple(
        random_field(mesh, loc, rng, nlev=4, dtype=dtype, xp=cupy) for loc in spec.domain))
    as_tuple = lambda r: r if isinstance(r, tuple) else (r,)
    first = as_tuple(spec.adjoint(mesh, *base, *y, mode="deterministic"))
    for _ in range(3):
        again = as_tuple(spec.adjoint(mesh, *base, *y, mode="deterministic"))
        for a, b in zip(first, again):
            assert cupy.array_equal(a, b)
