"""Lint configuration: which rules run, and what counts as grad mode and as a forward flag.

A :class:`Config` is immutable and hashable in spirit: :meth:`Config.fingerprint` gives a
stable digest used by the cache, and :meth:`Config.prefilter_tokens` gives the byte strings
of which at least one must occur in a file for any rule to report anything in it.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from .records import as_dict, field, record, replace
from .regexsafety import backtracking_risk

#: Functions whose call returns the grad mode (True while autograd records).
DEFAULT_GRAD_FUNCTIONS: tuple[str, ...] = (
    "torch.is_grad_enabled",
    "torch._C.is_grad_enabled",
    "torch.autograd.grad_mode.is_grad_enabled",
)
#: Functions whose call returns the *inverse* of the grad mode (True means no autograd).
DEFAULT_INFERENCE_FUNCTIONS: tuple[str, ...] = (
    "torch.is_inference_mode_enabled",
    "torch._C.is_inference_mode_enabled",
)
#: Variable, parameter and attribute names that carry the grad mode (TE passes
#: ``is_grad_enabled`` down inside a tuple of non-tensor args).
DEFAULT_GRAD_NAMES: tuple[str, ...] = ("is_grad_enabled", "grad_enabled", "grad_mode_enabled")
#: A flag whose name matches one of these (``re.search``) selects a communication path.
DEFAULT_COMM_FLAG_PATTERNS: tuple[str, ...] = (
    r"overlap",
    r"^ub_",
    r"all_?gather",
    r"reduce_?scatter",
    r"(^|_)(ag|rs)(_|$)",
    r"(^|_)comm(_|$)",
    r"(^|_)async(_|$)",
    r"dispatch",  # a bucket's param all-gather, a MoE token all-to-all
    r"prefetch",  # parameters gathered ahead of use
    r"(^|_)p2p(_|$)",
)
#: a flag named so says the path is *not* taken (``skip_next_bucket_dispatch``): grad mode
#: forcing it on is what forces the path off
INVERTED_FLAG = re.compile(r"^_*(skip|no|disable|without|avoid|suppress)_")
#: ... unless it also matches one of these: it then belongs to the backward pass.
DEFAULT_BACKWARD_FLAG_PATTERNS: tuple[str, ...] = (
    r"dgrad",
    r"wgrad",
    r"^ub_bulk",
    r"(^|_)bwd(_|$)",
    r"backward",
    # the gradients' own communication (async_grad_allreduce, overlap_grad_reduce)
    r"(^|_)grads?_(reduce|allreduce|all_reduce|sync|reduce_scatter|comm)",
    # what the backward recomputes (`tp_recompute_allgather`: gather again, not keep)
    r"(^|_)recompute(_|$)",
)


#: A call whose last name matches one of these performs communication ...
DEFAULT_COMM_CALL_PATTERNS: tuple[str, ...] = (
    r"all_?gather",
    r"reduce_?scatter",
    r"all_?reduce",
    r"all_?to_?all",
    r"(^|_)broadcast(?!_(tensors|shapes|to)\b)(_|$)",  # not torch.broadcast_tensors
    r"^get_ub$",
    r"userbuffers",
    r"param_(sync|gather)",
    r"pre_?forward_hook",
    r"unshard",  # FSDP's parameter all-gather
    r"(^|_)reshard(_|$)",  # FSDP freeing what the next use all-gathers again
    r"(^|_)prefetch(_|$)",
    r"(^|_)sync_(module_)?(buffers|params)",
    r"^(i?send|i?recv|batch_isend_irecv)$",
    r"async_comm(unication)?",  # nanotron's `_ColumnLinearAsyncCommunication`
)
#: ... unless it also matches one of these (backward communication)
DEFAULT_BACKWARD_CALL_PATTERNS: tuple[str, ...] = (
    r"grad_sync",
    r"dgrad",
    r"wgrad",
    r"backward",
    r"(^|_)loss(_|$)",  # a loss is computed for its gradient: training-step work
    r"offload",  # activations moved off the device for the backward
)
#: a call named like a question asks about communication, it does not communicate
_QUERY_CALL = re.compile(r"^_*(is|has|supports|can|should|use|uses|needs|check|enable|disable)_")
#: Modules (or functions) every call into which is communication ...
DEFAULT_COMM_APIS: tuple[str, ...] = ("torch.distributed",)
#: ... but for these last names: queries and set-up, not collectives
NON_COMM_API_NAMES = re.compile(
    r"^(is_\w+|get_\w+|new_\w*group\w*|init_\w+|destroy_\w+|group|GroupMember|ReduceOp|Backend"
    r"|ProcessGroup\w*|Work|DeviceMesh|init_device_mesh|distributed_c10d)$"
)
#: Functions (last name) that never run in a forward pass, whatever they decide (a name
#: of both passes, `forward_backward_step`, `send_forward_recv_backward`, runs forwards).
DEFAULT_NON_FORWARD_FUNCTIONS: tuple[str, ...] = (
    r"^(?!.*(?:^|_)(?:forward|fwd)(?:_|$)).*(^|_)(backward|bwd)(_|$)",
    r"^__(exit|aexit|del)__$",
    r"(^|_)exit$",
    r"^(step|zero_grad|state_dict|load_state_dict)$",
    r"^__getitem__$|(^|_)collate(_|$)",  # data loading: it runs before the forward, not in it
)


#: the rule reporting suppression comments that suppress nothing (off by default)
UNUSED_SUPPRESSION_CODE = "GG100"


#: a name holding one of these spells grad mode (``fwd_grad_enabled``, ``grad_mode``) ...
_GRAD_CARRIER = re.compile(
    r"(^|_)grad_(enabled|mode)(_enabled)?($|_)"
    r"|^_*needs_grad$"
)
#: ... or inference mode (``is_inference_mode``, ``inference_mode_enabled``) ...
_INFERENCE_CARRIER = re.compile(r"(^|_)inference_mode_enabled$|^_*is_inference_mode$")
#: ... unless it names a setter, a switch, or another autograd mode
_NOT_CARRIER = re.compile(r"set_|enable_grad|no_grad|compiled|anomaly|forward_ad|grad_mode_(context|ctx|guard)")


#: the words every name :meth:`GradSources.carrier_polarity` accepts holds one of
#: (not bare ``inference_mode``: ``torch.inference_mode()`` is the context manager, in
#: thousands of files that then could not be skipped unread)
_CARRIER_WORDS = frozenset({"grad_enabled", "grad_mode", "needs_grad", "is_inference_mode", "inference_mode_enabled"})


class GradSources:
    """The one registry of where grad mode comes from, which every layer asks: the
    bytes pre-filter (:meth:`tokens`), the model's choice of functions to interpret
    (:meth:`words`), the interpreter (:meth:`polarity`, :meth:`is_carrier_name`) and the
    cross-module exports (what a function returning grad mode reads). Built from a
    configuration's ``grad-mode-functions``, ``inference-mode-functions`` and
    ``grad-mode-names``."""

    def __init__(
        self,
        grad_functions: tuple[str, ...],
        inference_functions: tuple[str, ...],
        names: tuple[str, ...],
        fields: tuple[str, ...] = (),
        keys: tuple[str, ...] = (),
        params: tuple[str, ...] = (),
        gated: tuple[str, ...] = (),
        injected: tuple[str, ...] = (),
    ):
        #: qualified function -> 1 (grad mode) or -1 (its negation: inference mode)
        self.functions: dict[str, int] = {**{q: -1 for q in inference_functions}, **{q: 1 for q in grad_functions}}
        #: names that carry grad mode by their spelling (TE's ``is_grad_enabled``), and
        #: the fields a run's files store grad mode in (:mod:`gradgate.learned`)
        self.names = frozenset(names) | frozenset(fields)
        #: the dict keys a run's files store grad mode under (``{"grad": ...}``)
        self.keys = frozenset(keys)
        #: the keywords a run's files call functions with grad mode under
        self.params = frozenset(params)
        #: the fields (and properties) a run's files store a value gated by grad mode in
        #: (``overlap_ag=cfg.overlap_ag and grad``): read in another module, grad off
        #: forces them off there
        self.gated = frozenset(gated) - self.names
        #: decorator -> the parameters its wrapper fills with grad mode (``@infer_training``
        #: setting ``kwargs["training"]``): grad mode in a function so decorated
        self.injected: dict[str, frozenset[str]] = {}
        for pair in injected:
            decorator, _, parameter = pair.partition(":")
            self.injected[decorator] = self.injected.get(decorator, frozenset()) | {parameter}
        self._carriers: dict[str, int | None] = {}

    def polarity(self, qualified: str) -> int | None:
        """1 for a grad-mode function (``torch.is_grad_enabled``), -1 for an inference-mode
        one, None for anything else."""
        return self.functions.get(qualified)

    def is_carrier_name(self, name: str) -> bool:
        return self.carrier_polarity(name) is not None

    def carrier_polarity(self, name: str) -> int | None:
        """Does a name spell grad mode (1: ``is_grad_enabled``, ``fwd_grad_enabled``,
        ``grad_mode``) or inference mode (-1: ``inference_mode``, its negation)? Names of
        grad-mode *setters* and of other modes (``set_grad_enabled``,
        ``compiled_autograd_enabled``) spell neither."""
        if name in self.names:
            return 1
        answer = self._carriers.get(name, 0)
        if answer == 0:
            lowered = name.lower()
            answer = None
            if not _NOT_CARRIER.search(lowered):
                if _GRAD_CARRIER.search(lowered):
                    answer = 1
                elif _INFERENCE_CARRIER.search(lowered):
                    answer = -1
            self._carriers[name] = answer
        return answer

    def param_polarity(self, function: str, name: str) -> int | None:
        """Does parameter ``name`` of a function called ``function`` carry grad mode: a
        keyword the run's files pass grad mode under to a function so named, or a name
        spelling it (:meth:`carrier_polarity`)?"""
        return 1 if f"{function}.{name}" in self.params else self.carrier_polarity(name)

    def key_polarity(self, key: str) -> int | None:
        """Does a dict key carry grad mode: one a run's files store it under, or one
        spelling it (:meth:`carrier_polarity`)?"""
        return 1 if key in self.keys else self.carrier_polarity(key)

    def grad_source_names(self) -> tuple[str, ...]:
        """The last names of the functions that read grad mode itself (not inference mode)."""
        return tuple(sorted({q.rsplit(".", 1)[-1] for q, polarity in self.functions.items() if polarity > 0}))

    def words(self) -> frozenset[str]:
        """The words a text must spell to read grad mode: the sources' last names and
        the carrier names (the learned keys among them)."""
        return frozenset(
            {q.rsplit(".", 1)[-1] for q in self.functions}
            | self.names
            | self.gated
            | self.injected.keys()
            | self.keys
            | {p.rsplit(".", 1)[-1] for p in self.params}
            | _CARRIER_WORDS
        )

    def tokens(self, also: tuple[str, ...] = ()) -> tuple[bytes, ...]:
        """The bytes pre-filter's tokens: the sources' last names and the configured
        carrier names (and ``also``) as byte strings, less a word holding another
        (``is_grad_enabled`` holds ``grad_enabled``): the other finds every file it would.
        The other spellings a carrier may have (``grad_mode``) are not scanned for: a
        module holding no source and no configured name reads grad mode only from its
        callers, whose analysis follows it there (and they share ``_enabled``, one scan)."""
        names = {*(q.rsplit(".", 1)[-1] for q in self.functions), *self.names, *self.gated, *self.injected, *also}
        names |= {p.rsplit(".", 1)[-1] for p in self.params}
        names |= {f"{quote}{key}{quote}" for key in self.keys for quote in "'\""}
        kept = {n for n in names if not any(other != n and other in n for other in names)}
        return tuple(sorted(n.encode() for n in kept))


class ConfigError(ValueError):
    """A configuration value is invalid (unknown rule code, bad pattern, ...)."""


@record
class Config:
    select: tuple[str, ...] | None = None
    #: rules added to the selection (the default one, or ``select``)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    grad_functions: tuple[str, ...] = DEFAULT_GRAD_FUNCTIONS
    inference_functions: tuple[str, ...] = DEFAULT_INFERENCE_FUNCTIONS
    grad_names: tuple[str, ...] = DEFAULT_GRAD_NAMES
    comm_flag_patterns: tuple[str, ...] = DEFAULT_COMM_FLAG_PATTERNS
    backward_flag_patterns: tuple[str, ...] = DEFAULT_BACKWARD_FLAG_PATTERNS
    #: qualified calls (or modules) that perform forward communication, beyond the
    #: defaults; and call-name patterns
    comm_apis: tuple[str, ...] = ()
    comm_call_patterns: tuple[str, ...] = DEFAULT_COMM_CALL_PATTERNS
    non_forward_functions: tuple[str, ...] = DEFAULT_NON_FORWARD_FUNCTIONS
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())
    #: fields and dict keys the run's files store grad mode in (:mod:`gradgate.learned`),
    #: carriers for the whole run; not a setting of its own
    learned_fields: tuple[str, ...] = ()
    learned_keys: tuple[str, ...] = ()
    learned_params: tuple[str, ...] = ()
    learned_gated: tuple[str, ...] = ()
    learned_injected: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from .registry import known_codes

        codes = (
            known_codes()
            if (self.select or self.extend_select or self.ignore or self.per_file_ignores)
            else frozenset()
        )
        wanted = [
            *(self.select or ()),
            *self.extend_select,
            *self.ignore,
            *(c for _, cs in self.per_file_ignores for c in cs),
        ]
        for code in wanted:
            if not any(known.startswith(code.upper()) for known in codes):
                raise ConfigError(f"unknown rule code {code!r}; `gradgate rules` lists them")
        for pattern in (
            *self.comm_flag_patterns,
            *self.backward_flag_patterns,
            *self.comm_call_patterns,
            *self.non_forward_functions,
        ):
            if pattern not in _CHECKED_PATTERNS:
                check_pattern(pattern)
                _CHECKED_PATTERNS.add(pattern)

    def with_changes(self, **changes: Any) -> Config:
        return replace(self, **changes)

    def with_learned(
        self,
        fields: tuple[str, ...],
        keys: tuple[str, ...],
        params: tuple[str, ...],
        gated: tuple[str, ...] = (),
        injected: tuple[str, ...] = (),
    ) -> Config:
        """This configuration with the run's learned carriers (:mod:`gradgate.learned`)."""
        learned = (
            self.learned_fields,
            self.learned_keys,
            self.learned_params,
            self.learned_gated,
            self.learned_injected,
        )
        if (fields, keys, params, gated, injected) == learned:
            return self
        return replace(
            self,
            learned_fields=fields,
            learned_keys=keys,
            learned_params=params,
            learned_gated=gated,
            learned_injected=injected,
        )

    def for_file(self, path: str, root: str | None) -> Config:
        """This configuration as it applies to the file ``path``: the codes its
        ``per-file-ignores`` name for it ignored too (``root``: the folder the globs are
        relative to; None: the working directory). Every path, check and each fix alike,
        runs the engine with it, so a rule a file is exempt from is neither reported nor
        fixed there."""
        if not self.per_file_ignores:
            return self
        codes = per_file_codes(self.per_file_ignores, path, root)
        if not codes:
            return self
        derived = self._per_file.get(codes)
        if derived is None:
            derived = self._per_file[codes] = replace(self, ignore=(*self.ignore, *codes))
        return derived

    @cached_property
    def _per_file(self) -> dict[tuple[str, ...], Config]:
        return {}

    @cached_property
    def comm_flag_re(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in self.comm_flag_patterns) or r"(?!)")

    @cached_property
    def backward_flag_re(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in self.backward_flag_patterns) or r"(?!)")

    @cached_property
    def _flag_answers(self) -> dict[str, bool]:
        return {}

    def is_forward_comm_flag(self, name: str) -> bool:
        # asked for every name the model reads (thousands a file, a few hundred distinct)
        answers = self._flag_answers
        answer = answers.get(name)
        if answer is None:
            answer = answers[name] = bool(self.comm_flag_re.search(name)) and not self.backward_flag_re.search(name)
        return answer

    @cached_property
    def all_comm_apis(self) -> tuple[str, ...]:
        return (*DEFAULT_COMM_APIS, *self.comm_apis)

    @cached_property
    def _comm_call_re(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in self.comm_call_patterns) or r"(?!)")

    @cached_property
    def backward_call_re(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in DEFAULT_BACKWARD_CALL_PATTERNS))

    @cached_property
    def non_forward_re(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in self.non_forward_functions) or r"(?!)")

    def comm_family(self, name: str) -> str:
        """The collective an operation's name says it is (the first ``comm-call-patterns``
        entry it matches: ``differentiable_all_reduce_sum`` and ``all_reduce`` are both
        ``all_?reduce``), or the name itself."""
        stripped = name.lstrip("_") or name
        return next((p for p in self.comm_call_patterns if re.search(p, stripped)), stripped)

    def is_forward_comm_call(self, name: str) -> bool:
        name = name.lstrip("_") or name  # `_broadcast_coalesced` is a broadcast
        return (
            bool(self._comm_call_re.search(name))
            and not self.backward_call_re.search(name)
            and not _QUERY_CALL.match(name)
        )

    def selects(self, code: str, default_enabled: bool = True) -> bool:
        """Does this configuration run the rule ``code``?"""
        if any(code.startswith(i) for i in self.ignore):
            return False
        if any(code.startswith(e) for e in self.extend_select):
            return True
        if self.select is None:
            return default_enabled
        return any(code.startswith(s) for s in self.select)

    @property
    def reports_unused_suppressions(self) -> bool:
        return self.selects(UNUSED_SUPPRESSION_CODE, default_enabled=False)

    def prefilter_tokens(self) -> tuple[bytes, ...]:
        """Byte strings of which a file must hold one to hold any finding: a grad-mode
        source, or (when unused suppressions are reported) a suppression comment. A name
        holding another (``is_grad_enabled``, ``grad_enabled``) is left out: the other
        finds every file it would, and each token is one more scan of every file."""
        return self._prefilter_tokens

    def prefilter_gate(self) -> bytes | None:
        """A byte string every pre-filter token holds (``_enabled``), where they share
        one of 4 bytes or more: a file without it holds none of them, found in one scan
        of its bytes instead of one per token (69 of transformers' 2,912 files hold it)."""
        return self._prefilter_gate

    @cached_property
    def _prefilter_gate(self) -> bytes | None:
        tokens = self.prefilter_tokens()
        if not tokens:
            return None
        shortest = min(tokens, key=len)
        for size in range(len(shortest), 3, -1):
            for start in range(len(shortest) - size + 1):
                part = shortest[start : start + size]
                if all(part in token for token in tokens):
                    return part
        return None

    @cached_property
    def _prefilter_tokens(self) -> tuple[bytes, ...]:
        return self.sources.tokens(("gradgate:",) if self.reports_unused_suppressions else ())

    @cached_property
    def sources(self) -> GradSources:
        """Where grad mode comes from, for every layer (:class:`GradSources`)."""
        return GradSources(
            self.grad_functions,
            self.inference_functions,
            self.grad_names,
            self.learned_fields,
            self.learned_keys,
            self.learned_params,
            self.learned_gated,
            self.learned_injected,
        )

    def fingerprint(self) -> str:
        """A digest of every setting (its fields are strings, tuples of them and None)."""
        from .digest import digest

        return digest(repr(sorted(as_dict(self).items())).encode(), 8)


def per_file_codes(
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...], path: str, root: str | None
) -> tuple[str, ...]:
    """The codes ``per-file-ignores`` names for the file ``path``: each glob matched
    against its path relative to ``root`` (or the working directory) and its name."""
    import fnmatch
    import os

    relative = os.path.relpath(os.path.abspath(path), root or os.getcwd()).replace(os.sep, "/")
    name = relative.rsplit("/", 1)[-1]
    found = {
        code
        for pattern, codes in per_file_ignores
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(name, pattern)
        for code in codes
    }
    return tuple(sorted(found))


def check_pattern(pattern: str) -> None:
    """Raise :class:`ConfigError` unless ``pattern`` compiles and cannot backtrack badly."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"invalid regular expression {pattern!r}: {exc}") from None
    risk = backtracking_risk(pattern)
    if risk is not None:
        raise ConfigError(f"regular expression {pattern!r} refused: {risk}")


#: patterns already checked in this process; the defaults are (``tests`` check them with
#: :func:`check_pattern`), so a default configuration costs no regular-expression parse
_CHECKED_PATTERNS: set[str] = {
    *DEFAULT_COMM_FLAG_PATTERNS,
    *DEFAULT_BACKWARD_FLAG_PATTERNS,
    *DEFAULT_COMM_CALL_PATTERNS,
    *DEFAULT_NON_FORWARD_FUNCTIONS,
}
