"""The hydrostatic core's `sensitivity` and `fourdvar` sections: the keys every model shares
(`adjoint.config`: adjoint_mode, checkpointing, output, plot; the box, the window and the
observation file's checks; the twin's observation times, fraction, iterations, seed and output)
with this model's costs (`hydrostatic.costs`), controls and observations. `HydrostaticRunConfig`
composes them with the model's config, the schema the command line reads (`meshrun.models`), so
`hydrostatic.config` knows nothing of them.

    sensitivity:
      cost: {kind: surface_pressure, box: {lat: [40, 60], lon: [60, 110]}, window_hours: [192, 192]}
      controls: [theta, u, surface_pressure, phi_s]
      checkpointing: {schedule: multistage, snapshots_in_ram: auto}
      output: jw06_sensitivity.nc

    fourdvar:                               # a twin (hydrostatic.fourdvar), instead of sensitivity
      observation_hours: [6, 12]
      observed_levels: [1, 4, 8, 12]         # T at these layers of the observed cells; p_s at each
      observation_error_ps: 10
      observation_error_temperature: 0.1
      output: jw06_fourdvar.nc
"""
from __future__ import annotations

import pathlib
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, model_validator

from adjoint.config import (BoxConfig, SensitivityConfig, TwinConfig, consistent_cost,
                            cost_within_run, fourdvar_files, observations_within_run,
                            one_application, sensitivity_files, sensitivity_inputs)
from framework.config import FilePath, FloatPair, Strict, once_each

from hydrostatic.variables import GRADIENTS as CONTROLS


def _one_mass_control(controls):
    if "mass" in controls and "surface_pressure" in controls:
        raise ValueError("give mass or surface_pressure, not both (each is the initial mass with "
                         "theta fixed)")
    return controls


class CostConfig(Strict):
    kind: Literal["surface_pressure", "minimum_surface_pressure", "kinetic_energy",
                  "temperature_850hPa", "misfit"] = Field(
        description="area-weighted box mean of the surface pressure (Pa), a smooth minimum of it "
                    "in the box (Pa), the box mean of the kinetic energy of a layer range per unit "
                    "area (J m-2) or of the 850 hPa temperature (K); or the squared misfit to "
                    "observations of p_s and T (hydrostatic.costs)")
    box: BoxConfig = Field(BoxConfig(), description="box means: the region (default: the globe)")
    layers: Optional[list[int]] = Field(
        None, min_length=2, max_length=2, description="kinetic_energy: [bottom, top] 1-based "
        "layers from the surface, both included (none: every layer)")
    softness: Optional[float] = Field(
        None, gt=0, allow_inf_nan=False,
        description="minimum_surface_pressure: its softness tau (Pa; none: 100), the smooth "
                    "minimum within tau log(1 / the least area fraction) of the least p_s")
    window_hours: Optional[FloatPair] = Field(
        None, description="box means: average over the steps in [start, end] hours, within the "
                          "run; none: the final time")
    observations: Optional[FilePath] = Field(
        None, description="misfit: netCDF file of surface pressure and/or temperature observations "
                          "(hydrostatic.costs: cell, level (1-based), time (s), value, error)")

    @model_validator(mode="after")
    def _consistent(self):
        if self.layers is not None and self.kind != "kinetic_energy":
            raise ValueError(f"layers = {list(self.layers)}: only kind kinetic_energy takes layers")
        if self.softness is not None and self.kind != "minimum_surface_pressure":
            raise ValueError(f"softness = {self.softness}: only kind minimum_surface_pressure "
                             "takes a softness")
        return consistent_cost(self)


class HydrostaticSensitivityConfig(SensitivityConfig):
    cost: CostConfig
    controls: Annotated[list[Literal[tuple(CONTROLS)]], AfterValidator(once_each),
                        AfterValidator(_one_mass_control)] = Field(
        ["theta", "u", "surface_pressure", "phi_s"],
        description="gradients written: initial theta, u, mass or surface_pressure (theta fixed), "
                    "the surface geopotential phi_s")
    level: Optional[int] = Field(None, ge=1, description="the layer (1-based from the surface) of "
                                 "the gradient maps; none: the layer nearest 850 hPa at rest")


class HydrostaticFourDVarConfig(TwinConfig):
    """The hydrostatic twin (`hydrostatic.fourdvar`): p_s and T observed; controls p_s, theta,
    u."""
    observed_levels: Optional[Annotated[list[Annotated[int, Field(ge=1)]],
                                        AfterValidator(once_each)]] = Field(
        None, min_length=1, description="layers (1-based from the surface) whose temperature is "
        "observed at the observed cells; none: every layer")
    observation_error_ps: float = Field(10.0, gt=0, description="observation error standard "
                                        "deviation of the surface pressure (Pa); the noise added")
    observation_error_temperature: float = Field(0.1, gt=0, description="observation error "
                                                 "standard deviation of the temperature (K)")
    first_guess_amplitude_ps: float = Field(300.0, ge=0, description="amplitude (Pa) of the "
                                            "smooth p_s perturbation of the first guess")
    first_guess_amplitude_theta: float = Field(1.0, ge=0, description="amplitude (K) of the "
                                               "smooth theta perturbation (every layer)")
    background_error_ps: float = Field(300.0, gt=0, description="background error of p_s (Pa)")
    background_error_theta: float = Field(1.0, gt=0, description="background error of theta (K)")
    background_error_u: float = Field(2.0, gt=0, description="background error of u (m/s)")


class HydrostaticApplications(Strict):
    """The applications' sections of a hydrostatic run (`class HydrostaticRunConfig(
    HydrostaticApplications, HydrostaticConfig)`): `sensitivity`, its cost's window and
    observation times within the run; or `fourdvar`, its observation times whole steps within
    the run and its layers the model's; their files added to the model's."""
    sensitivity: Optional[HydrostaticSensitivityConfig] = Field(
        None, description="an adjoint sensitivity run: forward, cost, gradients of it")
    fourdvar: Optional[HydrostaticFourDVarConfig] = Field(
        None, description="a 4D-Var twin experiment (p_s and T observed)")

    @model_validator(mode="after")
    def _one_kind(self):
        return one_application(self)

    @model_validator(mode="after")
    def _fourdvar_within_the_run(self):
        fv, dt, n = self.fourdvar, self.time.dt, self.vertical.nVertLevels
        if fv is None:
            return self
        observations_within_run(fv, self.time.days)
        for i, hours in enumerate(fv.observation_hours):
            k = hours * 3600.0 / dt
            if abs(k - round(k)) > 1e-6 * max(k, 1.0):
                raise ValueError(f"fourdvar.observation_hours[{i}] = {hours!r}: not a whole number "
                                 f"of steps of time.dt = {dt:g} s; expected a multiple of "
                                 f"{dt / 3600.0:g} h")
        for i, level in enumerate(fv.observed_levels or ()):
            if level > n:
                raise ValueError(f"fourdvar.observed_levels[{i}] = {level}: expected a layer in "
                                 f"[1, {n}] (vertical.nVertLevels)")
        return self

    @model_validator(mode="after")
    def _cost_within_the_run(self):
        if self.sensitivity is not None:
            from hydrostatic.costs import OBSERVATION_TABLES

            cost_within_run(self.sensitivity.cost, self.time.days,
                            tuple(OBSERVATION_TABLES.values()))
            level, n = self.sensitivity.level, self.vertical.nVertLevels
            layers = self.sensitivity.cost.layers
            if layers is not None and not 1 <= layers[0] <= layers[1] <= n:
                raise ValueError(f"sensitivity.cost.layers = {list(layers)}: expected 1 <= bottom "
                                 f"<= top <= {n} (1-based layers from the surface, "
                                 "vertical.nVertLevels)")
            if level is not None and level > n:
                raise ValueError(f"sensitivity.level = {level}: expected a layer in [1, {n}] "
                                 "(vertical.nVertLevels)")
        return self

    def inputs(self) -> list[tuple[str, pathlib.Path]]:
        return super().inputs() + sensitivity_inputs(self.sensitivity)

    def written_files(self) -> list:
        """The forward run's files (`hydrostatic.config`), or with a sensitivity section its
        files (`adjoint.config.sensitivity_files`, the maps of `hydrostatic.plot.gradient_maps`),
        with a fourdvar section its files (`adjoint.config.fourdvar_files`): an application
        writes no history and no restart (output.path and restart.path are not its files)."""
        sens, fv = self.sensitivity, self.fourdvar
        if sens is None and fv is None:
            return super().written_files()
        if fv is not None:
            return fourdvar_files(fv)
        from hydrostatic.plot import gradient_maps

        return sensitivity_files(self, gradient_maps(sens.output, sens.controls))


__all__ = ["CONTROLS", "CostConfig", "HydrostaticApplications", "HydrostaticFourDVarConfig",
           "HydrostaticRunConfig", "HydrostaticSensitivityConfig"]


def _run_config():
    from hydrostatic.config import HydrostaticConfig

    class HydrostaticRunConfig(HydrostaticApplications, HydrostaticConfig):
        """A hydrostatic run: the model's sections (`hydrostatic.config`) and the sensitivity
        or fourdvar section."""
    return HydrostaticRunConfig


#: The config class of a hydrostatic run (the registry's schema, `meshrun.models`).
HydrostaticRunConfig = _run_config()
