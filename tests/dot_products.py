"""The adjoint identity <T d, g> = <d, T^T g>, checked against the round-off scale of its sums."""
from adjoint.verification import inner


def assert_adjoint_identity(tangent, adj_in, direction, adj_out, tol=1e-12, msg=None):
    """|<T d, g> - <d, T^T g>| <= tol (sum_i |(T d)_i g_i| + sum_j |d_j (T^T g)_j|).

    `tangent` = T d and `adj_in` = g pair up array by array (NumPy or CuPy), as do `direction` = d
    and `adj_out` = T^T g (a `None` direction is left out). The bound is the scale at which the two
    sums are rounded: with random signs in g their values can cancel to far below it, so a bound
    relative to the values alone fails on round-off.
    """
    direction, adj_out = zip(*[(x, a) for x, a in zip(direction, adj_out, strict=True) if x is not None])
    left, right = inner(tangent, adj_in), inner(direction, adj_out)
    scale = inner(tangent, adj_in, absolute=True) + inner(direction, adj_out, absolute=True)
    assert abs(left - right) <= tol * scale, (msg, left, right, abs(left - right) / scale)
