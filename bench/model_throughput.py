"""Forward+backward samples/s of the default Forecaster stack against transformers' Mamba2.

Run by hand:  .venv/bin/python bench/model_throughput.py [--batch 64 --seqlen 128 --repeats 7]
Prints one JSON object. Both models are measured in this one run, alternating, so the
ratio is fair on a shared, noisy machine. transformers (the `bench` extra) is optional;
its Mamba2 runs its pure-torch path here (no mamba_ssm kernels on CPU), at its default
chunk size and at 32, 64 and 128, and the ratio is taken against its fastest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never fetch kernels or weights
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from model.config import ModelConfig  # noqa: E402
from model.forecaster import Forecaster  # noqa: E402


def ours(config: ModelConfig, batch: int, seqlen: int):
    """A step function: forward+backward of the Forecaster on random bars."""
    model = Forecaster(config).train()
    features = torch.randn(batch, seqlen, config.n_features)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(features).square().mean().backward()

    return step


def transformers_mamba2(config: ModelConfig, batch: int, seqlen: int, chunk_size: int | None):
    """The same dimensions in transformers' Mamba2Model (its torch path), or None."""
    try:
        from transformers import Mamba2Config, Mamba2Model
        from transformers.utils import logging
    except ImportError:
        return None
    logging.set_verbosity_error()
    hf_config = Mamba2Config(
        hidden_size=config.d_model, num_hidden_layers=config.n_layers, state_size=config.d_state,
        head_dim=config.headdim, expand=config.expand, num_heads=config.nheads, n_groups=config.ngroups,
        conv_kernel=config.d_conv, vocab_size=16, use_cache=False,
        **({} if chunk_size is None else {"chunk_size": chunk_size}),
    )
    model = Mamba2Model(hf_config).train()
    embeds = torch.randn(batch, seqlen, config.d_model)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(inputs_embeds=embeds).last_hidden_state[:, -1].square().mean().backward()

    return step, hf_config.chunk_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seqlen", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=7, help="timed steps per model (median reported)")
    parser.add_argument("--chunk-size", type=int, default=None, help="our chunk size (default: ModelConfig's)")
    args = parser.parse_args()
    config = ModelConfig() if args.chunk_size is None else ModelConfig(chunk_size=args.chunk_size)

    steps = {"mamba_tune": ours(config, args.batch, args.seqlen)}
    chunk_sizes = {"mamba_tune": config.chunk_size}
    for chunk in (None, 32, 64, 128):  # transformers' default chunk size (256), then smaller ones
        made = transformers_mamba2(config, args.batch, args.seqlen, chunk)
        if made is not None:
            step, chunk_used = made
            steps.setdefault(f"transformers_chunk{chunk_used}", step)
            chunk_sizes[f"transformers_chunk{chunk_used}"] = chunk_used

    for step in steps.values():  # warm-up: allocator, first-call dispatch
        step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.repeats):  # interleaved, so load on the machine hits every model alike
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)

    result = {
        "batch": args.batch, "seqlen": args.seqlen, "threads": torch.get_num_threads(),
        "d_model": config.d_model, "n_layers": config.n_layers, "d_state": config.d_state,
        "headdim": config.headdim, "repeats": args.repeats,
        "samples_per_s": {name: round(args.batch / statistics.median(t), 1) for name, t in times.items()},
        "chunk_size": chunk_sizes,
    }
    rivals = {k: v for k, v in result["samples_per_s"].items() if k != "mamba_tune"}
    if rivals:
        best = max(rivals, key=rivals.get)
        result["ratio_vs_best_transformers"] = round(result["samples_per_s"]["mamba_tune"] / rivals[best], 2)
        result["best_transformers"] = best
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
