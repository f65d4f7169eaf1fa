// Numbers for people: units chosen by size, sensible precision, "—" for what is not known.

export const NONE = "—";

const sig3 = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 3 });
const sig4 = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 4 });
const grouped = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

function known(x) {
  return x !== null && x !== undefined && Number.isFinite(Number(x));
}

/** The unit a time of `ns` nanoseconds reads best in: [name, nanoseconds per unit]. */
export function timeUnit(ns) {
  const a = Math.abs(ns);
  if (a < 1e3) return ["ns", 1];
  if (a < 1e6) return ["µs", 1e3];
  if (a < 1e9) return ["ms", 1e6];
  return ["s", 1e9];
}

/** A duration given in nanoseconds: "5.45 µs", "12.3 ms". */
export function duration(ns, unit = timeUnit(ns)) {
  if (!known(ns)) return NONE;
  return `${sig3.format(ns / unit[1])} ${unit[0]}`;
}

/** A duration to four significant digits, for real and simulated times side by side. */
export function precise(ns) {
  if (!known(ns)) return NONE;
  const [name, scale] = timeUnit(ns);
  return `${sig4.format(ns / scale)} ${name}`;
}

/** A time in milliseconds (TTFT, ITL, e2e), with the unit chosen by size. */
export function ms(value) {
  return known(value) ? precise(value * 1e6) : NONE;
}

/** Wall-clock time elapsed, in milliseconds: "850 ms", "12.3 s", "4m 05s", "2h 03m". */
export function elapsed(millis) {
  if (!known(millis)) return NONE;
  if (millis < 1000) return `${Math.max(0, Math.round(millis))} ms`;
  const s = millis / 1000;
  if (s < 60) return `${sig3.format(s)} s`;
  const whole = Math.floor(s);
  const pad = (n) => String(n).padStart(2, "0");
  if (whole < 3600) return `${Math.floor(whole / 60)}m ${pad(whole % 60)}s`;
  return `${Math.floor(whole / 3600)}h ${pad(Math.floor(whole / 60) % 60)}m`;
}

export function bytes(n) {
  if (!known(n)) return NONE;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${sig3.format(v)} ${units[i]}`;
}

export function integer(n) {
  return known(n) ? grouped.format(n) : NONE;
}

/** "1 kernel", "3 kernels", "10,000 kernels". */
export function counted(n, noun) {
  return `${integer(n)} ${noun}${n === 1 ? "" : "s"}`;
}

/** 26560256 -> "26.6 M". */
export function compact(n) {
  if (!known(n)) return NONE;
  const a = Math.abs(n);
  for (const [limit, suffix] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (a >= limit) return `${sig3.format(n / limit)} ${suffix}`;
  }
  return sig3.format(n);
}

export function rate(ips) {
  return known(ips) ? `${compact(ips)} inst/s` : NONE;
}

/** Instructions per cycle: three significant digits, at most two decimals. */
export function ipc(x) {
  if (!known(x)) return NONE;
  return Math.abs(x) >= 100 ? x.toFixed(1) : sig3.format(x);
}

/** A percentage; `signed` shows "+" on positive errors. */
export function percent(x, { signed = false } = {}) {
  if (!known(x)) return NONE;
  const a = Math.abs(x);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  const text = x.toFixed(digits);
  if (Number(text) === 0) return `${(0).toFixed(digits)} %`; // no "-0.00 %"
  return `${signed && x > 0 ? "+" : ""}${text} %`;
}

/** A stat's value as the simulator would print it, shortened: counts whole and grouped
 * ("26,560,256"), other numbers to four significant digits, tiny ones in e-notation. */
export function number(x) {
  if (!known(x)) return NONE;
  const a = Math.abs(x);
  if (Number.isInteger(x) || a >= 1e4) return grouped.format(x);
  return a < 1e-3 ? x.toExponential(3) : sig4.format(x);
}

export function fixed(x, digits = 3) {
  return known(x) ? Number(x).toFixed(digits) : NONE;
}

/** "just now", "12 s ago", "5 min ago", "3 h ago", "2 d ago", then the date. */
export function age(iso, now = Date.now()) {
  if (!iso) return NONE;
  const s = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${Math.floor(s)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  if (s < 7 * 86400) return `${Math.floor(s / 86400)} d ago`;
  return dateTime(iso).slice(0, 10);
}

/** Local date and time, "2026-11-08 09:59:03". */
export function dateTime(iso) {
  if (!iso) return NONE;
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Axis ticks for [lo, hi]: about `count` round values, in one unit. */
export function ticks(lo, hi, count) {
  const span = hi - lo;
  if (!(span > 0)) return [];
  const raw = span / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) out.push(t);
  return out;
}
