"""The transformers backend's ``dtype`` (the CLI's ``--dtype``, the fingerprint) and its choice of attention
kernels on CUDA (cuDNN's plans each new shape anew: docs/speed.md, "On a GPU")."""

from __future__ import annotations

import argparse
import threading
from contextlib import nullcontext

import pytest
import torch

from ragsense.cli._common import add_model_options, model_spec_from_args
from ragsense.errors import ParameterError
from ragsense.models import load_model
from ragsense.models._kernel import _attention_context


def _options(*argv: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    return model_spec_from_args(parser.parse_args(list(argv)))[1]


def test_the_dtype_flag_reaches_the_local_backends_only() -> None:
    assert _options("--dtype", "bfloat16")["dtype"] == "bfloat16"
    assert "dtype" not in _options()  # the backend's default: float32
    assert _options("--model", "fake", "--dtype", "float16") == {}
    assert "dtype" not in _options(
        "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--dtype", "float16"
    )
    with pytest.raises(SystemExit):  # argparse names the choices
        _options("--dtype", "int8")


def test_an_unknown_dtype_is_refused_before_loading() -> None:
    with pytest.raises(ParameterError, match="dtype: dtype is one of float32, bfloat16, float16, got 'int4'"):
        load_model("smollm2-135m", device="cpu", dtype="int4")


def test_another_dtype_has_another_fingerprint_and_float32_keeps_its_own() -> None:
    f32 = load_model("smollm2-135m", device="cpu")
    bf16 = load_model("smollm2-135m", device="cpu", dtype="bfloat16")
    assert ":" not in f32.info.fingerprint  # unchanged: stored runs and caches of float32 stay valid
    assert bf16.info.fingerprint == f32.info.fingerprint + ":bfloat16"
    assert bf16.info.extra["dtype"] == "torch.bfloat16"


def test_on_cuda_attention_stays_off_cudnn_unless_asked_and_a_cpu_is_left_alone() -> None:
    assert _attention_context(torch, torch.device("cpu"), False) is nullcontext
    assert _attention_context(torch, torch.device("cuda"), True) is nullcontext
    enter = _attention_context(torch, torch.device("cuda", 0), False)
    before = torch.backends.cuda.cudnn_sdp_enabled()
    flash = torch.backends.cuda.flash_sdp_enabled()
    with enter():  # the flag is process-wide; the context restores it (no GPU needed to check)
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() == flash  # the other kernels: torch's choice
    assert torch.backends.cuda.cudnn_sdp_enabled() == before


def test_cudnn_stays_off_while_any_thread_is_inside() -> None:
    enter = _attention_context(torch, torch.device("cuda"), False)
    before = torch.backends.cuda.cudnn_sdp_enabled()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with enter():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with enter():
            second_in.set()
            first_out.wait(5)
            seen.append(torch.backends.cuda.cudnn_sdp_enabled())  # the first has left: still off

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [False]
    assert torch.backends.cuda.cudnn_sdp_enabled() == before


def test_the_setting_travels_with_the_model() -> None:
    model = load_model("smollm2-135m", device="cpu")
    other = model.with_settings(cudnn_attention=True)  # type: ignore[attr-defined]
    assert other._settings["cudnn_attention"] is True and model._settings["cudnn_attention"] is False
    assert other.with_settings()._settings["cudnn_attention"] is True  # kept by a further copy
    assert model.kernel._attention is nullcontext  # on a CPU the switch never applies


def test_a_vllm_model_takes_only_the_dtype_of_the_model_flags() -> None:
    assert _options(
        "--model", "vllm:m", "--dtype", "float32", "--threads", "2", "--prompt-cache-tokens", "9"
    ) == {"dtype": "float32"}
    assert _options("--model", "vllm:m", "--device", "cuda") == {}
    with pytest.raises(ParameterError, match="--device"):
        _options("--model", "vllm:m", "--device", "cpu")
