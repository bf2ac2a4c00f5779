"""Diagnostics latency of ``gradgate server`` on TransformerEngine 2.20.2's
``layernorm_mlp.py``: the time from a ``didChange`` to the ``publishDiagnostics`` of that
version, median of N edits (20 by default) on a warm server, and as a ratio to the
engine's own time on the same text measured in the same run (``lint_source`` in this
process), so the number says what the server adds.

    python benchmarks/lsp_latency.py                 # downloads TE 2.20.2 with pip
    python benchmarks/lsp_latency.py --te DIR        # a folder holding transformer_engine/
    python benchmarks/lsp_latency.py --debounce 150  # include the server's default pause

Each edit changes the text (a comment line with a counter), so no result comes from the
server's cache. The edits of the goal add the line at the top of the file; a second
series adds it in the middle of the file, inside ``_LayerNormMLP`` (1,670 of the file's
2,775 lines): the server re-parses only the top-level statements an edit touches
(``gradgate.model.splice.Reparser``), there the whole class. The engine's own time is a
whole parse and analysis of the text. Needs the ``lsp`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

HERE = Path(__file__).resolve().parent
#: whether this interpreter imports a gradgate of its own (on PYTHONPATH, installed);
#: else the checkout's is run (it needs the editable install's finder for gradgate.rules)
IMPORTABLE = importlib.util.find_spec("gradgate") is not None
MLP = "transformer_engine/pytorch/module/layernorm_mlp.py"


def download_te(target: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "transformer-engine==2.20.2",
            "-d",
            str(target),
        ],
        check=True,
    )
    (wheel,) = target.glob("transformer_engine-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(MLP, target / "unpacked")
    return target / "unpacked"


def at_top(n: int, text: str) -> str:
    return f"# edit {n}\n" + text


def inside(n: int, text: str) -> str:
    """A comment line at the middle line of the file (inside ``_LayerNormMLP``)."""
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    return "".join([*lines[:middle], f"    # edit {n}\n", *lines[middle:]])


async def measure(path: Path, edits: int, debounce_ms: float) -> dict[str, list[float]]:
    client = LanguageClient("gradgate-latency", "1")
    arrived: dict[int, float] = {}
    events: dict[int, asyncio.Event] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: types.PublishDiagnosticsParams) -> None:
        if params.version is not None:
            arrived[params.version] = time.perf_counter()
            events.setdefault(params.version, asyncio.Event()).set()

    # the gradgate this interpreter imports (the benchmark's snapshot on PYTHONPATH, an
    # installed one), else this checkout's
    await client.start_io(sys.executable, "-m", "gradgate", "server", cwd=None if IMPORTABLE else str(HERE.parent))
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options={"debounce": debounce_ms}
        )
    )
    client.initialized(types.InitializedParams())
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    events[1] = asyncio.Event()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    await asyncio.wait_for(events[1].wait(), 60)  # warm: rules and LibCST imported
    latencies: dict[str, list[float]] = {}
    version = 1
    for where, edit in (("top", at_top), ("inside", inside)):
        latencies[where] = []
        for n in range(edits):
            version += 1
            events[version] = asyncio.Event()
            sent = time.perf_counter()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=edit(n, text))],
                )
            )
            await asyncio.wait_for(events[version].wait(), 60)
            latencies[where].append(arrived[version] - sent)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return latencies


def engine_time(path: Path, edits: int) -> list[float]:
    from gradgate.config import Config
    from gradgate.engine import lint_source

    data = path.read_bytes()
    lint_source(str(path), data, Config())  # warm
    times = []
    for n in range(edits):
        edited = f"# edit {n}\n".encode() + data
        start = time.perf_counter()
        lint_source(str(path), edited, Config())
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--te", type=Path, help="folder holding transformer_engine/ (default: download)")
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--debounce", type=float, default=0, help="server debounce in ms (default 0)")
    args = parser.parse_args()
    if not IMPORTABLE:
        sys.path.insert(0, str(HERE.parent))
    with tempfile.TemporaryDirectory() as temporary:
        root = args.te or download_te(Path(temporary))
        path = (root / MLP).resolve()
        latencies = asyncio.run(measure(path, args.edits, args.debounce))
        engine = engine_time(path, args.edits)
    top, middle = latencies["top"], latencies["inside"]
    median = statistics.median(top)
    base = statistics.median(engine)
    print(
        f"layernorm_mlp.py diagnostics latency after a change: median {median * 1000:.1f} ms "
        f"of {args.edits} edits (debounce {args.debounce:g} ms; min {min(top) * 1000:.1f}, "
        f"max {max(top) * 1000:.1f})"
    )
    print(
        f"edits inside _LayerNormMLP: median {statistics.median(middle) * 1000:.1f} ms of {args.edits} edits "
        f"(min {min(middle) * 1000:.1f}, max {max(middle) * 1000:.1f})"
    )
    print(
        f"engine alone (lint_source, same text): median {base * 1000:.1f} ms; server/engine ratio {median / base:.2f}x"
    )
    import gradgate

    print(f"gradgate from {Path(gradgate.__file__).parent}")


if __name__ == "__main__":
    main()
