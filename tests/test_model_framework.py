"""The framework the models share (docs/decisions/0023-model-framework.md): the command line's
registry of models (a config names its model; an unknown one is one line listing the known ones),
imports that run one way only (grids -> meshops -> framework -> adjoint -> the models -> meshrun:
adjoint imports no model, no model imports another, no circles), no private name across packages,
one place for the time step, a global diagnostic as one registry entry, and a callback as one
registry entry with the run's files finished after it."""
import ast
import pathlib
import string

import netCDF4
import numpy as np
import pytest

from meshrun.models import MODELS
from tests.swm.test_faults import RANKS, error_of, make_config, ok, run_model

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The registered models, as the errors list them.
KNOWN = ", ".join(MODELS)


def _name(rng) -> str:
    return "".join(rng.choice(list(string.ascii_lowercase), size=int(rng.integers(4, 10))))


@pytest.mark.parametrize("ranks", RANKS)
def test_an_unknown_model_is_one_line_naming_the_known_ones(tmp_path, rng, ranks):
    name = _name(rng)
    path = make_config(tmp_path, "run", model=name)
    out = run_model(path, ranks=ranks)
    assert out.returncode == 2, out.stderr
    assert error_of(out.stderr) == (f"run_model.py: error: {path}: model = {name!r}: unknown model; "
                                    f"expected one of: {KNOWN}")
    assert not list(tmp_path.glob("*.nc*")) and not list(tmp_path.glob("*.lock"))
    out = run_model(make_config(tmp_path, "set"), "--set", f"model={name}", ranks=ranks)
    assert out.returncode == 2 and f"model = {name!r}: unknown model; expected one of: " \
        "shallow_water" in error_of(out.stderr)


def test_the_default_model_is_shallow_water_bitwise(tmp_path):
    """`model: shallow_water` written or left out: the same run, bitwise, and --print-config
    names the model."""
    named = make_config(tmp_path, "named", model="shallow_water", time={"days": 0.25, "dt": 1800},
                        output={"interval_hours": 3})
    plain = make_config(tmp_path, "plain", time={"days": 0.25, "dt": 1800}, output={"interval_hours": 3})
    ok(run_model(named, "--no-progress"))
    ok(run_model(plain, "--no-progress"))
    with netCDF4.Dataset(tmp_path / "named.nc") as a, netCDF4.Dataset(tmp_path / "plain.nc") as b:
        for name in ("h", "u", "mass", "energy", "max_cfl"):
            assert np.array_equal(a[name][:], b[name][:]), name
        assert "model: shallow_water" in a.config.splitlines()
    printed = ok(run_model(plain, "--print-config")).stdout
    assert printed.splitlines()[0] == "model: shallow_water"


def test_help_config_is_the_models(tmp_path, rng):
    import subprocess
    import sys

    lines = subprocess.run([sys.executable, str(ROOT / "run_model.py"), "--help-config"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines[0].startswith("model: one of shallow_water, default 'shallow_water' -- ")
    assert any(l.startswith("sensitivity.cost.kind: one of mean, energy, misfit") for l in lines)
    name = _name(rng)
    out = subprocess.run([sys.executable, str(ROOT / "run_model.py"), "--help-config", "--set",
                          f"model={name}"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"run_model.py: error: --set model={name}: unknown model; "
                                  f"expected one of: {KNOWN}")
    lines = subprocess.run([sys.executable, str(ROOT / "run_model.py"), "jw06_steady_l5",
                            "--help-config"], cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert any(l.startswith("vertical.nVertLevels:") for l in lines)     # the config's model's keys
    assert not any(l.startswith("sensitivity.cost.kind: one of mean, energy, misfit") for l in lines)


#: What each package may import of the project's packages: data flows one way. The adjoint's
#: generic tools and drivers sit below the models, whose applications (swm.sensitivity,
#: hydrostatic.fourdvar, ...) implement its protocols; the models (swm, hydrostatic, tracer) are
#: siblings on framework; the command line sits above all.
BELOW = {"grids": set(), "meshops": {"grids"}, "framework": {"grids", "meshops"},
         "adjoint": {"grids", "meshops", "framework"},
         "swm": {"grids", "meshops", "framework", "adjoint"},
         "hydrostatic": {"grids", "meshops", "framework", "adjoint"},
         "tracer": {"grids", "meshops", "framework"},
         "meshrun": {"grids", "meshops", "framework", "adjoint", "swm", "hydrostatic", "tracer"}}
#: The models: framework and adjoint import none, and none imports another.
MODEL_PACKAGES = ("swm", "hydrostatic", "tracer")


def imports(source: str) -> list[tuple[str, str]]:
    """(module, name) of every import of `source` (lazy ones inside functions too; name "" for
    `import module`), relative imports left out."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [(node.module, a.name) for a in node.names]
    return out


def model_imports(source: str) -> list[tuple[str, str]]:
    """The imports of `source` that name a model package."""
    return [(module, name) for module, name in imports(source)
            if module.split(".")[0] in MODEL_PACKAGES]


def project_modules() -> dict:
    """{dotted name: path} of every module of the project's packages (a package: its __init__)."""
    found = {}
    for package in BELOW:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: pathlib.Path, modules) -> set:
    """The project's modules that module `name` imports, at its top or inside its functions (a
    name imported from a module: that module; from a package: the submodule of that name, else
    the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".")[:len(name.split(".")) - node.level
                                         + (path.name == "__init__.py")]
                base = ".".join(package + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@pytest.fixture(scope="module")
def graph() -> dict:
    """{module: the project's modules it imports} of every module of the project."""
    modules = project_modules()
    return {name: imported(name, path, modules) for name, path in modules.items()}


@pytest.mark.parametrize("package", sorted(BELOW))
def test_nothing_imports_upward(package, graph):
    """Every import of every module of `package` (lazy ones inside functions too) names only
    the packages below it."""
    upward = [(name, target) for name, targets in graph.items() if name.split(".")[0] == package
              for target in sorted(targets)
              if target.split(".")[0] not in BELOW[package] | {package}]
    assert not upward, upward


def test_framework_imports_no_model_and_no_model_another(graph):
    """framework knows no model; swm, hydrostatic and tracer are siblings on it, none imports
    another."""
    crossing = [(name, target) for name, targets in graph.items() for target in sorted(targets)
                if (name.split(".")[0] == "framework" and target.split(".")[0] in MODEL_PACKAGES)
                or (name.split(".")[0] in MODEL_PACKAGES and target.split(".")[0] in MODEL_PACKAGES
                    and name.split(".")[0] != target.split(".")[0])]
    assert not crossing, crossing


def circles(graph: dict) -> list:
    """The import circles of `graph`: each set of two or more modules that import each other,
    directly or through one another (its strongly connected components, Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles(graph):
    """No two modules of the project import each other, directly or through others (imports
    inside functions count: they only hide a circle)."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert not circles(graph), circles(graph)


def test_the_adjoint_imports_no_model():
    """No module of `adjoint` imports a model package (swm, hydrostatic, tracer), at module level
    or in a function; the check itself finds a model's import at either level."""
    found = {str(path.relative_to(ROOT)): model_imports(path.read_text())
             for path in sorted((ROOT / "adjoint").rglob("*.py"))}
    assert {path: names for path, names in found.items() if names} == {}
    planted = ("import numpy\nfrom swm.output import stamp\n\n"
               "def run(config):\n    from swm.driver import setup, grid_reference\n"
               "    import hydrostatic.dynamics\n    from swm.output import History\n")
    assert model_imports(planted) == [("swm.output", "stamp"), ("swm.driver", "setup"),
                                      ("swm.driver", "grid_reference"),
                                      ("hydrostatic.dynamics", ""), ("swm.output", "History")]


def test_no_private_name_crosses_a_package():
    """A name with a leading underscore is imported only inside its own package."""
    crossing = []
    for package in BELOW:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                crossing += [(str(path.relative_to(ROOT)), n) for n in names
                             if n.split(".")[0] in BELOW and n.split(".")[0] != package
                             and any(part.startswith("_") and not part.startswith("__")
                                     for part in n.split("."))]
    assert not crossing, crossing


def test_the_swm_config_alone_knows_no_application(tmp_path):
    """`swm.config` (what `swm.run` reads) has the model's sections only; the command line's
    schema adds the adjoint's (`adjoint.config`)."""
    from meshrun.config import ShallowWaterConfig, load_config
    from framework.errors import ConfigError
    from swm.config import Config
    from swm.config import load_config as load_model_config

    assert not {"sensitivity", "fourdvar"} & set(Config.model_fields)
    assert issubclass(ShallowWaterConfig, Config)
    path = ROOT / "configs/sensitivity_williamson5.yaml"
    assert load_config(path).sensitivity.cost.kind == "mean"
    with pytest.raises(ConfigError, match="  sensitivity: unknown key .*expected one of: model, mesh"):
        load_model_config(path)


# -- one place for dt ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def level2():
    from grids.icosahedral import generate_icosahedral
    from framework.constants import EARTH_RADIUS

    return generate_icosahedral(2, sphere_radius=EARTH_RADIUS)


def test_the_model_dt_is_the_one_apvm_scales(level2, rng):
    """Physics takes its dt from the model: a physics with another dt is refused, and a model
    whose dt is set steps as one made with that dt, bitwise."""
    from swm import testcases
    from swm.model import Model
    from swm.tendencies import Physics

    state = testcases.williamson5(level2)
    fields = lambda: (state.h.copy(), state.u + rng_u, state.b, state.f_vertex)  # noqa: E731
    rng_u = rng.standard_normal(state.u.shape)
    dt, other = float(rng.uniform(300.0, 900.0)), float(rng.uniform(1000.0, 1500.0))
    physics = Physics(apvm=0.5, visc4=1e14)
    with pytest.raises(ValueError, match=f"physics.dt = {other}: differs from the model's dt = {dt}"):
        Model(level2, *fields(), dt, Physics(apvm=0.5, dt=other))
    made = Model(level2, *fields(), other, physics)
    moved = Model(level2, *fields(), dt, physics)
    assert moved.physics.dt == moved.dt == dt
    moved.dt = other
    assert moved.physics.dt == other
    for model in (made, moved):
        for _ in range(2):
            model.step()
    assert np.array_equal(made.h, moved.h) and np.array_equal(made.u, moved.u)
    assert made.time == moved.time == 2 * other


# -- a diagnostic, a callback: one registry entry each -----------------------------------------------

@pytest.fixture
def serial(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHOPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MESHOPS_NO_MPI", "1")


def test_a_diagnostic_is_one_registry_entry(tmp_path, serial, monkeypatch):
    """An entry added to `swm.variables.DIAGNOSTICS` alone is computed, reduced and written to
    the history with its units and long name."""
    from meshrun.config import load_config
    from swm.driver import run
    from swm.variables import DIAGNOSTICS, Diagnostic

    monkeypatch.setitem(DIAGNOSTICS, "u_max", Diagnostic(
        "u_max", "m s-1", "largest normal velocity", lambda s: [("max", s.xp.max(s.xp.abs(s.u)))]))
    path = make_config(tmp_path, "diag", time={"days": 0.25, "dt": 1800}, output={"interval_hours": 3})
    run(load_config(path), progress=False)
    with netCDF4.Dataset(tmp_path / "diag.nc") as ds:
        assert ds["u_max"].units == "m s-1" and ds["u_max"].long_name == "largest normal velocity"
        u = ds["u"][:]
        assert np.array_equal(ds["u_max"][:], np.abs(u).reshape(u.shape[0], -1).max(axis=1))
        assert ds["mass"][:].size == ds["u_max"][:].size == 3


def test_a_hydrostatic_diagnostic_is_one_registry_entry(tmp_path, serial, monkeypatch, rng):
    """An entry added to `hydrostatic.variables.DIAGNOSTICS` alone is computed, summed over the
    cells in global order and written to the history with its units and long name."""
    from hydrostatic.driver import run
    from hydrostatic.variables import DIAGNOSTICS, Diagnostic
    from meshops.device.backend import to_host
    from meshrun.config import load_config
    from tests.hydrostatic.test_run import config

    weight = float(rng.uniform(0.5, 2.0))
    monkeypatch.setitem(DIAGNOSTICS, "theta_squares", Diagnostic(
        "K2", "weighted sum of theta^2 over cells and levels", lambda model: weight * (
            to_host(model.theta_mass / model.mass).astype(np.float64) ** 2).sum(axis=1)))
    run(load_config(config(tmp_path, "diag", output={"variables": ["theta"]})), progress=False)
    with netCDF4.Dataset(tmp_path / "diag.nc") as ds:
        assert ds["theta_squares"].units == "K2"
        assert ds["theta_squares"].long_name == "weighted sum of theta^2 over cells and levels"
        theta = ds["theta"][:].astype(np.float64)
        np.testing.assert_allclose(ds["theta_squares"][:], weight * (theta ** 2).sum(axis=(1, 2)),
                                   rtol=1e-12)
        assert ds["mass"][:].size == ds["theta_squares"][:].size == 3


def test_a_callback_is_one_registry_entry_and_the_files_finish_after_it(tmp_path, serial, monkeypatch,
                                                                         rng):
    """An entry added to `swm.callbacks.CALLBACKS` is built for every run and fires on its
    schedule; a write it queues in its own finish is done (the writer thread is closed after
    every callback, not by the callbacks' order)."""
    from meshrun.config import load_config
    from swm.callbacks import CALLBACKS
    from swm.driver import build_simulation
    from framework.schedules import IterationInterval

    every = int(rng.integers(2, 5))
    seen, marker = [], tmp_path / "last.txt"

    class Last:
        schedule = IterationInterval(every)

        def __init__(self, writer):
            self.writer = writer

        def __call__(self, sim):
            seen.append(sim.step)

        def finish(self, sim, outcome):
            self.writer.submit(lambda: marker.write_text(f"{outcome} {sim.step}"))

    monkeypatch.setitem(CALLBACKS, "last", lambda config, run: Last(run.writer))
    path = make_config(tmp_path, "cb", time={"days": 0.5, "dt": 3600}, output={"interval_hours": 6})
    sim, _ = build_simulation(load_config(path), progress=False)
    assert list(sim.callbacks) == ["progress", "history", "restart", "last"]
    sim.run()
    assert seen == list(range(every, 13, every))
    assert marker.read_text() == "finished 12" and (tmp_path / "cb.nc").exists()


def test_meshrun_runs_any_model_from_python(tmp_path, rng):
    """`meshrun.run` runs a config of either model (a shipped name or a validated config, with
    overrides) and returns its history; a bad key is the config's error, naming it."""
    import meshrun
    from framework.errors import ConfigError
    from meshrun.config import load_config

    days = int(rng.integers(1, 3))
    files = [f"output.path={tmp_path}/jw.nc", f"restart.path={tmp_path}/jw.restart.nc"]
    jw = meshrun.run("jw06_steady_l5", "mesh.generate.level=2", f"time.days={days}",
                     "time.dt=3600", *files)
    assert jw.sizes["Time"] == days + 1 and jw.surface_pressure.shape == (days + 1, 162)
    config = load_config("configs/williamson5.yaml", ["mesh.generate.level=2", "time.days=1"])
    sw = meshrun.run(config, f"output.path={tmp_path}/w5.nc", f"restart.path={tmp_path}/w5.restart.nc")
    assert sw.h.shape == (2, 162, 1) and float(abs(sw.mass[-1] / sw.mass[0] - 1)) < 1e-13
    with pytest.raises(ConfigError, match="time.dayz"):
        meshrun.run("jw06_steady_l5", "time.dayz=1")
