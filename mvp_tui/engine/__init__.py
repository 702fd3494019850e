"""The run engine: from config to a served model and back to nothing billing.

It ties the providers, the lease walk, the SSH bootstrap, the datastream and the prompt
queue together, and reaches the outside only through its event sink. No Textual here.
"""
