"""The runtime's service layer: resolve, execute, approve; the events it logs and answers."""
