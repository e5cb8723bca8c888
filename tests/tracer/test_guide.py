"""docs/adding-a-model.md cannot drift: each code block marked `<!-- from: PATH -->` is PATH's code as
it is, the other ```python blocks run in order in one namespace from the repository root, and the
tracer model it walks through is under 300 lines of code (docstrings, comments and blank lines
aside)."""
import ast
import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-a-model.md"


def blocks() -> list[tuple[str | None, str]]:
    """(the file a block is from, or None for a runnable block; its code) of every ```python block."""
    found = []
    for match in re.finditer(r"^(?:<!-- from: (\S+) -->\n)?```python\n(.*?)^```", GUIDE.read_text(),
                             re.S | re.M):
        found.append((match.group(1), match.group(2)))
    return found


@pytest.mark.parametrize("path, code", [b for b in blocks() if b[0]], ids=lambda x: x[:30])
def test_a_quoted_block_is_the_files_code(path, code):
    assert code in (ROOT / path).read_text(), f"docs/adding-a-model.md quotes {path} as it is not"


def test_the_runnable_blocks_run(monkeypatch):
    runnable = [code for path, code in blocks() if path is None]
    assert len(runnable) >= 2
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": "__guide__"}
    for i, code in enumerate(runnable):
        exec(compile(code, f"docs/adding-a-model.md block {i + 1}", "exec"), namespace)
    assert namespace["ds"].q.shape == (5, 642)


def _code_lines(path: pathlib.Path) -> int:
    """Lines of `path` holding code: not blank, not a comment, not a docstring."""
    source = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            docstrings.update(range(node.body[0].lineno, node.body[0].end_lineno + 1))
    code = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                tokenize.DEDENT, tokenize.ENDMARKER)}
    return len(code - docstrings)


def test_the_tracer_model_is_under_300_lines_of_code():
    lines = sum(_code_lines(p) for p in sorted((ROOT / "tracer").glob("*.py")))
    print(f"tracer/: {lines} lines of code")
    assert lines < 300
