"""The tiny generated model ships with the app (the offline rehearsal's model when none is
configured): it lives in `mvp_tui/rehearsal/tiny_gguf.py`; this name stays for the tests."""

from mvp_tui.rehearsal.tiny_gguf import main, write_tiny_gguf

__all__ = ["main", "write_tiny_gguf"]
