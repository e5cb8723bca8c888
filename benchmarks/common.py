"""Shared measurement helpers for the benchmarks: timing, copy bandwidth, bytes moved, peak memory.

Timing methods (each returns a `Timing`: median and spread over the repetitions, in seconds):
- `time_cuda`: device time of one call between two CUDA events on the legacy default stream (the
  stream CuPy and PyTorch launch on by default). Before each repetition the L2 cache is flushed
  (a memset over a buffer of 4x the L2 size) and a spin kernel keeps the device busy while the host
  enqueues the call, so host-side launch latency is not counted and no input is served from L2.
- `time_wall`: host wall clock around `repeat` back-to-back calls followed by a synchronisation,
  divided by `repeat` (used for NumPy on the CPU and for JAX, whose streams CUDA events on the default
  stream do not order with). On the GPU this approaches device time when a call's device work is
  longer than its dispatch; L2 is not flushed between the calls of a batch.
Warm-up calls come first (compilation, memory-pool growth); the median of the timed repetitions is
reported.
"""
from __future__ import annotations

import statistics
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np


@dataclass
class Timing:
    median: float  # seconds per call
    low: float     # fastest repetition
    high: float    # slowest repetition
    reps: int
    method: str


def _timing(samples, method) -> Timing:
    return Timing(statistics.median(samples), min(samples), max(samples), len(samples), method)


# -- GPU timing with CUDA events ----------------------------------------------------------------

_SPIN_SOURCE = r"""
extern "C" __global__ void spin(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


class CudaTimer:
    """Times calls with CUDA events; holds the L2 flush buffer and the spin kernel."""

    def __init__(self):
        import cupy

        self.cupy = cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
        self.l2_bytes = int(props.get("l2CacheSize", 64 << 20))
        self.flush_buffer = cupy.empty(max(4 * self.l2_bytes, 1 << 24), dtype=np.uint8)
        self.spin = cupy.RawKernel(_SPIN_SOURCE, "spin")
        self.clock_hz = self._calibrate()

    def _calibrate(self) -> float:
        """Cycles per second of the spin kernel's clock, measured with events."""
        cupy = self.cupy
        cycles = 2_000_000
        self.spin((1,), (1,), (np.int64(cycles),))
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        self.spin((1,), (1,), (np.int64(cycles),))
        end.record()
        end.synchronize()
        return cycles / (cupy.cuda.get_elapsed_time(start, end) * 1e-3)

    def flush_l2(self) -> None:
        self.flush_buffer.fill(0)

    def _spin(self, seconds: float) -> None:
        self.spin((1,), (1,), (np.int64(seconds * self.clock_hz),))

    def time(self, fn, *, reps: int = 25, warmup: int = 3) -> Timing:
        cupy = self.cupy
        host = []
        for _ in range(warmup):
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            fn()
            host.append(time.perf_counter() - t0)
            cupy.cuda.Device().synchronize()
        # keep the device busy for twice the host-side cost of a call (+20 us) before each start event
        spin = min(2 * (min(host) if host else 1e-4) + 2e-5, 5e-3)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        samples = []
        for _ in range(reps):
            self.flush_l2()
            self._spin(spin)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end) * 1e-3)
        return _timing(samples, "cuda-events")


def time_wall(fn, *, sync=lambda result: None, reps: int = 20, warmup: int = 2,
              target_seconds: float = 2e-3) -> Timing:
    """Wall clock per call: batches of back-to-back calls, `sync(last_result)` ending each batch.

    The batch length is chosen from the warm-up so that one batch lasts about `target_seconds`.
    """
    single = []
    for _ in range(max(warmup, 1)):
        t0 = time.perf_counter()
        sync(fn())
        single.append(time.perf_counter() - t0)
    batch = max(1, min(1000, int(target_seconds / max(min(single), 1e-7))))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            result = fn()
        sync(result)
        samples.append((time.perf_counter() - t0) / batch)
    return _timing(samples, "wall" if batch == 1 else f"wall/{batch}")


# -- copy bandwidth -------------------------------------------------------------------------------

def copy_bandwidth(xp, *, nbytes: int | None = None, reps: int = 20) -> float:
    """Measured copy bandwidth of the backend in bytes/s, counting bytes read plus bytes written.

    CuPy: a device-to-device cudaMemcpyAsync of `nbytes` (default 2 GiB) timed with CUDA events
    (median). NumPy: `np.copyto` of `nbytes` (default 256 MiB) timed with the wall clock (median).
    """
    if xp is np:
        nbytes = nbytes or (256 << 20)
        src = np.random.default_rng().random(nbytes // 8)
        dst = np.empty_like(src)
        t = time_wall(lambda: np.copyto(dst, src), reps=reps, warmup=2)
        return 2 * src.nbytes / t.median
    cupy = xp
    nbytes = nbytes or (2 << 30)
    src = cupy.random.random(nbytes // 8)
    buffers = [src, cupy.empty_like(src)]
    size, stream = src.nbytes, cupy.cuda.get_current_stream()

    def copy():
        cupy.cuda.runtime.memcpyAsync(buffers[1].data.ptr, buffers[0].data.ptr, size,
                                      cupy.cuda.runtime.memcpyDeviceToDevice, stream.ptr)

    t = CudaTimer().time(copy, reps=reps, warmup=3)
    buffers.clear()
    src = None
    cupy.get_default_memory_pool().free_all_blocks()
    return 2 * size / t.median


# -- bytes moved --------------------------------------------------------------------------------

class MeshArrayRecorder:
    """Context manager recording the mesh tables (`meshops.device.mesh.DeviceMesh.table`) that the
    operators read while it is active; `.nbytes` is their total size, each array counted once.

    On the GPU an array counts when it is an argument of a kernel launch (reported by
    `meshops.device.kernels.observe_launches`): a code path may take tables it does not pass on
    (a coefficient the kernel does not need), and those are not read. Without launches (NumPy)
    every table taken counts.
    """

    def __init__(self):
        self.seen: dict[int, object] = {}
        self.launched: set[int] = set()
        self._patched = []

    def __enter__(self):
        import meshops.device.kernels as kernels
        from meshops.device.mesh import DeviceMesh

        seen, launched = self.seen, self.launched
        table = DeviceMesh.table

        def recording_table(dmesh, *args, **kwargs):
            array = table(dmesh, *args, **kwargs)
            seen[id(array)] = array
            return array

        self._patched.append((DeviceMesh, "table", table))
        DeviceMesh.table = recording_table

        def record(launch):
            address = kernels.launcher().address
            launched.update(address(a) for a in launch.arguments.values() if getattr(a, "ndim", 0) > 0)
            self._address = address

        self._observing = kernels.observe_launches(record)
        self._observing.__enter__()
        return self

    def __exit__(self, *exc):
        self._observing.__exit__(*exc)
        for owner, name, original in self._patched:
            setattr(owner, name, original)
        self._patched.clear()

    def arrays(self) -> list:
        """The recorded arrays (see the class docstring for which count)."""
        if not self.launched:
            return list(self.seen.values())
        return [a for a in self.seen.values() if self._address(a) in self.launched]

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays()))

    @property
    def count(self) -> int:
        return len(self.arrays())


def nbytes_of(arrays) -> int:
    """Total nbytes of arrays (duplicates by identity counted once)."""
    unique = {id(a): a for a in arrays}
    return int(sum(a.nbytes for a in unique.values()))


# -- peak memory ----------------------------------------------------------------------------------

class PeakMemory:
    """Peak extra memory (bytes) allocated while the context is active, above what was in use at
    entry: CuPy through a memory-pool hook, NumPy through tracemalloc."""

    def __init__(self, xp):
        self.xp = xp
        self.peak = 0

    def __enter__(self):
        if self.xp is np:
            tracemalloc.start()
            tracemalloc.reset_peak()
            self._base = tracemalloc.get_traced_memory()[0]
            return self
        from cupy.cuda import memory_hook

        outer = self

        class Hook(memory_hook.MemoryHook):
            name = "PeakMemory"

            def __init__(self):
                self.current, self.live = 0, {}

            def malloc_postprocess(self, **kw):
                self.live[kw["mem_ptr"]] = kw["mem_size"]
                self.current += kw["mem_size"]
                outer.peak = max(outer.peak, self.current)

            def free_postprocess(self, **kw):
                self.current -= self.live.pop(kw["mem_ptr"], 0)

        self._hook = Hook()
        self._hook.__enter__()
        return self

    def __exit__(self, *exc):
        if self.xp is np:
            self.peak = max(0, tracemalloc.get_traced_memory()[1] - self._base)
            tracemalloc.stop()
        else:
            self._hook.__exit__(*exc)


def synchronize(xp) -> None:
    if xp is not np:
        xp.cuda.Device().synchronize()
