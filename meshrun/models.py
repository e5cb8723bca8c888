"""The registry of models the command line runs. A config names its model (`model:`, default
shallow_water); each model registers, in one `Model` entry here:

    schema        its config class (its own sections, with the applications' composed onto them)
    forward       its forward run: forward(config, progress=..., plot=...)
    plot          the PNGs `--plot` writes after a forward run (None: none)
    applications  the runs a config section asks for instead of the forward run: `sensitivity`
                  and `fourdvar`, the model-generic drivers of `adjoint.sensitivity` and
                  `adjoint.fourdvar` on the model's part of each (`sensitivity(parts, example)`,
                  `fourdvar(twin, example)`: a `Sensitivity` and a `Twin` of the model's package)

Entries import their model only when used, so `--help` and `--list-configs` load no model. A model
of its own is one more entry in `MODELS` (docs/decisions/0023-model-framework.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class Application:
    """A run that config section `key` asks for instead of the forward run: `run(config,
    progress=...)`; `check(config)` -> bool: the whole-run check of `--check-adjoint` (None: the
    application has none); `example`: a config that has the section."""
    key: str
    run: Callable
    check: Optional[Callable] = None
    example: str = ""


@dataclass(frozen=True)
class Model:
    """A model of the command line: its `name` (the config's `model:`), what it is, its config
    class (`schema()`, imported on use), its forward run, its `--plot` maps and its
    applications."""
    name: str
    description: str
    schema: Callable
    forward: Callable
    plot: Optional[Callable] = None
    applications: tuple = ()

    def application(self, config) -> Optional[Application]:
        """The application `config` asks for (its section given), or None: a forward run."""
        return next((a for a in self.applications if getattr(config, a.key) is not None), None)


# -- shallow water: swm ----------------------------------------------------------------------------

def _sw_schema():
    from meshrun.shallow_water import ShallowWaterConfig

    return ShallowWaterConfig


def _sw_forward(config, *, progress: bool, plot: bool) -> None:
    from swm.driver import run

    run(config, progress=progress, plot=plot)


def _sw_plot(config) -> list:
    from swm.plot import plot_file

    return plot_file(config.output.path)


def _sw_sensitivity():
    from swm.sensitivity import ShallowWaterSensitivity

    return ShallowWaterSensitivity


def _sw_twin():
    from swm.fourdvar import ShallowWaterTwin

    return ShallowWaterTwin


# -- the hydrostatic primitive-equation core -------------------------------------------------------

def _hydrostatic_schema():
    from hydrostatic.applications import HydrostaticRunConfig

    return HydrostaticRunConfig


def _hydrostatic_forward(config, *, progress: bool, plot: bool) -> None:
    from hydrostatic.driver import run

    run(config, progress=progress)


def _hydrostatic_plot(config) -> list:
    from hydrostatic.plot import plot_file

    return plot_file(config.output.path)


def _hydrostatic_sensitivity():
    from hydrostatic.sensitivity import HydrostaticSensitivity

    return HydrostaticSensitivity


def _hydrostatic_twin():
    from hydrostatic.fourdvar import HydrostaticTwin

    return HydrostaticTwin


# -- the applications, written once for every model ------------------------------------------------

def sensitivity(parts: Callable, example: str) -> Application:
    """The `sensitivity` application of a model whose part of it is the class `parts()` (an
    `adjoint.sensitivity.Sensitivity`, imported on use), with `--check-adjoint`."""
    def run(config, *, progress: bool) -> None:
        from adjoint.sensitivity import run_sensitivity

        run_sensitivity(parts()(config), progress=progress)

    def check(config) -> bool:
        from adjoint.sensitivity import check_adjoint

        return check_adjoint(parts()(config))
    return Application("sensitivity", run, check, example)


def fourdvar(twin: Callable, example: str) -> Application:
    """The `fourdvar` application of a model whose twin is the class `twin()` (an
    `adjoint.fourdvar.Twin`, imported on use)."""
    def run(config, *, progress: bool) -> None:
        from adjoint.fourdvar import run_fourdvar

        run_fourdvar(twin()(config))
    return Application("fourdvar", run, example=example)


# -- the tracer-advection model ------------------------------------------------------------------------

def _tracer_schema():
    from tracer.config import TracerConfig

    return TracerConfig


def _tracer_forward(config, *, progress: bool, plot: bool) -> None:
    from tracer.driver import run

    run(config, progress=progress)


MODELS = {m.name: m for m in (
    Model("shallow_water", "the TRiSK shallow-water model (swm): Williamson 2/5/6, Galewsky",
          _sw_schema, _sw_forward, _sw_plot,
          (sensitivity(_sw_sensitivity, "configs/sensitivity_williamson5.yaml"),
           fourdvar(_sw_twin, "configs/fourdvar_twin.yaml"))),
    Model("hydrostatic", "the hydrostatic primitive-equation core (hydrostatic): Jablonowski-"
          "Williamson 2006, Held-Suarez", _hydrostatic_schema, _hydrostatic_forward,
          _hydrostatic_plot,
          (sensitivity(_hydrostatic_sensitivity, "configs/jw06_sensitivity_l5.yaml"),
           fourdvar(_hydrostatic_twin, "configs/jw06_fourdvar_l4.yaml"))),
    Model("tracer", "a passive tracer advected by a prescribed wind (tracer): Williamson 1 cosine "
          "bell", _tracer_schema, _tracer_forward),
)}


def model_of(config) -> Model:
    """The registry's entry of the model `config` (a validated config) runs."""
    return MODELS[config.model]
