"""Refuse a mistyped key before anything runs or is recorded, and name the closest valid keys.

Hydra refuses `precison=amp` without saying what was meant, and accepts `+precison=amp` (the fix its
own message suggests) as a new key that nothing reads: the job then runs fp32 and exits 0. Every key
of a `key=value` override, with or without `+`, `++` or `~`, must be a config group or a key of the
schema registered with Hydra (dlbench.config.register_configs: the job schema and every group's
schemas, so per-framework or per-family keys count too), and a key of one option's schema needs that option:
`framework.prng` (JAX's) beside `framework=torch` is refused here, in one line, rather than by Hydra in seven,
and in a sweep only when the first job it cannot compose is reached, after the jobs before it ran.
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
        if key.split(".", 1)[0].split("/", 1)[0] == "hydra" or key in groups:  # hydra/launcher=…
            continue
        if key in keys:
            if (
                own_options
                and not override.startswith("~")
                and (refused := _wrong_option(key, override, argv))
            ):
                return refused
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
    choices = _plain_choices(value)
    if choices is None:
        return None
    options = group_options(group)
    for choice in choices:
        if choice in options or choice in ("null", "none"):
            continue
        close = difflib.get_close_matches(choice, options, n=2, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        return (
            f"{group}={choice} is not an option in `{override}`: {hint}(options: {', '.join(options)}; "
            "nothing was run or recorded)"
        )
    return None


def _wrong_option(key: str, override: str, argv: list[str]) -> str | None:
    """One line for a key of one option's schema given with another option of its group (`framework.prng`,
    JAX's, with `framework=torch`), naming the options that have it."""
    group, _, rest = key.partition(".")
    options = group_options(group) if rest else []
    if not options:  # not a key under an option group
        return None
    chosen = _chosen_options(group, argv)
    known = {o: _option_keys(group, o) for o in options}
    # an option from elsewhere, or one without a schema: Hydra's to judge
    if not chosen or any(known.get(o) is None for o in chosen):
        return None
    lacking = [o for o in chosen if rest not in known[o]]
    owners = [o for o, keys in known.items() if keys and rest in keys]
    if not lacking or not owners:
        return None
    return (
        f"`{override}`: {key} is a key of {group}={','.join(owners)} only, and this command composes "
        f"{group}={','.join(lacking)}: drop it, or give it in a command of its own with {group}={owners[0]} "
        "(nothing was run or recorded)"
    )


def _chosen_options(group: str, argv: list[str]) -> list[str] | None:
    """The options of `group` this command composes: from the command line, else the experiment's sweep or
    defaults, else conf/config.yaml's default; None where that is not plain to read here (a sweep function),
    which leaves the check to Hydra."""
    words = list(_overrides(argv))
    given = [w.split("=", 1)[1] for w in words if w.split("=", 1)[0].lstrip("+") == group]
    if given:
        return _plain_choices(given[-1])
    experiments = [w.split("=", 1)[1] for w in words if w.split("=", 1)[0].lstrip("+") == "experiment"]
    if experiments:
        path = CONF_DIR / "experiment" / f"{experiments[-1]}.yaml"
        if not path.is_file():
            return None
        exp = OmegaConf.load(path)
        swept = OmegaConf.select(exp, f"hydra.sweeper.params.{group}")
        if swept is not None:
            return _plain_choices(str(swept))
        if (chosen := _default_choice(exp, f"override /{group}")) is not None:
            return [chosen]
    chosen = _default_choice(OmegaConf.load(CONF_DIR / "config.yaml"), group)
    return [chosen] if chosen is not None else None


def _plain_choices(value: str) -> list[str] | None:
    """The options a group override lists (`tf,torch`); None for what only Hydra can read (a sweep function,
    an interpolation)."""
    if not value or any(c in value for c in "()[]${}"):
        return None
    return [v.strip().strip("'\"") for v in value.split(",")]


def _default_choice(conf: DictConfig, entry: str) -> str | None:
    for item in conf.get("defaults", []):
        if isinstance(item, DictConfig) and entry in item:
            return str(item[entry])
    return None


def _option_keys(group: str, option: str) -> set[str] | None:
    """The dotted keys under `group` when `option` is chosen: those of the schema its yaml names in its
    defaults list (every option of a family shares its schema); None where no schema says."""
    from hydra.core.config_store import ConfigStore

    path = CONF_DIR / group / f"{option}.yaml"
    if not path.is_file():
        return None
    schemas = [str(d) for d in OmegaConf.load(path).get("defaults", []) if str(d).endswith("_schema")]
    entry = ConfigStore.instance().repo.get(group, {}).get(f"{schemas[0]}.yaml") if schemas else None
    return _dotted(entry.node) if entry is not None else None


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
