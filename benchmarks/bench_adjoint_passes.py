"""Per-kernel times of one forward step and one adjoint step (each mode) of the fused shallow-water
model on the GPU (Williamson case 5, the mesh and model of `bench_adjoint.py`):

    python benchmarks/bench_adjoint_passes.py LEVEL DTYPE [MODE ...]

Every kernel launch is bracketed by CUDA events; for each kernel the sum over one step (median of
7 steps after 2 untimed), and what the step spent outside the kernels (fills, element-wise CuPy
code, gaps). The events add about 0.1 ms a step, so the step times are those of
`bench_adjoint.py` plus that.
"""
import collections
import pathlib
import sys

import numpy as np
import cupy as cp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_adjoint import build  # noqa: E402

from meshops.device import kernels  # noqa: E402
from framework.stepper import rk4_step_adj  # noqa: E402

level, dtype = int(sys.argv[1]), sys.argv[2]
modes = sys.argv[3:] or ["deterministic", "atomic"]
mesh, model = build(level, dtype, cp, None)
rng = np.random.default_rng(0)
h, u = model.h, model.u
dh = cp.asarray(rng.standard_normal(h.shape), dtype=h.dtype)
du = cp.asarray(rng.standard_normal(u.shape), dtype=u.dtype)
launch = kernels.Launcher.launch
recorded = []


def timed(self, family, kernel, n, arguments, rows=None, **kw):
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    launch(self, family, kernel, n, arguments, rows, **kw)
    end.record()
    recorded.append((kernel.name, start, end))


kernels.Launcher.launch = timed


def profile(fn, label, reps=7):
    for _ in range(2):
        fn()
    cp.cuda.Device().synchronize()
    per, totals = collections.defaultdict(list), []
    for _ in range(reps):
        recorded.clear()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        totals.append(cp.cuda.get_elapsed_time(start, end))
        step, count = collections.defaultdict(float), collections.Counter()
        for name, a, b in recorded:
            step[name] += cp.cuda.get_elapsed_time(a, b)
            count[name] += 1
        for name, ms in step.items():
            per[name].append((ms, count[name]))
    total = float(np.median(totals))
    in_kernels = 0.0
    print(f"== {label} level {level} {dtype}: step {total:.3f} ms (with per-launch events)")
    for name, values in sorted(per.items(), key=lambda kv: -np.median([v for v, _ in kv[1]])):
        ms = float(np.median([v for v, _ in values]))
        in_kernels += ms
        print(f"   {name:32s} {ms:7.3f} ms  x{values[0][1]}")
    print(f"   {'(other: fills, elementwise, gaps)':32s} {total - in_kernels:7.3f} ms")


profile(model.step, "forward")
for mode in modes:
    profile(lambda: rk4_step_adj(model, h, u, dh, du, mode=mode), f"adjoint {mode}")
