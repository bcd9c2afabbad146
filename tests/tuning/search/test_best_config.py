"""write_best_config: the winner's best.yaml, its notes as comments."""

from __future__ import annotations

from tests.tuning.search.test_finalists import record
from tests.tuning.sweeps import SPACE
from tuning.search.best_config import write_best_config
from tuning.search.space import parse_space


def test_best_config_of_an_unconfirmed_finalist_with_no_fresh_run_says_none_scored_not_nan(tmp_path):
    space = parse_space({**SPACE, "confirm": {"top_k": 1, "seeds": [7]}}, "space")
    best = record("b", 0.40)
    out = tmp_path / "best.yaml"
    write_best_config(space, best, "t", "bars.parquet", out, records=[best])
    text = out.read_text()
    assert "UNCONFIRMED" in text and "0 of its 1 confirmation runs scored (none scored yet)" in text
    assert "val_loss nan" not in text
