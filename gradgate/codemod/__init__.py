"""gradgate's fixes as LibCST codemod commands, for ``python -m libcst.tool``.

With ``modules: ['gradgate.codemod']`` in ``.libcst.codemod.yaml``, ``libcst.tool list``
shows ``fix.FixGradModeGates`` and ``libcst.tool codemod fix.FixGradModeGates PATHS``
runs it; without that file, ``libcst.tool codemod -x gradgate.codemod.fix.FixGradModeGates
PATHS``. The command makes the same bytes as ``gradgate fix`` (see :mod:`.fix`).
"""
