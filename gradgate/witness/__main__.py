"""Per-rank entry point of ``gradgate witness``: ``torchrun ... -m gradgate.witness CASES.py ...``."""

import sys

from .rank import main

if __name__ == "__main__":
    sys.exit(main())
