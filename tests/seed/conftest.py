from __future__ import annotations

# The tiny model the end-to-end runs serve (a real llama.cpp engine).
from tests.e2e.conftest import tiny_gguf  # noqa: F401
