"""Issue 29 (Reliability v3): each probe of the issue, as it failed, with the exact
outcome the fix gives. Where behaviour is the point, the fixed code is run (with a
stub torch) and compared with the original."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import types

import pytest
from conftest import ROOT, run_cli

from gradgate.config import Config
from gradgate.engine import lint_source

HEAD = "import torch\nimport torch.distributed as dist\n\n"
GATED = HEAD + "def forward(x, a):\n    ov = a and torch.is_grad_enabled()\n    dist.all_reduce(x, async_op=ov)\n"


def _stub_torch(grad: bool, calls: list) -> dict[str, types.ModuleType]:
    torch = types.ModuleType("torch")
    torch.is_grad_enabled = lambda: grad  # type: ignore[attr-defined]
    dist = types.ModuleType("torch.distributed")
    dist.all_reduce = lambda *a, **k: calls.append(("all_reduce", a, tuple(sorted(k.items()))))  # type: ignore[attr-defined]
    torch.distributed = dist  # type: ignore[attr-defined]
    return {"torch": torch, "torch.distributed": dist}


def _run(code: str, grad: bool, monkeypatch) -> tuple[dict, list]:
    calls: list = []
    for name, module in _stub_torch(grad, calls).items():
        monkeypatch.setitem(sys.modules, name, module)
    namespace: dict = {}
    exec(compile(code, "<fixed>", "exec"), namespace)
    return namespace, calls


def _no_traceback(result: subprocess.CompletedProcess) -> None:
    assert result.returncode >= 0, f"killed by signal {-result.returncode}"
    assert b"Traceback" not in result.stderr, result.stderr.decode()[-2000:]


# -- 2. a class body's `x = x` --------------------------------------------------------------
CLASS = HEAD + "ub_overlap = True\n\n\nclass Config:\n    ub_overlap = ub_overlap and torch.is_grad_enabled()\n"


def test_class_body_self_assignment_of_an_outer_name_is_kept(monkeypatch):
    fixed = lint_source("m.py", CLASS.encode(), Config(), fix=True).fixed
    assert fixed == CLASS.replace(" and torch.is_grad_enabled()", "").encode()
    namespace, _ = _run(fixed.decode(), False, monkeypatch)
    assert namespace["Config"].ub_overlap is True  # the fix deleting it raised AttributeError


def test_class_body_self_assignment_of_a_name_bound_in_the_class_goes(monkeypatch):
    code = HEAD + "class Config:\n    ub_overlap = True\n    ub_overlap = ub_overlap and torch.is_grad_enabled()\n"
    fixed = lint_source("m.py", code.encode(), Config(), fix=True).fixed
    assert fixed == (HEAD + "class Config:\n    ub_overlap = True\n").encode()
    namespace, _ = _run(fixed.decode(), False, monkeypatch)
    assert namespace["Config"].ub_overlap is True


# -- 4. budgets: no BudgetExceeded escapes -----------------------------------------------------
def _elif_ladder(n: int = 80) -> str:
    lines = [HEAD + "def forward(x, k, group):", "    grad = torch.is_grad_enabled()"]
    for i in range(n):
        lines += [f"    {'if' if i == 0 else 'elif'} k == {i} and c{i}:", f"        a = grad and p{i}"]
    return "\n".join([*lines, "    dist.all_reduce(x, async_op=a)", ""])


def test_an_80_branch_elif_ladder_is_analysed_and_exit_zero_holds(tmp_path):
    (tmp_path / "m.py").write_text(_elif_ladder())
    result = run_cli("check", "--no-cache", "--exit-zero", "m.py", cwd=tmp_path)
    _no_traceback(result)
    assert result.returncode == 0
    assert result.stdout.decode().splitlines()[-1] == "Found 80 findings (80 fixable with `gradgate fix`)."


def test_9000_functions_each_get_their_own_budget(tmp_path):
    body = (
        "def f{i}(x, group, a, b, c, d):\n    ov = a and b and torch.is_grad_enabled() and c and d\n    if ov:\n"
        "        dist.all_reduce(x, group=group, async_op=a or b or c)\n    return [x, a, b, c, d, {i}] * 3\n\n"
    )
    (tmp_path / "m.py").write_text(HEAD + "".join(body.format(i=i) for i in range(9000)))
    result = run_cli("check", "--no-cache", "m.py", cwd=tmp_path)
    _no_traceback(result)
    assert result.stdout.decode().splitlines()[-1] == "Found 9000 findings (9000 fixable with `gradgate fix`)."
    # 4,999 before: the module's functions shared one budget


@pytest.mark.slow  # 20-40 s: 9,000 fixes through LibCST
@pytest.mark.parametrize("output", ["json", "sarif"])
def test_9000_fixable_findings_in_json_and_sarif_each_carry_their_edit(tmp_path, output):
    """Each finding's edit is found in a window of lines around its fix, not by comparing
    the whole file once a finding (a 1.4 MB module of 9,000 TE-seed gates passed the
    60 s bound: "file not analysed", no finding at all)."""
    body = (
        "def f{i}(x, ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n"
        "    if ub_overlap_ag:\n        dist.all_reduce(x)\n    return x\n\n"
    )
    (tmp_path / "m.py").write_text(HEAD + "".join(body.format(i=i) for i in range(9000)))
    result = run_cli("check", "--no-cache", "--format", output, "m.py", cwd=tmp_path)
    _no_traceback(result)
    assert result.returncode == 1 and result.stderr.decode() == ""
    if output == "json":
        findings = json.loads(result.stdout)
        edits = [f["fix"] for f in findings]
    else:
        findings = json.loads(result.stdout)["runs"][0]["results"]
        edits = [f["fixes"][0]["artifactChanges"][0]["replacements"][0] for f in findings]
    assert len(findings) == 9000 and all(edits)
    first = len(HEAD.splitlines()) + 2  # the gate's line in the first function
    if output == "json":  # the last gate's edit: `ub_overlap_ag = ub_overlap_ag` left, deleted, its line only
        line = first + 6 * 8999
        assert edits[-1] == {"line": line, "column": 5, "end_line": line + 1, "end_column": 5, "content": ""}


# -- 5. silent losses are said ------------------------------------------------------------------
def _relay(helpers: int) -> str:
    code = HEAD + "def h0():\n    return torch.is_grad_enabled()\n\n"
    for i in range(1, helpers + 1):
        code += f"def h{i}():\n    return h{i - 1}()\n\n"
    return code + f"def forward(x, a):\n    ov = a and h{helpers}()\n    dist.all_reduce(x, async_op=ov)\n"


def _chain(hops: int) -> str:
    code = HEAD + "".join(f"def c{i}(x, g):\n    return c{i + 1}(x, g)\n\n" for i in range(hops))
    return (
        code
        + f"def c{hops}(x, g):\n    dist.all_reduce(x, async_op=g)\n\ndef forward(x):\n    return c0(x, torch.is_grad_enabled())\n"
    )


@pytest.mark.parametrize(
    ("code", "warning"),
    [
        (_relay(7), "warning: m.py:22: grad mode is relayed further than 6 rounds of summaries follow (at `h6`)"),
        (_chain(20), "warning: m.py:55: grad mode is relayed further than 6 rounds of summaries follow (at `c17`)"),
    ],
    ids=["returns-through-7-helpers", "a-20-hop-call-chain"],
)
def test_a_run_that_gives_up_says_so(tmp_path, code, warning):
    (tmp_path / "m.py").write_text(code)
    text = run_cli("check", "--no-cache", "m.py", cwd=tmp_path)
    assert text.returncode == 0
    assert text.stderr.decode().splitlines() == [warning]
    assert text.stdout.decode() == (
        "No findings in what was analysed. 1 part of the code not analysed (see the warnings).\n"
    )
    as_json = run_cli("check", "--no-cache", "--format", "json", "m.py", cwd=tmp_path)
    assert as_json.returncode == 0 and as_json.stderr.decode().splitlines() == [warning]
    # the JSON alone says so too: an entry with no rule (as ruff's syntax errors), no fix
    place, message = warning.removeprefix("warning: ").split(": ", 1)
    path, line = place.split(":")
    assert json.loads(as_json.stdout) == [
        {
            "path": path,
            "line": int(line),
            "column": 1,
            "end_line": int(line),
            "end_column": 1,
            "rule": None,
            "message": message,
            "fixable": False,
            "applicability": None,
            "fix": None,
            "flow": [],
        }
    ]
    sarif = json.loads(run_cli("check", "--no-cache", "--format", "sarif", "m.py", cwd=tmp_path).stdout)
    (notice,) = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert notice["level"] == "warning" and notice["descriptor"] == {"id": "not-analysed"}
    assert notice["message"]["text"] == "m.py: " + warning.split(": ", 2)[2]


def test_grad_mode_returned_through_two_modules_is_followed(tmp_path):
    """``c.py`` calls ``b.relay()``, which returns ``a.grad_on()``, which returns grad mode:
    relayed through two modules, it decides in ``c.py``, checked with its package or
    named alone (as pre-commit names it)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("import torch\n\ndef grad_on():\n    return torch.is_grad_enabled()\n")
    (package / "b.py").write_text("from .a import grad_on\n\ndef relay():\n    return grad_on()\n")
    (package / "c.py").write_text(
        "import torch.distributed as dist\nfrom .b import relay\n\ndef forward(x):\n    if relay():\n"
        "        dist.all_reduce(x, async_op=True)\n    else:\n        dist.all_reduce(x)\n    return x\n"
    )
    for named in ("pkg", "pkg/c.py"):
        result = run_cli("check", "--no-cache", "--format", "json", named, cwd=tmp_path)
        assert result.returncode == 1, result.stderr.decode()
        assert [(f["path"], f["line"], f["rule"]) for f in json.loads(result.stdout)] == [("pkg/c.py", 5, "GG001")]


def test_a_function_past_the_budget_is_named(tmp_path):
    ors = " or ".join(f"v{i}" for i in range(10000))
    (tmp_path / "m.py").write_text(GATED + f"    y = {ors}\n")
    result = run_cli("check", "--no-cache", "m.py", cwd=tmp_path)
    _no_traceback(result)
    assert result.stderr.decode().splitlines() == [
        "warning: m.py:4: function `forward` not analysed (too large a condition, or too deeply nested)"
    ]


# -- 6. crashes: LibCST's segfault, RecursionError -------------------------------------------------
@pytest.mark.parametrize(
    "args", [("check", "--format", "json"), ("check", "--show-fixes"), ("fix",), ("fix", "--diff")]
)
def test_a_10000_operand_or_beside_a_finding_never_reaches_libcst(tmp_path, args):
    ors = " or ".join(f"v{i}" for i in range(10000))
    # the form feed makes a fix re-read the whole file with LibCST (fixplan.odd_layout)
    code = GATED + f"\x0c\ndef other(x):\n    return {ors}\n"
    (tmp_path / "m.py").write_text(code)
    result = run_cli(*args, "--no-cache", "m.py", cwd=tmp_path)
    _no_traceback(result)  # -11 before, from LibCST's parser
    assert result.returncode == (0 if args == ("fix",) else 1)
    if args == ("fix",):
        assert (tmp_path / "m.py").read_text() == code.replace(" and torch.is_grad_enabled()", "")


@pytest.mark.parametrize("args", [("check", "--format", "json"), ("fix",)])
def test_a_400_deep_not_chain_is_reported_without_a_fix(tmp_path, args):
    code = HEAD + "def forward(x, a):\n    ov = " + "not " * 400 + "a and torch.is_grad_enabled()\n"
    code += "    dist.all_reduce(x, async_op=ov)\n"
    (tmp_path / "m.py").write_text(code)
    result = run_cli(*args, "--no-cache", "m.py", cwd=tmp_path)
    _no_traceback(result)
    assert result.returncode == 1  # the finding, not fixable: RecursionError before
    assert (tmp_path / "m.py").read_text() == code


def test_a_long_chain_in_the_fixed_statement_is_not_called_fixable(monkeypatch):
    from gradgate import cstguard

    monkeypatch.setattr(cstguard, "MAX_OPERANDS", 50)  # the bound, lowered to what the model follows
    ors = " or ".join(f"v{i}" for i in range(60))
    code = HEAD + f"def forward(x, a):\n    ov = a and torch.is_grad_enabled() and f({ors})\n"
    code += "    dist.all_reduce(x, async_op=ov)\n"
    (finding,) = lint_source("m.py", code.encode(), Config()).findings
    assert finding.applicability is None  # `fix` would refuse it: no fix offered
    fixed = lint_source("m.py", code.encode(), Config(), fix=True)
    assert fixed.fixed is None and fixed.error is None


# -- 7. a 1 MB line -----------------------------------------------------------------------------
def test_a_fix_on_a_1mb_line_gives_libcst_the_statement_only(tmp_path, monkeypatch):
    import libcst

    parsed: list[int] = []
    real = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda text, *a, **k: parsed.append(len(text)) or real(text, *a, **k))
    line = "x = 1; " * 142_000 + "ov = a and torch.is_grad_enabled(); dist.all_reduce(t, async_op=ov)\n"
    code = HEAD + "def forward(t, a):\n    " + line
    result = lint_source("m.py", code.encode(), Config(), fix=True)
    assert result.fixed == code.replace(" and torch.is_grad_enabled()", "").encode()
    assert max(parsed) < 100  # the whole 1 MB line before: 31 s and 1 GB


# -- per-file bounds ---------------------------------------------------------------------------
def test_a_file_past_the_time_bound_is_reported_and_the_run_goes_on(tmp_path):
    body = "def f{i}(x, a, b):\n    if a and b and torch.is_grad_enabled():\n        dist.all_reduce(x)\n\n"
    (tmp_path / "big.py").write_text(HEAD + "".join(body.format(i=i) for i in range(9000)))
    (tmp_path / "small.py").write_text(GATED)
    result = run_cli("check", "--no-cache", "big.py", "small.py", cwd=tmp_path, env={"GRADGATE_FILE_TIMEOUT": "0.5"})
    _no_traceback(result)
    assert result.stderr.decode().splitlines() == [
        "warning: big.py: file not analysed (past the per-file bound of 0.5 s)"
    ]
    assert result.stdout.decode().startswith("small.py:5:16: GG001 ")


def test_a_file_past_the_memory_bound_is_reported_and_the_run_goes_on(tmp_path):
    """The resident size is read at the model's polls; past ``GRADGATE_FILE_MEMORY`` (MB)
    the file is not analysed, said, and the next one is tried afresh (here every file
    is past 1 MB: the interpreter alone is more)."""
    (tmp_path / "a.py").write_text(GATED)
    (tmp_path / "b.py").write_text(GATED)
    bounded = run_cli("check", "--no-cache", "a.py", "b.py", cwd=tmp_path, env={"GRADGATE_FILE_MEMORY": "1"})
    _no_traceback(bounded)
    assert bounded.returncode == 0
    assert bounded.stderr.decode().splitlines() == [
        f"warning: {name}: file not analysed (past the per-file memory bound of 1 MB)" for name in ("a.py", "b.py")
    ]
    unbounded = run_cli("check", "--no-cache", "a.py", "b.py", cwd=tmp_path, env={"GRADGATE_FILE_MEMORY": "0"})
    assert unbounded.returncode == 1 and unbounded.stderr.decode() == ""


def test_a_document_checked_in_a_thread_keeps_the_time_bound(monkeypatch):
    # the language server checks in threads, where no SIGALRM timer can be armed: the
    # model polls the bound instead
    import threading

    from gradgate.document import lint_document
    from gradgate.settings import Settings

    monkeypatch.setenv("GRADGATE_FILE_TIMEOUT", "0.5")
    body = "def f{i}(x, a, b):\n    if a and b and torch.is_grad_enabled():\n        dist.all_reduce(x)\n\n"
    data = (HEAD + "".join(body.format(i=i) for i in range(9000))).encode()
    results = []
    worker = threading.Thread(
        target=lambda: results.append(lint_document("big.py", data, Settings(Config(), None, ".")))
    )
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive()
    (result,) = results
    assert result.findings == ()
    assert [n.message for n in result.notices] == ["file not analysed (past the per-file bound of 0.5 s)"]


def test_a_file_past_the_size_bound_is_reported():
    from gradgate.engine import MAX_FILE_BYTES

    data = (GATED + "#" * MAX_FILE_BYTES + "\n").encode()
    result = lint_source("m.py", data, Config())
    assert result.findings == () and result.error is None
    assert [n.message for n in result.notices] == ["file not analysed (4.0 MB, over the per-file bound of 4 MB)"]


# -- 8. the rest --------------------------------------------------------------------------------
def test_sigterm_while_writing_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"old\n")
    script = textwrap.dedent(
        f"""
        import os, signal
        from gradgate import source
        real_fsync = os.fsync
        def fsync(fd):
            os.kill(os.getpid(), signal.SIGTERM)  # the pre-commit hook's timeout, mid-write
            real_fsync(fd)
        os.fsync = fsync
        source.write_atomic({str(path)!r}, b"old\\n", b"new\\n")
        print("not reached")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env)
    assert result.returncode == -signal.SIGTERM and result.stdout == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]  # `.m.py.XXXX.gradgate` before
    assert path.read_bytes() == b"new\n"  # the write finished before the signal was taken


def test_fixable_is_said_only_where_fix_succeeds_form_feed(tmp_path):
    code = (
        HEAD + "def forward(x, a):\n\x0c    ov = a and torch.is_grad_enabled()\n    dist.all_reduce(x, async_op=ov)\n"
    )
    (tmp_path / "m.py").write_text(code)
    check = run_cli("check", "--no-cache", "m.py", cwd=tmp_path)
    assert check.stdout.decode().splitlines()[-1] == "Found 1 finding."  # "(1 fixable ...)" before
    fix = run_cli("fix", "--no-cache", "m.py", cwd=tmp_path)
    assert fix.returncode == 1 and b"error" not in fix.stderr  # exit 2 before
    assert (tmp_path / "m.py").read_text() == code


def test_a_read_only_file_is_not_rewritten(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(GATED)
    path.chmod(0o444)
    inode = os.stat(path).st_ino
    result = run_cli("fix", "--no-cache", "m.py", cwd=tmp_path)
    assert result.returncode == 3
    assert "error: m.py: the file is read-only; not rewritten" in result.stderr.decode().splitlines()
    assert path.read_text() == GATED and os.stat(path).st_ino == inode
    assert os.stat(path).st_mode & 0o7777 == 0o444


def test_the_fallback_pool_does_not_fork(tmp_path, monkeypatch):
    import multiprocessing
    import threading

    from gradgate import runner

    asked: list[str | None] = []
    real = multiprocessing.get_context
    monkeypatch.setattr(multiprocessing, "get_context", lambda method=None: asked.append(method) or real(method))
    monkeypatch.setattr(runner, "_workers", lambda options, costs: 2)
    for i in range(4):
        (tmp_path / f"m{i}.py").write_text(GATED)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)  # a thread: this process cannot fork safely
    other.start()
    try:
        results = list(runner.run([str(p) for p in sorted(tmp_path.iterdir())], Config(), runner.RunOptions(jobs=2)))
    finally:
        stop.set()
        other.join()
    assert asked == ["spawn"]  # "fork" before, with another thread running
    assert [len(r.findings) for r in results] == [1, 1, 1, 1]


def _lsp(*messages: dict) -> tuple[int, list[dict]]:
    """Send ``messages`` to ``gradgate server``, then end stdin; its exit code and replies."""
    payload = b""
    for message in messages:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        payload += b"Content-Length: %d\r\n\r\n" % len(body) + body
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "gradgate", "server"], input=payload, capture_output=True, env=env, timeout=60
    )
    replies, data = [], done.stdout
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(head.split(b"\r\n")[0].split(b":")[1])
        replies.append(json.loads(rest[:length]))
        data = rest[length:]
    return done.returncode, replies


def test_server_exits_0_after_shutdown_and_exit_and_answers_invalid_params():
    pytest.importorskip("pygls")
    code, replies = _lsp(
        {"id": 1, "method": "initialize", "params": {"capabilities": {}}},
        {"method": "initialized", "params": {}},
        {"id": 2, "method": "textDocument/hover", "params": {"textDocument": {"uri": "file:///m.py"}}},
        {"id": 3, "method": "shutdown"},
        {"method": "exit"},
    )
    answers = {r["id"]: r for r in replies if "id" in r}
    assert answers[2]["error"] == {"code": -32602, "message": "Invalid Params"}  # no answer before
    assert answers[3]["result"] is None
    assert code == 0  # 2 before


def test_server_exits_1_on_exit_without_shutdown():
    pytest.importorskip("pygls")
    code, _ = _lsp({"id": 1, "method": "initialize", "params": {"capabilities": {}}}, {"method": "exit"})
    assert code == 1


def test_fixed_code_runs_and_differs_only_in_the_gated_decision(monkeypatch):
    fixed = lint_source("m.py", GATED.encode(), Config(), fix=True).fixed.decode()
    for grad in (True, False):
        for a in (True, False):
            _, before = _run(GATED + f"forward('t', {a})\n", True, monkeypatch)  # grad on: the intended path
            _, after = _run(fixed + f"forward('t', {a})\n", grad, monkeypatch)
            assert after == before


# -- 3. code actions on the current text, versioned ---------------------------------------------
@pytest.mark.asyncio
async def test_code_actions_use_the_current_text_and_carry_its_version(tmp_path):
    pytest.importorskip("pygls")
    pytest_lsp = pytest.importorskip("pytest_lsp")
    from lsprotocol import types as lsp

    server = [sys.executable, "-m", "gradgate", "server"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    client = pytest_lsp.make_test_lsp_client()
    await client.start_io(*server, env=env)
    await client.initialize_session(
        lsp.InitializeParams(
            capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
            initialization_options={"debounce": 600_000},
        )  # no check after the change
    )
    uri = (tmp_path / "m.py").as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, GATED)))
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    edited = "# a new first line\n" + GATED
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [lsp.TextDocumentContentChangeWholeDocument(text=edited)],
        )
    )
    where = lsp.Range(lsp.Position(5, 0), lsp.Position(5, 40))  # the finding's line in version 2
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri), where, lsp.CodeActionContext(diagnostics=[]))
    )
    quick = next(a for a in actions if a.title.startswith("Fix GG001"))
    (change,) = quick.edit.document_changes
    assert change.text_document.version == 2
    (edit,) = change.edits
    lines = edited.splitlines(keepends=True)
    line = lines[edit.range.start.line]
    lines[edit.range.start.line] = line[: edit.range.start.character] + edit.new_text + line[edit.range.end.character :]
    # the edit of version 1's text (one line up) would have changed the wrong line
    assert "".join(lines) == edited.replace(" and torch.is_grad_enabled()", "")
    await client.shutdown_session()


# -- the fuzz oracle runs fixed code -----------------------------------------------------------
ITEM_1 = HEAD + textwrap.dedent(
    """\
    def forward(x, use_async, cache):
        if not torch.is_grad_enabled():
            use_async = False
            cache.clear()
        dist.all_reduce(x, async_op=use_async)
    """
)


def test_the_run_oracle_sees_a_dropped_statement_and_passes_a_right_fix():
    from runoracle import behaviour_change

    dropped = ITEM_1.replace("        use_async = False\n        cache.clear()\n", "        pass\n")
    dropped = dropped.replace("    if not torch.is_grad_enabled():\n        pass\n", "")
    assert behaviour_change(ITEM_1, dropped) is None  # with grad on the `if` never ran: same
    broken = ITEM_1.replace("    dist.all_reduce(x, async_op=use_async)\n", "    dist.all_reduce(x)\n")
    assert behaviour_change(ITEM_1, broken).startswith("with grad mode on:")
    fixed = lint_source("m.py", GATED.encode(), Config(), fix=True).fixed.decode()
    assert behaviour_change(GATED, fixed) is None


def test_the_fuzz_verify_runs_the_oracle_on_generated_programs():
    import strategies as S
    from hypothesis import given, settings

    @settings(max_examples=25, deadline=None, database=None)
    @given(S.gg_programs())
    def check(program):
        outcome = S.verify(program.text.encode())
        assert not [v for v in outcome.violations if v.startswith("behaviour")], outcome.violations

    check()
