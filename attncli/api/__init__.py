"""attncli in Python: the CLI's runs as functions, results that show themselves in a notebook or
a terminal, and `check` for a reader's own attention class.

    import attncli
    result = attncli.run("Your journey starts with one step", variant="causal")
    result.weights          # torch.Tensor (heads, T, T)
    result.to_dict()        # equal to `attncli run ... --json`
    attncli.show(my_weights, tokens=["Your", "journey", ...])
    attncli.check(MyMultiHeadAttention)

Nothing here imports torch until a function is called.
"""

from attncli.api.causal import AblationResult, PatchResult, ablate, patch
from attncli.api.draw import show, view
from attncli.api.generation import Generation, generate
from attncli.api.own import CheckResult, check
from attncli.api.results import HeadsResult, Result
from attncli.api.runs import explain, heads, run

__all__ = ["AblationResult", "CheckResult", "Generation", "HeadsResult", "PatchResult", "Result",
           "ablate", "check", "explain", "generate", "heads", "patch", "run", "show", "view"]
