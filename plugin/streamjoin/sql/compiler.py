"""Compile a model's Spark SQL `SELECT` into a `JoinPlan`.

The supported subset is one SELECT over named inputs joined by INNER/LEFT/RIGHT/FULL
equi-joins (with residual predicates), LEFT SEMI/ANTI joins and the EXISTS / NOT EXISTS /
IN / NOT IN subqueries that reduce to them (`subqueries`), derived tables over one input
(`derived`), and parenthesized joins, `a LEFT JOIN (b JOIN c ON ...) ON ...`, whose join is the
right side of the join that reads it (`bind_nested`; `merged` makes joined subqueries so). Names
resolve in scopes (`scope`); WHERE conditions are placed by `placement`. Everything else fails here, naming the construct and its line and column (`positions`).

>>> from streamjoin.spec import InputSpec, ModelConfig
>>> a = InputSpec.from_dict("a", {"columns": [["id", "int"], ["v", "int"]]})
>>> b = InputSpec.from_dict("b", {"columns": [["id", "int"], ["w", "int"]]})
>>> plan = compile_sql("m", "SELECT a.id, b.w FROM a LEFT JOIN b ON a.id = b.id", {"a": a, "b": b})
>>> plan.root.join_type.value, plan.root.keys[0].left, plan.output_names
('left', '`a__id`', ['id', 'w'])
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping

import sqlglot
from sqlglot import exp

from ..errors import CompileError
from ..spec import InputSpec, ModelConfig
from ..types import JoinType, Side, q
from .asof import MatchCondition, bind_asof, match_condition
from .asof import parseable as asof_parseable
from .conditions import and_all, has_subquery, predicates
from .ctes import inlined
from .derived import bind_derived
from .determinism import check_stable, first_unstable_call
from .from_items import from_clause, input_named, parenthesized
from .merged import merged
from .using import rewritten
from .placement import equi_key, place_predicates, push_into
from .positions import located
from .plan import SINGLE_GROUP_KEY, EquiKey, Join, JoinPlan, Node, OutputColumn, Scan, scans, subtree
from .scope import Binding, Scope
from .strategy import choose_strategy, keep_binary
from .subqueries import add_subquery_join, is_subquery_predicate
from .temporal import AsOf, as_of, bind_temporal, reject_as_of
from .time_bounds import check_event_times, extract_time_bound
from .windows import bind_window_joins, input_table, parseable, tvf_windows, window_call, window_view

_UNSUPPORTED_CLAUSES = {
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "distinct": "DISTINCT",
    "qualify": "QUALIFY",
    "with_": "WITH (common table expressions) inside a subquery",
    "with": "WITH (common table expressions) inside a subquery",
    "laterals": "LATERAL VIEW",
    "pivots": "PIVOT",
}


class _Compiler:
    """One model's compilation: binds FROM and JOINs, places conditions, builds the plan."""

    def __init__(self, model: str, sql: str, inputs: Mapping[str, InputSpec], config: ModelConfig) -> None:
        self.model = model
        self.sql = sql
        self.inputs = {name.lower(): spec for name, spec in inputs.items()}
        self.config = config
        self.used_prefixes: set[str] = set()
        self.prefixes: dict[str, InputSpec] = {}
        self.join_counter = 0
        self.as_of: dict[str, AsOf] = {}  # join id -> its FOR SYSTEM_TIME AS OF (temporal joins)
        self.match_conditions: list[MatchCondition] = []  # ASOF joins' MATCH_CONDITIONs not yet bound

    # -- errors -----------------------------------------------------------------------------
    def fail(self, message: str, node: exp.Expression | None = None) -> CompileError:
        return CompileError(message + (located(node, self.sql) if node is not None else ""), model=self.model)

    # -- entry ------------------------------------------------------------------------------
    def compile(self) -> JoinPlan:
        try:
            text, self.match_conditions = asof_parseable(parseable(self.sql))
            tree = sqlglot.parse_one(text, read="spark")
        except sqlglot.errors.ParseError as exc:
            raise CompileError(f"cannot parse the SQL: {exc}", model=self.model) from exc
        unstable = first_unstable_call(tree)
        tree = merged(rewritten(inlined(tree, self.fail), self.inputs, self.fail), self.inputs, self.fail)
        if not isinstance(tree, exp.Select):
            kind = type(tree).__name__.upper()
            raise self.fail(f"{kind} is not supported: a streaming_join model is one SELECT with joins", tree)
        self.check_select(tree, top=True)
        scope = Scope()
        root = self.build_from(tree, scope)
        pending: list[exp.Expression] = []
        where = tree.args.get("where")
        post_filters: list[exp.Expression] = []
        for conjunct in predicates(where.this) if where else []:
            if is_subquery_predicate(conjunct):
                root = add_subquery_join(self, root, conjunct, scope)
            elif has_subquery(conjunct):
                raise self.fail("a subquery inside OR or another expression is not supported; only AND-ed "
                                "[NOT] EXISTS and [NOT] IN subqueries", conjunct)
            else:
                pending.append(conjunct)
        root, leftover = place_predicates(root, pending, scope, self.fail)
        post_filters.extend(leftover)
        root = extract_time_bound(root, self.prefixes, self.fail)
        root = bind_temporal(root, self.as_of, self.prefixes, self.fail)
        root = extract_time_bound(root, self.prefixes, self.fail)  # interval joins of temporal joins' rows
        root = bind_window_joins(root, self.prefixes, self.fail)
        self.check_nested(root)
        root = self.keyed(root)
        outputs = self.outputs(tree, scope, root)
        plan = JoinPlan(
            model=self.model,
            sql=self.sql,
            inputs=in_query_order(root, self.inputs.values()),
            config=self.config,
            root=root,
            filters=tuple(scope.render(f, self.fail) for f in post_filters),
            outputs=tuple(outputs),
        )
        check_event_times(plan, self.fail)
        check_stable(plan, unstable, self.fail)
        kind = plan.binary_only()
        return keep_binary(plan, self.fail, kind) if kind else choose_strategy(plan, self.fail)

    # -- checks -----------------------------------------------------------------------------
    def check_select(self, select: exp.Select, *, top: bool) -> None:
        for key, label in _UNSUPPORTED_CLAUSES.items():
            if key == "distinct" and not top:
                continue  # which rows have a match in [NOT] IN / EXISTS does not depend on duplicates
            value = select.args.get(key)
            if value:
                raise self.fail(f"{label} is not supported in a streaming join", value if isinstance(value, exp.Expression) else select)
        for node in select.walk():
            if isinstance(node, exp.Window):
                raise self.fail(f"window function {node.this.sql('spark')} is not supported", node)
            if isinstance(node, exp.AggFunc) and node.find_ancestor(exp.Select) is select:
                raise self.fail(f"aggregate function {node.sql('spark')} is not supported (no GROUP BY in a streaming join)", node)
            if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
                raise self.fail(f"{type(node).__name__.upper()} is not supported", node)
        if top and not select.expressions:
            raise self.fail("the SELECT list is empty", select)

    # -- FROM and JOINs ---------------------------------------------------------------------
    def bind(self, table: exp.Expression, scope: Scope) -> Node:
        first = parenthesized(table)
        if first is not None:
            return self.bind_nested(first, scope)
        if isinstance(table, exp.Subquery):
            return bind_derived(self, table, scope)
        call = window_call(table)
        if call is not None:
            spec = self.input_spec(input_table(call, self.fail))
            view, tvf = window_view(call, spec.as_queried(), self.fail)
            scan = self.register(table.alias or spec.name, view, spec, scope, table)
            return replace(scan, windows=tvf_windows(tvf, scan))
        if not isinstance(table, exp.Table):
            raise self.fail(f"{type(table).__name__} in FROM is not supported: join named inputs only", table)
        spec = self.input_spec(table)
        return self.register(table.alias_or_name, spec.as_queried(), spec, scope, table)

    def input_spec(self, table: exp.Table) -> InputSpec:
        spec = input_named(table, self.inputs)
        if spec is None:
            known = ", ".join(sorted(s.name for s in self.inputs.values()))
            raise self.fail(f"unknown input '{table.name}' (declared inputs: {known})", table)
        return spec

    def register(self, alias: str, view: InputSpec, spec: InputSpec, scope: Scope, where: exp.Expression,
                 **derived: tuple[str, ...]) -> Scan:
        """Bind `alias` in `scope` to an input seen as `view` (its columns as the query sees them)."""
        if alias.lower() in scope.bindings:
            raise self.fail(f"alias '{alias}' is used twice", where)
        prefix = alias
        n = 1
        while prefix.lower() in self.used_prefixes:
            n += 1
            prefix = f"{alias}{n}"
        self.used_prefixes.add(prefix.lower())
        self.prefixes[prefix] = view
        binding = Binding(alias, view, prefix)
        scope.bindings[alias.lower()] = binding
        return Scan(input=spec.name, alias=prefix, proc_time=spec.proc_time,
                    columns=tuple((c.name, binding.internal(c.name)) for c in view.columns), **derived)

    def next_id(self) -> str:
        self.join_counter += 1
        return f"j{self.join_counter}"

    def bind_nested(self, first: exp.Table, scope: Scope) -> Node:
        """A parenthesized join, `(b JOIN c ON ...)` (`parenthesized`; also a joined subquery an outer
        join reads, `merged`): its tables, in the query's scope, joined by its regular joins."""
        for join in first.args["joins"]:
            if join.args.get("method") or join.this.find(exp.Version) or window_call(join.this) is not None:
                raise self.fail("a parenthesized join may hold regular joins of inputs only (no temporal, ASOF or "
                                "window join): write those in the outer FROM", join)
            if join.args.get("using"):
                raise self.fail("USING inside a parenthesized join is not supported: write its condition after ON", join)
        return self.joined(self.bind(first, scope), first.args["joins"], scope)

    def check_nested(self, node: Node) -> None:
        """Refuse a time-based join inside a join on the right of another (`bind_nested`): time-based joins
        run on the left of the joins above them (a cascade), where the rows they emit on the watermark go."""
        if not isinstance(node, Join):
            return
        timed = next((n for n in subtree(node.right) if isinstance(n, Join) and n.time_based), None)
        if timed is not None:
            kind = f"{timed.kind}{' interval' if timed.time_bound else ''}"
            raise self.fail(f"the {kind} join {timed.id} of {', '.join(sorted(timed.aliases))} is time-based and sits "
                            f"inside the join on the right of join {node.id}: join those inputs in the outer FROM")
        self.check_nested(node.left)
        self.check_nested(node.right)

    def build_from(self, select: exp.Select, scope: Scope) -> Node:
        from_ = from_clause(select)
        if from_ is None:
            raise self.fail("a streaming join needs a FROM clause", select)
        reject_as_of(from_.this, self.fail)
        return self.joined(self.bind(from_.this, scope), select.args.get("joins") or [], scope)

    def joined(self, node: Node, joins: list[exp.Join], scope: Scope) -> Node:
        """`node` joined by `joins` in order, as FROM writes them."""
        for join in joins:
            kind = (join.args.get("kind") or "").upper()
            side = (join.args.get("side") or "").upper()
            method = str(join.args.get("method") or "").upper()
            if method and method != "ASOF":
                raise self.fail(f"{method} joins are not supported", join)
            if kind == "CROSS":  # `FROM a, b` or `a CROSS JOIN b`: WHERE's conditions join them
                reject_as_of(join.this, self.fail, after_comma=True)
                right = self.bind(join.this, scope)
                node = Join(self.next_id(), JoinType.INNER, node, right, keys=())
                continue
            if kind in ("SEMI", "ANTI"):
                join_type = JoinType.SEMI if kind == "SEMI" else JoinType.ANTI
            elif side in ("LEFT", "RIGHT", "FULL"):
                join_type = JoinType(side.lower())
            elif kind in ("", "INNER", "OUTER"):
                join_type = JoinType.INNER
            else:
                raise self.fail(f"{kind} JOIN is not supported", join)
            time = as_of(join.this, self.fail)
            right = self.bind(join.this, scope)
            on_parts = predicates(join.args["on"]) if join.args.get("on") else []  # USING is ON by now (`using`)
            if method == "ASOF":
                node = bind_asof(self, node, right, join_type, on_parts, match_condition(join, self.match_conditions),
                                 scope, join)
                continue
            if not on_parts:
                raise self.fail(f"{join_type.value.upper()} JOIN {right.alias} has no ON condition: write its join condition after ON", join)
            node = self.join_with(node, right, join_type, on_parts, scope, join)
            if time is not None:
                self.as_of[node.id] = AsOf(scope.render(time, self.fail), join)
        return node

    def join_with(self, left: Node, right: Node, join_type: JoinType, parts: list[exp.Expression],
                  scope: Scope, where: exp.Expression, *, null_aware: bool = False) -> Join:
        """Split ON conjuncts into equi-keys, pushed-down filters and the residual."""
        keys: list[EquiKey] = []
        residual: list[exp.Expression] = []
        left_aliases = {a.lower() for a in left.aliases}
        right_aliases = {a.lower() for a in right.aliases}
        pushed: dict[str, list[exp.Expression]] = {}
        for c in parts:
            refs = scope.refs(c, self.fail)
            key = equi_key(c, left_aliases, right_aliases, scope, self.fail)
            if key is not None:
                keys.append(key)
            elif refs and refs <= right_aliases and not join_type.preserves(Side.RIGHT) and isinstance(right, Scan):
                pushed.setdefault(right.alias, []).append(c)  # filter the right input before joining
            elif refs and refs <= left_aliases and not join_type.preserves(Side.LEFT) and join_type is JoinType.INNER:
                left = push_into(left, c, scope, self.fail)
            else:
                residual.append(c)
        if isinstance(right, Scan) and right.alias in pushed:
            right = replace(right, filters=right.filters + tuple(scope.render(p, self.fail) for p in pushed[right.alias]))
        return Join(
            id=self.next_id(),
            join_type=join_type,
            left=left,
            right=right,
            keys=tuple(keys),
            residual=scope.render(and_all(residual), self.fail) if residual else None,
            null_aware=null_aware,
        )

    # -- after placement -------------------------------------------------------------------
    def keyed(self, node: Node) -> Node:
        """The join tree with a key for every join: a join without an equality between its sides
        (a theta or cross join) gets `SINGLE_GROUP_KEY`, as Flink runs it in one key group. An
        interval join keeps none (its time bound bounds its state); temporal, window and ASOF joins
        have checked their equalities when they were bound."""
        if not isinstance(node, Join):
            return node
        node = replace(node, left=self.keyed(node.left), right=self.keyed(node.right))
        if node.keys or node.time_bound or node.temporal or node.window or node.asof:
            return node
        return replace(node, keys=(SINGLE_GROUP_KEY,))

    # -- SELECT list ------------------------------------------------------------------------
    def outputs(self, select: exp.Select, scope: Scope, root: Node) -> list[OutputColumn]:
        visible = {a.lower() for a in _visible_aliases(root)}
        out: list[OutputColumn] = []
        for e in select.expressions:
            if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
                table = e.table if isinstance(e, exp.Column) else ""
                for b in scope.all_bindings():
                    if b.prefix.lower() in visible and (not table or table.lower() == b.alias.lower()):
                        out.extend(OutputColumn(n, q(b.internal(n))) for n in b.spec.column_names)
                continue
            for col in e.find_all(exp.Column):
                binding, _ = scope.resolve(col, self.fail)
                if binding.prefix.lower() not in visible:
                    raise self.fail(f"column '{col.sql('spark')}' of a semi/anti-joined input cannot be selected", col)
            name = e.alias_or_name if (isinstance(e, (exp.Alias, exp.Column))) else e.sql("spark")
            body = e.this if isinstance(e, exp.Alias) else e
            out.append(OutputColumn(name, scope.render(body, self.fail)))
        seen: dict[str, int] = {}
        unique: list[OutputColumn] = []
        for o in out:
            n = seen.get(o.name.lower(), 0)
            seen[o.name.lower()] = n + 1
            unique.append(o if n == 0 else OutputColumn(f"{o.name}_{n + 1}", o.expr))
        return unique


def _visible_aliases(node: Node) -> set[str]:
    if isinstance(node, Scan):
        return {node.alias}
    if isinstance(node, Join):
        left = _visible_aliases(node.left)
        return left if not node.join_type.emits_pairs else left | _visible_aliases(node.right)
    return {s.alias for s in node.inputs}


def in_query_order(root: Node, declared: Iterable[InputSpec]) -> dict[str, InputSpec]:
    """The declared inputs by name, in the order the join tree reads them (its scans, left to right), then
    any declared but not read: a run's report lists its inputs so, whatever order declared them."""
    inputs = {spec.name: spec for spec in declared}
    return {**{scan.input: inputs[scan.input] for scan in scans(root) if scan.input in inputs}, **inputs}


def compile_sql(model: str, sql: str, inputs: Mapping[str, InputSpec], config: ModelConfig | None = None) -> JoinPlan:
    """Compile one model's SQL into a join plan, or raise `CompileError` naming the construct."""
    return _Compiler(model, sql, inputs, config or ModelConfig()).compile()
