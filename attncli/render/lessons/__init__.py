"""The section-6 lessons as Rich renderables: permute, kvcache, flash, cost and the demo's
chapters, with their English and Chinese texts."""
