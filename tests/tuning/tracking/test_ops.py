"""MLflow operations as the spool keeps them: the lines earlier versions wrote still read, each kind round-trips."""

import json

import pytest

from tuning.tracking.ops import (
    EndLostRuns,
    EndRun,
    LogArtifact,
    LogInput,
    LogMetrics,
    SetTags,
    StartRun,
    operation_from_json,
    to_json,
)
from tuning.tracking.spool import Spool

# One line of each kind, as the version before typed operations wrote them (tuning/tracking/log.py then).
EARLIER_SPOOL = [
    {"op": "start_run", "key": "t1", "name": "trial 1", "parent": "sweep", "tags": {"trial_id": "t1"},
     "params": {"learning_rate": "0.001"}},
    {"op": "metrics", "key": "t1", "step": 3, "values": {"val_loss": 0.25}, "timestamp": 1764547200000},
    {"op": "tags", "key": "t1", "tags": {"stop_reason": "asha"}},
    {"op": "artifact", "key": "t1", "path": "/tmp/x/best.pt", "folder": "checkpoint", "remove": True},
    {"op": "end_run", "key": "t1", "status": "FINISHED"},
    {"op": "end_lost", "key": "sweep", "known": ["a", "b"]},
]


def test_operation_from_json_reads_each_kind_an_earlier_version_spooled():
    ops = [operation_from_json(values) for values in EARLIER_SPOOL]
    assert ops == [
        StartRun("t1", "trial 1", "sweep", {"trial_id": "t1"}, {"learning_rate": "0.001"}),
        LogMetrics("t1", 3, {"val_loss": 0.25}, 1764547200000),
        SetTags("t1", {"stop_reason": "asha"}),
        LogArtifact("t1", "/tmp/x/best.pt", "checkpoint", True),
        EndRun("t1", "FINISHED"),
        EndLostRuns(("a", "b")),
    ]
    assert [to_json(op) for op in ops] == EARLIER_SPOOL  # and writes them the same way


@pytest.mark.parametrize("line", ['{"op": "drop_table", "key": "t1"}', '{"op": "end_run", "key": "t1"}',
                                  '{"key": "t1"}', '{"op": "end_run", "key": "t1", "sta'])
def test_spool_read_leaves_out_a_line_that_is_not_an_operation(tmp_path, line):
    spool = Spool(tmp_path / "pending.jsonl")
    spool.path.write_text(json.dumps(EARLIER_SPOOL[4]) + "\n" + line + "\n")
    assert spool.read() == [EndRun("t1", "FINISHED")]


def test_spool_keeps_only_the_unsent_and_is_removed_when_none_are_left(tmp_path):
    spool = Spool(tmp_path / "sweep" / "pending.jsonl")
    assert spool.read() == []
    sent, unsent = EndRun("t1", "FINISHED"), SetTags("t2", {"a": "1"})
    spool.append(sent)
    spool.append(unsent)
    assert spool.read() == [sent, unsent]
    spool.keep_only([unsent])
    assert spool.read() == [unsent]
    spool.keep_only([])
    assert not spool.path.exists()


def test_a_dataset_input_round_trips_through_the_spool():
    op = LogInput("t1", "bars", "0123456789abcdef", "file:///data/bars.parquet", '{"n_bars": 1500}', "training")
    assert to_json(op) == {"op": "input", "key": "t1", "name": "bars", "digest": "0123456789abcdef",
                           "source": "file:///data/bars.parquet", "profile": '{"n_bars": 1500}', "context": "training"}
    assert operation_from_json(json.loads(json.dumps(to_json(op)))) == op
