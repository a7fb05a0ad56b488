"""Gemma 3 270M as a Hugging Face directory, without PyTorch (scripts/hf_test_models.py calls it).

The Q4_K_M GGUF (scripts/fetch-model gemma3) dequantized to float32 with the `gguf` package and
renamed to transformers' Gemma3ForCausalLM names. llama.cpp's converter stores Gemma's norms as
1 + w; transformers' GGUF loader takes the one back off (w - 1 in float32), and so does this.
Q and K keep their rows: Gemma rotates halves, and the converter does not permute them.

Every tensor's SHA-256 is checked against tests/golden/hf/gemma3/tensors.json, which
scripts/hf_model_goldens.py wrote from the directory transformers itself saved from the same
GGUF, so the directory written here is that directory. config.json and generation_config.json
are transformers' own (copied from the goldens); the tokenizer is transformers' conversion of
the GGUF vocabulary, and Gemma's published chat template goes beside it, since the GGUF (a
conversion of the base model) carries none.
"""

import json
import shutil

import numpy as np

GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "post_ffw_norm": "post_feedforward_layernorm",
}


def read_gemma3(path):
    """{hf name: float32 array} of the Gemma 3 GGUF at `path`."""
    from gguf import GGUFReader

    from hf_test_models import dequantized_tensors

    tensors = {}
    for gguf_name, values in dequantized_tensors(GGUFReader(str(path))):
        if gguf_name.startswith("blk."):
            _, layer, part, _ = gguf_name.split(".")
            name = f"model.layers.{layer}.{LAYER_NAMES[part]}.weight"
        else:
            name = GLOBAL_NAMES[gguf_name]
        if name.endswith("norm.weight"):
            values = values - 1  # the converter's 1 + w, taken back as transformers does
        tensors[name] = np.ascontiguousarray(values)
    return tensors


def build(builder, out, gguf_path, golden_dir, chat_template):
    """Writes out/gemma3-f32 (float32) after checking the tensors against transformers'."""
    tensors = read_gemma3(gguf_path)
    expected = json.loads((golden_dir / "tensors.json").read_text())["float32"]
    got = builder.tensor_digests(tensors, "float32")
    if got != expected:
        bad = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
        raise SystemExit(f"hf_test_models: Gemma 3 tensors differ from what transformers saved: {bad[:5]}")
    target = out / "gemma3-f32"
    target.mkdir(parents=True, exist_ok=True)
    builder.log(f"writing {target}")
    builder.write_safetensors(target / "model.safetensors", tensors, "float32")
    shutil.copy(golden_dir / "config.float32.json", target / "config.json")
    shutil.copy(golden_dir / "generation_config.json", target / "generation_config.json")
    source = out / "tokenizers" / "gemma3"
    if (source / "tokenizer.json").exists():
        for f in source.iterdir():
            shutil.copy(f, target / f.name)
    shutil.copy(chat_template, target / "chat_template.jinja")
