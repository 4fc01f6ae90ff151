"""Forgetting that holds: a barrier at once, then a verified, checkpointed purge of every layer.

- :mod:`.scope` says which rows a request covers (used by every other module);
- :mod:`.barrier` is the one transaction that makes the targets invisible at once;
- :mod:`.layers` purges one layer batch by batch, each batch a checkpoint;
- :mod:`.verify` searches for what was deleted and reports any hit;
- :mod:`.jobs` holds the job status machine and the read model the API returns.
"""
