"""A sweep's storage on a cluster: every node must see it, or trials on other nodes lose their checkpoints."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

import ray

from tuning.cluster.autoscaler import autoscaler_node_types
from tuning.cluster.node_probe import ProbeFailed, alive_nodes, label, on_nodes, sees_file
from tuning.errors import UsageError
from tuning.sweep_files import is_uri


def not_shared_reason(storage: str, nodes: list[dict[str, Any]] | None = None) -> str | None:
    """Why the folder `storage` is not shared by the cluster's nodes, or None (a URI is shared by nature).

    Checked for real: the driver writes a marker file there and every other alive node looks for it,
    so an NFS mount passes and a node's own disk does not. A cluster that launches nodes as trials
    need them (`ray up`) is refused a folder: the nodes to come cannot be asked. Raises ProbeFailed.
    """
    if is_uri(storage):
        return None
    if types := autoscaler_node_types():
        return (f"a folder, and this cluster launches its worker nodes as trials need them ({types.source}), "
                "so none of them can be checked now; use a URI every node reaches (s3://BUCKET/sweeps)")
    nodes = alive_nodes() if nodes is None else nodes
    here = ray.get_runtime_context().get_node_id()
    others = [node for node in nodes if node["NodeID"] != here]
    if not others:
        return None
    root = Path(storage).expanduser().resolve()
    made = [folder for folder in (root, *root.parents) if not folder.exists()]  # removed again after the check
    root.mkdir(parents=True, exist_ok=True)
    marker = root / f".mamba-tune-probe-{uuid.uuid4().hex}"
    try:
        marker.write_text("written by the sweep's driver; every node must see it\n")
        seen = on_nodes(sees_file, others, str(marker))
    finally:
        marker.unlink(missing_ok=True)
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: someone else writes there too
                folder.rmdir()
    blind = [label(node) for node, sees in zip(others, seen, strict=True) if not sees]
    if not blind:
        return None
    return (f"a folder not every node sees: {len(blind)} of the cluster's {len(nodes)} nodes cannot see it "
            f"({', '.join(blind)}), and every node saves trial checkpoints there; use a URI every node reaches "
            "(s3://BUCKET/sweeps) or a folder every node mounts (NFS)")


def check_shared(storage: str) -> None:
    """Refuse (UsageError) a `storage` folder that not every node of the cluster sees."""
    try:
        reason = not_shared_reason(storage)
    except ProbeFailed as exc:
        raise UsageError(f"--storage {storage}: could not check that every node sees it ({exc}); wait for the "
                         "cluster to settle, or check it with `mamba-tune doctor`") from None
    if reason:
        raise UsageError(f"--storage {storage}: {reason}")
