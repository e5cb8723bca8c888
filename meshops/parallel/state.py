"""Halo exchange of a whole model state: every declared field in one message per neighbour rank.

A state is a mapping name -> local array (owned rows first, then halo rows; see `grids.decompose`)
for a declared set of fields, each with a location ("cell", "edge", "vertex"), a level count
(None: shape (n_local,); nlev: shape (n_local, nlev)) and a dtype (any fixed-size NumPy dtype,
mixed freely). With E the forward exchange of every field and P the restriction to owned rows:

    forward  (E):    x[h] <- x_owner[h]               for every halo row h of every field
    adjoint  (E^T):  x_owner[h] += x[h]; x[h] <- 0    (halo values added into owners, halos zeroed)

E^T is the exact transpose of E for the Euclidean inner product over owned rows summed across
ranks (and over the fields): sum_ranks <E x, y>_local-all = sum_ranks <x, E^T y>_owned.

Messages: the fields are packed as bytes into one uint8 buffer per direction, peer-major: the
segment for neighbour rank p holds, field after field in declared order, the rows p needs of that
field (each field's part starts on an `ALIGN`-byte boundary, so the packed rows are read back
through a typed view of the buffer). Each call sends ONE message to every neighbour with something
to send and receives one from every neighbour with something to send it (the forward and the
adjoint alike), whatever the number, locations, level counts and dtypes of the fields. The
buffers are allocated once per backend and reused (pooled). The neighbour's layout is the same
because its send rows for this rank are this rank's receive rows from it (`grids.decompose`
exchange lists), and every rank declares the same fields (checked at construction).

`begin(state)` packs and posts the non-blocking messages, `end()` waits and unpacks; between them
the owned rows of every field may be read (not written), so work on owned rows overlaps the
transfer. `exchange(state)` does both. `begin_adjoint` / `end_adjoint` / `exchange_adjoint` are
the transpose. The transport is chosen as for `meshops.parallel.halo.HaloExchange` (NumPy: host
MPI; CuPy: NCCL, CUDA-aware MPI when proven, else staging through pinned host memory; one rank:
no messages) and logged once per rank; `stats` counts the messages and bytes sent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from meshops.device.backend import array_module
from meshops.parallel.comm import world
from meshops.parallel.transport import MessageStats, TransportChoice, normalise

LOCATIONS = ("cell", "edge", "vertex")
#: Byte alignment of every field's part of a message.
ALIGN = 16
_TAG_BASE = 5200
_next_instance = [0]     # StateExchange instances made by this process (for message tags)


@dataclass(frozen=True)
class FieldSpec:
    """A field of the state: location, level count (None: one level, shape (n,)) and dtype."""

    location: str
    nlev: int | None = None
    dtype: np.dtype = np.dtype(np.float64)

    def __post_init__(self):
        if self.location not in LOCATIONS:
            raise ValueError(f"field location {self.location!r}: expected one of {LOCATIONS}")
        if self.nlev is not None and (int(self.nlev) != self.nlev or self.nlev < 1):
            raise ValueError(f"field nlev {self.nlev!r}: expected None or an integer >= 1")
        dtype = np.dtype(self.dtype)
        if dtype.hasobject or dtype.itemsize == 0:
            raise TypeError(f"field dtype {dtype}: expected a fixed-size numeric dtype")
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "nlev", None if self.nlev is None else int(self.nlev))

    @property
    def tail(self) -> tuple:
        return () if self.nlev is None else (self.nlev,)

    @property
    def row_bytes(self) -> int:
        return (self.nlev or 1) * self.dtype.itemsize

    @classmethod
    def of(cls, spec) -> "FieldSpec":
        """A FieldSpec from a FieldSpec, a location string, or a tuple (location[, nlev[, dtype]])."""
        if isinstance(spec, FieldSpec):
            return spec
        if isinstance(spec, str):
            return cls(spec)
        return cls(*spec)


def field_specs(fields: Mapping) -> dict:
    """{name: FieldSpec} from {name: FieldSpec | location | (location, nlev, dtype)}."""
    if not fields:
        raise ValueError("state exchange: declare at least one field")
    out = {}
    for name, spec in fields.items():
        try:
            out[str(name)] = FieldSpec.of(spec)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"state field {name!r}: {exc}") from None
    return out


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class _Part:
    """One field's rows for one neighbour in one direction: local rows and byte range."""

    field: str
    rows: np.ndarray
    start: int
    stop: int


class _Direction:
    """Layout of one direction (forward or adjoint): peers, byte offsets per peer, parts."""

    def __init__(self, decomposition, specs: dict, adjoint: bool, tag: int):
        self.adjoint, self.tag = adjoint, tag
        peers = sorted({int(p) for spec in specs.values()
                        for p in decomposition.exchange[spec.location].peers})
        self.peers = np.asarray(peers, dtype=np.int64)
        self.send_offsets, self.send_parts = self._layout(decomposition, specs, "send")
        self.recv_offsets, self.recv_parts = self._layout(decomposition, specs, "recv")
        self._device: dict = {}

    def _layout(self, decomposition, specs, side):
        # forward: send owned rows (send_index), receive halo rows (recv_index); adjoint: reverse
        kind = {("send", False): "send", ("recv", False): "recv",
                ("send", True): "recv", ("recv", True): "send"}[side, self.adjoint]
        offsets, parts, pos = [0], [], 0
        for p in self.peers.tolist():
            for name, spec in specs.items():
                ex = decomposition.exchange[spec.location]
                where = np.flatnonzero(ex.peers == p)
                if where.size == 0:
                    continue
                i = int(where[0])
                seg = ex.send_slice(i) if kind == "send" else ex.recv_slice(i)
                rows = np.asarray(getattr(ex, f"{kind}_index")[seg], dtype=np.int64)
                if rows.size == 0:
                    continue
                pos = _aligned(pos)
                parts.append((len(offsets) - 1, _Part(name, rows, pos, pos + rows.size * spec.row_bytes)))
                pos += rows.size * spec.row_bytes
            pos = _aligned(pos)
            offsets.append(pos)
        return np.asarray(offsets, dtype=np.int64), parts

    @property
    def send_bytes(self) -> int:
        return int(self.send_offsets[-1])

    @property
    def recv_bytes(self) -> int:
        return int(self.recv_offsets[-1])

    def buffers(self, xp, specs: dict):
        """(send, recv, send parts, recv parts) on xp's device, allocated once per backend
        (pooled); each part is (peer position, rows on the device, typed view of its bytes)."""
        key = "numpy" if xp is np else ("cupy", xp.cuda.runtime.getDevice())
        if key not in self._device:
            send = xp.empty(max(self.send_bytes, 1), np.uint8)
            recv = xp.empty(max(self.recv_bytes, 1), np.uint8)

            def typed(buf, part):
                spec = specs[part.field]
                shape = (part.rows.size,) + spec.tail
                if xp is np:
                    return buf[part.start:part.stop].view(spec.dtype).reshape(shape)
                return xp.ndarray(shape, spec.dtype, memptr=buf.data + part.start)

            def moved(buf, parts):
                return [(i, q.field, xp.asarray(q.rows), typed(buf, q)) for i, q in parts]

            self._device[key] = (send[: self.send_bytes], recv[: self.recv_bytes],
                                 moved(send, self.send_parts), moved(recv, self.recv_parts))
        return self._device[key]


class PendingState:
    """A state exchange in flight (returned by `begin`; finished by `end`)."""

    def __init__(self, state, direction, transport, messages, recv_parts, xp):
        self.state, self.direction, self.transport = state, direction, transport
        self.messages, self.recv_parts, self.xp = messages, recv_parts, xp
        self.done = False

    @property
    def adjoint(self) -> bool:
        return self.direction.adjoint


class StateExchange(TransportChoice):
    """Forward and adjoint halo exchange of a declared set of fields, one message per neighbour.

    `fields`: {name: FieldSpec | location | (location, nlev, dtype)}, the same on every rank.
    Construction is collective over `comm` (default: the world communicator). See the module doc.
    """

    def __init__(self, decomposition, fields: Mapping, comm=None, *, transport: str | None = None):
        self.decomposition = decomposition
        self.comm = world() if comm is None else comm
        if self.comm.Get_size() != decomposition.nranks:
            raise ValueError(f"StateExchange: communicator has {self.comm.Get_size()} ranks, the "
                             f"decomposition {decomposition.nranks}; expected the same")
        self.fields = field_specs(fields)
        self.requested = normalise(transport)
        declared = [(n, s.location, s.nlev, s.dtype.str) for n, s in self.fields.items()]
        everyone = self.comm.allgather((declared, _next_instance[0]))
        for r, (other, _) in enumerate(everyone):
            if other != declared:
                raise ValueError(f"StateExchange: rank {self.comm.Get_rank()} declares fields "
                                 f"{declared}, rank {r} declares {other}; expected the same "
                                 "fields in the same order on every rank")
        # message tags: the same on every rank (the largest instance count), distinct per instance
        instance = max(n for _, n in everyone)
        _next_instance[0] = instance + 1
        tag = _TAG_BASE + 2 * (instance % 1000)
        self.forward_layout = _Direction(decomposition, self.fields, False, tag)
        self.adjoint_layout = _Direction(decomposition, self.fields, True, tag + 1)
        self._transports: dict = {}
        self._in_flight: dict = {}
        self._pending: dict = {}

    @property
    def mesh(self):
        return self.decomposition.mesh

    @property
    def neighbours(self) -> np.ndarray:
        """Ranks this rank exchanges with (any field, either direction)."""
        return self.forward_layout.peers

    def describe(self, xp, name: str) -> str:
        return (f"state exchange of {len(self.fields)} fields ({'NumPy' if xp is np else 'CuPy'} "
                f"arrays) uses transport {name!r}, one message per neighbour "
                f"({self.neighbours.size} neighbours)")

    @property
    def stats(self) -> MessageStats:
        """Messages and bytes sent and received by this exchange's transports so far."""
        total = MessageStats()
        for tr in self._transports.values():
            total = total + tr.stats
        return total

    # checks ------------------------------------------------------------------------------------
    def _arrays(self, state: Mapping):
        missing = [n for n in self.fields if n not in state]
        if missing:
            raise KeyError(f"state exchange: the state lacks field(s) {missing}; declared "
                           f"{list(self.fields)}")
        arrays = {}
        for name, spec in self.fields.items():
            x = state[name]
            n = self.decomposition.n_local(spec.location)
            shape = (n,) + spec.tail
            if tuple(x.shape) != shape:
                raise ValueError(f"state field {name!r} ({spec.location}): expected shape {shape} "
                                 f"(local {spec.location}s{', nlev' if spec.nlev else ''}), got "
                                 f"{tuple(x.shape)}")
            if x.dtype != spec.dtype:
                raise TypeError(f"state field {name!r}: expected dtype {spec.dtype}, got {x.dtype}")
            if not x.flags.c_contiguous:
                raise ValueError(f"state field {name!r} must be C-contiguous (updated in place)")
            arrays[name] = x
        try:
            xp = array_module(*arrays.values())
        except Exception as exc:
            raise TypeError(f"state exchange: the fields mix NumPy and CuPy arrays ({exc})") from None
        return arrays, xp

    # exchange ----------------------------------------------------------------------------------
    def _begin(self, state, direction: _Direction, transport):
        if self._in_flight.get(direction.adjoint):
            raise RuntimeError(f"state exchange: a {'adjoint' if direction.adjoint else 'forward'} "
                               "exchange is already in flight; end() it first")
        arrays, xp = self._arrays(state)
        tr = self._transport(xp, transport)
        send, recv, send_parts, recv_parts = direction.buffers(xp, self.fields)
        tr.start_after_caller()
        with tr.device_context():
            for _, name, rows, view in send_parts:
                if xp is np:   # mode="clip": no buffered copy (the rows are valid by construction)
                    np.take(arrays[name], rows, axis=0, out=view, mode="clip")
                else:
                    xp.take(arrays[name], rows, axis=0, out=view)
        messages = tr.post_bytes(direction.peers, send, direction.send_offsets, recv,
                                 direction.recv_offsets, direction.tag)
        self._in_flight[direction.adjoint] = True
        return PendingState(state, direction, tr, messages, recv_parts, xp)

    def end(self, pending: PendingState | None = None):
        """Finish an exchange started by `begin` or `begin_adjoint` (default: the one in flight,
        if only one is); returns the state (updated in place)."""
        if pending is None:
            flying = [k for k, v in self._in_flight.items() if v]
            if len(flying) != 1:
                raise RuntimeError(f"state exchange: end() without a handle needs exactly one "
                                   f"exchange in flight, there are {len(flying)}")
            pending = self._pending[flying[0]]
        if pending.done:
            raise RuntimeError("state exchange: end() called twice for one begin()")
        tr, direction = pending.transport, pending.direction
        tr.wait_bytes(pending.messages)
        arrays = {name: pending.state[name] for name in self.fields}
        with tr.device_context():
            if direction.adjoint:
                for name, spec in self.fields.items():
                    arrays[name][self.decomposition.n_owned(spec.location):] = 0
            for _, name, rows, view in pending.recv_parts:
                if direction.adjoint:   # rows unique per neighbour; neighbours added one by one
                    arrays[name][rows] += view
                else:
                    arrays[name][rows] = view
        tr.finish_before_caller()
        pending.done = True
        self._in_flight[direction.adjoint] = False
        return pending.state

    def begin(self, state: Mapping, *, transport: str | None = None) -> PendingState:
        """Start the forward exchange of every declared field of `state` (one message per
        neighbour); returns a handle for `end`. Until `end`, owned rows may be read, not written."""
        pending = self._begin(state, self.forward_layout, transport)
        self._pending[False] = pending
        return pending

    def begin_adjoint(self, state: Mapping, *, transport: str | None = None) -> PendingState:
        """Start the adjoint exchange (halo values go back to their owners); finish with `end`
        or `end_adjoint`. Until then the state must be neither read nor written."""
        pending = self._begin(state, self.adjoint_layout, transport)
        self._pending[True] = pending
        return pending

    def end_adjoint(self, pending: PendingState | None = None):
        """Finish the adjoint exchange: owners hold their sums, every halo row is zero."""
        if pending is None:
            pending = self._pending.get(True)
            if pending is None or pending.done:
                raise RuntimeError("state exchange: end_adjoint() without an adjoint exchange in flight")
        if not pending.adjoint:
            raise RuntimeError("state exchange: end_adjoint() given a forward exchange")
        return self.end(pending)

    def exchange(self, state: Mapping, *, transport: str | None = None):
        """Forward exchange in place: every halo row of every field gets its owner's value."""
        return self.end(self.begin(state, transport=transport))

    def exchange_adjoint(self, state: Mapping, *, transport: str | None = None):
        """Adjoint exchange in place: halo rows are added into their owners, then zeroed."""
        return self.end(self.begin_adjoint(state, transport=transport))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}: {s.location}{'' if s.nlev is None else f'x{s.nlev}'} {s.dtype}"
                           for n, s in self.fields.items())
        return (f"StateExchange(rank {self.decomposition.rank} of {self.decomposition.nranks}, "
                f"{{{fields}}}, {self.neighbours.size} neighbours, "
                f"{self.forward_layout.send_bytes} bytes out per forward exchange)")
