"""The shallow-water model's `sensitivity` and `fourdvar` sections: the keys every model shares
(`adjoint.config`: adjoint_mode, checkpointing, output, plot; the twin's observation times,
fraction, iterations, seed and output) with this model's costs (`swm.costs`), controls (h, u, b)
and observations of h. `ShallowWaterApplications` holds the two sections and their checks; the
command line composes it with the model's config (`meshrun.config.ShallowWaterConfig`), so
`swm.config` knows nothing of them.

    sensitivity:
      cost: {kind: mean, field: h, box: {lat: [20, 50], lon: [300, 340]}}
      controls: [h, u, b]
      checkpointing: {schedule: multistage, snapshots_in_ram: 8}
      output: sensitivity_williamson5.nc

    fourdvar:                               # a twin (swm.fourdvar), instead of sensitivity
      observation_hours: [6, 12, 18, 24]
      observation_error: 0.1
      output: fourdvar_twin.nc
"""
from __future__ import annotations

import pathlib
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, model_validator

from adjoint.config import (BoxConfig, SensitivityConfig, TwinConfig, consistent_cost,
                            cost_within_run, fourdvar_files, observations_within_run,
                            one_application, sensitivity_files, sensitivity_inputs)
from framework.config import FilePath, FloatPair, Strict, once_each
from framework.files import Written
from swm.files import gradient_maps


class CostConfig(Strict):
    """A shallow-water cost (`swm.costs.make_cost`): a box statistic of h or the vorticity, or
    the misfit to observations of h."""
    kind: Literal["mean", "energy", "misfit"] = Field(description="area-weighted mean or energy "
                                                      "(mean of x^2 / 2) of a field in a box, or the "
                                                      "squared misfit to observations")
    field: Literal["h", "vorticity"] = Field("h", description="mean, energy: the field")
    box: BoxConfig = Field(BoxConfig(), description="mean, energy: the region (default: the globe)")
    window_hours: Optional[FloatPair] = Field(
        None, description="mean, energy: average over the steps in [start, end] hours, within the "
                          "run; none: the final time")
    observations: Optional[FilePath] = Field(
        None, description="misfit: netCDF file of cell (1-based), time (s), h (m), error (m)")

    @model_validator(mode="after")
    def _consistent(self):
        return consistent_cost(self)


class ShallowWaterSensitivityConfig(SensitivityConfig):
    """The shallow-water sensitivity run (`swm.sensitivity`): a cost of h or the vorticity, the
    gradients of h0, u0 and b."""
    cost: CostConfig
    controls: Annotated[list[Literal["h", "u", "b"]], AfterValidator(once_each)] = Field(
        ["h", "u", "b"], description="gradients written: initial h, initial u, topography b")


class ShallowWaterFourDVarConfig(TwinConfig):
    """The shallow-water twin: h observed."""
    observation_error: float = Field(1.0, gt=0, description="observation error standard deviation "
                                     "(m); the noise added to the truth")
    first_guess_amplitude: float = Field(40.0, ge=0, description="amplitude (m) of the smooth h "
                                         "perturbation of the first guess")
    background_error_h: float = Field(100.0, gt=0, description="background error of h (m)")
    background_error_u: float = Field(5.0, gt=0, description="background error of u (m/s)")


class ShallowWaterApplications(Strict):
    """The applications' sections of a shallow-water run, composed with the model's config
    (`class ShallowWaterConfig(ShallowWaterApplications, swm.config.Config)`): at most one of
    them; neither resumes a restart; a cost's window and observation times lie within the run.
    `inputs` and `written_files` add the application's files to the model's."""
    sensitivity: Optional[ShallowWaterSensitivityConfig] = Field(
        None, description="an adjoint sensitivity run: forward, cost, gradients of it")
    fourdvar: Optional[ShallowWaterFourDVarConfig] = Field(
        None, description="a 4D-Var twin experiment")

    @model_validator(mode="after")
    def _one_kind(self):
        return one_application(self)

    @model_validator(mode="after")
    def _costs_within_the_run(self):
        """A cost's window, a 4D-Var observation time and a misfit file's observation times lie
        in [0, time.days] (a part past the run's end would be cut from the cost)."""
        if self.fourdvar is not None:
            observations_within_run(self.fourdvar, self.time.days)
        if self.sensitivity is not None:
            cost_within_run(self.sensitivity.cost, self.time.days)
        return self

    def inputs(self) -> list[tuple[str, pathlib.Path]]:
        return super().inputs() + sensitivity_inputs(self.sensitivity)

    def written_files(self) -> list[Written]:
        """The files of the active application's output (sensitivity.output or fourdvar.output
        and those beside it), or the forward run's when neither is given: an application writes
        no history and no restart (output.path and restart.path are not its files)."""
        sens, fv = self.sensitivity, self.fourdvar
        if sens is None and fv is None:
            return super().written_files()
        if sens is not None:
            return sensitivity_files(self, gradient_maps(sens.output, sens.controls))
        return fourdvar_files(fv)


__all__ = ["CostConfig", "ShallowWaterApplications", "ShallowWaterFourDVarConfig",
           "ShallowWaterSensitivityConfig"]
