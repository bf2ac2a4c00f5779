"""pytest helpers for witness tests: ``pytest -p gradgate.witness.pytest_plugin`` (or list it
in ``pytest_plugins``).

- ``single_rank_group``: a one-rank gloo process group for the session (unless one is
  already initialised), so modules that call ``torch.distributed`` run in a plain pytest;
- ``same_forward_paths``: a function ``(build, inputs, modes=..., **options)`` that fails
  the test with the witness's readable diff when a forward leaves the grad-mode path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def single_rank_group() -> Iterator[Any]:
    import torch.distributed as dist

    if dist.is_initialized():
        yield dist.group.WORLD
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # type: ignore[attr-defined]
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


@pytest.fixture
def same_forward_paths() -> Callable[..., Any]:
    from .compare import assert_same_forward_paths

    def check(build: Any, inputs: Any, modes: Any = ("grad", "no_grad", "checkpoint"), **options: Any) -> Any:
        __tracebackhide__ = True
        return assert_same_forward_paths(build, inputs, modes, **options)

    return check
