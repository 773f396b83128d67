"""`icebox-bench soak`: load and instance kills against a private iceboxd (docs/reliability.md)."""
