"""Gradients onto edges: normal gradient cell -> edge and tangential gradient vertex -> edge.

With (c0, c1) = cellsOnEdge[e] (the normal points from c0 to c1) and (v0, v1) = verticesOnEdge[e]
(the tangent k x n points from v0 to v1):

    grad_c2e(phi)[e] = (phi[c1] - phi[c0]) / dcEdge[e]
    grad_v2e(psi)[e] = (psi[v1] - psi[v0]) / dvEdge[e]

Adjoints (the transposes), for a cell c and a vertex v:

    grad_c2e_adj(g)[c] = sum_{e: c1 = c} g[e] / dcEdge[e] - sum_{e: c0 = c} g[e] / dcEdge[e]
                       = -sum_j edgeSignOnCell[c, j] * g[e_j] / dcEdge[e_j]   (e_j = edgesOnCell[c, j])
    grad_v2e_adj(g)[v] = sum_{e: v1 = v} g[e] / dvEdge[e] - sum_{e: v0 = v} g[e] / dvEdge[e]
                       =  sum_i edgeSignOnVertex[v, i] * g[e_i] / dvEdge[e_i] (e_i = edgesOnVertex[v, i])

The inner product of every adjoint is the plain Euclidean sum over entries (and levels).
Mode `atomic` scatters from each edge into its two ends (atomicAdd on the GPU); `deterministic`
gathers into each cell or vertex through the transposed cellsOnEdge / verticesOnEdge map, in
increasing edge order (bitwise reproducible). A negative index is a missing neighbour and
contributes nothing.
"""
from __future__ import annotations

import numpy as np

from meshops.device import connectivity, stencil
from meshops.device.backend import array_module
from meshops.device.kernels import GATHER, Family, Kernel
from meshops.device.mesh import check_field, for_fields
from meshops.device.tables import register as table
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("gradient", (Kernel("grad_2e", "idx:ends coef:invLength in:x out:grad"),
                               Kernel("grad_2e_adj_atomic", "idx:ends coef:invLength in:g out:x_adj"),
                               GATHER))
_DIFFERENCE = np.array([-1.0, 1.0])
#: Per kind: (ends, 1 / length, coefficient table).
_KINDS = {"c": ("cellsOnEdge", "invDcEdge", "gradCellCoef"),
          "v": ("verticesOnEdge", "invDvEdge", "gradVertexCoef")}


def _difference(ends: str, inv_length: str):
    def build(h):
        return np.where(h[ends] >= 0, _DIFFERENCE[None, :] * h[inv_length][:, None], 0.0)
    return build


def _difference_t(name: str, ends: str):
    def build(h):
        return connectivity.take(h[name], h[f"{ends}T"], h[f"{ends}TSlot"])
    return build


for _ends, _inv, _name in _KINDS.values():
    table(_name, kind="float", location="edge",
          doc=f"On {_ends}: (-1, +1) * {_inv} (0 at a missing end); read by the NumPy path")(
        _difference(_ends, _inv))
    table(f"{_name}T", kind="float", location="cell" if _ends == "cellsOnEdge" else "vertex",
          doc=f"{_name} on the transposed map {_ends}T")(_difference_t(_name, _ends))


def _forward(mesh, x, tag, rows):
    m, xp = for_fields(mesh, x), array_module(x)
    ends_name, inv_name, coef_name = _KINDS[tag]
    ends = m.table(ends_name)
    if xp is np:
        return stencil.gather_sum(ends, None, m.table(coef_name, x.dtype), x, rows)
    out = xp.empty((m.nEdges,) + x.shape[1:], x.dtype)
    _KERNELS.launch("grad_2e", m.nEdges, ends=ends, invLength=m.table(inv_name, x.dtype), x=x,
                    grad=out, rows=rows)
    return out


def _adjoint(mesh, g, n_in, tag, mode):
    mode = resolve_mode(mode)
    m, xp = for_fields(mesh, g), array_module(g)
    ends_name, inv_name, coef_name = _KINDS[tag]
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(m.table(ends_name), None, m.table(coef_name, g.dtype), g, n_in)
        return stencil.gather_sum(m.table(f"{ends_name}T"), None, m.table(f"{coef_name}T", g.dtype), g)
    if mode == "atomic":
        out = xp.zeros((n_in,) + g.shape[1:], g.dtype)
        _KERNELS.launch("grad_2e_adj_atomic", m.nEdges, ends=m.table(ends_name),
                        invLength=m.table(inv_name, g.dtype), g=g, x_adj=out)
    else:
        out = xp.empty((n_in,) + g.shape[1:], g.dtype)
        _KERNELS.gather(n_in, m.table(f"{ends_name}T"), m.table(f"{coef_name}T", g.dtype), g, out)
    return out


def grad_c2e(mesh, phi, *, rows=None):
    """Normal gradient of a cell field on edges: (nCells[, nlev]) -> (nEdges[, nlev]).

    grad[e] = (phi[c1] - phi[c0]) / dcEdge[e], (c0, c1) = cellsOnEdge[e] (along the edge normal).
    Adjoint: `grad_c2e_adj`. `rows=(first, last)`: only edges [first, last) are
    computed (the others are left unspecified).
    """
    phi = check_field(phi, mesh, "phi", "cell")
    return _forward(mesh, phi, "c", rows)


def grad_c2e_adj(mesh, g, *, mode=None):
    """Adjoint of `grad_c2e`: edge field g -> cell field, (nEdges[, nlev]) -> (nCells[, nlev]).

    phi_adj[c] = -sum_j edgeSignOnCell[c, j] * g[e_j] / dcEdge[e_j], e_j = edgesOnCell[c, j]
    (computed through cellsOnEdge), so that sum_e grad_c2e(phi)[e] g[e] = sum_c phi[c] phi_adj[c].
    """
    g = check_field(g, mesh, "g", "edge")
    return _adjoint(mesh, g, mesh.nCells, "c", mode)


def grad_v2e(mesh, psi, *, rows=None):
    """Tangential gradient of a vertex field on edges: (nVertices[, nlev]) -> (nEdges[, nlev]).

    grad[e] = (psi[v1] - psi[v0]) / dvEdge[e], (v0, v1) = verticesOnEdge[e] (along the tangent
    k x n). Adjoint: `grad_v2e_adj`. `rows`: as for `grad_c2e`.
    """
    psi = check_field(psi, mesh, "psi", "vertex")
    return _forward(mesh, psi, "v", rows)


def grad_v2e_adj(mesh, g, *, mode=None):
    """Adjoint of `grad_v2e`: edge field g -> vertex field, (nEdges[, nlev]) -> (nVertices[, nlev]).

    psi_adj[v] = sum_i edgeSignOnVertex[v, i] * g[e_i] / dvEdge[e_i], e_i = edgesOnVertex[v, i]
    (computed through verticesOnEdge), so that sum_e grad_v2e(psi)[e] g[e] = sum_v psi[v] psi_adj[v].
    """
    g = check_field(g, mesh, "g", "edge")
    return _adjoint(mesh, g, mesh.nVertices, "v", mode)


register("grad_c2e", forward=grad_c2e, adjoint=grad_c2e_adj, domain="cell", range="edge")
register("grad_v2e", forward=grad_v2e, adjoint=grad_v2e_adj, domain="vertex", range="edge")
