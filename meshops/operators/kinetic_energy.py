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
(atomicAdd on the GPU); `deterministic` gathers into each edge through cellsOnEdge. Both backends read
the coefficients precomputed per stencil slot by `_build`.
"""
from __future__ import annotations

import numpy as np

from meshops.device import connectivity, stencil
from meshops.device.backend import array_module, check_field, prepared
from meshops.device.kernels import Family, Kernel
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("kinetic_energy", (
    Kernel("ke_e2c", "idx:edgesOnCell coef:cellCoef in:u out:ke int:maxEdges"),
    Kernel("ke_e2c_tl", "idx:edgesOnCell coef:cellCoef2 in:u in:du out:dke int:maxEdges"),
    Kernel("ke_e2c_adj_atomic", "idx:edgesOnCell coef:cellCoef2 in:u in:g out:u_adj int:maxEdges"),
    Kernel("ke_e2c_adj_gather", "idx:cellsOnEdge coef:edgeCoef in:u in:g out:u_adj")))


def _build(mesh) -> dict:
    """Stencil coefficients of both backends, kw[e] = 0.25 * dcEdge[e] * dvEdge[e]:
    cellCoef[c, j] = kw[e_j] / areaCell[c] on edgesOnCell masked beyond nEdgesOnCell,
    cellCoef2 = 2 * cellCoef (tangent and scatter adjoint), and edgeCoef[e, i] = 2 * kw[e] /
    areaCell[c_i] on cellsOnEdge (gather adjoint); 0 in pads and on a missing cell."""
    kw, inv_area = 0.25 * mesh.dcEdge * mesh.dvEdge, 1.0 / mesh.areaCell
    edges = connectivity.masked(mesh.edgesOnCell, mesh.nEdgesOnCell)
    cells = connectivity.masked(mesh.cellsOnEdge)
    cell_coef = np.where(edges >= 0, kw[np.maximum(edges, 0)] * inv_area[:, None], 0.0)
    edge_coef = np.where(cells >= 0, 2 * kw[:, None] * inv_area[np.maximum(cells, 0)], 0.0)
    return dict(edgesOnCell=edges, cellCoef=cell_coef, cellCoef2=2 * cell_coef, cellsOnEdge=cells,
                edgeCoef=edge_coef)


def _arrays(mesh, x):
    return prepared(mesh, "kinetic_energy", _build, array_module(x), x.dtype)


def ke_e2c(mesh, u, *, rows=None):
    """Kinetic energy on cells from normal velocities: (nEdges[, nlev]) -> (nCells[, nlev]).

    ke[c] = 1/areaCell[c] * sum_{j < nEdgesOnCell[c]} 0.25 * dcEdge[e_j] * dvEdge[e_j] * u[e_j]^2,
    e_j = edgesOnCell[c, j]. Tangent: `ke_e2c_tl`; adjoint: `ke_e2c_adj`. `rows=(first, last)`: on
    the GPU only cells [first, last) are computed (the others are left unspecified).
    """
    u = check_field(u, mesh.nEdges, "u", "edge")
    a, xp = _arrays(mesh, u), array_module(u)
    if xp is np:
        return stencil.gather_sum(a.edgesOnCell, None, a.cellCoef, u * u)
    out = xp.empty((mesh.nCells,) + u.shape[1:], u.dtype)
    _KERNELS.launch("ke_e2c", mesh.nCells, edgesOnCell=a.edgesOnCell, cellCoef=a.cellCoef, u=u, ke=out,
                    maxEdges=mesh.maxEdges, rows=rows)
    return out


def ke_e2c_tl(mesh, u, du, *, rows=None):
    """Tangent-linear of `ke_e2c` about u: edge fields u, du -> cell field.

    dke[c] = 1/areaCell[c] * sum_j 0.5 * dcEdge[e_j] * dvEdge[e_j] * u[e_j] * du[e_j].
    `rows`: as for `ke_e2c`.
    """
    u = check_field(u, mesh.nEdges, "u", "edge")
    du = check_field(du, mesh.nEdges, "du", "edge")
    if du.shape != u.shape or du.dtype != u.dtype:
        raise ValueError(f"du: expected shape {tuple(u.shape)} and dtype {u.dtype} (as u), "
                         f"got {tuple(du.shape)} {du.dtype}")
    a, xp = _arrays(mesh, u), array_module(u, du)
    if xp is np:
        return stencil.gather_sum(a.edgesOnCell, None, a.cellCoef2, u * du)
    out = xp.empty((mesh.nCells,) + u.shape[1:], u.dtype)
    _KERNELS.launch("ke_e2c_tl", mesh.nCells, edgesOnCell=a.edgesOnCell, cellCoef2=a.cellCoef2, u=u,
                    du=du, dke=out, maxEdges=mesh.maxEdges, rows=rows)
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
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(a.edgesOnCell, None, a.cellCoef2, g, mesh.nEdges) * u
        return u * stencil.gather_sum(a.cellsOnEdge, None, a.edgeCoef, g)
    if mode == "atomic":
        out = xp.zeros((mesh.nEdges,) + u.shape[1:], u.dtype)
        _KERNELS.launch("ke_e2c_adj_atomic", mesh.nCells, edgesOnCell=a.edgesOnCell,
                        cellCoef2=a.cellCoef2, u=u, g=g, u_adj=out, maxEdges=mesh.maxEdges)
    else:
        out = xp.empty((mesh.nEdges,) + u.shape[1:], u.dtype)
        _KERNELS.launch("ke_e2c_adj_gather", mesh.nEdges, cellsOnEdge=a.cellsOnEdge, edgeCoef=a.edgeCoef,
                        u=u, g=g, u_adj=out)
    return out


register("ke_e2c", forward=ke_e2c, tangent=ke_e2c_tl, adjoint=ke_e2c_adj, domain="edge",
         range="cell")
