"""The README's first command: gradgate on the bundled example."""

from conftest import ROOT, run_cli


def test_bundled_example_findings():
    result = run_cli("check", "--format", "json", "examples", cwd=ROOT)
    assert result.returncode == 1
    import json

    assert [(f["path"], f["line"], f["column"]) for f in json.loads(result.stdout)] == [
        ("examples/overlap_forward.py", 33, 33),
        ("examples/overlap_forward.py", 36, 51),
    ]
