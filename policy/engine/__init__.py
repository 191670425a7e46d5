"""The pure engine: disclosure, decisions, project tests, the state of a resolved context and
argument identity, and the explanations that cite the IR."""
