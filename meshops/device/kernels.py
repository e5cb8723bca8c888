"""Lazy compilation of the CUDA sources in `meshops/cuda/` and their launch.

Each operator family keeps its forward and adjoint kernels in one `.cu` file, templated on the
floating type `T` and the lane width `W` (levels per thread, see `lane_width`); the generic
one-table gather and scatter of stencil.cuh (`GATHER`, `SCATTER`) serve every family that lists
them. A module is compiled with NVRTC on first use and cached per (family, device, dtype, W, lanes
per row, offset width, BLOCK_SIZE): the lanes per row are a compile-time constant (MESHOPS_NLEV),
so the row/lane split and the field offsets compile to shifts and multiplies; offsets are 32-bit
integers when every array of the launch fits (MESHOPS_OFFSET32, `offsets_fit_int32`); the block
size and the device's resident threads per multiprocessor bound the register use of kernels marked
MESHOPS_FULL_OCCUPANCY.
Nothing here touches CUDA at import time.

Every kernel takes `(..., first, last, nlev)` last: it runs one logical thread per (row, lane) of
its output rows [first, last), a lane being W consecutive levels, nlev counted in lanes.
"""
from __future__ import annotations

import functools
import pathlib

import numpy as np

CUDA_DIR = pathlib.Path(__file__).parent.parent / "cuda"
BLOCK_SIZE = 256
#: out[r] = sum_m coef[r, m] * x[idx[r, m]] over output rows r (stencil.cuh); see `Family.gather`.
GATHER = "stencil_gather_rows"
#: out[idx[r, m]] += coef[r, m] * g[r] over rows r (atomicAdd, stencil.cuh); see `Family.scatter`.
SCATTER = "stencil_scatter_atomic"
#: Bytes of one vector load or store (the widest global access of the GPU).
LANE_BYTES = 16
#: Bytes of a wide lane (two vector loads per lane) in the kernels that run with them: the gather
#: over stencils of at most WIDE_GATHER_SLOTS slots and `Family(wide_lanes=...)`.
WIDE_LANE_BYTES = 32
#: Most slots per row of a `GATHER` run with wide lanes, per itemsize (H200, nlev 32, levels 9 /
#: 10: interp_c2v 0.87x / 0.87x (float64), 0.85x / 0.84x (float32), the two-slot adjoint gathers
#: 0.84-0.93x, curl_e2v 0.92x / 1.03x (float64), 0.87x / 0.91x (float32); float32 at 6 slots
#: 0.87-0.96x but grad_c2e's adjoint 1.21x at level 10; float64 at 6 slots 0.98-1.09x, at 11-12
#: slots 1.09-1.15x at level 9).
WIDE_GATHER_SLOTS = {4: 6, 8: 4}
#: Most grid-stride passes per thread at one lane per row (`_grid_blocks`).
MAX_PASSES = 3
#: Largest offset of 32-bit offset arithmetic (MESHOPS_OFFSET32).
INT32_MAX = 2**31 - 1
_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def cuda_sources() -> list[pathlib.Path]:
    """Every CUDA source of the package (CI compiles each with nvcc)."""
    return sorted(CUDA_DIR.glob("*.cu"))


@functools.lru_cache(maxsize=None)
def _module(family: str, kernel_names: tuple[str, ...], ctype: str, width: int, lanes: int,
            offset32: bool, device: int, block_size: int):
    import cupy

    source = (CUDA_DIR / f"{family}.cu").read_text()
    expressions = [f"{name}<{ctype}, {width}>" for name in kernel_names]
    threads_per_sm = cupy.cuda.runtime.getDeviceProperties(device)["maxThreadsPerMultiProcessor"]
    options = ("-std=c++17", f"-I{CUDA_DIR}", f"-DMESHOPS_BLOCK_SIZE={block_size}",
               f"-DMESHOPS_THREADS_PER_SM={threads_per_sm}", f"-DMESHOPS_NLEV={lanes}")
    options += ("-DMESHOPS_OFFSET32",) if offset32 else ()
    module = cupy.RawModule(code=source, options=options,
                            name_expressions=expressions)
    return {name: module.get_function(expr) for name, expr in zip(kernel_names, expressions)}


def lane_width(fields, lane_bytes: int = LANE_BYTES) -> int:
    """Levels per thread for `fields` (all of one dtype and level count): the most that fill an
    aligned lane of at most `lane_bytes` and divide nlev (1 for fields without levels)."""
    x = fields[0]
    if x.ndim == 1:
        return 1
    nlev, itemsize = int(x.shape[1]), x.dtype.itemsize
    width = lane_bytes // itemsize
    while width > 1 and (nlev % width or any(_address(f) % (width * itemsize) for f in fields)):
        width //= 2
    return width


def _address(array) -> int:
    return array.data.ptr


def _device() -> int:
    import cupy

    return cupy.cuda.runtime.getDevice()


def slot_major(fields) -> bool:
    """Whether gather kernels on `fields` read stencil tables slot-major: when one thread owns a
    whole row (one lane per row), the threads of a warp walk consecutive rows and slot-major
    tables coalesce; otherwise the lanes of a row share it and row-major tables do."""
    x = fields[0]
    return x.ndim == 1 or int(x.shape[1]) == lane_width(fields)


@functools.lru_cache(maxsize=None)
def _resident_blocks(device: int, block_size: int) -> int:
    """Blocks of `block_size` threads the device holds at once."""
    import cupy

    attributes = cupy.cuda.runtime.getDeviceProperties(device)
    threads_per_sm = attributes["maxThreadsPerMultiProcessor"]
    return attributes["multiProcessorCount"] * max(1, threads_per_sm // block_size)


def _grid_blocks(n_threads: int, lanes: int, device: int, max_passes: int | None = MAX_PASSES) -> int:
    """Blocks of a launch of n_threads logical threads, `lanes` lanes per row, never more than the
    work needs: 32x the resident blocks with several lanes per row; with one, 4x the resident
    blocks, or more so that no thread runs more than `max_passes` grid-stride passes (None: no
    bound). (On an H200: 32x against 4x is 4% faster in geometric mean at nlev 32, up to 13%,
    and up to 16% slower at nlev 1; at level 10, nlev 1, float64, the 4x grid ran about 10
    passes per thread and the cell gathers up to 19% slower than with at most 3.)"""
    need = -(-n_threads // BLOCK_SIZE)
    if lanes > 1:
        return min(need, 32 * _resident_blocks(device, BLOCK_SIZE))
    blocks = 4 * _resident_blocks(device, BLOCK_SIZE)
    if max_passes is not None:
        blocks = max(blocks, -(-need // max_passes))
    return min(need, blocks)


def offsets_fit_int32(args, loop_end: int) -> bool:
    """Whether a launch may use 32-bit offsets: every array argument has fewer than 2^31 elements
    (each offset a kernel forms indexes one of them) and so does the logical thread index, which
    reaches below `loop_end` = last row * lanes per row + the threads of the grid."""
    return loop_end <= INT32_MAX and all(a.size <= INT32_MAX for a in args if getattr(a, "ndim", 0))


def check_rows(rows, n: int) -> tuple[int, int]:
    """(first, last) of `rows` (None: all n rows), checked against 0 <= first <= last <= n."""
    if rows is None:
        return 0, n
    first, last = (int(r) for r in rows)
    if not 0 <= first <= last <= n:
        raise ValueError(f"rows: expected (first, last) with 0 <= first <= last <= {n}, got {tuple(rows)}")
    return first, last


class Family:
    """The kernels `names` of `meshops/cuda/{family}.cu`, launched over output rows."""

    def __init__(self, family: str, names: tuple[str, ...], *, runtime_nlev: tuple[str, ...] = (),
                 offsets64: tuple[str, ...] = (), unbounded_passes: tuple[str, ...] = (),
                 wide_lanes: dict[str, tuple[str, ...]] | None = None):
        """`runtime_nlev`: kernels that take nlev at run time when a row is one lane (nlev 1):
        with nlev fixed at 1 NVRTC schedules some of their table loads after the first gathers
        (on an H200, float64: reconstruct_xyz_e2c 1.39x, pv_flux_e2e 1.11x slower).
        `offsets64`: kernels that keep 64-bit offsets where 32-bit ones would fit, measured
        slower with 32-bit ones (on an H200, level 9: the two-point edge stencils by 3-13%,
        reconstruct_xyz_e2c by 37% at nlev 1, float64).
        `unbounded_passes`: kernels whose grid at one lane per row stays 4x the resident blocks
        however many grid-stride passes that makes (`_grid_blocks`), measured slower with the
        bound (on an H200, level 10, nlev 1, float64: the two-point edge stencils by 4-27%).
        `wide_lanes`: {kernel: dtype names} run with lanes of WIDE_LANE_BYTES (two vector loads
        per lane; compiled with MESHOPS_INSTANTIATE_WIDE), measured faster with them (on an H200,
        nlev 32, float32: ke_e2c 0.92x at level 9, 0.94x at level 10; float64 0.91x and 1.12x)."""
        self.family, self.names = family, tuple(names)
        self.runtime_nlev, self.offsets64 = frozenset(runtime_nlev), frozenset(offsets64)
        self.unbounded_passes = frozenset(unbounded_passes)
        self.wide_lanes = {name: frozenset(dtypes) for name, dtypes in (wide_lanes or {}).items()}

    def kernel(self, name: str, dtype, width: int, lanes: int, offset32: bool = False):
        """The kernel `name<T, width>` for `dtype` on the current device, compiled once for
        `lanes` lanes per row (0: nlev is a run-time argument) and 32- or 64-bit offsets."""
        ctype = _CTYPES.get(np.dtype(dtype))
        if ctype is None:
            raise TypeError(f"CUDA kernels: expected float32 or float64, got dtype {np.dtype(dtype)}")
        return _module(self.family, self.names, ctype, width, lanes, bool(offset32), _device(),
                       BLOCK_SIZE)[name]

    def launch(self, name: str, n: int, fields, *args, rows=None, fixed_nlev=True,
               wide=False) -> None:
        """Run kernel `name` over rows [first, last) of its n output rows (`rows`, default all).

        `fields` are the level-carrying arrays of the call (inputs and outputs); they decide the
        dtype, nlev and lane width: lanes of up to LANE_BYTES, or WIDE_LANE_BYTES when `wide` or
        the family lists `name` in `wide_lanes` for this dtype, and 32-bit offsets fit. Scatter
        kernels (`*_atomic`) run one level per thread: atomics on adjacent levels from adjacent
        threads coalesce, per-lane atomics of one thread do not.
        The grid is sized from the current device (`_grid_blocks`; kernels use grid-stride
        loops; at most MAX_PASSES passes per thread unless the family lists `name` in
        `unbounded_passes`). The module is compiled for this nlev (in lanes) unless `fixed_nlev`
        is false or nlev is 1 and the family lists `name` in `runtime_nlev`, and with 32-bit
        offsets when they fit (`offsets_fit_int32`) unless the family lists `name` in
        `offsets64`.
        """
        first, last = check_rows(rows, n)
        if last <= first:
            return
        passes = None if name in self.unbounded_passes else MAX_PASSES
        dtype = np.dtype(fields[0].dtype)
        wide = (wide or dtype.name in self.wide_lanes.get(name, ())) and name not in self.offsets64
        for lane_bytes in (WIDE_LANE_BYTES, LANE_BYTES) if wide else (LANE_BYTES,):
            width = 1 if name.endswith("_atomic") else lane_width(fields, lane_bytes)
            nlev = (1 if fields[0].ndim == 1 else int(fields[0].shape[1])) // width
            blocks = _grid_blocks((last - first) * nlev, nlev, _device(), passes)
            offset32 = (name not in self.offsets64
                        and offsets_fit_int32(args, last * nlev + blocks * BLOCK_SIZE))
            if offset32:  # wide lanes only with 32-bit offsets (MESHOPS_INSTANTIATE_WIDE)
                break
        fixed_nlev = fixed_nlev and not (nlev == 1 and name in self.runtime_nlev)
        kernel = self.kernel(name, dtype, width, nlev if fixed_nlev else 0, offset32)
        kernel((blocks,), (BLOCK_SIZE,), args + (np.int32(first), np.int32(last), np.int32(nlev)))

    def gather(self, n: int, idx, coef, x, out, *, slot_stride=1, rows=None) -> None:
        """out[r, k] = sum_{m < S} coef[r, m] * x[idx[r, m], k] (idx -1: no term) for rows
        [first, last) of the n output rows: `GATHER`, which the family must list. idx and coef are
        (n, S) row-major tables, or slot-major ones with `slot_stride` = their row count
        (`DeviceMesh.stencil`), which take nlev at run time (tangential_e2e 6% (float64) and 18%
        (float32) slower with it fixed at 1 on an H200). Wide lanes up to WIDE_GATHER_SLOTS."""
        slot_stride = int(slot_stride)
        width = idx.shape[1] if slot_stride == 1 else idx.size // slot_stride
        wide = width <= WIDE_GATHER_SLOTS.get(x.dtype.itemsize, 0)
        self.launch(GATHER, n, (x, out), idx, coef, x, out, np.int32(width), np.int32(slot_stride),
                    rows=rows, fixed_nlev=slot_stride == 1, wide=wide)

    def scatter(self, n: int, idx, coef, g, out) -> None:
        """out[idx[r, m], k] += coef[r, m] * g[r, k] (idx -1: no term) for the n rows of the
        row-major (n, S) tables idx and coef: `SCATTER`, which the family must list; out must
        hold zeros (or what the sums add to)."""
        self.launch(SCATTER, n, (g, out), idx, coef, g, out, np.int32(idx.shape[1]))

