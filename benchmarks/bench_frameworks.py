"""meshops operators through the autodiff adapters (`meshops.torch`, `meshops.jax`) against meshops
called directly and against the same operators written natively in PyTorch and JAX.

    python benchmarks/bench_frameworks.py --backend numpy --levels 5 --nlev 1 16 --quick     # CPU
    python benchmarks/bench_frameworks.py --levels 9 --nlev 1 32 --json frameworks.json      # GPU

For each operator, dtype and nlev, two passes: `fwd` (the forward, no gradient) and `fwd_bwd` (the
forward and the gradient of <g, y> for a random cotangent g). Columns, each a median per call in
microseconds (wall clock over batches of back-to-back calls ended by a synchronisation,
benchmarks/common.py `time_wall`):
- `meshops`: meshops called directly on NumPy / CuPy arrays (fwd_bwd: forward, then adjoint);
- per framework, the adapter: `torch` (eager: the autograd Functions), `torch.compile`
  (fullgraph, the custom ops), `torch.cudagraphs` (on a GPU: the same compiled with
  mode="reduce-overhead", replayed as CUDA graphs, inputs marked static), `jax` (jax.jit; fwd_bwd: one jitted jax.vjp) with the default callback
  (`pure` on the CPU, `ffi` on a GPU: the launch plans as XLA custom calls) and `jax.buffer` (the
  CuPy buffer callback);
- per framework, the native peer (benchmarks/peers.py: gathers through the padded connectivity,
  derivatives by the framework's own autodiff), where the operator has one output;
- `overhead`: the adapter minus meshops, per call: what the adapter adds (conversions, autograd
  bookkeeping, dispatch, callbacks).
A first row per dtype and nlev, `floor (y = 2x)`, times the frameworks' own cost per call: the
element-wise y = 2x on an edge field (fwd_bwd: and its gradient) called the way each adapter is
(eager, compiled, jitted), against the array library's 2x (and 2g) in the `meshops` column; its
overhead is what the framework itself adds to any operator, the least an adapter can reach; with
a PyTorch column, a second, `floor (y = 2x, Python custom op)`, the same 2x as an operator defined in
Python is (a torch.autograd.Function eager, a torch.library custom op compiled).
Before timing, each adapter's forward and gradient are checked against meshops (bit for bit on the
CPU, 1e-12 relative on a GPU) and each peer's against meshops (1e-10 relative); a failing
column shows its error. Adjoint mode: the meshops default (`deterministic`). On the CPU, PyTorch and
XLA run on --cpu-threads threads (default 1, like meshops's NumPy path).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import sys
import time
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX must not take the GPU's memory
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.35")

from benchmarks import common, meshes, peers  # noqa: E402

from meshops.device.tables import SIZE_OF as SIZES  # noqa: E402
ADAPTERS = ("torch", "torch.compile", "torch.cudagraphs", "jax", "jax.buffer")
NO_PEER = ("torch.cudagraphs", "jax.buffer")   # adapter variants: their peer is the plain one's
PASSES = ("fwd", "fwd_bwd")


def log(*args):
    print(*args, flush=True)


def as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def host_fields(mesh, locations, nlev, dtype, rng):
    shape = (lambda n: (n,)) if nlev == 1 else (lambda n: (n, nlev))
    return tuple(rng.standard_normal(shape(getattr(mesh, SIZES[loc]))).astype(dtype) for loc in locations)


def close(ref, res, tol) -> bool:
    ref, res = np.asarray(ref), np.asarray(res)
    if ref.shape != res.shape:
        return False
    if tol == 0:
        return bool(np.array_equal(ref, res))
    return float(np.abs(ref - res).max()) <= tol * (float(np.abs(ref).max()) or 1.0)


# -- the candidates: (fwd, fwd_bwd) callables and how to read their results back ---------------------


class Meshops:
    """meshops called directly."""

    def __init__(self, spec, mesh, xp):
        self.spec, self.mesh, self.xp = spec, mesh, xp

    def prepare(self, x, g):
        xp, spec, mesh = self.xp, self.spec, self.mesh
        x, g = tuple(xp.asarray(a) for a in x), tuple(xp.asarray(a) for a in g)
        base = () if spec.linear else x

        def fwd_bwd():
            return spec.forward(mesh, *x), spec.adjoint(mesh, *base, *g)
        return (lambda: spec.forward(mesh, *x)), fwd_bwd

    def sync(self, _):
        common.synchronize(self.xp)

    def host(self, a):
        return a if self.xp is np else self.xp.asnumpy(a)


class TorchAdapter:
    """meshops.torch, eager or compiled (fullgraph; `mode` "reduce-overhead": replayed as CUDA
    graphs, the inputs marked as static addresses)."""

    def __init__(self, spec, mesh, xp, compiled: bool, mode: str | None = None, fn=None):
        import torch

        import meshops.torch as mt

        self.torch, self.spec, self.mesh, self.mode = torch, spec, mesh, mode
        self.device = "cpu" if xp is np else "cuda"
        if fn is None:
            op = getattr(mt, spec.name)
            fn = lambda *x: op(mesh, *x)  # noqa: E731
        if compiled:
            torch._dynamo.reset()
            fn = torch.compile(fn, fullgraph=True, dynamic=False, mode=mode)
        self.fn = fn

    def prepare(self, x, g):
        torch = self.torch
        xt = tuple(torch.from_numpy(a).to(self.device) for a in x)
        gt = tuple(torch.from_numpy(a).to(self.device) for a in g)
        leaves = tuple(t.detach().requires_grad_(True) for t in xt)
        graphs = self.mode == "reduce-overhead"
        if graphs:
            for t in xt + gt + leaves:
                torch._dynamo.mark_static_address(t)
        step = torch.compiler.cudagraph_mark_step_begin if graphs else (lambda: None)

        def fwd():
            step()
            with torch.no_grad():
                return self.fn(*xt)

        def fwd_bwd():
            step()
            y = as_tuple(self.fn(*leaves))
            return y, torch.autograd.grad(y, leaves, gt)
        return fwd, fwd_bwd

    def sync(self, _):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def host(self, a):
        return a.detach().cpu().numpy()


class JaxAdapter:
    """meshops.jax under jax.jit (fwd_bwd: one jitted jax.vjp)."""

    def __init__(self, spec, mesh, xp, callback=None, fn=None):
        import jax

        import meshops.jax as mj

        self.jax = jax
        if fn is None:
            op = getattr(mj, spec.name)
            fn = lambda *x: op(mesh, *x, callback=callback)  # noqa: E731
        f = lambda *x: as_tuple(fn(*x))  # noqa: E731

        def vjp(x, g):
            y, pullback = jax.vjp(f, *x)
            return y, pullback(g)
        self._fwd, self._fwd_bwd = jax.jit(f), jax.jit(vjp)

    def prepare(self, x, g):
        jnp = self.jax.numpy
        xj, gj = tuple(jnp.asarray(a) for a in x), tuple(jnp.asarray(a) for a in g)
        return (lambda: self._fwd(*xj)), (lambda: self._fwd_bwd(xj, gj))

    def sync(self, result):
        self.jax.block_until_ready(result)

    def host(self, a):
        return np.asarray(a)


def make_adapter(name, spec, mesh, xp, fn=None):
    """The adapter column `name` for operator `spec`; with `fn` (a function of the fields), that
    function called the same way instead of the operator."""
    if name in ("torch", "torch.compile"):
        return TorchAdapter(spec, mesh, xp, compiled=name == "torch.compile", fn=fn)
    if name == "torch.cudagraphs":
        return TorchAdapter(spec, mesh, xp, compiled=True, mode="reduce-overhead", fn=fn)
    if name == "jax":
        return JaxAdapter(spec, mesh, xp, fn=fn)
    if name == "jax.buffer":
        return JaxAdapter(spec, mesh, xp, callback="buffer", fn=fn)
    raise ValueError(f"adapter: expected one of {ADAPTERS}, got {name!r}")


FLOOR = "floor (y = 2x)"
CUSTOM_FLOOR = "floor (y = 2x, Python custom op)"


class Doubling:
    """The array library's own y = 2x (fwd_bwd: and g's 2g): the floor row's `meshops` column."""

    def __init__(self, xp):
        self.xp = xp

    def prepare(self, x, g):
        x, g = self.xp.asarray(x[0]), self.xp.asarray(g[0])
        return (lambda: 2 * x), (lambda: (2 * x, 2 * g))

    def sync(self, _):
        common.synchronize(self.xp)


def bench_floor(mesh, dtype, nlev, xp, frameworks, args, rng, custom: bool = False):
    """{pass: row} of the floor row: y = 2x on an edge field through each framework as its adapter
    calls an operator, against the array library's 2x; `custom`: the PyTorch columns only, the 2x
    as a Python custom op (`torch_doubling`), what PyTorch adds to any operator defined in Python."""
    x = host_fields(mesh, ("edge",), nlev, dtype, rng)
    g = host_fields(mesh, ("edge",), nlev, dtype, rng)
    base = Doubling(xp)
    times = {"meshops": time_pair(base, base.prepare(x, g), args)}
    errors = {}
    for fw in frameworks:
        if custom and not fw.startswith("torch"):
            continue
        try:
            fn = torch_doubling(fw != "torch") if custom else (lambda x: 2 * x)
            adapter = make_adapter(fw, None, mesh, xp, fn=fn)
            times[fw] = time_pair(adapter, adapter.prepare(x, g), args)
        except Exception as exc:
            errors[fw] = f"{type(exc).__name__}: {str(exc)[:160]}"
    return _rows(CUSTOM_FLOOR if custom else FLOOR, dtype, nlev, times, errors, frameworks)


def torch_doubling(compiled: bool):
    """y = 2x as PyTorch runs an operator defined in Python: a torch.autograd.Function (eager) or a
    torch.library custom op with its autograd registered (what torch.compile keeps in its graph),
    each with the backward 2g; the form of meshops.torch's operators without their maps."""
    import torch

    if compiled:
        op = getattr(getattr(torch.ops, "meshops_bench", None), "double", None)
        if op is None:
            @torch.library.custom_op("meshops_bench::double", mutates_args=(), schema="(Tensor x) -> Tensor")
            def op(x):
                return 2 * x

            op.register_fake(lambda x: torch.empty_like(x))
            op.register_autograd(lambda ctx, g: torch.ops.meshops_bench.double(g))
        return torch.ops.meshops_bench.double

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            return 2 * g
    return Double.apply


def _rows(name, dtype, nlev, times, errors, frameworks) -> dict:
    rows = {}
    for p in PASSES:
        row = dict(op=name, dtype=np.dtype(dtype).name, nlev=nlev, pass_=p,
                   us={k: v[p] for k, v in times.items()}, errors=errors)
        row["overhead_us"] = {fw: row["us"][fw] - row["us"]["meshops"] for fw in frameworks if fw in row["us"]}
        rows[p] = row
    return rows


def flat(result):
    """The arrays of a (fwd or fwd_bwd) result, in order."""
    if not isinstance(result, (tuple, list)):
        return [result]
    return [a for r in result for a in flat(r)]


def check(candidate, reference, tol) -> str | None:
    """None when the candidate's fwd and fwd_bwd results equal the reference's; else the reason."""
    for name, got, want in zip(PASSES, candidate, reference):
        if len(got) != len(want):
            return f"{name}: {len(got)} outputs, expected {len(want)}"
        for i, (a, b) in enumerate(zip(got, want)):
            if not close(b, a, tol):
                return f"{name}: output {i} disagrees with meshops"
    return None


def time_pair(obj, fns, args):
    return {p: common.time_wall(fn, sync=obj.sync, reps=args.reps, warmup=args.warmup,
                                target_seconds=args.batch_seconds).median * 1e6
            for p, fn in zip(PASSES, fns)}


def bench_one(spec, mesh, dtype, nlev, xp, frameworks, args, rng):
    """{pass: row} for one operator and configuration."""
    x = host_fields(mesh, spec.domain, nlev, dtype, rng)
    g = host_fields(mesh, spec.range, nlev, dtype, rng)
    ours = Meshops(spec, mesh, xp)
    ours_fns = ours.prepare(x, g)
    reference = [[ours.host(a) for a in flat(fn())] for fn in ours_fns]
    times = {"meshops": time_pair(ours, ours_fns, args)}
    errors = {}
    exact = 0 if xp is np else 1e-12
    for fw in frameworks:
        try:
            adapter = make_adapter(fw, spec, mesh, xp)
            fns = adapter.prepare(x, g)
            got = [[adapter.host(a) for a in flat(fn())] for fn in fns]
            reason = check(got, reference, exact)
            if reason is None:
                times[fw] = time_pair(adapter, fns, args)
            else:
                errors[fw] = reason
        except Exception as exc:
            errors[fw] = f"{type(exc).__name__}: {str(exc)[:160]}"
            if args.verbose:
                traceback.print_exc()
        peer_name = fw.split(".buffer")[0]
        if fw in NO_PEER or spec.name not in peers.PEERS or len(spec.range) != 1:
            continue
        key = f"native {peer_name}"
        try:
            consts, fn = peers.PEERS[spec.name](mesh)
            peer = peers.make_peer(peer_name, consts, fn, dtype, xp)
            px = peer.inputs(tuple(xp.asarray(a) for a in x))
            pg = peer.inputs(tuple(xp.asarray(a) for a in g))[0]
            fns = (peer.forward(px), peer.forward_adjoint(px, pg))
            got = [[np.asarray(peer.to_backend(a)) if xp is np else xp.asnumpy(peer.to_backend(a))
                    for a in flat(f())] for f in fns]
            reason = check(got, reference, 1e-10)
            if reason is None:
                times[key] = time_pair(peer, fns, args)
            else:
                errors[key] = reason
        except Exception as exc:
            errors[key] = f"{type(exc).__name__}: {str(exc)[:160]}"
            if args.verbose:
                traceback.print_exc()
        peers.release(peer_name)
    return _rows(spec.name, dtype, nlev, times, errors, frameworks)


# -- table -----------------------------------------------------------------------------------------


def columns(frameworks):
    cols = ["meshops"]
    for fw in frameworks:
        cols.append(fw)
        if fw not in NO_PEER:
            cols.append(f"native {fw}")
    return cols


def format_row(r, frameworks):
    head = f"{r['op']:<34} {r['dtype']:<7} {r['nlev']:>4} {r['pass_']:<8}"
    cells = []
    for c in columns(frameworks):
        v = r["us"].get(c)
        cell = "-" if v is None else f"{v:.1f}"
        if c in r.get("overhead_us", {}):
            cell += f" ({r['overhead_us'][c]:+.1f})"
        cells.append(f" {cell:>20}")
    return head + "".join(cells)


def header(frameworks):
    return (f"{'operator':<34} {'dtype':<7} {'nlev':>4} {'pass':<8}"
            + "".join(f" {c:>20}" for c in columns(frameworks)))


def _us(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def markdown(doc) -> str:
    fws = doc["frameworks"]
    cols = columns(fws)
    lines = [f"{doc['date']}, {doc['device']}, mesh {doc['mesh']}; medians in microseconds per call; "
             f"adapter columns: time (overhead over meshops).", "",
             "| operator | dtype | nlev | pass | " + " | ".join(cols) + " |",
             "|---" * (4 + len(cols)) + "|"]
    for r in doc["rows"]:
        cells = []
        for c in cols:
            v = r["us"].get(c)
            cell = "-" if v is None else _us(v)
            if c in r["overhead_us"]:
                cell += f" ({'+' if r['overhead_us'][c] >= 0 else '-'}{_us(abs(r['overhead_us'][c]))})"
            cells.append(cell)
        lines.append(f"| {r['op']} | {r['dtype']} | {r['nlev']} | {r['pass_']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- driver ----------------------------------------------------------------------------------------


def available(frameworks, xp):
    import importlib.util

    out = []
    for fw in frameworks:
        module = "torch" if fw.startswith("torch") else "jax"
        if importlib.util.find_spec(module) is None:
            log(f"# {fw}: {module} is not installed, skipped")
            continue
        if fw == "torch.cudagraphs" and xp is np:
            continue  # CUDA graphs: on a GPU only
        out.append(fw)
    return out


def backend_and_device(backend: str, cpu_threads: int):
    """(array module, a description of the device) of `backend` ("cupy" or "numpy"); on the CPU,
    PyTorch and XLA set to `cpu_threads` threads (0: left as they are)."""
    if backend == "cupy":
        import cupy

        return cupy, cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())["name"].decode()
    device = f"CPU ({os.cpu_count()} cores), NumPy {np.__version__}"
    if cpu_threads:
        device += f", {cpu_threads} thread(s) for PyTorch and XLA"
        set_cpu_threads(cpu_threads)
    return np, device


def set_cpu_threads(n: int) -> None:
    """n intra-op threads for PyTorch and XLA on the CPU (XLA: before JAX starts its backend)."""
    if n == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(n)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["cupy", "numpy"], default="cupy")
    p.add_argument("--levels", type=int, nargs="+", default=[9])
    p.add_argument("--mesh", help="an MPAS mesh file (scaled to the Earth's radius) instead of --levels")
    p.add_argument("--nlev", type=int, nargs="+", default=[1, 32])
    p.add_argument("--dtypes", nargs="+", default=["float64"], choices=["float64", "float32"])
    p.add_argument("--ops", nargs="+", help="operator names to include (default: all)")
    p.add_argument("--frameworks", nargs="+", default=list(ADAPTERS), choices=ADAPTERS)
    p.add_argument("--reps", type=int, default=None, help="timed batches (default 15; --quick 5)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch-seconds", type=float, default=None,
                   help="length of one timed batch of calls (default 0.02 s; --quick 0.005 s)")
    p.add_argument("--quick", action="store_true", help="fewer repetitions: a smoke run")
    p.add_argument("--cache-dir", type=pathlib.Path, default=None)
    p.add_argument("--json", type=pathlib.Path, help="write every row to this JSON file")
    p.add_argument("--markdown", type=pathlib.Path, metavar="JSON",
                   help="print a --json file's rows as a Markdown table and stop")
    p.add_argument("--cpu-threads", type=int, default=1,
                   help="threads of PyTorch and XLA on the CPU backend (default 1, as meshops's NumPy path; "
                        "0: the frameworks' defaults)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 5 if args.quick else 15
    if args.batch_seconds is None:
        args.batch_seconds = 0.005 if args.quick else 0.02
    if args.quick:
        args.warmup = 2
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    t0 = time.perf_counter()
    xp, device = backend_and_device(args.backend, args.cpu_threads)
    frameworks = available(args.frameworks, xp)
    if any(fw.startswith("jax") for fw in frameworks):
        import jax
        jax.config.update("jax_enable_x64", True)
        if xp is not np and jax.default_backend() != "gpu":
            log(f"# jax runs on {jax.default_backend()}, not the GPU: jax dropped")
            frameworks = [fw for fw in frameworks if not fw.startswith("jax")]
    import meshops  # noqa: F401
    from meshops.registry import OPERATORS

    names = sorted(n for n in OPERATORS if not args.ops or n in args.ops)
    unknown = sorted(set(args.ops or ()) - set(OPERATORS))
    if unknown:
        raise SystemExit(f"--ops: no operator {unknown[0]!r} (registered: {', '.join(sorted(OPERATORS))})")
    if args.mesh:
        from grids.mesh import EARTH_RADIUS
        from grids.mpas_io import read_mesh
        sources = [(pathlib.Path(args.mesh).name, lambda: read_mesh(args.mesh, sphere_radius=EARTH_RADIUS))]
    else:
        sources = [(f"icosahedral level {lv}", lambda lv=lv: meshes.icosahedral_mesh(lv, args.cache_dir, log=log))
                   for lv in args.levels]
    today = datetime.date.today().isoformat()
    log(f"# meshops autodiff adapters {today}: {device}; backend {args.backend}; "
        f"frameworks: {', '.join(frameworks) or 'none'}")
    rng = np.random.default_rng()
    rows, docs = [], []

    def write():
        if not args.json:
            return
        doc = dict(date=today, device=device, backend=args.backend, mesh=", ".join(docs),
                   frameworks=frameworks, argv=sys.argv[1:] if argv is None else list(argv), rows=rows)
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str))
        os.replace(tmp, args.json)

    for label, load in sources:
        mesh = load()
        docs.append(label)
        log(f"# mesh {label}: {mesh.nCells} cells, {mesh.nEdges} edges; microseconds per call "
            f"(adapter: time (+ overhead over meshops))")
        log(header(frameworks))
        for dtype in map(np.dtype, args.dtypes):
            for nlev in args.nlev:
                floors = [FLOOR] + ([CUSTOM_FLOOR] if any(f.startswith("torch") for f in frameworks) else [])
                for name in floors + names:
                    try:
                        result = (bench_floor(mesh, dtype, nlev, xp, frameworks, args, rng,
                                              custom=name == CUSTOM_FLOOR) if name in floors
                                  else bench_one(OPERATORS[name], mesh, dtype, nlev, xp, frameworks, args, rng))
                    except Exception as exc:
                        log(f"  ERROR {name} {dtype.name} nlev {nlev}: {type(exc).__name__}: {exc}")
                        if args.verbose:
                            traceback.print_exc()
                        continue
                    for p in PASSES:
                        r = dict(result[p], mesh=label)
                        rows.append(r)
                        log(format_row(r, frameworks))
                    for col, err in result["fwd"]["errors"].items():
                        log(f"  {name} {col}: {err}")
                    write()   # after every operator: a run stopped early keeps its rows
    log(f"# elapsed {time.perf_counter() - t0:.0f} s")
    if args.json:
        write()
        log(f"# wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
