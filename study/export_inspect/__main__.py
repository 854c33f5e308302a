"""python -m study.export_inspect  (see :mod:`study.export_inspect.cli`)"""
import sys

from study.export_inspect.cli import main

if __name__ == "__main__":
    sys.exit(main())
