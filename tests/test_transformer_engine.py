"""gradgate on the real TransformerEngine 2.20.2 sources, downloaded from PyPI."""

from __future__ import annotations

import compileall
import json
from pathlib import Path

from conftest import run_cli

TE_BUGS = [
    ("transformer_engine/pytorch/module/layernorm_linear.py", 213, "ub_overlap_ag_fprop"),
    ("transformer_engine/pytorch/module/layernorm_mlp.py", 388, "ub_overlap_ag"),
    ("transformer_engine/pytorch/module/layernorm_mlp.py", 389, "ub_overlap_rs"),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_check_reports_exactly_the_three_te_sites(te_sources):
    result = run_cli("check", "--format", "json", "transformer_engine", cwd=te_sources)
    assert result.returncode == 1, result.stderr.decode()
    assert result.stderr == b""
    findings = json.loads(result.stdout)
    assert [(f["path"], f["line"], f["rule"], f["fixable"]) for f in findings] == [
        (path, line, "GG001", True) for path, line, _ in TE_BUGS
    ]
    for finding, (_, _, flag) in zip(findings, TE_BUGS):
        assert f"`{flag}`" in finding["message"]
        assert finding["end_line"] == finding["line"]
        assert finding["end_column"] - finding["column"] == len("is_grad_enabled")


def test_the_layernorm_linear_finding_shows_the_path_from_the_capture(te_sources):
    """Grad mode captured in ``LayerNormLinear.forward``, packed in ``non_tensor_args``,
    passed through ``fwd_fn(*autograd_ctx, ...)`` (``_LayerNormLinear.apply`` or
    ``.forward``, chosen by grad mode), unpacked in ``_LayerNormLinear.forward``, gate."""
    result = run_cli("check", "--format", "json", "transformer_engine", cwd=te_sources)
    (finding, *_) = json.loads(result.stdout)
    module = "transformer_engine/pytorch/module/layernorm_linear.py"
    assert [(s["path"], s["line"], s["column"], s["message"]) for s in finding["flow"]] == [
        (module, 1703, 27, "grad mode captured: `torch.is_grad_enabled()`"),
        (module, 1703, 9, "grad mode held in `is_grad_enabled`"),
        (module, 1809, 49, "packed in a tuple passed as `non_tensor_args` to `_LayerNormLinear.forward`"),
        (module, 145, 13, "unpacked into `is_grad_enabled`"),
        (module, 213, 37, "grad mode decides `ub_overlap_ag_fprop` here"),
    ]
    text = run_cli("check", "--show-source", module, cwd=te_sources).stdout.decode()
    assert f"    note: {module}:1809:49: packed in a tuple passed as `non_tensor_args`" in text


def test_check_text_output_is_clickable(te_sources):
    result = run_cli("check", "transformer_engine", cwd=te_sources)
    assert result.returncode == 1
    lines = result.stdout.decode().splitlines()
    assert lines[:3] == [
        "transformer_engine/pytorch/module/layernorm_linear.py:213:37: GG001 forward "
        "communication flag `ub_overlap_ag_fprop` is gated on grad mode (`is_grad_enabled`): "
        "under torch.no_grad() the requested path is silently dropped",
        "transformer_engine/pytorch/module/layernorm_mlp.py:388:43: GG001 forward "
        "communication flag `ub_overlap_ag` is gated on grad mode (`is_grad_enabled`): "
        "under torch.no_grad() the requested path is silently dropped",
        "transformer_engine/pytorch/module/layernorm_mlp.py:389:43: GG001 forward "
        "communication flag `ub_overlap_rs` is gated on grad mode (`is_grad_enabled`): "
        "under torch.no_grad() the requested path is silently dropped",
    ]
    assert lines[3] == "Found 3 findings (3 fixable with `gradgate fix`)."


def test_fix_changes_exactly_the_three_predicates(te_copy):
    before = _snapshot(te_copy)
    result = run_cli("fix", "transformer_engine", cwd=te_copy)
    assert result.returncode == 0, result.stderr.decode()
    assert "Fixed 3 findings in 2 files; 0 left." in result.stderr.decode()
    after = _snapshot(te_copy)
    changed = sorted(k for k in before if before[k] != after[k])
    assert changed == [
        "transformer_engine/pytorch/module/layernorm_linear.py",
        "transformer_engine/pytorch/module/layernorm_mlp.py",
    ]
    assert set(after) == set(before)  # no file created or removed (no temp file left)

    def lines(name):
        return before[name].decode().splitlines(), after[name].decode().splitlines()

    old, new = lines(changed[0])
    assert len(old) == len(new)
    assert [i + 1 for i, (a, b) in enumerate(zip(old, new)) if a != b] == [213]
    assert new[212] == "            ub_overlap_ag_fprop and not return_layernorm_output"
    assert new[211:214] == [
        "        ub_overlap_ag_fprop = (",
        "            ub_overlap_ag_fprop and not return_layernorm_output",
        "        )",
    ]
    old, new = lines(changed[1])
    # line 388 loses its operand; line 389 would read `ub_overlap_rs = ub_overlap_rs`
    # (pylint W0127 in TE's own CI), so it is deleted instead
    assert old[:387] == new[:387] and old[389:] == new[388:]
    assert new[387] == "        ub_overlap_ag = ub_overlap_ag and not return_layernorm_output_gathered"
    assert old[388] == "        ub_overlap_rs = ub_overlap_rs and is_grad_enabled"

    assert compileall.compile_dir(str(te_copy / "transformer_engine"), quiet=2, legacy=True, force=True)

    second_check = run_cli("check", "transformer_engine", cwd=te_copy)
    assert second_check.returncode == 0
    assert second_check.stdout.decode().strip() == "All checks passed."
    snapshot = _snapshot(te_copy)
    second_fix = run_cli("fix", "transformer_engine", cwd=te_copy)
    assert second_fix.returncode == 0
    assert _snapshot(te_copy) == snapshot


def test_fix_diff_writes_nothing_and_applies(te_copy):
    before = _snapshot(te_copy)
    result = run_cli("fix", "--diff", "transformer_engine", cwd=te_copy)
    assert result.returncode == 1  # changes pending
    assert _snapshot(te_copy) == before
    diff = result.stdout.decode()
    assert diff.count("\n--- a/") + diff.startswith("--- a/") == 2
    assert "-        ub_overlap_rs = ub_overlap_rs and is_grad_enabled\n" in diff
    assert "+        ub_overlap_rs" not in diff
