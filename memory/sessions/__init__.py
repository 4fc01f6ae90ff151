"""Sessions: messages in, a token-budgeted window and structured summaries out, and ``session.commit``
turning a finished stage into long-term memories with evidence (seed 003 §4-6, seed 004 §8)."""
