"""Vertical operators: sums, averages and differences along columns, the divergence of a vertical
flux, interpolation to a pressure level and pointwise thermodynamics.

Columns (MPAS-Atmosphere's conventions): levels are the last, contiguous axis, counted from the
surface up. A column of nVertLevels = N layers has N + 1 interfaces (nVertLevelsP1); interface k
lies below layer k, so interface 0 is the surface and interface N the top. A layer field has shape
(n, N), an interface field (n, N + 1), a column field (n,) (one value per column); n counts cells,
edges or vertices: every operator acts on the columns of any one horizontal location, each column
on its own (no halo, no exchange). Registered locations: "layer", "interface", "column".

Linear operators (x on layers, F on interfaces; j, k level indices):

    sum_layers_from_top_l2i(x)[k]    = sum_{j >= k} x[j]        (0 at the top, k = N)
    sum_layers_from_bottom_l2i(x)[k] = sum_{j < k} x[j]         (0 at the surface, k = 0)
    avg_l2i(x)[k]  = (x[k-1] + x[k]) / 2 for 0 < k < N; x[0] at the surface, x[N-1] at the top
    diff_l2i(x)[k] = x[k] - x[k-1]       for 0 < k < N; 0 at the surface and the top
    avg_i2l(F)[k]  = (F[k] + F[k+1]) / 2
    diff_i2l(F)[k] = F[k+1] - F[k]
    div_vflux_i2l(F)[k] = F~[k+1] - F~[k],  F~ = F at interior interfaces, 0 at the surface and top

e.g. interface pressure from layer masses, p_i = p_top + g * sum_layers_from_top_l2i(mass), and
geopotential from the surface, phi_i = phi_s + sum_layers_from_bottom_l2i(dphi). The end
interfaces of `avg_l2i` take the adjacent layer's value (one-sided; no extrapolation). In a mass
coordinate F is the upward mass flux per unit area through each interface (kg m-2 s-1) and the
divergence is the plain difference, not divided by a thickness: the layer-mass tendency is
-div_vflux_i2l(F). The surface and the top are closed (no flux), so each column's sum of the
divergence is 0 whatever F holds there, and div_vflux_i2l = -diff_l2i^T (discrete integration
by parts).

Adjoints (g at the forward's output): sum_layers_from_top_l2i_adj(g)[j] = sum_{k <= j} g[k],
sum_layers_from_bottom_l2i_adj(g)[j] = sum_{k > j} g[k] (the reversed cumulative sums); each of
the two-level stencils has the transposed stencil as adjoint (in each function's docstring).

Nonlinear operators (tangent-linear and adjoint about the base state given):

    exner(p) = (p / p0)^kappa,  kappa = R / cp
    specific_volume(p, theta) = R * theta * exner(p) / p          (ideal gas, alpha = R T / p)
    interp_level_l2p(p, x; p_level): x at pressure p_level, linear in log p between the two
        layers that bracket it; a column whose layers all lie above p_level (p_level below the
        lowest layer: underground) takes x[0], one whose layers all lie below it takes x[N-1].

The interpolation is continuous in p and x, differentiable except where p_level crosses a
layer's pressure; its tangent and adjoint are those of the active bracket (beyond the ends:
derivative 1 in the end layer's x, 0 in p). Layer pressure must decrease strictly upward (as it
does); the bracket is found by counting the layers with p >= p_level.

Constants: MPAS's (mpas_constants.F): R = 287 J kg-1 K-1, cp = 7 R / 2, p0 = 1e5 Pa. Adjoint
modes: every column is written by one thread (GPU) and nothing is scattered, so "atomic" and
"deterministic" give the same, bitwise reproducible, result. The inner product of every adjoint
is the plain Euclidean sum over entries and levels. On the GPU (meshops/cuda/vertical.cu) the
scans and the interpolation run one thread per column, the two-level stencils one thread per
(column, output level) from coefficient tables per level, the pointwise operators one thread per
(entity, lane).
"""
from __future__ import annotations

import numpy as np

from meshops.device.backend import array_module
from meshops.device.kernels import Family, Kernel, check_rows
from meshops.device.mesh import check_mesh, for_fields
from meshops.device.tables import SIZE_OF
from meshops.modes import resolve_mode
from meshops.registry import register

#: Gas constant of dry air (J kg-1 K-1), its specific heat at constant pressure and the reference
#: pressure (Pa) of MPAS (mpas_constants.F).
R_DRY = 287.0
CP_DRY = 7.0 * R_DRY / 2.0
P0 = 1.0e5
#: The pressure level `interp_level_l2p` interpolates to unless told (850 hPa).
P_LEVEL = 85000.0

_KERNELS = Family("vertical", (
    Kernel("sum_layers_from_top_l2i", "in:x:layer out:y:interface int:nVertLevels", threads="column"),
    Kernel("sum_layers_from_top_l2i_adj", "in:g:interface out:x_adj:layer int:nVertLevels",
           threads="column"),
    Kernel("sum_layers_from_bottom_l2i", "in:x:layer out:y:interface int:nVertLevels", threads="column"),
    Kernel("sum_layers_from_bottom_l2i_adj", "in:g:interface out:x_adj:layer int:nVertLevels",
           threads="column"),
    Kernel("pair_l2i", "coef:coef in:x:layer out:y:interface int:nVertLevels", threads="level"),
    Kernel("pair_i2l", "coef:coef in:x:interface out:y:layer int:nVertLevels", threads="level"),
    Kernel("interp_level_l2p", "in:p:layer in:x:layer out:y:column int:nVertLevels real:pLevel",
           threads="column"),
    Kernel("interp_level_l2p_tl",
           "in:p:layer in:x:layer in:dp:layer in:dx:layer out:dy:column int:nVertLevels real:pLevel",
           threads="column"),
    Kernel("interp_level_l2p_adj",
           "in:p:layer in:x:layer in:g:column out:p_adj:layer out:x_adj:layer int:nVertLevels "
           "real:pLevel", threads="column"),
    Kernel("exner", "in:p out:pi real:p0 real:kappa"),
    Kernel("exner_derivative", "in:p in:v out:w real:p0 real:kappa"),
    Kernel("specific_volume", "in:p in:theta out:alpha real:p0 real:kappa real:R"),
    Kernel("specific_volume_tl", "in:p in:theta in:dp in:dtheta out:dalpha real:p0 real:kappa real:R"),
    Kernel("specific_volume_adj",
           "in:p in:theta in:g out:p_adj out:theta_adj real:p0 real:kappa real:R"),
))

_LEVELS = {"layer": lambda N: N, "interface": lambda N: N + 1}


# -- field checks ----------------------------------------------------------------------------------

def _rows_of(mesh) -> dict:
    mesh = check_mesh(mesh)
    return {loc: int(getattr(mesh, size)) for loc, size in SIZE_OF.items()}


def _check(x, mesh, name: str, where: str, like=None):
    """`x` checked as a float32/float64 field at vertical location `where` ("layer", "interface",
    "column", or "any": (n,) or (n, nlev)), n the rows of a horizontal location of `mesh` (those
    of `like`, its nVertLevels and dtype, when given); returned contiguous. `like` is (rows,
    nVertLevels, dtype)."""
    rows = _rows_of(mesh)
    sizes = ", ".join(f"{SIZE_OF[loc]}={n}" for loc, n in rows.items())
    if like is None:
        n_text = f"n one of {sizes}"
    else:
        n_text = f"n = {like[0]} as the first input"
    levels = {"layer": "nVertLevels", "interface": "nVertLevels + 1"}.get(where)
    if like is not None and levels:
        levels = f"{_LEVELS[where](like[1])}"
    shape = {"column": "(n,)", "any": "(n,) or (n, nlev)"}.get(where, f"(n, {levels})")
    what = f"a {where} field of shape {shape}, {n_text}" if where != "any" else \
        f"a field of shape {shape}, {n_text}"
    if not (hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(x, "ndim")):
        raise TypeError(f"{name}: expected {what} (a NumPy or CuPy array), got {type(x).__name__}")
    if x.dtype not in (np.float32, np.float64) or (like is not None and x.dtype != like[2]):
        expected = "float32 or float64" if like is None else f"{like[2]} as the first input"
        raise TypeError(f"{name}: expected a {expected} field, got dtype {x.dtype}")
    ndim_ok = {"column": (1,), "any": (1, 2)}.get(where, (2,))
    n_ok = x.ndim >= 1 and (x.shape[0] in rows.values() if like is None else x.shape[0] == like[0])
    level_ok = (where in ("column", "any") or x.ndim != 2 or like is None
                or x.shape[1] == _LEVELS[where](like[1]))
    if x.ndim not in ndim_ok or not n_ok or not level_ok or (where == "interface" and x.shape[1] < 2) \
            or (where == "layer" and x.shape[1] < 1):
        raise ValueError(f"{name}: expected {what}, got shape {tuple(x.shape)}")
    return array_module(x).ascontiguousarray(x)


def _column(x, mesh, name, where):
    """(x checked at `where`, (rows, nVertLevels, dtype)): the first input of an operator."""
    x = _check(x, mesh, name, where)
    N = x.shape[1] - (1 if where == "interface" else 0)
    return x, (x.shape[0], N, x.dtype)


def _numpy_rows(fn, shape, dtype, rows, *fields):
    """fn(*fields) on NumPy, on rows [first, last) only when `rows` is given (the others of the
    output left unspecified)."""
    if rows is None:
        return fn(*fields)
    first, last = check_rows(rows, shape[0])
    out = np.empty(shape, dtype)
    out[first:last] = fn(*(f[first:last] for f in fields))
    return out


# -- sums along the column (scans) -----------------------------------------------------------------

def sum_layers_from_top_l2i(mesh, x, *, rows=None):
    """Sum of the layers above each interface: layer field -> interface field, (n, N) -> (n, N+1).

    y[k] = sum_{j=k}^{N-1} x[j], so y[N] = 0 (the top) and y[0] the column total; e.g. interface
    pressure p_top + g * y from layer masses. Adjoint: `sum_layers_from_top_l2i_adj`.
    `rows=(first, last)`: only columns [first, last) are computed.
    """
    x, (n, N, dt) = _column(x, mesh, "x", "layer")
    xp = array_module(x)
    if xp is np:
        def scan(a):
            y = np.zeros((a.shape[0], N + 1), dt)
            y[:, :N] = np.cumsum(a[:, ::-1], axis=1)[:, ::-1]
            return y
        return _numpy_rows(scan, (n, N + 1), dt, rows, x)
    y = xp.empty((n, N + 1), dt)
    _KERNELS.launch("sum_layers_from_top_l2i", n, x=x, y=y, nVertLevels=N, rows=rows)
    return y


def sum_layers_from_top_l2i_adj(mesh, g, *, mode=None):
    """Adjoint of `sum_layers_from_top_l2i`: interface field -> layer field, (n, N+1) -> (n, N).

    x_adj[j] = sum_{k=0}^{j} g[k] (the cumulative sum from the surface), so that
    sum y[k] g[k] = sum x[j] x_adj[j]. `mode` is accepted for the common signature (one result).
    """
    resolve_mode(mode)
    g, (n, N, dt) = _column(g, mesh, "g", "interface")
    xp = array_module(g)
    if xp is np:
        return np.cumsum(g[:, :N], axis=1)
    x_adj = xp.empty((n, N), dt)
    _KERNELS.launch("sum_layers_from_top_l2i_adj", n, g=g, x_adj=x_adj, nVertLevels=N)
    return x_adj


def sum_layers_from_bottom_l2i(mesh, x, *, rows=None):
    """Sum of the layers below each interface: layer field -> interface field, (n, N) -> (n, N+1).

    y[k] = sum_{j=0}^{k-1} x[j], so y[0] = 0 (the surface) and y[N] the column total; e.g.
    geopotential phi_s + y from layer thicknesses in geopotential. Adjoint:
    `sum_layers_from_bottom_l2i_adj`. `rows`: as for `sum_layers_from_top_l2i`.
    """
    x, (n, N, dt) = _column(x, mesh, "x", "layer")
    xp = array_module(x)
    if xp is np:
        def scan(a):
            y = np.zeros((a.shape[0], N + 1), dt)
            y[:, 1:] = np.cumsum(a, axis=1)
            return y
        return _numpy_rows(scan, (n, N + 1), dt, rows, x)
    y = xp.empty((n, N + 1), dt)
    _KERNELS.launch("sum_layers_from_bottom_l2i", n, x=x, y=y, nVertLevels=N, rows=rows)
    return y


def sum_layers_from_bottom_l2i_adj(mesh, g, *, mode=None):
    """Adjoint of `sum_layers_from_bottom_l2i`: interface field -> layer field.

    x_adj[j] = sum_{k=j+1}^{N} g[k] (the cumulative sum from the top), so that
    sum y[k] g[k] = sum x[j] x_adj[j]. `mode`: as for `sum_layers_from_top_l2i_adj`.
    """
    resolve_mode(mode)
    g, (n, N, dt) = _column(g, mesh, "g", "interface")
    xp = array_module(g)
    if xp is np:
        return np.ascontiguousarray(np.cumsum(g[:, :0:-1], axis=1)[:, ::-1])
    x_adj = xp.empty((n, N), dt)
    _KERNELS.launch("sum_layers_from_bottom_l2i_adj", n, g=g, x_adj=x_adj, nVertLevels=N)
    return x_adj


# -- two-level stencils ------------------------------------------------------------------------------
# On the GPU each is one kernel on a table of (lower, upper) coefficients per output level:
#   layer -> interface (pair_l2i):  y[k] = c[k,0] * x[k-1] + c[k,1] * x[k]   (terms off the column: 0)
#   interface -> layer (pair_i2l):  y[k] = c[k,0] * x[k]   + c[k,1] * x[k+1]
# The adjoint of either is the other on the transposed table (`_transposed`).

def _avg_l2i_coef(N):
    c = np.full((N + 1, 2), 0.5)
    c[0] = (0.0, 1.0)
    c[N] = (1.0, 0.0)
    return c


def _diff_l2i_coef(N):
    c = np.tile([-1.0, 1.0], (N + 1, 1))
    c[0] = c[N] = 0.0
    return c


def _avg_i2l_coef(N):
    return np.full((N, 2), 0.5)


def _diff_i2l_coef(N):
    return np.tile([-1.0, 1.0], (N, 1))


def _div_vflux_i2l_coef(N):
    c = np.tile([-1.0, 1.0], (N, 1))
    c[0, 0] = 0.0           # no flux through the surface
    c[N - 1, 1] = 0.0       # nor through the top
    return c


_PAIRS = {"avg_l2i": ("l2i", _avg_l2i_coef), "diff_l2i": ("l2i", _diff_l2i_coef),
          "avg_i2l": ("i2l", _avg_i2l_coef), "diff_i2l": ("i2l", _diff_i2l_coef),
          "div_vflux_i2l": ("i2l", _div_vflux_i2l_coef)}


def _transposed(kind, build):
    """The table of the adjoint of pair stencil `kind` with the table `build(N)` (module note):
    the transpose of an l2i stencil c is the i2l stencil c'[j] = (c[j,1], c[j+1,0]), that of an
    i2l stencil the l2i stencil c'[j] = (c[j-1,1], c[j,0]) (0 off the column)."""
    def transposed(N):
        c = build(N)
        t = np.zeros((N, 2) if kind == "l2i" else (N + 1, 2))
        if kind == "l2i":
            t[:, 0], t[:, 1] = c[:N, 1], c[1:, 0]
        else:
            t[1:, 0], t[:N, 1] = c[:, 1], c[:, 0]
        return t
    return transposed


def _pair(op, x, mesh, adjoint=False, rows=None):
    """The GPU stencil of `op` (its adjoint when `adjoint`) on x."""
    kind, build = _PAIRS[op]
    if adjoint:
        kind, build, name = ("i2l" if kind == "l2i" else "l2i"), _transposed(kind, build), f"{op}_adj"
    else:
        name = op
    xp, n = array_module(x), x.shape[0]
    N = x.shape[1] if kind == "l2i" else x.shape[1] - 1
    coef = for_fields(mesh, x).level_table(f"vertical.{name}", N, build, x.dtype)
    y = xp.empty((n, N + 1 if kind == "l2i" else N), x.dtype)
    _KERNELS.launch(f"pair_{kind}", n, coef=coef, x=x, y=y, nVertLevels=N, rows=rows)
    return y


def avg_l2i(mesh, x, *, rows=None):
    """Layer -> interface average (Lorenz staggering): (n, N) -> (n, N+1).

    y[k] = (x[k-1] + x[k]) / 2 for 0 < k < N; y[0] = x[0], y[N] = x[N-1] (the end interfaces
    take the adjacent layer). Adjoint: `avg_l2i_adj`. `rows`: as for `sum_layers_from_top_l2i`.
    """
    x, (n, N, dt) = _column(x, mesh, "x", "layer")
    if array_module(x) is not np:
        return _pair("avg_l2i", x, mesh, rows=rows)

    def avg(a):
        y = np.empty((a.shape[0], N + 1), dt)
        y[:, 1:N] = 0.5 * (a[:, :-1] + a[:, 1:])
        y[:, 0], y[:, N] = a[:, 0], a[:, N - 1]
        return y
    return _numpy_rows(avg, (n, N + 1), dt, rows, x)


def avg_l2i_adj(mesh, g, *, mode=None):
    """Adjoint of `avg_l2i`: interface field -> layer field, (n, N+1) -> (n, N).

    x_adj[j] = a_j g[j] + b_j g[j+1], a_j = 1 at j = 0 (else 1/2), b_j = 1 at j = N-1 (else 1/2).
    """
    resolve_mode(mode)
    g, (n, N, dt) = _column(g, mesh, "g", "interface")
    if array_module(g) is not np:
        return _pair("avg_l2i", g, mesh, adjoint=True)
    a, b = np.full(N, 0.5, dt), np.full(N, 0.5, dt)
    a[0], b[N - 1] = 1.0, 1.0
    return a * g[:, :N] + b * g[:, 1:]


def diff_l2i(mesh, x, *, rows=None):
    """Layer -> interface difference: (n, N) -> (n, N+1).

    y[k] = x[k] - x[k-1] for 0 < k < N; y[0] = y[N] = 0 (no one-sided difference at the surface
    and the top). Adjoint: `diff_l2i_adj`. `rows`: as for `sum_layers_from_top_l2i`.
    """
    x, (n, N, dt) = _column(x, mesh, "x", "layer")
    if array_module(x) is not np:
        return _pair("diff_l2i", x, mesh, rows=rows)

    def diff(a):
        y = np.zeros((a.shape[0], N + 1), dt)
        y[:, 1:N] = a[:, 1:] - a[:, :-1]
        return y
    return _numpy_rows(diff, (n, N + 1), dt, rows, x)


def diff_l2i_adj(mesh, g, *, mode=None):
    """Adjoint of `diff_l2i`: interface field -> layer field.

    x_adj[j] = g~[j] - g~[j+1], g~ = g at interior interfaces and 0 at the surface and the top.
    """
    resolve_mode(mode)
    g, (n, N, dt) = _column(g, mesh, "g", "interface")
    if array_module(g) is not np:
        return _pair("diff_l2i", g, mesh, adjoint=True)
    inner = g.copy()
    inner[:, 0] = inner[:, N] = 0
    return inner[:, :N] - inner[:, 1:]


def avg_i2l(mesh, F, *, rows=None):
    """Interface -> layer mean: (n, N+1) -> (n, N), y[k] = (F[k] + F[k+1]) / 2.

    Adjoint: `avg_i2l_adj`. `rows`: as for `sum_layers_from_top_l2i`.
    """
    F, (n, N, dt) = _column(F, mesh, "F", "interface")
    if array_module(F) is not np:
        return _pair("avg_i2l", F, mesh, rows=rows)
    return _numpy_rows(lambda a: 0.5 * (a[:, :-1] + a[:, 1:]), (n, N), dt, rows, F)


def avg_i2l_adj(mesh, g, *, mode=None):
    """Adjoint of `avg_i2l`: layer field -> interface field.

    F_adj[k] = (g[k-1] + g[k]) / 2, a term missing where its layer is off the column (k = 0, N).
    """
    resolve_mode(mode)
    g, (n, N, dt) = _column(g, mesh, "g", "layer")
    if array_module(g) is not np:
        return _pair("avg_i2l", g, mesh, adjoint=True)
    F_adj = np.zeros((n, N + 1), dt)
    F_adj[:, :N] += 0.5 * g
    F_adj[:, 1:] += 0.5 * g
    return F_adj


def diff_i2l(mesh, F, *, rows=None):
    """Interface -> layer difference: (n, N+1) -> (n, N), y[k] = F[k+1] - F[k].

    Adjoint: `diff_i2l_adj`. `rows`: as for `sum_layers_from_top_l2i`.
    """
    F, (n, N, dt) = _column(F, mesh, "F", "interface")
    if array_module(F) is not np:
        return _pair("diff_i2l", F, mesh, rows=rows)
    return _numpy_rows(lambda a: a[:, 1:] - a[:, :-1], (n, N), dt, rows, F)


def diff_i2l_adj(mesh, g, *, mode=None):
    """Adjoint of `diff_i2l`: layer field -> interface field, F_adj[k] = g[k-1] - g[k] (a term
    missing where its layer is off the column: F_adj[0] = -g[0], F_adj[N] = g[N-1])."""
    resolve_mode(mode)
    g, (n, N, dt) = _column(g, mesh, "g", "layer")
    if array_module(g) is not np:
        return _pair("diff_i2l", g, mesh, adjoint=True)
    F_adj = np.zeros((n, N + 1), dt)
    F_adj[:, :N] -= g
    F_adj[:, 1:] += g
    return F_adj


def div_vflux_i2l(mesh, F, *, rows=None):
    """Divergence of the upward vertical flux F, on layers: (n, N+1) -> (n, N).

    div[k] = F~[k+1] - F~[k], F~ = F at the interior interfaces and 0 at the surface (k = 0) and
    the top (k = N): closed boundaries, so sum_k div[k] = 0 in every column. A plain difference:
    with F a mass flux (kg m-2 s-1) in a mass coordinate, -div is the layer-mass tendency.
    div_vflux_i2l = -diff_l2i^T. Adjoint: `div_vflux_i2l_adj`. `rows`: as for
    `sum_layers_from_top_l2i`.
    """
    F, (n, N, dt) = _column(F, mesh, "F", "interface")
    if array_module(F) is not np:
        return _pair("div_vflux_i2l", F, mesh, rows=rows)

    def div(a):
        closed = a.copy()
        closed[:, 0] = closed[:, N] = 0
        return closed[:, 1:] - closed[:, :-1]
    return _numpy_rows(div, (n, N), dt, rows, F)


def div_vflux_i2l_adj(mesh, g, *, mode=None):
    """Adjoint of `div_vflux_i2l`: layer field -> interface field.

    F_adj[k] = g[k-1] - g[k] at interior interfaces (0 < k < N), 0 at the surface and the top
    (= -diff_l2i(g)).
    """
    resolve_mode(mode)
    g, (n, N, dt) = _column(g, mesh, "g", "layer")
    if array_module(g) is not np:
        return _pair("div_vflux_i2l", g, mesh, adjoint=True)
    F_adj = np.zeros((n, N + 1), dt)
    F_adj[:, 1:N] = g[:, :-1] - g[:, 1:]
    return F_adj


# -- interpolation to a pressure level --------------------------------------------------------------

def _bracket(p, p_level):
    """(k0, k1, w, inside) per column: the layers bracketing p_level (module docstring), the
    weight of k1 in the log-pressure interpolation, and whether p_level lies between layers (not
    clamped). Beyond the ends: k0 = k1 - 1 (k1 = k0 for one layer) with w 0 (below the lowest
    layer) or 1 (above the top)."""
    n, N = p.shape
    below = (p >= p_level).sum(axis=1)
    inside = (below > 0) & (below < N)
    k0 = np.clip(below - 1, 0, max(N - 2, 0))
    k1 = np.minimum(k0 + 1, N - 1)
    r = np.arange(n)
    L0, L1 = np.log(p[r, k0]), np.log(p[r, k1])
    D = np.where(inside, L0 - L1, 1)
    w = np.where(inside, (L0 - np.log(p.dtype.type(p_level))) / D, np.where(below == 0, 0, 1))
    return r, k0, k1, w.astype(p.dtype), inside, D


def _interp_args(mesh, p, x, p_level, extra=()):
    p, like = _column(p, mesh, "p", "layer")
    x = _check(x, mesh, "x", "layer", like)
    checked = tuple(_check(a, mesh, name, where, like) for a, name, where in extra)
    if not (isinstance(p_level, (int, float, np.floating, np.integer)) and not isinstance(p_level, bool)
            and np.isfinite(p_level) and p_level > 0):
        raise ValueError(f"p_level: expected a positive pressure in Pa, got {p_level!r}")
    return (p, x) + checked, like


def interp_level_l2p(mesh, p, x, *, p_level=P_LEVEL, rows=None):
    """Layer field x at pressure level `p_level` (Pa, default 850 hPa): (n, N) x (n, N) -> (n,).

    With k0, k1 the layers bracketing p_level (p[k0] >= p_level > p[k1], p the layer pressure,
    decreasing upward) and w = (log p[k0] - log p_level) / (log p[k0] - log p[k1]):
    y = x[k0] + w * (x[k1] - x[k0]). A column whose layers all lie above p_level takes x[0], one
    whose layers all lie below it x[N-1] (no extrapolation; module docstring).
    Tangent: `interp_level_l2p_tl`; adjoint: `interp_level_l2p_adj`. `rows`: as for
    `sum_layers_from_top_l2i`.
    """
    (p, x), (n, N, dt) = _interp_args(mesh, p, x, p_level)
    xp = array_module(p, x)
    if xp is np:
        def interp(p, x):
            r, k0, k1, w, _, _ = _bracket(p, p_level)
            return x[r, k0] + w * (x[r, k1] - x[r, k0])
        return _numpy_rows(interp, (n,), dt, rows, p, x)
    y = xp.empty(n, dt)
    _KERNELS.launch("interp_level_l2p", n, p=p, x=x, y=y, nVertLevels=N, pLevel=p_level, rows=rows)
    return y


def interp_level_l2p_tl(mesh, p, x, dp, dx, *, p_level=P_LEVEL, rows=None):
    """Tangent-linear of `interp_level_l2p` about (p, x): layer fields -> column field.

    dy = (1 - w) dx[k0] + w dx[k1] + (x[k1] - x[k0]) / D * ((1 - w) dp[k0] / p[k0]
    + w dp[k1] / p[k1]), D = log p[k0] - log p[k1], the p term only between layers (clamped
    columns: dy = dx of their end layer). `rows`: as for `sum_layers_from_top_l2i`.
    """
    (p, x, dp, dx), (n, N, dt) = _interp_args(mesh, p, x, p_level,
                                                ((dp, "dp", "layer"), (dx, "dx", "layer")))
    xp = array_module(p, x, dp, dx)
    if xp is np:
        def tangent(p, x, dp, dx):
            r, k0, k1, w, inside, D = _bracket(p, p_level)
            s = np.where(inside, (x[r, k1] - x[r, k0]) / D, 0)
            return ((1 - w) * dx[r, k0] + w * dx[r, k1]
                    + s * ((1 - w) * dp[r, k0] / p[r, k0] + w * dp[r, k1] / p[r, k1]))
        return _numpy_rows(tangent, (n,), dt, rows, p, x, dp, dx)
    dy = xp.empty(n, dt)
    _KERNELS.launch("interp_level_l2p_tl", n, p=p, x=x, dp=dp, dx=dx, dy=dy, nVertLevels=N,
                    pLevel=p_level, rows=rows)
    return dy


def interp_level_l2p_adj(mesh, p, x, g, *, p_level=P_LEVEL, mode=None):
    """Adjoint of `interp_level_l2p_tl` about (p, x): column field g -> (p_adj, x_adj) on layers.

    x_adj[k0] = (1 - w) g, x_adj[k1] = w g; p_adj[k0] = s (1 - w) g / p[k0], p_adj[k1] =
    s w g / p[k1], s = (x[k1] - x[k0]) / D between layers and 0 in clamped columns; 0 at every
    other layer, so that sum dy g = sum (dp p_adj + dx x_adj). `mode`: as for
    `sum_layers_from_top_l2i_adj`.
    """
    resolve_mode(mode)
    (p, x, g), (n, N, dt) = _interp_args(mesh, p, x, p_level, ((g, "g", "column"),))
    xp = array_module(p, x, g)
    if xp is np:
        r, k0, k1, w, inside, D = _bracket(p, p_level)
        s = np.where(inside, (x[r, k1] - x[r, k0]) / D, 0) * g
        p_adj, x_adj = np.zeros_like(p), np.zeros_like(x)
        x_adj[r, k0] += (1 - w) * g
        x_adj[r, k1] += w * g
        p_adj[r, k0] += s * (1 - w) / p[r, k0]
        p_adj[r, k1] += s * w / p[r, k1]
        return p_adj, x_adj
    p_adj, x_adj = xp.empty_like(p), xp.empty_like(x)
    _KERNELS.launch("interp_level_l2p_adj", n, p=p, x=x, g=g, p_adj=p_adj, x_adj=x_adj,
                    nVertLevels=N, pLevel=p_level)
    return p_adj, x_adj


# -- pointwise thermodynamics ------------------------------------------------------------------------

def _pointwise(mesh, names, fields):
    """`fields` checked as fields of one shape (n,) or (n, nlev) and dtype (the first's)."""
    first = _check(fields[0], mesh, names[0], "any")
    out = [first]
    for name, f in zip(names[1:], fields[1:]):
        f = _check(f, mesh, name, "any", (first.shape[0], 0, first.dtype))
        if f.shape != first.shape:
            raise ValueError(f"{name}: expected the shape of {names[0]}, {tuple(first.shape)}, got "
                             f"{tuple(f.shape)}")
        out.append(f)
    return out


def _exner(p, p0, kappa):
    return (p / p.dtype.type(p0)) ** p.dtype.type(kappa)


def exner(mesh, p, *, p0=P0, kappa=R_DRY / CP_DRY, rows=None):
    """Exner function of pressure, pointwise: pi = (p / p0)^kappa (p in Pa, kappa = R / cp).

    Any field (n,) or (n, nlev) of positive pressure (registered on layers). Tangent:
    `exner_tl`, dpi = kappa pi / p dp; adjoint: `exner_adj`. `rows`: as for
    `sum_layers_from_top_l2i`.
    """
    (p,) = _pointwise(mesh, ("p",), (p,))
    xp = array_module(p)
    if xp is np:
        return _numpy_rows(lambda a: _exner(a, p0, kappa), p.shape, p.dtype, rows, p)
    pi = xp.empty_like(p)
    _KERNELS.launch("exner", p.shape[0], p=p, pi=pi, p0=p0, kappa=kappa, rows=rows)
    return pi


def exner_tl(mesh, p, dp, *, p0=P0, kappa=R_DRY / CP_DRY, rows=None):
    """Tangent-linear of `exner` about p: dpi = kappa * pi(p) / p * dp."""
    p, dp = _pointwise(mesh, ("p", "dp"), (p, dp))
    return _exner_derivative(p, dp, p0, kappa, rows)


def exner_adj(mesh, p, g, *, p0=P0, kappa=R_DRY / CP_DRY, mode=None):
    """Adjoint of `exner_tl` about p: p_adj = kappa * pi(p) / p * g (pointwise, so the tangent is
    its own adjoint). `mode`: as for `sum_layers_from_top_l2i_adj`."""
    resolve_mode(mode)
    p, g = _pointwise(mesh, ("p", "g"), (p, g))
    return _exner_derivative(p, g, p0, kappa, None)


def _exner_derivative(p, v, p0, kappa, rows):
    """kappa * pi(p) / p * v."""
    xp = array_module(p, v)
    if xp is np:
        return _numpy_rows(lambda p, v: p.dtype.type(kappa) * _exner(p, p0, kappa) / p * v,
                           p.shape, p.dtype, rows, p, v)
    w = xp.empty_like(p)
    _KERNELS.launch("exner_derivative", p.shape[0], p=p, v=v, w=w, p0=p0, kappa=kappa, rows=rows)
    return w


def specific_volume(mesh, p, theta, *, p0=P0, kappa=R_DRY / CP_DRY, R=R_DRY, rows=None):
    """Ideal-gas specific volume from pressure and potential temperature, pointwise:
    alpha = R * theta * pi / p, pi = (p / p0)^kappa (m3 kg-1; p in Pa, theta in K).

    Any fields (n,) or (n, nlev) of one shape (registered on layers). Tangent:
    `specific_volume_tl`; adjoint: `specific_volume_adj`. `rows`: as for
    `sum_layers_from_top_l2i`.
    """
    p, theta = _pointwise(mesh, ("p", "theta"), (p, theta))
    xp = array_module(p, theta)
    if xp is np:
        def alpha(p, theta):
            return p.dtype.type(R) * theta * _exner(p, p0, kappa) / p
        return _numpy_rows(alpha, p.shape, p.dtype, rows, p, theta)
    alpha = xp.empty_like(p)
    _KERNELS.launch("specific_volume", p.shape[0], p=p, theta=theta, alpha=alpha, p0=p0,
                    kappa=kappa, R=R, rows=rows)
    return alpha


def _specific_volume_partials(p, theta, p0, kappa, R):
    """(d alpha / d p, d alpha / d theta) = ((kappa - 1) * a * theta / p, a), a = R * pi / p."""
    a = p.dtype.type(R) * _exner(p, p0, kappa) / p
    return p.dtype.type(kappa - 1) * a * theta / p, a


def specific_volume_tl(mesh, p, theta, dp, dtheta, *, p0=P0, kappa=R_DRY / CP_DRY, R=R_DRY,
                       rows=None):
    """Tangent-linear of `specific_volume` about (p, theta):
    dalpha = (kappa - 1) * R * pi / p * theta / p * dp + R * pi / p * dtheta."""
    p, theta, dp, dtheta = _pointwise(mesh, ("p", "theta", "dp", "dtheta"), (p, theta, dp, dtheta))
    xp = array_module(p, theta, dp, dtheta)
    if xp is np:
        def tangent(p, theta, dp, dtheta):
            a_p, a_theta = _specific_volume_partials(p, theta, p0, kappa, R)
            return a_p * dp + a_theta * dtheta
        return _numpy_rows(tangent, p.shape, p.dtype, rows, p, theta, dp, dtheta)
    dalpha = xp.empty_like(p)
    _KERNELS.launch("specific_volume_tl", p.shape[0], p=p, theta=theta, dp=dp, dtheta=dtheta,
                    dalpha=dalpha, p0=p0, kappa=kappa, R=R, rows=rows)
    return dalpha


def specific_volume_adj(mesh, p, theta, g, *, p0=P0, kappa=R_DRY / CP_DRY, R=R_DRY, mode=None):
    """Adjoint of `specific_volume_tl` about (p, theta): g -> (p_adj, theta_adj),
    p_adj = (kappa - 1) * R * pi / p * theta / p * g, theta_adj = R * pi / p * g.
    `mode`: as for `sum_layers_from_top_l2i_adj`."""
    resolve_mode(mode)
    p, theta, g = _pointwise(mesh, ("p", "theta", "g"), (p, theta, g))
    xp = array_module(p, theta, g)
    if xp is np:
        a_p, a_theta = _specific_volume_partials(p, theta, p0, kappa, R)
        return a_p * g, a_theta * g
    p_adj, theta_adj = xp.empty_like(p), xp.empty_like(p)
    _KERNELS.launch("specific_volume_adj", p.shape[0], p=p, theta=theta, g=g, p_adj=p_adj,
                    theta_adj=theta_adj, p0=p0, kappa=kappa, R=R)
    return p_adj, theta_adj


# -- registration -------------------------------------------------------------------------------------

def sample_pressure(z):
    """Layer pressures (Pa) from fields z of independent standard-normal entries, for tests: in
    each column of N layers positive and strictly decreasing upward, from the order of 1e5 Pa near
    the surface (the column's factor from z[:, 0]: 850 hPa lies below the lowest layer in some
    columns) to the order of 5e3 Pa at the top; a field (n,) as one layer per entry."""
    xp, flat = array_module(z), z.ndim == 1
    z = z[:, None] if flat else z
    N = z.shape[1]
    k = xp.arange(N, dtype=z.dtype)
    height = (k + 0.5 + 0.4 * xp.tanh(z)) * (3.0 / N)          # log(p_s / p), increasing in k
    surface = 1.0e5 * xp.exp(0.2 * xp.tanh(z[:, :1]))
    p = surface * xp.exp(-height)
    return p[:, 0] if flat else p


def _sample_p(p, *rest):
    return (sample_pressure(p),) + rest


for _name, _fwd, _adj, _dom, _rng in (
        ("sum_layers_from_top_l2i", sum_layers_from_top_l2i, sum_layers_from_top_l2i_adj, "layer", "interface"),
        ("sum_layers_from_bottom_l2i", sum_layers_from_bottom_l2i, sum_layers_from_bottom_l2i_adj, "layer",
         "interface"),
        ("avg_l2i", avg_l2i, avg_l2i_adj, "layer", "interface"),
        ("diff_l2i", diff_l2i, diff_l2i_adj, "layer", "interface"),
        ("avg_i2l", avg_i2l, avg_i2l_adj, "interface", "layer"),
        ("diff_i2l", diff_i2l, diff_i2l_adj, "interface", "layer"),
        ("div_vflux_i2l", div_vflux_i2l, div_vflux_i2l_adj, "interface", "layer")):
    register(_name, forward=_fwd, adjoint=_adj, domain=_dom, range=_rng, halo_depth=0)
register("interp_level_l2p", forward=interp_level_l2p, tangent=interp_level_l2p_tl,
         adjoint=interp_level_l2p_adj, domain=("layer", "layer"), range="column", halo_depth=0,
         sample=_sample_p)
register("exner", forward=exner, tangent=exner_tl, adjoint=exner_adj, domain="layer", range="layer",
         halo_depth=0, sample=_sample_p)
register("specific_volume", forward=specific_volume, tangent=specific_volume_tl,
         adjoint=specific_volume_adj, domain=("layer", "layer"), range="layer", halo_depth=0,
         sample=_sample_p)
