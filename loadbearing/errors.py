"""The one root of the toolkit's errors. Every error a command reports as ``error: <one line>`` derives from
:class:`LoadBearingError` (most also derive from the builtin they refine, ``ValueError`` or ``RuntimeError``,
so callers that caught those keep working)."""
from __future__ import annotations


class LoadBearingError(Exception):
    """A problem the user can fix; the message names the problem and the fix in one line."""
