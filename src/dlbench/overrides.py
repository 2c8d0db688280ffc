"""Refuse a mistyped key before anything runs or is recorded, and name the closest valid keys.

Hydra refuses `precison=amp` without saying what was meant, and accepts `+precison=amp` (the fix its
own message suggests) as a new key that nothing reads: the job then runs fp32 and exits 0. Every key
of a `key=value` override, with or without `+`, `++` or `~`, must be a config group or a key of the
schema registered with Hydra (dlbench.config.register_configs: the job schema and every group's
schemas, so per-framework or per-family keys count too).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from omegaconf import DictConfig, OmegaConf

from dlbench.core.names import CONF_DIR

ROOT_SCHEMA = "dlbench_schema.yaml"
# Hydra flags that take the next word as their value (the value is not an override).
FLAGS_WITH_VALUE = {"--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd", "--cfg", "-c",
                    "--package", "-p", "--experimental-rerun", "--info", "-i"}  # fmt: skip


def check_overrides(argv: list[str]) -> str | None:
    """None when every override's key is known and every group option exists, else one line: the key or
    option, the closest valid ones."""
    keys, groups = valid_keys()
    # options may come from another config folder (--config-dir, hydra.searchpath): Hydra's to check then
    own_options = not any(w in ("--config-dir", "-cd") or w.startswith("hydra.searchpath") for w in argv)
    for override in _overrides(argv):
        if unreadable := _parse_problem(override):
            return unreadable
        key = override.split("=", 1)[0].lstrip("+~").split("@", 1)[0]
        if (
            own_options
            and key in groups
            and (refused := _check_options(key, override.split("=", 1)[1], override))
        ):
            return refused
        if (
            key.split(".", 1)[0].split("/", 1)[0] == "hydra" or key in groups or key in keys
        ):  # hydra/launcher=…
            continue
        close = difflib.get_close_matches(key, sorted(keys | groups), n=3, cutoff=0.6)
        hint = (
            f"did you mean {' or '.join(close)}?"
            if close
            else "see `python src/run.py --cfg job` for the keys"
        )
        return f"unknown key '{key}' in `{override}`: {hint} (nothing was run or recorded)"
    return None


def group_options(group: str) -> list[str]:
    """The options a user may choose in a config group: its yaml files under conf/ (not the schemas
    registered for validation, such as torch_schema, which are no option)."""
    folder = CONF_DIR / group
    return sorted(str(p.relative_to(folder).with_suffix("")) for p in folder.rglob("*.yaml"))


def _check_options(group: str, value: str, override: str) -> str | None:
    """One line for a group option that does not exist (`framework=pytorch`), naming the closest ones."""
    if not value or any(c in value for c in "()[]${}"):  # sweep functions, interpolations: Hydra's to parse
        return None
    options = group_options(group)
    for choice in (v.strip().strip("'\"") for v in value.split(",")):
        if choice in options or choice in ("null", "none"):
            continue
        close = difflib.get_close_matches(choice, options, n=2, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        return (
            f"{group}={choice} is not an option in `{override}`: {hint}(options: {', '.join(options)}; "
            "nothing was run or recorded)"
        )
    return None


def _parse_problem(override: str) -> str | None:
    """One line with the quoting fix when Hydra's grammar cannot read the override (an unquoted `é`, `?` or
    `=` in a value: Hydra says LexerNoViableAltException or "mismatched input" and nothing else)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        OverridesParser.create().parse_overrides([override])
    except OverrideParseException as exc:
        lines = str(exc).splitlines()
        prefix = "LexerNoViableAltException: "
        if lines[0].startswith(prefix) and len(lines) > 1 and "^" in lines[1]:
            at = lines[1].index("^") - len(prefix)
            char = f"the character {override[at]!r}" if 0 <= at < len(override) else "a character"
            what = f"{char} is not allowed unquoted"
        else:
            what = f"Hydra says: {lines[0].rstrip('.')}"
        key, _, value = override.partition("=")
        quote = '"' if "'" in value else "'"
        fixed = f"{key}={quote}{value}{quote}"
        shell = '"' if quote == "'" else "'"
        return (
            f"cannot read `{override}` ({what}): quote the value for Hydra, inside the shell's quotes: "
            f"{shell}{fixed}{shell} (nothing was run or recorded)"
        )
    return None


def _overrides(argv: list[str]) -> Iterable[str]:
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in FLAGS_WITH_VALUE
            continue
        if "=" in word:
            yield word


def valid_keys() -> tuple[set[str], set[str]]:
    """(every dotted key of the registered schemas, every config group name)."""
    from hydra.core.config_store import ConfigStore

    repo = ConfigStore.instance().repo
    groups = {p.name for p in CONF_DIR.iterdir() if p.is_dir() and "." not in p.name}  # not local.example
    keys: set[str] = set()
    for name, entry in repo.items():
        if name == ROOT_SCHEMA:
            keys |= _dotted(entry.node)
        elif isinstance(entry, dict) and name != "hydra":
            groups.add(name)
            for node in entry.values():
                keys |= {f"{name}.{k}" for k in _dotted(node.node)}
    return keys, groups


def _dotted(node: DictConfig) -> set[str]:
    return set(flatten_keys(OmegaConf.to_container(node, resolve=False)))


def flatten_keys(tree: dict, prefix: str = "") -> Iterable[str]:
    """{"a": {"b": 1}} -> "a", "a.b": every key, as a dotted path."""
    for key, value in tree.items():
        name = f"{prefix}{key}"
        yield name
        if isinstance(value, dict):
            yield from flatten_keys(value, f"{name}.")
