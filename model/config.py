"""ModelConfig: the Forecaster's architecture, typed, frozen and validated on creation."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from model.settings import known_settings, plain_values, require_positive_ints

BACKENDS = ("auto", "torch", "mamba_ssm")
# The backends that may run mamba-ssm's fused kernels (auto does wherever they import, on any GPU machine): their
# causal conv takes the channels x, B and C (expand*d_model + 2*ngroups*d_state) only in multiples of 8.
# mamba-ssm v2.3.2.post1 mamba_ssm/ops/triton/ssd_combined.py:74 (ensure_stride, called by
# mamba_split_conv1d_scan_combined, lines 840, 914 and 964): assert inp.shape[2] % 8 == 0, "Number of convolution
# channels is required to be a multiple of 8."; causal-conv1d csrc/causal_conv1d.cpp:179 (causal_conv1d_fwd, the
# channel-last layout that call hands it): TORCH_CHECK(dim % 8 == 0). The torch path takes any width.
FUSED_BACKENDS = ("auto", "mamba_ssm")
CONV_CHANNEL_MULTIPLE = 8


@dataclass(frozen=True)
class ModelConfig:
    """A Mamba-2 stack over bar features. Defaults suit sequences of a few hundred bars."""

    n_features: int = 8  # bar features per time step (set from the data pipeline)
    n_targets: int = 1  # values predicted from the last position
    d_model: int = 128  # residual stream width
    n_layers: int = 4  # pre-norm residual Mamba-2 blocks
    d_state: int = 64  # SSM state size per head (N)
    d_conv: int = 4  # causal depthwise conv width (causal-conv1d kernels take 2..4)
    expand: int = 2  # inner width = expand * d_model
    headdim: int = 32  # channels per SSM head (P); nheads = expand * d_model / headdim
    ngroups: int = 1  # B/C groups shared by nheads / ngroups heads each
    chunk_size: int = 64  # SSD chunk length; 64 measured fastest at seqlen 128 on CPU (32, 128 slower)
    A_init_range: tuple[float, float] = (1.0, 16.0)  # A ~ -U(lo, hi) at init
    dt_min: float = 0.001  # dt initialised log-uniform in [dt_min, dt_max]
    dt_max: float = 0.1  # upper end of dt's initial log-uniform range
    dt_init_floor: float = 1e-4  # floor of the initial dt
    dt_limit: tuple[float, float] = (0.0, math.inf)  # dt clamped to this range
    bias: bool = False  # biases on in_proj and out_proj
    conv_bias: bool = True  # bias on the depthwise conv
    D_has_hdim: bool = False  # D per channel (nheads*headdim) instead of per head
    rmsnorm: bool = True  # gated RMSNorm before out_proj (else gate y by silu(z))
    norm_before_gate: bool = False  # mamba_ssm's default: norm(y * silu(z))
    norm_eps: float = 1e-5  # epsilon of every RMSNorm
    backend: str = "auto"  # "auto" | "torch" | "mamba_ssm" (fused CUDA kernels)
    residual: bool = False  # the last feature is a baseline's forecast, which the head corrects (set from the data)

    def __post_init__(self) -> None:
        require_positive_ints(self, ("n_features", "n_targets", "d_model", "n_layers", "d_state", "expand",
                                     "headdim", "ngroups", "chunk_size"))
        if not isinstance(self.d_conv, int) or not 2 <= self.d_conv <= 4:
            raise ValueError(f"d_conv must be 2, 3 or 4 (the widths causal-conv1d supports), got {self.d_conv!r}")
        d_inner = self.expand * self.d_model
        if d_inner % self.headdim:
            raise ValueError(
                f"headdim must divide expand*d_model, got headdim={self.headdim}, "
                f"expand*d_model={d_inner}; pick a headdim among the divisors of {d_inner}"
            )
        if self.nheads % self.ngroups:
            raise ValueError(
                f"ngroups must divide nheads = expand*d_model/headdim, got ngroups={self.ngroups}, "
                f"nheads={self.nheads}"
            )
        lo, hi = self.A_init_range
        if not 0 < lo <= hi:
            raise ValueError(f"A_init_range must satisfy 0 < lo <= hi, got {self.A_init_range!r}")
        if not 0 < self.dt_min <= self.dt_max:
            raise ValueError(f"dt_min and dt_max must satisfy 0 < dt_min <= dt_max, got {self.dt_min}, {self.dt_max}")
        if not self.dt_init_floor > 0:  # `not x > 0`: NaN is refused too
            raise ValueError(f"dt_init_floor must be positive, got {self.dt_init_floor}")
        lo, hi = self.dt_limit
        if not 0 <= lo < hi:
            raise ValueError(f"dt_limit must satisfy 0 <= lo < hi, got {self.dt_limit!r}")
        if not self.norm_eps > 0:
            raise ValueError(f"norm_eps must be positive, got {self.norm_eps}")
        if self.residual and self.n_targets != 1:
            raise ValueError(f"residual (a correction to one baseline's forecast) needs n_targets 1, "
                             f"got {self.n_targets}")
        for name in ("residual", "bias", "conv_bias", "D_has_hdim", "rmsnorm", "norm_before_gate"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.backend in FUSED_BACKENDS and self.conv_dim % CONV_CHANNEL_MULTIPLE:
            raise ValueError(
                f"the conv channels expand*d_model + 2*ngroups*d_state must be a multiple of {CONV_CHANNEL_MULTIPLE} "
                f"for the fused kernels (backend {self.backend}), got {self.expand}*{self.d_model} + "
                f"2*{self.ngroups}*{self.d_state} = {self.conv_dim}; choose d_model and d_state that make it one "
                f"(multiples of {CONV_CHANNEL_MULTIPLE} always do), or set model.backend=torch"
            )

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model

    @property
    def conv_dim(self) -> int:
        """The channels of the causal depthwise conv: x (d_inner), then B and C (ngroups * d_state each)."""
        return self.d_inner + 2 * self.ngroups * self.d_state

    @property
    def nheads(self) -> int:
        return self.d_inner // self.headdim

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """Build from plain values (YAML, Ray); an unknown key names itself and the allowed ones."""
        values = known_settings(cls, values, "model")
        fixed = {k: tuple(v) if k in ("A_init_range", "dt_limit") else v for k, v in values.items()}
        return cls(**fixed)

    @classmethod
    def from_saved(cls, values: dict[str, Any]) -> ModelConfig:
        """A checkpoint's configuration. One saved with a backend that may run the fused kernels but a conv width they
        refuse (before that width was refused) was trained on the torch path, the only one that runs it: it loads
        as backend torch."""
        as_torch = cls.from_dict({**values, "backend": "torch"})
        if values.get("backend", "auto") in FUSED_BACKENDS and as_torch.conv_dim % CONV_CHANNEL_MULTIPLE:
            return as_torch
        return cls.from_dict(values)

    def to_dict(self) -> dict[str, Any]:
        """Plain values, the inverse of `from_dict`."""
        return plain_values(self)
