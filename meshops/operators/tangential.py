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

from meshops.device import stencil
from meshops.operators import trisk
from meshops.device.backend import array_module, check_field
from meshops.device.kernels import GATHER, SCATTER, Family
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("tangential", (GATHER, SCATTER))


def tangential_e2e(mesh, u, *, rows=None):
    """TRiSK tangential velocity from normal velocities: (nEdges[, nlev]) -> (nEdges[, nlev]).

    v[e] = sum_{j < nEdgesOnEdge[e]} weightsOnEdge[e, j] * u[edgesOnEdge[e, j]].
    Adjoint: `tangential_e2e_adj`. `rows=(first, last)`: on the GPU only edges [first, last) are
    computed (the others are left unspecified).
    """
    u = check_field(u, mesh.nEdges, "u", "edge")
    xp = array_module(u)
    if xp is np:
        a = trisk.tables(mesh, u)
        return stencil.gather_sum(a.edgesOnEdge, None, a.weightsOnEdge, u)
    out = xp.empty_like(u)
    t, stride = trisk.gather_tables(mesh, (u, out))
    _KERNELS.gather(mesh.nEdges, t.edgesOnEdge, t.weightsOnEdge, u, out, slot_stride=stride,
                    rows=rows)
    return out


def tangential_e2e_adj(mesh, g, *, mode=None):
    """Adjoint of `tangential_e2e`: (nEdges[, nlev]) -> (nEdges[, nlev]).

    u_adj[e'] = sum_{(e, j): edgesOnEdge[e, j] = e', j < nEdgesOnEdge[e]} weightsOnEdge[e, j] * g[e],
    so that sum_e tangential_e2e(u)[e] g[e] = sum_e u[e] u_adj[e].
    """
    g = check_field(g, mesh.nEdges, "g", "edge")
    mode = resolve_mode(mode)
    xp = array_module(g)
    if xp is np:
        a = trisk.tables(mesh, g)
        if mode == "atomic":
            return stencil.scatter_sum(a.edgesOnEdge, None, a.weightsOnEdge, g, mesh.nEdges)
        return stencil.gather_sum(a.edgesOnEdgeT, None, a.weightsOnEdgeT, g)
    if mode == "atomic":
        a, out = trisk.tables(mesh, g), xp.zeros_like(g)
        _KERNELS.scatter(mesh.nEdges, a.edgesOnEdge, a.weightsOnEdge, g, out)
    else:
        out = xp.empty_like(g)
        t, stride = trisk.gather_tables(mesh, (g, out))
        _KERNELS.gather(mesh.nEdges, t.edgesOnEdgeT, t.weightsOnEdgeT, g, out, slot_stride=stride)
    return out


register("tangential_e2e", forward=tangential_e2e, adjoint=tangential_e2e_adj, domain="edge",
         range="edge")
