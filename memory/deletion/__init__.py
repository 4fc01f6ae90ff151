"""Forgetting that holds: a barrier at once, then a verified, checkpointed purge of every layer.

- :mod:`.scope` says which rows a request covers (used by every other module);
- :mod:`.barrier` is the one transaction that makes the targets invisible at once;
- :mod:`.layers` purges one layer batch by batch, each batch a checkpoint (a session's summaries and commits:
  :mod:`.session_layer`; source records and their bodies: :mod:`.record_layer`);
- :mod:`.instructed` forgets what a message asks not to remember ("don't remember that ...");
- :mod:`.deleted_texts` and :mod:`.fingerprints` keep, at the barrier, hashes of what goes (never the text);
- :mod:`.residue` scans every text-bearing column, the artifact stores and histories for them: it decides;
- :mod:`.verify` runs the older targeted checks (lexical, recall, vectors, storage) as extra checks;
- :mod:`.reapply` carries deletions into a restored database, purges them again and scans it;
- :mod:`.jobs` holds the job status machine and the read model the API returns.
"""
