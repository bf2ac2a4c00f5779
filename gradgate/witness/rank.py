"""Per-rank body of ``gradgate witness`` (``python -m gradgate.witness``, started by torchrun).

Every rank joins one process group (gloo on CPU, NCCL on GPUs) used by all the cases,
builds each case, runs :func:`~gradgate.witness.compare_forwards` on it and sends its
verdict to rank 0, which links the divergences to static findings and writes the results
to ``--result-file`` after every case. Imports torch.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from .cases import load_cases
from .compare import compare_forwards
from .modes import MODES, check_modes


def rank_device() -> torch.device:
    """This rank's device: its CUDA device under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gradgate.witness", description=__doc__)
    p.add_argument("cases", type=Path)
    p.add_argument("--result-file", type=Path, required=True)
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--modes", default="grad,no_grad,checkpoint", help=f"comma list of {', '.join(MODES)}")
    p.add_argument("--case", action="append", default=[], help="run only this case (repeatable)")
    p.add_argument("--probe", action="append", default=[], help="package.module:function to count")
    args = p.parse_args(argv)
    args.modes = check_modes(tuple(m.strip() for m in args.modes.split(",") if m.strip()))
    return args


def _source_of(module: Any) -> str | None:
    try:
        source = inspect.getsourcefile(type(module))
    except TypeError:
        return None
    return os.path.abspath(source) if source else None


class WitnessRank:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rank = int(os.environ.get("RANK", "0"))
        self.result: dict[str, Any] = {"cases_file": str(args.cases.resolve()), "cases": [], "complete": False}

    def save(self) -> None:
        if self.rank != 0:
            return
        path = self.args.result_file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.result, indent=2) + "\n")
        tmp.replace(path)

    def setup(self) -> None:
        backend = self.args.backend
        kwargs: dict[str, Any] = {"backend": backend, "timeout": datetime.timedelta(minutes=5)}
        if backend == "nccl":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
            kwargs["device_id"] = device
        dist.init_process_group(**kwargs)
        self.result.update(
            backend=backend,
            world_size=dist.get_world_size(),
            modes=list(self.args.modes),
            probes=list(self.args.probe),
            torch=torch.__version__,
        )
        self.save()

    def run_case(self, case: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": case.name, "line": case.line}
        try:
            module, inputs = case.function()
            entry["module"] = type(module).__qualname__
            entry["source"] = _source_of(module)
            comparison = compare_forwards(
                module, inputs, self.args.modes, probes=self.args.probe, link_findings=self.rank == 0
            )
            entry.update(comparison.as_dict(events=False))
            mine = len(comparison.divergences)
        except Exception as exc:  # noqa: BLE001 - one case's failure is reported, not fatal
            print(f"[rank {self.rank}] {case.name} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            entry["error"] = f"{type(exc).__name__}: {exc}"
            mine = -1
        counts: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(counts, mine)
        entry["divergences_per_rank"] = counts
        return entry

    def run(self) -> int:
        self.setup()
        for case in load_cases(self.args.cases, tuple(self.args.case)):
            self.result["cases"].append(self.run_case(case))
            self.save()
        self.result["complete"] = True
        self.save()
        dist.barrier()
        dist.destroy_process_group()
        return 0


def main(argv: list[str] | None = None) -> int:
    return WitnessRank(parse_args(argv)).run()
