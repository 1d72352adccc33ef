"""A tiny model a real vLLM loads on CPU, written here because no model hub is reachable: a 2-layer
LlamaForCausalLM (hidden 256, 4 heads of 64, 2 KV heads: head sizes vLLM's CPU attention takes) with random float32
weights, and a byte-level BPE tokenizer trained on a few sentences, with a ChatML chat template (vLLM's chat endpoint
refuses a model without one). What it generates is noise: the contract check compares the shape of the answers.

Run with the vLLM install's Python (numpy, safetensors and tokenizers are vLLM's own dependencies):
    python e2e/vllm/model.py DIR [POSITIONS]     (the context it takes: 512 unless given; the tier's is 32768)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE, VOCAB = 256, 2, 4, 2, 64, 512, 1024
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
          "{% endif %}")
TEXT = ["ping pong", "reasoning long context", "a stable Service name from one engine to another",
        "the quick brown fox jumps over the lazy dog", "hello world"] * 50


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tensors = {"model.embed_tokens.weight": normal(VOCAB, HIDDEN), "model.norm.weight": np.ones(HIDDEN, np.float32),
               "lm_head.weight": normal(VOCAB, HIDDEN)}
    for layer in range(LAYERS):
        at = f"model.layers.{layer}"
        tensors |= {f"{at}.self_attn.q_proj.weight": normal(HEADS * HEAD_DIM, HIDDEN),
                    f"{at}.self_attn.k_proj.weight": normal(KV_HEADS * HEAD_DIM, HIDDEN),
                    f"{at}.self_attn.v_proj.weight": normal(KV_HEADS * HEAD_DIM, HIDDEN),
                    f"{at}.self_attn.o_proj.weight": normal(HIDDEN, HEADS * HEAD_DIM),
                    f"{at}.mlp.gate_proj.weight": normal(INTERMEDIATE, HIDDEN),
                    f"{at}.mlp.up_proj.weight": normal(INTERMEDIATE, HIDDEN),
                    f"{at}.mlp.down_proj.weight": normal(HIDDEN, INTERMEDIATE),
                    f"{at}.input_layernorm.weight": np.ones(HIDDEN, np.float32),
                    f"{at}.post_attention_layernorm.weight": np.ones(HIDDEN, np.float32)}
    return tensors


def tokenizer() -> Tokenizer:
    made = Tokenizer(models.BPE())
    made.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    made.decoder = decoders.ByteLevel()
    made.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return made


def write(directory: Path, positions: int = 512) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    made = tokenizer()
    made.save(str(directory / "tokenizer.json"))
    eos = made.token_to_id("<|im_end|>")
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
              "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB,
              "max_position_embeddings": positions, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "torch_dtype": "float32", "bos_token_id": made.token_to_id("<|endoftext|>"), "eos_token_id": eos,
              "tie_word_embeddings": False, "hidden_act": "silu"}
    (directory / "config.json").write_text(json.dumps(config, indent=1))
    (directory / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHATML, "eos_token": "<|im_end|>",
        "bos_token": None, "pad_token": "<|endoftext|>", "unk_token": None, "model_max_length": positions}, indent=1))
    save_file(weights(), str(directory / "model.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    write(Path(sys.argv[1]), *(int(arg) for arg in sys.argv[2:3]))
