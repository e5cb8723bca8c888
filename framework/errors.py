"""The errors every model's run raises for the same reasons, and how messages name entities."""

#: Said beside a cell, edge or vertex id in a message: ids count from 1 there (MPAS's convention,
#: its files and tools), while arrays in memory are 0-based.
ONE_BASED = "1-based as in MPAS"


class ConfigError(ValueError):
    """A config that cannot run: the message names the file, the key path, the value and what is
    allowed."""


class WatchdogError(RuntimeError):
    """The state left the scheme's range (NaN/Inf, or a value outside the model's bounds)."""
