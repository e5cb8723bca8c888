"""The command line's config of a shallow-water run: the model's sections (`swm.config.Config`)
and the adjoint applications' (`adjoint.config.GradientApplications`: sensitivity, fourdvar). The
registry's entry (`meshrun.models`) names it as the model's schema."""
from __future__ import annotations

from adjoint.config import GradientApplications
from swm.config import Config


class ShallowWaterConfig(GradientApplications, Config):
    """A shallow-water run: the model's sections and the adjoint applications'."""
