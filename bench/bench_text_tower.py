"""One text query through a CLIP text tower in ONNX: tokenize (``tokenizer.json``) + ``text.onnx``, p50 on 2 threads.

#49's target: <= 50 ms p50 on 2 cores for the ViT-B/32 text tower (width 512, 12 layers, 8 heads, 77 tokens,
49408-token vocabulary), fp32, and INT8 measured too. The tower is open_clip's ViT-B-32 with random weights
(latency does not depend on their values), exported by ``retrieval export``'s own code
(``training.export.text_export.write_text_side``, parity-checked against torch); the INT8 model is onnxruntime's
dynamic quantization of its MatMuls (int8 weights per channel, activation ranges at run time), as
``--quantize int8`` does for a vision transformer. Each query is one text, tokenized and embedded alone, the
way the service answers one ``text`` search; the first ``--warmup`` queries are not timed. The graph runs the
positions up to the end token only (``training.model.text.text_graph``), so a typed query of a few words costs a
fraction of a 77-token text: the last row times one past the context length, which runs all 77. INT8's agreement is
the mean cosine between its and fp32's unit embeddings of the same texts.

    python bench/bench_text_tower.py            # ViT-B/32's text tower
    python bench/bench_text_tower.py --quick    # a tiny tower: the test suite's smoke run
    python bench/bench_text_tower.py --model ViT-B-16-SigLIP   # SigLIP's (64 tokens, all run; stand-in tokenizer)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from quick_mode import parse_quick

TARGET_MS = 50.0
QUERIES = (  # 4 to 12 words: what people type
    "a red pickup truck",
    "a small brown bird with a white belly sitting on a branch",
    "black sports car, rear view",
    "a photo of a yellow warbler",
    "vintage convertible parked by the sea at sunset",
)
LONG = ("a long description of a car parked by the sea " * 10,)  # past 77 tokens: the graph runs all of them
TINY = {  # --quick: the same graph at toy size
    "embed_dim": 32,
    "quick_gelu": True,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 2},
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="ViT-B-32", help="open_clip model whose text tower is timed (ViT-B-16-SigLIP: SigLIP's)"
    )
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per model")
    parser.add_argument("--warmup", type=int, default=10)
    return parse_quick(parser, model="tiny", queries=10, warmup=2)


def export_towers(model_name: str, work: Path) -> tuple[Path, Path, Path]:
    """text.onnx + tokenizer.json of ``model_name`` (random weights), and the INT8 text.onnx."""
    import open_clip
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from open_clip import factory

    from retrieval.training.export.int8_quantization import REDUCE_RANGE
    from retrieval.training.export.text_export import write_text_side
    from retrieval.training.model.text.siglip_tokenizer import siglip_tokenizer
    from retrieval.training.model.text.text_graph import is_causal_clip

    if model_name == "tiny":
        factory._MODEL_CONFIGS.setdefault("tiny", TINY)
    torch.manual_seed(0)
    siglip = "SigLIP" in model_name
    clip = open_clip.create_model(model_name, pretrained=None, force_quick_gelu=not siglip).eval()
    tokenizer_json = None  # CLIP's, built from open_clip's vocabulary
    if not is_causal_clip(clip):  # SigLIP's hub tokenizer.json is not here (no internet): a unigram stand-in
        tokenizer_json = siglip_tokenizer(_unigram_stand_in(), int(clip.context_length)).to_str()
    text = write_text_side(clip, work / "fp32", f"open_clip {model_name} random", tokenizer_json)
    int8 = work / "int8.onnx"
    quantize_dynamic(
        work / "fp32" / text.onnx_file,
        int8,
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        reduce_range=REDUCE_RANGE,
        weight_type=QuantType.QInt8,
    )
    return work / "fp32" / text.onnx_file, int8, work / "fp32" / text.tokenizer_file


def _unigram_stand_in() -> str:
    """A SentencePiece-style unigram ``tokenizer.json`` (T5's layout) over letters and the queries' words: a
    stand-in for SigLIP's hub file, whose cost is the tokenizer's, not the graph's (which always runs 64 tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    words = sorted({word for text in QUERIES + LONG for word in text.lower().replace(",", "").split()})
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), *((f"\u2581{word}", -2.0) for word in words)]
    vocab += [(letter, -8.0) for letter in "abcdefghijklmnopqrstuvwxyz"]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=2))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tokenizer.to_str()


def time_queries(
    onnx_path: Path, tokenizer_path: Path, args: argparse.Namespace, queries: tuple[str, ...] = QUERIES
) -> tuple[list[float], np.ndarray]:
    """Milliseconds of each timed query (tokenize + run), one of ``queries`` at a time, and their embeddings."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(tokenizer_path))

    def embed(texts: list[str]) -> np.ndarray:
        ids = np.array([encoding.ids for encoding in tokenizer.encode_batch(texts)], dtype=np.int64)
        return session.run(None, {"input_ids": ids})[0]

    times = []
    for index in range(args.warmup + args.queries):
        started = time.perf_counter()
        embed([queries[index % len(queries)]])
        if index >= args.warmup:
            times.append(1000 * (time.perf_counter() - started))
    return times, embed(list(queries))


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    from tokenizers import Tokenizer

    args = parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip() if os.name == "posix" else "?"
    with tempfile.TemporaryDirectory(prefix="bench-text-") as tmp:
        fp32, int8, tokenizer = export_towers(args.model, Path(tmp))
        sizes = {"fp32": fp32.stat().st_size / 1e6, "int8": int8.stat().st_size / 1e6}
        whole = f"fp32, {Tokenizer.from_file(str(tokenizer)).padding['length']} tokens"  # the context length
        sizes[whole] = sizes["fp32"]
        results = {name: time_queries(path, tokenizer, args) for name, path in (("fp32", fp32), ("int8", int8))}
        results[whole] = time_queries(fp32, tokenizer, args, LONG)
    agreement = float(np.mean(np.sum(results["fp32"][1] * results["int8"][1], axis=1)))
    print(f"\n{args.model} text tower, {args.threads} threads, {args.queries} queries of one text each; load: {load}\n")
    print("| model, queries | text.onnx MB | p50 ms | p90 ms | mean ms | target p50 <= 50 ms | cosine to fp32 |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for name, (times, _) in results.items():
        p50 = statistics.median(times)
        met = "met" if p50 <= TARGET_MS else "MISSED"
        cosine = agreement if name == "int8" else 1.0
        print(
            f"| {name} | {sizes[name]:.0f} | {p50:.1f} | {_percentile(times, 90):.1f} | {statistics.fmean(times):.1f} "
            f"| {met} | {cosine:.4f} |"
        )


if __name__ == "__main__":
    main()
