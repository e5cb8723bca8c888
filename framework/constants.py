"""Physical constants shared by every model: the Earth's radius a and rotation rate Omega (MPAS's,
as the meshes carry them: `grids.mesh`), gravity g and the day."""

from grids.mesh import EARTH_OMEGA, EARTH_RADIUS

__all__ = ["EARTH_RADIUS", "EARTH_OMEGA", "GRAVITY", "DAY"]

#: Gravitational acceleration g (m/s^2).
GRAVITY = 9.80616
#: Seconds per day.
DAY = 86400.0
