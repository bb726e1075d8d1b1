"""Keep credentials out of everything fsdask prints or writes.

Secrets reach fsdask in two ways: ``storage_options`` values (``key``, ``secret``, ``token``,
…) and a ``user:password@`` part of a URL.  :func:`register` remembers them for this process
(the CLI calls it when it parses ``--storage-option``, the pipeline for its config);
:func:`redact` replaces every remembered value and every URL credential in a text.  The CLI
passes its error lines through :func:`redact` and installs :class:`RedactingFilter` on the
log handlers, so a secret that slips into an exception message is still not shown.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Mapping

MASK = "***"

#: option names whose values are never shown (matched as substrings, case-insensitive)
SECRET_WORDS = (
    "key",
    "secret",
    "token",
    "password",
    "passwd",
    "credential",
    "auth",
    "session",
    "signature",
    "sas",
    "account",
)
#: option names that are addresses, not secrets (shown so that errors stay useful)
PUBLIC_KEYS = ("endpoint_url", "region_name", "anon", "use_ssl", "requester_pays")

_known: set[str] = set()
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<cred>[^/@\s]+)@")


def _secret_values(options: Any, key: str = "") -> list[str]:
    if isinstance(options, Mapping):
        return [v for k, sub in options.items() for v in _secret_values(sub, str(k))]
    if isinstance(options, (list, tuple)):
        return [v for sub in options for v in _secret_values(sub, key)]
    if options is None or isinstance(options, bool):
        return []
    text = str(options)
    k = key.lower()
    if k in PUBLIC_KEYS or len(text) < 4:
        return []
    if any(w in k for w in SECRET_WORDS) or not k:
        return [text]
    return []


def register(storage_options: Mapping[str, Any] | None = None, *urls: str) -> None:
    """Remember the secret values of ``storage_options`` and the credentials in ``urls``."""
    _known.update(_secret_values(storage_options or {}))
    for url in urls:
        for m in _URL_CREDENTIALS.finditer(str(url)):
            for part in m.group("cred").split(":"):
                if len(part) >= 4:
                    _known.add(part)


def redact(text: Any, storage_options: Mapping[str, Any] | None = None) -> str:
    """``text`` with URL credentials and every known secret value replaced by ``***``."""
    out = _URL_CREDENTIALS.sub(lambda m: m.group("scheme"), str(text))
    for value in sorted(_known | set(_secret_values(storage_options or {})), key=len, reverse=True):
        out = out.replace(value, MASK)
    return out


def redact_options(storage_options: Mapping[str, Any] | None) -> dict:
    """A copy of ``storage_options`` safe to print: secret values replaced by ``***``."""

    def clean(value: Any, key: str) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v, str(k)) for k, v in value.items()}
        return MASK if _secret_values(value, key) else value

    return {k: clean(v, str(k)) for k, v in dict(storage_options or {}).items()}


class RedactingFilter(logging.Filter):
    """A log filter that redacts every record's message (and drops its arguments)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error path
            return True
        record.msg, record.args = redact(message), None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
