"""Where a directions file came from: the activation store it was fitted on, as an object (read by steering)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.data import ProbeError


@dataclass(frozen=True)
class StoreProvenance:
    """The activation store a directions file was fitted from, as the file records it (its ``store`` attribute:
    the store's path and attributes, weights hash included). Steering reads the fitting questions and rows
    through :meth:`open`, so no later stage re-parses the attribute or guesses the path."""

    record: dict[str, Any] | None  # the parsed ``store`` attribute; None when the file records none or it is unreadable

    @property
    def path(self) -> str | None:
        """The store's path when the file names one and it exists, else None (a moved or deleted store)."""
        path = self.record.get("path") if isinstance(self.record, dict) else None
        return str(path) if path and Path(path).is_file() else None

    def weights_hashes(self) -> set[str]:
        """Every ``weights_hash`` the record holds (at any depth): the model the activations came from."""
        def find(obj: Any) -> list[str]:
            if isinstance(obj, dict):
                own = [v for k, v in obj.items() if k == "weights_hash" and isinstance(v, str) and v]
                return own + [x for v in obj.values() for x in find(v)]
            if isinstance(obj, list):
                return [x for v in obj for x in find(v)]
            return []

        return set(find(self.record))

    def open(self):
        """The store, opened for reading (incomplete stores too); ProbeError when the file names none or it is
        missing. Use as a context manager."""
        from activations.store import open_store  # deferred: h5py and the store reader only when a stage asks

        if self.path is None:
            raise ProbeError("the directions file names no readable activation store; re-create the directions "
                             "with python -m probes.train STORE, or keep the store where it was")
        return open_store(self.path, allow_incomplete=True)


__all__ = ["StoreProvenance"]
