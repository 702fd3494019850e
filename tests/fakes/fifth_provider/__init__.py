"""A fifth provider, as a newcomer would add one (CONTRIBUTING.md "Add a provider"): its
config section (`section.py`), its client (`client.py`, an in-process fake marketplace) and
its declaration (`kind.py`). It lives under tests/ and joins the app by one call,
`mvp_tui.providers.registry.register(KIND)` (tests/foundation/test_fifth_provider.py)."""
