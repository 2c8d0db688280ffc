"""Credentials never reach the store, an artifact, a report, a printed line or a file Hydra writes.

`mask` rewrites any text that may hold a URI: `scheme://user:password@host` keeps the user and hides
the password; query parameters whose name says secret (password, token, key, signature, ...) keep the
name and hide the value. `is_secret_name` says which environment variables must never be recorded.
`hide_in_overrides` keeps secrets out of Hydra altogether: each one in a command-line value moves into an
environment variable of this process and the value keeps a `${oc.env:...}` placeholder, so Hydra's
launch lines, multirun.yaml and every `.hydra/*.yaml` hold the placeholder while the composed job (which
resolves it) still reaches its store; `mask` shows the placeholder as ***.
"""

from __future__ import annotations

import os
import re

HIDDEN = "***"
# Hydra writes a multirun's overrides with `:` escaped (`http\://u\:pw@h`): both forms are matched.
_USERINFO = re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.\-]*\\?://[^/\s:@'\"\\]*)\\?:(?P<secret>[^@/\s'\"]*)@")
_SECRET_WORDS = r"pass(?:word|wd)?|pwd|token|secret|key|signature|sig|credential|auth"
# The one name that says key and holds none: the MLflow UI's viewStateShareKey, the name of an experiment tag
# (a sweep's is its parent's run id), which a sweep's link to the UI must show as it is.
_NOT_SECRET = r"(?!(?-i:viewStateShareKey)=)"  # that exact spelling only
_QUERY = re.compile(
    rf"(?P<pre>[?&;]{_NOT_SECRET}(?:[\w.\-]*?)(?:{_SECRET_WORDS})(?:[\w.\-]*)=)(?P<secret>[^&#\s'\"]+)",
    re.IGNORECASE,
)
_SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|_KEY$|^KEY$|AUTH", re.IGNORECASE)
HIDDEN_ENV = "DLBENCH_SECRET_"  # + a number: where hide_in_overrides puts each secret (a secret name)
_PLACEHOLDER = re.compile(rf"\$\{{oc\.env:{HIDDEN_ENV}\d+\}}")


def mask(text: str) -> str:
    """`text` with every URI password and secret-looking query value replaced by ***."""
    text = _PLACEHOLDER.sub(HIDDEN, text)
    text = _USERINFO.sub(lambda m: f"{m['pre']}:{HIDDEN}@", text)
    return _QUERY.sub(lambda m: f"{m['pre']}{HIDDEN}", text)


def hide_in_overrides(argv: list[str]) -> list[str]:
    """The command line with each secret in a `key=value` override replaced by `${oc.env:DLBENCH_SECRET_n}`,
    its value put in this process's environment (inherited by launchers' job processes, never recorded:
    the name says secret)."""
    hidden = 0

    def keep(m: re.Match[str], before: str, after: str) -> str:
        nonlocal hidden
        if not m["secret"] or _PLACEHOLDER.fullmatch(m["secret"]):
            return m[0]
        hidden += 1
        name = f"{HIDDEN_ENV}{hidden}"
        os.environ[name] = m["secret"]
        return f"{m['pre']}{before}${{oc.env:{name}}}{after}"

    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if arg.startswith("-") or not sep:
            out.append(arg)
            continue
        value = _USERINFO.sub(lambda m: keep(m, ":", "@"), value)
        out.append(key + sep + _QUERY.sub(lambda m: keep(m, "", ""), value))
    return out


def is_secret_name(name: str) -> bool:
    """An environment variable whose value must never be recorded (*TOKEN*, *SECRET*, *PASSWORD*, *_KEY)."""
    return bool(_SECRET_ENV.search(name))
