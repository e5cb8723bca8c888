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
(`grids.reorder`), and every metric field is derived with `grids.geometry.derive_fields` (the
formulas of `complete_mesh`), kept in a `Mesh` (`generate_icosahedral`) or written to an MPAS file
field by field (`write_icosahedral`, which never holds the whole mesh).

A generated mesh carries what MPAS-Model needs to start from it (`grids.mpas_io.mpas_metadata`):
extra variables indexToCellID, indexToEdgeID, indexToVertexID (1..n, int32) and meshDensity (1.0),
global attributes on_a_sphere, sphere_radius, is_periodic, x_period, y_period (0.0), mesh_spec,
Conventions, source, file_id (random, new for each generated mesh), parent_id (""), history and
mesh_id (a SHA-256 of the cell positions, in any order: `grids.mpas_io.mesh_id_of`).
"""
from __future__ import annotations

import os
import time

import numpy as np
import scipy.sparse
from scipy.spatial import ConvexHull

from grids.geometry import (INDEX_DTYPE, FieldCollector, blocks, cross, derive_fields, for_blocks,
                            triangle_area)
from grids.mesh import EARTH_OMEGA, EARTH_RADIUS, Mesh
from grids.mpas_io import mesh_id_of, mpas_metadata
from grids.reorder import METHODS, following_order, sfc_order

MAX_LEVEL = 12
#: Version of the generator's output. Bump it whenever a change here (or in grids.geometry /
#: grids.reorder) can change any array of a generated mesh: it is part of the mesh cache's key
#: (`grids.cache`), so meshes cached by an older generator are not used.
GENERATOR_VERSION = 2      # 2: MPAS metadata (indexTo*ID, meshDensity, file_id, ...) added
#: Index dtype of the triangulation (3 * 20 * 4**12 half-edges still fit in int32).
IDX = np.int32


def _normalise(p: np.ndarray) -> np.ndarray:
    p /= np.sqrt(np.einsum("ij,ij->i", p, p))[:, None]
    return p


def _orient_ccw(pts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Reorder triangle nodes so each triangle is counter-clockwise seen from outside the sphere."""
    a, b, c = pts[tris[:, 0]], pts[tris[:, 1]], pts[tris[:, 2]]
    flip = np.einsum("ij,ij->i", a, cross(b, c)) < 0
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
    tris = ConvexHull(pts).simplices.astype(IDX)
    return pts, _orient_ccw(pts, tris)


def edge_ids(tris: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edge id of each half-edge (eid[t, p]: nodes tris[t, p], tris[t, (p+1) % 3]) and the (E, 2)
    end nodes of each edge, by sorting node pairs (used for small or rebuilt triangulations)."""
    n = int(tris.max()) + 1
    a, b = tris.astype(np.int64).ravel(), np.roll(tris, -1, axis=1).astype(np.int64).ravel()
    keys, inv = np.unique(np.minimum(a, b) * n + np.maximum(a, b), return_inverse=True)
    edges = np.stack([keys // n, keys % n], axis=1).astype(IDX)
    return inv.reshape(-1, 3).astype(IDX), edges


def bisect(pts, tris, eid, edges):
    """One bisection level: every triangle splits into four; new nodes are normalised midpoints.

    Edge ids are carried along (no sorting): edge k splits into edges 2k (at edges[k, 0]) and
    2k + 1 (at edges[k, 1]); the three inner edges of triangle t get ids 2E + 3t + (0, 1, 2).
    Returns (pts, tris, eid, edges) of the refined triangulation.
    """
    n, n_edges, n_tris = pts.shape[0], edges.shape[0], tris.shape[0]
    mid = np.empty((n_edges, 3))

    def block(s):
        mid[s] = _normalise(pts[edges[s, 0]] + pts[edges[s, 1]])
    for_blocks(block, n_edges)
    t0, t1, t2 = tris[:, 0], tris[:, 1], tris[:, 2]
    k0, k1, k2 = eid[:, 0], eid[:, 1], eid[:, 2]
    m01, m12, m20 = n + k0, n + k1, n + k2
    half = lambda k, x: 2 * k + (edges[k, 1] == x)
    inner = 2 * n_edges + 3 * np.arange(n_tris, dtype=IDX)
    i0, i1, i2 = inner, inner + 1, inner + 2
    new_tris = np.concatenate([np.stack([t0, m01, m20], 1), np.stack([m01, t1, m12], 1),
                               np.stack([m20, m12, t2], 1), np.stack([m01, m12, m20], 1)])
    new_eid = np.concatenate([np.stack([half(k0, t0), i0, half(k2, t0)], 1),
                              np.stack([half(k0, t1), half(k1, t1), i1], 1),
                              np.stack([i2, half(k1, t2), half(k2, t2)], 1),
                              np.stack([i1, i2, i0], 1)])
    mids = n + np.arange(n_edges, dtype=IDX)
    halves = np.stack([edges[:, 0], mids, edges[:, 1], mids], axis=1).reshape(-1, 2)
    inners = np.stack([m01, m20, m01, m12, m12, m20], axis=1).reshape(-1, 2)
    return (np.concatenate([pts, mid]), new_tris.astype(IDX), new_eid.astype(IDX),
            np.concatenate([halves, inners]).astype(IDX))


def circumcentres(pts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Unit circumcentres of counter-clockwise spherical triangles (Voronoi vertices), blockwise."""
    out = np.empty((tris.shape[0], 3))

    def block(s):
        a, b, c = pts[tris[s, 0]], pts[tris[s, 1]], pts[tris[s, 2]]
        out[s] = _normalise(cross(b - a, c - a))
    for_blocks(block, tris.shape[0])
    return out


def half_edge_twins(tris: np.ndarray, eid: np.ndarray, n_edges: int) -> np.ndarray:
    """twin[h] for half-edges h = 3 t + p (node tris[t, p] -> tris[t, (p+1) % 3]), from edge ids
    (int32: 3 * 20 * 4**MAX_LEVEL half-edges fit)."""
    h = np.arange(eid.size, dtype=IDX)
    e = eid.ravel()
    first = np.full(n_edges, -1, dtype=IDX)
    first[e] = h
    second = np.full(n_edges, -1, dtype=IDX)
    other = first[e] != h
    second[e[other]] = h[other]
    src, dst = tris.ravel(), np.roll(tris, -1, axis=1).ravel()
    bad = (second < 0) | (np.bincount(e, minlength=n_edges) != 2)
    bad |= src[first] != dst[np.maximum(second, 0)]
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"triangulation: edge {k} is not shared by exactly two opposite half-edges "
                         "(expected a closed, consistently oriented surface)")
    del bad, other, src, dst
    twin = np.empty(eid.size, dtype=IDX)
    twin[first], twin[second] = second, first
    return twin


def is_delaunay(pts: np.ndarray, tris: np.ndarray, twin: np.ndarray) -> bool:
    """True if no node opposite an edge lies inside the circumcircle of the triangle across it
    (blockwise over triangles; the local test is global on a convex hull)."""
    def block(s):
        a, b, c = pts[tris[s, 0]], pts[tris[s, 1]], pts[tris[s, 2]]
        normal = cross(b - a, c - a)
        tw = twin[3 * s.start:3 * s.stop]
        # node opposite the twin half-edge, in the neighbouring triangle
        opp = tris.ravel()[3 * (tw // 3) + (tw % 3 + 2) % 3]
        d = pts[opp].reshape(-1, 3, 3) - a[:, None, :]
        return not np.any(np.einsum("ij,ikj->ik", normal, d) > 1e-15)
    return all(ok for _, ok in blocks(block, tris.shape[0]))


def node_fans(tris: np.ndarray, n_nodes: int) -> np.ndarray:
    """(n_nodes, K) int32: the half-edges h = 3 t + p leaving each node (tris[t, p] == node) in
    increasing h, -1 pads; K the largest degree. A counting sort (SciPy's CSR -> CSC), O(half-edges)."""
    n_tris = tris.shape[0]
    by_node = scipy.sparse.csr_array(
        (np.tile(np.arange(3, dtype=np.int8), n_tris), tris.ravel(),
         np.arange(0, 3 * n_tris + 1, 3, dtype=np.int64 if 3 * n_tris > np.iinfo(IDX).max else IDX)),
        shape=(n_tris, n_nodes)).tocsc()
    counts = np.diff(by_node.indptr)
    inside = np.arange(int(counts.max()))[None, :] < counts[:, None]
    fans = np.full(inside.shape, -1, dtype=IDX)
    fans[inside] = 3 * by_node.indices.astype(IDX) + by_node.data
    return fans


def lloyd_step(pts: np.ndarray, tris: np.ndarray, twin: np.ndarray, fans: np.ndarray) -> np.ndarray:
    """Generators moved to the (normalised, area-weighted) centroids of their Voronoi cells.

    The Voronoi cell of node c is the fan of triangles (c, v(twin h), v(h)) over the half-edges h
    leaving c (`fans`, from `node_fans`), v(h) the circumcentre of the triangle holding h; each
    node sums its fan's moments (c + v(twin h) + v(h)) * area in increasing h, blockwise over nodes.
    """
    vc = circumcentres(pts, tris)
    out = np.empty_like(pts)

    def block(s):
        c, fan = pts[s], fans[s]
        acc = np.zeros(c.shape)
        for j in range(fan.shape[1]):
            rows = np.flatnonzero(fan[:, j] >= 0)
            h = fan[rows, j]
            cj, p, q = c[rows], vc[twin[h] // 3], vc[h // 3]
            acc[rows] += (cj + p + q) * triangle_area(cj, p, q)[:, None]
        out[s] = _normalise(acc)
    for_blocks(block, pts.shape[0])
    return out


def connectivity(tris: np.ndarray, eid: np.ndarray, n_edges: int, n_cells: int,
                 follow_cells: bool = True) -> dict[str, np.ndarray]:
    """MPAS connectivity of the Voronoi mesh dual to a counter-clockwise triangulation.

    Cells are the nodes (in their given order), vertices the triangles, edges the triangle edges,
    with cellsOnEdge[e, 0] < cellsOnEdge[e, 1] and verticesOnEdge[e, 1] the triangle to the left of
    cellsOnEdge[e, 0] -> [e, 1] (so the tangent k x n runs from verticesOnEdge[e, 0] to [e, 1]).
    With `follow_cells`, edges and vertices are numbered in order of first appearance walking the
    cells in order (edgesOnCell / verticesOnCell); otherwise by edge id and triangle index.
    """
    src = tris.ravel()
    dst = np.roll(tris, -1, axis=1).ravel()
    twin = half_edge_twins(tris, eid, n_edges)
    h = np.arange(src.size, dtype=IDX)
    # counter-clockwise walk around each cell: next(h) = twin(previous half-edge of h's triangle)
    nxt = np.empty(src.size, dtype=IDX)

    def next_block(s):
        nxt[s] = twin[3 * (h[s] // 3) + (h[s] % 3 + 2) % 3]
    for_blocks(next_block, src.size)
    start = np.empty(n_cells, dtype=IDX)
    start[src] = h
    walk, cur = [start], start
    nEdgesOnCell = np.zeros(n_cells, dtype=INDEX_DTYPE)
    for j in range(1, 13):
        cur = nxt[cur]
        nEdgesOnCell[(cur == start) & (nEdgesOnCell == 0)] = j
        if np.all(nEdgesOnCell > 0):
            break
        walk.append(cur)
    del nxt, cur
    if np.any(nEdgesOnCell == 0):
        c = int(np.flatnonzero(nEdgesOnCell == 0)[0])
        raise ValueError(f"triangulation: the fan around node {c} does not close within 12 edges")
    maxEdges = int(nEdgesOnCell.max())
    hs = np.stack(walk[:maxEdges], axis=1)
    del walk, start
    inside = np.arange(maxEdges)[None, :] < nEdgesOnCell[:, None]
    hs[~inside] = 0
    tri_of, edge_of = hs // 3, eid.ravel()[hs]
    n_tris = tris.shape[0]
    if follow_cells:
        vorder = following_order(tri_of, nEdgesOnCell, n_tris)
        eorder = following_order(edge_of, nEdgesOnCell, n_edges)
    else:
        vorder, eorder = np.arange(n_tris), np.arange(n_edges)
    inv_v = np.empty(n_tris, dtype=INDEX_DTYPE)
    inv_v[vorder] = np.arange(n_tris, dtype=INDEX_DTYPE)
    inv_e = np.empty(n_edges, dtype=INDEX_DTYPE)
    inv_e[eorder] = np.arange(n_edges, dtype=INDEX_DTYPE)
    lead = np.empty(n_edges, dtype=IDX)          # per edge id, its half-edge from the lower cell
    low = src < dst
    lead[eid.ravel()[low]] = h[low]
    del h, low
    lead = lead[eorder]
    del eorder
    out = {"nEdgesOnCell": nEdgesOnCell}
    for name, n, m in (("edgesOnCell", n_cells, maxEdges), ("cellsOnCell", n_cells, maxEdges),
                       ("verticesOnCell", n_cells, maxEdges), ("cellsOnEdge", n_edges, 2),
                       ("verticesOnEdge", n_edges, 2), ("cellsOnVertex", n_tris, 3),
                       ("edgesOnVertex", n_tris, 3)):
        out[name] = np.empty((n, m), dtype=INDEX_DTYPE)

    def cell_block(s):
        ins = inside[s]
        out["edgesOnCell"][s] = np.where(ins, inv_e[edge_of[s]], -1)
        out["cellsOnCell"][s] = np.where(ins, dst[hs[s]], -1)
        out["verticesOnCell"][s] = np.where(ins, inv_v[tri_of[s]], -1)

    def edge_block(s):
        ld = lead[s]
        out["cellsOnEdge"][s] = np.stack([src[ld], dst[ld]], axis=1)
        out["verticesOnEdge"][s] = np.stack([inv_v[twin[ld] // 3], inv_v[ld // 3]], axis=1)

    def vertex_block(s):
        v = vorder[s]
        out["cellsOnVertex"][s] = tris[v]
        # cellsOnVertex[v, j] lies between edgesOnVertex[v, j] and [v, j+1]: edges (c,a), (a,b), (b,c)
        out["edgesOnVertex"][s] = inv_e[eid[v][:, [2, 0, 1]]]
    for_blocks(cell_block, n_cells)
    for_blocks(edge_block, n_edges)
    for_blocks(vertex_block, n_tris)
    return out


def edge_points(pc: np.ndarray, pv: np.ndarray, cellsOnEdge, verticesOnEdge) -> np.ndarray:
    """Unit edge points: great circle (c0, c1) meets great circle (v0, v1), on the side of c0 + c1."""
    out = np.empty((cellsOnEdge.shape[0], 3))

    def block(s):
        c0, c1 = pc[cellsOnEdge[s, 0]], pc[cellsOnEdge[s, 1]]
        v0, v1 = pv[verticesOnEdge[s, 0]], pv[verticesOnEdge[s, 1]]
        # p x (q - p) = p x q, accurate in direction when p and q are close
        p = cross(cross(c0, c1 - c0), cross(v0, v1 - v0))
        sign = np.sign(np.einsum("ij,ij->i", p, c0 + c1))
        out[s] = _normalise(p * np.where(sign == 0, 1.0, sign)[:, None])
    for_blocks(block, cellsOnEdge.shape[0])
    return out


def _check_arguments(caller: str, level, lloyd_iterations, order) -> None:
    if not (isinstance(level, (int, np.integer)) and 0 <= level <= MAX_LEVEL):
        raise ValueError(f"{caller}: level={level!r}, expected an integer in 0..{MAX_LEVEL}")
    if not (isinstance(lloyd_iterations, (int, np.integer)) and lloyd_iterations >= 0):
        raise ValueError(f"{caller}: lloyd_iterations={lloyd_iterations!r}, "
                         "expected an integer >= 0")
    if order not in METHODS + ("none",):
        raise ValueError(f"{caller}: order={order!r}, expected one of {METHODS + ('none',)}")


def _stage_clock(level: int, progress):
    """stage(name): the wall and CPU seconds since the previous stage, printed when `progress` is
    True, passed to progress(name, wall_s, cpu_s) when it is a callable."""
    clock = [time.perf_counter(), time.process_time()]

    def stage(name):
        now = [time.perf_counter(), time.process_time()]
        wall, cpu = now[0] - clock[0], now[1] - clock[1]
        if callable(progress):
            progress(name, wall, cpu)
        elif progress:
            print(f"  [level {level}] {name}: {wall:.2f} s wall, {cpu:.2f} s cpu", flush=True)
        clock[:] = [time.perf_counter(), time.process_time()]
    return stage


def icosahedral_triangulation(level: int, lloyd_iterations: int = 0,
                              stage=lambda name: None) -> dict:
    """{"pts", "tris", "eid", "n_edges"}: the level-`level` bisected icosahedron (unit nodes,
    counter-clockwise triangles, edge id of each half-edge), after `lloyd_iterations` Lloyd steps."""
    pts, tris = icosahedron()
    eid, edges = edge_ids(tris)
    for _ in range(level):
        pts, tris, eid, edges = bisect(pts, tris, eid, edges)
    n_edges = edges.shape[0]
    del edges
    stage("bisection")
    if lloyd_iterations:
        twin, fans = half_edge_twins(tris, eid, n_edges), node_fans(tris, pts.shape[0])
        for _ in range(lloyd_iterations):
            pts = lloyd_step(pts, tris, twin, fans)
            if not is_delaunay(pts, tris, twin):
                tris = _orient_ccw(pts, ConvexHull(pts).simplices.astype(IDX))
                eid, edges = edge_ids(tris)
                n_edges = edges.shape[0]
                twin, fans = half_edge_twins(tris, eid, n_edges), node_fans(tris, pts.shape[0])
        del twin, fans
        stage(f"{lloyd_iterations} Lloyd iterations")
    return {"pts": pts, "tris": tris, "eid": eid, "n_edges": n_edges}


def generate_icosahedral(level: int, *, lloyd_iterations: int = 0, sphere_radius: float = EARTH_RADIUS,
                         order: str = "morton", omega: float = EARTH_OMEGA,
                         progress=False, validate: bool = False) -> Mesh:
    """Icosahedral Voronoi mesh of level `level` (10 * 4**level + 2 cells) on a sphere of radius
    `sphere_radius` (m), after `lloyd_iterations` Lloyd steps, cells ordered along the space-filling
    curve `order` ("morton", "hilbert" or "none"), edges and vertices following their cells; every
    MPAS field derived by `grids.geometry.derive_fields` (the formulas of `complete_mesh`).
    `progress` prints each stage's wall and CPU time (or, a callable, gets (stage, wall_s, cpu_s)).

    The whole mesh is held in memory (all MPAS fields: about 1.18 kB per cell); to write a large
    mesh to a file without holding it, use `write_icosahedral` (same arrays).

    `validate` (default False, as before: the generator never ran `validate_mesh` on its output;
    `complete_mesh` checks index ranges and the vertex order it relies on) runs
    `validate_mesh(mesh, geometry=False)` on the result: topology, orientation, signs, positions
    on the sphere, positive lengths and areas. The geometry comparison is left out: it would derive
    the geometry again with the very `complete_mesh` that produced it, which checks nothing. The
    mesh cache (`grids.cache`) validates once, when it generates a mesh, never when it reads one.
    """
    _check_arguments("generate_icosahedral", level, lloyd_iterations, order)
    stage = _stage_clock(level, progress)
    triangulation = icosahedral_triangulation(level, lloyd_iterations, stage)
    source = f"meshops grids.icosahedral level={level} lloyd={lloyd_iterations} order={order}"
    mesh = _mesh_from_triangulation(triangulation, sphere_radius=sphere_radius, order=order,
                                    omega=omega, source=source, stage=stage)
    if validate:
        from grids.validate import validate_mesh

        validate_mesh(mesh, source=f"generate_icosahedral(level={level}, lloyd_iterations="
                      f"{lloyd_iterations}, order={order!r})", geometry=False)
        stage("validation (topology, orientation, signs)")
    return mesh


def write_icosahedral(level: int, path, *, lloyd_iterations: int = 0,
                      sphere_radius: float = EARTH_RADIUS, order: str = "morton",
                      omega: float = EARTH_OMEGA, format: str = "NETCDF4", compress: bool | str = True,
                      attributes: dict | None = None, history: str | bool = True,
                      cache_key: bool = False, checksums: bool = False, progress=False) -> dict:
    """`generate_icosahedral(level, ...)` written as an MPAS grid file at `path`, field by field.

    The file holds the arrays `write_mesh(generate_icosahedral(level, ...), path)` writes, but the
    whole mesh is never in memory: each field goes to the file (`grids.mpas_io.MeshFileWriter`) as
    soon as `grids.geometry.derive_fields` has it (on a writer thread, overlapping the computation
    of the next fields), the TRiSK fields block by block, so the peak is that of the triangulation,
    the connectivity and the inputs of the TRiSK weights (about half the mesh). `attributes` are
    added to the generated ones (`mpas_metadata`); `history`, `cache_key` and `compress` as for
    `write_mesh`; `checksums` stores each variable's CRC-32 (`MeshFileWriter`; the mesh
    cache); `format` one of `grids.mpas_io.FORMATS` (NETCDF4 default: NETCDF3_64BIT_OFFSET
    holds at most 4 GiB per variable, too little for edgesOnEdge and weightsOnEdge at level 11; the
    arguments and this limit are checked before any work). Written atomically (temporary name, then
    rename). Returns the dimension sizes.
    """
    from grids.atomic import atomic_path
    from grids.mpas_io import (FORMATS, MeshFileWriter, _check_format_limits, _file_attributes,
                               written_attributes)

    _check_arguments("write_icosahedral", level, lloyd_iterations, order)
    path = os.fspath(path)
    if format not in FORMATS:
        raise ValueError(f"{path}: netCDF format {format!r} not supported; expected one of {FORMATS}")
    if compress not in (False, True, "connectivity"):
        raise ValueError(f"{path}: compress={compress!r}, expected False, True or 'connectivity'")
    _check_format_limits(format, _predicted_shapes(level), path)
    stage = _stage_clock(level, progress)
    source = f"meshops grids.icosahedral level={level} lloyd={lloyd_iterations} order={order}"
    opened = []

    def open_writer(sizes, generated, extra):
        attrs = written_attributes({**generated, **(attributes or {})}, path, history=history,
                                   cache_key=cache_key)
        opened.append(MeshFileWriter(tmp, format=format, sizes=sizes, compress=compress,
                                     attributes=_file_attributes(attrs, sphere_radius), extra=extra,
                                     background=True, checksums=checksums))
        return opened[-1]

    with atomic_path(path) as tmp:
        triangulation = icosahedral_triangulation(level, lloyd_iterations, stage)
        try:
            sizes = _emit_mesh(triangulation, sphere_radius=sphere_radius, order=order, omega=omega,
                               source=source, open_sink=open_writer, stage=stage)
        except BaseException:
            if opened:
                opened[0].abort()
            raise
        opened[0].close()
        stage("file closed")
    return sizes


def voronoi_mesh(generators: np.ndarray, *, sphere_radius: float = EARTH_RADIUS, order: str = "morton",
                 omega: float = EARTH_OMEGA) -> Mesh:
    """Spherical Voronoi mesh of arbitrary (n, 3) generators (any length; directions are used).

    The Delaunay triangulation is the convex hull of the unit generators (scipy.spatial.ConvexHull);
    then cells are ordered along `order`, and every MPAS field derived as for `generate_icosahedral`.
    """
    p = np.asarray(generators, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 4:
        raise ValueError(f"voronoi_mesh: generators have shape {p.shape}, expected (n >= 4, 3)")
    norm = np.sqrt(np.einsum("ij,ij->i", p, p))
    bad = np.flatnonzero(~np.isfinite(norm) | (norm == 0))
    if bad.size:
        raise ValueError(f"voronoi_mesh: generators[{bad[0]}] = {p[bad[0]]}, expected a finite nonzero vector")
    if order not in METHODS + ("none",):
        raise ValueError(f"voronoi_mesh: order={order!r}, expected one of {METHODS + ('none',)}")
    p = p / norm[:, None]
    tris = _orient_ccw(p, ConvexHull(p).simplices.astype(IDX))
    eid, edges = edge_ids(tris)
    triangulation = {"pts": p, "tris": tris, "eid": eid, "n_edges": edges.shape[0]}
    del p, tris, eid
    return _mesh_from_triangulation(triangulation, sphere_radius=sphere_radius,
                                    order=order, omega=omega,
                                    source=f"meshops grids.icosahedral.voronoi_mesh order={order}")


def icosahedral_sizes(level: int) -> dict:
    """MPAS dimension sizes of the level-`level` mesh: 10 * 4**L + 2 cells, 30 * 4**L edges,
    20 * 4**L vertices, maxEdges 6 (5 at level 0, the dodecahedron), vertexDegree 3."""
    max_edges = 5 if level == 0 else 6
    return {"nCells": 10 * 4**level + 2, "nEdges": 30 * 4**level, "nVertices": 20 * 4**level,
            "maxEdges": max_edges, "maxEdges2": 2 * max_edges, "vertexDegree": 3, "TWO": 2}


def _predicted_shapes(level: int) -> dict:
    """{field: (shape, itemsize)} of the level's mesh, for the format limits checked up front."""
    from grids.mesh import COUNT_FIELDS, FIELD_DIMS, INDEX_FIELDS

    sizes = icosahedral_sizes(level)
    return {name: (tuple(sizes[d] for d in dims),
                   4 if (name in INDEX_FIELDS or name in COUNT_FIELDS) else 8)
            for name, dims in FIELD_DIMS.items()}


def _mesh_from_triangulation(triangulation: dict, *, sphere_radius, order, omega, source,
                             stage=lambda name: None) -> Mesh:
    """The Mesh (in memory) of the Voronoi dual of a triangulation (`_emit_mesh`)."""
    kept = {}

    def collect(sizes, attributes, extra):
        kept.update(attributes=attributes, extra=extra, sink=FieldCollector())
        return kept["sink"]

    _emit_mesh(triangulation, sphere_radius=sphere_radius, order=order, omega=omega, source=source,
               open_sink=collect, stage=stage)
    return Mesh(sphere_radius=float(sphere_radius), attributes=dict(kept["attributes"]),
                extra=dict(kept["extra"]), **kept["sink"].fields)


def _emit_mesh(triangulation: dict, *, sphere_radius, order, omega, source, open_sink,
               stage=lambda name: None) -> dict:
    """Ordered connectivity, positions and derived geometry of the Voronoi dual of a triangulation
    {"pts", "tris", "eid", "n_edges"} (emptied as it is used), handed field by field to the sink
    open_sink(sizes, attributes, extra) returns (`derive_fields`); returns the dimension sizes."""
    pts, tris = triangulation.pop("pts"), triangulation.pop("tris")
    eid, n_edges = triangulation.pop("eid"), triangulation.pop("n_edges")
    if order != "none":
        cells = sfc_order(pts, order)
        rank = np.empty(cells.size, dtype=IDX)
        rank[cells] = np.arange(cells.size, dtype=IDX)
        pts, tris = pts[cells], rank[tris]
        del cells, rank
    conn = connectivity(tris, eid, n_edges, pts.shape[0], follow_cells=order != "none")
    del tris, eid
    stage("connectivity and edge/vertex order")
    pv = circumcentres(pts, conn["cellsOnVertex"])
    pe = edge_points(pts, pv, conn["cellsOnEdge"], conn["verticesOnEdge"])
    a = float(sphere_radius)
    for loc, p in (("Cell", pts), ("Edge", pe), ("Vertex", pv)):
        for k, c in enumerate("xyz"):
            conn[f"{c}{loc}"] = a * p[:, k]
    del pts, pe, pv, p
    stage("positions")
    maxEdges = conn["edgesOnCell"].shape[1]
    sizes = {"nCells": conn["xCell"].shape[0], "nEdges": conn["xEdge"].shape[0],
             "nVertices": conn["xVertex"].shape[0], "maxEdges": maxEdges, "maxEdges2": 2 * maxEdges,
             "vertexDegree": conn["cellsOnVertex"].shape[1], "TWO": 2}
    attributes, extra = mpas_metadata(sizes, a, source=source,
                                      mesh_id=mesh_id_of(conn["xCell"], conn["yCell"], conn["zCell"]))
    sink = open_sink(sizes, attributes, extra)
    del extra
    derive_fields(conn, a, omega=omega, sink=sink)
    stage("geometry")
    return sizes
