"""python -m study.validate  (see :mod:`study.validate.cli`)"""
import sys

from study.validate.cli import main

if __name__ == "__main__":
    sys.exit(main())
