// Short kernel names for display: the innermost function name of a mangled C++ symbol,
// as cascade_formats/kernel_names.py computes it (the browser tests check they agree).
// `_ZN4vllm30reshape_and_cache_flash_kernelIttLNS_18Fp8KVCacheDataTypeE0EEEv...` is
// `reshape_and_cache_flash_kernel`. Only the Itanium grammar needed to skip to that name is
// read; anything it cannot spell without rendering types comes back unchanged.

const DIGITS = "0123456789";
const SEQ_ID = DIGITS + "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const BUILTIN_TYPES = "vwbcahstijlmxynofdegz";
const BUILTIN_D_TYPES = new Set(["Dd", "De", "Df", "Dh", "Di", "Ds", "Du", "Da", "Dc", "Dn"]);
const CV = "rVK";
const STD = { t: "std", a: "allocator", b: "basic_string", s: "basic_string", i: "basic_istream", o: "basic_ostream", d: "basic_iostream" };
// operator code -> [spelling, operands in an expression]
const OPERATORS = {
  nw: ["new", 0], na: ["new[]", 0], dl: ["delete", 1], da: ["delete[]", 1], aw: ["co_await", 1],
  ps: ["+", 1], ng: ["-", 1], ad: ["&", 1], de: ["*", 1], co: ["~", 1], pl: ["+", 2], mi: ["-", 2],
  ml: ["*", 2], dv: ["/", 2], rm: ["%", 2], an: ["&", 2], or: ["|", 2], eo: ["^", 2], aS: ["=", 2],
  pL: ["+=", 2], mI: ["-=", 2], mL: ["*=", 2], dV: ["/=", 2], rM: ["%=", 2], aN: ["&=", 2],
  oR: ["|=", 2], eO: ["^=", 2], ls: ["<<", 2], rs: [">>", 2], lS: ["<<=", 2], rS: [">>=", 2],
  eq: ["==", 2], ne: ["!=", 2], lt: ["<", 2], gt: [">", 2], le: ["<=", 2], ge: [">=", 2],
  ss: ["<=>", 2], nt: ["!", 1], aa: ["&&", 2], oo: ["||", 2], pp: ["++", 1], mm: ["--", 1],
  cm: [",", 2], pm: ["->*", 2], pt: ["->", 2], cl: ["()", 0], ix: ["[]", 2], qu: ["?", 3],
};
const CLONE_SUFFIXES = /^(?:\.[a-z0-9_]+(?:\.[0-9]+)*)*$/;

class Unparsable extends Error {}

function fail() {
  throw new Unparsable();
}

class Parser {
  constructor(symbol) {
    this.s = symbol;
    this.i = 0;
  }

  peek(ahead = 0) {
    return this.s[this.i + ahead] ?? "\0";
  }
  at(text) {
    return this.s.startsWith(text, this.i);
  }
  eat(text) {
    if (!this.at(text)) return false;
    this.i += text.length;
    return true;
  }
  expect(text) {
    if (!this.eat(text)) fail();
  }
  skip(chars) {
    while (chars.includes(this.peek())) this.i += 1;
  }
  number() {
    const start = this.i;
    this.skip(DIGITS);
    if (this.i === start) fail();
    return Number(this.s.slice(start, this.i));
  }
  two() {
    return this.s.slice(this.i, this.i + 2);
  }

  // --- names ---

  mangledName() {
    this.expect("_Z");
    const name = this.encoding();
    if (name === null || !CLONE_SUFFIXES.test(this.s.slice(this.i))) fail();
    return name;
  }

  encoding() {
    const name = this.name();
    while (!"\0E.".includes(this.peek())) this.type();
    return name;
  }

  name() {
    const c = this.peek();
    if (c === "N") return this.nestedName();
    if (c === "Z") return this.localName();
    let last;
    if (this.eat("St")) last = this.unqualifiedName(null);
    else if (c === "S") last = this.substitution();
    else last = this.unqualifiedName(null);
    if (this.peek() === "I") this.templateArgs();
    return last;
  }

  nestedName() {
    this.expect("N");
    this.skip(CV);
    if ("RO".includes(this.peek())) this.i += 1;
    let last = null;
    let components = 0;
    while (!this.eat("E")) {
      const c = this.peek();
      if (c === "I" && components) this.templateArgs();
      else if (c === "M" && components) {
        this.i += 1;
        continue;
      } else if (c === "S") last = this.substitution();
      else if (c === "T") {
        this.templateParam();
        last = null;
      } else if (c === "D" && "tT".includes(this.peek(1))) {
        this.decltype();
        last = null;
      } else last = this.unqualifiedName(last);
      components += 1;
    }
    if (!components) fail();
    return last;
  }

  localName() {
    this.expect("Z");
    this.encoding();
    this.expect("E");
    if (this.peek() === "s") fail();
    if (this.eat("d")) {
      this.skip(DIGITS);
      this.expect("_");
    }
    const name = this.name();
    this.discriminator();
    return name;
  }

  discriminator() {
    if (this.eat("__")) {
      this.number();
      this.expect("_");
    } else if (this.peek() === "_" && DIGITS.includes(this.peek(1))) this.i += 2;
  }

  unqualifiedName(scope) {
    const c = this.peek();
    const next = this.peek(1);
    let name;
    if (DIGITS.includes(c)) name = this.sourceName();
    else if (c === "L" && DIGITS.includes(next)) {
      this.i += 1;
      name = this.sourceName();
      this.discriminator();
    } else if (c === "U") name = this.unnamedType();
    else if (c === "C" || (c === "D" && "01245".includes(next))) name = this.ctorDtorName(scope);
    else if (c === "D" && next === "C") {
      this.i += 2;
      while (!this.eat("E")) this.sourceName();
      name = null;
    } else if (c >= "a" && c <= "z") name = this.operatorName();
    else fail();
    while (this.eat("B")) this.sourceName();
    return name;
  }

  sourceName() {
    const length = this.number();
    const identifier = this.s.slice(this.i, this.i + length);
    if (length === 0 || identifier.length < length) fail();
    this.i += length;
    return /^_GLOBAL_[._$]N/.test(identifier) ? "(anonymous namespace)" : identifier;
  }

  ctorDtorName(scope) {
    if (scope === null) fail();
    if (this.eat("CI")) {
      this.skip("12");
      this.type();
      return scope;
    }
    if (this.eat("C")) {
      if (!"12345".includes(this.peek())) fail();
      this.i += 1;
      return scope;
    }
    this.i += 2;
    return `~${scope}`;
  }

  operatorName() {
    if (this.eat("cv")) {
      this.type();
      return null;
    }
    if (this.eat("li")) return `operator"" ${this.sourceName()}`;
    if (this.peek() === "v" && DIGITS.includes(this.peek(1))) {
      this.i += 2;
      return `operator ${this.sourceName()}`;
    }
    const op = OPERATORS[this.two()];
    if (!op) fail();
    this.i += 2;
    return /^[a-z]/.test(op[0]) ? `operator ${op[0]}` : `operator${op[0]}`;
  }

  unnamedType() {
    if (this.eat("Ul")) {
      while (!this.eat("E")) this.type();
    } else if (!(this.eat("Ut") || this.eat("Ub"))) fail();
    this.skip(DIGITS);
    this.expect("_");
    return null;
  }

  substitution() {
    this.expect("S");
    const abbreviation = STD[this.peek()];
    if (abbreviation) {
      this.i += 1;
      return abbreviation;
    }
    this.skip(SEQ_ID);
    this.expect("_");
    return null;
  }

  templateParam() {
    this.expect("T");
    this.skip(DIGITS);
    this.expect("_");
  }

  templateArgs() {
    this.expect("I");
    while (!this.eat("E")) this.templateArg();
  }

  templateArg() {
    if (this.eat("X")) {
      this.expression();
      this.expect("E");
    } else if (this.peek() === "L") this.exprPrimary();
    else if (this.eat("J")) {
      while (!this.eat("E")) this.templateArg();
    } else this.type();
  }

  // --- types ---

  type() {
    const c = this.peek();
    if (BUILTIN_TYPES.includes(c)) this.i += 1;
    else if (CV.includes(c)) {
      this.skip(CV);
      this.type();
    } else if ("PROCG".includes(c)) {
      this.i += 1;
      this.type();
    } else if (c === "F") this.functionType();
    else if (c === "A") this.arrayType();
    else if (c === "M") {
      this.i += 1;
      this.type();
      this.type();
    } else if (c === "T" && "sue".includes(this.peek(1))) {
      this.i += 2;
      this.name();
    } else if (c === "T") {
      this.templateParam();
      if (this.peek() === "I") this.templateArgs();
    } else if (c === "D") this.dType();
    else if (c === "u" || c === "U") {
      this.i += 1;
      this.sourceName();
      if (this.peek() === "I") this.templateArgs();
      if (c === "U") this.type();
    } else if ("NZS".includes(c) || DIGITS.includes(c)) this.name();
    else fail();
  }

  dType() {
    const code = this.two();
    this.i += 2;
    if (BUILTIN_D_TYPES.has(code)) return;
    if (code === "DF") {
      this.number();
      if (!"_xb".includes(this.peek())) fail();
      this.i += 1;
    } else if (code === "DB" || code === "DU") {
      if (DIGITS.includes(this.peek())) this.number();
      else this.expression();
      this.expect("_");
    } else if (code === "Dt" || code === "DT") {
      this.expression();
      this.expect("E");
    } else if (code === "Dv") {
      if (DIGITS.includes(this.peek())) this.number();
      else {
        this.expect("_");
        this.expression();
      }
      this.expect("_");
      this.type();
    } else if (code === "Dp" || code === "Do" || code === "Dx") this.type();
    else if (code === "DO") {
      this.expression();
      this.expect("E");
      this.type();
    } else if (code === "Dw") {
      while (!this.eat("E")) this.type();
      this.type();
    } else fail();
  }

  decltype() {
    this.i += 2;
    this.expression();
    this.expect("E");
  }

  functionType() {
    this.expect("F");
    this.eat("Y");
    while (!this.eat("E")) {
      if ("RO".includes(this.peek()) && this.peek(1) === "E") this.i += 1;
      else this.type();
    }
  }

  arrayType() {
    this.expect("A");
    if (DIGITS.includes(this.peek())) this.number();
    else if (this.peek() !== "_") this.expression();
    this.expect("_");
    this.type();
  }

  // --- expressions (template arguments such as Li4E, XadL_Z3fooEE) ---

  exprPrimary() {
    this.expect("L");
    if (this.eat("_Z") || this.eat("Z")) this.encoding();
    else {
      this.type();
      this.skip(DIGITS + "abcdefn_.");
    }
    this.expect("E");
  }

  expression() {
    const c = this.peek();
    const code = this.two();
    if (c === "L") this.exprPrimary();
    else if (c === "T") {
      this.templateParam();
      if (this.peek() === "I") this.templateArgs();
    } else if (code === "gs" && ["nw", "na", "dl", "da"].includes(this.s.slice(this.i + 2, this.i + 4))) {
      this.i += 2;
      this.expression();
    } else if (DIGITS.includes(c) || ["on", "dn", "sr", "gs"].includes(code)) this.unresolvedName();
    else if (code === "fp" || (code === "fL" && DIGITS.includes(this.peek(2)))) this.functionParam();
    else {
      this.i += 2;
      this.operatorExpression(code);
    }
  }

  operatorExpression(code) {
    const list = (item) => {
      while (!this.eat("E")) item();
    };
    if (["st", "at", "ti"].includes(code)) this.type();
    else if (["sz", "az", "te", "nx", "sp", "tw", "sZ"].includes(code)) this.expression();
    else if (code === "tr") return;
    else if (code === "cv") {
      this.type();
      if (this.eat("_")) list(() => this.expression());
      else this.expression();
    } else if (code === "tl" || code === "il") {
      if (code === "tl") this.type();
      list(() => this.bracedExpression());
    } else if (["dc", "sc", "cc", "rc"].includes(code)) {
      this.type();
      this.expression();
    } else if (code === "dt" || code === "pt") {
      this.expression();
      this.unresolvedName();
    } else if (code === "ds") {
      this.expression();
      this.expression();
    } else if (code === "sP") list(() => this.templateArg());
    else if (code === "cl") list(() => this.expression());
    else if (code === "nw" || code === "na") this.newExpression();
    else if ((code === "pp" || code === "mm") && this.eat("_")) this.expression();
    else if (OPERATORS[code]) {
      for (let n = 0; n < OPERATORS[code][1]; n += 1) this.expression();
    } else fail();
  }

  newExpression() {
    while (!this.eat("_")) this.expression();
    this.type();
    if (this.eat("pi")) {
      while (!this.eat("E")) this.expression();
    } else if (this.eat("il")) {
      while (!this.eat("E")) this.bracedExpression();
    } else this.expect("E");
  }

  bracedExpression() {
    if (this.eat("di")) {
      this.sourceName();
      this.bracedExpression();
    } else if (this.eat("dx")) {
      this.expression();
      this.bracedExpression();
    } else if (this.eat("dX")) {
      this.expression();
      this.expression();
      this.bracedExpression();
    } else this.expression();
  }

  functionParam() {
    if (this.eat("fL")) {
      this.number();
      this.expect("p");
    } else this.expect("fp");
    this.skip(CV);
    this.skip(DIGITS);
    this.expect("_");
  }

  unresolvedName() {
    this.eat("gs");
    if (this.eat("sr")) {
      if (this.eat("N")) {
        this.unresolvedType();
        while (!this.eat("E")) this.simpleId();
      } else if (DIGITS.includes(this.peek())) {
        while (!this.eat("E")) this.simpleId();
      } else this.unresolvedType();
    }
    this.baseUnresolvedName();
  }

  unresolvedType() {
    const c = this.peek();
    if (c === "T") this.templateParam();
    else if (c === "D" && "tT".includes(this.peek(1))) {
      this.decltype();
      return;
    } else if (c === "S") this.substitution();
    else fail();
    if (this.peek() === "I") this.templateArgs();
  }

  simpleId() {
    this.sourceName();
    if (this.peek() === "I") this.templateArgs();
  }

  baseUnresolvedName() {
    if (DIGITS.includes(this.peek())) this.simpleId();
    else if (this.eat("on")) {
      this.operatorName();
      if (this.peek() === "I") this.templateArgs();
    } else if (this.eat("dn")) {
      if (DIGITS.includes(this.peek())) this.simpleId();
      else this.unresolvedType();
    } else fail();
  }
}

const cache = new Map();

/** The innermost function name of `symbol`, or `symbol` itself when it is not a mangled
 * name this can read (`nvjet_sm90_hsh_64x8_...` stays as it is). */
export function shortName(symbol) {
  if (typeof symbol !== "string" || !symbol.startsWith("_Z")) return symbol ?? "";
  let name = cache.get(symbol);
  if (name === undefined) {
    try {
      name = new Parser(symbol).mangledName();
    } catch (err) {
      if (!(err instanceof Unparsable || err instanceof RangeError)) throw err;
      name = symbol;
    }
    if (cache.size > 20000) cache.clear();
    cache.set(symbol, name);
  }
  return name;
}
