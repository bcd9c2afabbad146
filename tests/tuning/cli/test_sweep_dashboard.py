"""The line `sweep` and `resume` print about Ray's dashboard (tuning/cli/sweep.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tuning.cli.sweep import _say_dashboard


def session_with(url):
    return SimpleNamespace(dashboard_url=lambda: url)


@pytest.mark.parametrize(("url", "started", "asked", "said"), [
    ("http://127.0.0.1:8265", True, True, "Ray dashboard: http://127.0.0.1:8265\n"),  # sweep --dashboard
    ("http://10.0.0.5:8265", False, False, "Ray dashboard: http://10.0.0.5:8265\n"),  # a cluster's, as Ray says
    (None, True, False, "Ray dashboard: off (a local Ray starts without it, to spare its CPU); --dashboard starts "
                        "it\n"),
    (None, False, False, ""),  # a cluster that reports none
], ids=["local-asked", "cluster", "local-off", "cluster-without"])
def test_say_dashboard_names_the_dashboard_or_how_to_have_it(url, started, asked, said, capsys):
    _say_dashboard(session_with(url), started, asked)
    assert capsys.readouterr().out == said
