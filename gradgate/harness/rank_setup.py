"""Set-up of a harness rank: process groups, TransformerEngine, UserBuffers, recipes and the
module pairs the cases compare (imports torch; transformer_engine on :func:`setup`)."""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..records import field, record
from .probe import OverlapProbe

LNL_UB_NAME = "qkv"


@record(frozen=False)
class RankContext:
    """What every part of a rank's work shares: arguments, process group, TE, the probe and
    the result rank 0 writes."""

    args: argparse.Namespace
    rank: int
    world: int
    local_rank: int
    result: dict[str, Any]
    device: Any = None
    tp_group: Any = None
    tp: int = 0
    te: Any = None
    probe: OverlapProbe = field(default_factory=OverlapProbe)

    @classmethod
    def from_environment(cls, args: argparse.Namespace) -> RankContext:
        return cls(
            args,
            rank=int(os.environ.get("RANK", "0")),
            world=int(os.environ.get("WORLD_SIZE", "1")),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            result={"te": args.te_label, "environment": {}, "cases": [], "performance": []},
        )

    def log(self, msg: str) -> None:
        if self.rank == 0:
            print(f"[gradgate harness {self.args.te_label}] {msg}", flush=True)

    def save(self) -> None:
        """Rank 0 writes the result so far (atomically: a crash leaves the last whole one)."""
        if self.rank != 0:
            return
        path = self.args.result_file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.result, indent=2, allow_nan=False) + "\n")
        tmp.replace(path)


def setup(ctx: RankContext) -> None:
    """Join the NCCL process group (TP group = all ranks), import TE, record the environment
    and install the overlap probe."""
    torch.cuda.set_device(ctx.local_rank)
    ctx.device = torch.device("cuda", ctx.local_rank)
    dist.init_process_group(backend="nccl", device_id=ctx.device, timeout=datetime.timedelta(minutes=5))
    ctx.tp_group = dist.new_group(backend="nccl")
    ctx.tp = dist.get_world_size(ctx.tp_group)

    import transformer_engine
    import transformer_engine.pytorch as te

    ctx.te = te
    cc = torch.cuda.get_device_capability(ctx.device)
    ctx.result["environment"] = {
        "gpus": ctx.world,
        "tp_size": ctx.tp,
        "gpu_name": torch.cuda.get_device_name(ctx.device),
        "compute_capability": f"{cc[0]}.{cc[1]}",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": _nccl_version(),
        "transformer_engine": transformer_engine.__version__,
        "transformer_engine_path": str(Path(transformer_engine.__file__).resolve().parent),
        "python": platform.python_version(),
        "env": {k: os.environ.get(k) for k in ("CUDA_DEVICE_MAX_CONNECTIONS", "UB_SKIPMC", "NCCL_NVLS_ENABLE")},
    }
    ctx.probe.install()
    ctx.save()
    env = ctx.result["environment"]
    ctx.log(
        f"TE {transformer_engine.__version__} from {env['transformer_engine_path']}, "
        f"torch {torch.__version__}, {ctx.world} x {env['gpu_name']}"
    )


def teardown(ctx: RankContext) -> None:
    ctx.probe.uninstall()
    dist.barrier()
    dist.destroy_process_group()


def _nccl_version() -> str:
    version = torch.cuda.nccl.version()
    return ".".join(map(str, version)) if isinstance(version, (tuple, list)) else str(version)


# -- UserBuffers ----------------------------------------------------------------------------
def init_ub(ctx: RankContext, tokens: int, hidden: int) -> None:
    te = ctx.te
    te.initialize_ub(
        [tokens, hidden],
        ctx.tp,
        quantization_modes=[te.UserBufferQuantizationMode.NONE, te.UserBufferQuantizationMode.FP8],
        dtype=torch.bfloat16,
        bootstrap_backend=ctx.args.bootstrap_backend,
    )


def destroy_ub(ctx: RankContext) -> None:
    ctx.te.destroy_ub()
    gc.collect()
    torch.cuda.synchronize()


# -- recipes and modules ----------------------------------------------------------------------
def recipe_skip_reason(ctx: RankContext, recipe: str) -> str | None:
    """Why this GPU cannot run ``recipe`` (MXFP8 / NVFP4 before Blackwell), or None."""
    te = ctx.te
    if recipe == "bf16":
        return None
    if recipe == "mxfp8":
        ok, reason = te.is_mxfp8_available(return_reason=True)
    elif recipe == "nvfp4":
        ok, reason = te.is_nvfp4_available(return_reason=True)
    else:
        ok, reason = te.is_fp8_available(return_reason=True)
    if ok:
        return None
    gpu = ctx.result["environment"]
    return f"{reason} ({gpu['gpu_name']} is compute capability {gpu['compute_capability']})".strip()


def make_recipe(recipe: str) -> Any:
    """The TE recipe object of ``recipe``; None for BF16 (no autocast, no TE import)."""
    if recipe == "bf16":
        return None
    from transformer_engine.common import recipe as r

    if recipe == "fp8_delayed_scaling":
        return r.DelayedScaling(fp8_format=r.Format.HYBRID, amax_history_len=32, amax_compute_algo="max")
    if recipe == "fp8_current_scaling":
        return r.Float8CurrentScaling(fp8_format=r.Format.HYBRID)
    if recipe == "mxfp8":
        return r.MXFP8BlockScaling()
    if recipe == "nvfp4":
        return r.NVFP4BlockScaling()
    raise ValueError(recipe)


def make_module(ctx: RankContext, kind: str, hidden: int, overlap: bool) -> Any:
    te = ctx.te
    common = dict(
        params_dtype=torch.bfloat16,
        device="cuda",
        tp_group=ctx.tp_group,
        tp_size=ctx.tp,
        sequence_parallel=True,
    )
    if kind == "LayerNormLinear":
        return te.LayerNormLinear(
            hidden,
            3 * hidden,
            parallel_mode="column",
            ub_overlap_ag=overlap,
            ub_name=LNL_UB_NAME if overlap else None,
            **common,
        )
    if kind == "LayerNormMLP":
        return te.LayerNormMLP(
            hidden,
            4 * hidden,
            set_parallel_mode=True,
            ub_overlap_ag=overlap,
            ub_overlap_rs=overlap,
            **common,
        )
    raise ValueError(kind)


def make_pair(ctx: RankContext, kind: str, hidden: int) -> tuple[Any, Any]:
    """(module with the overlap requested, reference without it), with identical weights."""
    test = make_module(ctx, kind, hidden, overlap=True)
    ref = make_module(ctx, kind, hidden, overlap=False)
    with torch.no_grad():
        for (name, p_test), (name_ref, p_ref) in zip(test.named_parameters(), ref.named_parameters()):
            assert name == name_ref, (name, name_ref)
            p_ref.copy_(p_test)
    for (_, p_test), (_, p_ref) in zip(test.named_parameters(), ref.named_parameters()):
        assert torch.equal(p_test, p_ref)
    return test, ref


def forward(ctx: RankContext, module: Any, x: Any, recipe_obj: Any) -> Any:
    """One forward under the recipe's autocast; the output tensor."""
    with ctx.te.autocast(enabled=recipe_obj is not None, recipe=recipe_obj, amax_reduction_group=ctx.tp_group):
        out = module(x)
    return out[0] if isinstance(out, tuple) else out
