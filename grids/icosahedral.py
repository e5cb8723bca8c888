"""Icosahedral Voronoi meshes of the sphere (MPAS x1.N-style), with optional Lloyd (SCVT) iterations.

Level L bisects each edge of the icosahedron L times (each triangle splits into four, midpoints
projected onto the sphere): 10 * 4**L + 2 triangulation nodes, which are the Voronoi cell
generators. The Voronoi vertices are the circumcentres of the triangles, the Voronoi edges are dual
to the triangle edges; each edge point is where the great circle through its two cells meets the
great circle through its two vertices (as MPAS's converter places it).

Lloyd iterations move every generator to the centroid of its Voronoi cell. After each move the
triangulation is tested for the (local = global on a convex hull) Delaunay property; icosahedral
meshes stay Delaunay under Lloyd moves, so the connectivity is kept, which avoids a convex hull of
millions of points per iteration. If some edge ever fails the test, the triangulation is rebuilt
with scipy.spatial.ConvexHull.

Cells are then ordered along a space-filling curve, edges and vertices following their cells
(`grids.reorder`), and every metric field is derived with `grids.geometry.complete_mesh`.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.spatial import ConvexHull

from grids.geometry import INDEX_DTYPE, complete_mesh, triangle_area
from grids.mesh import EARTH_OMEGA, EARTH_RADIUS, Mesh
from grids.reorder import METHODS, following_order, sfc_order

MAX_LEVEL = 12


def _normalise(p: np.ndarray) -> np.ndarray:
    p /= np.linalg.norm(p, axis=1)[:, None]
    return p


def _orient_ccw(pts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Reorder triangle nodes so each triangle is counter-clockwise seen from outside the sphere."""
    a, b, c = pts[tris[:, 0]], pts[tris[:, 1]], pts[tris[:, 2]]
    flip = np.einsum("ij,ij->i", a, np.cross(b, c)) < 0
    tris[flip] = tris[flip][:, [0, 2, 1]]
    return tris


def icosahedron() -> tuple[np.ndarray, np.ndarray]:
    """The 12 unit vertices (one at each pole) and 20 counter-clockwise faces of the icosahedron."""
    lat = np.arctan(0.5)
    lon = np.arange(5) * 2 * np.pi / 5
    ring = lambda la, lo: np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo),
                                    np.full(lo.shape, np.sin(la))], axis=1)
    pts = np.concatenate([[[0.0, 0.0, 1.0]], ring(lat, lon), ring(-lat, lon + np.pi / 5),
                          [[0.0, 0.0, -1.0]]])
    tris = ConvexHull(pts).simplices.astype(np.int64)
    return pts, _orient_ccw(pts, tris)


def bisect(pts: np.ndarray, tris: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One bisection level: every triangle splits into four; new nodes are normalised midpoints."""
    n = pts.shape[0]
    lo = np.minimum(tris, np.roll(tris, -1, axis=1)).ravel()
    hi = np.maximum(tris, np.roll(tris, -1, axis=1)).ravel()
    keys, inv = np.unique(lo * n + hi, return_inverse=True)
    mid = _normalise(pts[keys // n] + pts[keys % n])
    m = (n + inv).reshape(-1, 3)            # midpoints of edges (0,1), (1,2), (2,0)
    t0, t1, t2 = tris[:, 0], tris[:, 1], tris[:, 2]
    m01, m12, m20 = m[:, 0], m[:, 1], m[:, 2]
    new = np.concatenate([np.stack([t0, m01, m20], 1), np.stack([m01, t1, m12], 1),
                          np.stack([m20, m12, t2], 1), np.stack([m01, m12, m20], 1)])
    return np.concatenate([pts, mid]), new


def circumcentres(pts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Unit circumcentres of counter-clockwise spherical triangles (Voronoi vertices)."""
    a, b, c = pts[tris[:, 0]], pts[tris[:, 1]], pts[tris[:, 2]]
    return _normalise(np.cross(b - a, c - a))


def half_edge_twins(tris: np.ndarray, n_nodes: int) -> np.ndarray:
    """twin[h] for half-edges h = 3 t + p (node tris[t, p] -> tris[t, (p+1) % 3])."""
    src = tris.ravel()
    dst = np.roll(tris, -1, axis=1).ravel()
    key = np.minimum(src, dst) * n_nodes + np.maximum(src, dst)
    order = np.argsort(key, kind="stable")
    h1, h2 = order[0::2], order[1::2]
    if h1.size != h2.size or np.any(key[h1] != key[h2]) or np.any(src[h1] != dst[h2]):
        raise ValueError("triangulation is not a closed, consistently oriented surface "
                         "(some edge is not shared by exactly two opposite half-edges)")
    twin = np.empty(src.size, dtype=np.int64)
    twin[h1], twin[h2] = h2, h1
    return twin


def is_delaunay(pts: np.ndarray, tris: np.ndarray, twin: np.ndarray) -> bool:
    """True if no node opposite an edge lies inside the circumcircle of the triangle across it."""
    a, b, c = pts[tris[:, 0]], pts[tris[:, 1]], pts[tris[:, 2]]
    normal = np.cross(b - a, c - a)
    # node opposite half-edge twin[h] in its own triangle, tested against the triangle of h
    h = np.arange(twin.size)
    th = twin // 3
    opp = tris[th, (twin % 3 + 2) % 3]
    t = h // 3
    return bool(np.all(np.einsum("ij,ij->i", normal[t], pts[opp] - a[t]) <= 1e-15))


def lloyd_step(pts: np.ndarray, tris: np.ndarray, twin: np.ndarray) -> np.ndarray:
    """Generators moved to the (normalised, area-weighted) centroids of their Voronoi cells.

    The Voronoi cell of node c is the fan of triangles (c, v(twin h), v(h)) over the half-edges h
    leaving c, v(h) the circumcentre of the triangle holding h.
    """
    vc = circumcentres(pts, tris)
    src = tris.ravel()
    t = np.arange(src.size) // 3
    tt = twin // 3
    c, p, q = pts[src], vc[tt], vc[t]
    w = triangle_area(c, p, q)
    cen = (c + p + q) * w[:, None]
    out = np.stack([np.bincount(src, weights=cen[:, k], minlength=pts.shape[0]) for k in range(3)],
                   axis=1)
    return _normalise(out)


def connectivity(tris: np.ndarray, n_cells: int) -> dict[str, np.ndarray]:
    """MPAS connectivity of the Voronoi mesh dual to a counter-clockwise triangulation.

    Cells are the nodes, vertices the triangles (cellsOnVertex = tris), edges the triangle edges with
    cellsOnEdge[e, 0] < cellsOnEdge[e, 1] and verticesOnEdge[e, 1] the triangle to the left of
    cellsOnEdge[e, 0] -> [e, 1] (so the tangent k x n runs from verticesOnEdge[e, 0] to [e, 1]).
    """
    src = tris.ravel()
    dst = np.roll(tris, -1, axis=1).ravel()
    twin = half_edge_twins(tris, n_cells)
    h = np.arange(src.size)
    lead = h[src < dst]                      # one half-edge per edge, from the lower cell
    n_edges = lead.size
    edge_of = np.empty(src.size, dtype=np.int64)
    edge_of[lead] = np.arange(n_edges)
    edge_of[twin[lead]] = np.arange(n_edges)
    cellsOnEdge = np.stack([src[lead], dst[lead]], axis=1)
    verticesOnEdge = np.stack([twin[lead] // 3, lead // 3], axis=1)
    # counter-clockwise walk around each cell: next(h) = twin(previous half-edge of h's triangle)
    nxt = twin[3 * (h // 3) + (h % 3 + 2) % 3]
    start = np.empty(n_cells, dtype=np.int64)
    start[src] = h
    walk, cur = [start], start
    nEdgesOnCell = np.zeros(n_cells, dtype=np.int64)
    for j in range(1, 13):
        cur = nxt[cur]
        nEdgesOnCell[(cur == start) & (nEdgesOnCell == 0)] = j
        if np.all(nEdgesOnCell > 0):
            break
        walk.append(cur)
    if np.any(nEdgesOnCell == 0):
        c = int(np.flatnonzero(nEdgesOnCell == 0)[0])
        raise ValueError(f"triangulation: the fan around node {c} does not close within 12 edges")
    hs = np.stack(walk, axis=1)
    maxEdges = int(nEdgesOnCell.max())
    hs = hs[:, :maxEdges]
    inside = np.arange(maxEdges)[None, :] < nEdgesOnCell[:, None]
    pad = lambda x: np.where(inside, x, -1).astype(INDEX_DTYPE)
    return {
        "nEdgesOnCell": nEdgesOnCell.astype(INDEX_DTYPE),
        "edgesOnCell": pad(edge_of[hs]),
        "cellsOnCell": pad(dst[hs]),
        "verticesOnCell": pad(hs // 3),
        "cellsOnEdge": cellsOnEdge.astype(INDEX_DTYPE),
        "verticesOnEdge": verticesOnEdge.astype(INDEX_DTYPE),
        "cellsOnVertex": tris.astype(INDEX_DTYPE),
        # cellsOnVertex[v, j] lies between edgesOnVertex[v, j] and [v, j+1]: edges (c,a), (a,b), (b,c)
        "edgesOnVertex": edge_of.reshape(-1, 3)[:, [2, 0, 1]].astype(INDEX_DTYPE),
    }


def _relabel(conn: dict, edges: np.ndarray, vertices: np.ndarray) -> dict:
    """Apply new -> old orders of edges and vertices to connectivity built by `connectivity`."""
    inv_e = np.empty(edges.size, dtype=INDEX_DTYPE)
    inv_e[edges] = np.arange(edges.size, dtype=INDEX_DTYPE)
    inv_v = np.empty(vertices.size, dtype=INDEX_DTYPE)
    inv_v[vertices] = np.arange(vertices.size, dtype=INDEX_DTYPE)
    remap = lambda x, inv: np.where(x >= 0, inv[np.maximum(x, 0)], x).astype(INDEX_DTYPE)
    out = dict(conn)
    out["edgesOnCell"] = remap(conn["edgesOnCell"], inv_e)
    out["verticesOnCell"] = remap(conn["verticesOnCell"], inv_v)
    out["cellsOnEdge"] = conn["cellsOnEdge"][edges]
    out["verticesOnEdge"] = inv_v[conn["verticesOnEdge"][edges]]
    out["cellsOnVertex"] = conn["cellsOnVertex"][vertices]
    out["edgesOnVertex"] = inv_e[conn["edgesOnVertex"][vertices]]
    return out


def edge_points(pc: np.ndarray, pv: np.ndarray, cellsOnEdge, verticesOnEdge) -> np.ndarray:
    """Unit edge points: great circle (c0, c1) meets great circle (v0, v1), on the side of c0 + c1."""
    c0, c1 = pc[cellsOnEdge[:, 0]], pc[cellsOnEdge[:, 1]]
    v0, v1 = pv[verticesOnEdge[:, 0]], pv[verticesOnEdge[:, 1]]
    # p x (q - p) = p x q, accurate in direction when p and q are close
    p = np.cross(np.cross(c0, c1 - c0), np.cross(v0, v1 - v0))
    s = np.sign(np.einsum("ij,ij->i", p, c0 + c1))
    return _normalise(p * np.where(s == 0, 1.0, s)[:, None])


def generate_icosahedral(level: int, *, lloyd_iterations: int = 0, sphere_radius: float = EARTH_RADIUS,
                         order: str = "morton", omega: float = EARTH_OMEGA,
                         progress: bool = False) -> Mesh:
    """Icosahedral Voronoi mesh of level `level` (10 * 4**level + 2 cells) on a sphere of radius
    `sphere_radius` (m), after `lloyd_iterations` Lloyd steps, cells ordered along the space-filling
    curve `order` ("morton", "hilbert" or "none"), edges and vertices following their cells; every
    MPAS field derived by `grids.geometry.complete_mesh`. `progress` prints each stage's wall time.
    """
    if not (isinstance(level, (int, np.integer)) and 0 <= level <= MAX_LEVEL):
        raise ValueError(f"generate_icosahedral: level={level!r}, expected an integer in 0..{MAX_LEVEL}")
    if not (isinstance(lloyd_iterations, (int, np.integer)) and lloyd_iterations >= 0):
        raise ValueError(f"generate_icosahedral: lloyd_iterations={lloyd_iterations!r}, "
                         "expected an integer >= 0")
    if order not in METHODS + ("none",):
        raise ValueError(f"generate_icosahedral: order={order!r}, expected one of {METHODS + ('none',)}")
    clock = [time.perf_counter()]

    def stage(name):
        if progress:
            now = time.perf_counter()
            print(f"  [level {level}] {name}: {now - clock[0]:.2f} s", flush=True)
            clock[0] = now

    pts, tris = icosahedron()
    for _ in range(level):
        pts, tris = bisect(pts, tris)
    stage("bisection")
    if lloyd_iterations:
        twin = half_edge_twins(tris, pts.shape[0])
        for _ in range(lloyd_iterations):
            pts = lloyd_step(pts, tris, twin)
            if not is_delaunay(pts, tris, twin):
                tris = _orient_ccw(pts, ConvexHull(pts).simplices.astype(np.int64))
                twin = half_edge_twins(tris, pts.shape[0])
        del twin
        stage(f"{lloyd_iterations} Lloyd iterations")
    if order != "none":
        cells = sfc_order(pts, order)
        rank = np.empty_like(cells)
        rank[cells] = np.arange(cells.size)
        pts, tris = pts[cells], rank[tris]
    conn = connectivity(tris, pts.shape[0])
    del tris
    stage("connectivity")
    if order != "none":
        edges = following_order(conn["edgesOnCell"], conn["nEdgesOnCell"], conn["cellsOnEdge"].shape[0])
        vertices = following_order(conn["verticesOnCell"], conn["nEdgesOnCell"],
                                   conn["cellsOnVertex"].shape[0])
        conn = _relabel(conn, edges, vertices)
        del edges, vertices
        stage("edge/vertex order")
    pv = circumcentres(pts, conn["cellsOnVertex"])
    pe = edge_points(pts, pv, conn["cellsOnEdge"], conn["verticesOnEdge"])
    a = float(sphere_radius)
    for loc, p in (("Cell", pts), ("Edge", pe), ("Vertex", pv)):
        for k, c in enumerate("xyz"):
            conn[f"{c}{loc}"] = a * p[:, k]
    del pts, pe, pv
    stage("positions")
    attributes = {"on_a_sphere": "YES", "sphere_radius": a, "is_periodic": "NO", "mesh_spec": "1.0",
                  "Conventions": "MPAS",
                  "source": f"meshops grids.icosahedral level={level} lloyd={lloyd_iterations} "
                            f"order={order}"}
    mesh = complete_mesh(conn, a, omega=omega, attributes=attributes)
    stage("geometry")
    return mesh
