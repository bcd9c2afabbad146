"""A trial's searched settings beyond the first three (learning rate, weight decay, batch size), as one text.

The progress lines, the leaderboard and MLflow's run names show those three in their own columns; the
others a space searches (model.d_model, data.window, ...) follow as `name=value`.
"""

from __future__ import annotations

from typing import Any

from tuning.search.searchable import is_search_key, setting_name, value_of_setting

COLUMNS = (("learning_rate", "lr", ".2e"), ("weight_decay", "wd", ".2e"), ("batch_size", "batch", ""))
IN_COLUMNS = {setting_name(key) for key, _, _ in COLUMNS}  # train.lr, ...: shown in columns by either name


def params_text(params: dict[str, Any]) -> str:
    """'lr 1.00e-03, wd 1.00e-02, batch 64, model.d_model=64': each searched setting of a trial, the first three
    by their short labels."""
    shown = [f"{label} {value:{spec}}" for key, label, spec in COLUMNS
             if (value := value_of_setting(params, key)) is not None]
    other = other_params_text(params)
    return ", ".join(shown + ([other] if other else []))


def column(params: dict[str, Any], key: str, spec: str, width: int) -> str:
    """One of the first three settings (by either of its names) in a leaderboard column: '-' when the space does not
    search it."""
    value = value_of_setting(params, key)
    return f"{value:>{width}{spec}}" if value is not None else f"{'-':>{width}}"


def other_params_text(params: dict[str, Any]) -> str:
    """'model.d_model=64 train.precision=bf16' for a trial's searched settings not shown in columns ('' if none)."""
    return " ".join(f"{key}={_value(value)}" for key, value in params.items()
                    if is_search_key(key) and setting_name(key) not in IN_COLUMNS)


def _value(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
