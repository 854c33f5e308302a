"""Steering: add probe directions to the residual stream while the model continues a type-C prefix, and
test whether the error stops propagating (``python -m steering.sweep RUN_DIR --directions PROBES_DIR``).

Modules: ``hooks`` (residual-stream hooks), ``ablation`` (directional ablation: the directions' span projected
out, ``ablate(...)``), ``positions`` (which positions are steered), ``vectors`` (dose-matched combination of
directions), ``generate`` (steered fast-path generation), ``config``
(``SweepConfig``), ``cases`` (the case sample), ``grid`` (settings, vectors, the directions' checks), ``plan``
(what a sweep steers), ``runner`` (``run_sweep``), ``summary`` and ``analysis`` (statistics, verdict,
tables), ``plot`` (figure), ``sweep`` (the CLI); ``patch`` and ``patching`` (activation patching). The
directions are :class:`probes.directions.Directions`. Importing this package loads no model and imports no
torch.
"""
from steering.ablation import AblationHandle, ablate, patch_ablation  # noqa: F401
from steering.hooks import (  # noqa: F401
    POSITIONS,
    SteeringError,
    SteeringHandle,
    combine_directions,
    patch,
    patch_vectors,
    steer,
    steer_vectors,
)
from steering.norms import mean_resid_norm  # noqa: F401
from steering.sweep.results import read_sweep  # noqa: F401  (a DataFrame of generations.jsonl; pandas loads on call)

__all__ = ["AblationHandle", "ablate", "patch_ablation", "read_sweep", "POSITIONS", "SteeringError", "SteeringHandle",
           "combine_directions", "mean_resid_norm", "patch", "patch_vectors", "steer", "steer_vectors"]
