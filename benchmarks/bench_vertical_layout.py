"""The vertical scan in three layouts on the GPU: is one thread per column, levels contiguous
(meshops' layout, decision 0021), far from the copy bandwidth, and what would another layout give?

    python benchmarks/bench_vertical_layout.py --columns 2621442 --levels 26 [--dtypes float64 float32]

The operator: y[k] = sum_{j < k} x[j], k = 0..N (`meshops.sum_layers_from_bottom_l2i`, N layers in,
N + 1 interfaces out). Variants, each timed with CUDA events (median, L2 flushed before each run),
its bytes (x read once, y written once) over its time beside the device-to-device copy bandwidth:

- `meshops`: the package's kernel on a `DeviceMesh` (levels last, one thread per column).
- `levels_last`: the same loop as a bare kernel (the launcher's cost left out).
- `levels_last_tiled`: levels last; a block stages its columns' contiguous chunk of x in shared
  memory with coalesced loads, each thread scans its column there, and the block writes y back
  coalesced.
- `levels_first`: x and y stored level-major ((N, columns) and (N + 1, columns)), one thread per
  column: neighbouring threads read neighbouring words at each level.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import CudaTimer, copy_bandwidth  # noqa: E402

import meshops  # noqa: E402

SOURCE = r"""
extern "C" __global__ void levels_last(const REAL* __restrict__ x, REAL* __restrict__ y, int n, int N)
{
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= n) return;
    const REAL* xc = x + c * N;
    REAL* yc = y + c * (N + 1);
    REAL sum = 0;
    yc[0] = sum;
    for (int k = 0; k < N; ++k) { sum += xc[k]; yc[k + 1] = sum; }
}

extern "C" __global__ void levels_first(const REAL* __restrict__ x, REAL* __restrict__ y, int n, int N)
{
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= n) return;
    REAL sum = 0;
    y[c] = sum;
    for (int k = 0; k < N; ++k) { sum += x[(long)k * n + c]; y[(long)(k + 1) * n + c] = sum; }
}

// Block of B threads, B columns: shared memory holds B * (N + 1) values.
extern "C" __global__ void levels_last_tiled(const REAL* __restrict__ x, REAL* __restrict__ y, int n, int N)
{
    extern __shared__ unsigned char raw[];
    REAL* tile = reinterpret_cast<REAL*>(raw);
    const long first = blockIdx.x * (long)blockDim.x;
    const int cols = (int)min((long)blockDim.x, n - first);
    const int B = blockDim.x, t = threadIdx.x, stride = N + 1;
    for (int i = t; i < cols * N; i += B) {          // coalesced load of the chunk x[first*N ...]
        const int c = i / N, k = i - c * N;
        tile[c * stride + k + 1] = x[first * N + i];
    }
    __syncthreads();
    if (t < cols) {
        REAL sum = 0;
        tile[t * stride] = sum;
        for (int k = 1; k <= N; ++k) { sum += tile[t * stride + k]; tile[t * stride + k] = sum; }
    }
    __syncthreads();
    for (int i = t; i < cols * stride; i += B)       // coalesced store of y[first*(N+1) ...]
        y[first * stride + i] = tile[i];
}
"""


def kernels(cupy, real: str):
    module = cupy.RawModule(code=SOURCE.replace("REAL", real))
    return {name: module.get_function(name) for name in ("levels_last", "levels_first",
                                                          "levels_last_tiled")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--columns", type=int, default=2621442)
    ap.add_argument("--levels", type=int, default=26)
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    ap.add_argument("--mesh-level", type=int, default=None,
                    help="also time meshops' kernel on the icosahedral mesh of this level "
                         "(its cells as the columns)")
    args = ap.parse_args(argv)
    import cupy

    timer, bandwidth = CudaTimer(), copy_bandwidth(cupy)
    n, N = args.columns, args.levels
    mesh = None
    if args.mesh_level is not None:
        from meshes import icosahedral_mesh

        mesh = meshops.device_mesh(icosahedral_mesh(args.mesh_level), cupy)
        n = mesh.nCells
    print(f"{n} columns x {N} layers; copy bandwidth {bandwidth / 1e9:.0f} GB/s")
    print("| dtype | layout | time (ms) | GB/s | share of copy bandwidth |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng()
    for dtype in args.dtypes:
        real = {"float64": "double", "float32": "float"}[dtype]
        k = kernels(cupy, real)
        x = cupy.asarray(rng.standard_normal((n, N)).astype(dtype))
        y = cupy.empty((n, N + 1), dtype=dtype)
        x_first = cupy.ascontiguousarray(x.T)
        y_first = cupy.empty((N + 1, n), dtype=dtype)
        block = 128
        grid = ((n + block - 1) // block,)
        shared = block * (N + 1) * x.dtype.itemsize

        def launch(name, a, b, **kw):
            def run():
                k[name](grid, (block,), (a, b, np.int32(n), np.int32(N)), **kw)
                return b
            return run
        runs = {"levels_last": launch("levels_last", x, y),
                "levels_last_tiled": launch("levels_last_tiled", x, y, shared_mem=shared),
                "levels_first": launch("levels_first", x_first, y_first)}
        if mesh is not None:
            runs = {"meshops": lambda: meshops.sum_layers_from_bottom_l2i(mesh, x)} | runs
        reference = np.concatenate([np.zeros((n, 1)), np.cumsum(x.get(), axis=1)], axis=1)
        for name, run in runs.items():
            got = run()
            got = (got.T if name == "levels_first" else got).get()
            if not np.allclose(got, reference, rtol=1e-4, atol=1e-3):
                raise SystemExit(f"{name} {dtype}: wrong result")
            t = timer.time(run, reps=20).median
            nbytes = x.nbytes + y.nbytes
            print(f"| {dtype} | {name} | {1e3 * t:.3f} | {nbytes / t / 1e9:.0f} | "
                  f"{nbytes / t / bandwidth:.0%} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
