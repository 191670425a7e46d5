"""`seif prove`'s steps and the processes they start (docs/delivery.md)."""
