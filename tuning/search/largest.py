"""The largest configuration a space can sample: the one the memory probe measures and GPU packing plans for.

Among the valid combinations of the searched sizes (each int setting of data, model and train but the batch
size, which the probe tries one by one: data.window, model.d_model, model.n_layers, ...; each at every value of
a short range and a choice list, else at its two ends), the one whose sizes multiply to the most: memory grows
with each of them. With no size searched it is the run's own configuration.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from tuning.search.recipe import TrainingRecipe
from tuning.search.search_section import Spec, representative_values, with_searched
from tuning.search.searchable import resolve
from tuning.yaml_io import ConfigError

NOT_A_SIZE = ("train.batch_size", "train.eval_batch_size")  # the probe's own axis; evaluation is not training


def largest_params(search: dict[str, Spec], run: TrainingRecipe) -> dict[str, Any]:
    """{search key: value} of the valid combination of searched sizes with the largest product ({} if none)."""
    sizes = {key: spec for key, spec in search.items()
             if resolve(key).kind is int and resolve(key).name not in NOT_A_SIZE}
    best: tuple[float, dict[str, Any]] = (-math.inf, {})
    for combination in itertools.product(*(representative_values(spec) for spec in sizes.values())):
        params = dict(zip(sizes, combination, strict=True))
        try:
            with_searched(run, params)
        except ConfigError:
            continue
        size = math.prod(abs(value) or 1 for value in combination)
        best = max(best, (size, params), key=lambda pair: pair[0])
    return best[1]


def largest_run(search: dict[str, Spec], run: TrainingRecipe) -> TrainingRecipe:
    """The run with the largest sizes the search can give it (tuning/search/largest.py's rule)."""
    return with_searched(run, largest_params(search, run))
