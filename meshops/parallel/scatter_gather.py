"""Global <-> local fields: scatter a global field held on the root rank to every rank's local
array, and gather the owned rows of local arrays back to global order on the root.

- `scatter_field(decomposition, comm, global_field, location)`: on the root, `global_field` is
  (nGlobal,) or (nGlobal, nlev) at `location` ("cell", "edge", "vertex"), any dtype, NumPy or CuPy
  (other ranks pass None). Every rank gets its local array (n_local[, nlev]) with every local row,
  owned and halo, equal to the global field's row (x = global_field[l2g]): ready for operators
  without an exchange. The result is a CuPy array on every rank when the root's field is one.
- `gather_field(decomposition, comm, local_field, location)`: the owned rows of every rank's
  local array, in global order, on the root (a NumPy array, or CuPy when the root's local field is
  one); None on the other ranks. Halo rows are not read.

Both are collective. CuPy arrays are staged through host memory. The root holds the global field
and one rank's rows at a time; the other ranks only their local rows. Each rank's global indices
(`Decomposition.local.l2g`) are sent to the root once per decomposition and kept (weakly, with the
decomposition).
"""
from __future__ import annotations

import weakref

import numpy as np

from meshops.device.backend import array_module

LOCATIONS = ("cell", "edge", "vertex")
_TAG = 7411
_ROWS: dict = {}     # (id(decomposition), root) -> (weakref, _Rows on the root, None elsewhere)


def _check_location(location: str, what: str) -> None:
    if location not in LOCATIONS:
        raise ValueError(f"{what}: location {location!r}, expected one of {LOCATIONS}")


class _Rows:
    """On the root: every rank's local-to-global indices and owned counts per location."""

    def __init__(self, everyone):
        self.l2g = {loc: [r[0][loc] for r in everyone] for loc in LOCATIONS}
        self.n_owned = {loc: [r[1][loc] for r in everyone] for loc in LOCATIONS}
        self.n_global = {loc: int(max((x.max() for x in self.l2g[loc] if x.size), default=-1)) + 1
                         for loc in LOCATIONS}

    def owned(self, location: str, r: int) -> np.ndarray:
        return self.l2g[location][r][: self.n_owned[location][r]]


def _global_rows(decomposition, comm, root: int):
    """A `_Rows` on the root (None elsewhere), gathered once per decomposition (collective)."""
    key = (id(decomposition), root)
    hit = _ROWS.get(key)
    if hit is not None and hit[0]() is decomposition:
        return hit[1]
    mine = ({loc: np.asarray(decomposition.local.l2g[loc], dtype=np.int64) for loc in LOCATIONS},
            {loc: decomposition.n_owned(loc) for loc in LOCATIONS})
    everyone = comm.gather(mine, root=root)
    rows = _Rows(everyone) if comm.Get_rank() == root else None
    _ROWS[key] = (weakref.ref(decomposition, lambda _, key=key: _ROWS.pop(key, None)), rows)
    return rows


def _host(x):
    xp = array_module(x)
    return (np.asarray(x), False) if xp is np else (xp.asnumpy(x), True)


def _to_backend(x: np.ndarray, cupy: bool):
    if not cupy:
        return x
    import cupy as cp

    return cp.asarray(x)


def scatter_field(decomposition, comm, global_field, location: str, *, root: int = 0):
    """Every rank's local array of the global field held on `root` (see module doc)."""
    _check_location(location, "scatter_field")
    rank = comm.Get_rank()
    rows = _global_rows(decomposition, comm, root)
    header = None
    if rank == root:
        if global_field is None:
            raise ValueError(f"scatter_field: rank {root} (root) needs the global {location} field")
        host, on_gpu = _host(global_field)
        n = rows.n_global[location]
        if host.ndim not in (1, 2) or host.shape[0] != n:
            header = ValueError(f"scatter_field: expected a global {location} field of shape "
                                f"({n},) or ({n}, nlev), got shape {tuple(host.shape)}")
        else:
            header = (host.shape[1:], host.dtype.str, on_gpu)
    header = comm.bcast(header, root=root)
    if isinstance(header, Exception):
        raise header
    tail, dtype, on_gpu = tuple(header[0]), np.dtype(header[1]), header[2]
    if rank == root:
        mine = None
        for r in range(comm.Get_size()):
            part = np.ascontiguousarray(host[rows.l2g[location][r]])
            if r == root:
                mine = part
            else:
                comm.Send(part.reshape(-1).view(np.uint8), dest=r, tag=_TAG)
    else:
        mine = np.empty((decomposition.n_local(location),) + tail, dtype)
        comm.Recv(mine.reshape(-1).view(np.uint8), source=root, tag=_TAG)
    return _to_backend(mine, on_gpu)


def gather_field(decomposition, comm, local_field, location: str, *, root: int = 0):
    """The owned rows of every rank's `local_field`, in global order, on `root`; None elsewhere."""
    _check_location(location, "gather_field")
    n_owned, n_local = decomposition.n_owned(location), decomposition.n_local(location)
    if local_field is None or local_field.ndim not in (1, 2) or local_field.shape[0] != n_local:
        shape = None if local_field is None else tuple(local_field.shape)
        raise ValueError(f"gather_field: rank {comm.Get_rank()} expected a local {location} field "
                         f"of shape ({n_local},) or ({n_local}, nlev), got {shape}")
    host, on_gpu = _host(local_field[:n_owned])
    host = np.ascontiguousarray(host)
    rows = _global_rows(decomposition, comm, root)
    headers = comm.gather((host.shape[1:], host.dtype.str), root=root)
    bad = None
    if comm.Get_rank() == root:
        for r, h in enumerate(headers):
            if tuple(h[0]) != host.shape[1:] or h[1] != host.dtype.str:
                bad = (f"gather_field: rank {r} has a {location} field with rows {tuple(h[0])} "
                       f"{np.dtype(h[1])}, the root {host.shape[1:]} {host.dtype}; expected the "
                       "same level count and dtype on every rank")
                break
    bad = comm.bcast(bad, root=root)
    if bad is not None:
        raise ValueError(bad)
    if comm.Get_rank() != root:
        comm.Send(host.reshape(-1).view(np.uint8), dest=root, tag=_TAG + 1)
        return None
    out = np.empty((rows.n_global[location],) + host.shape[1:], host.dtype)
    for r in range(comm.Get_size()):
        owned = rows.owned(location, r)
        if r == root:
            out[owned] = host
        else:
            part = np.empty((owned.size,) + host.shape[1:], host.dtype)
            comm.Recv(part.reshape(-1).view(np.uint8), source=r, tag=_TAG + 1)
            out[owned] = part
    return _to_backend(out, on_gpu)
