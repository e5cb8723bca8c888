"""Per-rank local meshes: owned entities first, then halo layers in order of depth; exchange lists.

Ownership (given `cell_owner`, one rank per cell):
- a cell belongs to `cell_owner[c]`;
- an edge belongs to the owner of the adjacent cell with the smallest global index among
  cellsOnEdge[e, :] (missing cells skipped); a vertex to the owner of the cell with the smallest
  global index among cellsOnVertex[v, :]. So every owned edge and vertex touches an owned cell, and
  the rule does not depend on the edge's orientation.

Local numbering on rank r (cells, edges and vertices alike): owned entities first (nCellsSolve,
nEdgesSolve, nVerticesSolve), interior first (below), then halo layer 1, 2, ..., each halo layer in
ascending global index.
- Owned order: by descending boundary distance L, then ascending global index. For an owned cell,
  L = cellsOnCell steps to the nearest cell of another rank (1 next to one), capped at
  MAX_BOUNDARY_DISTANCE (every cell of a one-rank mesh has the cap); for an owned edge or vertex,
  L = min of L over its cells (cellsOnEdge, cellsOnVertex; a cell of another rank counts 0).
  `n_interior(location, d)` = the leading owned entities with L >= d + 2 (recorded for
  d <= MAX_BOUNDARY_DISTANCE - 2). Why: an owned output of an operator with halo depth d reads
  cells within d cellsOnCell steps of its own cells (itself, cellsOnEdge, cellsOnVertex) and the
  edges and vertices of those cells. With L >= d + 2 all of those cells have L >= 2, so they,
  their neighbours and hence their edges and vertices are owned: the output reads no halo row and
  can be computed while the halo exchange is in flight.
- Cell halo layer k: the cells across an edge (cellsOnCell) from layer k-1 not already present
  (layer 0 = owned), k = 1 .. halo_depth.
- Local edges and vertices: every edge and vertex of a local cell. A non-owned one is in halo layer
  max(1, smallest layer of its local adjacent cells) — the edges and vertices that layer-k cells
  touch are present for every k <= halo_depth.
- Connectivity keeps the global slot order (so stencils sum in the same order as on the global
  mesh); an entry pointing outside the local set becomes -1. Geometry is copied from the global mesh.
- Exchange lists, per location and neighbour rank p: `recv_index` (local halo entities owned by
  p) and `send_index` (local owned entities that p holds as halo), both in ascending global index,
  so the k-th entry sent by p lands on the k-th entry received from p.

Memory: `distribute_mesh` holds the global mesh on the root rank only. Root builds one rank's local
mesh at a time (global -> local lookup tables of the global sizes, made per rank, plus that
rank's local arrays), sends it and drops it, so root peaks at about the global mesh plus one local
mesh (boundary distances are found there too, from the owned cells' cellsOnCell rows). Every other
rank only ever holds its local mesh: O(N/P + halo) entities, the halo growing like
halo_depth * sqrt(N/P) on a quasi-uniform sphere mesh; its exchange lists are built by one
alltoall of halo global indices per location (O(halo) per rank). `decompose` is the variant where
every rank already holds the global mesh (small meshes, tests).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .mesh import FIELD_DIMS, INDEX_FIELDS, Mesh
from .mpas_io import ID_NAMES
from .partition import check_partition

LOCATIONS = ("cell", "edge", "vertex")
#: Cap of the boundary distance L (cellsOnCell steps to another rank's cell; module doc).
MAX_BOUNDARY_DISTANCE = 8
#: MPAS leading dimension of each location and the index field that points to it.
DIM_OF = {"cell": "nCells", "edge": "nEdges", "vertex": "nVertices"}
_LOC_OF_DIM = {v: k for k, v in DIM_OF.items()}
_TARGET = {"edgesOnCell": "edge", "cellsOnCell": "cell", "verticesOnCell": "vertex",
           "cellsOnEdge": "cell", "verticesOnEdge": "vertex", "edgesOnEdge": "edge",
           "cellsOnVertex": "cell", "edgesOnVertex": "edge"}


class DecompositionError(ValueError):
    """A decomposition request that cannot be met (bad halo depth, mismatched partition, ...)."""


@dataclass
class LocalMesh:
    """One rank's part of a global mesh.

    mesh: a `Mesh` with local indices (owned first, then halo layers; -1 outside the local set).
    l2g: {"cell"|"edge"|"vertex": (n_local,) int64 global index of each local entity}.
    owner: {location: (n_local,) int32 owning rank of each local entity}.
    layer_offsets: {location: (halo_depth + 2,) int64}; entities of layer k are local indices
        layer_offsets[k] .. layer_offsets[k+1] - 1 (layer 0 = owned).
    boundary_distance: {location: (n_owned,) int8 L of each owned entity} (non-increasing).
    interior_counts: {location: (MAX_BOUNDARY_DISTANCE - 1,) int64}; entry d is
        n_interior(location, d).
    """

    mesh: Mesh
    rank: int
    nranks: int
    halo_depth: int
    l2g: dict
    owner: dict
    layer_offsets: dict
    boundary_distance: dict
    interior_counts: dict = field(init=False, repr=False)

    def __post_init__(self):
        self.interior_counts = {loc: _interior_counts(L)
                                for loc, L in self.boundary_distance.items()}

    def n_owned(self, location: str) -> int:
        return int(self.layer_offsets[location][1])

    def n_local(self, location: str) -> int:
        return int(self.l2g[location].shape[0])

    def n_interior(self, location: str, halo_depth: int) -> int:
        """Leading owned entities at `location` whose outputs, for an operator needing
        `halo_depth` cell layers, read owned entities only (L >= halo_depth + 2; 0 beyond the
        recorded depths)."""
        if int(halo_depth) != halo_depth or halo_depth < 0:
            raise DecompositionError(f"halo_depth = {halo_depth!r}: expected an integer >= 0")
        counts = self.interior_counts[location]
        return int(counts[halo_depth]) if halo_depth < counts.size else 0


@dataclass
class ExchangeList:
    """Who sends what to whom for one location (local indices, ascending global index per peer).

    peers: neighbour ranks (ascending); send_index / recv_index: concatenated local indices with
    offsets send_offsets / recv_offsets (len(peers) + 1): entries send_offsets[i]:send_offsets[i+1]
    go to peers[i], recv_offsets[i]:recv_offsets[i+1] come from peers[i].
    """

    peers: np.ndarray
    send_index: np.ndarray
    send_offsets: np.ndarray
    recv_index: np.ndarray
    recv_offsets: np.ndarray

    def send_slice(self, i: int) -> slice:
        return slice(int(self.send_offsets[i]), int(self.send_offsets[i + 1]))

    def recv_slice(self, i: int) -> slice:
        return slice(int(self.recv_offsets[i]), int(self.recv_offsets[i + 1]))


@dataclass
class Decomposition:
    """A rank's local mesh with its exchange lists ({location: ExchangeList})."""

    local: LocalMesh
    exchange: dict = field(default_factory=dict)

    @property
    def mesh(self) -> Mesh:
        return self.local.mesh

    @property
    def rank(self) -> int:
        return self.local.rank

    @property
    def nranks(self) -> int:
        return self.local.nranks

    @property
    def halo_depth(self) -> int:
        return self.local.halo_depth

    def n_owned(self, location: str) -> int:
        return self.local.n_owned(location)

    def n_local(self, location: str) -> int:
        return self.local.n_local(location)

    def n_interior(self, location: str, halo_depth: int) -> int:
        return self.local.n_interior(location, halo_depth)


# -- ownership ------------------------------------------------------------------------------------

def _min_valid(idx: np.ndarray) -> np.ndarray:
    """Smallest non-negative entry of each row (rows with none give -1)."""
    big = np.iinfo(np.int64).max
    m = np.where(idx >= 0, idx.astype(np.int64), big).min(axis=1)
    return np.where(m == big, -1, m)


def entity_owners(mesh: Mesh, cell_owner: np.ndarray) -> dict:
    """{location: (n,) int32 owning rank} for cells, edges and vertices (rule in the module doc)."""
    cell_owner = np.asarray(cell_owner, dtype=np.int32)
    first_e = _min_valid(np.asarray(mesh.cellsOnEdge))
    first_v = _min_valid(np.asarray(mesh.cellsOnVertex))
    for name, first in (("cellsOnEdge", first_e), ("cellsOnVertex", first_v)):
        bad = np.flatnonzero(first < 0)
        if bad.size:
            raise DecompositionError(f"{name}[{bad[0]}] holds no cell; expected at least one cell "
                                     "per edge and vertex to decide its owner")
    return {"cell": cell_owner, "edge": cell_owner[first_e], "vertex": cell_owner[first_v]}


# -- local mesh -----------------------------------------------------------------------------------

def _used(idx: np.ndarray, count: np.ndarray | None) -> np.ndarray:
    valid = idx >= 0
    if count is not None:
        valid &= np.arange(idx.shape[1])[None, :] < np.asarray(count)[:, None]
    return valid


def _lookup(sorted_gids: np.ndarray, order: np.ndarray, gids: np.ndarray) -> np.ndarray:
    """Local index of each global index in `gids` (-1 where absent or gids < 0)."""
    if sorted_gids.size == 0:
        return np.full(gids.shape, -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_gids, gids), sorted_gids.size - 1)
    found = (gids >= 0) & (sorted_gids[pos] == gids)
    return np.where(found, order[pos], -1)


class _Index:
    """Global -> local lookup of one location's local entities.

    With `n_global` (on the rank holding the global mesh) a dense table of that size; without it a
    sorted search over the local entities only (O(local) memory).
    """

    def __init__(self, l2g: np.ndarray, n_global: int | None = None):
        self.table = None
        if n_global is not None:
            self.table = np.full(n_global + 1, -1, dtype=np.int64)   # last slot serves index -1
            self.table[l2g] = np.arange(l2g.size)
            return
        self.order = np.argsort(l2g, kind="stable")
        self.sorted = l2g[self.order]

    def __call__(self, gids) -> np.ndarray:
        gids = np.asarray(gids, dtype=np.int64)
        if self.table is not None:
            return self.table[np.where(gids >= 0, gids, -1)]
        return _lookup(self.sorted, self.order, gids.ravel()).reshape(gids.shape)


def _cell_layers(mesh: Mesh, owned: np.ndarray, depth: int) -> list[np.ndarray]:
    layers, present = [owned], owned
    for _ in range(depth):
        rows = mesh.cellsOnCell[layers[-1]]
        nbrs = np.unique(rows[_used(rows, mesh.nEdgesOnCell[layers[-1]])])
        new = np.setdiff1d(nbrs, present, assume_unique=True)
        layers.append(new)
        present = np.union1d(present, new)
    return layers


def _touched_layers(conn_rows, cell_layer_of_local, cell_index, owner_rows, rank):
    """Layer of each touched edge/vertex: 0 if owned by `rank`, else max(1, min adjacent layer)."""
    local_cells = cell_index(conn_rows)
    big = np.iinfo(np.int64).max
    lay = np.where(local_cells >= 0, cell_layer_of_local[np.maximum(local_cells, 0)], big).min(axis=1)
    return np.where(owner_rows == rank, 0, np.maximum(lay, 1))


def _boundary_distance(mesh: Mesh, owned: np.ndarray) -> np.ndarray:
    """L of each owned cell (global indices `owned`): cellsOnCell steps to the nearest cell not in
    `owned`, capped at MAX_BOUNDARY_DISTANCE (a missing neighbour is no cell)."""
    coc = mesh.cellsOnCell[owned]
    used = _used(coc, mesh.nEdgesOnCell[owned])
    pos = _Index(owned, mesh.nCells)(np.where(used, coc, -1))     # -1: not owned
    L = np.where((used & (pos < 0)).any(axis=1), 1, 0)
    for k in range(2, MAX_BOUNDARY_DISTANCE):
        front = np.append(L == k - 1, False)                    # slot -1 (not owned): no front
        reached = (L == 0) & front[pos].any(axis=1)
        if not reached.any():
            break
        L[reached] = k
    return np.where(L == 0, MAX_BOUNDARY_DISTANCE, L).astype(np.int8)


def _touching_distance(cell_rows: np.ndarray, cell_index, cell_L: np.ndarray) -> np.ndarray:
    """L of edges or vertices with cells `cell_rows` (global, -1 pads): min over their cells, a cell
    that is not owned counting 0. `cell_L`: L of the owned cells in local order."""
    local = cell_index(cell_rows)
    owned = np.where((local >= 0) & (local < cell_L.size), local, -1)
    L = np.where(cell_rows >= 0, np.append(cell_L, 0)[owned], MAX_BOUNDARY_DISTANCE)   # slot -1: 0
    return L.min(axis=1).astype(np.int8)


def _interior_counts(L: np.ndarray) -> np.ndarray:
    """Entry d: owned entities with L >= d + 2, d = 0 .. MAX_BOUNDARY_DISTANCE - 2."""
    at_least = np.arange(2, MAX_BOUNDARY_DISTANCE + 1)
    return (np.asarray(L)[None, :] >= at_least[:, None]).sum(axis=1).astype(np.int64)


def _order_by_layer(gids: np.ndarray, layer: np.ndarray, L: np.ndarray, depth: int):
    """Local order: by layer; owned (layer 0) by descending L, halo layers by global index.

    Returns (gids, layer, L of the owned entities, layer offsets) in that order."""
    order = np.lexsort((gids, -np.where(layer == 0, L, 0), layer))
    counts = np.bincount(layer, minlength=depth + 1)[: depth + 1]
    offsets = np.zeros(depth + 2, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return gids[order], layer[order], L[order][: offsets[1]].astype(np.int8), offsets


def _local_cells(mesh: Mesh, owned: np.ndarray, owned_L: np.ndarray, depth: int):
    """Local cells in local order (`owned`: ascending global indices, `owned_L` their L)."""
    layers = _cell_layers(mesh, owned, depth)
    gids = np.concatenate(layers).astype(np.int64)
    layer = np.concatenate([np.full(l.size, k, np.int64) for k, l in enumerate(layers)])
    L = np.concatenate([owned_L, np.zeros(gids.size - owned.size, np.int8)])
    return _order_by_layer(gids, layer, L, depth)


def _local_touched(gids, cells_of, cell_layer, cells, cell_L, owner_rows, rank, depth):
    """Local edges or vertices `gids` in local order (cells_of: their cellsOnEdge or cellsOnVertex
    rows)."""
    layer = _touched_layers(cells_of, cell_layer, cells, owner_rows, rank)
    L = np.where(layer == 0, _touching_distance(cells_of, cells, cell_L), 0)
    return _order_by_layer(gids, layer, L, depth)


_GLOBAL_ID = {loc: (dim, ID_NAMES[dim]) for loc, dim in DIM_OF.items()}


def _global_ids(mesh: Mesh, l2g: dict) -> dict:
    """indexToCellID / indexToEdgeID / indexToVertexID of a local mesh, as MPAS gives a block: the
    whole mesh's ids of the local entities (index + 1 where the whole mesh has none)."""
    extra = {}
    for loc, (dim, name) in _GLOBAL_ID.items():
        held = mesh.extra.get(name)
        ids = l2g[loc] + 1 if held is None else np.asarray(held[1])[l2g[loc]]
        extra[name] = ((dim,), ids.astype(np.int64 if ids.max(initial=0) > 2**31 - 1 else np.int32))
    return extra


def local_mesh(mesh: Mesh, cell_owner, rank: int, halo_depth: int = 2, *,
               owners: dict | None = None) -> LocalMesh:
    """Rank `rank`'s local mesh with `halo_depth` cell layers of halo (owned first, interior first
    among them, then layers; see the module doc).

    `owners` may pass `entity_owners(mesh, cell_owner)` when building many ranks.
    """
    if int(halo_depth) != halo_depth or halo_depth < 0:
        raise DecompositionError(f"halo_depth = {halo_depth!r}: expected an integer >= 0 (cell layers)")
    nranks = int(np.max(cell_owner)) + 1
    cell_owner = check_partition(cell_owner, mesh.nCells, nranks, source="cell_owner")
    if not 0 <= rank < nranks:
        raise DecompositionError(f"rank = {rank}: expected 0 <= rank < {nranks} (ranks in the partition)")
    owners = entity_owners(mesh, cell_owner) if owners is None else owners

    owned = np.flatnonzero(cell_owner == rank)
    cell_gids, cell_layer, cell_L, cell_offsets = _local_cells(
        mesh, owned, _boundary_distance(mesh, owned), halo_depth)
    cells = _Index(cell_gids, mesh.nCells)

    eoc, voc = mesh.edgesOnCell[cell_gids], mesh.verticesOnCell[cell_gids]
    used = _used(eoc, mesh.nEdgesOnCell[cell_gids])
    edge_gids = np.unique(eoc[used]).astype(np.int64)
    vertex_gids = np.unique(voc[_used(voc, mesh.nEdgesOnCell[cell_gids])]).astype(np.int64)
    edge_gids, _, edge_L, edge_offsets = _local_touched(
        edge_gids, mesh.cellsOnEdge[edge_gids], cell_layer, cells, cell_L,
        owners["edge"][edge_gids], rank, halo_depth)
    vertex_gids, _, vertex_L, vertex_offsets = _local_touched(
        vertex_gids, mesh.cellsOnVertex[vertex_gids], cell_layer, cells, cell_L,
        owners["vertex"][vertex_gids], rank, halo_depth)

    l2g = {"cell": cell_gids, "edge": edge_gids, "vertex": vertex_gids}
    index = {"cell": cells, "edge": _Index(edge_gids, mesh.nEdges),
             "vertex": _Index(vertex_gids, mesh.nVertices)}
    fields = {}
    for name, dims in FIELD_DIMS.items():
        rows = getattr(mesh, name)[l2g[_LOC_OF_DIM[dims[0]]]]
        if name in INDEX_FIELDS:
            rows = index[_TARGET[name]](rows).astype(getattr(mesh, name).dtype)
        fields[name] = rows
    local = Mesh(sphere_radius=mesh.sphere_radius, **fields,
                 nCellsSolve=int(cell_offsets[1]), nEdgesSolve=int(edge_offsets[1]),
                 nVerticesSolve=int(vertex_offsets[1]), attributes=dict(mesh.attributes),
                 extra=_global_ids(mesh, l2g))
    owner = {loc: owners[loc][l2g[loc]].astype(np.int32) for loc in LOCATIONS}
    offsets = {"cell": cell_offsets, "edge": edge_offsets, "vertex": vertex_offsets}
    distance = {"cell": cell_L, "edge": edge_L, "vertex": vertex_L}
    return LocalMesh(local, int(rank), nranks, int(halo_depth), l2g, owner, offsets, distance)


# -- exchange lists -------------------------------------------------------------------------------

def exchange_lists(local: LocalMesh, comm) -> dict:
    """{location: ExchangeList} of this rank (collective over `comm`, one alltoall per location)."""
    size = comm.Get_size()
    if size != local.nranks:
        raise DecompositionError(f"communicator has {size} ranks, the partition {local.nranks}; "
                                 "expected one rank per part")
    result = {}
    for loc in LOCATIONS:
        n_owned = local.n_owned(loc)
        halo = np.arange(n_owned, local.n_local(loc))
        halo_owner = local.owner[loc][halo]
        # halo entities sorted by (owner, global index): per-peer blocks in ascending global index
        order = np.lexsort((local.l2g[loc][halo], halo_owner))
        recv_index, recv_owner = halo[order], halo_owner[order]
        recv_counts = np.bincount(recv_owner, minlength=size)
        wanted = np.split(local.l2g[loc][recv_index], np.cumsum(recv_counts)[:-1])
        asked = comm.alltoall(wanted)          # asked[p]: global ids that rank p wants from me
        owned_index = _Index(local.l2g[loc][:n_owned])
        send_parts = []
        for p, gids in enumerate(asked):
            idx = owned_index(np.asarray(gids, dtype=np.int64))
            if idx.size and idx.min() < 0:
                bad = int(np.flatnonzero(idx < 0)[0])
                raise DecompositionError(f"rank {local.rank}: rank {p} asks for {loc} {gids[bad]}, "
                                         "which this rank does not own")
            send_parts.append(idx)
        send_counts = np.array([s.size for s in send_parts], dtype=np.int64)
        peers = np.flatnonzero((send_counts > 0) | (recv_counts > 0))
        send_offsets = np.concatenate([[0], np.cumsum(send_counts[peers])]).astype(np.int64)
        recv_offsets = np.concatenate([[0], np.cumsum(recv_counts[peers])]).astype(np.int64)
        send_index = (np.concatenate([send_parts[p] for p in peers]) if peers.size
                      else np.zeros(0, np.int64)).astype(np.int64)
        result[loc] = ExchangeList(peers.astype(np.int64), send_index, send_offsets,
                                   recv_index.astype(np.int64), recv_offsets)
    return result


# -- drivers --------------------------------------------------------------------------------------

def decompose(mesh: Mesh, cell_owner, comm, halo_depth: int = 2) -> Decomposition:
    """Every rank holds the global mesh and the partition: build this rank's Decomposition."""
    local = local_mesh(mesh, cell_owner, comm.Get_rank(), halo_depth)
    return Decomposition(local, exchange_lists(local, comm))


_TAG_MESH = 7301
_MAPS = ("l2g", "owner", "layer_offsets", "boundary_distance")


def _send_local(comm, local: LocalMesh, dest: int) -> None:
    arrays = {f"mesh.{name}": getattr(local.mesh, name) for name in FIELD_DIMS}
    arrays.update({f"extra.{name}": local.mesh.extra[name][1] for _, name in _GLOBAL_ID.values()})
    for kind in _MAPS:
        arrays.update({f"{kind}.{loc}": getattr(local, kind)[loc] for loc in LOCATIONS})
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    header = dict(rank=local.rank, nranks=local.nranks, halo_depth=local.halo_depth,
                  sphere_radius=local.mesh.sphere_radius, attributes=local.mesh.attributes,
                  solve=(local.mesh.nCellsSolve, local.mesh.nEdgesSolve, local.mesh.nVerticesSolve),
                  arrays=[(k, v.shape, v.dtype.str) for k, v in arrays.items()])
    comm.send(header, dest=dest, tag=_TAG_MESH)
    for v in arrays.values():
        comm.Send(v.reshape(-1).view(np.uint8), dest=dest, tag=_TAG_MESH)


def _recv_local(comm, source: int) -> LocalMesh:
    header = comm.recv(source=source, tag=_TAG_MESH)
    arrays = {}
    for name, shape, dtype in header["arrays"]:
        a = np.empty(shape, dtype=np.dtype(dtype))
        comm.Recv(a.reshape(-1).view(np.uint8), source=source, tag=_TAG_MESH)
        arrays[name] = a
    nc, ne, nv = header["solve"]
    mesh = Mesh(sphere_radius=header["sphere_radius"],
                **{name: arrays[f"mesh.{name}"] for name in FIELD_DIMS},
                nCellsSolve=nc, nEdgesSolve=ne, nVerticesSolve=nv, attributes=header["attributes"],
                extra={name: ((dim,), arrays[f"extra.{name}"]) for dim, name in _GLOBAL_ID.values()})
    maps = {kind: {loc: arrays[f"{kind}.{loc}"] for loc in LOCATIONS} for kind in _MAPS}
    return LocalMesh(mesh, header["rank"], header["nranks"], header["halo_depth"],
                     *(maps[kind] for kind in _MAPS))


def distribute_mesh(comm, mesh: Mesh | None = None, cell_owner=None, *, halo_depth: int = 2,
                    root: int = 0, method: str = "auto", weights=None) -> Decomposition:
    """Build every rank's Decomposition from a global mesh held on `root` only (collective).

    On `root`: `mesh` is the global mesh; `cell_owner` the partition (computed with
    `partition_cells(mesh, comm.size, method=method, weights=weights)` when None). Other ranks pass
    nothing. Root builds and sends one local mesh at a time; see the module doc for memory.
    """
    from .partition import partition_cells

    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == root:
        if mesh is None:
            raise DecompositionError(f"distribute_mesh: rank {root} (root) needs the global mesh")
        if cell_owner is None:
            cell_owner = partition_cells(mesh, size, method=method, weights=weights)
        cell_owner = check_partition(cell_owner, mesh.nCells, size, source="cell_owner")
        owners = entity_owners(mesh, cell_owner)
        mine = None
        for r in range(size):
            local = local_mesh(mesh, cell_owner, r, halo_depth, owners=owners)
            if r == root:
                mine = local
            else:
                _send_local(comm, local, r)
            del local
    else:
        mine = _recv_local(comm, root)
    return Decomposition(mine, exchange_lists(mine, comm))
