"""Divergence edge -> cell: plain `div_e2c` and the bilinear flux divergence `flux_div_e2c`.

Both live on cells and read normal components on edges. With e_j = edgesOnCell[c, j],
j < nEdgesOnCell[c], and s_cj = edgeSignOnCell[c, j] (+1 where the edge normal points out of c):

    div_e2c(F)[c]          = 1/areaCell[c] * sum_j s_cj * dvEdge[e_j] * F[e_j]
    flux_div_e2c(h, u)[c]  = 1/areaCell[c] * sum_j s_cj * dvEdge[e_j] * h[e_j] * u[e_j]

(`flux_div_e2c` is GRIST's divergence_operator_2d with h the edge thickness.) Adjoints, with
c0, c1 = cellsOnEdge[e] (the normal points from c0 to c1):

    div_e2c_adj(g)[e] = dvEdge[e] * (g[c0] / areaCell[c0] - g[c1] / areaCell[c1])
    flux_div_e2c_tl(h, u; dh, du) = div_e2c(dh * u + h * du)
    flux_div_e2c_adj(h, u; g)     = (u * div_e2c_adj(g), h * div_e2c_adj(g))

The inner product of every adjoint is the plain Euclidean sum over entries (and levels).
Adjoint mode `atomic` scatters from each cell through edgesOnCell (atomicAdd on the GPU);
`deterministic` gathers into each edge through cellsOnEdge (bitwise reproducible).
On the GPU the flux divergence, its tangent and both adjoints are fused kernels: h and u are read
in the same pass as the stencil (no h*u temporary) and the adjoints write h_adj and u_adj together.
"""
from __future__ import annotations

import numpy as np

from meshops.device import stencil
from meshops.device.backend import array_module
from meshops.device.kernels import GATHER, SCATTER, Family, Kernel
from meshops.device.mesh import check_field, for_fields
from meshops.device.tables import register as table
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("divergence", (
    Kernel("flux_div_e2c", "idx:edgesOnCell coef:cellCoef in:h in:u out:div int:maxEdges"),
    Kernel("flux_div_e2c_tl",
           "idx:edgesOnCell coef:cellCoef in:h in:u in:dh in:du out:ddiv int:maxEdges"),
    Kernel("flux_div_e2c_adj_atomic",
           "idx:edgesOnCell coef:cellCoef in:h in:u in:g out:h_adj out:u_adj int:maxEdges"),
    Kernel("flux_div_e2c_adj_gather", "idx:cellsOnEdge coef:edgeCoef in:h in:u in:g out:h_adj out:u_adj"),
    GATHER, SCATTER))


@table("divCoef", kind="float", location="cell")
def _div_coef(h):
    """On edgesOnCell: edgeSignOnCell[c,j] * dvEdge[e_j] / areaCell[c] (0 in pads)."""
    edges = h["edgesOnCell"]
    coef = h.mesh.edgeSignOnCell * h.mesh.dvEdge[np.maximum(edges, 0)] * h["invAreaCell"][:, None]
    return np.where(edges >= 0, coef, 0.0)


@table("divAdjCoef", kind="float", location="edge")
def _div_adj_coef(h):
    """On cellsOnEdge: (+1, -1)[i] * dvEdge[e] / areaCell[c_i] (0 on a missing cell)."""
    cells = h["cellsOnEdge"]
    coef = h.mesh.dvEdge[:, None] * np.array([1.0, -1.0]) * h["invAreaCell"][np.maximum(cells, 0)]
    return np.where(cells >= 0, coef, 0.0)


# -- forward -------------------------------------------------------------------------------------

def div_e2c(mesh, F, *, rows=None):
    """Divergence of the edge-normal flux F, on cells: (nEdges[, nlev]) -> (nCells[, nlev]).

    div[c] = 1/areaCell[c] * sum_{j < nEdgesOnCell[c]} edgeSignOnCell[c,j] * dvEdge[e_j] * F[e_j],
    e_j = edgesOnCell[c, j]. Adjoint: `div_e2c_adj`. `rows=(first, last)`: only cells [first, last)
    are computed (the others are left unspecified).
    """
    F = check_field(F, mesh, "F", "edge")
    m, xp = for_fields(mesh, F), array_module(F)
    idx, coef = m.table("edgesOnCell"), m.table("divCoef", F.dtype)
    if xp is np:
        return stencil.gather_sum(idx, None, coef, F, rows)
    out = xp.empty((m.nCells,) + F.shape[1:], F.dtype)
    _KERNELS.gather(m.nCells, idx, coef, F, out, rows=rows)
    return out


def div_e2c_adj(mesh, g, *, mode=None):
    """Adjoint of `div_e2c`: cell field g -> edge field, (nCells[, nlev]) -> (nEdges[, nlev]).

    F_adj[e] = dvEdge[e] * (g[c0] / areaCell[c0] - g[c1] / areaCell[c1]), (c0, c1) = cellsOnEdge[e],
    so that sum_c div_e2c(F)[c] g[c] = sum_e F[e] F_adj[e].
    """
    g = check_field(g, mesh, "g", "cell")
    mode = resolve_mode(mode)
    m, xp = for_fields(mesh, g), array_module(g)
    if mode == "atomic":
        idx, coef = m.table("edgesOnCell"), m.table("divCoef", g.dtype)
    else:
        idx, coef = m.table("cellsOnEdge"), m.table("divAdjCoef", g.dtype)
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(idx, None, coef, g, m.nEdges)
        return stencil.gather_sum(idx, None, coef, g)
    if mode == "atomic":
        out = xp.zeros((m.nEdges,) + g.shape[1:], g.dtype)
        _KERNELS.scatter(m.nCells, idx, coef, g, out)
    else:
        out = xp.empty((m.nEdges,) + g.shape[1:], g.dtype)
        _KERNELS.gather(m.nEdges, idx, coef, g, out)
    return out


# -- flux divergence (bilinear in h and u) -------------------------------------------------------
# On the GPU each call is one fused kernel: h and u are read in the stencil pass, no h*u temporary.

def flux_div_e2c(mesh, h, u, *, rows=None):
    """Flux divergence of h*u on cells: edge fields h, u -> cell field (GRIST divergence_operator_2d).

    (nEdges[, nlev]) x (nEdges[, nlev]) -> (nCells[, nlev]),
    flux_div[c] = 1/areaCell[c] * sum_j edgeSignOnCell[c,j] * dvEdge[e_j] * h[e_j] * u[e_j].
    Tangent: `flux_div_e2c_tl`; adjoint: `flux_div_e2c_adj`. `rows`: as for `div_e2c`.
    """
    h = check_field(h, mesh, "h", "edge")
    u = _check_like(u, h, mesh, "u")
    xp = array_module(h, u)
    if xp is np:
        return div_e2c(mesh, h * u, rows=rows)
    m = for_fields(mesh, h, u)
    out = xp.empty((m.nCells,) + h.shape[1:], h.dtype)
    _KERNELS.launch("flux_div_e2c", m.nCells, edgesOnCell=m.table("edgesOnCell"),
                    cellCoef=m.table("divCoef", h.dtype), h=h, u=u, div=out, maxEdges=m.maxEdges,
                    rows=rows)
    return out


def flux_div_e2c_tl(mesh, h, u, dh, du, *, rows=None):
    """Tangent-linear of `flux_div_e2c` about (h, u): edge fields -> cell field.

    dflux_div[c] = 1/areaCell[c] * sum_j edgeSignOnCell[c,j] * dvEdge[e_j] * (dh*u + h*du)[e_j]
    = div_e2c(dh * u + h * du). `rows`: as for `div_e2c`.
    """
    h = check_field(h, mesh, "h", "edge")
    u, dh, du = (_check_like(x, h, mesh, name) for x, name in ((u, "u"), (dh, "dh"), (du, "du")))
    xp = array_module(h, u, dh, du)
    if xp is np:
        return div_e2c(mesh, dh * u + h * du, rows=rows)
    m = for_fields(mesh, h, u, dh, du)
    out = xp.empty((m.nCells,) + h.shape[1:], h.dtype)
    _KERNELS.launch("flux_div_e2c_tl", m.nCells, edgesOnCell=m.table("edgesOnCell"),
                    cellCoef=m.table("divCoef", h.dtype), h=h, u=u, dh=dh, du=du, ddiv=out,
                    maxEdges=m.maxEdges, rows=rows)
    return out


def flux_div_e2c_adj(mesh, h, u, g, *, mode=None):
    """Adjoint of `flux_div_e2c_tl` about (h, u): g on cells -> (h_adj, u_adj) on edges.

    h_adj[e] = u[e] * div_e2c_adj(g)[e],  u_adj[e] = h[e] * div_e2c_adj(g)[e], with
    div_e2c_adj(g)[e] = dvEdge[e] * (g[c0] / areaCell[c0] - g[c1] / areaCell[c1]), so that
    sum_c flux_div_e2c_tl(h, u; dh, du)[c] g[c] = sum_e (dh[e] h_adj[e] + du[e] u_adj[e]).
    On the GPU both outputs are written by one kernel (atomic: one thread per (cell, level);
    deterministic: one thread per (edge, level)).
    """
    h = check_field(h, mesh, "h", "edge")
    u = _check_like(u, h, mesh, "u")
    g = check_field(g, mesh, "g", "cell")
    if g.shape[1:] != h.shape[1:] or g.dtype != h.dtype:
        raise ValueError(f"g: expected a cell field with {h.shape[1:] or 'no'} levels and dtype "
                         f"{h.dtype} like h, got shape {tuple(g.shape)} and dtype {g.dtype}")
    mode = resolve_mode(mode)
    xp = array_module(h, u, g)
    if xp is np:
        F_adj = div_e2c_adj(mesh, g, mode=mode)
        return u * F_adj, h * F_adj
    m = for_fields(mesh, h, u, g)
    if mode == "atomic":
        h_adj, u_adj = xp.zeros_like(h), xp.zeros_like(h)
        _KERNELS.launch("flux_div_e2c_adj_atomic", m.nCells, edgesOnCell=m.table("edgesOnCell"),
                        cellCoef=m.table("divCoef", h.dtype), h=h, u=u, g=g, h_adj=h_adj,
                        u_adj=u_adj, maxEdges=m.maxEdges)
    else:
        h_adj, u_adj = xp.empty_like(h), xp.empty_like(h)
        _KERNELS.launch("flux_div_e2c_adj_gather", m.nEdges, cellsOnEdge=m.table("cellsOnEdge"),
                        edgeCoef=m.table("divAdjCoef", h.dtype), h=h, u=u, g=g, h_adj=h_adj,
                        u_adj=u_adj)
    return h_adj, u_adj


def _check_like(x, ref, mesh, name):
    """`x` checked as an edge field of the shape and dtype of `ref`."""
    x = check_field(x, mesh, name, "edge")
    if x.shape != ref.shape or x.dtype != ref.dtype:
        raise ValueError(f"{name}: expected an edge field of shape {tuple(ref.shape)} and dtype "
                         f"{ref.dtype} like h, got shape {tuple(x.shape)} and dtype {x.dtype}")
    return x


register("div_e2c", forward=div_e2c, adjoint=div_e2c_adj, domain="edge", range="cell")
register("flux_div_e2c", forward=flux_div_e2c, tangent=flux_div_e2c_tl, adjoint=flux_div_e2c_adj,
         domain=("edge", "edge"), range="cell", quadratic=True)
