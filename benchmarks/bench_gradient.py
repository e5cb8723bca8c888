"""The cost of a gradient: the JW06 baroclinic wave's sensitivity run (forward sweep with
checkpoints and the adjoint sweep, `configs/jw06_sensitivity_l5.yaml` at --level) against its
forward run alone, beside dinosaur's `jax.grad` of the same cost (the box-mean surface pressure of
that config's `cost.box` after --days) with respect to the initial state at --truncation, on the
same device: wall times, their ratio and peak device memory side by side.

meshops: both runs in-process through `meshrun.run` as a user runs them, the times read from the
runs' own log lines ("N steps in X s" of the forward, "gradient in X s" of the sensitivity run;
mesh generation, set-up and output are outside both); dt = 720 s * 2^(5 - level) and visc4 =
5e15 m4 s-1 * 2^(-3.2 (level - 5)), as configs/jw06_baroclinic_l9_gpu.yaml scales them; peak
memory on CuPy is the largest total_bytes() of the default memory pool seen by a counting
allocator during each run (the pool freed before it; the snapshot planner frees the pool mid-run,
so its size at the end would miss earlier peaks). The sensitivity run checkpoints
as the config says (multistage, `--snapshots`, default auto: as many snapshots as fit in the free
device memory, so its peak is most of the device's by design; a count bounds it).

dinosaur: the set-up of `benchmarks/jw06_validation.py`'s `reference` (`dinosaur_setup`), the steps
in a `jax.lax.fori_loop`; the jitted forward and the jitted `jax.grad` each compiled first (compile
time reported apart), then timed; peak memory from the device's memory_stats (cumulative: the
forward's figure is read before the gradient runs). When the plain gradient runs out of memory, the
rematerialised one (`jax.checkpoint` on each step) is tried (with --remat, always); both are
reported. jax and dinosaur are
optional: without them that half is skipped, saying so.

On one H200 (CuPy and JAX CUDA), the issue's figures:

    python benchmarks/bench_gradient.py --level 8 --days 1 --json $OUT/gradient_l8_1d.json
    python benchmarks/bench_gradient.py --level 8 --days 5 --json $OUT/gradient_l8_5d.json

(--no-fused for the operator path; --skip-dinosaur / --skip-meshops split the two halves into
separate calls, each with its own --json.)

On a CPU, small (tests/benchmarks/test_bench_gradient.py):

    python benchmarks/bench_gradient.py --backend numpy --level 3 --dt 1440 --days 0.25 --truncation 21 \
        --json g.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import logging
import math
import pathlib
import re
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from framework.constants import DAY  # noqa: E402
from jw06_validation import default_dt, level_defaults, steps_of  # noqa: E402

CONFIG = ROOT / "configs" / "jw06_sensitivity_l5.yaml"
FORWARD_CONFIG = ROOT / "configs" / "jw06_baroclinic_l5.yaml"


class Lines(logging.Handler):
    """The formatted log records of a block."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def find(self, pattern):
        for line in reversed(self.lines):
            if m := re.search(pattern, line):
                return m
        raise RuntimeError(f"no log line matching {pattern!r} among {len(self.lines)}")


def box_of_config():
    import yaml
    box = yaml.safe_load(CONFIG.read_text())["sensitivity"]["cost"]["box"]
    return tuple(box["lat"]), tuple(box["lon"])


def meshops_side(args, tmp: pathlib.Path) -> dict:
    import meshrun

    dt, visc4 = level_defaults(args.level)
    dt = args.dt or dt
    common = [f"mesh.generate.level={args.level}", f"mesh.generate.lloyd={args.lloyd}",
              f"time.days={args.days}", f"time.dt={dt}", f"diffusion.visc4={visc4}",
              f"backend={args.backend}", f"dtype={args.dtype}", f"output.interval_hours={args.days * 24}"]
    if args.fused is not None:                     # otherwise the model's choice, as run_model.py's
        common.append(f"dynamics.fused={str(args.fused).lower()}")
    pool = peak = None
    if args.backend == "cupy":
        import cupy
        pool = cupy.get_default_memory_pool()
        peak = [0]

        def counting_malloc(size):
            memory = pool.malloc(size)
            peak[0] = max(peak[0], pool.total_bytes())
            return memory
        cupy.cuda.set_allocator(counting_malloc)

    def measured(config, overrides):
        if pool is not None:
            pool.free_all_blocks()
            peak[0] = 0
        handler, root = Lines(), logging.getLogger()
        old_level = root.level
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        t0 = time.perf_counter()
        try:
            result = meshrun.run(config, *common, *overrides)
        finally:
            root.removeHandler(handler)
            root.setLevel(old_level)
        if pool is not None:
            cupy.cuda.Device().synchronize()
        return result, handler, time.perf_counter() - t0, (peak[0] if pool else None)

    print(f"meshops level {args.level}: forward run ...", flush=True)
    history, log_f, total_f, peak_f = measured(FORWARD_CONFIG, [
        f"output.path={tmp / 'forward.nc'}", "output.variables=[surface_pressure]",
        f"restart.path={tmp / 'forward.restart.nc'}",
        f"restart.interval_hours={args.days * 48}"])
    m = log_f.find(r"(\d+) steps in ([0-9.]+) s")
    steps, forward_s = int(m.group(1)), float(m.group(2))
    fused = log_f.find(r"(fused stages|operator path); dt").group(1) == "fused stages"
    import yaml
    cells = int(history.sizes["nCells"])
    levels = int(yaml.safe_load(FORWARD_CONFIG.read_text())["vertical"]["nVertLevels"])
    del history
    print(f"meshops level {args.level}: sensitivity run ...", flush=True)
    _, log_g, total_g, peak_g = measured(CONFIG, [
        f"sensitivity.output={tmp / 'gradient.nc'}",
        f"sensitivity.checkpointing.snapshots_in_ram={args.snapshots}"])
    gradient_s = float(log_g.find(r"gradient in ([0-9.]+) s").group(1))
    norms = {k: float(v) for k, v in
             re.findall(r"\|(\w+)\| ([-+0-9.eEinfa]+)", log_g.find(r"gradient norms: (.*)").group(1))}
    cost = float(log_g.find(r"J = ([-+0-9.eE]+)").group(1))
    checkpointing = log_g.find(r"checkpointing \w+: \d+ forward steps.*").group(0)
    if pool is not None:             # the device memory back for the dinosaur half
        cupy.cuda.set_allocator(pool.malloc)
        pool.free_all_blocks()
    return dict(level=args.level, cells=cells, levels=levels, steps=steps, dt=dt, visc4=visc4,
                backend=args.backend, dtype=args.dtype, fused=fused,
                lloyd=args.lloyd, forward_s=forward_s, gradient_s=gradient_s,
                ratio=gradient_s / forward_s, forward_total_s=round(total_f, 2),
                gradient_total_s=round(total_g, 2), forward_peak_bytes=peak_f,
                gradient_peak_bytes=peak_g, cost=cost, gradient_norms=norms,
                gradient_norm=math.sqrt(sum(v * v for v in norms.values())),
                checkpointing=checkpointing)


def dinosaur_side(args) -> dict:
    try:
        import jax  # noqa: F401
        import dinosaur  # noqa: F401
    except ImportError as exc:
        print(f"dinosaur side skipped: jax and dinosaur are needed ({exc})", flush=True)
        return dict(skipped=f"jax and dinosaur are needed ({exc})")
    from jw06_validation import dinosaur_setup
    d = dinosaur_setup(args.truncation)
    jax, grid, specs, U, step, dt_s = (d[k] for k in ("jax", "grid", "specs", "U", "step", "dt_s"))
    jnp = jax.numpy
    steps = steps_of(args.days, dt_s, "dinosaur")
    (lat0, lat1), (lon0, lon1) = box_of_config()
    lon, sin_lat = grid.nodal_axes
    lon, lat = np.degrees(lon), np.degrees(np.arcsin(sin_lat))
    weights = (((lon >= lon0) & (lon <= lon1))[:, None]
               * ((lat >= lat0) & (lat <= lat1)) * np.cos(np.radians(lat)))[None, :]
    if not weights.any():
        raise ValueError(f"truncation {args.truncation}: no Gaussian node in the cost's box")
    weights = jnp.asarray(weights / weights.sum())
    ps_scale = specs.dimensionalize(1.0, U.pascal).magnitude
    device = jax.devices()[0]

    def peak():
        stats = device.memory_stats() or {}
        return int(stats["peak_bytes_in_use"]) if "peak_bytes_in_use" in stats else None

    def make(step_fn):
        def forward(s):
            return jax.lax.fori_loop(0, steps, lambda _, x: step_fn(x), s)

        def cost(s):
            ps = jnp.exp(grid.to_nodal(forward(s).log_surface_pressure))
            return (ps * weights).sum() * ps_scale
        return cost

    def timed(fn, x):
        t0 = time.perf_counter()
        compiled = jax.jit(fn).lower(x).compile()
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(x))
        return out, compile_s, time.perf_counter() - t0

    state = jax.device_put(d["state"])
    out = dict(truncation=args.truncation, grid=f"{grid.longitude_nodes}x{grid.latitude_nodes}",
               levels=26, steps=steps, dt=dt_s, filter=d["filter_text"], device=str(device))
    print(f"dinosaur T{args.truncation}: forward ...", flush=True)
    try:
        value, out["forward_compile_s"], out["forward_s"] = timed(make(step), state)
    except Exception as exc:
        if not out_of_memory(exc):
            raise
        out["oom"] = str(exc).splitlines()[0][:300]
        return out
    out["cost"], out["forward_peak_bytes"] = float(value), peak()
    for name, step_fn in (("plain", step), ("remat", jax.checkpoint(step))):
        print(f"dinosaur T{args.truncation}: jax.grad ({name}) ...", flush=True)
        try:
            grads, compile_s, run_s = timed(jax.grad(make(step_fn)), state)
        except Exception as exc:
            if not out_of_memory(exc):
                raise
            out[name] = dict(oom=str(exc).splitlines()[0][:300])
            continue
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(grads)]
        out[name] = dict(compile_s=compile_s, gradient_s=run_s, ratio=run_s / out["forward_s"],
                         peak_bytes=peak(),
                         gradient_norm=math.sqrt(sum(float((x * x).sum()) for x in leaves)))
        if not args.remat:
            break
    return out


def out_of_memory(exc: Exception) -> bool:
    """Whether JAX failed for want of device memory (XlaRuntimeError RESOURCE_EXHAUSTED among them)."""
    return "RESOURCE_EXHAUSTED" in str(exc) or "out of memory" in str(exc).lower()


def gib(b):
    return "n/a" if b is None else f"{b / 2 ** 30:.2f} GiB"


def table(result) -> str:
    rows = ["| model | size | steps x dt | forward (s) | gradient (s) | ratio | peak memory (fwd / grad) |",
            "|---|---|---|---|---|---|---|"]
    m = result["meshops"]
    rows.append(f"| meshops L{m['level']} {m['backend']} {m['dtype']}{' fused' if m['fused'] else ''} "
                f"| {m['cells']} cells x {m['levels']} | {m['steps']} x {m['dt']:g} s "
                f"| {m['forward_s']:.2f} | {m['gradient_s']:.2f} | {m['ratio']:.2f} "
                f"| {gib(m['forward_peak_bytes'])} / {gib(m['gradient_peak_bytes'])} |")
    d = result["dinosaur"]
    if "skipped" in d:
        rows.append(f"| dinosaur | skipped: {d['skipped']} | | | | | |")
    elif "oom" in d:
        rows.append(f"| dinosaur T{d['truncation']} | forward out of memory: {d['oom']} | | | | | |")
    else:
        for name in ("plain", "remat"):
            g = d.get(name)
            if g is None:
                continue
            size = f"T{d['truncation']} ({d['grid']}) x {d['levels']}"
            if "oom" in g:
                rows.append(f"| dinosaur jax.grad {name} | {size} | {d['steps']} x {d['dt']:g} s "
                            f"| {d['forward_s']:.2f} | out of memory | | {gib(d['forward_peak_bytes'])} / - |")
                continue
            rows.append(f"| dinosaur jax.grad {name} | {size} | {d['steps']} x {d['dt']:g} s "
                        f"| {d['forward_s']:.2f} | {g['gradient_s']:.2f} | {g['ratio']:.2f} "
                        f"| {gib(d['forward_peak_bytes'])} / {gib(g['peak_bytes'])} |")
        rows.append(f"\ndinosaur compile: forward {d['forward_compile_s']:.1f} s, "
                    + ", ".join(f"grad {k} {d[k]['compile_s']:.1f} s" for k in ("plain", "remat")
                                if k in d and "compile_s" in d[k]))
    return "\n".join(rows)


def device_name(backend: str) -> str:
    if backend == "cupy":
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        return props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    import platform
    return f"CPU ({platform.processor() or platform.machine()})"


def positive(kind):
    """An argparse type: a number of `kind` above 0."""
    def parse(text):
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number above 0")
        return value
    parse.__name__ = kind.__name__
    return parse


def snapshot_count(text: str) -> str:
    """--snapshots: auto or a count >= 0."""
    if text != "auto" and not (text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r}: expected auto or a count of snapshots (0 or more)")
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--level", type=positive(int), default=8, help="icosahedral mesh level (meshops)")
    p.add_argument("--lloyd", type=int, default=0,
                   help="Lloyd iterations of the mesh (default 0, as the large-mesh GPU configs)")
    p.add_argument("--days", type=positive(float), default=1.0, help="run length (days), the cost at its end")
    p.add_argument("--dt", type=positive(float), default=None,
                   help="meshops time step (s); default 720 * 2^(5 - level)")
    p.add_argument("--backend", choices=("cupy", "numpy"), default="cupy")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--fused", action=argparse.BooleanOptionalAction, default=None,
                   help="dynamics.fused (the fused RK4 kernels; cupy only); by default the "
                        "model's choice, as run_model.py's: fused on cupy")
    p.add_argument("--snapshots", type=snapshot_count, default="auto",
                   help="sensitivity.checkpointing.snapshots_in_ram (multistage): a count, or auto "
                        "(as many as fit in the free device memory; none when every state fits)")
    p.add_argument("--truncation", type=positive(int), default=340, help="dinosaur's triangular truncation")
    p.add_argument("--remat", action=argparse.BooleanOptionalAction, default=False,
                   help="also time the rematerialised jax.grad when the plain one fits")
    p.add_argument("--skip-dinosaur", action="store_true")
    p.add_argument("--skip-meshops", action="store_true")
    p.add_argument("--json", type=pathlib.Path, default=None, help="write all figures here")
    args = p.parse_args(argv)
    if args.fused and args.backend != "cupy":
        p.error("--fused: backend cupy only")
    if not args.skip_dinosaur:
        dinosaur_dt = default_dt(args.truncation)
        try:
            steps_of(args.days, dinosaur_dt, "dinosaur")
        except ValueError:
            p.error(f"--days {args.days:g} with --truncation {args.truncation}: dinosaur's dt "
                    f"{dinosaur_dt:g} s must divide it")
    result = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  days=args.days, argv=sys.argv[1:] if argv is None else list(argv))

    def write():
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=1))
    if args.skip_meshops:
        result["meshops"] = dict(skipped="--skip-meshops")
    else:
        result["device"] = device_name(args.backend)
        with tempfile.TemporaryDirectory() as tmp:
            result["meshops"] = meshops_side(args, pathlib.Path(tmp))
        write()                      # kept should the dinosaur half fail
    result["dinosaur"] = (dict(skipped="--skip-dinosaur") if args.skip_dinosaur
                          else dinosaur_side(args))
    if "skipped" not in result["meshops"]:
        print(table(result))
    else:
        print(json.dumps(result, indent=1))
    write()
    if args.json:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
