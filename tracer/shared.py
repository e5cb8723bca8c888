"""What the tracer model takes from framework's shared halves, in this one place: the strict
config base and the sections every model shares, the files a mesh is read from, the time-step
check, the global mesh of a config, the written-file record and the config's YAML dump."""
from framework.config import (Backend, Dtype, FilePath, LogLevel, MeshConfig,  # noqa: F401
                              PartitionConfig, Strict, dump, fixed_steps, mesh_inputs)
from framework.driver import build_mesh  # noqa: F401
from framework.files import Written, partial_path  # noqa: F401
