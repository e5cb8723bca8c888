"""The history's variables: MPAS-Atmosphere names, dimensions, units and long names; the global
diagnostics with their computation (a new one is one `Diagnostic` entry in DIAGNOSTICS)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from meshops.device.backend import to_host

#: name -> (dimensions after Time, units, long_name). Levels from the surface up.
FIELDS = {
    "theta": (("nCells", "nVertLevels"), "K", "potential temperature"),
    "temperature": (("nCells", "nVertLevels"), "K", "temperature"),
    "pressure": (("nCells", "nVertLevels"), "Pa", "pressure (mean of the layer's interfaces)"),
    "surface_pressure": (("nCells",), "Pa", "surface pressure"),
    "temperature_850hPa": (("nCells",), "K", "temperature at 850 hPa (linear in log p)"),
    "u": (("nEdges", "nVertLevels"), "m s-1", "normal velocity at edges"),
    "uReconstructZonal": (("nCells", "nVertLevels"), "m s-1",
                          "zonal velocity reconstructed at cell centres"),
    "uReconstructMeridional": (("nCells", "nVertLevels"), "m s-1",
                               "meridional velocity reconstructed at cell centres"),
    "zgrid": (("nCells", "nVertLevelsP1"), "m", "geometric height of the layer interfaces "
              "(geopotential / g)"),
}
OUTPUT_VARIABLES = tuple(FIELDS)

#: The gradients of a sensitivity run (`hydrostatic.sensitivity`) by control (the config's
#: sensitivity.controls): (variable, dimensions after Time, the control's units, what it is).
GRADIENTS = {
    "theta": ("dJdtheta0", ("nCells", "nVertLevels"), "K", "the initial potential temperature"),
    "u": ("dJdu0", ("nEdges", "nVertLevels"), "m s-1", "the initial normal velocity"),
    "mass": ("dJdmass0", ("nCells", "nVertLevels"), "kg m-2",
             "the initial layer mass (theta fixed)"),
    "surface_pressure": ("dJdps0", ("nCells",), "Pa", "the initial surface pressure (theta fixed)"),
    "phi_s": ("dJdphi_s", ("nCells",), "m2 s-2", "the surface geopotential phi_s")}
DEFAULT_VARIABLES = ("theta", "temperature", "pressure", "surface_pressure", "temperature_850hPa",
                     "uReconstructZonal", "uReconstructMeridional")


@dataclass(frozen=True)
class Diagnostic:
    """A global time series (float64, per record): its units, long name and `partial(model,
    owned)`, this rank's part of the global sum over its owned rows (`owned`: their counts by
    location, "cell", "edge", "vertex"), summed over the ranks by
    `hydrostatic.output.diagnostics_of`."""
    units: str
    long_name: str
    partial: Callable


def _mass(model, owned: dict) -> float:
    """sum_i areaCell[i] sum_k mass[i, k] over owned cells i (kg), in float64."""
    n = owned["cell"]
    area = np.asarray(model.mesh.areaCell[:n], dtype=np.float64)
    return float((area[:, None] * to_host(model.mass[:n]).astype(np.float64)).sum())


#: The global diagnostics written to the history and logged at every record.
DIAGNOSTICS = {"mass": Diagnostic("kg", "total mass of the atmosphere (sum of areaCell * mass)",
                                  _mass)}
