"""One validation set for every trial: the rule that aligns the samples of a sweep that searches settings moving them.

A searched setting "moves samples" when two of its values cut different samples from the same bars: data.window
does, since each segment's first sample is the first whose input window fits in it (model/data.py), so a longer
window starts validation, training and the test later. Left alone, trials of such a sweep would be validated on
different samples, with their scaling and HAR fitted on different training samples: ASHA, TPE, the finalists and the
winner would rank losses of different sets. So every Dataset of the sweep (the shared one, each trial's, each
confirmation run's fold, the look's) is built with data.align_window set to the longest window a trial of the space
(or the space's own run.data.window, its shared Dataset's) reads: the same training, validation and test samples,
the same scaling and HAR, one baseline_har per fold for the whole sweep. A sweep that searches no setting moving
samples is left as it is (align_window None). A sweep of data.window that an earlier mamba-tune started, its
samples cut without alignment, cannot continue: `resume` refuses it (tuning/sweep/sweep_data.py).

The other searchable data setting, data.residual_to, changes a trial's inputs, not its samples; data.horizon,
data.target and the fractions, which would, cannot be searched (tuning/search/searchable.py).
"""

from __future__ import annotations

from tuning.search.recipe import TrainingRecipe
from tuning.search.search_section import Choice, IntRange, Spec
from tuning.search.searchable import resolve

# The searchable settings that move samples -> the DataConfig setting that aligns them over a sweep.
MOVES_SAMPLES = {"data.window": "align_window"}


def moves_samples(name: str) -> bool:
    """Whether the searchable setting `name` (dotted, e.g. data.window) moves samples."""
    return name in MOVES_SAMPLES


def aligned_window(search: dict[str, Spec], run: TrainingRecipe) -> int | None:
    """The window every Dataset of a sweep cuts its samples for: the longest of the searched data.window's values and
    run.data.window; None when data.window is not searched (each Dataset its own window, as without alignment)."""
    specs = [spec for key, spec in search.items() if MOVES_SAMPLES.get(resolve(key).name) == "align_window"]
    if not specs:
        return None
    return max(run.data.window, *(_largest(spec) for spec in specs))


def aligned_run(search: dict[str, Spec], run: TrainingRecipe) -> TrainingRecipe:
    """`run` with data.align_window set by aligned_window (unchanged when nothing searched moves samples)."""
    window = aligned_window(search, run)
    return run if window is None else run.replace("data", align_window=window)


def _largest(spec: Spec) -> int:
    """The largest value the search entry of an int setting can give a trial (choices or an int range)."""
    if isinstance(spec, Choice):
        return max(spec.choices)
    if isinstance(spec, IntRange):
        return spec.values()[-1]  # high itself, or the last step below it
    raise TypeError(f"an int setting is searched by choices or an int range, got {spec!r}")
