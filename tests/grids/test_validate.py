"""Bad mesh files: copies of the real x1.162 file with one thing corrupted each. Every one must
raise MeshError naming the file, the field and the bad value, never fail deep inside NumPy."""
import netCDF4
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grids import MeshError, read_mesh, validate_mesh
from grids.mesh import COUNT_FIELDS, INDEX_FIELDS


def load(path):
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_maskandscale(False)
        dims = {name: (None if d.isunlimited() else len(d)) for name, d in ds.dimensions.items()}
        variables = {name: (var.dimensions, np.array(var[...])) for name, var in ds.variables.items()}
        attributes = {name: ds.getncattr(name) for name in ds.ncattrs()}
    return dims, variables, attributes


def save(path, dims, variables, attributes, fmt="NETCDF3_64BIT_OFFSET"):
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.set_fill_off()
        ds.setncatts(attributes)
        for name, size in dims.items():
            ds.createDimension(name, size)
        for name, (vdims, arr) in variables.items():
            ds.createVariable(name, arr.dtype, vdims)[...] = arr
    return path


@pytest.fixture(scope="module")
def original(x1_162_path):
    return load(x1_162_path)


@pytest.fixture
def corrupt(original, tmp_path):
    """corrupt(change) -> path of a copy of x1.162 after change(dims, variables, attributes)."""
    def make(change, name="bad.nc"):
        dims, variables, attributes = original
        dims = dict(dims)
        variables = {k: (d, a.copy()) for k, (d, a) in variables.items()}
        attributes = dict(attributes)
        change(dims, variables, attributes)
        return save(tmp_path / name, dims, variables, attributes)
    return make


def expect_error(path, field, value=None, text=None):
    with pytest.raises(MeshError) as info:
        read_mesh(path)
    err = info.value
    message = str(err)
    assert str(path) in message and err.file == str(path)
    assert err.field == field and field in message, message
    if value is not None:
        assert repr(value) in message or str(value) in message, message
    if text is not None:
        assert text in message, message
    assert err.expected and "expected" in message
    return err


def random_row(n):
    return int(np.random.default_rng().integers(n))


def test_missing_variable(corrupt):
    path = corrupt(lambda d, v, a: v.pop("verticesOnEdge"))
    expect_error(path, "verticesOnEdge", text="missing variable")


def test_missing_dimension(corrupt):
    def change(d, v, a):
        for name in [k for k, (dims, _) in v.items() if "vertexDegree" in dims]:
            v.pop(name)
        d.pop("vertexDegree")
    expect_error(corrupt(change), "vertexDegree", text="missing dimension")


def test_index_out_of_range(corrupt, original):
    c, j = random_row(162), random_row(5)
    bad = 480 + 1 + random_row(1000)

    def change(d, v, a):
        v["edgesOnCell"][1][c, j] = bad
    err = expect_error(corrupt(change), "edgesOnCell", value=bad, text="out of range")
    assert err.index == (c, j) and err.value == bad and "1..480" in err.expected


def test_edge_with_one_cell(corrupt):
    e = random_row(480)

    def pad(d, v, a):
        v["cellsOnEdge"][1][e, 1] = 0
    err = expect_error(corrupt(pad), "cellsOnEdge", value=0, text="missing neighbour")
    assert err.index == (e, 1)

    def same(d, v, a):
        v["cellsOnEdge"][1][e, 1] = v["cellsOnEdge"][1][e, 0]
    err = expect_error(corrupt(same, "same.nc"), "cellsOnEdge", text="joins a cell to itself")
    assert err.index == e


@pytest.mark.parametrize("field", ["areaCell", "dvEdge", "kiteAreasOnVertex"])
@pytest.mark.parametrize("sign", [0.0, -1.0])
def test_non_positive_area_or_length(corrupt, original, field, sign):
    arr = original[1][field][1]
    i = random_row(arr.shape[0])
    bad = sign * float(arr.flat[i * (arr.size // arr.shape[0])])

    def change(d, v, a):
        v[field][1].reshape(arr.shape[0], -1)[i, 0] = bad
    err = expect_error(corrupt(change), field, value=bad, text="not positive")
    assert (err.index if np.ndim(arr) == 1 else err.index[0]) == i


@pytest.mark.parametrize("field,bad", [("xCell", np.nan), ("zVertex", np.inf), ("yEdge", -np.inf)])
def test_non_finite_coordinates(corrupt, field, bad):
    i = random_row(162)

    def change(d, v, a):
        v[field][1][i] = bad
    err = expect_error(corrupt(change), field, text="not finite")
    assert err.index == i and str(bad) in str(err)


def test_position_off_the_sphere(corrupt, original):
    i = random_row(320)
    factor = 1 + np.random.default_rng().uniform(1e-3, 0.5)

    def change(d, v, a):
        for c in "xyz":
            v[f"{c}Vertex"][1][i] *= factor
    err = expect_error(corrupt(change), "xVertex", text="off the sphere")
    assert err.index == i and err.value == pytest.approx(factor)


@pytest.mark.parametrize("keep_zero_pads", [False, True])
def test_zero_based_file_claimed_as_mpas(corrupt, keep_zero_pads):
    def change(d, v, a):
        for name in INDEX_FIELDS:
            arr = v[name][1]
            arr -= (arr > 0) if keep_zero_pads else 1
    err = expect_error(corrupt(change), "edgesOnCell", text="0-based")
    assert "max 479" in str(err) and "1..480" in err.expected


def test_reversed_orientation_of_one_cell(corrupt, original):
    noc = original[1]["nEdgesOnCell"][1]
    c = random_row(162)
    n = int(noc[c])

    def change(d, v, a):
        eoc, coc, voc = (v[k][1] for k in ("edgesOnCell", "cellsOnCell", "verticesOnCell"))
        j = np.arange(n)
        eoc[c, :n] = eoc[c, n - 1 - j]
        coc[c, :n] = coc[c, n - 1 - j]
        voc[c, :n] = voc[c, (n - 2 - j) % n]       # vertex j between edges j and j+1 again
    err = expect_error(corrupt(change), "edgesOnCell", text="not counter-clockwise")
    assert err.index == c


def test_reversed_normal_and_tangent(corrupt):
    e = random_row(480)

    def normal(d, v, a):
        v["cellsOnEdge"][1][e] = v["cellsOnEdge"][1][e, ::-1].copy()
    assert expect_error(corrupt(normal), "cellsOnEdge", text="normal").index == e

    def tangent(d, v, a):
        v["verticesOnEdge"][1][e] = v["verticesOnEdge"][1][e, ::-1].copy()
    assert expect_error(corrupt(tangent, "t.nc"), "verticesOnEdge", text="tangent").index == e


@pytest.mark.parametrize("count", [2, 7])
def test_count_out_of_range(corrupt, count):
    c = random_row(162)

    def change(d, v, a):
        v["nEdgesOnCell"][1][c] = count
    err = expect_error(corrupt(change), "nEdgesOnCell", value=count, text="3 <= nEdgesOnCell <= maxEdges = 6")
    assert err.index == c


def test_not_netcdf_and_truncated(x1_162_path, tmp_path):
    data = x1_162_path.read_bytes()
    rng = np.random.default_rng()
    cases = {
        "truncated.nc": data[: int(rng.integers(100, len(data) // 2))],
        "text.nc": b"netcdf x1 {\n dimensions: nCells = 162 ;\n}\n",
        "empty.nc": b"",
        "noise.nc": rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(),
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(MeshError) as info:
            read_mesh(path)
        assert str(path) in str(info.value) and "netCDF" in str(info.value), name


def test_validate_mesh_in_memory(x1_162_path):
    mesh = read_mesh(x1_162_path)
    validate_mesh(mesh)
    c = random_row(162)
    signs = mesh.edgeSignOnCell.copy()
    signs[c, 0] *= -1
    with pytest.raises(MeshError, match=rf"<memory>: edgeSignOnCell\[{c}, 0\]") as info:
        validate_mesh(mesh.replace(edgeSignOnCell=signs))
    assert info.value.expected.startswith("+1 where")
    eoe = mesh.edgesOnEdge.copy()
    e = random_row(480)
    eoe[e, 1] = eoe[e, 0]                                   # an edge listed twice
    with pytest.raises(MeshError, match="listed twice"):
        validate_mesh(mesh.replace(edgesOnEdge=eoe), source="here")
    with pytest.raises(MeshError, match="nCellsSolve"):
        validate_mesh(mesh.replace(nCellsSolve=163))
    with pytest.raises(MeshError, match="shape"):
        validate_mesh(mesh.replace(areaCell=mesh.areaCell[:-1]))


# -- random corruptions of index and count fields --------------------------------------------------
_FIELDS = list(INDEX_FIELDS) + list(COUNT_FIELDS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_index_corruption_is_reported(original, tmp_path, data):
    """Any single changed entry of an index or count field is either refused with a MeshError
    naming the file and a field, or leaves a file that reads and validates."""
    dims, variables, attributes = original
    name = data.draw(st.sampled_from(_FIELDS), label="field")
    arr = variables[name][1]
    flat = data.draw(st.integers(0, arr.size - 1), label="position")
    old = int(arr.flat[flat])
    value = data.draw(st.one_of(st.integers(-3, 490), st.sampled_from([-2**31, 2**31 - 1])),
                      label="value")
    new = arr.copy()
    new.flat[flat] = value
    path = save(tmp_path / "random.nc", dims, {**variables, name: (variables[name][0], new)},
                attributes)
    try:
        read_mesh(path)
    except MeshError as err:
        message = str(err)
        assert err.file == str(path) and str(path) in message
        assert err.field is not None and err.field in message
        assert "expected" in message
    else:
        assert value == old, f"{name}.flat[{flat}]: {old} -> {value} was not detected"
