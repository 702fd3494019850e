"""Warnings raised inside the packages mvp-tui runs on stay off the user's terminal.

A dependency's deprecation notice (cryptography 51 tells asyncssh that DSA is deprecated, ten
lines on every import) is addressed to that package's authors, not to a person renting a GPU:
on stderr it buries mvp-tui's own lines and, under the dashboard, tears the screen. The filter
is scoped to the packages named here, so a warning mvp-tui raises itself still shows. A person
who asks for warnings (`python -W …`, `PYTHONWARNINGS`) gets every one of them.

`FOREIGN_PACKAGES` names the top-level import names of mvp-tui's dependency closure, the
`local` extra's included; tests/foundation/test_foreign_warnings.py fails when a dependency
brings a name that is not listed.
"""

from __future__ import annotations

import re
import sys
import warnings

FOREIGN_PACKAGES: tuple[str, ...] = (
    # The app's own dependencies and what they pull in.
    "textual", "rich", "markdown_it", "mdit_py_plugins", "mdurl", "pygments",
    "typing_extensions", "platformdirs",
    "httpx", "httpcore", "h11", "anyio", "idna", "certifi",
    "asyncssh", "cryptography", "cffi", "_cffi_backend", "pycparser",
    "docker", "requests", "urllib3", "charset_normalizer",
    "tomlkit", "msgspec",
    # The `local` extra: llama.cpp's Python server and the rehearsal's GGUF writer.
    "llama_cpp", "numpy", "diskcache", "jinja2", "markupsafe",
    "uvicorn", "fastapi", "starlette", "sse_starlette", "starlette_context",
    "pydantic", "pydantic_core", "pydantic_settings", "annotated_types", "annotated_doc",
    "typing_inspection", "opentelemetry", "dotenv", "click", "yaml", "_yaml", "gguf", "tqdm",
)

MODULE_PATTERN = r"(?:{})(?:\.|$)".format("|".join(re.escape(name) for name in FOREIGN_PACKAGES))


def quiet_foreign_warnings() -> None:
    """Ignore warnings attributed to a foreign package, unless the person asked for them."""
    if sys.warnoptions:  # -W or PYTHONWARNINGS: shown as asked
        return
    warnings.filterwarnings("ignore", module=MODULE_PATTERN)
