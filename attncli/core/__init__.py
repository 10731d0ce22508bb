"""The chapter-3 pipeline: text → tokens → embeddings → attention → result."""
