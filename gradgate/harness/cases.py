"""The validation matrix: modules, recipes, modes and perf shapes (plain data, no torch)."""

from __future__ import annotations

from ..records import record

MODULES = ("LayerNormLinear", "LayerNormMLP")
RECIPES = ("bf16", "fp8_delayed_scaling", "fp8_current_scaling", "mxfp8", "nvfp4")
MODES = ("no_grad", "grad", "checkpoint_reentrant", "checkpoint_non_reentrant")
TE_VARIANTS = ("stock", "fixed")

DEFAULT_PERF_SHAPES = "2048x2048,2048x8192,4096x4096,4096x8192,8192x8192,8192x16384"
DEFAULT_PERF_RECIPES = "bf16,fp8_delayed_scaling"

# How the overlap module is compared with its non-overlap reference.
#   bf16: bitwise (atol = rtol = 0): both paths run the same GEMM on the same data.
#   fp8:  elementwise |a - b| <= atol + rtol * |ref|, the tolerances TransformerEngine's own
#         overlap test (tests/pytorch/distributed/run_layer_with_overlap.py) uses for FP8.
TOLERANCES = {
    "bf16": {"atol": 0.0, "rtol": 0.0},
    "fp8": {"atol": 0.0625, "rtol": 0.125},
}


def tolerance_for(recipe: str) -> dict[str, float]:
    return dict(TOLERANCES["bf16" if recipe == "bf16" else "fp8"])


@record
class PerfShape:
    hidden: int
    seq: int

    @property
    def label(self) -> str:
        return f"{self.hidden}x{self.seq}"


def parse_choice_list(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """Parse ``a,b`` (or ``all``) into a tuple of allowed names, keeping the canonical order."""
    text = text.strip()
    if text == "all":
        return allowed
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError(f"no {what} given")
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(map(repr, unknown))}; choose from {', '.join(allowed)} or all")
    return tuple(name for name in allowed if name in names)


def parse_perf_shapes(text: str) -> tuple[PerfShape, ...]:
    """Parse ``HIDDENxSEQ[,HIDDENxSEQ...]``; an empty string means no perf shapes."""
    shapes = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        hidden, sep, seq = part.lower().partition("x")
        if not sep or not hidden.isdigit() or not seq.isdigit():
            raise ValueError(f"bad perf shape {part!r}: expected HIDDENxSEQ, e.g. 4096x8192")
        shape = PerfShape(int(hidden), int(seq))
        if shape.hidden <= 0 or shape.seq <= 0:
            raise ValueError(f"bad perf shape {part!r}: sizes must be positive")
        shapes.append(shape)
    return tuple(shapes)


DEFAULT_HIDDEN = 1024
DEFAULT_SEQ = 2048


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def default_case_shape(tp: int) -> tuple[int, int]:
    """(hidden, seq) for the correctness cases: 1024 and 2048, rounded up to a multiple of
    16 * tp so that every TP size >= 2 gets a shape it can split (1024/2048 for TP 2, 4, 8)."""
    return round_up(DEFAULT_HIDDEN, 16 * tp), round_up(DEFAULT_SEQ, 16 * tp)


def check_shape_for_tp(hidden: int, seq: int, tp: int) -> str | None:
    """Why (hidden, seq) cannot run at tensor-parallel size ``tp``, or None if it can.

    The input is the sequence-parallel shard [seq / tp, batch, hidden]; FP8 GEMMs need
    every GEMM dimension divisible by 16, and the FFN width (4 * hidden) is split tp ways.
    """
    if seq % tp:
        return f"sequence {seq} is not divisible by TP size {tp}"
    if (seq // tp) % 16:
        return f"local sequence shard {seq // tp} (= {seq} / TP {tp}) is not a multiple of 16"
    if hidden % 16:
        return f"hidden size {hidden} is not a multiple of 16"
    if (4 * hidden) % tp or (3 * hidden) % tp or (4 * hidden // tp) % 16 or (3 * hidden // tp) % 16:
        return f"hidden size {hidden} does not split evenly over TP size {tp}"
    return None
