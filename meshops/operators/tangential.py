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
from meshops.device.backend import array_module
from meshops.device.mesh import check_field, for_fields
from meshops.device.kernels import GATHER, SCATTER, Family
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("tangential", (GATHER, SCATTER))


def tangential_e2e(mesh, u, *, rows=None):
    """TRiSK tangential velocity from normal velocities: (nEdges[, nlev]) -> (nEdges[, nlev]).

    v[e] = sum_{j < nEdgesOnEdge[e]} weightsOnEdge[e, j] * u[edgesOnEdge[e, j]].
    Adjoint: `tangential_e2e_adj`. `rows=(first, last)`: only edges [first, last) are computed
    (the others are left unspecified).
    """
    u = check_field(u, mesh, "u", "edge")
    m, xp = for_fields(mesh, u), array_module(u)
    if xp is np:
        idx, w = (m.table(n, u.dtype) for n in trisk.FORWARD)
        return stencil.gather_sum(idx, None, w, u, rows)
    out = xp.empty_like(u)
    (idx, w), stride = m.stencil(trisk.FORWARD, (u, out))
    _KERNELS.gather(m.nEdges, idx, w, u, out, slot_stride=stride, rows=rows)
    return out


def tangential_e2e_adj(mesh, g, *, mode=None):
    """Adjoint of `tangential_e2e`: (nEdges[, nlev]) -> (nEdges[, nlev]).

    u_adj[e'] = sum_{(e, j): edgesOnEdge[e, j] = e', j < nEdgesOnEdge[e]} weightsOnEdge[e, j] * g[e],
    so that sum_e tangential_e2e(u)[e] g[e] = sum_e u[e] u_adj[e].
    """
    g = check_field(g, mesh, "g", "edge")
    mode = resolve_mode(mode)
    m, xp = for_fields(mesh, g), array_module(g)
    names = trisk.FORWARD if mode == "atomic" else trisk.TRANSPOSED
    if xp is np:
        idx, w = (m.table(n, g.dtype) for n in names)
        if mode == "atomic":
            return stencil.scatter_sum(idx, None, w, g, m.nEdges)
        return stencil.gather_sum(idx, None, w, g)
    if mode == "atomic":
        idx, w = (m.table(n, g.dtype) for n in names)
        out = xp.zeros_like(g)
        _KERNELS.scatter(m.nEdges, idx, w, g, out)
    else:
        out = xp.empty_like(g)
        (idx, w), stride = m.stencil(names, (g, out))
        _KERNELS.gather(m.nEdges, idx, w, g, out, slot_stride=stride)
    return out


register("tangential_e2e", forward=tangential_e2e, adjoint=tangential_e2e_adj, domain="edge",
         range="edge")
