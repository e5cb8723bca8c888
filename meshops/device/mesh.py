"""The device form of a mesh: its tables on one backend and device, built once and shared.

A `DeviceMesh` holds the tables of `meshops.device.tables` that operators ask for, each built
once on first use: integer connectivity as int32 (one copy for every dtype) and floating
coefficients per dtype. Every operator family and a model's own kernels read the same arrays.

A model builds one explicitly and passes it to operators in place of the mesh:

    dmesh = meshops.DeviceMesh(mesh, xp=cupy)       # or meshops.device_mesh(mesh, xp=cupy)
    meshops.div_e2c(dmesh, F)

Operators also accept the plain mesh: they then use the DeviceMesh that `device_mesh` keeps for
that mesh object, backend, device and policy in a cache inside meshops, which holds the mesh only
weakly (nothing is stored on the mesh; the entry goes when the mesh does).

`tables` is the memory policy: "fast" holds stencil tables in both layouts (row-major, and
slot-major for kernels with one thread per row) and the composed vector-Laplacian stencil;
"lean" holds row-major tables only, runs the vector Laplacian as three passes at every nlev and
the curl and kite gather adjoints through positions into the forward coefficients
(`meshops.device.positions`): less memory, slower gathers at one level per thread and at many
levels.
"""
from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from meshops.device import tables as catalogue
from meshops.device.backend import BACKENDS, array_module, article, backend_name
from meshops.device.kernels import slot_major

POLICIES = ("fast", "lean")
#: The sizes a DeviceMesh copies from its mesh (MPAS dimension names).
SIZES = ("nCells", "nEdges", "nVertices", "maxEdges", "maxEdges2", "vertexDegree")


def check_mesh(mesh):
    """`mesh` if it is a DeviceMesh or has the MPAS sizes of a mesh; else a TypeError saying what a
    mesh must be."""
    if isinstance(mesh, DeviceMesh):
        return mesh
    what = None
    if mesh is None:
        what = "None"
    elif isinstance(mesh, (str, bytes, os.PathLike)):
        what = f"the path {os.fsdecode(mesh)!r}; read it first with grids.read_mesh(path)"
    elif not all(hasattr(mesh, n) for n in ("nCells", "nEdges", "nVertices")):
        missing = [n for n in ("nCells", "nEdges", "nVertices") if not hasattr(mesh, n)]
        what = f"a {type(mesh).__name__} without {', '.join(missing)}"
    if what is not None:
        raise TypeError(f"mesh: expected a mesh with MPAS fields (meshops.contracts.MeshLike, e.g. "
                        f"grids.read_mesh(path)) or a meshops.DeviceMesh, got {what}")
    return mesh


class DeviceMesh:
    """The tables of `mesh` on backend `xp` (numpy or cupy; the current CUDA device), each built
    once on first use; `tables` is the memory policy ("fast" or "lean", module docstring)."""

    def __init__(self, mesh, xp=np, *, tables: str = "fast", _weak: bool = False):
        if isinstance(mesh, DeviceMesh):
            raise TypeError("mesh: expected a mesh, got a DeviceMesh (use it as it is)")
        check_mesh(mesh)
        if tables not in POLICIES:
            raise ValueError(f"DeviceMesh tables: expected one of {POLICIES}, got {tables!r}")
        self.xp = _module(xp)
        self.backend = backend_name(self.xp)
        self.device = self.xp.cuda.runtime.getDevice() if self.xp is not np else -1
        self.policy = tables
        self._mesh = weakref.ref(mesh) if _weak else (lambda mesh=mesh: mesh)
        for name in SIZES:
            setattr(self, name, int(getattr(mesh, name)))
        for name in ("nCellsSolve", "nEdgesSolve", "nVerticesSolve"):   # owned entities, if given
            setattr(self, name, int(getattr(mesh, name, getattr(self, name.replace("Solve", "")))))
        self.host = catalogue.HostTables(mesh) if not _weak else _WeakHostTables(self._mesh)
        self._arrays: dict[tuple, object] = {}

    @property
    def mesh(self):
        """The mesh this DeviceMesh was built from."""
        mesh = self._mesh()
        if mesh is None:
            raise ReferenceError("DeviceMesh: its mesh no longer exists")
        return mesh

    def table(self, name: str, dtype=None, *, slot_major: bool = False):
        """Table `name` on this backend: int32 for connectivity (dtype ignored), `dtype` for
        coefficients; transposed (slot m of every row contiguous) when `slot_major`."""
        kind = catalogue.entry(name).kind
        dt = np.dtype(np.int32) if kind == "int" else np.dtype(dtype if dtype is not None else np.float64)
        key = (name, dt.str, bool(slot_major))
        array = self._arrays.get(key)
        if array is None:
            a = self.host[name]
            a = a.astype(dt, copy=False)
            if slot_major and a.ndim == 2:
                a = a.T
            array = self.xp.ascontiguousarray(self.xp.asarray(a))
            self._arrays[key] = array
        return array

    def level_table(self, name: str, nVertLevels: int, build, dtype=None):
        """Table `name` of columns of `nVertLevels` layers on this backend, in `dtype`: the
        coefficients per level of a vertical operator (the same in every column), `build(
        nVertLevels)` as a float64 NumPy array, built once per level count and dtype."""
        dt = np.dtype(dtype if dtype is not None else np.float64)
        key = (f"{name}@{int(nVertLevels)}", dt.str, False)
        array = self._arrays.get(key)
        if array is None:
            array = self.xp.ascontiguousarray(self.xp.asarray(build(int(nVertLevels)).astype(dt)))
            self._arrays[key] = array
        return array

    def prebuild(self, names, threads: int | None = None) -> None:
        """Build the host tables `names` now, side by side on threads (`HostTables.build`), so
        that `table` then only converts and copies them to the backend."""
        self.host.build(names, threads)

    def stencil(self, names, fields, dtype=None):
        """Tables `names` for a gather kernel on `fields`, slot-major where `slot_major(fields)`
        says so and the policy holds that layout, and the kernel's slotStride argument (1, or
        the tables' row count)."""
        slots = self.policy == "fast" and slot_major(fields)
        dtype = fields[0].dtype if dtype is None else dtype
        arrays = [self.table(n, dtype, slot_major=slots) for n in names]
        return arrays, np.int32(arrays[0].shape[-1] if slots else 1)

    def tables(self) -> dict[str, int]:
        """{"name [dtype]" (with " (slot-major)" for that layout): bytes} of the tables held."""
        return {f"{name} [{np.dtype(dt).name}]{' (slot-major)' if sm else ''}": int(a.nbytes)
                for (name, dt, sm), a in self._arrays.items()}

    def nbytes(self) -> int:
        """Bytes of every table held on this backend."""
        return sum(self.tables().values())

    def release(self) -> None:
        """Drop the backend's tables (they are built again on next use)."""
        self._arrays.clear()

    def __repr__(self) -> str:
        return (f"DeviceMesh(nCells={self.nCells}, nEdges={self.nEdges}, nVertices={self.nVertices}, "
                f"backend={self.backend!r}, device={self.device}, tables={self.policy!r}, "
                f"{len(self._arrays)} tables, {self.nbytes() / 2**20:.1f} MiB)")


class _WeakHostTables(catalogue.HostTables):
    """HostTables reading the mesh through a weak reference (the cached DeviceMesh's)."""

    def __init__(self, ref):
        self._ref = ref
        self._built = {}
        self._locks, self._guard = {}, threading.Lock()

    @property
    def mesh(self):
        mesh = self._ref()
        if mesh is None:
            raise ReferenceError("DeviceMesh: its mesh no longer exists")
        return mesh


def _module(xp):
    if isinstance(xp, str):
        if BACKENDS.get(xp) is None:
            raise ValueError(f"DeviceMesh xp: expected one of {[k for k, v in BACKENDS.items() if v]}, "
                             f"got {xp!r}")
        return BACKENDS[xp]
    return xp


_CACHE: dict[int, tuple] = {}


def device_mesh(mesh, xp=np, *, tables: str = "fast") -> DeviceMesh:
    """The DeviceMesh of `mesh` on `xp` (current device) under policy `tables`: the one operators
    use when given the plain mesh, built once and kept while the mesh object lives."""
    if isinstance(mesh, DeviceMesh):
        return mesh
    check_mesh(mesh)
    xp = _module(xp)
    device = xp.cuda.runtime.getDevice() if xp is not np else -1
    key = (backend_name(xp), device, tables)
    hit = _CACHE.get(id(mesh))
    if hit is None or hit[0]() is not mesh:
        hit = (weakref.ref(mesh), {})
        _CACHE[id(mesh)] = hit
        weakref.finalize(mesh, _forget, id(mesh), hit[0])
    meshes = hit[1]
    if key not in meshes:
        meshes[key] = DeviceMesh(mesh, xp, tables=tables, _weak=True)
    return meshes[key]


def _forget(key, ref):
    if key in _CACHE and _CACHE[key][0] is ref:
        del _CACHE[key]


def for_fields(mesh, *fields) -> DeviceMesh:
    """The DeviceMesh an operator on `fields` reads: `mesh` itself if it is a DeviceMesh on the
    fields' backend and device (else a ValueError), the cached one of a plain mesh otherwise."""
    xp = array_module(*fields)
    if not isinstance(mesh, DeviceMesh):
        return device_mesh(check_mesh(mesh), xp)
    device = xp.cuda.runtime.getDevice() if xp is not np else -1
    if backend_name(xp) != mesh.backend or device != mesh.device:
        raise ValueError(f"mesh: a DeviceMesh on {mesh.backend} device {mesh.device}, the fields on "
                         f"{backend_name(xp)} device {device}; expected the same (build one with "
                         f"meshops.DeviceMesh(mesh, xp=...) for their backend)")
    return mesh


def check_field(x, mesh, name: str, location: str):
    """Check that `x` is a float32/float64 array of shape (n,) or (n, nlev), n the number of
    `location` entities of `mesh`, and return it contiguous; a TypeError names a mesh or field
    that is not one."""
    n = getattr(check_mesh(mesh), catalogue.SIZE_OF[location])
    what = f"{article(location)} field of shape ({n},) or ({n}, nlev)"
    if not (hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(x, "ndim")):
        raise TypeError(f"{name}: expected {what} (a NumPy or CuPy array), got {type(x).__name__}")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64 {location} field, got dtype {x.dtype}")
    if x.ndim not in (1, 2) or x.shape[0] != n:
        raise ValueError(f"{name}: expected {what}, got shape {tuple(x.shape)}")
    return array_module(x).ascontiguousarray(x)
