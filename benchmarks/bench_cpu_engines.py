"""CPU inference engines for the model body, against the fp32 transformers body, in one run.

    .venv/bin/python -m benchmarks.bench_cpu_engines --tokens 512,1500 --threads 2 \
        --engines torch-int8-dynamic,onnx-fp32,onnx-int8,openvino-fp32,openvino-int8-weights,ct2-fp32,ct2-int8

Issue 15 asks for ConSens at twice the speed of the fp32 body on a laptop-class CPU with the scores
kept. This script measures each candidate engine on the same token sequences (WikiEval contexts, real
text) and prints, per engine and length: seconds (best of ``--repeats``), the speed ratio
``torch_fp32_s / engine_s`` (higher is faster), and how far its token log-probabilities move from the
fp32 body's (max and mean absolute difference, in nats; the LM head and log-softmax are computed the
same way for every engine). An engine whose package is missing is reported as such. Converted models
are written under ``--work`` (default ``runs/engines``), never into the repository.

Engines (``pip install onnxruntime onnx onnx_ir openvino nncf ctranslate2`` for the optional ones):
``torch-compile`` (inductor, one graph per length; compile time is the first call, not timed),
``torch-int8-dynamic`` (``torch.ao`` dynamic int8 on the Linear layers), ``onnx-fp32`` / ``onnx-int8``
(``torch.onnx.export``, ONNX Runtime with full graph optimisation; int8: ``quantize_dynamic``,
per-channel signed weights, reduced range for AVX2), ``onnx-nbits4`` / ``onnx-nbits8``
(``MatMulNBits``: block-wise weights, 32 per scale and zero point, int8 activations per block),
``openvino-fp32`` / ``openvino-int8-weights``
(``openvino.convert_model`` from the torch module; NNCF int8 weight compression), ``ct2-fp32`` /
``ct2-int8`` (CTranslate2 converted from the model directory; ``score_batch`` gives log-probabilities
directly). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A sibling module (scripts run with python -m from the repo root): the CPU name is read the same way in both.
from benchmarks.bench_cpu_gemm import _cpu_name
from ragsense.data import load_wikieval

ENGINES = (
    "torch-compile",
    "torch-int8-dynamic",
    "onnx-fp32",
    "onnx-int8",
    "onnx-nbits4",
    "onnx-nbits8",
    "openvino-fp32",
    "openvino-int8-weights",
    "ct2-fp32",
    "ct2-int8",
)
NEEDS = {"onnx": "onnxruntime", "openvino": "openvino", "ct2": "ctranslate2"}


def _best(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    out = fn()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    return best, out


def _body_module(torch: Any, model: Any) -> Any:
    """The body as a module returning hidden states only (what the exporters trace)."""

    class Body(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.body = model.model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            out = self.body(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            return out.last_hidden_state

    return Body().eval()


def _nbits(fp32: Path, work: Path, bits: int) -> Path:
    """MatMulNBits: weights in blocks of 32 along K with a scale and a zero point each (4 bits: the
    bundled GGUF's own Q4_1 layout, so its weights come back exactly), activations quantized to int8
    per block at run time (accuracy level 4: the int8 kernels, the only fast ones without AVX-512)."""
    from onnxruntime.quantization import matmul_nbits_quantizer, quant_utils

    file = work / f"body.nbits{bits}.onnx"
    if not file.exists():
        config = matmul_nbits_quantizer.DefaultWeightOnlyQuantConfig(
            block_size=32,
            is_symmetric=False,
            accuracy_level=4,
            quant_format=quant_utils.QuantFormat.QOperator,
            bits=bits,
        )
        model = quant_utils.load_model_with_shape_infer(fp32)
        quantizer = matmul_nbits_quantizer.MatMulNBitsQuantizer(model, algo_config=config)
        quantizer.process()
        quantizer.model.save_model_to_file(str(file), False)
    return file


def _runner(
    engine: str,
    torch_body: Callable[..., Any],
    model: Any,
    tokenizer: Any,
    path: Path,
    work: Path,
    example: Any,
    threads: int,
) -> tuple[Callable[[Any], Any], bool]:
    """``(run, direct)``: ``run(ids)`` gives the body's hidden states, or log-probabilities when
    ``direct`` (CTranslate2 scores tokens itself)."""
    import numpy as np
    import torch

    family = engine.split("-")[0]

    def feeds(ids: Any) -> dict[str, Any]:
        return {"input_ids": ids.numpy(), "attention_mask": np.ones_like(ids.numpy())}

    if engine == "torch-compile":
        compiled = torch.compile(model.model, dynamic=False)  # one graph per length, compiled on warm-up
        return (lambda ids: torch_body(ids, compiled)), False
    if engine == "torch-int8-dynamic":
        quantized = torch.ao.quantization.quantize_dynamic(model.model, {torch.nn.Linear}, dtype=torch.qint8)
        return (lambda ids: torch_body(ids, quantized)), False
    if family == "onnx":
        import onnxruntime as ort

        fp32 = work / "body.onnx"
        if not fp32.exists():
            names = ("input_ids", "attention_mask", "hidden")
            torch.onnx.export(
                _body_module(torch, model),
                (example, torch.ones_like(example)),
                str(fp32),
                input_names=list(names[:2]),
                output_names=[names[2]],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in names},
                opset_version=17,
                dynamo=False,
            )
        file = fp32
        if engine == "onnx-int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            file = work / "body.int8.onnx"
            if not file.exists():
                quantize_dynamic(
                    str(fp32),
                    str(file),
                    weight_type=QuantType.QInt8,
                    per_channel=True,
                    reduce_range=True,
                    extra_options={"MatMulConstBOnly": True},
                )
        if engine in ("onnx-nbits4", "onnx-nbits8"):
            file = _nbits(fp32, work, int(engine[-1]))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
        return (lambda ids: session.run(None, feeds(ids))[0]), False
    if family == "openvino":
        import openvino as ov

        converted = ov.convert_model(_body_module(torch, model), example_input=feeds(example))
        if engine == "openvino-int8-weights":
            import nncf

            converted = nncf.compress_weights(converted, mode=nncf.CompressWeightsMode.INT8_ASYM)
        config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
        compiled = ov.Core().compile_model(converted, "CPU", config)
        return (lambda ids: compiled(feeds(ids))[0]), False
    if family == "ct2":
        import ctranslate2

        kind = "int8" if engine.endswith("int8") else "float32"
        directory = work / f"ct2-{kind}"
        if not directory.exists():
            from ctranslate2.converters import TransformersConverter

            TransformersConverter(str(path)).convert(str(directory), quantization=kind)
        generator = ctranslate2.Generator(
            str(directory), device="cpu", compute_type=kind, intra_threads=threads
        )

        def score(ids: Any) -> Any:
            tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
            return np.asarray(generator.score_batch([tokens], max_input_length=0)[0].log_probs)

        return score, True
    raise SystemExit(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m", help="a bundled model name or a model directory")
    parser.add_argument("--tokens", default="512,1500", help="sequence lengths, comma-separated")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--work", default="runs/engines")
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragsense.models import BUNDLED_MODELS, converted_path

    torch.set_num_threads(args.threads)
    path = converted_path(args.model) if args.model in BUNDLED_MODELS else Path(args.model)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    text = " ".join(" ".join(it.context_v1) for it in load_wikieval(args.data))
    all_ids = tokenizer(text)["input_ids"]
    lengths = [int(n) for n in args.tokens.split(",")]
    seqs = {n: torch.tensor([all_ids[:n]]) for n in lengths}

    def logprobs(hidden: Any, ids: Any) -> Any:
        with torch.inference_mode():
            h = torch.as_tensor(np.ascontiguousarray(hidden[0, :-1]))
            logits = model.lm_head(h).float()
            return (logits.gather(1, ids[0, 1:, None])[:, 0] - logits.logsumexp(-1)).numpy()

    def torch_body(ids: Any, body: Any = model.model) -> Any:
        with torch.inference_mode():
            return body(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.numpy()

    reference: dict[int, tuple[float, Any]] = {}
    for n, ids in seqs.items():
        seconds, hidden = _best(lambda ids=ids: torch_body(ids), args.repeats)
        reference[n] = (seconds, logprobs(hidden, ids))
    results: dict[str, Any] = {}

    def record(engine: str, n: int, seconds: float, lp: Any) -> None:
        ref_s, ref_lp = reference[n]
        diff = np.abs(np.asarray(lp) - ref_lp[-len(lp) :])
        results.setdefault(engine, {})[str(n)] = {
            "seconds": round(seconds, 3),
            "speed_vs_torch_fp32": round(ref_s / seconds, 3),
            "max_abs_dlogp": round(float(diff.max()), 5),
            "mean_abs_dlogp": round(float(diff.mean()), 5),
        }
        print(
            f"{engine:>22} n={n:<5} {seconds:7.3f} s  x{ref_s / seconds:5.2f}  "
            f"max|dlogp| {diff.max():.4f}  mean {diff.mean():.5f}",
            file=sys.stderr,
            flush=True,
        )

    example = seqs[min(lengths)]
    for engine in args.engines.split(","):
        family = engine.split("-")[0]
        package = NEEDS.get(family)
        if package and importlib.util.find_spec(package) is None:
            results[engine] = {"skipped": f"{package} is not installed"}
            print(f"{engine:>22} skipped: {package} is not installed", file=sys.stderr)
            continue
        started = time.perf_counter()
        run, direct = _runner(engine, torch_body, model, tokenizer, path, work, example, args.threads)
        setup_s = time.perf_counter() - started
        for n, ids in seqs.items():
            seconds, out = _best(lambda ids=ids, run=run: run(ids), args.repeats)
            record(engine, n, seconds, out if direct else logprobs(out, ids))
        results[engine]["setup_s"] = round(setup_s, 1)
    # The reference again at the end: on a shared machine, a drift between the two shows the noise.
    again = {
        str(n): round(_best(lambda ids=ids: torch_body(ids), args.repeats)[0], 3) for n, ids in seqs.items()
    }
    figures = {
        "model": args.model,
        "cpu": _cpu_name(),
        "threads": args.threads,
        "torch_fp32_seconds": {str(n): round(s, 3) for n, (s, _) in reference.items()},
        "torch_fp32_seconds_at_end": again,
        "engines": results,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
