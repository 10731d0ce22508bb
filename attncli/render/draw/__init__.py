"""Drawing primitives the views share: colour maps, tables, heatmaps, pooled maps, prose and
streamed listings. They draw numbers and labels, never a Result."""
