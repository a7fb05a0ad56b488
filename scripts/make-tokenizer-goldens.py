#!/usr/bin/env python3
"""Writes the tokenizer goldens that tests/text/tokenizer_golden_test.cpp checks folio against.

  tests/golden/tokenizer/corpus.jsonl   the test strings, as hex so that invalid UTF-8 survives
  tests/golden/tokenizer/<vocab>.jsonl  llama.cpp's ids for every string, one line per string,
                                        after a first line with the vocabulary's special ids

The reference is llama.cpp as vendored in llama-cpp-python 0.3.36 (pip install
llama-cpp-python==0.3.36). Each string is tokenized with add_special on (BOS/EOS as the model's
metadata says) and parse_special both off ("plain") and on ("special").

The corpus is a fixed list plus seeded random mixes, so rerunning gives the same files.

    python scripts/make-tokenizer-goldens.py [--models-dir DIR] [--corpus-only]

DIR defaults to $FOLIO_MODELS_DIR or ~/.cache/folio/models; vocabularies are looked up there and
in its vocab/ subfolder (scripts/fetch-model puts them there).
"""

import argparse
import json
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOLDEN_DIR = REPO / "tests" / "golden" / "tokenizer"

# golden name -> file name (looked up in the models dir, then in its vocab/ subfolder)
VOCABS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "llama-bpe": "ggml-vocab-llama-bpe.gguf",
    "qwen2": "ggml-vocab-qwen2.gguf",
    "llama-spm": "ggml-vocab-llama-spm.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",  # scripts/fetch-model gemma3
}

PYTHON_CODE = '''def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

if __name__ == "__main__":
    print(f"{fib(10)=}")  # 55
'''

CPP_CODE = '''#include <vector>
template <typename T>
T sum(const std::vector<T>& xs) {
\tT total{};
\tfor (const auto& x : xs) total += x;  // accumulate
\treturn total;
}
int main() { return sum<int>({1, 2, 3}) == 6 ? 0 : 1; }
'''

JSON_CODE = '{"name": "folio", "version": [0, 1, 2], "nested": {"ok": true, "pi": 3.14159, "none": null}, "list": ["a", "b"]}'

HTML_CODE = '''<!DOCTYPE html>
<html lang="en">
  <head><meta charset="utf-8"><title>Test &amp; check</title></head>
  <body>
    <p class="intro">Hello,&nbsp;<b>world</b>!</p>
    <!-- a comment -->
  </body>
</html>'''

SHELL_CODE = 'for f in *.txt; do echo "$f" | tr a-z A-Z >> out.log 2>&1; done && exit 0'
SQL_CODE = "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC LIMIT 10;"
RUST_CODE = 'fn main() {\n    let v: Vec<u32> = (1..=5).map(|x| x * x).collect();\n    println!("{:?}", v);\n}'

ENGLISH = ("The quick brown fox jumps over the lazy dog. It's 3:45 p.m. on Tuesday, "
           "and we've got 1,234 reasons to believe that tokenizers aren't trivial!")


def s(text: str) -> bytes:
    return text.encode("utf-8")


def fixed_corpus() -> list:
    """(kind, bytes) pairs, written by hand to cover each case the tokenizers treat specially."""
    c = []

    def add(kind, *items):
        for item in items:
            c.append((kind, item if isinstance(item, bytes) else s(item)))

    add("empty", "")
    add("whitespace", " ", "  ", "   ", "\t", "\t\t", " \t ", "\t \t", "  leading", "trailing  ",
        "   both   ", "a  b", "a   b    c", "x \t y", "\u00a0nbsp\u00a0", "\u3000ideographic space",
        "\u2009thin space", "word\u00a0\u00a0word", "\v\f", "end with space ", " " * 17,
        "tab\tseparated\tvalues", "\x1c\x1d\x1e\x1f separators", "\u200bzero\u200bwidth",
        "\u2028line\u2029para", "\u0085next line")
    add("newlines", "\n", "\n\n", "\n\n\n\n\n", "a\nb", "a\r\nb", "\r\n\r\n", "line1\nline2\n",
        " \n ", "\n  \n", "x\r\ry", "para one.\n\npara two.", "\t\n\t", "  \n\n  hi",
        "a\n\n\n\n\n\n\n\nb", "\r", "trailing newline\n", "\n leading newline", "mixed \r\n \n\r end",
        "!\n", "?!\r\n\r\n", "word\n\n\n", "  \n")
    digits = "12345678901234567890"
    add("digits", *[digits[:n] for n in range(1, 21)])
    add("digits", "0", "007", "3.14159", "1,000,000", "2024-01-15", "v1.2.3", "0x1F", "1e10", "-42",
        "+7", "100%", "$9.99", "a1b2c3", " 42", "  42", "x 123456 y", "\u0663\u0664\u0665",
        "\u2460\u2461\u2462", "\u216b", "\u00b2\u00b3", "\u09e7\u09e8\u09e9", "１２３４５", "12abc34",
        "phone: +1 (555) 010-9999")
    add("punctuation", "Hello, world!", "...", "?!", "!!!???", "(a)[b]{c}", "--", "\u2014",
        "\u201cquoted\u201d", "\u00abguillemets\u00bb", "a.b.c", "@#$%^&*", "~`|\\", "\u00bfQu\u00e9?",
        "\u00a1Hola!", "\u2026", "\u2022 bullet", ":-)", "<>", "a/b\\c", '"double"', "'single'",
        "a , b . c", " .", " ,", "x = y + z;", "-- -- --", "==>", "`backticks`")
    add("contractions", "don't", "I'm", "you're", "we've", "she'll", "he'd", "it's", "DON'T", "I'M",
        "YOU'RE", "WE'VE", "SHE'LL", "HE'D", "IT'S", "'s", "'S", "rock 'n' roll", "o'clock", "'twas",
        "y'all'd've", "Mixed'Re'Ve'Ll", "''", "' s", "can't won't shouldn't", "'ll 'd 'm 't",
        "'RE'VE", "l'amour d'un", "I'd've'", "x'S y'T")
    add("code", PYTHON_CODE, CPP_CODE, JSON_CODE, HTML_CODE, SHELL_CODE, SQL_CODE, RUST_CODE,
        "    indented = True\n        deeper = 1\n", "if (a && b || !c) { return -1; }",
        "#define MAX(a, b) ((a) > (b) ? (a) : (b))", "x += 1  # comment\ny -= 2\t# tab comment",
        "<div><span>nested</span></div>", '{"k":"v"}', "[1,2,3]", "a_b_c = d__e__f")
    add("cjk", "\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8\u3002",
        "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", "\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a",
        "\u6771\u4eac\u90fd\u6e0b\u8c37\u533a", "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
        "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.", "\uff21\uff22\uff23\uff11\uff12\uff13",
        "\u3001\u3002\u300c\u5f15\u7528\u300d", "mixed \u4e2d\u6587 and English",
        "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059\u3002\u5143\u6c17\u3067\u3059\u304b\uff1f",
        "\u9f98\u9750\u9f49", "\U00020000\U0002a6d6 ext-B")
    add("emoji", "\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",
        "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5", "\u2764\ufe0f",
        "a\U0001f600b", "\U0001f916 robots", "1\ufe0f\u20e3", "\U0001f469\U0001f3fe\u200d\U0001f4bb",
        "\U0001f525\U0001f525\U0001f525", "I \u2764\ufe0f NY \U0001f5fd", "\u263a \u2603 \u2708",
        "\U0001f9d1\u200d\U0001f91d\u200d\U0001f9d1")
    add("accents", "caf\u00e9", "cafe\u0301", "na\u00efve", "\u00c5ngstr\u00f6m", "A\u030angstro\u0308m",
        "Cr\u00e8me br\u00fbl\u00e9e", "Z\u00fcrich", "\u00f1", "n\u0303", "S\u00e3o Paulo",
        "\u0141\u00f3d\u017a", "Vi\u1ec7t Nam", "Vie\u0323\u0302t Nam", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
        "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440", "\u0130stanbul", "stra\u00dfe", "\ufb01ligature",
        "e\u0301\u0302\u0303\u0304 stacked", "\u0301 lone combining")
    add("rtl", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
        "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "Hello \u0645\u0631\u062d\u0628\u0627 world",
        "\u200fRLM mark", "\u0633\u0644\u0627\u0645 \u062f\u0646\u06cc\u0627",
        "\u0627\u0644\u0639\u062f\u062f \u0661\u0662\u0663", "\u202eoverride\u202c")
    add("scripts", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
        "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
        "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd", "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",
        "\u0532\u0561\u0580\u0565\u0582", "\u1230\u120b\u121d")
    add("invalid", b"\x80", b"\xbf", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe4\xb8", b"\xe4\xb8a",
        b"\xf0\x9f\x98", b"\xf0\x9f", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
        b"\xff", b"\xfe\xff", b"\xf8\x88\x80\x80\x80", b"hello\xffworld", b" \xff ", b"\xff\xfe\xfd",
        b"caf\xe9", b"\x80\x81\x82", b"a\x00b", b"\x00", b"\xf5x", b"\xe2\x82", b"ok \xe2\x82 ok",
        b"\xf0\x9f\x98\x80\x80", b"\xce\xbb\xce", b"\xc2\xa0\xa0", b"12\xff34")
    add("special", "<|im_start|>user\nhi<|im_end|>\n", "<|endoftext|>", "text<|endoftext|>more",
        "<|begin_of_text|>Hello", "<s>Hello</s>", "<s> space", "<unk>", "<|eot_id|>",
        "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>", "[PAD151650]",
        "<|im_start|><|im_end|>", "<|im_start", "im_start|>", "<<|im_end|>>",
        "<|reserved_special_token_5|>", "<reponame>x<file_sep>", "  <|im_start|>  ",
        "<|endoftext|><|endoftext|>", "</s>", "a</s>b", "<|im_start|>assistant\n", "<s>",
        "<|im_end|>\n<|im_start|>user\n\u4f60\u597d<|im_end|>")
    add("long", "a" * 500, "supercalifragilisticexpialidocious" * 10, "abc" * 300, "1" * 200,
        "!" * 100, " " * 100, "\n" * 50, "\u4e2d" * 100, "\U0001f600" * 40,
        "pneumonoultramicroscopicsilicovolcanoconiosis", "x" * 1000 + " end",
        "Donaudampfschifffahrtselektrizit\u00e4tenhauptbetriebswerkbauunterbeamtengesellschaft")
    add("mixed", ENGLISH, ENGLISH.upper(), "# Title\n\n- item **bold** _it_\n- [link](http://x.y/z?q=1&r=2)\n",
        "Email me at test.user+tag@example.com or call 555-0100.",
        "The price is \u20ac42.50 (\u00a336.10) \u2014 about \u00a56,300.", "C'est l'\u00e9t\u00e9, n'est-ce pas?",
        "Mix: \u4e2d\u6587, English, \u0420\u0443\u0441\u0441\u043a\u0438\u0439, \u0627\u0644\u0639\u0631\u0628\u064a\u0629, \U0001f600!",
        "user: hi\nassistant: Hello! How can I help?\n", "tl;dr \u2192 it works\u2122 \u00a9 2024")
    # Gemma's vocabulary: whole runs of spaces, tabs and newlines are tokens, so are HTML tags, its
    # turn markers and hundreds of <unusedN>; SentencePiece's own space mark U+2581 is text.
    add("gemma", "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "<bos>", "<eos>", "<pad>",
        "<bos>text<eos>", "<end_of_turn>", "<unused0><unused99>", "<start_of_image>", " " * 31, " " * 32, " " * 45,
        "\t" * 5, "\n" * 31, "a" + " " * 7 + "b", "<h1>Title</h1>\n<p>para</p>", "<table><tr><td>x</td></tr>",
        "\u2581", "\u2581\u2581hello", "hello\u2581world", " \u2581 ", "<mask>", "[@BOS@]", "<0x41>",
        "\x01\x02 control bytes", "Gr\u00fc\u00dfe aus K\u00f6ln", "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22")
    return c


def random_corpus(count: int) -> list:
    """Seeded mixes of atoms from every category, to hit their boundaries with each other."""
    rng = random.Random(20240607)
    atoms = [
        "hello", "World", "don't", "I'M", " ", "  ", "\t", "\n", "\r\n", "\n\n", "123", "4567890",
        "3.5", ",", ".", "!?", "(", ")", "{}", "\u4f60\u597d", "\u3053\u3093\u306b\u3061\u306f",
        "\ud55c\uad6d", "\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
        "caf\u00e9", "cafe\u0301", "\u0645\u0631\u062d\u0628\u0627", "\u05e9\u05dc\u05d5\u05dd", "<|im_start|>",
        "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<|begin_of_text|>", "<|eot_id|>", "'s", "'ll",
        "def", "return", "==", "->", "\u00a0", "\u3000", "\u0663", "\u2460", "x", "ABC", "\u0130",
    ]
    invalid = [b"\x80", b"\xff", b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xc0\x80", b"\xed\xa0\x80"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(2, 8)):
            if rng.random() < 0.08:
                parts.append(rng.choice(invalid))
            else:
                parts.append(s(rng.choice(atoms)))
        out.append(("random", b"".join(parts)))
    return out


def build_corpus() -> list:
    return fixed_corpus() + random_corpus(70)


def write_corpus(corpus: list) -> None:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    with open(GOLDEN_DIR / "corpus.jsonl", "w", encoding="utf-8") as f:
        for index, (kind, data) in enumerate(corpus):
            record = {"id": index, "kind": kind, "hex": data.hex()}
            try:
                record["text"] = data.decode("utf-8")  # for readers; tests use "hex"
            except UnicodeDecodeError:
                pass
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def find_vocab(models_dir: Path, file_name: str) -> Path:
    for candidate in (models_dir / file_name, models_dir / "vocab" / file_name):
        if candidate.exists():
            return candidate
    sys.exit(f"missing {file_name} under {models_dir}: run scripts/fetch-model first")


def write_goldens(corpus: list, models_dir: Path) -> None:
    import llama_cpp  # imported here so that --corpus-only needs no llama-cpp-python

    for name, file_name in VOCABS.items():
        path = find_vocab(models_dir, file_name)
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        vocab = llm._model.vocab
        n_tokens = llama_cpp.llama_vocab_n_tokens(vocab)
        meta = {
            "vocab": name,
            "file": file_name,
            "llama_cpp_python": llama_cpp.__version__,
            "n_tokens": n_tokens,
            "bos": llama_cpp.llama_vocab_bos(vocab),
            "eos": llama_cpp.llama_vocab_eos(vocab),
            "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
            "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
            "eog": [i for i in range(n_tokens) if llama_cpp.llama_vocab_is_eog(vocab, i)],
        }
        with open(GOLDEN_DIR / f"{name}.jsonl", "w", encoding="utf-8") as f:
            f.write(json.dumps({"meta": meta}) + "\n")
            for index, (_, data) in enumerate(corpus):
                plain = llm.tokenize(data, add_bos=True, special=False)
                special = llm.tokenize(data, add_bos=True, special=True)
                f.write(json.dumps({"id": index, "plain": plain, "special": special}) + "\n")
        print(f"{name}: {len(corpus)} strings -> {GOLDEN_DIR / (name + '.jsonl')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_dir = os.environ.get("FOLIO_MODELS_DIR", str(Path.home() / ".cache" / "folio" / "models"))
    parser.add_argument("--models-dir", default=default_dir)
    parser.add_argument("--corpus-only", action="store_true", help="write corpus.jsonl only")
    args = parser.parse_args()
    corpus = build_corpus()
    write_corpus(corpus)
    print(f"corpus: {len(corpus)} strings")
    if not args.corpus_only:
        write_goldens(corpus, Path(args.models_dir))


if __name__ == "__main__":
    main()
