"""Operators registered as quadratic (`OperatorSpec.quadratic`) are quadratic forms N(x) = B(x, x):
the property the autodiff adapters' second derivatives rest on (meshops.torch)."""
import numpy as np
import pytest

from meshops.registry import OPERATORS

from .conftest import random_field

QUADRATIC = sorted(n for n, s in OPERATORS.items() if s.quadratic)


def test_every_nonlinear_operator_says_whether_it_is_quadratic():
    assert QUADRATIC, "no operator is registered as quadratic"
    assert all(not OPERATORS[n].linear for n in QUADRATIC)


def test_a_linear_operator_cannot_be_quadratic():
    from meshops.registry import register

    spec = OPERATORS["div_e2c"]
    with pytest.raises(ValueError, match="'div_e2c_q': quadratic=True needs a tangent"):
        register("div_e2c_q", forward=spec.forward, adjoint=spec.adjoint, domain="edge", range="cell",
                 quadratic=True)
    assert "div_e2c_q" not in OPERATORS


@pytest.mark.parametrize("name", QUADRATIC)
def test_tangent_is_symmetric_and_the_forward_half_of_it(name, mesh, rng):
    """T(x) y = T(y) x and N(x) = T(x) x / 2, for random x, y (float64, to round-off)."""
    spec = OPERATORS[name]
    x = tuple(random_field(mesh, loc, rng, nlev=3) for loc in spec.domain)
    y = tuple(random_field(mesh, loc, rng, nlev=3) for loc in spec.domain)
    txy, tyx = spec.tangent(mesh, *x, *y), spec.tangent(mesh, *y, *x)
    scale = np.abs(txy).max()
    assert np.abs(txy - tyx).max() <= 1e-13 * scale
    half = 0.5 * spec.tangent(mesh, *x, *x)
    assert np.abs(spec.forward(mesh, *x) - half).max() <= 1e-13 * np.abs(half).max()
