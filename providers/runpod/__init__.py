"""The RunPod marketplace: its client (`client.py`), GPU catalog (`catalog.py`), start command
(`boot.py`), logs, secrets, network volumes and create walk, config section (`section.py`),
node-side API (`node_api.py`) and its declaration, `kind.KIND`.

Nothing is imported here: the node agent imports `node_api.py` from its zipapp, and the
registry imports `kind.py` without any client.
"""
