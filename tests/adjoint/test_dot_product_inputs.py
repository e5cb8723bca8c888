"""dot_product_test with inputs at the wrong location: a clear error naming the argument, the
expected location and shape and what was given (issue #13), instead of a NumPy broadcast error."""
import numpy as np
import pytest

import meshops
from adjoint import VerificationInputError, dot_product_test
from meshops.registry import OPERATORS

from .conftest import field


def _div(mesh):
    return (lambda F: meshops.div_e2c(mesh, F)), (lambda y: meshops.div_e2c_adj(mesh, y))


def test_y_at_wrong_location_names_operator_range(mesh, rng):
    forward, adjoint = _div(mesh)
    F, y_edge = field(mesh, "edge", rng), field(mesh, "edge", rng)
    with pytest.raises(VerificationInputError) as info:
        dot_product_test(forward, adjoint, F, y_edge, operator="div_e2c", mesh=mesh)
    message = str(info.value)
    assert message.startswith("y:"), message
    assert "div_e2c's range" in message and "cell field" in message
    assert "(162,) or (162, nlev)" in message and "nCells=162" in message
    assert "given shape (480,)" in message and "edge (nEdges=480)" in message
    assert "broadcast" not in message


def test_y_at_wrong_location_without_operator(mesh, rng):
    """Without operator=, y is still checked against the shape of forward(x), before any arithmetic."""
    forward, adjoint = _div(mesh)
    with pytest.raises(ValueError) as info:
        dot_product_test(forward, adjoint, field(mesh, "edge", rng), field(mesh, "edge", rng))
    message = str(info.value)
    assert "y: expected the shape of forward(x), shape (162,)" in message
    assert "given shape (480,)" in message
    assert "broadcast" not in message


def test_y_with_wrong_level_count(mesh, rng):
    forward, adjoint = _div(mesh)
    with pytest.raises(VerificationInputError, match=r"y: expected .*\(162, 4\).*given shape \(162, 3\)"):
        dot_product_test(forward, adjoint, field(mesh, "edge", rng, 4), field(mesh, "cell", rng, 3),
                         operator="div_e2c", mesh=mesh)


def test_x_at_wrong_location(mesh, rng):
    forward, adjoint = _div(mesh)
    with pytest.raises(VerificationInputError) as info:
        dot_product_test(forward, adjoint, field(mesh, "vertex", rng), field(mesh, "cell", rng),
                         operator="div_e2c", mesh=mesh)
    message = str(info.value)
    assert message.startswith("x:") and "div_e2c's domain needs a edge field" in message
    assert "vertex (nVertices=320)" in message


def test_wrong_number_of_fields(mesh, rng):
    spec = OPERATORS["flux_div_e2c"]   # nonlinear: the tangent takes (dh, du) at (edge, edge)
    base = (field(mesh, "edge", rng), field(mesh, "edge", rng))
    with pytest.raises(VerificationInputError, match=r"x: flux_div_e2c's domain takes 2 field\(s\) at edge, edge; 1"):
        dot_product_test(lambda *d: spec.tangent(mesh, *base, *d), lambda *y: spec.adjoint(mesh, *base, *y),
                         field(mesh, "edge", rng), field(mesh, "cell", rng), operator=spec, mesh=mesh)


def test_second_field_named_by_index(mesh, rng):
    spec = OPERATORS["flux_div_e2c"]
    base = (field(mesh, "edge", rng), field(mesh, "edge", rng))
    with pytest.raises(VerificationInputError, match=r"^x\[1\]: .*edge field.*given shape \(162,\)"):
        dot_product_test(lambda *d: spec.tangent(mesh, *base, *d), lambda *y: spec.adjoint(mesh, *base, *y),
                         (field(mesh, "edge", rng), field(mesh, "cell", rng)), field(mesh, "cell", rng),
                         operator="flux_div_e2c", mesh=mesh)


def test_adjoint_output_of_wrong_shape(mesh, rng):
    forward, _ = _div(mesh)
    with pytest.raises(VerificationInputError, match=r"adjoint\(y\): expected the shape of x, shape \(480,\)"):
        dot_product_test(forward, lambda y: y, field(mesh, "edge", rng), field(mesh, "cell", rng))


def test_unknown_operator_and_missing_mesh(mesh, rng):
    forward, adjoint = _div(mesh)
    F, y = field(mesh, "edge", rng), field(mesh, "cell", rng)
    with pytest.raises(VerificationInputError, match="'div' is not registered"):
        dot_product_test(forward, adjoint, F, y, operator="div", mesh=mesh)
    with pytest.raises(VerificationInputError, match="needs mesh="):
        dot_product_test(forward, adjoint, F, y, operator="div_e2c")


@pytest.mark.parametrize("nlev", [None, 3])
@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.vertical))  # vertical: tests/meshops
def test_right_locations_pass_the_check(name, nlev, mesh, rng):
    """Every registered operator's own domain and range locations pass the check (and the test)."""
    spec = OPERATORS[name]
    x = tuple(field(mesh, loc, rng, nlev) for loc in spec.domain)
    y = tuple(field(mesh, loc, rng, nlev) for loc in spec.range)
    if spec.linear:
        forward, adjoint = (lambda *a: spec.forward(mesh, *a)), (lambda *a: spec.adjoint(mesh, *a))
    else:
        base = tuple(field(mesh, loc, rng, nlev) for loc in spec.domain)
        forward = lambda *a: spec.tangent(mesh, *base, *a)      # noqa: E731
        adjoint = lambda *a: spec.adjoint(mesh, *base, *a)      # noqa: E731
    result = dot_product_test(forward, adjoint, x, y, operator=name, mesh=mesh)
    assert result.relative_error <= 1e-12, result
    assert np.isfinite(result.scaled_error)
