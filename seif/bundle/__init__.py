"""`seif bundle`: a self-contained Runtime bundle of a verified build."""
