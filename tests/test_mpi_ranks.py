"""Launch the MPI tests (tests/mpi) under `mpiexec -n 1, 2, 3, 4`, and check that an error on one
rank aborts the whole job with its message instead of hanging."""
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
TIMEOUT_S = 150


def _mpiexec() -> str:
    beside = pathlib.Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.skip("mpiexec not found beside the Python interpreter nor on PATH")
    return found


def _env() -> dict:
    env = dict(os.environ, MESHOPS_MPI_TESTS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _run(args, timeout=TIMEOUT_S):
    try:
        return subprocess.run(args, cwd=ROOT, env=_env(), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        pytest.fail(f"{' '.join(map(str, args))} did not finish within {timeout} s:\n{out}")


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_mpi_suite(nranks):
    args = [_mpiexec(), "-n", str(nranks), sys.executable, "-m", "pytest", "tests/mpi", "-q",
            "-p", "no:cacheprovider", "-x"]
    result = _run(args)
    assert result.returncode == 0, (f"{' '.join(args)} failed (rc={result.returncode}):\n"
                                    f"{result.stdout}\n{result.stderr}")
    assert "passed" in result.stdout, result.stdout


ABORT_SCRIPT = textwrap.dedent("""
    from meshops.parallel.comm import abort_on_error, world
    comm = world()
    with abort_on_error(comm):
        if comm.Get_rank() == 1:
            raise ValueError("bad value on purpose: 42")
        comm.barrier()    # rank 0 would wait here forever without the abort
    print("not reached")
""")

EXCEPTHOOK_SCRIPT = textwrap.dedent("""
    from meshops.parallel.comm import install_excepthook, world
    comm = world()
    install_excepthook(comm)
    if comm.Get_rank() == comm.Get_size() - 1:
        raise RuntimeError("uncaught on the last rank")
    comm.barrier()
""")


@pytest.mark.mpi
@pytest.mark.parametrize("script, rank, message", [
    (ABORT_SCRIPT, 1, "ValueError: bad value on purpose: 42"),
    (EXCEPTHOOK_SCRIPT, 2, "RuntimeError: uncaught on the last rank"),
])
def test_error_on_one_rank_aborts_the_job(script, rank, message):
    nranks = 3
    result = _run([_mpiexec(), "-n", str(nranks), sys.executable, "-c", script], timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"[rank {rank} of {nranks}]" in output, output
    assert message in output, output
    assert "not reached" not in output


NO_MPI_SCRIPT = textwrap.dedent("""
    import sys
    sys.modules["mpi4py"] = None            # as if mpi4py were not installed
    import numpy as np
    from grids.decompose import distribute_mesh
    from grids.mpas_io import read_mesh
    from meshops.parallel.distributed import distributed_operators
    from meshops.parallel.halo import HaloExchange
    from meshops.parallel.comm import SerialComm, world

    comm = world()
    assert isinstance(comm, SerialComm), comm
    mesh = read_mesh(sys.argv[1])
    halo = HaloExchange(distribute_mesh(comm, mesh), comm)
    rng = np.random.default_rng()
    n = mesh.nCells
    shapes = {"cell": n, "edge": mesh.nEdges, "vertex": mesh.nVertices, "layer": (n, 3), "interface": (n, 4),
              "column": n}                   # vertical operators: on the columns of cells
    for name, op in distributed_operators(halo).items():
        x = [rng.standard_normal(shapes[loc]) for loc in op.spec.domain]
        x = list(op.spec.sample(*x)) if op.spec.sample is not None else x
        y = op.forward(*[a.copy() for a in x])
        ref = op.spec.forward(mesh, *x)
        for a, b in zip(y if isinstance(y, tuple) else (y,), ref if isinstance(ref, tuple) else (ref,)):
            assert np.array_equal(a, b), name
        op.adjoint(*([] if op.spec.linear else x),
                   *[rng.standard_normal(shapes[loc]) for loc in op.spec.range])
    print("serial ok", halo.transport_name(np))
""")


def test_one_process_without_mpi4py(x1_162_path):
    result = subprocess.run([sys.executable, "-c", NO_MPI_SCRIPT, str(x1_162_path)], cwd=ROOT,
                            env=_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "serial ok local" in result.stdout, result.stdout


# -- issue 14: a plain script (no abort_on_error, no install_excepthook) whose rank fails ---------
FAULT_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from grids.decompose import distribute_mesh
    from grids.mpas_io import read_mesh
    from meshops.parallel.comm import world
    from meshops.parallel.halo import HaloExchange

    comm = world()
    mesh = read_mesh(sys.argv[1]) if comm.Get_rank() == 0 else None
    d = distribute_mesh(comm, mesh)
    halo = HaloExchange(d, comm)
    x = np.zeros(d.n_local("cell"))
    pending = halo.begin(x, "cell")          # receives and sends posted on every rank
    if comm.Get_rank() == int(sys.argv[2]):
        raise RuntimeError("injected fault after the sends were posted")
    halo.end(pending)                        # the other ranks wait here for the failed rank
    comm.barrier()
    print("not reached")
""")


@pytest.mark.mpi
@pytest.mark.parametrize("rank", [1, 2])
def test_a_failing_rank_in_a_plain_script_ends_the_job(x1_162_path, rank):
    """No opt-in: importing meshops.parallel installs the abort hook for multi-rank jobs."""
    import time

    nranks = 3
    start = time.monotonic()
    result = _run([_mpiexec(), "-n", str(nranks), sys.executable, "-c", FAULT_SCRIPT,
                   str(x1_162_path), str(rank)], timeout=30)
    output = result.stdout + result.stderr
    assert time.monotonic() - start < 30
    assert result.returncode != 0, output
    assert f"[rank {rank} of {nranks}] aborting the job on an error" in output, output
    assert "RuntimeError: injected fault after the sends were posted" in output, output
    assert "not reached" not in output


def test_one_process_keeps_the_usual_traceback(x1_162_path):
    result = subprocess.run([sys.executable, "-c", FAULT_SCRIPT, str(x1_162_path), "0"], cwd=ROOT,
                            env=_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback") and "aborting the job" not in result.stderr
    assert "RuntimeError: injected fault after the sends were posted" in result.stderr
