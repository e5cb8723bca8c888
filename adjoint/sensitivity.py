"""A sensitivity run from a config's `sensitivity` section: the forward run, the cost, the adjoint
run, and dJ/dh0, dJ/du0, dJ/db written to netCDF (MPAS names and mesh, as the model's history)
with PNG maps; and the adjoint consistency checks a modeller runs before trusting a gradient
(`check_adjoint`: the whole-run dot-product test of the tangent-linear and adjoint models and a
Taylor table of the run's own cost and controls)."""
from __future__ import annotations

import logging
import time

import numpy as np
import tqdm

from adjoint.costs import Context, CostError, make_cost
from adjoint.gradient import cost_of_controls, run_gradient, run_tangent
from adjoint.verification import taylor_test
from swm.config import Config, ConfigError
from swm.constants import DAY
from swm.distribution import owned_inner

log = logging.getLogger("swm")

#: Gradient variables of the output file: name, location, control, units (per unit of J).
GRADIENTS = (("dJdh0", "cell", "h", "m-1"), ("dJdu0", "edge", "u", "s m-1"),
             ("dJdb", "cell", "b", "m-1"))
#: Relative tolerance of the whole-run dot-product test by dtype.
DOT_TOLERANCE = {np.dtype("float64"): 1e-12, np.dtype("float32"): 1e-4}
TAYLOR_MIN_RATE = 1.9


def cost_context(s, n_steps: int | None = None) -> Context:
    """The `adjoint.costs.Context` of a `swm.driver.Setup`."""
    distribution = s.distribution
    n = distribution.owned["cell"]
    decomposition = getattr(distribution, "decomposition", None)
    global_cells = np.arange(n) if decomposition is None else decomposition.local.l2g["cell"][:n]
    return Context(s.mesh, s.model.device_mesh, distribution.owned, global_cells, s.comm, s.dt,
                   s.total if n_steps is None else n_steps, distribution.exchange_adjoint, s.xp,
                   s.dtype)


def build_cost(s, cost_config, key: str):
    try:
        return make_cost(cost_context(s), cost_config, key)
    except CostError as exc:
        raise ConfigError(str(exc)) from None


def run_sensitivity(config: Config, *, progress: bool = True) -> dict:
    """The gradients of the config's cost; returns J and the gradient norms (every rank)."""
    from swm.driver import setup

    sens = config.sensitivity
    s = setup(config)
    cost = _checked(lambda: build_cost(s, sens.cost, "sensitivity.cost"), s.comm)
    model = s.model
    show = progress and s.comm.Get_rank() == 0
    bars = {kind: tqdm.tqdm(total=s.total, desc=desc, unit="step", disable=not show,
                            dynamic_ncols=True, leave=kind == "adjoint")
            for kind, desc in (("forward", "forward"), ("adjoint", "adjoint"))}
    recomputed = [0]

    def on_step(kind):
        if kind == "recompute":
            recomputed[0] += 1
            bars["adjoint"].set_postfix_str(f"{recomputed[0]} recomputed", refresh=False)
        else:
            bars[kind].update(1)

    t0 = time.perf_counter()
    try:
        value, grads, stats = run_gradient(model, model.h, model.u, cost, s.total,
                                           mode=sens.adjoint_mode,
                                           checkpointing=sens.checkpointing,
                                           rank=s.comm.Get_rank(), on_step=on_step)
    finally:
        for bar in bars.values():
            bar.close()
    wall = time.perf_counter() - t0
    norms = {name: owned_inner(s.distribution, [(loc, g, g)]) ** 0.5
             for (name, loc, _, _), g in zip(GRADIENTS, grads)}
    log.info("J = %.12g over %d steps (%.3f days); gradient in %.2f s", value, s.total,
             s.total * s.dt / DAY, wall)
    log.info("checkpointing %s: %d forward steps for %d (%d recomputed); at most %d states in "
             "memory, %d on disk", sens.checkpointing.schedule, stats.forward_steps, stats.n_steps,
             stats.recomputed, stats.max_states_in_memory, stats.max_states_on_disk)
    log.info("gradient norms: %s", ", ".join(f"|{k}| {v:.6g}" for k, v in norms.items()))
    write_gradients(sens.output, s, grads, value, [c for c in sens.controls])
    if s.comm.Get_rank() == 0:
        log.info("gradients written to %s", sens.output)
        if sens.plot:
            from swm.plot import plot_gradients

            for target in plot_gradients(sens.output):
                log.info("wrote %s", target)
    return {"J": value, **norms, "forward_steps": stats.forward_steps}


def _checked(fn, comm):
    """fn() on every rank; a ConfigError on any rank is raised on every rank."""
    error = None
    try:
        result = fn()
    except ConfigError as exc:
        error, result = str(exc), None
    errors = comm.allgather(error) if comm.Get_size() > 1 else [error]
    found = [e for e in errors if e]
    if found:
        raise ConfigError(found[0])
    return result


def write_gradients(path, s, grads, value: float, controls) -> None:
    """The gradient file on rank 0: the mesh, the chosen controls' gradients (Time = 1) and J."""
    import netCDF4
    from grids.atomic import atomic_path
    from grids.mpas_io import write_mesh

    gathered = {}
    for (name, location, control, _), g in zip(GRADIENTS, grads):
        if control in controls:
            host = g.get() if hasattr(g, "get") else np.asarray(g)
            gathered[name] = s.distribution.gather(location, host)
    if s.comm.Get_rank() != 0:
        return
    dims = {"cell": "nCells", "edge": "nEdges"}
    with atomic_path(path) as tmp:
        write_mesh(s.global_mesh, tmp)
        with netCDF4.Dataset(tmp, "a") as ds:
            if "Time" not in ds.dimensions:
                ds.createDimension("Time", None)
            if "nVertLevels" not in ds.dimensions:
                ds.createDimension("nVertLevels", 1)
            for name, location, control, units in GRADIENTS:
                if name not in gathered:
                    continue
                var = ds.createVariable(name, "f8", ("Time", dims[location], "nVertLevels"))
                var[0, :, 0] = gathered[name]
                var.units = units
                var.long_name = f"gradient of the cost with respect to the initial {control}" \
                    if control != "b" else "gradient of the cost with respect to the topography b"
            cost = ds.createVariable("J", "f8", ("Time",))
            cost[0] = value
            cost.long_name = "cost function"


class FinalStateProjection:
    """J = <x_n, y>, linear in the final state: the adjoint run of it is the adjoint model
    applied to y."""

    def __init__(self, yh, yu, n: int):
        self.y, self.steps = (yh, yu), frozenset([n])

    def value(self, k, state) -> float:
        return 0.0

    def gradient(self, k, state):
        return [a.copy() for a in self.y] if k in self.steps else None


def check_adjoint(config: Config, *, seed: int = 12345) -> bool:
    """The whole-run dot-product test (TLM against ADM) and a Taylor table of the config's cost
    and controls, printed on rank 0; True when both pass (dot <= 1e-12 relative in float64,
    every Taylor rate >= 1.9)."""
    from swm.driver import setup

    sens = config.sensitivity
    s = setup(config)
    comm, dist, model = s.comm, s.distribution, s.model
    n = s.total
    cost = _checked(lambda: build_cost(s, sens.cost, "sensitivity.cost"), comm)
    h0, u0, b0 = model.h.copy(), model.u.copy(), model.b.copy()
    directions = _directions(s, seed, h0, u0)
    dh, du, db = directions["dx"]
    yh, yu = directions["y"]

    # Dot-product test of the n-step run: <TLM dx, y> against <dx, ADM y>.
    th, tu = run_tangent(model, h0, u0, dh, du, db, n)
    lhs = owned_inner(dist, [("cell", th, yh), ("edge", tu, yu)])

    _, (ah, au, ab), _ = run_gradient(model, h0, u0, FinalStateProjection(yh, yu, n), n, mode=sens.adjoint_mode,
                                      rank=comm.Get_rank())
    rhs = owned_inner(dist, [("cell", dh, ah), ("edge", du, au), ("cell", db, ab)])
    dot = abs(lhs - rhs) / max(abs(lhs), 1e-300)
    dot_ok = dot <= DOT_TOLERANCE[np.dtype(s.dtype)]

    # Taylor test of the config's cost along a random direction of the controls.
    value, (gh, gu, gb), _ = run_gradient(model, h0, u0, cost, n, mode=sens.adjoint_mode,
                                          checkpointing=sens.checkpointing, rank=comm.Get_rank())
    active = set(sens.controls)
    mh, mu, mb = (d if c in active else d * 0 for d, c in zip((dh, du, db), ("h", "u", "b")))
    derivative = owned_inner(dist, [("cell", gh, mh), ("edge", gu, mu), ("cell", gb, mb)])

    taylor = taylor_test(cost_of_controls(model, cost, n), (h0, u0, b0), (mh, mu, mb), derivative, eps0=1.0, steps=5)
    taylor_ok = taylor.passed(TAYLOR_MIN_RATE)
    if comm.Get_rank() == 0:
        print(f"dot-product test of the {n}-step run (TLM vs ADM, {sens.adjoint_mode} adjoint): "
              f"<M dx, y> = {lhs:.17g}, <dx, M^T y> = {rhs:.17g}, relative difference "
              f"{dot:.3e} ({'pass' if dot_ok else 'FAIL'}, tolerance "
              f"{DOT_TOLERANCE[np.dtype(s.dtype)]:g})")
        print(f"Taylor test of J = {value:.12g} along a random direction of the controls "
              f"{', '.join(sorted(active))} (dJ.dm = {derivative:.12g}):")
        print(f"{'eps':>10} {'|J(m + eps dm) - J(m) - eps dJ.dm|':>36} {'rate':>7}")
        for i, (eps, r) in enumerate(zip(taylor.epsilons, taylor.remainders)):
            rate = f"{taylor.rates[i - 1]:7.3f}" if i else ""
            print(f"{eps:10.4g} {r:36.6e} {rate:>7}")
        print(f"Taylor test: minimum rate {taylor.min_rate:.3f} "
              f"({'pass' if taylor_ok else 'FAIL'}, >= {TAYLOR_MIN_RATE})")
    return bool(dot_ok and taylor_ok)


def _directions(s, seed, h0, u0) -> dict:
    """Random directions, the same for every rank count (drawn globally on rank 0, scattered):
    dx = (dh, du, db) scaled to 1e-3 of the fields' spread, y = (yh, yu) of unit size."""
    rng = np.random.default_rng(seed)
    g = s.global_mesh
    sizes = None if g is None else {"cell": g.nCells, "edge": g.nEdges}
    out = {}
    scale_h = owned_max(s, h0 - owned_mean(s, h0), "cell")
    scale_u = owned_max(s, u0, "edge")
    specs = {"dx": (("cell", 1e-3 * scale_h), ("edge", 1e-3 * scale_u), ("cell", 1e-3 * scale_h)),
             "y": (("cell", 1.0), ("edge", 1.0))}
    for key, spec in specs.items():
        fields = []
        for location, scale in spec:
            full = None if sizes is None else rng.standard_normal(sizes[location]) * scale
            local = s.distribution.scatter(location, full)
            fields.append(s.xp.asarray(local, dtype=s.dtype))
        out[key] = fields
    return out


def owned_mean(s, a) -> float:
    n = s.distribution.owned["cell"]
    total = s.comm.allreduce(float(a[:n].sum())) if s.comm.Get_size() > 1 else float(a[:n].sum())
    count = s.comm.allreduce(n) if s.comm.Get_size() > 1 else n
    return total / count


def owned_max(s, a, location) -> float:
    n = s.distribution.owned[location]
    local = float(abs(a[:n]).max()) if n else 0.0
    return s.comm.allreduce(local, op=_max()) if s.comm.Get_size() > 1 else local


def _max():
    from mpi4py import MPI

    return MPI.MAX


__all__ = ["run_sensitivity", "check_adjoint", "write_gradients", "GRADIENTS"]
