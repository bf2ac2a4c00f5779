"""Reduced ordered binary decision diagrams: boolean functions in canonical form.

A decision is a boolean function of grad mode ``G`` and of the other conditions it
reads (atoms). In canonical form two functions are equal exactly when they agree on
every assignment of their atoms, so "does turning grad mode off force this decision
off?" and "is the fixed decision the old one with grad mode on?" are exact tests, not
heuristics. ``G`` is variable 0, at the top of every diagram, so fixing it is cheap.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..deadline import poll

#: node ids of the two constants
FALSE = 0
TRUE = 1
#: the grad-mode variable
GRAD = 0


class BudgetExceeded(Exception):
    """A function's (or a decision's) diagrams grew past :attr:`Manager.budget` nodes
    since :meth:`Manager.start`, or the module's past :attr:`Manager.limit`."""


class Manager:
    """Owns the nodes. Node ``n`` > 1 is ``(var, low, high)``: if var then high else low."""

    def __init__(self, budget: int = 200_000, limit: int = 2_000_000) -> None:
        self._nodes: list[tuple[int, int, int]] = [(1 << 30, 0, 0), (1 << 30, 1, 1)]
        self._unique: dict[tuple[int, int, int], int] = {}
        self._atoms: dict[Hashable, int] = {"<grad mode>": GRAD}
        #: variable -> its atom's key
        self._keys: list[Hashable] = ["<grad mode>"]
        self._and: dict[tuple[int, int], int] = {}
        self._or: dict[tuple[int, int], int] = {}
        self._ite: dict[tuple[int, int, int], int] = {}
        self._not: dict[int, int] = {}
        self._restrict: dict[tuple[int, int, bool], int] = {}
        self._support: dict[int, frozenset[int]] = {}
        self._real: dict[int, int] = {}
        #: variables that stand for one grad-mode read each (each is grad mode itself)
        self.read_vars: set[int] = set()
        #: variables that stand for a function's parameter: var -> its atom's key
        #: (``("param", function, name)``)
        self.param_vars: dict[int, tuple[str, str, str]] = {}
        #: variables that say whether autograd records a tensor (``x.requires_grad``)
        self.recording_vars: set[int] = set()
        #: nodes one function (or one decision) may add, counted from :meth:`start`
        self.budget = budget
        #: nodes the whole module may hold (about 150 bytes each): the model's memory bound
        self.limit = limit
        self._base = 0

    def start(self) -> None:
        """Give what is built next (a function, a decision) a budget of its own."""
        poll()
        self._base = len(self._nodes)

    # -- building ------------------------------------------------------------------
    def atom(self, key: Hashable) -> int:
        """The diagram of the atom named ``key`` (made on first use)."""
        var = self._atoms.get(key)
        if var is None:
            var = self._atoms[key] = len(self._atoms)
            self._keys.append(key)
        return self._mk(var, FALSE, TRUE)

    @property
    def grad(self) -> int:
        return self._mk(GRAD, FALSE, TRUE)

    def read(self, key: Hashable) -> int:
        """A variable for one grad-mode read: grad mode itself, kept apart so that what
        the read does to a decision is a restriction away (:meth:`real` joins them)."""
        node = self.atom(key)
        self.read_vars.add(self.var(node))
        return node

    def recording(self, key: Hashable) -> int:
        """The atom of whether autograd records a tensor (``x.requires_grad``)."""
        node = self.atom(key)
        self.recording_vars.add(self.var(node))
        return node

    def asks_recording(self, a: int) -> bool:
        """Does ``a`` ask whether autograd records a tensor?"""
        return any(v in self.recording_vars for v in self.support(a))

    def grad_only_where_recorded(self, a: int) -> bool:
        """Does grad mode take part in ``a`` only through whether autograd records
        (``grad and x.requires_grad``): where no tensor is recorded, grad mode no longer
        matters? (``grad and not weight.requires_grad`` still does.)"""
        recorded = {v: False for v in self.support(a) if v in self.recording_vars}
        return bool(recorded) and not self.depends_on_grad(self.restrict_all(a, recorded))

    def asks_training(self, a: int) -> bool:
        """Does ``a`` ask a module's training mode (``self.training``, ``model.training``,
        a parameter ``training``), however the test spells it (``should_update =
        self.training and grad``, then ``if should_update:``)?"""
        return any(_training_key(self._keys[v]) for v in self.support(a))

    def defaults_taken(self, a: int) -> int:
        """``a`` where every lookup it asks finds nothing (``getattr(o, n, grad)``,
        ``d.get(k, grad)``): where its defaults decide."""
        absent = {v: False for v in self.support(a) if _lookup_key(self._keys[v])}
        return self.restrict_all(a, absent) if absent else a

    def in_training(self, a: int) -> int:
        """``a`` where every training mode it asks is on (``self.training``): what a
        training-only computation (dropout) does where it does anything."""
        modes = {v: True for v in self.support(a) if _training_key(self._keys[v])}
        return self.restrict_all(a, modes) if modes else a

    def param(self, function: str, name: str) -> int:
        """The atom of parameter ``name`` of ``function``, what its summary is about."""
        key = ("param", function, name)
        node = self.atom(key)
        self.param_vars[self.var(node)] = key
        return node

    def carries(self, a: int) -> bool:
        """Does ``a`` depend on grad mode, a read of it or a parameter (cheap, by support)?"""
        if a <= TRUE:
            return False
        return any(v == GRAD or v in self.read_vars or v in self.param_vars for v in self.support(a))

    def carries_grad(self, a: int) -> bool:
        """Does ``a`` depend on grad mode or a read of it (cheap, by support)?"""
        if a <= TRUE:
            return False
        return any(v == GRAD or v in self.read_vars for v in self.support(a))

    def params_in(self, a: int) -> frozenset[int]:
        """The parameter variables ``a`` depends on."""
        if a <= TRUE or not self.param_vars:
            return frozenset()
        return frozenset(v for v in self.support(a) if v in self.param_vars)

    def real(self, a: int) -> int:
        """``a`` with every read variable replaced by grad mode."""
        if a <= TRUE:
            return a
        done = self._real.get(a)
        if done is None:
            done = a
            for var in sorted(self.support(a) & self.read_vars):
                done = self.compose(done, var, self.grad)
            self._real[a] = done
        return done

    def restrict_all(self, a: int, values: dict[int, bool]) -> int:
        for var, value in values.items():
            a = self.restrict(a, var, value)
        return a

    def _mk(self, var: int, low: int, high: int) -> int:
        if low == high:
            return low
        key = (var, low, high)
        node = self._unique.get(key)
        if node is None:
            if len(self._nodes) - self._base >= self.budget or len(self._nodes) >= self.limit:
                raise BudgetExceeded()
            node = len(self._nodes)
            if not node & 0x3FFF:
                poll()
            self._nodes.append(key)
            self._unique[key] = node
        return node

    def var(self, node: int) -> int:
        return self._nodes[node][0]

    def negate(self, a: int) -> int:
        if a <= TRUE:
            return 1 - a
        done = self._not.get(a)
        if done is None:
            var, low, high = self._nodes[a]
            done = self._not[a] = self._mk(var, self.negate(low), self.negate(high))
            self._not[done] = a  # the negation of the negation, known without a walk
        return done

    def conj(self, a: int, b: int) -> int:
        if a == FALSE or b == FALSE:
            return FALSE
        if a == TRUE:
            return b
        if b == TRUE or a == b:
            return a
        if a > b:
            a, b = b, a
        key = (a, b)
        done = self._and.get(key)
        if done is None:
            va, la, ha = self._nodes[a]
            vb, lb, hb = self._nodes[b]
            if va == vb:
                done = self._mk(va, self.conj(la, lb), self.conj(ha, hb))
            elif va < vb:
                done = self._mk(va, self.conj(la, b), self.conj(ha, b))
            else:
                done = self._mk(vb, self.conj(a, lb), self.conj(a, hb))
            self._and[key] = done
        return done

    def disj(self, a: int, b: int) -> int:
        if a == TRUE or b == TRUE:
            return TRUE
        if a == FALSE:
            return b
        if b == FALSE or a == b:
            return a
        if a > b:
            a, b = b, a
        key = (a, b)
        done = self._or.get(key)
        if done is None:
            va, la, ha = self._nodes[a]
            vb, lb, hb = self._nodes[b]
            if va == vb:
                done = self._mk(va, self.disj(la, lb), self.disj(ha, hb))
            elif va < vb:
                done = self._mk(va, self.disj(la, b), self.disj(ha, b))
            else:
                done = self._mk(vb, self.disj(a, lb), self.disj(a, hb))
            self._or[key] = done
        return done

    def ite(self, c: int, a: int, b: int) -> int:
        """if c then a else b."""
        if c == TRUE:
            return a
        if c == FALSE:
            return b
        if a == b:
            return a
        if a == TRUE and b == FALSE:
            return c
        if a == FALSE and b == TRUE:
            return self.negate(c)
        if b == FALSE:
            return self.conj(c, a)
        if a == TRUE:
            return self.disj(c, b)
        key = (c, a, b)
        done = self._ite.get(key)
        if done is None:
            nodes = self._nodes
            top = min(nodes[c][0], nodes[a][0], nodes[b][0])
            c0, c1 = self._cofactors(c, top)
            a0, a1 = self._cofactors(a, top)
            b0, b1 = self._cofactors(b, top)
            done = self._ite[key] = self._mk(top, self.ite(c0, a0, b0), self.ite(c1, a1, b1))
        return done

    def _cofactors(self, a: int, var: int) -> tuple[int, int]:
        """``a`` with ``var`` off and on, where ``var`` is at or above ``a``'s top."""
        node = self._nodes[a]
        return (node[1], node[2]) if node[0] == var else (a, a)

    def xor(self, a: int, b: int) -> int:
        return self.ite(a, self.negate(b), b)

    def restrict(self, a: int, var: int, value: bool) -> int:
        """``a`` with variable ``var`` fixed to ``value``."""
        if a <= TRUE:
            return a
        key = (a, var, value)
        done = self._restrict.get(key)
        if done is None:
            v, low, high = self._nodes[a]
            if v > var:
                done = a
            elif v == var:
                done = high if value else low
            else:
                done = self._mk(v, self.restrict(low, var, value), self.restrict(high, var, value))
            self._restrict[key] = done
        return done

    def compose(self, a: int, var: int, g: int) -> int:
        """``a`` with variable ``var`` replaced by the function ``g``."""
        return self.ite(g, self.restrict(a, var, True), self.restrict(a, var, False))

    def support(self, a: int) -> frozenset[int]:
        """The variables ``a`` depends on."""
        if a <= TRUE:
            return frozenset()
        done = self._support.get(a)
        if done is None:
            var, low, high = self._nodes[a]
            done = self._support[a] = frozenset({var}) | self.support(low) | self.support(high)
        return done

    # -- the questions decisions ask --------------------------------------------------
    def grad_on(self, a: int) -> int:
        return self.restrict(self.real(a), GRAD, True)

    def grad_off(self, a: int) -> int:
        return self.restrict(self.real(a), GRAD, False)

    def forced_off_by_no_grad(self, a: int) -> bool:
        """Some assignment has ``a`` on with grad mode on and off with it off, and none
        the other way round: turning grad mode off can only turn the decision off."""
        on, off = self.grad_on(a), self.grad_off(a)
        return on != off and self.conj(off, self.negate(on)) == FALSE

    def forced_off_by_grad(self, a: int) -> bool:
        """The opposite polarity: grad mode on can only turn the decision off."""
        on, off = self.grad_on(a), self.grad_off(a)
        return on != off and self.conj(on, self.negate(off)) == FALSE

    def depends_on_grad(self, a: int) -> bool:
        return self.grad_on(a) != self.grad_off(a)

    def is_literal(self, a: int) -> bool:
        """Is ``a`` one variable or its negation (a value passed on, not combined)?"""
        if a <= TRUE:
            return False
        _var, low, high = self._nodes[a]
        return low <= TRUE and high <= TRUE

    def is_pure_grad(self, a: int) -> bool:
        """Is ``a`` grad mode itself or its negation (a function of one read alone)?"""
        if a <= TRUE:
            return False
        var, low, high = self._nodes[a]
        return (var == GRAD or var in self.read_vars) and low <= TRUE and high <= TRUE

    def monotone(self, a: int, var: int) -> int | None:
        """How ``a`` depends on ``var``: 1 if turning ``var`` off can only turn ``a`` off,
        -1 if turning it on can only turn ``a`` off, 0 if both happen, None if ``a`` does
        not depend on it."""
        low, high = self.restrict(a, var, False), self.restrict(a, var, True)
        if low == high:
            return None
        if self.conj(low, self.negate(high)) == FALSE:
            return 1
        if self.conj(high, self.negate(low)) == FALSE:
            return -1
        return 0

    def polarity(self, a: int) -> int:
        """1 if the pure grad-mode value ``a`` is grad mode, 0 if its negation."""
        return 1 if self._nodes[a][2] == TRUE else 0


def _training_key(key: Hashable) -> bool:
    """Is ``key`` the atom of a training mode: the attribute ``training`` of an object,
    or a parameter (or a summary's ``self.training``) so named?"""
    if not isinstance(key, tuple) or len(key) != 3:
        return False
    if key[0] == "attr":
        return key[2] == "training"
    return key[0] == "param" and isinstance(key[2], str) and key[2].rsplit(".", 1)[-1] == "training"


def _lookup_key(key: Hashable) -> bool:
    """Is ``key`` the atom of whether an object has an attribute or a mapping a key?"""
    return isinstance(key, tuple) and bool(key) and key[0] in ("has-attr", "has-key")
