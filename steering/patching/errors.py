"""The patching stage's error: a problem the user can fix, reported as one ``error:`` line (exit 2)."""
from __future__ import annotations

from loadbearing.errors import LoadBearingError


class PatchingError(LoadBearingError, ValueError):
    """Bad input to activation patching; the message names the problem and the fix."""


__all__ = ["PatchingError"]
