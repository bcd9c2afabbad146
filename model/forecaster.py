"""Forecaster: bar features in, target(s) of the last bar out, through a Mamba-2 stack."""

from __future__ import annotations

import math

import torch
from torch import nn

from model.config import ModelConfig
from model.mamba2 import Mamba2

__all__ = ["Forecaster", "ModelConfig"]


class ResidualBlock(nn.Module):
    """x + mixer(norm(x)): a pre-norm residual Mamba-2 layer (mamba_ssm's `Block` names)."""

    def __init__(self, config: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(config.d_model, eps=config.norm_eps)
        self.mixer = Mamba2(
            d_model=config.d_model,
            d_state=config.d_state,
            d_conv=config.d_conv,
            expand=config.expand,
            headdim=config.headdim,
            ngroups=config.ngroups,
            A_init_range=config.A_init_range,
            D_has_hdim=config.D_has_hdim,
            rmsnorm=config.rmsnorm,
            norm_before_gate=config.norm_before_gate,
            dt_min=config.dt_min,
            dt_max=config.dt_max,
            dt_init_floor=config.dt_init_floor,
            dt_limit=config.dt_limit,
            bias=config.bias,
            conv_bias=config.conv_bias,
            chunk_size=config.chunk_size,
            layer_idx=layer_idx,
            backend=config.backend,
            norm_eps=config.norm_eps,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, seqlen, d_model) -> (batch, seqlen, d_model)."""
        return x + self.mixer(self.norm(x))

    def forward_last(self, x: torch.Tensor) -> torch.Tensor:
        """forward(x)[:, -1] without the work other positions need: (batch, seqlen, d_model) -> (batch, d_model)."""
        return x[:, -1] + self.mixer.forward_last(self.norm(x))


class Forecaster(nn.Module):
    """features (batch, seqlen, n_features) -> predictions (batch, n_targets).

    input projection -> n_layers pre-norm residual Mamba-2 blocks -> final RMSNorm ->
    linear head on the last position. With `config.residual`, the last feature of the last bar is
    a baseline's forecast (HAR's, model/data.py) and the head's output is a correction added to it;
    the head starts at zero, so the untrained model forecasts exactly the baseline.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Linear(config.n_features, config.d_model)
        self.layers = nn.ModuleList(ResidualBlock(config, i) for i in range(config.n_layers))
        self.norm_f = nn.RMSNorm(config.d_model, eps=config.norm_eps)
        self.head = nn.Linear(config.d_model, config.n_targets)
        self._rescale_residual_outputs()
        if config.residual:
            nn.init.zeros_(self.head.weight)

    def _rescale_residual_outputs(self) -> None:
        """mamba_ssm's (and GPT-2's) init: out_proj scaled by 1/sqrt(n_layers), zero biases."""
        for module in self.modules():
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        with torch.no_grad():
            for layer in self.layers:
                layer.mixer.out_proj.weight /= math.sqrt(self.config.n_layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """features: (batch, seqlen, n_features) -> (batch, n_targets)."""
        h = self.embed(features)  # (b, l, d_model)
        h = h.to(self.embed.weight.dtype)  # the residual stream in the parameters' dtype, float32 under autocast
        for layer in self.layers[:-1]:
            h = layer(h)
        last = self.layers[-1].forward_last(h)  # (b, d_model): the head reads the last position only
        forecast = self.head(self.norm_f(last))  # (b, n_targets)
        if self.config.residual:
            forecast = forecast.float() + features[:, -1, -1:].float()  # (b, 1): the baseline, corrected in fp32
        return forecast
