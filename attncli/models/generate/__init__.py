"""Generation: a model writes its answer one decode step at a time, each step keeping its own
attention over every earlier token; chat templates; sampling."""
