"""Record the path of every forward of a watched module (imports torch).

:class:`PathRecorder` is a ``TorchDispatchMode``: every ATen op and every collective
(c10d and functional, whatever the backend) passes through ``__torch_dispatch__``.
Forward hooks on the watched module bracket each forward, so steps are attributed to the
forward that made them; a global module pre-hook records submodule calls with their
training flag; probes record calls of chosen Python functions. ATen ops that do no work
(``detach``, ``alias``: autograd saves outputs with them under grad) are not recorded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import collectives
from .events import Event, Forward
from .probes import InstalledProbes, Probe
from .stacks import library_roots, user_stack

#: ATen ops recorded by no forward (they do no arithmetic and autograd adds them)
DEFAULT_IGNORED_ATEN = ("aten.detach", "aten.alias", "aten.lift_fresh")


class PathRecorder(TorchDispatchMode):
    def __init__(
        self, probes: Sequence[Probe] = (), ignored_aten: tuple[str, ...] = DEFAULT_IGNORED_ATEN, aten: bool = True
    ) -> None:
        super().__init__()
        self.forwards: list[Forward] = []
        self.outside_forward: Counter[str] = Counter()
        self._probes = list(probes)
        self._ignored = frozenset(ignored_aten)
        self._aten = aten
        self._current: Forward | None = None
        self._depth = 0
        self._phases: list[tuple[str, str]] = []
        self._roots = library_roots(torch)
        self._handles: list[Any] = []
        self._installed: InstalledProbes | None = None
        self._names: dict[int, str] = {}
        self._top: Any = None

    # -- set-up ---------------------------------------------------------------------------
    def watch(self, module: torch.nn.Module) -> None:
        """Bracket ``module``'s forwards and record its submodules' calls."""
        self._top = module
        self._names = {id(m): name or type(m).__name__ for name, m in module.named_modules()}
        self._handles.append(module.register_forward_pre_hook(self._pre_hook))
        self._handles.append(module.register_forward_hook(self._post_hook, always_call=True))
        self._handles.append(torch.nn.modules.module.register_module_forward_pre_hook(self._submodule_hook))
        self._installed = InstalledProbes(self._probes, self._record_probe)

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._installed is not None:
            self._installed.uninstall()
            self._installed = None

    def expect(self, mode: str, phases: list[str]) -> None:
        """The next forwards belong to ``mode``, one per phase in order."""
        self._phases = [(mode, phase) for phase in phases]

    # -- hooks ----------------------------------------------------------------------------
    def _pre_hook(self, module: torch.nn.Module, _inputs: Any) -> None:
        self._depth += 1
        if self._depth > 1:
            return
        mode, phase = self._phases.pop(0) if self._phases else ("unexpected", f"forward_{len(self.forwards)}")
        label = mode if phase == "forward" else f"{mode}/{phase}"
        self._current = Forward(label, mode, phase, torch.is_grad_enabled(), module.training)
        self.forwards.append(self._current)

    def _post_hook(self, _module: torch.nn.Module, _inputs: Any, _output: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._current = None

    def _submodule_hook(self, module: torch.nn.Module, _inputs: Any) -> None:
        if self._current is None or module is self._top:
            return
        name = self._names.get(id(module), type(module).__name__)
        self._add(Event("module", name, {"training": module.training}, user_stack(self._roots)))

    def _record_probe(self, probe: Probe, detail: str | None) -> None:
        if self._current is None:
            key = probe.name if detail is None else f"{probe.name}:{detail}"
            self.outside_forward[key] += 1
            return
        self._add(Event("probe", probe.name, {"detail": detail}, user_stack(self._roots)))

    def _add(self, event: Event) -> None:
        assert self._current is not None
        self._current.events.append(event)

    # -- dispatch -------------------------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self._current is not None:
            if collectives.is_collective(func):
                kind, detail, info = collectives.describe(func, args, kwargs)
                self._add(Event("collective", kind, detail, user_stack(self._roots), info))
            elif self._aten:
                name = f"{func.namespace}.{func._opname}"
                if name not in self._ignored:
                    self._add(Event("aten", name, {}, user_stack(self._roots)))
        return func(*args, **kwargs)
