"""MLflow: the store, typed writes with their spool and sender, the sweep's runs, the registry, plots."""

from tuning._moved import moved_class


def __getattr__(name: str) -> type:  # a class a sweep pickled by an earlier version names in this package
    return moved_class(__name__, name)
