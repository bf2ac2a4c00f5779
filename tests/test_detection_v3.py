"""Issue 27's engine changes where a model case cannot show them: a helper whose returned
condition is too large to join does not stop the run, and issue 29's first item: a safe
fix changes the gated decision and nothing else the ``if`` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _gradgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradgate", *args], cwd=cwd, capture_output=True, text=True)


def test_a_helper_with_many_returns_is_analysed_without_joining_them(tmp_path: Path):
    ladder = "".join(f"    if c{i}:\n        return x{i} and torch.is_grad_enabled()\n" for i in range(40))
    params = ", ".join([*(f"c{i}" for i in range(40)), *(f"x{i}" for i in range(40))])
    (tmp_path / "m.py").write_text(
        "import torch\nimport torch.distributed as dist\n\n\n"
        f"def decide({params}):\n{ladder}    return False\n\n\n"
        "def fwd(x, ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n    return x\n",
        encoding="utf-8",
    )
    done = _gradgate("check", "--no-cache", "--no-prefilter", "--format", "json", "m.py", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "")
    assert [(f["line"], f["rule"]) for f in json.loads(done.stdout)] == [(90, "GG001")]


def test_a_safe_fix_does_not_drop_what_else_the_if_does(tmp_path: Path):
    sources = {
        "disable.py": "import torch\ndef f(use_async_comm, cache):\n    if not torch.is_grad_enabled():\n"
        "        use_async_comm = False\n        cache.clear()\n    return use_async_comm\n",
        "branches.py": "import torch\ndef f(x, saved, ub_overlap_ag):\n    if torch.is_grad_enabled():\n"
        "        flag = ub_overlap_ag\n        saved.append(x)\n    else:\n        flag = False\n"
        "    ub_overlap_ag = flag\n    return ub_overlap_ag\n",
        "plain.py": "import torch\ndef f(use_async_comm):\n    if not torch.is_grad_enabled():\n"
        "        use_async_comm = False\n    return use_async_comm\n",
    }
    for name, text in sources.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    checked = _gradgate("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    fixable = {(f["path"].removeprefix("./"), f["line"], f["fixable"]) for f in json.loads(checked.stdout)}
    assert fixable == {("disable.py", 3, False), ("branches.py", 3, False), ("plain.py", 3, True)}
    fixed = _gradgate("fix", "--no-cache", ".", cwd=tmp_path)
    assert fixed.returncode == 1  # findings left: the two report-only ones
    assert (tmp_path / "disable.py").read_text() == sources["disable.py"]
    assert (tmp_path / "branches.py").read_text() == sources["branches.py"]
    assert (tmp_path / "plain.py").read_text() == "import torch\ndef f(use_async_comm):\n    return use_async_comm\n"


# -- carriers a run learns (gradgate/learned.py) ---------------------------------------------
def test_learn_finds_the_fields_keys_and_parameters_grad_mode_is_stored_in():
    from gradgate.learned import learn

    data = (
        b"import torch\n"
        b"def build(mb):\n"
        b"    g = torch.is_grad_enabled()\n"
        b"    meta = Meta(\n        needs_backward=torch.is_grad_enabled(),\n        length=mb.size(-1),\n    )\n"
        b"    state.packing_is_train = g\n"
        b"    mode = {'grad_on': g, 'autocast': torch.is_autocast_enabled()}\n"
        b"    self.router(x, grad_on=g)\n"
        b"    self.stats.reduce(x, background=g)\n"
        b"    torch.topk(x, 2, sorted=torch.is_grad_enabled())\n"
        b"    self.forward_only = not torch.is_grad_enabled()\n"
        b"    self.prev = torch.is_grad_enabled()\n"
        b"    self.saved_mode = torch.is_grad_enabled()\n"
        b"    torch.set_grad_enabled(self.saved_mode)\n"
    )
    learned = learn(data, ["is_grad_enabled"])
    # fields: a record's keyword and an attribute store; keys: a dict entry; parameters:
    # a module object's call (`self.router(...)` runs its forward). Not learned: a
    # method's keyword of another object, a library call's keyword, a negation, a
    # one-word field, a field saved to set grad mode back
    assert learned.names() == (("needs_backward", "packing_is_train"), ("grad_on",), ("forward.grad_on",))


def test_a_field_also_stored_otherwise_is_not_learned():
    from gradgate.learned import learn

    data = b"import torch\nstate.is_train_step = torch.is_grad_enabled()\nother.is_train_step = compute()\n"
    assert learn(data, ["is_grad_enabled"]).names() == ((), (), ())
    default = b"import torch\nstate.is_train_step = False\nstate.is_train_step = torch.is_grad_enabled()\n"
    assert learn(default, ["is_grad_enabled"]).names() == (("is_train_step",), (), ())  # a default is no other meaning
    # a context manager setting the field back to what it saved stores no other meaning;
    # a saved value of another field does
    restored = (
        b"import torch\n"
        b"def fetch_context(overlap):\n"
        b"    prev = OPTIONS.use_side_stream\n"
        b"    OPTIONS.use_side_stream = overlap and torch.is_grad_enabled()\n"
        b"    yield\n"
        b"    OPTIONS.use_side_stream = prev\n"
    )
    assert learn(restored, ["is_grad_enabled"]).gated_names() == ("use_side_stream",)
    other = restored.replace(b"prev = OPTIONS.use_side_stream", b"prev = OPTIONS.other_stream")
    assert learn(other, ["is_grad_enabled"]).gated_names() == ()
    # the same for a key of a module's state dict set back
    keyed = (
        b"import torch\n"
        b"def capture_grad_mode():\n"
        b"    prev = _STATE['grad_on']\n"
        b"    _STATE['grad_on'] = torch.is_grad_enabled()\n"
        b"    yield\n"
        b"    _STATE['grad_on'] = prev\n"
    )
    assert learn(keyed, ["is_grad_enabled"]).names() == ((), ("grad_on",), ())


def test_slots_filled_with_a_value_grad_mode_gates_are_learned():
    from gradgate.learned import learn

    data = (
        b"import torch\n"
        b"class Cfg:\n"
        b"    @classmethod\n"
        b"    def make(cls, m, is_grad_enabled):\n"
        b"        grad = torch.is_grad_enabled()\n"
        b"        return cls(\n"
        b"            overlap_ag=m.ub_overlap_ag and is_grad_enabled and not m.return_ln_out,\n"
        b"            overlap_rs=m.ub_overlap_rs and grad,\n"
        b"            fast_path=m.fast and not torch.is_grad_enabled(),\n"
        b"            either_way=m.x or grad,\n"
        b"        )\n"
        b"    @property\n"
        b"    def grad_active(self):\n"
        b"        return torch.is_grad_enabled()\n"
        b"    @property\n"
        b"    def wants_prefetch(self):\n"
        b"        return self.grad_active and bool(self.targets)\n"
        b"    def use_async_comm(self):\n"
        b"        return (self.async_comm and torch.is_grad_enabled())\n"
        b"state.skip_sync = not torch.is_grad_enabled() and cond\n"
    )
    learned = learn(data, ["is_grad_enabled"])
    # gated: a record's keyword (a negated other operand allowed), a property and a
    # method returning `... and grad`; not: grad negated, an `or`. A property returning
    # grad mode itself is a field (and an operand of the others)
    assert learned.gated_names() == ("overlap_ag", "overlap_rs", "use_async_comm", "wants_prefetch")
    assert learned.names()[0] == ("grad_active",)


def test_a_decorator_filling_kwargs_with_grad_mode_is_learned():
    from gradgate.learned import learn

    data = (
        b"import functools, torch\n"
        b"def infer_training(fn):\n"
        b"    @functools.wraps(fn)\n"
        b"    def wrapper(x, *args, **kwargs):\n"
        b"        if len(args) < 2:\n"
        b"            kwargs.setdefault('training', torch.is_grad_enabled())\n"
        b"        return fn(x, *args, **kwargs)\n"
        b"    return wrapper\n"
        b"def not_a_decorator(options):\n"
        b"    options.setdefault('training', torch.is_grad_enabled())\n"
        b"    return options\n"
    )
    # the wrapper's own `**kwargs` filled: learned for its decorator; a plain dict argument is not
    assert learn(data, ["is_grad_enabled"]).injected_names() == ("infer_training:training",)


LEARNED_PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/meta.py": "import torch\n\n\ndef build_meta(mb):\n"
    "    return MicroBatchMeta(needs_backward=torch.is_grad_enabled(), length=mb.size(-1))\n",
    "pkg/fwd.py": "def forward_rmpad(model, cfg, meta, x):\n"
    "    if cfg.use_fused_kernels and meta.needs_backward:\n"
    "        out = model.fused_forward(x)\n"
    "    else:\n"
    "        out = model.forward(x)\n"
    "    return out\n",
    "pkg/mode.py": "import torch\n\n\ndef current_mode():\n    return {'grad_on': torch.is_grad_enabled()}\n",
    "pkg/logits.py": "def project(hidden, weight, mode):\n"
    "    out_dtype = torch.float32 if mode['grad_on'] else hidden.dtype\n"
    "    return (hidden @ weight).to(out_dtype)\n",
}


def _findings(done: subprocess.CompletedProcess[str]) -> list[tuple[str, int, str]]:
    return sorted((f["path"].removeprefix("./"), f["line"], f["rule"]) for f in json.loads(done.stdout))


def test_a_field_and_a_key_stored_in_one_module_carry_grad_mode_into_another(tmp_path: Path):
    for name, text in LEARNED_PACKAGE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    expected = [("pkg/fwd.py", 2, "GG003"), ("pkg/logits.py", 2, "GG003")]
    cold = _gradgate("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    assert (cold.returncode, _findings(cold)) == (1, expected)
    # with the cache: the same findings cold and warm; a store that goes, goes with its findings
    cache = str(tmp_path / ".cache")
    assert _findings(_gradgate("check", "--cache-dir", cache, "--format", "json", ".", cwd=tmp_path)) == expected
    assert _findings(_gradgate("check", "--cache-dir", cache, "--format", "json", ".", cwd=tmp_path)) == expected
    (tmp_path / "pkg/meta.py").write_text(LEARNED_PACKAGE["pkg/meta.py"].replace("torch.is_grad_enabled()", "True"))
    warm = _gradgate("check", "--cache-dir", cache, "--format", "json", ".", cwd=tmp_path)
    assert _findings(warm) == [("pkg/logits.py", 2, "GG003")]
