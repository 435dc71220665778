"""convert/definition_order.py: definitions move above the statements that need them when
they run, and nothing else moves."""

from __future__ import annotations

from precision_transpiler.convert.definition_order import order_definitions

OUT_OF_ORDER = '''import x


class B(A):
    y = C()


def f(a=K):
    return Z


class A(Base):
    pass


K = 3


class C:
    pass


Base = object
'''


def test_bases_class_body_values_and_defaults_come_first() -> None:
    ordered = order_definitions(OUT_OF_ORDER)
    namespace: dict[str, object] = {"x": None}
    exec(compile(ordered.replace("import x\n", ""), "ordered.py", "exec"), namespace)  # runs top to bottom
    assert ordered.index("Base = object") < ordered.index("class A(") < ordered.index("class B(")
    assert ordered.index("class C:") < ordered.index("class B(") and ordered.index("K = 3") < ordered.index("def f(")


def test_a_file_that_runs_is_unchanged() -> None:
    source = "class A:\n    def f(self):\n        return B()\n\n\nclass B(A):\n    pass\n"
    assert order_definitions(source) == source  # `B` in a method body is read when called
