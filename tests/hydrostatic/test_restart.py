"""Restarts, resuming and rank counts of the hydrostatic core, for real: run_model.py in
subprocesses on a level-3 JW06 baroclinic wave (642 cells, 26 levels, steps of 1800 s).

- a finished run extended with `--set restart.resume=true` (its first run ending off the output
  grid) is bitwise the uninterrupted run of one process: every history variable and the final
  restart, on one process and under `mpiexec -n 2`;
- `mpiexec -n 3` writes the one-process history and final state bitwise;
- the shallow-water model's refusals on resume (another output.interval_hours or
  output.variables, the same cells in another order, a restart at or past the end, another
  setting) are one line naming the key, with the files left byte for byte;
- a full disk while the history is written is one line naming the file and the key, the
  previous history kept, nothing else left; one mid-run keeps the records written so far and the
  restart written with them, and the resumed run is bitwise the uninterrupted one;
- the run's files (`written_files`) include the restart and its lock: a restart.path that is the
  history or its partial file is refused before any work, and a run writes nothing unlisted."""
import shutil

import pytest

from tests.hydrostatic.test_run import config, history
from tests.swm.test_faults import (ROOT, assert_full_disk_line, assert_same, leftovers,
                                   limit_keeping, ok, refused, run_model, run_on_a_full_disk,
                                   snapshot)
from tests.swm.test_output_claims import assert_kept, assert_resumed

LEVEL3 = {"mesh": {"generate": {"level": 3, "lloyd": 20}}, "time": {"days": 0.25, "dt": 1800},
          "diffusion": {"visc4": 1.0e16},
          "output": {"interval_hours": 1.5, "variables": ["theta", "surface_pressure", "u",
                                                          "zgrid"]},
          "restart": {"interval_hours": 1.5}}


def l3(tmp_path, name, **sections):
    """A level-3 config `name`.yaml: 12 steps, a record and a restart every 3 steps."""
    merged = {key: dict(value) for key, value in LEVEL3.items()}
    for key, value in sections.items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    return config(tmp_path, name, **merged)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted one-process run: (folder, mesh cache) with whole.nc, whole.restart.nc."""
    folder = tmp_path_factory.mktemp("whole")
    ok(run_model(l3(folder, "whole")))
    return folder, folder / "cache"


@pytest.fixture(scope="module")
def first(tmp_path_factory, whole):
    """The history and restart of a finished 6-step run (of res.yaml)."""
    folder = tmp_path_factory.mktemp("first")
    ok(run_model(l3(folder, "res", time={"days": 0.125}), cache=whole[1]))
    return folder / "res.nc", folder / "res.restart.nc"


# -- resumed runs and rank counts: bitwise the one-process run -------------------------------------

@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_extending_a_finished_run_is_bitwise_the_uninterrupted_one(tmp_path, whole, ranks):
    """A 4-step run (its last record, step 4, off the 3-step output grid) extended to 12 steps:
    its records 0 and 1 kept, record 2 replaced by step 6's; history and final state bitwise the
    one-process uninterrupted run's."""
    folder, cache = whole
    path = l3(tmp_path, "part", time={"days": 4 / 48})
    ok(run_model(path, ranks=ranks, cache=cache))
    first = history(tmp_path / "part.nc")
    assert first["theta"].shape[0] == 3
    out = ok(run_model(path, "--set", "restart.resume=true", "--set", "time.days=0.25",
                       ranks=ranks, cache=cache))
    assert "resumed from" in out.stderr and "at step 4" in out.stderr
    extended = history(tmp_path / "part.nc")
    for name in ("theta", "u", "Time", "mass"):
        assert (first[name][:2] == extended[name][:2]).all(), name
    assert_same(history(folder / "whole.nc"), extended)
    assert_same(history(folder / "whole.restart.nc"), history(tmp_path / "part.restart.nc"))
    assert leftovers(tmp_path, "part") == []


@pytest.mark.mpi
def test_three_ranks_write_the_one_process_history_bitwise(tmp_path, whole):
    """Every history variable (the fields, the total mass, the times) and the final state."""
    folder, cache = whole
    out = ok(run_model(l3(tmp_path, "three"), ranks=3, cache=cache))
    assert "3 ranks" in out.stderr
    assert_same(history(folder / "whole.nc"), history(tmp_path / "three.nc"))
    assert_same(history(folder / "whole.restart.nc"), history(tmp_path / "three.restart.nc"))


# -- refusals on resume ----------------------------------------------------------------------------

@pytest.mark.parametrize("override, words, before_work", [
    ("output.interval_hours=3", ["output.interval_hours = 3", "written with "
                                 "output.interval_hours = 1.5", "expected 1.5"], True),
    ("output.variables=[theta, u]", ["output.variables = ['theta', 'u']", "written with "
                                     "output.variables = ", "zgrid"], True),
    ("mesh.generate.order=hilbert", ["restart.path", "the same cells in another order",
                                     "mesh.generate.order = 'morton' in the restart, 'hilbert' "
                                     "in the config"], False),
    ("time.days=0.125", ["restart.resume", "at or past the run's end", "time.days"], False),
    ("diffusion.visc4=2.0e16", ["restart.path", "diffusion", "settings of the run being "
                                "resumed"], False),
])
def test_a_resume_swm_refuses_is_refused_naming_the_key(tmp_path, whole, first, override,
                                                        words, before_work):
    """A 6-step run resumed to 12 steps with another setting: one line (exit 2) naming the key,
    its history and restart byte for byte, no lock or partial file left."""
    folder, cache = whole
    path = l3(tmp_path, "res", time={"days": 0.125})
    files = (tmp_path / "res.nc", tmp_path / "res.restart.nc")
    for made, copy in zip(first, files):
        shutil.copy2(made, copy)
    before = snapshot(*files)
    out = run_model(path, "--set", "restart.resume=true", "--set", "time.days=0.25",
                    "--set", override, cache=cache)
    line = refused(out, 2, *words)
    assert "\n" not in line and "ready to step" not in out.stderr
    if before_work:
        assert "rank 0: mesh: " not in out.stderr and "mesh and initial state" not in out.stderr
    assert snapshot(*files) == before
    assert leftovers(tmp_path, "res") == []


# -- a full disk -----------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [400_000, 1_600_000])
def test_a_full_disk_is_one_line_and_keeps_the_previous_history(tmp_path, whole, limit):
    """The history of a first run (about 2.9 MB: the mesh part 0.8 MB, a record 0.7 MB) stays as
    it was when a second run cannot write its own: at 400 kB the mesh part fails, at 1.6 MB the
    first record (on the writer thread: no record is complete); the partial file and temporaries
    are removed. (One
    process: MPICH's shared memory cannot start under a file size limit.)"""
    folder, cache = whole
    path = l3(tmp_path, "h", time={"days": 0.125}, restart={"interval_hours": None})
    ok(run_model(path, cache=cache))
    before = snapshot(tmp_path / "h.nc", path)
    out = run_on_a_full_disk(path, "--set", "time.days=0.25", "--set", "output.clobber=overwrite",
                             cache=cache, limit=limit)
    assert out.returncode == 2, out.stderr
    assert_full_disk_line(out, tmp_path / "h.nc")
    assert snapshot(*before) == before
    assert {p.name for p in tmp_path.iterdir()} == {"h.yaml", "h.nc"}


def test_a_full_disk_mid_run_keeps_the_records_and_the_run_resumes_bitwise(tmp_path, whole):
    """The hydrostatic history stops at its last complete record (2 of 5), the restart written
    with it kept; resumed with room, history and restart are bitwise the uninterrupted run's."""
    folder, cache = whole
    for name in ("whole.nc", "whole.restart.nc"):
        shutil.copy2(folder / name, tmp_path / name)
    path = l3(tmp_path, "h")
    out = run_on_a_full_disk(path, cache=cache, limit=limit_keeping(tmp_path / "whole.nc", 2))
    assert_kept(tmp_path, "whole", out, 2)
    assert_resumed(tmp_path, path, "whole", cache)


# -- the run's files -------------------------------------------------------------------------------

@pytest.mark.parametrize("target, words", [
    ("h.nc", ["restart.path", "the same file as output.path", "one would overwrite the other"]),
    ("h.nc.partial", ["the partial file", "restart.path", "output.path",
                      "one would overwrite the other"]),
])
def test_a_restart_path_that_is_a_file_of_the_history_is_refused(tmp_path, target, words):
    path = l3(tmp_path, "h", restart={"path": str(tmp_path / target)})
    before = snapshot(path)
    out = run_model(path)
    refused(out, 2, str(tmp_path / target), *words)
    assert snapshot(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.yaml"]     # not even a mesh


def test_the_files_of_a_run_are_all_listed(tmp_path):
    """written_files lists what a run with restarts and a grid file beside its history (a mesh
    file whose geometry is recomputed) writes."""
    from meshrun.config import load_config

    mesh = {"generate": None, "file": str(ROOT / "tests/data/x1.162.grid.nc"),
            "recompute_geometry": True}
    path = l3(tmp_path, "all", mesh=mesh, output={"mesh": "reference"})
    listed = {w.path for w in load_config(path).written_files()}
    assert {tmp_path / n for n in ("all.nc", "all.nc.partial", "all.nc.lock", "all.grid.nc",
                                   "all.restart.nc", "all.restart.nc.lock")} == listed
    ok(run_model(path))
    made = {p for p in tmp_path.iterdir() if p.name != "cache"} - {path}
    assert made == {tmp_path / n for n in ("all.nc", "all.grid.nc", "all.restart.nc")}
