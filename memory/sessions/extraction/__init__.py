"""Memory extraction from a committed stage: one interface (:mod:`.base`), two extractors chosen by settings
(``rules``, the default and network-free; ``llm``, any OpenAI-compatible endpoint) and the gates every
candidate passes whichever extractor proposed it."""
