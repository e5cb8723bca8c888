"""The hydrostatic core's `sensitivity` section: the shallow-water model's (`adjoint.config`:
adjoint_mode, checkpointing, output, plot; the box, the window and the observation file's checks)
with this model's costs (`hydrostatic.costs`) and controls. `HydrostaticRunConfig` composes it
with the model's config, the schema the command line reads (`meshrun.models`), so
`hydrostatic.config` knows nothing of it.

    sensitivity:
      cost: {kind: surface_pressure, box: {lat: [40, 60], lon: [60, 110]}, window_hours: [192, 192]}
      controls: [theta, u, surface_pressure, phi_s]
      checkpointing: {schedule: multistage, snapshots_in_ram: auto}
      output: jw06_sensitivity.nc
"""
from __future__ import annotations

import pathlib
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, model_validator

from adjoint.config import (BoxConfig, SensitivityConfig, consistent_cost, cost_within_run,
                            sensitivity_files, sensitivity_inputs)
from swm.config import FilePath, FloatPair, Strict, _once_each

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
    controls: Annotated[list[Literal[tuple(CONTROLS)]], AfterValidator(_once_each),
                        AfterValidator(_one_mass_control)] = Field(
        ["theta", "u", "surface_pressure", "phi_s"],
        description="gradients written: initial theta, u, mass or surface_pressure (theta fixed), "
                    "the surface geopotential phi_s")
    level: Optional[int] = Field(None, ge=1, description="the layer (1-based from the surface) of "
                                 "the gradient maps; none: the layer nearest 850 hPa at rest")


class HydrostaticApplications(Strict):
    """The applications' sections of a hydrostatic run (`class HydrostaticRunConfig(
    HydrostaticApplications, HydrostaticConfig)`): `sensitivity`, its cost's window and
    observation times within the run, its files added to the model's."""
    sensitivity: Optional[HydrostaticSensitivityConfig] = Field(
        None, description="an adjoint sensitivity run: forward, cost, gradients of it")

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
        """The history's keys and, with a sensitivity section, its files (`adjoint.config.
        sensitivity_files`, the maps of `hydrostatic.plot.gradient_maps`)."""
        if self.sensitivity is None:
            return super().written_files()
        from hydrostatic.plot import gradient_maps
        from swm.files import Written

        sens = self.sensitivity
        return ([Written("output.path", self.output.path, self.output.path)]
                + sensitivity_files(self, gradient_maps(sens.output, sens.controls)))


__all__ = ["CONTROLS", "CostConfig", "HydrostaticApplications", "HydrostaticRunConfig",
           "HydrostaticSensitivityConfig"]


def _run_config():
    from hydrostatic.config import HydrostaticConfig

    class HydrostaticRunConfig(HydrostaticApplications, HydrostaticConfig):
        """A hydrostatic run: the model's sections (`hydrostatic.config`) and the sensitivity
        section."""
    return HydrostaticRunConfig


#: The config class of a hydrostatic run (the registry's schema, `meshrun.models`).
HydrostaticRunConfig = _run_config()
