from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.prompt.engine import require_engine


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_engine()
    return write_tiny_gguf(tmp_path_factory.mktemp("model") / "tiny.gguf")
