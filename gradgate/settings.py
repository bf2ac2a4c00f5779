"""gradgate's configuration files: finding them, reading them, validating them.

Each file is checked with the configuration nearest to it, as ruff does: from the file's
folder upward, the first ``gradgate.toml`` (keys at its top level) or ``pyproject.toml``
with a ``[tool.gradgate]`` table wins (``gradgate.toml`` first in one folder). Keys use
ruff's kebab-case spelling; unknown keys, wrongly typed values and unknown rule codes are
errors that name the file and the key. Rule codes are case-insensitive. Patterns and
sources *extend* gradgate's defaults. :class:`Resolver` finds and caches the settings of
each file of a run, with the command line's overrides applied on top.

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
from collections.abc import Callable
from typing import Any

from .config import Config, ConfigError
from .records import field, record

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
    "comm_flag_patterns",
    "backward_flag_patterns",
    "comm_apis",
    "grad_functions",
    "inference_functions",
    "grad_names",
}
KNOWN_KEYS = frozenset({*_LIST_KEYS, "per-file-ignores"})
#: keys holding rule codes (matched case-insensitively: stored upper-case)
_CODE_KEYS = {"select", "extend_select", "ignore"}
#: the configuration files, in the order they are preferred within one folder
CONFIG_FILES = ("gradgate.toml", "pyproject.toml")


@record
class Settings:
    config: Config
    #: the pyproject.toml it came from, or None for the defaults
    source: str | None
    #: folder the file's relative globs are relative to
    root: str


def _holds_gradgate_table(candidate: str) -> bool:
    import tomllib  # only once a pyproject.toml is found

    try:
        with open(candidate, "rb") as handle:
            raw = handle.read()
        return "gradgate" in tomllib.loads(raw.decode("utf-8")).get("tool", {})
    except (OSError, UnicodeDecodeError):
        return False
    except tomllib.TOMLDecodeError:
        # ours and broken: load() says why; someone else's broken file is not ours to judge
        return b"tool.gradgate" in raw


def find_config(start: str) -> str | None:
    """The nearest ``gradgate.toml``, or ``pyproject.toml`` with a ``[tool.gradgate]``
    table, from ``start`` (a file or a folder) upward."""
    directory = os.path.abspath(start)
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    while True:
        found = _config_in(directory)
        if found is not None:
            return found
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _config_in(directory: str) -> str | None:
    own = os.path.join(directory, "gradgate.toml")
    if os.path.isfile(own):
        return own
    candidate = os.path.join(directory, "pyproject.toml")
    if os.path.isfile(candidate) and _holds_gradgate_table(candidate):
        return candidate
    return None


#: the name earlier versions used
find_pyproject = find_config


def _strings(path: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.gradgate] {key} must be a list of strings")
    return tuple(value)


def load(path: str) -> Settings:
    """The settings of the configuration file ``path``: a ``pyproject.toml``'s
    ``[tool.gradgate]`` table, any other file's top level (``gradgate.toml``, or any
    name given to ``--config``, as ruff reads a ``ruff.toml``). A ``pyproject.toml``
    without the table, an unknown key (a typo) or a wrong value is a
    :class:`ConfigError`."""
    import tomllib

    own = os.path.basename(path) != "pyproject.toml"
    where = "[tool.gradgate]" if not own else "the top level of the file"
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
        table = document if own else document.get("tool", {}).get("gradgate")
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a configuration file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a TOML file (not UTF-8)") from None
    if table is None:
        raise ConfigError(f"{path}: no [tool.gradgate] table (gradgate's settings go there)")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.gradgate] must be a table")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key{'s' if len(unknown) > 1 else ''} in {where}: "
            f"{', '.join(unknown)} (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    defaults = Config()
    changes: dict[str, Any] = {}
    for key, field_name in _LIST_KEYS.items():
        if key in table:
            values = _strings(path, key, table[key])
            if field_name in _EXTENDING:
                values = (*getattr(defaults, field_name), *values)
            elif field_name in _CODE_KEYS:
                values = tuple(v.strip().upper() for v in values)
            changes[field_name] = values
    if "per-file-ignores" in table:
        value = table["per-file-ignores"]
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: [tool.gradgate] per-file-ignores must be a table")
        changes["per_file_ignores"] = tuple(
            (glob, tuple(c.strip().upper() for c in _strings(path, f"per-file-ignores.{glob}", codes)))
            for glob, codes in value.items()
        )
    if changes.get("select") == ():
        changes["select"] = None
    try:
        config = Config(**changes)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return Settings(config, path, os.path.dirname(os.path.abspath(path)))


def resolve(paths: tuple[str, ...], explicit: str | None = None) -> Settings:
    """Settings from ``explicit`` if given, else those of the first of ``paths``."""
    if explicit is not None:
        return load(explicit)
    found = find_config(paths[0] if paths else ".")
    if found is None:
        return Settings(Config(), None, os.getcwd())
    return load(found)


@record(frozen=False)
class Resolver:
    """The settings of each file of a run: from ``explicit`` for every file when given,
    else from the configuration file nearest to it; ``override`` (the command line's
    options) applied to each. Folders and files are looked up once.

    Raises :class:`ConfigError` for a configuration file that is invalid, or that the
    overrides make invalid.
    """

    explicit: str | None = None
    override: Callable[[Config], Config] | None = None
    _by_dir: dict[str, str | None] = field(default_factory=dict, repr=False)
    _by_file: dict[str | None, Settings] = field(default_factory=dict, repr=False)

    def for_path(self, path: str, is_file: bool = False) -> Settings:
        """The settings of the file (or folder) ``path``; ``is_file``: the caller knows it
        is a file (discovery found it), so its folder is not asked for."""
        source = self.explicit if self.explicit is not None else self._nearest(path, is_file)
        settings = self._by_file.get(source)
        if settings is None:
            settings = load(source) if source is not None else Settings(Config(), None, os.getcwd())
            if self.override is not None:
                settings = Settings(self.override(settings.config), settings.source, settings.root)
            self._by_file[source] = settings
        return settings

    def _nearest(self, path: str, is_file: bool = False) -> str | None:
        directory = os.path.abspath(path)
        if is_file or not os.path.isdir(directory):
            directory = os.path.dirname(directory)
        walked = []
        found: str | None = None
        while True:
            if directory in self._by_dir:
                found = self._by_dir[directory]
                break
            walked.append(directory)
            found = _config_in(directory)
            if found is not None:
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        for folder in walked:
            self._by_dir[folder] = found
        return found
