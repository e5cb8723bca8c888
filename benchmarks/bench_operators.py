"""Time every registered meshops operator: forward, `atomic` adjoint and `deterministic` adjoint
(and the tangent-linear model of nonlinear operators), against the device's copy bandwidth and
against the same operator written in JAX and PyTorch.

    python benchmarks/bench_operators.py --levels 9 10 --nlev 1 32 --dtypes float64 float32 \
        --budget 420 --json results.json                     # GPU (CuPy)
    python benchmarks/bench_operators.py --backend numpy --levels 6 --quick    # CPU (NumPy)
    python benchmarks/bench_operators.py --meshes-only --levels 9 10          # fill the mesh cache

Meshes: Morton-ordered icosahedral meshes of the given levels (`grids.icosahedral`), generated once per
machine and cached under --cache-dir (benchmarks/meshes.py), or one MPAS file with --mesh. Fields are
standard-normal random numbers, shape (n,) for nlev 1 and (n, nlev) otherwise.

Bytes moved by one call, counted as the least traffic the operator needs: every mesh table
the call reads (recorded through `meshops.device.mesh.DeviceMesh.table`, each array counted once; integer
connectivity as int32, geometry in the field dtype), every input field read once, every output
written once; an `atomic` adjoint also counts writing its zeroed output (the zeroing pass).
Intermediate fields of composite operators are not counted: GB/s is an effective bandwidth.
`%copy` is GB/s over the measured device-to-device copy bandwidth (bytes read plus written).

Timing (benchmarks/common.py): CuPy and PyTorch by CUDA events around one call, L2 flushed and the
host's launch latency hidden before each repetition, median of --reps (default 25) after warm-up;
JAX by the wall clock over batches of back-to-back calls (median); NumPy by the wall clock (median).

Peers (benchmarks/peers.py): jax (jit gather + jax.vjp), torch (indexing + autograd) and
torch.compile, each checked once per operator and configuration against meshops (forward and
adjoint) before it is timed; a peer that disagrees or fails is shown as "-" with the reason in the
JSON. The forward row compares forwards; an adjoint row compares forward+adjoint (meshops: the sum
of its forward and that adjoint; JAX: one jitted function returning both; PyTorch: forward then
autograd.grad). `peer/ours` > 1 means meshops is faster than the best peer.

A failing operator prints its error and the run continues. --budget SECONDS bounds the run: peers are
skipped when they would not leave time for the remaining meshops timings, and configurations still
pending at the deadline are reported as skipped.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import pathlib
import pkgutil
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
PASSES = ("fwd", "tl", "adj_atomic", "adj_det")
MODES = {"adj_atomic": "atomic", "adj_det": "deterministic"}
PEER_GUESS_S = {"jax": 6.0, "torch": 4.0, "torch.compile": 40.0}
#: Peers timed after every meshops configuration is done (their compilation is slow).
DEFERRED = ("torch.compile",)


def log(*args):
    print(*args, flush=True)


def load_operators() -> dict:
    """Import every meshops module (so operators not yet listed in meshops/__init__ register too)."""
    import meshops
    from meshops.registry import OPERATORS

    for info in pkgutil.walk_packages(meshops.__path__, "meshops."):
        if info.name in ("meshops.torch", "meshops.jax"):  # the autodiff adapters register no operator
            continue
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # a half-finished module must not stop the benchmark
            log(f"warning: import {info.name} failed: {type(exc).__name__}: {exc}")
    return OPERATORS


def as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def random_fields(mesh, locations, nlev, dtype, xp, rng):
    shape = (lambda n: (n,)) if nlev == 1 else (lambda n: (n, nlev))
    if xp is np:
        return tuple(rng.standard_normal(shape(getattr(mesh, SIZES[loc])), dtype=dtype) for loc in locations)
    return tuple(xp.random.standard_normal(shape(getattr(mesh, SIZES[loc])), dtype=dtype) for loc in locations)


class Clock:
    """The run's deadline and the measured cost of one meshops configuration."""

    def __init__(self, budget):
        self.start = time.perf_counter()
        self.deadline = None if budget is None else self.start + budget
        self.config_costs = []
        self.peer_costs = dict(PEER_GUESS_S)

    def left(self):
        return float("inf") if self.deadline is None else self.deadline - time.perf_counter()

    def config_cost(self):
        return max(self.config_costs[-8:]) if self.config_costs else 1.0

    def allows_peer(self, framework, configs_left):
        return self.left() > self.peer_costs[framework] + configs_left * self.config_cost()


# -- one operator in one configuration -------------------------------------------------------------


def measure(xp, timer, fn, reps, warmup, bytes_extra=lambda out: 0):
    """(timing, bytes, peak memory) of `fn`: bytes from the mesh arrays it reads + `bytes_extra(out)`.

    A first call compiles kernels and uploads the mesh arrays; bytes and peak memory are those of
    the second.
    """
    fn()
    common.synchronize(xp)
    with common.MeshArrayRecorder() as rec, common.PeakMemory(xp) as peak:
        out = fn()
        common.synchronize(xp)
    nbytes = rec.nbytes + bytes_extra(out)
    del out
    if xp is np:
        t = common.time_wall(fn, reps=reps, warmup=warmup, target_seconds=0.0)
    else:
        t = timer.time(fn, reps=reps, warmup=warmup)
    return t, nbytes, peak.peak


def bench_meshops(spec, mesh, dtype, nlev, xp, timer, args, rng):
    """Rows (one per pass) for meshops's operator `spec`, and the inputs used; meshops runs on the
    DeviceMesh of the table policy `args.tables`."""
    import meshops

    x = random_fields(mesh, spec.domain, nlev, dtype, xp, rng)
    g = random_fields(mesh, spec.range, nlev, dtype, xp, rng)
    mesh = meshops.device_mesh(mesh, xp, tables=getattr(args, "tables", "fast"))
    passes = [("fwd", lambda: spec.forward(mesh, *x), x)]
    if not spec.linear:
        dx = random_fields(mesh, spec.domain, nlev, dtype, xp, rng)
        passes.append(("tl", lambda: spec.tangent(mesh, *x, *dx), x + dx))
    base = () if spec.linear else x
    for name, mode in MODES.items():
        passes.append((name, lambda mode=mode: spec.adjoint(mesh, *base, *g, mode=mode), base + g))
    rows = {}
    for name, fn, inputs in passes:
        zeroing = 2 if name == "adj_atomic" else 1
        try:
            t, nbytes, peak = measure(xp, timer, fn, args.reps, args.warmup,
                                      lambda out: common.nbytes_of(inputs)
                                      + zeroing * common.nbytes_of(as_tuple(out)))
            rows[name] = dict(pass_=name, ms=t.median * 1e3, ms_low=t.low * 1e3, ms_high=t.high * 1e3,
                              reps=t.reps, method=t.method, bytes=nbytes, peak_mb=peak / 2**20)
        except Exception as exc:
            log(f"  ERROR {spec.name} {name}: {type(exc).__name__}: {exc}")
            if args.verbose:
                traceback.print_exc()
            rows[name] = dict(pass_=name, error=f"{type(exc).__name__}: {exc}")
        common.synchronize(xp)
    return rows, x, g


def _close(xp, ref, res, dtype):
    """max |res - ref| <= tol * max |ref| (on the backend's device), with equal shapes."""
    tol = 1e-10 if np.dtype(dtype) == np.float64 else 1e-4
    if ref.shape != res.shape:
        return False
    scale = float(xp.abs(ref).max()) or 1.0
    return float(xp.abs(ref - res).max()) <= tol * scale


def bench_peer(framework, spec, mesh, dtype, xp, timer, args, x, g, ours):
    """Peer timings of one operator: fwd, adj and fwd+adj (ms), after checking agreement."""
    consts, fn = peers.PEERS[spec.name](mesh)
    peer = peers.make_peer(framework, consts, fn, dtype, xp)
    px, pg = peer.inputs(x), peer.inputs(g)[0]
    base = () if spec.linear else x
    y_ref = as_tuple(spec.forward(mesh, *x))
    adj_ref = as_tuple(spec.adjoint(mesh, *base, *g, mode="deterministic"))
    y_peer = peer.forward(px)()
    adj_peer = as_tuple(peer.adjoint(px, pg)())
    checks = [(y_ref[0], y_peer)] + list(zip(adj_ref, adj_peer))
    if len(adj_ref) != len(adj_peer) or len(y_ref) != 1:
        return dict(error="output structure differs from meshops")
    for ref, res in checks:
        if not _close(xp, ref, peer.to_backend(res), dtype):
            return dict(error="disagrees with meshops")
    del y_ref, adj_ref, y_peer, adj_peer, checks
    out = {}
    for key, make in (("fwd", lambda: peer.forward(px)), ("adj", lambda: peer.adjoint(px, pg)),
                      ("fwd_adj", lambda: peer.forward_adjoint(px, pg))):
        fn_ = make()
        if framework == "jax" or xp is np:
            t = common.time_wall(fn_, sync=peer.sync, reps=args.reps, warmup=args.warmup,
                                 target_seconds=0.0 if xp is np else 5e-3)
        else:
            t = timer.time(fn_, reps=args.reps, warmup=args.warmup)
        out[key] = t.median * 1e3
        out[f"{key}_method"] = t.method
        del fn_
    return out


# -- table ------------------------------------------------------------------------------------------

HEADER = (f"{'operator':<34} {'dtype':<7} {'nlev':>4} {'lvl':>3} {'pass':<10} {'ms':>9} {'GB':>7} "
          f"{'GB/s':>7} {'%copy':>6} {'x fwd':>6} {'peakMB':>7} | peers ms (fwd; adj rows fwd+adj)"
          f"{'':>2}| peer/ours")


def format_row(r, frameworks):
    head = f"{r['op']:<34} {r['dtype']:<7} {r['nlev']:>4} {r['level']:>3} {r['pass']:<10}"
    if "error" in r:
        return f"{head} {r['error'][:90]}"
    ratio = f"{r['adj_over_fwd']:6.2f}" if r.get("adj_over_fwd") is not None else f"{'':>6}"
    cells = []
    for fw in frameworks:
        v = r.get("peer_ms", {}).get(fw)
        cells.append(f"{fw} {v:.3f}" if isinstance(v, float) else f"{fw} -")
    best = r.get("peer_over_ours")
    return (f"{head} {r['ms']:9.4f} {r['bytes'] / 1e9:7.3f} {r['gbs']:7.1f} {100 * r['frac_copy']:5.1f}% "
            f"{ratio} {r['peak_mb']:7.1f} | {'  '.join(cells):<34}| "
            + (f"{best:5.2f}" if best is not None else "-"))


def rows_for(op, level, dtype, nlev, ours, peer_results, copy_bw, frameworks):
    rows = []
    fwd = ours.get("fwd", {})
    for name in PASSES:
        if name not in ours:
            continue
        r = dict(op=op, level=level, dtype=np.dtype(dtype).name, nlev=nlev, **ours[name])
        r["pass"] = r.pop("pass_")
        if "error" not in r:
            r["gbs"] = r["bytes"] / (r["ms"] * 1e-3) / 1e9
            r["frac_copy"] = r["bytes"] / (r["ms"] * 1e-3) / copy_bw
            if name != "fwd" and "ms" in fwd:
                r["adj_over_fwd"] = r["ms"] / fwd["ms"]
            key = "fwd" if name in ("fwd", "tl") else "fwd_adj"
            ours_ms = r["ms"] if name in ("fwd", "tl") else r["ms"] + fwd.get("ms", float("nan"))
            if name != "tl":
                r["peer_ms"] = {fw: peer_results.get(fw, {}).get(key) for fw in frameworks}
                r["peer_detail"] = {fw: peer_results.get(fw, {}) for fw in frameworks}
                times = [v for v in r["peer_ms"].values() if isinstance(v, float)]
                r["ours_compared_ms"] = ours_ms
                r["peer_over_ours"] = min(times) / ours_ms if times else None
        rows.append(r)
    return rows


def markdown(doc) -> str:
    """A Markdown table of a --json file: one line per operator, dtype, nlev and level."""
    fws = doc["frameworks"]
    mode = doc.get("default_mode", "deterministic")
    adj_pass = "adj_det" if mode == "deterministic" else "adj_atomic"
    groups = {}
    for r in doc["rows"]:
        groups.setdefault((r["op"], r["dtype"], r["nlev"], str(r["level"])), {})[r["pass"]] = r
    head = ["operator", "dtype", "nlev", "level", "fwd ms", "fwd GB/s", "fwd % copy", "tl ms",
            "adj atomic ms (x fwd)", "adj det ms (x fwd)"]
    if fws:
        head += ["best peer fwd ms", "peer/ours fwd", "best peer fwd+adj ms", f"peer/ours fwd+adj ({mode})"]
    lines = [f"{doc['date']}, {doc['device']}, backend {doc['backend']}, copy bandwidth "
             f"{doc['copy_bandwidth'] / 1e9:.0f} GB/s (read + write); medians in ms.", "",
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]

    def ms(r, ratio=False):
        if r is None:
            return ""
        if "error" in r:
            return "error"
        return f"{r['ms']:.4g}" + (f" ({r['adj_over_fwd']:.2f})" if ratio and r.get("adj_over_fwd") else "")

    def best(r):
        if not r or "error" in r or not r.get("peer_ms"):
            return "-", "-"
        times = {fw: v for fw, v in r["peer_ms"].items() if isinstance(v, float)}
        if not times:
            return "-", "-"
        fw = min(times, key=times.get)
        return f"{times[fw]:.4g} ({fw})", f"{r['peer_over_ours']:.2f}"

    for (op, dtype, nlev, level), passes in groups.items():
        f = passes.get("fwd")
        ok = f is not None and "error" not in f
        cells = [op, dtype, str(nlev), level, ms(f), f"{f['gbs']:.1f}" if ok else "",
                 f"{100 * f['frac_copy']:.1f}" if ok else "", ms(passes.get("tl")),
                 ms(passes.get("adj_atomic"), True), ms(passes.get("adj_det"), True)]
        if fws:
            cells += [*best(f), *best(passes.get(adj_pass))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- driver -------------------------------------------------------------------------------------------


def release(xp, mesh=None, frameworks=()):
    for fw in frameworks:
        peers.release(fw)
    if mesh is not None and xp is not np:  # drop the device copies of the mesh tables
        import meshops
        from meshops.device.mesh import POLICIES

        for policy in POLICIES:
            meshops.device_mesh(mesh, xp, tables=policy).release()
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", type=int, nargs="+", default=[9, 10])
    p.add_argument("--mesh", help="an MPAS mesh file to use instead of generated levels")
    p.add_argument("--tables", choices=["fast", "lean"], default="fast",
                   help="the DeviceMesh table policy meshops runs with (meshops.device.mesh)")
    p.add_argument("--nlev", type=int, nargs="+", default=[1, 32])
    p.add_argument("--dtypes", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    p.add_argument("--ops", nargs="+", help="operator names, or substrings of names, to include (default: all)")
    p.add_argument("--backend", choices=["cupy", "numpy"], default="cupy")
    p.add_argument("--peers", nargs="*", default=None,
                   help="peer frameworks (jax torch torch.compile; default: all importable)")
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--peer-levels", type=int, nargs="+", help="levels at which peers run (default: all)")
    p.add_argument("--peer-nlev", type=int, nargs="+", help="nlev values at which peers run (default: all)")
    p.add_argument("--peer-dtypes", nargs="+", help="dtypes at which peers run (default: all)")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (default 25; --quick 5)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="5 repetitions, 1 warm-up: a smoke run")
    p.add_argument("--budget", type=float, help="seconds for the whole run (meshes included)")
    p.add_argument("--cache-dir", type=pathlib.Path, default=None)
    p.add_argument("--lloyd", type=int, default=0, help="Lloyd iterations of generated meshes")
    p.add_argument("--meshes-only", action="store_true", help="generate and cache the meshes, then stop")
    p.add_argument("--json", type=pathlib.Path, help="write every row to this JSON file")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    p.add_argument("--markdown", type=pathlib.Path, metavar="JSON",
                   help="print a --json file's rows as a Markdown table and stop")
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 5 if args.quick else 25
    if args.quick:
        args.warmup = 1
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    clock = Clock(args.budget)
    if args.meshes_only:
        for level in args.levels:
            meshes.icosahedral_mesh(level, args.cache_dir, lloyd_iterations=args.lloyd, log=log)
        return 0
    if args.backend == "cupy":
        import cupy as xp
        timer = common.CudaTimer()
        props = xp.cuda.runtime.getDeviceProperties(xp.cuda.runtime.getDevice())
        device = f"{props['name'].decode()} (L2 {timer.l2_bytes / 2**20:.0f} MiB)"
    else:
        xp, timer = np, None
        device = f"CPU ({os.cpu_count()} cores), NumPy {np.__version__}"
    frameworks = [] if args.no_peers else (args.peers if args.peers is not None
                                           else peers.available_frameworks())
    if "jax" in frameworks:
        import jax
        jax.config.update("jax_enable_x64", True)
        if xp is not np and jax.default_backend() != "gpu":
            log(f"warning: JAX runs on {jax.default_backend()}, not the GPU: JAX peer dropped")
            frameworks.remove("jax")
    operators = load_operators()
    names = sorted(n for n in operators if not args.ops or any(
        s == n or (s not in operators and s in n) for s in args.ops))
    copy_bw = common.copy_bandwidth(xp)
    today = datetime.date.today().isoformat()
    log(f"# meshops operator benchmark {today}: {device}; backend {args.backend}; "
        f"copy bandwidth {copy_bw / 1e9:.0f} GB/s (read + write); peers: {', '.join(frameworks) or 'none'}")
    log(f"# operators ({len(names)}): {' '.join(names)}")
    rng = np.random.default_rng()
    results, skipped, deferred, loaded = {}, [], [], {}
    sources = [("mesh", args.mesh)] if args.mesh else [("level", lv) for lv in args.levels]
    total = len(sources) * len(args.dtypes) * len(args.nlev) * len(names)
    inline = [fw for fw in frameworks if fw not in DEFERRED]
    done = 0

    def peer_run(fw, key, spec, mesh, x, g, configs_left):
        level, dtype, nlev, name = key
        peer_results = results[key][1]
        if not clock.allows_peer(fw, configs_left):
            peer_results[fw] = dict(error="skipped: budget")
            return
        t1 = time.perf_counter()
        try:
            peer_results[fw] = bench_peer(fw, spec, mesh, dtype, xp, timer, args, x, g, results[key][0])
        except Exception as exc:
            if args.verbose:
                traceback.print_exc()
            peer_results[fw] = dict(error=f"{type(exc).__name__}: {str(exc)[:200]}")
        clock.peer_costs[fw] = time.perf_counter() - t1
        if "error" in peer_results[fw]:
            log(f"  peer {fw} {name} {dtype.name} nlev {nlev} level {level}: {peer_results[fw]['error']}")
        release(xp, None, [fw])

    log(HEADER)
    for kind, source in sources:
        if clock.left() <= 0:
            skipped += [(source, np.dtype(dt), nl, n) for dt in args.dtypes for nl in args.nlev for n in names]
            continue
        if kind == "mesh":
            from grids.mpas_io import read_mesh
            mesh, level = read_mesh(source), pathlib.Path(source).name
        else:
            mesh, level = meshes.icosahedral_mesh(source, args.cache_dir, lloyd_iterations=args.lloyd,
                                                  log=log), source
        loaded[level] = mesh
        for dtype in map(np.dtype, args.dtypes):
            for nlev in args.nlev:
                for name in names:
                    done += 1
                    key = (level, dtype, nlev, name)
                    if clock.left() <= 0:
                        skipped.append(key)
                        continue
                    t0 = time.perf_counter()
                    spec = operators[name]
                    try:
                        ours, x, g = bench_meshops(spec, mesh, dtype, nlev, xp, timer, args, rng)
                    except Exception as exc:  # no memory left for the inputs: report, go on
                        log(f"  ERROR {name} {dtype.name} nlev {nlev} level {level}: "
                            f"{type(exc).__name__}: {str(exc)[:200]}")
                        skipped.append(key)
                        release(xp, None, frameworks)
                        continue
                    clock.config_costs.append(time.perf_counter() - t0)
                    results[key] = (ours, {})
                    run_peers = (name in peers.PEERS and len(spec.range) == 1
                                 and (args.peer_levels is None or level in args.peer_levels)
                                 and (args.peer_nlev is None or nlev in args.peer_nlev)
                                 and (args.peer_dtypes is None or dtype.name in args.peer_dtypes))
                    for fw in frameworks if run_peers else ():
                        if fw in inline:
                            peer_run(fw, key, spec, mesh, x, g, total - done)
                        else:
                            deferred.append((fw, key))
                    del x, g
                    for r in rows_for(name, level, dtype, nlev, *results[key], copy_bw, frameworks):
                        log(format_row(r, frameworks))
                    release(xp, None, frameworks)
            release(xp, mesh, frameworks)
        del mesh
    if deferred:
        log(f"# {len(deferred)} deferred peer runs ({', '.join(sorted({fw for fw, _ in deferred}))})")
    for i, (fw, key) in enumerate(deferred):
        level, dtype, nlev, name = key
        spec, mesh = operators[name], loaded[level]
        x = random_fields(mesh, spec.domain, nlev, dtype, xp, rng)
        g = random_fields(mesh, spec.range, nlev, dtype, xp, rng)
        peer_run(fw, key, spec, mesh, x, g, 0)
        del x, g
        if "error" not in results[key][1][fw]:
            for r in rows_for(name, level, dtype, nlev, *results[key], copy_bw, frameworks):
                log(format_row(r, frameworks))
        release(xp, mesh, frameworks)
    rows = [r for (level, dtype, nlev, name), (ours, pr) in results.items()
            for r in rows_for(name, level, dtype, nlev, ours, pr, copy_bw, frameworks)]
    log("")
    log(f"# summary ({today}, {device}, copy {copy_bw / 1e9:.0f} GB/s; elapsed "
        f"{time.perf_counter() - clock.start:.0f} s)")
    log(HEADER)
    for r in rows:
        log(format_row(r, frameworks))
    budget_peers = sum(v.get("error") == "skipped: budget" for _, pr in results.values() for v in pr.values())
    if budget_peers:
        log(f"# peer runs skipped for the budget: {budget_peers}")
    if skipped:
        log(f"# skipped for the budget: {len(skipped)} configurations, first {skipped[0][3]} "
            f"{np.dtype(skipped[0][1]).name} nlev {skipped[0][2]} level {skipped[0][0]}")
    if args.json:
        from meshops.modes import get_adjoint_mode

        doc = dict(date=today, device=device, backend=args.backend, copy_bandwidth=copy_bw,
                   default_mode=get_adjoint_mode(),
                   frameworks=frameworks, argv=sys.argv[1:], rows=rows,
                   skipped=[dict(level=lv, dtype=np.dtype(dt).name, nlev=nl, op=n) for lv, dt, nl, n in skipped])
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str))
        os.replace(tmp, args.json)
        log(f"# wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
