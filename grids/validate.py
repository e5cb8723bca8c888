"""Mesh validation: structure, index ranges, topology, geometry and orientation of MPAS fields.

Every check is vectorised and stops at the first bad entry, raising `MeshError` that names the file,
the field, the first bad index, its value and what was expected. `check_fields` works on a partial
field dict (what a file holds, 0-based, before derivation) and runs every check whose fields are
present; `validate_mesh` checks a complete `Mesh`.

Conventions checked (MPAS, see `grids.mesh`):
- 0-based indices, -1 pads; slots j < nEdgesOnCell[c] of edgesOnCell/cellsOnCell/verticesOnCell
  (and j < nEdgesOnEdge[e] of edgesOnEdge) hold indices, later slots hold -1; cellsOnEdge,
  verticesOnEdge, cellsOnVertex, edgesOnVertex hold no pads (a global mesh);
- edge e joins two distinct cells cellsOnEdge[e, :] and two distinct vertices verticesOnEdge[e, :];
  each edge appears in edgesOnCell exactly twice and in edgesOnVertex exactly twice;
- edgesOnCell runs counter-clockwise seen from outside the sphere; the normal (angleEdge, measured
  from local east towards north) points from cellsOnEdge[e, 0] to cellsOnEdge[e, 1]; the tangent
  k x n points from verticesOnEdge[e, 0] to verticesOnEdge[e, 1];
- edgeSignOnCell[c, j] = +1 where c == cellsOnEdge[edgesOnCell[c, j], 0] (the normal points out
  of c), else -1; edgeSignOnVertex[v, j] = +1 where v == verticesOnEdge[edgesOnVertex[v, j], 1],
  else -1 (MPAS-Atmosphere's edgesOnCell_sign / edgesOnVertex_sign, as `grids.geometry` derives);
- cellsOnVertex[v, j] lies between edgesOnVertex[v, j] and edgesOnVertex[v, j+1] (MPAS order);
- nEdgesOnEdge[e] = nEdgesOnCell[c0] + nEdgesOnCell[c1] - 2 and edgesOnEdge[e] lists each other
  edge of the two cells once;
- positions finite and on the sphere (|x| = sphere_radius to `SPHERE_RTOL`), lat/lon agree with
  x, y, z to `ANGLE_TOL`; areas and lengths positive;
- the stored geometry equals the geometry derived from the positions and connectivity
  (`grids.geometry.complete_mesh`, which matches MPAS's mesh converter to 1e-7 relative):
  dcEdge, dvEdge, areaCell, areaTriangle to relative `GEOMETRY_RTOL` of each entry,
  kiteAreasOnVertex to `GEOMETRY_RTOL` of the vertex's areaTriangle, weightsOnEdge to
  `WEIGHT_ATOL` (matched by edgesOnEdge, in any slot order), angleEdge to `ANGLE_EDGE_TOL`
  radians (MPAS's converter computes it from a local projection: 0.023 rad apart on x1.162).
  fCell, fEdge, fVertex must be 2 omega sin(lat) with one rotation rate omega for the whole mesh
  (estimated from the field itself) to relative `GEOMETRY_RTOL` of 2 omega.

Entity numbers in messages (the values of index fields, "edge 103") are 0-based in memory; while
`file_index_base(1)` is active (reading an MPAS file) they are printed as in the file, 1-based,
and the message says so. Positions `field[i, j]` are always 0-based array positions (as NumPy,
netCDF4-python and xarray index the variable).
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from .mesh import COUNT_FIELDS, FIELD_DIMS, INDEX_FIELDS, REQUIRED_FIELDS

#: Relative tolerance of | |x| - sphere_radius | / sphere_radius for positions on the sphere.
SPHERE_RTOL = 1e-6
#: Tolerance (radians) between the direction given by lat/lon and by x, y, z.
ANGLE_TOL = 1e-6
#: Relative tolerance between stored and derived lengths and areas (observed on MPAS's own
#: x1.162 file: 7e-8).
GEOMETRY_RTOL = 1e-5
#: Absolute tolerance between stored and derived weightsOnEdge (dimensionless, |w| <= 1;
#: observed on x1.162: 5e-8).
WEIGHT_ATOL = 1e-5
#: Tolerance (radians) between stored and derived angleEdge.
ANGLE_EDGE_TOL = 0.1
#: Fields compared with their derivation by `check_geometry`, in this order.
GEOMETRY_FIELDS = ("dcEdge", "dvEdge", "areaCell", "areaTriangle", "kiteAreasOnVertex",
                   "angleEdge", "weightsOnEdge")
#: How the stored geometry can be replaced by the derived one.
RECOMPUTE_HINT = ("if the positions and connectivity are right, read the file with "
                  "recompute_geometry=True (python -m grids check --recompute-geometry) to use the "
                  "geometry derived from them")

#: Base in which entity numbers are printed (0 in memory, 1 while checking an MPAS file's content).
_BASE = contextvars.ContextVar("grids_index_base", default=0)


@contextlib.contextmanager
def file_index_base(base: int):
    """Print entity numbers (index values) in `base` inside this block (1: as in an MPAS file)."""
    token = _BASE.set(int(base))
    try:
        yield
    finally:
        _BASE.reset(token)

#: Entity each index field points to.
INDEX_TARGET = {
    "edgesOnCell": "nEdges", "cellsOnCell": "nCells", "verticesOnCell": "nVertices",
    "cellsOnEdge": "nCells", "verticesOnEdge": "nVertices", "edgesOnEdge": "nEdges",
    "cellsOnVertex": "nCells", "edgesOnVertex": "nEdges",
}
#: Count field that says how many leading slots of a padded index field are used.
PAD_COUNT = {
    "edgesOnCell": "nEdgesOnCell", "cellsOnCell": "nEdgesOnCell", "verticesOnCell": "nEdgesOnCell",
    "edgesOnEdge": "nEdgesOnEdge",
}
LENGTH_FIELDS = ("dcEdge", "dvEdge")
AREA_FIELDS = ("areaCell", "areaTriangle", "kiteAreasOnVertex")
POSITION_GROUPS = {"Cell": "nCells", "Edge": "nEdges", "Vertex": "nVertices"}


class MeshError(ValueError):
    """A mesh (file or in memory) that breaks the MPAS conventions.

    Attributes: `file` (path or "<memory>"), `field` (MPAS variable or dimension name, or None),
    `index` (0-based position of the first bad entry: int or tuple, or None), `value` (the bad
    value: as stored in the file for the 1-based checks of a file's indices, else as in memory),
    `expected` (text), `derived` (for a stored value that disagrees with the geometry derived
    from positions and connectivity: the derived value, else None).
    """

    def __init__(self, message: str, *, file: str = "<memory>", field: str | None = None,
                 index=None, value=None, expected: str | None = None, derived=None):
        self.file = str(file)
        self.derived = derived
        self.field = field
        self.index = index
        self.value = value
        self.expected = expected
        self.reason = message
        where = self.file
        if field is not None:
            where += f": {field}"
            if index is not None:
                idx = ", ".join(str(i) for i in index) if isinstance(index, tuple) else str(index)
                where += f"[{idx}]"
            if value is not None:
                where += f" = {_short(value)}"
        text = f"{where}: {message}"
        if expected is not None:
            text += f"; expected {expected}"
        super().__init__(text)


def _short(value) -> str:
    text = np.array2string(value, threshold=12) if isinstance(value, np.ndarray) else repr(value)
    if isinstance(value, (np.generic,)):
        text = repr(value.item())
    return text if len(text) <= 200 else text[:197] + "..."


def _index(flat: int, shape) -> int | tuple:
    idx = tuple(int(i) for i in np.unravel_index(flat, shape))
    return idx[0] if len(idx) == 1 else idx


def _shift(value, base: int):
    """Index values (int or nested lists of ints, -1 pads) printed in `base`."""
    if isinstance(value, list):
        return [_shift(v, base) for v in value]
    return int(value) + base


def _raise_first(bad: np.ndarray, arr: np.ndarray, source: str, field: str, message: str,
                 expected: str, value_of=None, value_is_index: bool | None = None):
    """Raise MeshError at the first True entry of `bad` (same shape as `arr`, or arr's rows).

    `{idx}` in `message` is the entity number of the bad row (printed in the current base);
    `value_is_index` (default: the value is arr's own entry and `field` is an index field) says
    whether the value is an entity number, printed in the current base too.
    """
    if not bad.any():
        return
    flat = int(np.flatnonzero(bad.ravel())[0])
    idx = _index(flat, bad.shape)
    value = value_of(idx) if value_of is not None else arr[idx]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        value = value.tolist()
    base = _BASE.get()
    if value_is_index is None:
        value_is_index = value_of is None and field in INDEX_FIELDS
    if value_is_index and base:
        value = _shift(value, base)
    names_entity = "{idx" in message
    shown = _shift(list(idx), base) if isinstance(idx, tuple) else _shift(idx, base)
    message = message.format(idx=tuple(shown) if isinstance(idx, tuple) else shown)
    if base and (value_is_index or names_entity):
        message += f" (entity numbers {base}-based as in the file; positions [i, j] 0-based)"
    raise MeshError(message, file=source, field=field, index=idx, value=value,
                    expected=expected)


# -- structure -----------------------------------------------------------------------------------
def check_structure(fields: dict, sizes: dict, source: str, *, required=REQUIRED_FIELDS) -> None:
    """Required fields present; every present field has its MPAS shape and a numeric dtype."""
    for name in required:
        if fields.get(name) is None:
            raise MeshError("missing variable", file=source, field=name,
                            expected=f"a variable of dimensions {FIELD_DIMS[name]}")
    for name, arr in fields.items():
        if name not in FIELD_DIMS or arr is None:
            continue
        dims = FIELD_DIMS[name]
        want = tuple(sizes.get(d) for d in dims)
        if not isinstance(arr, np.ndarray) or arr.shape != want:
            got = getattr(arr, "shape", type(arr).__name__)
            raise MeshError("wrong shape", file=source, field=name, value=got,
                            expected=f"shape {want} for dimensions {dims}")
        integral = name in INDEX_FIELDS or name in COUNT_FIELDS
        if integral and not np.issubdtype(arr.dtype, np.integer):
            raise MeshError("indices and counts must be integers", file=source, field=name,
                            value=str(arr.dtype), expected="an integer dtype")
        if not integral and not np.issubdtype(arr.dtype, np.floating):
            raise MeshError("wrong dtype", file=source, field=name, value=str(arr.dtype),
                            expected="a floating-point dtype")


def check_finite(fields: dict, source: str) -> None:
    """No NaN or inf in any floating-point field."""
    for name, arr in fields.items():
        if name in FIELD_DIMS and arr is not None and np.issubdtype(arr.dtype, np.floating):
            _raise_first(~np.isfinite(arr), arr, source, name,
                         "not finite (a NaN is also how a masked or fill value reads)",
                         "a finite number")


def check_counts(fields: dict, sizes: dict, source: str) -> None:
    """3 <= nEdgesOnCell <= maxEdges; 0 <= nEdgesOnEdge <= maxEdges2."""
    n = fields.get("nEdgesOnCell")
    if n is not None:
        hi = sizes["maxEdges"]
        _raise_first((n < 3) | (n > hi), n, source, "nEdgesOnCell", "count out of range",
                     f"3 <= nEdgesOnCell <= maxEdges = {hi}")
    n = fields.get("nEdgesOnEdge")
    if n is not None:
        hi = sizes["maxEdges2"]
        _raise_first((n < 0) | (n > hi), n, source, "nEdgesOnEdge", "count out of range",
                     f"0 <= nEdgesOnEdge <= maxEdges2 = {hi}")


def used_slots(fields: dict, name: str) -> np.ndarray | None:
    """Boolean mask of the slots of index field `name` that must hold an index (not a pad)."""
    arr = fields[name]
    count = PAD_COUNT.get(name)
    if count is None:
        return np.ones(arr.shape, dtype=bool)
    if fields.get(count) is None:
        return None
    return np.arange(arr.shape[1])[None, :] < fields[count][:, None]


def _indices_in_range(fields: dict, name: str, n: int) -> bool:
    """True when index field `name` holds 0 <= i < n in its used slots and -1 in its pads (any of
    -1..n-1 anywhere when its count is missing); blockwise over rows, in parallel, so the check
    of a large mesh needs no mesh-sized temporaries."""
    from .geometry import blocks

    arr = fields[name]
    count = PAD_COUNT.get(name)
    counts = None if count is None else fields.get(count)
    cols = np.arange(arr.shape[1]) if arr.ndim == 2 else None

    def block(s):
        a = arr[s]
        if count is not None and counts is None:
            return not np.any((a < -1) | (a >= n))
        if count is None:
            return not np.any((a < 0) | (a >= n))
        used = cols[None, :] < counts[s][:, None]
        return not np.any(np.where(used, (a < 0) | (a >= n), a != -1))
    return all(ok for _, ok in blocks(block, arr.shape[0]))


def check_indices(fields: dict, sizes: dict, source: str) -> None:
    """Used slots hold 0 <= i < n of the target entity; pad slots hold -1."""
    for name in INDEX_FIELDS:
        arr = fields.get(name)
        if arr is None:
            continue
        n = sizes[INDEX_TARGET[name]]
        if _indices_in_range(fields, name, n):
            continue
        used = used_slots(fields, name)
        if used is None:    # count missing: pads allowed anywhere
            _raise_first((arr < -1) | (arr >= n), arr, source, name, "index out of range",
                         f"-1 (pad) or 0..{n - 1} ({INDEX_TARGET[name]} = {n})")
            continue
        _raise_first(used & ((arr < 0) | (arr >= n)), arr, source, name, "index out of range",
                     f"0..{n - 1} ({INDEX_TARGET[name]} = {n}) in a used slot")
        if name in PAD_COUNT:
            _raise_first(~used & (arr != -1), arr, source, name, "pad slot holds a value",
                         f"-1 beyond {PAD_COUNT[name]}")


# -- topology ------------------------------------------------------------------------------------
def _raise_first_rows(bad_rows, n: int, arr: np.ndarray, source: str, field: str, message: str,
                      expected: str, **kwargs) -> None:
    """`_raise_first` of the mask bad_rows(s), rows s of range(n), evaluated blockwise in parallel
    (`grids.geometry.blocks`): a valid mesh is checked without mesh-sized temporaries, and the
    full mask is built only when a block fails (its first bad entry is the first of all)."""
    from .geometry import blocks

    for s, bad in blocks(bad_rows, n):
        if bad.any():
            full = np.zeros((n,) + bad.shape[1:], dtype=bool)
            full[s] = bad
            _raise_first(full, arr, source, field, message, expected, **kwargs)


def _rows(s: slice) -> np.ndarray:
    return np.arange(s.start, s.stop)[:, None]


def check_topology(fields: dict, sizes: dict, source: str) -> None:
    """Edges join two distinct cells/vertices; cell, edge and vertex connectivity agree
    (row checks blockwise, `_raise_first_rows`)."""
    f = fields
    coe, voe = f.get("cellsOnEdge"), f.get("verticesOnEdge")
    if coe is not None:
        _raise_first_rows(lambda s: coe[s, 0] == coe[s, 1], coe.shape[0], coe, source,
                          "cellsOnEdge", "edge joins a cell to itself", "two distinct cells",
                          value_of=lambda e: coe[e].tolist(), value_is_index=True)
    if voe is not None:
        _raise_first_rows(lambda s: voe[s, 0] == voe[s, 1], voe.shape[0], voe, source,
                          "verticesOnEdge", "edge joins a vertex to itself", "two distinct vertices",
                          value_of=lambda e: voe[e].tolist(), value_is_index=True)
    eoc, noc = f.get("edgesOnCell"), f.get("nEdgesOnCell")
    if eoc is not None and noc is not None:
        _check_cell_edges(f, sizes, source)
    eov = f.get("edgesOnVertex")
    if eov is not None:
        uses = np.bincount(eov.ravel(), minlength=sizes["nEdges"])
        _raise_first(uses != 2, uses, source, "edgesOnVertex",
                     "edge {idx} appears in edgesOnVertex a wrong number of times",
                     "every edge on exactly two vertices", value_of=lambda e: int(uses[e]))
        del uses
        if voe is not None:
            _raise_first_rows(lambda s: ~(voe[eov[s]] == _rows(s)[..., None]).any(-1),
                              eov.shape[0], eov, source, "edgesOnVertex",
                              "vertex {idx[0]} lists an edge whose verticesOnEdge does not hold it",
                              "edges whose verticesOnEdge include the vertex")
    cov, voc = f.get("cellsOnVertex"), f.get("verticesOnCell")
    if cov is not None and voc is not None:
        _raise_first_rows(lambda s: ~(voc[cov[s]] == _rows(s)[..., None]).any(-1), cov.shape[0],
                          cov, source, "cellsOnVertex",
                          "vertex {idx[0]} lists a cell whose verticesOnCell does not hold it",
                          "cells whose verticesOnCell include the vertex")
    if cov is not None and eov is not None and coe is not None:
        for shift in (0, 1):
            def not_between(s, shift=shift):
                e = np.roll(eov[s], -shift, axis=1)
                return ~((coe[e, 0] == cov[s]) | (coe[e, 1] == cov[s]))
            _raise_first_rows(not_between, cov.shape[0], cov, source, "cellsOnVertex",
                              f"cell is not on edgesOnVertex[v, j{' + 1' if shift else ''}]",
                              "cellsOnVertex[v, j] between edgesOnVertex[v, j] and [v, j+1] "
                              "(MPAS order)")
    eoe, neoe = f.get("edgesOnEdge"), f.get("nEdgesOnEdge")
    if neoe is not None and noc is not None and coe is not None:
        want = lambda e: noc[coe[e, 0]] + noc[coe[e, 1]] - 2
        _raise_first_rows(lambda s: neoe[s] != want(s), neoe.shape[0], neoe, source,
                          "nEdgesOnEdge", "count differs from the two cells' edges",
                          "nEdgesOnCell[c0] + nEdgesOnCell[c1] - 2",
                          value_of=lambda e: f"{int(neoe[e])} (expected {int(want(e))})")
    if eoe is not None and neoe is not None and coe is not None:
        _check_edge_edges(f, source)


def _check_cell_edges(f: dict, sizes: dict, source: str) -> None:
    """Every edge on two cells' edgesOnCell; edgesOnCell, cellsOnCell and verticesOnCell agree
    with cellsOnEdge / verticesOnEdge."""
    eoc, noc, coe, voe = f["edgesOnCell"], f["nEdgesOnCell"], f.get("cellsOnEdge"), f.get("verticesOnEdge")
    used = used_slots(f, "edgesOnCell")
    uses = np.bincount(eoc[used], minlength=sizes["nEdges"])
    _raise_first(uses != 2, uses, source, "edgesOnCell",
                 "edge {idx} appears in edgesOnCell a wrong number of times",
                 "every edge on exactly two cells", value_of=lambda e: int(uses[e]))
    del uses
    n = eoc.shape[0]
    if coe is not None:
        ends = lambda s: coe[np.where(used[s], eoc[s], 0)]                # (rows, maxEdges, 2)
        _raise_first_rows(lambda s: used[s] & ~(ends(s) == _rows(s)[..., None]).any(-1), n, eoc,
                          source, "edgesOnCell",
                          "cell {idx[0]} lists an edge whose cellsOnEdge does not hold it",
                          "edges whose cellsOnEdge include the cell")
        coc = f.get("cellsOnCell")
        if coc is not None:
            def wrong_neighbour(s):
                e, cell = ends(s), _rows(s)
                return used[s] & (coc[s] != np.where(e[..., 0] == cell, e[..., 1], e[..., 0]))
            _raise_first_rows(wrong_neighbour, n, coc, source, "cellsOnCell",
                              "neighbour differs from the cell across edgesOnCell",
                              "cellsOnCell[c, j] = the other cell of edgesOnCell[c, j]")
    voc = f.get("verticesOnCell")
    if voc is not None and voe is not None:
        cols = np.arange(eoc.shape[1])[None, :] + 1

        def vertex_not_between(s):
            u, e = used[s], eoc[s]
            e_next = np.take_along_axis(e, np.where(cols >= noc[s][:, None], 0, cols), axis=1)
            v = voc[s][..., None]
            ok = (voe[np.where(u, e, 0)] == v).any(-1) & (voe[np.where(u, e_next, 0)] == v).any(-1)
            return u & ~ok
        _raise_first_rows(vertex_not_between, n, voc, source, "verticesOnCell",
                          "vertex is not shared by edgesOnCell[c, j] and edgesOnCell[c, j+1]",
                          "verticesOnCell[c, j] between edgesOnCell[c, j] and [c, j+1] (MPAS order)")


def _check_edge_edges(f: dict, source: str) -> None:
    """edgesOnEdge lists other edges of the edge's two cells, each once."""
    from .geometry import blocks

    eoe, coe = f["edgesOnEdge"], f["cellsOnEdge"]
    used = used_slots(f, "edgesOnEdge")

    def not_shared(s):
        ends = coe[np.where(used[s], eoe[s], 0)]                         # (rows, maxEdges2, 2)
        c0, c1 = coe[s, 0:1], coe[s, 1:2]
        e0, e1 = ends[..., 0], ends[..., 1]
        shares = (e0 == c0) | (e0 == c1) | (e1 == c0) | (e1 == c1)
        return used[s] & (~shares | (eoe[s] == _rows(s)))
    _raise_first_rows(not_shared, eoe.shape[0], eoe, source,
                      "edgesOnEdge", "not an edge of either cell of edge {idx[0]}",
                      "the other edges of cellsOnEdge[e, 0] and cellsOnEdge[e, 1]")
    pads = -1 - np.arange(eoe.shape[1])[None, :]                         # pads never repeat

    def repeats(s):
        ranked = np.sort(np.where(used[s], eoe[s], pads), axis=1)
        return bool((ranked[:, 1:] == ranked[:, :-1]).any())
    if any(r for _, r in blocks(repeats, eoe.shape[0])):                 # locate only on failure
        key = np.where(used, eoe, pads)
        order = np.argsort(key, axis=1, kind="stable")
        ranked = np.take_along_axis(key, order, axis=1)
        repeat = np.zeros(eoe.shape, dtype=bool)
        np.put_along_axis(repeat, order[:, 1:], ranked[:, 1:] == ranked[:, :-1], axis=1)
        _raise_first(repeat, eoe, source, "edgesOnEdge", "edge listed twice",
                     "each other edge of the two cells once")


# -- geometry ------------------------------------------------------------------------------------
def _xyz(fields: dict, kind: str) -> np.ndarray | None:
    parts = [fields.get(f"{c}{kind}") for c in "xyz"]
    return None if any(p is None for p in parts) else np.stack(parts, axis=-1)


def check_sphere(fields: dict, sphere_radius: float, source: str) -> None:
    """Positions lie on the sphere; lat/lon agree with x, y, z (blockwise, `_raise_first_rows`)."""
    if not (np.isfinite(sphere_radius) and sphere_radius > 0):
        raise MeshError("bad sphere radius", file=source, field="sphere_radius",
                        value=sphere_radius, expected="a finite positive radius (m)")
    for kind in POSITION_GROUPS:
        p = _xyz(fields, kind)
        if p is None:
            continue
        radius = lambda s, p=p: np.sqrt(np.einsum("ij,ij->i", p[s], p[s]))
        _raise_first_rows(lambda s: np.abs(radius(s) - sphere_radius) > SPHERE_RTOL * sphere_radius,
                          p.shape[0], p, source, f"x{kind}", "position off the sphere (value is |x|)",
                          f"|x| = sphere_radius = {sphere_radius!r} to relative {SPHERE_RTOL:g}",
                          value_of=lambda i: float(radius(slice(i, i + 1))[0]))
        lat, lon = fields.get(f"lat{kind}"), fields.get(f"lon{kind}")
        if lat is not None and lon is not None:
            def elsewhere(s, p=p, lat=lat, lon=lon, radius=radius):
                la, lo = lat[s], lon[s]
                unit = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)
                return np.linalg.norm(unit - p[s] / radius(s)[:, None], axis=1) > ANGLE_TOL
            _raise_first_rows(elsewhere, p.shape[0], lat, source, f"lat{kind}",
                              "lat/lon point elsewhere than x, y, z",
                              f"lat{kind}, lon{kind} of the point x{kind}, y{kind}, z{kind}")


def _triple(a, b, c) -> np.ndarray:
    """a . (b x c) row-wise."""
    return np.einsum("...i,...i->...", a, np.cross(b, c))


def check_orientation(fields: dict, source: str) -> None:
    """edgesOnCell counter-clockwise; normal from cellsOnEdge[:, 0] to [:, 1]; tangent k x n from
    verticesOnEdge[:, 0] to [:, 1]. The normal test uses angleEdge; it skips edges within 1e-10
    of a pole, where local east is undefined. Blockwise over rows (`_raise_first_rows`)."""
    f = fields
    pc, pe, pv = _xyz(f, "Cell"), _xyz(f, "Edge"), _xyz(f, "Vertex")
    eoc, noc = f.get("edgesOnCell"), f.get("nEdgesOnCell")
    if pc is not None and pe is not None and eoc is not None and noc is not None:
        used = used_slots(f, "edgesOnCell")
        cols = np.arange(eoc.shape[1])[None, :] + 1

        def clockwise(s):
            u, e = used[s], eoc[s]
            nxt = np.where(cols >= noc[s][:, None], 0, cols)
            c = pc[s][:, None, :]
            m0 = pe[np.where(u, e, 0)] - c
            m1 = pe[np.where(u, np.take_along_axis(e, nxt, axis=1), 0)] - c
            turn = _triple(np.broadcast_to(c, m0.shape), m0, m1)
            return (u & ~(turn > 0)).any(axis=1)
        _raise_first_rows(clockwise, eoc.shape[0], eoc, source, "edgesOnCell",
                          "edges of cell {idx} are not counter-clockwise seen from outside the sphere",
                          "edgesOnCell ordered counter-clockwise",
                          value_of=lambda c: eoc[c, :noc[c]].tolist(), value_is_index=True)
    coe, voe = f.get("cellsOnEdge"), f.get("verticesOnEdge")
    if pc is not None and pe is not None and coe is not None:
        d = lambda s: pc[coe[s, 1]] - pc[coe[s, 0]]
        ang, lat, lon = f.get("angleEdge"), f.get("latEdge"), f.get("lonEdge")
        if ang is not None and lat is not None and lon is not None:
            def backwards(s):
                la, lo, an = lat[s], lon[s], ang[s]
                east = np.stack([-np.sin(lo), np.cos(lo), np.zeros_like(lo)], -1)
                north = np.stack([-np.sin(la) * np.cos(lo), -np.sin(la) * np.sin(lo), np.cos(la)], -1)
                normal = np.cos(an)[:, None] * east + np.sin(an)[:, None] * north
                dot = np.einsum("ij,ij->i", normal, d(s))
                return (np.abs(np.cos(la)) > 1e-10) & ~(dot > 0)
            _raise_first_rows(backwards, coe.shape[0], coe, source, "cellsOnEdge",
                              "normal of edge {idx} (angleEdge) points from cellsOnEdge[e, 1] to [e, 0]",
                              "the normal from cellsOnEdge[e, 0] to cellsOnEdge[e, 1]",
                              value_of=lambda e: coe[e].tolist(), value_is_index=True)
        if pv is not None and voe is not None:
            _raise_first_rows(lambda s: ~(_triple(pe[s], d(s), pv[voe[s, 1]] - pv[voe[s, 0]]) > 0),
                              coe.shape[0], voe, source, "verticesOnEdge",
                              "tangent of edge {idx} points from verticesOnEdge[e, 1] to [e, 0]",
                              "the tangent k x n from verticesOnEdge[e, 0] to verticesOnEdge[e, 1]",
                              value_of=lambda e: voe[e].tolist(), value_is_index=True)


def check_signs(fields: dict, source: str) -> None:
    """edgeSignOnCell +1 on the edge's first cell; edgeSignOnVertex +1 on the edge's second vertex."""
    f = fields
    for sign_name, idx_name, end_name, end, count in (
            ("edgeSignOnCell", "edgesOnCell", "cellsOnEdge", 0, "nEdgesOnCell"),
            ("edgeSignOnVertex", "edgesOnVertex", "verticesOnEdge", 1, None)):
        sign, edges, ends = f.get(sign_name), f.get(idx_name), f.get(end_name)
        if sign is None or edges is None or ends is None or (count and f.get(count) is None):
            continue
        used = used_slots(f, idx_name) if count else np.ones(edges.shape, bool)
        owner = np.arange(edges.shape[0])[:, None]
        want = np.where(ends[np.where(used, edges, 0), end] == owner, 1.0, -1.0)
        _raise_first(used & (sign != want), sign, source, sign_name, "wrong sign",
                     f"+1 where the entity is {end_name}[e, {end}], -1 where it is the other")


def check_positive(fields: dict, source: str) -> None:
    """Lengths and areas strictly positive."""
    for name in LENGTH_FIELDS + AREA_FIELDS:
        arr = fields.get(name)
        if arr is not None:
            _raise_first(~(arr > 0), arr, source, name, "not positive",
                         "a positive length" if name in LENGTH_FIELDS else "a positive area")


def check_fields(fields: dict, sizes: dict, sphere_radius: float | None, source: str = "<memory>", *,
                 required=REQUIRED_FIELDS, geometry: bool = True) -> None:
    """Check a (possibly partial) dict of 0-based MPAS fields; every check runs whose fields exist.

    `sizes` maps MPAS dimension names to sizes. With geometry=False only the structure, counts,
    index ranges and topology are checked (what derivations need to run safely).
    """
    check_structure(fields, sizes, source, required=required)
    check_counts(fields, sizes, source)
    check_indices(fields, sizes, source)
    check_topology(fields, sizes, source)
    if geometry:
        check_finite(fields, source)
        if sphere_radius is not None:
            check_sphere(fields, sphere_radius, source)
        check_orientation(fields, source)
        check_signs(fields, source)
        check_positive(fields, source)


def _derived_geometry(fields: dict, sphere_radius: float, source: str) -> dict:
    from .geometry import complete_mesh

    try:
        mesh = complete_mesh({name: fields[name] for name in REQUIRED_FIELDS}, sphere_radius,
                             recompute=True)
    except ValueError as exc:
        raise MeshError(f"cannot derive the geometry from positions and connectivity ({exc})",
                        file=source, expected="a closed spherical MPAS mesh") from exc
    return mesh.fields()


def check_geometry(fields: dict, sphere_radius: float, source: str = "<memory>",
                   derived: dict | None = None) -> None:
    """The stored dcEdge, dvEdge, areas, angleEdge and weightsOnEdge equal the geometry derived
    from the positions and connectivity (tolerances in the module docstring).

    Needs fields that passed `check_fields` (the derivation relies on the topology). `derived`:
    the fields of `complete_mesh(..., recompute=True)` when already at hand. Raises MeshError
    naming the field, the first bad index, the stored value (`value`), the derived value
    (`derived`) and the fix (recompute_geometry=True).
    """
    present = [name for name in GEOMETRY_FIELDS if fields.get(name) is not None]
    if not present:
        return
    d = derived if derived is not None else _derived_geometry(fields, sphere_radius, source)
    for name in present:
        stored, want = np.asarray(fields[name], dtype=np.float64), np.asarray(d[name])
        if name == "weightsOnEdge":
            eoe = fields.get("edgesOnEdge")
            if eoe is None or eoe.shape != d["edgesOnEdge"].shape:
                continue
            order_s = np.argsort(eoe, axis=1, kind="stable")
            order_d = np.argsort(d["edgesOnEdge"], axis=1, kind="stable")
            want_s = np.empty_like(want)
            np.put_along_axis(want_s, order_s, np.take_along_axis(want, order_d, axis=1), axis=1)
            want = want_s        # derived weight of the same neighbour edge, in the file's slots
            diff = np.abs(stored - want)
            bad, tol = diff > WEIGHT_ATOL, f"absolute {WEIGHT_ATOL:g}"
        elif name == "angleEdge":
            diff = np.abs(np.angle(np.exp(1j * (stored - want))))
            bad, tol = diff > ANGLE_EDGE_TOL, f"{ANGLE_EDGE_TOL:g} rad"
        else:
            scale = np.abs(want)
            if name == "kiteAreasOnVertex":
                scale = np.broadcast_to(np.abs(d["areaTriangle"])[:, None], want.shape)
            diff = np.abs(stored - want)
            bad, tol = diff > GEOMETRY_RTOL * scale, f"relative {GEOMETRY_RTOL:g}"
        if not bad.any():
            continue
        flat = int(np.flatnonzero(bad.ravel())[0])
        idx = _index(flat, bad.shape)
        s_val, d_val = float(stored[idx]), float(want[idx])
        ratio = f"; stored / derived = {s_val / d_val:.6g}" if d_val != 0 else ""
        raise MeshError(f"stored {name} differs from the value derived from the positions and "
                        f"connectivity, {d_val!r}{ratio}", file=source, field=name, index=idx,
                        value=s_val, derived=d_val,
                        expected=f"the derived value {d_val!r} to {tol}; {RECOMPUTE_HINT}")


def check_coriolis(fields: dict, source: str = "<memory>") -> None:
    """fCell, fEdge, fVertex = 2 omega sin(lat) at every entry, one omega for the whole mesh (the
    median of f / (2 sin(lat)) over the entries of fCell, or of the field checked, away from the
    equator)."""
    omega = None
    for loc in ("Cell", "Edge", "Vertex"):
        f, lat = fields.get(f"f{loc}"), fields.get(f"lat{loc}")
        if f is None or lat is None:
            continue
        s = np.sin(lat)
        if omega is None:
            away = np.abs(s) > 0.1
            if not away.any():
                continue
            omega = float(np.median(f[away] / (2.0 * s[away])))
        want = 2.0 * omega * s
        tol = GEOMETRY_RTOL * 2.0 * abs(omega) + 1e-300
        bad = np.abs(f - want) > tol
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise MeshError(f"Coriolis parameter differs from 2 omega sin(lat{loc}) with the mesh's "
                            f"omega = {omega!r} 1/s", file=source, field=f"f{loc}", index=i,
                            value=float(f[i]), derived=float(want[i]),
                            expected=f"{float(want[i])!r} (2 omega sin(lat{loc}[{i}]) to relative "
                            f"{GEOMETRY_RTOL:g} of 2 omega); {RECOMPUTE_HINT}")


def validate_mesh(mesh, *, source: str = "<memory>", geometry: bool = True) -> None:
    """Check every MPAS convention on a complete Mesh; raise MeshError at the first violation.

    Also checks 0 <= nCellsSolve <= nCells (likewise edges, vertices) and, with `geometry`, that
    the stored geometry equals the geometry derived from positions and connectivity
    (`check_geometry`). Returns None when valid.
    """
    fields = mesh.fields()
    check_fields(fields, mesh.sizes(), float(mesh.sphere_radius), source,
                 required=tuple(FIELD_DIMS))
    if geometry:
        check_geometry(fields, float(mesh.sphere_radius), source)
        check_coriolis(fields, source)
    for name, total in (("nCellsSolve", mesh.nCells), ("nEdgesSolve", mesh.nEdges),
                        ("nVerticesSolve", mesh.nVertices)):
        value = getattr(mesh, name)
        if not 0 <= value <= total:
            raise MeshError("owned count out of range", file=source, field=name, value=value,
                            expected=f"0..{total}")
