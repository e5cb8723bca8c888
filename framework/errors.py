"""The errors every model's run raises for the same reasons."""


class ConfigError(ValueError):
    """A config that cannot run: the message names the file, the key path, the value and what is
    allowed."""


class WatchdogError(RuntimeError):
    """The state left the scheme's range (NaN/Inf, or a value outside the model's bounds)."""
