"""What a user who installed the package (not the repository) can run: the wheel holds the shipped
configs, `swm-run NAME` (and `meshrun NAME`, the same command) resolves a shipped config by name (also
under mpiexec), and a name that is neither a file nor a shipped config is a one-line error listing the
shipped ones."""
import importlib.metadata
import json
import pathlib
import subprocess
import sys
import sysconfig
import zipfile

import netCDF4
import pytest

from meshrun.config import ConfigError, find_config, shipped_configs

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
SWM_RUN = pathlib.Path(sys.executable).parent / "swm-run"


def _installed():
    """The meshops distribution pip installed into this environment (not a build's egg-info)."""
    (dist,) = importlib.metadata.distributions(name="meshops", path=[sysconfig.get_paths()["purelib"]])
    return dist


def _installed_editable() -> bool:
    text = _installed().read_text("direct_url.json")
    return bool(text) and json.loads(text).get("dir_info", {}).get("editable", False)


def _wheel_names(tmp_path) -> set[str]:
    """The file names inside the package as installed; an editable install is built into a wheel."""
    if not _installed_editable():
        return {str(f) for f in _installed().files}
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("meshops-*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


def test_the_wheel_holds_every_shipped_config_and_the_console_script(tmp_path):
    names = _wheel_names(tmp_path)
    assert {f"meshrun/configs/{c}" for c in CONFIGS} <= names
    assert {"meshrun/cli.py", "meshrun/models.py", "adjoint/config.py"} <= names
    assert {"swm/cuda/shallow_water.cu", "swm/cuda/shallow_water_adjoint.cu"} <= names
    entry_points = {ep.name: ep.value for ep in _installed().entry_points}
    assert entry_points["swm-run"] == entry_points["meshrun"] == "meshrun.cli:main"


def test_a_shipped_config_is_found_by_name_and_a_path_wins(tmp_path, monkeypatch):
    assert sorted(p.name for p in shipped_configs().values()) == CONFIGS
    assert find_config("williamson5") == find_config("williamson5.yaml") == shipped_configs()["williamson5"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "williamson5.yaml").write_text("case: {name: galewsky}\n")
    assert find_config("williamson5.yaml") == pathlib.Path("williamson5.yaml")     # the user's own file
    with pytest.raises(ConfigError, match=r"williamson9: no such config file.*one of: .*williamson5"):
        find_config("williamson9")
    with pytest.raises(ConfigError, match=r"sub/williamson5.yaml: cannot read"):
        from meshrun.config import load_config

        load_config("sub/williamson5.yaml")                # a path is never looked up by name


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_swm_run_runs_a_shipped_config_by_name(tmp_path, ranks):
    """`swm-run williamson5` (from the installed console script, in an empty directory) writes
    williamson5.nc there; under `mpiexec -n 2` too."""
    from tests.swm.test_faults import env
    from tests.test_mpi_ranks import _mpiexec

    launcher = [_mpiexec(), "-n", str(ranks)] if ranks > 1 else []
    environment = env(tmp_path / "cache", ranks)
    environment.pop("PYTHONPATH")                          # the installed package, not the checkout
    out = subprocess.run(launcher + [str(SWM_RUN), "williamson5", "--no-progress", "--set", "time.days=0.25",
                                     "--set", "output.interval_hours=6", "--set", "mesh.generate.level=3"],
                         cwd=tmp_path, env=environment, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    with netCDF4.Dataset(tmp_path / "williamson5.nc") as ds:
        assert ds.dimensions["Time"].size == 2 and ds.dimensions["nCells"].size == 642
        assert ds.core_name == "sw"


@pytest.mark.parametrize("script", ["swm-run", "meshrun"])
def test_swm_run_names_itself_in_errors(tmp_path, script):
    out = subprocess.run([str(SWM_RUN.with_name(script)), "williamson9"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"{script}: error: williamson9: no such config file") and "williamson5" in line


def test_one_gpu_extra_per_cuda_major_and_the_readme_says_which():
    """The installed distribution offers gpu-cuda12 (cupy-cuda12x) and gpu-cuda13 (cupy-cuda13x),
    and gpu as gpu-cuda12; the README's install section names both, how to pick one and CuPy's ctk
    extra, and every extra it installs exists."""
    import re

    extras = {}
    for requirement in _installed().requires:
        name, _, marker = requirement.partition(";")
        found = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        if found:
            extras.setdefault(found.group(1), []).append(name.strip())
    assert [r.split(">=")[0] for r in extras["gpu-cuda12"]] == ["cupy-cuda12x"]
    assert [r.split(">=")[0] for r in extras["gpu-cuda13"]] == ["cupy-cuda13x"]
    assert extras["gpu"] == extras["gpu-cuda12"]
    readme = (ROOT / "README.md").read_text()
    install = readme[:readme.index("## Quick start")]
    for text in ('pip install ".[gpu-cuda13]"', 'pip install ".[gpu-cuda12]"', "nvidia-smi",
                 "NVRTC", '"cupy-cuda13x[ctk]>=14"'):
        assert text in install, text
    named = {extra for group in re.findall(r'"\.\[([^\]]+)\]"', readme) for extra in group.split(",")}
    assert named <= set(extras), named - set(extras)
