"""Helpers the tests share: tiny in-process models, synthetic run directories and stores.

Test modules import from here (``from helpers.tiny import make_tiny_lm``), never from another test module or
from ``conftest``; fixtures live in ``conftest.py``. ``tests/test_layering.py`` checks both rules."""
