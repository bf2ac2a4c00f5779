#!/usr/bin/env python3
"""A longer fuzz run of the gradgate engine, outside pytest.

    python tests/fuzz.py --minutes 10 [--seed S] [--te DIR] [--out DIR] [--sources gg,grammar,...]
                         [--known-bad]

Round-robin over input sources until the time is up:

``gg``        the targeted v2 generator (strategies.gg_programs: planted gates, each
              in a function of its own, and their silent twins) in every encoding,
              BOM and line-ending style, lone CR included; the findings must be
              exactly the planted ones (``expected-findings``);
``grammar``   hypothesmith.from_grammar() programs with a GG001 block planted between
              their top-level statements;
``node``      hypothesmith.from_node() programs, likewise;
``bytes``     arbitrary bytes, and generated programs with random bytes flipped,
              inserted or deleted;
``te``        TransformerEngine 2.20.2 sources with random grad-mode mutations (operands
              inserted into ``and`` chains, targets renamed to comm flags).

Every input goes through ``strategies.verify`` (the properties of test_properties.py),
the fix oracle of issue 12 included: for each fixed file the tree equals the original
with exactly the fixed reads set to their grad-on value and simplified (``oracle``),
every comment survives (``comments``), no byte outside the fixed statements changes
(``outside-bytes``), the fixed code run against a stub torch behaves as the original
with grad mode on (``behaviour``, ``runoracle.py``), a second fix is a no-op (``idempotence``), ``check`` after ``fix``
reports nothing fixable (``stale-fixable``), every fixable finding is fixed
(``accounting``, ``fixable-not-fixed``), and the default path and ``prefilter=False``
give identical findings and fixes (``prefilter-consistency``). ``--known-bad`` also
draws the shapes the engine is known to get wrong (test_properties'
``test_known_engine_bugs``); without it a clean engine reports 0 violations.
Progress goes to stderr every 30 s; the figures go to ``OUT/summary.json`` and stdout;
the first inputs breaking each property are saved under ``OUT/repro/``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
warnings.simplefilter("ignore")

import strategies as S  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: violation kinds, grouped into the headline figures
INVALID = {"reparse"}
NON_IDEMPOTENT = {"idempotence"}
DAMAGING = {"oracle", "behaviour", "comments", "outside-bytes", "endings", "final-newline", "encoding", "no-op-fix"}
#: "fixable" that fix does not keep, or a finding the generator did not plant
BROKEN_PROMISES = {
    "accounting",
    "fixable-not-fixed",
    "stale-fixable",
    "recheck",
    "unchanged-when-clean",
    "prefilter-consistency",
    "expected-findings",
    "fix-error",
    "stage",
}


class Stats:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.start = time.monotonic()
        self.counts: collections.Counter[str] = collections.Counter()
        self.per_source: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.violations: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.saved: collections.Counter[str] = collections.Counter()
        (out / "repro").mkdir(parents=True, exist_ok=True)

    def record(self, source: str, data: bytes, outcome: S.Outcome, mutations: int = 0) -> None:
        c = self.per_source[source]
        c["inputs"] += 1
        self.counts["inputs"] += 1
        if source in ("gg", "grammar", "node"):
            self.counts["programs_generated"] += 1
        if mutations:
            self.counts["mutations"] += mutations
            self.counts["mutated_files"] += 1
        self.counts["findings"] += outcome.findings
        self.counts["oracle_checked"] += outcome.oracle_checked
        self.counts["oracle_skipped"] += outcome.oracle_skipped
        self.counts["fixed_findings"] += outcome.fixed
        if outcome.fixed:
            self.counts["files_fixed"] += 1
        if outcome.error is not None:
            c["engine_errors"] += 1
            self.errors[outcome.error.split(":")[0][:60]] += 1
        if outcome.crashed:
            self.counts["crashes"] += 1
            c["crashes"] += 1
        kinds = {v.split(":")[0] for v in outcome.violations}
        for kind in kinds:
            self.violations[kind] += 1
            c[f"violation:{kind}"] += 1
            if self.saved[kind] < 5:
                self.saved[kind] += 1
                stem = self.out / "repro" / f"{kind}-{source}-{self.saved[kind]}"
                stem.with_suffix(".py.bin").write_bytes(data)
                stem.with_suffix(".txt").write_text("\n".join(outcome.violations))
        if kinds & INVALID:
            self.counts["invalid_fixes"] += 1
        if kinds & NON_IDEMPOTENT:
            self.counts["non_idempotent_fixes"] += 1
        if kinds & DAMAGING:
            self.counts["damaging_fixes"] += 1
        if kinds & BROKEN_PROMISES:
            self.counts["broken_promises"] += 1
        if kinds - {"crash"}:
            self.counts["inputs_with_violations"] += 1

    def summary(self) -> dict:
        return {
            "duration_s": round(time.monotonic() - self.start, 1),
            "programs_generated": self.counts["programs_generated"],
            "inputs": self.counts["inputs"],
            "mutated_te_files": self.counts["mutated_files"],
            "mutations": self.counts["mutations"],
            "crashes": self.counts["crashes"],
            "invalid_fixes": self.counts["invalid_fixes"],
            "non_idempotent_fixes": self.counts["non_idempotent_fixes"],
            "damaging_fixes": self.counts["damaging_fixes"],
            "broken_promises": self.counts["broken_promises"],
            "fixed_files_checked_by_tree_oracle": self.counts["oracle_checked"],
            "fixed_files_tree_oracle_skipped": self.counts["oracle_skipped"],
            "inputs_with_violations": self.counts["inputs_with_violations"],
            "violations_by_kind": dict(self.violations),
            "findings": self.counts["findings"],
            "fixed_findings": self.counts["fixed_findings"],
            "files_fixed": self.counts["files_fixed"],
            "engine_errors_by_reason": dict(self.errors.most_common(15)),
            "per_source": {k: dict(v) for k, v in self.per_source.items()},
        }


def _batch(strategy, check, examples: int, deadline: float, batch_seed: int) -> None:
    """Run ``check`` on up to ``examples`` fresh examples of ``strategy`` (drawn from
    ``batch_seed``: a run is reproducible from ``--seed``)."""

    class Stop(Exception):
        pass

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @hypothesis_seed(batch_seed)
    @given(strategy)
    def run(value):
        if time.monotonic() > deadline:
            raise Stop
        check(value)

    try:
        run()
    except Stop:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--te", help="folder holding transformer_engine/ (default: download 2.20.2)")
    parser.add_argument("--out", default="fuzz-out")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--sources", default="gg,grammar,node,bytes,te")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument(
        "--known-bad", action="store_true", help="also generate the shapes the engine is known to get wrong"
    )
    args = parser.parse_args()

    out = Path(args.out)
    stats = Stats(out)
    deadline = time.monotonic() + args.minutes * 60
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    sources = args.sources.split(",")

    te_files: list[tuple[str, bytes]] = []
    if "te" in sources:
        if args.te:
            te_root = Path(args.te)
        else:
            from conftest import _download_te

            cache = os.environ.get("GRADGATE_TEST_CACHE")
            te_root = _download_te(Path(cache) / "te-2.20.2" if cache else out / "te")
        te_files = [
            (str(p.relative_to(te_root)), p.read_bytes())
            for p in sorted((te_root / "transformer_engine").rglob("*.py"))
        ]

    import hypothesmith

    from gradgate.engine import lint_source

    def expected_findings(program, variant, outcome) -> None:
        """The findings are exactly the planted ones, at the planted reads."""
        if outcome.error is not None or outcome.crashed:
            return
        result = lint_source("t.py", variant.data, S.CONFIG)
        found = {(f.line, f.column) for f in result.findings}
        want = {(e.line + variant.line_shift, e.column) for e in program.expected}
        if found != want:
            outcome.add("expected-findings", f"reported {sorted(found)}, planted {sorted(want)}")
        for f in result.findings:
            planted = next(
                (e for e in program.expected if (e.line + variant.line_shift, e.column) == (f.line, f.column)), None
            )
            applicability = f.applicability.value if f.applicability else "none"
            if planted is not None and planted.fix != "any" and applicability != planted.fix:
                outcome.add(
                    "expected-findings",
                    f"{planted.shape} at {f.line}:{f.column} is {applicability}, planted {planted.fix}",
                )

    def gg(example):
        program, variant = example
        outcome = S.verify(variant.data)
        expected_findings(program, variant, outcome)
        stats.record("gg", variant.data, outcome)

    def grammar(example, source="grammar"):
        host, program, where, _variant_seed = example
        text = S.splice(host, program.text, where)
        data = text.encode("utf-8", "surrogatepass")
        stats.record(source, data, S.verify(data))

    def node(example):
        grammar(example, "node")

    def raw(example):
        data, flips = example
        buf = bytearray(data)
        r = random.Random(flips)
        for _ in range(r.randint(0, 6)):
            at = r.randrange(len(buf) + 1)
            byte = r.choice([0, 9, 10, 12, 13, 32, 40, 41, 92, 35, 34, 0x80, 0xFF, 0xC3, 0xEF])
            op = r.choice("fid")
            if op == "f" and at < len(buf):
                buf[at] = byte
            elif op == "i":
                buf.insert(at, byte)
            elif at < len(buf):
                del buf[at]
        stats.record("bytes", bytes(buf), S.verify(bytes(buf)))

    known_bad = args.known_bad

    @st.composite
    def gg_example(draw):
        program = draw(S.gg_programs(known_bad=known_bad))
        # lone CR with comments: a known engine bug (test_known_engine_bugs' lone-cr-comment)
        return program, draw(S.encode_variant(program.text, lone_cr=known_bad or "#" not in program.text))

    @st.composite
    def raw_example(draw):
        if draw(st.booleans()):
            return draw(st.binary(max_size=4000)), draw(st.integers(0, 2**32))
        program = draw(S.gg_programs(known_bad=known_bad))
        return draw(S.encode_variant(program.text, lone_cr=known_bad or "#" not in program.text)).data, draw(
            st.integers(0, 2**32)
        )

    gg_strategy = gg_example()
    grammar_strategy = st.tuples(
        hypothesmith.from_grammar(), S.gg_programs(known_bad=known_bad), st.integers(0, 1000), st.just(0)
    )
    node_strategy = st.tuples(
        hypothesmith.from_node(), S.gg_programs(known_bad=known_bad), st.integers(0, 1000), st.just(0)
    )

    last_report = time.monotonic()
    te_count = [0]

    def report() -> None:
        summary = stats.summary()
        (out / "summary.json").write_text(json.dumps({"seed": seed, **summary}, indent=2))
        print(
            json.dumps(
                {
                    k: summary[k]
                    for k in (
                        "duration_s",
                        "programs_generated",
                        "inputs",
                        "mutations",
                        "findings",
                        "files_fixed",
                        "crashes",
                        "invalid_fixes",
                        "non_idempotent_fixes",
                        "damaging_fixes",
                        "broken_promises",
                        "violations_by_kind",
                    )
                }
            ),
            file=sys.stderr,
            flush=True,
        )

    while time.monotonic() < deadline:
        for source in sources:
            if time.monotonic() >= deadline:
                break
            if source == "gg":
                _batch(gg_strategy, gg, args.batch, deadline, rng.randrange(2**32))
            elif source == "grammar":
                _batch(grammar_strategy, grammar, args.batch // 2, deadline, rng.randrange(2**32))
            elif source == "node":
                _batch(node_strategy, node, args.batch // 5, deadline, rng.randrange(2**32))
            elif source == "bytes":
                _batch(raw_example(), raw, args.batch, deadline, rng.randrange(2**32))
            elif source == "te" and te_files:
                for _ in range(max(1, args.batch // 10)):
                    if time.monotonic() >= deadline:
                        break
                    path, data = rng.choice(te_files)
                    try:
                        mutated, mutations = S.mutate_source(data, rng, rng.randint(1, 10))
                    except SyntaxError:
                        continue
                    te_count[0] += 1
                    # the prefilter=False comparison on every fifth file (TE files are big)
                    stats.record(
                        "te",
                        mutated,
                        S.verify(mutated, path=path, whole_module=te_count[0] % 5 == 0, cst_reparse=False),
                        mutations=len(mutations),
                    )
            if time.monotonic() - last_report > 30:
                report()
                last_report = time.monotonic()
    report()
    summary = stats.summary()
    print(json.dumps({"seed": seed, **summary}, indent=2))
    return 1 if summary["crashes"] or summary["inputs_with_violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
