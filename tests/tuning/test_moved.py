"""A sweep an earlier version saved names the modules of a flat tuning/: they load as the modules they became."""

import importlib
import pickle

import pytest

from tuning.search.gate import GateConfig
from tuning.search.scheduler import GatedASHA
from tuning.sweep.trainable import run_trial
from tuning.sweep.trial_lifecycle import SweepCallback
from tuning.tracking.runs import TrackingCallback


def by_name(module: str, name: str) -> object:
    """What a pickle naming module.name loads (protocol 0: the global by its dotted name)."""
    return pickle.loads(f"c{module}\n{name}\n.".encode())


@pytest.mark.parametrize(("module", "name", "expected"), [
    ("tuning.sweep", "SweepCallback", SweepCallback),  # tuning/sweep.py became the package tuning/sweep/
    ("tuning.tracking", "TrackingCallback", TrackingCallback),
    ("tuning.scheduler", "GatedASHA", GatedASHA),
    ("tuning.gate", "GateConfig", GateConfig),
    ("tuning.trainable", "run_trial", run_trial),
])
def test_a_name_an_earlier_version_pickled_loads_as_what_it_became(module, name, expected):
    assert by_name(module, name) is expected


def test_an_old_module_name_is_the_same_module_object_not_a_second_copy():
    old = importlib.import_module("tuning.scheduler")  # as unpickling imports it
    new = importlib.import_module("tuning.search.scheduler")
    assert old is new and new.__name__ == "tuning.search.scheduler"


def test_a_package_that_was_a_module_still_refuses_names_it_never_had():
    import tuning.sweep

    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        tuning.sweep.Nothing  # noqa: B018
