"""netCDF4 Datasets closed so that a failed close (a full disk) cannot crash the process at exit:
the HDF5 library still holds such a file and crashes on it in its teardown. `close_dataset` holds
the Dataset to the end of the process instead; the command line (`meshrun.cli`) then ends the
process without that teardown when `datasets_left_open()` is not zero."""
from __future__ import annotations

import contextlib

#: Datasets whose close failed; held here, never collected.
_LEFT_OPEN: list = []


def close_dataset(ds) -> None:
    """Close netCDF4 Dataset `ds`; where the close fails, `ds` is held open to the end of the
    process (`datasets_left_open`) and the error raised."""
    try:
        ds.close()
    except BaseException:
        _LEFT_OPEN.append(ds)
        raise


def datasets_left_open() -> int:
    """How many netCDF4 Datasets could not be closed (`close_dataset`)."""
    return len(_LEFT_OPEN)


@contextlib.contextmanager
def closing_dataset(ds):
    """netCDF4 Dataset `ds` for the block, closed by `close_dataset`."""
    try:
        yield ds
    finally:
        close_dataset(ds)


def dataset(path, mode: str = "r", **kwargs):
    """`netCDF4.Dataset(path, mode, **kwargs)` for a with block (`closing_dataset`)."""
    import netCDF4

    return closing_dataset(netCDF4.Dataset(path, mode, **kwargs))
