"""Halo exchange on a decomposed mesh, and its adjoint.

With E the forward exchange of a field at one location (local arrays: owned rows first, then halo
rows; see `grids.decompose`):

    forward  (E):    x[h] <- x_owner[h]           for every halo row h (owners send, halos receive)
    adjoint  (E^T):  x_owner[h] += x[h]; x[h] <- 0  (halo values are sent back and added into owners)

E^T is the exact transpose of E for the Euclidean inner product over owned rows summed across
ranks: sum_ranks <E x, y>_local-all = sum_ranks <x, E^T y>_owned.

Both run split into `begin` (pack, post non-blocking sends/receives) and `end` (wait, unpack), so
work on owned entities can overlap the transfer; `exchange` / `exchange_adjoint` do both. Fields
are (n_local,) or (n_local, nlev), float32 or float64, C-contiguous, NumPy or CuPy; the update is
in place. The transport for CuPy arrays is chosen from the `transport=` argument of the call, of
the constructor, or the MESHOPS_HALO_TRANSPORT variable ("auto": NCCL when available, then
CUDA-aware MPI when proven, else staging through pinned host memory); it is logged once per rank.
"""
from __future__ import annotations

import numpy as np

from meshops.device.backend import array_module, article
from meshops.parallel.comm import world
from meshops.parallel.transport import Route, TransportChoice, normalise

LOCATIONS = ("cell", "edge", "vertex")
_TAG_BASE = 4100


class HaloExchange(TransportChoice):
    """Forward and adjoint halo exchange of one rank's `grids.decompose.Decomposition`.

    Construction is collective over `comm` (default: the world communicator).
    """

    def __init__(self, decomposition, comm=None, *, transport: str | None = None):
        self.decomposition = decomposition
        self.comm = world() if comm is None else comm
        if self.comm.Get_size() != decomposition.nranks:
            raise ValueError(f"HaloExchange: communicator has {self.comm.Get_size()} ranks, the "
                             f"decomposition {decomposition.nranks}; expected the same")
        self.requested = normalise(transport)
        self._transports: dict = {}
        self.routes = {}
        for i, loc in enumerate(LOCATIONS):
            ex = decomposition.exchange[loc]
            n_owned = decomposition.n_owned(loc)
            self.routes[loc, False] = Route(_TAG_BASE + 2 * i, ex.peers, ex.send_index,
                                            ex.send_offsets, ex.recv_index, ex.recv_offsets,
                                            False, n_owned)
            self.routes[loc, True] = Route(_TAG_BASE + 2 * i + 1, ex.peers, ex.recv_index,
                                           ex.recv_offsets, ex.send_index, ex.send_offsets,
                                           True, n_owned)

    @property
    def mesh(self):
        return self.decomposition.mesh

    def describe(self, xp, name: str) -> str:
        return f"halo exchange of {'NumPy' if xp is np else 'CuPy'} arrays uses transport {name!r}"

    @property
    def stats(self):
        """Messages and bytes sent and received by this exchange's transports so far (one message
        per field, neighbour and direction)."""
        from meshops.parallel.transport import MessageStats

        total = MessageStats()
        for tr in self._transports.values():
            total = total + tr.stats
        return total

    # exchange ----------------------------------------------------------------------------------
    def _check(self, x, location: str):
        if location not in LOCATIONS:
            raise ValueError(f"halo exchange: location {location!r}, expected one of {LOCATIONS}")
        n = self.decomposition.n_local(location)
        if x.dtype not in (np.float32, np.float64):
            raise TypeError(f"halo exchange: expected a float32 or float64 {location} field, "
                            f"got dtype {x.dtype}")
        if x.ndim not in (1, 2) or x.shape[0] != n:
            raise ValueError(f"halo exchange: expected {article(location)} field of shape ({n},) or "
                             f"({n}, nlev) (local {location}s), got shape {tuple(x.shape)}")
        if not x.flags.c_contiguous:
            raise ValueError("halo exchange: the field must be C-contiguous (updated in place)")

    def begin(self, x, location: str, *, adjoint: bool = False, transport: str | None = None):
        """Start the forward (or adjoint) exchange of `x` at `location`; returns a handle for `end`.

        Between begin and end, `x` may be read on owned rows but must not be written.
        """
        self._check(x, location)
        xp = array_module(x)
        tr = self._transport(xp, transport)
        pending = tr.begin(x, self.routes[location, bool(adjoint)])
        pending.transport = tr
        return pending

    def end(self, pending):
        """Finish an exchange started by `begin`; returns the updated field."""
        if pending.done:
            raise RuntimeError("halo exchange: end() called twice for one begin()")
        pending.transport.end(pending)
        pending.done = True
        return pending.x

    def exchange(self, x, location: str, *, transport: str | None = None):
        """Forward exchange in place: every halo row of `x` gets its owner's value."""
        return self.end(self.begin(x, location, transport=transport))

    def begin_adjoint(self, x, location: str, *, transport: str | None = None):
        return self.begin(x, location, adjoint=True, transport=transport)

    def exchange_adjoint(self, x, location: str, *, transport: str | None = None):
        """Adjoint exchange in place: halo rows are added into their owners, then zeroed."""
        return self.end(self.begin(x, location, adjoint=True, transport=transport))
