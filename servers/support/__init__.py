"""Small pieces shared by the other parts: bounded memos and thread-to-loop hand-offs."""
