"""The records renderers read that the parts above core return (a generation, the lessons'):
plain data (numpy at most), never torch, so render/ imports nothing above itself."""
