"""Every row id and section number the code cites is defined in docs/semantics.md, and code cites only repository docs.

Row ids (``R4``, ``N6``, ``E10``, ``S9``, ``H6``, ``L3``, ``C7``) are read from comments and docstrings only, so that
data such as ``b"F1"`` or a variable named ``S1`` does not count; ranges (``H1-H8``) stand for every id between.
Section numbers (``§4.1.2``) count on lines that do not name some other document (``kafka-client-compatibility.md §5``).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "semantics.md"
SCANNED = ("coordinator", "protocol", "storage", "spark_jobs", "tests")

ROW_ID = re.compile(r"\b([RNEHSCL])(\d{1,2})\b(?:\s*-\s*\1?(\d{1,2})\b)?")
SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)")
OTHER_DOC = re.compile(r"[\w./-]+\.md\b")
DOC_ROW = re.compile(r"^\|\s*([RNEHSCL]\d{1,2})\s*\|", re.MULTILINE)
DOC_HEADING = re.compile(r"^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)
FORBIDDEN = ("kafka-group-semantics", "/work/shared")


def _python_files() -> list[Path]:
    files: list[Path] = []
    for top in SCANNED:
        files.extend(p for p in (ROOT / top).rglob("*.py") if ".venv" not in p.parts)
    return sorted(files)


def _prose(source: str) -> list[str]:
    """The comments and docstrings of a module."""
    texts = [
        tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                texts.append(doc)
    return texts


def cited_rows(text: str) -> set[str]:
    ids: set[str] = set()
    for m in ROW_ID.finditer(text):
        letter, first, last = m.group(1), int(m.group(2)), m.group(3)
        ids.update(f"{letter}{n}" for n in range(first, (int(last) if last else first) + 1))
    return ids


def cited_sections(text: str) -> set[str]:
    return {
        s
        for line in text.splitlines()
        if not any(name != "semantics.md" and not name.endswith("/semantics.md") for name in OTHER_DOC.findall(line))
        for s in SECTION.findall(line)
    }


def _citations() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    rows: dict[str, set[str]] = {}
    sections: dict[str, set[str]] = {}
    for path in _python_files():
        rel = str(path.relative_to(ROOT))
        for text in _prose(path.read_text(encoding="utf-8")):
            for row in cited_rows(text):
                rows.setdefault(row, set()).add(rel)
            for section in cited_sections(text):
                sections.setdefault(section, set()).add(rel)
    return rows, sections


def defined(doc: str) -> tuple[set[str], set[str]]:
    return set(DOC_ROW.findall(doc)), set(DOC_HEADING.findall(doc))


def test_the_pattern_reads_the_code_s_forms() -> None:
    assert cited_rows("# H6 / H7, H8") == {"H6", "H7", "H8"}
    assert cited_rows('"""LeaveGroup L1-L8, single and batch"""') == {f"L{n}" for n in range(1, 9)}
    assert cited_rows("(C1-C7) and row E10; R4-R6") == {f"C{n}" for n in range(1, 8)} | {"E10", "R4", "R5", "R6"}
    assert cited_rows("S8/S9: CompletingRebalance") == {"S8", "S9"}
    assert cited_rows("an E2E test, AES256, DE00") == set()
    assert cited_sections("timers (§5.3), stale (§5.7)") == {"5.3", "5.7"}
    assert cited_sections("docs/kafka-client-compatibility.md §5") == set()


def test_the_code_cites_rows() -> None:
    rows, _ = _citations()
    # The scan must find the core's citations, or the other tests prove nothing.
    assert {"R4", "N6", "E10", "S9", "H6", "L3", "C7"} <= rows.keys()


def test_every_cited_row_is_defined() -> None:
    rows, _ = _citations()
    doc_rows, _ = defined(DOC.read_text(encoding="utf-8"))
    missing = {row: sorted(files) for row, files in rows.items() if row not in doc_rows}
    assert not missing, f"row ids cited but not defined in docs/semantics.md: {missing}"


def test_every_cited_section_is_defined() -> None:
    _, sections = _citations()
    _, headings = defined(DOC.read_text(encoding="utf-8"))
    missing = {s: sorted(files) for s, files in sections.items() if s not in headings}
    assert not missing, f"sections cited but not headings of docs/semantics.md: {missing}"


@pytest.mark.parametrize("row", ["E10", "H6"])
def test_a_missing_row_is_noticed(row: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    without = "\n".join(line for line in doc.splitlines() if not line.startswith(f"| {row} |"))
    assert row in defined(doc)[0]
    assert row not in defined(without)[0]


def test_no_code_cites_the_reference_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _python_files()
        if path != Path(__file__).resolve()
        for name in FORBIDDEN
        if name in path.read_text(encoding="utf-8")
    ]
    assert not offenders, offenders
