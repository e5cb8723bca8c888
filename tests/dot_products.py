"""The adjoint identity <T d, g> = <d, T^T g>, checked against the round-off scale of its sums."""
import numpy as np


def _host(a):
    return np.asarray(a.get() if hasattr(a, "get") else a, dtype=np.float64)


def _sums(xs, ys):
    """(sum_i x_i y_i, sum_i |x_i y_i|) over pairs of arrays (NumPy or CuPy), in float64."""
    products = [(_host(x) * _host(y)).ravel() for x, y in zip(xs, ys, strict=True)]
    return sum(float(p.sum()) for p in products), sum(float(abs(p).sum()) for p in products)


def assert_adjoint_identity(tangent, adj_in, direction, adj_out, tol=1e-12, msg=None):
    """|<T d, g> - <d, T^T g>| <= tol (sum_i |(T d)_i g_i| + sum_j |d_j (T^T g)_j|).

    `tangent` = T d and `adj_in` = g pair up array by array, as do `direction` = d and
    `adj_out` = T^T g (a `None` direction is left out). The bound is the scale at which the two
    sums are rounded: with random signs in g their values can cancel to far below it, so a bound
    relative to the values alone fails on round-off.
    """
    pairs = [(x, a) for x, a in zip(direction, adj_out, strict=True) if x is not None]
    left, left_scale = _sums(tangent, adj_in)
    right, right_scale = _sums(*zip(*pairs))
    gap, scale = abs(left - right), left_scale + right_scale
    assert gap <= tol * scale, (msg, left, right, gap / scale)
