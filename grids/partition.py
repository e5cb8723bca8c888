"""Partition the cells of a mesh over ranks; MPAS `graph.info` / `graph.info.part.N` files.

A partition is an int array `cell_owner` of shape (nCells,): the rank (0 .. nparts-1) owning each
cell. Methods:

- `partition_metis`: METIS k-way (pymetis) on the cell adjacency graph (cellsOnCell), optionally
  weighted per cell (e.g. by the number of active levels);
- `partition_sfc`: a space-filling curve (3-D Hilbert order of the cell centres) cut into parts of
  equal weight, used when pymetis is missing;
- `read_partition` / `write_partition`: MPAS `graph.info.part.N` files (one 0-based rank id per
  line, line i for cell i), so partitions made by MPAS tools (gpmetis graph.info N) can be used;
  `write_graph_info` / `read_graph_info`: the METIS graph MPAS writes (1-based neighbours, first line
  "nCells nEdges [fmt]", fmt "010" when each line starts with a cell weight).

`partition_quality` reports the edge cut (cell pairs across ranks, i.e. mesh edges between cells of
different ranks) and the imbalance max(part weight) / mean(part weight).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from .atomic import atomic_path
from .reorder import sfc_order


class PartitionError(ValueError):
    """A bad partition or graph file, or a partition that does not fit the mesh."""


# -- graph --------------------------------------------------------------------------------------

def cell_graph(mesh) -> tuple[np.ndarray, np.ndarray]:
    """CSR adjacency (xadj, adjncy) of the cells: the valid cellsOnCell[c, j < nEdgesOnCell[c]]."""
    coc = np.asarray(mesh.cellsOnCell)
    used = np.arange(coc.shape[1])[None, :] < np.asarray(mesh.nEdgesOnCell)[:, None]
    valid = used & (coc >= 0)
    xadj = np.zeros(coc.shape[0] + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=xadj[1:])
    return xadj, coc[valid].astype(np.int64)


def _check_weights(weights, n: int, name: str = "weights") -> np.ndarray | None:
    if weights is None:
        return None
    w = np.asarray(weights)
    if w.shape != (n,):
        raise PartitionError(f"{name}: expected one weight per cell, shape ({n},), got {w.shape}")
    if not np.issubdtype(w.dtype, np.integer):
        if not np.all(w == np.round(w)):
            bad = int(np.flatnonzero(w != np.round(w))[0])
            raise PartitionError(f"{name}[{bad}] = {w[bad]!r}: expected an integer level count")
        w = w.astype(np.int64)
    bad = np.flatnonzero(w < 1)
    if bad.size:
        raise PartitionError(f"{name}[{bad[0]}] = {w[bad[0]]}: expected a level count >= 1")
    return w.astype(np.int64)


# -- METIS ----------------------------------------------------------------------------------------

def metis_available() -> bool:
    try:
        import pymetis  # noqa: F401
    except ImportError:
        return False
    return True


#: Partitions METIS computes per call (the best edge cut is kept).
METIS_NCUTS = 4


def partition_metis(mesh, nparts: int, *, weights=None) -> np.ndarray:
    """METIS k-way partition of the cell graph into `nparts` parts: (nCells,) int32 rank ids.

    `weights` (nCells,) are per-cell integer weights (the level count of each column).
    """
    import pymetis

    nparts = _check_nparts(nparts, mesh.nCells)
    if nparts == 1:
        return np.zeros(mesh.nCells, dtype=np.int32)
    w = _check_weights(weights, mesh.nCells)
    xadj, adjncy = cell_graph(mesh)
    # k-way; ncuts: METIS computes 4 partitions and keeps the one with the smallest edge cut
    kwargs = {"recursive": False, "options": pymetis.Options(ncuts=METIS_NCUTS)}
    if w is not None:
        kwargs["vweights"] = w

    def part():
        if hasattr(pymetis, "CSRAdjacency"):    # pymetis >= 2025.2
            return pymetis.part_graph(nparts, adjacency=pymetis.CSRAdjacency(xadj, adjncy),
                                      **kwargs)[1]
        return pymetis.part_graph(nparts, xadj=xadj, adjncy=adjncy, **kwargs)[1]

    owner = _without_signals(part, mesh.nCells)
    check_partition(owner, mesh.nCells, nparts, source="METIS")
    return owner


def _without_signals(part, n: int) -> np.ndarray:
    """`part()` (n rank ids) computed in a forked child with SIGTERM and SIGINT blocked, the
    result sent back through a pipe. METIS (GKlib) traps SIGTERM as its own error signal while it
    runs, in whichever thread the kernel delivers it to, and then fails or crashes: in the child it
    never sees the signal, which stays with the caller (whose handler stops the run; the child is
    killed). Where SIGTERM has its default action (a library use, no handler to keep it for) or
    without fork (not POSIX): `part()` here."""
    import signal

    if not hasattr(os, "fork") or signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        return np.asarray(part(), dtype=np.int32)      # nobody handles SIGTERM: nothing to keep
    import pickle

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                        # the child: never returns
        status = 1
        try:
            os.close(read_end)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
            try:
                payload = pickle.dumps(("ok", np.asarray(part(), dtype=np.int32)))
            except Exception as exc:  # noqa: BLE001 - sent to the caller, raised there
                payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            payload = pipe.read()
        os.waitpid(pid, 0)
        pid = None
    finally:
        if pid is not None:                             # a signal (or error) while it ran
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if not payload:
        raise RuntimeError("METIS: the partitioning process ended without a result")
    kind, value = pickle.loads(payload)
    if kind == "error":
        raise RuntimeError(f"METIS: {value}")
    if value.shape != (n,):
        raise RuntimeError(f"METIS: {value.shape[0]} rank ids for {n} cells")
    return value


# -- space-filling curve --------------------------------------------------------------------------

def partition_sfc(mesh, nparts: int, *, weights=None) -> np.ndarray:
    """Cut the Hilbert order of the cell centres (`grids.reorder.sfc_order`) into `nparts` runs of
    equal total weight."""
    nparts = _check_nparts(nparts, mesh.nCells)
    w = _check_weights(weights, mesh.nCells)
    w = np.ones(mesh.nCells, dtype=np.int64) if w is None else w
    centres = np.stack([mesh.xCell, mesh.yCell, mesh.zCell], axis=1)
    order = sfc_order(centres / np.linalg.norm(centres, axis=1)[:, None], "hilbert")
    before = np.cumsum(w[order]) - w[order]          # weight of the cells before each in the order
    part = np.minimum(before * nparts // w.sum(), nparts - 1).astype(np.int32)
    owner = np.empty(mesh.nCells, dtype=np.int32)
    owner[order] = part
    check_partition(owner, mesh.nCells, nparts, source="space-filling curve")
    return owner


def partition_cells(mesh, nparts: int, *, method: str = "auto", weights=None) -> np.ndarray:
    """Partition with `method` "metis", "sfc", or "auto" (METIS when pymetis imports, else SFC)."""
    if method == "auto":
        method = "metis" if metis_available() else "sfc"
    if method == "metis":
        return partition_metis(mesh, nparts, weights=weights)
    if method == "sfc":
        return partition_sfc(mesh, nparts, weights=weights)
    raise PartitionError(f"partition method {method!r}: expected 'auto', 'metis' or 'sfc'")


def _check_nparts(nparts, ncells: int) -> int:
    if int(nparts) != nparts or not 1 <= nparts <= ncells:
        raise PartitionError(f"nparts = {nparts!r}: expected an integer in [1, nCells={ncells}]")
    return int(nparts)


# -- checks and quality ---------------------------------------------------------------------------

def check_partition(owner, ncells: int, nparts: int, *, source: str = "partition") -> np.ndarray:
    """Check length, range and that no rank is empty; return `owner` as int32."""
    owner = np.asarray(owner)
    if owner.shape != (ncells,):
        raise PartitionError(f"{source}: {owner.shape[0] if owner.ndim == 1 else owner.shape} "
                             f"entries, expected one rank id per cell (nCells={ncells})")
    bad = np.flatnonzero((owner < 0) | (owner >= nparts))
    if bad.size:
        raise PartitionError(f"{source}: cell {bad[0]} has rank id {owner[bad[0]]}, "
                             f"expected a rank in [0, {nparts})")
    counts = np.bincount(owner, minlength=nparts)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise PartitionError(f"{source}: rank {empty[0]} owns no cell (of {nparts} ranks); "
                             "expected every rank to own at least one cell")
    return owner.astype(np.int32)


@dataclass
class PartitionQuality:
    nparts: int
    edge_cut: int            # mesh edges whose two cells lie on different ranks
    edge_cut_fraction: float  # edge_cut / number of interior edges
    imbalance: float         # max part weight / mean part weight
    part_weights: np.ndarray

    def __str__(self) -> str:
        return (f"{self.nparts} parts: edge cut {self.edge_cut} ({100 * self.edge_cut_fraction:.1f}% "
                f"of edges), imbalance {self.imbalance:.4f}, weights {self.part_weights.min()}.."
                f"{self.part_weights.max()}")


def partition_quality(mesh, owner, *, weights=None) -> PartitionQuality:
    """Edge cut and imbalance of a partition (weights: per-cell, default 1)."""
    nparts = int(np.max(owner)) + 1
    owner = check_partition(owner, mesh.nCells, nparts)
    coe = np.asarray(mesh.cellsOnEdge)
    interior = (coe[:, 0] >= 0) & (coe[:, 1] >= 0)
    a, b = coe[interior, 0], coe[interior, 1]
    cut = int(np.count_nonzero(owner[a] != owner[b]))
    w = _check_weights(weights, mesh.nCells)
    w = np.ones(mesh.nCells, dtype=np.int64) if w is None else w
    part_weights = np.bincount(owner, weights=w, minlength=nparts).astype(np.int64)
    return PartitionQuality(nparts, cut, cut / max(int(interior.sum()), 1),
                            float(part_weights.max() / part_weights.mean()), part_weights)


# -- MPAS files -----------------------------------------------------------------------------------

def _atomic_write(path, text: str) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text)


def write_graph_info(mesh, path, *, weights=None) -> None:
    """Write the METIS graph of the cells as MPAS's `graph.info` (1-based neighbours)."""
    xadj, adjncy = cell_graph(mesh)
    w = _check_weights(weights, mesh.nCells)
    header = f"{mesh.nCells} {adjncy.size // 2}" + ("" if w is None else " 010")
    lines = [header]
    rows = np.split(adjncy + 1, xadj[1:-1])
    for c, row in enumerate(rows):
        items = ([str(w[c])] if w is not None else []) + [str(v) for v in row]
        lines.append(" ".join(items))
    _atomic_write(path, "\n".join(lines) + "\n")


_INT_LINE = re.compile(rb"[ \t\r]*(-?[0-9]+)[ \t\r]*")
_INTS_LINE = re.compile(rb"[ \t\r]*(?:-?[0-9]+[ \t\r]+)*(?:-?[0-9]+)?[ \t\r]*")
#: METIS graph formats (`fmt` in the header) and whether they are read.
_GRAPH_FORMATS = {"0": "no weights", "000": "no weights", "10": "cell weights",
                  "010": "cell weights", "1": "edge weights", "001": "edge weights",
                  "11": "cell and edge weights", "011": "cell and edge weights",
                  "100": "vertex sizes", "101": "vertex sizes and edge weights",
                  "110": "vertex sizes and cell weights", "111": "vertex sizes and both weights"}


def _text(line: bytes) -> str:
    """A file's line as printed in messages (non-ASCII bytes shown escaped)."""
    return repr(line.rstrip(b"\r").decode("ascii", errors="backslashreplace"))


def _read_lines(path: str) -> list[bytes]:
    """The file's lines as bytes (trailing empty lines dropped); PartitionError when unreadable."""
    if os.path.isdir(path):
        raise PartitionError(f"{path}: is a directory, expected a text file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise PartitionError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    lines = data.split(b"\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


_DIGITS_ONLY = bytes.maketrans(b"", b"")


def _fast_ids(lines: list[bytes]) -> np.ndarray | None:
    """The lines as int64 when each is one run of 1..18 ASCII digits (the usual file), else None."""
    if not lines:
        return None
    data = b"\n".join(lines)
    if data.translate(_DIGITS_ONLY, b"0123456789\n"):
        return None
    if any(len(ln) == 0 or len(ln) > 18 for ln in lines):
        return None
    return np.array(lines).astype(np.int64)


def read_graph_info(path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Read an MPAS/METIS `graph.info`: (xadj, adjncy 0-based, weights or None).

    Header "nCells nEdges [fmt]": fmt absent, 0 or 000 (no weights) and 10 or 010 (a positive
    integer cell weight first on each line) are read; other METIS formats (edge weights, vertex
    sizes, several constraints) are refused by name. `%` lines are comments. Each of the nCells
    lines lists its neighbours 1-based; the adjacency must be symmetric, without self-loops or
    repeated neighbours, and hold 2 x nEdges entries. Errors (PartitionError) name the file, the
    line (1-based, as an editor counts, comments included) and what was expected.
    """
    path = os.fspath(path)
    raw = _read_lines(path)
    numbered = [(k + 1, ln) for k, ln in enumerate(raw) if not ln.lstrip().startswith(b"%")]
    if not numbered:
        raise PartitionError(f"{path}: empty file, expected a header 'nCells nEdges [fmt]'")
    head_no, head_line = numbered[0]
    head = head_line.split()
    if not (2 <= len(head) <= 4) or not _INTS_LINE.fullmatch(head_line) \
            or any(len(h) > 18 for h in head[:2]):
        raise PartitionError(f"{path}: line {head_no} = {_text(head_line)}, expected the header "
                             "'nCells nEdges [fmt]' in ASCII digits")
    n, m = int(head[0]), int(head[1])
    if n < 1 or m < 0:
        raise PartitionError(f"{path}: line {head_no}: nCells {n}, nEdges {m}; expected nCells >= 1 "
                             "and nEdges >= 0")
    fmt = head[2].decode() if len(head) > 2 else "0"
    if fmt not in ("0", "000", "10", "010"):
        what = _GRAPH_FORMATS.get(fmt, "unknown")
        raise PartitionError(f"{path}: line {head_no}: fmt {fmt!r} ({what}) is not supported; "
                             "expected fmt absent, 0 or 010 (one cell weight per line)")
    if len(head) > 3 and int(head[3]) != 1:
        raise PartitionError(f"{path}: line {head_no}: ncon {int(head[3])} (several weights per "
                             "cell) is not supported; expected one weight per cell")
    has_w = fmt in ("10", "010")
    rows = numbered[1:]
    if len(rows) != n:
        raise PartitionError(f"{path}: {len(rows)} adjacency lines, expected nCells={n}")
    xadj = np.zeros(n + 1, dtype=np.int64)
    adj, weights = [], np.ones(n, dtype=np.int64) if has_w else None
    for i, (no, ln) in enumerate(rows):
        parts = ln.split()
        if not _INTS_LINE.fullmatch(ln) or any(len(v.lstrip(b"-")) > 18 for v in parts):
            raise PartitionError(f"{path}: line {no} = {_text(ln)}, expected integers (ASCII digits)")
        vals = [int(v) for v in parts]
        if has_w:
            if not vals:
                raise PartitionError(f"{path}: line {no} is empty, expected the weight of cell "
                                     f"{i + 1} first (fmt {fmt}), then its neighbours")
            if vals[0] <= 0:
                raise PartitionError(f"{path}: line {no}: weight {vals[0]} of cell {i + 1}, expected "
                                     "a positive integer")
            weights[i], vals = vals[0], vals[1:]
        for v in vals:
            if not 1 <= v <= n:
                raise PartitionError(f"{path}: line {no}: neighbour {v}, expected 1..{n}")
            if v == i + 1:
                raise PartitionError(f"{path}: line {no}: cell {i + 1} lists itself as a neighbour "
                                     "(a self-loop); expected other cells only")
        if len(set(vals)) != len(vals):
            twice = next(v for v in vals if vals.count(v) > 1)
            raise PartitionError(f"{path}: line {no}: neighbour {twice} of cell {i + 1} listed twice; "
                                 "expected each neighbour once")
        adj.append(vals)
        xadj[i + 1] = xadj[i] + len(vals)
    adjncy = np.fromiter((v for row in adj for v in row), dtype=np.int64, count=int(xadj[-1])) - 1
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(xadj))
    keys = src * n + adjncy
    missing = np.flatnonzero(~np.isin(adjncy * n + src, keys))
    if missing.size:
        k = int(missing[0])
        c, nb = int(src[k]), int(adjncy[k])
        raise PartitionError(f"{path}: line {rows[c][0]}: cell {c + 1} lists neighbour {nb + 1}, but "
                             f"line {rows[nb][0]} (cell {nb + 1}) does not list {c + 1}; expected a "
                             "symmetric adjacency")
    if adjncy.size != 2 * m:
        raise PartitionError(f"{path}: {adjncy.size} adjacency entries, expected 2 x nEdges = {2 * m} "
                             f"(nEdges from line {head_no})")
    return xadj, adjncy, weights


def write_partition(path, owner) -> None:
    """Write `graph.info.part.N`: one 0-based rank id per line, line i for cell i."""
    owner = np.asarray(owner)
    _atomic_write(path, "\n".join(str(int(r)) for r in owner) + "\n")


def read_partition(path, ncells: int, nparts: int | None = None) -> np.ndarray:
    """Read `graph.info.part.N` for a mesh of `ncells` cells: (nCells,) int32 rank ids.

    `nparts` defaults to N from the file name's `.part.N` suffix (N >= 1). Errors (PartitionError)
    name the file, the line (1-based) and the value: a wrong line count, anything but one integer
    in ASCII digits on a line (binary bytes, other scripts' digits), a rank id out of [0, nparts),
    a rank that owns no cell.
    """
    path = os.fspath(path)
    if nparts is None:
        match = re.search(r"\.part\.([0-9]+)$", path)
        if match is None:
            raise PartitionError(f"{path}: cannot tell the rank count; expected a name ending in "
                                 "'.part.N' or an explicit nparts")
        nparts = int(match.group(1))
        if nparts < 1:
            raise PartitionError(f"{path}: the name says {nparts} ranks ('.part.{nparts}'); expected "
                                 "'.part.N' with N >= 1")
    elif isinstance(nparts, bool) or int(nparts) != nparts or nparts < 1:
        raise PartitionError(f"{path}: nparts = {nparts!r}, expected an integer >= 1")
    nparts = int(nparts)
    lines = _read_lines(path)
    if len(lines) != ncells:
        raise PartitionError(f"{path}: {len(lines)} lines, expected one rank id per cell "
                             f"(nCells={ncells})")
    owner = _fast_ids(lines)
    if owner is not None and owner.size == ncells and owner.min(initial=0) >= 0 \
            and owner.max(initial=0) < nparts:
        lines = []          # every line one plain rank id in range: nothing left to check per line
    else:
        owner = np.empty(ncells, dtype=np.int64)
    for k, ln in enumerate(lines):
        match = _INT_LINE.fullmatch(ln)
        if match is None:
            raise PartitionError(f"{path}: line {k + 1} = {_text(ln)}, expected an integer rank id "
                                 f"in [0, {nparts}) in ASCII digits")
        digits = match.group(1)
        value = int(digits) if len(digits) <= 18 else None
        if value is None or not 0 <= value < nparts:
            raise PartitionError(f"{path}: line {k + 1}: rank id {digits.decode()} out of range, "
                                 f"expected 0..{nparts - 1}")
        owner[k] = value
    empty = np.flatnonzero(np.bincount(owner, minlength=nparts) == 0)
    if empty.size:
        raise PartitionError(f"{path}: rank {empty[0]} owns no cell (of {nparts} ranks); expected "
                             "every rank to own at least one cell")
    return owner.astype(np.int32)
