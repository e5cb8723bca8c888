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

from meshops.device import connectivity, stencil
from meshops.device.backend import array_module, check_field, prepared
from meshops.device.kernels import GATHER, SCATTER, Family, Kernel
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("interpolation", (Kernel("mean_2e", "idx:ends in:x out:out"),
                                    Kernel("mean_2e_adj_atomic", "idx:ends in:g out:x_adj"),
                                    Kernel("mean_2e_adj_gather", "idx:edges in:g out:x_adj int:S"),
                                    GATHER, SCATTER))


def _build(mesh) -> dict:
    """Per operator tag (c2e, v2e, c2v, v2c) the forward stencil idx_/coef_ and its transpose
    idxT_/coefT_, every coefficient precomputed per slot (0 at a missing neighbour): 1/2 for the
    two-point means, kite/areaTriangle[v] (c2v) and kite/areaCell[c] (v2c) for the kite weights."""
    out = {}
    for ends_name, n_in, tag in (("cellsOnEdge", mesh.nCells, "c2e"),
                                 ("verticesOnEdge", mesh.nVertices, "v2e")):
        ends = connectivity.masked(getattr(mesh, ends_name))
        rows, slots = connectivity.transpose(ends, n_in, ends_name)
        out.update({f"idx_{tag}": ends, f"coef_{tag}": np.where(ends >= 0, 0.5, 0.0),
                    f"idxT_{tag}": rows, f"coefT_{tag}": np.where(rows >= 0, 0.5, 0.0)})
    # kites: cellsOnVertex (vertex-major) and verticesOnCell with the slot map (cell-major)
    cells = connectivity.masked(mesh.cellsOnVertex)
    kite_v = np.where(cells >= 0, mesh.kiteAreasOnVertex, 0.0)
    verts = connectivity.masked(mesh.verticesOnCell, mesh.nEdgesOnCell)
    slot = connectivity.slot_map(verts, cells, "verticesOnCell", "cellsOnVertex")
    kite_c = connectivity.take(mesh.kiteAreasOnVertex, verts, slot)
    inv_area_tri = 1.0 / mesh.areaTriangle
    inv_area_cell = 1.0 / mesh.areaCell
    safe_v, safe_c = np.maximum(verts, 0), np.maximum(cells, 0)
    out.update(idx_c2v=cells, coef_c2v=kite_v * inv_area_tri[:, None],
               idxT_c2v=verts, coefT_c2v=kite_c * np.where(verts >= 0, inv_area_tri[safe_v], 0.0),
               idx_v2c=verts, coef_v2c=kite_c * inv_area_cell[:, None],
               idxT_v2c=cells, coefT_v2c=kite_v * np.where(cells >= 0, inv_area_cell[safe_c], 0.0))
    return out


def _arrays(mesh, x):
    """The prepared tables; the constant 1/2 of the two-point means (coef_/coefT_ c2e, v2e) only
    on NumPy (the mean_2e kernels multiply by it)."""
    return prepared(mesh, "interpolation", _build, array_module(x), x.dtype,
                    numpy_only=("coef_c2e", "coefT_c2e", "coef_v2e", "coefT_v2e"))


_SIZE = {"c": "nCells", "e": "nEdges", "v": "nVertices"}


def _forward(mesh, x, tag, rows):
    a, xp = _arrays(mesh, x), array_module(x)
    idx, mean = getattr(a, f"idx_{tag}"), tag in ("c2e", "v2e")
    n_out = getattr(mesh, _SIZE[tag[-1]])
    if xp is np:
        return stencil.gather_sum(idx, None, getattr(a, f"coef_{tag}"), x)
    out = xp.empty((n_out,) + x.shape[1:], x.dtype)
    if mean:
        _KERNELS.launch("mean_2e", n_out, ends=idx, x=x, out=out, rows=rows)
    else:
        _KERNELS.gather(n_out, idx, getattr(a, f"coef_{tag}"), x, out, rows=rows)
    return out


def _adjoint(mesh, g, tag, mode):
    mode = resolve_mode(mode)
    a, xp = _arrays(mesh, g), array_module(g)
    idx, idxT, mean = getattr(a, f"idx_{tag}"), getattr(a, f"idxT_{tag}"), tag in ("c2e", "v2e")
    n_in, n_out = getattr(mesh, _SIZE[tag[0]]), getattr(mesh, _SIZE[tag[-1]])
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(idx, None, getattr(a, f"coef_{tag}"), g, n_in)
        return stencil.gather_sum(idxT, None, getattr(a, f"coefT_{tag}"), g)
    if mode == "atomic":
        out = xp.zeros((n_in,) + g.shape[1:], g.dtype)
        if mean:
            _KERNELS.launch("mean_2e_adj_atomic", n_out, ends=idx, g=g, x_adj=out)
        else:
            _KERNELS.scatter(n_out, idx, getattr(a, f"coef_{tag}"), g, out)
    else:
        out = xp.empty((n_in,) + g.shape[1:], g.dtype)
        if mean:
            _KERNELS.launch("mean_2e_adj_gather", n_in, edges=idxT, g=g, x_adj=out, S=idxT.shape[1])
        else:
            _KERNELS.gather(n_in, idxT, getattr(a, f"coefT_{tag}"), g, out)
    return out


def interp_c2e(mesh, phi, *, rows=None):
    """Cell field to edges, the mean of the two cells: (nCells[, nlev]) -> (nEdges[, nlev]).

    out[e] = (phi[c0] + phi[c1]) / 2, (c0, c1) = cellsOnEdge[e]. Adjoint: `interp_c2e_adj`.
    `rows=(first, last)`: on the GPU only edges [first, last) are computed (the others are left
    unspecified).
    """
    return _forward(mesh, check_field(phi, mesh.nCells, "phi", "cell"), "c2e", rows)


def interp_c2e_adj(mesh, g, *, mode=None):
    """Adjoint of `interp_c2e`: (nEdges[, nlev]) -> (nCells[, nlev]).

    phi_adj[c] = sum_j g[edgesOnCell[c, j]] / 2, so that sum_e interp_c2e(phi) g = sum_c phi phi_adj.
    """
    return _adjoint(mesh, check_field(g, mesh.nEdges, "g", "edge"), "c2e", mode)


def interp_v2e(mesh, psi, *, rows=None):
    """Vertex field to edges, the mean of the two vertices: (nVertices[, nlev]) -> (nEdges[, nlev]).

    out[e] = (psi[v0] + psi[v1]) / 2, (v0, v1) = verticesOnEdge[e]. Adjoint: `interp_v2e_adj`.
    `rows`: as for `interp_c2e`.
    """
    return _forward(mesh, check_field(psi, mesh.nVertices, "psi", "vertex"), "v2e", rows)


def interp_v2e_adj(mesh, g, *, mode=None):
    """Adjoint of `interp_v2e`: (nEdges[, nlev]) -> (nVertices[, nlev]).

    psi_adj[v] = sum_i g[edgesOnVertex[v, i]] / 2, so that sum_e interp_v2e(psi) g = sum_v psi psi_adj.
    """
    return _adjoint(mesh, check_field(g, mesh.nEdges, "g", "edge"), "v2e", mode)


def interp_c2v(mesh, phi, *, rows=None):
    """Cell field to vertices, kite-area weighted: (nCells[, nlev]) -> (nVertices[, nlev]).

    out[v] = sum_i kiteAreasOnVertex[v, i] * phi[cellsOnVertex[v, i]] / areaTriangle[v].
    Adjoint: `interp_c2v_adj`. `rows=(first, last)`: on the GPU only vertices [first, last) are
    computed (the others are left unspecified).
    """
    return _forward(mesh, check_field(phi, mesh.nCells, "phi", "cell"), "c2v", rows)


def interp_c2v_adj(mesh, g, *, mode=None):
    """Adjoint of `interp_c2v`: (nVertices[, nlev]) -> (nCells[, nlev]).

    phi_adj[c] = sum_j kite(c, v_j) * g[v_j] / areaTriangle[v_j], v_j = verticesOnCell[c, j], so
    that sum_v interp_c2v(phi) g = sum_c phi phi_adj.
    """
    return _adjoint(mesh, check_field(g, mesh.nVertices, "g", "vertex"), "c2v", mode)


def interp_v2c(mesh, psi, *, rows=None):
    """Vertex field to cells, kite-area weighted: (nVertices[, nlev]) -> (nCells[, nlev]).

    out[c] = sum_{j < nEdgesOnCell[c]} kite(c, v_j) * psi[v_j] / areaCell[c], v_j = verticesOnCell[c, j],
    kite(c, v) = kiteAreasOnVertex[v, i] with cellsOnVertex[v, i] == c. Adjoint: `interp_v2c_adj`.
    `rows=(first, last)`: on the GPU only cells [first, last) are computed (the others are left
    unspecified).
    """
    return _forward(mesh, check_field(psi, mesh.nVertices, "psi", "vertex"), "v2c", rows)


def interp_v2c_adj(mesh, g, *, mode=None):
    """Adjoint of `interp_v2c`: (nCells[, nlev]) -> (nVertices[, nlev]).

    psi_adj[v] = sum_i kiteAreasOnVertex[v, i] * g[c_i] / areaCell[c_i], c_i = cellsOnVertex[v, i],
    so that sum_c interp_v2c(psi) g = sum_v psi psi_adj.
    """
    return _adjoint(mesh, check_field(g, mesh.nCells, "g", "cell"), "v2c", mode)


register("interp_c2e", forward=interp_c2e, adjoint=interp_c2e_adj, domain="cell", range="edge")
register("interp_v2e", forward=interp_v2e, adjoint=interp_v2e_adj, domain="vertex", range="edge")
register("interp_c2v", forward=interp_c2v, adjoint=interp_c2v_adj, domain="cell", range="vertex")
register("interp_v2c", forward=interp_v2c, adjoint=interp_v2c_adj, domain="vertex", range="cell")
