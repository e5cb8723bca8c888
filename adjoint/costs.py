"""What every model's cost functions share (`swm.costs`, `hydrostatic.costs`): the run a cost
is evaluated on (`Context`), box weights, and the reading and checking of observation files.

A cost is a sum over steps, J = sum_k J_k(x_k), evaluated on the owned rows of every rank and
summed over ranks; it has `value(k, state)`, `gradient(k, state)` (local arrays, zero on halo
rows, the convention of the adjoint model's state; None at a step without a term) and `units` (a
udunits string).

Region statistics weigh the owned entities whose centres lie in a latitude-longitude box by
their areas (areaCell, areaTriangle): w_i / (W n_w), W = sum_i w_i over all ranks (correctly
rounded, so the same on any number of ranks) and n_w the window's steps (`box_weights`).

Observation files (netCDF) hold, per kind of observation (`ObservationTable`), a 1-based global
cell index (as MPAS's indexToCellID), a time in seconds since the start of the run, the values
and their errors. An observation with a value its file marks as missing (`_FillValue`,
`missing_value`) is left out of the cost; any other impossible value is refused
(`read_observation_table`).
"""
from __future__ import annotations

import logging
import math

import numpy as np

from meshops.parallel.comm import is_serial

log = logging.getLogger("adjoint")


class CostError(ValueError):
    """A cost function that cannot be evaluated on this run (an empty box, a bad observation file)."""


class Context:
    """What a cost needs of the run: the local mesh and its device tables, the owned row counts,
    the global ids of the owned cells, the communicator, the time step and the run's length, and
    `exchange(*state)` (the state's halo exchange, in place; a no-op on one process)."""

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


__all__ = ["Context", "CostError", "ObservationTable", "box_weights", "in_box",
           "read_observation_table"]
