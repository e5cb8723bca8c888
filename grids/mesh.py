"""The `Mesh`: an MPAS field set held in memory.

Conventions (see README):
- indices are 0-based; missing neighbours and pads are -1 (MPAS files are 1-based with 0 pads; only
  `grids.mpas_io` converts);
- lengths in metres and areas in m^2 on a sphere of radius `sphere_radius`;
- the normal of edge e points from cellsOnEdge[e, 0] to cellsOnEdge[e, 1]; its tangent (k x n) from
  verticesOnEdge[e, 0] to verticesOnEdge[e, 1]; edgesOnCell, verticesOnCell and cellsOnCell run
  counter-clockwise seen from outside the sphere, verticesOnCell[c, j] lies between edgesOnCell[c, j]
  and edgesOnCell[c, j+1] (MPAS order), cellsOnCell[c, j] lies across edgesOnCell[c, j];
- a local (per-rank) mesh holds its owned entities first: nCellsSolve, nEdgesSolve, nVerticesSolve
  (equal to nCells, nEdges, nVertices on a global mesh).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

#: Earth's radius (m), as in MPAS (`a = 6371229.0` in mpas_constants, the radius MPAS scales its
#: unit-sphere meshes to). The one definition: every default radius of `grids` (generation, cache,
#: CLI) is this name; other packages should import it (`from grids import EARTH_RADIUS`).
EARTH_RADIUS = 6371229.0
#: Earth's rotation rate (1/s), as in MPAS (`omega` in mpas_constants).
EARTH_OMEGA = 7.29212e-5

#: MPAS dimension name of the leading axis of every field.
FIELD_DIMS: dict[str, tuple[str, ...]] = {
    # cells
    "xCell": ("nCells",), "yCell": ("nCells",), "zCell": ("nCells",),
    "latCell": ("nCells",), "lonCell": ("nCells",),
    "nEdgesOnCell": ("nCells",), "edgesOnCell": ("nCells", "maxEdges"),
    "cellsOnCell": ("nCells", "maxEdges"), "verticesOnCell": ("nCells", "maxEdges"),
    "edgeSignOnCell": ("nCells", "maxEdges"),
    "areaCell": ("nCells",), "fCell": ("nCells",),
    # edges
    "xEdge": ("nEdges",), "yEdge": ("nEdges",), "zEdge": ("nEdges",),
    "latEdge": ("nEdges",), "lonEdge": ("nEdges",),
    "cellsOnEdge": ("nEdges", "TWO"), "verticesOnEdge": ("nEdges", "TWO"),
    "nEdgesOnEdge": ("nEdges",), "edgesOnEdge": ("nEdges", "maxEdges2"),
    "weightsOnEdge": ("nEdges", "maxEdges2"),
    "dcEdge": ("nEdges",), "dvEdge": ("nEdges",), "angleEdge": ("nEdges",), "fEdge": ("nEdges",),
    # vertices
    "xVertex": ("nVertices",), "yVertex": ("nVertices",), "zVertex": ("nVertices",),
    "latVertex": ("nVertices",), "lonVertex": ("nVertices",),
    "cellsOnVertex": ("nVertices", "vertexDegree"), "edgesOnVertex": ("nVertices", "vertexDegree"),
    "edgeSignOnVertex": ("nVertices", "vertexDegree"),
    "areaTriangle": ("nVertices",), "kiteAreasOnVertex": ("nVertices", "vertexDegree"),
    "fVertex": ("nVertices",),
}

#: Fields that hold indices (0-based in memory, -1 for missing).
INDEX_FIELDS = (
    "edgesOnCell", "cellsOnCell", "verticesOnCell", "cellsOnEdge", "verticesOnEdge",
    "edgesOnEdge", "cellsOnVertex", "edgesOnVertex",
)
#: Fields that hold counts.
COUNT_FIELDS = ("nEdgesOnCell", "nEdgesOnEdge")
#: Connectivity and positions: what a mesh file must hold at least; the rest can be derived.
REQUIRED_FIELDS = (
    "xCell", "yCell", "zCell", "xEdge", "yEdge", "zEdge", "xVertex", "yVertex", "zVertex",
    "nEdgesOnCell", "edgesOnCell", "cellsOnCell", "verticesOnCell",
    "cellsOnEdge", "verticesOnEdge", "cellsOnVertex", "edgesOnVertex",
)
#: Read-only GRIST-style aliases of MPAS fields.
GRIST_ALIASES = {
    "plg_nnb": "nEdgesOnCell",
    "plg_ed": "edgesOnCell",
    "plg_nr": "cellsOnCell",
    "edp_leng": "dcEdge",
    "edt_leng": "dvEdge",
    "plg_area": "areaCell",
}


@dataclass
class Mesh:
    """An MPAS mesh on a sphere of radius `sphere_radius` (metres), 0-based with -1 pads.

    Every entry of `FIELD_DIMS` is an attribute holding a NumPy array (cell, edge and vertex
    positions in metres, lat/lon in radians, lengths in m, areas in m^2, angleEdge in radians,
    Coriolis parameters in 1/s). `attributes` keeps the file's global attributes; `extra` keeps
    variables of a file that the mesh does not interpret, as {name: (dims, array)}, so they can be
    written back. `nCellsSolve`, `nEdgesSolve`, `nVerticesSolve` count owned entities (all of them
    on a global mesh).
    """

    sphere_radius: float
    xCell: np.ndarray
    yCell: np.ndarray
    zCell: np.ndarray
    latCell: np.ndarray
    lonCell: np.ndarray
    nEdgesOnCell: np.ndarray
    edgesOnCell: np.ndarray
    cellsOnCell: np.ndarray
    verticesOnCell: np.ndarray
    edgeSignOnCell: np.ndarray
    areaCell: np.ndarray
    fCell: np.ndarray
    xEdge: np.ndarray
    yEdge: np.ndarray
    zEdge: np.ndarray
    latEdge: np.ndarray
    lonEdge: np.ndarray
    cellsOnEdge: np.ndarray
    verticesOnEdge: np.ndarray
    nEdgesOnEdge: np.ndarray
    edgesOnEdge: np.ndarray
    weightsOnEdge: np.ndarray
    dcEdge: np.ndarray
    dvEdge: np.ndarray
    angleEdge: np.ndarray
    fEdge: np.ndarray
    xVertex: np.ndarray
    yVertex: np.ndarray
    zVertex: np.ndarray
    latVertex: np.ndarray
    lonVertex: np.ndarray
    cellsOnVertex: np.ndarray
    edgesOnVertex: np.ndarray
    edgeSignOnVertex: np.ndarray
    areaTriangle: np.ndarray
    kiteAreasOnVertex: np.ndarray
    fVertex: np.ndarray
    nCellsSolve: int = -1
    nEdgesSolve: int = -1
    nVerticesSolve: int = -1
    attributes: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.nCellsSolve < 0:
            self.nCellsSolve = self.nCells
        if self.nEdgesSolve < 0:
            self.nEdgesSolve = self.nEdges
        if self.nVerticesSolve < 0:
            self.nVerticesSolve = self.nVertices

    # sizes -----------------------------------------------------------------------------------
    @property
    def nCells(self) -> int:
        return int(self.xCell.shape[0])

    @property
    def nEdges(self) -> int:
        return int(self.xEdge.shape[0])

    @property
    def nVertices(self) -> int:
        return int(self.xVertex.shape[0])

    @property
    def maxEdges(self) -> int:
        return int(self.edgesOnCell.shape[1])

    @property
    def maxEdges2(self) -> int:
        return int(self.edgesOnEdge.shape[1])

    @property
    def vertexDegree(self) -> int:
        return int(self.cellsOnVertex.shape[1])

    def sizes(self) -> dict[str, int]:
        """MPAS dimension sizes: {"nCells": ..., "nEdges": ..., ..., "TWO": 2}."""
        return {"nCells": self.nCells, "nEdges": self.nEdges, "nVertices": self.nVertices,
                "maxEdges": self.maxEdges, "maxEdges2": self.maxEdges2,
                "vertexDegree": self.vertexDegree, "TWO": 2}

    # fields ----------------------------------------------------------------------------------
    def fields(self) -> dict[str, np.ndarray]:
        """The MPAS fields by name (the arrays themselves, not copies)."""
        return {name: getattr(self, name) for name in FIELD_DIMS}

    def replace(self, **changes) -> "Mesh":
        """A new Mesh with some attributes replaced (arrays are shared, not copied)."""
        return dataclasses.replace(self, **changes)

    def __getattr__(self, name):
        # Only reached when normal lookup fails: serve the GRIST aliases as read-only views.
        if name in GRIST_ALIASES:
            view = getattr(self, GRIST_ALIASES[name]).view()
            view.flags.writeable = False
            return view
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    def __repr__(self) -> str:
        return (f"Mesh(nCells={self.nCells}, nEdges={self.nEdges}, nVertices={self.nVertices}, "
                f"maxEdges={self.maxEdges}, sphere_radius={self.sphere_radius:g})")
