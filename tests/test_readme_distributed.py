"""The README's "Distributed runs" example, extracted from README.md (so the test fails when the
README drifts), runs as written under `mpiexec -n 2` and gives the same output as one process (with and without
mpi4py)."""
import re
import subprocess
import sys

import pytest

from tests.test_mpi_ranks import ROOT, _env, _mpiexec, _run


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Distributed runs\n")
    end = text.find("\n## ", start + 1)
    section = text[start: end if end >= 0 else len(text)]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README.md: no ```python block in the 'Distributed runs' section"
    return match.group(1)


@pytest.mark.mpi
def test_readme_distributed_example_runs_under_mpiexec(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_example())
    parallel = _run([_mpiexec(), "-n", "2", sys.executable, str(script)], timeout=120)
    assert parallel.returncode == 0, parallel.stdout + parallel.stderr
    serial = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=_env(), capture_output=True,
                            text=True, timeout=120)
    assert serial.returncode == 0, serial.stdout + serial.stderr
    lines = [line for line in parallel.stdout.splitlines() if line.startswith("max |F|")]
    assert len(lines) == 1, parallel.stdout           # printed on the root only
    assert lines == serial.stdout.splitlines(), (parallel.stdout, serial.stdout)   # bitwise
    no_mpi = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=dict(_env(), MESHOPS_NO_MPI="1"),
                            capture_output=True, text=True, timeout=120)
    assert no_mpi.returncode == 0, no_mpi.stdout + no_mpi.stderr
    assert no_mpi.stdout.splitlines() == lines, no_mpi.stdout          # without mpi4py too
