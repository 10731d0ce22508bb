"""Renderers: Rich renderables built from a Result, never from tensors, and its JSON text."""
