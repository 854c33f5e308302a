"""python -m steering.sweep  (see :mod:`steering.sweep.cli`)"""
import sys

from steering.sweep.cli import main

if __name__ == "__main__":
    sys.exit(main())
