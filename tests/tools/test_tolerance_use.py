"""Every numeric comparison in tests/ goes through tests/tolerance.py, so each states its bound in
one form (|a - ref| <= atol + rtol*|ref|) and a different bound stands out beside its reason."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
# torch.allclose, torch.testing.assert_close, np.allclose / assert_allclose / isclose,
# pytest.approx and math.isclose: each with a bound of its own form and defaults.
OTHER_COMPARISONS = {"allclose", "assert_close", "assert_allclose", "approx", "isclose"}


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _bare_difference(node: ast.expr) -> bool:
    """abs(a - b), (a - b).abs().max() or np.abs(a - b).max(), maybe inside float(...)."""
    if isinstance(node, ast.Call) and _name(node.func) == "float" and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Call) and _name(node.func) == "max" and not node.args:
        node = node.func.value if isinstance(node.func, ast.Attribute) else node
        if isinstance(node, ast.Call) and _name(node.func) == "abs":
            inner = node.args[0] if node.args else getattr(node.func, "value", None)
            return isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub)
        return False
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "abs" and len(node.args) == 1
            and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Sub))


def offences(source: str) -> list[tuple[int, str]]:
    """(line, what) for each comparison in source that bypasses tests/tolerance.py."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _name(node.func) in OTHER_COMPARISONS:
            found.append((node.lineno, f"{_name(node.func)}(...)"))
        elif isinstance(node, ast.ImportFrom) and any(
                a.name in OTHER_COMPARISONS for a in node.names):
            found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.Lt, ast.LtE)) \
                and _bare_difference(node.left):
            found.append((node.lineno, "a bare |a - b| < bound"))
    return sorted(found)


def test_numeric_comparisons_use_the_tolerance_helper() -> None:
    wrong = [f"{path.relative_to(TESTS.parent)}:{line}: {what}"
             for path in sorted(TESTS.rglob("*.py")) if path.name != "tolerance.py"
             for line, what in offences(path.read_text(encoding="utf-8"))]
    assert wrong == [], "use tests.tolerance.assert_near / near:\n" + "\n".join(wrong)


def test_the_scan_finds_each_form() -> None:
    source = "\n".join([
        "import torch, numpy as np, pytest, math",
        "from torch.testing import assert_close",
        "assert torch.allclose(a, b)",
        "torch.testing.assert_close(a, b)",
        "np.testing.assert_allclose(a, b)",
        "assert x == pytest.approx(1.0)",
        "assert math.isclose(x, 1.0)",
        "assert float((a - b).abs().max()) <= 1e-5",
        "assert abs(x - y) < 1e-6",
        "assert np.abs(a - b).max() <= 1e-5",
        "assert_near(a, b)  # allclose( in a comment is fine",
        "s = 'approx(1) in a string is fine'",
        "assert x - y <= 3 and abs(x) < 2",
    ])
    assert [line for line, _ in offences(source)] == [2, 3, 4, 5, 6, 7, 8, 9, 10]
