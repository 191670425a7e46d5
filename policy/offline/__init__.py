"""The engine over recorded decisions: replay, what-if and shadow comparison."""
