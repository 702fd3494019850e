"""A tiny random-weight llama GGUF model, so tests can run a real llama.cpp engine offline.

The model is nonsense but well-formed: llama architecture, an SPM vocabulary (control tokens,
the 256 byte tokens, `▁`, printable ASCII and about a hundred `▁word` pieces) and a ChatML chat
template. One trick keeps its output printable and endless: embedding channel 0 is a constant
1.0 that no layer writes to, `output_norm` scales it by 100, and only control and byte tokens
have a (negative) output weight on it, so they are never sampled and every stream runs to
`max_tokens`. The same seed always gives a byte-identical file.

Run as a script: `python tests/fakes/tiny_gguf.py OUT.gguf [--f16] [--embd N] ...`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gguf
import numpy as np

ARCH = "llama"
SPACE = "▁"
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_WORDS_TEXT = (
    "the of and to in is it you that he was for on are as with his they at be this have from "
    "or one had by word but not what all were we when your can said there use an each which "
    "she do how their if will up other about out many then them these so some her would make "
    "like him into time has look two more write go see number no way could people my than "
    "first water been call who oil its now find long down day did get come made may part over "
    "new sound take only little"
)
WORDS = tuple(_WORDS_TEXT.split())
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
# How strongly control and byte tokens are pushed down (see the module docstring).
BAD_WEIGHT = -10.0
CHANNEL0_SCALE = 100.0


def _vocabulary() -> tuple[list[str], list[float], list[int]]:
    """Token pieces, scores and types, in id order."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    scores = [0.0, 0.0, 0.0]
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>")
        types.append(gguf.TokenType.BYTE)
        scores.append(0.0)
    pieces = [SPACE, *(chr(c) for c in range(0x21, 0x7F)), *(SPACE + w for w in WORDS)]
    for piece in pieces:
        tokens.append(piece)
        types.append(gguf.TokenType.NORMAL)
        # SPM merges the highest-scoring pair first: prefer whole words over characters.
        scores.append(float(len(piece)) - 100.0)
    return tokens, scores, [int(t) for t in types]


def _tensors(
    rng: np.random.Generator, vocab: int, bad: list[int], embd: int, layers: int, ff: int
) -> dict[str, np.ndarray]:
    """All llama weights with the channel-0 trick applied."""

    def matrix(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols)).astype(np.float32) / np.float32(np.sqrt(cols))

    out: dict[str, np.ndarray] = {}
    token_embd = rng.standard_normal((vocab, embd)).astype(np.float32)
    token_embd[:, 0] = 1.0
    out["token_embd.weight"] = token_embd
    for i in range(layers):
        p = f"blk.{i}."
        out[p + "attn_norm.weight"] = np.ones(embd, dtype=np.float32)
        out[p + "attn_q.weight"] = matrix(embd, embd)
        out[p + "attn_k.weight"] = matrix(embd, embd)
        out[p + "attn_v.weight"] = matrix(embd, embd)
        attn_output = matrix(embd, embd)
        attn_output[0, :] = 0.0  # nothing writes to channel 0
        out[p + "attn_output.weight"] = attn_output
        out[p + "ffn_norm.weight"] = np.ones(embd, dtype=np.float32)
        out[p + "ffn_gate.weight"] = matrix(ff, embd)
        out[p + "ffn_up.weight"] = matrix(ff, embd)
        ffn_down = matrix(embd, ff)
        ffn_down[0, :] = 0.0
        out[p + "ffn_down.weight"] = ffn_down
    output_norm = np.ones(embd, dtype=np.float32)
    output_norm[0] = CHANNEL0_SCALE
    out["output_norm.weight"] = output_norm
    output = matrix(vocab, embd)
    output[:, 0] = 0.0
    output[bad, :] = 0.0
    output[bad, 0] = BAD_WEIGHT
    out["output.weight"] = output
    return out


def write_tiny_gguf(
    path: Path,
    *,
    seed: int = 0,
    f16: bool = False,
    embd: int = 64,
    layers: int = 2,
    heads: int = 4,
    ctx: int = 256,
) -> Path:
    """Write the model to `path` (deterministic for `seed`) and return the path."""
    if embd % heads:
        raise ValueError(f"embd {embd} must be a multiple of heads {heads}")
    tokens, scores, types = _vocabulary()
    bad = [i for i, t in enumerate(types) if t in (gguf.TokenType.CONTROL, gguf.TokenType.BYTE)]
    bad.append(UNK_ID)
    ff = 4 * embd
    rng = np.random.default_rng(seed)
    tensors = _tensors(rng, len(tokens), bad, embd, layers, ff)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), ARCH)
    writer.add_name(f"tiny-{embd}x{layers}-seed{seed}")
    writer.add_context_length(ctx)
    writer.add_embedding_length(embd)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(embd // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(UNK_ID)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)
    for name, tensor in tensors.items():
        # Norms stay F32 as llama.cpp expects; matrices shrink to F16 on request.
        writer.add_tensor(name, tensor.astype(np.float16) if f16 and tensor.ndim == 2 else tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a tiny random-weight llama GGUF model.")
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--f16", action="store_true")
    parser.add_argument("--embd", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=256)
    a = parser.parse_args(argv)
    out = write_tiny_gguf(
        a.out, seed=a.seed, f16=a.f16, embd=a.embd, layers=a.layers, heads=a.heads, ctx=a.ctx
    )
    print(f"{out} {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
