#!/usr/bin/env python3
"""Writes the Hugging Face goldens that folio's tests check against, from the reference
libraries themselves:

  tokenizers  tests/golden/hf/adversarial.jsonl     strings beyond the GGUF corpus (as hex)
              tests/golden/hf/tokenizers/<v>.jsonl  the `tokenizers` library's ids and decodes for
                                                    every corpus and adversarial string, per
                                                    tokenizer variant (scripts/hf_test_models.py)
  models      tests/golden/hf/smollm2/              transformers' config.json files, the SHA-256 of
                                                    every tensor it saved, and its float32 logits
                                                    and greedy tokens on the golden prompts
              tests/golden/hf/tiny-*/               tiny random Llama-3 / Qwen2 / Mistral
                                                    directories saved by transformers, with goldens

The tokenizer part needs `tokenizers` (and transformers for the conversion); the model part
needs PyTorch, transformers and accelerate:

    pip install torch transformers==5.24.0 tokenizers==0.23.3 gguf==0.19.0 safetensors==0.8.0 accelerate
    python scripts/make-hf-goldens.py [tokenizers] [models]

It first builds the test inputs with scripts/hf_test_models.py (into a temporary folder) and
checks that the tokenizer.json files it converts without torch are byte for byte the ones
transformers' AutoTokenizer writes.
"""

import hashlib
import json
import os
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import hf_test_models as builder  # noqa: E402

GOLDEN = REPO / "tests" / "golden" / "hf"
CORPUS = REPO / "tests" / "golden" / "tokenizer" / "corpus.jsonl"


def adversarial_strings():
    """What the GGUF corpus has little of: normalization-sensitive Unicode, long digit and
    whitespace runs, special and added tokens inside text, contractions under Unicode case
    folding, lone pieces of the pipelines' own syntax."""
    s = [
        "e\u0301", "Cafe\u0301 cre\u0300me bru\u0302le\u0301e", "\u212b\u2126\u00c5", "\ufb01 \ufb02 \u2460 \u2168 \u00bd",
        "\uff21\uff22\uff23\uff11\uff12\uff13", "\u1e9b\u0323", "\u0928\u092e\u0938\u094d\u0924\u0947", "\ud55c\uad6d\uc5b4",
        "\u1100\u1161\u11a8", "\U0001F468\u200D\U0001F469\u200D\U0001F467", "\U0001F44D\U0001F3FD", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
        "\u05e9\u05dc\u05d5\u05dd", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u3053\u3093\u306b\u3061\u306f\u30ab\u30bf\u30ab\u30ca",
        "1234567890" * 12, "3.14159265358979323846264338327950288419716939937510", "١٢٣٤٥٦٧٨٩٠", "\u0967\u0968\u0969", "12,345,678.90 $ 1e-9",
        " " * 40, "\t" * 17, "\n" * 9, "\r\n" * 7, " \n \n  \n\t \r", "\u00a0\u00a0x\u00a0", "\u3000\u3000y", "a\u0085b\u2028c\u2029d",
        "word" + " " * 25 + "word", "  trailing   ", "\u200b\u200c\u200d\ufeff",
        "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "'\u017f '\u212a", "don't I'LL we'Ve", "''''", "'",
        "<|im_start|>user\nhi<|im_end|>", "x<|im_end|>y", "<|endoftext|><|endoftext|>", "<|begin_of_text|>Hi<|eot_id|>",
        "<s>[INST] hi [/INST]</s>", "<unk><s></s>", " <s> ", "<<s>>", "<|im_start", "im_end|>",
        "a <mask> b", "a<mask>b", "a   <mask>   b", "x [END]   y", "x[END]\n\ny", "  <both>  ", "<think>hmm</think>",
        "cat", "a cat sat", "concatenate", "cats", "_cat_", "New York", "new york", "NewYork New  York",
        "\u2581", "\u2581\u2581x", "\u2581hello world", "<0x41>", "<0xZZ>", "\u0120\u010a", "a-b--c---d", "1-2-3",
        "x|y||z", "a.b,c;d.", "one. two, three; four", "tab\tsep\tvalues", "\x00nul", "\x7f\x1b[0m",
        "\ud7ff\ue000\uffff", "\U0010ffff", "x" * 3000, "ab" * 800, ("The quick brown fox. " * 40).strip(),
    ]
    rng = random.Random(11)
    pieces = ["a", "Z", "1", "23", " ", "  ", "\n", "\t", "'s", "-", "|", ".", "<mask>", "[END]", "cat", "\u00e9",
              "e\u0301", "\u4e2d", "\U0001F600", "<|im_end|>", "<s>", "\u2581", "_"]
    for _ in range(40):
        s.append("".join(rng.choice(pieces) for _ in range(rng.randint(5, 30))))
    return s


def write_adversarial():
    lines = []
    for i, text in enumerate(adversarial_strings()):
        lines.append(json.dumps({"id": i, "hex": text.encode("utf-8").hex(), "text": text}, ensure_ascii=False))
    (GOLDEN / "adversarial.jsonl").write_text("\n".join(lines) + "\n")


def golden_strings():
    """(corpus strings, adversarial strings) as bytes, in the order the test reads them."""
    corpus = [bytes.fromhex(json.loads(line)["hex"]) for line in CORPUS.read_text().split("\n") if line.strip()]
    adversarial = [bytes.fromhex(json.loads(line)["hex"])
                   for line in (GOLDEN / "adversarial.jsonl").read_text().split("\n") if line.strip()]
    return corpus, adversarial


def tokenizer_goldens(inputs):
    import tokenizers
    from tokenizers import Tokenizer

    corpus, adversarial = golden_strings()
    out_dir = GOLDEN / "tokenizers"
    out_dir.mkdir(parents=True, exist_ok=True)
    for variant in sorted(p.name for p in (inputs / "tokenizers").iterdir() if not p.name.startswith(".")):
        path = inputs / "tokenizers" / variant / "tokenizer.json"
        tok = Tokenizer.from_file(str(path))
        lines = [json.dumps({"meta": {"variant": variant, "tokenizer_json_sha256": builder.sha256_file(path),
                                      "tokenizers": tokenizers.__version__}})]
        for source, strings in (("corpus", corpus), ("adversarial", adversarial)):
            for i, raw in enumerate(strings):
                # The library takes str: invalid bytes become U+FFFD as Python decodes them.
                text = raw.decode("utf-8", errors="replace")
                tok.encode_special_tokens = True
                plain = tok.encode(text, add_special_tokens=True).ids
                tok.encode_special_tokens = False
                special = tok.encode(text, add_special_tokens=True).ids
                lines.append(json.dumps({"source": source, "id": i, "plain": plain, "special": special,
                                         "decode": tok.decode(special, skip_special_tokens=False),
                                         "decode_skip": tok.decode(special, skip_special_tokens=True)},
                                        ensure_ascii=False))
        (out_dir / f"{variant}.jsonl").write_text("\n".join(lines) + "\n")
        print(f"make-hf-goldens: {variant}: {len(lines) - 1} strings", file=sys.stderr)


def check_conversion_matches_autotokenizer(inputs):
    """The torch-free conversion (what CI runs) writes what AutoTokenizer writes."""
    from transformers import AutoTokenizer

    for name, path in builder.VOCABS.items():
        with tempfile.TemporaryDirectory() as tmp:
            AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name).save_pretrained(tmp)
            for f in sorted(os.listdir(tmp)):
                mine = inputs / "tokenizers" / ".converted" / name / f
                if not mine.exists() or mine.read_bytes() != (Path(tmp) / f).read_bytes():
                    raise SystemExit(f"make-hf-goldens: {name}/{f} differs between AutoTokenizer and the builder")
    print("make-hf-goldens: the torch-free conversion matches AutoTokenizer", file=sys.stderr)


def main():
    parts = set(sys.argv[1:]) or {"tokenizers", "models"}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp)
        if "tokenizers" in parts:
            write_adversarial()
            builder.build_tokenizers(inputs)
            tokenizer_goldens(inputs)
            try:
                import torch  # noqa: F401
                check_conversion_matches_autotokenizer(inputs)
            except ImportError:
                print("make-hf-goldens: no torch here; the AutoTokenizer comparison is skipped", file=sys.stderr)
        if "models" in parts:
            import hf_model_goldens  # noqa: PLC0415 - needs torch

            hf_model_goldens.main(inputs)


if __name__ == "__main__":
    main()
