"""python -m study.browse  (see :mod:`study.browse.page`)"""
import sys

from study.browse.page import main

if __name__ == "__main__":
    sys.exit(main())
