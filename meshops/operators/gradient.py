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
from meshops.device.backend import array_module, check_field, prepared
from meshops.device.kernels import GATHER, Family, Kernel
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("gradient", (Kernel("grad_2e", "idx:ends coef:invLength in:x out:grad"),
                               Kernel("grad_2e_adj_atomic", "idx:ends coef:invLength in:g out:x_adj"),
                               GATHER))
_DIFFERENCE = np.array([-1.0, 1.0])


def _build(mesh) -> dict:
    """Per kind (c: cellsOnEdge, dcEdge; v: verticesOnEdge, dvEdge) the masked ends, invLength =
    1/length, coef[e, :] = (-1, +1) * invLength[e] (0 at a missing end) and the transposed stencil
    edgesT with its coefficients coefT."""
    out = {}
    for ends_name, length_name, n_in, tag in (("cellsOnEdge", "dcEdge", mesh.nCells, "c"),
                                              ("verticesOnEdge", "dvEdge", mesh.nVertices, "v")):
        ends = connectivity.masked(getattr(mesh, ends_name))
        inv_length = 1.0 / getattr(mesh, length_name)
        coef = np.where(ends >= 0, _DIFFERENCE[None, :] * inv_length[:, None], 0.0)
        rows, slots = connectivity.transpose(ends, n_in, ends_name)
        out.update({f"ends_{tag}": ends, f"invLength_{tag}": inv_length, f"coef_{tag}": coef,
                    f"edgesT_{tag}": rows, f"coefT_{tag}": connectivity.take(coef, rows, slots)})
    return out


def _arrays(mesh, x):
    """The prepared tables; coef_c / coef_v only on NumPy (grad_2e takes invLength)."""
    return prepared(mesh, "gradient", _build, array_module(x), x.dtype,
                    numpy_only=("coef_c", "coef_v"))


def _forward(mesh, x, tag, rows):
    a, xp = _arrays(mesh, x), array_module(x)
    ends, inv_length = getattr(a, f"ends_{tag}"), getattr(a, f"invLength_{tag}")
    if xp is np:
        return stencil.gather_sum(ends, None, getattr(a, f"coef_{tag}"), x)
    out = xp.empty((mesh.nEdges,) + x.shape[1:], x.dtype)
    _KERNELS.launch("grad_2e", mesh.nEdges, ends=ends, invLength=inv_length, x=x, grad=out, rows=rows)
    return out


def _adjoint(mesh, g, n_in, tag, mode):
    mode = resolve_mode(mode)
    a, xp = _arrays(mesh, g), array_module(g)
    ends = getattr(a, f"ends_{tag}")
    edgesT, coefT = getattr(a, f"edgesT_{tag}"), getattr(a, f"coefT_{tag}")
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(ends, None, getattr(a, f"coef_{tag}"), g, n_in)
        return stencil.gather_sum(edgesT, None, coefT, g)
    if mode == "atomic":
        out = xp.zeros((n_in,) + g.shape[1:], g.dtype)
        _KERNELS.launch("grad_2e_adj_atomic", mesh.nEdges, ends=ends,
                        invLength=getattr(a, f"invLength_{tag}"), g=g, x_adj=out)
    else:
        out = xp.empty((n_in,) + g.shape[1:], g.dtype)
        _KERNELS.gather(n_in, edgesT, coefT, g, out)
    return out


def grad_c2e(mesh, phi, *, rows=None):
    """Normal gradient of a cell field on edges: (nCells[, nlev]) -> (nEdges[, nlev]).

    grad[e] = (phi[c1] - phi[c0]) / dcEdge[e], (c0, c1) = cellsOnEdge[e] (along the edge normal).
    Adjoint: `grad_c2e_adj`. `rows=(first, last)`: on the GPU only edges [first, last) are
    computed (the others are left unspecified).
    """
    phi = check_field(phi, mesh.nCells, "phi", "cell")
    return _forward(mesh, phi, "c", rows)


def grad_c2e_adj(mesh, g, *, mode=None):
    """Adjoint of `grad_c2e`: edge field g -> cell field, (nEdges[, nlev]) -> (nCells[, nlev]).

    phi_adj[c] = -sum_j edgeSignOnCell[c, j] * g[e_j] / dcEdge[e_j], e_j = edgesOnCell[c, j]
    (computed through cellsOnEdge), so that sum_e grad_c2e(phi)[e] g[e] = sum_c phi[c] phi_adj[c].
    """
    g = check_field(g, mesh.nEdges, "g", "edge")
    return _adjoint(mesh, g, mesh.nCells, "c", mode)


def grad_v2e(mesh, psi, *, rows=None):
    """Tangential gradient of a vertex field on edges: (nVertices[, nlev]) -> (nEdges[, nlev]).

    grad[e] = (psi[v1] - psi[v0]) / dvEdge[e], (v0, v1) = verticesOnEdge[e] (along the tangent
    k x n). Adjoint: `grad_v2e_adj`. `rows`: as for `grad_c2e`.
    """
    psi = check_field(psi, mesh.nVertices, "psi", "vertex")
    return _forward(mesh, psi, "v", rows)


def grad_v2e_adj(mesh, g, *, mode=None):
    """Adjoint of `grad_v2e`: edge field g -> vertex field, (nEdges[, nlev]) -> (nVertices[, nlev]).

    psi_adj[v] = sum_i edgeSignOnVertex[v, i] * g[e_i] / dvEdge[e_i], e_i = edgesOnVertex[v, i]
    (computed through verticesOnEdge), so that sum_e grad_v2e(psi)[e] g[e] = sum_v psi[v] psi_adj[v].
    """
    g = check_field(g, mesh.nEdges, "g", "edge")
    return _adjoint(mesh, g, mesh.nVertices, "v", mode)


register("grad_c2e", forward=grad_c2e, adjoint=grad_c2e_adj, domain="cell", range="edge")
register("grad_v2e", forward=grad_v2e, adjoint=grad_v2e_adj, domain="vertex", range="edge")
