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

from meshops.device import connectivity, stencil
from meshops.device.backend import array_module, check_field, prepared
from meshops.device.kernels import GATHER, SCATTER, Family
from meshops.modes import resolve_mode
from meshops.registry import register

_KERNELS = Family("curl", (GATHER, SCATTER))


def _build(mesh) -> dict:
    """Stencil coefficients on edgesOnVertex (0 at a missing edge): coef_circulation[v, i] =
    edgeSignOnVertex[v,i] * dcEdge[e_i], coef_curl[v, i] = coef_circulation[v, i] / areaTriangle[v],
    and both on the transposed map verticesT (coefT_*)."""
    edges = connectivity.masked(mesh.edgesOnVertex)
    circ = np.where(edges >= 0, mesh.edgeSignOnVertex * mesh.dcEdge[np.maximum(edges, 0)], 0.0)
    curl = circ / mesh.areaTriangle[:, None]
    rows, slots = connectivity.transpose(edges, mesh.nEdges, "edgesOnVertex")
    return dict(edgesOnVertex=edges, coef_circulation=circ, coef_curl=curl, verticesT=rows,
                coefT_circulation=connectivity.take(circ, rows, slots),
                coefT_curl=connectivity.take(curl, rows, slots))


def _arrays(mesh, x):
    return prepared(mesh, "curl", _build, array_module(x), x.dtype)


def _forward(mesh, u, kind, rows):
    u = check_field(u, mesh.nEdges, "u", "edge")
    a, xp = _arrays(mesh, u), array_module(u)
    coef = getattr(a, f"coef_{kind}")
    if xp is np:
        return stencil.gather_sum(a.edgesOnVertex, None, coef, u)
    out = xp.empty((mesh.nVertices,) + u.shape[1:], u.dtype)
    _KERNELS.gather(mesh.nVertices, a.edgesOnVertex, coef, u, out, rows=rows)
    return out


def _adjoint(mesh, g, kind, mode):
    g = check_field(g, mesh.nVertices, "g", "vertex")
    mode = resolve_mode(mode)
    a, xp = _arrays(mesh, g), array_module(g)
    coef, coefT = getattr(a, f"coef_{kind}"), getattr(a, f"coefT_{kind}")
    if xp is np:
        if mode == "atomic":
            return stencil.scatter_sum(a.edgesOnVertex, None, coef, g, mesh.nEdges)
        return stencil.gather_sum(a.verticesT, None, coefT, g)
    if mode == "atomic":
        out = xp.zeros((mesh.nEdges,) + g.shape[1:], g.dtype)
        _KERNELS.scatter(mesh.nVertices, a.edgesOnVertex, coef, g, out)
    else:
        out = xp.empty((mesh.nEdges,) + g.shape[1:], g.dtype)
        _KERNELS.gather(mesh.nEdges, a.verticesT, coefT, g, out)
    return out


def curl_e2v(mesh, u, *, rows=None):
    """Relative vorticity of the edge-normal velocity u on vertices: (nEdges[, nlev]) -> (nVertices[, nlev]).

    curl[v] = 1/areaTriangle[v] * sum_i edgeSignOnVertex[v,i] * dcEdge[e_i] * u[e_i],
    e_i = edgesOnVertex[v, i]. Adjoint: `curl_e2v_adj`. `rows=(first, last)`: on the GPU only
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
