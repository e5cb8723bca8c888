"""TRiSK tangential velocity edge -> edge (Thuburn et al. 2009, Ringler et al. 2010).

    tangential_e2e(u)[e] = sum_{j < nEdgesOnEdge[e]} weightsOnEdge[e, j] * u[edgesOnEdge[e, j]]

(MPAS's `v`, the velocity along the tangent k x n of edge e, reconstructed from the normal
velocities of the edges of its two cells.) Adjoint, for an edge e':

    tangential_e2e_adj(g)[e'] = sum_{(e, j): edgesOnEdge[e, j] = e'} weightsOnEdge[e, j] * g[e]

The inner product is the plain Euclidean sum over entries (and levels). Mode `atomic` scatters
from each edge into its edgesOnEdge (atomicAdd on the GPU); `deterministic` gathers into each
edge e' through the transposed edgesOnEdge map, in increasing (e, j) order (bitwise
reproducible). A negative index is a missing neighbour and contributes nothing.
"""
from __future__ import annotations

import numpy as np

from meshops import connectivity, stencil
from meshops.backend import array_module, check_field, prepared
from meshops.kernels import get_kernel, launch
from meshops.modes import resolve_mode
from meshops.registry import register

_FAMILY = "tangential"
_KERNELS = ("tangential_e2e", "tangential_e2e_adj_atomic", "tangential_e2e_adj_gather")


def _build(mesh) -> dict:
    edges = connectivity.masked(mesh.edgesOnEdge, mesh.nEdgesOnEdge)
    weights = np.where(edges >= 0, mesh.weightsOnEdge, 0.0)
    rows, slots = connectivity.transpose(edges, mesh.nEdges, "edgesOnEdge")
    return dict(edgesOnEdge=edges, weightsOnEdge=weights, edgesT=rows,
                weightsT=connectivity.take(weights, rows, slots))


def _arrays(mesh, x):
    return prepared(mesh, _FAMILY, _build, array_module(x), x.dtype)


def _launch(name, dtype, n, nlev, *args):
    launch(get_kernel(_FAMILY, _KERNELS, name, dtype), n * nlev, args + (np.int32(n), np.int32(nlev)))


def tangential_e2e(mesh, u):
    """TRiSK tangential velocity from normal velocities: (nEdges[, nlev]) -> (nEdges[, nlev]).

    v[e] = sum_{j < nEdgesOnEdge[e]} weightsOnEdge[e, j] * u[edgesOnEdge[e, j]].
    Adjoint: `tangential_e2e_adj`.
    """
    u = check_field(u, mesh.nEdges, "u", "edge")
    a, xp = _arrays(mesh, u), array_module(u)
    if xp is np:
        return stencil.gather_sum(a.edgesOnEdge, None, a.weightsOnEdge, u)
    out = xp.empty_like(u)
    _launch("tangential_e2e", u.dtype, mesh.nEdges, stencil.nlev_of(u), a.edgesOnEdge,
            a.weightsOnEdge, u, out, np.int32(a.edgesOnEdge.shape[1]))
    return out


def tangential_e2e_adj(mesh, g, *, mode=None):
    """Adjoint of `tangential_e2e`: (nEdges[, nlev]) -> (nEdges[, nlev]).

    u_adj[e'] = sum_{(e, j): edgesOnEdge[e, j] = e', j < nEdgesOnEdge[e]} weightsOnEdge[e, j] * g[e],
    so that sum_e tangential_e2e(u)[e] g[e] = sum_e u[e] u_adj[e].
    """
    g = check_field(g, mesh.nEdges, "g", "edge")
    mode = resolve_mode(mode)
    a, xp = _arrays(mesh, g), array_module(g)
    nlev = stencil.nlev_of(g)
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(a.edgesOnEdge, None, a.weightsOnEdge, g, mesh.nEdges)
        return stencil.gather_sum(a.edgesT, None, a.weightsT, g)
    if mode == "atomic":
        out = xp.zeros_like(g)
        _launch("tangential_e2e_adj_atomic", g.dtype, mesh.nEdges, nlev, a.edgesOnEdge,
                a.weightsOnEdge, g, out, np.int32(a.edgesOnEdge.shape[1]))
    else:
        out = xp.empty_like(g)
        _launch("tangential_e2e_adj_gather", g.dtype, mesh.nEdges, nlev, a.edgesT, a.weightsT, g,
                out, np.int32(a.edgesT.shape[1]))
    return out


register("tangential_e2e", forward=tangential_e2e, adjoint=tangential_e2e_adj, domain="edge",
         range="edge")
