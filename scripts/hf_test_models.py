#!/usr/bin/env python3
"""Builds the Hugging Face test inputs that CI needs, without PyTorch:

  OUT/tokenizers/<variant>/   tokenizer.json (+ tokenizer_config.json, chat_template.jinja)
  OUT/smollm2-f32/            the default model as a Hugging Face directory, float32
  OUT/smollm2-bf16/           the same in bfloat16
  OUT/smollm2-bf16-sharded/   the same in three shards with model.safetensors.index.json
  OUT/smollm2-bf16.gguf       the bfloat16 weights as a GGUF (for the bit-identical check)
  OUT/gemma3-f32/             Gemma 3 270M as a Hugging Face directory, float32
                              (scripts/hf_gemma3_dir.py)

Tokenizers: transformers' own GGUF -> tokenizer.json converter on the vocabularies
scripts/fetch-model downloads (transformers reads GGUF metadata through a module that imports
torch; here that module runs with a stand-in for the few torch names it mentions at import, and
nothing of torch is called), then variants made with the `tokenizers` API in the shapes real
checkpoints use (SmolLM2's digit splitting, Llama 3's BOS template and ignore_merges, Qwen2's NFC
and string merges, Llama 2's legacy normalizer, extra added tokens, every split behavior), plus
two real tokenizer.json files that the litellm wheel ships (Claude's and DeepSeek's).

Models: the default GGUF dequantized with the `gguf` package, Q and K rows put back in Hugging
Face's order (the inverse of llama.cpp's converter), written with `safetensors`. Each tensor's
SHA-256 is checked against tests/golden/hf/smollm2/tensors.json, which scripts/make-hf-goldens.py
wrote from the directory transformers itself saved, so the directory here is that directory.

    python scripts/hf_test_models.py [--out DIR] [--only tokenizers|models]

DIR defaults to $FOLIO_MODELS_DIR/hf (or ~/.cache/folio/models/hf). A stamp holding this script's
hash skips work already done.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import types
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "hf"
MODELS = Path(os.environ.get("FOLIO_MODELS_DIR") or Path.home() / ".cache" / "folio" / "models")
DEFAULT_GGUF = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
VOCABS = {
    "smollm2": DEFAULT_GGUF,
    "llama-bpe": MODELS / "vocab" / "ggml-vocab-llama-bpe.gguf",
    "qwen2": MODELS / "vocab" / "ggml-vocab-qwen2.gguf",
    "llama-spm": MODELS / "vocab" / "ggml-vocab-llama-spm.gguf",
    "gemma3": MODELS / "gemma-3-270m-q4_k_m.gguf",
}
LITELLM = ("litellm==1.110.2", "9d94d1c7d524b6fd10c14f9c8c6c4f0ac31705f9964ac59dcfd8337c046d8917")
LITELLM_FILES = {"anthropic": "anthropic_tokenizer.json", "deepseek": "deepseek_tokenizer.json"}
SHARD_BYTES = 100 * 1000 * 1000  # the sharded directory: 3 shards of the 269 MB bfloat16 model


def log(message):
    print(f"hf_test_models: {message}", file=sys.stderr, flush=True)


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- tokenizers ------------------------------------------------------------------------------

def import_transformers_gguf_reader():
    """transformers.integrations.gguf.reader, importable without torch: its metadata reader is
    numpy and struct only, but the module names torch dtypes at import time."""
    try:
        import torch  # noqa: F401
        return  # the real one imports fine
    except ImportError:
        pass
    import importlib.util
    import transformers.integrations.gguf as package

    path = Path(package.__file__).parent / "reader.py"
    source = path.read_text()
    stub = types.SimpleNamespace(float32=types.SimpleNamespace(itemsize=4), float16=types.SimpleNamespace(itemsize=2),
                                 bfloat16=types.SimpleNamespace(itemsize=2), dtype=object, Tensor=object,
                                 device=object)
    source = source.replace("import torch\n", "").replace("from .dequant import GGML_BLOCK, GGML_NAME\n", "")
    module = types.ModuleType("transformers.integrations.gguf.reader")
    module.__file__ = str(path)
    module.torch = stub
    module.GGML_BLOCK = {}
    module.GGML_NAME = {}
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - transformers' own code
    sys.modules["transformers.integrations.gguf.reader"] = module
    del importlib


# The tokenizer class AutoTokenizer picks for each vocabulary (it decides from the model config,
# which transformers reads with torch); scripts/make-hf-goldens.py checks that AutoTokenizer's
# files and these are the same bytes.
TOKENIZER_CLASS = {"smollm2": "TokenizersBackend", "llama-bpe": "TokenizersBackend", "qwen2": "Qwen2Tokenizer",
                   "llama-spm": "TokenizersBackend", "gemma3": "GemmaTokenizer"}


def convert_vocab(name, gguf_path, out_dir):
    """transformers' GGUF tokenizer conversion, saved as transformers saves it."""
    import_transformers_gguf_reader()
    import transformers

    cls = getattr(transformers, TOKENIZER_CLASS[name])
    tokenizer = cls.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tokenizer.save_pretrained(str(out_dir))


def edit_tokenizer(src_dir, out_dir, edit):
    """Copies a converted tokenizer and rewrites its tokenizer.json through `tokenizers`."""
    from tokenizers import Tokenizer

    shutil.copytree(src_dir, out_dir, dirs_exist_ok=True)
    tok = Tokenizer.from_file(str(out_dir / "tokenizer.json"))
    tok = edit(tok) or tok
    tok.save(str(out_dir / "tokenizer.json"))


def with_json(tok, change):
    """A tokenizer rebuilt from its JSON after `change(json dict)` (for fields the Python API
    does not expose, such as the merges' serialized form)."""
    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    change(spec)
    return Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))


def tokenizer_variants():
    """name -> (base converted vocabulary, edit or None)."""
    from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors

    def smollm2_digits(tok):
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])

    def llama3_bos(tok):
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
            special_tokens=[("<|begin_of_text|>", 128000)])
        return with_json(tok, lambda j: j["model"].update(ignore_merges=True))

    def qwen2_nfc(tok):
        tok.normalizer = normalizers.NFC()
        return with_json(tok, lambda j: j["model"].update(merges=[" ".join(m) for m in j["model"]["merges"]]))

    def llama2_legacy(tok):
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.pre_tokenizer = None
        return with_json(tok, lambda j: j["model"].update(unk_token="<unk>"))

    def metaspace_always(tok):
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
        tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                         decoders.Metaspace(replacement="\u2581", prepend_scheme="always")])

    def added(tok):
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False),
                                AddedToken("[END]", rstrip=True, special=True, normalized=False),
                                AddedToken("<both>", lstrip=True, rstrip=True, special=True, normalized=False)])
        tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                        AddedToken("cat", single_word=True, special=False, normalized=True),
                        AddedToken("New York", special=False, normalized=True)])

    def splits(tok):
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split("-", behavior="merged_with_next"),
            pre_tokenizers.Split(Regex(r"[0-9]+"), behavior="contiguous"),
            pre_tokenizers.Split(Regex(r"[.,;]"), behavior="merged_with_previous"),
            pre_tokenizers.Split(Regex(r"\|"), behavior="removed"),
            pre_tokenizers.Split(Regex(r"\w+"), behavior="isolated", invert=True),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
        ])

    return {
        "smollm2": ("smollm2", None),
        "smollm2-digits": ("smollm2", smollm2_digits),
        "llama-bpe": ("llama-bpe", None),
        "llama-bpe-bos": ("llama-bpe", llama3_bos),
        "qwen2": ("qwen2", None),
        "qwen2-nfc": ("qwen2", qwen2_nfc),
        "llama-spm": ("llama-spm", None),
        "llama-spm-legacy": ("llama-spm", llama2_legacy),
        "llama-spm-metaspace": ("llama-spm", metaspace_always),
        "added-tokens": ("smollm2", added),
        "split-behaviors": ("smollm2", splits),
        "gemma3": ("gemma3", None),
    }


def fetch_litellm(out):
    """The two tokenizer.json files inside the litellm wheel (PyPI), checked by SHA-256."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", LITELLM[0], "-d", tmp],
                       check=True)
        wheels = list(Path(tmp).glob("litellm-*.whl"))
        if len(wheels) != 1 or sha256_file(wheels[0]) != LITELLM[1]:
            raise SystemExit(f"hf_test_models: the {LITELLM[0]} wheel is missing or its SHA-256 differs")
        with zipfile.ZipFile(wheels[0]) as z:
            for name, member in LITELLM_FILES.items():
                target = out / "tokenizers" / name
                target.mkdir(parents=True, exist_ok=True)
                (target / "tokenizer.json").write_bytes(z.read(f"litellm/litellm_core_utils/tokenizers/{member}"))


def build_tokenizers(out):
    base = out / "tokenizers" / ".converted"
    for name, path in VOCABS.items():
        if not (base / name / "tokenizer.json").exists():
            log(f"converting the {name} vocabulary with transformers")
            convert_vocab(name, path, base / name)
    for name, (source, edit) in tokenizer_variants().items():
        target = out / "tokenizers" / name
        if edit is None:
            shutil.copytree(base / source, target, dirs_exist_ok=True)
        else:
            edit_tokenizer(base / source, target, edit)
    fetch_litellm(out)
    # The goldens were made from these very files (their first line holds the SHA-256).
    for golden in sorted((GOLDEN / "tokenizers").glob("*.jsonl")):
        meta = json.loads(golden.read_text().split("\n", 1)[0])["meta"]
        path = out / "tokenizers" / meta["variant"] / "tokenizer.json"
        if not path.exists() or sha256_file(path) != meta["tokenizer_json_sha256"]:
            raise SystemExit(f"hf_test_models: {path} is not the file {golden.name} was made from "
                             "(different transformers / tokenizers versions?)")
    log(f"tokenizers in {out / 'tokenizers'}")


# --- model directories -----------------------------------------------------------------------

def to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (what torch's .to(torch.bfloat16) does)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def hf_rows(w, heads):
    """GGUF Q / K rows (each head's halves interleaved) -> Hugging Face's order."""
    rows, cols = w.shape
    return w.reshape(heads, rows // heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def gguf_rows(w, heads):
    """The inverse: llama.cpp's permutation."""
    rows, cols = w.shape
    return w.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def dequantized_tensors(reader):
    """(GGUF name, float32 array in Hugging Face's (rows, cols) shape) of every tensor."""
    from gguf.quants import dequantize

    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape)]
        yield t.name, dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)


def read_default_model():
    """(metadata reader, {hf name: float32 array}, {hf name: gguf name}) of the default GGUF."""
    from gguf import GGUFReader

    reader = GGUFReader(str(DEFAULT_GGUF))
    heads = int(reader.fields["llama.attention.head_count"].parts[-1][0])
    kv_heads = int(reader.fields["llama.attention.head_count_kv"].parts[-1][0])
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                 "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
                 "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    tensors, origin = {}, {}
    for gguf_name, values in dequantized_tensors(reader):
        if gguf_name.startswith("blk."):
            _, layer, part, _ = gguf_name.split(".")
            name = f"model.layers.{layer}.{per_layer[part]}.weight"
            if part == "attn_q":
                values = hf_rows(values, heads)
            elif part == "attn_k":
                values = hf_rows(values, kv_heads)
        else:
            name = names[gguf_name]
        tensors[name] = np.ascontiguousarray(values)
        origin[name] = gguf_name
    return reader, tensors, origin, (heads, kv_heads)


def write_safetensors(path, tensors, dtype):
    from safetensors import TensorSpec, serialize_file

    keep = {}
    specs = {}
    for name in sorted(tensors):
        data = tensors[name] if dtype == "float32" else to_bf16_bits(tensors[name])
        data = np.ascontiguousarray(data)
        keep[name] = data
        specs[name] = TensorSpec(dtype=dtype, shape=list(data.shape), data_ptr=data.ctypes.data, data_len=data.nbytes)
    serialize_file(specs, str(path), metadata={"format": "pt"})


def tensor_digests(tensors, dtype):
    return {name: sha256_bytes((tensors[name] if dtype == "float32" else to_bf16_bits(tensors[name])).tobytes())
            for name in sorted(tensors)}


def copy_tokenizer(out, target):
    """The default model's tokenizer (transformers' conversion), converting it if need be."""
    source = out / "tokenizers" / ".converted" / "smollm2"
    if not (source / "tokenizer.json").exists():
        try:
            convert_vocab("smollm2", DEFAULT_GGUF, source)
        except Exception as e:  # noqa: BLE001 - another transformers version: the weights still serve
            log(f"warning: no tokenizer for {target.name} ({e})")
            return
    for f in source.iterdir():
        shutil.copy(f, target / f.name)


def build_models(out):
    reader, tensors, origin, heads = read_default_model()
    expected = json.loads((GOLDEN / "smollm2" / "tensors.json").read_text())
    for dtype in ("float32", "bfloat16"):
        got = tensor_digests(tensors, dtype)
        if got != expected[dtype]:
            bad = sorted(k for k in set(got) | set(expected[dtype]) if got.get(k) != expected[dtype].get(k))
            raise SystemExit(f"hf_test_models: {dtype} tensors differ from what transformers saved: {bad[:5]}")
    for name, dtype in (("smollm2-f32", "float32"), ("smollm2-bf16", "bfloat16")):
        target = out / name
        target.mkdir(parents=True, exist_ok=True)
        log(f"writing {target}")
        write_safetensors(target / "model.safetensors", tensors, dtype)
        shutil.copy(GOLDEN / "smollm2" / f"config.{dtype}.json", target / "config.json")
        shutil.copy(GOLDEN / "smollm2" / "generation_config.json", target / "generation_config.json")
        copy_tokenizer(out, target)

    # Shards as transformers cuts them: tensors in name order, a new shard when the next would
    # pass the limit.
    target = out / "smollm2-bf16-sharded"
    target.mkdir(parents=True, exist_ok=True)
    log(f"writing {target}")
    shards, current, size = [], {}, 0
    for name in sorted(tensors):
        nbytes = tensors[name].size * 2
        if current and size + nbytes > SHARD_BYTES:
            shards.append(current)
            current, size = {}, 0
        current[name] = tensors[name]
        size += nbytes
    shards.append(current)
    weight_map = {}
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(target / file, shard, "bfloat16")
        weight_map.update({name: file for name in shard})
    total = sum(t.size * 2 for t in tensors.values())
    (target / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    shutil.copy(GOLDEN / "smollm2" / "config.bfloat16.json", target / "config.json")
    shutil.copy(GOLDEN / "smollm2" / "generation_config.json", target / "generation_config.json")
    copy_tokenizer(out, target)

    write_bf16_gguf(reader, tensors, origin, heads, out / "smollm2-bf16.gguf")

    import hf_gemma3_dir  # noqa: PLC0415 - beside this script

    hf_gemma3_dir.build(sys.modules[__name__], out, VOCABS["gemma3"], GOLDEN / "gemma3",
                        REPO / "tests" / "golden" / "chat" / "gemma-3-it.jinja")


def write_bf16_gguf(reader, tensors, origin, heads, path):
    """The default model's metadata with every tensor as bfloat16 (norms too): the same numbers
    as smollm2-bf16/, in GGUF's layout."""
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter

    log(f"writing {path}")
    writer = GGUFWriter(str(path), "llama")
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name in ("general.architecture", "general.file_type"):
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            sub = field.types[-1]
            values = [field.parts[i].tobytes().decode("utf-8") if sub == GGUFValueType.STRING
                      else field.parts[i][0].item() for i in field.data]
            writer.add_array(field.name, values)
        elif kind == GGUFValueType.STRING:
            writer.add_string(field.name, field.parts[-1].tobytes().decode("utf-8"))
        else:
            writer.add_key_value(field.name, field.parts[-1][0].item(), kind)
    writer.add_file_type(32)  # LLAMA_FTYPE_MOSTLY_BF16
    q_heads, kv_heads = heads
    for name in sorted(tensors, key=lambda n: list(origin).index(n)):
        values = tensors[name]
        if name.endswith("self_attn.q_proj.weight"):
            values = gguf_rows(values, q_heads)
        elif name.endswith("self_attn.k_proj.weight"):
            values = gguf_rows(values, kv_heads)
        bits = to_bf16_bits(values)
        writer.add_tensor(origin[name], bits, raw_shape=list(values.shape), raw_dtype=GGMLQuantizationType.BF16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=MODELS / "hf")
    parser.add_argument("--only", choices=["tokenizers", "models"])
    args = parser.parse_args()
    out = args.out
    stamp = out / ".stamp"
    inputs = [Path(__file__), REPO / "scripts" / "hf_gemma3_dir.py", GOLDEN / "smollm2" / "tensors.json",
              GOLDEN / "gemma3" / "tensors.json"]
    want = sha256_bytes(b"".join(p.read_bytes() for p in inputs if p.exists()))
    if args.only is None and stamp.exists() and stamp.read_text() == want:
        log(f"{out} is up to date")
        return
    out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "tokenizers"):
        build_tokenizers(out)
    if args.only in (None, "models"):
        build_models(out)
    if args.only is None:
        stamp.write_text(want)


if __name__ == "__main__":
    main()
