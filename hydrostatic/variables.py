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
    """A global time series (float64, per record): its units, long name and `columns(model)`, its
    summands on the cells of the rank's mesh (float64, host), summed over the owned cells in
    global cell order by `hydrostatic.output.diagnostics_of`: bitwise the same on any number of
    ranks."""
    units: str
    long_name: str
    columns: Callable


def _mass(model):
    """areaCell[i] sum_k mass[i, k] of each cell i (kg), in float64."""
    area = np.asarray(model.mesh.areaCell, dtype=np.float64)
    return area * to_host(model.mass).astype(np.float64).sum(axis=1)


#: The global diagnostics written to the history and logged at every record.
DIAGNOSTICS = {"mass": Diagnostic("kg", "total mass of the atmosphere (sum of areaCell * mass)",
                                  _mass)}
#: The state in a restart file: (name, location, attributes) of each field of `Model.state`.
STATE = (("mass", "cell", {"units": "kg m-2", "long_name": "layer mass per unit area (dp / g)"}),
         ("theta_mass", "cell", {"units": "K kg m-2",
                                 "long_name": "layer mass times potential temperature"}),
         ("u", "edge", {"units": "m s-1", "long_name": "normal velocity at edges"}))
