"""Knowledge (seed 003 §9): candidates that are reviewed before they are believed, and the published items.

A candidate is never knowledge. Recall reads published items only (:mod:`memory.knowledge.recall`), and only
P0-P2 ones: chat, model summaries and unreviewed inference (P3) stay candidates whatever they score.
"""
