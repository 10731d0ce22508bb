"""Where a long text may be cut so that its pieces tokenise exactly as the whole text does."""
