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
    "u": (("nEdges", "nVertLevels"), "m s-1", "normal velocity at edges"),
    "uReconstructZonal": (("nCells", "nVertLevels"), "m s-1",
                          "zonal velocity reconstructed at cell centres"),
    "uReconstructMeridional": (("nCells", "nVertLevels"), "m s-1",
                               "meridional velocity reconstructed at cell centres"),
    "zgrid": (("nCells", "nVertLevelsP1"), "m", "geometric height of the layer interfaces "
              "(geopotential / g)"),
}

#: The isobaric levels (hPa) of the pressure-level fields, and the quantities interpolated to them
#: (MPAS-Atmosphere's isobaric diagnostics: uzonal_850hPa, temperature_500hPa, height_250hPa, ...):
#: quantity -> (units, what it is). Each is a layer field interpolated linear in log p between the
#: two layers that bracket the level (`meshops.interp_level_l2p`, layer pressure as `pressure`).
ISOBARIC_LEVELS_HPA = (850, 500, 250)
ISOBARIC_QUANTITIES = {
    "uzonal": ("m s-1", "zonal velocity (uReconstructZonal)"),
    "umeridional": ("m s-1", "meridional velocity (uReconstructMeridional)"),
    "temperature": ("K", "temperature"),
    "height": ("m", "geopotential height")}     # geopotential / g; a layer's: the mean of its
                                                # interfaces' (zgrid)


def isobaric_name(quantity: str, level_hpa: int) -> str:
    """The MPAS-Atmosphere name of `quantity` at `level_hpa`: e.g. "uzonal_850hPa"."""
    return f"{quantity}_{level_hpa}hPa"


#: name -> (quantity, pressure in Pa) of every pressure-level field.
ISOBARIC = {isobaric_name(q, level): (q, level * 100.0)
            for level in ISOBARIC_LEVELS_HPA for q in ISOBARIC_QUANTITIES}
FIELDS.update({name: (("nCells",), ISOBARIC_QUANTITIES[q][0],
                      f"{ISOBARIC_QUANTITIES[q][1]} at {p / 100:g} hPa (linear in log p)")
               for name, (q, p) in ISOBARIC.items()})
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
