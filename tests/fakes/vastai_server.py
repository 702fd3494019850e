"""The fake Vast.ai server ships with the app (the offline rehearsal's marketplace): it lives
in `mvp_tui/rehearsal/vastai_server.py`; this name stays for the tests and benches."""

from mvp_tui.rehearsal.vastai_server import FakeVast, Fault, _default_offer

__all__ = ["FakeVast", "Fault", "_default_offer"]
