"""Entry point kept for users of the original project: same options as ``python -m behavioural.run``.

    python evaluate.py --dataset arith --max-examples 24 --output-dir runs/demo
"""
import sys

from behavioural.run import main

if __name__ == "__main__":
    sys.exit(main())
