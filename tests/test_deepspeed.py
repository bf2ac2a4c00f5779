"""DeepSpeed 0.12.6 from PyPI: the ZeRO-3 end-of-forward hook resets the coordinator
picked by grad mode while the forward hooks pick it by ``module.training`` (DeepSpeed
issue #4922), the ZeRO++ hpZ all-gather's group is chosen by grad mode two files away
(DeepSpeed issue #4784), and the fused transformer kernel's training mode is conjoined
with grad mode; nothing else in the package is reported."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gradgate.config import Config
from gradgate.runner import RunOptions, run

pytestmark = [pytest.mark.network, pytest.mark.slow]  # a DeepSpeed release from PyPI


@pytest.fixture(scope="module")
def deepspeed_0_12_6(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("deepspeed")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--quiet",
            "deepspeed==0.12.6",
            "-d",
            str(target),
        ],
        check=True,
        capture_output=True,
    )
    (archive,) = target.glob("deepspeed-0.12.6.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(
            target, [m for m in tar.getmembers() if m.name.startswith("deepspeed-0.12.6/deepspeed/")], filter="data"
        )
    return target / "deepspeed-0.12.6"


def test_deepspeed_0_12_6_findings(deepspeed_0_12_6, monkeypatch):
    monkeypatch.chdir(deepspeed_0_12_6)
    findings = [f for r in run(["deepspeed"], Config(), RunOptions()) for f in r.findings]
    assert [(f.path, f.line, f.column, f.rule) for f in findings] == [
        ("deepspeed/ops/transformer/transformer.py", 166, 79, "GG003"),
        ("deepspeed/runtime/zero/parameter_offload.py", 349, 20, "GG004"),
        # DeepSpeed #4784, reported at its deciding predicate: `if self.zero_param_process_group
        # and not forward:` picks the secondary (hpZ) group for the all-gather
        ("deepspeed/runtime/zero/partition_parameters.py", 1122, 54, "GG001"),
    ]
    assert (
        "`get_param_coordinator(training=)` is fed grad mode here (`torch._C.is_grad_enabled()`)" in findings[1].message
    )


def test_deepspeed_4784_is_reported_at_its_deciding_predicate_with_its_path_across_three_files(
    deepspeed_0_12_6, monkeypatch
):
    """ZeRO++ hpZ with reentrant checkpointing (DeepSpeed issue #4784): the pre-forward
    hook passes grad mode as ``forward``, and two files further the all-gather's process
    group is chosen by ``not forward``: reported there, checking the hook's file alone."""
    monkeypatch.chdir(deepspeed_0_12_6)
    results = run(["deepspeed/runtime/zero/parameter_offload.py"], Config(), RunOptions())
    (hpz,) = [f for r in results for f in r.findings if f.rule == "GG001"]
    assert hpz.message.startswith(
        "the process group (`group=`) of a forward collective is chosen by grad mode (`prev_grad_state`)"
    )
    zero = "deepspeed/runtime/zero/"
    assert [(s.path.removeprefix(zero), s.line, s.message) for s in hpz.flow] == [
        ("parameter_offload.py", 495, "grad mode captured: `torch.is_grad_enabled()`"),
        ("parameter_offload.py", 495, "grad mode held in `prev_grad_state`"),
        (
            "parameter_offload.py",
            505,
            "grad mode passed as `forward` to `PartitionedParameterCoordinator.fetch_sub_module`",
        ),
        (
            "partitioned_param_coordinator.py",
            284,
            "`forward` passed on as `forward` to `PartitionedParameterCoordinator.__all_gather_params`",
        ),
        (
            "partitioned_param_coordinator.py",
            426,
            "`forward` passed on as `forward` to `PartitionedParameterCoordinator.__all_gather_params_`",
        ),
        (
            "partitioned_param_coordinator.py",
            446,
            "`forward` passed on as `forward` to `Init._convert_to_deepspeed_param.<locals>.all_gather_coalesced`",
        ),
        ("partition_parameters.py", 1122, "`forward` decides the value passed as `group` to `_dist_allgather_fn`"),
        ("partition_parameters.py", 93, "decides `group` here (the process group of a forward collective)"),
    ]
    assert (hpz.path, hpz.line, hpz.column) == (zero + "partition_parameters.py", 1122, 54)
    assert hpz.source_line.strip() == "if self.zero_param_process_group and not forward:"
    assert hpz.applicability is None
