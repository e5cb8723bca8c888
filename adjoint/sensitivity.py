"""A sensitivity run of any model from a config's `sensitivity` section, and the adjoint
consistency checks a modeller runs before trusting a gradient, written once on the model's part
(`Sensitivity`, which each model implements: `swm.sensitivity`, `hydrostatic.sensitivity`).

`run_sensitivity`: the forward run, the cost, the adjoint run through the planned checkpoint
schedule and the gradients of the chosen controls written to netCDF (MPAS names and mesh, as the
model's history) with PNG maps. `check_adjoint` (`--check-adjoint`): the whole-run dot-product test
of the tangent-linear and adjoint models and a Taylor table of the run's own cost and controls.

Like a forward run, a sensitivity run claims its files before any work (`claim_outputs`: the
checks of `framework.output.OutputFile`, the PNG maps' too), its forward sweep runs the forward
run's watchdog (the model's `check()`, every `watchdog.interval_steps` steps and at the last
step), and it writes nothing when the watchdog stops it or when J or a gradient is not finite
(`framework.errors.WatchdogError`). Files carry `model_name = framework.output.MODEL_NAME` (netCDF
attribute, PNG text chunk), so a rerun may replace them; they are written atomically."""
from __future__ import annotations

import logging
import time

import numpy as np
import tqdm

from meshops.parallel.comm import is_serial

from adjoint.costs import Context
from adjoint.gradient import cost_of_controls, prepare, run_gradient, run_tangent
from adjoint.snapshot_memory import plan
from adjoint.verification import taylor_test
from framework import stop
from framework.constants import DAY
from framework.distribution import owned_inner
from framework.collective import on_every_rank
from framework.output import OutputError, map_problem, release
from framework.errors import WatchdogError

log = logging.getLogger("adjoint")

#: Relative tolerance of the whole-run dot-product test by dtype.
DOT_TOLERANCE = {np.dtype("float64"): 1e-12, np.dtype("float32"): 1e-4}
TAYLOR_MIN_RATE = 1.9
#: The Taylor table's steps (eps = 1, 1/2, ..., 1/32) and the largest eps whose rates are judged:
#: the larger steps are shown only, as a strongly curved cost (a smooth minimum) is not yet
#: quadratic there.
TAYLOR_STEPS, TAYLOR_JUDGED_FROM = 6, 0.25


def gradient_units(cost_units: str, control_units: str) -> str:
    """The units of dJ/dx, "<J units> <x units>-1" as udunits writes a quotient: "m2 m-1" (J in
    m2, x in m), "s-2 (m s-1)-1" (x in m s-1); a J of units 1 gives "<x units>-1" alone."""
    inverse = f"{control_units}-1" if control_units.isalpha() else f"({control_units})-1"
    return inverse if cost_units == "1" else f"{cost_units} {inverse}"


def cost_context(s, n_steps: int | None = None) -> Context:
    """The `adjoint.costs.Context` of a `framework.driver.Setup`."""
    distribution = s.distribution
    n = distribution.owned["cell"]
    decomposition = getattr(distribution, "decomposition", None)
    global_cells = np.arange(n) if decomposition is None else decomposition.local.l2g["cell"][:n]
    return Context(s.mesh, s.model.device_mesh, distribution.owned, global_cells, s.comm, s.dt,
                   s.total if n_steps is None else n_steps, distribution.exchange, s.xp,
                   s.dtype)


class Sensitivity:
    """A model's part of a sensitivity run of `config` (its `sensitivity` section): a model
    subclasses it (`swm.sensitivity.ShallowWaterSensitivity`,
    `hydrostatic.sensitivity.HydrostaticSensitivity`) and the drivers here run it.

        maps(output, controls)       the PNG maps of a gradient file (claimed before any work)
        setup()                      the run's `framework.driver.Setup` (on every rank), kept as `s`
        cost()                       the config's cost on `s` (ConfigError when it cannot be made)
        check()                      the watchdog's check(k, x_k) of the forward sweep
        gradients(grads)             {control: (variable, location, local gradient)} of the chosen
                                     controls, from the model's (*dJ/dx_0, *dJ/dc)
        reported(grads, chosen)      the (variable, location, local gradient) whose norms are
                                     logged and returned (default: the chosen)
        write(value, units, chosen)  the gradient file (`write_gradient_file`)
        plot(path)                   the maps of gradient file `path`; their paths
        directions()                 (scales, active, controls in words) of `check_adjoint`'s
                                     tests (`dot_and_taylor`)
    """

    def __init__(self, config):
        self.config = config

    def reported(self, grads, chosen: dict) -> list:
        """The chosen controls' gradients."""
        return list(chosen.values())


def run_sensitivity(parts: Sensitivity, *, progress: bool = True) -> dict:
    """The gradients of the config's cost (`parts`: the model's part); returns J and the gradient
    norms (every rank). The output (and its maps) are claimed before any work; a watchdog stop or
    a J or gradient that is not finite raises WatchdogError with nothing written."""
    sens = parts.config.sensitivity
    return claimed(sens, parts.maps, lambda: _sensitivity(parts, sens, progress))


def _sensitivity(parts: Sensitivity, sens, progress: bool) -> dict:
    s = parts.setup()
    cost = on_every_rank(parts.cost, s.comm)
    value, grads, stats = sensitivity_sweep(s, sens, cost, parts.check(), progress)
    chosen = parts.gradients(grads)
    return finish(s, sens, value, stats, list(chosen.values()), parts.reported(grads, chosen),
                  lambda: parts.write(value, cost.units, chosen), parts.plot)


def check_adjoint(parts: Sensitivity, *, seed: int = 12345) -> bool:
    """The whole-run dot-product test (TLM against ADM) and a Taylor table of the config's cost
    along the model fields its controls move (`parts`: the model's part), printed on rank 0; True
    when both pass (dot <= 1e-12 relative in float64, every Taylor rate for eps <= 1/4 >= 1.9;
    `dot_and_taylor`)."""
    sens = parts.config.sensitivity
    s = parts.setup()
    cost = on_every_rank(parts.cost, s.comm)
    check = parts.check()
    scales, active, controls = parts.directions()
    with quiet_floats():
        return dot_and_taylor(s, sens, cost, check, seed, scales, active, controls)


def claimed(sens, gradient_maps, run) -> dict:
    """run() with sensitivity.output and, with sens.plot, its maps (`gradient_maps(output,
    controls)`) claimed before it (`claim_outputs`) and released when it ends."""
    from meshops.parallel.comm import world

    maps = gradient_maps(sens.output, sens.controls) if sens.plot else []
    files = claim_outputs(world(), "sensitivity.output", [sens.output], maps,
                          maps_off="sensitivity.plot: false")
    try:
        return run()
    finally:
        release(files)


def finish(s, sens, value: float, stats, chosen, norms_of, write, plot) -> dict:
    """The end of a sensitivity run of setup `s` after its sweep (J = `value`, `stats`):
    WatchdogError, nothing written, when J or a gradient of `chosen` ((name, location, local
    array)) is not finite (`require_finite`); the log lines (`log_sweep`) with the norms of
    `norms_of` (the same form); the gradient file, `write()`; with sens.plot the maps on rank 0,
    `plot(sens.output)` (their paths). Returns J, the norms and the forward steps."""
    from framework.collective import on_root

    require_finite(s, value, chosen,
                   f"sensitivity run: nothing written to sensitivity.output = {str(sens.output)!r}")
    norms = {name: owned_inner(s.distribution, [(loc, g, g)]) ** 0.5 for name, loc, g in norms_of}
    log_sweep(s, sens, value, stats, norms)
    write()
    if s.comm.Get_rank() == 0:
        log.info("gradients written to %s", sens.output)
    if sens.plot:
        def maps():
            for target in plot(sens.output):
                log.info("wrote %s", target)
        on_root(s.comm, maps)
    return {"J": value, **norms, "forward_steps": stats.forward_steps}


def sensitivity_sweep(s, sens, cost, check, progress: bool):
    """(J, gradients, stats) of `cost` for the run of setup `s` (`framework.driver.Setup`: any model
    of the stepper) as a `sensitivity` section `sens` asks (adjoint_mode, checkpointing): the
    tables and kernels prepared, the snapshots planned before the first step
    (`adjoint.snapshot_memory.plan`), the forward sweep under the watchdog `check`, progress
    bars on rank 0. A watchdog stop raises WatchdogError saying that nothing was written to
    sensitivity.output."""
    model = s.model
    show = progress and s.comm.Get_rank() == 0
    bars = {kind: tqdm.tqdm(total=s.total, desc=desc, unit="step", disable=not show,
                            dynamic_ncols=True, leave=kind == "adjoint")
            for kind, desc in (("forward", "forward"), ("adjoint", "adjoint"))}
    recomputed, adjoint_started = [0], []

    def on_step(kind):
        if kind == "adjoint" and not adjoint_started:
            adjoint_started.append(True)
            log.info("forward sweep done in %.2f s; adjoint sweep", time.perf_counter() - t0)
            bars["adjoint"].reset(total=s.total)        # its rate and ETA from the sweep's start
        if kind == "recompute":
            recomputed[0] += 1
            bars["adjoint"].set_postfix_str(f"{recomputed[0]} recomputed", refresh=False)
        else:
            bars[kind].update(1)

    t0 = time.perf_counter()
    with quiet_floats():
        work = prepare(model, mode=sens.adjoint_mode)
    log.info("adjoint tables and kernels ready in %.2f s", time.perf_counter() - t0)
    checkpointing, memory = plan(sens.checkpointing, s.total, sum(x.nbytes for x in model.state),
                                 s.comm, s.xp, "sensitivity.checkpointing", work)
    # Deferred from the line that announces the sweeps: a signal after it is reported by the sweep.
    with stop.deferred():
        log.info("checkpointing %s: %s", checkpointing.schedule, memory)
        t0 = time.perf_counter()
        try:
            with quiet_floats():
                value, grads, stats = run_gradient(model, model.state, cost, s.total,
                                                   mode=sens.adjoint_mode,
                                                   checkpointing=checkpointing,
                                                   rank=s.comm.Get_rank(), on_step=on_step,
                                                   check=check,
                                                   checkpointing_key="sensitivity.checkpointing",
                                                   planned=memory)
        except WatchdogError as exc:
            raise WatchdogError(f"{exc}; nothing written to sensitivity.output = "
                                f"{str(sens.output)!r}") from None
        finally:
            for bar in bars.values():
                bar.close()
    stats.wall, stats.schedule = time.perf_counter() - t0, checkpointing.schedule
    return value, grads, stats


def log_sweep(s, sens, value: float, stats, norms: dict) -> None:
    """The log lines of a finished sweep: J, its steps and time, the checkpointing's work and the
    gradients' norms."""
    log.info("J = %.12g over %d steps (%.3f days); gradient in %.2f s", value, s.total,
             s.total * s.dt / DAY, stats.wall)
    log.info("checkpointing %s: %d forward steps for %d (%d recomputed); at most %d states in "
             "memory, %d on disk", stats.schedule, stats.forward_steps, stats.n_steps,
             stats.recomputed, stats.max_states_in_memory, stats.max_states_on_disk)
    log.info("gradient norms: %s", ", ".join(f"|{k}| {v:.6g}" for k, v in norms.items()))


def quiet_floats():
    """No NumPy floating-point warnings inside the block: a state leaving the scheme's range is the
    watchdog's to report (one line naming step, field and place), and a J or gradient that is not
    finite `require_finite`'s."""
    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


def require_finite(s, value: float, fields, what: str) -> None:
    """Raise WatchdogError (on every rank together) when J = `value` or one of `fields` ((name,
    location, local array): owned rows checked on every rank) is not finite; `what` says what
    was not done (the message's start)."""
    flags = [bool(np.isfinite(value))]
    for _, location, field in fields:
        n = s.distribution.owned[location]
        flags.append(bool(s.xp.isfinite(field[:n]).all()))
    if not is_serial(s.comm):
        flags = [all(column) for column in zip(*s.comm.allgather(flags))]
    bad = ([] if flags[0] else [f"J = {value}"]) + [name for (name, _, _), ok in
                                                    zip(fields, flags[1:]) if not ok]
    if bad:
        where = ("the forward run left the floating-point range between the watchdog's checks?"
                 if not flags[0] else "the adjoint run left the floating-point range?")
        raise WatchdogError(f"{what}: {' and '.join(bad)} not finite, though the forward run passed "
                            f"the watchdog ({where}); expected finite values: try a smaller "
                            "time.dt, or watchdog.interval_steps = 1 to check every step")


def write_gradient_file(path, s, value: float, cost_units: str, fill, attributes=None,
                        config=None) -> None:
    """A gradient file of any model (written on rank 0, atomically; an error there raised on
    every rank): the mesh, or with `config`'s output.mesh a reference to its grid file
    (`framework.driver.grid_reference`), one record at the run's start (Time, xtime), what `fill(ds)`
    writes (the gradients: data gathered before), J (in `cost_units`) and the global
    `attributes` (`framework.output.provenance`; model_name only when None)."""
    import netCDF4
    from grids.atomic import atomic_path
    from grids.mpas_io import write_mesh
    from framework.collective import on_root
    from framework.driver import grid_reference
    from framework.dates import START, start_of
    from framework.mesh_files import create_mesh_part
    from framework.output import create_time, reporting_space, set_time, stamp
    from grids.netcdf_files import closing_dataset

    def write():
        grid = None if config is None else grid_reference(config, s.global_mesh, path,
                                                          "sensitivity.output")
        with reporting_space(path, "sensitivity.output"), atomic_path(path) as tmp:
            if grid is None:
                write_mesh(s.global_mesh, tmp)
                ds = netCDF4.Dataset(tmp, "a")
                stamp(ds, attributes)
            else:
                ds = create_mesh_part(tmp, s.global_mesh, grid, attributes, output=path)
            with closing_dataset(ds):
                start = START if config is None else start_of(config)
                create_time(ds, start)
                set_time(ds, 0, s.start * s.dt, start)
                fill(ds)
                cost = ds.createVariable("J", "f8", ("Time",))
                cost[0] = value
                cost.units = cost_units
                cost.long_name = "cost function"
    on_root(s.comm, write)


# -- output files: claimed before the run, PNGs marked as this model's -------------------------

def claim_outputs(comm, key: str, paths, maps=(), *, maps_off: str | None = None) -> list:
    """The files of a run under config key `key`, claimed on rank 0 before any work: each of
    `paths` as a `framework.output.OutputFile` (its directory checked, a file there that this model
    did not write refused, locked against a second run on the same path), and each PNG of `maps`
    checked the same way (its lock is that of paths[0], beside it; `maps_off`: the setting that
    turns the maps off, named in the error). An error on rank 0 is raised
    on every rank (`framework.collective.on_root`). Returns the OutputFiles on rank 0 ([]
    elsewhere): `release` them when the run ends."""
    from framework.output import claim

    def maps_ok():
        for png in maps:
            problem = map_problem(png)
            if problem is not None:
                off = "" if maps_off is None else f" (no maps: {maps_off})"
                raise OutputError(f"{key} = {str(paths[0])!r}: its map {str(png)!r} {problem}{off}")
    return claim(comm, [(key, path) for path in paths], maps_ok)


class FinalStateProjection:
    """J = <x_n, y>, linear in the final state: the adjoint run of it is the adjoint model
    applied to y."""

    def __init__(self, y, n: int):
        self.y, self.steps = tuple(y), frozenset([n])

    def value(self, k, state) -> float:
        return 0.0

    def gradient(self, k, state):
        return [a.copy() for a in self.y] if k in self.steps else None


def dot_and_taylor(s, sens, cost, check, seed, scales, active, controls: str) -> bool:
    """The checks of `check_adjoint` for the model of setup `s` (any model of the stepper): the
    dot-product test of the whole run on random directions dx of its state and controls (field
    i scaled by scales[i]) and y of its final state, and the Taylor test of `cost` along dx with
    the fields that `active` marks false left fixed (`controls`: what moves, in words)."""
    comm, dist, model = s.comm, s.distribution, s.model
    n, n_state = s.total, len(model.state_locations)
    locations = model.state_locations + model.control_locations
    fields0 = [x.copy() for x in model.state] + [c.copy() for c in model.controls]
    dx, y = _directions(s, seed, fields0, locations, scales)

    # Dot-product test of the n-step run: <TLM dx, y> against <dx, ADM y>.
    tangent = run_tangent(model, fields0[:n_state], dx[:n_state], dx[n_state:], n, check=check)
    lhs = owned_inner(dist, list(zip(model.state_locations, tangent, y)))
    _, adj, _ = run_gradient(model, fields0[:n_state], FinalStateProjection(y, n), n,
                             mode=sens.adjoint_mode, rank=comm.Get_rank(), check=check)
    rhs = owned_inner(dist, list(zip(locations, dx, adj)))
    dot = abs(lhs - rhs) / max(abs(lhs), 1e-300)
    dot_ok = dot <= DOT_TOLERANCE[np.dtype(s.dtype)]

    # Taylor test of the config's cost along a random direction of the controls.
    value, grads, _ = run_gradient(model, fields0[:n_state], cost, n, mode=sens.adjoint_mode,
                                   checkpointing=sens.checkpointing, rank=comm.Get_rank(),
                                   check=check, checkpointing_key="sensitivity.checkpointing")
    m = [d if on else d * 0 for d, on in zip(dx, active)]
    derivative = owned_inner(dist, list(zip(locations, grads, m)))

    taylor = taylor_test(cost_of_controls(model, cost, n, check=check), tuple(fields0), tuple(m),
                         derivative, eps0=1.0, steps=TAYLOR_STEPS)
    judged = taylor.min_rate_from(TAYLOR_JUDGED_FROM)
    taylor_ok = judged >= TAYLOR_MIN_RATE
    if comm.Get_rank() == 0:
        print(f"dot-product test of the {n}-step run (TLM vs ADM, {sens.adjoint_mode} adjoint): "
              f"<M dx, y> = {lhs:.17g}, <dx, M^T y> = {rhs:.17g}, relative difference "
              f"{dot:.3e} ({'pass' if dot_ok else 'FAIL'}, tolerance "
              f"{DOT_TOLERANCE[np.dtype(s.dtype)]:g})")
        print(f"Taylor test of J = {value:.12g} along a random direction of the controls "
              f"{controls} (dJ.dm = {derivative:.12g}):")
        print(f"{'eps':>10} {'|J(m + eps dm) - J(m) - eps dJ.dm|':>36} {'rate':>7}")
        for i, (eps, r) in enumerate(zip(taylor.epsilons, taylor.remainders)):
            rate = f"{taylor.rates[i - 1]:7.3f}" if i else ""
            print(f"{eps:10.4g} {r:36.6e} {rate:>7}")
        print(f"Taylor test: minimum rate {judged:.3f} for eps <= {TAYLOR_JUDGED_FROM:g} "
              f"({'pass' if taylor_ok else 'FAIL'}, >= {TAYLOR_MIN_RATE})")
    return bool(dot_ok and taylor_ok)


def _directions(s, seed, fields, locations, scales):
    """Random directions, the same for every rank count (drawn globally on rank 0, scattered):
    dx of the shapes of `fields` (the state and the controls), field i scaled by scales[i], and
    y of the state's shapes, of unit size."""
    rng = np.random.default_rng(seed)
    g = s.global_mesh
    sizes = None if g is None else {"cell": g.nCells, "edge": g.nEdges}
    n_state = len(s.model.state_locations)
    specs = {"dx": list(zip(locations, scales, fields)),
             "y": [(loc, 1.0, f) for loc, f in zip(locations[:n_state], fields[:n_state])]}
    out = {}
    for key, spec in specs.items():
        drawn = []
        for location, scale, like in spec:
            full = None if sizes is None else \
                rng.standard_normal((sizes[location],) + tuple(like.shape[1:])) * scale
            local = s.distribution.scatter(location, full)
            drawn.append(s.xp.asarray(local, dtype=s.dtype))
        out[key] = drawn
    return out["dx"], out["y"]


def owned_mean(s, a) -> float:
    n = s.distribution.owned["cell"]
    total = float(a[:n].sum()) if is_serial(s.comm) else s.comm.allreduce(float(a[:n].sum()))
    count = n if is_serial(s.comm) else s.comm.allreduce(n)
    return total / count


def owned_max(s, a, location) -> float:
    n = s.distribution.owned[location]
    local = float(abs(a[:n]).max()) if n else 0.0
    return local if is_serial(s.comm) else s.comm.allreduce(local, op=_max())


def _max():
    from mpi4py import MPI

    return MPI.MAX


__all__ = ["Sensitivity", "run_sensitivity", "check_adjoint", "write_gradient_file",
           "gradient_units", "claim_outputs", "claimed", "cost_context", "finish",
           "require_finite", "quiet_floats", "sensitivity_sweep", "log_sweep", "dot_and_taylor",
           "owned_max", "owned_mean", "FinalStateProjection"]
