"""A model run from a config: mesh, decomposition, initial state, the time loop with progress,
diagnostics, output, restarts and the watchdog. `run_model.py` is its command line."""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np

import meshops
from swm import testcases
from swm.config import CFL_LIMIT, Config, ConfigError
from swm.constants import DAY, GRAVITY
from swm.distribution import distribute
from swm.diagnostics import diagnostics, error_norms
from swm.model import Model
from swm.output import History, read_restart, write_restart
from swm.tendencies import Physics

log = logging.getLogger("swm")


class WatchdogError(RuntimeError):
    """The state left the scheme's range (NaN/Inf, or a Courant number above the limit)."""


def build_mesh(config: Config):
    """The global mesh of the config (rank 0 only)."""
    m = config.mesh
    if m.generate is not None:
        from grids.icosahedral import generate_icosahedral

        return generate_icosahedral(m.generate.level, lloyd_iterations=m.generate.lloyd,
                                    sphere_radius=m.radius, order=m.generate.order)
    from grids.mpas_io import read_mesh

    return read_mesh(m.file, sphere_radius=m.radius, recompute_geometry=m.recompute_geometry)


def initial_state(config: Config, mesh) -> testcases.InitialState:
    case = config.case
    if case.name == "williamson2":
        return testcases.williamson2(mesh, case.alpha)
    if case.name == "galewsky":
        return testcases.galewsky(mesh, perturbed=case.perturbed)
    return testcases.CASES[case.name](mesh)


def time_step(config: Config, mesh, state) -> tuple[float, int, int]:
    """(dt, steps per output, total steps): dt divides the output interval; with time.cfl, the
    largest such dt under cfl * min(dcEdge) / max(|u| + sqrt(g h))."""
    interval = config.output.interval_hours * 3600.0
    if config.time.dt is not None:
        per_output = interval / config.time.dt
        if abs(per_output - round(per_output)) > 1e-9 * per_output:
            raise ConfigError(f"time.dt = {config.time.dt}: expected a divisor of "
                              f"output.interval_hours = {config.output.interval_hours} h ({interval} s)")
        per_output = int(round(per_output))
    else:
        speed = np.abs(state.u).max() + np.sqrt(GRAVITY * (state.h).max())
        per_output = math.ceil(interval / (config.time.cfl * mesh.dcEdge.min() / speed))
    dt = interval / per_output
    total = config.time.days * DAY / dt
    if abs(total - round(total)) > 1e-9 * max(total, 1):
        raise ConfigError(f"time.days = {config.time.days}: expected a multiple of the time step "
                          f"{dt} s (output.interval_hours = {config.output.interval_hours})")
    return dt, per_output, int(round(total))


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def watchdog(model, distribution, step, gravity, comm):
    """Raise WatchdogError on every rank when a rank finds NaN/Inf or a Courant number above
    CFL_LIMIT on its owned rows; the message names the step, field, entity and its lat/lon."""
    problem = _problem(model, distribution, step, gravity)
    problems = comm.allgather(problem) if comm.Get_size() > 1 else [problem]
    found = [p for p in problems if p]
    if found:
        raise WatchdogError(found[0])


def _problem(model, distribution, step, gravity) -> str | None:
    host, owned, mesh = _host, distribution.owned, distribution.mesh
    for name, field, loc, lat, lon in (("h", model.h, "cell", mesh.latCell, mesh.lonCell),
                                       ("u", model.u, "edge", mesh.latEdge, mesh.lonEdge)):
        values = host(field)[:owned[loc]]
        bad = np.flatnonzero(~np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1))
        if bad.size:
            i = int(bad[0])
            return (f"step {step}: {name} = {values[i]} at {loc} {distribution.global_index(loc, i)} (lat "
                    f"{np.degrees(lat[i]):.2f}, lon {np.degrees(lon[i]):.2f} deg): not finite")
    h = host(model.h)
    u = host(model.u)[:owned["edge"]]
    cells = mesh.cellsOnEdge[:owned["edge"]]
    speed = np.abs(u) + np.sqrt(gravity * np.maximum(0.5 * (h[cells[:, 0]] + h[cells[:, 1]]), 0.0))
    cfl = speed * model.dt / mesh.dcEdge[:owned["edge"]]
    worst = int(np.argmax(cfl))
    if cfl[worst] > CFL_LIMIT:
        return (f"step {step}: Courant number {cfl[worst]:.3f} at edge "
                f"{distribution.global_index('edge', worst)} (lat "
                f"{np.degrees(mesh.latEdge[worst]):.2f}, lon {np.degrees(mesh.lonEdge[worst]):.2f} "
                f"deg) above the limit {CFL_LIMIT}")
    return None


def _on_root(comm, fn):
    """fn() on rank 0, its result broadcast; an exception on rank 0 is raised on every rank (a
    ConfigError as itself, anything else as a RuntimeError with rank 0's message)."""
    outcome = None
    if comm.Get_rank() == 0:
        try:
            outcome = ("ok", fn())
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank below
            if comm.Get_size() == 1:
                raise
            outcome = ("error", exc)
    if comm.Get_size() > 1:
        outcome = comm.bcast(outcome if outcome is None or outcome[0] == "ok"
                             else ("error", (type(outcome[1]).__name__, str(outcome[1]),
                                             isinstance(outcome[1], ConfigError))), root=0)
    if outcome[0] == "ok":
        return outcome[1]
    error = outcome[1]
    if isinstance(error, Exception):
        raise error
    name, message, is_config = error
    raise ConfigError(message) if is_config else RuntimeError(f"rank 0: {name}: {message}")


@dataclass
class Setup:
    """A run's pieces on this rank: communicator, array module and dtype, where the fields live
    (`swm.distribution`), the local mesh and model, the time step, steps per output and in all, and
    on rank 0 the global mesh (None elsewhere)."""
    comm: object
    xp: object
    dtype: np.dtype
    distribution: object
    mesh: object
    model: Model
    dt: float
    per_output: int
    total: int
    global_mesh: object = None
    start: int = 0


def setup(config: Config) -> Setup:
    """Mesh, decomposition, initial state (or the restart's) and model of `config` on every rank
    of the world communicator."""
    comm = meshops.parallel.world()
    xp = np
    if config.backend == "cupy":
        import cupy as xp

        meshops.parallel.comm.select_device(comm)
    dtype = np.dtype(config.dtype)
    root = {}                                     # the global mesh and state, on rank 0 only

    def build():
        root["mesh"] = build_mesh(config)
        root["state"] = initial_state(config, root["mesh"])
        return time_step(config, root["mesh"], root["state"])

    dt, per_output, total = _on_root(comm, build)
    global_mesh, state = root.get("mesh"), root.get("state")
    physics = Physics(gravity=GRAVITY, visc2=config.diffusion.visc2, visc4=config.diffusion.visc4,
                      apvm=config.diffusion.apvm, dt=dt)
    distribution = distribute(config, comm, global_mesh, physics, dtype)
    mesh = distribution.mesh
    start = 0
    if config.restart.resume:
        def resume():
            h0, u0, step, dt_file = read_restart(config.restart.path, n_cells=global_mesh.nCells,
                                                 n_edges=global_mesh.nEdges, dtype=dtype,
                                                 case=config.case.name)
            if dt_file != dt:
                raise ConfigError(f"{config.restart.path}: restart dt = {dt_file} s, the config "
                                  f"gives {dt} s")
            state.h, state.u = h0, u0
            return step
        start = _on_root(comm, resume)
        log.info("resumed from %s at step %d", config.restart.path, start)
    log.info("mesh %d cells, %d edges, %d vertices; %s; backend %s %s; dt %.3f s, %d steps",
             *(global_mesh.nCells, global_mesh.nEdges, global_mesh.nVertices)
             if comm.Get_rank() == 0 else (0, 0, 0),
             distribution.describe(), config.backend, config.dtype, dt, total)
    if config.backend == "cupy" and comm.Get_size() > 1:
        log.info("halo transport: %s", distribution.state_exchange.transport_name(xp))

    def local(location, name):
        field = distribution.scatter(location, None if state is None else
                                     np.asarray(getattr(state, name), dtype=dtype))
        return xp.asarray(field)

    model = Model(mesh, local("cell", "h"), local("edge", "u"), local("cell", "b"),
                  local("vertex", "f_vertex"), dt, physics, exchange=distribution.exchange,
                  exchange_tl=distribution.exchange_tl,
                  exchange_adjoint=distribution.exchange_adjoint)
    model.step_count = start
    return Setup(comm, xp, dtype, distribution, mesh, model, dt, per_output, total, global_mesh,
                 start)


def run(config: Config, *, progress: bool = True) -> dict:
    """Run `config` on one process or on every rank of the world communicator; returns the last
    diagnostics (every rank)."""
    import tqdm

    s = setup(config)
    comm, distribution, mesh, model = s.comm, s.distribution, s.mesh, s.model
    rank, dtype, dt, per_output, total, start = (comm.Get_rank(), s.dtype, s.dt, s.per_output,
                                                 s.total, s.start)
    global_mesh = s.global_mesh
    diag_names = ("mass", "energy", "potential_enstrophy", "max_cfl", "h_min", "h_max")
    if config.case.name == "williamson2":
        diag_names += ("h_l1", "h_l2", "h_linf")
    history = None
    if rank == 0:
        history = History(config.output.path, global_mesh, 1, dtype, config.output.variables,
                          diag_names, resume=config.restart.resume)
    global_mesh = s.global_mesh = None         # the global mesh is not needed any more
    restart_every = (None if config.restart.interval_hours is None
                     else max(1, int(round(config.restart.interval_hours * 3600.0 / dt))))

    def output(record):
        d = diagnostics(model, comm, distribution.owned, GRAVITY)
        if config.case.name == "williamson2":
            n = distribution.owned["cell"]
            exact = testcases.williamson2_height(mesh.latCell[:n], mesh.lonCell[:n],
                                                 mesh.sphere_radius, config.case.alpha)
            d.update({f"h_{k}": v for k, v in
                      error_norms(comm, _host(model.h)[:n], exact, mesh.areaCell[:n]).items()})
        fields = output_fields(model)
        if history is not None:
            history.write(record, model.time, distribution.gather, fields, d)
        else:
            for name in config.output.variables:
                distribution.gather(OUTPUT_LOCATION[name], fields[name]())
        log.info("day %.3f: %s", model.time / DAY, ", ".join(f"{k} {v:.6g}" for k, v in d.items()))
        return d

    def save_restart(step):
        h = distribution.gather("cell", _host(model.h))
        u = distribution.gather("edge", _host(model.u))
        if rank == 0:
            write_restart(config.restart.path, h, u, step, dt, config.case.name)

    finished = False
    bar = tqdm.tqdm(total=total, initial=start, disable=not (progress and rank == 0), unit="step",
                    dynamic_ncols=True)
    t0 = time.perf_counter()
    try:
        last = output(start // per_output) if start % per_output == 0 else {}
        for step in range(start + 1, total + 1):
            good = (model.h, model.u)                 # the step makes new arrays: no copy needed
            model.step()
            try:
                watchdog(model, distribution, step, GRAVITY, comm)
            except WatchdogError:
                model.h, model.u = good
                model.step_count -= 1
                save_restart(step - 1)
                output(step // per_output + (step % per_output > 0))
                finished = True
                log.error("the state of step %d (day %.4f) was written to %s and %s",
                          step - 1, model.time / DAY, config.output.path, config.restart.path)
                raise
            bar.update(1)
            bar.set_postfix_str(f"day {model.time / DAY:.2f}", refresh=False)
            if step % per_output == 0 or step == total:
                last = output(step // per_output)
            if restart_every and step % restart_every == 0 and step < total:
                save_restart(step)
        finished = True
    finally:
        bar.close()
        if history is not None:
            history.close(finished)
    wall = time.perf_counter() - t0
    log.info("%d steps in %.2f s (%.1f steps/s, %.1f simulated days per hour); output %s",
             total - start, wall, (total - start) / max(wall, 1e-9),
             (total - start) * dt / DAY / max(wall, 1e-9) * 3600.0, config.output.path)
    return last


OUTPUT_LOCATION = {"h": "cell", "u": "edge", "vorticity": "vertex", "divergence": "cell",
                   "ke": "cell", "b": "cell", "uReconstructZonal": "cell", "uReconstructMeridional": "cell"}


def output_fields(model) -> dict:
    """Output variables as callables of the local state (evaluated one at a time, on the host)."""
    host = lambda a: a.get() if hasattr(a, "get") else a  # noqa: E731
    return {
        "h": lambda: host(model.h), "u": lambda: host(model.u), "b": lambda: host(model.b),
        "vorticity": lambda: host(meshops.curl_e2v(model.device_mesh, model.u)),
        "divergence": lambda: host(meshops.div_e2c(model.device_mesh, model.u)),
        "ke": lambda: host(meshops.ke_e2c(model.device_mesh, model.u)),
        "uReconstructZonal": lambda: host(meshops.reconstruct_zonal_meridional_e2c(model.device_mesh, model.u)[0]),
        "uReconstructMeridional": lambda: host(meshops.reconstruct_zonal_meridional_e2c(model.device_mesh, model.u)[1]),
    }
