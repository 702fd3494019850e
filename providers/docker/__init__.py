"""Provider docker: the node agent in a container on this machine's Docker daemon (`client.py`,
`spec.py`, `node.py`), its config section (`section.py`) and its declaration, `kind.KIND`.

Nothing is imported here: the node agent imports `node_api.py` from its zipapp, and the
registry imports `kind.py` without any client.
"""
