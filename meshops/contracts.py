"""What meshops reads from a mesh and from a domain decomposition, as `typing.Protocol`s.

meshops imports nothing from `grids`: any object with these attributes works (`grids.mesh.Mesh`
and `grids.decompose.Decomposition` are the ones the project builds). Arrays are NumPy, 0-based
with -1 for a missing neighbour or a pad (MPAS files are 1-based: convert on reading); lengths in
metres, areas in square metres, on a sphere. `meshops.device.tables` lists which tables are built
from which fields; a field is read only when an operator needs a table built from it.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class MeshLike(Protocol):
    """An MPAS mesh in memory (MPAS names and conventions)."""

    # sizes
    nCells: int                      # cells (Voronoi polygons), owned first on a rank
    nEdges: int                      # edges
    nVertices: int                   # vertices (dual triangles)
    maxEdges: int                    # columns of edgesOnCell / verticesOnCell
    maxEdges2: int                   # columns of edgesOnEdge / weightsOnEdge
    vertexDegree: int                # columns of cellsOnVertex / edgesOnVertex (3)
    # connectivity (integer, -1: missing)
    nEdgesOnCell: np.ndarray         # (nCells,) edges of each cell
    edgesOnCell: np.ndarray          # (nCells, maxEdges) edges of a cell, counter-clockwise
    verticesOnCell: np.ndarray       # (nCells, maxEdges) vertices of a cell, counter-clockwise
    cellsOnEdge: np.ndarray          # (nEdges, 2) the normal points from column 0 to column 1
    verticesOnEdge: np.ndarray       # (nEdges, 2) the tangent k x n points from column 0 to 1
    nEdgesOnEdge: np.ndarray         # (nEdges,) TRiSK neighbours of each edge
    edgesOnEdge: np.ndarray          # (nEdges, maxEdges2) TRiSK neighbours (MPAS order)
    cellsOnVertex: np.ndarray        # (nVertices, vertexDegree) cells around a vertex
    edgesOnVertex: np.ndarray        # (nVertices, vertexDegree) edges around a vertex
    # signs and weights (float)
    edgeSignOnCell: np.ndarray       # (nCells, maxEdges) +1 where the edge normal points out of the cell
    edgeSignOnVertex: np.ndarray     # (nVertices, vertexDegree) +1 where the normal circulates ccw
    weightsOnEdge: np.ndarray        # (nEdges, maxEdges2) TRiSK weights (energy-neutral)
    kiteAreasOnVertex: np.ndarray    # (nVertices, vertexDegree) area of triangle v inside cell c_i
    # geometry (float)
    dcEdge: np.ndarray               # (nEdges,) distance between the two cell centres, m
    dvEdge: np.ndarray               # (nEdges,) length of the Voronoi edge, m
    areaCell: np.ndarray             # (nCells,) m^2
    areaTriangle: np.ndarray         # (nVertices,) m^2
    xCell: np.ndarray                # (nCells,) Cartesian position, m (also yCell, zCell)
    yCell: np.ndarray
    zCell: np.ndarray
    xEdge: np.ndarray                # (nEdges,) edge point, m (also yEdge, zEdge)
    yEdge: np.ndarray
    zEdge: np.ndarray
    xVertex: np.ndarray              # (nVertices,) m (also yVertex, zVertex)
    yVertex: np.ndarray
    zVertex: np.ndarray
    latCell: np.ndarray              # (nCells,) radians (zonal/meridional reconstruction)
    lonCell: np.ndarray              # (nCells,) radians


@runtime_checkable
class ExchangeListLike(Protocol):
    """One location's halo routes on one rank: rows to send to and receive from each peer."""

    peers: np.ndarray                # (npeers,) neighbour ranks, ascending
    send_index: np.ndarray           # local owned rows sent, concatenated over peers
    send_offsets: np.ndarray         # (npeers + 1,) peer i's rows: send_index[off[i]:off[i+1]]
    recv_index: np.ndarray           # local halo rows received, concatenated over peers
    recv_offsets: np.ndarray         # (npeers + 1,) likewise for recv_index


@runtime_checkable
class DecompositionLike(Protocol):
    """One rank's part of a decomposed mesh (what `meshops.parallel` reads)."""

    mesh: MeshLike                   # the local mesh: owned entities first, then halo layers
    nranks: int                      # ranks of the decomposition
    halo_depth: int                  # cell layers of halo
    exchange: dict                   # {"cell" | "edge" | "vertex": ExchangeListLike}

    def n_owned(self, location: str) -> int:
        """Owned entities at `location` (the first rows of local fields)."""

    def n_local(self, location: str) -> int:
        """Owned plus halo entities at `location` (the rows of local fields)."""

    def n_interior(self, location: str, halo_depth: int) -> int:
        """Owned entities at `location` whose stencils of `halo_depth` layers read owned rows only
        (they are the first rows)."""
