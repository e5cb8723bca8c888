"""Ranks sharing a GPU never get NCCL (it refuses two ranks on one device): the pure grouping of
device identities, their allgather over real MPI ranks (fake identities, no GPU), the transport
choice ("auto" falls back, an explicit "nccl" raises on every rank before any message), and on a
GPU machine under `mpiexec -n 2` with one GPU: the exchange that runs matches NumPy/MPI bitwise."""
import types

import numpy as np
import pytest

from meshops.parallel import comm as comm_module
from meshops.parallel import transport
from meshops.parallel.comm import (describe_shared, gather_device_identities, select_device,
                                   shared_devices)
from meshops.parallel.state import StateExchange

from .conftest import decomposition
from .test_state_exchange import _rank_rng

BUS = "0000:3B:00.0"
FIELDS = {"h": ("cell", 4, np.float64), "u": ("edge", None, np.float64),
          "zeta": ("vertex", 3, np.float32)}


def test_shared_devices_groups_the_ranks_of_one_gpu():
    a, b = ("n1", BUS), ("n1", "0000:5E:00.0")
    assert shared_devices([a, b]) == []                                   # all distinct
    assert shared_devices([a, a, b]) == [[0, 1]]                          # two share
    assert shared_devices([a, a, a]) == [[0, 1, 2]]                       # three on one GPU
    assert shared_devices([("n1", BUS), ("n2", BUS)]) == []               # same bus, other host
    assert shared_devices([a, b, a, b]) == [[0, 2], [1, 3]]
    assert shared_devices([a]) == shared_devices([]) == []
    assert describe_shared([[0, 1]], [a, a]) == f"ranks 0 and 1 share GPU {BUS} on host n1"
    assert describe_shared([[0, 2], [1, 3]], [a, b, a, b]) == \
        f"ranks 0 and 2 share GPU {BUS} on host n1 (1 more shared GPU)"
    assert describe_shared([[0, 1, 2]], ["x"] * 3) == "ranks 0, 1 and 2 share GPU x"


def test_gathered_identities_are_every_ranks_in_rank_order(comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    ids = gather_device_identities(comm, identity=("fakehost", f"gpu{rank % 2}"))
    assert ids == [("fakehost", f"gpu{r % 2}") for r in range(size)]
    evens, odds = list(range(0, size, 2)), list(range(1, size, 2))
    assert shared_devices(ids) == [g for g in (evens, odds) if len(g) > 1]
    # one bus id on every rank, but each rank on its own host: no GPU is shared
    ids = gather_device_identities(comm, identity=(f"node{rank}", BUS))
    assert shared_devices(ids) == []


@pytest.fixture
def clean_env(monkeypatch):
    for name in (transport.ENV_TRANSPORT, transport.ENV_CUDA_AWARE, "MPIR_CVAR_ENABLE_GPU"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(transport, "nccl_available", lambda: True)     # no CuPy needed here
    return monkeypatch


def _fake_cupy():
    """Stands for the cupy module: `choose` only tells it from numpy, the cache asks its device."""
    return types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0)))


def test_ranks_on_one_gpu_get_no_nccl_and_explicit_nccl_fails_on_every_rank(comm, clean_env):
    size, xp = comm.Get_size(), _fake_cupy()
    shared = ("fakehost", BUS)
    if size == 1:
        assert transport.choose("nccl", xp, comm, identity=shared) == ("local", "one rank")
        return
    ranks = ", ".join(map(str, range(size - 1))) + f" and {size - 1}"
    name, why = transport.choose("auto", xp, comm, identity=shared)
    assert (name, why) == ("staging", f"ranks {ranks} share GPU {BUS} on host fakehost; "
                                      "MPI not known to be CUDA-aware")
    expected = (f"halo transport 'nccl' (argument or MESHOPS_HALO_TRANSPORT): ranks {ranks} share "
                f"GPU {BUS} on host fakehost; NCCL needs one GPU per rank; expected 'staging' "
                "or 'auto'")
    with pytest.raises(RuntimeError) as info:
        transport.resolve("nccl", xp, comm, identity=shared)
    assert str(info.value) == expected
    clean_env.setenv(transport.ENV_TRANSPORT, "nccl")
    with pytest.raises(RuntimeError, match="NCCL needs one GPU per rank"):
        transport.resolve(None, xp, comm, identity=shared)
    clean_env.setenv(transport.ENV_TRANSPORT, "staging")
    assert transport.resolve(None, xp, comm, identity=shared) == "staging"
    clean_env.setenv(transport.ENV_CUDA_AWARE, "1")
    assert transport.resolve("auto", xp, comm, identity=shared) == "cuda-aware-mpi"
    # one GPU per rank (on one host or many): NCCL, whether asked for or chosen
    mine = ("fakehost", f"gpu{comm.Get_rank()}")
    assert transport.choose("auto", xp, comm, identity=mine) == ("nccl", "one GPU per rank")
    assert transport.resolve("nccl", xp, comm, identity=mine) == "nccl"
    comm.barrier()                                      # every rank got here: none waits


def test_exchange_objects_choose_once_collectively_and_say_why(comm, mpas_mesh, clean_env):
    d = decomposition(comm, mpas_mesh)
    calls = []

    def identity():
        calls.append(1)
        return ("fakehost", BUS)                        # every rank on one GPU

    clean_env.setattr(comm_module, "device_identity", identity)
    xp, size = _fake_cupy(), comm.Get_size()
    auto = StateExchange(d, FIELDS, comm)
    assert auto.transport_summary(np) == ("local (one rank)" if size == 1 else "mpi (NumPy arrays)")
    if size == 1:
        assert auto.transport_name(xp) == "local" and not calls
        return
    summary = auto.transport_summary(xp)
    assert summary.startswith("staging (ranks 0") and f"share GPU {BUS}" in summary, summary
    assert auto.transport_name(xp) == "staging" and len(calls) == 1     # chosen once, then cached
    explicit = StateExchange(d, FIELDS, comm, transport="nccl")
    with pytest.raises(RuntimeError, match="NCCL needs one GPU per rank"):
        explicit.transport_name(xp)
    comm.barrier()


@pytest.mark.gpu
def test_ranks_sharing_a_gpu_exchange_without_nccl_bitwise_as_numpy(comm, mpas_mesh, rng):
    """Run under `mpiexec -n 2` on a machine with one GPU (skipped where each rank has its own)."""
    import cupy

    select_device(comm)
    if comm.Get_size() == 1 or not shared_devices(gather_device_identities(comm)):
        pytest.skip("no two ranks share a GPU here (run mpiexec -n 2 on a one-GPU machine)")
    assert transport.resolve("auto", cupy, comm) != "nccl"
    if transport.nccl_available():
        with pytest.raises(RuntimeError, match="NCCL needs one GPU per rank"):
            transport.resolve("nccl", cupy, comm)
    d = decomposition(comm, mpas_mesh)
    ex = StateExchange(d, FIELDS, comm)
    assert ex.transport_name(cupy) != "nccl"
    local_rng = _rank_rng(comm, rng)
    for adjoint in (False, True):
        host = {n: local_rng.standard_normal((d.n_local(s[0]),) + ((s[1],) if s[1] else ()))
                .astype(s[2]) for n, s in FIELDS.items()}
        device = {n: cupy.asarray(a) for n, a in host.items()}
        (ex.exchange_adjoint if adjoint else ex.exchange)(host)
        (ex.exchange_adjoint if adjoint else ex.exchange)(device)
        for n in FIELDS:
            got = cupy.asnumpy(device[n])
            assert got.dtype == host[n].dtype and np.array_equal(got, host[n]), (n, adjoint)
            assert got.tobytes() == host[n].tobytes(), (n, adjoint)     # bitwise, signed zeros too
