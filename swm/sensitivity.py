"""The shallow-water model's part of a sensitivity run (`adjoint.sensitivity.Sensitivity`): its
setup and watchdog, its costs (`swm.costs`), its controls h0, u0 and b, and its gradient file:
dJ/dh0, dJ/du0, dJ/db (dimensions Time, nCells | nEdges, nVertLevels = 1) with PNG maps
(`swm.plot.plot_gradients`). The run itself, its checks and `--check-adjoint` are the
model-generic drivers of `adjoint.sensitivity`.
"""
from __future__ import annotations

from meshops.device.backend import to_host
from meshops.device.tables import SIZE_OF

from adjoint.costs import CostError
from adjoint.gradient import watchdog
from adjoint.sensitivity import (Sensitivity, cost_context, gradient_units, owned_max, owned_mean,
                                 write_gradient_file)
from framework.errors import ConfigError
from swm.costs import make_cost
from swm.files import gradient_maps
from framework.output import provenance
from swm.output import CORE_NAME, mpas_namelist

#: Gradient variables of the output file: name, location, control, the control's units.
GRADIENTS = (("dJdh0", "cell", "h", "m"), ("dJdu0", "edge", "u", "m s-1"),
             ("dJdb", "cell", "b", "m"))


def build_cost(s, cost_config, key: str):
    """The cost of section `cost_config` (config key `key`) on setup `s`; its CostError as a
    ConfigError."""
    try:
        return make_cost(cost_context(s), cost_config, key)
    except CostError as exc:
        raise ConfigError(str(exc)) from None


class ShallowWaterSensitivity(Sensitivity):
    """The shallow-water sensitivity run of `config` (`adjoint.sensitivity.Sensitivity`)."""

    def maps(self, output, controls) -> list:
        return gradient_maps(output, controls)

    def setup(self):
        from swm.driver import setup

        self.s = setup(self.config)
        return self.s

    def cost(self):
        return build_cost(self.s, self.config.sensitivity.cost, "sensitivity.cost")

    def check(self):
        from swm.driver import state_checker

        s = self.s
        return watchdog(state_checker(self.config, s), s.total,
                        self.config.watchdog.interval_steps, start=s.start)

    def gradients(self, grads) -> dict:
        controls = self.config.sensitivity.controls
        return {control: (name, location, g)
                for (name, location, control, _), g in zip(GRADIENTS, grads) if control in controls}

    def reported(self, grads, chosen: dict) -> list:
        """Every gradient, chosen or not."""
        return [(name, location, g) for (name, location, _, _), g in zip(GRADIENTS, grads)]

    def write(self, value: float, cost_units: str, chosen: dict) -> None:
        s, config = self.s, self.config
        write_gradients(config.sensitivity.output, s, chosen, value, cost_units,
                        attributes={**provenance(config, CORE_NAME),
                                    **mpas_namelist(config, s.dt, s.total)},
                        config=config)

    def plot(self, path) -> list:
        from swm.plot import plot_gradients

        return plot_gradients(path)

    def directions(self):
        """h and b scaled by 1e-3 of h's largest departure from its mean, u by 1e-3 of its
        largest value; the chosen controls move."""
        s, model = self.s, self.s.model
        scale_h = 1e-3 * owned_max(s, model.h - owned_mean(s, model.h), "cell")
        scale_u = 1e-3 * owned_max(s, model.u, "edge")
        active = set(self.config.sensitivity.controls)
        return ((scale_h, scale_u, scale_h), [c in active for c in ("h", "u", "b")],
                ", ".join(sorted(active)))


def write_gradients(path, s, chosen: dict, value: float, cost_units: str, attributes=None,
                    config=None) -> None:
    """The shallow-water gradient file (`write_gradient_file`): the `chosen` controls' gradients
    ({control: (name, location, local gradient)}; dimensions Time, nCells | nEdges, nVertLevels
    = 1; units those of J per those of the control, `gradient_units`, and the same in words in
    long_name)."""
    gathered = {name: s.distribution.gather(location, to_host(g))
                for name, location, g in chosen.values()}

    def fill(ds):
        if "nVertLevels" not in ds.dimensions:
            ds.createDimension("nVertLevels", 1)
        for name, location, control, units in GRADIENTS:
            if name not in gathered:
                continue
            var = ds.createVariable(name, "f8", ("Time", SIZE_OF[location], "nVertLevels"))
            var[0, :, 0] = gathered[name]
            var.units = gradient_units(cost_units, units)
            what = f"the initial {control}" if control != "b" else "the topography b"
            var.long_name = f"gradient of J ({cost_units}) with respect to {what} ({units})"
    write_gradient_file(path, s, value, cost_units, fill, attributes, config)


__all__ = ["GRADIENTS", "ShallowWaterSensitivity", "build_cost", "write_gradients"]
