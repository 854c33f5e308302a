"""Figures: the one place a figure is drawn and written (matplotlib's Agg backend, set once; atomic write).

    from loadbearing.figures import pyplot, save_figure
    plt = pyplot()
    fig, ax = plt.subplots()
    ...
    save_figure(fig, "runs/demo/probes/accuracy_vs_layer.png", dpi=120)   # written atomically, then closed

:func:`pyplot` selects the non-interactive Agg backend the first time it is called (never at import: importing
this module touches no global state) and returns ``matplotlib.pyplot``. :func:`save_figure` renders the figure
to bytes and writes them with :func:`loadbearing.files.atomic_write_bytes`, so a reader sees the old file or the
new one, never half of one; :func:`figure_bytes` gives the bytes alone (a report that compares before writing).
Every module that writes a figure goes through these two (``tests/test_layering.py`` checks that ``savefig``
appears nowhere else).
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

from loadbearing.files import atomic_write_bytes

if TYPE_CHECKING:  # the types only: matplotlib is imported when a figure is drawn
    from types import ModuleType

    from matplotlib.figure import Figure

_BACKEND_SET = False


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` with the Agg backend (selected once, on the first call)."""
    global _BACKEND_SET
    import matplotlib  # deferred: matplotlib is heavy to import

    if not _BACKEND_SET:
        matplotlib.use("Agg")
        _BACKEND_SET = True
    import matplotlib.pyplot as plt  # deferred: matplotlib is heavy to import

    return plt


def figure_bytes(fig: Figure, *, dpi: int = 110, fmt: str = "png", metadata: dict[str, str | None] | None = None) -> bytes:
    """The figure rendered to ``fmt`` (PNG by default) at ``dpi``; ``metadata`` as ``savefig`` takes it
    (``{"Software": None}``: no matplotlib version in the file, so the same figure gives the same bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=metadata)
    return buf.getvalue()


def save_figure(fig: Figure, path: str | os.PathLike[str], *, dpi: int = 110, close: bool = True,
                metadata: dict[str, str | None] | None = None, fsync: bool = False) -> Path:
    """Write ``fig`` to ``path`` atomically (the format from the suffix, PNG when there is none) and close it
    (``close=False`` keeps it open); returns the path."""
    p = Path(path)
    try:
        data = figure_bytes(fig, dpi=dpi, fmt=p.suffix.lstrip(".").lower() or "png", metadata=metadata)
    finally:
        if close:
            pyplot().close(fig)
    return atomic_write_bytes(p, data, fsync=fsync)


__all__ = ["figure_bytes", "pyplot", "save_figure"]
