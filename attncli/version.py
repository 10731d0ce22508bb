"""attncli's version, the only copy: `attncli.__version__` re-exports it, the build reads it
(pyproject.toml), and the modules that stamp it on results import it from here, not from the
package root, which would close an import circle through attncli.api."""

__version__ = "0.1.0"
