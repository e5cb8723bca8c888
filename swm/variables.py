"""The model's variables, declared once: the output fields a history file may hold and the global
diagnostics, each with its location, units, long name (CF `standard_name` where CF has one) and
how it is computed from the model on the model's own backend (NumPy or CuPy arrays, local rows).

The config's allowed `output.variables`, the history writer's metadata and `swm.plot`'s labels
all read this table: a new output variable is one `Field` entry here, a new global diagnostic one
`Diagnostic` entry in `DIAGNOSTICS` (name, units, long name and the partial reductions it is
made of; `swm.diagnostics` reduces them over the ranks and the history writes them). The bottom topography is
not a per-record field: the history holds it once, as MPAS's `h_s(nCells)` (`swm.output`).
Fields with `default=False` (MPAS's further shallow-water diagnostics) are written only when
`output.variables` names them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np


@dataclass(frozen=True)
class Field:
    """An output field: `compute(model)` -> local array at `location` ("cell", "edge", "vertex")."""
    name: str
    location: str
    units: str
    long_name: str
    compute: Callable
    standard_name: Optional[str] = None
    default: bool = True

    def attributes(self) -> dict:
        attrs = {"units": self.units, "long_name": self.long_name}
        if self.standard_name:
            attrs["standard_name"] = self.standard_name
        return attrs

    @property
    def label(self) -> str:
        """'long name (units)', for plots."""
        return f"{self.long_name} ({self.units})"


@dataclass(frozen=True)
class Diagnostic:
    """A global scalar time series. `partials(s)`: its rank-local partial reductions [(op, device
    scalar)], op "sum", "max" or "min", of the owned rows `s` (`swm.diagnostics.Local`: h, u, b,
    ke, pv, ... as (rows, nlev) float64 arrays); `value(reduced)`: the diagnostic of the
    partials reduced over every rank (default: the one partial); `exact`: made of Williamson case
    2's analytic h (`s.exact`), only in runs that have it."""
    name: str
    units: str
    long_name: str
    partials: Callable
    value: Callable = lambda reduced: reduced[0]
    exact: bool = False

    def attributes(self) -> dict:
        return {"units": self.units, "long_name": self.long_name}


def _operator(name: str, component: int | None = None):
    def compute(model):
        import meshops

        result = getattr(meshops, name)(model.device_mesh, model.u)
        return result if component is None else result[component]
    return compute


def _diagnostic(name: str):
    """The diagnostic `name` of the tendencies (`swm.tendencies.diagnostics`: h_edge, vorticity,
    pv_vertex, pv_edge with APVM when it is on, ke), as the model's step computes it."""
    def compute(model):
        from swm.tendencies import diagnostics

        return diagnostics(model.device_mesh, model.h, model.u, model.f_vertex, model.physics)[name]
    return compute


def _on_cells(compute_vertex):
    """interp_v2c (kite-area weighted mean) of a vertex field."""
    def compute(model):
        import meshops

        return meshops.interp_v2c(model.device_mesh, compute_vertex(model))
    return compute


FIELDS = {f.name: f for f in (
    Field("h", "cell", "m", "fluid thickness", lambda model: model.h),
    Field("u", "edge", "m s-1", "normal velocity on edges", lambda model: model.u),
    Field("vorticity", "vertex", "s-1", "relative vorticity at vertices", _operator("curl_e2v"),
          "atmosphere_relative_vorticity"),
    Field("divergence", "cell", "s-1", "divergence of the velocity at cell centres",
          _operator("div_e2c"), "divergence_of_wind"),
    Field("ke", "cell", "m2 s-2", "kinetic energy per unit mass at cell centres",
          _operator("ke_e2c"), "specific_kinetic_energy_of_air"),
    Field("uReconstructZonal", "cell", "m s-1", "zonal velocity reconstructed at cell centres",
          _operator("reconstruct_zonal_meridional_e2c", 0), "eastward_wind"),
    Field("uReconstructMeridional", "cell", "m s-1",
          "meridional velocity reconstructed at cell centres",
          _operator("reconstruct_zonal_meridional_e2c", 1), "northward_wind"),
    Field("v", "edge", "m s-1", "tangential velocity on edges (TRiSK weights)",
          _operator("tangential_e2e"), default=False),
    Field("h_edge", "edge", "m", "fluid thickness on edges (mean of the two cells)",
          _diagnostic("h_edge"), default=False),
    Field("pv_vertex", "vertex", "m-1 s-1", "potential vorticity at vertices",
          _diagnostic("pv_vertex"), default=False),
    Field("pv_edge", "edge", "m-1 s-1", "potential vorticity on edges (as in the tendencies, "
          "APVM included)", _diagnostic("pv_edge"), default=False),
    Field("pv_cell", "cell", "m-1 s-1", "potential vorticity at cell centres",
          _on_cells(_diagnostic("pv_vertex")), default=False),
    Field("vorticity_cell", "cell", "s-1", "relative vorticity at cell centres",
          _on_cells(_operator("curl_e2v")), default=False),
    Field("uReconstructX", "cell", "m s-1", "x component of the velocity reconstructed at cell "
          "centres (Cartesian)", _operator("reconstruct_e2c", 0), default=False),
    Field("uReconstructY", "cell", "m s-1", "y component of the velocity reconstructed at cell "
          "centres (Cartesian)", _operator("reconstruct_e2c", 1), default=False),
    Field("uReconstructZ", "cell", "m s-1", "z component of the velocity reconstructed at cell "
          "centres (Cartesian)", _operator("reconstruct_e2c", 2), default=False),
)}

DIAGNOSTICS = {d.name: d for d in (
    Diagnostic("mass", "m3", "total fluid volume (sum of areaCell h)",
               lambda s: [("sum", s.xp.sum(s.area * s.h))]),
    Diagnostic("energy", "m5 s-2", "total energy per unit density (sum of areaCell (h ke + "
               "g ((h + b)^2 - b^2) / 2))",
               lambda s: [("sum", s.xp.sum(s.area * (s.h * s.ke + 0.5 * s.g * ((s.h + s.b) ** 2
                                                                              - s.b ** 2))))]),
    Diagnostic("potential_enstrophy", "m s-2", "potential enstrophy (sum of areaTriangle "
               "h_vertex pv^2 / 2)",
               lambda s: [("sum", s.xp.sum(0.5 * s.area_triangle[:, None] * s.h_vertex * s.pv ** 2))]),
    Diagnostic("max_cfl", "1", "largest Courant number (|u| + sqrt(g h_edge)) dt / dcEdge",
               lambda s: [("max", s.xp.max(s.speed * s.dt / s.dc_edge[:, None]))]),
    Diagnostic("h_min", "m", "smallest fluid thickness", lambda s: [("min", s.xp.min(s.h))]),
    Diagnostic("h_max", "m", "largest fluid thickness", lambda s: [("max", s.xp.max(s.h))]),
    Diagnostic("h_l1", "1", "normalised l1 error of h against the analytic solution",
               lambda s: [("sum", s.xp.sum(s.area_cell * s.xp.abs(s.error))),
                          ("sum", s.xp.sum(s.area_cell * s.xp.abs(s.exact)))],
               lambda r: r[0] / r[1], exact=True),
    Diagnostic("h_l2", "1", "normalised l2 error of h against the analytic solution",
               lambda s: [("sum", s.xp.sum(s.area_cell * s.error ** 2)),
                          ("sum", s.xp.sum(s.area_cell * s.exact ** 2))],
               lambda r: np.sqrt(r[0] / r[1]), exact=True),
    Diagnostic("h_linf", "1", "normalised linf error of h against the analytic solution",
               lambda s: [("max", s.xp.max(s.xp.abs(s.error))), ("max", s.xp.max(s.xp.abs(s.exact)))],
               lambda r: r[0] / r[1], exact=True),
)}

#: Output variable names, in the registry's order (the config's allowed `output.variables`).
OUTPUT_VARIABLES = tuple(FIELDS)
#: The fields a history holds when the config names none (`output.variables`' default).
DEFAULT_VARIABLES = tuple(name for name, field in FIELDS.items() if field.default)
