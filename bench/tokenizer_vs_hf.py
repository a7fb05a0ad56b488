#!/usr/bin/env python3
"""Tokenizer throughput: folio's tokenizer.json pipeline against the `tokenizers` library on
the same file and the same text, one run, alternating repetitions, both on one thread, special
tokens read as text by both. Two shapes: prompt-sized documents of about 4 KB encoded one by one
(what a server does), and the whole text as one encode call. Also checks both give the same ids.

    python bench/tokenizer_vs_hf.py [--folio build/folio] [--reps 5] [--mb 2]

Tokenizers come from scripts/hf_test_models.py ($FOLIO_MODELS_DIR/hf/tokenizers); needs the
`tokenizers` package (the test venv has it). Prints a Markdown table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HF = Path(os.environ.get("FOLIO_MODELS_DIR") or Path.home() / ".cache" / "folio" / "models") / "hf"
TOKENIZERS = ["smollm2", "llama-bpe-bos", "qwen2-nfc", "llama-spm-legacy", "deepseek", "anthropic"]


def texts(mb):
    """English prose, C++ source, and a multilingual mix, each about `mb` MB."""
    size = int(mb * 1e6)
    english = (REPO / "tests" / "data" / "perplexity.txt").read_text()
    code = "".join(p.read_text() for p in sorted((REPO / "src").rglob("*.cpp")))
    corpus = []
    for line in (REPO / "tests" / "golden" / "tokenizer" / "corpus.jsonl").read_text().split("\n"):
        if line.strip():
            raw = bytes.fromhex(json.loads(line)["hex"])
            try:
                corpus.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                pass  # the invalid-UTF-8 strings: the library takes str
    mixed = "\n".join(corpus)

    def grow(t):
        t = t.replace("\f", " ")  # form feeds separate the documents folio tokenize reads
        return (t * (size // max(1, len(t.encode())) + 1))[:size]

    return {"english": grow(english), "code": grow(code), "multilingual": grow(mixed)}


def folio_run(folio, tokenizer_dir, path, reps):
    out = subprocess.run([folio, "tokenize", "-m", str(tokenizer_dir), "-f", path, "--bench", str(reps)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folio", default=str(REPO / "build" / "folio"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--texts", default="english,code,multilingual")
    args = ap.parse_args()
    from tokenizers import Tokenizer

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in texts(args.mb).items():
            if name not in args.texts.split(","):
                continue
            docs = documents(text)
            for shape, pieces in (("4 KB documents", docs), ("one text", [text])):
                path = os.path.join(tmp, f"{name}.txt")
                Path(path).write_text("\f".join(pieces))
                for tok_name in TOKENIZERS:
                    d = HF / "tokenizers" / tok_name
                    hf = Tokenizer.from_file(str(d / "tokenizer.json"))
                    hf.encode_special_tokens = True  # as folio tokenize without --special
                    hf_times, folio_times = [], []
                    for _ in range(args.reps):  # alternate, so drift hits both
                        start = time.perf_counter()
                        ids = [i for piece in pieces for i in hf.encode(piece).ids]
                        hf_times.append(time.perf_counter() - start)
                        folio_times.append(folio_run(args.folio, d, path, 1)["median_seconds"])
                    mine = json.loads(subprocess.run([args.folio, "tokenize", "-m", str(d), "-f", path],
                                                     capture_output=True, text=True, check=True).stdout)
                    mb = len(text.encode()) / 1e6
                    f, h = statistics.median(folio_times), statistics.median(hf_times)
                    rows.append((name, shape, tok_name, mb, len(ids), mb / f, mb / h, h / f, mine == ids))
                    print(f"{name:12s} {shape:14s} {tok_name:18s} folio {mb / f:7.2f} MB/s  tokenizers {mb / h:7.2f} "
                          f"MB/s  ratio {h / f:5.2f}  same ids: {mine == ids}", file=sys.stderr)
    print("| text | shape | tokenizer.json | MB | tokens | folio MB/s | tokenizers MB/s | folio / tokenizers | same ids |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:,} | {r[5]:.2f} | {r[6]:.2f} | **{r[7]:.2f}** | "
              f"{'yes' if r[8] else 'NO'} |")


def documents(text, size=4096):
    """The text cut into pieces of about `size` bytes at line ends."""
    out, current = [], []
    length = 0
    for line in text.splitlines(keepends=True):
        current.append(line)
        length += len(line.encode())
        if length >= size:
            out.append("".join(current))
            current, length = [], 0
    if current:
        out.append("".join(current))
    return out


if __name__ == "__main__":
    main()
