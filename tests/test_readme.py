"""The README cannot drift: every ```python block runs, its Quick start as written, its test command
is the one CI runs, its model command runs the model under mpiexec, and its `--check-adjoint` sample
has the form of what that command prints.

Quick start code blocks are fenced ```python blocks of the "## Quick start" section, run in order in
one namespace from the repository root. Every other ```python block runs alone, in a fresh namespace
from the repository root: each is self-contained. A block preceded by `<!-- readme-test: gpu -->` needs
CuPy and a CUDA device: it runs only in the GPU tests (marked `gpu`, skipped without them); a block
importing an optional package (OPTIONAL) is skipped where it is not installed.
"""
import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GPU_MARK = "<!-- readme-test: gpu -->"


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README.md has no '## {heading}' section"
    return match.group(1)


def quick_start_blocks() -> list[tuple[str, bool]]:
    """(code, needs_gpu) for each ```python block of the Quick start, in order."""
    section = _section(README.read_text(), "Quick start")
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", section, re.S | re.M):
        before = section[:match.start()].rstrip().splitlines()
        blocks.append((match.group(1), bool(before) and before[-1].strip() == GPU_MARK))
    return blocks


#: Packages a README block may import that meshops does not need (its extras: torch, jax, test).
OPTIONAL = ("torch", "jax", "uxarray", "cftime")


def python_blocks() -> list[tuple[str, str, bool]]:
    """(section, code, needs_gpu) for each ```python block of README.md, in order; section is the
    heading of the `## ` section it is in."""
    text, blocks = README.read_text(), []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        before = text[:match.start()]
        headings = re.findall(r"^## (.*)$", before, re.M)
        lines = before.rstrip().splitlines()
        blocks.append((headings[-1] if headings else "", match.group(1),
                       bool(lines) and lines[-1].strip() == GPU_MARK))
    return blocks


def _alone() -> list:
    """The blocks outside the Quick start as pytest params (a GPU one marked gpu), named by their
    section and number in the README."""
    return [pytest.param(code, id=f"{re.sub(r'[^a-z0-9]+', '-', section.lower())}-{i + 1}",
                         marks=[pytest.mark.gpu] if gpu else [])
            for i, (section, code, gpu) in enumerate(python_blocks()) if section != "Quick start"]


def _exec_alone(code: str, monkeypatch) -> dict:
    for node in ast.walk(ast.parse(code)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        for name in names:
            if name.split(".")[0] in OPTIONAL:
                pytest.importorskip(name.split(".")[0])
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": "__readme__"}
    exec(compile(code, "README.md block", "exec"), namespace)
    return namespace


def test_every_python_block_is_run_by_a_test():
    """The Quick start's blocks run in one namespace (`test_quick_start_runs_on_cpu` and `_on_gpu`),
    every other block alone (`test_readme_block_runs_alone`): none is left out."""
    blocks = python_blocks()
    quick = [b for b in blocks if b[0] == "Quick start"]
    assert [(c, g) for _, c, g in quick] == quick_start_blocks()
    assert len(quick) + len(_alone()) == len(blocks) >= 10


@pytest.mark.parametrize("code", _alone())
def test_readme_block_runs_alone(code, monkeypatch):
    _exec_alone(code, monkeypatch)


def _run(blocks, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": "__readme__"}
    for i, (code, _) in enumerate(blocks):
        exec(compile(code, f"README.md Quick start block {i + 1}", "exec"), namespace)
    return namespace


def test_quick_start_has_cpu_and_gpu_blocks():
    blocks = quick_start_blocks()
    assert sum(not gpu for _, gpu in blocks) >= 2
    assert any(gpu for _, gpu in blocks)
    assert all("cupy" not in code for code, gpu in blocks if not gpu)


def test_quick_start_runs_on_cpu(monkeypatch, capsys):
    namespace = _run([b for b in quick_start_blocks() if not b[1]], monkeypatch)
    out = capsys.readouterr().out
    assert "162 480 320" in out
    assert namespace["taylor"].passed(1.9) and namespace["linear"].exact
    ds = namespace["ds"]
    assert ds.sizes["Time"] == 3 and ds.h.shape == (3, 2562, 1) and "0000-01-03 00:00:00" in out
    jw = namespace["jw"]                                     # the hydrostatic core by meshrun.run
    assert jw.surface_pressure.shape == (2, 162) and "26 997" in out
    assert abs(float(ds.mass[-1] / ds.mass[0] - 1)) < 1e-13
    assert "fluid thickness 5966.69" in out
    assert abs(float(namespace["mean_h"][-1] * ds.areaCell.sum() / ds.mass[-1] - 1)) < 1e-13


@pytest.mark.gpu
def test_quick_start_runs_on_gpu(monkeypatch):
    """The GPU blocks with the blocks before them (whose names they use)."""
    blocks = quick_start_blocks()
    last_gpu = max(i for i, (_, gpu) in enumerate(blocks) if gpu)
    _run(blocks[:last_gpu + 1], monkeypatch)


def _command_after(section: str, start: str) -> str:
    lines = [line.strip() for line in section.splitlines() if line.strip().startswith(start)]
    assert len(lines) == 1, f"expected one command starting {start!r} in the README"
    return lines[0]


def test_test_command_is_what_ci_runs():
    section = _section(README.read_text(), "The two commands")
    command = _command_after(section, "python3 -m venv .venv && . .venv/bin/activate && pip install -q")
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == command
    assert command.endswith('python -m pytest -m "not slow"')


@pytest.mark.mpi
def test_model_command_runs(tmp_path):
    """The model command after its install step, as written (mpiexec -n 2 run_model.py CONFIG), from
    a scratch directory so that its output lands there; then the plot command on its output."""
    from tests.test_mpi_ranks import _mpiexec

    section = _section(README.read_text(), "The two commands")
    command = _command_after(section, 'python3 -m venv .venv && . .venv/bin/activate && pip install ".[mpi]"')
    step = shlex.split(command.split(" && ")[-1])
    assert step[:3] == ["mpiexec", "-n", "2"] and step[3:5] == ["python", "run_model.py"], step
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    args = [_mpiexec(), "-n", "2", sys.executable, str(ROOT / step[4]), str(ROOT / step[5]), "--no-progress"]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "2 ranks" in done.stderr and "day 15.000: mass" in done.stderr
    output = tmp_path / "williamson5.nc"
    assert output.exists() and f"output {output.name}" in done.stderr
    plot = shlex.split(re.search(r"`(python -m swm.plot [^`]+)`", section).group(1))
    done = subprocess.run([sys.executable] + plot[1:], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and (tmp_path / "williamson5.h.png").exists(), done.stderr


def test_check_adjoint_sample_is_what_the_command_prints(tmp_path):
    """The `--check-adjoint` sample of "Gradients of the model" has, line for line, the form of what
    its command prints (numbers aside): the command as written, run at level 3 over 12 steps."""
    section = _section(README.read_text(), "Gradients of the model: sensitivity runs, adjoint checks, 4D-Var")
    lines = [line.strip() for line in section.splitlines()
             if line.strip().startswith("python run_model.py") and "--check-adjoint" in line]
    assert len(lines) == 1, lines
    command = shlex.split(lines[0].split("#")[0])
    assert command[:2] == ["python", "run_model.py"] and command[-1] == "--check-adjoint", command
    bullet = section[section.index("**`--check-adjoint`**"):]
    sample = re.search(r"\n\n((?: {6}.*\n)+)", bullet).group(1).splitlines()
    env = dict(os.environ, MESHOPS_NO_MPI="1", MESHOPS_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, *command[1:], "--set", "mesh.generate.level=3", "--set",
                           "time.days=0.25", "--set", "time.dt=1800"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    def form(line):
        return " ".join(re.sub(r"-?\d+(\.\d+)?(e[-+]\d+)?", "#", line).split())

    assert [form(line) for line in done.stdout.splitlines()] == [form(line) for line in sample]


def test_vertical_operators_example_runs(monkeypatch, capsys):
    """The example of "### Vertical operators" (section Operators) runs and prints what it says."""
    section = _section(README.read_text(), "Operators")
    sub = section[section.index("### Vertical operators"):]
    code = re.search(r"^```python\n(.*?)^```", sub, re.S | re.M).group(1)
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md Vertical operators", "exec"), {"__name__": "__readme__"})
    printed = capsys.readouterr().out.split()
    claimed = code.rsplit("#", 1)[1].split()
    assert printed == ["[101000.", "1000.]", "286.4"] == claimed
