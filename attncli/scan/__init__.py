"""`attncli scan`: every head's scores over a corpus, in resumable Parquet parts, on a local
pool of processes or a Ray cluster."""
