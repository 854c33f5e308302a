"""Activation patching between the clean and the edited prefix (``python -m steering.patching RUN_DIR``).

Modules: ``align`` (token alignment, position groups, answer tokens), ``engine`` (HF forward hooks that record
and overwrite the residual stream, batched scoring), ``cases`` (the C-case sample), ``sweep`` (one case's layer x
group sweep and controls), ``summary`` (statistics, heat map, markdown). The CLI is :mod:`steering.patching`.
Importing this package loads no model.
"""
from steering.errors import PatchingError

__all__ = ["PatchingError"]
