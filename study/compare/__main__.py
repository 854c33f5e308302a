"""python -m study.compare  (see :mod:`study.compare.cli`)"""
import sys

from study.compare.cli import main

if __name__ == "__main__":
    sys.exit(main())
