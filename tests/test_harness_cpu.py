"""The GPU validation harness, tested where CI runs it: on a CPU.

What needs no GPU is tested here: the fixed-TE overlay built from the real TE 2.20.2 wheel
and fixed by gradgate itself, the `harness` click command (torchrun command lines, option
validation, exit codes), and the report rendered from the committed result of the real run
on 2 x H200 (docs/validation/report.json). The GPU test at the end is marked `gpu` and
skips without torch, TransformerEngine or two CUDA GPUs.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gradgate.harness import cli as harness_cli
from gradgate.harness import launcher, overlay, report
from gradgate.harness.cases import DEFAULT_PERF_SHAPES, parse_perf_shapes

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = ROOT / "docs" / "validation"

LNL = "transformer_engine/pytorch/module/layernorm_linear.py"
LNM = "transformer_engine/pytorch/module/layernorm_mlp.py"


# -- the lint path never imports torch ---------------------------------------------------
#: refuses torch and transformer_engine, and remembers each attempt: an import whose
#: ImportError is caught (``try: import torch``) is still an import the lint path made
BLOCK_TORCH = """
import sys
class _Block:
    tried = []
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformer_engine"):
            _Block.tried.append(name)
            raise ImportError(f"blocked import of {name}")
        return None
sys.meta_path.insert(0, _Block())
"""


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that imports the installed gradgate (as CI installs it)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)


def test_launcher_and_lint_path_import_without_torch(tmp_path):
    (tmp_path / "m.py").write_text(
        "def f(ub_overlap_ag, is_grad_enabled, x):\n"
        "    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n"
        "    return ub_overlap_ag\n"
    )
    code = BLOCK_TORCH + (
        "import gradgate.cli, gradgate.engine, gradgate.harness, gradgate.harness.launcher, gradgate.harness.cli\n"
        "import gradgate.harness.overlay, gradgate.harness.report, gradgate.harness.cases\n"
        "import gradgate.witness, gradgate.witness.cli, gradgate.witness.report, gradgate.witness.cases\n"
        "from gradgate.cli import run\n"
        f"print('exit', run(['check', {str(tmp_path / 'm.py')!r}]))\n"
        "print(sorted({*_Block.tried, *(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformer_engine'))}))\n"
    )
    proc = _python(code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2:] == ["exit 1", "[]"]


def test_no_module_outside_the_harness_and_witness_imports_torch():
    offenders = []
    files = [
        p for p in (ROOT / "gradgate").rglob("*.py") if not {"harness", "witness"} & set(p.relative_to(ROOT).parts)
    ]
    files += list((ROOT / "rules").rglob("*.py"))
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in ("torch", "transformer_engine")
            ]
    assert files and offenders == []


def _torch_importing(folder: Path) -> set[str]:
    importing = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(n.split(".")[0] in ("torch", "transformer_engine") for n in names):
                    importing.add(path.name)
    return importing


def test_harness_modules_that_import_torch_are_only_the_rank_side():
    assert _torch_importing(ROOT / "gradgate" / "harness") == {
        "probe.py",
        "rank_setup.py",
        "rank_cases.py",
        "rank_perf.py",
    }


def test_witness_modules_that_import_torch_are_only_the_recording_side():
    assert _torch_importing(ROOT / "gradgate" / "witness") == {
        "collectives.py",
        "compare.py",
        "modes.py",
        "pytest_plugin.py",
        "rank.py",
        "recorder.py",
    }


# -- overlay from the real TE 2.20.2 wheel -----------------------------------------------
def _files(top: Path) -> set[str]:
    return {
        str(p.relative_to(top))
        for p in top.rglob("*")
        if (p.is_file() or p.is_symlink()) and "__pycache__" not in p.parts
    }


@pytest.mark.network
def test_fixed_overlay_from_the_pypi_wheel(te_copy, tmp_path):
    """Overlay of the PyPI transformer_engine, fixed by `python -m gradgate fix`."""
    original = te_copy / "transformer_engine"
    # the pure-Python wheel has no shared library: add stand-ins where the CUDA wheels put them
    core = original / "wheel_lib" / "libtransformer_engine.so"
    core.parent.mkdir()
    core.write_bytes(b"\x7fELF core stand-in")
    ext = original / "wheel_lib" / "transformer_engine_torch.cpython-312-x86_64-linux-gnu.so"
    ext.write_bytes(b"\x7fELF torch-extension stand-in")
    sibling = te_copy / "transformer_engine_torch.cpython-312-x86_64-linux-gnu.so"
    sibling.write_bytes(b"\x7fELF editable-layout stand-in")
    assert "is_grad_enabled and not return_layernorm_output" in (te_copy / LNL).read_text().splitlines()[212]

    root = tmp_path / "overlay"
    built, fix, changed = overlay.build_fixed_overlay(original, root)

    # gradgate's own fix ran, per the CLI contract, and left nothing
    assert fix.command == [sys.executable, "-m", "gradgate", "fix", str(root / "transformer_engine")]
    assert (fix.exit_code, fix.meaning) == (0, "nothing left unfixed")
    assert [(f["path"], f["line"], f["rule"], f["fixable"]) for f in fix.findings_before] == [
        ("transformer_engine/pytorch/module/layernorm_linear.py", 213, "GG001", True),
        ("transformer_engine/pytorch/module/layernorm_mlp.py", 388, "GG001", True),
        ("transformer_engine/pytorch/module/layernorm_mlp.py", 389, "GG001", True),
    ]
    assert fix.findings_after == []

    # the fixed predicates, and nothing else
    lnl = (root / LNL).read_text().splitlines()
    assert lnl[211:214] == [
        "        ub_overlap_ag_fprop = (",
        "            ub_overlap_ag_fprop and not return_layernorm_output",
        "        )",
    ]
    lnm = (root / LNM).read_text().splitlines()
    # line 389 would read `ub_overlap_rs = ub_overlap_rs` (pylint W0127): deleted instead
    assert lnm[387:389] == [
        "        ub_overlap_ag = ub_overlap_ag and not return_layernorm_output_gathered",
        "",
    ]
    assert [(c.path, c.hunks) for c in changed] == [
        (LNL, [{"original": [213, 213], "fixed": [213, 213]}]),
        (LNM, [{"original": [388, 389], "fixed": [388, 388]}]),
    ]
    assert "-            ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output\n" in changed[0].diff
    assert "-        ub_overlap_rs = ub_overlap_rs and is_grad_enabled\n" in changed[1].diff
    assert "+        ub_overlap_rs" not in changed[1].diff

    # shared libraries are symlinks to the originals; every other file is a byte-identical copy
    for lib in (core, ext):
        linked = root / "transformer_engine" / lib.relative_to(original)
        assert linked.is_symlink() and Path(os.readlink(linked)) == lib.resolve()
    assert (root / sibling.name).is_symlink() and Path(os.readlink(root / sibling.name)) == sibling.resolve()
    assert sorted(built.linked) == [
        "transformer_engine/wheel_lib/libtransformer_engine.so",
        "transformer_engine/wheel_lib/transformer_engine_torch.cpython-312-x86_64-linux-gnu.so",
        sibling.name,
    ]
    originals = _files(original)
    assert _files(root / "transformer_engine") == originals
    fixed_files = {LNL.split("/", 1)[1], LNM.split("/", 1)[1]}
    for rel in sorted(originals - fixed_files):
        copied = root / "transformer_engine" / rel
        if rel.endswith(".so"):
            continue
        assert not copied.is_symlink(), rel
        assert copied.read_bytes() == (original / rel).read_bytes(), rel
    for rel in fixed_files:
        assert (root / "transformer_engine" / rel).read_bytes() != (original / rel).read_bytes()
        ast.parse((root / "transformer_engine" / rel).read_text())
    # the installed package itself is untouched
    assert "is_grad_enabled and not return_layernorm_output" in (te_copy / LNL).read_text().splitlines()[212]


def test_overlay_copies_links_and_replaces(tmp_path):
    pkg = tmp_path / "site" / "transformer_engine"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text("x = 1\n")
    (pkg / "sub" / "mod.py").write_text("y = 2\n")
    (pkg / "sub" / "data.json").write_text("{}\n")
    (pkg / "sub" / "__pycache__" / "mod.cpython-312.pyc").write_bytes(b"pyc")
    (pkg / "sub" / "libx.so.1").write_bytes(b"lib")
    root = tmp_path / "ov"
    (root / "transformer_engine").mkdir(parents=True)
    (root / "transformer_engine" / "stale.py").write_text("old\n")
    (root / ".gradgate-overlay").write_text("")  # an overlay gradgate built before

    built = overlay.build_overlay(pkg, root)

    assert _files(root / "transformer_engine") == {"__init__.py", "sub/mod.py", "sub/data.json", "sub/libx.so.1"}
    assert sorted(built.copied) == ["__init__.py", "sub/data.json", "sub/mod.py"]
    assert built.linked == ["transformer_engine/sub/libx.so.1"]
    assert os.readlink(root / "transformer_engine" / "sub" / "libx.so.1") == str((pkg / "sub" / "libx.so.1").resolve())
    assert overlay.diff_overlay(pkg, root / "transformer_engine") == []

    (root / "transformer_engine" / "sub" / "mod.py").write_text("y = 3\n")
    (changed,) = overlay.diff_overlay(pkg, root / "transformer_engine")
    assert (changed.path, changed.hunks) == ("transformer_engine/sub/mod.py", [{"original": [1, 1], "fixed": [1, 1]}])

    (root / "transformer_engine" / "extra.py").write_text("z = 1\n")
    with pytest.raises(overlay.OverlayError, match=r"added \['extra.py'\], removed \[\]"):
        overlay.diff_overlay(pkg, root / "transformer_engine")


def test_overlay_refuses_to_write_over_the_installed_package(tmp_path):
    pkg = tmp_path / "site" / "transformer_engine"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    with pytest.raises(overlay.OverlayError, match="would overwrite the installed package"):
        overlay.build_overlay(pkg, tmp_path / "site")
    with pytest.raises(overlay.OverlayError, match="not a Python package"):
        overlay.build_overlay(tmp_path, tmp_path / "elsewhere")


def test_shared_library_names():
    assert [
        n
        for n in ("a.so", "libb.so.12", "c.cpython-312-x86_64-linux-gnu.so", "d.py", "e.sol", "f.dylib")
        if overlay.is_shared_library(n)
    ] == ["a.so", "libb.so.12", "c.cpython-312-x86_64-linux-gnu.so", "f.dylib"]


# -- the click command --------------------------------------------------------------------
def _rank_args(variant: str, output: str, perf: bool, nproc_perf_shapes: str = DEFAULT_PERF_SHAPES) -> list[str]:
    args = [
        "--te-label", variant,
        "--result-file", f"{output}/raw-{variant}.json",
        "--modules", "LayerNormLinear,LayerNormMLP",
        "--recipes", "bf16,fp8_delayed_scaling,fp8_current_scaling,mxfp8,nvfp4",
        "--modes", "no_grad,grad,checkpoint_reentrant,checkpoint_non_reentrant",
        "--hidden-size", "1024",
        "--seq-length", "2048",
        "--batch-size", "2",
        "--seed", "1234",
        "--bootstrap-backend", "nccl",
    ]  # fmt: skip
    if perf:
        args += [
            "--perf-shapes", nproc_perf_shapes,
            "--perf-recipes", "bf16,fp8_delayed_scaling",
            "--perf-modules", "LayerNormLinear,LayerNormMLP",
            "--perf-batch-size", "1",
            "--perf-warmup", "20",
            "--perf-repeats", "20",
            "--perf-rounds", "3",
        ]  # fmt: skip
    return args


def _torchrun(nproc: int, rank_args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "-m",
        "gradgate.harness",
        *rank_args,
    ]


def _invoke(args, env=None):
    return CliRunner().invoke(harness_cli.harness, args, env=env, catch_exceptions=False)


def test_dry_run_both_builds_two_torchrun_lines(tmp_path):
    out = str(tmp_path / "rep")
    result = _invoke(["--te", "both", "--nproc-per-node", "4", "--output", out, "--overlay-dir", "/ov", "--dry-run"])
    assert result.exit_code == 0, result.output
    stock_line, fixed_line = result.output.splitlines()
    assert shlex.split(stock_line) == _torchrun(4, _rank_args("stock", out, perf=False))
    prefix = "PYTHONPATH=/ov:$PYTHONPATH "
    assert fixed_line.startswith(prefix)
    assert shlex.split(fixed_line[len(prefix) :]) == _torchrun(4, _rank_args("fixed", out, perf=True))


def test_dry_run_selections_and_no_perf(tmp_path):
    out = str(tmp_path / "rep")
    result = _invoke([
        "--te", "stock", "--nproc-per-node", "2", "--output", out, "--dry-run", "--no-perf",
        "--modules", "LayerNormMLP", "--recipes", "fp8_current_scaling,bf16", "--modes", "no_grad",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()
    argv = shlex.split(line)
    assert argv[:8] == _torchrun(2, [])
    assert "--perf-shapes" not in argv
    # selections come back in canonical order
    assert argv[argv.index("--recipes") + 1] == "bf16,fp8_current_scaling"
    assert argv[argv.index("--modules") + 1] == "LayerNormMLP"
    assert argv[argv.index("--modes") + 1] == "no_grad"


def test_dry_run_perf_shapes_go_to_the_last_run_only(tmp_path):
    result = _invoke(
        [
            "--nproc-per-node",
            "2",
            "--output",
            str(tmp_path),
            "--dry-run",
            "--perf-shapes",
            "4096x8192, 2048X2048",
            "--perf-recipes",
            "fp8_delayed_scaling",
        ]
    )
    assert result.exit_code == 0, result.output
    stock, fixed = (
        shlex.split(line.split(" ", 1)[1]) if line.startswith("PYTHONPATH=") else shlex.split(line)
        for line in result.output.splitlines()
    )
    assert "--perf-shapes" not in stock
    assert fixed[fixed.index("--perf-shapes") + 1] == "4096x8192,2048x2048"
    assert fixed[fixed.index("--perf-recipes") + 1] == "fp8_delayed_scaling"


def test_nproc_defaults_to_visible_gpus(tmp_path):
    env = {"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": "0,1,2"}  # no nvidia-smi on PATH
    result = _invoke(["--te", "stock", "--no-perf", "--output", str(tmp_path), "--dry-run"], env=env)
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.output)
    assert "--nproc-per-node=3" in argv
    # the default case shape is rounded up to fit TP 3: 1024 -> 1056, 2048 -> 2064
    assert argv[argv.index("--hidden-size") + 1] == "1056" and argv[argv.index("--seq-length") + 1] == "2064"
    assert launcher.count_visible_gpus({"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": "1,-1,0"}) == 1


def test_no_gpus_is_exit_2(tmp_path):
    env = {"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": None}
    result = _invoke(["--output", str(tmp_path)], env=env)
    assert result.exit_code == 2
    assert "the harness needs at least 2 visible GPUs (TP size = GPUs), found 0" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--nproc-per-node", "1"], "Invalid value for '--nproc-per-node': 1 is not in the range x>=2."),
        (["--nproc-per-node", "two"], "Invalid value for '--nproc-per-node': 'two' is not a valid integer"),
        (["--te", "patched"], "Invalid value for '--te': 'patched' is not one of 'stock', 'fixed', 'both'."),
        (
            ["--recipes", "fp9"],
            "Invalid value for '--recipes': unknown recipe 'fp9'; choose from bf16, "
            "fp8_delayed_scaling, fp8_current_scaling, mxfp8, nvfp4 or all",
        ),
        (["--modes", ""], "Invalid value for '--modes': no mode given"),
        (
            ["--perf-shapes", "4096by8192"],
            "Invalid value for '--perf-shapes': bad perf shape '4096by8192': expected HIDDENxSEQ, e.g. 4096x8192",
        ),
        (["--seq-length", "2050"], "sequence 2050 is not divisible by TP size 4"),
        (["--perf-repeats", "0"], "Invalid value for '--perf-repeats': 0 is not in the range x>=1."),
    ],
)
def test_invalid_values_exit_2(tmp_path, args, message):
    result = _invoke(["--nproc-per-node", "4", "--output", str(tmp_path), "--dry-run", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_rank_environment_puts_the_overlay_first():
    env = launcher.rank_environment(Path("/ov"), ub_multicast=False, base={"PYTHONPATH": "/a:/b", "UB_SKIPMC": "0"})
    assert env["PYTHONPATH"] == "/ov:/a:/b"
    assert (env["CUDA_DEVICE_MAX_CONNECTIONS"], env["UB_SKIPMC"], env["PYTHONUNBUFFERED"]) == ("1", "1", "1")
    stock = launcher.rank_environment(
        None, ub_multicast=True, base={"UB_SKIPMC": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "8"}
    )
    assert (stock["PYTHONPATH"], stock["CUDA_DEVICE_MAX_CONNECTIONS"], "UB_SKIPMC" in stock) == ("", "8", False)


def test_perf_shape_parsing():
    assert [s.label for s in parse_perf_shapes(DEFAULT_PERF_SHAPES)] == [
        "2048x2048",
        "2048x8192",
        "4096x4096",
        "4096x8192",
        "8192x8192",
        "8192x16384",
    ]
    assert parse_perf_shapes(" , ") == ()


# -- reports from the committed real run -------------------------------------------------
@pytest.fixture
def recorded() -> dict:
    return report.load_report(VALIDATION / "report.json")


def test_committed_report_schema(recorded):
    env = recorded["environment"]
    assert (env["gpus"], env["gpu_name"], env["transformer_engine"]) == (2, "NVIDIA H200", "2.20.2")
    assert isinstance(env["torch"], str)
    keys = {"module", "recipe", "te", "mode"}
    run_keys = keys | {"overlap_used", "matches_reference", "max_abs_diff"}
    for case in recorded["cases"]:
        assert case["module"] in ("LayerNormLinear", "LayerNormMLP")
        assert case["recipe"] in ("bf16", "fp8_delayed_scaling", "fp8_current_scaling", "mxfp8", "nvfp4")
        assert case["te"] in ("stock", "fixed")
        assert case["mode"] in ("no_grad", "grad", "checkpoint_reentrant")
        if "skipped" in case:
            assert set(case) == keys | {"skipped"} and case["skipped"]
        else:
            assert run_keys <= set(case)
            assert isinstance(case["overlap_used"], bool) and isinstance(case["matches_reference"], bool)
            assert isinstance(case["max_abs_diff"], float)
    assert len(recorded["cases"]) == 2 * 5 * 2 * 3
    for entry in recorded["performance"]:
        assert entry["mode"] == "no_grad" and entry["te"] == "fixed"
        assert entry["speedup"] == pytest.approx(entry["no_overlap_ms"] / entry["overlap_ms"], rel=1e-3)


def test_committed_report_shows_the_bug_and_the_fix(recorded):
    by_key = {(c["te"], c["module"], c["recipe"], c["mode"]): c for c in recorded["cases"]}
    for module in ("LayerNormLinear", "LayerNormMLP"):
        for recipe in ("bf16", "fp8_delayed_scaling", "fp8_current_scaling"):
            stock = {m: by_key["stock", module, recipe, m] for m in ("no_grad", "grad", "checkpoint_reentrant")}
            fixed = {m: by_key["fixed", module, recipe, m] for m in ("no_grad", "grad", "checkpoint_reentrant")}
            assert [f["overlap_used"] for f in stock["no_grad"]["forwards"]] == [False]
            assert [f["overlap_used"] for f in stock["grad"]["forwards"]] == [True]
            assert [(f["phase"], f["overlap_used"]) for f in stock["checkpoint_reentrant"]["forwards"]] == [
                ("first_forward", False),
                ("recompute", True),
            ]
            for case in fixed.values():
                assert case["overlap_used"] and case["matches_reference"], case
                assert all(f["overlap_used"] for f in case["forwards"])
            assert [(f["phase"], f["grad_enabled"]) for f in fixed["checkpoint_reentrant"]["forwards"]] == [
                ("first_forward", False),
                ("recompute", True),
            ]
            if recipe == "bf16":
                assert all(c["bitwise_equal"] and c["max_abs_diff"] == 0.0 for c in fixed.values())
        for recipe in ("mxfp8", "nvfp4"):
            assert "compute capability 10.0" in by_key["fixed", module, recipe, "no_grad"]["skipped"]
    assert [c["path"] for c in recorded["fix"]["changed_files"]] == [LNL, LNM]
    assert recorded["fix"]["run"]["exit_code"] == 0


def test_verdicts_and_exit_code_of_the_recorded_run(recorded):
    lines = report.verdict_lines(recorded)
    assert lines[-1] == "PASS overall: 18 PASS, 12 BUG, 6 OK, 24 SKIP"
    assert report.exit_code(recorded) == 0
    assert lines[0] == (
        "BUG   stock LayerNormLinear bf16                 no_grad              overlap path taken in 0/1 forwards: "
        "requested overlap silently dropped under no_grad (forward) - TE #2902 reproduced; bitwise equal to the reference"
    )
    assert (
        "PASS  fixed LayerNormMLP    fp8_current_scaling  checkpoint_reentrant overlap path taken in 2/2 forwards; "
        "bitwise equal to the reference"
    ) in lines
    assert len(lines) == len(recorded["cases"]) + 1


def test_fixed_te_missing_the_overlap_path_fails(recorded):
    broken = copy.deepcopy(recorded)
    case = next(
        c
        for c in broken["cases"]
        if (c["te"], c["module"], c["recipe"], c["mode"]) == ("fixed", "LayerNormMLP", "bf16", "checkpoint_reentrant")
    )
    case["forwards"][0]["overlap_used"] = False
    case["overlap_used"] = False
    assert report.case_verdict(case) == ("FAIL", "overlap path NOT taken in first_forward")
    assert report.exit_code(broken) == 1
    assert report.summary_line(broken) == "FAIL overall: 17 PASS, 1 FAIL, 12 BUG, 6 OK, 24 SKIP"


def test_divergence_or_error_fails(recorded):
    broken = copy.deepcopy(recorded)
    case = next(c for c in broken["cases"] if c["te"] == "fixed" and c["recipe"] == "fp8_delayed_scaling")
    case.update(matches_reference=False, bitwise_equal=False, max_abs_diff=0.5)
    assert report.case_verdict(case) == (
        "FAIL",
        "diverges from the reference: max |diff| 0.5 (atol 0.0625, rtol 0.125)",
    )
    assert report.exit_code(broken) == 1
    stock = copy.deepcopy(recorded)
    stock["run_errors"] = {"stock": "torchrun exited with code 1"}
    assert report.exit_code(stock) == 1
    assert "ERROR stock run: torchrun exited with code 1" in report.verdict_lines(stock)


def test_committed_markdown_is_rendered_from_committed_json(recorded):
    md = report.render_markdown(recorded, png_name=report.REPORT_PNG)
    assert md == (VALIDATION / "report.md").read_text()
    assert "```\ngradgate harness --te both --output docs/validation --timeout 240\n```" in md
    assert "| LayerNormLinear | bf16 | no_grad | **no** | bitwise | yes | bitwise | 0 / 0 | BUG / PASS |" in md
    assert (
        "| LayerNormMLP | fp8_current_scaling | checkpoint_reentrant | first_forward: **no**, recompute: yes | "
        "bitwise | first_forward: yes, recompute: yes | bitwise | 0 / 0 | BUG / PASS |"
    ) in md
    assert "- `transformer_engine/pytorch/module/layernorm_linear.py`: lines 213 -> 213" in md
    assert "\n-        ub_overlap_rs = ub_overlap_rs and is_grad_enabled\n" in md
    assert "\n+        ub_overlap_rs = ub_overlap_rs\n" in md
    perf_rows = [line for line in md.splitlines() if line.startswith(("| LayerNormLinear | bf16 | 4096 | 8192 |",))]
    entry = next(
        e
        for e in recorded["performance"]
        if (e["module"], e["recipe"], e["hidden"], e["seq"]) == ("LayerNormLinear", "bf16", 4096, 8192)
    )
    assert len(perf_rows) == 1 and f"| {entry['speedup']:.3f}x (" in perf_rows[0]
    assert md.rstrip().endswith("![speedup of the overlap path under no_grad](speedup.png)")
    assert (VALIDATION / "speedup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dry_run_non_reentrant_mode(tmp_path):
    result = _invoke(
        [
            "--te",
            "fixed",
            "--nproc-per-node",
            "2",
            "--output",
            str(tmp_path),
            "--dry-run",
            "--no-perf",
            "--modes",
            "checkpoint_non_reentrant,no_grad",
        ]
    )
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.output.split(" ", 1)[1])
    assert argv[argv.index("--modes") + 1] == "no_grad,checkpoint_non_reentrant"


def test_markdown_with_the_non_reentrant_mode(recorded):
    """A report that ran the fourth mode describes it and gives it its rows, after the reentrant one."""
    extended = copy.deepcopy(recorded)
    extended["settings"]["modes"] = ["no_grad", "grad", "checkpoint_reentrant", "checkpoint_non_reentrant"]
    for case in [c for c in recorded["cases"] if c["mode"] == "checkpoint_reentrant"]:
        added = copy.deepcopy(case)
        added["mode"] = "checkpoint_non_reentrant"
        for forward in added.get("forwards", []):
            forward.update(grad_enabled=True, overlap_used=True)
        if "forwards" in added:
            added["overlap_used"] = True
        extended["cases"].append(added)
    md = report.render_markdown(extended)
    assert (
        "`checkpoint_non_reentrant` (`torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`, early stop off: "
        "a first forward with grad, then a full recompute with grad during backward; both must take the overlap path)."
    ) in md
    rows = [line for line in md.splitlines() if line.startswith("| LayerNormLinear | bf16 | checkpoint")]
    assert rows == [
        "| LayerNormLinear | bf16 | checkpoint_reentrant | first_forward: **no**, recompute: yes | bitwise | "
        "first_forward: yes, recompute: yes | bitwise | 0 / 0 | BUG / PASS |",
        "| LayerNormLinear | bf16 | checkpoint_non_reentrant | first_forward: yes, recompute: yes | bitwise | "
        "first_forward: yes, recompute: yes | bitwise | 0 / 0 | OK / PASS |",
    ]
    assert report.summary_line(extended) == "PASS overall: 24 PASS, 12 BUG, 12 OK, 32 SKIP"
    assert "non-reentrant checkpointing runs both with grad" in md
    assert "non-reentrant" not in report.render_markdown(recorded)


def test_report_written_with_and_without_matplotlib(recorded, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    written = report.write_report(copy.deepcopy(recorded), tmp_path / "with")
    assert written["png"] == tmp_path / "with" / "speedup.png"
    assert written["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(written["json"].read_text()) == recorded

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    written = report.write_report(copy.deepcopy(recorded), tmp_path / "without")
    assert (written["png"], written["png_note"]) == (None, "matplotlib is not importable")
    assert not (tmp_path / "without" / "speedup.png").exists()
    assert written["md"].read_text().rstrip().endswith("(No plot: matplotlib is not importable.)")


def test_launcher_runs_torchrun_per_variant_and_reports(recorded, tmp_path, monkeypatch):
    """The launcher end to end with torchrun replaced by a script that replays the recorded
    rank-0 result (what `python -m gradgate.harness` writes) of the stock run."""
    raw = {
        "te": "stock",
        "environment": {
            **recorded["environment"],
            "transformer_engine_path": recorded["environment"]["transformer_engine_paths"]["stock"],
        },
        "cases": [c for c in recorded["cases"] if c["te"] == "stock"],
        "performance": [],
        "complete": True,
    }
    raw_file = tmp_path / "raw.json"
    raw_file.write_text(json.dumps(raw))
    replay = tmp_path / "replay.py"
    replay.write_text(
        "import os, shutil, sys\n"
        "args = sys.argv[1:]\n"
        "assert os.environ['UB_SKIPMC'] == '1' and os.environ['CUDA_DEVICE_MAX_CONNECTIONS'] == '1'\n"
        f"shutil.copy({str(raw_file)!r}, args[args.index('--result-file') + 1])\n"
    )
    calls = []

    def fake_torchrun(nproc, rank_args, python=sys.executable):
        calls.append((nproc, rank_args))
        return [python, str(replay), *rank_args]

    monkeypatch.setattr(launcher, "torchrun_command", fake_torchrun)
    out = tmp_path / "out"
    result = _invoke(["--te", "stock", "--nproc-per-node", "2", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert [(n, a[:2]) for n, a in calls] == [(2, ["--te-label", "stock"])]
    assert result.output.splitlines()[-2] == "PASS overall: 12 BUG, 6 OK, 12 SKIP"
    assert sorted(p.name for p in out.iterdir()) == ["raw-stock.json", "report.json", "report.md"]
    written = json.loads((out / "report.json").read_text())
    assert written["cases"] == raw["cases"] and written["fix"] is None
    assert written["command"] == f"harness --te stock --nproc-per-node 2 --output {out}"

    # a run that writes nothing is an error: exit 1
    replay.write_text("import sys; sys.exit(3)\n")
    result = _invoke(["--te", "stock", "--nproc-per-node", "2", "--output", str(tmp_path / "out2")])
    assert result.exit_code == 1
    assert "ERROR stock run: torchrun exited with code 3" in result.output


# -- on GPUs --------------------------------------------------------------------------------
@pytest.mark.gpu
def test_harness_on_gpus(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformer_engine")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs at least 2 CUDA GPUs")
    out = tmp_path / "report"
    result = _invoke(["--te", "both", "--recipes", "bf16", "--no-perf", "--output", str(out), "--timeout", "600"])
    assert result.exit_code == 0, result.output
    written = report.load_report(out / "report.json")
    by_key = {(c["te"], c["module"], c["mode"]): c for c in written["cases"]}
    for module in ("LayerNormLinear", "LayerNormMLP"):
        assert by_key["fixed", module, "no_grad"]["overlap_used"] is True
        assert by_key["fixed", module, "checkpoint_reentrant"]["overlap_used"] is True
        assert all(by_key["fixed", module, m]["matches_reference"] for m in ("no_grad", "grad", "checkpoint_reentrant"))
