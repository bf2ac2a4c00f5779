"""``compare_forwards`` and ``assert_same_forward_paths``: the witness's library API (imports torch)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import torch

from ..records import field, record
from . import modes as modes_mod
from .diff import Divergence, divergences, render
from .events import Forward
from .probes import Probe, as_probe
from .recorder import DEFAULT_IGNORED_ATEN, PathRecorder

Build: TypeAlias = Callable[[], torch.nn.Module] | torch.nn.Module


@record(frozen=False)
class Comparison:
    """The forwards of one module in every mode, and where they leave the reference's path."""

    forwards: list[Forward]
    divergences: list[Divergence] = field(default_factory=list)
    #: probe calls made outside any forward (in the backward), per probe
    outside_forward: dict[str, int] = field(default_factory=dict)
    #: per mode, why its backward failed (see :func:`gradgate.witness.modes.run`)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def reference(self) -> Forward:
        return self.forwards[0]

    @property
    def same(self) -> bool:
        """No divergence, and every checkpoint's backward ran."""
        return not self.divergences and not self.errors

    def forward(self, label: str) -> Forward:
        for fwd in self.forwards:
            if fwd.label == label:
                return fwd
        raise KeyError(f"no forward {label!r}; forwards: {[f.label for f in self.forwards]}")

    def report(self) -> str:
        """Readable text: one block per divergence, or that the paths are the same."""
        labels = ", ".join(f.label for f in self.forwards)
        if self.same:
            return f"same forward path in {labels}"
        blocks = [render(d) for d in self.divergences]
        blocks += [f"{mode}: {error}" for mode, error in self.errors.items()]
        return f"{len(self.divergences)} divergence(s) from {self.reference.label} ({labels}):\n" + "\n".join(blocks)

    def as_dict(self, events: bool = False) -> dict[str, Any]:
        return {
            "same": self.same,
            "forwards": [f.as_dict(events=events) for f in self.forwards],
            "divergences": [d.as_dict() for d in self.divergences],
            "outside_forward": dict(self.outside_forward),
            "errors": dict(self.errors),
        }


class ForwardPathsDiffer(AssertionError):
    """Raised by :func:`assert_same_forward_paths`; carries the :class:`Comparison`."""

    def __init__(self, comparison: Comparison) -> None:
        super().__init__(comparison.report())
        self.comparison = comparison


def compare_forwards(
    build: Build,
    inputs: Sequence[Any] | torch.Tensor,
    modes: Sequence[str] = modes_mod.DEFAULT_MODES,
    *,
    probes: Sequence[Probe | str] = (),
    aten: bool = True,
    ignored_aten: tuple[str, ...] = DEFAULT_IGNORED_ATEN,
    link_findings: bool = True,
    seed: int = 0,
) -> Comparison:
    """Run the forward of ``build`` once per mode and compare each forward's path with the first.

    ``build`` is a module, or a callable returning one: then it is called once per mode,
    after ``torch.manual_seed(seed)``, so every mode gets a fresh module with the same
    weights. ``inputs`` are the forward's positional arguments (copied per mode). A
    forward's path is the sequence of collectives (kind, group, async, shapes), ATen ops
    (unless ``aten=False``), probe calls and submodule calls with their training flag;
    ``module.training`` is compared too. With ``link_findings``, each divergence names the
    static findings of ``gradgate check`` on the files of its stacks.
    """
    chosen = modes_mod.check_modes(tuple(modes))
    args = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    recorder = PathRecorder([as_probe(p) for p in probes], ignored_aten, aten)
    shared = build if isinstance(build, torch.nn.Module) else None
    errors: dict[str, str] = {}
    try:
        for mode in chosen:
            if shared is not None:
                module = shared
            else:
                torch.manual_seed(seed)
                module = build()
            recorder.watch(module)
            recorder.expect(mode, list(modes_mod.PHASES[mode]))
            try:
                with recorder:
                    error = modes_mod.run(module, args, mode)
                if error:
                    errors[mode] = error
            finally:
                recorder.close()
    finally:
        recorder.close()
    forwards = recorder.forwards
    if not forwards:
        raise RuntimeError("the module's forward never ran")
    found = [d for other in forwards[1:] for d in divergences(forwards[0], other)]
    if link_findings:
        from .findings import link_all

        found = link_all(found)
    return Comparison(forwards, found, dict(recorder.outside_forward), errors)


def assert_same_forward_paths(
    build: Build,
    inputs: Sequence[Any] | torch.Tensor,
    modes: Sequence[str] = modes_mod.DEFAULT_MODES,
    **options: Any,
) -> Comparison:
    """:func:`compare_forwards`, failing with a readable diff when any forward's path differs."""
    __tracebackhide__ = True
    comparison = compare_forwards(build, inputs, modes, **options)
    if not comparison.same:
        raise ForwardPathsDiffer(comparison)
    return comparison
