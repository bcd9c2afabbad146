"""The space's `notify:` section: the webhook a sweep tells how it ended (tuning/sweep/notification.py sends it).

  notify:
    webhook: https://hooks.slack.com/services/T000/B000/XXXX   # a Slack incoming webhook, or any URL taking JSON

A webhook URL is a secret (whoever has a Slack one can post to the channel): it is never printed whole, only its
host, never sent to MLflow, and never kept in the sweep's files (sweep.json says only that one was set; `sweep`
and `resume` take it from --notify, WEBHOOK_ENV or, at `sweep`, this section). A credential may stand in its path,
as Slack's token does; a user:password@ in front of the host may not (found as tuning/uri_secrets.py finds it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tuning.uri_secrets import userinfo_in
from tuning.yaml_io import ConfigError

SCHEMES = ("http", "https")
WEBHOOK_ENV = "MAMBA_TUNE_WEBHOOK"  # the webhook, where --notify is not given: kept out of shell history and files


@dataclass(frozen=True)
class NotifyConfig:
    webhook: str  # the URL the sweep POSTs one JSON message to when it ends, fails or is interrupted

    def __post_init__(self) -> None:
        if problem := webhook_problem(self.webhook):
            raise ValueError(problem)

    @property
    def host(self) -> str:
        """What may be shown of the webhook: its host (the rest of a Slack URL is its secret)."""
        return webhook_host(self.webhook)


def webhook_problem(url: Any) -> str | None:
    """Why `url` cannot be a webhook, in words that never repeat it (it may hold a secret); None where it can."""
    if not isinstance(url, str) or not url.strip():
        return f"webhook must be an http(s) URL, e.g. https://hooks.slack.com/services/..., got {type(url).__name__}"
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "webhook is not a URL (check its brackets, host and port); give http(s)://HOST/PATH"
    if parts.scheme.lower() not in SCHEMES:
        scheme = parts.scheme if re.fullmatch(r"[A-Za-z][\w+.-]{0,9}", parts.scheme) else "another scheme"
        return f"webhook must be http or https, got {scheme if parts.scheme else 'no scheme'!r}; give http(s)://HOST/PATH"
    if userinfo_in(url.strip()) is not None:  # as urllib reads it, and bob:pa/ss@host (a port that is no number)
        return ("webhook holds a user:password@ before its host, which would be kept and shown with it; "
                "use a URL whose secret is in its path, as Slack's are")
    try:
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return "webhook is not a URL (check its brackets, host and port); give http(s)://HOST/PATH"
    if not parts.hostname:
        return "webhook has no host; give http(s)://HOST/PATH"
    return None


def webhook_host(url: str) -> str:
    """The host of a webhook URL (with its port), all of it that is shown."""
    parts = urlsplit(url.strip())
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname or "?"


def parse_notify(values: Any, source: str) -> NotifyConfig | None:
    """The space's `notify:` section (None where it has none); raises ConfigError naming the key."""
    if values is None:
        return None
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: notify must be a mapping, e.g. notify: {{webhook: https://HOST/PATH}}, got "
                          f"{type(values).__name__}")
    unknown = sorted(set(values) - {"webhook"})
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r} in notify; allowed: webhook")
    if "webhook" not in values:
        raise ConfigError(f"{source}: notify.webhook is required: the URL the sweep POSTs its end to")
    if problem := webhook_problem(values["webhook"]):
        raise ConfigError(f"{source}: notify.{problem}")
    return NotifyConfig(values["webhook"].strip())
