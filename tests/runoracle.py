"""The run oracle of the fuzz harness: fixed code executed against a stub torch.

A safe fix keeps the program's meaning but for the gated decision, which it sets to its
grad-on value: so with grad mode on, the fixed module behaves exactly as the original,
call for call. :func:`behaviour_change` runs both modules' top-level functions (and the
methods of their top-level classes, on an instance made without ``__init__``) with every
parameter a boolean, over a few assignments, under a stub ``torch`` whose every
attribute is a recording stand-in, and returns the first difference (None: none). Programs
that need more than that (imports of other packages, loops over their arguments) are
skipped: the oracle says ``None`` for what it cannot run.
"""

from __future__ import annotations

import ast
import itertools
import sys
import types
from collections.abc import Callable

from gradgate.config import Config

#: truth values given to the parameters, in turn
_ASSIGNMENTS = 4
#: calls a run may make before it is cut short (a stand-in iterated forever)
_MAX_EVENTS = 200


class _Stop(Exception):
    pass


class _Stand:
    """A value of anything: truthy or not as told; every use is recorded."""

    def __init__(self, name: str, truth: bool, log: list, grad: bool = True) -> None:
        self._name, self._truth, self._log, self._grad = name, truth, log, grad

    def _event(self, what: str) -> None:
        self._log.append(what)
        if len(self._log) > _MAX_EVENTS:
            raise _Stop()

    def __bool__(self) -> bool:
        self._event(f"bool {self._name}")
        return self._truth

    def __getattr__(self, attr: str) -> object:
        if attr.startswith("__"):
            raise AttributeError(attr)
        read = _grad_read(f"{self._name}.{attr}", self._grad)
        if read is not None:
            return read
        self._event(f"get {self._name}.{attr}")
        return _Stand(f"{self._name}.{attr}", self._truth, self._log, self._grad)

    def __call__(self, *args: object, **kwargs: object) -> _Stand:
        self._event(f"call {self._name}({_shown(args, kwargs)})")
        return _Stand(f"{self._name}()", self._truth, self._log)

    def __iter__(self):
        self._event(f"iter {self._name}")
        return iter(())

    def __repr__(self) -> str:
        return self._name


def _grad_read(name: str, grad: bool) -> Callable[[], bool] | None:
    """The stub of a grad-mode query (the configuration's spellings), or None. Its
    reads are not recorded: a fix removes some, and that is not behaviour."""
    polarity = Config().sources.functions.get(name)
    if polarity is None:
        return None
    value = grad if polarity > 0 else not grad
    return lambda: value


def _shown(args: tuple, kwargs: dict) -> str:
    return ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in sorted(kwargs.items()))])


def _torch(grad: bool, log: list) -> dict[str, types.ModuleType]:
    class Module(types.ModuleType):
        def __getattr__(self, attr: str) -> object:
            if attr.startswith("__"):
                raise AttributeError(attr)
            read = _grad_read(f"{self.__name__}.{attr}", grad)
            return read if read is not None else _Stand(f"{self.__name__}.{attr}", True, log, grad)

    torch = Module("torch")
    modules = {"torch": torch}
    for name in ("distributed", "nn", "autograd", "cuda"):
        sub = Module(f"torch.{name}")
        setattr(torch, name, sub)
        modules[f"torch.{name}"] = sub
    return modules


def _parameters(function: Callable) -> list[str]:
    code = function.__code__  # type: ignore[attr-defined]
    names = list(code.co_varnames[: code.co_argcount])
    return names[1:] if hasattr(function, "__self__") else names


def _argument(name: str, index: int, truth: int) -> bool:
    """A parameter's value: grad mode's where its name carries grad mode (grad is on),
    else a truth value of the assignment ``truth``."""
    polarity = Config().sources.carrier_polarity(name)
    if polarity is not None:
        return polarity > 0
    return bool((truth >> (index % 2)) & 1) ^ (index % 3 == 0)


def _callables(namespace: dict) -> list[tuple[str, Callable, int]]:
    out = []
    for name, value in sorted(namespace.items()):
        if isinstance(value, types.FunctionType) and value.__module__ == "<run-oracle>":
            out.append((name, value, value.__code__.co_argcount))
        elif isinstance(value, type) and value.__module__ == "<run-oracle>":
            for attr, method in sorted(vars(value).items()):
                if isinstance(method, types.FunctionType) and attr != "__init__":
                    instance = object.__new__(value)
                    out.append((f"{name}.{attr}", method.__get__(instance), method.__code__.co_argcount - 1))
    return out


def _trace(code: str, grad: bool) -> list | None:
    log: list = []
    saved = {k: sys.modules.get(k) for k in ("torch", "torch.distributed", "torch.nn", "torch.autograd", "torch.cuda")}
    sys.modules.update(_torch(grad, log))
    try:
        namespace: dict = {"__name__": "<run-oracle>"}
        try:
            exec(compile(code, "<run-oracle>", "exec"), namespace)
        except Exception:  # noqa: BLE001  # a program the oracle cannot run is skipped
            return None
        functions = _callables(namespace)
        names = {name: _parameters(function) for name, function, _ in functions}
        for (name, function, count), truth in itertools.product(functions, range(_ASSIGNMENTS)):
            args = [_argument(n, i, truth) for i, n in enumerate(names[name][:count])]
            log.append(f"run {name} {truth}")
            try:
                log.append(f"result {function(*args)!r}")
            except _Stop:
                log.append("cut")
            except Exception as exc:  # noqa: BLE001  # raising is behaviour too
                log.append(f"raised {type(exc).__name__}")
        return log
    finally:
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module


def behaviour_change(original: str, fixed: str) -> str | None:
    """The first difference between ``original`` and ``fixed`` run with grad mode on,
    or None (none, or a program the oracle cannot run)."""
    try:
        ast.parse(original)
    except (SyntaxError, ValueError):
        return None
    before, after = _trace(original, True), _trace(fixed, True)
    if before is None or after is None:
        return None if before is None else "the fixed module does not run"
    if "raised NameError" in before:
        return None  # a name the program never binds (`import torch` mutated away): not runnable as written
    for old, new in zip(before, after):
        if old != new:
            return f"with grad mode on: {old!r} became {new!r}"
    if len(before) != len(after):
        return f"with grad mode on: {len(before)} events became {len(after)}"
    return None
