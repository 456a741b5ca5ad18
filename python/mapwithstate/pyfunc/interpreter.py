"""Runs a state function's syntax tree symbolically, path by path, into Columns.

Statements run in order on a :class:`~mapwithstate.pyfunc.paths.PathState` under a *guard*:
the condition for the code to run at all. An ``if`` whose test is a Column runs both branches
under the test and its negation and merges them (see :mod:`~mapwithstate.pyfunc.paths`); a
``return`` records the path's exit (its emitted row and state) and makes the rest of the block
unreachable on that path; ``yield`` records a row under the guard; a place where Python would
raise records a failure under the guard (:meth:`Context.check`), which the compiled query
raises with the function's name, file and line. Everything the compiler cannot translate
exactly raises :class:`~mapwithstate.pyfunc.errors.CompileError` instead.
"""

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mapwithstate.pyfunc import in_place, numeric_order, operators, struct_targets
from mapwithstate.pyfunc.bindings import Bindings
from mapwithstate.pyfunc.errors import CompileError
from mapwithstate.pyfunc.heapq_bisect_itertools import insort
from mapwithstate.pyfunc.paths import (
    BoundIf,
    MaybeUnassigned,
    PathState,
    Record,
    converted,
    merge_values,
)
from mapwithstate.pyfunc.pytypes import BOOL, NONE, PyType, list_of, to_spark, unified, unify
from mapwithstate.pyfunc.source import NOT_FOUND, FunctionSource
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_column, c_not, c_or, literal

__all__ = ["Context", "Carrier", "Interpreter", "Exit", "Emit", "LoopExit", "Message", "captured"]

#: A runtime failure's message: a constant, or a Column computed where it is raised (an
#: ``assert``'s message that is not a constant).
Message = Union[str, Column]


@dataclass
class Exit:
    """A path leaving the function (``return`` or its end) under ``guard``, with the key's
    state as the path left it."""

    guard: Cond
    path: PathState


@dataclass
class Emit:
    """A row the function emits (``return {...}`` or ``yield {...}``) under ``guard``; for a
    ``return``, ``path`` is the key's state as the call leaves it."""

    guard: Cond
    record: Record
    line: int
    path: Optional[PathState] = None
    node: Optional[ast.AST] = None
    #: The rows a ``for`` loop yielded (a list of structs, in order), all emitted where
    #: ``guard`` holds; ``record`` then holds only their columns' types.
    rows: Optional[Value] = None


@dataclass
class LoopExit:
    """A path leaving an iteration of the innermost ``for`` loop early under ``guard``:
    ``continue``, ``break``, or ``return`` (leaving the function, ``record`` its row)."""

    kind: str
    guard: Cond
    path: PathState
    record: Optional[Record] = None


@dataclass(frozen=True)
class Carrier:
    """A value that makes its own check: evaluating ``column`` raises the failure where Python
    raises (``__mws_python_add`` and its peers), after evaluating each of ``operands`` (the
    Columns' SQL text both). Its failure need not be tested before the call's outputs where
    the outputs evaluate the value anyway (see ``compiler._self_checked``)."""

    column: str
    operands: Tuple[str, ...]


@dataclass
class Context:
    """What a compilation collects beside the paths: the runtime failures, in program order,
    each under the guard where Python would raise."""

    source: FunctionSource
    columns: Dict[str, Any]
    #: The Spark type of an escape-hatch Column (``node``: the call, for errors).
    type_of: Callable[[ast.AST, Column], T.DataType]
    guard: Cond = True
    failures: List[Tuple[Cond, "Message"]] = field(default_factory=list)
    #: Where a variable's large value is named rather than copied into each use.
    bindings: Bindings = field(default_factory=lambda: Bindings(False))
    #: Whether a value may raise Python's error where it is computed (a :class:`Carrier`):
    #: not per record inside an aggregate, nor in a named value, both computed before the
    #: call's checks, which must fail first where Python raises earlier.
    self_checks: bool = True
    #: The failures whose values check themselves, each with its value.
    carriers: List[Tuple[Tuple[Cond, "Message"], Carrier]] = field(default_factory=list)
    #: The SQL text of a cast of such a value (a stored state field, an output column), to the
    #: value's.
    casts: Dict[str, str] = field(default_factory=dict)
    #: The row types of a group function's records (``rows[0]``, ``r`` of ``for r in rows``):
    #: read, not stored nor emitted whole, as Python's record holds every input column.
    record_types: Set[PyType] = field(default_factory=set)

    def share(self, value: Any) -> Any:
        """``value`` (a local variable's or a state field's), named if large."""
        if not isinstance(value, Value) or value.is_const:
            return value
        return Value(self.bindings.share(value.column), value.type, value.nullable)

    def message(self, node: ast.AST, exception: str, message: str) -> str:
        """The text of a runtime failure: Python's exception, the function, file and line."""
        return f"{exception}: {message} [{self.source.where(node)}]"

    def check(
        self,
        node: ast.AST,
        cond: Cond,
        exception: str,
        message: "Message",
        carrier: Optional[Carrier] = None,
    ) -> None:
        """The query fails with Python's ``exception`` where ``cond`` holds on this path;
        ``carrier``: the value raising the failure itself, on a path every call runs."""
        cond = c_and(self.guard, cond)
        if cond is False:
            return
        text: Message = (
            self.message(node, exception, message)
            if isinstance(message, str)
            # Computed where it is raised (``exception`` empty: the message names it).
            else F.concat(
                F.lit(f"{exception}: " if exception else ""),
                message,
                F.lit(f" [{self.source.where(node)}]"),
            )
        )
        failure = (cond, text)
        self.failures.append(failure)
        if carrier is not None and self.guard is True:
            self.carriers.append((failure, carrier))

    def cast(self, column: Column, spark_type: Any) -> Column:
        """``column`` cast to ``spark_type``; a cast of a value that checks itself is noted,
        as evaluating the cast evaluates the value."""
        cast = column.cast(spark_type)
        if self.carriers:
            text = str(column)
            text = self.casts.get(text, text)
            if any(carrier.column == text for _, carrier in self.carriers):
                self.casts[str(cast)] = text
        return cast

    def refuse(self, node: Optional[ast.AST], construct: str, hint: str) -> CompileError:
        """A :class:`CompileError` at ``node``, for the caller to raise."""
        return self.source.error(node, construct, hint)


class StateObject:
    """The ``state`` parameter: a marker the interpreter resolves attribute by attribute."""


class Interpreter:
    """Compiles one function body. ``bind`` gives the parameters' initial values; ``path`` the
    key's state before the call. ``call_hooks`` resolves calls on special objects (the group
    function's ``rows``); ``builtins`` the calls of builtins and modules."""

    def __init__(
        self,
        ctx: Context,
        path: PathState,
        state_schema: Any,
        resolve_call: Callable[["Interpreter", ast.Call], Any],
        generator: bool,
    ) -> None:
        from mapwithstate.pyfunc.pytypes import from_spark

        self.ctx = ctx
        self.path = path
        self.state_spark = {f.name: f.dataType for f in state_schema.fields}
        self.state_fields: Dict[str, PyType] = {}
        for f in state_schema.fields:
            field_type = from_spark(f.dataType)
            # compile_function refuses a state field without a Python type before this.
            assert field_type is not None, f.dataType
            self.state_fields[f.name] = field_type
        self.resolve_call = resolve_call
        self.generator = generator
        self.exits: List[Exit] = []
        self.emits: List[Emit] = []
        #: Inside a ``for`` loop's body: the paths leaving the iteration early.
        self.loop_exits: Optional[List[LoopExit]] = None
        self.timer_used = False
        self.statement_guard: Cond = True
        #: How deep the local functions being inlined call one another.
        self.local_depth = 0

    # ---------------------------------------------------------------- statements

    def run(self, body: List[ast.stmt]) -> None:
        self.block(body)
        if self.ctx.guard is not False:
            self.exits.append(Exit(self.ctx.guard, self.path.copy()))

    def block(self, body: List[ast.stmt]) -> None:
        for statement in body:
            if self.ctx.guard is False:
                return
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        # The guard a walrus in this statement's expressions binds unconditionally under.
        self.statement_guard = self.ctx.guard
        if self.ctx.source.collection_variables:
            from mapwithstate.pyfunc.default_dicts import rewritten

            node = rewritten(self, node)
        if insort(self, node):
            return
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return  # a docstring
            if isinstance(node.value, (ast.Yield, ast.YieldFrom)):
                self.yield_(node.value)
                return
            if in_place.in_place_call(self, node.value) is not None:
                self.change_in_place(node, node.value)
                return
            self.expression(node.value)
        elif isinstance(node, ast.Assign) and _branches_change_in_place(self, node.value):
            # ``x = xs.pop(0) if len(xs) > cap else None``: the if statement it means, so the
            # change is a branch's whole value, taken where Python takes it.
            assert isinstance(node.value, ast.IfExp)
            branches: List[ast.stmt] = [
                ast.copy_location(ast.Assign(targets=node.targets, value=branch), node)
                for branch in (node.value.body, node.value.orelse)
            ]
            desugared = ast.If(test=node.value.test, body=branches[:1], orelse=branches[1:])
            self.if_(ast.copy_location(desugared, node))
        elif isinstance(node, ast.Assign):
            value = (
                self.change_in_place(node, node.value)
                if in_place.in_place_call(self, node.value) is not None
                else self.expression(node.value)
            )
            for target in node.targets:
                if isinstance(target, ast.Subscript):
                    from mapwithstate.pyfunc.mutations import assign_item

                    name, changed = assign_item(self, node, target, value)
                    self.path.env[name] = (
                        self.ctx.share(changed) if isinstance(changed, Value) else changed
                    )
                else:
                    self.assign(target, value)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.expression(node.value))
        elif isinstance(node, ast.AugAssign):
            self.augmented_assign(node)
        elif isinstance(node, ast.If):
            self.if_(node)
        elif isinstance(node, ast.For):
            from mapwithstate.pyfunc.loops import for_loop

            for_loop(self, node)
        elif isinstance(node, ast.Return):
            self.return_(node)
        elif isinstance(node, ast.Pass):
            pass
        elif isinstance(node, (ast.Break, ast.Continue)):
            kind = "break" if isinstance(node, ast.Break) else "continue"
            if self.loop_exits is None:
                raise self.ctx.refuse(node, f"{kind} outside a loop", "Python refuses it too")
            self.loop_exits.append(LoopExit(kind, self.ctx.guard, self.path.copy()))
            self.ctx.guard = False
        elif isinstance(node, ast.Assert):
            self.assert_(node)
        elif isinstance(node, ast.Raise):
            self.ctx.check(node, True, *self._raised(node))
            self.ctx.guard = False
        elif isinstance(node, ast.Delete):
            in_place.delete(self, node)
        elif isinstance(node, ast.FunctionDef):
            from mapwithstate.pyfunc.local_functions import of_def

            self.assign(
                ast.copy_location(ast.Name(id=node.name, ctx=ast.Store()), node), of_def(self, node)
            )
        elif isinstance(node, ast.Match):
            from mapwithstate.pyfunc.match_statements import match

            match(self, node)
        else:
            construct, hint = _REFUSED_STATEMENTS.get(
                type(node),
                (
                    f"{type(node).__name__} statement",
                    "state functions support assignments, if/elif/else, for loops, "
                    "return, yield, assert and raise",
                ),
            )
            raise self.ctx.refuse(node, construct, hint)

    def change_in_place(self, node: ast.stmt, call: Any) -> Value:
        """A changing method of a local list or dict (``xs.append(v)``, ``last = xs.pop()``,
        see :mod:`~mapwithstate.pyfunc.in_place`): the variable takes the new value, and the
        call's result is returned."""
        name, changed, result = in_place.call(self, node, call)
        self.path.env[name] = self.ctx.share(changed)
        return result

    def assert_(self, node: ast.Assert) -> None:
        """``assert test, message``: the message is evaluated only where the test fails, as
        Python does (a failure evaluating it is raised instead), and the query fails with
        ``AssertionError`` and ``str(message)``."""
        from mapwithstate.pyfunc.formatting import to_str

        test = self.condition(node.test)
        message: Message = ""
        if node.msg is not None:
            outer = self.ctx.guard
            self.ctx.guard = c_and(outer, c_not(test))
            value = self.value(node.msg)
            self.ctx.guard = outer
            message = (
                str(value.const) if value.is_const else to_str(self.ctx, node.msg, value).column
            )
        self.ctx.check(node, c_not(test), "AssertionError", message)
        self.ctx.guard = c_and(self.ctx.guard, test)

    def augmented_assign(self, node: ast.AugAssign) -> None:
        """``x op= value``; ``state.field op= value`` as ``state.update(field=state.field op
        value)``; ``xs[i] op= value`` on a list or dict only this variable holds (see
        :mod:`~mapwithstate.pyfunc.mutations`)."""
        target = node.target
        if isinstance(target, ast.Name):
            current = self.name(target)
            if isinstance(current, Value) and current.type.kind == "set":
                self.augment_in_place(node, target)
                return
            if (
                isinstance(current, Value)
                and current.type.kind == "list"
                and isinstance(node.op, (ast.Mult, ast.Add))
            ):
                # xs *= n and xs += ys change the list in place (a name holding the same list
                # sees the change): under the rule of the changing methods (a local no other
                # name may hold).
                self.augment_in_place(node, target)
                return
            other = struct_targets.value(self, node.value, _type_of(current))
            self.assign(target, operators.binary(self.ctx, node, node.op, current, other))
        elif (
            isinstance(target, ast.Attribute)
            and _is_state(target.value)
            and isinstance(self.path.env.get("state"), StateObject)
        ):
            if target.attr not in self.state_fields:
                raise self.ctx.refuse(
                    target,
                    f"augmented assignment to state.{target.attr}",
                    f"only the state's fields ({', '.join(self.state_fields)}) change, through "
                    "state.update(...) or state.<field> += ...",
                )
            current = self.path.fields[target.attr]
            other = struct_targets.value(self, node.value, current.type)
            value = operators.binary(self.ctx, node, node.op, current, other)
            self.update({target.attr: self.state_value(node, target.attr, value)})
        elif isinstance(target, ast.Subscript):
            from mapwithstate.pyfunc.mutations import augment_item

            name, changed = augment_item(self, node)
            self.path.env[name] = self.ctx.share(changed)
        else:
            construct = f"augmented assignment to {type(target).__name__}"
            if isinstance(target, ast.Attribute):
                owner = _describe(self.expression(target.value))
                construct = f"augmented assignment to an attribute of a {owner}"
            raise self.ctx.refuse(
                node,
                construct,
                "assign to a local variable, a state field, or an item of a local list or dict",
            )

    def augment_in_place(self, node: ast.AugAssign, target: ast.Name) -> None:
        """``s |= t`` (``&= -= ^=``), ``xs *= n``, ``xs += ys``: Python changes the set or
        list in place, so it compiles under the rule of the other changing methods (a local
        no other name may hold)."""
        from mapwithstate.pyfunc.mutations import owned_container

        symbol = operators.symbol(node.op)
        name, base = owned_container(self, node, target, "augmented assignment", f" {symbol}=")
        # Dict displays added to a list of structs are stored as structs.
        other = struct_targets.value(self, node.value, _type_of(base))
        self.path.env[name] = self.ctx.share(operators.binary(self.ctx, node, node.op, base, other))

    def update(self, values: Dict[str, Value]) -> None:
        """The state's fields named take ``values`` (each stored in its field's type): the key
        has a state."""
        for name in self.state_fields:
            if name in values:
                self.path.fields[name] = self.ctx.share(values[name])
                self.path.stale.pop(f"state.{name}", None)
        self.path.present = literal(True)
        self.path.changed = True

    def _raised(self, node: ast.Raise) -> Tuple[str, Message]:
        """The exception ``raise E(args)`` raises and its ``str()``: no argument is ``""``,
        one is ``str(arg)`` (computed where it is raised: an f-string names the culprit), more
        are the tuple's ``str()``, as Python's ``BaseException.__str__`` makes them."""
        from mapwithstate.pyfunc.format_specs import convert
        from mapwithstate.pyfunc.formatting import to_str

        exc = node.exc
        if exc is None:
            raise self.ctx.refuse(node, "bare raise", "raise an exception with a message")
        if node.cause is not None:
            raise self.ctx.refuse(node, "raise ... from ...", "raise the exception alone")
        if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name):
            name, args = exc.func.id, exc.args
            if exc.keywords or any(isinstance(a, ast.Starred) for a in args):
                raise self.ctx.refuse(
                    exc, f"{name}() with keyword or * arguments", f"raise {name}('message')"
                )
        elif isinstance(exc, ast.Name):
            name, args = exc.id, []
        else:
            raise self.ctx.refuse(
                node, "raise of an expression", "raise SomeError('message') or SomeError(f'...')"
            )
        cls = self.ctx.source.lookup(name)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise self.ctx.refuse(node, f"raise {name}", "raise an exception class")
        values = [self.value(a) for a in args]
        if len(values) == 1:
            (value,) = values
            if value.is_const:
                return name, str(value.const)
            return name, to_str(self.ctx, args[0], value).column
        if all(v.is_const for v in values):
            return name, str(tuple(v.const for v in values)) if values else ""
        parts = [
            convert(self.ctx, a, v, ord("r")).column for a, v in zip(args, values, strict=True)
        ]
        return name, F.concat(F.lit("("), F.concat_ws(", ", *parts), F.lit(")"))

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            if target.id == "state":
                raise self.ctx.refuse(
                    target, "assignment to state", "change the state with state.update(...)"
                )
            self.path.env[target.id] = self.ctx.share(value)
            self.path.stale.pop(target.id, None)
            return
        if isinstance(target, ast.Attribute) and _is_state(target.value):
            raise self.ctx.refuse(
                target,
                f"assignment to state.{target.attr}",
                f"write state.update({target.attr}=...)",
            )
        if isinstance(target, (ast.Tuple, ast.List)):
            from mapwithstate.pyfunc.tuples import unpack

            for name, part in unpack(self, target, value).items():
                self.assign(ast.copy_location(ast.Name(id=name, ctx=ast.Store()), target), part)
            return
        raise self.ctx.refuse(
            target,
            f"assignment to {type(target).__name__}",
            "assign to a local variable name, a tuple of names (a, b = b, a), or an item "
            "of a local list or dict (no attribute assignment)",
        )

    def if_(self, node: ast.If) -> None:
        self.branches(node, self.condition(node.test), node.body, node.orelse)

    def branches(
        self,
        node: ast.stmt,
        test: Cond,
        body: List[ast.stmt],
        orelse: List[ast.stmt],
        then_env: Optional[Dict[str, Any]] = None,
        else_env: Optional[Dict[str, Any]] = None,
    ) -> None:
        """Runs ``body`` where ``test`` holds and ``orelse`` where it does not, then merges
        the two paths, as an ``if`` does; ``then_env`` and ``else_env``: variables bound
        differently on entering each branch (a ``for`` loop's ``else:`` runs where no
        ``break`` ended the loop, whose variables are those of the ``break`` elsewhere)."""
        outer = self.ctx.guard
        before = self.path
        self.path = before.copy()
        self.path.env.update(then_env or {})
        then_entry = self.ctx.guard = c_and(outer, test)
        self.block(body)
        then_path, then_guard = self.path, self.ctx.guard
        self.path = before.copy()
        self.path.env.update(else_env or {})
        else_entry = self.ctx.guard = c_and(outer, c_not(test))
        self.block(orelse)
        else_path, else_guard = self.path, self.ctx.guard
        if then_guard is then_entry and else_guard is else_entry:
            # Neither branch left the function: every path that entered the if goes on. The
            # guard is the one before it, not (g and t) or (g and not t), which would double
            # with each if of a run of them (and every check after them holds it).
            self.ctx.guard = outer
        else:
            self.ctx.guard = c_or(then_guard, else_guard)
        if then_guard is False:
            self.path = else_path
        elif else_guard is False:
            self.path = then_path
        else:
            self.path = self._merge(node, test, then_path, else_path)

    def _merge(self, node: ast.stmt, test: Cond, a: PathState, b: PathState) -> PathState:
        def merged_value(x: Value, y: Value) -> Value:
            # State fields, presence and the timer have one type on every path (state.update
            # stores a value in its field's type), so they always merge.
            merged = merge_values(test, x, y)
            assert isinstance(merged, Value), (x.type, y.type)
            return merged

        env: Dict[str, Any] = {}
        for name in set(a.env) | set(b.env):
            if name not in a.env or name not in b.env:
                env[name] = MaybeUnassigned(node.lineno)
                continue
            merged = merge_values(test, a.env[name], b.env[name])
            if merged is None:
                raise self.ctx.refuse(
                    node,
                    f"variable {name!r} has a different type on each branch "
                    f"({_describe(a.env[name])} and {_describe(b.env[name])})",
                    "give it one type on every path (a Column has one type)",
                )
            env[name] = self.ctx.share(merged)
        fields = {}
        for name in a.fields:
            fields[name] = self.ctx.share(merged_value(a.fields[name], b.fields[name]))
        present = merged_value(a.present, b.present)
        changed = (
            a.changed
            if a.changed is b.changed
            else c_or(c_and(test, a.changed), c_and(c_not(test), b.changed))
        )
        timer = merged_value(a.timer, b.timer)
        timer_left = merged_value(a.timer_left, b.timer_left)
        stale = {**b.stale, **a.stale}
        return PathState(env, fields, present, changed, timer, timer_left, stale=stale)

    def return_(self, node: ast.Return) -> None:
        record: Optional[Record] = None
        if node.value is not None:
            value = self.expression(node.value)
            if self.generator:
                if not (isinstance(value, Value) and value.type.kind == "none"):
                    raise self.ctx.refuse(
                        node,
                        "return with a value in a generator",
                        "yield the rows; a bare return ends the generator",
                    )
            elif isinstance(value, Record):
                record = value
            elif not (isinstance(value, Value) and value.type.kind == "none"):
                raise self.ctx.refuse(
                    node,
                    f"return of a {_describe(value)}",
                    "return a dict display {'column': value, ...} (one row) or None (no row)",
                )
        self.leave(self.ctx.guard, record, node)
        self.ctx.guard = False

    def leave(self, guard: Cond, record: Optional[Record], node: ast.AST) -> None:
        """The function returns where ``guard`` holds (``record``: the row it returns): from
        the innermost loop's iteration, which carries it out of the loop, or from the call."""
        if guard is False:
            return
        if self.loop_exits is not None:
            self.loop_exits.append(LoopExit("return", guard, self.path.copy(), record))
            return
        if record is not None:
            line = getattr(node, "lineno", 0)
            emit = Emit(c_and(guard, record.present), record, line, self.path.copy(), node)
            self.emits.append(emit)
        self.exits.append(Exit(guard, self.path.copy()))

    def yield_(self, node: Union[ast.Yield, ast.YieldFrom]) -> None:
        if isinstance(node, ast.YieldFrom):
            raise self.ctx.refuse(node, "yield from", "yield each row")
        value = self.expression(node.value) if node.value is not None else None
        if not isinstance(value, Record):
            raise self.ctx.refuse(
                node,
                f"yield of a {_describe(value)}",
                "yield a dict display {'column': value, ...}",
            )
        self.emits.append(Emit(c_and(self.ctx.guard, value.present), value, node.lineno, node=node))

    # ---------------------------------------------------------------- expressions

    def expression(self, node: ast.expr) -> Any:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.ctx.refuse(
                node,
                f"{type(node).__name__} expression",
                _REFUSED_EXPRESSIONS.get(type(node).__name__, "not supported in a state function"),
            )
        return method(node)

    def value(self, node: ast.expr) -> Value:
        """An expression that must be a plain value (not a module): a dict display is a dict
        (where a struct is expected, :mod:`~mapwithstate.pyfunc.struct_targets` makes it
        one)."""
        return self.as_value(node, self.expression(node))

    def as_value(self, node: ast.AST, result: Any) -> Value:
        """The evaluated expression ``result`` of ``node`` as a plain value."""
        if not isinstance(result, Value):
            from mapwithstate.pyfunc.aggregates import Rows, RowVariable, UntypedColumn

            if isinstance(result, UntypedColumn):
                raise self.ctx.refuse(
                    node,
                    f"column {result.name!r} of type {result.data_type.simpleString()}",
                    "no exact Python type for it; cast it before the call, or pass it to a "
                    "pyspark.sql.functions call",
                )
            if isinstance(result, Record):
                from mapwithstate.pyfunc.dict_displays import record_as_dict

                return record_as_dict(self.ctx, node, result)
            if isinstance(result, Rows):
                # As Python's list of the key's records: enumerate(rows), rows[0], rows[1:].
                from mapwithstate.pyfunc.aggregates import rows_records

                return rows_records(self, node)[0]
            if isinstance(result, RowVariable):
                # A record itself, as a generator over rows yields it: [r for r in rows if ...].
                return result.record(self, node)
            raise self.ctx.refuse(
                node,
                f"a {_describe(result)} used as a value",
                "use it in a return/yield, a call or an attribute",
            )
        return result

    def expr_Lambda(self, node: ast.Lambda) -> Any:
        """``lambda x: ...`` as a value (``f = lambda x: ...``): a local function, inlined at
        each call (see :mod:`~mapwithstate.pyfunc.local_functions`)."""
        from mapwithstate.pyfunc.local_functions import of_lambda

        return of_lambda(self, node)

    def expr_NamedExpr(self, node: ast.NamedExpr) -> Any:
        """``(name := value)``: see :mod:`~mapwithstate.pyfunc.walrus`."""
        from mapwithstate.pyfunc.walrus import named_expression

        return named_expression(self, node)

    def expr_Constant(self, node: ast.Constant) -> Value:
        try:
            return literal(node.value)
        except OverflowError:
            raise self.ctx.refuse(
                node,
                f"int literal {node.value!r}",
                "ints are 64-bit (BIGINT) in a compiled function",
            ) from None
        except TypeError:
            raise self.ctx.refuse(
                node,
                f"{type(node.value).__name__} literal",
                "literals may be None, bool, int, float or str",
            ) from None

    def expr_Name(self, node: ast.Name) -> Any:
        return self.name(node)

    def name(self, node: ast.Name) -> Any:
        if node.id in self.path.env:
            if self.path.stale:
                from mapwithstate.pyfunc.nested import stale_read

                stale_read(self, node, node.id)
            value = self.path.env[node.id]
            if isinstance(value, MaybeUnassigned):
                raise self.ctx.refuse(
                    node,
                    f"variable {node.id!r} may be unassigned here",
                    f"it is assigned on some paths only (line {value.line}); assign it on "
                    "every path before this use",
                )
            if isinstance(value, BoundIf):
                self.ctx.check(
                    node,
                    c_not(value.bound),
                    "UnboundLocalError",
                    f"cannot access local variable {node.id!r} where it is not associated "
                    f"with a value (the for loop of line {value.line} ran no iteration)",
                )
                return value.value
            return value
        if node.id in _assigned_names(self.ctx.source.tree):
            raise self.ctx.refuse(
                node,
                f"variable {node.id!r} read before it is assigned",
                "assign it first (Python raises UnboundLocalError)",
            )
        found = self.ctx.source.lookup(node.id)
        if found is NOT_FOUND:
            raise self.ctx.refuse(
                node,
                f"unknown name {node.id!r}",
                "use parameters, locals, module constants and supported "
                "functions (Python raises NameError)",
            )
        if isinstance(found, (list, tuple, dict)) and _nests(found):
            from mapwithstate.pyfunc.constant_displays import display

            built = display(found, node)
            if built is not None:
                return self.expression(built)
        return captured(self.ctx, node, found)

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expression(node.value)
        if isinstance(base, StateObject):
            return self.state_attribute(node)
        if hasattr(base, "attribute"):
            return base.attribute(self, node)
        if isinstance(base, Value) and base.type.kind == "row":
            row = operators.attribute_of_none(self.ctx, node, base, node.attr)
            return row_field(self.ctx, node, row, node.attr)
        from mapwithstate.pyfunc.builtins import module_attribute

        return module_attribute(self.ctx, node, base)

    def state_attribute(self, node: ast.Attribute) -> Any:
        from mapwithstate import functions as S

        name = node.attr
        if name in self.state_fields:
            if self.path.stale:
                from mapwithstate.pyfunc.nested import stale_read

                stale_read(self, node, f"state.{name}")
            return self.path.fields[name]
        if name == "exists":
            return self.path.present
        if name == "timing_out":
            return Value(S.is_timing_out(), BOOL, False)
        if name == "batch_time":
            return Value(S.batch_time(), PyType("datetime"), False)
        if name == "watermark":
            return Value(S.watermark(), PyType("datetime"), True)
        if name == "timer":
            self.timer_used = True
            return self.path.timer
        if name in ("update", "remove", "set_timer", "clear_timer"):
            raise self.ctx.refuse(
                node, f"state.{name} without a call", f"call it: state.{name}(...)"
            )
        raise self.ctx.refuse(
            node,
            f"unknown state attribute {name!r}",
            f"the state's fields are {', '.join(self.state_fields)}; also "
            "exists, timing_out, batch_time, watermark, timer",
        )

    def expr_Call(self, node: ast.Call) -> Any:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and _is_state(func.value)
            and isinstance(self.path.env.get("state"), StateObject)
        ):
            return self.state_call(node, func.attr)
        return self.resolve_call(self, node)

    def state_call(self, node: ast.Call, method: str) -> Value:
        nothing = Value(F.lit(None), NONE, True, None)
        if method == "update":
            if node.args:
                raise self.ctx.refuse(
                    node,
                    "state.update with positional arguments",
                    "name the fields: state.update(n=...)",
                )
            updates = {}
            for keyword in node.keywords:
                if keyword.arg is None:
                    raise self.ctx.refuse(
                        node, "state.update(**mapping)", "name each field: state.update(n=...)"
                    )
                if keyword.arg not in self.state_fields:
                    raise self.ctx.refuse(
                        keyword,
                        f"unknown state field {keyword.arg!r}",
                        f"the state's fields are {', '.join(self.state_fields)}",
                    )
                stored = struct_targets.value(self, keyword.value, self.state_fields[keyword.arg])
                updates[keyword.arg] = self.state_value(keyword, keyword.arg, stored)
            self.update(updates)
            return nothing
        if method == "remove":
            self._no_arguments(node, method)
            for name, field_type in self.state_fields.items():
                self.path.fields[name] = Value(
                    F.lit(None).cast(to_spark(field_type)), field_type, True
                )
            self.path.present = literal(False)
            self.path.changed = True
            for name in self.state_fields:
                self.path.stale.pop(f"state.{name}", None)
            return nothing
        if method == "set_timer":
            if len(node.args) != 1 or node.keywords:
                raise self.ctx.refuse(
                    node, "state.set_timer without one argument", "state.set_timer(ts): a datetime"
                )
            ts = self.value(node.args[0])
            if ts.type.kind != "datetime":
                raise self.ctx.refuse(
                    node.args[0],
                    f"state.set_timer of a {ts.type}",
                    "the timer is a datetime (e.g. ts + timedelta(...))",
                )
            ts = operators.none_check(self.ctx, node, ts, "set_timer() needs a datetime, got None")
            self.timer_used = True
            self.path.timer = self.path.timer_left = ts
            return nothing
        if method == "clear_timer":
            self._no_arguments(node, method)
            self.timer_used = True
            self.path.timer = self.path.timer_left = Value(
                F.lit(None).cast("timestamp"), PyType("datetime"), True
            )
            return nothing
        raise self.ctx.refuse(
            node, f"state.{method}()", "state's methods are update, remove, set_timer, clear_timer"
        )

    def _no_arguments(self, node: ast.Call, method: str) -> None:
        if node.args or node.keywords:
            raise self.ctx.refuse(
                node, f"state.{method} with arguments", f"state.{method}() takes none"
            )

    def state_value(self, node: ast.AST, name: str, value: Value) -> Value:
        """``value`` stored in state field ``name``: converted to the field's type where
        Python's value converts exactly (an int into a DOUBLE field), refused otherwise."""
        field_type = self.state_fields[name]
        return store(
            self.ctx, node, f"state field {name!r}", field_type, self.state_spark[name], value
        )

    def expr_BinOp(self, node: ast.BinOp) -> Value:
        if isinstance(node.op, ast.Add):
            # A list of structs + [{...}] (or [{...}] + ...): the display's dicts are structs.
            from mapwithstate.pyfunc.struct_targets import concatenation

            return concatenation(self, node, None)
        left = self.value(node.left)
        if isinstance(node.op, ast.Mod) and left.is_const and isinstance(left.const, str):
            from mapwithstate.pyfunc.format_specs import percent_format
            from mapwithstate.pyfunc.tuples import elements

            right = self.value(node.right)
            if right.type.kind == "tuple":
                # "%s=%d" % pair: the tuple's elements are the arguments.
                right = operators.none_check(
                    self.ctx, node, right, "not enough arguments for format string"
                )
                return percent_format(self, node, left.const, tuple(elements(right)))
            return percent_format(self, node, left.const, right)
        return operators.binary(self.ctx, node, node.op, left, self.value(node.right))

    def condition(self, node: ast.expr) -> Cond:
        """Python's ``bool(node)`` where only its truth is used: an ``if``'s, a conditional
        expression's, an ``assert``'s or a comprehension's test, ``not``'s operand. There
        ``a or b`` and ``a and b`` need not return one type (``if v is None or v % 2:``):
        each operand's truth decides, and an operand is evaluated only where the ones before
        it did not (its checks run only there, as Python's short circuit)."""
        if isinstance(node, ast.BoolOp):
            outer = self.ctx.guard
            conds: List[Cond] = []
            for operand in node.values:
                cond = self.condition(operand)
                conds.append(cond)
                decided = cond if isinstance(node.op, ast.And) else c_not(cond)
                self.ctx.guard = c_and(self.ctx.guard, decided)
            self.ctx.guard = outer
            result: Cond = isinstance(node.op, ast.And)
            for cond in conds:
                result = c_and(result, cond) if isinstance(node.op, ast.And) else c_or(result, cond)
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return c_not(self.condition(node.operand))
        result = self.expression(node)
        if isinstance(result, Record):
            # A row to emit (alert = {...}), or None on the paths where it is not present.
            return result.present if result.fields else False
        return operators.truthy(result if isinstance(result, Value) else self.value(node))

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Value:
        if isinstance(node.op, ast.Not):
            test = c_not(self.condition(node.operand))
            return literal(test) if isinstance(test, bool) else Value(test, BOOL, False)
        operand = self.value(node.operand)
        if (
            operand.is_const
            and isinstance(operand.const, (int, float))
            and not isinstance(operand.const, bool)
            and isinstance(node.op, (ast.USub, ast.UAdd))
        ):
            return literal(-operand.const if isinstance(node.op, ast.USub) else operand.const)
        return operators.unary(self.ctx, node, node.op, operand)

    def expr_BoolOp(self, node: ast.BoolOp) -> Value:
        outer = self.ctx.guard
        values, conds = [], []
        # An empty dict display (state.counts or {}) is an empty dict of another operand's
        # dict type (it has no value to type it by): a name's or an attribute's, which
        # evaluate without checks, so evaluating them twice changes nothing.
        dict_types = [
            v.type
            for o in node.values
            if any(_is_empty_dict(e) for e in node.values)
            and isinstance(o, (ast.Name, ast.Attribute))
            for v in [self.expression(o)]
            if isinstance(v, Value) and v.type.kind == "dict"
        ]
        for operand in node.values:
            if _is_empty_dict(operand) and dict_types:
                empty = F.create_map().cast(to_spark(dict_types[0]))
                value = Value(empty, dict_types[0], False)
            else:
                value = self.value(operand)
            cond = operators.truthy(value)
            values.append(value)
            conds.append(cond)
            # The next operand runs only where this one did not decide the result.
            self.ctx.guard = c_and(
                self.ctx.guard, cond if isinstance(node.op, ast.And) else c_not(cond)
            )
        self.ctx.guard = outer
        return operators.boolean(self.ctx, node, node.op, values, conds)

    def expr_Compare(self, node: ast.Compare) -> Value:
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value is None
        ):
            # A dict variable that may be None (``if alert is not None``).
            record = self.expression(node.left)
            if isinstance(record, Record):
                is_none = c_not(record.present)
                found = is_none if isinstance(node.ops[0], ast.Is) else c_not(is_none)
                return Value(c_column(found), BOOL, False)
            left_value: Optional[Value] = record if isinstance(record, Value) else None
        else:
            left_value = None
        outer = self.ctx.guard
        left = left_value if left_value is not None else self.value(node.left)
        result: Cond = True
        for index, (op, right_node) in enumerate(zip(node.ops, node.comparators, strict=True)):
            from mapwithstate.pyfunc import ranges

            if (
                isinstance(op, (ast.In, ast.NotIn))
                and index == len(node.ops) - 1
                and ranges.is_range(self, right_node)
            ):
                # x in range(...): Python's arithmetic on the bounds, no list made.
                assert isinstance(right_node, ast.Call)
                test = ranges.range_contains(self, node, left, right_node)
                if isinstance(op, ast.NotIn):
                    test = Value(~test.column, BOOL, False)
                result = c_and(result, test.column)
                break
            right = self.value(right_node)
            test = operators.compare(self.ctx, node, op, left, right)
            holds: Cond = test.const if isinstance(test.const, bool) else test.column
            result = c_and(result, holds)
            self.ctx.guard = c_and(self.ctx.guard, holds)
            left = right
        self.ctx.guard = outer
        if isinstance(result, bool):
            return literal(result)
        return Value(result, BOOL, False)

    def expr_IfExp(self, node: ast.IfExp) -> Value:
        test = self.condition(node.test)
        outer = self.ctx.guard
        self.ctx.guard = c_and(outer, test)
        body = self.expression(node.body)
        self.ctx.guard = c_and(outer, c_not(test))
        orelse = self.expression(node.orelse)
        self.ctx.guard = outer
        merged = merge_values(test, body, orelse)
        if merged is None:
            raise self.ctx.refuse(
                node,
                f"conditional expression of a {_describe(body)} and a {_describe(orelse)}",
                "give both branches one type",
            )
        return merged

    def expr_Dict(self, node: ast.Dict) -> Union[Record, Value]:
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            from mapwithstate.pyfunc.dict_displays import dict_display

            return dict_display(self, node)
        fields: Dict[str, Value] = {}
        for key, value in zip(node.keys, node.values, strict=False):
            assert isinstance(key, ast.Constant) and isinstance(key.value, str)
            # A repeated key keeps its first position and takes the later value, as Python's.
            fields[key.value] = self.value(value)
            from mapwithstate.pyfunc.sets import holds_set, refused_for_order

            if holds_set(fields[key.value].type):
                raise refused_for_order(self.ctx, value, f"a set emitted as column {key.value!r}")
        return Record(fields)

    def expr_List(self, node: ast.List) -> Value:
        return self.list_display(node, [self.value(e) for e in node.elts])

    def list_display(self, node: ast.List, items: List[Value]) -> Value:
        """The list display ``node`` of its evaluated ``items``, of their one type."""
        element = unified(
            (i.type for i in items),
            lambda joined, t: self.ctx.refuse(
                node,
                "a list of values of different types",
                "a list is an array Column: one element type",
            ),
        )
        spark_type = to_spark(list_of(element))
        if not items:
            return Value(
                F.array().cast(spark_type) if element.kind != "none" else F.array(),
                list_of(element),
                False,
            )
        columns = [converted(i, element) for i in items]
        return Value(F.array(*columns), list_of(element), False)

    def expr_Set(self, node: ast.Set) -> Value:
        from mapwithstate.pyfunc.sets import display

        return display(self, node)

    def expr_SetComp(self, node: ast.SetComp) -> Value:
        from mapwithstate.pyfunc.sets import comprehension

        return comprehension(self, node)

    def expr_Tuple(self, node: ast.Tuple) -> Value:
        from mapwithstate.pyfunc.tuples import make

        return make([self.value(e) for e in node.elts])

    def expr_JoinedStr(self, node: ast.JoinedStr) -> Value:
        from mapwithstate.pyfunc.format_specs import convert, f_string_spec, format_value, joined

        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(literal(part.value))
                continue
            assert isinstance(part, ast.FormattedValue)
            spec = f_string_spec(self.ctx, part)
            value = convert(self.ctx, part, self.value(part.value), part.conversion)
            parts.append(format_value(self.ctx, part, value, spec or ""))
        return joined(self.ctx, parts)

    def expr_Subscript(self, node: ast.Subscript) -> Value:
        from mapwithstate.pyfunc.sequences import subscript

        return subscript(self, node)

    def expr_ListComp(self, node: ast.ListComp) -> Value:
        from mapwithstate.pyfunc.sequences import comprehension

        return comprehension(self, node)

    def expr_DictComp(self, node: ast.DictComp) -> Value:
        from mapwithstate.pyfunc.iteration import dict_comprehension

        return dict_comprehension(self, node)


def _widens(have: PyType, want: PyType) -> bool:
    """Whether ``have`` is ``want`` but for ints (or int-or-floats) where ``want`` holds floats,
    inside lists and dict values."""
    if want.kind == "float":
        return have.kind in ("int", "bool", "num", "float")
    if want.kind == "list" and have.kind == "list":
        return have != want and _widens(have.args[0], want.args[0])
    if want.kind == "dict" and have.kind == "dict":
        return have != want and have.args[0] == want.args[0] and _widens(have.args[1], want.args[1])
    return have == want


def _widened(column: Column, have: PyType, want: PyType) -> Column:
    """``column`` of ``have`` as ``want`` (:func:`_widens`): each int a float."""
    if want.kind == "float":
        return operators.as_float(Value(column, have, True))
    if have == want:
        return column
    if want.kind == "list":
        return F.transform(column, lambda e: _widened(e, have.args[0], want.args[0]))
    return F.transform_values(column, lambda _, v: _widened(v, have.args[1], want.args[1]))


def store(
    ctx: Context,
    node: ast.AST,
    what: str,
    py_type: PyType,
    spark_type: Any,
    value: Value,
    exact: bool = False,
) -> Value:
    """``value`` as a Column of ``spark_type`` (a state field or output column): ints checked
    to fit a narrower integral type, an int widened into a floating one; anything else must
    have the column's own Python type. With ``exact`` (an output column, whose type the
    compiler chose: Python emits the int itself) an int must be exactly a double, else the
    query fails with OverflowError; a state field's declared DOUBLE holds ``float(int)``."""
    from pyspark.sql import types as T

    from mapwithstate.pyfunc.pytypes import holds_tuple
    from mapwithstate.pyfunc.sets import holds_set, refused_for_order

    if value.type.kind == "match":
        raise ctx.refuse(
            node,
            f"{what} holding a re.Match",
            "store or emit its groups: m.group(1), m['name'], m.start()",
        )
    if holds_set(value.type):
        raise refused_for_order(ctx, node, f"a set stored as {what}")
    if _holds_record(value.type, ctx.record_types):
        raise ctx.refuse(
            node,
            f"a record of rows as {what}",
            "store or emit its columns: {'v': r.v, 's': r.s}, [r.v for r in rows]",
        )
    if holds_tuple(value.type) or holds_tuple(py_type):
        raise ctx.refuse(
            node,
            f"{what} holding a {value.type}",
            "a tuple is not stored nor emitted: store its items (top[0][0], top[0][1]), a "
            "list of them ([k for k, v in pairs]) or a dict (dict(pairs))",
        )
    if value.type.kind == "none":
        return Value(F.lit(None).cast(spark_type), py_type, True)
    if exact and py_type.kind == "float" and value.type.kind in ("int", "num"):
        held = value.column if value.type.kind == "int" else value.column.getField("i")
        ctx.check(
            node,
            numeric_order.not_a_double(held),
            "OverflowError",
            f"int does not fit {what} ({spark_type.simpleString()}) exactly",
        )
    if value.type.kind == "num" and py_type.kind == "float":
        return Value(operators.as_float(value).cast(spark_type), py_type, value.nullable)
    if not exact and _widens(value.type, py_type):
        # Ints in a container of floats: each stored as float(int), as a DOUBLE field is.
        value = Value(_widened(value.column, value.type, py_type), py_type, value.nullable)
    joined = unify(py_type, value.type)
    if value.type.kind in ("int", "bool") and py_type.kind == "float":
        joined = py_type
    if value.type.kind == "bool" and py_type.kind == "int":
        joined = py_type
    if joined != py_type:
        raise ctx.refuse(
            node,
            f"{what} is {py_type.name} ({spark_type.simpleString()}) but the value is {value.type}",
            "convert it explicitly (int(), float(), str(), bool())",
        )
    column = value.column
    narrow = {
        T.IntegerType: (-(1 << 31), (1 << 31) - 1),
        T.ShortType: (-(1 << 15), (1 << 15) - 1),
        T.ByteType: (-128, 127),
    }.get(type(spark_type))
    if narrow is not None and value.type.kind == "int":
        ctx.check(
            node,
            (column < F.lit(narrow[0])) | (column > F.lit(narrow[1])),
            "OverflowError",
            f"int does not fit {what} ({spark_type.simpleString()})",
        )
        column = F.when((column >= F.lit(narrow[0])) & (column <= F.lit(narrow[1])), column)
    return Value(ctx.cast(column, spark_type), py_type, value.nullable)


def row_field(ctx: Context, node: ast.AST, row: Value, name: str) -> Value:
    """Field ``name`` of a struct value (``row.name``, ``row["name"]``). The caller checks the
    row is not ``None`` first, with the exception Python raises for its access: ``row.name``
    an ``AttributeError``, ``row["name"]`` a ``TypeError``."""
    fields = dict(row.type.args)
    if name not in fields:
        raise ctx.refuse(node, f"unknown field {name!r}", f"the row has {', '.join(fields)}")
    return Value(row.column.getField(name), fields[name], True)


def captured(ctx: Context, node: ast.AST, found: Any) -> Any:
    """A global or closure variable: a constant becomes a literal, modules and supported
    functions stay Python objects for calls and attributes."""
    import types

    if isinstance(found, (bool, int, float, str)) or found is None:
        try:
            return literal(found)
        except OverflowError:
            raise ctx.refuse(
                node, f"module constant {found}", "ints are 64-bit (BIGINT) in a compiled function"
            ) from None
    from datetime import date, timedelta

    if isinstance(found, (date, timedelta)):
        return literal(found)
    if isinstance(found, dict):
        from mapwithstate.pyfunc.dict_displays import captured_dict

        return captured_dict(ctx, node, found)
    if isinstance(found, (set, frozenset)) and all(
        isinstance(x, (bool, int, float, str)) or x is None for x in found
    ):
        from mapwithstate.pyfunc.sets import constant

        return constant(ctx, node, found)
    if (
        isinstance(found, (list, tuple, frozenset, set))
        and all(isinstance(x, (bool, int, float, str)) for x in found)
        and not isinstance(found, (set, frozenset))
    ):
        items = [literal(x) for x in found]
        element = unified(
            (i.type for i in items),
            lambda joined, t: ctx.refuse(
                node,
                f"module constant list of {joined} and {t} elements",
                "a list is an array Column: one element type",
            ),
        )
        column = F.array(*[i.column for i in items]) if items else F.array()
        return Value(column, list_of(element), False, list(found))
    if isinstance(found, (types.ModuleType, types.BuiltinFunctionType, types.FunctionType, type)):
        return found
    import re

    if isinstance(found, re.Pattern):
        return found  # a module-level re.compile(...): its methods compile (regex_calls)
    raise ctx.refuse(
        node,
        f"captured {type(found).__name__} object",
        "a state function may use module constants (numbers, strings, lists of "
        "them, datetimes), math, datetime and pyspark.sql.functions",
    )


def _nests(value: Any) -> bool:
    """A list, tuple or dict constant holding a container (compiled as its display)."""
    items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    return any(isinstance(v, (list, tuple, dict)) for _, v in items)


def _type_of(value: Any) -> Optional[PyType]:
    return value.type if isinstance(value, Value) else None


def _describe(value: Any) -> str:
    if isinstance(value, Value):
        return str(value.type)
    if isinstance(value, Record):
        return "dict"
    return type(value).__name__


def _is_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "state"


def _is_empty_dict(node: ast.expr) -> bool:
    return isinstance(node, ast.Dict) and not node.keys


_ASSIGNED_CACHE: Dict[int, Set[str]] = {}


def _branches_change_in_place(it: Interpreter, value: ast.expr) -> bool:
    """``value`` is a conditional expression one of whose branches (or theirs, nested) is a
    changing call as a whole (``xs.pop(0) if c else None``)."""
    if not isinstance(value, ast.IfExp):
        return False
    return any(
        in_place.in_place_call(it, branch) is not None or _branches_change_in_place(it, branch)
        for branch in (value.body, value.orelse)
    )


def _assigned_names(tree: ast.FunctionDef) -> Set[str]:
    key = id(tree)
    if key not in _ASSIGNED_CACHE:
        _ASSIGNED_CACHE[key] = {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        } | {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n is not tree}
    return _ASSIGNED_CACHE[key]


_REFUSED_STATEMENTS = {
    ast.While: (
        "while loop",
        "iterate a bounded for loop instead: for i in range(limit): ... with break where the "
        "while's test fails (or over a list, a comprehension, sum/min/max/any/all)",
    ),
    ast.AsyncFor: ("async for loop", "no async in a state function; use a for loop"),
    ast.Try: (
        "try statement",
        "Python's exceptions become query failures; test the condition with if instead",
    ),
    ast.With: ("with statement", "no resources in a state function"),
    ast.ClassDef: ("class definition", "not in a state function"),
    ast.Import: (
        "import statement",
        "import at module level; math, datetime and pyspark.sql.functions are usable",
    ),
    ast.ImportFrom: ("import statement", "import at module level"),
    ast.Global: ("global statement", "state functions keep their state in state.update(...)"),
    ast.Nonlocal: ("nonlocal statement", "keep state in state.update(...)"),
}
_REFUSED_EXPRESSIONS = {
    "Await": "no async in a state function",
    "GeneratorExp": "a generator expression may only be the argument of sum/min/max/any/all/"
    "sorted/len or of a method (', '.join(...))",
    "Starred": "no unpacking in a state function",
    "Slice": "slices appear only in subscripts",
}


def _holds_record(py_type: PyType, records: Set[PyType]) -> bool:
    """Whether ``py_type`` is one of the ``records`` types or holds one (a list of them)."""
    if py_type in records:
        return True
    parts = [a[1] if isinstance(a, tuple) else a for a in py_type.args]
    return any(isinstance(p, PyType) and _holds_record(p, records) for p in parts)
