"""Where each condition goes: an equi-key of a join, a filter pushed down to an input's scan, a
residual of an inner join, or (what none of these takes) a filter after the joins.

A predicate on one input is pushed to its scan only where no outer join null-pads that input:
below `o LEFT JOIN p`, `o.amount > 1` filters `o`'s scan, while `p.price > 1` must see the
padded rows and stays above the join.
"""
from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..types import JoinType, Side
from .plan import EquiKey, Join, Node, Scan
from .scope import Fail, Scope


def equi_key(c: exp.Expression, left: set[str], right: set[str], scope: Scope, fail: Fail) -> EquiKey | None:
    """`c` as a join key when it is `=` or `<=>` between an expression of each side, else None."""
    if not isinstance(c, (exp.EQ, exp.NullSafeEQ)):
        return None
    a, b = c.this, c.expression
    ra, rb = scope.refs(a, fail), scope.refs(b, fail)
    if ra and rb and ra <= right and rb <= left:
        a, b, ra, rb = b, a, rb, ra
    if ra and rb and ra <= left and rb <= right:
        return EquiKey(scope.render(a, fail), scope.render(b, fail), isinstance(c, exp.NullSafeEQ))
    return None


def push_into(node: Node, predicate: exp.Expression, scope: Scope, fail: Fail) -> Node:
    """Push a single-input predicate down to its scan where no outer join null-pads that input."""
    target = next(iter(scope.refs(predicate, fail)))
    if isinstance(node, Scan):
        return replace(node, filters=node.filters + (scope.render(predicate, fail),))
    if isinstance(node, Join):
        if target in {a.lower() for a in node.left.aliases}:
            return replace(node, left=push_into(node.left, predicate, scope, fail))
        return replace(node, right=push_into(node.right, predicate, scope, fail))
    return node


def can_push(node: Node, alias: str) -> bool:
    """True when no join between the root and `alias`'s scan null-pads that input, and `alias` is not
    the right side of an ASOF join (filtering it first would pick another nearest row)."""
    if isinstance(node, Scan):
        return node.alias.lower() == alias
    if isinstance(node, Join):
        in_left = alias in {a.lower() for a in node.left.aliases}
        if node.asof is not None and not in_left:
            return False
        child, side = (node.left, Side.LEFT) if in_left else (node.right, Side.RIGHT)
        null_padded = node.join_type.preserves(side.other) and node.join_type.emits_pairs
        if node.join_type is JoinType.FULL or null_padded:
            return False
        return can_push(child, alias)
    return False


def place_predicates(root: Node, parts: list[exp.Expression], scope: Scope,
                     fail: Fail) -> tuple[Node, list[exp.Expression]]:
    """WHERE conjuncts become join keys of comma joins, pushed filters, or post-join filters."""
    leftover: list[exp.Expression] = []
    for c in parts:
        refs = scope.refs(c, fail)
        if len(refs) == 1 and can_push(root, next(iter(refs))):
            root = push_into(root, c, scope, fail)
            continue
        placed, root = _attach_to_inner_join(root, c, refs, scope, fail)
        if not placed:
            leftover.append(c)
    return root, leftover


def _attach_to_inner_join(node: Node, c: exp.Expression, refs: set[str], scope: Scope,
                          fail: Fail) -> tuple[bool, Node]:
    """Attach a two-input WHERE conjunct to the lowest INNER join covering it, if reachable (never to
    an ASOF join or below it: the conjunct filters the rows it chose)."""
    if not isinstance(node, Join) or len(refs) < 2 or node.asof is not None:
        return False, node
    left_aliases = {a.lower() for a in node.left.aliases}
    right_aliases = {a.lower() for a in node.right.aliases}
    for child_name, child_aliases in (("left", left_aliases), ("right", right_aliases)):
        if refs <= child_aliases:
            side = Side.LEFT if child_name == "left" else Side.RIGHT
            if node.join_type is JoinType.INNER or (node.join_type.preserves(side) and not node.join_type.preserves(side.other)):
                placed, child = _attach_to_inner_join(getattr(node, child_name), c, refs, scope, fail)
                if placed:
                    return True, _replace_child(node, child_name, child)
            return False, node
    if node.join_type is not JoinType.INNER or not refs <= left_aliases | right_aliases:
        return False, node
    key = equi_key(c, left_aliases, right_aliases, scope, fail)
    if key is not None:
        return True, replace(node, keys=node.keys + (key,))
    rendered = scope.render(c, fail)
    return True, replace(node, residual=f"({node.residual}) AND ({rendered})" if node.residual else rendered)


def _replace_child(node: Join, which: str, child: Node) -> Join:
    return replace(node, **{which: child})
