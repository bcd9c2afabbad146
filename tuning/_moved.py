"""Where each module of the flat `tuning/` of earlier versions lives now, for sweeps they saved.

Ray Tune pickles a sweep's callbacks, scheduler and searcher, and a pickle names the module of
each class: a sweep started by an earlier version names `tuning.scheduler`, `tuning.gate`, ...
`mamba-tune resume` of such a sweep finds them here, as the modules they became. Nothing in the
code imports the old names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

MOVED = {
    "tuning.cli_data": "tuning.cli.data", "tuning.cli_doctor": "tuning.cli.doctor",
    "tuning.cli_sweep": "tuning.cli.sweep", "tuning.cli_train": "tuning.cli.train", "tuning.cli_ui": "tuning.cli.ui",
    "tuning.manifest": "tuning.sweep.manifest", "tuning.trainable": "tuning.sweep.trainable",
    "tuning.trial_files": "tuning.sweep.trial_files", "tuning.memory_probe": "tuning.sweep.memory_probe",
    "tuning.space": "tuning.search.space", "tuning.recipe": "tuning.search.recipe", "tuning.gate": "tuning.search.gate",
    "tuning.scheduler": "tuning.search.scheduler", "tuning.searcher": "tuning.search.searcher",
    "tuning.best_config": "tuning.search.best_config", "tuning.ledger": "tuning.search.ledger",
    "tuning.resources": "tuning.search.resources",
    "tuning.tracking_log": "tuning.tracking.log", "tuning.tracking_store": "tuning.tracking.store",
    "tuning.registry": "tuning.tracking.registry", "tuning.pyfunc_model": "tuning.tracking.pyfunc_model",
    "tuning.plots": "tuning.tracking.plots",
    "tuning.doctor": "tuning.cluster.doctor", "tuning.node_probe": "tuning.cluster.node_probe",
    "tuning.autoscaler": "tuning.cluster.autoscaler", "tuning.shared_storage": "tuning.cluster.shared_storage",
}
# Modules that became packages of the same name: the classes pickles name in them.
MOVED_CLASSES = {
    "tuning.sweep": {"SweepCallback": "tuning.sweep.trial_lifecycle"},
    "tuning.tracking": {"TrackingCallback": "tuning.tracking.runs"},
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old name as the module it became (the same module object, under both names)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module it became has run already."""


def install() -> None:
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules())  # before any finder that could find a stale file of the old name


def moved_class(package: str, name: str) -> type:
    """A class a pickle names in `package` (a module of earlier versions); AttributeError for any other name."""
    module = MOVED_CLASSES[package].get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
