"""The catalogue of named mesh tables: each table is built by one function, once per mesh.

A table is a NumPy array with one row per cell, edge or vertex (its `location`): integer
connectivity (`kind` "int", -1 for a missing neighbour or a pad; built as int32, held so on a
backend and shared by every dtype) or floating coefficients (`kind` "float", built in float64 and
held per dtype). A builder takes the `HostTables` of a mesh, reads the mesh's MPAS fields
(`h.mesh`) and other tables (`h[name]`), and returns the table, or a dict of several tables it
builds together. The connectivity every family shares is registered here; each operator family
registers its coefficient tables in its own module (`meshops.operators.*`), beside the formulas
that use them.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from meshops.device import connectivity

LOCATIONS = ("cell", "edge", "vertex")
#: The MPAS dimension that counts each mesh location (the one such map of meshops).
SIZE_OF = {"cell": "nCells", "edge": "nEdges", "vertex": "nVertices"}


@dataclass(frozen=True)
class Table:
    """One catalogue entry: `build(h)` returns the table (or a dict with it among others)."""
    name: str
    kind: str
    location: str
    build: Callable
    doc: str


CATALOGUE: dict[str, Table] = {}


def register(*names: str, kind, location, doc: str = ""):
    """Decorator: register `fn` as the builder of `names` (a dict of them when several), each a
    table of `kind` ("int" or "float") with rows at `location` (each one, or one per name)."""
    kinds = (kind,) * len(names) if isinstance(kind, str) else tuple(kind)
    locations = (location,) * len(names) if isinstance(location, str) else tuple(location)
    for k in kinds:
        if k not in ("int", "float"):
            raise ValueError(f"table kind: expected 'int' or 'float', got {k!r}")

    def decorate(fn):
        for name, kind, loc in zip(names, kinds, locations, strict=True):
            if name in CATALOGUE:
                raise ValueError(f"mesh table {name!r} is registered twice")
            if loc not in LOCATIONS:
                raise ValueError(f"mesh table {name!r}: location {loc!r} is not one of {LOCATIONS}")
            CATALOGUE[name] = Table(name, kind, loc, fn, doc or (fn.__doc__ or "").strip())
        return fn
    return decorate


def entry(name: str) -> Table:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"mesh table {name!r}: not in the catalogue (known: "
                       f"{', '.join(sorted(CATALOGUE))})") from None


class HostTables:
    """The tables of one mesh as built (NumPy, int32 / float64), each built once on first use.
    Tables may be asked for from several threads (`build`): each builder runs once, under its own
    lock, and a table that needs another one waits for it."""

    def __init__(self, mesh):
        self.mesh = mesh
        self._built: dict[str, np.ndarray] = {}
        self._locks: dict[Callable, threading.Lock] = {}
        self._guard = threading.Lock()

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._built:
            table = entry(name)
            with self._guard:
                lock = self._locks.setdefault(table.build, threading.Lock())
            with lock:
                if name not in self._built:
                    result = table.build(self)
                    self._built.update(result if isinstance(result, dict) else {name: result})
        return self._built[name]

    def build(self, names, threads: int | None = None) -> None:
        """Build the tables `names` (and the tables they read) now, on `threads` threads (default:
        `grids.geometry.threads()`, i.e. $MESHOPS_THREADS or every CPU): NumPy releases the GIL in
        the builders' array operations, so independent tables build side by side. Each table is
        the one a single thread builds, bitwise."""
        names = [n for n in dict.fromkeys(names) if n not in self._built]
        if not names:
            return
        if threads is None:
            from grids.geometry import threads as default_threads

            threads = default_threads()
        threads = max(1, min(int(threads), len(names)))
        if threads == 1:
            for name in names:
                self[name]
            return
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(self.__getitem__, name) for name in names]:
                future.result()

    def names(self) -> list[str]:
        return list(self._built)


# -- connectivity shared by the families ----------------------------------------------------------

@register("edgesOnCell", kind="int", location="cell")
def _edges_on_cell(h):
    """edgesOnCell with -1 beyond nEdgesOnCell."""
    return connectivity.masked(h.mesh.edgesOnCell, h.mesh.nEdgesOnCell, "edgesOnCell")


@register("verticesOnCell", kind="int", location="cell")
def _vertices_on_cell(h):
    """verticesOnCell with -1 beyond nEdgesOnCell."""
    return connectivity.masked(h.mesh.verticesOnCell, h.mesh.nEdgesOnCell, "verticesOnCell")


@register("cellsOnEdge", kind="int", location="edge")
def _cells_on_edge(h):
    """cellsOnEdge (-1: no cell on that side)."""
    return connectivity.masked(h.mesh.cellsOnEdge, name="cellsOnEdge")


@register("verticesOnEdge", kind="int", location="edge")
def _vertices_on_edge(h):
    """verticesOnEdge (-1: no vertex at that end)."""
    return connectivity.masked(h.mesh.verticesOnEdge, name="verticesOnEdge")


@register("edgesOnVertex", kind="int", location="vertex")
def _edges_on_vertex(h):
    """edgesOnVertex (-1: missing edge)."""
    return connectivity.masked(h.mesh.edgesOnVertex, name="edgesOnVertex")


@register("cellsOnVertex", kind="int", location="vertex")
def _cells_on_vertex(h):
    """cellsOnVertex (-1: missing cell)."""
    return connectivity.masked(h.mesh.cellsOnVertex, name="cellsOnVertex")


@register("edgesOnEdge", kind="int", location="edge")
def _edges_on_edge(h):
    """edgesOnEdge with -1 beyond nEdgesOnEdge, trimmed to the largest nEdgesOnEdge (the slots
    beyond it hold only pads)."""
    count = np.asarray(h.mesh.nEdgesOnEdge)
    width = int(count.max(initial=0))
    return connectivity.masked(np.asarray(h.mesh.edgesOnEdge)[:, :width], count, "edgesOnEdge")


#: The MPAS variable holding each location's global ids (1-based; a rank's local mesh holds the
#: whole mesh's ids of its entities).
GLOBAL_ID = {"cell": "indexToCellID", "edge": "indexToEdgeID", "vertex": "indexToVertexID"}


def global_ids(mesh, location: str):
    """The mesh's global ids of its entities at `location` (`GLOBAL_ID`), or None when the mesh
    has none (then an entity's index is its id)."""
    held = getattr(mesh, "extra", {}).get(GLOBAL_ID[location])
    return None if held is None else np.asarray(held[1])


def _transposed(forward: str, n_in: str, field: str, rows_at: str):
    """Builder of the transposed stencil of `forward` (rows at location `rows_at`) over `n_in`
    inputs: `forward`T (rows) and `forward`TSlot (slots), see `connectivity.transpose`; each
    input's entries in increasing (global id of the row, slot) order, so that a rank's local
    tables sum in the whole mesh's order."""
    def build(h):
        rows, slots = connectivity.transpose(h[forward], getattr(h.mesh, n_in), field,
                                             row_keys=global_ids(h.mesh, rows_at))
        return {f"{forward}T": rows, f"{forward}TSlot": slots}
    build.__doc__ = (f"Transpose of {forward}: for each input, its (row, slot) pairs in increasing "
                     "(global row id, slot) order.")
    return build


for _forward, _n_in, _loc, _rows_at in (("cellsOnEdge", "nCells", "cell", "edge"),
                                        ("verticesOnEdge", "nVertices", "vertex", "edge"),
                                        ("edgesOnVertex", "nEdges", "edge", "vertex"),
                                        ("edgesOnEdge", "nEdges", "edge", "edge")):
    register(f"{_forward}T", f"{_forward}TSlot", kind="int", location=_loc)(
        _transposed(_forward, _n_in, _forward, _rows_at))


# -- the fused passes' neighbour-and-flux-owner table ---------------------------------------------

@register("cellsAcrossOnCell", kind="int", location="cell")
def _cells_across_on_cell(h):
    """On edgesOnCell: the other cell of edge e_j (cellsOnEdge[e_j] without c, -1 if none), stored
    as -2 - that cell where c is the edge's first present cell (the cell that writes its flux);
    -1 in pads."""
    edges, cells = h["edgesOnCell"], h["cellsOnEdge"]
    c = np.arange(edges.shape[0], dtype=cells.dtype)[:, None]
    ends = cells[np.maximum(edges, 0)]                       # (nCells, maxEdges, 2)
    end0, end1 = ends[..., 0], ends[..., 1]
    present = edges >= 0
    at0, at1 = end0 == c, end1 == c
    bad = present & ~at0 & ~at1
    if bad.any():
        cell, slot = (int(x[0]) for x in np.nonzero(bad))
        edge = int(edges[cell, slot])
        raise ValueError(f"mesh: edgesOnCell[{cell}, {slot}] = {edge} (0-based) but cellsOnEdge[{edge}] "
                         f"= {tuple(int(x) for x in cells[edge])} does not hold cell {cell}; expected "
                         f"every edge of a cell to have that cell on one side")
    other = np.where(at0, end1, end0)
    first = np.where(end0 >= 0, at0, at1)                    # c is the edge's first present cell
    return np.where(present, np.where(first, -2 - other, other), -1)


# -- geometry shared by the families --------------------------------------------------------------

@register("invDcEdge", kind="float", location="edge")
def _inv_dc_edge(h):
    """1 / dcEdge."""
    return 1.0 / h.mesh.dcEdge


@register("invDvEdge", kind="float", location="edge")
def _inv_dv_edge(h):
    """1 / dvEdge."""
    return 1.0 / h.mesh.dvEdge


@register("invAreaCell", kind="float", location="cell")
def _inv_area_cell(h):
    """1 / areaCell."""
    return 1.0 / h.mesh.areaCell


@register("dcEdge", kind="float", location="edge")
def _dc_edge(h):
    """dcEdge (distance between the two cell centres of an edge)."""
    return np.asarray(h.mesh.dcEdge)


@register("dvEdge", kind="float", location="edge")
def _dv_edge(h):
    """dvEdge (length of the Voronoi edge)."""
    return np.asarray(h.mesh.dvEdge)
