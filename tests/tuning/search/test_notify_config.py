"""The space's notify section (tuning/search/notify_config.py): a webhook URL, http(s), no user:password@."""

from __future__ import annotations

import pytest

from tests.tuning.sweeps import space_values
from tuning.search.notify_config import NotifyConfig, parse_notify, webhook_host
from tuning.search.space import parse_space
from tuning.yaml_io import ConfigError

SLACK = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"


def test_parse_space_reads_the_notify_section_and_none_without_one():
    assert parse_space(space_values(notify={"webhook": SLACK}), "s.yaml").notify == NotifyConfig(SLACK)
    assert parse_space(space_values(), "s.yaml").notify is None


def test_notify_config_host_is_all_that_is_shown():
    assert NotifyConfig(SLACK).host == "hooks.slack.com"
    assert webhook_host("http://127.0.0.1:8799/hook/secret") == "127.0.0.1:8799"


def test_parse_notify_refuses_a_section_that_is_not_a_mapping():
    with pytest.raises(ConfigError, match=r"s.yaml: notify must be a mapping, .*got str"):
        parse_space(space_values(notify=SLACK), "s.yaml")


def test_parse_notify_refuses_an_unknown_key_naming_the_allowed_one():
    with pytest.raises(ConfigError, match=r"s.yaml: unknown key 'url' in notify; allowed: webhook"):
        parse_notify({"url": SLACK}, "s.yaml")


def test_parse_notify_refuses_a_section_without_its_webhook():
    with pytest.raises(ConfigError, match=r"s.yaml: notify.webhook is required"):
        parse_notify({}, "s.yaml")


@pytest.mark.parametrize("url", ["ftp://files.example/hook", "hooks.slack.com/services/T/B/X", "file:///etc/passwd"])
def test_parse_notify_refuses_a_scheme_but_http_and_https(url):
    with pytest.raises(ConfigError, match=r"s.yaml: notify.webhook must be http or https, got '(ftp|file|no scheme)'"):
        parse_notify({"webhook": url}, "s.yaml")


def test_parse_notify_refuses_credentials_before_the_host_and_never_repeats_them():
    with pytest.raises(ConfigError, match=r"notify.webhook holds a user:password@ before its host") as refused:
        parse_notify({"webhook": "https://bot:hunter2@hooks.example/x"}, "s.yaml")
    assert "hunter2" not in str(refused.value)


def test_parse_notify_refuses_a_webhook_that_is_no_string_or_has_no_host():
    with pytest.raises(ConfigError, match=r"notify.webhook must be an http\(s\) URL, .*got int"):
        parse_notify({"webhook": 5}, "s.yaml")
    with pytest.raises(ConfigError, match=r"notify.webhook has no host"):
        parse_notify({"webhook": "https:///path/only"}, "s.yaml")
    with pytest.raises(ConfigError, match=r"notify.webhook is not a URL"):
        parse_notify({"webhook": "https://hooks.example:port/x"}, "s.yaml")


def test_parse_notify_refuses_a_password_with_a_slash_that_urllib_reads_as_a_port():
    with pytest.raises(ConfigError, match=r"notify.webhook holds a user:password@ before its host") as refused:
        parse_notify({"webhook": "https://bot:hun/ter2@hooks.example/x"}, "s.yaml")
    assert "ter2" not in str(refused.value)


def test_parse_notify_names_no_scheme_that_could_be_a_secret():
    with pytest.raises(ConfigError, match=r"notify.webhook must be http or https, got 'another scheme'") as refused:
        parse_notify({"webhook": "xox" + "b-1234567890-SECRET:hooks.example/x"}, "s.yaml")  # split: no key-like text
    assert "secret" not in str(refused.value).lower()


@pytest.mark.parametrize("url", ["https://hooks.example.com?to=a@b.com", "http://host:5000/x@y",
                                 "https://hooks.example.com/h:5432/db?sslrootcert=/c/ca@1.pem"])
def test_parse_notify_takes_an_at_sign_past_the_host_as_urllib_does(url):
    assert parse_notify({"webhook": url}, "s.yaml") == NotifyConfig(url)


def test_parse_notify_refuses_a_password_cut_short_by_a_query_and_never_repeats_it():
    with pytest.raises(ConfigError, match=r"notify.webhook holds a user:password@ before its host") as refused:
        parse_notify({"webhook": "https://bot:hun?ter2@hooks.example/x"}, "s.yaml")
    assert "ter2" not in str(refused.value)
