"""Kinetic energy edge -> cell: `ke_e2c`, its tangent-linear model and adjoint.

MPAS form (compute_solve_diagnostics in core_sw): with e_j = edgesOnCell[c, j], j < nEdgesOnCell[c],

    ke_e2c(u)[c] = 1/areaCell[c] * sum_j 0.25 * dcEdge[e_j] * dvEdge[e_j] * u[e_j]^2

(0.25 * dcEdge * dvEdge is the area of the two triangles between edge e_j and the centres of its two
cells, split evenly; the sum is 0.5|U|^2 times areaCell for a smooth field U up to O(dx) on MPAS
meshes). Writing kw[e] = 0.25 * dcEdge[e] * dvEdge[e]:

    ke_e2c_tl(u; du)[c] = 1/areaCell[c] * sum_j 2 * kw[e_j] * u[e_j] * du[e_j]
    ke_e2c_adj(u; g)[e] = 2 * kw[e] * u[e] * (g[c0] / areaCell[c0] + g[c1] / areaCell[c1]),
                          (c0, c1) = cellsOnEdge[e],

so that sum_c ke_e2c_tl(u; du)[c] g[c] = sum_e du[e] ke_e2c_adj(u; g)[e] (plain Euclidean inner
product over entries and levels). Adjoint mode `atomic` scatters from each cell through edgesOnCell
(atomicAdd on the GPU); `deterministic` gathers into each edge through cellsOnEdge.
"""
from __future__ import annotations

import numpy as np

from meshops import stencil
from meshops.backend import array_module, check_field, prepared
from meshops.kernels import get_kernel, launch
from meshops.modes import resolve_mode
from meshops.registry import register

_FAMILY = "kinetic_energy"
_KERNELS = ("ke_e2c", "ke_e2c_tl", "ke_e2c_adj_atomic", "ke_e2c_adj_gather")


def _build(mesh) -> dict:
    return dict(nEdgesOnCell=mesh.nEdgesOnCell, edgesOnCell=mesh.edgesOnCell,
                cellsOnEdge=mesh.cellsOnEdge, kw=0.25 * mesh.dcEdge * mesh.dvEdge,
                invAreaCell=1.0 / mesh.areaCell)


def _build_numpy(mesh) -> dict:
    """Stencil coefficients of the NumPy path (the CUDA kernels form them from the arrays above):
    cellCoef[c, j] = kw[e_j] / areaCell[c] on edgesOnCell, cellCoef2 = 2 * cellCoef, kw2 = 2 * kw and
    edgeInvArea[e, i] = 1 / areaCell[c_i] on cellsOnEdge (pads are masked by stencil)."""
    kw, inv_area = 0.25 * mesh.dcEdge * mesh.dvEdge, 1.0 / mesh.areaCell
    cell_coef = kw[mesh.edgesOnCell] * inv_area[:, None]
    return dict(cellCoef=cell_coef, cellCoef2=2 * cell_coef, kw2=2 * kw,
                edgeInvArea=inv_area[mesh.cellsOnEdge])


def _arrays(mesh, x):
    return prepared(mesh, _FAMILY, _build, array_module(x), x.dtype)


def _numpy_coefficients(mesh, x):
    """The `_build_numpy` coefficients in x's dtype (host only: never copied to a GPU)."""
    return prepared(mesh, _FAMILY + ".numpy", _build_numpy, np, x.dtype)


def _launch(name, dtype, n, nlev, *args):
    launch(get_kernel(_FAMILY, _KERNELS, name, dtype), n * nlev, args + (np.int32(n), np.int32(nlev)))


def ke_e2c(mesh, u):
    """Kinetic energy on cells from normal velocities: (nEdges[, nlev]) -> (nCells[, nlev]).

    ke[c] = 1/areaCell[c] * sum_{j < nEdgesOnCell[c]} 0.25 * dcEdge[e_j] * dvEdge[e_j] * u[e_j]^2,
    e_j = edgesOnCell[c, j]. Tangent: `ke_e2c_tl`; adjoint: `ke_e2c_adj`.
    """
    u = check_field(u, mesh.nEdges, "u", "edge")
    a, xp = _arrays(mesh, u), array_module(u)
    if xp is np:
        return stencil.gather_sum(a.edgesOnCell, a.nEdgesOnCell, _numpy_coefficients(mesh, u).cellCoef,
                                  u * u)
    out = xp.empty((mesh.nCells,) + u.shape[1:], u.dtype)
    _launch("ke_e2c", u.dtype, mesh.nCells, stencil.nlev_of(u), a.nEdgesOnCell, a.edgesOnCell,
            a.kw, a.invAreaCell, u, out, np.int32(mesh.maxEdges))
    return out


def ke_e2c_tl(mesh, u, du):
    """Tangent-linear of `ke_e2c` about u: edge fields u, du -> cell field.

    dke[c] = 1/areaCell[c] * sum_j 0.5 * dcEdge[e_j] * dvEdge[e_j] * u[e_j] * du[e_j].
    """
    u = check_field(u, mesh.nEdges, "u", "edge")
    du = check_field(du, mesh.nEdges, "du", "edge")
    if du.shape != u.shape or du.dtype != u.dtype:
        raise ValueError(f"du: expected shape {tuple(u.shape)} and dtype {u.dtype} (as u), "
                         f"got {tuple(du.shape)} {du.dtype}")
    a, xp = _arrays(mesh, u), array_module(u)
    if xp is np:
        return stencil.gather_sum(a.edgesOnCell, a.nEdgesOnCell, _numpy_coefficients(mesh, u).cellCoef2,
                                  u * du)
    out = xp.empty((mesh.nCells,) + u.shape[1:], u.dtype)
    _launch("ke_e2c_tl", u.dtype, mesh.nCells, stencil.nlev_of(u), a.nEdgesOnCell, a.edgesOnCell,
            a.kw, a.invAreaCell, u, du, out, np.int32(mesh.maxEdges))
    return out


def ke_e2c_adj(mesh, u, g, *, mode=None):
    """Adjoint of `ke_e2c_tl` about u: cell field g -> edge field, (nCells[, nlev]) -> (nEdges[, nlev]).

    u_adj[e] = 0.5 * dcEdge[e] * dvEdge[e] * u[e] * (g[c0] / areaCell[c0] + g[c1] / areaCell[c1]),
    (c0, c1) = cellsOnEdge[e], so that sum_c ke_e2c_tl(u; du)[c] g[c] = sum_e du[e] u_adj[e].
    """
    u = check_field(u, mesh.nEdges, "u", "edge")
    g = check_field(g, mesh.nCells, "g", "cell")
    if g.shape[1:] != u.shape[1:] or g.dtype != u.dtype:
        raise ValueError(f"g: expected shape ({mesh.nCells},) + {tuple(u.shape[1:])} and dtype {u.dtype} "
                         f"(levels and dtype of u), got {tuple(g.shape)} {g.dtype}")
    mode = resolve_mode(mode)
    a, xp = _arrays(mesh, u), array_module(u, g)
    nlev = stencil.nlev_of(u)
    if xp is np:
        c = _numpy_coefficients(mesh, u)
        if mode == "atomic":
            s = stencil.scatter_sum(a.edgesOnCell, a.nEdgesOnCell, c.cellCoef2, g, mesh.nEdges)
            return s * u
        s = stencil.gather_sum(a.cellsOnEdge, None, c.edgeInvArea, g)
        return (c.kw2[:, None] if u.ndim == 2 else c.kw2) * u * s
    if mode == "atomic":
        out = xp.zeros((mesh.nEdges,) + u.shape[1:], u.dtype)
        _launch("ke_e2c_adj_atomic", u.dtype, mesh.nCells, nlev, a.nEdgesOnCell, a.edgesOnCell,
                a.kw, a.invAreaCell, u, g, out, np.int32(mesh.maxEdges))
    else:
        out = xp.empty((mesh.nEdges,) + u.shape[1:], u.dtype)
        _launch("ke_e2c_adj_gather", u.dtype, mesh.nEdges, nlev, a.cellsOnEdge, a.kw,
                a.invAreaCell, u, g, out)
    return out


register("ke_e2c", forward=ke_e2c, tangent=ke_e2c_tl, adjoint=ke_e2c_adj, domain="edge",
         range="cell")
