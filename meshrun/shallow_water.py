"""The command line's config of a shallow-water run: the model's sections (`swm.config.Config`)
and its applications' (`swm.applications.ShallowWaterApplications`: sensitivity, fourdvar). The
registry's entry (`meshrun.models`) names it as the model's schema."""
from __future__ import annotations

from swm.applications import ShallowWaterApplications
from swm.config import Config


class ShallowWaterConfig(ShallowWaterApplications, Config):
    """A shallow-water run: the model's sections and its applications'."""
