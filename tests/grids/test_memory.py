"""The memory a mesh needs, checked before any work (grids.memory): `python -m grids generate` and
run_model.py refuse a level that cannot fit, in one line naming the setting, the memory needed and
available and what to do; a small level passes. Each child runs under an address-space limit
(RLIMIT_AS, as `ulimit -v` sets it) of 16 GiB, so that the large levels exceed what it has on any
machine, this one included (MemAvailable ~23 GiB) and the 8-GPU one."""
import os
import pathlib
import resource
import subprocess
import sys

import pytest

from grids.memory import GIB, available_memory, check_memory, memory_needed
from tests.swm.test_faults import RANKS, command, env, error_of, make_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIMIT = 16 * GIB


def limited():
    """In the child: at most LIMIT bytes of address space (never more than it already had)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    new = LIMIT if hard == resource.RLIM_INFINITY else min(LIMIT, hard)
    resource.setrlimit(resource.RLIMIT_AS, (new, hard))


def run(args, tmp_path, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MESHOPS_CACHE_DIR": str(tmp_path / "cache"),
           "MESHOPS_NO_MPI": "1"}
    return subprocess.run([sys.executable, *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limited)


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_grids_generate_refuses_a_level_that_cannot_fit_before_any_work(tmp_path):
    out = run(["-m", "grids", "generate", "--level", 12, "-o", "big.grid.nc"],
              tmp_path)
    assert out.returncode == 2, out.stderr
    line = one_line(out.stderr)
    assert line.startswith("generate: --level 12: generating the mesh (167772162 cells) needs "
                           f"about {memory_needed(12) / GIB:.1f} GiB of memory, "), line
    assert "GiB available (the address-space limit" in line, line
    assert "expected --level" in line and "or a machine with more memory" in line, line
    assert out.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("ranks", RANKS)
def test_run_model_refuses_a_level_that_cannot_fit_before_any_work(tmp_path, ranks):
    config = make_config(tmp_path, "l11", mesh={"generate": {"level": 11}})
    out = subprocess.run(command(config, ranks=ranks), env=env(tmp_path / "cache", ranks),
                         capture_output=True, text=True, timeout=120, preexec_fn=limited)
    assert out.returncode == 2, out.stderr
    line = error_of(out.stderr)
    need = memory_needed(11, load=True, validate=True)
    assert line.startswith("run_model.py: error: mesh.generate.level = 11: generating and loading "
                           f"the mesh (41943042 cells) needs about {need / GIB:.1f} GiB of "
                           "memory, "), line
    assert "expected mesh.generate.level" in line and "a machine with more memory" in line, line
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())
    assert not (tmp_path / "l11.nc").exists()


def test_a_small_level_passes_the_check_and_runs_under_the_same_limit(tmp_path):
    check_memory(2, key="--level")
    check_memory(2, key="mesh.generate.level", load=True, validate=True)
    out = run(["-m", "grids", "generate", "--level", 3, "-o", "small.grid.nc"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "small.grid.nc").stat().st_size > 0
    available = available_memory()
    assert available is not None and available[0] > memory_needed(3, load=True, validate=True)


def test_the_estimate_grows_with_the_level_and_names_the_largest_level_that_fits():
    needs = [memory_needed(level, load=True, validate=True) for level in range(13)]
    assert all(a < b for a, b in zip(needs, needs[1:]))
    assert memory_needed(11) > 23 * GIB        # the level-11 generation that failed on 24 GiB
    assert memory_needed(10) < 7 * GIB         # level 10 generated in 6.0 GiB (RESULTS.md)
