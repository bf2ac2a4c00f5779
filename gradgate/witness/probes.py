"""Probes: functions the witness counts per forward, replaced where the caller looks them up.

``Probe("transformer_engine.pytorch.module.layernorm_linear:fill_userbuffers_buffer_for_all_gather")``
replaces that name in that module's namespace with a wrapper that records a ``probe`` event
(with the user stack) as the call starts and calls straight through. ``describe(args,
kwargs)``, when given, adds a detail to the event (a UserBuffers name, say) or returns
None to record nothing for that call; ``on_result(args, kwargs, result)`` sees each
call's result (to name the objects it returns). No torch import.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from ..records import record

Describe = Callable[[tuple, dict], "str | None"]
OnResult = Callable[[tuple, dict, Any], None]


@record
class Probe:
    #: "package.module:name" (or "package.module:Class.method")
    target: str
    #: the event's name; default: the target
    label: str | None = None
    describe: Describe | None = None
    on_result: OnResult | None = None

    @property
    def name(self) -> str:
        return self.label or self.target

    def resolve(self) -> tuple[Any, str]:
        """(owner object, attribute name) of the target."""
        module_name, sep, attr_path = self.target.partition(":")
        if not sep or not attr_path:
            raise ValueError(f"probe target {self.target!r}: expected 'package.module:name'")
        owner: Any = importlib.import_module(module_name)
        *parents, attr = attr_path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        if not hasattr(owner, attr):
            raise ValueError(f"probe target {self.target!r}: {module_name} has no {attr_path!r}")
        return owner, attr


def as_probe(spec: Probe | str) -> Probe:
    return spec if isinstance(spec, Probe) else Probe(spec)


class InstalledProbes:
    """Probes installed on their targets; ``record(probe, detail)`` is called per call."""

    def __init__(self, probes: list[Probe], record: Callable[[Probe, str | None], None]) -> None:
        self._record = record
        self._saved: list[tuple[Any, str, Any]] = []
        try:
            for probe in probes:
                self._install(probe)
        except BaseException:
            self.uninstall()
            raise

    def _install(self, probe: Probe) -> None:
        owner, attr = probe.resolve()
        original = getattr(owner, attr)
        record = self._record

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            detail = probe.describe(args, kwargs) if probe.describe else None
            if probe.describe is None or detail is not None:
                record(probe, detail)
            result = original(*args, **kwargs)
            if probe.on_result is not None:
                probe.on_result(args, kwargs, result)
            return result

        self._saved.append((owner, attr, original))
        setattr(owner, attr, wrapper)

    def uninstall(self) -> None:
        for owner, attr, original in reversed(self._saved):
            setattr(owner, attr, original)
        self._saved.clear()
