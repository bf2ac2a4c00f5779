"""gradgate among the tools its users already run: SARIF and GitHub output, pyproject
configuration, suppressions, baselines, rule docs, progress output."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

BUGGY = (
    "import torch\n"
    "\n"
    "def forward(ub_overlap_ag, ub_overlap_rs, x):\n"
    "    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled() and x\n"
    "    ub_overlap_rs = ub_overlap_rs and torch.is_grad_enabled()\n"
    "    return ub_overlap_ag, ub_overlap_rs\n"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text(BUGGY)
    return tmp_path


def _json(result):
    return [(f["path"].replace(os.sep, "/"), f["line"], f["rule"]) for f in json.loads(result.stdout)]


# -- SARIF ----------------------------------------------------------------------------
def test_sarif_validates_against_the_oasis_schema(project):
    import jsonschema  # the test extra: never skipped

    schema_path = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
    (project / "src" / "broken.py").write_text("def f(:\n    is_grad_enabled\n")
    result = run_cli("check", "--format", "sarif", "src", cwd=project)
    assert result.returncode == 2
    sarif = json.loads(result.stdout)
    jsonschema.validate(sarif, json.loads(schema_path.read_text()))
    run = sarif["runs"][0]
    assert sarif["version"] == "2.1.0"
    assert next(r["id"] for r in run["tool"]["driver"]["rules"]) == "GG001"
    assert [
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            r["locations"][0]["physicalLocation"]["region"]["startColumn"],
        )
        for r in run["results"]
    ] == [("GG001", "src/model.py", 4, 39), ("GG001", "src/model.py", 5, 39)]
    fix = run["results"][1]["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert fix == {
        # `ub_overlap_rs = ub_overlap_rs` would be left: the statement goes
        "deletedRegion": {"startLine": 5, "startColumn": 5, "endLine": 6, "endColumn": 5},
        "insertedContent": {"text": ""},
    }
    assert run["invocations"][0]["executionSuccessful"] is False
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["invocations"][0]["toolExecutionNotifications"] == [
        {
            "level": "error",
            "descriptor": {"id": "syntax-error"},
            "message": {"text": "src/broken.py: syntax error at 1:7: invalid syntax"},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": "src/broken.py", "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": 1, "startColumn": 7},
                    }
                }
            ],
        }
    ]
    assert "baselineState" not in run["results"][0] and "suppressions" not in run["results"][0]


def test_sarif_with_a_baseline_carries_baseline_state_and_suppressions(project):
    import jsonschema

    schema = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    (project / "other.py").write_text(BUGGY.replace("ub_overlap_rs and", "ub_overlap_rs and x and"))
    assert run_cli("check", "--write-baseline", "base.json", "src", cwd=project).returncode == 0
    result = run_cli("check", "--format", "sarif", "--baseline", "base.json", "src", "other.py", cwd=project)
    assert result.returncode == 1  # other.py's findings are new
    sarif = json.loads(result.stdout)
    jsonschema.validate(sarif, schema)
    states = [
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            r["baselineState"],
            [s["kind"] for s in r.get("suppressions", [])],
        )
        for r in sarif["runs"][0]["results"]
    ]
    assert states == [
        ("other.py", 4, "new", []),
        ("other.py", 5, "new", []),
        ("src/model.py", 4, "unchanged", ["external"]),
        ("src/model.py", 5, "unchanged", ["external"]),
    ]


def test_sarif_reports_findings_silenced_in_the_source_as_suppressed(project, tmp_path):
    import jsonschema

    schema = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    silenced = (
        "def forward(ub_overlap_ag, is_grad_enabled, x):\n"
        "    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x  # noqa: GG001\n"
        "    return ub_overlap_ag\n"
    )
    (project / "src" / "quiet.py").write_text(silenced)
    cache = tmp_path / "cache"
    runs = [
        run_cli("check", "--format", "sarif", "--cache-dir", str(cache), "src/quiet.py", cwd=project) for _ in range(2)
    ]  # cold, then warm: the cache keeps what was silenced
    for result in runs:
        assert result.returncode == 0  # a silenced finding fails nothing
        sarif = json.loads(result.stdout)
        jsonschema.validate(sarif, schema)
        assert [
            (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"], r["suppressions"])
            for r in sarif["runs"][0]["results"]
        ] == [("GG001", 2, [{"kind": "inSource", "status": "accepted"}])]
    assert run_cli("check", "--format", "json", "src/quiet.py", cwd=project).stdout.strip() == b"[]"


def test_github_annotations(project):
    result = run_cli("check", "--format", "github", "src/model.py", cwd=project)
    assert result.returncode == 1
    first = result.stdout.decode().splitlines()[0]
    assert first == (
        "::error file=src/model.py,line=4,col=39,endLine=4,endColumn=62,title=gradgate GG001::"
        "GG001 forward communication flag `ub_overlap_ag` is gated on grad mode "
        "(`torch.is_grad_enabled()`): under torch.no_grad() the requested path is silently dropped"
    )


# -- configuration --------------------------------------------------------------------
def test_pyproject_is_found_upward_and_applied(project):
    (project / "pyproject.toml").write_text(
        '[tool.gradgate]\nexclude = ["vendored/*"]\nper-file-ignores = { "src/legacy_*.py" = ["GG001"] }\n'
    )
    (project / "vendored").mkdir()
    (project / "vendored" / "x.py").write_text(BUGGY)
    (project / "src" / "legacy_model.py").write_text(BUGGY)
    result = run_cli("check", "--format", "json", ".", cwd=project)
    assert _json(result) == [("src/model.py", 4, "GG001"), ("src/model.py", 5, "GG001")]
    # run from a sub-folder: the same pyproject applies
    result = run_cli("check", "--format", "json", ".", cwd=project / "src")
    assert _json(result) == [("model.py", 4, "GG001"), ("model.py", 5, "GG001")]


def test_pyproject_extra_patterns_and_sources(project):
    (project / "src" / "custom.py").write_text(
        "from mylib import grad_on\n"
        "def f(my_pipe_flag, grad_carrier, x):\n"
        "    my_pipe_flag = my_pipe_flag and grad_on() and x\n"
        "    my_pipe_flag = my_pipe_flag and grad_carrier\n"
        "    return my_pipe_flag\n"
    )
    assert run_cli("check", "src/custom.py", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text(
        "[tool.gradgate]\n"
        'comm-flag-patterns = ["^my_pipe_"]\n'
        'grad-mode-functions = ["mylib.grad_on"]\n'
        'grad-mode-names = ["grad_carrier"]\n'
    )
    result = run_cli("check", "--format", "json", "src/custom.py", cwd=project)
    assert _json(result) == [("src/custom.py", 3, "GG001"), ("src/custom.py", 4, "GG001")]


def test_cli_flags_override_pyproject(project):
    (project / "pyproject.toml").write_text('[tool.gradgate]\nignore = ["GG001"]\n')
    assert run_cli("check", "src", cwd=project).returncode == 0
    assert (
        run_cli(
            "check", "--select", "GG001", "--config", str(project / "pyproject.toml"), "src", cwd=project
        ).returncode
        == 0
    )  # ignore still applies to selected
    (project / "pyproject.toml").write_text('[tool.gradgate]\nselect = ["GG001"]\n')
    assert run_cli("check", "--ignore", "GG001", "src", cwd=project).returncode == 0
    assert run_cli("check", "src", cwd=project).returncode == 1


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[tool.gradgate]\nselct = ["GG001"]\n', "unknown key in [tool.gradgate]: selct"),
        ('[tool.gradgate]\nselect = "GG001"\n', "select must be a list of strings"),
        ('[tool.gradgate]\nselect = ["XX9"]\n', "unknown rule code 'XX9'"),
        ('[tool.gradgate]\ncomm-flag-patterns = ["("]\n', "invalid regular expression '('"),
        ("[tool.gradgate\n", "invalid TOML"),
    ],
)
def test_bad_configuration_is_a_clear_usage_error(project, toml, message):
    (project / "pyproject.toml").write_text(toml)
    result = run_cli("check", "src", cwd=project)
    assert result.returncode == 2
    assert message in result.stderr.decode()
    assert result.stdout == b""


# -- suppressions ---------------------------------------------------------------------
def test_suppression_on_the_statements_first_line(project):
    (project / "src" / "model.py").write_text(
        "def forward(ub_overlap_ag, is_grad_enabled, x):\n"
        "    ub_overlap_ag = (  # gradgate: ignore[GG001]\n"
        "        ub_overlap_ag and is_grad_enabled and x\n"
        "    )\n"
        "    return ub_overlap_ag\n"
    )
    assert run_cli("check", "src", cwd=project).returncode == 0
    before = (project / "src" / "model.py").read_bytes()
    assert run_cli("fix", "src", cwd=project).returncode == 0
    assert (project / "src" / "model.py").read_bytes() == before


# -- baselines ------------------------------------------------------------------------
def test_baseline_survives_unrelated_edits_and_catches_new_findings(project):
    baseline = project / "gradgate-baseline.json"
    written = run_cli("check", "--write-baseline", str(baseline), "src", cwd=project)
    assert written.returncode == 0
    assert "Wrote 2 findings" in written.stderr.decode()
    assert run_cli("check", "--baseline", str(baseline), "src", cwd=project).returncode == 0

    model = project / "src" / "model.py"
    model.write_text("# a new header comment\n\n" + BUGGY.replace("return", "x = 1\n    return"))
    assert run_cli("check", "--baseline", str(baseline), "src", cwd=project).returncode == 0

    model.write_text(
        model.read_text() + "\n\ndef g(ub_overlap_ag, is_grad_enabled):\n"
        "    ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n"
    )
    result = run_cli("check", "--format", "json", "--baseline", str(baseline), "src", cwd=project)
    assert result.returncode == 1
    assert _json(result) == [("src/model.py", 13, "GG001")]


def test_bad_baseline_file(project):
    (project / "b.json").write_text("{nope")
    result = run_cli("check", "--baseline", "b.json", "src", cwd=project)
    assert result.returncode == 2
    assert "not a gradgate baseline" in result.stderr.decode()


# -- docs -----------------------------------------------------------------------------
def test_rule_docs_pages_are_generated_from_the_rules():
    from gradgate.docs import render
    from gradgate.rule import all_rules

    for rule in all_rules():
        page = ROOT / "docs" / "rules" / f"{rule.CODE}.md"
        assert page.read_text() == render(rule), "regenerate with: python -m gradgate.docs"


def test_missing_doc_section_is_detected():
    from gradgate.rule import Rule

    class Incomplete(Rule):
        """## What it does\nx\n## Example\ny"""

    assert Incomplete.missing_doc_sections() == ["Why is this bad?", "Use instead", "Fix safety", "References"]


# -- progress ---------------------------------------------------------------------------
def test_no_progress_bar_in_pipes_but_on_request(project):
    for i in range(60):
        (project / "src" / f"m{i}.py").write_text("x = 1\n")
    piped = run_cli("check", "src", cwd=project)
    assert "\r[" not in piped.stderr.decode()
    forced = run_cli("check", "--progress", "--no-cache", "src", cwd=project)
    assert "/61 files" in forced.stderr.decode()


# -- cache ------------------------------------------------------------------------------
def test_cache_gives_the_same_findings_and_survives_corruption(project, tmp_path):
    cache = tmp_path / "cache"
    cold = run_cli("check", "--format", "json", "--cache-dir", str(cache), "src", cwd=project)
    assert list(cache.glob("results-*.marshal"))
    warm = run_cli("check", "--format", "json", "--cache-dir", str(cache), "src", cwd=project)
    uncached = run_cli("check", "--format", "json", "--no-cache", "src", cwd=project)
    assert cold.stdout == warm.stdout == uncached.stdout
    assert len(json.loads(warm.stdout)) == 2
    for entry in cache.glob("results-*.marshal"):
        entry.write_text("{corrupt")
    again = run_cli("check", "--format", "json", "--cache-dir", str(cache), "src", cwd=project)
    assert again.returncode == 1 and again.stdout == cold.stdout
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache folder's parent should be")
    unwritable = run_cli("check", "--format", "json", "--cache-dir", str(blocked / "cache"), "src", cwd=project)
    assert unwritable.returncode == 1 and unwritable.stdout == cold.stdout


def test_report_unused_ignores(project):
    (project / "src" / "model.py").write_text(
        "def forward(ub_overlap_ag, is_grad_enabled, x):\n"
        "    ub_overlap_ag = ub_overlap_ag and is_grad_enabled  # gradgate: ignore[GG001]\n"
        "    x = x + 1  # gradgate: ignore[GG001]\n"
        "    y = '# gradgate: ignore'\n"
        "    return ub_overlap_ag, x, y\n"
    )
    (project / "src" / "other.py").write_text("z = 1  # gradgate: ignore\n")
    assert run_cli("check", "src", cwd=project).returncode == 0
    result = run_cli("check", "--format", "json", "--report-unused-ignores", "src", cwd=project)
    assert result.returncode == 1
    assert [
        (f["path"].replace(os.sep, "/"), f["line"], f["column"], f["rule"], f["message"])
        for f in json.loads(result.stdout)
    ] == [
        ("src/model.py", 3, 16, "GG100", "unused suppression `# gradgate: ignore[GG001]`: nothing is reported here"),
        ("src/other.py", 1, 8, "GG100", "unused suppression `# gradgate: ignore`: nothing is reported here"),
    ]
    (project / "pyproject.toml").write_text('[tool.gradgate]\nextend-select = ["GG100"]\n')
    assert run_cli("check", "src", cwd=project).returncode == 1
