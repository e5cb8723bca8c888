"""`python -m grids`: generate, check and reorder, run as a user runs them (a subprocess)."""
import os
import pathlib
import shutil
import subprocess
import sys

import netCDF4
import numpy as np

from grids import read_mesh, validate_mesh

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "grids", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_generate_then_check(tmp_path):
    radius = float(np.random.default_rng().uniform(1e6, 1e7))
    done = run("generate", "--level", 2, "--lloyd", 3, "-o", "x1.162.nc", "--radius", radius,
               "--format", "NETCDF4", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "x1.162.nc" in done.stdout and "nCells 162" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x1.162.nc"]
    with netCDF4.Dataset(tmp_path / "x1.162.nc") as ds:
        assert ds.data_model == "NETCDF4" and ds.sphere_radius == radius
    mesh = read_mesh(tmp_path / "x1.162.nc")
    validate_mesh(mesh)
    checked = run("check", "x1.162.nc", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = checked.stdout
    for text in ("nCells 162", "nEdges 480", "nVertices 320", "maxEdges 6", "cellQuality_min"):
        assert text in out, out
    assert out.strip().splitlines()[-1] == "valid"
    lo = mesh.dcEdge.min() / 1e3
    assert f"dcEdge min {lo:.4g} km" in out


def test_check_reports_a_corrupted_file(x1_162_path, tmp_path):
    bad = tmp_path / "bad.nc"
    shutil.copy(x1_162_path, bad)
    c = int(np.random.default_rng().integers(162))
    with netCDF4.Dataset(bad, "r+") as ds:
        ds["areaCell"][c] = -ds["areaCell"][c]
    done = run("check", bad, "--radius", 6371229.0, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert "invalid" in done.stderr and f"areaCell[{c}]" in done.stderr and str(bad) in done.stderr
    assert "expected a positive area" in done.stderr and "Traceback" not in done.stderr
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not a netCDF file")
    done = run("check", junk, cwd=tmp_path)
    assert done.returncode == 1 and "junk.nc" in done.stderr and "Traceback" not in done.stderr


def test_check_the_real_file_and_reorder(x1_162_path, tmp_path):
    done = run("check", x1_162_path, cwd=tmp_path)
    assert done.returncode == 0 and "unit-sphere file" in done.stdout
    done = run("reorder", x1_162_path, "out.nc", "--method", "hilbert", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "indexToCellID" in done.stdout
    old, new = read_mesh(x1_162_path), read_mesh(tmp_path / "out.nc")
    validate_mesh(new)
    cells = new.extra["indexToCellID"][1] - 1
    edges = new.extra["indexToEdgeID"][1] - 1
    assert np.array_equal(np.sort(cells), np.arange(162))
    assert not np.array_equal(cells, np.arange(162))
    assert np.array_equal(new.xCell, old.xCell[cells])
    assert np.array_equal(new.dvEdge, old.dvEdge[edges])


# -- issue 13: output paths, broken pipes, stderr, units, help ------------------------------------
def test_output_path_is_checked_before_the_work(x1_162_path, tmp_path):
    for args in (["generate", "--level", 3, "-o", "/nonexistent/dir/x.nc"],
                 ["generate", "--level", 3, "-o", tmp_path],
                 ["reorder", x1_162_path, "/nonexistent/o.nc"],
                 ["reorder", x1_162_path, tmp_path]):
        done = run(*args, cwd=tmp_path)
        assert done.returncode == 2, done
        assert "Traceback" not in done.stderr and ".tmp" not in done.stderr, done.stderr
        assert str(args[-1]) in done.stderr and done.stdout == ""
        assert "does not exist" in done.stderr or "is a directory" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_generate_into_a_closed_pipe_is_quiet(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(f"{sys.executable} -m grids generate --level 2 -o x.nc | head -1",
                          shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.startswith("wrote x.nc") and len(done.stdout.splitlines()) == 1
    assert "BrokenPipeError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == ""
    validate_mesh(read_mesh(tmp_path / "x.nc"))


def test_errors_go_to_stderr_everywhere(x1_162_path, tmp_path):
    for args in (["check", tmp_path / "missing.nc"], ["reorder", tmp_path / "missing.nc", "o.nc"],
                 ["generate", "--level", -1, "-o", "x.nc"], ["check", x1_162_path, "--radius", "inf"],
                 ["check", x1_162_path, "--radius", "nan"]):
        done = run(*args, cwd=tmp_path)
        assert done.returncode in (1, 2) and done.stdout == "" and done.stderr.strip(), args
        assert "Traceback" not in done.stderr and "Warning" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_one_labelled_unit_throughout(x1_162_path, tmp_path):
    done = run("generate", "--level", 2, "-o", "x.nc", cwd=tmp_path)
    last = done.stdout.strip().splitlines()[-1]
    assert last.strip().startswith("wall time ") and last.endswith(" s"), last
    done = run("check", x1_162_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    mesh = read_mesh(x1_162_path, sphere_radius=6371229.0)
    rows = dict(line.strip().split(": ", 1) for line in done.stdout.splitlines()
                if line.startswith("    "))
    # the quality rows are on the same (Earth) radius as the spacing line, in km, labelled
    assert rows["dcEdge_min"] == f"{mesh.dcEdge.min() / 1e3:.6g} km"
    assert rows["dvEdge_max"] == f"{mesh.dvEdge.max() / 1e3:.6g} km"
    assert f"dcEdge min {mesh.dcEdge.min() / 1e3:.4g} km" in done.stdout
    assert "Earth's radius" in done.stdout


def test_help_describes_every_argument(tmp_path):
    for command, names in (("generate", ["--format", "--order", "--output"]),
                           ("check", ["file", "--recompute-geometry"]),
                           ("reorder", ["input", "output", "--format"])):
        done = run(command, "--help", cwd=tmp_path)
        assert done.returncode == 0
        text = " ".join(done.stdout.split())
        options = text.split("options:")[-1] + text.split("positional arguments:")[-1]
        for name in names:
            after = options.split(name, 1)[1].split()
            assert after and not after[0].startswith("-"), (command, name, text)
    text = " ".join(run("generate", "--help", cwd=tmp_path).stdout.split())
    assert "(default morton)" in text and "default NETCDF4;" in text
    text = " ".join(run("reorder", "--help", cwd=tmp_path).stdout.split())
    assert "default NETCDF3_64BIT_OFFSET" in text


def test_grids_has_no_import_cycle():
    """Every import between grids modules, at module level or inside functions, forms no cycle."""
    import ast

    package = ROOT / "grids"
    graph = {}
    for path in package.glob("*.py"):
        name = path.stem
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module:
                    deps.add(node.module.split(".")[0])
                elif node.level == 1:
                    deps.update(a.name for a in node.names)
                elif node.level == 0 and (node.module or "").startswith("grids."):
                    deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names if a.name.startswith("grids."))
        graph[name] = deps - {name, "__init__"}

    def visit(node, stack):
        assert node not in stack, f"import cycle: {' -> '.join(stack + [node])}"
        for dep in sorted(graph.get(node, ())):
            visit(dep, stack + [node])

    for name in graph:
        if name != "__init__":
            visit(name, [])
