"""A 4D-Var twin of the shallow-water model from a config's `fourdvar` section
(`swm.applications.ShallowWaterFourDVarConfig`), run by the model-generic driver
`adjoint.fourdvar` with this model's parts (`ShallowWaterTwin`).

Observed: h at the observed cells at the observation times, with noise of
fourdvar.observation_error (m) (`swm.costs`: `write_observations`, `ObservationCost`). Controls:
the initial h and u (the model's state itself), background errors background_error_h and _u;
the first guess is the truth's with Gaussian hills of first_guess_amplitude in h.
"""
from __future__ import annotations

import numpy as np

from adjoint.fourdvar import Control, Twin, hills, observation_rows
from adjoint.gradient import watchdog
from swm.costs import ObservationCost, write_observations
from framework.output import provenance
from swm.output import CORE_NAME, mpas_namelist


class ShallowWaterTwin(Twin):
    """The shallow-water twin: h observed at the observed cells; controls (h, u), the first
    guess's h perturbed by hills of fourdvar.first_guess_amplitude."""

    def setup(self):
        from swm.driver import setup

        fv = self.config.fourdvar
        self.s = s = setup(self.config)
        self.attributes = {**provenance(self.config, CORE_NAME),
                           **mpas_namelist(self.config, s.dt, s.total)}
        self.controls = (
            Control("h", "h", "cell", ("nCells", "nVertLevels"), "m", "fluid thickness",
                    fv.background_error_h, perturbed=True),
            Control("u", "u", "edge", ("nEdges", "nVertLevels"), "m/s", "normal velocity",
                    fv.background_error_u))
        return s

    def check(self, n_steps):
        from swm.driver import state_checker

        return watchdog(state_checker(self.config, self.s), n_steps,
                        self.config.watchdog.interval_steps, start=self.s.start)

    def fields(self, state):
        return list(state)

    def state(self, fields):
        return fields

    def gradients(self, grads, state0):
        return list(grads[:2])

    def observed(self, state):
        return {"h": ("cell", state[0])}

    def observe(self, path, rng, cells, steps, truth) -> str:
        sigma = self.config.fourdvar.observation_error
        cell, step = observation_rows(cells, steps)
        value = np.concatenate([truth[k]["h"][cells] for k in steps])
        value = value + sigma * rng.standard_normal(value.size)
        write_observations(path, cell, step * self.s.dt, value, np.full(value.size, sigma))
        return (f"{value.size} observations of h at {cells.size} cells and {len(steps)} times "
                f"(error {sigma:g} m)")

    def first_guess(self, truth, rng):
        h, u = truth
        return [h + hills(self.s.global_mesh, self.config.fourdvar.first_guess_amplitude, rng), u]

    def cost(self, context, path):
        return ObservationCost(context, path, "fourdvar observations")


__all__ = ["ShallowWaterTwin"]
