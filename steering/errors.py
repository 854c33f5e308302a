"""The steering stage's error for bad steering input (the sweep's own, :class:`steering.sweep.config.SweepError`, sits
beside its settings). Both derive from :class:`loadbearing.errors.LoadBearingError`."""
from __future__ import annotations

from loadbearing.errors import LoadBearingError


class SteeringError(LoadBearingError, ValueError):
    """Bad steering input (wrong width, unknown layer, mismatched batch); the message names the fix."""


class PatchingError(LoadBearingError, ValueError):
    """Bad input to activation patching; the message names the problem and the fix."""


__all__ = ["PatchingError", "SteeringError"]
