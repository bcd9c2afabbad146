"""ssd_scan against the plain sequential recurrence, and its chunking invariants."""

from __future__ import annotations

import pytest
import torch

from model.ssd import ssd_final_state, ssd_scan
from tests.model.recurrence import sequential_scan

TOLERANCE = {torch.float64: {"rtol": 1e-9, "atol": 1e-12}, torch.float32: {"rtol": 1e-4, "atol": 1e-5}}


def make_inputs(seqlen, *, batch=2, nheads=4, headdim=8, ngroups=2, d_state=16, dtype=torch.float64, seed=0):
    """Random scan inputs of the given dims; A < 0, dt around softplus's knee."""
    g = torch.Generator().manual_seed(seed)
    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype)
    return {
        "x": rand(batch, seqlen, nheads, headdim),
        "dt": rand(batch, seqlen, nheads),
        "A": -(torch.rand(nheads, generator=g, dtype=dtype) * 3 + 0.5),
        "B": rand(batch, seqlen, ngroups, d_state),
        "C": rand(batch, seqlen, ngroups, d_state),
    }


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("seqlen", [1, 37, 64])
@pytest.mark.parametrize("ngroups", [1, 2, 4])
def test_ssd_scan_matches_sequential_recurrence(dtype, seqlen, ngroups):
    inputs = make_inputs(seqlen, ngroups=ngroups, dtype=dtype)
    y = ssd_scan(**inputs, chunk_size=16)
    expected, _ = sequential_scan(**inputs)
    assert y.shape == (2, seqlen, 4, 8)
    assert y.dtype == dtype
    torch.testing.assert_close(y, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("d_shape", ["per_head", "per_channel"])
def test_ssd_scan_with_every_option_matches_recurrence(dtype, d_shape):
    inputs = make_inputs(45, dtype=dtype, seed=1)
    g = torch.Generator().manual_seed(2)
    extras = {
        "D": torch.randn(4, generator=g, dtype=dtype) if d_shape == "per_head" else torch.randn(4, 8, generator=g, dtype=dtype),
        "z": torch.randn(2, 45, 4, 8, generator=g, dtype=dtype),
        "dt_bias": torch.randn(4, generator=g, dtype=dtype),
        "dt_softplus": True,
        "dt_limit": (0.05, 2.0),
        "initial_states": torch.randn(2, 4, 8, 16, generator=g, dtype=dtype),
    }
    y, final = ssd_scan(**inputs, chunk_size=16, **extras, return_final_states=True)
    expected, expected_final = sequential_scan(**inputs, **extras)
    assert final.shape == (2, 4, 8, 16)
    torch.testing.assert_close(y, expected, **TOLERANCE[dtype])
    torch.testing.assert_close(final, expected_final, **TOLERANCE[dtype])


def test_ssd_scan_clamps_negative_dt_to_zero_like_the_kernel():
    inputs = make_inputs(20)
    inputs["dt"] = -inputs["dt"].abs()  # every step has dt < 0 -> clamped to 0 -> y = 0
    y, final = ssd_scan(**inputs, chunk_size=8, return_final_states=True)
    torch.testing.assert_close(y, torch.zeros_like(y))
    torch.testing.assert_close(final, torch.zeros_like(final))


@pytest.mark.parametrize("seqlen", [1, 50, 96])
def test_ssd_scan_final_states_match_recurrence(seqlen):
    inputs = make_inputs(seqlen)
    _, final = ssd_scan(**inputs, chunk_size=32, return_final_states=True)
    _, expected = sequential_scan(**inputs)
    torch.testing.assert_close(final, expected, **TOLERANCE[torch.float64])


def test_ssd_scan_is_invariant_to_chunk_size():
    inputs = make_inputs(70, seed=3)
    reference = ssd_scan(**inputs, chunk_size=70)
    for chunk_size in (1, 7, 16, 64, 128):
        torch.testing.assert_close(ssd_scan(**inputs, chunk_size=chunk_size), reference, **TOLERANCE[torch.float64])


def test_ssd_scan_splits_into_segments_through_states():
    inputs = make_inputs(60, seed=4)
    whole = ssd_scan(**inputs, chunk_size=16)
    first = {k: v[:, :25] if v.dim() > 1 else v for k, v in inputs.items()}
    rest = {k: v[:, 25:] if v.dim() > 1 else v for k, v in inputs.items()}
    y1, state = ssd_scan(**first, chunk_size=16, return_final_states=True)
    y2 = ssd_scan(**rest, chunk_size=16, initial_states=state)
    torch.testing.assert_close(torch.cat([y1, y2], dim=1), whole, **TOLERANCE[torch.float64])


def test_ssd_scan_is_causal():
    inputs = make_inputs(48, seed=5)
    before = ssd_scan(**inputs, chunk_size=16)
    t = 29
    changed = {k: v.clone() for k, v in inputs.items()}
    for name in ("x", "dt", "B", "C"):
        changed[name][:, t] += 1.0
    after = ssd_scan(**changed, chunk_size=16)
    torch.testing.assert_close(after[:, :t], before[:, :t], rtol=0, atol=0)
    assert not torch.allclose(after[:, t], before[:, t])


def test_ssd_scan_gradients_match_recurrence():
    inputs = make_inputs(21, seed=6)
    extras = {"D": torch.randn(4, dtype=torch.float64), "z": torch.randn(2, 21, 4, 8, dtype=torch.float64),
              "dt_bias": torch.randn(4, dtype=torch.float64), "initial_states": torch.randn(2, 4, 8, 16, dtype=torch.float64)}
    leaves = {**inputs, **extras}
    for tensor in leaves.values():
        tensor.requires_grad_(True)
    ours, ours_final = ssd_scan(**inputs, **extras, chunk_size=8, dt_softplus=True, return_final_states=True)
    ref, ref_final = sequential_scan(**inputs, **extras, dt_softplus=True)
    weights_y, weights_state = torch.randn_like(ref), torch.randn_like(ref_final)
    grads = torch.autograd.grad((ours * weights_y).sum() + (ours_final * weights_state).sum(), list(leaves.values()))
    expected = torch.autograd.grad((ref * weights_y).sum() + (ref_final * weights_state).sum(), list(leaves.values()))
    for name, got, want in zip(leaves, grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10, msg=lambda m, name=name: f"d/d{name}: {m}")


def test_ssd_scan_keeps_half_precision_dtype_and_computes_in_float32():
    inputs = {k: v.to(torch.bfloat16) for k, v in make_inputs(33, dtype=torch.float32).items()}
    y = ssd_scan(**inputs, chunk_size=16)
    assert y.dtype == torch.bfloat16
    expected, _ = sequential_scan(**{k: v.double() for k, v in inputs.items()})
    torch.testing.assert_close(y.double(), expected, rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"x": torch.zeros(2, 10, 4)}, r"x must be \(batch, seqlen, nheads, headdim\)"),
        ({"dt": torch.zeros(2, 10, 3)}, r"dt must have shape \(2, 10, 4\), got \(2, 10, 3\)"),
        ({"A": torch.zeros(5)}, r"A must have shape \(4,\)"),
        ({"B": torch.zeros(2, 10, 3, 16), "C": torch.zeros(2, 10, 3, 16)}, r"ngroups must divide nheads, got ngroups=3"),
        ({"C": torch.zeros(2, 10, 2, 8)}, r"C must have shape \(2, 10, 2, 16\)"),
        ({"D": torch.zeros(3)}, r"D must have shape \(4,\) or \(4, 8\)"),
        ({"z": torch.zeros(2, 10, 4, 7)}, r"z must have shape"),
        ({"initial_states": torch.zeros(2, 4, 8, 15)}, r"initial_states must have shape \(2, 4, 8, 16\)"),
        ({"chunk_size": 0}, r"chunk_size must be a positive int, got 0"),
    ],
)
def test_ssd_scan_rejects_bad_shapes(change, match):
    args = {**make_inputs(10, dtype=torch.float32), "chunk_size": 4, **change}
    with pytest.raises(ValueError, match=match):
        ssd_scan(**args)


@pytest.mark.parametrize("seqlen", [1, 33, 64])
def test_ssd_final_state_equals_scan_final_states(seqlen):
    inputs = make_inputs(seqlen, seed=7)
    init = torch.randn(2, 4, 8, 16, dtype=torch.float64)
    _, expected = ssd_scan(**inputs, chunk_size=16, dt_softplus=True, initial_states=init, return_final_states=True)
    inputs.pop("C")
    got = ssd_final_state(**inputs, chunk_size=16, dt_softplus=True, initial_states=init)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
