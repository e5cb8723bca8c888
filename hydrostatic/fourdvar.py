"""A 4D-Var twin of the hydrostatic core from a config's `fourdvar` section
(`hydrostatic.applications.HydrostaticFourDVarConfig`), run by the model-generic driver
`adjoint.fourdvar` with this model's parts (`HydrostaticTwin`).

Observed: the surface pressure at the observed cells and the temperature at those cells on
fourdvar.observed_levels (every layer by default), at the observation times, with noise of
observation_error_ps (Pa) and observation_error_temperature (K) (`hydrostatic.costs`:
`write_observations`, `ObservationCost`):

    p_s = p_top + g sum_k mass[k],   T[k] = theta[k] exner(p[k]).

Controls: the initial surface pressure, potential temperature and normal wind (p_s, theta, u),
background errors background_error_ps, _theta, _u; the first guess is the truth's with Gaussian
hills of first_guess_amplitude_ps in p_s and first_guess_amplitude_theta in theta (the same at
every layer). The model's initial state from the controls, at the hybrid coefficients (A, B):

    mass[k] = (dA[k] + dB[k] p_s) / g,   theta_mass[k] = mass[k] theta[k],

and the controls' gradients from the model's by the chain rule of
`hydrostatic.sensitivity.control_gradients` (p_s at fixed theta, theta at fixed mass).
"""
from __future__ import annotations

import numpy as np

from adjoint.fourdvar import Control, Twin, hills, observation_rows
from framework.output import provenance

from hydrostatic.costs import ObservationCost, surface_pressure, temperature, write_observations
from hydrostatic.output import CORE_NAME

#: The controls, in the control vector's order (`hydrostatic.sensitivity.control_gradients`).
CONTROLS = ("surface_pressure", "theta", "u")


class HydrostaticTwin(Twin):
    """The hydrostatic twin's parts (`adjoint.fourdvar.Twin`; module docstring)."""

    def setup(self):
        from hydrostatic.sensitivity import setup

        fv = self.config.fourdvar
        s, (A, B) = setup(self.config)
        self.s, self.coefficients = s, (A, B)
        self.nlev = self.config.vertical.nVertLevels
        self.dA = s.xp.asarray(A[:-1] - A[1:], dtype=s.dtype)
        self.attributes = provenance(self.config, CORE_NAME)
        layers = ("nCells", "nVertLevels")
        self.controls = (
            Control("surface_pressure", "ps", "cell", ("nCells",), "Pa", "surface pressure",
                    fv.background_error_ps, perturbed=True),
            Control("theta", "theta", "cell", layers, "K", "potential temperature",
                    fv.background_error_theta, perturbed=True),
            Control("u", "u", "edge", ("nEdges", "nVertLevels"), "m/s", "normal velocity",
                    fv.background_error_u))
        return s

    def check(self, n_steps):
        from hydrostatic.sensitivity import state_checker

        return state_checker(self.config, self.s, n_steps)

    def fields(self, state):
        mass, theta_mass, u = state
        model = self.s.model
        return [surface_pressure(model.device_mesh, mass, model.physics), theta_mass / mass, u]

    def state(self, fields):
        ps, theta, u = fields
        physics = self.s.model.physics
        mass = (self.dA + physics.dB * ps[:, None]) / physics.gravity
        return [mass, mass * theta, u]

    def gradients(self, grads, state0):
        from hydrostatic.sensitivity import control_gradients

        chosen = control_gradients(self.s, grads, state0, CONTROLS)
        return [chosen[name][2] for name in CONTROLS]

    def observed(self, state):
        model = self.s.model
        mesh, physics = model.device_mesh, model.physics
        return {"surface_pressure": ("cell", surface_pressure(mesh, state[0], physics)),
                "temperature": ("cell", temperature(mesh, state[0], state[1], physics)[2])}

    def observe(self, path, rng, cells, steps, truth) -> str:
        fv, dt = self.config.fourdvar, self.s.dt
        levels = (np.arange(self.nlev) if fv.observed_levels is None
                  else np.asarray(fv.observed_levels) - 1)
        cell, step = observation_rows(cells, steps)
        ps = np.concatenate([truth[k]["surface_pressure"][cells] for k in steps])
        ps = ps + fv.observation_error_ps * rng.standard_normal(ps.size)
        T = np.concatenate([truth[k]["temperature"][cells][:, levels].ravel() for k in steps])
        T = T + fv.observation_error_temperature * rng.standard_normal(T.size)
        write_observations(
            path, surface_pressure=(cell, step * dt, ps, np.full(ps.size, fv.observation_error_ps)),
            temperature=(np.repeat(cell, levels.size), np.tile(levels, cell.size),
                         np.repeat(step, levels.size) * dt, T,
                         np.full(T.size, fv.observation_error_temperature)))
        return (f"{ps.size} observations of p_s and {T.size} of T ({levels.size} layers) at "
                f"{cells.size} cells and {len(steps)} times (errors {fv.observation_error_ps:g} "
                f"Pa, {fv.observation_error_temperature:g} K)")

    def first_guess(self, truth, rng):
        ps, theta, u = truth
        fv, mesh = self.config.fourdvar, self.s.global_mesh
        return [ps + hills(mesh, fv.first_guess_amplitude_ps, rng),
                theta + hills(mesh, fv.first_guess_amplitude_theta, rng)[:, None], u]

    def cost(self, context, path):
        return ObservationCost(context, self.s.model.physics, self.nlev, path,
                               "fourdvar observations")

    def fill(self, ds) -> None:
        """The hybrid coefficients (hyai, hybi) beside the analysis."""
        from hydrostatic.sensitivity import write_coefficients

        write_coefficients(ds, *self.coefficients)


__all__ = ["CONTROLS", "HydrostaticTwin"]
