"""Where a run's fields live, for any model: one process (`Serial`), or every rank of a
communicator with its local mesh, owned rows first (`Ranks`, which each model's distribution
extends with the exchange of its own state), the owned-row inner product of the adjoints and the
partition file's owners."""
from __future__ import annotations

from meshops.parallel import gather_field, scatter_field
from meshops.parallel.comm import allreduce_sum, is_serial


class Serial:
    """One process: owned rows are all rows, nothing to exchange."""

    def __init__(self, mesh, comm):
        self.mesh, self.comm = mesh, comm
        self.owned = {"cell": mesh.nCells, "edge": mesh.nEdges, "vertex": mesh.nVertices}

    def scatter(self, location, field):
        return field

    def gather(self, location, field):
        return field

    def exchange(self, *fields) -> None:
        pass

    def exchange_tl(self, *fields) -> None:
        pass

    def global_index(self, location, i) -> int:
        return int(i)

    def describe(self) -> str:
        return "1 process"


class Ranks:
    """Every rank of `comm` with its `grids.decompose.Decomposition`: the local mesh, the owned
    counts, scatter and gather of fields and global indices; what every model's distribution
    shares (each adds the exchange of its own state)."""

    def __init__(self, decomposition, comm):
        self.decomposition, self.comm = decomposition, comm
        self.mesh = decomposition.mesh
        self.owned = {loc: decomposition.n_owned(loc) for loc in ("cell", "edge", "vertex")}

    def scatter(self, location, field):
        return scatter_field(self.decomposition, self.comm, field, location)

    def gather(self, location, field):
        return gather_field(self.decomposition, self.comm, field, location)

    def global_index(self, location, i) -> int:
        return int(self.decomposition.local.l2g[location][i])

    def describe(self) -> str:
        d = self.decomposition
        return (f"{d.nranks} ranks, halo depth {d.halo_depth}, rank 0 owns "
                f"{self.owned['cell']} cells")


def owned_inner(distribution, pairs) -> float:
    """Global Euclidean inner product over owned rows: the sum over `pairs` of (location, x, y)
    of sum_i x[i] * y[i] over the first `distribution.owned[location]` rows (and every level), in
    float64, summed over the ranks of `distribution.comm` (the same value on every rank). The inner
    product in which `framework.stepper`'s adjoint is the transpose of its tangent-linear model."""
    total = 0.0
    for location, x, y in pairs:
        n = distribution.owned[location]
        total += float((x[:n].astype("float64") * y[:n].astype("float64")).sum())
    return allreduce_sum(distribution.comm)(total)


def read_owner(config, comm, global_mesh):
    """The owner rank of every cell from config.partition.file on rank 0 (None elsewhere, and
    without a file); its problems raised on every rank as a ConfigError naming the key. The
    file is checked against the run's rank count; on one process (where it is not used) against
    its own, N of a name ending in `.part.N`."""
    if config.partition.method != "file":
        return None
    import re

    from grids.partition import PartitionError, read_partition
    from framework.collective import on_root
    from framework.errors import ConfigError

    read, path = {}, str(config.partition.file)
    nparts = comm.Get_size()
    if is_serial(comm) and re.search(r"\.part\.[0-9]+$", path):
        nparts = None

    def work():
        try:
            read["owner"] = read_partition(path, global_mesh.nCells, nparts)
        except PartitionError as exc:
            raise ConfigError(f"partition.file: {exc}") from None
    on_root(comm, work)
    return read.get("owner")


def check_rank_count(comm, global_mesh) -> None:
    """ConfigError on every rank when the run has more MPI ranks than the mesh (on rank 0) has
    cells: each rank must own at least one cell. Names both counts and the launch to change."""
    from framework.collective import on_root
    from framework.errors import ConfigError

    ranks = comm.Get_size()

    def work():
        if ranks > global_mesh.nCells:
            raise ConfigError(f"{ranks} MPI ranks for a mesh of {global_mesh.nCells} cells: each "
                              f"rank owns at least one cell; expected at most "
                              f"{global_mesh.nCells} ranks (mpiexec -n), or a finer mesh")
    on_root(comm, work)
