"""Provider local: the node agent as a child process of this app (`client.py`, `node.py`) and
its declaration, `kind.KIND`.

Nothing is imported here: the node agent imports `node_api.py` from its zipapp, and the
registry imports `kind.py` without any client.
"""
