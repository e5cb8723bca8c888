"""Cost functions of a model run and their gradients with respect to the state (h, u).

A cost is a sum over steps, J = sum_k J_k(h_k, u_k), evaluated on the owned rows of every rank
and summed over ranks. Gradients dJ_k/dh_k, dJ_k/du_k are local arrays that are zero on halo rows
(the convention of the adjoint model's state).

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

import logging
import math

import numpy as np

import meshops
from meshops.device.backend import array_module, to_host
from meshops.parallel.comm import is_serial

log = logging.getLogger("adjoint")


class CostError(ValueError):
    """A cost function that cannot be evaluated on this run (an empty box, a bad observation file)."""


class Context:
    """What a cost needs of the run: the local mesh and its device tables, the owned row counts,
    the global ids of the owned cells, the communicator, the time step and the run's length, and
    `exchange(h, u)` (the state's halo exchange, in place; a no-op on one process)."""

    def __init__(self, mesh, device_mesh, owned: dict, global_cells, comm, dt: float, n_steps: int,
                 exchange, xp, dtype):
        self.mesh, self.device_mesh, self.owned = mesh, device_mesh, owned
        self.global_cells = np.asarray(global_cells)
        self.comm, self.dt, self.n_steps = comm, float(dt), int(n_steps)
        self.exchange, self.xp, self.dtype = exchange, xp, np.dtype(dtype)

    def allreduce(self, value: float) -> float:
        return value if is_serial(self.comm) else self.comm.allreduce(value)

    def minimum(self, value: float) -> float:
        """The least of `value` over every rank."""
        if is_serial(self.comm):
            return value
        from mpi4py import MPI

        return self.comm.allreduce(value, op=MPI.MIN)

    def exact_sum(self, values) -> float:
        """The correctly rounded sum of `values` over every rank (math.fsum of all of them): the
        same whatever the ranks and their order."""
        values = [float(v) for v in np.asarray(values).ravel()]
        if not is_serial(self.comm):
            values = [v for part in self.comm.allgather(values) for v in part]
        return math.fsum(values)

    def window_steps(self, window_hours, key: str) -> list[int]:
        """Steps whose times lie in window_hours = (start, end) (None: the final step)."""
        if window_hours is None:
            return [self.n_steps]
        start, end = window_hours
        steps = [k for k in range(self.n_steps + 1)
                 if start * 3600.0 - 1e-6 <= k * self.dt <= end * 3600.0 + 1e-6]
        if not steps:
            raise CostError(f"{key} = [{start}, {end}] h: no time step of the run falls in it "
                            f"(dt = {self.dt} s, run length {self.n_steps * self.dt / 3600.0} h)")
        return steps


def in_box(lat, lon, box) -> np.ndarray:
    """Entities whose (lat, lon) in radians lie in box = ((lat0, lat1), (lon0, lon1)) in degrees;
    a longitude range with lon0 > lon1 (after reduction to [0, 360)) wraps through 0."""
    (lat0, lat1), (lon0, lon1) = box
    lat, lon = np.degrees(lat), np.degrees(lon) % 360.0
    inside = (lat >= lat0) & (lat <= lat1)
    if lon1 - lon0 >= 360.0:
        return inside
    lon0, lon1 = lon0 % 360.0, lon1 % 360.0
    if lon0 <= lon1:
        return inside & (lon >= lon0) & (lon <= lon1)
    return inside & ((lon >= lon0) | (lon <= lon1))


def box_weights(context: Context, location: str, box, window_hours, key: str):
    """(local, owned, steps): the weights w_i / (W n_w) of the entities at `location` ("cell":
    areaCell, "vertex": areaTriangle) whose centres lie in `box` (module docstring) on the owned
    and halo rows (`local`) and on the owned rows only, zero elsewhere (`owned`), as arrays of the
    run's backend and dtype, and the window's steps (a frozenset). W is correctly rounded
    (`Context.exact_sum`), so the weights are the same on any number of ranks. CostError names
    `key`.box when it holds no entity, `key`.window_hours when no step falls in the window."""
    mesh = context.mesh
    if location == "cell":
        n, lat, lon, area = context.owned["cell"], mesh.latCell, mesh.lonCell, mesh.areaCell
    else:
        n, lat, lon, area = (context.owned["vertex"], mesh.latVertex, mesh.lonVertex,
                             mesh.areaTriangle)
    local = np.where(in_box(lat, lon, box), area, 0.0)        # owned and halo rows
    total = context.exact_sum(local[:n][local[:n] != 0.0])
    if total == 0.0:
        where = "cell centre" if location == "cell" else "vertex"
        raise CostError(f"{key}.box = lat {list(box[0])}, lon {list(box[1])} deg: contains no "
                        f"{where} of the mesh (expected a box around at least one {where})")
    steps = context.window_steps(window_hours, f"{key}.window_hours")
    local = local / (total * len(steps))
    owned = np.where(np.arange(local.size) < n, local, 0.0)
    return (context.xp.asarray(local, dtype=context.dtype),
            context.xp.asarray(owned, dtype=context.dtype), frozenset(steps))


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


#: Attributes by which a netCDF variable marks its missing values (netCDF4-python masks them).
MISSING_ATTRIBUTES = ("_FillValue", "missing_value", "valid_min", "valid_max", "valid_range")


class ObservationTable:
    """The variables of one kind of observation in a netCDF file, each of dimension `dimension`:
    `cell` (1-based global cell index), `time` (s), further 1-based `indices` ({name: (count,
    what)}, e.g. a level in [1, nVertLevels]), and the observed values with their errors
    (`positive`, {name: what a value > 0 is}). `expected` says what each variable holds
    (finite), `units` the units written after a value in a message (" m"). `plausible`
    ({name: (low, high)}, in those units) bounds what an observed value can be, so that values in
    other units (hPa for Pa, Celsius for K) are refused rather than fitted; a variable of the
    table whose `units` attribute names other units than `units` is refused too."""

    def __init__(self, cell: str, time: str, positive: dict, expected: dict, units: dict,
                 dimension: str = "nObs", indices: dict | None = None,
                 plausible: dict | None = None):
        self.cell, self.time, self.positive = cell, time, positive
        self.expected, self.units, self.dimension = expected, units, dimension
        self.indices = indices or {}
        self.plausible = plausible or {}
        self.names = tuple(expected)

    def listing(self) -> str:
        """'cell, time, h and error'."""
        return ", ".join(self.names[:-1]) + f" and {self.names[-1]}"


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


def read_observation_table(path, context: Context, key: str, table: ObservationTable) -> dict:
    """{name: values} of the observations of `table` in file `path` that the cost uses, checked
    against the run; cells and `table.indices` 0-based integers.

    A value the file marks as missing (its variable's `_FillValue`, `missing_value` or
    `valid_min`/`valid_max`/`valid_range`, or netCDF's default fill value where a variable has no
    `_FillValue`: an unwritten value) leaves its observation out of the cost, and the log says how
    many were left out and why. Every other value must be possible: cells 1-based in [1, nCells],
    indices in [1, count], times those of steps of the run, values and errors finite and > 0; the
    first that is not stops the run (CostError naming the file, the variable, the index, the
    observation's cell and time and what was expected), so an unmarked sentinel such as h = -9999
    is never taken as data."""
    import netCDF4

    try:
        ds = netCDF4.Dataset(path)
    except (OSError, FileNotFoundError) as exc:
        raise CostError(f"{key} = {str(path)!r}: cannot open the observation file: {exc}") from None
    arrays, missing = {}, {}
    with ds:
        for name in table.names:
            if name not in ds.variables:
                raise CostError(f"{path}: variable {name!r} missing (expected {table.listing()}, "
                                f"each of dimension {table.dimension})")
            var = ds.variables[name]
            _check_units(path, name, var, table.units[name].strip())
            data = var[:]
            missing[name] = (np.ma.getmaskarray(data).ravel(),
                             [f"{a} = {var.getncattr(a)}" for a in MISSING_ATTRIBUTES
                              if a in var.ncattrs()] or ["netCDF's default fill value"])
            arrays[name] = np.ma.filled(data.astype(np.float64), np.nan).ravel()
    sizes = {name: a.size for name, a in arrays.items()}
    if len(set(sizes.values())) != 1 or not sizes[table.cell]:
        raise CostError(f"{path}: variables {table.listing()} must have one common, non-empty "
                        f"length {table.dimension}, got {sizes}")
    left_out = np.zeros(sizes[table.cell], dtype=bool)
    for mask, _ in missing.values():
        left_out |= mask
    cell, time = arrays[table.cell], arrays[table.time]

    def refuse(name, bad, expected, hint=True):
        """CostError for the first observation kept that `bad` marks."""
        bad = np.flatnonzero(bad & ~left_out)
        if not bad.size:
            return
        i = int(bad[0])
        at = f" (cell {cell[i]:g}, time {time[i]:g} s)" if name in table.positive else ""
        raise CostError(f"{path}: {name}[{i}] = {arrays[name][i]:g}{table.units[name]}{at}: "
                        f"expected {expected}"
                        + ("; mark a missing observation with the variable's _FillValue or "
                           "missing_value attribute" if hint else ""))

    def index(name, count, what):
        a = arrays[name]
        refuse(name, (a != np.round(a)) | (a < 1) | (a > count),
               f"a 1-based {what} in [1, {count}] (the mesh has {count} {what.split()[0]}s)",
               hint=False)

    for name in table.names:
        refuse(name, ~np.isfinite(arrays[name]), table.expected[name])
    n_cells_global = int(context.allreduce(context.owned["cell"]))
    index(table.cell, n_cells_global, "cell index")
    for name, (count, what) in table.indices.items():
        index(name, count, what)
    steps = time / context.dt
    refuse(table.time, (np.abs(steps - np.rint(steps)) > 1e-6 * np.maximum(1.0, steps))
           | (np.rint(steps) < 0) | (np.rint(steps) > context.n_steps),
           f"a time of the run, a multiple of dt = {context.dt:g} s in "
           f"[0, {context.n_steps * context.dt:g}] s", hint=False)
    for name, expected in table.positive.items():
        refuse(name, arrays[name] <= 0, expected)
    for name, (low, high) in table.plausible.items():
        units = table.units[name].strip()
        refuse(name, (arrays[name] < low) | (arrays[name] > high),
               f"a plausible {name.replace('_', ' ')} in [{low:g}, {high:g}] {units} (values in "
               f"other units, such as hPa or degrees Celsius, are not converted: expected {units})",
               hint=False)
    if left_out.all():
        raise CostError(f"{path}: all {left_out.size} observations are missing values "
                        f"({_missing_summary(missing)}); expected at least one observation")
    if left_out.any():
        log.info("%s: %d of %d observations left out of the cost as missing values (%s)", path,
                 int(left_out.sum()), left_out.size, _missing_summary(missing))
    keep = ~left_out
    kept = {name: a[keep] for name, a in arrays.items()}
    for name in (table.cell, *table.indices):
        kept[name] = kept[name].astype(np.int64) - 1
    return kept


#: Spellings of the units an observed variable may declare, by the table's units.
SAME_UNITS = {"Pa": {"pa", "pascal", "pascals"}, "K": {"k", "kelvin", "degk", "deg_k"},
              "m": {"m", "meter", "meters", "metre", "metres"}, "s": {"s", "second", "seconds"}}


def _check_units(path, name: str, var, units: str) -> None:
    """CostError when variable `name` (netCDF4 Variable `var`) of observation file `path` declares
    a `units` attribute other than the table's `units` (or its spellings, SAME_UNITS); a variable
    without one, or of a table without units, passes."""
    declared = getattr(var, "units", None)
    if not units or units not in SAME_UNITS or not isinstance(declared, str):
        return
    if declared.strip().lower() not in SAME_UNITS[units]:
        raise CostError(f"{path}: variable {name!r} has units = {declared!r}; expected {units} "
                        "(values are not converted: write them in those units)")


def _missing_summary(missing) -> str:
    """'h: 3 (_FillValue = -9999.0); error: 1 (missing_value = -1.0)' of the masked values."""
    return "; ".join(f"{name}: {int(mask.sum())} ({', '.join(marks)})"
                     for name, (mask, marks) in missing.items() if mask.any())


def write_observations(path, cell, time, h, error) -> None:
    """An observation file (0-based `cell` given, written 1-based), atomically."""
    import netCDF4
    from grids.atomic import atomic_path

    with atomic_path(path) as tmp:
        with netCDF4.Dataset(tmp, "w") as ds:
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
    """The cost of a `adjoint.config.CostConfig`."""
    if cost_config.kind == "misfit":
        return ObservationCost(context, cost_config.observations, f"{key}.observations")
    box = (tuple(cost_config.box.lat), tuple(cost_config.box.lon))
    return RegionCost(context, cost_config.field, cost_config.kind, box,
                      cost_config.window_hours, key)


__all__ = ["Context", "CostError", "ObservationTable", "RegionCost", "ObservationCost", "box_weights",
           "make_cost", "in_box", "read_observation_table", "read_observations",
           "write_observations"]
