# %% [markdown]
# # attncli in a notebook
# Each `# %%` cell runs as a notebook cell in VS Code and Jupyter (jupytext), or the whole file
# with `python samples/notebook.py`. A result shows itself as the interactive page in a
# notebook, and as the CLI's tables in a terminal or IPython.

# %%
import torch

import attncli

result = attncli.run("Your journey starts with one step", variant="multihead", heads=2)
print(result.weights.shape)  # (heads, queries, keys)
print(result.tokens)
result  # noqa: B018  (a notebook shows the page here)

# %% Your own weights, from your own code: [N][N] or [H][N][N], a tensor or lists.
inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                       [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
attn_weights = torch.softmax(inputs @ inputs.T, dim=-1)  # the book's section 3.3.1
attncli.show(attn_weights, tokens=["Your", "journey", "starts", "with", "one", "step"])

# %% The same weights from attncli: they agree with the book's to float32 rounding.
simple = attncli.run(inputs=inputs, variant="simple")
print(torch.allclose(simple.weights[0], attn_weights))

# %% Is your own class right? (This runs the class; a planted bug is in my_attention.py.)
verdict = attncli.check("samples/my_attention.py:MultiHeadAttention")
print(verdict.passed, verdict.to_dict()["diagnosis"]["mistakes"][0]["id"])
