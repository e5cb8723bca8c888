"""Time the hydrostatic core's RK4 step (JW06 baroclinic wave, 26 levels) on one GPU or CPU
process, against the step's memory-traffic floor over the measured copy bandwidth, with the share
of each operator in a tendency evaluation.

    python benchmarks/bench_hydrostatic.py --levels 8 9 --dtypes float64 float32 [--breakdown]
        [--paths operator fused] [--passes] [--tangent] [--adjoint] [--inviscid]
        [--cell-pass one split]
        [--backend numpy] [--json out.json]

Traffic floor of one RK4 step: 4 stages, each reading the provisional state (mass, theta_mass, u)
and writing the next one, and reading and writing the accumulated new state: 4 x 3 x |state|
(the fixed fields and the mesh tables, read once a stage, are left out: they are a few per cent).
`--breakdown` times every meshops operator of one tendency evaluation (CUDA events around each
call: the kernels' time, not the host's): the rest of the evaluation's wall time is the elementwise
arithmetic between them and the host's launch overhead where the GPU waits for it.

`--paths` steps the operator path and/or the fused stages (`hydrostatic.fused`, CuPy only;
default both on CuPy) and reports each step's time and its ratio to the floor; `--passes` times
each fused kernel of one step (CUDA events around each launch, summed over the step's four
stages); `--tangent` times a tangent-linear step too (`framework.stepper.rk4_step_tl`, the
forward states it needs included) with its ratio to the forward step (the fused
path's target: <= 2x; with `--passes`, each fused kernel of one tangent-linear step too) and the
step of a tangent-linear run (`rk4_step_and_tl`: the step and its tangent-linear in one sweep);
`--adjoint` an adjoint step in each adjoint mode (`framework.stepper.rk4_step_adj`,
deterministic and atomic: its recording sweep included) with its ratio to the forward step (the
fused path's targets: deterministic <= 2.5x, atomic <= 3x; with `--passes`, each fused kernel of
one adjoint step too). The JW06 configs' del4 on u is computed outside the fused passes (by its
operators, added by the edge pass); `--inviscid` leaves it out, so that the fused step is the four passes alone. `--cell-pass` times
the fused path with each form of its cell passes in turn, in one process: `one` kernel each
(default) and/or `split` into two (the gathers, then the column:
`hydrostatic.fused.FusedStage.split_cell_pass`).
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import copy_bandwidth, synchronize  # noqa: E402
from meshes import icosahedral_mesh  # noqa: E402

import meshops  # noqa: E402
from hydrostatic import dynamics, fused, fused_adjoint, levels, terms, testcases  # noqa: E402
from hydrostatic.dynamics import Physics  # noqa: E402
from hydrostatic.model import Model  # noqa: E402
from framework.constants import GRAVITY  # noqa: E402
from framework.stepper import rk4_step_adj, rk4_step_and_tl, rk4_step_tl  # noqa: E402

#: dt (s) and del4 viscosity (m4 s-1) of the JW06 configs at level 5; dt halves with each level
#: and the viscosity scales with the grid distance cubed (configs/jw06_*).
DT_LEVEL5, VISC4_LEVEL5 = 720.0, 5.0e15


def build(mesh, level, dtype, xp, fused_path=False, inviscid=False):
    A, B = levels.coefficients("jw06_26")
    state = testcases.initial_state(mesh, "jw06_baroclinic", A, B)
    cast = lambda a: xp.asarray(np.asarray(a, dtype=dtype))  # noqa: E731
    physics = Physics(p_top=float(A[-1]), dB=cast(B[:-1] - B[1:]), gravity=GRAVITY,
                      visc4=0.0 if inviscid else VISC4_LEVEL5 / 8.0 ** (level - 5))
    return Model(mesh, cast(state.mass), cast(state.theta_mass), cast(state.u), cast(state.phi_s),
                 cast(state.f_vertex), DT_LEVEL5 / 2 ** (level - 5), physics, fused=fused_path)


def time_steps(model, xp, steps: int) -> float:
    """Seconds per step over `steps` steps after two warm-up steps."""
    for _ in range(2):
        model.step()
    synchronize(xp)
    t0 = time.perf_counter()
    for _ in range(steps):
        model.step()
    synchronize(xp)
    return (time.perf_counter() - t0) / steps


#: The fused adjoint step's targets, as multiples of the fused forward step, per adjoint mode.
ADJOINT_TARGETS = {"deterministic": 2.5, "atomic": 3.0}
#: The fused tangent-linear step's target, as a multiple of the fused forward step.
TANGENT_TARGET = 2.0


def time_adjoint(model, xp, steps: int, mode: str) -> float:
    """Seconds per adjoint step (`mode`) about the model's state after one warm-up step."""
    state = model.state
    state_adj = [1e-3 * f for f in state]
    rk4_step_adj(model, *state, *state_adj, mode=mode)
    synchronize(xp)
    t0 = time.perf_counter()
    for _ in range(steps):
        rk4_step_adj(model, *state, *state_adj, mode=mode)
    synchronize(xp)
    return (time.perf_counter() - t0) / steps


def time_tangent(model, xp, steps: int, sweep=rk4_step_tl) -> float:
    """Seconds per tangent-linear step (`sweep`: rk4_step_tl, or rk4_step_and_tl, the step of a
    tangent-linear run) about the model's state after one warm-up step."""
    state = model.state
    dstate = [1e-3 * f for f in state]
    sweep(model, *state, *dstate)
    synchronize(xp)
    t0 = time.perf_counter()
    for _ in range(steps):
        sweep(model, *state, *dstate)
    synchronize(xp)
    return (time.perf_counter() - t0) / steps


class OperatorTimes:
    """Replaces `meshops` in the modules of the tendencies (`hydrostatic.dynamics`,
    `hydrostatic.terms`) by a proxy that times each operator call: CUDA events around it on CuPy
    (the kernels' time, not the host's), the wall clock on NumPy."""

    def __init__(self, xp):
        self.xp, self.events = xp, collections.defaultdict(list)

    def __getattr__(self, name):
        fn = getattr(meshops, name)

        def timed(*args, **kwargs):
            if self.xp is np:
                t0 = time.perf_counter()
                out = fn(*args, **kwargs)
                self.events[name].append(time.perf_counter() - t0)
                return out
            start, end = self.xp.cuda.Event(), self.xp.cuda.Event()
            start.record()
            out = fn(*args, **kwargs)
            end.record()
            self.events[name].append((start, end))
            return out
        return timed

    def seconds(self, name) -> float:
        if self.xp is np:
            return sum(self.events[name])
        return sum(self.xp.cuda.get_elapsed_time(a, b) for a, b in self.events[name]) * 1e-3


def breakdown(model, xp, reps: int = 5) -> dict:
    """{operator: (ms per tendency evaluation, calls)} and the whole evaluation's ms."""
    state = model.state
    for _ in range(2):
        model.tendencies(*state)
    synchronize(xp)
    t0 = time.perf_counter()
    for _ in range(reps):
        model.tendencies(*state)
    synchronize(xp)
    whole = (time.perf_counter() - t0) / reps
    timer = OperatorTimes(xp)
    for module in (dynamics, terms):
        module.meshops = timer
    try:
        for _ in range(reps):
            model.tendencies(*state)
        synchronize(xp)
    finally:
        for module in (dynamics, terms):
            module.meshops = meshops
    seconds = {name: timer.seconds(name) for name in timer.events}
    ops = {name: (1e3 * s / reps, len(timer.events[name]) // reps)
           for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])}
    return dict(tendency_ms=1e3 * whole, operators=ops)


def pass_times(model, xp, step=None) -> dict:
    """{fused kernel: ms per step}: CUDA events around each launch of one call of `step`
    (default: the model's forward step); the extra terms' operator code (del2 / del4, the
    forcing: `FusedStage.extras`, `fused_adjoint.extra_adjoints`) as one entry."""
    events = collections.defaultdict(list)

    def timed(name, function):
        def call(*args, **kwargs):
            start, end = xp.cuda.Event(), xp.cuda.Event()
            start.record()
            out = function(*args, **kwargs)
            end.record()
            events[name].append((start, end))
            return out
        return call
    launch, extras, extra_adjoints = (fused._KERNELS.launch, fused.FusedStage.extras,
                                      fused_adjoint.extra_adjoints)
    fused._KERNELS.launch = lambda name, *a, **k: timed(name, launch)(name, *a, **k)
    fused.FusedStage.extras = timed("(extra terms: operators)", extras)
    fused_adjoint.extra_adjoints = timed("(extra terms: operators)", extra_adjoints)
    try:
        (step or model.step)()
        synchronize(xp)
    finally:
        fused._KERNELS.launch, fused.FusedStage.extras = launch, extras
        fused_adjoint.extra_adjoints = extra_adjoints
    return {name: sum(xp.cuda.get_elapsed_time(a, b) for a, b in pairs)
            for name, pairs in events.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", type=int, nargs="+", default=[8])
    ap.add_argument("--dtypes", nargs="+", default=["float64"])
    ap.add_argument("--backend", choices=("cupy", "numpy"), default="cupy")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--breakdown", action="store_true")
    ap.add_argument("--paths", nargs="+", choices=("operator", "fused"),
                    help="default: both on cupy, the operator path on numpy")
    ap.add_argument("--passes", action="store_true")
    ap.add_argument("--tangent", action="store_true")
    ap.add_argument("--adjoint", action="store_true")
    ap.add_argument("--inviscid", action="store_true")
    ap.add_argument("--cell-pass", nargs="+", choices=("one", "split"), default=["one"],
                    help="forms of the fused cell passes: one kernel each, or split in two "
                         "(gathers, then the column)")
    ap.add_argument("--json", type=pathlib.Path)
    args = ap.parse_args(argv)
    if args.backend == "cupy":
        import cupy as xp
        device = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        bandwidth = copy_bandwidth(xp)
    else:
        xp, device, bandwidth = np, "CPU", copy_bandwidth(np)
    if args.paths is None:
        args.paths = ["operator", "fused"] if xp is not np else ["operator"]
    rows = []
    for level in args.levels:
        mesh = icosahedral_mesh(level)
        runs = [(d, p, form) for d in args.dtypes for p in args.paths
                for form in (args.cell_pass if p == "fused" else ["one"])]
        for dtype, path, form in runs:
            fused.FusedStage.split_cell_pass = form == "split"
            model = build(mesh, level, np.dtype(dtype), xp, path == "fused", args.inviscid)
            seconds = time_steps(model, xp, args.steps)
            state_bytes = sum(int(f.nbytes) for f in model.state)
            floor = 12 * state_bytes / bandwidth
            days_per_hour = model.dt / 86400.0 * 3600.0 / seconds
            row = dict(level=level, cells=mesh.nCells, dtype=dtype, path=path, dt=model.dt,
                       inviscid=args.inviscid, split_cell_pass=form == "split",
                       step_ms=1e3 * seconds, floor_ms=1e3 * floor, ratio=seconds / floor,
                       days_per_hour=days_per_hour)
            label = f"{path}, split cell pass" if form == "split" else path
            print(f"level {level} ({mesh.nCells} cells) {dtype} {label}: step {1e3 * seconds:.2f} ms, "
                  f"floor {1e3 * floor:.2f} ms ({seconds / floor:.2f}x), dt {model.dt:g} s, "
                  f"{days_per_hour:.2f} simulated days per hour", flush=True)
            if args.tangent:
                row["tangent_step_ms"] = ms = 1e3 * time_tangent(model, xp, args.steps)
                goal = f" (target <= {TANGENT_TARGET:g}x)" if path == "fused" else ""
                print(f"    tangent-linear step {ms:.2f} ms, {ms / (1e3 * seconds):.2f}x the forward"
                      f"{goal}", flush=True)
                row["step_and_tangent_ms"] = ms = 1e3 * time_tangent(model, xp, args.steps,
                                                                     rk4_step_and_tl)
                print(f"    step and tangent-linear in one sweep (a tangent-linear run's step) "
                      f"{ms:.2f} ms, {ms / (1e3 * seconds):.2f}x the forward", flush=True)
            if args.adjoint:
                for mode, target in ADJOINT_TARGETS.items():
                    ms = 1e3 * time_adjoint(model, xp, args.steps, mode)
                    row[f"adjoint_{mode}_step_ms"] = ms
                    ratio = ms / (1e3 * seconds)
                    goal = f" (target <= {target:g}x)" if path == "fused" else ""
                    print(f"    adjoint step, {mode}: {ms:.2f} ms, {ratio:.2f}x the forward"
                          f"{goal}", flush=True)
            if args.passes and path == "fused":
                row["passes_ms"] = passes = pass_times(model, xp)
                for name, ms in passes.items():
                    print(f"    {name:32s} {ms:8.3f} ms per step")
                if args.tangent:
                    state = model.state
                    dstate = [1e-3 * f for f in state]
                    row["tangent_passes_ms"] = passes = pass_times(
                        model, xp, lambda: rk4_step_tl(model, *state, *dstate))
                    print("  tangent-linear step:")
                    for name, ms in passes.items():
                        print(f"    {name:32s} {ms:8.3f} ms per step")
                if args.adjoint:
                    state = model.state
                    state_adj = [1e-3 * f for f in state]
                    for mode in ADJOINT_TARGETS:
                        row[f"adjoint_{mode}_passes_ms"] = passes = pass_times(
                            model, xp, lambda: rk4_step_adj(model, *state, *state_adj, mode=mode))
                        print(f"  adjoint step, {mode}:")
                        for name, ms in passes.items():
                            print(f"    {name:32s} {ms:8.3f} ms per step")
            if args.breakdown:
                row["breakdown"] = b = breakdown(model, xp)
                rest = b["tendency_ms"] - sum(ms for ms, _ in b["operators"].values())
                print(f"  one tendency evaluation {b['tendency_ms']:.2f} ms; operators:")
                for name, (ms, calls) in b["operators"].items():
                    print(f"    {name:32s} {ms:8.2f} ms  ({calls} calls)")
                print(f"    {'(the rest: elementwise, host)':32s} {rest:8.2f} ms", flush=True)
            rows.append(row)
            del model
    if args.json:
        args.json.write_text(json.dumps(dict(date=datetime.date.today().isoformat(), device=device,
                                             bandwidth=bandwidth, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
