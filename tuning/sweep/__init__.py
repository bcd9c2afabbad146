"""A sweep session: manifest, the trial trainable, checkpoints and best.pt snapshots, memory probe."""

from tuning._moved import moved_class


def __getattr__(name: str) -> type:  # a class a sweep pickled by an earlier version names in this package
    return moved_class(__name__, name)
