"""A 4D-Var twin experiment from a config's `fourdvar` section, for any model of the stepper.

A truth run from the case's initial state makes the observations: fields of the state at a random
subset of cells (the same at every time) at the configured times, plus Gaussian noise of the
observation errors sigma_o, written to `<output stem>.observations.nc`. The first guess x_b is the
truth's initial state with smooth perturbations (Gaussian hills of the configured amplitudes).
The analysis minimises, over the controls x0 = x_b + S v (S = diag of the background errors of
each control field),

    J(v) = v.v / 2 + sum_o (H_o(x_{k_o}) - y_o)^2 / (2 sigma_o^2),   dJ/dv = v + S dJ_o/dx0,

with SciPy's L-BFGS-B on rank 0 (the control vector gathered in global order); every evaluation
is a forward and an adjoint run on every rank. The log and the output file report, per iteration,
the cost, the gradient norm and the rms error of each initial control field against the truth.

What is model-specific comes from a `Twin` of the model: its setup and watchdog, its control
fields and their map to the model's state and back (the chain rule), what it observes, its
observation file and cost, its first guess. `swm.fourdvar.ShallowWaterTwin`: h observed,
controls (h, u); `hydrostatic.fourdvar.HydrostaticTwin`: p_s and T observed, controls (p_s,
theta, u).

The output, its observations file and its PNG are claimed before any work
(`adjoint.sensitivity.claim_outputs`); the truth run and every forward sweep run the forward run's
watchdog, and a state out of range, or a J or gradient that is not finite, stops the run
(`framework.errors.WatchdogError`) before the analysis is written. Files carry
`model_name = framework.output.MODEL_NAME` and are written atomically.
"""
from __future__ import annotations

import logging
import pathlib
import time
from dataclasses import dataclass

import numpy as np

from meshops.device.backend import to_host
from meshops.parallel.comm import is_serial

from adjoint.gradient import advance, run_gradient
from adjoint.sensitivity import claim_outputs, cost_context, quiet_floats, require_finite
from framework.collective import on_every_rank
from framework.files import convergence_plot, observations_path
from framework.output import MODEL_NAME, release
from framework.errors import ConfigError, WatchdogError

log = logging.getLogger("adjoint")

#: Radius (m) of the Gaussian hills of the first guess's perturbations, and their number.
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


def observation_steps(config, dt: float, total: int) -> list[int]:
    """The steps of fourdvar.observation_hours, sorted, each once; ConfigError naming the key for
    a time that is not a multiple of dt within the run."""
    steps = []
    for i, hours in enumerate(config.fourdvar.observation_hours):
        k = hours * 3600.0 / dt
        if abs(k - round(k)) > 1e-6 * max(k, 1) or not 0 <= round(k) <= total:
            raise ConfigError(f"fourdvar.observation_hours[{i}] = {hours}: expected a time of the "
                              f"run, a multiple of dt = {dt:g} s within time.days = "
                              f"{config.time.days} ({total * dt / 3600.0:g} h)")
        steps.append(int(round(k)))
    return sorted(set(steps))


def observation_rows(cells, steps) -> tuple[np.ndarray, np.ndarray]:
    """(cell, step) of every observation of `cells` at every one of `steps`, step-major."""
    return np.tile(cells, len(steps)), np.repeat(np.asarray(steps, dtype=np.int64), len(cells))


@dataclass(frozen=True)
class Control:
    """A control field: its analysis variable `name`, its `label` in the log and the gradient's
    name (dJ/d<label>0), where it lives, its netCDF dimensions after Time, its `units`, what it is
    (`what`, long_name of the analysis), its background error `sigma`, and whether the first
    guess perturbs it (`perturbed`: its first guess and truth are written beside the analysis)."""
    name: str
    label: str
    location: str
    dims: tuple
    units: str
    what: str
    sigma: float
    perturbed: bool = False


class Twin:
    """The model-specific parts of a twin experiment of `config` (a model subclasses it):

        s                  the run's `framework.driver.Setup` (`setup()`, on every rank)
        controls           the `Control`s, in the control vector's order
        attributes         the files' global attributes
        nlev               the size of nVertLevels in the analysis file
        check(n_steps)     the watchdog's check(k, x_k) of the forward sweeps
        fields(state)      the local control fields of a model state
        state(fields)      the model state of local control fields
        gradients(g, x0)   local dJ/d(control) from the model's gradients g about state x0
        observed(state)    {name: (location, local field)} of what the observations sample
        observe(...)       the observations file (noise drawn from rng); its log line
        first_guess(...)   the first guess's control fields (global, rank 0)
        cost(context, p)   the misfit to observations file p
        fill(ds)           what the analysis file holds beside the twin's variables
    """

    def __init__(self, config):
        self.config = config
        self.nlev = 1

    def fill(self, ds) -> None:
        """Nothing beside the analysis, by default."""


def run_fourdvar(twin: Twin) -> dict:
    """The twin experiment of `twin` (a model's `Twin` of its config); returns the convergence
    history (every rank).
    Progress: one log line per L-BFGS-B iteration. Its files (the output, its observations and
    its PNG) are claimed before any work and released when the run ends; observations it wrote
    are removed when it stops before writing the analysis."""
    from meshops.parallel.comm import world

    out = pathlib.Path(twin.config.fourdvar.output)
    observations = observations_path(out)
    files = claim_outputs(world(), "fourdvar.output", [out, observations],
                          [convergence_plot(out)])
    new = files and not observations.exists()
    try:
        with quiet_floats():
            return _fourdvar(twin, out)
    except BaseException:
        if new:                         # a run stopped before its analysis leaves nothing
            observations.unlink(missing_ok=True)
        raise
    finally:
        release(files)


def _pack(fields) -> np.ndarray:
    return np.concatenate([np.ravel(f) for f in fields])


def _unpack(x, like) -> list:
    """The fields of vector x, shaped as the arrays of `like`."""
    out, i = [], 0
    for f in like:
        out.append(x[i:i + f.size].reshape(f.shape))
        i += f.size
    return out


def _fourdvar(twin: Twin, out: pathlib.Path) -> dict:
    from scipy.optimize import minimize

    from framework.collective import on_root

    config = twin.config
    fv = config.fourdvar
    s = twin.setup()
    controls = twin.controls
    comm, rank, dist, model = s.comm, s.comm.Get_rank(), s.distribution, s.model
    obs_steps = on_every_rank(lambda: observation_steps(config, s.dt, s.total), comm)
    n_steps = obs_steps[-1]
    obs_path = observations_path(out)
    check = twin.check(n_steps)
    nothing = f"no analysis written to fourdvar.output = {str(out)!r}"

    def gathered(fields):
        return [dist.gather(c.location, to_host(f)) for c, f in zip(controls, fields)]

    # Truth: its initial controls (global, rank 0) and what is observed at the observation times.
    truth = gathered(twin.fields(model.state))
    state, truth_obs = [x.copy() for x in model.state], {}
    try:
        for k in range(n_steps + 1):
            check(k, state)
            if k in obs_steps:
                truth_obs[k] = {name: dist.gather(loc, to_host(f))
                                for name, (loc, f) in twin.observed(state).items()}
            if k < n_steps:
                state = advance(model, state)
    except WatchdogError as exc:
        raise WatchdogError(f"{exc} (the truth run); {nothing}") from None
    g = s.global_mesh
    root = {}                    # rank 0: the first guess and the background errors

    def observe():
        from grids.atomic import atomic_path
        from framework.output import reporting_space, stamp
        from grids.netcdf_files import dataset

        rng = np.random.default_rng(fv.seed)
        cells = np.sort(rng.choice(g.nCells, max(1, int(round(fv.observed_fraction * g.nCells))),
                                   replace=False))
        with reporting_space(obs_path, "fourdvar.output", out), atomic_path(obs_path) as tmp:
            what = twin.observe(tmp, rng, cells, obs_steps, truth_obs)
            with dataset(tmp, "a") as ds:
                stamp(ds, twin.attributes)
        log.info("%s written to %s", what, obs_path)
        root["background"] = twin.first_guess(truth, rng)
        root["sigma"] = np.concatenate([np.full(t.size, c.sigma) for c, t in zip(controls, truth)])

    on_root(comm, observe)              # every rank waits for the observation file
    background, sigma = root.get("background"), root.get("sigma")
    cost = twin.cost(cost_context(s, n_steps), obs_path)

    def analysis(v) -> list:
        """x0 = x_b + S v, as the control fields (rank 0)."""
        return _unpack(_pack(background) + sigma * v, background)

    def evaluate(v):
        """(J, dJ/dv) on rank 0 (None elsewhere); collective."""
        x0 = analysis(v) if rank == 0 else [None] * len(controls)
        state0 = twin.state([s.xp.asarray(dist.scatter(c.location, f), dtype=s.dtype)
                             for c, f in zip(controls, x0)])
        try:
            j_obs, grads, _ = run_gradient(model, state0, cost, n_steps, rank=rank, check=check)
        except WatchdogError as exc:
            raise WatchdogError(f"{exc} (a forward run of the minimisation); {nothing}") from None
        local = twin.gradients(grads, state0)
        require_finite(s, j_obs, [(f"dJo/d{c.label}0", c.location, d)
                                  for c, d in zip(controls, local)], f"4D-Var: {nothing}")
        grad = gathered(local)
        if rank != 0:
            return None
        return j_obs + 0.5 * float(v @ v), v + sigma * _pack(grad)

    history = []
    t0 = time.perf_counter()
    errors_text = ", of ".join(f"{c.label}0 %.4g {c.units}" for c in controls)

    def record(v, j, grad):
        errors = [float(np.sqrt(np.mean((x - t) ** 2))) for x, t in zip(analysis(v), truth)]
        history.append((len(history), j, float(np.linalg.norm(grad)), *errors))
        log.info("iteration %d: J %.6e, |grad J| %.3e, rms error of " + errors_text + " (%.1f s)",
                 *history[-1], time.perf_counter() - t0)

    last = {}
    if rank == 0:
        def fun(v):
            if not is_serial(comm):
                comm.bcast(("evaluate", v), root=0)
            j, grad = evaluate(v)
            last.update(v=v.copy(), j=j, grad=grad)
            return j, grad

        v0 = np.zeros(sigma.size)
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
    on_root(comm, lambda: write_analysis(out, g, twin, analysis(last["v"]), background, truth,
                                         history, seconds=s.start * s.dt))
    history = history if is_serial(comm) else comm.bcast(history, root=0)
    first, final = history[0], history[-1]
    if rank == 0:
        changes = ", of ".join(f"{c.label}0 {a:.4g} -> {b:.4g} {c.units}"
                               for c, a, b in zip(controls, first[3:], final[3:]))
        log.info("4D-Var: J %.6e -> %.6e (x %.3g) in %d iterations; rms error of %s; written to "
                 "%s", first[1], final[1], first[1] / final[1], final[0], changes, out)
    return {"history": history}


def write_analysis(path, mesh, twin: Twin, x0, background, truth, history, *,
                   seconds: float = 0.0) -> None:
    """The analysis `x0` (the twin's control fields under their names), the first guess and the
    truth's initial state of the perturbed controls (<name>_first_guess, <name>_truth; one record
    at the analysis time `seconds`: Time, xtime), and the convergence history (iteration, cost,
    gradient_norm, <label>_rms_error), in one netCDF file with the twin's global attributes and
    `twin.fill(ds)`; a PNG of the convergence beside it (marked as this model's); both written
    atomically."""
    from grids.atomic import atomic_path
    from grids.mpas_io import write_mesh
    from framework.dates import start_of
    from framework.output import create_time, reporting_space, set_time, stamp
    from grids.netcdf_files import dataset

    table = np.array(history, dtype=np.float64)
    controls = twin.controls
    with reporting_space(path, "fourdvar.output"), atomic_path(path) as tmp:
        write_mesh(mesh, tmp)
        with dataset(tmp, "a") as ds:
            stamp(ds, twin.attributes)
            start = start_of(twin.config)
            create_time(ds, start)
            set_time(ds, 0, seconds, start)
            if "nVertLevels" not in ds.dimensions:
                ds.createDimension("nVertLevels", twin.nlev)
            ds.createDimension("nIterations", table.shape[0])
            fields = [(c.name, c, x, f"analysis: initial {c.what}") for c, x in zip(controls, x0)]
            for c, b, t in zip(controls, background, truth):
                if c.perturbed:
                    fields += [(f"{c.name}_first_guess", c, b, f"first guess of {c.label}"),
                               (f"{c.name}_truth", c, t, f"truth's initial {c.label}")]
            for name, c, values, text in fields:
                var = ds.createVariable(name, "f8", ("Time",) + c.dims)
                var[0] = np.reshape(values, var.shape[1:])
                var.long_name, var.units = f"{text} ({c.units})", c.units
            rows = [("iteration", "L-BFGS-B iteration", "1"), ("cost", "J", "1"),
                    ("gradient_norm", "|dJ/dv|", "1")]
            rows += [(f"{c.label}_rms_error", f"rms error of {c.label}0 ({c.units})", c.units)
                     for c in controls]
            for i, (name, text, units) in enumerate(rows):
                var = ds.createVariable(name, "f8", ("nIterations",))
                var[:] = table[:, i]
                var.long_name, var.units = text, units
            twin.fill(ds)
    plot_convergence(table, convergence_plot(path), controls[0])


def plot_convergence(table, target, control: Control) -> None:
    """J, |grad J| and the rms error of the first control per iteration, a PNG written atomically
    to `target` with the text chunk model_name = MODEL_NAME
    (`framework.output.png_written_by_model`)."""
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
    axes[1].set(xlabel="L-BFGS-B iteration", ylabel=control.units,
                title=f"rms error of the initial {control.label}")
    fig.tight_layout()
    try:
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format="png", metadata={"model_name": MODEL_NAME})
    finally:
        plt.close(fig)


__all__ = ["Control", "Twin", "hills", "observation_rows", "observation_steps",
           "observations_path", "run_fourdvar", "write_analysis"]
