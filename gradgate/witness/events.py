"""What the witness records of one forward: frames, events and forwards (plain data, no torch).

An :class:`Event` is one step of a forward's path: a collective (``kind="collective"``),
an ATen op (``"aten"``), a call of a probed function (``"probe"``) or a submodule call
with its training flag (``"module"``). Two forwards took the same path when their event
signatures are the same sequence; the stack and ``info`` are shown, never compared.
"""

from __future__ import annotations

from typing import Any

from ..records import field, record

EVENT_KINDS = ("collective", "aten", "probe", "module")


@record
class Frame:
    """A frame of user code: the file, the line running, the function and its first line."""

    path: str
    line: int
    function: str
    first_line: int

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "function": self.function, "first_line": self.first_line}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Frame:
        return cls(data["path"], data["line"], data["function"], data["first_line"])


def _frozen(value: Any) -> Any:
    """``value`` made hashable: lists and tuples to tuples, dicts to sorted item tuples."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


@record
class Event:
    kind: str
    name: str
    #: compared: what makes two events the same step (a collective's group, async flag, shapes)
    detail: dict[str, Any] = field(default_factory=dict, hash=False)
    #: user-code frames, outermost first
    stack: tuple[Frame, ...] = ()
    #: shown, not compared (a process group's name, say)
    info: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def signature(self) -> tuple[Any, ...]:
        return (self.kind, self.name, _frozen(self.detail))

    @property
    def frame(self) -> Frame | None:
        """The innermost user frame: where the user's code made this step."""
        return self.stack[-1] if self.stack else None

    def describe(self) -> str:
        """One line, e.g. ``collective all_gather_into_tensor group [0, 1] (size 2) sync shapes [[4, 4], [2, 4]]``."""
        d = self.detail
        if self.kind == "collective":
            mode = {True: "async", False: "sync", None: "async unknown"}[d.get("async")]
            return (
                f"collective {self.name} group {list(d.get('group_ranks') or [])} (size {d.get('group_size')}, "
                f"name {d.get('group_name')!r}) {mode} shapes {[list(s) for s in d.get('shapes') or ()]}"
            )
        if self.kind == "module":
            return f"module {self.name} training={d.get('training')}"
        if self.kind == "probe":
            extra = f" {d['detail']}" if d.get("detail") is not None else ""
            return f"probe {self.name}{extra}"
        return f"{self.kind} {self.name}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "detail": self.detail,
            "info": self.info,
            "stack": [f.as_dict() for f in self.stack],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        return cls(
            data["kind"],
            data["name"],
            dict(data.get("detail") or {}),
            tuple(Frame.from_dict(f) for f in data.get("stack") or ()),
            dict(data.get("info") or {}),
        )


@record(frozen=False)
class Forward:
    """One forward of the watched module: which mode and phase, grad mode, training, path."""

    label: str  # "grad", "no_grad", "checkpoint/first_forward", "checkpoint/recompute", ...
    mode: str
    phase: str
    grad_enabled: bool
    training: bool
    events: list[Event] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Events per kind (every kind present, zero or not)."""
        out = dict.fromkeys(EVENT_KINDS, 0)
        for event in self.events:
            out[event.kind] += 1
        return out

    def collectives(self) -> list[Event]:
        return [e for e in self.events if e.kind == "collective"]

    def aten_counts(self) -> dict[str, int]:
        """ATen ops dispatched in this forward, by name, in the order first seen."""
        out: dict[str, int] = {}
        for event in self.events:
            if event.kind == "aten":
                out[event.name] = out.get(event.name, 0) + 1
        return out

    def probe_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for event in self.events:
            if event.kind == "probe":
                key = event.name if event.detail.get("detail") is None else f"{event.name}:{event.detail['detail']}"
                out[key] = out.get(key, 0) + 1
        return out

    def as_dict(self, events: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "label": self.label,
            "mode": self.mode,
            "phase": self.phase,
            "grad_enabled": self.grad_enabled,
            "training": self.training,
            "counts": self.counts(),
            "collectives": [e.as_dict() for e in self.collectives()],
            "aten_ops": self.aten_counts(),
            "probes": self.probe_counts(),
        }
        if events:
            data["events"] = [e.as_dict() for e in self.events]
        return data
