"""MPAS mesh netCDF files: read into a `Mesh`, write a `Mesh` back.

On disk MPAS indices are 1-based with 0 pads; in memory (`Mesh`) they are 0-based with -1 pads.
This module is the only place that converts. Variables the mesh does not interpret (indexToCellID,
cellQuality, meshDensity, boundaryVertex, ...) are kept in `mesh.extra` as (dims, array), unchanged,
and written back; global attributes are kept in `mesh.attributes`.

MPAS metadata: MPAS-Model's bootstrapping (src/framework/mpas_bootstrapping.F) reads the fields
indexToCellID, indexToEdgeID, indexToVertexID (1-based global ids, int32) and the global attributes
on_a_sphere, sphere_radius, parent_id, file_id, mesh_spec, is_periodic, x_period, y_period.
A mesh read from a file keeps what the file had; `mpas_metadata` gives a new (generated) mesh all
of them, plus meshDensity (1.0: uniform), history and mesh_id (a deterministic hash of the cell
positions, `mesh_id_of`: the same mesh, the same id; file_id is random, one per file). `write_mesh` appends a line to `history`.

edgeSignOnCell: this package (and MPAS-Atmosphere's edgesOnCell_sign) has +1 where the cell is
cellsOnEdge[e, 0]; MPAS-Ocean's edgeSignOnCell has -1 there. A file whose edgeSignOnCell is
consistently in MPAS-Ocean's convention is converted on read (logged at info on the "grids"
logger); a field mixing both conventions is refused (MeshError naming the field and the entry).
edgeSignOnVertex is the same in both cores (+1 where the vertex is verticesOnEdge[e, 1]), so a
flipped edgeSignOnVertex is not a known convention and is refused as before.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import secrets
import string
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import overload

import numpy as np

from .atomic import atomic_path
from .mesh import COUNT_FIELDS, EARTH_OMEGA, FIELD_DIMS, INDEX_FIELDS, Mesh
from .netcdf_files import close_dataset
from .validate import (INDEX_TARGET, MeshError, _raise_first, check_counts, check_fields,
                       check_finite, check_indices, check_sphere, check_structure, file_index_base,
                       used_slots, validate_mesh)

log = logging.getLogger("grids")

#: netCDF formats write_mesh accepts.
FORMATS = ("NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA", "NETCDF3_CLASSIC", "NETCDF4",
           "NETCDF4_CLASSIC")
#: Dimensions a mesh file must define (maxEdges2 may be absent when edgesOnEdge is).
REQUIRED_DIMS = ("nCells", "nEdges", "nVertices", "maxEdges", "TWO", "vertexDegree")
#: Fields scaled by r / r_file (lengths) and by (r / r_file)^2 (areas) when a radius is asked for.
SCALED_LENGTHS = ("xCell", "yCell", "zCell", "xEdge", "yEdge", "zEdge",
                  "xVertex", "yVertex", "zVertex", "dcEdge", "dvEdge")
SCALED_AREAS = ("areaCell", "areaTriangle", "kiteAreasOnVertex")
#: Extra (uninterpreted) variables that hold lengths in the mesh's units, scaled with the mesh.
SCALED_EXTRA_LENGTHS = ("gridSpacing",)
#: `units` and `long_name` of every mesh variable, as MPAS-Atmosphere's Registry.xml gives them
#: (units "rad" written "radians", "-" written "unitless"; f{Cell,Edge,Vertex} in s^-1, which the
#: Registry leaves "unitless"; edgeSignOnCell / edgeSignOnVertex are the Registry's
#: edgesOnCell_sign / edgesOnVertex_sign). Every writer of mesh variables uses it (`write_mesh`,
#: `MeshFileWriter`, so the mesh cache and `python -m grids generate`; the model's histories and
#: grid files; `grids.xarray_io.to_xarray`): see `mesh_variable_attributes`.
MESH_VARIABLE_ATTRIBUTES = {
    **{f"{c}{k}": ("m", f"Cartesian {c}-coordinate of {k.lower()}s".replace("vertexs", "vertices"))
       for k in ("Cell", "Edge", "Vertex") for c in "xyz"},
    **{f"{a}{k}": ("radians", f"{w} of {k.lower()}s".replace("vertexs", "vertices"))
       for k in ("Cell", "Edge", "Vertex") for a, w in (("lat", "Latitude"), ("lon", "Longitude"))},
    "indexToCellID": ("unitless", "Mapping from local array index to global cell ID"),
    "indexToEdgeID": ("unitless", "Mapping from local array index to global edge ID"),
    "indexToVertexID": ("unitless", "Mapping from local array index to global vertex ID"),
    "cellsOnEdge": ("unitless", "IDs of cells divided by an edge"),
    "nEdgesOnCell": ("unitless", "Number of edges forming the boundary of a cell"),
    "nEdgesOnEdge": ("unitless", "Number of edges involved in reconstruction of tangential "
                                 "velocity for an edge"),
    "edgesOnCell": ("unitless", "IDs of edges forming the boundary of a cell"),
    "edgesOnEdge": ("unitless", "IDs of edges involved in reconstruction of tangential velocity "
                                "for an edge"),
    "weightsOnEdge": ("unitless", "Weights used in reconstruction of tangential velocity for an "
                                  "edge"),
    "dvEdge": ("m", "Spherical distance between vertex endpoints of an edge"),
    "dcEdge": ("m", "Spherical distance between cells separated by an edge"),
    "angleEdge": ("radians", "Angle between local north and the positive tangential direction of "
                             "an edge"),
    "areaCell": ("m^2", "Spherical area of a Voronoi cell"),
    "areaTriangle": ("m^2", "Spherical area of a Delaunay triangle"),
    "cellsOnCell": ("unitless", "IDs of cells neighboring a cell"),
    "verticesOnCell": ("unitless", "IDs of vertices (corner points) of a cell"),
    "verticesOnEdge": ("unitless", "IDs of the two vertex endpoints of an edge"),
    "edgesOnVertex": ("unitless", "IDs of the edges that meet at a vertex"),
    "cellsOnVertex": ("unitless", "IDs of the cells that meet at a vertex"),
    "kiteAreasOnVertex": ("m^2", "Intersection areas between primal (Voronoi) and dual "
                                 "(triangular) mesh cells"),
    "fCell": ("s^-1", "Coriolis parameter at a cell"),
    "fEdge": ("s^-1", "Coriolis parameter at an edge"),
    "fVertex": ("s^-1", "Coriolis parameter at a vertex"),
    "meshDensity": ("unitless", "Mesh density function (used when generating the mesh) evaluated "
                                "at a cell"),
    "edgeSignOnCell": ("unitless", "Sign for edges surrounding a cell: positive for positive "
                                   "outward normal velocity"),
    "edgeSignOnVertex": ("unitless", "Sign for edges incident with a vertex: positive for "
                                     "positive inward tangential velocity"),
}


def mesh_variable_attributes(name: str) -> dict:
    """{"units", "long_name"} of mesh variable `name` (MESH_VARIABLE_ATTRIBUTES), {} for a
    variable the table does not know (an extra variable of a file, kept as it was)."""
    if name not in MESH_VARIABLE_ATTRIBUTES:
        return {}
    units, long_name = MESH_VARIABLE_ATTRIBUTES[name]
    return {"units": units, "long_name": long_name}


#: Global attribute of a mesh-cache file: the CRC-32 of every variable's bytes as stored (JSON,
#: {name: 8 hex digits}), written by `MeshFileWriter(checksums=True)` and checked by
#: `read_trusted_mesh(checksums=True)`; never copied into another file (`written_attributes`).
CHECKSUM_ATTRIBUTE = "meshops_cache_crc32"


def stored_crc32(arr: np.ndarray, crc: int = 0) -> int:
    """CRC-32 (zlib) of an array's bytes in C order and native byte order, continuing `crc`
    (so rows hashed block by block, in order, give the whole array's CRC). A CRC-32 detects every
    error of one bit, and every burst of up to 32 bits, in what it covers."""
    a = np.ascontiguousarray(arr)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return zlib.crc32(a.reshape(-1).view(np.uint8), crc)


def _stored_checksums(attributes: dict, names, path: str) -> dict:
    """{variable: CRC-32} of a mesh-cache file from its CHECKSUM_ATTRIBUTE; MeshError when the
    attribute is missing or malformed, or does not cover exactly the file's variables `names`."""
    text = attributes.get(CHECKSUM_ATTRIBUTE)
    try:
        crcs = {name: int(value, 16) for name, value in json.loads(str(text)).items()}
    except (TypeError, ValueError, AttributeError) as exc:
        raise MeshError(f"no valid checksum attribute ({exc})", file=path, field=CHECKSUM_ATTRIBUTE,
                        value=text, expected="the CRC-32 of every variable, as JSON") from None
    if set(crcs) != set(names):
        raise MeshError("the checksums do not cover exactly the file's variables", file=path,
                        field=CHECKSUM_ATTRIBUTE, value=sorted(set(crcs) ^ set(names)),
                        expected="one CRC-32 per variable")
    return crcs


def _check_crc32(name: str, raw: np.ndarray, crcs: dict, path: str) -> None:
    crc = stored_crc32(raw)
    if crc != crcs[name]:
        raise MeshError(f"stored bytes have CRC-32 {crc:08x}: the file is corrupt", file=path,
                        field=name, expected=f"CRC-32 {crcs[name]:08x}, recorded in "
                        f"{CHECKSUM_ATTRIBUTE} when the file was written")


# -- reading -------------------------------------------------------------------------------------
#: Byte size of each netCDF classic type code (CDF-1/2/5).
_CDF_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 8}


def classic_expected_size(path: str) -> int | None:
    """Bytes a netCDF classic file (CDF-1, CDF-2 or CDF-5) needs, from its own header: the end of
    its last variable's data (each variable's `begin` offset plus its size, records included).

    None when the file is not a classic netCDF file or its header cannot be parsed (the netCDF
    library then reports the problem). A header cut short gives the file's size + 1.
    """
    with open(path, "rb") as fh:
        head = fh.read(4)
    if len(head) < 4 or head[:3] != b"CDF" or head[3] not in (1, 2, 5):
        return None
    size = os.path.getsize(path)
    chunk = 1 << 16
    while True:     # headers are small: read more only when the parse runs out of bytes
        with open(path, "rb") as fh:
            data = fh.read(chunk)
        end = _classic_header_end(data, head[3])
        if end is not None:
            return None if end < 0 else end
        if chunk >= size:
            return size + 1          # the header itself runs past the end of the file
        chunk *= 16


def _classic_header_end(data: bytes, version: int) -> int | None:
    """End of the last variable's data from a classic header held in `data`; None when `data`
    stops before the header does; -1 when the header is malformed."""
    import struct

    pos = 4
    big = version == 5

    def need(n):
        if pos + n > len(data):
            raise EOFError

    def read_int(wide=big):
        nonlocal pos
        fmt, n = (">q", 8) if wide else (">i", 4)
        need(n)
        value = struct.unpack_from(fmt, data, pos)[0]
        pos += n
        return value

    def read_name():
        nonlocal pos
        n = read_int()
        need(n)
        pos += n + (-n % 4)

    def skip_attributes():
        nonlocal pos
        tag, count = read_int(False), read_int()
        if tag not in (0, 12):
            raise ValueError("not an attribute list")
        for _ in range(count):
            read_name()
            kind, n = read_int(False), read_int()
            nbytes = n * _CDF_TYPE_SIZES.get(kind, 1)
            need(nbytes)
            pos += nbytes + (-nbytes % 4)

    try:
        numrecs = read_int()
        tag, ndims = read_int(False), read_int()
        dim_sizes = []
        for _ in range(ndims):
            read_name()
            dim_sizes.append(read_int())
        skip_attributes()
        tag, nvars = read_int(False), read_int()
        end, record_vars = pos, []
        for _ in range(nvars):
            read_name()
            ids = [read_int() for _ in range(read_int())]
            skip_attributes()
            kind = read_int(False)
            vsize = read_int()
            begin = read_int(version != 1)
            shape = [dim_sizes[i] for i in ids]
            record = bool(shape) and shape[0] == 0 and ids[0] == _unlimited(dim_sizes)
            item = _CDF_TYPE_SIZES.get(kind, 1)
            nbytes = int(np.prod(shape[1:] if record else shape, dtype=np.int64)) * item
            if record:
                record_vars.append((begin, vsize, nbytes))
            else:
                end = max(end, begin + nbytes)
    except EOFError:
        return None
    except (IndexError, ValueError, struct.error):
        return -1
    if record_vars and numrecs > 0 and numrecs != (1 << 32) - 1:
        recsize = record_vars[0][2] if len(record_vars) == 1 else sum(v for _, v, _ in record_vars)
        for begin, _, nbytes in record_vars:
            end = max(end, begin + (numrecs - 1) * recsize + nbytes)
    return end


def _unlimited(dim_sizes: list) -> int:
    """Index of the record (unlimited, stored as length 0) dimension, or -1."""
    return dim_sizes.index(0) if 0 in dim_sizes else -1


def hdf5_expected_size(path: str) -> int | None:
    """Bytes an HDF5 (netCDF-4) file needs: the end-of-file address of its superblock (the file's
    own record of its length). None when the file is not HDF5 or the superblock is unreadable."""
    import struct

    with open(path, "rb") as fh:
        head = fh.read(96)
    if head[:8] != b"\x89HDF\r\n\x1a\n" or len(head) < 12:
        return None
    version = head[8]
    try:
        if version in (0, 1):
            offsets = head[13]
            start = 24 + (4 if version == 1 else 0)
            base, eof = start, start + 2 * offsets
        elif version in (2, 3):
            offsets = head[9]
            base, eof = 12, 12 + 2 * offsets
        else:
            return None
        fmt = {4: "<I", 8: "<Q"}[offsets]
        return int(struct.unpack_from(fmt, head, base)[0] + struct.unpack_from(fmt, head, eof)[0])
    except (KeyError, IndexError, struct.error):
        return None


def _check_complete(path: str) -> None:
    """MeshError when the file is shorter than its own header says (a truncated copy)."""
    size = os.path.getsize(path)
    need = classic_expected_size(path)
    kind = "classic netCDF"
    if need is None:
        need, kind = hdf5_expected_size(path), "HDF5 (netCDF-4)"
    if need is not None and size < need:
        raise MeshError(f"truncated {kind} file: {size} bytes, its header says at least {need}",
                        file=path, value=size, expected="the complete file (copy or download it "
                        "again)")


def _fill_values(var) -> list:
    """The values that mark an unwritten or missing entry of a netCDF variable."""
    import netCDF4

    marks = []
    for attr in ("_FillValue", "missing_value"):
        if attr in var.ncattrs():
            marks.extend(np.atleast_1d(np.asarray(var.getncattr(attr))).tolist())
    if "_FillValue" not in var.ncattrs() and var.dtype.kind in "iuf":
        default = netCDF4.default_fillvals.get(var.dtype.str[1:])
        if default is not None:
            marks.append(default)
    return marks


def _check_fill(name: str, arr: np.ndarray, marks: list, path: str) -> None:
    for mark in marks:
        if isinstance(mark, float) and np.isnan(mark):
            continue
        bad = arr == np.asarray(mark).astype(arr.dtype) if arr.dtype.kind in "iuf" else None
        if bad is not None and bad.any():
            flat = int(np.flatnonzero(bad.ravel())[0])
            idx = tuple(int(i) for i in np.unravel_index(flat, arr.shape))
            raise MeshError("holds the netCDF fill value (an entry never written, or masked as "
                            "missing)", file=path, field=name, index=idx[0] if len(idx) == 1 else idx,
                            value=arr[idx].item(), expected="a written value (write the variable, "
                            "or remove it so that it is derived)")


def _check_default_fill(fields: dict, source: str) -> None:
    """A mesh field holding netCDF's default fill value for its type (an entry never written, read
    without masking, e.g. by xarray from a file without _FillValue) is an error."""
    import netCDF4

    for name, arr in fields.items():
        default = netCDF4.default_fillvals.get(arr.dtype.str[1:])
        if default is not None:
            _check_fill(name, arr, [default], source)


def _read_netcdf(path: str):
    """(dims, {name: (dims, array)}, attributes) of a netCDF file; MeshError if unreadable,
    truncated, or when a mesh variable holds fill values."""
    import netCDF4

    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such mesh file")
    if os.path.isdir(path):
        raise MeshError("is a directory", file=path, expected="an MPAS mesh file (netCDF)")
    _check_complete(path)
    try:
        with netCDF4.Dataset(path, "r") as ds:
            ds.set_auto_maskandscale(False)
            dims = {name: len(d) for name, d in ds.dimensions.items()}
            variables, marks = {}, {}
            for name, v in ds.variables.items():
                variables[name] = (tuple(v.dimensions), np.asarray(v[...]))
                if name in FIELD_DIMS:
                    marks[name] = _fill_values(v)
            attributes = {name: ds.getncattr(name) for name in ds.ncattrs()}
    except (OSError, RuntimeError, ValueError, IndexError, KeyError) as exc:
        raise MeshError(f"cannot read the file as netCDF ({exc})", file=path,
                        expected="a readable netCDF mesh file (classic, 64-bit offset or netCDF-4)"
                        ) from exc
    for name, mark in marks.items():
        _check_fill(name, variables[name][1], mark, path)
    return dims, variables, attributes


def _check_one_based(name: str, raw: np.ndarray, used: np.ndarray | None, n: int, source: str):
    """Check an index field as stored in an MPAS file: 1..n in used slots, 0 in pad slots.

    Reports the file's own (1-based) values. A field whose used slots span 0..n-1 is reported as
    a 0-based file claimed as MPAS.
    """
    target = f"{INDEX_TARGET[name]} = {n}"

    def fail(bad, message, expected):
        if bad.any():
            flat = int(np.flatnonzero(bad.ravel())[0])
            idx = tuple(int(i) for i in np.unravel_index(flat, bad.shape))
            raise MeshError(message, file=source, field=name, index=idx[0] if len(idx) == 1 else idx,
                            value=raw[idx].item(), expected=expected)

    if used is None:
        used = np.ones(raw.shape, dtype=bool)
    if used.any():
        lo, hi = int(raw[used].min()), int(raw[used].max())
        if lo <= 0 and hi == n - 1:
            raise MeshError("the file looks 0-based (used indices span 0..n-1), but MPAS files are "
                            "1-based with 0 pads", file=source, field=name,
                            value=f"min {lo}, max {hi}", expected=f"indices 1..{n} ({target})")
    fail(raw < 0, "negative index in a file claimed as MPAS (a 0-based file with -1 pads?)",
         f"1-based indices 1..{n} ({target}) with 0 pads")
    fail(used & (raw == 0), "0 (the MPAS pad) where an index is required: a missing neighbour, "
         "or a 0-based file", f"1-based indices 1..{n} ({target})")
    fail(raw > n, "index out of range", f"1-based indices 1..{n} ({target})")
    fail(~used & (raw != 0), "pad slot holds a value", "0 (the MPAS pad) beyond the count")


def mesh_from_variables(dims: dict, variables: dict, attributes: dict, *, source: str,
                        one_based: bool, sphere_radius: float | None = None, validate: bool = True,
                        recompute_geometry: bool = False, omega: float = EARTH_OMEGA) -> Mesh:
    """A Mesh from MPAS variables {name: (dims, array)} with dimension sizes `dims`.

    one_based=True: MPAS file convention (1-based, 0 pads), converted here to 0-based, -1 pads.
    The radius is attributes["sphere_radius"] (else |xCell| of cell 0), and the mesh's
    attributes["sphere_radius"] is set to the mesh's radius; with `sphere_radius` given,
    positions and lengths are scaled by r / r_file, areas by (r / r_file)^2. Missing fields are
    derived by `grids.geometry.complete_mesh`. Shapes, counts, index ranges and topology are always
    checked (derivations rely on them), and so are finite positions on the sphere; with `validate`,
    the whole mesh is checked by `validate_mesh` after derivation, including the stored geometry
    against the derived one (unless `recompute_geometry`, where all of it is derived). Entity
    numbers in messages are printed as in the source (1-based when `one_based`). A bad
    `sphere_radius` argument raises ValueError (the caller's, not the file's, error).
    """
    _check_radius_argument(sphere_radius)
    for dim in REQUIRED_DIMS:
        if dim not in dims:
            raise MeshError("missing dimension", file=source, field=dim,
                            expected=f"MPAS dimensions {', '.join(REQUIRED_DIMS)}")
    if str(attributes.get("on_a_sphere", "YES")).strip().upper() != "YES":
        raise MeshError("only spherical meshes are supported", file=source, field="on_a_sphere",
                        value=attributes.get("on_a_sphere"), expected="YES")
    fields, extra = {}, {}
    for name, (vdims, arr) in variables.items():
        if name not in FIELD_DIMS:
            extra[name] = (tuple(vdims), arr)
            continue
        if tuple(vdims) != FIELD_DIMS[name]:
            raise MeshError("wrong dimensions", file=source, field=name, value=tuple(vdims),
                            expected=f"dimensions {FIELD_DIMS[name]}")
        fields[name] = arr
    sizes = {d: dims.get(d) for d in ("nCells", "nEdges", "nVertices", "maxEdges", "maxEdges2",
                                      "vertexDegree", "TWO")}
    with file_index_base(1 if one_based else 0):
        # Shapes, dtypes and counts before touching indices, so nothing below indexes out of bounds.
        check_structure(fields, sizes, source)
        _check_default_fill(fields, source)
        check_counts(fields, sizes, source)
        if one_based:
            for name in INDEX_FIELDS:
                if name in fields:
                    raw = fields[name]
                    _check_one_based(name, raw, used_slots(fields, name),
                                     sizes[INDEX_TARGET[name]], source)
                    fields[name] = raw - raw.dtype.type(1)
        radius_file = _file_radius(attributes, fields, source)
        radius = radius_file if sphere_radius is None else float(sphere_radius)
        if radius != radius_file:
            _scale(fields, extra, radius / radius_file)
        attributes = dict(attributes)
        attributes["sphere_radius"] = np.float64(radius)
        check_fields(fields, sizes, radius, source, geometry=False)
        # The file's own values, before derived fields could carry a NaN elsewhere; the derivation
        # needs finite positions on the sphere, so these run with validate=False too.
        check_finite(fields, source)
        check_sphere(fields, radius, source)
        if not recompute_geometry:
            convert_sign_convention(fields, source, refuse_mixed=validate)

        from .geometry import complete_mesh

        try:
            mesh = complete_mesh(fields, radius, omega=omega, recompute=recompute_geometry,
                                 attributes=attributes, extra=extra)
        except MeshError:
            raise
        except ValueError as exc:
            raise MeshError(f"cannot derive the missing fields ({exc})", file=source,
                            expected="a closed spherical MPAS mesh") from exc
        if validate:
            validate_mesh(mesh, source=source, geometry=not recompute_geometry)
    return mesh


#: (sign field, index field, end field, end slot, count field, name of the opposite convention):
#: the sign is +1 where the entity is end_field[e, end]. Only edgeSignOnCell has a known opposite
#: convention (MPAS-Ocean's); see the module docstring.
SIGN_CONVENTIONS = (
    ("edgeSignOnCell", "edgesOnCell", "cellsOnEdge", 0, "nEdgesOnCell", "MPAS-Ocean's"),
)


def convert_sign_convention(fields: dict, source: str, *, refuse_mixed: bool = True) -> None:
    """Convert a sign field given consistently in the opposite convention (in place in `fields`).

    For each entry of SIGN_CONVENTIONS whose fields are all present (0-based indices, checked):
    every used slot equal to this package's sign -> nothing; every used slot the negative of it ->
    the field is negated in its used slots (pads kept) and "<source>: edgeSignOnCell in the
    opposite convention (MPAS-Ocean's): converted" is logged at info on the "grids" logger; a
    mixture -> MeshError (with `refuse_mixed`) naming the field and the first entry [c, j]
    (0-based position) that disagrees with the convention of the majority of the entries.
    """
    for sign_name, idx_name, end_name, end, count, other in SIGN_CONVENTIONS:
        sign, edges, ends = fields.get(sign_name), fields.get(idx_name), fields.get(end_name)
        if sign is None or edges is None or ends is None or fields.get(count) is None:
            continue
        used = used_slots(fields, idx_name)
        owner = np.arange(edges.shape[0])[:, None]
        want = np.where(ends[np.where(used, edges, 0), end] == owner, 1.0, -1.0)
        ours, flipped = used & (sign == want), used & (sign == -want)
        n_used, n_ours, n_flipped = int(used.sum()), int(ours.sum()), int(flipped.sum())
        if n_ours == n_used:
            continue
        if n_flipped == n_used:
            # pads kept (a negated 0 pad, -0.0, becomes 0.0 again)
            fields[sign_name] = np.where(used, -sign, sign + 0.0).astype(sign.dtype, copy=False)
            log.info("%s: %s in the opposite convention (%s): converted", source, sign_name, other)
            continue
        if refuse_mixed:
            majority_flipped = n_flipped > n_ours
            bad = used & ~(flipped if majority_flipped else ours)
            convention = (f"{other} convention (-1 where the cell is {end_name}[e, {end}]), as "
                          f"{n_flipped} of {n_used} entries are" if majority_flipped else
                          f"+1 where the cell is {end_name}[e, {end}], -1 where it is the other, "
                          f"as {n_ours} of {n_used} entries are")
            _raise_first(bad, sign, source, sign_name,
                         "sign disagrees with the convention of the rest of the field (it mixes "
                         f"this package's and {other} conventions, or holds other values)",
                         f"one convention throughout: {convention}")


# -- MPAS metadata -------------------------------------------------------------------------------
#: Length of a new file_id (MPAS-Tools' MpasMeshConverter: ID_LEN 10, lowercase letters and digits).
FILE_ID_LENGTH = 10
_ID_ALPHABET = string.ascii_lowercase + string.digits


def new_file_id() -> str:
    """A random file_id as MpasMeshConverter writes one: FILE_ID_LENGTH letters and digits."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(FILE_ID_LENGTH))


#: Hex digits of a mesh_id (the first of the SHA-256 of the cells' positions).
MESH_ID_LENGTH = 32


def mesh_id_of(xCell, yCell, zCell) -> str:
    """The mesh_id of a mesh with these cell positions: the first MESH_ID_LENGTH hex digits of
    the SHA-256 of its cells' (xCell, yCell, zCell), as little-endian float64, sorted by x, then
    y, then z. Deterministic: the same cells give the same id, in any cell order (a reordered
    mesh keeps it) and however often the mesh is generated; another mesh, level, Lloyd count or
    radius another id. (file_id, random, names each file.)"""
    import hashlib

    xyz = np.stack([np.asarray(c, dtype="<f8") for c in (xCell, yCell, zCell)], axis=1)
    xyz = xyz[np.lexsort((xyz[:, 2], xyz[:, 1], xyz[:, 0]))]
    return hashlib.sha256(np.ascontiguousarray(xyz).tobytes()).hexdigest()[:MESH_ID_LENGTH]


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second: 2024-05-01T12:00:00Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def history_line(verb: str, what: str) -> str:
    """One `history` line: "<UTC ISO time>: <verb> by meshops grids <what>"."""
    return f"{utc_now()}: {verb} by meshops grids {what}".rstrip()


def append_history(attributes: dict, line: str) -> dict:
    """A copy of `attributes` with `line` appended to its `history` (a new line when it has one)."""
    out = dict(attributes)
    old = out.get("history")
    old = "" if old is None else str(old)
    out["history"] = f"{old}\n{line}" if old.strip() else line
    return out


def mpas_metadata(sizes: dict, sphere_radius: float, *, source: str,
                  mesh_id: str | None = None) -> tuple[dict, dict]:
    """(attributes, extra) that MPAS-Model expects of a new mesh file.

    attributes: on_a_sphere="YES", sphere_radius, is_periodic="NO", x_period=y_period=0.0,
    mesh_spec="1.0", Conventions="MPAS", source, file_id (new, random), parent_id="" (no parent),
    mesh_id (`mesh_id_of` the cell positions, where given), history ("<UTC ISO time>: generated
    by <source>").
    extra: indexToCellID, indexToEdgeID, indexToVertexID (1..n, int32) and meshDensity (nCells,
    float64, 1.0: a uniform mesh).
    """
    attributes = {"on_a_sphere": "YES", "sphere_radius": np.float64(sphere_radius),
                  "is_periodic": "NO", "x_period": np.float64(0.0), "y_period": np.float64(0.0),
                  "mesh_spec": "1.0", "Conventions": "MPAS", "source": source,
                  "file_id": new_file_id(), "parent_id": "",
                  "history": f"{utc_now()}: generated by {source}"}
    if mesh_id is not None:
        attributes["mesh_id"] = mesh_id
    extra = {name: ((dim,), np.arange(1, sizes[dim] + 1, dtype=np.int32))
             for dim, name in ID_NAMES.items()}
    extra["meshDensity"] = (("nCells",), np.ones(sizes["nCells"], dtype=np.float64))
    return attributes, extra


def _check_radius_argument(sphere_radius) -> None:
    """A sphere_radius argument must be None or a finite positive number (the caller's error)."""
    if sphere_radius is None:
        return
    try:
        ok = bool(np.isfinite(float(sphere_radius))) and float(sphere_radius) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"sphere_radius={sphere_radius!r} (argument): expected None (the file's "
                         "radius) or a finite positive radius in m")


def _file_radius(attributes: dict, fields: dict, source: str) -> float:
    if "sphere_radius" in attributes:
        value = np.asarray(attributes["sphere_radius"])
        if value.size != 1 or not np.issubdtype(value.dtype, np.number) \
                or not np.isfinite(value.item()) or value.item() <= 0:
            raise MeshError("bad global attribute", file=source, field="sphere_radius",
                            value=attributes["sphere_radius"], expected="a finite positive number")
        return float(value.item())
    p = np.array([fields["xCell"][0], fields["yCell"][0], fields["zCell"][0]], dtype=np.float64)
    r = float(np.linalg.norm(p))
    if not np.isfinite(r) or r <= 0:
        raise MeshError("no sphere_radius attribute and cell 0 gives no radius", file=source,
                        field="xCell", index=0, value=r, expected="a finite nonzero position")
    return r


def _scale(fields: dict, extra: dict, s: float) -> None:
    """Lengths times s, areas times s^2 (in place in the dicts; arrays are new)."""
    s2 = s * s
    for name in SCALED_LENGTHS:
        if name in fields:
            fields[name] = fields[name] * s
    for name in SCALED_AREAS:
        if name in fields:
            fields[name] = fields[name] * s2
    for name in SCALED_EXTRA_LENGTHS:
        if name in extra and np.issubdtype(extra[name][1].dtype, np.floating):
            extra[name] = (extra[name][0], extra[name][1] * s)


@overload
def read_mesh(path, *, sphere_radius: float | None = ..., validate: bool = ..., reorder: None = ...,
              recompute_geometry: bool = ...) -> Mesh: ...
@overload
def read_mesh(path, *, sphere_radius: float | None = ..., validate: bool = ..., reorder: str,
              recompute_geometry: bool = ...) -> tuple: ...


def read_mesh(path, *, sphere_radius=None, validate=True, reorder=None, recompute_geometry=False):
    """Read an MPAS mesh file (netCDF, 1-based, 0 pads) into a Mesh (0-based, -1 pads).

    path -> Mesh, or (Mesh, MeshPermutation) when `reorder` names a method ("morton", ...).

    - sphere_radius: None keeps the file's radius (attribute `sphere_radius`); a value scales
      positions, dcEdge, dvEdge (and the extra gridSpacing) by r / r_file, areaCell, areaTriangle,
      kiteAreasOnVertex by (r / r_file)^2. lat/lon, angles and weightsOnEdge are unchanged.
    - validate: run `validate_mesh` on the result (geometry, orientation, signs). Index ranges,
      counts and topology are checked always, and signs of a 0-based file (negative indices, 0
      where no pad can be, no index reaching n) are rejected.
    - reorder: renumber cells, edges and vertices with `grids.reorder.reorder_mesh`; the file's
      order is kept when None. See `reorder_keeping_ids` for how the permutation is recorded.
    - recompute_geometry: derive all geometry from positions and connectivity instead of using the
      file's (fields the file lacks, e.g. fCell or edgeSignOnCell, are always derived).

    Raises MeshError (file, field, first bad index, value, expected) for any bad or unreadable file,
    FileNotFoundError when there is no file.
    """
    path = os.fspath(path)
    _check_radius_argument(sphere_radius)
    dims, variables, attributes = _read_netcdf(path)
    mesh = mesh_from_variables(dims, variables, attributes, source=path, one_based=True,
                               sphere_radius=sphere_radius, validate=validate,
                               recompute_geometry=recompute_geometry)
    if reorder is None:
        return mesh
    return reorder_keeping_ids(mesh, reorder)


def read_trusted_mesh(path, *, expect_attributes: dict | None = None,
                      checksums: bool = False) -> Mesh:
    """Read a complete MPAS mesh file that this package wrote itself (the mesh cache) as stored.

    path -> Mesh (0-based, -1 pads). The fast path for a trusted file: every MPAS field must be in
    the file (nothing is derived), and none of the topology, orientation, sphere or geometry checks
    of `read_mesh` run (they dominate its time even with validate=False). What is still checked,
    all cheap: the file is as long as its header says (not truncated), it opens as netCDF, the
    global attributes in `expect_attributes` equal the file's (compared before any array is read),
    every field has its MPAS dimensions, shape and dtype kind, counts and index ranges are valid
    (so that later indexing, on the GPU too, stays in bounds). The file's radius is kept.
    `checksums` (the mesh cache): every variable's bytes as stored must have the CRC-32 recorded
    in the file's CHECKSUM_ATTRIBUTE when it was written (`stored_crc32`), so a flipped bit that
    leaves the values plausible (an area, an index still in range) is not used; the CRCs (zlib
    releases the GIL) run on a thread while the next variable is read (decision 0017).

    Raises MeshError (naming the file and the field or attribute) when any of these fails,
    FileNotFoundError when there is no file.
    """
    import netCDF4

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such mesh file")
    _check_complete(path)
    try:
        with netCDF4.Dataset(path, "r") as ds:
            ds.set_auto_maskandscale(False)
            attributes = {name: ds.getncattr(name) for name in ds.ncattrs()}
            for name, want in (expect_attributes or {}).items():
                have = attributes.get(name)
                same = have is not None and np.array_equal(np.asarray(have), np.asarray(want))
                if not same:
                    raise MeshError("global attribute differs from the one asked for", file=path,
                                    field=name, value=have, expected=repr(want))
            dims = {name: len(d) for name, d in ds.dimensions.items()}
            crcs = _stored_checksums(attributes, ds.variables, path) if checksums else None
            fields, extra, hashed = {}, {}, []
            with ThreadPoolExecutor(max_workers=1) as hasher:    # hashes while the next is read
                for name, v in ds.variables.items():
                    vdims = tuple(v.dimensions)
                    if name in FIELD_DIMS and vdims != FIELD_DIMS[name]:
                        raise MeshError("wrong dimensions", file=path, field=name, value=vdims,
                                        expected=f"dimensions {FIELD_DIMS[name]}")
                    raw = np.asarray(v[...])
                    if crcs is not None:
                        hashed.append(hasher.submit(_check_crc32, name, raw, crcs, path))
                    if name in FIELD_DIMS:
                        fields[name] = raw
                    else:
                        extra[name] = (vdims, raw)
            for done in hashed:              # the first corrupt variable in the file's order
                done.result()
    except MeshError:
        raise
    except (OSError, RuntimeError, ValueError, IndexError, KeyError) as exc:
        raise MeshError(f"cannot read the file as netCDF ({exc})", file=path,
                        expected="a readable netCDF mesh file") from exc
    for dim in REQUIRED_DIMS + ("maxEdges2",):
        if dim not in dims:
            raise MeshError("missing dimension", file=path, field=dim,
                            expected=f"MPAS dimensions {', '.join(REQUIRED_DIMS)}, maxEdges2")
    sizes = {d: dims[d] for d in ("nCells", "nEdges", "nVertices", "maxEdges", "maxEdges2",
                                  "vertexDegree", "TWO")}
    with file_index_base(1):
        check_structure(fields, sizes, path, required=tuple(FIELD_DIMS))
        check_counts(fields, sizes, path)
    from .geometry import INDEX_DTYPE

    for name in INDEX_FIELDS:
        arr = fields[name]
        if arr.dtype != INDEX_DTYPE:
            arr = arr.astype(INDEX_DTYPE)
        arr -= INDEX_DTYPE(1)            # fresh array from the file: convert in place
        fields[name] = arr
    for name in ("nEdgesOnCell", "nEdgesOnEdge"):
        fields[name] = fields[name].astype(INDEX_DTYPE, copy=False)
    with file_index_base(1):             # messages give entity numbers as in the file
        check_indices(fields, sizes, path)
    radius = _file_radius(attributes, fields, path)
    attributes["sphere_radius"] = np.float64(radius)
    for name, arr in fields.items():
        if arr.dtype.kind == "f" and arr.dtype != np.float64:
            fields[name] = arr.astype(np.float64)
    return Mesh(sphere_radius=radius, attributes=attributes, extra=extra, **fields)


ID_NAMES = {"nCells": "indexToCellID", "nEdges": "indexToEdgeID", "nVertices": "indexToVertexID"}


def reorder_keeping_ids(mesh: Mesh, method: str = "morton"):
    """Mesh -> (reordered Mesh, MeshPermutation), the permutation recorded MPAS-style.

    Uses `grids.reorder.reorder_mesh`. Extra variables along nCells / nEdges / nVertices are
    permuted with their entities (new position i takes old perm.cells[i], ...). The extra variables
    indexToCellID, indexToEdgeID, indexToVertexID (1-based global IDs, created as 1..n in the input
    order when absent) travel with their entities, so the written file says where each entity came
    from: new cell i is input cell indexToCellID[i] - 1 when the input held IDs 1..n. The new mesh
    gets a new file_id, with the input's file_id recorded in parent_id (`child_attributes`).
    """
    from .reorder import reorder_mesh

    new, perm = reorder_mesh(mesh, method=method)
    order = {"nCells": perm.cells, "nEdges": perm.edges, "nVertices": perm.vertices}
    extra = dict(mesh.extra)
    sizes = mesh.sizes()
    for dim, name in ID_NAMES.items():
        if name not in extra:
            extra[name] = ((dim,), np.arange(1, sizes[dim] + 1, dtype=np.int32))
    permuted = {}
    for name, (vdims, arr) in extra.items():
        for axis, dim in enumerate(vdims):
            if dim in order and arr.shape[axis] == sizes[dim]:
                arr = np.take(arr, order[dim], axis=axis)
        permuted[name] = (vdims, arr)
    return new.replace(extra=permuted, attributes=child_attributes(mesh.attributes)), perm


def child_attributes(attributes: dict) -> dict:
    """Attributes of a mesh derived from one with `attributes` (e.g. reordered), as MPAS records
    lineage: a new file_id, and parent_id = the parent's file_id, a newline, the parent's parent_id
    (just the file_id when the parent had no parent_id; kept as it was when it had no file_id)."""
    out = dict(attributes)
    parent = str(out.get("file_id", "")).strip()
    if parent:
        grand = str(out.get("parent_id", "")).strip()
        out["parent_id"] = f"{parent}\n{grand}" if grand else parent
    out["file_id"] = new_file_id()
    return out


# -- writing -------------------------------------------------------------------------------------
def _attribute_value(value):
    """Attribute values netCDF accepts in every format (bools as 0/1)."""
    if isinstance(value, (bool, np.bool_)):
        return np.int32(value)
    return value


def _dimension_sizes(mesh: Mesh, path: str) -> dict:
    sizes = dict(mesh.sizes())
    for name, (vdims, arr) in mesh.extra.items():
        if len(vdims) != np.ndim(arr):
            raise MeshError("extra variable's dimensions do not match its array", file=path,
                            field=name, value=f"dims {vdims}, shape {np.shape(arr)}",
                            expected="one dimension name per axis")
        for dim, n in zip(vdims, np.shape(arr)):
            if dim == "Time":
                continue
            if sizes.setdefault(dim, n) != n:
                raise MeshError("extra variable disagrees with a dimension size", file=path,
                                field=name, value=f"{dim} = {n}", expected=f"{dim} = {sizes[dim]}")
    return sizes


def file_attributes(mesh: Mesh) -> dict:
    """The global attributes `write_mesh` writes for `mesh` (before its history line):
    mesh.attributes with on_a_sphere="YES", sphere_radius=mesh.sphere_radius, Conventions="MPAS",
    and is_periodic="NO", mesh_spec="1.0" where the mesh has none."""
    return _file_attributes(mesh.attributes, mesh.sphere_radius)


def _file_attributes(attributes: dict, sphere_radius: float) -> dict:
    attributes = dict(attributes)
    attributes.update(on_a_sphere="YES", sphere_radius=np.float64(sphere_radius),
                      Conventions="MPAS")
    attributes.setdefault("is_periodic", "NO")
    attributes.setdefault("mesh_spec", "1.0")
    return attributes


def written_attributes(attributes: dict, path: str, *, history: str | bool = True,
                       cache_key: bool = False) -> dict:
    """The attributes a writer stores for a mesh with `attributes`: the cache key attributes
    (``meshops_cache_*``) dropped unless `cache_key`, the checksums (CHECKSUM_ATTRIBUTE: those of
    another file) always, and a history line appended unless history=False (see `write_mesh`)."""
    attributes = {k: v for k, v in attributes.items() if k != CHECKSUM_ATTRIBUTE
                  and (cache_key or not k.startswith("meshops_cache_"))}
    if history is not False:
        what = history if isinstance(history, str) else f"write_mesh {os.path.basename(path)}"
        attributes = append_history(attributes, history_line("written", what))
    return attributes


#: Variables stored zlib-compressed (level 1, shuffle filter) in netCDF-4 files when `compress`:
#: the counts, the +-1 signs, the ids and meshDensity, 12 % of a mesh file, which shrink to
#: 0.4-3 % and decompress at over 1 GB/s, so a load is not slower (measured at level 8, decision
#: 0017). compress="connectivity" adds the index fields (`INDEX_FIELDS`, 27 % of the file, which
#: shrink to 20-29 %): the file is a third smaller in all, but a load from memory ~3x slower. The
#: float geometry shrinks only to 70-84 % at ~50 MB/s of compression and is never compressed.
COMPRESSED_VARIABLES = COUNT_FIELDS + (
    "edgeSignOnCell", "edgeSignOnVertex", "indexToCellID", "indexToEdgeID", "indexToVertexID",
    "meshDensity")
#: Target bytes of one HDF5 chunk of a compressed variable (whole rows, a power of two of them).
CHUNK_BYTES = 4 << 20
#: Largest variable (bytes) of a CDF-1 or CDF-2 (64-bit offset) netCDF file.
CLASSIC_VARIABLE_LIMIT = 2**32 - 4


def _field_dtype(name: str):
    return np.int32 if (name in INDEX_FIELDS or name in COUNT_FIELDS) else np.float64


def _chunk_rows(shape: tuple, itemsize: int) -> int:
    """Rows per chunk: a power of two (so that blocks of `grids.geometry.CHUNK` rows fill whole
    chunks) near CHUNK_BYTES, at most the variable's rows."""
    row = itemsize * int(np.prod(shape[1:], dtype=np.int64))
    rows = 1 << max(0, int(CHUNK_BYTES // max(row, 1)).bit_length() - 1)
    return max(1, min(rows, shape[0]))


def _check_format_limits(fmt: str, shapes: dict, path: str) -> None:
    """MeshError when a variable is too large for the classic format `fmt` (4 GiB per variable)."""
    if fmt not in ("NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET"):
        return
    for name, (shape, itemsize) in shapes.items():
        nbytes = itemsize * int(np.prod(shape, dtype=np.int64))
        if nbytes > CLASSIC_VARIABLE_LIMIT:
            raise MeshError(f"variable too large for the {fmt} format ({nbytes} bytes, the format "
                            f"holds at most {CLASSIC_VARIABLE_LIMIT} per variable)", file=path,
                            field=name, value=nbytes,
                            expected="format NETCDF3_64BIT_DATA or NETCDF4 for a mesh this large")


class MeshFileWriter:
    """An MPAS mesh file written one field (or one block of rows) at a time.

    Every variable (the MPAS fields of `grids.mesh.FIELD_DIMS`, int32 indices and counts, float64
    otherwise, and the `extra` variables, written at once) is defined when the file is opened, so a
    classic-format file never re-enters define mode. `put(name, array)` writes a whole field and
    `put_rows(name, rows, block, n)` rows of it; index fields are converted to MPAS's 1-based
    convention (0 pads) one field or block at a time. `close()` raises MeshError naming a field that
    was not written completely (the file has no fill values to show it). netCDF-4 formats: the
    `COMPRESSED_VARIABLES` zlib level 1 with shuffle when `compress`, chunked along their first
    dimension (and the index fields too with compress="connectivity"); every other variable
    contiguous. It is the sink of `grids.geometry.derive_fields`.

    `background`: the conversions and writes run on one writer thread (the only thread that
    touches the file; netCDF releases the GIL while it writes), behind a queue of at most
    `QUEUE_DEPTH` fields, so writing overlaps the computation of the next fields. An error of the
    writer is raised by the next put or by close.

    `checksums` (the mesh cache): the CRC-32 of every variable's bytes as written (`stored_crc32`,
    rows hashed as they are written, in order) is stored in the global attribute
    CHECKSUM_ATTRIBUTE when the file is closed complete.
    """

    #: Fields (or blocks) waiting for the background writer at most.
    QUEUE_DEPTH = 2

    def __init__(self, path: str, *, format: str, sizes: dict, attributes: dict, extra: dict,
                 compress: bool | str = True, background: bool = False, checksums: bool = False):
        import netCDF4

        if compress not in (False, True, "connectivity"):
            raise ValueError(f"{path}: compress={compress!r}, expected False, True or "
                             "'connectivity'")
        self.path, self._netcdf4 = path, format.startswith("NETCDF4")
        self.compress = compress if self._netcdf4 else False
        dims = {**{name: FIELD_DIMS[name] for name in FIELD_DIMS},
                **{name: tuple(vdims) for name, (vdims, _) in extra.items()}}
        dtypes = {**{name: np.dtype(_field_dtype(name)) for name in FIELD_DIMS},
                  **{name: np.asarray(arr).dtype for name, (_, arr) in extra.items()}}
        shapes = {name: (tuple(sizes[d] for d in dims[name] if d != "Time"), dtypes[name].itemsize)
                  for name in dims}
        _check_format_limits(format, shapes, path)
        self._rows = {name: 0 for name in FIELD_DIMS}
        self._size = {name: sizes[FIELD_DIMS[name][0]] for name in FIELD_DIMS}
        self._crc = {} if checksums else None
        self.ds = netCDF4.Dataset(path, "w", format=format, clobber=False)
        try:
            self.ds.set_auto_maskandscale(False)
            self.ds.set_fill_off()
            for name, value in attributes.items():
                self.ds.setncattr(name, _attribute_value(value))
            for dim, n in sizes.items():
                self.ds.createDimension(dim, n)
            self.ds.createDimension("Time", None)
            for name in dims:
                var = self.ds.createVariable(name, dtypes[name], dims[name],
                                             **self._storage(name, dims[name], shapes[name]))
                var.setncatts(mesh_variable_attributes(name))
            for name, (_, arr) in extra.items():
                _write_variable(self.ds, name, np.asarray(arr))
                if checksums:
                    self._crc[name] = stored_crc32(np.asarray(arr))
        except BaseException:
            with contextlib.suppress(Exception):
                close_dataset(self.ds)
            raise
        self._error = None
        self._queue = queue.Queue(maxsize=self.QUEUE_DEPTH) if background else None
        if background:
            self._thread = threading.Thread(target=self._drain, name="mesh-writer", daemon=True)
            self._thread.start()

    def _drain(self) -> None:
        """The background writer: run queued writes in order until the None sentinel; after an
        error, keep draining (so producers never block) but write nothing more."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:
                try:
                    item[0](*item[1:])
                except BaseException as exc:      # noqa: BLE001 - re-raised in the caller's thread
                    self._error = exc

    def _submit(self, *call) -> None:
        if self._queue is None:
            call[0](*call[1:])
            return
        if self._error is not None:
            raise self._error
        self._queue.put(call)

    def _stop(self) -> None:
        """Wait for the background writer to finish what is queued."""
        if self._queue is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _storage(self, name: str, vdims: tuple, shape_item: tuple) -> dict:
        shape, itemsize = shape_item
        if not self._netcdf4 or "Time" in vdims:
            return {}
        chosen = name in COMPRESSED_VARIABLES or (self.compress == "connectivity"
                                                  and name in INDEX_FIELDS)
        if self.compress and chosen and shape and shape[0] > 0:
            return {"compression": "zlib", "complevel": 1, "shuffle": True,
                    "chunksizes": (_chunk_rows(shape, itemsize),) + tuple(shape[1:])}
        return {"contiguous": True}

    @staticmethod
    def _stored(name: str, arr: np.ndarray) -> np.ndarray:
        """The array as MPAS stores it: indices 1-based int32 (0 pads), counts int32."""
        if name in INDEX_FIELDS:
            return np.add(arr, 1, dtype=np.int32)
        if name in COUNT_FIELDS:
            return np.ascontiguousarray(arr, dtype=np.int32)
        return np.ascontiguousarray(arr, dtype=_field_dtype(name))

    def put(self, name: str, array: np.ndarray) -> None:
        """Write the whole field `name` (an MPAS field, 0-based indices with -1 pads)."""
        self._submit(self._put_now, name, array)

    def _put_now(self, name: str, array: np.ndarray) -> None:
        stored = self._stored(name, array)
        _write_variable(self.ds, name, stored)
        if self._crc is not None:
            self._crc[name] = stored_crc32(stored)
        self._rows[name] = self._size[name]

    def put_rows(self, name: str, rows: slice, block: np.ndarray, n: int) -> None:
        """Write rows `rows` of the field `name` (of `n` rows)."""
        self._submit(self._put_rows_now, name, rows, block)

    def _put_rows_now(self, name: str, rows: slice, block: np.ndarray) -> None:
        stored = self._stored(name, block)
        if self._crc is not None and rows.start != self._rows[name]:
            raise MeshError("rows written out of order, so no checksum can be kept", file=self.path,
                            field=name, value=rows.start, expected=f"row {self._rows[name]} next")
        _write_rows(self.ds, name, rows.start, stored)
        if self._crc is not None:
            self._crc[name] = stored_crc32(stored, self._crc.get(name, 0))
        self._rows[name] += rows.stop - rows.start

    def close(self) -> None:
        """Finish the queued writes and close the file; the writer's error if it had one, else
        MeshError if some field was not written completely."""
        self._stop()
        complete = all(rows == self._size[name] for name, rows in self._rows.items())
        if self._crc is not None and self._error is None and complete:
            self.ds.setncattr(CHECKSUM_ATTRIBUTE, json.dumps(
                {name: f"{crc:08x}" for name, crc in self._crc.items()}, separators=(",", ":")))
        close_dataset(self.ds)
        if self._error is not None:
            raise self._error
        for name, rows in self._rows.items():
            if rows != self._size[name]:
                raise MeshError(f"field written incompletely ({rows} of {self._size[name]} rows)",
                                file=self.path, field=name, value=rows,
                                expected=f"{self._size[name]} rows")

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self.abort()

    def abort(self) -> None:
        """Stop after the queued writes and close the file, raising nothing (on an error)."""
        self._stop()
        with contextlib.suppress(Exception):
            close_dataset(self.ds)


def _write_variable(ds, name: str, arr: np.ndarray) -> None:
    """The whole array in one call (one netCDF put of a C-contiguous buffer)."""
    ds[name][...] = np.ascontiguousarray(arr)


def _write_rows(ds, name: str, start: int, arr: np.ndarray) -> None:
    """Rows start .. start + len(arr) of a variable in one call."""
    ds[name][start:start + arr.shape[0]] = np.ascontiguousarray(arr)


def write_mesh(mesh: Mesh, path, *, format: str = "NETCDF3_64BIT_OFFSET",
               history: str | bool = True, cache_key: bool = False, compress: bool | str = False) -> None:
    """Write a Mesh (0-based, -1 pads) as an MPAS mesh file (1-based, 0 pads, int32 indices).

    Mesh -> netCDF file at `path` with MPAS dimension and variable names, each mesh variable with
    its `units` and `long_name` (`MESH_VARIABLE_ATTRIBUTES`), global attributes from mesh.attributes plus on_a_sphere="YES",
    sphere_radius=mesh.sphere_radius, Conventions="MPAS" (is_periodic="NO", mesh_spec="1.0" unless
    given), and the extra variables written back unchanged. format: one of FORMATS.

    history: a line "<UTC ISO time>: written by meshops grids <what>" is appended to the `history`
    attribute (an existing history is kept above it); <what> is `history` when it is a string,
    else "write_mesh <file name>". history=False writes mesh.attributes["history"] as it is (for a
    caller that has already added its line, e.g. the mesh cache). The mesh itself is not changed.
    The attributes that key a cached mesh (``meshops_cache_*``, `grids.cache`) describe the cache
    file only and are written with cache_key=True alone.
    MPAS metadata (indexTo*ID, file_id, ...) is written as the mesh holds it: a generated mesh has
    all of it (`mpas_metadata`), a mesh read from a file what the file had.

    Written atomically: into a temporary file in the same directory, then os.replace; on any error
    the temporary file is removed and `path` is left as it was. Structure, counts and index ranges
    are checked first (MeshError; cheap, they keep the int32 1-based conversion and the file
    well-formed). Nothing is derived or validated beyond that: topology and geometry are the
    business of `validate_mesh` / `read_mesh` (a check of the topology here took most of the write
    time of a large mesh). Fields are written one at a time (`MeshFileWriter`), each in one call,
    so only one field's 1-based copy exists at a time. netCDF-4 formats: every variable contiguous
    and uncompressed by default; with compress=True (the mesh cache and `python -m grids generate`)
    the counts, signs and ids are zlib-compressed (level 1, shuffle; `COMPRESSED_VARIABLES`),
    with compress="connectivity" the index fields as well; the float geometry stays contiguous. Classic formats hold at most 4 GiB per variable
    (NETCDF3_64BIT_OFFSET: edgesOnEdge and weightsOnEdge of level 11 exceed that): MeshError names the
    field; NETCDF3_64BIT_DATA and NETCDF4 have no such limit.
    """
    path = os.fspath(path)
    if format not in FORMATS:
        raise ValueError(f"{path}: netCDF format {format!r} not supported; expected one of {FORMATS}")
    for name, total in mesh.sizes().items():
        if total >= 2**31 - 1:
            raise MeshError("too large for int32 MPAS indices", file=path, field=name, value=total,
                            expected="fewer than 2**31 - 1 entities")
    fields, mesh_sizes = mesh.fields(), mesh.sizes()
    check_structure(fields, mesh_sizes, path, required=tuple(FIELD_DIMS))
    check_counts(fields, mesh_sizes, path)
    check_indices(fields, mesh_sizes, path)
    sizes = _dimension_sizes(mesh, path)
    attributes = _file_attributes(written_attributes(mesh.attributes, path, history=history,
                                                     cache_key=cache_key), mesh.sphere_radius)
    with atomic_path(path) as tmp:
        with MeshFileWriter(tmp, format=format, sizes=sizes, attributes=attributes,
                            extra=mesh.extra, compress=compress) as writer:
            for name, arr in fields.items():
                writer.put(name, arr)
