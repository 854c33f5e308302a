"""Activation caching: hidden states of the labelled continuations, stored leakage-free in HDF5.

    python -m activations.cache RUN_DIR            # writes RUN_DIR/activations.h5 (+ its sha256 sidecar)
    from activations import open_store             # reader: rows, layers, read(layer, position)

Importing this package loads no model.
"""
from activations.store import STORE_PATH_KEY, ActivationStore, StoreError, StoreWriter, open_store

__all__ = ["STORE_PATH_KEY", "ActivationStore", "StoreError", "StoreWriter", "open_store"]
