#!/usr/bin/env python3
"""Tokenizer throughput: folio's tokenizer.json pipeline against the `tokenizers` library on
the same file and the same text, one run, alternating repetitions, both on one thread (one
encode call on the whole text). Also checks that both give the same ids.

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
    corpus = [json.loads(l)["text"] for l in (REPO / "tests" / "golden" / "tokenizer" / "corpus.jsonl").read_text().split("\n")
              if l.strip() and "\ufffd" not in json.loads(l)["text"]]
    mixed = "\n".join(corpus)

    def grow(t):
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
    args = ap.parse_args()
    from tokenizers import Tokenizer

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in texts(args.mb).items():
            path = os.path.join(tmp, f"{name}.txt")
            Path(path).write_text(text)
            for tok_name in TOKENIZERS:
                d = HF / "tokenizers" / tok_name
                work = d
                hf = Tokenizer.from_file(str(d / "tokenizer.json"))
                hf_times, folio_times = [], []
                for _ in range(args.reps):  # alternate, so drift hits both
                    start = time.perf_counter()
                    ids = hf.encode(text).ids
                    hf_times.append(time.perf_counter() - start)
                    folio_times.append(folio_run(args.folio, work, path, 1)["median_seconds"])
                mine = json.loads(subprocess.run([args.folio, "tokenize", "-m", str(work), "-f", path], capture_output=True,
                                                 text=True, check=True).stdout)
                same = mine == ids
                mb = len(text.encode()) / 1e6
                f, h = statistics.median(folio_times), statistics.median(hf_times)
                rows.append((name, tok_name, mb, len(ids), mb / f, mb / h, h / f, same))
                print(f"{name:12s} {tok_name:18s} folio {mb / f:7.2f} MB/s  tokenizers {mb / h:7.2f} MB/s  "
                      f"ratio {h / f:5.2f}  same ids: {same}", file=sys.stderr)
    print("| text | tokenizer.json | MB | tokens | folio MB/s | tokenizers MB/s | folio / tokenizers | same ids |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:,} | {r[4]:.2f} | {r[5]:.2f} | **{r[6]:.2f}** | {'yes' if r[7] else 'NO'} |")


if __name__ == "__main__":
    main()
