"""Compile a model's Spark SQL `SELECT` into a `JoinPlan`.

The supported subset is one SELECT over named inputs joined by INNER/LEFT/RIGHT/FULL
equi-joins (with residual predicates), LEFT SEMI/ANTI joins and the EXISTS / NOT EXISTS /
IN / NOT IN subqueries that reduce to them. Everything else fails here, naming the construct.

>>> from streamjoin.spec import InputSpec, ModelConfig
>>> a = InputSpec.from_dict("a", {"columns": [["id", "int"], ["v", "int"]]})
>>> b = InputSpec.from_dict("b", {"columns": [["id", "int"], ["w", "int"]]})
>>> plan = compile_sql("m", "SELECT a.id, b.w FROM a LEFT JOIN b ON a.id = b.id", {"a": a, "b": b})
>>> plan.root.join_type.value, plan.root.keys[0].left, plan.output_names
('left', '`a__id`', ['id', 'w'])
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

import sqlglot
from sqlglot import exp

from ..errors import CompileError
from ..spec import Column, InputSpec, ModelConfig
from ..types import JoinType, Side, q
from .plan import EquiKey, Join, JoinPlan, Node, OutputColumn, Scan, internal_name
from .strategy import choose_strategy
from .time_bounds import conjuncts, extract_time_bound

_UNSUPPORTED_CLAUSES = {
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "distinct": "DISTINCT",
    "qualify": "QUALIFY",
    "with_": "WITH (common table expressions)",
    "with": "WITH (common table expressions)",
    "laterals": "LATERAL VIEW",
    "pivots": "PIVOT",
}


def _where(node: exp.Expression, sql: str) -> str:
    """Where a construct stands in the SQL text: 'line L, column C' when sqlglot knows it."""
    meta = getattr(node, "meta", None) or {}
    line, col = meta.get("line"), meta.get("col")
    if line is None:
        for child in node.walk():
            meta = getattr(child, "meta", None) or {}
            if meta.get("line") is not None:
                line, col = meta["line"], meta.get("col")
                break
    return f" at line {line}, column {col}" if line is not None else ""


@dataclass
class _Binding:
    alias: str
    spec: InputSpec
    prefix: str

    def internal(self, column: str) -> str:
        return internal_name(self.prefix, column)


@dataclass
class _Scope:
    bindings: dict[str, _Binding] = field(default_factory=dict)
    parent: "_Scope | None" = None
    # outer bindings shadowed by a subquery's own alias, under qualifiers only the compiler writes
    shadowed: dict[str, _Binding] = field(default_factory=dict)
    # scopes further out that a nested subquery may not read, searched only to explain the error
    out_of_reach: "_Scope | None" = None

    def all_bindings(self) -> list[_Binding]:
        return list(self.bindings.values())


class _Compiler:
    def __init__(self, model: str, sql: str, inputs: Mapping[str, InputSpec], config: ModelConfig) -> None:
        self.model = model
        self.sql = sql
        self.inputs = {name.lower(): spec for name, spec in inputs.items()}
        self.config = config
        self.used_prefixes: set[str] = set()
        self.prefixes: dict[str, InputSpec] = {}
        self.join_counter = 0

    # -- errors -----------------------------------------------------------------------------
    def fail(self, message: str, node: exp.Expression | None = None) -> CompileError:
        return CompileError(message + (_where(node, self.sql) if node is not None else ""), model=self.model)

    # -- entry ------------------------------------------------------------------------------
    def compile(self) -> JoinPlan:
        try:
            tree = sqlglot.parse_one(self.sql, read="spark")
        except sqlglot.errors.ParseError as exc:
            raise CompileError(f"cannot parse the SQL: {exc}", model=self.model) from exc
        if not isinstance(tree, exp.Select):
            kind = type(tree).__name__.upper()
            raise self.fail(f"{kind} is not supported: a streaming_join model is one SELECT with joins", tree)
        self.check_select(tree, top=True)
        scope = _Scope()
        root, pending = self.build_from(tree, scope)
        where = tree.args.get("where")
        post_filters: list[exp.Expression] = []
        for conjunct in predicates(where.this) if where else []:
            if self.is_subquery_predicate(conjunct):
                root = self.add_subquery_join(root, conjunct, scope)
            elif has_subquery(conjunct):
                raise self.fail("a subquery inside OR or another expression is not supported; only AND-ed "
                                "[NOT] EXISTS and [NOT] IN subqueries", conjunct)
            else:
                pending.append(conjunct)
        root, leftover = self.place_predicates(root, pending, scope)
        post_filters.extend(leftover)
        root = extract_time_bound(root, self.prefixes, self.fail)
        self.check_equi(root)
        outputs = self.outputs(tree, scope, root)
        plan = JoinPlan(
            model=self.model,
            sql=self.sql,
            inputs={spec.name: spec for spec in self.inputs.values()},
            config=self.config,
            root=root,
            filters=tuple(self.render(f, scope) for f in post_filters),
            outputs=tuple(outputs),
        )
        return choose_strategy(plan, self.fail)

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
    def bind(self, table: exp.Expression, scope: _Scope) -> Scan:
        if isinstance(table, exp.Subquery):
            return self.bind_derived(table, scope)
        if not isinstance(table, exp.Table):
            raise self.fail(f"{type(table).__name__} in FROM is not supported: join named inputs only", table)
        spec = self.input_spec(table)
        return self.register(table.alias_or_name, spec, spec, scope, table)

    def input_spec(self, table: exp.Table) -> InputSpec:
        spec = self.inputs.get(table.name.lower()) or self.inputs.get(".".join(p.name for p in table.parts).lower())
        if spec is None:
            known = ", ".join(sorted(s.name for s in self.inputs.values()))
            raise self.fail(f"unknown input '{table.name}' (declared inputs: {known})", table)
        return spec

    def register(self, alias: str, view: InputSpec, spec: InputSpec, scope: _Scope, where: exp.Expression,
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
        binding = _Binding(alias, view, prefix)
        scope.bindings[alias.lower()] = binding
        return Scan(input=spec.name, alias=prefix,
                    columns=tuple((c.name, binding.internal(c.name)) for c in view.columns), **derived)

    def bind_derived(self, table: exp.Subquery, scope: _Scope) -> Scan:
        """A subquery in FROM that computes columns of one input and filters its rows (row by row, so
        it is incremental as it is). It declares no unique key (its columns may not keep one), and
        keeps the input's event time where it selects that column as it is."""
        sub = table.this
        from_ = (sub.args.get("from_") or sub.args.get("from")) if isinstance(sub, exp.Select) else None
        if from_ is None or not isinstance(from_.this, exp.Table) or sub.args.get("joins"):
            raise self.fail("a subquery in FROM must select from one input, without joins", table)
        if not table.alias:
            raise self.fail("a subquery in FROM needs an alias", table)
        self.check_select(sub, top=True)
        spec = self.input_spec(from_.this)
        own = from_.this.alias_or_name
        inner = _Scope(bindings={own.lower(): _Binding(own, spec, own)})
        where = predicates(sub.args["where"].this) if sub.args.get("where") else []
        for x in where:
            if has_subquery(x):
                raise self.fail("a subquery inside a subquery in FROM is not supported", x)
        columns: list[tuple[str, str, str]] = []  # name, Spark SQL over the input's columns, type ('' if computed)
        for e in sub.expressions:
            if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
                columns += [(c.name, q(c.name), c.type) for c in spec.columns]
                continue
            body = e.this if isinstance(e, exp.Alias) else e
            name = e.alias_or_name if isinstance(e, (exp.Alias, exp.Column)) else e.sql("spark")
            kind = spec.column_type(self.resolve(body, inner)[1]) if isinstance(body, exp.Column) else ""
            columns.append((name, self.render(body, inner, as_input_columns=True), kind))
        names = [n.lower() for n, _, _ in columns]
        if len(set(names)) < len(names):
            raise self.fail("a subquery in FROM selects two columns of the same name; alias them apart", table)
        passed_time = [n for n, src, _ in columns if spec.event_time and src == q(spec.event_time)]
        view = replace(spec, columns=tuple(Column(n, t) for n, _, t in columns), unique_key=(),
                       event_time=passed_time[0] if passed_time else None)
        return self.register(table.alias, view, spec, scope, table, sources=tuple(src for _, src, _ in columns),
                             source_filters=tuple(self.render(x, inner, as_input_columns=True) for x in where))

    def next_id(self) -> str:
        self.join_counter += 1
        return f"j{self.join_counter}"

    def build_from(self, select: exp.Select, scope: _Scope) -> tuple[Node, list[exp.Expression]]:
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise self.fail("a streaming join needs a FROM clause", select)
        node: Node = self.bind(from_.this, scope)
        pending: list[exp.Expression] = []
        for join in select.args.get("joins") or []:
            kind = (join.args.get("kind") or "").upper()
            side = (join.args.get("side") or "").upper()
            if join.args.get("method"):
                raise self.fail(f"{join.args['method']} joins are not supported", join)
            if kind == "CROSS":
                if "pivots" in join.args:
                    raise self.fail("CROSS JOIN is not supported: a streaming join needs an equi-condition; write JOIN ... ON", join)
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
            right = self.bind(join.this, scope)
            on_parts: list[exp.Expression] = []
            if join.args.get("using"):
                for ident in join.args["using"]:
                    on_parts.append(exp.EQ(this=self.using_column(ident.name, node, scope, join), expression=exp.column(ident.name, right.alias)))
            if join.args.get("on"):
                on_parts.extend(predicates(join.args["on"]))
            if not on_parts:
                raise self.fail(f"{join_type.value.upper()} JOIN {right.alias} has no ON condition: a streaming join needs an equi-condition", join)
            node = self.join_with(node, right, join_type, on_parts, scope, join)
        return node, pending

    def using_column(self, name: str, left: Node, scope: _Scope, where: exp.Expression) -> exp.Column:
        owners = [b for b in scope.bindings.values() if b.prefix.lower() in {a.lower() for a in left.aliases}
                  and name.lower() in (c.lower() for c in b.spec.column_names)]
        if len(owners) != 1:
            raise self.fail(f"USING ({name}) is ambiguous or unknown on the left side", where)
        return exp.column(name, owners[0].alias)

    def join_with(self, left: Node, right: Node, join_type: JoinType, parts: list[exp.Expression],
                  scope: _Scope, where: exp.Expression, *, null_aware: bool = False) -> Join:
        """Split ON conjuncts into equi-keys, pushed-down filters and the residual."""
        keys: list[EquiKey] = []
        residual: list[exp.Expression] = []
        left_aliases = {a.lower() for a in left.aliases}
        right_aliases = {a.lower() for a in right.aliases}
        pushed: dict[str, list[exp.Expression]] = {}
        for c in parts:
            refs = self.refs(c, scope)
            key = self.equi_key(c, left_aliases, right_aliases, scope)
            if key is not None:
                keys.append(key)
            elif refs and refs <= right_aliases and not join_type.preserves(_RIGHT) and isinstance(right, Scan):
                pushed.setdefault(right.alias, []).append(c)  # filter the right input before joining
            elif refs and refs <= left_aliases and not join_type.preserves(_LEFT) and join_type is JoinType.INNER:
                left = self.push_into(left, c, scope)
            else:
                residual.append(c)
        if isinstance(right, Scan) and right.alias in pushed:
            right = replace(right, filters=right.filters + tuple(self.render(p, scope) for p in pushed[right.alias]))
        return Join(
            id=self.next_id(),
            join_type=join_type,
            left=left,
            right=right,
            keys=tuple(keys),
            residual=self.render(_and(residual), scope) if residual else None,
            null_aware=null_aware,
        )

    def equi_key(self, c: exp.Expression, left: set[str], right: set[str], scope: _Scope) -> EquiKey | None:
        if not isinstance(c, (exp.EQ, exp.NullSafeEQ)):
            return None
        a, b = c.this, c.expression
        ra, rb = self.refs(a, scope), self.refs(b, scope)
        if ra and rb and ra <= right and rb <= left:
            a, b, ra, rb = b, a, rb, ra
        if ra and rb and ra <= left and rb <= right:
            return EquiKey(self.render(a, scope), self.render(b, scope), isinstance(c, exp.NullSafeEQ))
        return None

    # -- predicates -------------------------------------------------------------------------
    def refs(self, e: exp.Expression, scope: _Scope) -> set[str]:
        """Internal prefixes of the inputs an expression reads."""
        return {self.resolve(col, scope)[0].prefix.lower() for col in e.find_all(exp.Column)}

    def resolve(self, col: exp.Column, scope: _Scope) -> tuple[_Binding, str]:
        table = col.table
        s: _Scope | None = scope
        beyond: _Scope | None = None
        while s is not None:
            beyond = s.out_of_reach or beyond
            if table:
                binding = s.bindings.get(table.lower()) or s.shadowed.get(table.lower())
                if binding is not None:
                    for name in binding.spec.column_names:
                        if name.lower() == col.name.lower():
                            return binding, name
                    raise self.fail(f"input '{binding.spec.name}' (alias {binding.alias}) has no column '{col.name}'", col)
            else:
                owners = [(b, n) for b in s.bindings.values() for n in b.spec.column_names if n.lower() == col.name.lower()]
                if len(owners) > 1:
                    names = ", ".join(b.alias for b, _ in owners)
                    raise self.fail(f"column '{col.name}' is ambiguous (in {names}); qualify it", col)
                if owners:
                    return owners[0]
            s = s.parent
        if beyond is not None and self.resolvable(col, beyond):
            raise self.fail(f"column '{col.sql('spark')}' belongs to a query two or more levels out; a nested "
                            "subquery may correlate only with the subquery right around it", col)
        raise self.fail(f"unknown column '{col.sql('spark')}'", col)

    def resolvable(self, col: exp.Column, scope: _Scope) -> bool:
        try:
            self.resolve(col, scope)
        except CompileError:
            return False
        return True

    def render(self, e: exp.Expression, scope: _Scope, *, as_input_columns: bool = False) -> str:
        """Spark SQL text of `e` with every column replaced by its quoted internal name (or, for a
        derived table's expressions, by the input's own column name)."""
        def swap(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column):
                binding, name = self.resolve(node, scope)
                return exp.column(exp.to_identifier(name if as_input_columns else binding.internal(name), quoted=True))
            return node

        return e.copy().transform(swap).sql(dialect="spark")

    def push_into(self, node: Node, predicate: exp.Expression, scope: _Scope) -> Node:
        """Push a single-input predicate down to its scan where no outer join null-pads that input."""
        target = next(iter(self.refs(predicate, scope)))
        if isinstance(node, Scan):
            return replace(node, filters=node.filters + (self.render(predicate, scope),))
        if isinstance(node, Join):
            if target in {a.lower() for a in node.left.aliases}:
                return Join(node.id, node.join_type, self.push_into(node.left, predicate, scope), node.right,
                            node.keys, node.residual, node.null_aware)
            return Join(node.id, node.join_type, node.left, self.push_into(node.right, predicate, scope),
                        node.keys, node.residual, node.null_aware)
        return node

    def can_push(self, node: Node, alias: str) -> bool:
        """True when no join between the root and `alias`'s scan null-pads that input."""
        if isinstance(node, Scan):
            return node.alias.lower() == alias
        if isinstance(node, Join):
            in_left = alias in {a.lower() for a in node.left.aliases}
            child, side = (node.left, _LEFT) if in_left else (node.right, _RIGHT)
            null_padded = node.join_type.preserves(side.other) and node.join_type.emits_pairs
            if node.join_type is JoinType.FULL or null_padded:
                return False
            return self.can_push(child, alias)
        return False

    def place_predicates(self, root: Node, parts: list[exp.Expression], scope: _Scope) -> tuple[Node, list[exp.Expression]]:
        """WHERE conjuncts become join keys of comma joins, pushed filters, or post-join filters."""
        leftover: list[exp.Expression] = []
        for c in parts:
            refs = self.refs(c, scope)
            if len(refs) == 1 and self.can_push(root, next(iter(refs))):
                root = self.push_into(root, c, scope)
                continue
            placed, root = self.attach_to_inner_join(root, c, refs, scope)
            if not placed:
                leftover.append(c)
        return root, leftover

    def attach_to_inner_join(self, node: Node, c: exp.Expression, refs: set[str], scope: _Scope) -> tuple[bool, Node]:
        """Attach a two-input WHERE conjunct to the lowest INNER join covering it, if reachable."""
        if not isinstance(node, Join) or len(refs) < 2:
            return False, node
        left_aliases = {a.lower() for a in node.left.aliases}
        right_aliases = {a.lower() for a in node.right.aliases}
        for child_name, child_aliases in (("left", left_aliases), ("right", right_aliases)):
            if refs <= child_aliases:
                side = _LEFT if child_name == "left" else _RIGHT
                if node.join_type is JoinType.INNER or (node.join_type.preserves(side) and not node.join_type.preserves(side.other)):
                    placed, child = self.attach_to_inner_join(getattr(node, child_name), c, refs, scope)
                    if placed:
                        return True, _replace_child(node, child_name, child)
                return False, node
        if node.join_type is not JoinType.INNER or not refs <= left_aliases | right_aliases:
            return False, node
        key = self.equi_key(c, left_aliases, right_aliases, scope)
        if key is not None:
            return True, Join(node.id, node.join_type, node.left, node.right, node.keys + (key,), node.residual, node.null_aware)
        rendered = self.render(c, scope)
        residual = f"({node.residual}) AND ({rendered})" if node.residual else rendered
        return True, Join(node.id, node.join_type, node.left, node.right, node.keys, residual, node.null_aware)

    def check_equi(self, node: Node) -> None:
        """Every join needs an equality, except an interval join: its time bound keeps its state
        bounded, so without one it joins on the time condition alone (as Flink does)."""
        if isinstance(node, Join):
            if not node.keys and node.time_bound is None:
                raise CompileError(
                    f"the join of {', '.join(sorted(node.left.aliases))} with {', '.join(sorted(node.right.aliases))} "
                    "has no equi-condition (a cross join): add an equality between the two sides",
                    model=self.model)
            self.check_equi(node.left)
            self.check_equi(node.right)

    # -- subqueries -------------------------------------------------------------------------
    @staticmethod
    def is_subquery_predicate(c: exp.Expression) -> bool:
        inner = c.this if isinstance(c, exp.Not) else c
        if isinstance(inner, exp.Exists):
            return True
        return isinstance(inner, exp.In) and inner.args.get("query") is not None

    def add_subquery_join(self, root: Node, c: exp.Expression, scope: _Scope) -> Node:
        """`[NOT] EXISTS (...)` / `x [NOT] IN (SELECT ...)` as a semi or anti join of `root` with the subquery.

        `x NOT IN (S)` holds when no row s of S has `x = s OR x IS NULL OR s IS NULL` (SQL's rule for
        NULLs): correlated, that is the anti join's residual; uncorrelated, one column, the join is
        null-aware (it tracks whether S is empty or holds a NULL). Nested subqueries in the
        subquery's WHERE become semi/anti joins of its input."""
        negated = isinstance(c, exp.Not)
        inner = c.this if negated else c
        sub = inner.this if isinstance(inner, exp.Exists) else inner.args["query"].this
        if isinstance(sub, exp.Subquery):
            sub = sub.this
        if not isinstance(sub, exp.Select):
            raise self.fail("only a plain SELECT is supported inside EXISTS / IN", inner)
        self.check_select(sub, top=False)
        if sub.args.get("joins"):
            raise self.fail("a subquery with joins is not supported", sub)
        sub_scope = _Scope(parent=scope)
        from_ = sub.args.get("from_") or sub.args.get("from")
        right: Node = self.bind(from_.this, sub_scope)
        right_aliases = {right.alias.lower()}
        where_parts = predicates(sub.args["where"].this) if sub.args.get("where") else []
        nested = [x for x in where_parts if self.is_subquery_predicate(x)]
        plain = [x for x in where_parts if not self.is_subquery_predicate(x)]
        correlated = [x for x in plain if self.refs(x, sub_scope) - right_aliases]
        local = [x for x in plain if not (self.refs(x, sub_scope) - right_aliases)]
        if local:
            right = replace(right, filters=right.filters + tuple(self.render(x, sub_scope) for x in local))
        for x in nested:  # correlated with this subquery's input only: its scope does not see further out
            right = self.add_subquery_join(right, x, _Scope(bindings=sub_scope.bindings, out_of_reach=scope))
        null_aware = False
        if isinstance(inner, exp.In):
            outer = inner.this.expressions if isinstance(inner.this, exp.Tuple) else [inner.this]
            if len(outer) != len(sub.expressions):
                raise self.fail(f"IN compares {len(outer)} column(s) with a subquery selecting {len(sub.expressions)}", inner)
            pairs = [(self.qualify(o, scope, sub_scope), s.copy()) for o, s in zip(outer, sub.expressions)]
            if not negated:
                correlated += [exp.EQ(this=o, expression=s) for o, s in pairs]
            elif correlated:
                correlated += [exp.or_(exp.EQ(this=o, expression=s), exp.Is(this=o.copy(), expression=exp.Null()),
                                       exp.Is(this=s.copy(), expression=exp.Null())) for o, s in pairs]
            elif len(pairs) == 1:
                correlated.append(exp.EQ(this=pairs[0][0], expression=pairs[0][1]))
                null_aware = True
            else:
                raise self.fail("an uncorrelated NOT IN over several columns is not supported; compare one column, "
                                "or correlate the subquery with an equality", inner)
        if not correlated:
            raise self.fail("an uncorrelated EXISTS subquery is not supported: correlate it with an equality", inner)
        join_type = JoinType.ANTI if negated else JoinType.SEMI
        join = self.join_with(root, right, join_type, correlated, sub_scope, inner, null_aware=null_aware)
        if not join.keys:
            raise self.fail("a correlated subquery needs an equality between the outer query and the subquery", inner)
        if null_aware and (len(join.keys) != 1 or join.residual is not None):
            raise self.fail("NOT IN is supported for one column compared with the subquery's one column", inner)
        return join

    def qualify(self, e: exp.Expression, outer: _Scope, inner: _Scope) -> exp.Expression:
        """`e` (written in the outer query) with its columns qualified so the subquery's scope cannot capture them.

        Where the subquery reuses an outer alias (`pk NOT IN (SELECT pk FROM t WHERE ...)` inside
        `FROM t`), the outer input is reached through a qualifier of the compiler's own."""
        def fix(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column):
                binding, name = self.resolve(node, outer)
                qualifier = binding.alias
                if qualifier.lower() in inner.bindings:
                    qualifier = f"outer {binding.prefix}"  # a space: no alias the user wrote can equal it
                    inner.shadowed[qualifier.lower()] = binding
                return exp.column(name, exp.to_identifier(qualifier, quoted=True))
            return node

        return e.copy().transform(fix)

    # -- SELECT list ------------------------------------------------------------------------
    def outputs(self, select: exp.Select, scope: _Scope, root: Node) -> list[OutputColumn]:
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
                binding, _ = self.resolve(col, scope)
                if binding.prefix.lower() not in visible:
                    raise self.fail(f"column '{col.sql('spark')}' of a semi/anti-joined input cannot be selected", col)
            name = e.alias_or_name if (isinstance(e, (exp.Alias, exp.Column))) else e.sql("spark")
            body = e.this if isinstance(e, exp.Alias) else e
            out.append(OutputColumn(name, self.render(body, scope)))
        seen: dict[str, int] = {}
        unique: list[OutputColumn] = []
        for o in out:
            n = seen.get(o.name.lower(), 0)
            seen[o.name.lower()] = n + 1
            unique.append(o if n == 0 else OutputColumn(f"{o.name}_{n + 1}", o.expr))
        return unique


_LEFT, _RIGHT = Side.LEFT, Side.RIGHT


def _replace_child(node: Join, which: str, child: Node) -> Join:
    left, right = (child, node.right) if which == "left" else (node.left, child)
    return Join(node.id, node.join_type, left, right, node.keys, node.residual, node.null_aware)


def _visible_aliases(node: Node) -> set[str]:
    if isinstance(node, Scan):
        return {node.alias}
    if isinstance(node, Join):
        left = _visible_aliases(node.left)
        return left if not node.join_type.emits_pairs else left | _visible_aliases(node.right)
    return {s.alias for s in node.inputs}


def _and(parts: Iterable[exp.Expression]) -> exp.Expression:
    parts = list(parts)
    out = parts[0]
    for p in parts[1:]:
        out = exp.And(this=out, expression=p)
    return out


def has_subquery(e: exp.Expression) -> bool:
    """Whether `e` holds an EXISTS or IN subquery anywhere inside."""
    return e.find(exp.Exists) is not None or any(i.args.get("query") for i in e.find_all(exp.In))


def predicates(e: exp.Expression) -> list[exp.Expression]:
    """The AND-ed parts of a condition, with `a = b OR (a IS NULL AND b IS NULL)` read as `a <=> b`
    (the form Flink's planner also recognises as a null-safe join key).

    >>> [p.sql("spark") for p in predicates(sqlglot.parse_one("x.a = y.a OR (x.a IS NULL AND y.a IS NULL)"))]
    ['x.a <=> y.a']
    """
    return [_null_safe_equality(c) for c in conjuncts(e)]


def _null_safe_equality(c: exp.Expression) -> exp.Expression:
    if not isinstance(c, exp.Or):
        return c
    branches = [b.unnest() for b in (c.this, c.expression)]
    for eq, nulls in (branches, branches[::-1]):
        if isinstance(eq, exp.EQ) and isinstance(nulls, exp.And):
            tested = [t.this for t in conjuncts(nulls) if isinstance(t, exp.Is) and isinstance(t.expression, exp.Null)]
            if len(tested) == 2 and {t.sql() for t in tested} == {eq.this.sql(), eq.expression.sql()} \
                    and eq.this.sql() != eq.expression.sql():
                return exp.NullSafeEQ(this=eq.this.copy(), expression=eq.expression.copy())
    return c


def compile_sql(model: str, sql: str, inputs: Mapping[str, InputSpec], config: ModelConfig | None = None) -> JoinPlan:
    """Compile one model's SQL into a join plan, or raise `CompileError` naming the construct."""
    return _Compiler(model, sql, inputs, config or ModelConfig()).compile()
