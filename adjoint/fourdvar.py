"""A 4D-Var twin experiment from a config's `fourdvar` section.

A truth run from the case's initial state makes the observations: h at a random subset of cells
(the same at every time) at the configured times, plus Gaussian noise of the observation error
sigma_o, written to `<output stem>.observations.nc`. The first guess x_b is the truth's initial
state with a smooth perturbation of h (Gaussian hills of the configured amplitude). The analysis
minimises, over the initial state x0 = x_b + S v (S = diag(sigma_h, sigma_u), the background
errors),

    J(v) = v.v / 2 + sum_o (h_{k_o}[c_o] - y_o)^2 / (2 sigma_o^2),   dJ/dv = v + S dJ_o/dx0,

with SciPy's L-BFGS-B on rank 0 (the control vector gathered in global order); every evaluation
is a forward and an adjoint run on every rank. The log and the output file report, per iteration,
the cost, the gradient norm and the rms error of the initial h and u against the truth.

The output, its observations file and its PNG are claimed before any work
(`adjoint.sensitivity.claim_outputs`); the truth run and every forward sweep run the forward run's
watchdog (`swm.driver.state_check`), and a state out of range, or a J or gradient that is not
finite, stops the run (`swm.watchdog.WatchdogError`) before the analysis is written. Files carry
`model_name = swm.output.MODEL_NAME` and are written atomically.
"""
from __future__ import annotations

import logging
import pathlib
import time

import numpy as np

from meshops.device.backend import to_host
from meshops.parallel.comm import is_serial

from adjoint.costs import ObservationCost, write_observations
from adjoint.gradient import advance, run_gradient, watchdog
from adjoint.sensitivity import (_checked, claim_outputs, cost_context, quiet_floats,
                                 require_finite)
from swm.config import Config, ConfigError
from swm.files import convergence_plot, observations_path
from swm.output import MODEL_NAME, mpas_namelist, provenance, release
from swm.watchdog import WatchdogError

log = logging.getLogger("swm")

#: Radius (m) of the Gaussian hills of the first guess's h perturbation, and their number.
HILL_RADIUS = 1.5e6
HILLS = 4


def hills(mesh, amplitude: float, rng) -> np.ndarray:
    """sum_i a_i exp(-(d_i / R)^2) on the cells, d_i the great-circle distance to a random centre,
    a_i = +-amplitude."""
    out = np.zeros(mesh.nCells)
    for _ in range(HILLS):
        lat0, lon0 = np.arcsin(rng.uniform(-1, 1)), rng.uniform(0, 2 * np.pi)
        cos_d = (np.sin(lat0) * np.sin(mesh.latCell)
                 + np.cos(lat0) * np.cos(mesh.latCell) * np.cos(mesh.lonCell - lon0))
        d = mesh.sphere_radius * np.arccos(np.clip(cos_d, -1.0, 1.0))
        out += rng.choice((-1.0, 1.0)) * amplitude * np.exp(-(d / HILL_RADIUS) ** 2)
    return out


def observation_steps(config: Config, dt: float, total: int) -> list[int]:
    steps = []
    for i, hours in enumerate(config.fourdvar.observation_hours):
        k = hours * 3600.0 / dt
        if abs(k - round(k)) > 1e-6 * max(k, 1) or not 0 <= round(k) <= total:
            raise ConfigError(f"fourdvar.observation_hours[{i}] = {hours}: expected a time of the "
                              f"run, a multiple of dt = {dt:g} s within time.days = "
                              f"{config.time.days} ({total * dt / 3600.0:g} h)")
        steps.append(int(round(k)))
    return sorted(set(steps))




def run_fourdvar(config: Config) -> dict:
    """The twin experiment; returns the convergence history (every rank). Progress: one log
    line per L-BFGS-B iteration. Its files (the output, its observations and its PNG) are claimed
    before any work and released when the run ends."""
    from meshops.parallel.comm import world

    out = pathlib.Path(config.fourdvar.output)
    files = claim_outputs(world(), "fourdvar.output", [out, observations_path(out)],
                          [convergence_plot(out)])
    try:
        with quiet_floats():
            return _fourdvar(config, out)
    finally:
        release(files)


def _fourdvar(config: Config, out: pathlib.Path) -> dict:
    from scipy.optimize import minimize

    from swm.collective import on_root
    from swm.driver import setup, state_checker

    fv = config.fourdvar
    attributes = provenance(config)
    s = setup(config)
    attributes.update(mpas_namelist(config, s.dt, s.total))
    comm, rank, dist, model = s.comm, s.comm.Get_rank(), s.distribution, s.model
    obs_steps = _checked(lambda: observation_steps(config, s.dt, s.total), comm)
    n_steps = obs_steps[-1]
    obs_path = observations_path(out)
    check = watchdog(state_checker(config, s), n_steps, config.watchdog.interval_steps,
                     start=s.start)
    nothing = f"no analysis written to fourdvar.output = {str(out)!r}"

    # Truth: its initial state (global, rank 0) and h at the observation times.
    truth = {"h": dist.gather("cell", to_host(model.h)), "u": dist.gather("edge", to_host(model.u))}
    state, truth_h = [model.h.copy(), model.u.copy()], {}
    try:
        for k in range(n_steps + 1):
            check(k, state)
            if k in obs_steps:
                truth_h[k] = dist.gather("cell", to_host(state[0]))
            if k < n_steps:
                state = advance(model, state)
    except WatchdogError as exc:
        raise WatchdogError(f"{exc} (the truth run); {nothing}") from None
    g = s.global_mesh
    root = {}                    # rank 0: the first guess and the background errors

    def observe():
        import netCDF4
        from grids.atomic import atomic_path
        from swm.output import reporting_space, stamp

        rng = np.random.default_rng(fv.seed)
        cells = np.sort(rng.choice(g.nCells, max(1, int(round(fv.observed_fraction * g.nCells))),
                                   replace=False))
        rows = [(c, k) for k in obs_steps for c in cells]
        cell = np.array([c for c, _ in rows])
        when = np.array([k * s.dt for _, k in rows])
        value = np.array([truth_h[k][c] for c, k in rows])
        value = value + fv.observation_error * rng.standard_normal(value.size)
        with reporting_space(obs_path, "fourdvar.output", out), atomic_path(obs_path) as tmp:
            write_observations(tmp, cell, when, value, np.full(value.size, fv.observation_error))
            with netCDF4.Dataset(tmp, "a") as ds:
                stamp(ds, attributes)
        log.info("%d observations of h at %d cells and %d times (error %g m) written to %s",
                 value.size, cells.size, len(obs_steps), fv.observation_error, obs_path)
        root["background"] = {"h": truth["h"] + hills(g, fv.first_guess_amplitude, rng),
                              "u": truth["u"]}
        root["sigma"] = np.concatenate([np.full(g.nCells, fv.background_error_h),
                                        np.full(g.nEdges, fv.background_error_u)])

    on_root(comm, observe)              # every rank waits for the observation file
    background, sigma = root.get("background"), root.get("sigma")
    context = cost_context(s, n_steps)
    cost = ObservationCost(context, obs_path, "fourdvar observations")

    def evaluate(v):
        """(J, dJ/dv) on rank 0 (None elsewhere); collective."""
        x0 = None if rank != 0 else np.concatenate([background["h"], background["u"]]) + sigma * v
        h0 = s.xp.asarray(dist.scatter("cell", None if x0 is None else x0[:g.nCells]), dtype=s.dtype)
        u0 = s.xp.asarray(dist.scatter("edge", None if x0 is None else x0[g.nCells:]), dtype=s.dtype)
        try:
            j_obs, (gh, gu, _), _ = run_gradient(model, (h0, u0), cost, n_steps, rank=rank,
                                                 check=check)
        except WatchdogError as exc:
            raise WatchdogError(f"{exc} (a forward run of the minimisation); {nothing}") from None
        require_finite(s, j_obs, [("dJo/dh0", "cell", gh), ("dJo/du0", "edge", gu)],
                       f"4D-Var: {nothing}")
        gh, gu = dist.gather("cell", to_host(gh)), dist.gather("edge", to_host(gu))
        if rank != 0:
            return None
        return j_obs + 0.5 * float(v @ v), v + sigma * np.concatenate([gh, gu])

    history = []
    t0 = time.perf_counter()

    def record(v, j, grad):
        x0 = np.concatenate([background["h"], background["u"]]) + sigma * v
        h_err = float(np.sqrt(np.mean((x0[:g.nCells] - truth["h"]) ** 2)))
        u_err = float(np.sqrt(np.mean((x0[g.nCells:] - truth["u"]) ** 2)))
        history.append((len(history), j, float(np.linalg.norm(grad)), h_err, u_err))
        log.info("iteration %d: J %.6e, |grad J| %.3e, rms error of h0 %.4g m, of u0 %.4g m/s "
                 "(%.1f s)", *history[-1], time.perf_counter() - t0)

    last = {}
    if rank == 0:
        def fun(v):
            if not is_serial(comm):
                comm.bcast(("evaluate", v), root=0)
            j, grad = evaluate(v)
            last.update(v=v.copy(), j=j, grad=grad)
            return j, grad

        v0 = np.zeros(g.nCells + g.nEdges)
        j0, g0 = fun(v0)
        record(v0, j0, g0)

        def callback(intermediate_result):
            record(intermediate_result.x, intermediate_result.fun, last["grad"])

        minimize(fun, v0, jac=True, method="L-BFGS-B", callback=callback,
                 options={"maxiter": fv.iterations, "maxcor": 20, "ftol": 1e-15, "gtol": 1e-10})
        if not is_serial(comm):
            comm.bcast(("stop", None), root=0)
    else:
        while True:
            command, v = comm.bcast(None, root=0)
            if command == "stop":
                break
            evaluate(v)
    on_root(comm, lambda: write_analysis(out, g, background, sigma, last["v"], history, truth,
                                         attributes=attributes, seconds=s.start * s.dt))
    history = history if is_serial(comm) else comm.bcast(history, root=0)
    first, final = history[0], history[-1]
    if rank == 0:
        log.info("4D-Var: J %.6e -> %.6e (x %.3g) in %d iterations; rms error of h0 %.4g -> %.4g "
                 "m, of u0 %.4g -> %.4g m/s; written to %s", first[1], final[1],
                 first[1] / final[1], final[0], first[3], final[3], first[4], final[4], out)
    return {"history": history}


def write_analysis(path, mesh, background, sigma, v, history, truth, *, attributes=None,
                   seconds: float = 0.0) -> None:
    """The analysis (h0, u0 as MPAS variables h, u), the first guess and the truth's initial h
    (one record at the analysis time `seconds`: Time, xtime), and the convergence history, in one
    netCDF file with the global `attributes` (`swm.output.provenance`; model_name only when None);
    a PNG of the convergence beside it (marked as this model's); both written atomically."""
    import netCDF4
    from grids.atomic import atomic_path
    from grids.mpas_io import write_mesh
    from swm.output import create_time, reporting_space, set_time, stamp

    x0 = np.concatenate([background["h"], background["u"]]) + sigma * v
    table = np.array(history, dtype=np.float64)
    with reporting_space(path, "fourdvar.output"), atomic_path(path) as tmp:
        write_mesh(mesh, tmp)
        with netCDF4.Dataset(tmp, "a") as ds:
            stamp(ds, attributes)
            create_time(ds)
            set_time(ds, 0, seconds)
            if "nVertLevels" not in ds.dimensions:
                ds.createDimension("nVertLevels", 1)
            ds.createDimension("nIterations", table.shape[0])
            for name, dim, values, text in (
                    ("h", "nCells", x0[:mesh.nCells], "analysis: initial fluid thickness (m)"),
                    ("u", "nEdges", x0[mesh.nCells:], "analysis: initial normal velocity (m/s)"),
                    ("h_first_guess", "nCells", background["h"], "first guess of h (m)"),
                    ("h_truth", "nCells", truth["h"], "truth's initial h (m)")):
                var = ds.createVariable(name, "f8", ("Time", dim, "nVertLevels"))
                var[0, :, 0] = values
                var.long_name = text
            for i, (name, text) in enumerate((("iteration", "L-BFGS-B iteration"),
                                              ("cost", "J"), ("gradient_norm", "|dJ/dv|"),
                                              ("h_rms_error", "rms error of h0 (m)"),
                                              ("u_rms_error", "rms error of u0 (m/s)"))):
                var = ds.createVariable(name, "f8", ("nIterations",))
                var[:] = table[:, i]
                var.long_name = text
    plot_convergence(table, convergence_plot(path))


def plot_convergence(table, target) -> None:
    """J, |grad J| and the rms error of h0 per iteration, a PNG written atomically to `target`
    with the text chunk model_name = MODEL_NAME (`swm.output.png_written_by_model`)."""
    import matplotlib

    from grids.atomic import atomic_path

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    axes[0].semilogy(table[:, 0], table[:, 1], "o-", ms=3, label="J")
    axes[0].semilogy(table[:, 0], table[:, 2], "s-", ms=3, label="|grad J|")
    axes[0].set(xlabel="L-BFGS-B iteration", title="cost and gradient")
    axes[0].legend()
    axes[1].plot(table[:, 0], table[:, 3], "o-", ms=3, color="C2")
    axes[1].set(xlabel="L-BFGS-B iteration", ylabel="m", title="rms error of the initial h")
    fig.tight_layout()
    try:
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format="png", metadata={"model_name": MODEL_NAME})
    finally:
        plt.close(fig)


__all__ = ["run_fourdvar", "hills", "observation_steps", "observations_path", "write_analysis"]
