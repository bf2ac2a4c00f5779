"""The user-code part of the Python stack: frames outside torch, the stdlib and the witness."""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType

from .events import Frame

_WITNESS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


#: single-file modules that torch calls through (``typing_extensions.deprecated`` wraps
#: ``torch.distributed.all_gather_into_tensor`` in torch 2.13)
PLUMBING = ("typing_extensions",)


def library_roots(*modules: object) -> tuple[str, ...]:
    """Paths whose frames are not user code: the stdlib, the witness, each of ``modules``'
    package folders (pass ``torch``) and the :data:`PLUMBING` modules' files."""
    roots = {_WITNESS_DIR}
    for name in PLUMBING:
        plumbing = sys.modules.get(name)
        file = getattr(plumbing, "__file__", None)
        if file:
            roots.add(os.path.abspath(file))
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.abspath(path) + os.sep)
    for module in modules:
        file = getattr(module, "__file__", None)
        if file:
            roots.add(os.path.dirname(os.path.abspath(file)) + os.sep)
    # site-packages lives under the stdlib folder in some layouts: never exclude it wholesale
    return tuple(sorted(roots))


def _is_user_file(path: str, excluded: tuple[str, ...]) -> bool:
    if path.startswith("<"):
        return False
    if "site-packages" in path or "dist-packages" in path:
        return not any(path.startswith(root) for root in excluded if "site-packages" in root or "dist-packages" in root)
    return not path.startswith(excluded)


def user_stack(excluded: tuple[str, ...], start: FrameType | None = None) -> tuple[Frame, ...]:
    """The user frames of the current stack (or from ``start`` outward), outermost first."""
    frame: FrameType | None = start if start is not None else sys._getframe(1)
    frames: list[Frame] = []
    cache: dict[str, bool] = {}
    while frame is not None:
        code = frame.f_code
        path = code.co_filename
        user = cache.get(path)
        if user is None:
            user = cache[path] = _is_user_file(os.path.abspath(path), excluded)
        if user:
            frames.append(Frame(os.path.abspath(path), frame.f_lineno, code.co_qualname, code.co_firstlineno))
        frame = frame.f_back
    frames.reverse()
    return tuple(frames)
