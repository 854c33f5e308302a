"""Steering: add probe directions to the residual stream while the model continues a type-C prefix, and
test whether the error stops propagating (``python -m steering.sweep RUN_DIR --directions PROBES_DIR``).

Modules: ``hooks`` (residual-stream hooks), ``generate`` (steered fast-path generation), ``config``
(``SweepConfig``), ``cases`` (the case sample), ``grid`` (settings and vectors), ``analysis`` (statistics,
verdict, tables), ``plot`` (figure), ``sweep`` (``run_sweep``, the CLI). Importing this package loads no model
and imports no torch.
"""
from steering.hooks import (  # noqa: F401
    POSITIONS,
    SteeringError,
    SteeringHandle,
    combine_directions,
    mean_resid_norm,
    patch,
    patch_vectors,
    steer,
    steer_vectors,
)

__all__ = ["POSITIONS", "SteeringError", "SteeringHandle", "combine_directions", "mean_resid_norm", "patch",
           "patch_vectors", "steer", "steer_vectors"]
