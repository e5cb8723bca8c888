"""Partitions (METIS, Hilbert SFC, MPAS graph.info files) and per-rank local meshes."""
import numpy as np
import pytest

from grids.decompose import (DecompositionError, decompose, entity_owners, local_mesh)
from grids.mesh import FIELD_DIMS, INDEX_FIELDS
from grids.partition import (PartitionError, cell_graph, partition_cells, partition_metis,
                             partition_quality, partition_sfc, read_graph_info,
                             read_partition, write_graph_info, write_partition)
from grids.reorder import hilbert_keys

LOC_OF_DIM = {"nCells": "cell", "nEdges": "edge", "nVertices": "vertex"}
TARGET = {"edgesOnCell": "edge", "cellsOnCell": "cell", "verticesOnCell": "vertex",
          "cellsOnEdge": "cell", "verticesOnEdge": "vertex", "edgesOnEdge": "edge",
          "cellsOnVertex": "cell", "edgesOnVertex": "edge"}
COUNT = {"edgesOnCell": "nEdgesOnCell", "cellsOnCell": "nEdgesOnCell",
         "verticesOnCell": "nEdgesOnCell", "edgesOnEdge": "nEdgesOnEdge"}


# -- partitions -----------------------------------------------------------------------------------

@pytest.mark.parametrize("nparts", [2, 3, 4])
def test_metis_partition_is_balanced_and_cuts_few_edges(mesh, nparts):
    owner = partition_metis(mesh, nparts)
    q = partition_quality(mesh, owner)
    assert q.imbalance <= 1.05, q
    assert np.bincount(owner).min() > 0
    # a compact partition cuts about sqrt(nCells / nparts) edges per part, far fewer than random
    rng = np.random.default_rng(0)
    random = partition_quality(mesh, rng.permutation(np.arange(mesh.nCells) % nparts))
    assert q.edge_cut < 0.5 * random.edge_cut, (q, random)


def test_metis_weights_balance_the_level_count(mesh, rng):
    levels = rng.integers(1, 80, mesh.nCells)
    owner = partition_metis(mesh, 4, weights=levels)
    assert partition_quality(mesh, owner, weights=levels).imbalance <= 1.08
    with pytest.raises(PartitionError, match=r"weights\[\d+\] = 0"):
        partition_metis(mesh, 4, weights=np.where(np.arange(mesh.nCells) == 5, 0, levels))
    with pytest.raises(PartitionError, match="one weight per cell"):
        partition_metis(mesh, 4, weights=levels[:-1])


@pytest.mark.parametrize("nparts", [2, 3, 4])
def test_sfc_partition_splits_weight_evenly(mesh, rng, nparts):
    owner = partition_sfc(mesh, nparts)
    counts = np.bincount(owner, minlength=nparts)
    assert counts.max() - counts.min() <= 1, counts
    levels = rng.integers(1, 50, mesh.nCells)
    owner = partition_sfc(mesh, nparts, weights=levels)
    weight = np.bincount(owner, weights=levels, minlength=nparts)
    assert weight.max() - weight.min() <= 2 * levels.max(), weight
    assert partition_cells(mesh, nparts, method="sfc").tolist() == partition_sfc(mesh, nparts).tolist()


def test_hilbert_order_visits_grid_points_by_unit_steps(rng):
    """On a 2^b grid every consecutive pair along a Hilbert curve differs by one unit step."""
    side = 8
    axes = np.meshgrid(*[np.arange(side)] * 3, indexing="ij")
    pts = np.stack([a.ravel() for a in axes], axis=1)[rng.permutation(side**3)]
    keys = hilbert_keys(pts / (side - 1) * 2.0 - 1.0, bits=3)
    assert np.unique(keys).size == side**3
    walk = pts[np.argsort(keys)]
    assert (np.abs(np.diff(walk, axis=0)).sum(axis=1) == 1).all()


def test_bad_partition_arguments(mesh):
    with pytest.raises(PartitionError, match="nparts = 0"):
        partition_sfc(mesh, 0)
    with pytest.raises(PartitionError, match="method 'chaco'"):
        partition_cells(mesh, 2, method="chaco")


# -- MPAS files -----------------------------------------------------------------------------------

@pytest.mark.parametrize("weighted", [False, True])
def test_graph_info_round_trip(mesh, tmp_path, rng, weighted):
    levels = rng.integers(1, 60, mesh.nCells) if weighted else None
    path = tmp_path / "graph.info"
    write_graph_info(mesh, path, weights=levels)
    xadj, adjncy, weights = read_graph_info(path)
    ref_x, ref_a = cell_graph(mesh)
    assert np.array_equal(xadj, ref_x) and np.array_equal(adjncy, ref_a)
    assert (weights is None) if levels is None else np.array_equal(weights, levels)
    first = path.read_text().splitlines()[1].split()
    coc = mesh.cellsOnCell[0, : mesh.nEdgesOnCell[0]] + 1      # 1-based neighbours on disk
    assert [int(v) for v in first[1 if weighted else 0:]] == coc.tolist()


def test_partition_file_round_trip_and_use(mesh, tmp_path):
    owner = partition_metis(mesh, 3)
    path = tmp_path / "graph.info.part.3"
    write_partition(path, owner)
    assert np.array_equal(read_partition(path, mesh.nCells), owner)
    assert path.read_text().splitlines()[:5] == [str(r) for r in owner[:5]]
    local = local_mesh(mesh, read_partition(path, mesh.nCells), 2, 1)
    assert np.array_equal(np.sort(local.l2g["cell"][: local.mesh.nCellsSolve]),
                          np.flatnonzero(owner == 2))


def _write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_bad_partition_files_name_file_line_and_value(mesh, tmp_path):
    good = [str(r) for r in partition_sfc(mesh, 4)]
    path = _write(tmp_path, "g.part.4", good[:-3])
    with pytest.raises(PartitionError, match=rf"g\.part\.4: {mesh.nCells - 3} lines, expected .*"
                                             rf"nCells={mesh.nCells}"):
        read_partition(path, mesh.nCells)
    bad = list(good)
    bad[17] = "4"
    with pytest.raises(PartitionError, match=r"g\.part\.4: line 18: rank id 4 out of range, expected 0\.\.3"):
        read_partition(_write(tmp_path, "g.part.4", bad), mesh.nCells)
    bad[17] = "-1"
    with pytest.raises(PartitionError, match=r"line 18: rank id -1 out of range"):
        read_partition(_write(tmp_path, "g.part.4", bad), mesh.nCells)
    bad[17] = "two"
    with pytest.raises(PartitionError, match=r"line 18 = 'two', expected an integer"):
        read_partition(_write(tmp_path, "g.part.4", bad), mesh.nCells)
    no_three = [("2" if r == "3" else r) for r in good]
    with pytest.raises(PartitionError, match=r"g\.part\.4: rank 3 owns no cell"):
        read_partition(_write(tmp_path, "g.part.4", no_three), mesh.nCells)
    with pytest.raises(PartitionError, match="cannot tell the rank count"):
        read_partition(_write(tmp_path, "partition.txt", good), mesh.nCells)


def test_bad_graph_info_files(mesh, tmp_path):
    path = tmp_path / "graph.info"
    write_graph_info(mesh, path)
    lines = path.read_text().splitlines()
    with pytest.raises(PartitionError, match=rf"{len(lines) - 2} adjacency lines, expected nCells"):
        read_graph_info(_write(tmp_path, "graph.info", lines[:-1]))
    bad = list(lines)
    bad[3] = bad[3] + f" {mesh.nCells + 5}"
    with pytest.raises(PartitionError, match=rf"line 4: neighbour {mesh.nCells + 5}, expected 1\.\."):
        read_graph_info(_write(tmp_path, "graph.info", bad))


# -- local meshes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("halo_depth", [1, 2, 3])
@pytest.mark.parametrize("nparts", [3, 4])
def test_local_meshes(mesh, nparts, halo_depth):
    owner = partition_metis(mesh, nparts)
    owners = entity_owners(mesh, owner)
    g = mesh
    totals = {"cell": 0, "edge": 0, "vertex": 0}
    for rank in range(nparts):
        lm = local_mesh(mesh, owner, rank, halo_depth)
        m, l2g = lm.mesh, lm.l2g
        for loc in totals:
            off = lm.layer_offsets[loc]
            totals[loc] += off[1]
            assert off[-1] == l2g[loc].size and np.unique(l2g[loc]).size == l2g[loc].size
            assert (lm.owner[loc][: off[1]] == rank).all() and (lm.owner[loc][off[1]:] != rank).all()
            assert np.array_equal(lm.owner[loc], owners[loc][l2g[loc]])
            owned = np.lexsort((l2g[loc][: off[1]], -lm.boundary_distance[loc].astype(int)))
            assert np.array_equal(owned, np.arange(off[1]))     # owned: interior first, then gid
            for k in range(1, halo_depth + 1):  # ascending global index inside each halo layer
                assert (np.diff(l2g[loc][off[k]: off[k + 1]]) > 0).all()
        assert (m.nCellsSolve, m.nEdgesSolve, m.nVerticesSolve) == tuple(
            int(lm.layer_offsets[loc][1]) for loc in ("cell", "edge", "vertex"))
        assert np.array_equal(np.sort(l2g["cell"][: m.nCellsSolve]), np.flatnonzero(owner == rank))
        # every field: rows copied, indices mapped to local or -1 exactly when outside the local set
        for name, dims in FIELD_DIMS.items():
            rows = l2g[LOC_OF_DIM[dims[0]]]
            ref = getattr(g, name)[rows]
            got = getattr(m, name)
            if name not in INDEX_FIELDS:
                assert np.array_equal(got, ref), name
                continue
            target = l2g[TARGET[name]]
            inside = np.isin(ref, target) & (ref >= 0)
            assert np.array_equal(got < 0, ~inside), name
            assert np.array_equal(target[got[inside]], ref[inside]), name
        # cell layers: layer k = neighbours of layer k-1 not in earlier layers
        off = lm.layer_offsets["cell"]
        layer = np.repeat(np.arange(halo_depth + 1), np.diff(off))
        inner = np.arange(off[halo_depth])           # cells below the outermost layer
        used = np.arange(m.maxEdges)[None, :] < m.nEdgesOnCell[inner, None]
        for name in ("cellsOnCell", "edgesOnCell", "verticesOnCell"):
            assert (getattr(m, name)[inner][used] >= 0).all(), name
        nbr_layer = np.where(used, layer[np.maximum(m.cellsOnCell[inner], 0)], 99)
        assert (np.abs(nbr_layer - layer[inner, None])[used] <= 1).all()
        outer = np.arange(off[1], off[-1])
        coc = m.cellsOnCell[outer]
        prev = np.where(coc >= 0, layer[np.maximum(coc, 0)], 99).min(axis=1)
        assert np.array_equal(prev, layer[outer] - 1)
        # every edge and vertex of a local cell is local
        all_used = np.arange(m.maxEdges)[None, :] < m.nEdgesOnCell[:, None]
        assert (m.edgesOnCell[all_used] >= 0).all() and (m.verticesOnCell[all_used] >= 0).all()
    assert totals == {"cell": g.nCells, "edge": g.nEdges, "vertex": g.nVertices}


def test_edge_and_vertex_owner_is_owner_of_smallest_adjacent_cell(mesh):
    owner = partition_sfc(mesh, 3)
    owners = entity_owners(mesh, owner)
    assert np.array_equal(owners["edge"], owner[mesh.cellsOnEdge.min(axis=1)])
    assert np.array_equal(owners["vertex"], owner[mesh.cellsOnVertex.min(axis=1)])


def test_one_rank_decomposition_is_the_global_mesh(mesh):
    from meshops.parallel.comm import SerialComm

    d = decompose(mesh, np.zeros(mesh.nCells, int), SerialComm(), halo_depth=2)
    for name in FIELD_DIMS:
        assert np.array_equal(getattr(d.mesh, name), getattr(mesh, name)), name
    assert all(ex.peers.size == 0 for ex in d.exchange.values())


def test_bad_decomposition_requests(mesh):
    owner = partition_sfc(mesh, 2)
    with pytest.raises(DecompositionError, match="halo_depth = -1"):
        local_mesh(mesh, owner, 0, -1)
    with pytest.raises(DecompositionError, match="rank = 2: expected 0 <= rank < 2"):
        local_mesh(mesh, owner, 2, 1)
    with pytest.raises(PartitionError, match="expected one rank id per cell"):
        local_mesh(mesh, owner[:-1], 0, 1)
