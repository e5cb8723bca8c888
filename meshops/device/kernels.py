"""Declaration, lazy compilation and launch of the CUDA kernels in `meshops/cuda/`.

Each operator family keeps its forward and adjoint kernels in one `.cu` file, templated on the
floating type `T` and the lane width `W` (levels per thread); the generic one-table gather and
scatter of stencil.cuh (`GATHER`, `SCATTER`) serve every family that lists them. Every kernel is
declared once (`Kernel`: its arguments in order, each with its role), so a call passes each array
once, by name, and a wrong argument raises an error naming the kernel and the argument.

A `Launcher` turns a call into a launch: it reads the tuning of the device's architecture
(meshops/device/tuning.py) for the lane width, grid, offset width and the level count compiled in,
compiles a module with NVRTC on first use (the kernels of the launched one's group, `Kernel`; cached
per source directory, family, group, dtype, W, lanes per row, offset width, device and block size)
and runs it. `use_launcher` installs another one (tests on
the host, benchmark variants); `observe_launches` reports every launch (byte counting, tests).
Nothing here touches CUDA at import time.

Every kernel takes `(..., first, last, nlev)` last: it runs one logical thread per (row, lane) of
its output rows [first, last), a lane being W consecutive levels, nlev counted in lanes. A vertical
kernel (`Kernel(..., threads=...)`) reads and writes fields of different level counts (layers,
interfaces, one value per column: `VERTICAL_LEVELS`) at one level per thread (W = 1): one thread
per column (`threads="column"`, nlev = 1 lane), one warp per column (`threads="warp"`, nlev =
`WARP_LANES` lanes: meshops/cuda/warp_column.cuh) or one thread per (row, level) of its first `out`
field (`threads="level"`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import pathlib
from typing import Callable, NamedTuple

import numpy as np

from meshops.device.tuning import Tuning, tuning_for

CUDA_DIR = pathlib.Path(__file__).parent.parent / "cuda"
BLOCK_SIZE = 256
#: Largest offset of 32-bit offset arithmetic (MESHOPS_OFFSET32).
INT32_MAX = 2**31 - 1
_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
#: Argument roles: int32 tables, tables in the fields' dtype, fields read, fields written at the
#: kernel's rows, fields written at rows of another location (each entry by one thread, no atomics:
#: a cell kernel writing edge fields), int scalars, floating scalars in the fields' dtype.
ROLES = ("idx", "coef", "in", "out", "put", "int", "real")
_FIELD_ROLES = ("in", "out", "put")
#: The levels of a vertical kernel's fields ("role:name:where"), given nVertLevels N.
VERTICAL_LEVELS = {"layer": lambda N: (N,), "interface": lambda N: (N + 1,), "column": lambda N: ()}
THREADS = ("column", "warp", "level")
_INT32 = np.dtype(np.int32)
_REAL = (int, float, np.integer, np.floating)
#: Threads of a warp: the lanes per row of a `threads="warp"` kernel.
WARP_LANES = 32


def cuda_sources() -> list[pathlib.Path]:
    """Every CUDA source of the package (CI compiles each with nvcc)."""
    return sorted(CUDA_DIR.glob("*.cu"))


# -- declarations --------------------------------------------------------------------------------

class Kernel:
    """A kernel's arguments before `(first, last, nlev)`, declared once as "role:name" in order
    (roles: `ROLES`), e.g. Kernel("grad_2e", "idx:ends coef:invLength in:x out:grad").

    A vertical kernel gives `threads` ("column", "warp" or "level", module docstring), an `int:nVertLevels`
    argument and each field as "role:name:where", `where` a key of `VERTICAL_LEVELS`, e.g.
    Kernel("avg_i2l", "in:x:interface out:y:layer int:nVertLevels", threads="level").
    `group`: the kernels of a family compiled together (a module holds one group's kernels of
    one lane shape), e.g. a model's forward, tangent-linear and adjoint kernels apart, so that a
    run compiles the kernels it launches and few others."""

    def __init__(self, name: str, signature: str, *, threads: str | None = None, group: str = ""):
        self.name = name
        self.group = group
        items = [item.split(":") for item in signature.split()]
        if threads is not None and threads not in THREADS:
            raise ValueError(f"kernel {name}: threads {threads!r}; expected one of {THREADS} or None")
        self.threads = threads
        self.levels = {i[1]: i[2] for i in items if len(i) == 3}
        bad = [":".join(a) for a in items if a[0] not in ROLES or not (
            len(a) == 2 and (threads is None or a[0] not in _FIELD_ROLES)
            or len(a) == 3 and threads is not None and a[0] in _FIELD_ROLES and a[2] in VERTICAL_LEVELS)]
        if bad:
            raise ValueError(f"kernel {name}: arguments {bad}: expected role:name with a role in {ROLES}"
                             + (f", fields as role:name:where with where in {tuple(VERTICAL_LEVELS)}"
                                if threads else ""))
        self.arguments = tuple((a[0], a[1]) for a in items)
        if threads is not None and ("int", "nVertLevels") not in self.arguments:
            raise ValueError(f"kernel {name}: a vertical kernel needs an int:nVertLevels argument")
        self.fields = tuple(n for role, n in self.arguments if role in _FIELD_ROLES)
        if threads == "level":      # its first out field decides the threads (first in `fields`)
            first_out = next(n for role, n in self.arguments if role == "out")
            self.fields = (first_out,) + tuple(f for f in self.fields if f != first_out)
        self.scatters = name.endswith("_atomic")
        self._names = frozenset(n for _, n in self.arguments)
        # `bind`'s checks, the fields first (the first one decides dtype and levels)
        self._checked = tuple(sorted(self.arguments, key=lambda a: a[0] not in _FIELD_ROLES))
        # The kernels a module of this one compiles: its group's that launch with the same lanes
        # (a warp, a column or a level per thread, or lanes of W levels; `Launcher.launch`).
        self.compiled_with = (group, threads if threads in ("warp", "column") else
                              "scatter" if self.scatters else "lanes")

    def bind(self, n: int, arguments: dict):
        """(argument values in the kernel's order, the level-carrying fields): `arguments` checked
        against the declaration, the fields first (the first one decides dtype and levels); `n`
        is the kernel's row count (rows of its `out` fields unless it scatters; `put` fields live
        at another location); `real` scalars are passed in the fields' dtype."""
        if arguments.keys() != self._names:
            names = [n_ for _, n_ in self.arguments]
            missing, extra = [a for a in names if a not in arguments], sorted(set(arguments) - self._names)
            raise TypeError(f"kernel {self.name}: missing arguments {missing}, unexpected {extra}; "
                            f"expected {names}")
        fields = [arguments[f] for f in self.fields]
        ref = fields[0]
        dtype = ref.dtype
        if dtype not in _CTYPES:
            raise TypeError(f"kernel {self.name}, argument {self.fields[0]}: expected float32 or "
                            f"float64, got dtype {dtype}")
        if self.threads is not None:
            nlev = int(arguments["nVertLevels"])
            levels_of = {where: shape(nlev) for where, shape in VERTICAL_LEVELS.items()}
        values = {}
        for role, name in self._checked:
            value = arguments[name]
            if role == "int":
                if not isinstance(value, (int, np.integer)) or not -INT32_MAX - 1 <= value <= INT32_MAX:
                    raise TypeError(f"kernel {self.name}, argument {name}: expected a 32-bit "
                                    f"integer, got {value!r}")
                values[name] = np.int32(value)
                continue
            if role == "real":
                if isinstance(value, (bool, np.bool_)) or not isinstance(value, _REAL):
                    raise TypeError(f"kernel {self.name}, argument {name}: expected a real number, "
                                    f"got {value!r}")
                values[name] = dtype.type(value)
                continue
            expected = _INT32 if role == "idx" else dtype
            if getattr(value, "dtype", None) != expected or not value.flags.c_contiguous:
                raise TypeError(f"kernel {self.name}, argument {name}: expected a C-contiguous "
                                f"{expected} array, got {type(value).__name__} of dtype "
                                f"{getattr(value, 'dtype', None)}")
            if role in _FIELD_ROLES:
                if self.threads is not None:
                    where = self.levels[name]
                    if value.shape[1:] != levels_of[where]:
                        raise ValueError(f"kernel {self.name}, argument {name}: expected {where} "
                                         f"levels {levels_of[where]} (nVertLevels={nlev}), got shape "
                                         f"{tuple(value.shape)}")
                elif value.shape[1:] != ref.shape[1:]:
                    raise ValueError(f"kernel {self.name}, argument {name}: expected levels "
                                     f"{tuple(ref.shape[1:])} as {self.fields[0]}, got shape "
                                     f"{tuple(value.shape)}")
            if role == "out" and not self.scatters and value.shape[0] != n:
                raise ValueError(f"kernel {self.name}, argument {name}: expected {n} rows, got "
                                 f"shape {tuple(value.shape)}")
            values[name] = value
        return tuple(values[name] for _, name in self.arguments), fields


#: out[r] = sum_m coef[r, m] * x[idx[r, m]] over output rows r (stencil.cuh); see `Family.gather`.
GATHER = "stencil_gather_rows"
#: out[idx[r, m]] += coef[r, m] * g[r] over rows r (atomicAdd, stencil.cuh); see `Family.scatter`.
SCATTER = "stencil_scatter_atomic"
#: out[t] = sum_m coef.flat[p] * x[p // S], p = pos[t, m] >= 0 (stencil.cuh): a gather adjoint read
#: through positions into the forward coefficients (the "lean" tables, `meshops.device.positions`).
GATHER_POSITIONS = "stencil_gather_positions"
_SHARED = {GATHER: Kernel(GATHER, "idx:idx coef:coef in:x out:out int:S int:slotStride"),
           SCATTER: Kernel(SCATTER, "idx:idx coef:coef in:g out:out int:S"),
           GATHER_POSITIONS: Kernel(GATHER_POSITIONS,
                                    "idx:pos coef:coef in:x out:out int:S int:ST int:slotStride")}


# -- the device and the launcher -----------------------------------------------------------------

class DeviceProperties(NamedTuple):
    """What a launch needs to know of its GPU."""
    index: int
    architecture: str        # "sm_" + compute capability, the key of meshops.device.tuning.TUNING
    multiprocessors: int
    threads_per_sm: int      # resident threads per multiprocessor

    def resident_blocks(self, block_size: int) -> int:
        """Blocks of `block_size` threads the device holds at once."""
        return self.multiprocessors * max(1, self.threads_per_sm // block_size)


@functools.lru_cache(maxsize=None)
def _cuda_properties(index: int) -> DeviceProperties:
    import cupy

    p = cupy.cuda.runtime.getDeviceProperties(index)
    return DeviceProperties(index, f"sm_{p['major']}{p['minor']}", p["multiProcessorCount"],
                            p["maxThreadsPerMultiProcessor"])


def cuda_device() -> DeviceProperties:
    """The properties of CuPy's current device."""
    import cupy

    return _cuda_properties(cupy.cuda.runtime.getDevice())


class Module(NamedTuple):
    """What a compiled module is specific to (the key of its cache)."""
    sources: pathlib.Path
    family: str
    names: tuple             # the kernels compiled: the launched one's group (`Kernel`)
    ctype: str
    width: int               # W, levels per lane
    lanes: int               # lanes per row compiled in (MESHOPS_NLEV; 0: at run time)
    offset32: bool           # MESHOPS_OFFSET32
    device: DeviceProperties
    block_size: int


@functools.lru_cache(maxsize=None)
def headers_digest(sources: pathlib.Path) -> str:
    """A digest of the headers (*.cuh) on a module's include path (`sources` and meshops/cuda).
    CuPy's kernel cache is keyed on the source and the options, not on the headers it includes:
    with the digest among the options, a changed header compiles anew."""
    digest = hashlib.sha256()
    for directory in sorted({pathlib.Path(sources), CUDA_DIR}):
        for header in sorted(directory.glob("*.cuh")):
            digest.update(header.name.encode() + b"\0" + header.read_bytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def nvrtc_compile(module: Module) -> dict:
    """{kernel name: CuPy kernel} of `module`, compiled with NVRTC (once per module)."""
    import cupy

    source = (module.sources / f"{module.family}.cu").read_text()
    expressions = [f"{name}<{module.ctype}, {module.width}>" for name in module.names]
    options = ("-std=c++17", f"-I{module.sources}", f"-I{CUDA_DIR}",
               f"-DMESHOPS_HEADERS={headers_digest(module.sources)}",
               f"-DMESHOPS_BLOCK_SIZE={module.block_size}",
               f"-DMESHOPS_THREADS_PER_SM={module.device.threads_per_sm}",
               f"-DMESHOPS_NLEV={module.lanes}") + (("-DMESHOPS_OFFSET32",) if module.offset32 else ())
    compiled = cupy.RawModule(code=source, options=options, name_expressions=expressions)
    return {name: compiled.get_function(expr) for name, expr in zip(module.names, expressions)}


class Launch(NamedTuple):
    """One launch, as `observe_launches` reports it."""
    family: str
    kernel: str
    arguments: dict          # name -> value, as declared
    width: int
    lanes: int               # lanes per row compiled in (0: at run time)
    offset32: bool
    blocks: int
    max_passes: int | None


@dataclasses.dataclass(frozen=True)
class Launcher:
    """Launches kernels on a device: `device` gives its properties, `compile` a Module's kernels
    (callables (grid, block, args)), `address` an array's device address (lane alignment);
    `tuning` overrides the architecture's (meshops.device.tuning); below `offset32_limit` offsets
    are 32-bit."""
    device: Callable[[], DeviceProperties] = cuda_device
    sources: pathlib.Path = CUDA_DIR
    compile: Callable[[Module], dict] = nvrtc_compile
    address: Callable[[object], int] = lambda a: a.data.ptr
    tuning: Tuning | None = None
    offset32_limit: int = INT32_MAX
    block_size: int = BLOCK_SIZE

    def replace(self, **changes) -> "Launcher":
        return dataclasses.replace(self, **changes)

    def tuning_of(self, device: DeviceProperties) -> Tuning:
        return self.tuning or tuning_for(device.architecture)

    def lane_width(self, fields, lane_bytes: int) -> int:
        """Levels per thread for `fields` (all of one dtype and level count): the most that fill
        an aligned lane of at most `lane_bytes` and divide nlev (1 for fields without levels)."""
        x = fields[0]
        if x.ndim == 1:
            return 1
        nlev, itemsize = int(x.shape[1]), x.dtype.itemsize
        width = lane_bytes // itemsize
        while width > 1 and (nlev % width or any(self.address(f) % (width * itemsize) for f in fields)):
            width //= 2
        return width

    def grid_blocks(self, n_threads: int, lanes: int, max_passes: int | None,
                    device: DeviceProperties | None = None) -> int:
        """Blocks of a launch of n_threads logical threads, `lanes` lanes per row, never more than
        the work needs: with several lanes per row the tuning's blocks_per_resident_lanes x the
        resident blocks; with one, blocks_per_resident_rows x, or more so that no thread runs
        more than `max_passes` grid-stride passes (None: no bound)."""
        device = device or self.device()
        tuning, resident = self.tuning_of(device), device.resident_blocks(self.block_size)
        need = -(-n_threads // self.block_size)
        if lanes > 1:
            return min(need, tuning.blocks_per_resident_lanes * resident)
        blocks = tuning.blocks_per_resident_rows * resident
        if max_passes is not None:
            blocks = max(blocks, -(-need // max_passes))
        return min(need, blocks)

    def offsets_fit_int32(self, args, loop_end: int) -> bool:
        """Whether a launch may use 32-bit offsets: every array argument has at most
        `offset32_limit` elements (each offset a kernel forms indexes one of them) and so does the
        logical thread index, which reaches below `loop_end` = last row * lanes per row + the
        threads of the grid."""
        limit = self.offset32_limit
        return loop_end <= limit and all(a.size <= limit for a in args if getattr(a, "ndim", 0))

    def launch(self, family: "Family", kernel: Kernel, n: int, arguments: dict, rows=None, *,
               fixed_nlev=True, wide=False) -> None:
        """Run `kernel` of `family` over rows [first, last) of its n rows (`rows`, default all).

        The declared fields decide the dtype, nlev and lane width: lanes of the tuning's
        lane_bytes, or wide_lane_bytes when `wide` or the tuning lists the kernel in wide_lanes
        (with 32-bit offsets only: MESHOPS_INSTANTIATE_WIDE). Scatter kernels (`*_atomic`) run
        one level per thread: atomics on adjacent levels from adjacent threads coalesce, per-lane
        atomics of one thread do not. Vertical kernels run one level per thread too (their fields
        hold different level counts), a column kernel one lane per row, a warp kernel a warp's. The module is compiled for this nlev (in lanes) unless
        `fixed_nlev` is false or nlev is one lane and the tuning lists the kernel in runtime_nlev,
        and with 32-bit offsets when they fit unless the tuning lists it in offsets64.
        """
        values, fields = kernel.bind(n, arguments)
        first, last = check_rows(rows, n)
        if last <= first:
            return
        device = self.device()
        tuning, name = self.tuning_of(device), kernel.name
        passes = None if name in tuning.unbounded_passes else tuning.max_passes
        dtype = np.dtype(fields[0].dtype)
        wide = (wide or tuning.wide(name, dtype)) and name not in tuning.offsets64
        for lane_bytes in (tuning.wide_lane_bytes, tuning.lane_bytes) if wide else (tuning.lane_bytes,):
            width = 1 if kernel.scatters or kernel.threads else self.lane_width(fields, lane_bytes)
            nlev = (1 if fields[0].ndim == 1 or kernel.threads == "column"
                    else WARP_LANES if kernel.threads == "warp" else int(fields[0].shape[1])) // width
            blocks = self.grid_blocks((last - first) * nlev, nlev, passes, device)
            offset32 = (name not in tuning.offsets64
                        and self.offsets_fit_int32(values, last * nlev + blocks * self.block_size))
            if offset32:
                break
        fixed_nlev = fixed_nlev and not (nlev == 1 and name in tuning.runtime_nlev)
        lanes = nlev if fixed_nlev else 0
        module = Module(family.sources or self.sources, family.family, family.groups[name], _CTYPES[dtype], width, lanes,
                        bool(offset32), device, self.block_size)
        for observe in _OBSERVERS:
            observe(Launch(family.family, name, dict(arguments), width, lanes, bool(offset32),
                           blocks, passes))
        self.compile(module)[name]((blocks,), (self.block_size,),
                                   values + (np.int32(first), np.int32(last), np.int32(nlev)))


_ACTIVE = [Launcher()]
_OBSERVERS: list = []


def launcher() -> Launcher:
    """The launcher every family uses now."""
    return _ACTIVE[-1]


def tuning() -> Tuning:
    """The tuning of the current launcher on its current device."""
    current = launcher()
    return current.tuning_of(current.device())


@contextlib.contextmanager
def use_launcher(replacement: Launcher):
    """Launch through `replacement` while the context is active (host harness, benchmark variants)."""
    _ACTIVE.append(replacement)
    try:
        yield replacement
    finally:
        _ACTIVE.remove(replacement)


@contextlib.contextmanager
def observe_launches(callback: Callable[[Launch], None]):
    """Call `callback(Launch)` before every launch while the context is active."""
    _OBSERVERS.append(callback)
    try:
        yield callback
    finally:
        _OBSERVERS.remove(callback)


def check_rows(rows, n: int) -> tuple[int, int]:
    """(first, last) of `rows` (None: all n rows), checked against 0 <= first <= last <= n."""
    if rows is None:
        return 0, n
    first, last = (int(r) for r in rows)
    if not 0 <= first <= last <= n:
        raise ValueError(f"rows: expected (first, last) with 0 <= first <= last <= {n}, got {tuple(rows)}")
    return first, last


# -- stencil layout -------------------------------------------------------------------------------

def slot_major(fields) -> bool:
    """Whether gather kernels on `fields` read stencil tables slot-major: when one thread owns a
    whole row (one lane per row), the threads of a warp walk consecutive rows and slot-major
    tables coalesce; otherwise the lanes of a row share it and row-major tables do."""
    x = fields[0]
    return x.ndim == 1 or int(x.shape[1]) == launcher().lane_width(fields, tuning().lane_bytes)


# -- families ------------------------------------------------------------------------------------

class Family:
    """The kernels of `meshops/cuda/{family}.cu`, each a `Kernel` or the name of a stencil.cuh one
    (`GATHER`, `SCATTER`, `GATHER_POSITIONS`), launched over output rows. `sources`: the directory
    of a family kept outside meshops (a model's kernels beside the model), compiled with
    meshops/cuda on the include path; None: the launcher's (meshops/cuda)."""

    def __init__(self, family: str, kernels, *, sources: pathlib.Path | None = None):
        self.family = family
        self.sources = None if sources is None else pathlib.Path(sources)
        self.kernels = {k.name: k for k in (_SHARED[k] if isinstance(k, str) else k for k in kernels)}
        self.names = tuple(self.kernels)
        self.groups = {name: tuple(n for n, k in self.kernels.items() if k.compiled_with == kernel.compiled_with)
                       for name, kernel in self.kernels.items()}

    def launch(self, name: str, n: int, *, rows=None, **arguments) -> None:
        """Run kernel `name` over rows [first, last) of its n rows (`rows`, default all), with its
        declared arguments by name (`Launcher.launch`)."""
        kernel = self.kernels.get(name)
        if kernel is None:
            raise KeyError(f"family {self.family}: no kernel {name!r}; declared: {list(self.kernels)}")
        launcher().launch(self, kernel, n, arguments, rows)

    def gather(self, n: int, idx, coef, x, out, *, slot_stride=1, rows=None) -> None:
        """out[r, k] = sum_{m < S} coef[r, m] * x[idx[r, m], k] (idx -1: no term) for rows
        [first, last) of the n output rows: `GATHER`, which the family must list. idx and coef are
        (n, S) row-major tables, or slot-major ones with `slot_stride` = their row count
        (`DeviceMesh.stencil`), which take nlev at run time where the tuning says so. Wide lanes up
        to the tuning's wide_gather_slots."""
        slot_stride = int(slot_stride)
        width = idx.shape[1] if slot_stride == 1 else idx.size // slot_stride
        current = launcher()
        tuned = current.tuning_of(current.device())
        wide = width <= tuned.wide_gather_slots.get(x.dtype.itemsize, 0)
        fixed_nlev = slot_stride == 1 or not tuned.slot_major_runtime_nlev
        current.launch(self, self.kernels[GATHER], n, dict(idx=idx, coef=coef, x=x, out=out, S=width,
                       slotStride=slot_stride), rows, fixed_nlev=fixed_nlev, wide=wide)

    def scatter(self, n: int, idx, coef, g, out) -> None:
        """out[idx[r, m], k] += coef[r, m] * g[r, k] (idx -1: no term) for the n rows of the
        row-major (n, S) tables idx and coef: `SCATTER`, which the family must list; out must
        hold zeros (or what the sums add to)."""
        self.launch(SCATTER, n, idx=idx, coef=coef, g=g, out=out, S=idx.shape[1])
