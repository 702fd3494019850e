"""GGUF files for the fit tests: a header with a real model's shape and no weights; made big
by a sparse file (30 GB of size, a few KB on disk) so a model larger than a card is cheap."""

from __future__ import annotations

from pathlib import Path

import gguf

GIB = 1024**3


def header_gguf(
    path: Path,
    *,
    layers: int = 32,
    embd: int = 4096,
    heads: int = 32,
    kv_heads: int = 8,
    ctx: int = 8192,
    size: int = 0,
    tokenizer: bool = True,
) -> Path:
    """A GGUF header (llama, the given shape; a tokenizer list after it, as real files have),
    its file grown to `size` bytes without writing them (0: as written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("shape-only")
    writer.add_context_length(ctx)
    writer.add_embedding_length(embd)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    if tokenizer:
        writer.add_tokenizer_model("llama")
        writer.add_token_list([f"t{i}" for i in range(2000)])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    if size:
        with path.open("r+b") as file:
            file.truncate(size)
    return path
