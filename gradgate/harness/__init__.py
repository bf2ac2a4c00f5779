"""GPU runtime validation harness for gradgate's TransformerEngine #2902 fix.

``gradgate harness`` (the click command in :mod:`gradgate.harness.cli`, running what
:mod:`gradgate.harness.launcher` prepares) builds an
overlay of the installed ``transformer_engine`` package with gradgate's autofix applied,
starts ``torchrun`` on the visible GPUs and runs :mod:`gradgate.harness.__main__` on every
rank. Each rank checks whether ``te.LayerNormLinear`` / ``te.LayerNormMLP`` take the
UserBuffers comm+GEMM overlap path (observed by instrumenting TE where the path is taken)
and whether their outputs match a non-overlap reference module with identical weights.

Nothing in this package imports torch or transformer_engine at import time except the
per-rank modules (``__main__``, ``rank`` and its parts ``rank_setup``, ``rank_cases`` and
``rank_perf``; ``probe`` imports torch when it watches a module), which only ever run
inside a torchrun rank.
"""
