"""A sensitivity run of the hydrostatic core from a config's `sensitivity` section
(`hydrostatic.applications`): the forward run under the watchdog, the cost
(`hydrostatic.costs`), the adjoint run through the planned checkpoint schedule, and the gradients
with respect to the chosen controls written to netCDF (the mesh as the history has it) with PNG
maps (`hydrostatic.plot.plot_gradients`); `check_adjoint` (`--check-adjoint`): the whole-run
dot-product and Taylor tests. The sweep, the claims of the outputs, the refusal of a J or a
gradient that is not finite and the file's writing are the shallow-water run's
(`adjoint.sensitivity`).

The model's gradients (dJ/dmass0, dJ/dtheta_mass0, dJ/du0, dJ/dphi_s) give the controls' by the
chain rule, with theta0 = theta_mass0 / mass0 and, at fixed theta, mass[k] = (dA[k] + dB[k] p_s)
/ g:

    dJ/dtheta0[i, k] = mass0[i, k] dJ/dtheta_mass0[i, k]
    dJ/dmass0[i, k]  = dJ/dmass[i, k] + theta0[i, k] dJ/dtheta_mass0[i, k]   (theta fixed)
    dJ/dps0[i]       = sum_k dB[k] / g (dJ/dmass0[i, k] at theta fixed)
"""
from __future__ import annotations

import numpy as np

import meshops
from adjoint.costs import CostError
from adjoint.gradient import watchdog
from adjoint.sensitivity import (claimed, cost_context, dot_and_taylor, finish, gradient_units,
                                 owned_max, quiet_floats, sensitivity_sweep, write_gradient_file)
from meshops.device.backend import to_host
from framework.collective import on_every_rank
from framework.errors import ConfigError
from framework.output import provenance

from hydrostatic.output import CORE_NAME
from hydrostatic.variables import GRADIENTS

#: The pressure (Pa) whose layer (at rest, p_s = 1000 hPa) the maps show by default.
MAP_PRESSURE = 85000.0


def setup(config):
    """(`framework.driver.Setup` of the run: communicator, backend, distribution, mesh, model, dt
    and steps, the global mesh on rank 0; the hybrid coefficients (A, B))."""
    from framework.config import fixed_steps
    from framework.driver import Setup

    from hydrostatic.driver import array_module
    from hydrostatic.driver import setup as build

    comm = meshops.parallel.world()
    run = build(config, comm)
    dt = fixed_steps(config)[0]
    return Setup(comm, array_module(config), np.dtype(config.dtype), run.distribution,
                 run.distribution.mesh, run.model, dt, run.per_output, run.total, run.global_mesh,
                 run.start, run.fingerprint), run.coefficients


def build_cost(s, config):
    """The config's cost on setup `s`; its CostError as a ConfigError (on every rank)."""
    from hydrostatic.costs import make_cost

    def build():
        try:
            return make_cost(cost_context(s), s.model.physics, config.vertical.nVertLevels,
                             config.sensitivity.cost, "sensitivity.cost")
        except CostError as exc:
            raise ConfigError(str(exc)) from None
    return on_every_rank(build, s.comm)


def state_checker(config, s, n_steps: int | None = None):
    """The forward run's watchdog as `adjoint.gradient.watchdog` takes it, for a sweep of
    `n_steps` (None: the run's)."""
    from hydrostatic.watchdog import StateCheck

    w = config.watchdog
    check = StateCheck(s.distribution, w.max_wind, w.min_theta, w.max_theta)
    return watchdog(lambda state, step: check.check(*state, step),
                    s.total if n_steps is None else n_steps, w.interval_steps)


def control_gradients(s, grads, state0, controls) -> dict:
    """{control: (variable, location, local gradient)} of the chosen `controls` from the model's
    gradients `grads` = (dJ/dmass0, dJ/dtheta_mass0, dJ/du0, dJ/dphi_s) about `state0` (module
    docstring)."""
    g_mass, g_theta_mass, g_u, g_phi_s = grads
    mass0, theta_mass0, _ = state0
    physics = s.model.physics
    at_fixed_theta = g_mass + theta_mass0 / mass0 * g_theta_mass
    values = {"theta": lambda: mass0 * g_theta_mass, "u": lambda: g_u,
              "mass": lambda: at_fixed_theta,
              "surface_pressure": lambda: (at_fixed_theta * physics.dB).sum(axis=1) / physics.gravity,
              "phi_s": lambda: g_phi_s}
    out = {}
    for control in GRADIENTS:
        if control in controls:
            name, dims, _, _ = GRADIENTS[control]
            out[control] = (name, "edge" if dims[0] == "nEdges" else "cell", values[control]())
    return out


def map_level(config, A, B) -> int:
    """The maps' layer (1-based): sensitivity.level, or the one nearest MAP_PRESSURE at rest."""
    if config.sensitivity.level is not None:
        return config.sensitivity.level
    p = 0.5 * (A[:-1] + A[1:] + (B[:-1] + B[1:]) * 1.0e5)
    return int(np.argmin(np.abs(p - MAP_PRESSURE))) + 1


def run_sensitivity(config, *, progress: bool = True) -> dict:
    """The gradients of the config's cost; returns J and the gradient norms (every rank). The
    output and its maps are claimed before any work; a watchdog stop or a J or gradient that is
    not finite raises WatchdogError with nothing written."""
    from hydrostatic.plot import gradient_maps

    return claimed(config.sensitivity, gradient_maps, lambda: _sensitivity(config, progress))


def _sensitivity(config, progress: bool) -> dict:
    from hydrostatic.plot import plot_gradients

    sens = config.sensitivity
    s, (A, B) = setup(config)
    cost = build_cost(s, config)
    state0 = [x.copy() for x in s.model.state]
    value, grads, stats = sensitivity_sweep(s, sens, cost, state_checker(config, s), progress)
    chosen = control_gradients(s, grads, state0, sens.controls)
    fields = list(chosen.values())
    return finish(s, sens, value, stats, fields, fields,
                  lambda: write_gradients(config, s, chosen, value, cost.units, A, B),
                  plot_gradients)


def write_gradients(config, s, chosen: dict, value: float, cost_units: str, A, B) -> None:
    """The gradient file (`adjoint.sensitivity.write_gradient_file`): the chosen controls'
    gradients (units "<J units> <x units>-1", `gradient_units`), the hybrid coefficients hyai and
    hybi, and the maps' layer (global attribute map_level)."""
    gathered = {control: s.distribution.gather(loc, to_host(g))
                for control, (_, loc, g) in chosen.items()}

    def fill(ds):
        ds.setncatts({"core_name": "atmosphere", "map_level": map_level(config, A, B)})
        write_coefficients(ds, A, B)
        for control, values in gathered.items():
            name, dims, units, what = GRADIENTS[control]
            var = ds.createVariable(name, "f8", ("Time",) + dims)
            var[0] = values
            var.units = gradient_units(cost_units, units)
            var.long_name = f"gradient of J ({cost_units}) with respect to {what} ({units})"
    write_gradient_file(config.sensitivity.output, s, value, cost_units, fill,
                        attributes=provenance(config, CORE_NAME),
                        config=config)


def write_coefficients(ds, A, B) -> None:
    """The hybrid coefficients hyai (Pa) and hybi at the interfaces (nVertLevelsP1, from the
    surface up) into netCDF dataset `ds`, with the dimension nVertLevels where it has none."""
    if "nVertLevels" not in ds.dimensions:
        ds.createDimension("nVertLevels", len(A) - 1)
    ds.createDimension("nVertLevelsP1", len(A))
    for name, values, units, long_name in (
            ("hyai", A, "Pa", "hybrid A: p = hyai + hybi * p_s"),
            ("hybi", B, "1", "hybrid B: p = hyai + hybi * p_s")):
        var = ds.createVariable(name, "f8", ("nVertLevelsP1",))
        var[:] = values
        var.setncatts({"units": units, "long_name": long_name})


def check_adjoint(config, *, seed: int = 12345) -> bool:
    """The whole-run dot-product test (TLM against ADM, over mass, theta_mass, u and phi_s) and
    a Taylor table of the config's cost along the model fields its controls move (theta:
    theta_mass; u; mass or surface_pressure: mass; phi_s), printed on rank 0; True when both
    pass (`adjoint.sensitivity.dot_and_taylor`)."""
    sens = config.sensitivity
    s, _ = setup(config)
    cost = build_cost(s, config)
    model = s.model
    scales = [1e-3 * owned_max(s, x, loc) for x, loc in zip(model.state, model.state_locations)]
    scales.append(1e-3 * max(owned_max(s, model.phi_s, "cell"), 1.0))
    moved = {"theta": 1, "u": 2, "mass": 0, "surface_pressure": 0, "phi_s": 3}
    active = [any(moved[c] == i for c in sens.controls) for i in range(4)]
    with quiet_floats():
        return dot_and_taylor(s, sens, cost, state_checker(config, s), seed, scales, active,
                              ", ".join(sens.controls))


__all__ = ["run_sensitivity", "check_adjoint", "control_gradients", "setup", "state_checker",
           "write_coefficients", "write_gradients"]
