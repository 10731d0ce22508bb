"""Where checkpoints are kept on disk: the Hugging Face cache, Ollama's store, LM Studio's folder."""
