"""The Vast.ai marketplace: its client (`client.py`), offer search (`offers.py`), answers
(`answers.py`), instance rows (`instances.py`), pinned host key (`host_key.py`), config section
(`section.py`), node-side API (`node_api.py`) and its declaration, `kind.KIND`.

Nothing is imported here: the node agent imports `node_api.py` from its zipapp, and the
registry imports `kind.py` without any client.
"""
