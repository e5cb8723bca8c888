"""The hydrostatic core's part of a sensitivity run (`adjoint.sensitivity.Sensitivity`,
`HydrostaticSensitivity`) from a config's `sensitivity` section (`hydrostatic.applications`):
its setup and watchdog, its costs (`hydrostatic.costs`), its controls and its gradient file (the
mesh as the history has it, the hybrid coefficients) with PNG maps
(`hydrostatic.plot.plot_gradients`). The run, the claims of the outputs, the refusal of a J or a
gradient that is not finite, the file's writing and `--check-adjoint` are the model-generic
drivers of `adjoint.sensitivity`.

The model's gradients (dJ/dmass0, dJ/dtheta_mass0, dJ/du0, dJ/dphi_s) give the controls' by the
chain rule, with theta0 = theta_mass0 / mass0 and, at fixed theta, mass[k] = (dA[k] + dB[k] p_s)
/ g:

    dJ/dtheta0[i, k] = mass0[i, k] dJ/dtheta_mass0[i, k]
    dJ/dmass0[i, k]  = dJ/dmass[i, k] + theta0[i, k] dJ/dtheta_mass0[i, k]   (theta fixed)
    dJ/dps0[i]       = sum_k dB[k] / g (dJ/dmass0[i, k] at theta fixed)
"""
from __future__ import annotations

import logging

import numpy as np

import meshops
from adjoint.costs import CostError
from adjoint.gradient import watchdog
from adjoint.sensitivity import (Sensitivity, cost_context, gradient_units, owned_max,
                                 write_gradient_file)
from meshops.device.backend import to_host
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
    logging.getLogger("hydrostatic").info(
        "dynamics: %s", "fused stages" if run.model.fused else "operator path")
    dt = fixed_steps(config)[0]
    return Setup(comm, array_module(config), np.dtype(config.dtype), run.distribution,
                 run.distribution.mesh, run.model, dt, run.per_output, run.total, run.global_mesh,
                 run.start, run.fingerprint), run.coefficients


def build_cost(s, config):
    """The config's cost on setup `s`; its CostError as a ConfigError."""
    from hydrostatic.costs import make_cost

    try:
        return make_cost(cost_context(s), s.model.physics, config.vertical.nVertLevels,
                         config.sensitivity.cost, "sensitivity.cost")
    except CostError as exc:
        raise ConfigError(str(exc)) from None


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


class HydrostaticSensitivity(Sensitivity):
    """The hydrostatic sensitivity run of `config` (`adjoint.sensitivity.Sensitivity`): the
    model's gradients about the initial state (kept before the sweep) give the controls' by the
    chain rule (`control_gradients`)."""

    def maps(self, output, controls) -> list:
        from hydrostatic.plot import gradient_maps

        return gradient_maps(output, controls)

    def setup(self):
        self.s, self.coefficients = setup(self.config)
        self.state0 = [x.copy() for x in self.s.model.state]
        return self.s

    def cost(self):
        return build_cost(self.s, self.config)

    def check(self):
        return state_checker(self.config, self.s)

    def gradients(self, grads) -> dict:
        return control_gradients(self.s, grads, self.state0, self.config.sensitivity.controls)

    def write(self, value: float, cost_units: str, chosen: dict) -> None:
        write_gradients(self.config, self.s, chosen, value, cost_units, *self.coefficients)

    def plot(self, path) -> list:
        from hydrostatic.plot import plot_gradients

        return plot_gradients(path)

    def directions(self):
        """Each field scaled by 1e-3 of its largest value (phi_s: at least 1e-3 m2 s-2); the
        model fields the chosen controls move (theta: theta_mass; u; mass or surface_pressure:
        mass; phi_s)."""
        s, model = self.s, self.s.model
        controls = self.config.sensitivity.controls
        scales = [1e-3 * owned_max(s, x, loc)
                  for x, loc in zip(model.state, model.state_locations)]
        scales.append(1e-3 * max(owned_max(s, model.phi_s, "cell"), 1.0))
        moved = {"theta": 1, "u": 2, "mass": 0, "surface_pressure": 0, "phi_s": 3}
        active = [any(moved[c] == i for c in controls) for i in range(4)]
        return scales, active, ", ".join(controls)


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


__all__ = ["HydrostaticSensitivity", "build_cost", "control_gradients", "map_level", "setup",
           "state_checker", "write_coefficients", "write_gradients"]
