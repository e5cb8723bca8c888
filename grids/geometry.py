"""Mesh geometry derived from positions and connectivity, as MPAS's mesh converter derives it.

`complete_mesh` turns the connectivity and positions of a closed spherical Voronoi mesh into a full
`Mesh` (lengths, areas, kites, angles, signs, TRiSK weights, Coriolis parameters). Every formula is
evaluated on unit vectors and scaled by `sphere_radius` (lengths) or its square (areas):

- dcEdge[e] = a * arc(cellsOnEdge[e,0], cellsOnEdge[e,1]),  dvEdge[e] = a * arc(verticesOnEdge[e,0..1]),
  with arc(p, q) = atan2(|p x q|, p . q);
- areaCell[c] = a^2 * sum_j T(cell c, verticesOnCell[c,j-1], verticesOnCell[c,j]);
- areaTriangle[v] = a^2 * T(cellsOnVertex[v,0], cellsOnVertex[v,1], cellsOnVertex[v,2]) (vertexDegree 3;
  the sum of the kites otherwise);
- kiteAreasOnVertex[v,j] = a^2 * (T(v, edgesOnVertex[v,j], c) + T(v, c, edgesOnVertex[v,j+1])),
  c = cellsOnVertex[v,j] (MPAS: the part of triangle v inside cell c, bounded by the two edge points);
- T(p, q, r) is the signed spherical-triangle area 2 atan2(p . (q x r), 1 + p.q + q.r + r.p)
  (exact to round-off for small triangles, unlike L'Huilier's formula with acos-based sides that the
  C++ converter uses: the two agree to ~1e-9 relative on x1.162, see tests/grids/test_geometry.py);
- angleEdge[e] = atan2(n . north, n . east) at the edge point, n the unit normal of edge e (the
  direction of cellsOnEdge[e,0] -> cellsOnEdge[e,1]). MPAS's converter evaluates the same angle with
  acos((latVertex[v1] - latVertex[v0]) / dvEdge), an approximation of it: the two differ by
  O(dvEdge^2 / a^2) for most edges (median 1e-3 rad on x1.162, 1.4e-5 rad at level 5), but by up to
  2e-2 rad near the poles at every resolution, where the approximation fails (tests/grids);
- edgeSignOnCell[c,j] = +1 if c == cellsOnEdge[edgesOnCell[c,j], 0] else -1 (the normal points out of c);
- edgeSignOnVertex[v,j] = +1 if v == verticesOnEdge[edgesOnVertex[v,j], 1] else -1 (MPAS
  `edgesOnVertex_sign`: +1 where the normal circulates counter-clockwise around v, so that
  curl = sum_j edgeSignOnVertex[v,j] * dcEdge * u / areaTriangle);
- edgesOnEdge / weightsOnEdge (Thuburn et al. 2009, Ringler et al. 2010), in MPAS's order: the edges
  of cellsOnEdge[e,0] counter-clockwise starting after e, then those of cellsOnEdge[e,1]; with
  R_i the running sum of kite/areaCell over the vertices passed from e to the i-th edge e_i,
  weightsOnEdge[e,i] = s * edgeSignOnCell[c, e_i] * (1/2 - R_i) * dvEdge[e_i] / dcEdge[e],
  s = +1 on cellsOnEdge[e,0] and -1 on cellsOnEdge[e,1]; then the tangential velocity along the
  tangent (k x n) is v[e] = sum_i weightsOnEdge[e,i] * u[edgesOnEdge[e,i]];
- fCell = 2 omega sin(latCell), and likewise fEdge, fVertex.
"""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from grids.mesh import (COUNT_FIELDS, EARTH_OMEGA, FIELD_DIMS, INDEX_FIELDS, REQUIRED_FIELDS, Mesh)

#: Entities processed per block: keeps every temporary below ~32 MB, so the allocator reuses heap
#: memory instead of mapping (and page-faulting) fresh pages for each operation.
CHUNK = 1 << 17
#: Index dtype of every connectivity field built here (MPAS files hold int32).
INDEX_DTYPE = np.int32

_SIZE_OF_DIM = {"nCells": "xCell", "nEdges": "xEdge", "nVertices": "xVertex"}


# --------------------------------------------------------------------------------------------
# small spherical kernels on (n, 3) unit vectors
# --------------------------------------------------------------------------------------------
def unit_vectors(x, y, z) -> np.ndarray:
    """(n, 3) unit vectors along (x, y, z)."""
    p = np.stack([np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64),
                  np.asarray(z, dtype=np.float64)], axis=1)
    p /= _norm(p)[:, None]
    return p


def _dot(p, q):
    return np.einsum("ij,ij->i", p, q)


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross product of (n, 3) arrays (np.cross without its generic-axis overhead)."""
    a0, a1, a2 = a[:, 0], a[:, 1], a[:, 2]
    b0, b1, b2 = b[:, 0], b[:, 1], b[:, 2]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    np.subtract(a1 * b2, a2 * b1, out=out[:, 0])
    np.subtract(a2 * b0, a0 * b2, out=out[:, 1])
    np.subtract(a0 * b1, a1 * b0, out=out[:, 2])
    return out


def _norm(p):
    return np.sqrt(_dot(p, p))


def arc_length(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Great-circle angle between unit vectors p and q (radians): atan2(|p x q|, p . q)."""
    return np.arctan2(_norm(cross(p, q - p)), _dot(p, q))


def triangle_area(p: np.ndarray, q: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Signed area of the spherical triangle (p, q, r) on the unit sphere (> 0 counter-clockwise).

    tan(E/2) = p . (q x r) / (1 + p.q + q.r + r.p) (Van Oosterom & Strackee 1983), with
    p . (q x r) evaluated as p . ((q - p) x (r - p)) to keep full relative precision for small triangles.
    """
    num = _dot(p, cross(q - p, r - p))   # = p . (q x r), without cancellation for small triangles
    den = 1.0 + _dot(p, q) + _dot(q, r) + _dot(r, p)
    return 2.0 * np.arctan2(num, den)


def lat_lon(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Latitude in [-pi/2, pi/2] and longitude in [0, 2 pi) of unit vectors (MPAS's ranges)."""
    lat = np.arcsin(np.clip(p[:, 2], -1.0, 1.0))
    lon = np.arctan2(p[:, 1], p[:, 0])
    lon = np.where(lon < 0.0, lon + 2.0 * np.pi, lon)
    return lat, lon


def _chunks(n: int):
    for start in range(0, n, CHUNK):
        yield slice(start, min(start + CHUNK, n))


#: Environment variable giving the number of threads of the blockwise kernels.
THREADS_ENV = "MESHOPS_THREADS"


def threads() -> int:
    """Threads for blockwise kernels: $MESHOPS_THREADS, else the CPUs this process may run on."""
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"{THREADS_ENV}={env!r}: expected a positive integer") from None
        if n < 1:
            raise ValueError(f"{THREADS_ENV}={env!r}: expected a positive integer")
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


def blocks(fn, n: int):
    """Yield (s, fn(s)) for the blocks s of range(n) (`_chunks`), in order, computed on `threads()`
    threads (NumPy releases the GIL in its large loops). At most 2 * threads() blocks are in flight,
    so results consumed one by one (e.g. written to a file) never pile up in memory. Each block's
    result depends on its block alone, so the output is the same for any thread count."""
    slices = list(_chunks(n))
    k = min(threads(), len(slices))
    if k <= 1:
        for s in slices:
            yield s, fn(s)
        return
    with ThreadPoolExecutor(k) as pool:
        pending = deque()
        for s in slices:
            pending.append((s, pool.submit(fn, s)))
            if len(pending) >= 2 * k:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()


def for_blocks(fn, n: int) -> None:
    """fn(s) for every block s of range(n), in parallel (`blocks`); fn writes its own slice of a
    preallocated output. The first failing block (in order) raises."""
    for _ in blocks(fn, n):
        pass


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------
def _sizes(fields) -> dict[str, int]:
    return {dim: int(np.asarray(fields[name]).shape[0]) for dim, name in _SIZE_OF_DIM.items()}


def _check_fields(fields: dict, sphere_radius: float) -> None:
    """Raise ValueError naming the field, the first bad index and value, and what was expected."""
    missing = [name for name in REQUIRED_FIELDS if name not in fields]
    if missing:
        raise ValueError(f"complete_mesh: required fields {missing} are missing "
                         f"(expected all of {list(REQUIRED_FIELDS)})")
    if not (np.isfinite(sphere_radius) and sphere_radius > 0):
        raise ValueError(f"complete_mesh: sphere_radius={sphere_radius!r}, expected a positive number")
    sizes = _sizes(fields)
    for name, arr in fields.items():
        if name not in FIELD_DIMS:
            continue
        arr = np.asarray(arr)
        dims = FIELD_DIMS[name]
        if arr.ndim != len(dims) or arr.shape[0] != sizes[dims[0]]:
            raise ValueError(f"complete_mesh: field {name} has shape {arr.shape}, expected "
                             f"{dims} with {dims[0]}={sizes[dims[0]]}")
    for loc in ("Cell", "Edge", "Vertex"):
        r = np.sqrt(sum(np.asarray(fields[f"{c}{loc}"], dtype=np.float64) ** 2 for c in "xyz"))
        bad = np.flatnonzero(np.abs(r - sphere_radius) > 1e-6 * sphere_radius)
        if bad.size:
            i = bad[0]
            raise ValueError(f"complete_mesh: (x{loc}, y{loc}, z{loc})[{i}] has radius {float(r[i])!r}, "
                             f"expected sphere_radius={sphere_radius!r} (to 1e-6 relative)")
    targets = {"edgesOnCell": "nEdges", "cellsOnCell": "nCells", "verticesOnCell": "nVertices",
               "cellsOnEdge": "nCells", "verticesOnEdge": "nVertices", "edgesOnEdge": "nEdges",
               "cellsOnVertex": "nCells", "edgesOnVertex": "nEdges"}
    nEdgesOnCell = np.asarray(fields["nEdgesOnCell"])
    maxEdges = np.asarray(fields["edgesOnCell"]).shape[1]
    bad = np.flatnonzero((nEdgesOnCell < 3) | (nEdgesOnCell > maxEdges))
    if bad.size:
        i = bad[0]
        raise ValueError(f"complete_mesh: nEdgesOnCell[{i}] = {nEdgesOnCell[i]}, expected 3..{maxEdges}")
    for name in INDEX_FIELDS:
        if name not in fields or name == "edgesOnEdge":
            continue
        arr = np.asarray(fields[name])
        n = sizes[targets[name]]
        if FIELD_DIMS[name][1] == "maxEdges":
            inside = np.arange(arr.shape[1])[None, :] < nEdgesOnCell[:, None]
        else:
            inside = np.ones(arr.shape, dtype=bool)
        bad = np.argwhere(inside & ((arr < 0) | (arr >= n)))
        if bad.size:
            i = tuple(int(k) for k in bad[0])
            raise ValueError(f"complete_mesh: {name}{list(i)} = {arr[i]}, expected an index in "
                             f"[0, {n}) ({targets[name]}); complete_mesh needs a closed spherical mesh")
    # MPAS order around a vertex: cellsOnVertex[v, j] lies between edgesOnVertex[v, j] and [v, j+1].
    cov = np.asarray(fields["cellsOnVertex"])
    eov = np.asarray(fields["edgesOnVertex"])
    coe = np.asarray(fields["cellsOnEdge"])
    for shift in (0, 1):
        e = np.roll(eov, -shift, axis=1)
        ok = (coe[e, 0] == cov) | (coe[e, 1] == cov)
        bad = np.argwhere(~ok)
        if bad.size:
            v, j = bad[0]
            raise ValueError(f"complete_mesh: cellsOnVertex[{v}, {j}] = {cov[v, j]} is not a cell of "
                             f"edgesOnVertex[{v}, {(j + shift) % eov.shape[1]}] = {e[v, j]}; expected "
                             "MPAS order (cellsOnVertex[v, j] between edgesOnVertex[v, j] and [v, j+1])")


# --------------------------------------------------------------------------------------------
# geometry pieces
# --------------------------------------------------------------------------------------------
def pair_arcs(p: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """arc_length(p[pairs[:, 0]], p[pairs[:, 1]]), blockwise."""
    out = np.empty(pairs.shape[0])

    def block(s):
        out[s] = arc_length(p[pairs[s, 0]], p[pairs[s, 1]])
    for_blocks(block, pairs.shape[0])
    return out


def vertex_triangle_areas(pc: np.ndarray, cellsOnVertex: np.ndarray) -> np.ndarray:
    """T(cellsOnVertex[v, 0], [v, 1], [v, 2]) on the unit sphere, blockwise."""
    out = np.empty(cellsOnVertex.shape[0])

    def block(s):
        cov = cellsOnVertex[s]
        out[s] = triangle_area(pc[cov[:, 0]], pc[cov[:, 1]], pc[cov[:, 2]])
    for_blocks(block, cellsOnVertex.shape[0])
    return out


def edge_signs_on_cell(edgesOnCell, nEdgesOnCell, cellsOnEdge) -> np.ndarray:
    """edgeSignOnCell[c, j] = +1 if c == cellsOnEdge[edgesOnCell[c, j], 0] else -1; 0 on pads."""
    n, m = edgesOnCell.shape
    inside = np.arange(m)[None, :] < nEdgesOnCell[:, None]
    first = cellsOnEdge[np.where(inside, edgesOnCell, 0), 0]
    sign = np.where(first == np.arange(n)[:, None], 1.0, -1.0)
    return np.where(inside, sign, 0.0)


def edge_signs_on_vertex(edgesOnVertex, verticesOnEdge) -> np.ndarray:
    """edgeSignOnVertex[v, j] = +1 if v == verticesOnEdge[edgesOnVertex[v, j], 1] else -1."""
    v = np.arange(edgesOnVertex.shape[0])[:, None]
    return np.where(verticesOnEdge[edgesOnVertex, 1] == v, 1.0, -1.0)


def cell_areas(pc, pv, verticesOnCell, nEdgesOnCell) -> np.ndarray:
    """areaCell on the unit sphere: sum_j T(c, verticesOnCell[c, j-1], verticesOnCell[c, j])."""
    n, m = verticesOnCell.shape
    area = np.zeros(n)
    cols = np.arange(m)

    def block(s):
        voc, ne = verticesOnCell[s], nEdgesOnCell[s]
        prev = voc[np.arange(voc.shape[0])[:, None], (cols[None, :] - 1) % ne[:, None]]
        inside = cols[None, :] < ne[:, None]
        c = np.repeat(pc[s], m, axis=0)
        t = triangle_area(c, pv[np.where(inside, prev, 0).ravel()],
                          pv[np.where(inside, voc, 0).ravel()]).reshape(-1, m)
        area[s] = np.where(inside, t, 0.0).sum(axis=1)
    for_blocks(block, n)
    return area


def kite_areas(pc, pe, pv, cellsOnVertex, edgesOnVertex) -> np.ndarray:
    """kiteAreasOnVertex on the unit sphere (MPAS: T(v, e_j, c_j) + T(v, c_j, e_{j+1}))."""
    n, deg = cellsOnVertex.shape
    kites = np.empty((n, deg))

    def block(s):
        v = np.repeat(pv[s], deg, axis=0)
        c = pc[cellsOnVertex[s].ravel()]
        e1 = pe[edgesOnVertex[s].ravel()]
        e2 = pe[np.roll(edgesOnVertex[s], -1, axis=1).ravel()]
        kites[s] = (triangle_area(v, e1, c) + triangle_area(v, c, e2)).reshape(-1, deg)
    for_blocks(block, n)
    return kites


def edge_angles(pc, pe, cellsOnEdge) -> np.ndarray:
    """angleEdge: atan2(n . north, n . east) at the edge point, n along cellsOnEdge[e,0] -> [e,1]."""
    n = pe.shape[0]
    angle = np.empty(n)

    def block(s):
        p = pe[s]
        d = pc[cellsOnEdge[s, 1]] - pc[cellsOnEdge[s, 0]]
        east = np.stack([-p[:, 1], p[:, 0], np.zeros(p.shape[0])], axis=1)
        norm_east = _norm(east)
        east /= np.where(norm_east > 0, norm_east, 1.0)[:, None]
        north = cross(p, east)
        angle[s] = np.arctan2(_dot(d, north), _dot(d, east))
    for_blocks(block, n)
    return angle


def trisk_rings(edgesOnCell, nEdgesOnCell, verticesOnCell, cellsOnEdge, cellsOnVertex,
                edgeSignOnCell, areaCell, kiteAreasOnVertex, dvEdge):
    """Per-cell rings that `trisk_rows` reads: (ring_edge, ring_sdv, ring_kite, slot).

    Each cell's edge ring is stored twice over (cyclically): ring_edge[c, j] = edgesOnCell[c, j mod n],
    ring_sdv[c, j] = edgeSignOnCell[c, j mod n] * dvEdge[ring_edge[c, j]], and ring_kite[c, j] =
    sum_{i<j} kite(c, verticesOnCell[c, i mod n]) / areaCell[c] (exclusive running sum), so the edges
    following e counter-clockwise around c are a contiguous window. slot[e, side] is the j of edge e
    in edgesOnCell[cellsOnEdge[e, side]]. Blockwise over cells, in parallel (blocks write disjoint
    rows and slots).
    """
    nCells, m = edgesOnCell.shape
    nEdges = cellsOnEdge.shape[0]
    m2 = 2 * m
    ring_edge = np.empty((nCells, m2), dtype=INDEX_DTYPE)
    ring_sdv = np.empty((nCells, m2))
    ring_kite = np.empty((nCells, m2 + 1))
    slot = np.full((nEdges, 2), -1, dtype=INDEX_DTYPE)
    cols = np.arange(m)

    def block(s):
        c = np.arange(s.start, s.stop)
        ne = nEdgesOnCell[s].astype(np.int64)
        inside = cols[None, :] < ne[:, None]
        eoc = edgesOnCell[s]
        # kite of cell c at its vertex verticesOnCell[c, j]
        v = np.where(inside, verticesOnCell[s], 0)
        hit = cellsOnVertex[v] == c[:, None, None]
        found = hit.any(axis=2)
        if np.any(inside & ~found):
            r, j = np.argwhere(inside & ~found)[0]
            raise ValueError(f"complete_mesh: cell {c[r]} is not in cellsOnVertex[{v[r, j]}] although "
                             f"verticesOnCell[{c[r]}, {j}] = {v[r, j]}")
        kite = np.where(inside, kiteAreasOnVertex[v, hit.argmax(axis=2)], 0.0) / areaCell[s, None]
        wrap = np.arange(m2)[None, :] % ne[:, None]
        rows = np.arange(c.size)[:, None]
        e = eoc[rows, wrap]
        ring_edge[s] = e
        ring_sdv[s] = edgeSignOnCell[s][rows, wrap] * dvEdge[e]
        ring_kite[s, 0] = 0.0
        np.cumsum(kite[rows, wrap], axis=1, out=ring_kite[s, 1:])
        # slots: side 0 where c == cellsOnEdge[e, 0]
        ee = eoc[inside]
        side = (cellsOnEdge[ee, 0] != np.broadcast_to(c[:, None], inside.shape)[inside])
        slot[ee, side.astype(np.int64)] = np.broadcast_to(cols, inside.shape)[inside]
    for_blocks(block, nCells)
    bad = np.argwhere(slot < 0)
    if bad.size:
        e, side = bad[0]
        raise ValueError(f"complete_mesh: edge {e} is not in edgesOnCell[{cellsOnEdge[e, side]}] "
                         f"although cellsOnEdge[{e}, {side}] = {cellsOnEdge[e, side]}")
    return ring_edge, ring_sdv, ring_kite, slot


def trisk_rows(rings, s: slice, nEdgesOnCell, cellsOnEdge, dcEdge):
    """(nEdgesOnEdge, edgesOnEdge, weightsOnEdge) of the edges in slice `s`, from `trisk_rings`.

    weightsOnEdge[e, i] = s_side * edgeSignOnCell[c, e_i] * (1/2 - R_i) * dvEdge[e_i] / dcEdge[e]
    over the edges e_i following e counter-clockwise around c = cellsOnEdge[e, 0] (s_side = +1), then
    around cellsOnEdge[e, 1] (s_side = -1); R_i the running kite/areaCell sum (module docstring).
    """
    ring_edge, ring_sdv, ring_kite, slot = rings
    m2 = ring_edge.shape[1]
    steps = np.arange(1, m2 // 2)
    flat_edge, flat_sdv, flat_kite = ring_edge.ravel(), ring_sdv.ravel(), ring_kite.ravel()
    n_rows = s.stop - s.start
    out_e = np.full((n_rows, m2), -1, dtype=INDEX_DTYPE)
    out_w = np.zeros((n_rows, m2))
    offset = np.zeros(n_rows, dtype=np.int64)
    for side, sign in ((0, 1.0), (1, -1.0)):
        c = cellsOnEdge[s, side].astype(np.int64)
        k = slot[s, side].astype(np.int64)
        ne = nEdgesOnCell[c].astype(np.int64)
        at = (c * m2 + k)[:, None] + steps[None, :]
        base = (c * (m2 + 1) + k)[:, None]
        running = flat_kite[base + steps[None, :]] - flat_kite[base]
        w = (sign / dcEdge[s])[:, None] * flat_sdv[at] * (0.5 - running)
        live = steps[None, :] < ne[:, None]
        pos = (np.arange(n_rows) * m2 + offset)[:, None] + (steps - 1)[None, :]
        out_e.ravel()[pos[live]] = flat_edge[at[live]]
        out_w.ravel()[pos[live]] = w[live]
        offset += ne - 1
    return offset.astype(INDEX_DTYPE), out_e, out_w


def trisk_weight_blocks(edgesOnCell, nEdgesOnCell, verticesOnCell, cellsOnEdge, cellsOnVertex,
                        edgeSignOnCell, areaCell, kiteAreasOnVertex, dcEdge, dvEdge):
    """Yield (s, (nEdgesOnEdge, edgesOnEdge, weightsOnEdge) of rows s) over blocks of edges, in
    order, computed in parallel (`blocks`): the TRiSK fields without holding them whole."""
    rings = trisk_rings(edgesOnCell, nEdgesOnCell, verticesOnCell, cellsOnEdge, cellsOnVertex,
                        edgeSignOnCell, areaCell, kiteAreasOnVertex, dvEdge)
    yield from blocks(lambda s: trisk_rows(rings, s, nEdgesOnCell, cellsOnEdge, dcEdge),
                      cellsOnEdge.shape[0])


def trisk_weights(edgesOnCell, nEdgesOnCell, verticesOnCell, cellsOnEdge, cellsOnVertex,
                  edgeSignOnCell, areaCell, kiteAreasOnVertex, dcEdge, dvEdge):
    """nEdgesOnEdge, edgesOnEdge and weightsOnEdge in MPAS's order and sign convention
    (`trisk_rings`, `trisk_rows`). Works for any radius: kite/areaCell and dvEdge/dcEdge are
    dimensionless.
    """
    nEdges, m2 = cellsOnEdge.shape[0], 2 * edgesOnCell.shape[1]
    nEdgesOnEdge = np.empty(nEdges, dtype=INDEX_DTYPE)
    edgesOnEdge = np.empty((nEdges, m2), dtype=INDEX_DTYPE)
    weightsOnEdge = np.empty((nEdges, m2))
    for s, (n, e, w) in trisk_weight_blocks(edgesOnCell, nEdgesOnCell, verticesOnCell, cellsOnEdge,
                                            cellsOnVertex, edgeSignOnCell, areaCell,
                                            kiteAreasOnVertex, dcEdge, dvEdge):
        nEdgesOnEdge[s], edgesOnEdge[s], weightsOnEdge[s] = n, e, w
    return nEdgesOnEdge, edgesOnEdge, weightsOnEdge


class FieldCollector:
    """A field sink (`derive_fields`) that keeps every field in `self.fields`, for an in-memory Mesh."""

    def __init__(self):
        self.fields: dict[str, np.ndarray] = {}

    def put(self, name: str, array: np.ndarray) -> None:
        """Keep the whole field `name`."""
        self.fields[name] = array

    def put_rows(self, name: str, rows: slice, block: np.ndarray, n: int) -> None:
        """Rows `rows` of the field `name` of `n` rows (allocated at the first block)."""
        if name not in self.fields:
            self.fields[name] = np.empty((n,) + block.shape[1:], dtype=block.dtype)
        self.fields[name][rows] = block


def derive_fields(fields: dict, sphere_radius: float, *, omega: float = EARTH_OMEGA, sink) -> None:
    """Every MPAS field of a closed spherical Voronoi mesh, handed to `sink` as soon as it is final.

    Input: `fields` holds exactly what `complete_mesh` needs (`REQUIRED_FIELDS`: positions in m on
    the sphere of radius `sphere_radius`, 0-based connectivity); it is emptied, so the caller keeps
    no reference and each field is freed once the sink has it and no later formula reads it.
    Output: sink.put(name, array) for whole fields, sink.put_rows(name, rows, block, n) for the
    TRiSK fields (blocks of edges), every field of `grids.mesh.FIELD_DIMS` once. The values are
    those of `complete_mesh` (same kernels, same formulas: module docstring). A sink that writes
    to a file (`grids.mpas_io.MeshFileWriter`) makes the peak memory that of the inputs of the
    TRiSK weights, not that of the whole mesh.
    """
    _check_fields(fields, sphere_radius)
    a = float(sphere_radius)
    f = {}
    for name in REQUIRED_FIELDS:
        f[name] = np.asarray(fields.pop(name), dtype=INDEX_DTYPE
                             if (name in INDEX_FIELDS or name in COUNT_FIELDS) else np.float64)
    fields.clear()
    pc, pe, pv = (_put_positions(f, loc, omega, sink) for loc in ("Cell", "Edge", "Vertex"))
    noc, coe = f.pop("nEdgesOnCell"), f.pop("cellsOnEdge")
    eoc, voc, cov = f.pop("edgesOnCell"), f.pop("verticesOnCell"), f.pop("cellsOnVertex")
    sink.put("cellsOnCell", f.pop("cellsOnCell"))
    sign_cell = edge_signs_on_cell(eoc, noc, coe)
    sink.put("edgeSignOnCell", sign_cell)
    voe, eov = f.pop("verticesOnEdge"), f.pop("edgesOnVertex")
    sink.put("edgeSignOnVertex", edge_signs_on_vertex(eov, voe))
    dc = a * pair_arcs(pc, coe)
    sink.put("dcEdge", dc)
    dv = a * pair_arcs(pv, voe)
    sink.put("dvEdge", dv)
    sink.put("verticesOnEdge", voe)
    del voe
    area = a * a * cell_areas(pc, pv, voc, noc)
    sink.put("areaCell", area)
    kite = a * a * kite_areas(pc, pe, pv, cov, eov)
    sink.put("kiteAreasOnVertex", kite)
    sink.put("edgesOnVertex", eov)
    del eov
    if cov.shape[1] == 3:
        sink.put("areaTriangle", a * a * vertex_triangle_areas(pc, cov))
    else:
        sink.put("areaTriangle", kite.sum(axis=1))
    sink.put("angleEdge", edge_angles(pc, pe, coe))
    del pc, pe, pv
    rings = trisk_rings(eoc, noc, voc, coe, cov, sign_cell, area, kite, dv)
    del sign_cell, area, kite, dv
    for name, arr in (("edgesOnCell", eoc), ("verticesOnCell", voc), ("cellsOnVertex", cov)):
        sink.put(name, arr)
    del eoc, voc, cov, arr
    n = coe.shape[0]
    for rows, (ne, e, w) in blocks(lambda s: trisk_rows(rings, s, noc, coe, dc), n):
        sink.put_rows("nEdgesOnEdge", rows, ne, n)
        sink.put_rows("edgesOnEdge", rows, e, n)
        sink.put_rows("weightsOnEdge", rows, w, n)
    del rings, dc
    sink.put("nEdgesOnCell", noc)
    sink.put("cellsOnEdge", coe)


def _put_positions(f: dict, loc: str, omega: float, sink) -> np.ndarray:
    """Hand x{loc}, y{loc}, z{loc} (popped from f), lat{loc}, lon{loc} and f{loc} = 2 omega
    sin(lat{loc}) to the sink; return the (n, 3) unit vectors (`unit_vectors`, `lat_lon`,
    blockwise in parallel)."""
    x, y, z = (f.pop(f"{c}{loc}") for c in "xyz")
    n = x.shape[0]
    p, lat, lon, cor = np.empty((n, 3)), np.empty(n), np.empty(n), np.empty(n)

    def block(s):
        p[s] = unit_vectors(x[s], y[s], z[s])
        lat[s], lon[s] = lat_lon(p[s])
        cor[s] = 2.0 * omega * np.sin(lat[s])
    for_blocks(block, n)
    for c, arr in zip("xyz", (x, y, z)):
        sink.put(f"{c}{loc}", arr)
    sink.put(f"lat{loc}", lat)
    sink.put(f"lon{loc}", lon)
    sink.put(f"f{loc}", cor)
    return p


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
def complete_mesh(fields: dict[str, np.ndarray], sphere_radius: float, *, omega: float = EARTH_OMEGA,
                  recompute: bool = False, attributes: dict | None = None,
                  extra: dict | None = None) -> Mesh:
    """Build a `Mesh` from positions and connectivity, deriving every absent MPAS field.

    Input: `fields` holds at least `grids.mesh.REQUIRED_FIELDS` of a closed spherical mesh
    (positions in metres on the sphere of radius `sphere_radius`, 0-based connectivity with -1 pads
    beyond nEdgesOnCell, MPAS orderings). Fields present are kept unless `recompute=True`, in which
    case every non-required field is derived again. Output: a global `Mesh` (nCellsSolve = nCells).
    The formulas (MPAS names) are in this module's docstring. Raises ValueError naming the field,
    the first bad index and value when the input is not such a mesh.
    """
    _check_fields(fields, sphere_radius)
    a = float(sphere_radius)
    out = {}
    for name in REQUIRED_FIELDS:
        arr = np.asarray(fields[name])
        out[name] = np.asarray(arr, dtype=INDEX_DTYPE if (name in INDEX_FIELDS or name in COUNT_FIELDS)
                               else np.float64)

    def have(name):
        return (not recompute) and name in fields

    def keep(name):
        arr = np.asarray(fields[name])
        if name in INDEX_FIELDS or name in COUNT_FIELDS:
            return np.asarray(arr, dtype=INDEX_DTYPE)
        return np.asarray(arr, dtype=np.float64)

    pc = unit_vectors(out["xCell"], out["yCell"], out["zCell"])
    pe = unit_vectors(out["xEdge"], out["yEdge"], out["zEdge"])
    pv = unit_vectors(out["xVertex"], out["yVertex"], out["zVertex"])
    for loc, p in (("Cell", pc), ("Edge", pe), ("Vertex", pv)):
        if have(f"lat{loc}") and have(f"lon{loc}"):
            out[f"lat{loc}"], out[f"lon{loc}"] = keep(f"lat{loc}"), keep(f"lon{loc}")
        else:
            out[f"lat{loc}"], out[f"lon{loc}"] = lat_lon(p)

    eoc, noc, voc = out["edgesOnCell"], out["nEdgesOnCell"], out["verticesOnCell"]
    coe, voe = out["cellsOnEdge"], out["verticesOnEdge"]
    cov, eov = out["cellsOnVertex"], out["edgesOnVertex"]

    def derive(name, fn):
        out[name] = keep(name) if have(name) else fn()

    derive("edgeSignOnCell", lambda: edge_signs_on_cell(eoc, noc, coe))
    derive("edgeSignOnVertex", lambda: edge_signs_on_vertex(eov, voe))
    derive("dcEdge", lambda: a * pair_arcs(pc, coe))
    derive("dvEdge", lambda: a * pair_arcs(pv, voe))
    derive("areaCell", lambda: a * a * cell_areas(pc, pv, voc, noc))
    derive("kiteAreasOnVertex", lambda: a * a * kite_areas(pc, pe, pv, cov, eov))
    if cov.shape[1] == 3:
        derive("areaTriangle", lambda: a * a * vertex_triangle_areas(pc, cov))
    else:
        derive("areaTriangle", lambda: out["kiteAreasOnVertex"].sum(axis=1))
    derive("angleEdge", lambda: edge_angles(pc, pe, coe))
    del pc, pe, pv
    if have("nEdgesOnEdge") and have("edgesOnEdge") and have("weightsOnEdge"):
        for name in ("nEdgesOnEdge", "edgesOnEdge", "weightsOnEdge"):
            out[name] = keep(name)
    else:
        out["nEdgesOnEdge"], out["edgesOnEdge"], out["weightsOnEdge"] = trisk_weights(
            eoc, noc, voc, coe, cov, out["edgeSignOnCell"], out["areaCell"],
            out["kiteAreasOnVertex"], out["dcEdge"], out["dvEdge"])
    for loc in ("Cell", "Edge", "Vertex"):
        derive(f"f{loc}", lambda loc=loc: 2.0 * omega * np.sin(out[f"lat{loc}"]))
    return Mesh(sphere_radius=a, attributes=dict(attributes or {}), extra=dict(extra or {}), **out)


def mesh_quality(mesh: Mesh) -> dict:
    """Summary of a mesh's quality, with MPAS's definitions (MpasMeshConverter's buildMeshQualities).

    cellQuality[c] = min / max of dvEdge over the edges of c; triangleQuality[v] = min / max of dcEdge
    over the edges of v; triangleAngleQuality[v] = min / max angle of the planar triangle with sides
    dcEdge (vertexDegree 3), obtuse when its largest angle exceeds pi/2. Returns plain floats/ints:
    {"nCells", "nEdges", "nVertices", "dcEdge_min", "dcEdge_max", "dvEdge_min", "dvEdge_max",
     "cellQuality_min", "cellQuality_mean", "triangleQuality_min", "triangleQuality_mean",
     "triangleAngleQuality_min", "triangleAngleQuality_mean", "obtuseTriangles"}.
    """
    inside = np.arange(mesh.maxEdges)[None, :] < mesh.nEdgesOnCell[:, None]
    dv = mesh.dvEdge[np.where(inside, mesh.edgesOnCell, 0)]
    cell_q = np.where(inside, dv, np.inf).min(axis=1) / np.where(inside, dv, 0.0).max(axis=1)
    dc = mesh.dcEdge[mesh.edgesOnVertex]
    tri_q = dc.min(axis=1) / dc.max(axis=1)
    out = {"nCells": mesh.nCells, "nEdges": mesh.nEdges, "nVertices": mesh.nVertices,
           "dcEdge_min": float(mesh.dcEdge.min()), "dcEdge_max": float(mesh.dcEdge.max()),
           "dvEdge_min": float(mesh.dvEdge.min()), "dvEdge_max": float(mesh.dvEdge.max()),
           "cellQuality_min": float(cell_q.min()), "cellQuality_mean": float(cell_q.mean()),
           "triangleQuality_min": float(tri_q.min()), "triangleQuality_mean": float(tri_q.mean())}
    if mesh.vertexDegree == 3:
        la, lb, lc = dc[:, 0], dc[:, 1], dc[:, 2]
        ang = np.stack([
            np.arccos(np.clip((lb * lb + lc * lc - la * la) / (2 * lb * lc), -1, 1)),
            np.arccos(np.clip((la * la + lc * lc - lb * lb) / (2 * la * lc), -1, 1)),
            np.arccos(np.clip((la * la + lb * lb - lc * lc) / (2 * la * lb), -1, 1))], axis=1)
        angle_q = ang.min(axis=1) / ang.max(axis=1)
        out.update(triangleAngleQuality_min=float(angle_q.min()),
                   triangleAngleQuality_mean=float(angle_q.mean()),
                   obtuseTriangles=int(np.count_nonzero(ang.max(axis=1) > np.pi / 2)))
    return out
