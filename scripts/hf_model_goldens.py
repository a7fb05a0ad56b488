"""The model half of scripts/make-hf-goldens.py (needs PyTorch, transformers and accelerate).

SmolLM2 (tests/golden/hf/smollm2/): transformers loads the default GGUF in float32 and saves
it with save_pretrained in float32, in bfloat16 and in bfloat16 shards. Written here: its
config.json files, generation_config.json, the SHA-256 of every tensor it saved (which
scripts/hf_test_models.py checks its torch-free directories against), and transformers'
float32 forward on the golden prompts: the last position's logits (<case>.<dtype>.logits.f32)
and 32 greedy tokens with the margin between the two best logits at each step.

Gemma 3 270M (tests/golden/hf/gemma3/): the same for the Q4_K_M GGUF (scripts/fetch-model
gemma3), in float32 only, on the Gemma goldens' prompts (two of them longer than the 512-token
window).

Tiny models (tests/golden/hf/tiny-*/): random weights at tiny shapes, saved by transformers
(committed whole: a few hundred KB), covering what SmolLM2 does not: Llama 3 rope scaling and
an untied head in float32, Qwen2's QKV biases with YaRN and tied embeddings in bfloat16,
Mistral in float16, Gemma 3 with an 8-token window, linear RoPE scaling on its global layers and
a query scale other than head_dim (what the 4B-27B checkpoints have) in bfloat16. golden.json holds the prompt, the last logits, greedy tokens and margins,
and the rotary inverse frequencies transformers computes (folio derives its own from
config.json).
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

import hf_test_models as builder

GOLDEN = builder.GOLDEN
MODEL_GOLDEN = builder.REPO / "tests" / "golden" / "model" / "smollm2_q4_1.json"
GEMMA_GOLDEN = builder.REPO / "tests" / "golden" / "model" / "gemma3_270m_q4_k_m.json"
GREEDY_STEPS = 32


def log(message):
    print(f"make-hf-goldens: {message}", file=sys.stderr, flush=True)


def tensor_digests(path_dir):
    from safetensors import safe_open

    out = {}
    for file in sorted(Path(path_dir).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                t = f.get_tensor(name)
                raw = t.view(torch.uint16) if t.dtype in (torch.bfloat16, torch.float16) else t
                out[name] = builder.sha256_bytes(raw.contiguous().numpy().tobytes())
    return dict(sorted(out.items()))


@torch.no_grad()
def greedy(model, prompt_ids, steps):
    """Last-position logits of the prompt, then `steps` greedy tokens with their margins."""
    ids = torch.tensor([prompt_ids])
    out = model(ids, use_cache=True)
    first = out.logits[0, -1].float()
    past = out.past_key_values
    logits = first
    tokens, margins = [], []
    for _ in range(steps):
        top = torch.topk(logits, 2)
        token = int(top.indices[0])
        tokens.append(token)
        margins.append(float(top.values[0] - top.values[1]))
        out = model(torch.tensor([[token]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1].float()
    return first.numpy().astype(np.float32), tokens, margins


def plain_model_from_gguf(gguf, model_class, config_class):
    """transformers' float32 model of a GGUF, as a plain model of the same config: a GGUF-loaded
    model counts as quantized and refuses save_pretrained."""
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    model = model_class(config_class.from_dict(config)).to(torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    return model.eval()


def smollm2(tmp):
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    out = GOLDEN / "smollm2"
    out.mkdir(parents=True, exist_ok=True)
    model = plain_model_from_gguf(builder.DEFAULT_GGUF, LlamaForCausalLM, LlamaConfig)
    dirs = {"float32": tmp / "smollm2-f32", "bfloat16": tmp / "smollm2-bf16", "sharded": tmp / "smollm2-bf16-sharded"}
    model.save_pretrained(str(dirs["float32"]))
    model.to(torch.bfloat16).save_pretrained(str(dirs["bfloat16"]))
    model.save_pretrained(str(dirs["sharded"]), max_shard_size="100MB")
    digests = {dtype: tensor_digests(dirs[dtype]) for dtype in ("float32", "bfloat16")}
    if tensor_digests(dirs["sharded"]) != digests["bfloat16"]:
        raise SystemExit("make-hf-goldens: the shards hold other tensors than the bfloat16 file")
    (out / "tensors.json").write_text(json.dumps(digests, indent=1) + "\n")
    for dtype in ("float32", "bfloat16"):
        shutil.copy(dirs[dtype] / "config.json", out / f"config.{dtype}.json")
    shutil.copy(dirs["float32"] / "generation_config.json", out / "generation_config.json")

    # The torch-free builder must produce exactly these tensors.
    _, tensors, _, _ = builder.read_default_model()
    for dtype in ("float32", "bfloat16"):
        if builder.tensor_digests(tensors, dtype) != digests[dtype]:
            raise SystemExit(f"make-hf-goldens: hf_test_models.py's {dtype} tensors differ from transformers'")
    log("the torch-free SmolLM2 directories hold transformers' tensors")

    cases = json.loads(MODEL_GOLDEN.read_text())["cases"]
    golden = {"reference": f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
                           "float32 forward (bfloat16 weights widened)", "cases": {}}
    for dtype in ("float32", "bfloat16"):
        m = AutoModelForCausalLM.from_pretrained(str(dirs[dtype]), dtype=torch.float32).eval()
        for case in cases:
            logits, tokens, margins = greedy(m, case["prompt_ids"], GREEDY_STEPS)
            logits.tofile(out / f"{case['name']}.{dtype}.logits.f32")
            entry = golden["cases"].setdefault(case["name"], {"prompt_ids": case["prompt_ids"]})
            entry[dtype] = {"generated_ids": tokens, "generated_margins": margins}
            log(f"smollm2 {dtype} {case['name']}: {len(case['prompt_ids'])} prompt tokens")
    (out / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")


def gemma3(tmp):
    from transformers import AutoModelForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig

    import hf_gemma3_dir

    out = GOLDEN / "gemma3"
    out.mkdir(parents=True, exist_ok=True)
    gguf = builder.VOCABS["gemma3"]
    model = plain_model_from_gguf(gguf, Gemma3ForCausalLM, Gemma3TextConfig)
    saved = tmp / "gemma3-f32"
    model.save_pretrained(str(saved))
    digests = {"float32": tensor_digests(saved)}
    (out / "tensors.json").write_text(json.dumps(digests, indent=1) + "\n")
    shutil.copy(saved / "config.json", out / "config.float32.json")
    shutil.copy(saved / "generation_config.json", out / "generation_config.json")
    if builder.tensor_digests(hf_gemma3_dir.read_gemma3(gguf), "float32") != digests["float32"]:
        raise SystemExit("make-hf-goldens: hf_gemma3_dir.py's tensors differ from transformers'")
    log("the torch-free Gemma 3 directory holds transformers' tensors")

    cases = json.loads(GEMMA_GOLDEN.read_text())["cases"]
    golden = {"reference": f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
                           "float32 forward of the float32 directory", "cases": {}}
    m = AutoModelForCausalLM.from_pretrained(str(saved), dtype=torch.float32).eval()
    for case in cases:
        logits, tokens, margins = greedy(m, case["prompt_ids"], GREEDY_STEPS)
        logits.tofile(out / f"{case['name']}.float32.logits.f32")
        golden["cases"][case["name"]] = {"prompt_ids": case["prompt_ids"],
                                         "float32": {"generated_ids": tokens, "generated_margins": margins}}
        log(f"gemma3 {case['name']}: {len(case['prompt_ids'])} prompt tokens")
    (out / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")


def randomize(model, seed):
    """Weights large enough for clear argmaxes, biases and norms not at their initial values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def tiny_models():
    from transformers import Gemma3TextConfig, LlamaConfig, MistralConfig, Qwen2Config

    common = dict(vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5)
    return {
        "tiny-llama3": (LlamaConfig(**common, tie_word_embeddings=False,
                                    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                     "original_max_position_embeddings": 64}),
                        torch.float32),
        "tiny-qwen2": (Qwen2Config(**common, tie_word_embeddings=True,
                                   rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                    "original_max_position_embeddings": 64}),
                       torch.bfloat16),
        "tiny-mistral": (MistralConfig(**common, tie_word_embeddings=False, sliding_window=4096,
                                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                         torch.float16),
        # Six layers, a global one every third; 16-wide heads and a query scale of 24.
        "tiny-gemma3": (Gemma3TextConfig(**{**common, "num_hidden_layers": 6}, head_dim=16, sliding_window=8,
                                         layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
                                         query_pre_attn_scalar=24, tie_word_embeddings=False,
                                         rope_parameters={
                                             "full_attention": {"rope_type": "linear", "factor": 4.0,
                                                                "rope_theta": 1000000.0},
                                             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
                        torch.bfloat16),
    }


def tiny():
    from transformers import AutoModelForCausalLM

    for seed, (name, (config, dtype)) in enumerate(tiny_models().items()):
        out = GOLDEN / name
        if out.exists():
            shutil.rmtree(out)
        model = AutoModelForCausalLM.from_config(config).to(torch.float32).eval()
        randomize(model, seed + 1)
        model.to(dtype).save_pretrained(str(out))
        m = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
        rng = np.random.default_rng(seed + 7)
        prompt = [int(x) for x in rng.integers(0, config.vocab_size, 24)]
        logits, tokens, margins = greedy(m, prompt, 16)
        rotary = m.model.rotary_emb
        # Gemma 3 keeps one set of frequencies per layer type (the global layers').
        inv_freq = getattr(rotary, "inv_freq", None)
        if inv_freq is None:
            inv_freq = getattr(rotary, "full_attention_inv_freq")
        inv_freq = inv_freq.double().tolist()
        scaling = float(getattr(rotary, "attention_scaling", getattr(rotary, "full_attention_attention_scaling", 1.0)))
        (out / "golden.json").write_text(json.dumps({
            "dtype": str(dtype).removeprefix("torch."), "prompt_ids": prompt, "last_logits": logits.tolist(),
            "generated_ids": tokens, "generated_margins": margins, "inv_freq": inv_freq,
            "attention_scaling": scaling}, indent=1) + "\n")
        log(f"{name}: {dtype}, min margin {min(margins):.3f}")


def main(inputs):
    parts = set(sys.argv[2:]) or {"smollm2", "gemma3", "tiny"}
    with tempfile.TemporaryDirectory() as tmp:
        if "smollm2" in parts:
            smollm2(Path(tmp))
        if "gemma3" in parts:
            gemma3(Path(tmp))
    if "tiny" in parts:
        tiny()
