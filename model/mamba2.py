"""The Mamba-2 block, parameter for parameter mamba_ssm's `mamba_ssm.modules.mamba2.Mamba2`.

Names, shapes and initialisation match mamba_ssm, so a state_dict moves between the two
in both directions. The forward pass runs mamba_ssm's fused CUDA kernel where it can
(see model/backend.py) and the pure-torch path (model/ssd.py) everywhere else.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.backend import check_backend, load_fused_kernel, resolve_backend
from model.conv import causal_conv_silu
from model.norm import GatedRMSNorm
from model.precision import full_precision
from model.ssd import ssd_final_state, ssd_scan


class Mamba2(nn.Module):
    """One Mamba-2 mixer: in_proj -> causal conv -> SSD scan -> gated norm -> out_proj.

    in_proj produces, in this order, [z (d_inner), x (d_inner), B (ngroups*d_state),
    C (ngroups*d_state), dt (nheads)]; the depthwise conv runs over [x, B, C].
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 128,
        d_conv: int = 4,
        conv_init: float | None = None,
        expand: int = 2,
        headdim: int = 64,
        ngroups: int = 1,
        A_init_range: tuple[float, float] = (1, 16),
        D_has_hdim: bool = False,
        rmsnorm: bool = True,
        norm_before_gate: bool = False,
        dt_min: float = 0.001,
        dt_max: float = 0.1,
        dt_init_floor: float = 1e-4,
        dt_limit: tuple[float, float] = (0.0, float("inf")),
        bias: bool = False,
        conv_bias: bool = True,
        chunk_size: int = 256,
        layer_idx: int | None = None,
        backend: str = "auto",
        norm_eps: float = 1e-5,
        device=None,
        dtype=None,
    ) -> None:
        factory = {"device": device, "dtype": dtype}
        super().__init__()
        self.d_model, self.d_state, self.d_conv, self.expand = d_model, d_state, d_conv, expand
        self.d_inner = expand * d_model
        if self.d_inner % headdim:
            raise ValueError(
                f"headdim must divide expand*d_model, got headdim={headdim}, expand*d_model={self.d_inner}"
            )
        self.headdim = headdim
        self.nheads = self.d_inner // headdim
        if self.nheads % ngroups:
            raise ValueError(f"ngroups must divide nheads, got ngroups={ngroups}, nheads={self.nheads}")
        self.ngroups = ngroups
        self.D_has_hdim, self.rmsnorm, self.norm_before_gate = D_has_hdim, rmsnorm, norm_before_gate
        self.dt_limit = tuple(dt_limit)
        self.chunk_size = chunk_size
        self.layer_idx = layer_idx
        check_backend(backend)
        self.backend = backend

        # Projections: [z, x, B, C, dt] in, d_inner -> d_model out.
        self.conv_dim = self.d_inner + 2 * ngroups * d_state
        d_in_proj = 2 * self.d_inner + 2 * ngroups * d_state + self.nheads
        self.in_proj = nn.Linear(d_model, d_in_proj, bias=bias, **factory)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, kernel_size=d_conv, groups=self.conv_dim,
                                padding=d_conv - 1, bias=conv_bias, **factory)
        if conv_init is not None:
            nn.init.uniform_(self.conv1d.weight, -conv_init, conv_init)

        # dt_bias = softplus^-1(dt) with dt log-uniform in [dt_min, dt_max], floored.
        dt = torch.exp(torch.rand(self.nheads, **factory) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        dt = dt.clamp(min=dt_init_floor)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        # A = -exp(A_log), A ~ U(A_init_range).
        if not 0 < A_init_range[0] <= A_init_range[1]:
            raise ValueError(f"A_init_range must satisfy 0 < lo <= hi, got {A_init_range!r}")
        A = torch.empty(self.nheads, dtype=torch.float32, device=device).uniform_(*A_init_range)
        self.A_log = nn.Parameter(torch.log(A).to(dtype=dtype))
        self.D = nn.Parameter(torch.ones(self.d_inner if D_has_hdim else self.nheads, device=device))
        for param in (self.dt_bias, self.A_log, self.D):
            param._no_weight_decay = True

        if rmsnorm:
            self.norm = GatedRMSNorm(self.d_inner, eps=norm_eps, group_size=self.d_inner // ngroups,
                                     norm_before_gate=norm_before_gate, **factory)
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias, **factory)

    def active_backend(self) -> str:
        """The implementation the next forward pass uses: "mamba_ssm" or "torch"."""
        return resolve_backend(self.backend, self.in_proj.weight.device)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """u: (batch, seqlen, d_model) -> (batch, seqlen, d_model)."""
        A = -torch.exp(self.A_log.float())  # (nheads,)
        zxbcdt = self.in_proj(u)  # (b, l, d_in_proj)
        if self.active_backend() == "mamba_ssm":
            return self._forward_fused(zxbcdt, A)
        return self._forward_torch(zxbcdt, A)

    def forward_last(self, u: torch.Tensor) -> torch.Tensor:
        """Only the last position's output: u (batch, seqlen, d_model) -> (batch, d_model).

        Equals forward(u)[:, -1]. On the torch path it skips the work no later position
        needs: z, the norm and out_proj run on the last step alone, and the scan computes
        only its final state (y_last = state . C_last + D x_last).
        """
        if self.active_backend() == "mamba_ssm":
            return self(u)[:, -1]
        A = -torch.exp(self.A_log.float())  # (nheads,)
        weight, bias = self.in_proj.weight, self.in_proj.bias
        z = F.linear(u[:, -1], weight[: self.d_inner], None if bias is None else bias[: self.d_inner])  # (b, d_inner)
        xbcdt = F.linear(u, weight[self.d_inner :], None if bias is None else bias[self.d_inner :])  # (b, l, conv+h)
        xBC, dt = xbcdt.split([self.conv_dim, self.nheads], dim=-1)
        xBC = causal_conv_silu(xBC, self.conv1d.weight, self.conv1d.bias)  # (b, l, conv_dim)
        x, B, C = xBC.split([self.d_inner, self.ngroups * self.d_state, self.ngroups * self.d_state], dim=-1)
        batch = u.shape[0]
        state = ssd_final_state(
            x.unflatten(-1, (self.nheads, self.headdim)), dt, A, B.unflatten(-1, (self.ngroups, self.d_state)),
            chunk_size=self.chunk_size, dt_bias=self.dt_bias, dt_softplus=True, dt_limit=self.dt_limit,
        )  # (b, h, p, n)
        C_last = C[:, -1].view(batch, self.ngroups, 1, self.d_state, 1).to(state.dtype)  # (b, g, 1, n, 1)
        with full_precision(u.device):  # the state's product in its own float32, as in the scan
            y = (state.view(batch, self.ngroups, -1, self.headdim, self.d_state) @ C_last).view(batch, self.nheads, -1)
        D = self.D.view(self.nheads, self.headdim) if self.D_has_hdim else self.D.unsqueeze(-1)  # (h, p) or (h, 1)
        y = (y + x[:, -1].view(batch, self.nheads, self.headdim) * D).to(u.dtype).reshape(batch, self.d_inner)
        if not self.rmsnorm:
            return self.out_proj(y * F.silu(z))
        return self.out_proj(self.norm(y, z))  # (b, d_model)

    def _forward_torch(self, zxbcdt: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """zxbcdt: (batch, seqlen, d_in_proj) -> (batch, seqlen, d_model)."""
        batch, seqlen, _ = zxbcdt.shape
        z, xBC, dt = zxbcdt.split([self.d_inner, self.conv_dim, self.nheads], dim=-1)
        xBC = causal_conv_silu(xBC, self.conv1d.weight, self.conv1d.bias)  # (b, l, conv_dim)
        x, B, C = xBC.split([self.d_inner, self.ngroups * self.d_state, self.ngroups * self.d_state], dim=-1)
        y = ssd_scan(
            x.unflatten(-1, (self.nheads, self.headdim)),  # (b, l, h, p)
            dt,  # (b, l, h)
            A,
            B.unflatten(-1, (self.ngroups, self.d_state)),  # (b, l, g, n)
            C.unflatten(-1, (self.ngroups, self.d_state)),  # (b, l, g, n)
            chunk_size=self.chunk_size,
            D=self.D.view(self.nheads, self.headdim) if self.D_has_hdim else self.D,
            z=None if self.rmsnorm else z.unflatten(-1, (self.nheads, self.headdim)),
            dt_bias=self.dt_bias,
            dt_softplus=True,
            dt_limit=self.dt_limit,
        ).reshape(batch, seqlen, self.d_inner)  # (b, l, d_inner)
        if self.rmsnorm:
            y = self.norm(y, z)
        return self.out_proj(y)

    def _forward_fused(self, zxbcdt: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """mamba_ssm's fused kernel, called as mamba_ssm's own Mamba2 calls it.

        zxbcdt: (batch, seqlen, d_in_proj); A: (nheads,). Returns (batch, seqlen, d_model).
        """
        kernel, _ = load_fused_kernel()
        limit = {} if self.dt_limit == (0.0, float("inf")) else {"dt_limit": self.dt_limit}
        return kernel(
            zxbcdt,
            self.conv1d.weight.squeeze(1),  # (conv_dim, d_conv)
            self.conv1d.bias,
            self.dt_bias,
            A,
            D=self.D.view(self.nheads, self.headdim) if self.D_has_hdim else self.D,
            chunk_size=self.chunk_size,
            activation="silu",
            rmsnorm_weight=self.norm.weight if self.rmsnorm else None,
            rmsnorm_eps=self.norm.eps if self.rmsnorm else 1e-6,
            outproj_weight=self.out_proj.weight,
            outproj_bias=self.out_proj.bias,
            headdim=None if self.D_has_hdim else self.headdim,
            ngroups=self.ngroups,
            norm_before_gate=self.norm_before_gate,
            **limit,
        )

