"""taylor_test on a linear map: the Taylor remainder is zero, what is measured is round-off
(issue #13: rates like [1.30, -0.25, -0.55, 2.65] from remainders of about 1e-14). The result says
so, and a wrong derivative or a nonlinear map is still measured as before."""
import math

import numpy as np
import pytest

import meshops
from adjoint import tangent_taylor_test, taylor_test
from adjoint.verification import inner
from meshops.registry import OPERATORS

from .conftest import field

# Horizontal operators (the vertical ones: tests/meshops/test_adjoints.py, test_vertical.py).
LINEAR = sorted(n for n, s in OPERATORS.items() if s.linear and not s.vertical)
NONLINEAR = sorted(n for n, s in OPERATORS.items() if not s.linear and not s.vertical)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", LINEAR)
def test_linear_operator_remainders_are_reported_as_roundoff(name, dtype, mesh, rng):
    spec = OPERATORS[name]
    x = tuple(field(mesh, loc, rng, 3, dtype) for loc in spec.domain)
    dx = tuple(field(mesh, loc, rng, 3, dtype) for loc in spec.domain)
    y = tuple(field(mesh, loc, rng, 3, dtype) for loc in spec.range)
    forward = lambda *a: spec.forward(mesh, *a)                     # noqa: E731
    result = tangent_taylor_test(forward, lambda *a: forward(*a[len(x):]), x, dx, y)
    assert all(result.at_roundoff), result
    assert result.exact and result.passed(1.9)
    assert result.min_rate == math.inf
    assert all(math.isnan(r) for r in result.rates)
    assert len(result.observed_rates) == len(result.epsilons) - 1   # the raw log2 ratios are kept
    assert "round-off" in result.note and "linear" in result.note
    assert "round-off" in str(result)


def test_issue_example_linear_functional_on_unit_sphere(x1_162_path, rng):
    """The case of the issue: a linear functional of order 1 whose remainders are about 1e-14."""
    from grids.mpas_io import read_mesh

    unit = read_mesh(x1_162_path)   # unit sphere: J = <grad_c2e(phi), u> is of order 1..100
    phi, dphi, u = field(unit, "cell", rng), field(unit, "cell", rng), field(unit, "edge", rng)
    J = lambda p: inner(meshops.grad_c2e(unit, p), u)                # noqa: E731
    scale = inner(np.abs(meshops.grad_c2e(unit, phi)), np.abs(u))
    result = taylor_test(J, phi, dphi, J(dphi), scale=scale)
    assert max(result.remainders) < 1e-11 * scale
    assert result.exact, result
    assert result.min_rate == math.inf


def test_quadratic_functional_rates_unchanged(rng):
    m, dm = rng.standard_normal(100), rng.standard_normal(100)
    result = taylor_test(lambda a: float(a @ a), m, dm, float(2 * m @ dm))
    assert not any(result.at_roundoff) and not result.exact and result.note == ""
    assert result.rates == pytest.approx([2.0] * 4, abs=1e-6)
    assert result.rates == result.observed_rates
    assert result.min_rate == pytest.approx(2.0, abs=1e-6)


@pytest.mark.parametrize("name", NONLINEAR)
def test_nonlinear_tangent_measured_not_roundoff(name, mesh, rng):
    spec = OPERATORS[name]
    x = tuple(field(mesh, loc, rng, 3) for loc in spec.domain)
    dx = tuple(field(mesh, loc, rng, 3) for loc in spec.domain)
    y = tuple(field(mesh, loc, rng, 3) for loc in spec.range)
    result = tangent_taylor_test(lambda *a: spec.forward(mesh, *a), lambda *a: spec.tangent(mesh, *a), x, dx, y)
    assert not any(result.at_roundoff) and not result.exact, result
    assert result.min_rate >= 1.9


def test_wrong_derivative_still_fails(mesh, rng):
    """A tangent off by 10%: over small eps the remainders fall at rate 1, far above round-off."""
    u, du, y = field(mesh, "edge", rng, 3), field(mesh, "edge", rng, 3), field(mesh, "cell", rng, 3)
    result = tangent_taylor_test(lambda a: meshops.ke_e2c(mesh, a),
                                 lambda a, d: 1.1 * meshops.ke_e2c_tl(mesh, a, d), u, du, y, eps0=1e-5)
    assert not any(result.at_roundoff) and not result.exact, result
    assert result.min_rate == pytest.approx(1.0, abs=0.05)
    assert not result.passed(1.9)


def test_wrong_derivative_of_linear_map_is_not_roundoff(mesh, rng):
    F, dF, y = field(mesh, "edge", rng), field(mesh, "edge", rng), field(mesh, "cell", rng)
    forward = lambda a: meshops.div_e2c(mesh, a)                     # noqa: E731
    result = tangent_taylor_test(forward, lambda a, d: (1 + 1e-8) * forward(d), F, dF, y)
    assert not any(result.at_roundoff), result
    assert result.min_rate == pytest.approx(1.0, abs=0.05)
