"""Credentials never reach the store, an artifact or a report.

`mask` rewrites any text that may hold a URI: `scheme://user:password@host` keeps the user and hides
the password; query parameters whose name says secret (password, token, key, signature, ...) keep the
name and hide the value. `is_secret_name` says which environment variables must never be recorded.
"""

from __future__ import annotations

import re

HIDDEN = "***"
# Hydra writes a multirun's overrides with `:` escaped (`http\://u\:pw@h`): both forms are matched.
_USERINFO = re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.\-]*\\?://[^/\s:@'\"\\]*)\\?:(?P<secret>[^@/\s'\"]*)@")
_SECRET_WORDS = r"pass(?:word|wd)?|pwd|token|secret|key|signature|sig|credential|auth"
_QUERY = re.compile(
    rf"(?P<pre>[?&;](?:[\w.\-]*?)(?:{_SECRET_WORDS})(?:[\w.\-]*)=)(?P<secret>[^&#\s'\"]+)", re.IGNORECASE
)
_SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|_KEY$|^KEY$|AUTH", re.IGNORECASE)


def mask(text: str) -> str:
    """`text` with every URI password and secret-looking query value replaced by ***."""
    text = _USERINFO.sub(lambda m: f"{m['pre']}:{HIDDEN}@", text)
    return _QUERY.sub(lambda m: f"{m['pre']}{HIDDEN}", text)


def is_secret_name(name: str) -> bool:
    """An environment variable whose value must never be recorded (*TOKEN*, *SECRET*, *PASSWORD*, *_KEY)."""
    return bool(_SECRET_ENV.search(name))
