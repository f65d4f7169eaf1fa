"""Short kernel names for display: the innermost function name of a mangled C++ symbol.

`short_name("_ZN4vllm30reshape_and_cache_flash_kernelIttLNS_18Fp8KVCacheDataTypeE0EEEv...")`
is `reshape_and_cache_flash_kernel`. Kernel symbols from real models run to kilobytes of
template arguments, so a timeline labelled with them is unreadable.

This is a parser for the part of the Itanium C++ ABI mangling grammar that symbols are
made of (names, types, template arguments, expressions), written to skip over everything
except the name it is after. It does not render types, so names it cannot spell without
them (conversion operators, lambdas, string-literal scopes) and anything it does not
recognise come back as the symbol unchanged: a long label is better than a wrong one.
"""

from __future__ import annotations

import functools
import re

__all__ = ["short_name"]

_DIGITS = "0123456789"
_SEQ_ID = _DIGITS + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_BUILTIN_TYPES = "vwbcahstijlmxynofdegz"
_BUILTIN_D_TYPES = {"Dd", "De", "Df", "Dh", "Di", "Ds", "Du", "Da", "Dc", "Dn"}
_CV_QUALIFIERS = "rVK"

# <substitution> abbreviations for std entities, as the name a constructor of each takes.
_STD_ABBREVIATIONS = {
    "t": "std",
    "a": "allocator",
    "b": "basic_string",
    "s": "basic_string",
    "i": "basic_istream",
    "o": "basic_ostream",
    "d": "basic_iostream",
}

# <operator-name> -> (spelling, operands when it appears in an <expression>).
_OPERATORS = {
    "nw": ("new", 0), "na": ("new[]", 0), "dl": ("delete", 1), "da": ("delete[]", 1),
    "aw": ("co_await", 1), "ps": ("+", 1), "ng": ("-", 1), "ad": ("&", 1), "de": ("*", 1),
    "co": ("~", 1), "pl": ("+", 2), "mi": ("-", 2), "ml": ("*", 2), "dv": ("/", 2),
    "rm": ("%", 2), "an": ("&", 2), "or": ("|", 2), "eo": ("^", 2), "aS": ("=", 2),
    "pL": ("+=", 2), "mI": ("-=", 2), "mL": ("*=", 2), "dV": ("/=", 2), "rM": ("%=", 2),
    "aN": ("&=", 2), "oR": ("|=", 2), "eO": ("^=", 2), "ls": ("<<", 2), "rs": (">>", 2),
    "lS": ("<<=", 2), "rS": (">>=", 2), "eq": ("==", 2), "ne": ("!=", 2), "lt": ("<", 2),
    "gt": (">", 2), "le": ("<=", 2), "ge": (">=", 2), "ss": ("<=>", 2), "nt": ("!", 1),
    "aa": ("&&", 2), "oo": ("||", 2), "pp": ("++", 1), "mm": ("--", 1), "cm": (",", 2),
    "pm": ("->*", 2), "pt": ("->", 2), "cl": ("()", 0), "ix": ("[]", 2), "qu": ("?", 3),
}

# What GCC appends to a function it clones (`foo.cold`, `foo.isra.0`, `foo.constprop.0.isra.0`),
# as libiberty's demangler accepts it.
_CLONE_SUFFIXES = re.compile(r"(?:\.[a-z0-9_]+(?:\.[0-9]+)*)*")


class _Unparsable(Exception):
    pass


class _Parser:
    """A cursor over one symbol. Methods consume one grammar production each or raise
    `_Unparsable`; those that name something return the innermost unqualified name, or
    None when it has no spelling without rendering types."""

    def __init__(self, symbol: str) -> None:
        self.s = symbol
        self.i = 0

    # --- cursor -----------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> str:
        # NUL past the end keeps `peek() in "..."` tests false there.
        j = self.i + ahead
        return self.s[j] if j < len(self.s) else "\0"

    def eat(self, text: str) -> bool:
        if self.s.startswith(text, self.i):
            self.i += len(text)
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.eat(text):
            raise _Unparsable

    def skip(self, chars: str) -> None:
        while self.peek() in chars:
            self.i += 1

    def number(self) -> int:
        start = self.i
        self.skip(_DIGITS)
        if self.i == start:
            raise _Unparsable
        return int(self.s[start : self.i])

    # --- names ------------------------------------------------------------------------

    def mangled_name(self) -> str:
        self.expect("_Z")
        name = self.encoding()
        if name is None or not _CLONE_SUFFIXES.fullmatch(self.s, self.i):
            raise _Unparsable
        return name

    def encoding(self) -> str | None:
        name = self.name()
        # A function's return and parameter types follow its name; an object has none.
        while self.peek() not in "\0E.":
            self.type()
        return name

    def name(self) -> str | None:
        c = self.peek()
        if c == "N":
            return self.nested_name()
        if c == "Z":
            return self.local_name()
        if self.eat("St"):
            last = self.unqualified_name(None)
        elif c == "S":
            last = self.substitution()
        else:
            last = self.unqualified_name(None)
        if self.peek() == "I":
            self.template_args()
        return last

    def nested_name(self) -> str | None:
        self.expect("N")
        self.skip(_CV_QUALIFIERS)
        if self.peek() in "RO":
            self.i += 1
        last: str | None = None
        components = 0
        while not self.eat("E"):
            c = self.peek()
            if c == "I" and components:
                self.template_args()  # names a specialization; the name stays the same
            elif c == "M" and components:
                self.i += 1  # a lambda's initializer scope, nothing to name
                continue
            elif c == "S":
                last = self.substitution()
            elif c == "T":
                self.template_param()
                last = None
            elif c == "D" and self.peek(1) in "tT":
                self.decltype()
                last = None
            else:
                last = self.unqualified_name(last)
            components += 1
        if not components:
            raise _Unparsable
        return last

    def local_name(self) -> str | None:
        # Z <function encoding> E <entity name> [<discriminator>]: an entity declared
        # inside a function, such as a lambda's operator().
        self.expect("Z")
        self.encoding()
        self.expect("E")
        if self.peek() == "s":
            raise _Unparsable  # a string literal, which has no name
        if self.eat("d"):
            self.skip(_DIGITS)
            self.expect("_")
        name = self.name()
        self.discriminator()
        return name

    def discriminator(self) -> None:
        if self.eat("__"):
            self.number()
            self.expect("_")
        elif self.peek() == "_" and self.peek(1) in _DIGITS:
            self.i += 2

    def unqualified_name(self, scope: str | None) -> str | None:
        """`scope` is the innermost name of the enclosing class, which a constructor or
        destructor is named after."""
        c = self.peek()
        if c in _DIGITS:
            name = self.source_name()
        elif c == "L" and self.peek(1) in _DIGITS:
            self.i += 1  # internal linkage (GCC)
            name = self.source_name()
            self.discriminator()
        elif c == "U":
            self.unnamed_type()
            name = None
        elif c == "C" or (c == "D" and self.peek(1) in "01245"):
            name = self.ctor_dtor_name(scope)
        elif c == "D" and self.peek(1) == "C":
            self.i += 2  # a structured binding declaration
            while not self.eat("E"):
                self.source_name()
            name = None
        elif c.islower():
            name = self.operator_name()
        else:
            raise _Unparsable
        while self.eat("B"):
            self.source_name()  # an ABI tag such as [abi:cxx11]
        return name

    def source_name(self) -> str:
        length = self.number()
        identifier = self.s[self.i : self.i + length]
        if length == 0 or len(identifier) < length:
            raise _Unparsable
        self.i += length
        if re.match(r"_GLOBAL_[._$]N", identifier):
            return "(anonymous namespace)"
        return identifier

    def ctor_dtor_name(self, scope: str | None) -> str:
        if scope is None:
            raise _Unparsable
        if self.eat("CI"):
            self.skip("12")
            self.type()  # the base class whose constructor is inherited
            return scope
        if self.eat("C"):
            if self.peek() not in "12345":
                raise _Unparsable
            self.i += 1
            return scope
        self.i += 2
        return f"~{scope}"

    def operator_name(self) -> str | None:
        if self.eat("cv"):
            self.type()  # `operator int`: would need the type spelled out
            return None
        if self.eat("li"):
            return f'operator"" {self.source_name()}'
        if self.peek() == "v" and self.peek(1) in _DIGITS:
            self.i += 2
            return f"operator {self.source_name()}"
        code = self.s[self.i : self.i + 2]
        if code not in _OPERATORS:
            raise _Unparsable
        self.i += 2
        spelling = _OPERATORS[code][0]
        return f"operator {spelling}" if spelling[0].isalpha() else f"operator{spelling}"

    def unnamed_type(self) -> None:
        if self.eat("Ul"):  # a lambda's closure type: its parameter types, then a number
            while not self.eat("E"):
                self.type()
        elif not (self.eat("Ut") or self.eat("Ub")):
            raise _Unparsable
        self.skip(_DIGITS)
        self.expect("_")

    def substitution(self) -> str | None:
        self.expect("S")
        abbreviation = _STD_ABBREVIATIONS.get(self.peek())
        if abbreviation is not None:
            self.i += 1
            return abbreviation
        # A back-reference (S_, S0_, S1A_...) to an earlier component; what it named is
        # not tracked, since only a constructor right after one would need it.
        self.skip(_SEQ_ID)
        self.expect("_")
        return None

    def template_param(self) -> None:
        self.expect("T")
        self.skip(_DIGITS)
        self.expect("_")

    def template_args(self) -> None:
        self.expect("I")
        while not self.eat("E"):
            self.template_arg()

    def template_arg(self) -> None:
        if self.eat("X"):
            self.expression()
            self.expect("E")
        elif self.peek() == "L":
            self.expr_primary()
        elif self.eat("J"):  # an argument pack
            while not self.eat("E"):
                self.template_arg()
        else:
            self.type()

    # --- types ------------------------------------------------------------------------

    def type(self) -> None:
        c = self.peek()
        if c in _BUILTIN_TYPES:
            self.i += 1
        elif c in _CV_QUALIFIERS:
            self.skip(_CV_QUALIFIERS)
            self.type()
        elif c in "PROCG":  # pointer, references, complex, imaginary
            self.i += 1
            self.type()
        elif c == "F":
            self.function_type()
        elif c == "A":
            self.array_type()
        elif c == "M":  # pointer to member: class type, member type
            self.i += 1
            self.type()
            self.type()
        elif c == "T" and self.peek(1) in "sue":  # elaborated: struct, union, enum
            self.i += 2
            self.name()
        elif c == "T":
            self.template_param()
            if self.peek() == "I":
                self.template_args()
        elif c == "D":
            self.d_type()
        elif c == "u":  # vendor extended type
            self.i += 1
            self.source_name()
            if self.peek() == "I":
                self.template_args()
        elif c == "U":  # vendor qualifier
            self.i += 1
            self.source_name()
            if self.peek() == "I":
                self.template_args()
            self.type()
        elif c in "NZS" or c in _DIGITS:
            self.name()
        else:
            raise _Unparsable

    def d_type(self) -> None:
        code = self.s[self.i : self.i + 2]
        self.i += 2
        if code in _BUILTIN_D_TYPES:
            return
        if code == "DF":  # _FloatN, _FloatNx, std::bfloat16_t
            self.number()
            if self.peek() not in "_xb":
                raise _Unparsable
            self.i += 1
        elif code in ("DB", "DU"):  # _BitInt(N)
            if self.peek() in _DIGITS:
                self.number()
            else:
                self.expression()
            self.expect("_")
        elif code in ("Dt", "DT"):
            self.expression()
            self.expect("E")
        elif code == "Dv":  # vector: Dv <count> _ <type> or Dv _ <expression> _ <type>
            if self.peek() in _DIGITS:
                self.number()
            else:
                self.expect("_")
                self.expression()
            self.expect("_")
            self.type()
        elif code in ("Dp", "Do", "Dx"):  # pack expansion, noexcept, transaction_safe
            self.type()
        elif code == "DO":  # noexcept(<expression>)
            self.expression()
            self.expect("E")
            self.type()
        elif code == "Dw":  # throw(<types>)
            while not self.eat("E"):
                self.type()
            self.type()
        else:
            raise _Unparsable

    def decltype(self) -> None:
        self.i += 2
        self.expression()
        self.expect("E")

    def function_type(self) -> None:
        self.expect("F")
        self.eat("Y")
        while not self.eat("E"):
            if self.peek() in "RO" and self.peek(1) == "E":
                self.i += 1  # ref-qualifier of a member function type
            else:
                self.type()

    def array_type(self) -> None:
        self.expect("A")
        if self.peek() in _DIGITS:
            self.number()
        elif self.peek() != "_":
            self.expression()
        self.expect("_")
        self.type()

    # --- expressions (template arguments such as Li4E, XadL_Z3fooEE) ---------------------

    def expr_primary(self) -> None:
        self.expect("L")
        if self.eat("_Z") or self.eat("Z"):  # an entity, e.g. a function's address
            self.encoding()
        else:
            self.type()
            self.skip(_DIGITS + "abcdefn_.")  # the value: integer, hex float, complex
        self.expect("E")

    def expression(self) -> None:
        c = self.peek()
        code = self.s[self.i : self.i + 2]
        if c == "L":
            self.expr_primary()
        elif c == "T":
            self.template_param()
            if self.peek() == "I":
                self.template_args()
        elif code == "gs" and self.s[self.i + 2 : self.i + 4] in ("nw", "na", "dl", "da"):
            self.i += 2  # ::new, ::delete
            self.expression()
        elif c in _DIGITS or code in ("on", "dn", "sr", "gs"):
            self.unresolved_name()
        elif code == "fp" or (code == "fL" and self.peek(2) in _DIGITS):
            self.function_param()
        else:
            self.i += 2
            self.operator_expression(code)

    def operator_expression(self, code: str) -> None:
        if code in ("st", "at", "ti"):  # sizeof, alignof, typeid of a type
            self.type()
        elif code in ("sz", "az", "te", "nx", "sp", "tw"):
            self.expression()
        elif code == "tr":  # throw;
            return
        elif code == "cv":
            self.type()
            if self.eat("_"):
                while not self.eat("E"):
                    self.expression()
            else:
                self.expression()
        elif code in ("tl", "il"):  # braced initializer lists
            if code == "tl":
                self.type()
            while not self.eat("E"):
                self.braced_expression()
        elif code in ("dc", "sc", "cc", "rc"):  # the named casts
            self.type()
            self.expression()
        elif code in ("dt", "pt"):  # member access
            self.expression()
            self.unresolved_name()
        elif code == "ds":
            self.expression()
            self.expression()
        elif code == "sZ":  # sizeof...(pack)
            self.expression()
        elif code == "sP":
            while not self.eat("E"):
                self.template_arg()
        elif code == "cl":
            while not self.eat("E"):
                self.expression()
        elif code in ("nw", "na"):
            self.new_expression()
        elif code in ("pp", "mm") and self.eat("_"):  # prefix ++/--
            self.expression()
        elif code in _OPERATORS:
            for _ in range(_OPERATORS[code][1]):
                self.expression()
        else:
            raise _Unparsable

    def new_expression(self) -> None:
        while not self.eat("_"):
            self.expression()  # placement arguments
        self.type()
        if self.eat("pi"):
            while not self.eat("E"):
                self.expression()
        elif self.eat("il"):
            while not self.eat("E"):
                self.braced_expression()
        else:
            self.expect("E")

    def braced_expression(self) -> None:
        if self.eat("di"):
            self.source_name()
            self.braced_expression()
        elif self.eat("dx"):
            self.expression()
            self.braced_expression()
        elif self.eat("dX"):
            self.expression()
            self.expression()
            self.braced_expression()
        else:
            self.expression()

    def function_param(self) -> None:
        if self.eat("fL"):
            self.number()
            self.expect("p")
        else:
            self.expect("fp")
        self.skip(_CV_QUALIFIERS)
        self.skip(_DIGITS)
        self.expect("_")

    def unresolved_name(self) -> None:
        self.eat("gs")
        if self.eat("sr"):
            if self.eat("N"):
                self.unresolved_type()
                while not self.eat("E"):
                    self.simple_id()
            elif self.peek() in _DIGITS:
                while not self.eat("E"):
                    self.simple_id()
            else:
                self.unresolved_type()
        self.base_unresolved_name()

    def unresolved_type(self) -> None:
        c = self.peek()
        if c == "T":
            self.template_param()
        elif c == "D" and self.peek(1) in "tT":
            self.decltype()
            return
        elif c == "S":
            self.substitution()
        else:
            raise _Unparsable
        if self.peek() == "I":
            self.template_args()

    def simple_id(self) -> None:
        self.source_name()
        if self.peek() == "I":
            self.template_args()

    def base_unresolved_name(self) -> None:
        if self.peek() in _DIGITS:
            self.simple_id()
        elif self.eat("on"):
            self.operator_name()
            if self.peek() == "I":
                self.template_args()
        elif self.eat("dn"):
            if self.peek() in _DIGITS:
                self.simple_id()
            else:
                self.unresolved_type()
        else:
            raise _Unparsable


# Answers show one kernel's name thousands of times (a run's kernel list, live): each is read once.
@functools.lru_cache(maxsize=4096)
def short_name(symbol: str) -> str:
    """The innermost function name of `symbol` without scope, template arguments or
    parameters (`_Z6vecAddIfEvPT_S1_S1_i` -> `vecAdd`), or `symbol` itself when it is not
    a mangled name this can read (`nvjet_sm90_hsh_64x8_...` stays as it is)."""
    if not symbol.startswith("_Z"):
        return symbol
    try:
        return _Parser(symbol).mangled_name()
    except (_Unparsable, RecursionError):
        return symbol
