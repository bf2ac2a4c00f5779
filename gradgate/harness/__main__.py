"""Per-rank entry point of the harness: ``torchrun --nproc-per-node N -m gradgate.harness ...``.

Users start the harness with ``gradgate harness`` (gradgate.harness.cli), which builds
the TE overlay and runs torchrun; this module is what every rank runs.
"""

import sys

from .rank import main

if __name__ == "__main__":
    sys.exit(main())
