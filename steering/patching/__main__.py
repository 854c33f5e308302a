"""python -m steering.patching  (see :mod:`steering.patching`)"""
import sys

from steering.patching.cli import main

if __name__ == "__main__":
    sys.exit(main())
