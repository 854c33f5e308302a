"""Linear probes on cached hidden states: question-grouped CV, controls, honest layer selection, and the
steering directions they export.

    python -m probes.train runs/demo/activations.h5          # writes runs/demo/probes/
    from probes import read_directions        # steering stage API: a Directions (every layer + metadata; numpy + h5py only)

Importing this package loads no model and imports scikit-learn only when an estimator is asked for.
"""
import importlib

from probes.data import ProbeError
from probes.directions import Directions, DirectionSet, load_direction_info, load_directions, read_directions

_LAZY = {
    "LogisticProbe": "probes.fit.estimators",
    "MassMeanProbe": "probes.fit.estimators",
    "make_probe_pipeline": "probes.fit.estimators",
    "raw_direction": "probes.fit.estimators",
    "fit_directions": "probes.fit.direction_fit",
    "load_probe_data": "probes.data",
    "train_probes": "probes.experiment",
    "ProbeConfig": "probes.config",
    "train": "probes.stage",
    "is_complete": "probes.stage",
    "format_summary": "probes.summary",
    "read_results": "probes.results",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'probes' has no attribute {name!r}")


__all__ = ["ProbeError", "Directions", "DirectionSet", "read_directions", "load_directions", "load_direction_info", *_LAZY]
