"""run_model.py with backend: cupy (skipped without CuPy and a CUDA device): the history equals the
NumPy run's to round-off, and runs of 2 and 3 ranks sharing one GPU equal the one-rank run bitwise
(the halo transport avoids NCCL there)."""
import os
import subprocess
import sys

import netCDF4
import numpy as np
import pytest
import yaml

from tests.test_mpi_ranks import _mpiexec

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gpu


def config(tmp_path, name, backend, **sections):
    tree = {"mesh": {"generate": {"level": 4}}, "case": {"name": "williamson5"},
            "time": {"days": 1, "dt": 1200}, "backend": backend,
            "output": {"path": str(tmp_path / f"{name}.nc"), "interval_hours": 6},
            "restart": {"path": str(tmp_path / f"{name}.restart.nc"), "interval_hours": 12}}
    tree.update(sections)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def env(tmp_path, mpi: bool) -> dict:
    e = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
         "MESHOPS_CACHE_DIR": str(tmp_path / "cache"), "OMPI_ALLOW_RUN_AS_ROOT": "1",
         "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    if not mpi:
        e["MESHOPS_NO_MPI"] = "1"
    return e


def run(tmp_path, path, ranks=None):
    args = [sys.executable, str(ROOT / "run_model.py"), str(path), "--no-progress"]
    if ranks is not None:
        args = [_mpiexec(), "-n", str(ranks)] + args
    out = subprocess.run(args, env=env(tmp_path, ranks is not None), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "Traceback" not in out.stderr
    return out


def history(path):
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        return {name: ds[name][:] for name in ("h", "u", "vorticity", "Time", "mass", "max_cfl")}


def test_cupy_history_equals_numpy_to_round_off(tmp_path):
    run(tmp_path, config(tmp_path, "cpu", "numpy"))
    out = run(tmp_path, config(tmp_path, "gpu", "cupy"))
    memory = next(line for line in out.stderr.splitlines() if "device memory:" in line)
    # per million cells: this level-4 mesh's GiB round to 0.00
    held, tables = (float(part.split()[-1].strip("("))
                    for part in memory.split(" GiB per million cells")[:2])
    assert 0 < tables <= held, memory
    a, b = history(tmp_path / "cpu.nc"), history(tmp_path / "gpu.nc")
    assert a["h"].shape == b["h"].shape == (5, 2562, 1)
    for name in ("h", "u", "vorticity", "mass"):
        scale = np.abs(a[name]).max()
        assert np.abs(a[name] - b[name]).max() <= 1e-11 * scale, name
    assert np.array_equal(a["Time"], b["Time"])


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_ranks_sharing_one_gpu_equal_one_rank_bitwise(tmp_path, ranks):
    import cupy

    if cupy.cuda.runtime.getDeviceCount() >= ranks:
        pytest.skip(f"{ranks} ranks get {ranks} GPUs here: nothing is shared")
    run(tmp_path, config(tmp_path, "one", "cupy"))
    out = run(tmp_path, config(tmp_path, "many", "cupy"), ranks=ranks)
    assert "halo transport: staging" in out.stderr or "halo transport: cuda-aware-mpi" in out.stderr
    a, b = history(tmp_path / "one.nc"), history(tmp_path / "many.nc")
    for name in ("h", "u", "vorticity", "Time"):
        assert np.array_equal(a[name], b[name]), name
