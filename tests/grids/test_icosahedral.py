"""Generated icosahedral meshes: topology, MPAS orderings and signs, areas, locality, TRiSK, reordering."""
import numpy as np
import pytest

from grids.geometry import unit_vectors
from grids.icosahedral import generate_icosahedral, voronoi_mesh
from grids.mesh import FIELD_DIMS
from grids.reorder import MeshPermutation, permute_mesh, reorder_mesh

A = 6371229.0
_CACHE = {}


def mesh(level, lloyd=0, order="morton"):
    key = (level, lloyd, order)
    if key not in _CACHE:
        _CACHE[key] = generate_icosahedral(level, lloyd_iterations=lloyd, order=order)
    return _CACHE[key]


def det(p, q, r):
    return np.einsum("ij,ij->i", p, np.cross(q, r))


def check_invariants(m, well_centred=True):
    """Connectivity, geometry and sign conventions of a closed spherical Voronoi mesh. Kites are
    signed areas; they are all positive on a well-centred mesh (every Voronoi vertex inside the
    triangle of its three generators), and otherwise may be <= 0 only at vertices outside it."""
    nC, nE, nV = m.nCells, m.nEdges, m.nVertices
    assert nC - nE + nV == 2
    inside = np.arange(m.maxEdges)[None, :] < m.nEdgesOnCell[:, None]
    for name in ("edgesOnCell", "cellsOnCell", "verticesOnCell"):
        arr = getattr(m, name)
        assert np.all(arr[~inside] == -1) and np.all(arr[inside] >= 0), name
    # each edge in exactly two distinct cells, and each cell's edges know the cell
    assert np.all(np.bincount(m.edgesOnCell[inside], minlength=nE) == 2)
    assert np.all(m.cellsOnEdge[:, 0] != m.cellsOnEdge[:, 1])
    assert np.all(m.verticesOnEdge[:, 0] != m.verticesOnEdge[:, 1])
    c = np.broadcast_to(np.arange(nC)[:, None], inside.shape)[inside]
    e = m.edgesOnCell[inside]
    coe = m.cellsOnEdge[e]
    assert np.all((coe[:, 0] == c) | (coe[:, 1] == c))
    other = np.where(coe[:, 0] == c, coe[:, 1], coe[:, 0])
    np.testing.assert_array_equal(m.cellsOnCell[inside], other)
    # verticesOnCell[c, j] is shared by edgesOnCell[c, j] and edgesOnCell[c, j+1]
    nxt = m.edgesOnCell[np.arange(nC)[:, None], (np.arange(m.maxEdges)[None, :] + 1) % m.nEdgesOnCell[:, None]]
    v = m.verticesOnCell[inside]
    for edges in (e, nxt[inside]):
        voe = m.verticesOnEdge[edges]
        assert np.all((voe[:, 0] == v) | (voe[:, 1] == v))
    # vertices: edgesOnVertex[v, j], cellsOnVertex[v, j], edgesOnVertex[v, j+1] in MPAS order
    for shift in (0, 1):
        ce = m.cellsOnEdge[np.roll(m.edgesOnVertex, -shift, axis=1)]
        assert np.all((ce[..., 0] == m.cellsOnVertex) | (ce[..., 1] == m.cellsOnVertex))
    assert np.all(np.bincount(m.edgesOnVertex.ravel(), minlength=nE) == 2)
    # geometry and orientation
    pc = unit_vectors(m.xCell, m.yCell, m.zCell)
    pe = unit_vectors(m.xEdge, m.yEdge, m.zEdge)
    pv = unit_vectors(m.xVertex, m.yVertex, m.zVertex)
    area = 4 * np.pi * m.sphere_radius ** 2
    assert abs(m.areaCell.sum() / area - 1) < 1e-12
    assert abs(m.areaTriangle.sum() / area - 1) < 1e-12
    np.testing.assert_allclose(m.kiteAreasOnVertex.sum(axis=1), m.areaTriangle, rtol=1e-12)
    per_cell = np.bincount(m.cellsOnVertex.ravel(), weights=m.kiteAreasOnVertex.ravel(), minlength=nC)
    np.testing.assert_allclose(per_cell, m.areaCell, rtol=1e-12)
    assert m.areaCell.min() > 0
    pg = pc[m.cellsOnVertex]                                   # the generators around each vertex
    inside_triangle = np.all([det(pg[:, i], pg[:, (i + 1) % 3], pv) > 0 for i in range(3)], axis=0)
    assert inside_triangle.all() or not well_centred
    assert np.all(m.kiteAreasOnVertex[inside_triangle] > 0)
    # counter-clockwise edgesOnCell and verticesOnCell seen from outside
    cc = np.repeat(pc, m.maxEdges, axis=0).reshape(nC, m.maxEdges, 3)[inside]
    assert np.all(det(cc, pe[e], pe[nxt[inside]]) > 0)
    nxt_v = m.verticesOnCell[np.arange(nC)[:, None],
                             (np.arange(m.maxEdges)[None, :] + 1) % m.nEdgesOnCell[:, None]]
    assert np.all(det(cc, pv[v], pv[nxt_v[inside]]) > 0)
    # normal from cellsOnEdge[e,0] to [e,1]; tangent k x n from verticesOnEdge[e,0] to [e,1]
    n = pc[m.cellsOnEdge[:, 1]] - pc[m.cellsOnEdge[:, 0]]
    t = pv[m.verticesOnEdge[:, 1]] - pv[m.verticesOnEdge[:, 0]]
    assert np.all(det(pe, n, t) > 0)
    angle_n = np.stack([np.cos(m.angleEdge), np.sin(m.angleEdge)], axis=1)
    east = np.stack([-pe[:, 1], pe[:, 0], 0 * pe[:, 0]], 1)
    east /= np.linalg.norm(east, axis=1)[:, None]
    north = np.cross(pe, east)
    n_local = np.stack([np.einsum("ij,ij->i", n, east), np.einsum("ij,ij->i", n, north)], 1)
    n_local /= np.linalg.norm(n_local, axis=1)[:, None]
    polar = np.abs(pe[:, 2]) > 1 - 1e-12
    np.testing.assert_allclose(angle_n[~polar], n_local[~polar], atol=1e-12)
    # signs
    sign_c = np.where(m.cellsOnEdge[m.edgesOnCell[inside], 0] == c, 1.0, -1.0)
    np.testing.assert_array_equal(m.edgeSignOnCell[inside], sign_c)
    sign_v = np.where(m.verticesOnEdge[m.edgesOnVertex, 1] == np.arange(nV)[:, None], 1.0, -1.0)
    np.testing.assert_array_equal(m.edgeSignOnVertex, sign_v)
    np.testing.assert_allclose(m.fCell, 2 * 7.29212e-5 * pc[:, 2], atol=1e-18)


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4])
def test_invariants(level):
    m = mesh(level)
    assert m.nCells == 10 * 4 ** level + 2
    assert np.count_nonzero(m.nEdgesOnCell == 5) == 12
    check_invariants(m)


@pytest.mark.parametrize("level", [2, 3])
def test_invariants_after_lloyd(level):
    m0, m = mesh(level), mesh(level, lloyd=4)
    check_invariants(m)
    # Lloyd moves generators towards the centroids of their cells: the mean distance shrinks
    assert centroid_gap(m) < 0.5 * centroid_gap(m0)


def centroid_gap(g):
    """Mean distance between generators and the normalised mean of their Voronoi vertices."""
    pc = unit_vectors(g.xCell, g.yCell, g.zCell)
    pv = unit_vectors(g.xVertex, g.yVertex, g.zVertex)
    inside = np.arange(g.maxEdges)[None, :] < g.nEdgesOnCell[:, None]
    cen = np.where(inside[..., None], pv[np.maximum(g.verticesOnCell, 0)], 0).sum(1)
    cen /= np.linalg.norm(cen, axis=1)[:, None]
    return np.linalg.norm(cen - pc, axis=1).mean()


def locality(m):
    inside = np.arange(m.maxEdges)[None, :] < m.nEdgesOnCell[:, None]
    c = np.broadcast_to(np.arange(m.nCells)[:, None], inside.shape)[inside]
    return np.abs(m.cellsOnCell[inside] - c).mean()


@pytest.mark.parametrize("order", ["morton", "hilbert"])
def test_memory_locality(order):
    m = mesh(5, order=order)
    rng = np.random.default_rng()
    shuffled = permute_mesh(m, MeshPermutation(cells=rng.permutation(m.nCells),
                                               edges=np.arange(m.nEdges),
                                               vertices=np.arange(m.nVertices)))
    assert locality(m) < 0.05 * locality(shuffled)      # measured ~0.01 (morton), ~0.008 (hilbert)
    # edges follow their cells: an edge's index is near its cells' indices scaled by nEdges/nCells
    lag = np.abs(m.cellsOnEdge.min(axis=1) * (m.nEdges / m.nCells) - np.arange(m.nEdges))
    assert lag.mean() < 0.01 * m.nEdges


def solid_body(m, axis):
    """Normal and tangential components of u = axis x r at edges (|u| up to |axis| * a)."""
    pe = np.stack([m.xEdge, m.yEdge, m.zEdge], 1)
    u = np.cross(axis[None, :], pe)
    pc = unit_vectors(m.xCell, m.yCell, m.zCell)
    pv = unit_vectors(m.xVertex, m.yVertex, m.zVertex)
    n = pc[m.cellsOnEdge[:, 1]] - pc[m.cellsOnEdge[:, 0]]
    n /= np.linalg.norm(n, axis=1)[:, None]
    t = pv[m.verticesOnEdge[:, 1]] - pv[m.verticesOnEdge[:, 0]]
    t /= np.linalg.norm(t, axis=1)[:, None]
    return np.einsum("ij,ij->i", u, n), np.einsum("ij,ij->i", u, t)


def trisk_error(m, axis):
    """rms |sum_j weightsOnEdge * u_n[edgesOnEdge] - u_t| / max |u_t| for u = axis x r."""
    un, ut = solid_body(m, axis)
    live = np.arange(m.maxEdges2)[None, :] < m.nEdgesOnEdge[:, None]
    v = np.where(live, m.weightsOnEdge * un[np.maximum(m.edgesOnEdge, 0)], 0).sum(1)
    return np.sqrt(np.mean((v - ut) ** 2)) / np.abs(ut).max()


def test_trisk_tangential_converges():
    """TRiSK's tangential reconstruction converges in rms at half order in dcEdge on bisected
    icosahedral meshes (measured 4.3e-2, 3.1e-2, 2.2e-2, 1.6e-2 at levels 2-5: rates 0.44-0.50; the
    max error stalls at 0.12 near the icosahedron's edges, a known inconsistency of TRiSK on
    non-centroidal meshes) and is ~10x smaller after Lloyd iterations (2.9e-3 at level 3)."""
    rng = np.random.default_rng()
    axis = rng.normal(size=3)
    axis *= 1e-5 / np.linalg.norm(axis)
    errs, dc = [], []
    for level in (2, 3, 4, 5):
        m = mesh(level)
        errs.append(trisk_error(m, axis))
        dc.append(m.dcEdge.mean())
    rates = np.diff(np.log(errs)) / np.diff(np.log(dc))
    assert errs[-1] < 2e-2 and np.all(rates > 0.4), (errs, rates)
    assert trisk_error(mesh(3, lloyd=20), axis) < 0.2 * errs[1]


def test_curl_sign_solid_body():
    """edgeSignOnVertex circulates counter-clockwise: curl of Omega x r is 2 Omega . r / a."""
    rng = np.random.default_rng()
    axis = rng.normal(size=3)
    axis *= 1e-5 / np.linalg.norm(axis)
    m = mesh(4)
    un, _ = solid_body(m, axis)
    curl = (m.edgeSignOnVertex * m.dcEdge[m.edgesOnVertex] * un[m.edgesOnVertex]).sum(1) / m.areaTriangle
    exact = 2 * unit_vectors(m.xVertex, m.yVertex, m.zVertex) @ axis
    assert np.abs(curl - exact).max() < 1e-2 * np.abs(axis).max() * 2
    # divergence (outward edgeSignOnCell) of a solid-body rotation vanishes to truncation error
    inside = np.arange(m.maxEdges)[None, :] < m.nEdgesOnCell[:, None]
    e = np.maximum(m.edgesOnCell, 0)
    div = np.where(inside, m.edgeSignOnCell * m.dvEdge[e] * un[e], 0).sum(1) / m.areaCell
    assert np.abs(div).max() < 5e-3 * np.abs(curl).max()      # measured 1.2e-3 (pentagons)


def test_reorder_roundtrip_and_invariants():
    rng = np.random.default_rng()
    m = mesh(3, order="none")
    m.extra["indexToCellID"] = (("nCells",), np.arange(1, m.nCells + 1, dtype=np.int32))
    m.extra["someEdgeField"] = (("Time", "nEdges"), rng.random((2, m.nEdges)))
    perm = MeshPermutation(cells=rng.permutation(m.nCells), edges=rng.permutation(m.nEdges),
                           vertices=rng.permutation(m.nVertices))
    p = permute_mesh(m, perm)
    check_invariants(p)
    np.testing.assert_array_equal(p.extra["indexToCellID"][1], perm.cells + 1)
    np.testing.assert_array_equal(p.extra["someEdgeField"][1], m.extra["someEdgeField"][1][:, perm.edges])
    inv = MeshPermutation(cells=np.argsort(perm.cells), edges=np.argsort(perm.edges),
                          vertices=np.argsort(perm.vertices))
    back = permute_mesh(p, inv)
    for name in FIELD_DIMS:
        np.testing.assert_array_equal(getattr(back, name), getattr(m, name), err_msg=name)
    r, rp = reorder_mesh(p, "hilbert")
    check_invariants(r)
    assert locality(r) < 0.2 * locality(p)
    np.testing.assert_array_equal(r.xCell, p.xCell[rp.cells])


def test_bad_arguments():
    with pytest.raises(ValueError, match="level"):
        generate_icosahedral(-1)
    with pytest.raises(ValueError, match="order"):
        generate_icosahedral(1, order="zorder")
    m = mesh(1)
    bad = MeshPermutation(cells=np.zeros(m.nCells, dtype=int), edges=np.arange(m.nEdges),
                          vertices=np.arange(m.nVertices))
    with pytest.raises(ValueError, match="MeshPermutation.cells is not a permutation"):
        permute_mesh(m, bad)


def test_voronoi_mesh_of_jittered_generators():
    """The ConvexHull path (used when Lloyd moves break the Delaunay property) on generators moved by
    up to a fifth of the spacing: irregular, possibly 7-sided cells; every invariant still holds."""
    rng = np.random.default_rng()
    base = mesh(3, order="none")
    p = unit_vectors(base.xCell, base.yCell, base.zCell)
    p += 0.2 * base.dcEdge.min() / A * rng.uniform(-1, 1, size=p.shape)
    m = voronoi_mesh(p, order="hilbert")
    assert m.nCells == base.nCells
    check_invariants(m, well_centred=False)
    with pytest.raises(ValueError, match=r"generators\[1\]"):
        voronoi_mesh(np.concatenate([p[:1], np.zeros((1, 3)), p[2:]]))


def test_delaunay_check_detects_a_flipped_edge():
    """Lloyd keeps the bisected connectivity only while it stays Delaunay: the check must see a flip."""
    from grids import icosahedral as ic
    pts, tris = ic.icosahedron()
    eid, edges = ic.edge_ids(tris)
    for _ in range(3):
        pts, tris, eid, edges = ic.bisect(pts, tris, eid, edges)
    twin = ic.half_edge_twins(tris, eid, edges.shape[0])
    assert ic.is_delaunay(pts, tris, twin)
    h = 3 * np.random.default_rng().integers(tris.shape[0])
    o = twin[h]
    ta, tb = h // 3, o // 3
    a, b, c = tris[ta]
    d = tris[tb, (o % 3 + 2) % 3]
    flipped = tris.copy()
    flipped[ta], flipped[tb] = [c, d, b], [d, c, a]
    eid2, edges2 = ic.edge_ids(flipped)
    assert not ic.is_delaunay(pts, flipped, ic.half_edge_twins(flipped, eid2, edges2.shape[0]))


def test_lloyd_step_sums_each_fan_in_half_edge_order():
    """node_fans lists every half-edge once, under its source node, in increasing order; the
    blockwise Lloyd step equals the reference sum of every half-edge's fan moment into its node in
    that order (np.bincount) bitwise, on bisected nodes moved off their places at random."""
    from grids import icosahedral as ic
    from grids.geometry import triangle_area
    pts, tris = ic.icosahedron()
    eid, edges = ic.edge_ids(tris)
    for _ in range(4):
        pts, tris, eid, edges = ic.bisect(pts, tris, eid, edges)
    twin = ic.half_edge_twins(tris, eid, edges.shape[0])
    fans = ic.node_fans(tris, pts.shape[0])
    listed = fans[fans >= 0]
    assert np.array_equal(np.sort(listed), np.arange(tris.size))
    nodes, slots = np.nonzero(fans >= 0)
    assert np.array_equal(tris.ravel()[fans[nodes, slots]], nodes)
    assert np.all((fans[:, 1:] > fans[:, :-1]) | (fans[:, 1:] < 0))
    rng = np.random.default_rng()
    pts = pts + 0.05 * np.sqrt(4 * np.pi / pts.shape[0]) * rng.standard_normal(pts.shape)
    pts /= np.linalg.norm(pts, axis=1)[:, None]
    vc, src = ic.circumcentres(pts, tris), tris.ravel()
    c, p, q = pts[src], vc[twin // 3], vc[np.arange(src.size) // 3]
    moment = ((c + p + q) * triangle_area(c, p, q)[:, None]).T
    reference = np.stack([np.bincount(src, weights=m, minlength=pts.shape[0]) for m in moment], axis=1)
    reference /= np.sqrt(np.einsum("ij,ij->i", reference, reference))[:, None]
    assert np.array_equal(ic.lloyd_step(pts, tris, twin, fans), reference)
