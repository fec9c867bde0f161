"""Rules the end-to-end tests keep, read from their source: a test under load asserts a floor of acknowledged
records (`assert_written(report)`, or `report["acked"] > ...`), so that "nothing lost" never passes with nothing
written."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ...conftest import REPO

E2E_TESTS = sorted((REPO / "e2e" / "tests").glob("test_*.py"))


def _producers(function: ast.FunctionDef) -> list[tuple[str, int]]:
    """The reports of `with ....steady_producer(...) as NAME` in a function: (NAME, line)."""
    found = []
    for node in ast.walk(function):
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "steady_producer"):
                    name = item.optional_vars.id if isinstance(item.optional_vars, ast.Name) else ""
                    found.append((name, node.lineno))
    return found


def _floored(function: ast.FunctionDef, report: str) -> bool:
    """Whether the function checks a floor of the report's acknowledged records."""
    for node in ast.walk(function):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "assert_written"
                and any(isinstance(arg, ast.Name) and arg.id == report for arg in node.args)):
            return True
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            left, ops = node.test.left, node.test.ops
            if (isinstance(left, ast.Subscript) and isinstance(left.value, ast.Name) and left.value.id == report
                    and isinstance(left.slice, ast.Constant) and left.slice.value == "acked"
                    and isinstance(ops[0], ast.Gt | ast.GtE)):
                return True
    return False


def unfloored(source: str, path: str) -> list[str]:
    """Each producer under a test whose records acknowledged are never held to a floor."""
    problems = []
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, ast.FunctionDef) and function.name.startswith("test_"):
            problems += [f"{path}:{line} {function.name}: the steady producer's report is "
                         f"{'never named' if not name else f'{name!r} not held to a floor'}"
                         for name, line in _producers(function) if not name or not _floored(function, name)]
    return problems


@pytest.mark.parametrize("path", E2E_TESTS, ids=lambda p: p.name)
def test_every_test_under_load_asserts_a_floor_of_acknowledged_records(path: Path):
    assert unfloored(path.read_text(), path.name) == []


def test_the_rule_finds_a_test_that_only_checks_nothing_was_lost():
    lax = '''
def test_roll(client):
    with client.steady_producer(address, "t", rate=100) as report:
        roll()
    assert report["failed"] == {}
    assert verify(report)["lost"] == 0

def test_scale(client):
    with client.steady_producer(address, "t", rate=100):
        scale()
'''
    assert unfloored(lax, "lax.py") == [
        "lax.py:3 test_roll: the steady producer's report is 'report' not held to a floor",
        "lax.py:9 test_scale: the steady producer's report is never named"]
    strict = lax.replace('    assert report["failed"] == {}\n', "    assert_written(report)\n").replace(
        "        scale()\n", "        scale()\n    assert seen[\"acked\"] > 1\n").replace(
        '"t", rate=100):', '"t", rate=100) as seen:')
    assert unfloored(strict, "strict.py") == []
    assert len(E2E_TESTS) > 10


LOCAL_FAULTS = ("kill_container", "node_fault", "limit_cpu")


def _calls(function: ast.FunctionDef) -> set[str]:
    """The names a function calls as methods (x.node_fault), and every plain name it uses (a helper it calls, or
    passes on to be called: roll_to(..., during=kill_leader_after_first_restart))."""
    return ({node.func.attr for node in ast.walk(function)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
            | {node.id for node in ast.walk(function) if isinstance(node, ast.Name)})


def fault_helpers(sources: list[str]) -> set[str]:
    """The local cluster's faults, and the helpers of the e2e modules that use one, or a helper that does."""
    helpers = set(LOCAL_FAULTS)
    functions = [function for source in sources for function in ast.parse(source).body
                 if isinstance(function, ast.FunctionDef) and not function.name.startswith("test_")]
    while True:
        more = {function.name for function in functions if _calls(function) & helpers} - helpers
        if not more:
            return helpers
        helpers |= more


def unmarked_faults(source: str, path: str, faults: set[str]) -> list[str]:
    """Each test that signals a container, faults a node or caps a CPU through the local cluster (itself or by a
    helper) without the `local_faults` marker (an existing cluster has none of these: the marker deselects it)."""
    problems = []
    for function in ast.walk(ast.parse(source)):
        if not (isinstance(function, ast.FunctionDef) and function.name.startswith("test_")):
            continue
        marked = any(isinstance(d, ast.Attribute) and d.attr == "local_faults" for d in function.decorator_list)
        used = sorted(_calls(function) & faults)
        if used and not marked:
            problems.append(f"{path} {function.name}: {', '.join(used)} without @pytest.mark.local_faults")
    return problems


@pytest.mark.parametrize("path", E2E_TESTS, ids=lambda p: p.name)
def test_every_test_of_the_local_clusters_faults_is_marked_for_deselection_elsewhere(path: Path):
    faults = fault_helpers([test.read_text() for test in E2E_TESTS])
    assert {"kill_the_leading_operator", "kill_leader_after_first_restart"} <= faults
    assert unmarked_faults(path.read_text(), path.name, faults) == []


def test_the_rule_finds_a_fault_without_its_marker():
    source = '''
def test_power_cut(operator):
    operator.node_fault("stop", "w1")

@pytest.mark.local_faults
def test_marked(operator):
    operator.kill_container("ns", "pod")
'''
    assert unmarked_faults(source, "f.py", set(LOCAL_FAULTS)) == [
        "f.py test_power_cut: node_fault without @pytest.mark.local_faults"]
