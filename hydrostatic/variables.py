"""The history's variables: MPAS-Atmosphere names, dimensions, units and long names."""
from __future__ import annotations

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
DEFAULT_VARIABLES = ("theta", "temperature", "pressure", "surface_pressure", "temperature_850hPa",
                     "uReconstructZonal", "uReconstructMeridional")
#: Global time series (float64, per record).
DIAGNOSTICS = {"mass": ("kg", "total mass of the atmosphere (sum of areaCell * mass)")}
#: The state in a restart file: (name, location, attributes) of each field of `Model.state`.
STATE = (("mass", "cell", {"units": "kg m-2", "long_name": "layer mass per unit area (dp / g)"}),
         ("theta_mass", "cell", {"units": "K kg m-2",
                                 "long_name": "layer mass times potential temperature"}),
         ("u", "edge", {"units": "m s-1", "long_name": "normal velocity at edges"}))
