"""What the tracer model takes from the shallow-water package's model-neutral modules, in this one
place until they move to framework/ (decision 0031): the strict config base and the sections every
model shares, the time-step check, the global mesh of a config, the written-file record and the
config's YAML dump."""
from swm.config import (Backend, Dtype, FilePath, LogLevel, MeshConfig, PartitionConfig,  # noqa: F401
                        Strict, dump, fixed_steps)
from swm.driver import build_mesh  # noqa: F401
from swm.files import Written, partial_path  # noqa: F401
