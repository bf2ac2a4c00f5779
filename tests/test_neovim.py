"""Neovim's built-in LSP client (Debian's ``neovim``) attached to ``gradgate server``:
the diagnostics it receives for TransformerEngine 2.20.2's ``layernorm_mlp.py``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("pygls")
SCRIPT = Path(__file__).parent / "data" / "nvim_diagnostics.lua"
EDITS = Path(__file__).parent / "data" / "nvim_edits.lua"


def _nvim(script: Path, te_sources: Path, tmp_path: Path) -> object:
    """Run ``script`` in a headless Neovim on TE's ``layernorm_mlp.py``; its JSON output."""
    out = tmp_path / "diagnostics.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "GRADGATE_PYTHON": sys.executable,
        "GRADGATE_FILE": str(te_sources / "transformer_engine/pytorch/module/layernorm_mlp.py"),
        "GRADGATE_NVIM_OUT": str(out),
        "HOME": str(tmp_path),  # no user configuration, no shada in the real home
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    result = subprocess.run(
        ["nvim", "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {script}"],
        cwd=te_sources,
        env=env,
        capture_output=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return json.loads(out.read_text())


@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim (Debian: neovim) is not installed")
def test_neovim_receives_the_two_layernorm_mlp_findings(te_sources, tmp_path):
    found = _nvim(SCRIPT, te_sources, tmp_path)
    assert [(d["line"], d["column"], d["code"], d["source"]) for d in found] == [
        (388, 43, "GG001", "gradgate"),
        (389, 43, "GG001", "gradgate"),
    ]
    assert "`ub_overlap_ag`" in found[0]["message"] and "`ub_overlap_rs`" in found[1]["message"]


@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim (Debian: neovim) is not installed")
def test_neovim_edits_move_the_findings_with_their_lines(te_sources, tmp_path):
    """Two edits typed into the buffer (sent as incremental changes): comments at the top,
    then one inside ``_LayerNormMLP`` above the flagged lines. The server splices each
    tree from the one before (``Reparser``); the findings must move as a parse of the
    whole text would put them."""
    rounds = _nvim(EDITS, te_sources, tmp_path)
    assert rounds == [[388, 389], [391, 392], [392, 393]]
