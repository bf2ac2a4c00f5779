"""``[tool.gradgate]`` in ``pyproject.toml``: finding it, reading it, validating it.

The table is looked up from the first checked path upward (the first
``pyproject.toml`` that has a ``[tool.gradgate]`` table wins). Keys use ruff's
kebab-case spelling; unknown keys and wrongly typed values are errors that name the
file and the key. Patterns and sources *extend* gradgate's defaults.

    [tool.gradgate]
    select = ["GG001"]
    extend-select = ["GG100"]                    # rules off by default
    ignore = []
    exclude = ["third_party/*", "*_pb2.py"]
    per-file-ignores = { "tests/*" = ["GG001"] }
    comm-flag-patterns = ["^my_overlap_"]       # more forward communication flags
    backward-flag-patterns = ["_bwd_only$"]      # more flags that belong to backward
    comm-apis = ["mylib.comm.all_gather_async"]  # more communication calls
    grad-mode-functions = ["mylib.grad_on"]      # more functions returning grad mode
    inference-mode-functions = ["mylib.inference_on"]
    grad-mode-names = ["grad_on"]                # more names carrying grad mode
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .config import Config, ConfigError

_LIST_KEYS = {
    "select": "select",
    "extend-select": "extend_select",
    "ignore": "ignore",
    "exclude": "exclude",
    "comm-flag-patterns": "comm_flag_patterns",
    "backward-flag-patterns": "backward_flag_patterns",
    "comm-apis": "comm_apis",
    "grad-mode-functions": "grad_functions",
    "inference-mode-functions": "inference_functions",
    "grad-mode-names": "grad_names",
}
_EXTENDING = {
    "comm_flag_patterns", "backward_flag_patterns", "comm_apis", "grad_functions",
    "inference_functions", "grad_names",
}
KNOWN_KEYS = frozenset({*_LIST_KEYS, "per-file-ignores"})


@dataclass(frozen=True)
class Settings:
    config: Config
    #: the pyproject.toml it came from, or None for the defaults
    source: str | None
    #: folder the file's relative globs are relative to
    root: str


def find_pyproject(start: str) -> str | None:
    """The nearest ``pyproject.toml`` with a ``[tool.gradgate]`` table, from ``start`` up."""
    directory = os.path.abspath(start)
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate):
            import tomllib  # only once a pyproject.toml is found

            try:
                with open(candidate, "rb") as handle:
                    raw = handle.read()
                if "gradgate" in tomllib.loads(raw.decode("utf-8")).get("tool", {}):
                    return candidate
            except (OSError, UnicodeDecodeError):
                pass
            except tomllib.TOMLDecodeError:
                if b"tool.gradgate" in raw:
                    return candidate  # ours and broken: load() says why
                # someone else's broken file is not ours to judge: keep looking
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _strings(path: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.gradgate] {key} must be a list of strings")
    return tuple(value)


def load(path: str) -> Settings:
    import tomllib

    try:
        with open(path, "rb") as handle:
            table = tomllib.load(handle).get("tool", {}).get("gradgate", {})
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.gradgate] must be a table")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key{'s' if len(unknown) > 1 else ''} in [tool.gradgate]: "
            f"{', '.join(unknown)} (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    defaults = Config()
    changes: dict[str, object] = {}
    for key, field_name in _LIST_KEYS.items():
        if key in table:
            values = _strings(path, key, table[key])
            if field_name in _EXTENDING:
                values = (*getattr(defaults, field_name), *values)
            changes[field_name] = values
    if "per-file-ignores" in table:
        value = table["per-file-ignores"]
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: [tool.gradgate] per-file-ignores must be a table")
        changes["per_file_ignores"] = tuple(
            (glob, _strings(path, f"per-file-ignores.{glob}", codes)) for glob, codes in value.items()
        )
    if changes.get("select") == ():
        changes["select"] = None
    return Settings(Config(**changes), path, os.path.dirname(os.path.abspath(path)))


def resolve(paths: tuple[str, ...], explicit: str | None = None) -> Settings:
    """Settings for a run over ``paths``: from ``explicit`` if given, else found upward."""
    if explicit is not None:
        return load(explicit)
    found = find_pyproject(paths[0] if paths else ".")
    if found is None:
        return Settings(Config(), None, os.getcwd())
    return load(found)
