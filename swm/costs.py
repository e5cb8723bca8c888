"""The shallow-water model's cost functions of a run and their gradients with respect to the
state (h, u), on the shared pieces of `adjoint.costs` (`Context`, `box_weights`,
`read_observation_table`).

Region statistics, with w_i the area (areaCell for h, areaTriangle for vorticity) of the owned
entities whose centres lie in a latitude-longitude box, W = sum_i w_i over all ranks (correctly
rounded, so the same on any number of ranks), and the window's n_w steps (one step, the final one,
by default):

    mean      J_k = (1 / n_w) sum_i w_i phi_i / W
    energy    J_k = (1 / n_w) sum_i w_i phi_i^2 / (2 W)

in the units of phi (mean: m for h, s-1 for vorticity) or of its square (energy: m2, s-2);
phi = h, or the relative vorticity curl_e2v(u), whose gradient on the owned edges is
curl_e2v_adj(w (.) / W) with w (.) taken on the owned and halo vertices (the state exchanged
first), so that each owned edge gathers both its vertices as on one process.

Observation misfit: observed thickness y_o at cells c_o and steps k_o, with errors sigma_o,

    J = sum_o (h_{k_o}[c_o] - y_o)^2 / (2 sigma_o^2),   dJ/dh_k[c] = sum_{o: k_o = k, c_o = c} (h - y_o) / sigma_o^2.

a number (units 1). Each cost's `units` is a udunits string.

Observation files (netCDF): variables `cell` (global cell index, 1-based as MPAS's
indexToCellID), `time` (seconds since the start of the run), `h` (m) and `error` (m), each of
dimension nObs. An observation with a value its file marks as missing (`_FillValue`,
`missing_value`) is left out of the cost; any other impossible value (h <= 0, not finite) is
refused (`read_observations`).
"""
from __future__ import annotations

import numpy as np

import meshops
from meshops.device.backend import array_module, to_host

from adjoint.costs import Context, CostError, ObservationTable, box_weights, read_observation_table


#: Units of the fields a region cost reads, and of their squares.
FIELD_UNITS = {"h": ("m", "m2"), "vorticity": ("s-1", "s-2")}


class RegionCost:
    """The area-weighted `statistic` ("mean" or "energy") of `field` ("h" or "vorticity") over a
    latitude-longitude box, averaged over the steps of a window (see the module docstring); its
    `units` are the field's (mean) or their square (energy)."""

    def __init__(self, context: Context, field: str, statistic: str, box, window_hours=None,
                 key: str = "sensitivity.cost"):
        if field not in ("h", "vorticity"):
            raise CostError(f"{key}.field = {field!r}: expected 'h' or 'vorticity'")
        if statistic not in ("mean", "energy"):
            raise CostError(f"{key}.kind = {statistic!r}: expected 'mean', 'energy' or 'misfit'")
        self.context, self.field, self.statistic = context, field, statistic
        self.units = FIELD_UNITS[field][statistic == "energy"]
        self.local_weights, self.weights, self.steps = box_weights(
            context, "cell" if field == "h" else "vertex", box, window_hours, key)

    def _phi(self, h, u):
        return h if self.field == "h" else meshops.curl_e2v(self.context.device_mesh, u)

    def value(self, k: int, state) -> float:
        if k not in self.steps:
            return 0.0
        phi = self._phi(*state)
        local = (self.weights * phi).sum() if self.statistic == "mean" else \
            0.5 * (self.weights * phi * phi).sum()
        return self.context.allreduce(float(local))

    def gradient(self, k: int, state):
        if k not in self.steps:
            return None
        h, u = state
        if self.field == "h":
            g = self.weights if self.statistic == "mean" else self.weights * h
            return [g.astype(h.dtype, copy=True), array_module(u).zeros_like(u)]
        g = self.local_weights
        if self.statistic == "energy":
            h, u = h.copy(), u.copy()
            self.context.exchange(h, u)
            g = g * self._phi(h, u)
        u_adj = meshops.curl_e2v_adj(self.context.device_mesh, g)
        u_adj[self.context.owned["edge"]:] = 0
        return [array_module(h).zeros_like(h), u_adj]


class ObservationCost:
    """The squared misfit of h to observations read from a netCDF file (see the module docstring),
    a number (units 1)."""

    units = "1"

    def __init__(self, context: Context, path, key: str = "sensitivity.cost.observations"):
        self.context = context
        cells, times, values, errors = read_observations(path, context, key)
        steps = np.rint(times / context.dt).astype(np.int64)
        # Each rank keeps the observations of its owned cells.
        n_owned = context.owned["cell"]
        lookup = {int(g): i for i, g in enumerate(context.global_cells[:n_owned])}
        mine = np.array([int(c) in lookup for c in cells], dtype=bool)
        self.local_cell = np.array([lookup[int(c)] for c in cells[mine]], dtype=np.int64)
        self.step = steps[mine]
        self.value_obs = values[mine]
        self.inverse_variance = 1.0 / errors[mine] ** 2
        self.steps = frozenset(int(s) for s in steps)
        self.n_obs = int(cells.size)

    def _rows(self, k):
        return np.flatnonzero(self.step == k)

    def innovation(self, k, h):
        rows = self._rows(k)
        host = to_host(h)
        return rows, host[self.local_cell[rows]].astype(np.float64) - self.value_obs[rows]

    def value(self, k: int, state) -> float:
        if k not in self.steps:
            return 0.0
        rows, d = self.innovation(k, state[0])
        return self.context.allreduce(float(0.5 * np.sum(d * d * self.inverse_variance[rows])))

    def gradient(self, k: int, state):
        if k not in self.steps:
            return None
        h, u = state
        rows, d = self.innovation(k, h)
        g = np.zeros(h.shape[0])
        np.add.at(g, self.local_cell[rows], d * self.inverse_variance[rows])
        xp = array_module(h)
        return [xp.asarray(g, dtype=h.dtype), xp.zeros_like(u)]


#: The shallow-water model's observations of h.
H_OBSERVATIONS = ObservationTable(
    "cell", "time", {"h": "a fluid thickness > 0 m", "error": "a positive observation error (m)"},
    {"cell": "a 1-based cell index", "time": "a finite time (s)", "h": "a finite thickness > 0 m",
     "error": "a finite error > 0 m"},
    {"cell": "", "time": " s", "h": " m", "error": " m"})


def read_observations(path, context: Context, key: str):
    """(cell, time, h, error) of the h observations of a file that the cost uses
    (`read_observation_table` of `H_OBSERVATIONS`), 0-based cells."""
    kept = read_observation_table(path, context, key, H_OBSERVATIONS)
    return kept["cell"], kept["time"], kept["h"], kept["error"]


def write_observations(path, cell, time, h, error) -> None:
    """An observation file (0-based `cell` given, written 1-based), atomically."""
    from grids.atomic import atomic_path
    from grids.netcdf_files import dataset

    with atomic_path(path) as tmp:
        with dataset(tmp, "w") as ds:
            ds.createDimension("nObs", len(cell))
            for name, values, dtype, units, text in (
                    ("cell", np.asarray(cell) + 1, "i4", "1", "observed cell (1-based index)"),
                    ("time", time, "f8", "s", "seconds since the start of the run"),
                    ("h", h, "f8", "m", "observed fluid thickness"),
                    ("error", error, "f8", "m", "observation error standard deviation")):
                var = ds.createVariable(name, dtype, ("nObs",))
                var[:] = values
                var.units, var.long_name = units, text


def make_cost(context: Context, cost_config, key: str = "sensitivity.cost"):
    """The cost of a `swm.applications.CostConfig`."""
    if cost_config.kind == "misfit":
        return ObservationCost(context, cost_config.observations, f"{key}.observations")
    box = (tuple(cost_config.box.lat), tuple(cost_config.box.lon))
    return RegionCost(context, cost_config.field, cost_config.kind, box,
                      cost_config.window_hours, key)


__all__ = ["FIELD_UNITS", "H_OBSERVATIONS", "ObservationCost", "RegionCost", "make_cost",
           "read_observations", "write_observations"]
