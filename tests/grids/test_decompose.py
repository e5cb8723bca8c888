"""Interior-first order of the owned entities of local meshes: boundary distances against a
breadth-first search on the global mesh, the order, the interior counts and what interior outputs
may read."""
import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from grids.decompose import (LOCATIONS, MAX_BOUNDARY_DISTANCE, DecompositionError, entity_owners,
                             local_mesh)
from grids.partition import cell_graph, partition_metis, partition_sfc

CAP = MAX_BOUNDARY_DISTANCE
CELLS_OF = {"edge": "cellsOnEdge", "vertex": "cellsOnVertex"}
PARTITIONS = [("metis", 2), ("metis", 3), ("metis", 4), ("sfc", 3)]


def _partition(mesh, method, nparts):
    return (partition_metis if method == "metis" else partition_sfc)(mesh, nparts)


def _cell_distance(mesh, cell_owner, rank):
    """(nCells,) steps from each cell to the nearest cell of another rank, capped (0 there)."""
    xadj, adjncy = cell_graph(mesh)
    graph = csr_matrix((np.ones(adjncy.size), adjncy, xadj), shape=(mesh.nCells,) * 2)
    foreign = np.flatnonzero(cell_owner != rank)
    if foreign.size == 0:
        return np.full(mesh.nCells, CAP)
    dist = dijkstra(graph, indices=foreign, min_only=True, unweighted=True)
    return np.minimum(dist, CAP).astype(int)


def _expected_distance(mesh, cell_dist, location, gids):
    if location == "cell":
        return cell_dist[gids]
    cells = getattr(mesh, CELLS_OF[location])[gids]
    return np.where(cells >= 0, cell_dist[np.maximum(cells, 0)], CAP).min(axis=1)


@pytest.mark.parametrize("method, nparts", PARTITIONS)
def test_owned_entities_are_ordered_interior_first(mesh, method, nparts):
    cell_owner = _partition(mesh, method, nparts)
    for rank in range(nparts):
        lm = local_mesh(mesh, cell_owner, rank, 2)
        cell_dist = _cell_distance(mesh, cell_owner, rank)
        for loc in LOCATIONS:
            gids = lm.l2g[loc][: lm.n_owned(loc)]
            L = lm.boundary_distance[loc].astype(int)
            assert np.array_equal(L, _expected_distance(mesh, cell_dist, loc, gids)), (rank, loc)
            assert L.min() >= (1 if loc == "cell" else 0)
            assert (np.diff(L) <= 0).all(), (rank, loc)                        # non-increasing
            ties = np.diff(L) == 0
            assert (np.diff(gids)[ties] > 0).all(), (rank, loc)                # then by global id
            for d in range(CAP - 1):
                n = lm.n_interior(loc, d)
                assert n == np.count_nonzero(L >= d + 2) == lm.interior_counts[loc][d]
                assert (L[:n] >= d + 2).all() and (L[n:] < d + 2).all(), (rank, loc, d)
            assert lm.n_interior(loc, CAP - 1) == 0
            assert (np.diff(lm.interior_counts[loc]) <= 0).all()


def _within(mesh, cells, steps):
    """Cells within `steps` cellsOnCell steps of `cells` (global indices)."""
    reached = np.unique(cells[cells >= 0])
    for _ in range(steps):
        coc = mesh.cellsOnCell[reached]
        used = np.arange(coc.shape[1])[None, :] < mesh.nEdgesOnCell[reached, None]
        reached = np.union1d(reached, coc[used & (coc >= 0)])
    return reached


@pytest.mark.parametrize("halo_depth", [0, 1, 2])
@pytest.mark.parametrize("method, nparts", PARTITIONS)
def test_interior_outputs_reach_owned_entities_only(mesh, method, nparts, halo_depth):
    """The cells within halo_depth steps of an interior output's cells, and their edges and
    vertices, are all owned by the rank."""
    cell_owner = _partition(mesh, method, nparts)
    owners = entity_owners(mesh, cell_owner)
    for rank in range(nparts):
        lm = local_mesh(mesh, cell_owner, rank, 2)
        for loc in LOCATIONS:
            interior = lm.l2g[loc][: lm.n_interior(loc, halo_depth)]
            cells = interior if loc == "cell" else getattr(mesh, CELLS_OF[loc])[interior].ravel()
            reached = _within(mesh, cells, halo_depth)
            assert (cell_owner[reached] == rank).all(), (rank, loc)
            used = np.arange(mesh.maxEdges)[None, :] < mesh.nEdgesOnCell[reached, None]
            for name, target in (("edgesOnCell", "edge"), ("verticesOnCell", "vertex")):
                touched = getattr(mesh, name)[reached][used]
                assert (owners[target][touched] == rank).all(), (rank, loc, name)


def test_one_rank_every_entity_is_interior(mesh):
    lm = local_mesh(mesh, np.zeros(mesh.nCells, int), 0, 2)
    for loc in LOCATIONS:
        assert (lm.boundary_distance[loc] == CAP).all()
        assert np.array_equal(lm.l2g[loc], np.arange(lm.n_local(loc)))
        assert all(lm.n_interior(loc, d) == lm.n_owned(loc) for d in range(CAP - 1))


def test_bad_interior_depth(mesh):
    lm = local_mesh(mesh, partition_sfc(mesh, 2), 0, 1)
    with pytest.raises(DecompositionError, match="halo_depth = -1"):
        lm.n_interior("cell", -1)
