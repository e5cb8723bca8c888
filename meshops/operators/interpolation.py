"""Interpolation between cells, edges and vertices: two-point means and kite-area weights.

With (c0, c1) = cellsOnEdge[e], (v0, v1) = verticesOnEdge[e], c_i = cellsOnVertex[v, i] and
v_j = verticesOnCell[c, j] (j < nEdgesOnCell[c]); kite(c, v) = kiteAreasOnVertex[v, i] for the slot
i with cellsOnVertex[v, i] == c (the part of dual triangle v inside cell c):

    interp_c2e(phi)[e] = (phi[c0] + phi[c1]) / 2
    interp_v2e(psi)[e] = (psi[v0] + psi[v1]) / 2
    interp_c2v(phi)[v] = sum_i kiteAreasOnVertex[v, i] * phi[c_i] / areaTriangle[v]
    interp_v2c(psi)[c] = sum_j kite(c, v_j) * psi[v_j] / areaCell[c]

Adjoints (transposes):

    interp_c2e_adj(g)[c] = sum_j g[edgesOnCell[c, j]] / 2
    interp_v2e_adj(g)[v] = sum_i g[edgesOnVertex[v, i]] / 2
    interp_c2v_adj(g)[c] = sum_j kite(c, v_j) * g[v_j] / areaTriangle[v_j]
    interp_v2c_adj(g)[v] = sum_i kiteAreasOnVertex[v, i] * g[c_i] / areaCell[c_i]

The inner product of every adjoint is the plain Euclidean sum over entries (and levels). Mode
`atomic` scatters from each forward output (atomicAdd on the GPU); `deterministic` gathers into
each adjoint output through the transposed map (the transposed cellsOnEdge / verticesOnEdge in
increasing edge order; verticesOnCell with the kite slot map; cellsOnVertex): bitwise
reproducible. A negative index is a missing neighbour and contributes nothing (the two-point means
then keep the weight 1/2 of the neighbour that is present).
"""
from __future__ import annotations

import numpy as np

from meshops.device import connectivity, positions, stencil
from meshops.device.backend import array_module
from meshops.device.kernels import GATHER, SCATTER, Family, Kernel
from meshops.device.mesh import check_field, for_fields
from meshops.device.tables import register as table
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("interpolation", (Kernel("mean_2e", "idx:ends in:x out:out"),
                                    Kernel("mean_2e_adj_atomic", "idx:ends in:g out:x_adj"),
                                    Kernel("mean_2e_adj_gather", "idx:edges in:g out:x_adj int:S"),
                                    GATHER, SCATTER, positions.GATHER_POSITIONS))
#: Per operator tag: the forward stencil (idx, coef) and its transpose (idxT, coefT). The two-point
#: means' coefficients (1/2) are read by the NumPy path only: their kernels multiply by 1/2.
_TABLES = {"c2e": ("cellsOnEdge", "meanCellCoef", "cellsOnEdgeT", "meanCellCoefT"),
           "v2e": ("verticesOnEdge", "meanVertexCoef", "verticesOnEdgeT", "meanVertexCoefT"),
           "c2v": ("cellsOnVertex", "c2vCoef", "verticesOnCell", "c2vCoefT"),
           "v2c": ("verticesOnCell", "v2cCoef", "cellsOnVertex", "v2cCoefT")}


def _half(idx: str):
    def build(h):
        return np.where(h[idx] >= 0, 0.5, 0.0)
    build.__doc__ = f"1/2 on {idx} (0 at a missing neighbour)."
    return build


for _tag, _loc, _loc_t in (("c2e", "edge", "cell"), ("v2e", "edge", "vertex")):
    _idx, _coef, _idx_t, _coef_t = _TABLES[_tag]
    table(_coef, kind="float", location=_loc)(_half(_idx))
    table(_coef_t, kind="float", location=_loc_t)(_half(_idx_t))


@table("kiteOnCell", kind="float", location="cell")
def _kite_on_cell(h):
    """On verticesOnCell: kite(c, v_j), the kiteAreasOnVertex entry of c at its vertex v_j."""
    verts, cells = h["verticesOnCell"], h["cellsOnVertex"]
    slot = connectivity.slot_map(verts, cells, "verticesOnCell", "cellsOnVertex")
    return connectivity.take(h.mesh.kiteAreasOnVertex, verts, slot)


@table("kiteOnVertex", kind="float", location="vertex")
def _kite_on_vertex(h):
    """On cellsOnVertex: kiteAreasOnVertex (0 at a missing cell)."""
    return np.where(h["cellsOnVertex"] >= 0, h.mesh.kiteAreasOnVertex, 0.0)


@table("c2vCoef", kind="float", location="vertex")
def _c2v_coef(h):
    """On cellsOnVertex: kiteAreasOnVertex[v, i] / areaTriangle[v]."""
    return h["kiteOnVertex"] * (1.0 / h.mesh.areaTriangle)[:, None]


@table("c2vCoefT", kind="float", location="cell")
def _c2v_coef_t(h):
    """On verticesOnCell: kite(c, v_j) / areaTriangle[v_j]."""
    verts = h["verticesOnCell"]
    inv_area_tri = 1.0 / h.mesh.areaTriangle
    return h["kiteOnCell"] * np.where(verts >= 0, inv_area_tri[np.maximum(verts, 0)], 0.0)


@table("v2cCoef", kind="float", location="cell")
def _v2c_coef(h):
    """On verticesOnCell: kite(c, v_j) / areaCell[c]."""
    return h["kiteOnCell"] * h["invAreaCell"][:, None]


@table("v2cCoefT", kind="float", location="vertex")
def _v2c_coef_t(h):
    """On cellsOnVertex: kiteAreasOnVertex[v, i] / areaCell[c_i]."""
    cells = h["cellsOnVertex"]
    return h["kiteOnVertex"] * np.where(cells >= 0, h["invAreaCell"][np.maximum(cells, 0)], 0.0)


@table("c2vPosT", kind="int", location="cell")
def _c2v_pos_t(h):
    """On verticesOnCell: the position of c in the (nVertices, vertexDegree) c2vCoef table."""
    verts, cells = h["verticesOnCell"], h["cellsOnVertex"]
    slot = connectivity.slot_map(verts, cells, "verticesOnCell", "cellsOnVertex")
    return positions.positions(verts, slot, cells.shape[1])


@table("v2cPosT", kind="int", location="vertex")
def _v2c_pos_t(h):
    """On cellsOnVertex: the position of v in the (nCells, maxEdges) v2cCoef table."""
    verts, cells = h["verticesOnCell"], h["cellsOnVertex"]
    slot = connectivity.slot_map(cells, verts, "cellsOnVertex", "verticesOnCell")
    return positions.positions(cells, slot, verts.shape[1])


#: The positions tables of the kite adjoints under the "lean" policy (`meshops.device.positions`).
_POSITIONS = {"c2v": "c2vPosT", "v2c": "v2cPosT"}
_SIZE = {"c": "nCells", "e": "nEdges", "v": "nVertices"}


def _forward(mesh, x, tag, rows):
    m, xp = for_fields(mesh, x), array_module(x)
    idx_name, coef_name, _, _ = _TABLES[tag]
    idx, mean = m.table(idx_name), tag in ("c2e", "v2e")
    n_out = getattr(m, _SIZE[tag[-1]])
    if xp is np:
        return stencil.gather_sum(idx, None, m.table(coef_name, x.dtype), x, rows)
    out = xp.empty((n_out,) + x.shape[1:], x.dtype)
    if mean:
        _KERNELS.launch("mean_2e", n_out, ends=idx, x=x, out=out, rows=rows)
    else:
        _KERNELS.gather(n_out, idx, m.table(coef_name, x.dtype), x, out, rows=rows)
    return out


def _adjoint(mesh, g, tag, mode):
    mode = resolve_mode(mode)
    m, xp = for_fields(mesh, g), array_module(g)
    idx_name, coef_name, idx_t_name, coef_t_name = _TABLES[tag]
    mean = tag in ("c2e", "v2e")
    n_in, n_out = getattr(m, _SIZE[tag[0]]), getattr(m, _SIZE[tag[-1]])
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(m.table(idx_name), None, m.table(coef_name, g.dtype), g, n_in)
        return stencil.gather_sum(m.table(idx_t_name), None, m.table(coef_t_name, g.dtype), g)
    if mode == "atomic":
        out = xp.zeros((n_in,) + g.shape[1:], g.dtype)
        if mean:
            _KERNELS.launch("mean_2e_adj_atomic", n_out, ends=m.table(idx_name), g=g, x_adj=out)
        else:
            _KERNELS.scatter(n_out, m.table(idx_name), m.table(coef_name, g.dtype), g, out)
    else:
        out = xp.empty((n_in,) + g.shape[1:], g.dtype)
        idx_t = m.table(idx_t_name)
        if mean:
            _KERNELS.launch("mean_2e_adj_gather", n_in, edges=idx_t, g=g, x_adj=out,
                            S=idx_t.shape[1])
        elif m.policy == "lean":  # positions into the forward coefficients, no transposed copy
            positions.gather(_KERNELS, n_in, m.table(_POSITIONS[tag]), m.table(coef_name, g.dtype),
                             g, out)
        else:
            _KERNELS.gather(n_in, idx_t, m.table(coef_t_name, g.dtype), g, out)
    return out


def interp_c2e(mesh, phi, *, rows=None):
    """Cell field to edges, the mean of the two cells: (nCells[, nlev]) -> (nEdges[, nlev]).

    out[e] = (phi[c0] + phi[c1]) / 2, (c0, c1) = cellsOnEdge[e]. Adjoint: `interp_c2e_adj`.
    `rows=(first, last)`: only edges [first, last) are computed (the others are left
    unspecified).
    """
    return _forward(mesh, check_field(phi, mesh, "phi", "cell"), "c2e", rows)


def interp_c2e_adj(mesh, g, *, mode=None):
    """Adjoint of `interp_c2e`: (nEdges[, nlev]) -> (nCells[, nlev]).

    phi_adj[c] = sum_j g[edgesOnCell[c, j]] / 2, so that sum_e interp_c2e(phi) g = sum_c phi phi_adj.
    """
    return _adjoint(mesh, check_field(g, mesh, "g", "edge"), "c2e", mode)


def interp_v2e(mesh, psi, *, rows=None):
    """Vertex field to edges, the mean of the two vertices: (nVertices[, nlev]) -> (nEdges[, nlev]).

    out[e] = (psi[v0] + psi[v1]) / 2, (v0, v1) = verticesOnEdge[e]. Adjoint: `interp_v2e_adj`.
    `rows`: as for `interp_c2e`.
    """
    return _forward(mesh, check_field(psi, mesh, "psi", "vertex"), "v2e", rows)


def interp_v2e_adj(mesh, g, *, mode=None):
    """Adjoint of `interp_v2e`: (nEdges[, nlev]) -> (nVertices[, nlev]).

    psi_adj[v] = sum_i g[edgesOnVertex[v, i]] / 2, so that sum_e interp_v2e(psi) g = sum_v psi psi_adj.
    """
    return _adjoint(mesh, check_field(g, mesh, "g", "edge"), "v2e", mode)


def interp_c2v(mesh, phi, *, rows=None):
    """Cell field to vertices, kite-area weighted: (nCells[, nlev]) -> (nVertices[, nlev]).

    out[v] = sum_i kiteAreasOnVertex[v, i] * phi[cellsOnVertex[v, i]] / areaTriangle[v].
    Adjoint: `interp_c2v_adj`. `rows=(first, last)`: only vertices [first, last) are
    computed (the others are left unspecified).
    """
    return _forward(mesh, check_field(phi, mesh, "phi", "cell"), "c2v", rows)


def interp_c2v_adj(mesh, g, *, mode=None):
    """Adjoint of `interp_c2v`: (nVertices[, nlev]) -> (nCells[, nlev]).

    phi_adj[c] = sum_j kite(c, v_j) * g[v_j] / areaTriangle[v_j], v_j = verticesOnCell[c, j], so
    that sum_v interp_c2v(phi) g = sum_c phi phi_adj.
    """
    return _adjoint(mesh, check_field(g, mesh, "g", "vertex"), "c2v", mode)


def interp_v2c(mesh, psi, *, rows=None):
    """Vertex field to cells, kite-area weighted: (nVertices[, nlev]) -> (nCells[, nlev]).

    out[c] = sum_{j < nEdgesOnCell[c]} kite(c, v_j) * psi[v_j] / areaCell[c], v_j = verticesOnCell[c, j],
    kite(c, v) = kiteAreasOnVertex[v, i] with cellsOnVertex[v, i] == c. Adjoint: `interp_v2c_adj`.
    `rows=(first, last)`: only cells [first, last) are computed (the others are left
    unspecified).
    """
    return _forward(mesh, check_field(psi, mesh, "psi", "vertex"), "v2c", rows)


def interp_v2c_adj(mesh, g, *, mode=None):
    """Adjoint of `interp_v2c`: (nCells[, nlev]) -> (nVertices[, nlev]).

    psi_adj[v] = sum_i kiteAreasOnVertex[v, i] * g[c_i] / areaCell[c_i], c_i = cellsOnVertex[v, i],
    so that sum_c interp_v2c(psi) g = sum_v psi psi_adj.
    """
    return _adjoint(mesh, check_field(g, mesh, "g", "cell"), "v2c", mode)


register("interp_c2e", forward=interp_c2e, adjoint=interp_c2e_adj, domain="cell", range="edge")
register("interp_v2e", forward=interp_v2e, adjoint=interp_v2e_adj, domain="vertex", range="edge")
register("interp_c2v", forward=interp_c2v, adjoint=interp_c2v_adj, domain="cell", range="vertex")
register("interp_v2c", forward=interp_v2c, adjoint=interp_v2c_adj, domain="vertex", range="cell")
