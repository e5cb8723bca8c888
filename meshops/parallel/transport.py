"""Transports that move packed halo buffers between ranks: host MPI, NCCL, CUDA-aware MPI, staging.

A `Route` is one direction of one location's exchange on this rank: pack rows `pack_index` of the
field into one contiguous send buffer (blocks per peer), send block i to peers[i], receive block i
from peers[i] into one contiguous receive buffer, then unpack it to rows `unpack_index` — by
assignment (forward exchange: owners -> halos) or by addition after zeroing the halo rows (adjoint
exchange: halos -> owners). Send/receive buffers are allocated once per (route, dtype, levels) and
reused (persistent packed buffers).

Transports (`begin` posts everything and returns; `end` waits and unpacks):
- "mpi":            NumPy arrays, mpi4py Isend/Irecv on host buffers.
- "nccl":           CuPy arrays, `cupy.cuda.nccl` grouped send/recv per neighbour on a side stream;
                    the NCCL communicator is bootstrapped by broadcasting its unique id over mpi4py.
                    Only when every rank drives a GPU of its own: NCCL refuses two ranks on one
                    device (NCCL_ERROR_INVALID_USAGE), which happens when a node runs more ranks
                    than it has GPUs (`select_device`). "auto" then takes CUDA-aware MPI or staging;
                    an explicit "nccl" raises a RuntimeError on every rank before any message.
- "cuda-aware-mpi": CuPy buffers handed straight to mpi4py Isend/Irecv. Only used when
                    `cuda_aware_mpi()` proves the MPI library handles device memory (or an explicit
                    MESHOPS_CUDA_AWARE_MPI=1): a non-CUDA-aware MPI crashes on device pointers.
- "staging":        CuPy arrays packed on the device, copied to pinned host buffers, sent with
                    mpi4py, copied back to the device and unpacked.
- "local":          one rank: no messages (packing and the adjoint's halo zeroing only).
Besides the per-field routes above, every transport moves packed byte messages (`post_bytes` /
`wait_bytes`: one uint8 buffer segment per peer, one message each way), which
`meshops.parallel.state.StateExchange` uses to send a whole model state in one message per
neighbour; `stats` counts the messages and bytes every transport sends and receives.
GPU work runs on a transport-owned stream ordered after the caller's current stream at `begin`
(an event), and the caller's stream waits for the unpack at `end`, so kernels on owned entities
issued between `begin` and `end` overlap the transfer.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass, field

import numpy as np

from meshops.parallel.comm import (SerialComm, describe_shared, gather_device_identities,
                                   mpi_module, shared_devices)

log = logging.getLogger("meshops.parallel.halo")

#: Environment variable that picks the GPU transport ("auto", "nccl", "cuda-aware-mpi", "staging").
ENV_TRANSPORT = "MESHOPS_HALO_TRANSPORT"
#: Environment variable that declares (1) or denies (0) CUDA support of the MPI library.
ENV_CUDA_AWARE = "MESHOPS_CUDA_AWARE_MPI"
GPU_TRANSPORTS = ("nccl", "cuda-aware-mpi", "staging")
TRANSPORTS = ("auto", "mpi", "local") + GPU_TRANSPORTS
_ALIASES = {"cuda_aware_mpi": "cuda-aware-mpi", "cuda-aware": "cuda-aware-mpi", "host": "staging"}


@dataclass
class Route:
    """One direction of one location's exchange (host index arrays; see module doc)."""

    tag: int
    peers: np.ndarray
    pack_index: np.ndarray
    pack_offsets: np.ndarray
    unpack_index: np.ndarray
    unpack_offsets: np.ndarray
    accumulate: bool
    n_owned: int
    _device: dict = field(default_factory=dict, repr=False)

    def pack_slice(self, i: int) -> slice:
        return slice(int(self.pack_offsets[i]), int(self.pack_offsets[i + 1]))

    def unpack_slice(self, i: int) -> slice:
        return slice(int(self.unpack_offsets[i]), int(self.unpack_offsets[i + 1]))

    def indices(self, xp):
        """(pack_index, [unpack_index per peer] or unpack_index) on the backend of xp, cached."""
        key = "numpy" if xp is np else ("cupy", xp.cuda.runtime.getDevice())
        if key not in self._device:
            pack = xp.asarray(self.pack_index)
            if self.accumulate:
                unpack = [xp.asarray(self.unpack_index[self.unpack_slice(i)])
                          for i in range(self.peers.size)]
            else:
                unpack = xp.asarray(self.unpack_index)
            self._device[key] = (pack, unpack)
        return self._device[key]


def normalise(name: str | None) -> str:
    """A transport name from an argument or the environment (None -> env -> "auto")."""
    if name is None:
        name = os.environ.get(ENV_TRANSPORT, "auto")
    name = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if name not in TRANSPORTS:
        raise ValueError(f"halo transport {name!r} (argument or {ENV_TRANSPORT}): expected one of "
                         f"{TRANSPORTS}")
    return name


# -- detection ------------------------------------------------------------------------------------

def _ompi_info_cuda() -> bool | None:
    exe = shutil.which("ompi_info")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--parsable", "--all"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if "mpi_built_with_cuda_support:value:" in line:
            return line.rsplit(":", 1)[1].strip() == "true"
    return None


def cuda_aware_mpi() -> tuple[bool, str]:
    """(True, why) only when the MPI library is shown to accept device buffers; default False.

    Order: MESHOPS_CUDA_AWARE_MPI=1/0; Open MPI: MPIX_Query_cuda_support through mpi4py when
    exposed, else `ompi_info --parsable --all` (mpi_built_with_cuda_support); MPICH:
    MPIR_CVAR_ENABLE_GPU=1 in the environment. Anything else: False.
    """
    env = os.environ.get(ENV_CUDA_AWARE)
    if env is not None:
        on = env.strip().lower() in ("1", "true", "yes", "on")
        return on, f"{ENV_CUDA_AWARE}={env}"
    MPI = mpi_module()
    if MPI is None:
        return False, "mpi4py not available"
    version = MPI.Get_library_version()
    if "Open MPI" in version:
        query = getattr(MPI, "Query_cuda_support", None)
        if query is not None:
            try:
                return bool(query()), "Open MPI MPIX_Query_cuda_support"
            except Exception:  # the call may be missing from this build
                pass
        built = _ompi_info_cuda()
        if built is None:
            return False, "Open MPI: ompi_info gives no mpi_built_with_cuda_support"
        return built, f"Open MPI: ompi_info mpi_built_with_cuda_support={str(built).lower()}"
    if "MPICH" in version:
        gpu = os.environ.get("MPIR_CVAR_ENABLE_GPU", "")
        return gpu == "1", f"MPICH: MPIR_CVAR_ENABLE_GPU={gpu or 'unset'}"
    return False, "unknown MPI library: not assumed CUDA-aware"


def nccl_available() -> bool:
    try:
        from cupy.cuda import nccl
    except ImportError:
        return False
    return bool(getattr(nccl, "available", True))


def choose(name: str | None, xp, comm, *, identity=None) -> tuple[str, str]:
    """(transport, why) for arrays of module `xp` on `comm` (see module doc); `why` is for logs.

    Collective over `comm` where NCCL is in question (CuPy arrays, more than one rank, "auto" with
    NCCL available, or "nccl"): the ranks allgather their device identities
    (`meshops.parallel.comm.gather_device_identities`; `identity`: this rank's, default its current
    CUDA device), so every rank takes the same decision or raises the same error, and none is left
    waiting. NCCL only when no two ranks share a GPU.
    """
    name = normalise(name)
    if comm.Get_size() == 1:
        return "local", "one rank"
    if xp is np:
        return "mpi", "NumPy arrays"
    if name == "nccl" and not nccl_available():
        raise RuntimeError("halo transport 'nccl' requested but cupy.cuda.nccl is not available")
    if name in ("auto", "mpi", "local", "nccl"):
        why = "cupy.cuda.nccl not available"
        if nccl_available():
            identities = gather_device_identities(comm, identity)
            groups = shared_devices(identities)
            if not groups:
                return "nccl", "requested" if name == "nccl" else "one GPU per rank"
            why = describe_shared(groups, identities)
            if name == "nccl":
                raise RuntimeError(f"halo transport 'nccl' (argument or {ENV_TRANSPORT}): {why}; "
                                   "NCCL needs one GPU per rank; expected 'staging' or 'auto'")
        aware, aware_why = cuda_aware_mpi()
        if aware:
            return "cuda-aware-mpi", f"{why}; CUDA-aware MPI ({aware_why})"
        return "staging", f"{why}; MPI not known to be CUDA-aware"
    if name == "cuda-aware-mpi":
        aware, why = cuda_aware_mpi()
        if not aware:
            raise RuntimeError(f"halo transport 'cuda-aware-mpi' requested but the MPI library is not "
                               f"known to be CUDA-aware ({why}); set {ENV_CUDA_AWARE}=1 only if it is")
    return name, "requested"


def resolve(name: str | None, xp, comm, *, identity=None) -> str:
    """The transport that runs for arrays of module `xp` on `comm` (`choose` without the why;
    collective where `choose` is)."""
    return choose(name, xp, comm, identity=identity)[0]


# -- transports -----------------------------------------------------------------------------------

@dataclass
class Pending:
    """An exchange in flight: what `end` needs."""

    x: object
    route: Route
    buffers: object
    requests: list = field(default_factory=list)
    done: bool = False


def _unpack(x, route: Route, recv, xp) -> None:
    _, unpack = route.indices(xp)
    if not route.accumulate:
        if route.unpack_index.size:
            x[unpack] = recv
        return
    x[route.n_owned:] = 0
    for i in range(route.peers.size):
        if unpack[i].size:
            x[unpack[i]] += recv[route.unpack_slice(i)]


class _Buffers:
    __slots__ = ("send", "recv", "host_send", "host_recv", "key")


@dataclass
class MessageStats:
    """Messages and bytes a transport has sent and received (every route and byte message)."""

    messages_sent: int = 0
    messages_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0

    def snapshot(self) -> "MessageStats":
        return MessageStats(self.messages_sent, self.messages_received, self.bytes_sent,
                            self.bytes_received)

    def __add__(self, other: "MessageStats") -> "MessageStats":
        return MessageStats(self.messages_sent + other.messages_sent,
                            self.messages_received + other.messages_received,
                            self.bytes_sent + other.bytes_sent,
                            self.bytes_received + other.bytes_received)

    def __sub__(self, other: "MessageStats") -> "MessageStats":
        return MessageStats(self.messages_sent - other.messages_sent,
                            self.messages_received - other.messages_received,
                            self.bytes_sent - other.bytes_sent,
                            self.bytes_received - other.bytes_received)


@dataclass
class ByteMessages:
    """Byte messages in flight (`post_bytes`): what `wait_bytes` needs."""

    send: object
    recv: object
    requests: list = field(default_factory=list)
    host: tuple | None = None      # staging: the pinned host (send, recv) buffers
    done: bool = False


def _segments(peers, offsets):
    """(peer, start, stop) of every non-empty segment."""
    for i, p in enumerate(np.asarray(peers).tolist()):
        a, b = int(offsets[i]), int(offsets[i + 1])
        if b > a:
            yield p, a, b


class Transport:
    """Base: buffer pool, message statistics and the common begin/end skeleton."""

    name = "base"

    def __init__(self, comm):
        self.comm = comm
        self._pool: dict = {}
        self.stats = MessageStats()

    def _count(self, route_or_peers, send_offsets, recv_offsets, row_bytes: int = 1) -> None:
        for _, a, b in _segments(route_or_peers, send_offsets):
            self.stats.messages_sent += 1
            self.stats.bytes_sent += (b - a) * row_bytes
        for _, a, b in _segments(route_or_peers, recv_offsets):
            self.stats.messages_received += 1
            self.stats.bytes_received += (b - a) * row_bytes

    # byte messages (one per peer and direction) -----------------------------------------------
    def device_context(self):
        """Context in which packing for this transport runs (the GPU transports' side stream)."""
        import contextlib

        return contextlib.nullcontext()

    def start_after_caller(self) -> None:
        """Order the transport's work after what the caller has issued (GPU: an event)."""

    def finish_before_caller(self) -> None:
        """Order the caller's later work after the transport's (GPU: an event)."""

    def post_bytes(self, peers, send, send_offsets, recv, recv_offsets, tag: int) -> ByteMessages:
        """Post one message per peer each way: send[send_offsets[i]:send_offsets[i+1]] to
        peers[i], receive recv[recv_offsets[i]:recv_offsets[i+1]] from peers[i] (uint8 buffers;
        empty segments are not sent). Non-blocking; finish with `wait_bytes`."""
        raise NotImplementedError

    def wait_bytes(self, messages: ByteMessages) -> None:
        raise NotImplementedError

    def _take(self, key, make):
        free = self._pool.setdefault(key, [])
        if free:
            return free.pop()
        buffers = make()
        buffers.key = key
        return buffers

    def _give(self, buffers) -> None:
        self._pool[buffers.key].append(buffers)

    def _key(self, x, route):
        return (route.tag, x.dtype.str, tuple(x.shape[1:]))


class LocalTransport(Transport):
    """One rank: nothing to send (an exchange list of one rank is empty)."""

    name = "local"

    def begin(self, x, route: Route) -> Pending:
        if route.peers.size:
            raise RuntimeError("local transport: a one-rank exchange list names peers "
                               f"{route.peers.tolist()}")
        return Pending(x, route, None)

    def post_bytes(self, peers, send, send_offsets, recv, recv_offsets, tag: int) -> ByteMessages:
        if len(peers):
            raise RuntimeError(f"local transport: a one-rank state exchange names peers {list(peers)}")
        return ByteMessages(send, recv)

    def wait_bytes(self, messages: ByteMessages) -> None:
        messages.done = True

    def end(self, p: Pending) -> None:
        from meshops.device.backend import array_module

        _unpack(p.x, p.route, None, array_module(p.x))


class MPITransport(Transport):
    """NumPy arrays over mpi4py Isend/Irecv."""

    name = "mpi"

    def _make(self, x, route):
        b = _Buffers()
        tail = x.shape[1:]
        b.send = np.empty((route.pack_index.size,) + tail, x.dtype)
        b.recv = np.empty((route.unpack_index.size,) + tail, x.dtype)
        return b

    def _post(self, route, send, recv) -> list:
        row_bytes = int(np.prod(send.shape[1:], dtype=np.int64)) * send.dtype.itemsize
        self._count(route.peers, route.pack_offsets, route.unpack_offsets, row_bytes)
        reqs = []
        for i, p in enumerate(route.peers.tolist()):
            rs, ss = route.unpack_slice(i), route.pack_slice(i)
            if rs.stop > rs.start:
                reqs.append(self.comm.Irecv(recv[rs], source=p, tag=route.tag))
            if ss.stop > ss.start:
                reqs.append(self.comm.Isend(send[ss], dest=p, tag=route.tag))
        return reqs

    def begin(self, x, route: Route) -> Pending:
        b = self._take(self._key(x, route), lambda: self._make(x, route))
        np.take(x, route.pack_index, axis=0, out=b.send)
        return Pending(x, route, b, self._post(route, b.send, b.recv))

    def end(self, p: Pending) -> None:
        mpi_module().Request.Waitall(p.requests)
        _unpack(p.x, p.route, p.buffers.recv, np)
        self._give(p.buffers)

    def _post_host_bytes(self, peers, send, send_offsets, recv, recv_offsets, tag) -> list:
        self._count(peers, send_offsets, recv_offsets)
        reqs = [self.comm.Irecv(recv[a:b], source=p, tag=tag)
                for p, a, b in _segments(peers, recv_offsets)]
        reqs += [self.comm.Isend(send[a:b], dest=p, tag=tag)
                 for p, a, b in _segments(peers, send_offsets)]
        return reqs

    def post_bytes(self, peers, send, send_offsets, recv, recv_offsets, tag: int) -> ByteMessages:
        return ByteMessages(send, recv, self._post_host_bytes(peers, send, send_offsets, recv,
                                                              recv_offsets, tag))

    def wait_bytes(self, messages: ByteMessages) -> None:
        mpi_module().Request.Waitall(messages.requests)
        messages.done = True


class _GPUTransport(MPITransport):
    """Shared GPU plumbing: a side stream, device buffers, pack on begin, unpack on end."""

    def __init__(self, comm):
        import cupy

        super().__init__(comm)
        self.cupy = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def _make(self, x, route):
        cp = self.cupy
        b = _Buffers()
        tail = x.shape[1:]
        b.send = cp.empty((route.pack_index.size,) + tail, x.dtype)
        b.recv = cp.empty((route.unpack_index.size,) + tail, x.dtype)
        return b

    def _pack(self, x, route, b):
        cp = self.cupy
        self.stream.wait_event(cp.cuda.get_current_stream().record())
        with self.stream:  # first use copies the index arrays to the device: keep it on this stream
            pack, _ = route.indices(cp)
            if route.pack_index.size:
                cp.take(x, pack, axis=0, out=b.send)

    def _finish(self, p: Pending) -> None:
        cp = self.cupy
        with self.stream:
            _unpack(p.x, p.route, p.buffers.recv, cp)
        cp.cuda.get_current_stream().wait_event(self.stream.record())
        self._give(p.buffers)

    def device_context(self):
        return self.stream

    def start_after_caller(self) -> None:
        self.stream.wait_event(self.cupy.cuda.get_current_stream().record())

    def finish_before_caller(self) -> None:
        self.cupy.cuda.get_current_stream().wait_event(self.stream.record())


class NCCLTransport(_GPUTransport):
    """CuPy arrays over NCCL point-to-point (grouped send/recv per neighbour)."""

    name = "nccl"

    def __init__(self, comm):
        from cupy.cuda import nccl

        super().__init__(comm)
        self.nccl = nccl
        uid = nccl.get_unique_id() if comm.Get_rank() == 0 else None
        uid = comm.bcast(uid, root=0)
        self.nccl_comm = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
        self.dtypes = {np.dtype(np.float32).str: nccl.NCCL_FLOAT32,
                       np.dtype(np.float64).str: nccl.NCCL_FLOAT64}

    def begin(self, x, route: Route) -> Pending:
        b = self._take(self._key(x, route), lambda: self._make(x, route))
        self._pack(x, route, b)
        dtype, row = self.dtypes[x.dtype.str], int(np.prod(x.shape[1:], dtype=np.int64))
        itemsize = x.dtype.itemsize
        self._count(route.peers, route.pack_offsets, route.unpack_offsets, row * itemsize)
        self.nccl.groupStart()
        try:
            for i, peer in enumerate(route.peers.tolist()):
                rs, ss = route.unpack_slice(i), route.pack_slice(i)
                if rs.stop > rs.start:
                    self.nccl_comm.recv(b.recv.data.ptr + rs.start * row * itemsize,
                                        (rs.stop - rs.start) * row, dtype, peer, self.stream.ptr)
                if ss.stop > ss.start:
                    self.nccl_comm.send(b.send.data.ptr + ss.start * row * itemsize,
                                        (ss.stop - ss.start) * row, dtype, peer, self.stream.ptr)
        finally:
            self.nccl.groupEnd()
        return Pending(x, route, b)

    def end(self, p: Pending) -> None:
        self._finish(p)

    def post_bytes(self, peers, send, send_offsets, recv, recv_offsets, tag: int) -> ByteMessages:
        """Grouped NCCL send/recv of uint8 segments on the side stream (after the packing)."""
        self._count(peers, send_offsets, recv_offsets)
        uint8 = getattr(self.nccl, "NCCL_UINT8", getattr(self.nccl, "NCCL_CHAR", 0))
        self.nccl.groupStart()
        try:
            for p, a, b in _segments(peers, recv_offsets):
                self.nccl_comm.recv(recv.data.ptr + a, b - a, uint8, p, self.stream.ptr)
            for p, a, b in _segments(peers, send_offsets):
                self.nccl_comm.send(send.data.ptr + a, b - a, uint8, p, self.stream.ptr)
        finally:
            self.nccl.groupEnd()
        return ByteMessages(send, recv)

    def wait_bytes(self, messages: ByteMessages) -> None:
        messages.done = True          # stream-ordered: the unpack on self.stream follows the recv


class CudaAwareMPITransport(_GPUTransport):
    """CuPy buffers handed to a CUDA-aware MPI."""

    name = "cuda-aware-mpi"

    def begin(self, x, route: Route) -> Pending:
        b = self._take(self._key(x, route), lambda: self._make(x, route))
        self._pack(x, route, b)
        self.stream.synchronize()
        return Pending(x, route, b, self._post(route, b.send, b.recv))

    def end(self, p: Pending) -> None:
        mpi_module().Request.Waitall(p.requests)
        self._finish(p)

    def post_bytes(self, peers, send, send_offsets, recv, recv_offsets, tag: int) -> ByteMessages:
        self.stream.synchronize()     # the packing on the side stream is done before MPI reads
        return super().post_bytes(peers, send, send_offsets, recv, recv_offsets, tag)


class StagingTransport(_GPUTransport):
    """CuPy arrays staged through pinned host buffers and sent with mpi4py."""

    name = "staging"

    def _make(self, x, route):
        import cupyx

        b = super()._make(x, route)
        b.host_send = cupyx.empty_pinned(b.send.shape, x.dtype)
        b.host_recv = cupyx.empty_pinned(b.recv.shape, x.dtype)
        return b

    def begin(self, x, route: Route) -> Pending:
        b = self._take(self._key(x, route), lambda: self._make(x, route))
        self._pack(x, route, b)
        if b.send.size:
            b.send.get(stream=self.stream, out=b.host_send)
        self.stream.synchronize()
        return Pending(x, route, b, self._post(route, b.host_send, b.host_recv))

    def end(self, p: Pending) -> None:
        mpi_module().Request.Waitall(p.requests)
        if p.buffers.recv.size:
            p.buffers.recv.set(p.buffers.host_recv, stream=self.stream)
        self._finish(p)

    def _pinned(self, key, nbytes: int):
        import cupyx

        buf = self._pool.get(("pinned", key))
        if buf is None or buf.size < nbytes:
            buf = cupyx.empty_pinned((max(nbytes, 1),), np.uint8)
            self._pool[("pinned", key)] = buf
        return buf[:nbytes]

    def post_bytes(self, peers, send, send_offsets, recv, recv_offsets, tag: int) -> ByteMessages:
        """Device send buffer -> pinned host, one MPI message per peer each way; `wait_bytes`
        copies the pinned receive buffer to the device (on the side stream)."""
        host_send = self._pinned(("send", tag), send.size)
        host_recv = self._pinned(("recv", tag), recv.size)
        if send.size:
            send.get(stream=self.stream, out=host_send)
        self.stream.synchronize()
        reqs = self._post_host_bytes(peers, host_send, send_offsets, host_recv, recv_offsets, tag)
        return ByteMessages(send, recv, reqs, (host_send, host_recv))

    def wait_bytes(self, messages: ByteMessages) -> None:
        mpi_module().Request.Waitall(messages.requests)
        if messages.recv.size:
            messages.recv.set(messages.host[1], stream=self.stream)
        messages.done = True


_CLASSES = {"local": LocalTransport, "mpi": MPITransport, "nccl": NCCLTransport,
            "cuda-aware-mpi": CudaAwareMPITransport, "staging": StagingTransport}


def make_transport(name: str, comm) -> Transport:
    """A transport instance (collective for "nccl": every rank must call it together)."""
    if isinstance(comm, SerialComm) and name != "local":
        raise RuntimeError(f"halo transport {name!r} needs mpi4py; this run has a serial communicator")
    return _CLASSES[name](comm)


class TransportChoice:
    """The transports of an exchange object (`comm`, `requested` set by its constructor), chosen
    once per (requested name, backend, device) and made once per name on first use, logged with
    `describe(xp, name)` and why. The first choice for CuPy arrays is collective (see `choose`):
    every rank makes it together (the first exchange, or `transport_name` on every rank)."""

    def transport_choice(self, xp, transport: str | None = None) -> tuple[str, str]:
        """(name, why) of the transport that runs for arrays of module `xp` (numpy or cupy)."""
        choices = self.__dict__.setdefault("_choices", {})
        requested = self.requested if transport is None else transport
        key = (requested, "numpy" if xp is np else ("cupy", xp.cuda.runtime.getDevice()))
        if key not in choices:
            choices[key] = choose(requested, xp, self.comm)
        return choices[key]

    def transport_name(self, xp, transport: str | None = None) -> str:
        """Name of the transport that runs for arrays of module `xp` (numpy or cupy)."""
        return self.transport_choice(xp, transport)[0]

    def transport_summary(self, xp, transport: str | None = None) -> str:
        """The transport and why, for logs: e.g. "staging (ranks 0 and 1 share GPU 0000:3B:00.0
        on host n1; MPI not known to be CUDA-aware)"."""
        return "{} ({})".format(*self.transport_choice(xp, transport))

    def _transport(self, xp, transport):
        transports = self.__dict__.setdefault("_transports", {})
        name, why = self.transport_choice(xp, transport)
        if name not in transports:
            transports[name] = make_transport(name, self.comm)
            log.info("rank %d of %d: %s (%s)", self.comm.Get_rank(), self.comm.Get_size(),
                     self.describe(xp, name), why)
        return transports[name]
