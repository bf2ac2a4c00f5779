"""GG100: a ``# gradgate: ignore`` comment that suppresses nothing."""

from __future__ import annotations

from gradgate.rule import Invalid, Rule, Valid


class UnusedSuppression(Rule):
    """
    ## What it does
    Flags a `# gradgate: ignore[...]` (or bare `# gradgate: ignore`) comment that
    silences no finding: the code it excused was fixed or moved, or it names an unknown
    rule. Off by default; turn it on with `--report-unused-ignores` (or
    `extend-select = ["GG100"]`). A comment that names only rules this run does not
    check is not judged.

    ## Why is this bad?
    A stale suppression hides the next real finding on that line: when someone later
    reintroduces a grad-mode gate there, nothing is reported.

    ## Example
    ```python
    ub_overlap_ag = ub_overlap_ag and not return_layernorm_output  # gradgate: ignore[GG001]
    ```

    ## Use instead
    ```python
    ub_overlap_ag = ub_overlap_ag and not return_layernorm_output
    ```

    ## Fix safety
    Report only: deleting a comment is left to the author.

    ## References
    - ruff's RUF100 (unused `noqa`): https://docs.astral.sh/ruff/rules/unused-noqa/
    """

    CODE = "GG100"
    NAME = "unused-suppression"
    MESSAGE = "unused suppression comment"
    DEFAULT_ENABLED = False

    VALID = [
        Valid(
            "def f(ub_overlap_ag, is_grad_enabled):\n"
            "    ub_overlap_ag = ub_overlap_ag and is_grad_enabled  # gradgate: ignore[GG001]\n"
            "    return ub_overlap_ag\n"
        ),
        Valid(
            "def f(ub_overlap_ag, is_grad_enabled):\n"
            "    ub_overlap_ag = (  # gradgate: ignore\n"
            "        ub_overlap_ag and is_grad_enabled\n"
            "    )\n"
        ),
        Valid("x = '# gradgate: ignore[GG001]'\n"),
    ]
    INVALID = [
        Invalid("x = 1  # gradgate: ignore[GG001]\n", line=1, column=8),
        Invalid("x = 1  # note  # gradgate: ignore\n", line=1, column=16),
        Invalid("y = 2\nx = 1  # gradgate: ignore[GG999]\n", line=2, column=8),
    ]
