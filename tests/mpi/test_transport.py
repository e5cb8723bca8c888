"""Transport selection: host MPI for NumPy, never device buffers to an MPI not proven CUDA-aware."""
import numpy as np
import pytest

from meshops.parallel import transport
from meshops.parallel.halo import HaloExchange

from .conftest import decomposition


class _Comm:
    def __init__(self, size):
        self.size = size

    def Get_size(self):
        return self.size

    def allgather(self, identity):
        """Device identities: one GPU per rank (tests/mpi/test_shared_device.py: shared GPUs)."""
        return [("host", f"gpu{r}") for r in range(self.size)]


class _FakeCuPy:
    """Stands for the cupy module: resolve() only tells it apart from numpy."""


def test_numpy_arrays_use_host_mpi_and_one_rank_uses_no_messages(monkeypatch):
    monkeypatch.delenv(transport.ENV_TRANSPORT, raising=False)
    assert transport.resolve(None, np, _Comm(3)) == "mpi"
    assert transport.resolve("staging", np, _Comm(3)) == "mpi"
    assert transport.resolve("nccl", _FakeCuPy, _Comm(1)) == "local"


def test_gpu_auto_prefers_nccl_then_proven_cuda_aware_mpi_then_staging(monkeypatch):
    monkeypatch.delenv(transport.ENV_CUDA_AWARE, raising=False)
    monkeypatch.delenv("MPIR_CVAR_ENABLE_GPU", raising=False)
    monkeypatch.setattr(transport, "nccl_available", lambda: True)
    assert transport.resolve("auto", _FakeCuPy, _Comm(2), identity=("host", "gpu0")) == "nccl"
    monkeypatch.setattr(transport, "nccl_available", lambda: False)
    aware, why = transport.cuda_aware_mpi()
    assert not aware, why                                       # MPICH from PyPI: not CUDA-aware
    assert transport.resolve("auto", _FakeCuPy, _Comm(2)) == "staging"
    with pytest.raises(RuntimeError, match="not known to be CUDA-aware"):
        transport.resolve("cuda-aware-mpi", _FakeCuPy, _Comm(2))
    with pytest.raises(RuntimeError, match="cupy.cuda.nccl is not available"):
        transport.resolve("nccl", _FakeCuPy, _Comm(2))
    monkeypatch.setenv(transport.ENV_CUDA_AWARE, "1")
    assert transport.resolve("auto", _FakeCuPy, _Comm(2)) == "cuda-aware-mpi"
    monkeypatch.setenv(transport.ENV_TRANSPORT, "staging")
    assert transport.resolve(None, _FakeCuPy, _Comm(2)) == "staging"
    monkeypatch.setenv(transport.ENV_TRANSPORT, "pigeon")
    with pytest.raises(ValueError, match="MESHOPS_HALO_TRANSPORT"):
        transport.resolve(None, _FakeCuPy, _Comm(2))


def test_open_mpi_without_cuda_support_is_detected(monkeypatch):
    monkeypatch.delenv(transport.ENV_CUDA_AWARE, raising=False)

    class OpenMPI:
        @staticmethod
        def Get_library_version():
            return "Open MPI v4.1.6, package: Open MPI ..."

    monkeypatch.setattr(transport, "mpi_module", lambda: OpenMPI)
    for built, expected in [(False, False), (True, True), (None, False)]:
        monkeypatch.setattr(transport, "_ompi_info_cuda", lambda built=built: built)
        assert transport.cuda_aware_mpi()[0] is expected


def test_the_transport_in_use_is_logged(comm, mesh, caplog):
    halo = HaloExchange(decomposition(comm, mesh), comm)
    with caplog.at_level("INFO", logger="meshops.parallel.halo"):
        halo.exchange(np.ones(halo.decomposition.n_local("cell")), "cell")
    expected = "local" if comm.Get_size() == 1 else "mpi"
    assert f"uses transport '{expected}'" in caplog.text
