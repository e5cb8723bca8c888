"""Curl edge -> vertex: relative vorticity `curl_e2v` and circulation `circulation_e2v`.

With e_i = edgesOnVertex[v, i], i < vertexDegree, and edgeSignOnVertex[v, i] = +1 where the edge
normal circulates counter-clockwise around v (v = verticesOnEdge[e_i, 1]; MPAS convention):

    circulation_e2v(u)[v] = sum_i edgeSignOnVertex[v, i] * dcEdge[e_i] * u[e_i]
    curl_e2v(u)[v]        = circulation_e2v(u)[v] / areaTriangle[v]

(MPAS's `vorticity`; positive for counter-clockwise flow seen from outside the sphere.) Adjoints,
with (v0, v1) = verticesOnEdge[e]:

    circulation_e2v_adj(g)[e] = dcEdge[e] * (g[v1] - g[v0])
    curl_e2v_adj(g)[e]        = dcEdge[e] * (g[v1] / areaTriangle[v1] - g[v0] / areaTriangle[v0])

(on a consistent mesh; the code transposes edgesOnVertex with its signs, so it is the exact
transpose on any mesh). The inner product of every adjoint is the plain Euclidean sum over
entries (and levels). Mode `atomic` scatters from each vertex into its edges (atomicAdd on the
GPU); `deterministic` gathers into each edge through the transposed edgesOnVertex map (bitwise
reproducible). A negative index is a missing neighbour and contributes nothing.
"""
from __future__ import annotations

import numpy as np

from meshops.device import connectivity, positions, stencil
from meshops.device.backend import array_module
from meshops.device.kernels import GATHER, SCATTER, Family
from meshops.device.mesh import check_field, for_fields
from meshops.device.tables import register as table
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("curl", (GATHER, SCATTER, positions.GATHER_POSITIONS))


@table("circulationCoef", kind="float", location="vertex")
def _circulation_coef(h):
    """On edgesOnVertex: edgeSignOnVertex[v,i] * dcEdge[e_i] (0 at a missing edge)."""
    edges = h["edgesOnVertex"]
    return np.where(edges >= 0, h.mesh.edgeSignOnVertex * h.mesh.dcEdge[np.maximum(edges, 0)], 0.0)


@table("curlCoef", kind="float", location="vertex")
def _curl_coef(h):
    """On edgesOnVertex: circulationCoef[v, i] / areaTriangle[v]."""
    return h["circulationCoef"] / h.mesh.areaTriangle[:, None]


@table("circulationCoefT", kind="float", location="edge")
def _circulation_coef_t(h):
    """circulationCoef on the transposed map edgesOnVertexT."""
    return connectivity.take(h["circulationCoef"], h["edgesOnVertexT"], h["edgesOnVertexTSlot"])


@table("curlCoefT", kind="float", location="edge")
def _curl_coef_t(h):
    """curlCoef on the transposed map edgesOnVertexT."""
    return connectivity.take(h["curlCoef"], h["edgesOnVertexT"], h["edgesOnVertexTSlot"])


@table("edgesOnVertexTPos", kind="int", location="edge")
def _edges_on_vertex_t_pos(h):
    """edgesOnVertexT as positions into the (nVertices, vertexDegree) coefficient tables."""
    return positions.positions(h["edgesOnVertexT"], h["edgesOnVertexTSlot"], h["edgesOnVertex"].shape[1])


def _forward(mesh, u, kind, rows):
    u = check_field(u, mesh, "u", "edge")
    m, xp = for_fields(mesh, u), array_module(u)
    idx, coef = m.table("edgesOnVertex"), m.table(f"{kind}Coef", u.dtype)
    if xp is np:
        return stencil.gather_sum(idx, None, coef, u, rows)
    out = xp.empty((m.nVertices,) + u.shape[1:], u.dtype)
    _KERNELS.gather(m.nVertices, idx, coef, u, out, rows=rows)
    return out


def _adjoint(mesh, g, kind, mode):
    g = check_field(g, mesh, "g", "vertex")
    mode = resolve_mode(mode)
    m, xp = for_fields(mesh, g), array_module(g)
    if mode == "atomic":
        idx, coef = m.table("edgesOnVertex"), m.table(f"{kind}Coef", g.dtype)
        if xp is np:
            return stencil.scatter_sum(idx, None, coef, g, m.nEdges)
        out = xp.zeros((m.nEdges,) + g.shape[1:], g.dtype)
        _KERNELS.scatter(m.nVertices, idx, coef, g, out)
        return out
    if xp is np:
        return stencil.gather_sum(m.table("edgesOnVertexT"), None, m.table(f"{kind}CoefT", g.dtype), g)
    out = xp.empty((m.nEdges,) + g.shape[1:], g.dtype)
    if m.policy == "lean":  # positions into the forward coefficients, no transposed copy
        positions.gather(_KERNELS, m.nEdges, m.table("edgesOnVertexTPos"),
                         m.table(f"{kind}Coef", g.dtype), g, out)
    else:
        _KERNELS.gather(m.nEdges, m.table("edgesOnVertexT"), m.table(f"{kind}CoefT", g.dtype), g, out)
    return out


def curl_e2v(mesh, u, *, rows=None):
    """Relative vorticity of the edge-normal velocity u on vertices: (nEdges[, nlev]) -> (nVertices[, nlev]).

    curl[v] = 1/areaTriangle[v] * sum_i edgeSignOnVertex[v,i] * dcEdge[e_i] * u[e_i],
    e_i = edgesOnVertex[v, i]. Adjoint: `curl_e2v_adj`. `rows=(first, last)`: only
    vertices [first, last) are computed (the others are left unspecified).
    """
    return _forward(mesh, u, "curl", rows)


def curl_e2v_adj(mesh, g, *, mode=None):
    """Adjoint of `curl_e2v`: vertex field g -> edge field, (nVertices[, nlev]) -> (nEdges[, nlev]).

    u_adj[e] = dcEdge[e] * (g[v1] / areaTriangle[v1] - g[v0] / areaTriangle[v0]),
    (v0, v1) = verticesOnEdge[e], so that sum_v curl_e2v(u)[v] g[v] = sum_e u[e] u_adj[e].
    """
    return _adjoint(mesh, g, "curl", mode)


def circulation_e2v(mesh, u, *, rows=None):
    """Circulation of u around each dual triangle: (nEdges[, nlev]) -> (nVertices[, nlev]).

    circulation[v] = sum_i edgeSignOnVertex[v,i] * dcEdge[e_i] * u[e_i], e_i = edgesOnVertex[v, i].
    Adjoint: `circulation_e2v_adj`. `rows`: as for `curl_e2v`.
    """
    return _forward(mesh, u, "circulation", rows)


def circulation_e2v_adj(mesh, g, *, mode=None):
    """Adjoint of `circulation_e2v`: (nVertices[, nlev]) -> (nEdges[, nlev]).

    u_adj[e] = dcEdge[e] * (g[v1] - g[v0]), (v0, v1) = verticesOnEdge[e], so that
    sum_v circulation_e2v(u)[v] g[v] = sum_e u[e] u_adj[e].
    """
    return _adjoint(mesh, g, "circulation", mode)


register("curl_e2v", forward=curl_e2v, adjoint=curl_e2v_adj, domain="edge", range="vertex")
register("circulation_e2v", forward=circulation_e2v, adjoint=circulation_e2v_adj, domain="edge",
         range="vertex")
