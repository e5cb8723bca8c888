"""Kinetic energy edge -> cell (`ke_e2c`) and edge -> vertex (`ke_e2v`), their tangent-linear
models and adjoints.

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
the coefficients precomputed per stencil slot (keCoef, keCoef2, keAdjCoef).

The vertex form (MPAS-Atmosphere's ke_vertex, atm_compute_solve_diagnostics), with e_i =
edgesOnVertex[v, i] and (v0, v1) = verticesOnEdge[e]:

    ke_e2v(u)[v] = 1/areaTriangle[v] * sum_i kw[e_i] * u[e_i]^2
    ke_e2v_tl(u; du)[v] = 1/areaTriangle[v] * sum_i 2 * kw[e_i] * u[e_i] * du[e_i]
    ke_e2v_adj(u; g)[e] = 2 * kw[e] * u[e] * (g[v0] / areaTriangle[v0] + g[v1] / areaTriangle[v1])

It runs the same kernels as `ke_e2c` over the vertex stencils (keVertexCoef, keVertexCoef2,
keVertexAdjCoef). sum_v areaTriangle ke_e2v(u) = sum_c areaCell ke_e2c(u) = sum_e 2 kw u^2.
"""
from __future__ import annotations

import numpy as np

from meshops.device import stencil
from meshops.device.backend import array_module
from meshops.device.kernels import Family, Kernel
from meshops.device.mesh import check_field, for_fields
from meshops.device.tables import register as table
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("kinetic_energy", (
    Kernel("ke_e2c", "idx:edgesOnCell coef:cellCoef in:u out:ke int:maxEdges"),
    Kernel("ke_e2c_tl", "idx:edgesOnCell coef:cellCoef2 in:u in:du out:dke int:maxEdges"),
    Kernel("ke_e2c_adj_atomic", "idx:edgesOnCell coef:cellCoef2 in:u in:g out:u_adj int:maxEdges"),
    Kernel("ke_e2c_adj_gather", "idx:cellsOnEdge coef:edgeCoef in:u in:g out:u_adj")))


def _kw(h):
    return 0.25 * h.mesh.dcEdge * h.mesh.dvEdge


@table("keCoef", kind="float", location="cell")
def _ke_coef(h):
    """On edgesOnCell: kw[e_j] / areaCell[c], kw = 0.25 * dcEdge * dvEdge (0 in pads)."""
    edges = h["edgesOnCell"]
    return np.where(edges >= 0, _kw(h)[np.maximum(edges, 0)] * h["invAreaCell"][:, None], 0.0)


@table("keCoef2", kind="float", location="cell")
def _ke_coef2(h):
    """2 * keCoef (the tangent and the scatter adjoint)."""
    return 2 * h["keCoef"]


@table("keAdjCoef", kind="float", location="edge")
def _ke_adj_coef(h):
    """On cellsOnEdge: 2 * kw[e] / areaCell[c_i] (0 on a missing cell)."""
    cells = h["cellsOnEdge"]
    return np.where(cells >= 0, 2 * _kw(h)[:, None] * h["invAreaCell"][np.maximum(cells, 0)], 0.0)


@table("keVertexCoef", kind="float", location="vertex")
def _ke_vertex_coef(h):
    """On edgesOnVertex: kw[e_i] / areaTriangle[v] (0 at a missing edge)."""
    edges = h["edgesOnVertex"]
    return np.where(edges >= 0, _kw(h)[np.maximum(edges, 0)] / h.mesh.areaTriangle[:, None], 0.0)


@table("keVertexCoef2", kind="float", location="vertex")
def _ke_vertex_coef2(h):
    """2 * keVertexCoef (the tangent and the scatter adjoint)."""
    return 2 * h["keVertexCoef"]


@table("keVertexAdjCoef", kind="float", location="edge")
def _ke_vertex_adj_coef(h):
    """On verticesOnEdge: 2 * kw[e] / areaTriangle[v_i] (0 on a missing vertex)."""
    verts = h["verticesOnEdge"]
    return np.where(verts >= 0, 2 * _kw(h)[:, None] / h.mesh.areaTriangle[np.maximum(verts, 0)], 0.0)


#: Per location: (stencil, its coefficients, their double, the output count, the stencil width,
#: the transposed stencil and the gather adjoint's coefficients).
_STENCILS = {"cell": ("edgesOnCell", "keCoef", "keCoef2", "nCells", "maxEdges", "cellsOnEdge",
                      "keAdjCoef"),
             "vertex": ("edgesOnVertex", "keVertexCoef", "keVertexCoef2", "nVertices",
                        "vertexDegree", "verticesOnEdge", "keVertexAdjCoef")}


def _ke(mesh, u, rows, where):
    u = check_field(u, mesh, "u", "edge")
    m, xp = for_fields(mesh, u), array_module(u)
    idx_name, coef_name, _, size, width, _, _ = _STENCILS[where]
    idx, coef = m.table(idx_name), m.table(coef_name, u.dtype)
    if xp is np:
        return stencil.gather_sum(idx, None, coef, u * u, rows)
    out = xp.empty((getattr(m, size),) + u.shape[1:], u.dtype)
    _KERNELS.launch("ke_e2c", getattr(m, size), edgesOnCell=idx, cellCoef=coef, u=u, ke=out,
                    maxEdges=getattr(m, width), rows=rows)
    return out


def _ke_tl(mesh, u, du, rows, where):
    u = check_field(u, mesh, "u", "edge")
    du = check_field(du, mesh, "du", "edge")
    if du.shape != u.shape or du.dtype != u.dtype:
        raise ValueError(f"du: expected shape {tuple(u.shape)} and dtype {u.dtype} (as u), "
                         f"got {tuple(du.shape)} {du.dtype}")
    m, xp = for_fields(mesh, u, du), array_module(u, du)
    idx_name, _, coef2_name, size, width, _, _ = _STENCILS[where]
    idx, coef = m.table(idx_name), m.table(coef2_name, u.dtype)
    if xp is np:
        return stencil.gather_sum(idx, None, coef, u * du, rows)
    out = xp.empty((getattr(m, size),) + u.shape[1:], u.dtype)
    _KERNELS.launch("ke_e2c_tl", getattr(m, size), edgesOnCell=idx, cellCoef2=coef, u=u, du=du,
                    dke=out, maxEdges=getattr(m, width), rows=rows)
    return out


def _ke_adj(mesh, u, g, mode, where):
    u = check_field(u, mesh, "u", "edge")
    g = check_field(g, mesh, "g", where)
    if g.shape[1:] != u.shape[1:] or g.dtype != u.dtype:
        raise ValueError(f"g: expected shape ({g.shape[0]},) + {tuple(u.shape[1:])} and dtype {u.dtype} "
                         f"(levels and dtype of u), got {tuple(g.shape)} {g.dtype}")
    mode = resolve_mode(mode)
    m, xp = for_fields(mesh, u, g), array_module(u, g)
    idx_name, _, coef2_name, size, width, idx_t_name, coef_t_name = _STENCILS[where]
    if mode == "atomic":
        idx, coef = m.table(idx_name), m.table(coef2_name, u.dtype)
    else:
        idx, coef = m.table(idx_t_name), m.table(coef_t_name, u.dtype)
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(idx, None, coef, g, m.nEdges) * u
        return u * stencil.gather_sum(idx, None, coef, g)
    if mode == "atomic":
        out = xp.zeros((m.nEdges,) + u.shape[1:], u.dtype)
        _KERNELS.launch("ke_e2c_adj_atomic", getattr(m, size), edgesOnCell=idx, cellCoef2=coef,
                        u=u, g=g, u_adj=out, maxEdges=getattr(m, width))
    else:
        out = xp.empty((m.nEdges,) + u.shape[1:], u.dtype)
        _KERNELS.launch("ke_e2c_adj_gather", m.nEdges, cellsOnEdge=idx, edgeCoef=coef, u=u, g=g,
                        u_adj=out)
    return out


def ke_e2c(mesh, u, *, rows=None):
    """Kinetic energy on cells from normal velocities: (nEdges[, nlev]) -> (nCells[, nlev]).

    ke[c] = 1/areaCell[c] * sum_{j < nEdgesOnCell[c]} 0.25 * dcEdge[e_j] * dvEdge[e_j] * u[e_j]^2,
    e_j = edgesOnCell[c, j]. Tangent: `ke_e2c_tl`; adjoint: `ke_e2c_adj`. `rows=(first, last)`: only
    cells [first, last) are computed (the others are left unspecified).
    """
    return _ke(mesh, u, rows, "cell")


def ke_e2c_tl(mesh, u, du, *, rows=None):
    """Tangent-linear of `ke_e2c` about u: edge fields u, du -> cell field.

    dke[c] = 1/areaCell[c] * sum_j 0.5 * dcEdge[e_j] * dvEdge[e_j] * u[e_j] * du[e_j].
    `rows`: as for `ke_e2c`.
    """
    return _ke_tl(mesh, u, du, rows, "cell")


def ke_e2c_adj(mesh, u, g, *, mode=None):
    """Adjoint of `ke_e2c_tl` about u: cell field g -> edge field, (nCells[, nlev]) -> (nEdges[, nlev]).

    u_adj[e] = 0.5 * dcEdge[e] * dvEdge[e] * u[e] * (g[c0] / areaCell[c0] + g[c1] / areaCell[c1]),
    (c0, c1) = cellsOnEdge[e], so that sum_c ke_e2c_tl(u; du)[c] g[c] = sum_e du[e] u_adj[e].
    """
    return _ke_adj(mesh, u, g, mode, "cell")


register("ke_e2c", forward=ke_e2c, tangent=ke_e2c_tl, adjoint=ke_e2c_adj, domain="edge",
         range="cell", quadratic=True)


def ke_e2v(mesh, u, *, rows=None):
    """Kinetic energy on vertices from normal velocities: (nEdges[, nlev]) -> (nVertices[, nlev]).

    ke[v] = 1/areaTriangle[v] * sum_{i < vertexDegree} 0.25 * dcEdge[e_i] * dvEdge[e_i] * u[e_i]^2,
    e_i = edgesOnVertex[v, i]. Tangent: `ke_e2v_tl`; adjoint: `ke_e2v_adj`. `rows`: as for `ke_e2c`.
    """
    return _ke(mesh, u, rows, "vertex")


def ke_e2v_tl(mesh, u, du, *, rows=None):
    """Tangent-linear of `ke_e2v` about u: edge fields u, du -> vertex field.

    dke[v] = 1/areaTriangle[v] * sum_i 0.5 * dcEdge[e_i] * dvEdge[e_i] * u[e_i] * du[e_i].
    """
    return _ke_tl(mesh, u, du, rows, "vertex")


def ke_e2v_adj(mesh, u, g, *, mode=None):
    """Adjoint of `ke_e2v_tl` about u: vertex field g -> edge field.

    u_adj[e] = 0.5 * dcEdge[e] * dvEdge[e] * u[e] * (g[v0] / areaTriangle[v0] + g[v1] /
    areaTriangle[v1]), (v0, v1) = verticesOnEdge[e], so that sum_v ke_e2v_tl(u; du)[v] g[v] =
    sum_e du[e] u_adj[e].
    """
    return _ke_adj(mesh, u, g, mode, "vertex")


register("ke_e2v", forward=ke_e2v, tangent=ke_e2v_tl, adjoint=ke_e2v_adj, domain="edge",
         range="vertex", quadratic=True)
