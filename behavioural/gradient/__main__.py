"""python -m behavioural.gradient RUN_DIR [RUN_DIR ...] --output-dir DIR (see behavioural.gradient)."""
import sys

from behavioural.gradient import main

if __name__ == "__main__":
    sys.exit(main())
