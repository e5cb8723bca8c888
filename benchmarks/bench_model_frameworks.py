"""The shallow-water RK4 step and its gradient through the autodiff adapters
(`adjoint.differentiable.torch_step`, `jax_step`) against meshops's model called directly and against
the TRiSK step written natively with gathers (benchmarks/native_trisk.py) in JAX and PyTorch.

    python benchmarks/bench_model_frameworks.py --levels 9 --json model_frameworks.json     # GPU
    python benchmarks/bench_model_frameworks.py --backend numpy --levels 5                  # CPU

Williamson case 5 (the topography is a control), `Physics()`, dt = 1200 s / 2^(level - 4). Passes:
`fwd`, one step without gradients; `fwd_bwd`, the step and the gradient of <g, (h_next, u_next)>
in (h, u, b) for a random g. Candidates:
- `meshops`: `Model.advance` (fused kernels on CuPy), then `framework.stepper.rk4_step_adj` (deterministic);
- `torch`: `torch_step(model)` on tensors (eager; backward: the adjoint model);
- `jax`: `jax_step(model)` under `jax.jit` (fwd_bwd: one jitted `jax.vjp`; on a GPU the model runs
  on XLA's buffers);
- `native jax` (`jax.jit`, reverse mode by `jax.vjp`), `native torch` (eager autograd) and
  `native torch.compile`: the step written with gathers.
Every candidate's step and gradient are checked against meshops before timing (adapters 1e-12
relative, native ones 1e-9: another summation order); one that disagrees is reported, not timed.
Milliseconds per call, wall clock, median of batches ended by a synchronisation.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX must not take the GPU's memory
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.35")

from benchmarks import common, meshes, native_trisk  # noqa: E402
from benchmarks.bench_frameworks import backend_and_device, close  # noqa: E402

CANDIDATES = ("meshops", "torch", "jax", "native jax", "native torch", "native torch.compile")
PASSES = ("fwd", "fwd_bwd")
TOLERANCE = {"torch": 1e-12, "jax": 1e-12}   # native candidates: 1e-9


def log(*args):
    print(*args, flush=True)


def make_model(mesh, level: int, dtype, xp):
    from swm import testcases
    from swm.model import Model
    from swm.tendencies import Physics

    state = testcases.williamson5(mesh)
    cast = lambda a: xp.asarray(np.asarray(a, dtype=dtype))  # noqa: E731
    return Model(mesh, cast(state.h), cast(state.u), cast(state.b), cast(state.f_vertex),
                 1200.0 / 2 ** (level - 4), Physics())


def host(a) -> np.ndarray:
    """A NumPy copy of a NumPy, CuPy, PyTorch or JAX array."""
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    return np.asarray(a.get() if hasattr(a, "get") else a)


# -- candidates: (fwd, fwd_bwd, sync) over the same inputs; fwd_bwd -> ((h1, u1), (dh, du, db)) -------

def meshops_candidate(model, x, g):
    from framework.stepper import rk4_step_adj

    h, u, b = x
    model.b = b

    def fwd_bwd():
        return model.advance(h, u), rk4_step_adj(model, h, u, *g, mode="deterministic")
    return (lambda: model.advance(h, u)), fwd_bwd, (lambda r: common.synchronize(model.device_mesh.xp))


def torch_inputs(torch, arrays, xp):
    return tuple(torch.from_numpy(a) if xp is np else torch.from_dlpack(a) for a in arrays)


def torch_candidate(model, x, g):
    import torch

    from adjoint.differentiable import torch_step

    xp, step = model.device_mesh.xp, torch_step(model)
    xt, gt = torch_inputs(torch, x, xp), torch_inputs(torch, g, xp)
    leaves = tuple(t.clone().requires_grad_(True) for t in xt)

    def fwd():
        with torch.no_grad():
            return step(*xt)

    def fwd_bwd():
        y = step(*leaves)
        return y, torch.autograd.grad(y, leaves, gt)
    return fwd, fwd_bwd, _torch_sync(torch, xp)


def _torch_sync(torch, xp):
    return (lambda r: None) if xp is np else (lambda r: torch.cuda.synchronize())


def jax_inputs(jnp, arrays, xp):
    return tuple(jnp.asarray(a) if xp is np else jnp.from_dlpack(a) for a in arrays)


def jax_candidate(model, x, g):
    import jax
    import jax.numpy as jnp

    from adjoint.differentiable import jax_step

    step = jax_step(model)
    xj, gj = jax_inputs(jnp, x, model.device_mesh.xp), jax_inputs(jnp, g, model.device_mesh.xp)
    return _jax_pair(jax, step, xj, gj)


def _jax_pair(jax, step, xj, gj):
    def vjp(x, g):
        y, pullback = jax.vjp(step, *x)
        return y, pullback(g)
    fwd, both = jax.jit(step), jax.jit(vjp)
    return (lambda: fwd(*xj)), (lambda: both(xj, gj)), jax.block_until_ready


def native_jax_candidate(model, x, g):
    import jax
    import jax.numpy as jnp

    xp, dtype = model.device_mesh.xp, x[0].dtype
    c = {k: jnp.asarray(v.astype(dtype) if v.dtype.kind == "f" else v.astype(np.int32))
         for k, v in native_trisk.constants(model.mesh).items()}
    (f,) = jax_inputs(jnp, (model.f_vertex,), xp)
    gravity, dt = model.physics.gravity, model.dt
    xj, gj = jax_inputs(jnp, x, xp), jax_inputs(jnp, g, xp)

    def step(c, f, h, u, b):  # the stencils are arguments: closed over, XLA would embed them
        return native_trisk.step(c, h, u, b, f, gravity, dt)

    def vjp(c, f, x, g):
        y, pullback = jax.vjp(lambda *x: step(c, f, *x), *x)
        return y, pullback(g)
    fwd, both = jax.jit(step), jax.jit(vjp)
    return (lambda: fwd(c, f, *xj)), (lambda: both(c, f, xj, gj)), jax.block_until_ready


def native_torch_candidate(model, x, g, compiled: bool):
    import torch

    xp = model.device_mesh.xp
    device = "cpu" if xp is np else "cuda"
    tdtype = torch.float64 if x[0].dtype == np.float64 else torch.float32
    c = {k: (torch.as_tensor(v, dtype=tdtype) if v.dtype.kind == "f" else torch.as_tensor(v)).to(device)
         for k, v in native_trisk.constants(model.mesh).items()}
    (f,) = torch_inputs(torch, (model.f_vertex,), xp)
    gravity, dt = model.physics.gravity, model.dt
    step = lambda h, u, b: native_trisk.step(c, h, u, b, f, gravity, dt)  # noqa: E731
    if compiled:
        torch._dynamo.reset()
        step = torch.compile(step, dynamic=False)
    xt, gt = torch_inputs(torch, x, xp), torch_inputs(torch, g, xp)

    def fwd():
        with torch.no_grad():
            return step(*xt)

    def fwd_bwd():
        leaves = tuple(t.detach().requires_grad_(True) for t in xt)
        y = step(*leaves)
        return y, torch.autograd.grad(y, leaves, gt)
    return fwd, fwd_bwd, _torch_sync(torch, xp)


def make_candidate(name, model, x, g):
    if name == "meshops":
        return meshops_candidate(model, x, g)
    if name == "torch":
        return torch_candidate(model, x, g)
    if name == "jax":
        return jax_candidate(model, x, g)
    if name == "native jax":
        return native_jax_candidate(model, x, g)
    return native_torch_candidate(model, x, g, compiled=name == "native torch.compile")


def flat(result) -> list:
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in flat(r)]
    return [host(result)]


def available(xp) -> list[str]:
    import importlib.util

    names = ["meshops"]
    if importlib.util.find_spec("torch") is not None:
        import torch
        if xp is np or torch.cuda.is_available():
            names += ["torch", "native torch", "native torch.compile"]
    if importlib.util.find_spec("jax") is not None:
        import jax
        jax.config.update("jax_enable_x64", True)
        if xp is np or jax.default_backend() == "gpu":
            names += ["jax", "native jax"]
    return [n for n in CANDIDATES if n in names]


def bench_level(mesh, level: int, dtype, xp, candidates, args, rng) -> dict:
    model = make_model(mesh, level, dtype, xp)
    h, u, b = (xp.asarray(a) for a in (model.h, model.u, model.b))
    x = (h, u, b)
    g = tuple(xp.asarray(rng.standard_normal(a.shape).astype(dtype)) for a in (h, u))
    reference = None
    times, errors = {}, {}
    for name in candidates:
        try:
            fwd, fwd_bwd, sync = make_candidate(name, model, x, g)
            got = (flat(fwd()), flat(fwd_bwd()))
            if reference is None:
                reference = got
            else:
                tol = TOLERANCE.get(name, 1e-9)
                for p, a, r in zip(PASSES, got, reference):
                    bad = [i for i, (ai, ri) in enumerate(zip(a, r)) if not close(ri, ai, tol)]
                    if len(a) != len(r) or bad:
                        raise AssertionError(f"{p}: outputs {bad} disagree with meshops (tolerance {tol})")
            times[name] = {p: common.time_wall(fn, sync=sync, reps=args.reps, warmup=args.warmup,
                                               target_seconds=args.batch_seconds).median * 1e3
                           for p, fn in zip(PASSES, (fwd, fwd_bwd))}
            log(f"  {name:22s} fwd {times[name]['fwd']:9.3f} ms   fwd_bwd {times[name]['fwd_bwd']:9.3f} ms"
                f"   ratio {times[name]['fwd_bwd'] / times[name]['fwd']:5.2f}")
        except Exception as exc:  # reported, not timed
            errors[name] = f"{type(exc).__name__}: {exc}"
            log(f"  {name:22s} ERROR {errors[name]}")
    return dict(level=level, nCells=int(mesh.nCells), nEdges=int(mesh.nEdges), dtype=np.dtype(dtype).name,
                ms=times, errors=errors)


def markdown(doc) -> str:
    lines = [f"{doc['date']}, {doc['device']}",
             "",
             "| level | dtype | candidate | fwd ms | fwd+grad ms | fwd+grad / fwd | fwd vs native jax |",
             "|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        native = r["ms"].get("native jax", {}).get("fwd")
        for name, t in r["ms"].items():
            versus = f"{t['fwd'] / native:.2f}x" if native else "-"
            lines.append(f"| {r['level']} | {r['dtype']} | {name} | {t['fwd']:.3f} | {t['fwd_bwd']:.3f} | "
                         f"{t['fwd_bwd'] / t['fwd']:.2f} | {versus} |")
        for name, err in r["errors"].items():
            lines.append(f"| {r['level']} | {r['dtype']} | {name} | error: {err} | | | |")
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["cupy", "numpy"], default="cupy")
    p.add_argument("--levels", type=int, nargs="+", default=[9])
    p.add_argument("--dtypes", nargs="+", default=["float64"], choices=["float64", "float32"])
    p.add_argument("--candidates", nargs="+", choices=CANDIDATES, help="default: every available one")
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch-seconds", type=float, default=0.05)
    p.add_argument("--cache-dir", type=pathlib.Path, default=None)
    p.add_argument("--cpu-threads", type=int, default=1, help="PyTorch and XLA threads on the CPU")
    p.add_argument("--json", type=pathlib.Path, help="write the rows to this JSON file")
    p.add_argument("--markdown", type=pathlib.Path, metavar="JSON", help="print a JSON file's table")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    t0 = time.perf_counter()
    xp, device = backend_and_device(args.backend, args.cpu_threads)
    candidates = [c for c in available(xp) if not args.candidates or c in args.candidates]
    if candidates[0] != "meshops":
        candidates.insert(0, "meshops")   # the reference
    today = datetime.date.today().isoformat()
    log(f"# model step through the adapters {today}: {device}; candidates: {', '.join(candidates)}")
    rng, rows = np.random.default_rng(), []
    for level in args.levels:
        mesh = meshes.icosahedral_mesh(level, args.cache_dir, log=log)
        for dtype in map(np.dtype, args.dtypes):
            log(f"# level {level}: {mesh.nCells} cells, {mesh.nEdges} edges, {dtype.name}")
            rows.append(bench_level(mesh, level, dtype, xp, candidates, args, rng))
    log(f"# elapsed {time.perf_counter() - t0:.0f} s")
    doc = dict(date=today, device=device, backend=args.backend, rows=rows,
               argv=sys.argv[1:] if argv is None else list(argv))
    if args.json:
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, args.json)
        log(f"# wrote {args.json}")
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
