"""Issue 14: bad MPAS partition (`graph.info.part.N`) and graph (`graph.info`) files, made from the
real x1.162 mesh; each error is a PartitionError naming the file, the line and what was expected."""
import numpy as np
import pytest

from grids import read_mesh
from grids.partition import (PartitionError, partition_sfc, read_graph_info, read_partition,
                             write_graph_info, write_partition)


@pytest.fixture(scope="module")
def x1(x1_162_path):
    return read_mesh(x1_162_path)


@pytest.fixture
def part_lines(x1, tmp_path):
    path = tmp_path / "x1.162.graph.info.part.4"
    write_partition(path, partition_sfc(x1, 4))
    return path, path.read_bytes().split(b"\n")


def rewrite(path, lines):
    path.write_bytes(b"\n".join(lines))
    return path


@pytest.mark.parametrize("line, text, expected", [
    (5, b"12345678901234567890", "rank id 12345678901234567890 out of range, expected 0..3"),
    (7, "\u00b2".encode(), "expected an integer rank id in [0, 4) in ASCII digits"),
    (7, "\u0663".encode(), "ASCII digits"),                     # Arabic-Indic three
    (9, b"\x00\xff\xfe\x89", "ASCII digits"),
    (11, b"-1", "rank id -1 out of range"),
    (11, b"4", "rank id 4 out of range, expected 0..3"),
    (11, b"1 2", "expected an integer rank id"),
    (11, b"", "expected an integer rank id")])
def test_bad_partition_lines(part_lines, x1, line, text, expected):
    path, lines = part_lines
    lines[line - 1] = text
    with pytest.raises(PartitionError) as info:
        read_partition(rewrite(path, lines), x1.nCells)
    message = str(info.value)
    assert message.startswith(f"{path}: line {line}") and expected in message, message
    assert type(info.value) is PartitionError


def test_partition_file_name_with_no_ranks(part_lines, x1, tmp_path):
    path, lines = part_lines
    zero = rewrite(tmp_path / "x.part.0", lines)
    with pytest.raises(PartitionError, match=r"x\.part\.0: the name says 0 ranks.*N >= 1"):
        read_partition(zero, x1.nCells)
    with pytest.raises(PartitionError, match="nparts = 0, expected an integer >= 1"):
        read_partition(path, x1.nCells, nparts=0)


def test_partition_line_count_and_empty_rank(part_lines, x1):
    path, lines = part_lines
    with pytest.raises(PartitionError, match="161 lines, expected one rank id per cell"):
        read_partition(rewrite(path, lines[:160] + lines[161:]), x1.nCells)
    with pytest.raises(PartitionError, match="rank 3 owns no cell"):
        read_partition(rewrite(path, [b"0" if ln.strip() == b"3" else ln for ln in lines]),
                       x1.nCells)


@pytest.fixture
def graph_lines(x1, tmp_path):
    path = tmp_path / "x1.162.graph.info"
    write_graph_info(x1, path, weights=np.arange(1, x1.nCells + 1))
    return path, path.read_bytes().split(b"\n")


def test_the_graph_reads_back(graph_lines, x1):
    path, _ = graph_lines
    xadj, adjncy, weights = read_graph_info(path)
    assert np.array_equal(weights, np.arange(1, x1.nCells + 1)) and adjncy.size == 2 * x1.nEdges


def test_graph_empty_line_with_weights(graph_lines):
    path, lines = graph_lines
    lines[10] = b""
    with pytest.raises(PartitionError, match=r"line 11 is empty, expected the weight of cell 10 "
                                             r"first \(fmt 010\)"):
        read_graph_info(rewrite(path, lines))


@pytest.mark.parametrize("fmt, what", [(b"011", "cell and edge weights"), (b"001", "edge weights"),
                                       (b"1", "edge weights"), (b"100", "vertex sizes"),
                                       (b"7", "unknown")])
def test_graph_unsupported_formats_are_named(graph_lines, fmt, what):
    path, lines = graph_lines
    n, m, _ = lines[0].split()
    lines[0] = b" ".join([n, m, fmt])
    with pytest.raises(PartitionError) as info:
        read_graph_info(rewrite(path, lines))
    assert f"line 1: fmt {fmt.decode()!r} ({what}) is not supported" in str(info.value)


def test_graph_asymmetric_self_loop_duplicate_and_bad_weights(graph_lines):
    path, lines = graph_lines
    good = list(lines)
    row = lines[4].split()                         # cell 4: weight, then its neighbours
    other = int(row[1])
    # asymmetric: cell 4 drops its first neighbour, the neighbour still lists 4
    lines[4] = b" ".join([row[0]] + row[2:])
    with pytest.raises(PartitionError, match=rf"line {other + 1}: cell {other} lists neighbour 4, "
                                             rf"but line 5 \(cell 4\) does not list {other}"):
        read_graph_info(rewrite(path, lines))
    lines = list(good)
    lines[4] = b" ".join(row + [b"4"])
    with pytest.raises(PartitionError, match="line 5: cell 4 lists itself"):
        read_graph_info(rewrite(path, lines))
    lines = list(good)
    lines[4] = b" ".join(row + [row[1]])
    with pytest.raises(PartitionError, match=rf"line 5: neighbour {other} of cell 4 listed twice"):
        read_graph_info(rewrite(path, lines))
    for weight in (b"0", b"-3"):
        lines = list(good)
        lines[4] = b" ".join([weight] + row[1:])
        with pytest.raises(PartitionError, match=rf"line 5: weight {int(weight)} of cell 4, "
                                                 "expected a positive integer"):
            read_graph_info(rewrite(path, lines))
    lines = list(good)
    lines[6] = lines[6] + " \u00b2".encode()
    with pytest.raises(PartitionError, match="line 7 = .*expected integers"):
        read_graph_info(rewrite(path, lines))
