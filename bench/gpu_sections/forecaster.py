"""Section 3, the Forecaster: both backends from one state_dict, and a checkpoint moved from GPU to CPU.

Everywhere (CPU parts, real on every machine): the Forecaster at the default settings on the torch path
on CPU (`auto` picks it there), and a checkpoint written by model/checkpoint.py's save_atomic and read by
its load_checkpoint on CPU, the outputs of the model before and after compared (they are equal).
With CUDA: the fused and torch Forecasters on the GPU from one state_dict, fp32 and bf16, outputs
compared at upstream's tolerances (bench/gpu_sections/compare.py); then a checkpoint saved from the GPU
model, loaded on CPU into a torch-backend Forecaster (what `mamba-tune` does on a machine without a GPU),
its outputs compared with the fused model's on the GPU.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bench.gpu_sections.compare import OUTPUT_TOLERANCE, compare
from bench.gpu_sections.context import NO_CUDA, SectionContext, cuda_available

BATCH, SEQLEN = 16, 128  # the default window


def run(context: SectionContext) -> dict[str, Any]:
    import torch

    from model.config import ModelConfig

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    config = ModelConfig()
    torch.manual_seed(0)
    features = torch.randn(BATCH, SEQLEN, config.n_features)  # (batch, seqlen, n_features)
    report = {"cpu": cpu_round_trip(config, features, context.workdir / "cpu.pt")}
    if not cuda_available():
        return report | {"backends_on_gpu": NO_CUDA, "gpu_checkpoint_on_cpu": NO_CUDA}
    return report | gpu_checks(config, features, context.workdir / "gpu.pt")


def forecaster(config, backend: str, device: str, state: dict | None = None):
    """The Forecaster of `config` on `backend` and `device` in eval mode, its weights `state` when given; it maps
    features (batch, seqlen, n_features) -> (batch, n_targets)."""
    from model.forecaster import Forecaster

    model = Forecaster(dataclasses.replace(config, backend=backend)).to(device)
    if state is not None:
        model.load_state_dict(state)
    return model.eval()


def save_and_load(model, config, path: Path) -> dict[str, Any]:
    """The model's state through the project's checkpoint files, read back on CPU (weights_only)."""
    from model.checkpoint import load_checkpoint, save_atomic

    save_atomic({"model": model.state_dict(), "model_config": config.to_dict()}, path)
    return load_checkpoint(path, map_location="cpu")


def cpu_round_trip(config, features, path: Path) -> dict[str, Any]:
    """On CPU: the `auto` Forecaster's outputs on features (batch, seqlen, n_features) -> (batch, n_targets), before
    and after its checkpoint's round trip (save_and_load), compared exactly."""
    import torch

    from model.config import ModelConfig

    with torch.no_grad():
        model = forecaster(config, "auto", "cpu")
        before = model(features)  # (batch, n_targets)
        saved = save_and_load(model, config, path)
        after = forecaster(ModelConfig.from_saved(saved["model_config"]), "torch", "cpu", saved["model"])(features)
    return {"backend": model.layers[0].mixer.active_backend(), "output_shape": list(before.shape),
            "round_trip": compare(after, before, rtol=0.0, atol=0.0)}


def gpu_checks(config, features, path: Path) -> dict[str, Any]:
    """On CUDA, features (batch, seqlen, n_features) on CPU: the fused and torch Forecasters' outputs (batch,
    n_targets) from one state_dict, fp32 and bf16; then the fused model's checkpoint loaded on CPU into the torch
    path, its outputs against the fused model's on the GPU."""
    import torch

    from model.config import ModelConfig
    from model.precision import autocast

    cuda = torch.device("cuda")
    fused = forecaster(config, "mamba_ssm", "cuda")
    reference = forecaster(config, "torch", "cuda", fused.state_dict())
    backends = {}
    with torch.no_grad():
        for precision, tolerance in OUTPUT_TOLERANCE.items():
            with autocast(precision, cuda):
                ours, theirs = fused(features.to(cuda)), reference(features.to(cuda))  # (batch, n_targets)
            backends[precision] = compare(ours, theirs, **tolerance)
        on_gpu = fused(features.to(cuda)).cpu()
        saved = save_and_load(fused, config, path)
        devices = sorted({str(t.device) for t in saved["model"].values()})
        on_cpu = forecaster(ModelConfig.from_saved(saved["model_config"]), "torch", "cpu", saved["model"])(features)
    return {"backends_on_gpu": {"fused": fused.layers[0].mixer.active_backend(), **backends},
            "gpu_checkpoint_on_cpu": {"loaded_on": devices, **compare(on_cpu, on_gpu, **OUTPUT_TOLERANCE["fp32"])}}
